"""CP-SAT model of the LFA for a fixed computing order (DESIGN §3-4), over the candidate
segments of a `SegmentTable`: it picks segments s = (i, j, T), positions i..j-1 of the
order forming one FLG with tiling number T.

Variables (attributes of `SegmentModel`): chosen[s] (segment s is an FLG), dram_cut[k]
(DRAM cut at boundary k), crosses[u,v] (edge u -> v crosses a DRAM cut), stored[u] (u's
ofmap is stored), load_bytes[u,v] (bytes loaded over edge u -> v), load_cycles[u,v]
(DRAM cycles of those loads), store_cycles[u] (DRAM cycles of u's stores),
prefetch_bytes[u,v] (the next FLG's prefetched first-tile load, `buffer` group).

Constraint groups (`Groups`, so a test can drop one and see the exactness check fail):
- `path`:            the chosen segments form a path 0 -> n over boundaries (flow)
- `cut_on_boundary`: dram_cut[k] <= sum of chosen[s] starting at k
- `crossing`:        crosses[u,v] = OR of dram_cut[k], pos(u) < k <= pos(v)
- `store`:           stored[u] = OR of dram_cut[k], pos(u) < k <= last consumer (1 for
                     outputs)
- `load`:            load_bytes[u,v] = sum of chosen[s] * bytes_s(u,v) over s holding v
                     if crosses[u,v], else 0 (load_cycles[u,v] likewise with the loads'
                     DRAM cycles)
- `buffer`:          chosen[s] => each buffer row of s <= capacity (a row: a lower bound
                     on the default DLSA's occupancy at one tile of s, linear in crosses,
                     stored and the next FLG's prefetched loads prefetch_bytes[u,v])
- `head_tail` (off by default; the exact search's relaxation): the ideal raised by
                     head-and-tail terms (`SegmentModel._head_tail`)
- `fit` (off by default; the exact search's relaxation): chosen[s] = 0 when s's
                     fit_floor, the bytes some tile of s holds under every DLSA, exceeds
                     the capacity

DRAM bytes = sum chosen[s] * fixed_s + sum stored[u] * ofmap(u) + sum load_bytes[u,v]:
exactly the bytes of the decoded LFA's tile program. DRAM cycles, the same sum over the
program's DRAM tensors of ceil(bytes / bandwidth) each (one per weight and FLG, per tile
and loaded input, per tile and stored share; store_cycles[u] = the stores' cycles at the
tiling of u's segment), and compute cycles = sum chosen[s] * cycles_s are exact too. So
the "ideal" objective max(compute cycles, DRAM cycles) is exactly the program's ideal.

The buffer rows only relax the fit (they never exclude an LFA that fits; what they miss,
e.g. the previous FLG's stores still live at a segment's first tile, is small); the
search (`search.solve_lfa`) enforces the fit with no-good cuts.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import TYPE_CHECKING

from mipsched.formulations.lfa.segments import (
    Edge,
    Segment,
    SegmentKey,
    SegmentTable,
    Tally,
    crosses,
    flg_keys,
)
from mipsched.formulations.solver import Solution, new_model
from mipsched.schedule.notation import Lfa

if TYPE_CHECKING:
    from mipsched.formulations.solver import IntVar, LinearExpr

#: The model's objectives: "ideal" (max(compute cycles, DRAM cycles)), "energy" (tile
#: energy + DRAM energy) and "edp" (ideal x E_ref / D_ref + energy).
MODEL_OBJECTIVES = ("ideal", "energy", "edp")


@dataclasses.dataclass(frozen=True)
class Groups:
    """Which constraint groups the model holds (see the module docstring). A misspelt
    group fails: `Groups(bufer=False)` and `GROUPS.without("bufer")` raise TypeError."""

    path: bool = True
    cut_on_boundary: bool = True
    crossing: bool = True
    store: bool = True
    load: bool = True
    buffer: bool = True
    head_tail: bool = False
    fit: bool = False

    def without(self, *names: str) -> Groups:
        """These groups with `names` off (TypeError for a name that is no group)."""
        return dataclasses.replace(self, **dict.fromkeys(names, False))

    def names(self) -> tuple[str, ...]:
        """The names of the groups that are on."""
        return tuple(f.name for f in dataclasses.fields(self) if getattr(self, f.name))


#: The groups of the LFA model: all but the exact search's `head_tail` and `fit`.
GROUPS = Groups()


class SegmentModel:
    """The CP-SAT model over a SegmentTable; positions outside [window_start,
    window_stop) are pinned to `fixed` (the incumbent's segments and DRAM cuts)."""

    def __init__(self, table: SegmentTable, objective: str, window_start: int,
                 window_stop: int, fixed: Lfa | None, reference: Tally,
                 groups: Groups = GROUPS, upper: int | None = None) -> None:
        """The model of `table`'s LFAs for `objective` (one of MODEL_OBJECTIVES; "edp"
        is scaled by the `reference` figures). `upper` (cycles): LFAs whose `ideal`
        exceeds it are of no interest and become infeasible; it also caps the horizon and
        with it the domains of `pin_ideal` (huge domains can make CP-SAT's presolve call
        a feasible model infeasible: docs/decisions.md)."""
        self.table = table
        self.objective = objective
        self.model = new_model()
        starting = self._add_path(groups.path)
        self._add_cuts(groups.cut_on_boundary, starting, fixed, window_start, window_stop)
        self._add_crossings(groups.crossing)
        self._add_stores(groups.store)
        cycles_top = self._add_loads(groups.load) + self._add_store_cycles()
        self.prefetch_bytes: dict[Edge, IntVar] = {}
        """Prefetched first-tile load of v from u (v first in its FLG), `buffer` group."""
        if groups.buffer:
            if not table.with_buffer:
                raise ValueError("the buffer group needs a SegmentTable with buffer rows")
            self._buffer()
        self._add_totals()
        self._add_ideal(groups.head_tail, cycles_top, upper)
        self.head_tail_terms: list[tuple[IntVar, LinearExpr]] = []
        """(an FLG starts at k, the head-and-tail bound in cycles) of the group."""
        if groups.head_tail:
            self._head_tail(starting)
        if groups.fit:
            self._fit(starting)
        self._add_objective(objective, reference)

    def _add_path(self, on: bool) -> list[list[IntVar]]:
        """chosen[s] per segment and, with the `path` group, their flow 0 -> n; returns
        the literals of the segments starting at each boundary."""
        table, m = self.table, self.model
        n = len(table.order)
        self.chosen: dict[SegmentKey, IntVar] = {key: m.new_bool_var(f"x{key}")
                                                 for key in table.segments}
        starting: list[list[IntVar]] = [[] for _ in range(n + 1)]
        ending: list[list[IntVar]] = [[] for _ in range(n + 1)]
        for (a, b, _), var in self.chosen.items():
            starting[a].append(var)
            ending[b].append(var)
        if on:
            m.add(sum(starting[0]) == 1)
            m.add(sum(ending[n]) == 1)
            for k in range(1, n):
                m.add(sum(starting[k]) == sum(ending[k]))
        return starting

    def _add_cuts(self, on: bool, starting: list[list[IntVar]], fixed: Lfa | None,
                  window_start: int, window_stop: int) -> None:
        """dram_cut[k] per boundary; with `cut_on_boundary` only where an FLG starts;
        outside the window, the cuts of `fixed`."""
        m = self.model
        self.dram_cut: dict[int, IntVar] = {k: m.new_bool_var(f"d{k}")
                                            for k in range(1, len(self.table.order))}
        if on:
            for k, var in self.dram_cut.items():
                m.add(var <= sum(starting[k]))
        if fixed is not None:
            cuts = set(fixed.dram_cuts)
            for k, var in self.dram_cut.items():
                if k <= window_start or k >= window_stop:
                    m.add(var == int(k in cuts))

    def _any_cut(self, lo: int, hi: int, name: str) -> IntVar:
        """A literal equal to OR of dram_cut[k], lo < k <= hi (constant 0 when empty)."""
        ds = [self.dram_cut[k] for k in range(lo + 1, hi + 1)]
        var = self.model.new_bool_var(name)
        if ds:
            self.model.add_max_equality(var, ds)
        else:
            self.model.add(var == 0)
        return var

    def _add_crossings(self, on: bool) -> None:
        """crosses[(u, v)] per edge; with `crossing`, the OR of the cuts from u to v."""
        table = self.table
        pos = table.pos
        if on:
            self.crosses: dict[Edge, IntVar] = {
                (u, v): self._any_cut(pos[u], pos[v], f"c_{u}_{v}") for u, v in table.edges}
        else:
            self.crosses = {e: self.model.new_bool_var(f"c_{e[0]}_{e[1]}")
                            for e in table.edges}

    def _add_stores(self, on: bool) -> None:
        """stored[u] per layer that is no network output; with `store`, the OR of the
        cuts from u to its last consumer."""
        table = self.table
        outputs = set(table.lowerer.workload.outputs)
        self.stored: dict[str, IntVar] = {}
        for u in table.order:
            if u in outputs:
                continue
            if on:
                self.stored[u] = self._any_cut(table.pos[u], table.last_use[u], f"st_{u}")
            else:
                self.stored[u] = self.model.new_bool_var(f"st_{u}")

    def _add_loads(self, on: bool) -> int:
        """load_bytes and load_cycles per edge; with `load`, those of the chosen segment
        holding its consumer if the edge crosses a cut, else 0. Returns the most DRAM
        cycles all loads can take (cycles)."""
        table, m = self.table, self.model
        holding: dict[Edge, list[tuple[IntVar, int, int]]] = {e: [] for e in table.edges}
        for key, seg in table.segments.items():
            for e, size in seg.loads.items():
                holding[e].append((self.chosen[key], size, seg.load_cycles[e]))
        self.load_bytes: dict[Edge, IntVar] = {}
        self.load_cycles: dict[Edge, IntVar] = {}
        cycles_top = 0
        for e, terms in holding.items():
            top = max((size for _, size, _ in terms), default=0)
            ctop = max((cyc for _, _, cyc in terms), default=0)
            cycles_top += ctop
            var = self.load_bytes[e] = m.new_int_var(0, top, f"t_{e[0]}_{e[1]}")
            cvar = self.load_cycles[e] = m.new_int_var(0, ctop, f"tc_{e[0]}_{e[1]}")
            if on:
                crossing = self.crosses[e]
                m.add(var == sum(x * size for x, size, _ in terms)).only_enforce_if(crossing)
                m.add(var == 0).only_enforce_if(crossing.negated())
                m.add(cvar == sum(x * cyc for x, _, cyc in terms)).only_enforce_if(crossing)
                m.add(cvar == 0).only_enforce_if(crossing.negated())
        return cycles_top

    def _add_store_cycles(self) -> int:
        """store_cycles[u]: the DRAM cycles of u's stores at the tiling of its segment
        when u is stored (a network output always is), else 0. Returns the most DRAM
        cycles all stores can take (cycles)."""
        table, m = self.table, self.model
        holding: dict[str, list[tuple[IntVar, int]]] = {u: [] for u in table.order}
        for key, seg in table.segments.items():
            for u, cyc in seg.store_cycles.items():
                holding[u].append((self.chosen[key], cyc))
        self.store_cycles: dict[str, IntVar] = {}
        cycles_top = 0
        for u, terms in holding.items():
            ctop = max((cyc for _, cyc in terms), default=0)
            cycles_top += ctop
            var = self.store_cycles[u] = m.new_int_var(0, ctop, f"sc_{u}")
            made = sum(x * cyc for x, cyc in terms)
            if u in self.stored:
                m.add(var == made).only_enforce_if(self.stored[u])
                m.add(var == 0).only_enforce_if(self.stored[u].negated())
            else:  # a network output, always stored
                m.add(var == made)
        return cycles_top

    def _add_totals(self) -> None:
        """The LFA's compute cycles, DRAM bytes and DRAM cycles (linear expressions)."""
        table = self.table
        segs = table.segments.items()
        self.compute_cycles: LinearExpr = sum(seg.compute_cycles * self.chosen[key]
                                              for key, seg in segs)
        self.dram_bytes: LinearExpr = (
            sum(seg.fixed_bytes * self.chosen[key] for key, seg in segs)
            + table.output_bytes + sum(table.ofmap[u] * var for u, var in self.stored.items())
            + sum(self.load_bytes.values()))
        self.dram_cycles: LinearExpr = (
            sum(seg.fixed_cycles * self.chosen[key] for key, seg in segs)
            + sum(self.store_cycles.values()) + sum(self.load_cycles.values()))
        """The sum of ceil(bytes / bandwidth) over the DRAM tensors."""

    def _add_ideal(self, head_tail: bool, cycles_top: int, upper: int | None) -> None:
        """`ideal` >= compute cycles and DRAM cycles, with the horizon (cycles) no LFA's
        ideal reaches (`cycles_top`: the most DRAM cycles of loads and stores)."""
        table, m = self.table, self.model
        most: dict[int, tuple[int, int]] = {}  # per start: max compute, max fixed cycles
        for (a, _, _), seg in table.segments.items():
            c0, f0 = most.get(a, (0, 0))
            most[a] = (max(c0, seg.compute_cycles), max(f0, seg.fixed_cycles))
        cycles_top += sum(f for _, f in most.values())
        horizon = max(sum(c for c, _ in most.values()), cycles_top)
        if head_tail:
            # every head-and-tail bound is at most (DRAM cycles before) + (a head of one
            # FLG) + (compute from there on) + (a tail of another FLG): a horizon below
            # that would make the LFAs whose bound exceeds it infeasible, and the least
            # bound over the rest no bound at all
            segs = table.segments.values()
            heads = max((s.head_gain for s in segs), default=0)
            tails = max((s.tail_gain for s in segs), default=0)
            horizon = sum(c for c, _ in most.values()) + cycles_top + heads + tails
        self.horizon = horizon if upper is None else min(horizon, upper)
        """No LFA's ideal reaches it (cycles), or `upper` if less."""
        self.ideal = m.new_int_var(0, horizon, "ideal")
        m.add(self.ideal >= self.compute_cycles)
        m.add(self.ideal >= self.dram_cycles)

    def _add_objective(self, objective: str, reference: Tally) -> None:
        """Minimises `cost` for `objective`; sets the "ideal" objective's tie-break."""
        table, m = self.table, self.model
        hw = table.lowerer.hw
        per_byte = Fraction(hw.dram.energy_pj_per_byte).limit_denominator(1000)
        self.per_byte = per_byte
        """DRAM pJ per byte as a fraction: energy is counted in 1 / denominator pJ."""
        energy = (sum(self._energy_units(seg) * self.chosen[key]
                      for key, seg in table.segments.items())
                  + per_byte.numerator * self.dram_bytes)
        if objective == "ideal":
            self.cost = self.ideal
        elif objective == "energy":
            self.cost = energy
        else:
            self.alpha = max(1, round(reference.energy_pj * per_byte.denominator
                                      / max(1, reference.ideal)))
            self.cost = self.alpha * self.ideal + energy
        m.minimize(self.cost)
        self.tie = self.compute_cycles * hw.dram.bytes_per_cycle + self.dram_bytes
        """Tie-break of the "ideal" objective (bytes): compute x bandwidth + DRAM bytes."""

    def _head_tail(self, starting: list[list[IntVar]]) -> None:
        """The `head_tail` group (off by default; the exact search's relaxation), after
        bounds.program_bound: latency >= loads first used by tiles 0..p + cycles of tiles
        p..r + stores made by tiles r..end, as DRAM serves one transfer at a time from
        time 0, a tile starts after its loads and a store after its tile. For every FLG
        start k, with before = DRAM cycles of the loads first used before k, and p in the
        FLG at k:
        - r in the last FLG, when the FLG at k is not the last one:
          before + its head_gain + (cycles from k on) + the last FLG's tail_gain;
        - r in the FLG at k, when it is the last one: before + its own_bound.
        Only the loads and stores every LFA with these FLGs makes are counted (weights,
        network inputs and outputs); those that depend on the DRAM cuts may only add.
        With it, `ideal` is the largest of these bounds and of the ideal."""
        table, m = self.table, self.model
        pos = table.pos
        n = len(table.order)
        segs = table.segments
        tail = sum(seg.tail_gain * self.chosen[key] for key, seg in segs.items()
                   if key[1] == n)
        for k in range(n):
            if not starting[k]:
                continue
            before = (sum(seg.fixed_cycles * self.chosen[key] for key, seg in segs.items()
                          if key[1] <= k)
                      + sum(var for (u, v), var in self.load_cycles.items() if pos[v] < k))
            at_k = [(self.chosen[key], seg) for key, seg in segs.items() if key[0] == k]
            head = sum(seg.head_gain * x for x, seg in at_k if seg.stop < n)
            own = sum(seg.own_bound * x for x, seg in at_k if seg.stop == n)
            after = sum(seg.compute_cycles * self.chosen[key] for key, seg in segs.items()
                        if key[0] >= k)
            not_last = m.new_bool_var(f"flg_starts_{k}_not_last")
            m.add(not_last == sum(x for x, seg in at_k if seg.stop < n))
            last = m.new_bool_var(f"flg_starts_{k}_last")
            m.add(last == sum(x for x, seg in at_k if seg.stop == n))
            for literal, bound in ((not_last, before + head + after + tail),
                                   (last, before + own)):
                m.add(self.ideal >= bound).only_enforce_if(literal)
                self.head_tail_terms.append((literal, bound))

    def _fit(self, starting: list[list[IntVar]]) -> None:
        """The `fit` group: conditions every DLSA of an LFA that fits meets. A segment
        whose fit_floor exceeds the buffer is not chosen; and where u's whole ofmap plus
        the weights of its consumer v exceed it, u and v lie in one FLG or u -> v crosses
        a DRAM cut (else u's ofmap is aggregated on chip, all of it live at v's first
        tile, with v's weights)."""
        table, m = self.table, self.model
        wl = table.lowerer.workload
        cap = table.lowerer.hw.gbuf.capacity_bytes
        for key, seg in table.segments.items():
            if seg.fit_floor > cap:
                m.add(self.chosen[key] == 0)
        for u, v in table.edges:
            if table.ofmap[u] + wl.weight_bytes(v) <= cap:
                continue
            for k in range(table.pos[u] + 1, table.pos[v] + 1):
                m.add(sum(starting[k]) <= self.crosses[(u, v)])

    def pin_ideal(self) -> None:
        """Makes `ideal` (cycles) equal to the largest of its lower bounds, not just at
        least it, so that every LFA has one value and LFAs can be enumerated one by one."""
        m = self.model
        top = self.horizon

        def term(expr: LinearExpr, name: str, when: IntVar | None = None) -> IntVar:
            var = m.new_int_var(-top, top, name)
            if when is None:
                m.add(var == expr)
            else:
                m.add(var == expr).only_enforce_if(when)
                m.add(var == 0).only_enforce_if(when.negated())
            return var

        terms = [term(self.compute_cycles, "compute"), term(self.dram_cycles, "dram_cycles")]
        terms += [term(bound, f"head_tail_{k}", here)
                  for k, (here, bound) in enumerate(self.head_tail_terms)]
        m.add_max_equality(self.ideal, terms)

    def _buffer(self) -> None:
        """The `buffer` group: every row of a chosen segment within the capacity; the
        row at a segment's last tile also holds the next FLG's prefetched first-tile
        loads (prefetch_bytes[u, v] = its load from u if u -> v crosses a cut, v the
        FLG's first layer)."""
        table, m = self.table, self.model
        cap = table.lowerer.hw.gbuf.capacity_bytes
        wl = table.lowerer.workload
        by_start: dict[int, list[tuple[SegmentKey, Segment]]] = {}
        for key, seg in table.segments.items():
            by_start.setdefault(key[0], []).append((key, seg))
        prefetch, prefetch_top = {}, {}
        for k in range(1, len(table.order)):
            v = table.order[k]
            segs = by_start.get(k, [])
            expr = sum(self.chosen[key] * seg.first_fixed for key, seg in segs)
            prefetch_top[k] = max((seg.first_fixed + sum(seg.first_loads.values())
                                   for _, seg in segs), default=0)
            for u in dict.fromkeys(wl.layers[v].inputs):
                if u not in wl.layers:
                    continue
                top = max((seg.first_loads.get(u, 0) for _, seg in segs), default=0)
                pf = self.prefetch_bytes[(u, v)] = m.new_int_var(0, top, f"pf_{u}_{v}")
                m.add(pf == sum(self.chosen[key] * seg.first_loads.get(u, 0)
                                for key, seg in segs)).only_enforce_if(self.crosses[(u, v)])
                m.add(pf == 0).only_enforce_if(self.crosses[(u, v)].negated())
                expr += pf
            prefetch[k] = expr
        for key, seg in table.segments.items():
            if seg.floor > cap:
                m.add(self.chosen[key] == 0)
                continue
            for row in seg.rows:
                top = (row.const + sum(max(a1, a0) for _, a1, a0 in row.edges)
                       + sum(size for _, size in row.stores)
                       + (prefetch_top[key[1]] if row.prefetch else 0))
                if top <= cap:
                    continue
                used = (row.const
                        + sum(a0 + (a1 - a0) * self.crosses[e] for e, a1, a0 in row.edges)
                        + sum(size * self.stored[u] for u, size in row.stores))
                if row.prefetch:
                    used += prefetch[key[1]]
                m.add(used <= cap).only_enforce_if(self.chosen[key])

    def _energy_units(self, seg: Segment) -> int:
        """Tile energy of a segment in the energy unit, 1 / per_byte.denominator pJ."""
        return round(seg.energy_pj * self.per_byte.denominator)

    def rank(self, lfa: Lfa) -> tuple[int, int]:
        """(objective, tie-break) the model gives `lfa` (model units: cycles, or energy
        in 1 / per_byte.denominator pJ; the tie-break in bytes)."""
        table = self.table
        tally = table.tally(lfa)
        bpc = table.lowerer.hw.dram.bytes_per_cycle
        ideal = tally.ideal
        energy = (sum(self._energy_units(table.segments[key]) for key in flg_keys(lfa))
                  + self.per_byte.numerator * tally.dram_bytes)
        if self.objective == "ideal":
            return ideal, tally.compute_cycles * bpc + tally.dram_bytes
        if self.objective == "energy":
            return energy, 0
        return self.alpha * ideal + energy, 0

    def tie_break(self, lfa: Lfa, ideal: int) -> None:
        """Second phase of the "ideal" objective: keep the ideal at most `ideal` (cycles,
        that of `lfa`) and minimise compute x bandwidth + DRAM bytes (both resources'
        total use), hinted with `lfa`."""
        self.model.add(self.ideal <= ideal)
        self.model.minimize(self.tie)
        self.model.clear_hints()
        self.hint(lfa)

    def hint(self, lfa: Lfa) -> None:
        """Hints every variable with `lfa` (its FLGs must be candidates)."""
        table, m = self.table, self.model
        chosen = set(flg_keys(lfa))
        for key, var in self.chosen.items():
            m.add_hint(var, key in chosen)
        cuts = sorted(lfa.dram_cuts)
        for k, var in self.dram_cut.items():
            m.add_hint(var, k in lfa.dram_cuts)
        seg_of = {p: table.segments[key] for key in chosen for p in range(key[0], key[1])}
        pos = table.pos
        for (u, v), var in self.crosses.items():
            crossing = crosses(cuts, pos[u], pos[v])
            m.add_hint(var, crossing)
            m.add_hint(self.load_bytes[(u, v)],
                       seg_of[pos[v]].loads.get((u, v), 0) if crossing else 0)
            m.add_hint(self.load_cycles[(u, v)],
                       seg_of[pos[v]].load_cycles.get((u, v), 0) if crossing else 0)
        for u, var in self.stored.items():
            m.add_hint(var, crosses(cuts, pos[u], table.last_use[u]))
        for u, var in self.store_cycles.items():
            stored = u not in self.stored or crosses(cuts, pos[u], table.last_use[u])
            m.add_hint(var, seg_of[pos[u]].store_cycles[u] if stored else 0)
        for (u, v), var in self.prefetch_bytes.items():
            first = seg_of[pos[v]] if seg_of[pos[v]].start == pos[v] else None
            m.add_hint(var, first.first_loads.get(u, 0)
                       if first is not None and crosses(cuts, pos[u], pos[v]) else 0)
        m.add_hint(self.ideal, table.tally(lfa).ideal)

    def decode(self, solution: Solution) -> tuple[Lfa, list[SegmentKey]]:
        """The LFA of a solution, and the keys of its segments in order."""
        keys = sorted(key for key, var in self.chosen.items() if solution.boolean(var))
        flc = tuple(a for a, _, _ in keys[1:])
        cuts = tuple(k for k in flc if solution.boolean(self.dram_cut[k]))
        return Lfa(self.table.order, flc, tuple(t for _, _, t in keys), cuts), keys

    def exclude(self, literals: list[IntVar]) -> None:
        """No-good: at least one of `literals` must be true."""
        self.model.add_bool_or(literals)
