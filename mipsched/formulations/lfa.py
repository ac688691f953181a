"""CP-SAT model of the LFA for a fixed computing order (DESIGN §3-4, issue 5 item 3).

The model picks *segments* s = (i, j, T): positions i..j-1 of the order form one FLG with
tiling number T. Every candidate is precomputed from the lowering's FLG plan: compute
cycles, tile energy, the DRAM bytes fixed by the segment alone (its weights, once per FLG,
and its tiles' loads of network inputs), the bytes its tiles would load over each in-edge
u -> v if that edge went through DRAM (sum of the regions v's tiles read from u, halo
included), and a buffer lower bound (see `_buffer_need`).

Variables: x[s] (segment chosen), d[k] (DRAM cut at boundary k), c[u,v] (edge crosses a
DRAM cut), st[u] (u is stored), t[u,v] (bytes loaded over edge u -> v).

Constraint groups (named, so a test can drop one and see the exactness check fail):
- `path`:            the chosen segments form a path 0 -> n over boundaries (flow)
- `cut_on_boundary`: d[k] <= sum of x[s] starting at k
- `crossing`:        c[u,v] = OR of d[k], pos(u) < k <= pos(v)
- `store`:           st[u] = OR of d[k], pos(u) < k <= last consumer (1 for outputs)
- `load`:            t[u,v] = sum of x[s] * bytes_s(u,v) over s holding v if c[u,v], else 0
- `buffer`:          x[s] => need_s + sum of ofmaps that stay on chip across s <= capacity

DRAM bytes = sum x[s] * fixed_s + sum st[u] * ofmap(u) + sum t[u,v]: exactly the bytes of
the decoded LFA's tile program. Compute cycles = sum x[s] * cycles_s, also exact.

The buffer group is a relaxation (a lower bound on every DLSA's peak); what it misses
(aggregation of ofmaps read inside a segment, prefetch of neighbours, double buffering)
is handled lazily: a decoded LFA that does not fit under the default DLSA gets no-good
cuts (one per overflowing LG, see `_no_goods`) and the model is solved again.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from mipsched.evaluate import buffer_profile, evaluate
from mipsched.formulations.solver import CpModel, SolveStatus, solve
from mipsched.heuristics.common import Candidate
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa, ScheduleError
from mipsched.schedule.tile_program import TileProgram
from mipsched.schedule.tiling import FlgTiles
from mipsched.schedule.validity import check_lfa
from mipsched.workload.graph import Workload

GROUPS = frozenset({"path", "cut_on_boundary", "crossing", "store", "load", "buffer"})
OBJECTIVES = ("ideal", "energy", "edp")
TILINGS = (1, 2, 4, 8, 16, 32, 64)

Edge = tuple[str, str]


@dataclass(frozen=True)
class Segment:
    """One candidate FLG: positions start..stop-1 of the order with tiling number T."""

    start: int
    stop: int
    tiling: int
    compute_cycles: int
    energy_pj: float
    """Sum of the tile energies (pJ), DRAM excluded."""
    fixed_bytes: int
    """DRAM bytes the segment causes whatever the cuts: weights, network-input loads."""
    loads: dict[Edge, int]
    """Bytes the segment's tiles load over in-edge (u, v) if it goes through DRAM."""
    need: int
    """Buffer bytes any schedule holds at some tile of the segment (lower bound)."""


@dataclass(frozen=True)
class Tally:
    """The model's figures of one LFA (units: cycles, bytes, pJ)."""

    compute_cycles: int
    dram_bytes: int
    energy_pj: float

    def ideal(self, bytes_per_cycle: int) -> int:
        """max(compute, ceil(DRAM bytes / bandwidth)): the DLSA-independent ideal."""
        return max(self.compute_cycles, -(-self.dram_bytes // bytes_per_cycle))


@dataclass(frozen=True)
class LfaSolution:
    """The best LFA found (None when nothing that fits was found) and how."""

    lfa: Lfa | None
    candidate: Candidate | None
    """`lfa` lowered and evaluated with the default DLSA (it fits the buffer)."""
    model_ideal: int | None
    """The model's ideal of `lfa` (cycles): max(compute, ceil(DRAM bytes / bandwidth))."""
    model_dram_bytes: int | None
    model_compute_cycles: int | None
    status: SolveStatus | None
    """Status of the last CP-SAT run (None when none ran)."""
    rounds: int
    """No-good rounds: CP-SAT runs after the first one."""
    improved: bool
    """Whether the model's LFA beats the incumbent (False: `lfa` is the incumbent)."""
    window: tuple[int, int]
    """Positions [w0, w1) of the order the model was free to change."""
    segments: int
    """Number of candidate segments in the model."""


class SegmentTable:
    """Candidate segments of one order, with everything the model needs about them."""

    def __init__(self, lowerer: Lowerer, order: tuple[str, ...],
                 keys: Iterable[tuple[int, int, int]]) -> None:
        self.lowerer = lowerer
        self.order = order
        wl = lowerer.workload
        self.pos = {n: p for p, n in enumerate(order)}
        self.edges: list[Edge] = [(u, v) for v in order for u in dict.fromkeys(
            wl.layers[v].inputs) if u in wl.layers]
        self.ofmap = {n: wl.ofmap_bytes(n) for n in order}
        self.last_use = {n: max((self.pos[v] for v in wl.consumers(n)), default=-1)
                         for n in order}
        self.output_bytes = sum(self.ofmap[n] for n in wl.outputs)
        self.segments: dict[tuple[int, int, int], Segment] = {}
        for key in keys:
            if key not in self.segments:
                seg = self._segment(*key)
                if seg is not None:
                    self.segments[key] = seg

    def _segment(self, start: int, stop: int, tiling: int) -> Segment | None:
        wl = self.lowerer.workload
        layers = self.order[start:stop]
        try:
            plan = self.lowerer.plan(layers, tiling)
        except ScheduleError:
            return None
        eb = wl.elem_bytes
        cycles = sum(c.cycles for n in layers for c in plan.costs[n] if c is not None)
        energy = sum(c.energy_pj for n in layers for c in plan.costs[n] if c is not None)
        fixed = sum(wl.weight_bytes(n) for n in layers if wl.layers[n].has_weights)
        loads: dict[Edge, int] = {}
        members = set(layers)
        for v in layers:
            for regions in plan.tiles.reads[v]:
                for src, region in zip(wl.layers[v].inputs, regions, strict=True):
                    if region is None or src in members:
                        continue
                    size = region.elems(wl.shape_of(src).c) * eb
                    if src in wl.layers:
                        loads[(src, v)] = loads.get((src, v), 0) + size
                    else:
                        fixed += size
        return Segment(start, stop, tiling, cycles, energy, fixed, loads,
                       _buffer_need(wl, layers, plan.tiles))

    def spanning(self, seg: Segment) -> list[Edge]:
        """(u, v): u before the segment, not read by it, whose ofmap stays on chip across
        the whole segment unless the edge to v (its first consumer after the segment)
        crosses a DRAM cut."""
        wl = self.lowerer.workload
        out = []
        for u in self.order[:seg.start]:
            if self.last_use[u] < seg.stop:
                continue
            users = [self.pos[v] for v in wl.consumers(u)]
            if any(seg.start <= p < seg.stop for p in users):
                continue
            first = min(p for p in users if p >= seg.stop)
            out.append((u, self.order[first]))
        return out

    def tally(self, lfa: Lfa) -> Tally:
        """Compute cycles, DRAM bytes and energy of `lfa` (same order) by the model's
        accounting; raises KeyError when one of its FLGs is not a candidate."""
        segs = [self.segments[(a, b, t)] for (a, b), t in zip(lfa.flg_bounds(), lfa.tiling,
                                                             strict=True)]
        seg_of = {p: s for s in segs for p in range(s.start, s.stop)}
        cuts = sorted(lfa.dram_cuts)
        dram = sum(s.fixed_bytes for s in segs) + self.output_bytes
        outputs = set(self.lowerer.workload.outputs)
        for u in self.order:
            if u not in outputs and _crosses(cuts, self.pos[u], self.last_use[u]):
                dram += self.ofmap[u]
        for u, v in self.edges:
            if _crosses(cuts, self.pos[u], self.pos[v]):
                dram += seg_of[self.pos[v]].loads.get((u, v), 0)
        return Tally(sum(s.compute_cycles for s in segs), dram,
                     sum(s.energy_pj for s in segs)
                     + dram * self.lowerer.hw.dram.energy_pj_per_byte)


def _crosses(cuts: list[int], lo: int, hi: int) -> bool:
    """Whether a cut k lies in lo < k <= hi."""
    return any(lo < k <= hi for k in cuts)


def _buffer_need(wl: Workload, layers: tuple[str, ...], tiles: FlgTiles) -> int:
    """A lower bound (bytes) on the buffer occupancy of some tile of this FLG, valid in
    every LFA containing it and under every DLSA: at the tile of layer n with index i,
    - the FLG-internal ofmap regions held on chip then (as lowering holds them),
    - the weights of the FLG's layers whose first..last tile spans it (a weight is
      loaded by its first tile and freed after its last),
    - per input of n from outside the FLG, the region the tile reads (a live load, or
      inside the LG the producer's whole aggregated ofmap, which is at least as big),
    - n's share of its ofmap when no layer of the FLG reads it (a live store or an
      aggregated share from this tile on).
    Not counted: ofmaps aggregated from earlier FLGs (partly added by the model, see
    `SegmentTable.spanning`), prefetched and double-buffered transfers, stores delayed
    past their tile."""
    eb = wl.elem_bytes
    members = set(layers)
    count = tiles.grid.count
    n_local = count * len(layers)
    local = {n: [i * len(layers) + k for i in range(count)] for k, n in enumerate(layers)}
    diff = [0] * (n_local + 1)

    def hold(size: int, first: int, last: int) -> None:
        diff[first] += size
        diff[last + 1] -= size

    for n in layers:
        layer = wl.layers[n]
        inside = [v for v in wl.consumers(n) if v in members]
        if layer.has_weights:
            hold(wl.weight_bytes(n), local[n][0], local[n][-1])
        for i, q in enumerate(local[n]):
            region = tiles.produced[n][i]
            if inside and region is not None:
                hold(region.elems(layer.out.c) * eb, q, max(local[v][i] for v in inside))
            if not inside:
                hold(tiles.share[n][i].elems(layer.out.c) * eb, q, q)
            reads: dict[str, int] = {}
            for src, r in zip(layer.inputs, tiles.reads[n][i], strict=True):
                if r is not None and src not in members:
                    reads[src] = max(reads.get(src, 0), r.elems(wl.shape_of(src).c) * eb)
            hold(sum(reads.values()), q, q)
    best = running = 0
    for q in range(n_local):
        running += diff[q]
        best = max(best, running)
    return best


class _Model:
    """The CP-SAT model over a SegmentTable; positions outside [w0, w1) are pinned to
    `fixed` (the incumbent's segments and DRAM cuts)."""

    def __init__(self, table: SegmentTable, objective: str, w0: int, w1: int,
                 fixed: Lfa | None, reference: Tally,
                 groups: frozenset[str] = GROUPS) -> None:
        self.table = table
        lowerer = table.lowerer
        wl, hw = lowerer.workload, lowerer.hw
        order, pos = table.order, table.pos
        n = len(order)
        self.model = m = CpModel()
        self.x = {key: m.new_bool_var(f"x{key}") for key in table.segments}
        starting: list[list] = [[] for _ in range(n + 1)]
        ending: list[list] = [[] for _ in range(n + 1)]
        for (a, b, _), var in self.x.items():
            starting[a].append(var)
            ending[b].append(var)
        if "path" in groups:
            m.add(sum(starting[0]) == 1)
            m.add(sum(ending[n]) == 1)
            for k in range(1, n):
                m.add(sum(starting[k]) == sum(ending[k]))
        self.d = {k: m.new_bool_var(f"d{k}") for k in range(1, n)}
        if "cut_on_boundary" in groups:
            for k, var in self.d.items():
                m.add(var <= sum(starting[k]))
        if fixed is not None:
            cuts = set(fixed.dram_cuts)
            for k, var in self.d.items():
                if k <= w0 or k >= w1:
                    m.add(var == int(k in cuts))

        def any_cut(lo: int, hi: int, name: str):
            """A literal equal to OR of d[k], lo < k <= hi (constant 0 when empty)."""
            ds = [self.d[k] for k in range(lo + 1, hi + 1)]
            var = m.new_bool_var(name)
            if ds:
                m.add_max_equality(var, ds)
            else:
                m.add(var == 0)
            return var

        self.c = {}
        if "crossing" in groups:
            for u, v in table.edges:
                self.c[(u, v)] = any_cut(pos[u], pos[v], f"c_{u}_{v}")
        else:
            self.c = {e: m.new_bool_var(f"c_{e[0]}_{e[1]}") for e in table.edges}
        outputs = set(wl.outputs)
        self.st = {}
        for u in order:
            if u in outputs:
                continue
            if "store" in groups:
                self.st[u] = any_cut(pos[u], table.last_use[u], f"st_{u}")
            else:
                self.st[u] = m.new_bool_var(f"st_{u}")
        holding: dict[Edge, list[tuple[object, int]]] = {e: [] for e in table.edges}
        for key, seg in table.segments.items():
            for e, size in seg.loads.items():
                holding[e].append((self.x[key], size))
        self.t = {}
        dram_top = table.output_bytes + sum(table.ofmap.values())
        for e, terms in holding.items():
            top = max((size for _, size in terms), default=0)
            dram_top += top
            var = self.t[e] = m.new_int_var(0, top, f"t_{e[0]}_{e[1]}")
            if "load" in groups:
                m.add(var == sum(x * size for x, size in terms)).only_enforce_if(self.c[e])
                m.add(var == 0).only_enforce_if(self.c[e].negated())
        if "buffer" in groups:
            cap = hw.gbuf.capacity_bytes
            for key, seg in table.segments.items():
                if seg.need > cap:
                    m.add(self.x[key] == 0)
                    continue
                span = [(e, table.ofmap[e[0]]) for e in table.spanning(seg)]
                if span and seg.need + sum(size for _, size in span) > cap:
                    m.add(seg.need + sum(size * (1 - self.c[e]) for e, size in span)
                          <= cap).only_enforce_if(self.x[key])
        bpc = hw.dram.bytes_per_cycle
        self.compute = sum(seg.compute_cycles * self.x[key]
                           for key, seg in table.segments.items())
        self.dram = (sum(seg.fixed_bytes * self.x[key] for key, seg in table.segments.items())
                     + table.output_bytes + sum(table.ofmap[u] * var
                                                for u, var in self.st.items())
                     + sum(self.t.values()))
        most: dict[int, tuple[int, int]] = {}  # per start: max compute, max fixed bytes
        for (a, _, _), seg in table.segments.items():
            c0, f0 = most.get(a, (0, 0))
            most[a] = (max(c0, seg.compute_cycles), max(f0, seg.fixed_bytes))
        dram_top += sum(f for _, f in most.values())
        horizon = max(sum(c for c, _ in most.values()), -(-dram_top // bpc))
        self.ideal = m.new_int_var(0, horizon, "ideal")
        m.add(self.ideal >= self.compute)
        m.add(self.ideal * bpc >= self.dram)
        per_byte = Fraction(hw.dram.energy_pj_per_byte).limit_denominator(1000)
        self.per_byte = per_byte
        energy = (sum(self._energy_units(seg) * self.x[key]
                      for key, seg in table.segments.items())
                  + per_byte.numerator * self.dram)
        self.objective = objective
        if objective == "ideal":
            self.cost = self.ideal
        elif objective == "energy":
            self.cost = energy
        else:
            self.alpha = max(1, round(reference.energy_pj * per_byte.denominator
                                      / max(1, reference.ideal(bpc))))
            self.cost = self.alpha * self.ideal + energy
        m.minimize(self.cost)

    def _energy_units(self, seg: Segment) -> int:
        """Tile energy of a segment in the energy unit, 1 / per_byte.denominator pJ."""
        return round(seg.energy_pj * self.per_byte.denominator)

    def score(self, lfa: Lfa) -> int:
        """The objective value the model gives `lfa` (model units)."""
        table = self.table
        tally = table.tally(lfa)
        ideal = tally.ideal(table.lowerer.hw.dram.bytes_per_cycle)
        energy = (sum(self._energy_units(table.segments[key]) for key in _keys(lfa))
                  + self.per_byte.numerator * tally.dram_bytes)
        if self.objective == "ideal":
            return ideal
        if self.objective == "energy":
            return energy
        return self.alpha * ideal + energy

    def hint(self, lfa: Lfa) -> None:
        """Hints x, d, c, st, t and the ideal with `lfa` (its FLGs must be candidates)."""
        table, m = self.table, self.model
        chosen = set(_keys(lfa))
        for key, var in self.x.items():
            m.add_hint(var, key in chosen)
        cuts = sorted(lfa.dram_cuts)
        for k, var in self.d.items():
            m.add_hint(var, k in lfa.dram_cuts)
        seg_of = {p: table.segments[key] for key in chosen for p in range(key[0], key[1])}
        pos = table.pos
        for (u, v), var in self.c.items():
            crossing = _crosses(cuts, pos[u], pos[v])
            m.add_hint(var, crossing)
            m.add_hint(self.t[(u, v)],
                       seg_of[pos[v]].loads.get((u, v), 0) if crossing else 0)
        for u, var in self.st.items():
            m.add_hint(var, _crosses(cuts, pos[u], table.last_use[u]))
        m.add_hint(self.ideal, table.tally(lfa).ideal(table.lowerer.hw.dram.bytes_per_cycle))

    def decode(self, solution) -> tuple[Lfa, list[tuple[int, int, int]]]:
        keys = sorted(key for key, var in self.x.items() if solution.boolean(var))
        flc = tuple(a for a, _, _ in keys[1:])
        cuts = tuple(k for k in flc if solution.boolean(self.d[k]))
        return Lfa(self.table.order, flc, tuple(t for _, _, t in keys), cuts), keys

    def exclude(self, literals: list) -> None:
        """No-good: at least one of `literals` must be true."""
        self.model.add_bool_or(literals)


def _keys(lfa: Lfa) -> list[tuple[int, int, int]]:
    return [(a, b, t) for (a, b), t in zip(lfa.flg_bounds(), lfa.tiling, strict=True)]


def _no_goods(model: _Model, lfa: Lfa, keys: list[tuple[int, int, int]],
              program: TileProgram | None) -> list[list]:
    """No-good clauses for an LFA that does not fit under the default DLSA. The default
    DLSA's occupancy at a tile depends only on the tile's LG (its FLGs, tilings and that
    it is delimited by DRAM cuts) and, at the LG's last tile, on the next FLG (prefetch of
    its first tile's loads and first weight); so each overflowing LG excludes every LFA
    containing that same LG (and next FLG). Without a program (the LFA did not lower),
    the exact set of segments and cuts is excluded."""
    n = len(lfa.order)
    x, d = model.x, model.d
    if program is None:
        return [[x[k].negated() for k in keys] + [d[k].negated() for k in lfa.dram_cuts]
                + [d[k] for k in lfa.flc if k not in lfa.dram_cuts]]
    occupancy = buffer_profile(program, default_dlsa(program))
    cap = program.buffer_capacity_bytes
    lg_bounds = lfa.lg_bounds()
    tiles = program.tiles
    clauses = {}
    for k, used in enumerate(occupancy):
        if used <= cap:
            continue
        p = max(k - 1, 0)
        g = tiles[p].lg
        a, b = lg_bounds[g]
        lits = [x[key].negated() for key in keys if a <= key[0] < b]
        lits += [d[c] for c in lfa.flc if a < c < b]
        lits += [d[c].negated() for c in (a, b) if 0 < c < n]
        if k >= 1 and b < n and (p + 1 == len(tiles) or tiles[p + 1].lg != g):
            lits += [x[key].negated() for key in keys if key[0] == b]
        clauses[(a, b, len(lits))] = lits
    return list(clauses.values())


def solve_lfa(lowerer: Lowerer, order: tuple[str, ...] | None = None,
              incumbent: Lfa | None = None, objective: str = "ideal",
              window: tuple[int, int] | None = None, time_limit: float | None = None,
              workers: int | None = None, seed: int = 0, max_segment: int = 12,
              tilings: tuple[int, ...] = TILINGS, max_rounds: int = 200,
              groups: frozenset[str] = GROUPS) -> LfaSolution:
    """The best LFA of `order` (default: the incumbent's order, else the workload's layer
    order) for `objective` ("ideal": max(compute, ceil(DRAM bytes / bandwidth)) cycles;
    "energy": tile energy + DRAM energy; "edp": ideal x E_ref / D_ref + energy, the
    first-order expansion of E x D around the incumbent (or the unfused LFA)).
    FLGs are drawn from segments of at most `max_segment` layers with a tiling number
    in `tilings`, plus the incumbent's FLGs. With `window` = (w0, w1) (widened to the
    incumbent's FLG boundaries; needs an incumbent) only FLCs, DRAM cuts and tilings
    strictly inside it change. `time_limit` (seconds) bounds the whole call, including
    the precomputation; each CP-SAT run gets what is left. Never worse than the
    incumbent (returned when the model does not beat it under `objective`). The returned
    LFA lowers and fits the buffer under the default DLSA."""
    started = time.perf_counter()
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, "
                         f"got {objective!r}")
    wl = lowerer.workload
    if order is None:
        order = incumbent.order if incumbent is not None else tuple(wl.layers)
    order = tuple(order)
    if incumbent is not None and incumbent.order != order:
        raise ScheduleError("the incumbent LFA has another computing order than the model")
    n = len(order)
    if window is None:
        w0, w1 = 0, n
    else:
        if incumbent is None:
            raise ScheduleError("an LFA window needs an incumbent to fix the rest")
        starts = [a for a, _ in incumbent.flg_bounds()] + [n]
        w0 = max(a for a in starts if a <= max(window[0], 0))
        w1 = min(a for a in starts if a >= min(window[1], n))
        if w1 <= w0:
            raise ScheduleError(f"LFA window {window} is empty")
    keys = [(i, j, t) for i in range(w0, w1) for j in range(i + 1, min(w1, i + max_segment)
                                                            + 1) for t in tilings]
    inc_keys = _keys(incumbent) if incumbent is not None else []
    if incumbent is not None:
        lowerer.lower(incumbent)  # raises ScheduleError naming what is wrong with it
        keys = [k for k in inc_keys if not (w0 <= k[0] < w1)] + keys + inc_keys
    table = SegmentTable(lowerer, order, keys)
    if incumbent is None:
        check_lfa(wl, Lfa.unfused(order))  # validates the order
    bpc = lowerer.hw.dram.bytes_per_cycle
    inc_candidate = _evaluate(lowerer, incumbent) if incumbent is not None else None
    inc_tally = table.tally(incumbent) if incumbent is not None else None
    reference = inc_tally or _unfused_tally(table)
    model = _Model(table, objective, w0, w1, incumbent, reference, groups)
    if incumbent is not None:
        model.hint(incumbent)
    deadline = None if time_limit is None else started + time_limit
    status = None
    best = None  # (lfa, candidate, ideal, dram, compute, score)
    rounds = -1
    while rounds < max_rounds:
        left = None if deadline is None else deadline - time.perf_counter()
        if left is not None and left <= 0:
            break
        rounds += 1
        status, solution = solve(model.model, left, workers, seed)
        if not status.has_solution:
            break
        lfa, keys_chosen = model.decode(solution)
        candidate, program = _evaluate_with_program(lowerer, lfa)
        if candidate is not None:
            best = (lfa, candidate, solution.value(model.ideal), solution.value(model.dram),
                    solution.value(model.compute), solution.value(model.cost))
            break
        for clause in _no_goods(model, lfa, keys_chosen, program):
            model.exclude(clause)
    rounds = max(rounds, 0)
    if inc_candidate is not None and inc_tally is not None and (
            best is None or best[5] >= model.score(incumbent)):
        return LfaSolution(incumbent, inc_candidate, inc_tally.ideal(bpc),
                           inc_tally.dram_bytes, inc_tally.compute_cycles, status, rounds,
                           False, (w0, w1), len(table.segments))
    if best is None:
        return LfaSolution(None, None, None, None, None, status, rounds, False, (w0, w1),
                           len(table.segments))
    lfa, candidate, ideal, dram, compute, _ = best
    return LfaSolution(lfa, candidate, ideal, dram, compute, status, rounds,
                       incumbent is not None, (w0, w1), len(table.segments))


def _unfused_tally(table: SegmentTable) -> Tally:
    """Figures of every layer its own FLG and LG at the smallest candidate tiling (a
    scale for the "edp" objective)."""
    n = len(table.order)
    tiling = []
    for p in range(n):
        options = [t for (a, b, t) in table.segments if a == p and b == p + 1]
        if not options:
            return Tally(1, 0, 1.0)
        tiling.append(min(options))
    cuts = tuple(range(1, n))
    return table.tally(Lfa(table.order, cuts, tuple(tiling), cuts))


def _evaluate(lowerer: Lowerer, lfa: Lfa) -> Candidate | None:
    return _evaluate_with_program(lowerer, lfa)[0]


def _evaluate_with_program(lowerer: Lowerer, lfa: Lfa
                           ) -> tuple[Candidate | None, TileProgram | None]:
    """`lfa` lowered (None if it does not lower) and its candidate under the default
    DLSA (None if it does not fit)."""
    try:
        program = lowerer.lower(lfa)
    except ScheduleError:
        return None, None
    dlsa = default_dlsa(program)
    ev = evaluate(program, dlsa, check=False)
    if not ev.fits:
        return None, program
    return Candidate(lfa, program, dlsa, ev), program
