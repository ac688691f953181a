"""CP-SAT model of the LFA for a fixed computing order (DESIGN §3-4, issue 5 item 3).

The model picks *segments* s = (i, j, T): positions i..j-1 of the order form one FLG with
tiling number T. Every candidate is precomputed from the lowering's FLG plan: compute
cycles, tile energy, the DRAM bytes fixed by the segment alone (its weights, once per FLG,
and its tiles' loads of network inputs), the bytes its tiles would load over each in-edge
u -> v if that edge went through DRAM (sum of the regions v's tiles read from u, halo
included), and lower bounds on the buffer occupancy (see `SegmentTable._buffer_rows`).

Variables: x[s] (segment chosen), d[k] (DRAM cut at boundary k), c[u,v] (edge crosses a
DRAM cut), st[u] (u is stored), t[u,v] (bytes loaded over edge u -> v), tc[u,v] (DRAM
cycles of those loads), sc[u] (DRAM cycles of u's stores).

Constraint groups (named, so a test can drop one and see the exactness check fail):
- `path`:            the chosen segments form a path 0 -> n over boundaries (flow)
- `cut_on_boundary`: d[k] <= sum of x[s] starting at k
- `crossing`:        c[u,v] = OR of d[k], pos(u) < k <= pos(v)
- `store`:           st[u] = OR of d[k], pos(u) < k <= last consumer (1 for outputs)
- `load`:            t[u,v] = sum of x[s] * bytes_s(u,v) over s holding v if c[u,v], else 0
                     (tc[u,v] likewise with the loads' DRAM cycles)
- `fit` (off by default; the exact search's relaxation): x[s] = 0 when s's fit_floor,
                     the bytes some tile of s holds under every DLSA, exceeds the capacity
- `buffer`:          x[s] => each buffer row of s <= capacity (a row: a lower bound on the
                     default DLSA's occupancy at one tile of s, linear in c, st and the
                     next FLG's prefetched loads pf[u,v])

DRAM bytes = sum x[s] * fixed_s + sum st[u] * ofmap(u) + sum t[u,v]: exactly the bytes of
the decoded LFA's tile program. DRAM cycles, the same sum over the program's DRAM tensors
of ceil(bytes / bandwidth) each (one per weight and FLG, per tile and loaded input, per
tile and stored share; sc[u] = the stores' cycles at the tiling of u's segment), and
compute cycles = sum x[s] * cycles_s are exact too. So the "ideal" objective
max(compute cycles, DRAM cycles) is exactly the program's ideal.

The buffer rows only relax the fit (they never exclude an LFA that fits; what they miss,
e.g. the previous FLG's stores still live at a segment's first tile, is small). Fit is
then enforced lazily: a decoded LFA that does not fit under the default DLSA gets no-good
cuts (one per overflowing LG, see `_no_goods`) and the model is solved again. A returned
LFA always lowers and fits; with status "optimal" it is the best fitting LFA over the
candidate segments.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable
from fractions import Fraction

import numpy as np

from mipsched.core import Candidate
from mipsched.evaluate import buffer_profile, evaluate
from mipsched.formulations.solver import CpModel, IntVar, Solution, SolveStatus, solve
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa, ScheduleError
from mipsched.schedule.tile_program import TileProgram
from mipsched.schedule.tiling import FlgTiles
from mipsched.schedule.validity import check_lfa

GROUPS = frozenset({"path", "cut_on_boundary", "crossing", "store", "load", "buffer"})
OBJECTIVES = ("ideal", "energy", "edp")
TILINGS = (1, 2, 4, 8, 16, 32, 64)

Edge = tuple[str, str]


@dataclasses.dataclass(frozen=True)
class BufferRow:
    """A lower bound on the buffer bytes at one tile of a segment, linear in the model's
    literals: const + sum over (edge, a1, a0) of (a1 if the edge crosses a DRAM cut else
    a0) + sum over (layer, bytes) of bytes if the layer is stored (+ the prefetch)."""

    tile: int
    """The tile's index inside the segment (in execution order)."""
    const: int
    edges: tuple[tuple[Edge, int, int], ...]
    stores: tuple[tuple[str, int], ...]
    prefetch: bool
    """Whether the next FLG's first-tile loads are live too (the segment's last tile)."""


@dataclasses.dataclass(frozen=True)
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
    first_loads: dict[str, int]
    """Bytes the first tile loads from layer u if u -> (first layer) crosses a cut."""
    first_fixed: int
    """Bytes the first tile loads from network inputs."""
    floor: int
    """Buffer bytes the default DLSA holds at some tile of the segment in any LFA."""
    rows: tuple[BufferRow, ...]
    """Lower bounds on the default DLSA's occupancy at some of the segment's tiles."""
    fixed_cycles: int = 0
    """DRAM cycles of the transfers behind `fixed_bytes` (each ceil(bytes / bandwidth))."""
    load_cycles: dict[Edge, int] = dataclasses.field(default_factory=dict)
    """DRAM cycles of the loads behind `loads`, per in-edge."""
    store_cycles: dict[str, int] = dataclasses.field(default_factory=dict)
    """Per layer of the segment, the DRAM cycles of storing its ofmap (one store per
    tile's share)."""
    head_gain: int = 0
    """max over its tiles p of (DRAM cycles of the loads it surely makes that tiles up to
    p first use: weights, network inputs) - (cycles of its tiles before p): how far
    past (its start + DRAM cycles before it) its last tile can at best end, less its
    compute (`head_tail`)."""
    tail_gain: int = 0
    """max over its tiles r of (DRAM cycles of the stores it surely makes from tile r on:
    network outputs) - (cycles of its tiles after r) (`head_tail`)."""
    fit_floor: int = 0
    """max over its tiles of the bytes live there under every DLSA of every LFA holding
    this FLG (`fit`): the FLG's own on-chip fmaps, the weights of its layers from their
    first to their last tile, the regions the tile reads from outside the FLG (loaded, or
    part of an ofmap kept on chip), and its output share when no layer of the FLG reads
    it (stored, or kept on chip for a later FLG)."""
    own_bound: int = 0
    """bounds.program_bound of its tiles alone with only those sure loads and stores:
    max over tiles p <= r of loads(<= p) + cycles(p..r) + stores(>= r) (`head_tail`)."""


@dataclasses.dataclass(frozen=True)
class Tally:
    """The model's figures of one LFA (units: cycles, bytes, pJ)."""

    compute_cycles: int
    dram_bytes: int
    energy_pj: float
    dram_cycles: int
    """Sum over the DRAM tensors of ceil(bytes / bandwidth)."""

    @property
    def ideal(self) -> int:
        """max(compute cycles, DRAM cycles): the DLSA-independent ideal."""
        return max(self.compute_cycles, self.dram_cycles)


#: Segments without buffer rows by (layers, tiling number), None for an FLG that does not
#: lower: shared by the SegmentTables of several orders of one workload and hardware.
SegmentCache = dict[tuple[tuple[str, ...], int], Segment | None]


@dataclasses.dataclass(frozen=True)
class LfaSolution:
    """The best LFA found (None when nothing that fits was found) and how."""

    lfa: Lfa | None
    candidate: Candidate | None
    """`lfa` lowered and evaluated with the default DLSA (it fits the buffer)."""
    model_ideal: int | None
    """The model's ideal of `lfa` (cycles): max(compute cycles, DRAM cycles), equal to
    its tile program's ideal."""
    model_dram_bytes: int | None
    model_compute_cycles: int | None
    status: SolveStatus | None
    """The CP-SAT run that settled the objective (None when none ran; "unknown" when the
    rounds or the time ran out before a decoded LFA fitted). "optimal": `lfa` is the
    best fitting LFA over the candidates (with "ideal", ties are then broken by a second
    run, not reflected here)."""
    rounds: int
    """No-good rounds: how many times decoded LFAs that did not fit were cut off and the
    model solved again."""
    improved: bool
    """Whether the model's LFA beats the incumbent (False: `lfa` is the incumbent)."""
    window: tuple[int, int]
    """Positions [w0, w1) of the order the model was free to change."""
    segments: int
    """Number of candidate segments in the model."""


class SegmentTable:
    """Candidate segments of one order, with everything the model needs about them."""

    def __init__(self, lowerer: Lowerer, order: tuple[str, ...],
                 keys: Iterable[tuple[int, int, int]], deadline: float | None = None,
                 with_buffer: bool = True, shared: SegmentCache | None = None) -> None:
        """Raises TimeoutError when building the segments passes `deadline`
        (time.perf_counter seconds): on big nets with many tiling numbers that alone can
        take minutes. Without `with_buffer` the segments carry no buffer rows (floor 0):
        enough for models without the `buffer` group, and then a segment depends only on
        its layers and tiling number, so tables of several orders of one workload can
        share them through `shared`."""
        if shared is not None and with_buffer:
            raise ValueError("only segments without buffer rows can be shared between "
                             "orders")
        self.lowerer = lowerer
        self.order = order
        self.with_buffer = with_buffer
        self.shared = shared
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
            if deadline is not None and time.perf_counter() > deadline:
                raise TimeoutError("the segment table was not built in time")
            if key not in self.segments:
                seg = self._segment(*key)
                if seg is not None:
                    self.segments[key] = seg

    def _segment(self, start: int, stop: int, tiling: int) -> Segment | None:
        layers = self.order[start:stop]
        if self.shared is None:
            return self._new_segment(start, stop, tiling)
        known = self.shared.get((layers, tiling), False)
        if known is False:
            known = self.shared[(layers, tiling)] = self._new_segment(start, stop, tiling)
        if known is None or known.start == start:
            return known
        return dataclasses.replace(known, start=start, stop=stop)

    def _new_segment(self, start: int, stop: int, tiling: int) -> Segment | None:
        wl = self.lowerer.workload
        layers = self.order[start:stop]
        try:  # shared tables summarise every FLG of many orders: plans not kept
            plan = self.lowerer.plan(layers, tiling, remember=self.shared is None)
        except ScheduleError:
            return None
        eb = wl.elem_bytes
        bpc = self.lowerer.hw.dram.bytes_per_cycle
        cycles = sum(c.cycles for n in layers for c in plan.costs[n] if c is not None)
        energy = sum(c.energy_pj for n in layers for c in plan.costs[n] if c is not None)
        fixed = sum(wl.weight_bytes(n) for n in layers if wl.layers[n].has_weights)
        fixed_cycles = sum(-(-wl.weight_bytes(n) // bpc) for n in layers
                           if wl.layers[n].has_weights)
        load_cycles: dict[Edge, int] = {}
        loads: dict[Edge, int] = {}
        first_loads: dict[str, int] = {}
        first_fixed = 0
        members = set(layers)
        for src, elems in zip(wl.layers[layers[0]].inputs,
                              plan.tiles.read_elems[layers[0]][0], strict=True):
            if elems is not None:
                size = elems * eb
                if src in wl.layers:
                    first_loads[src] = first_loads.get(src, 0) + size
                else:
                    first_fixed += size
        for v in layers:
            for read in plan.tiles.read_elems[v]:
                for src, elems in zip(wl.layers[v].inputs, read, strict=True):
                    if elems is None or src in members:
                        continue
                    size = elems * eb
                    if src in wl.layers:
                        loads[(src, v)] = loads.get((src, v), 0) + size
                        load_cycles[(src, v)] = load_cycles.get((src, v), 0) - (-size // bpc)
                    else:
                        fixed += size
                        fixed_cycles -= -size // bpc
        floor, rows = (self._buffer_rows(start, stop, plan.tiles) if self.with_buffer
                       else (0, ()))
        store_cycles = {n: sum(-(-(size or 0) // bpc) for size in plan.share_bytes[n])
                        for n in layers}
        ends = self._ends(layers, plan)
        return Segment(start, stop, tiling, cycles, energy, fixed, loads, first_loads,
                       first_fixed, floor, rows, fixed_cycles, load_cycles, store_cycles,
                       *ends[:2], _fit_floor(wl, plan), ends[2])

    def _ends(self, layers: tuple[str, ...], plan) -> tuple[int, int, int]:
        """head_gain, tail_gain and own_bound of a segment (see Segment), from its tiles
        in execution order (tile i of layers[j] is step i * len(layers) + j), as lowering
        makes its transfers: a layer's weights first used by its first tile, network
        inputs loaded per tile, a network output stored per tile share."""
        wl = self.lowerer.workload
        bpc = self.lowerer.hw.dram.bytes_per_cycle
        width = len(layers)
        cycles = np.array([step[3] for step in plan.steps], dtype=np.int64)
        loads = np.zeros(len(cycles), dtype=np.int64)
        stores = np.zeros(len(cycles), dtype=np.int64)
        outputs = set(wl.outputs)
        for j, name in enumerate(layers):
            if wl.layers[name].has_weights:
                loads[j] += -(-wl.weight_bytes(name) // bpc)
            network_inputs = [k for k, src in enumerate(wl.layers[name].inputs)
                              if src not in wl.layers]
            for i, sizes in enumerate(plan.read_bytes[name]):
                loads[i * width + j] += sum(-(-sizes[k] // bpc) for k in network_inputs
                                            if sizes[k] is not None)
            if name in outputs:
                stores[j::width] += [-(-(size or 0) // bpc) for size in
                                     plan.share_bytes[name]]
        done = np.cumsum(cycles)  # cycles of tiles 0..p
        head = np.cumsum(loads) - (done - cycles)  # loads(<= p) - cycles(< p)
        tail = np.cumsum(stores[::-1])[::-1] - (done[-1] - done)  # stores(>= r) - cycles(> r)
        own = np.maximum.accumulate(head) + done + np.cumsum(stores[::-1])[::-1]
        return int(head.max()), int(tail.max()), int(own.max())

    def _spanning(self, start: int, stop: int) -> list[Edge]:
        """(u, v): u before positions start..stop-1 and not read there, v its first
        consumer after them; u's whole ofmap stays on chip across them unless u -> v
        crosses a DRAM cut."""
        wl = self.lowerer.workload
        out = []
        for u in self.order[:start]:
            if self.last_use[u] < stop:
                continue
            users = [self.pos[v] for v in wl.consumers(u)]
            if any(start <= p < stop for p in users):
                continue
            out.append((u, self.order[min(p for p in users if p >= stop)]))
        return out

    def _buffer_rows(self, start: int, stop: int, tiles: FlgTiles
                     ) -> tuple[int, tuple[BufferRow, ...]]:
        """A lower bound on the default-DLSA buffer occupancy (bytes) at the tiles of
        this FLG, valid in every LFA containing it: the floor (every crossing literal at
        its most favourable value) and rows for a few tiles (the worst ones under the
        four corner cases: inputs loaded or on chip x outputs stored or kept on chip).

        At local tile q it counts: FLG-internal ofmap regions held on chip (as lowering
        holds them); weights live from the tile before their first tile to their last;
        network-input loads of tiles q and q+1 (double buffering); per input u from an
        earlier FLG, the loads of tiles q and q+1 if u -> v crosses a DRAM cut, else u's
        whole aggregated ofmap up to the last tile reading it; ofmaps of earlier FLGs
        kept on chip across the FLG (`_spanning`), and inputs kept on chip after their
        last reader here for a consumer after the FLG; the next layer's weight at the
        last tile (prefetched, whatever the next FLG); per layer with consumers after the
        FLG, its stored shares of tiles q-1 and q if stored, and its shares aggregated
        so far if its first later consumer is in the same LG. The model adds the next
        FLG's prefetched first-tile loads at the last tile (`BufferRow.prefetch`). Not
        counted (left to the no-good cuts): the previous FLG's stores still live at the
        first tile."""
        wl = self.lowerer.workload
        eb = wl.elem_bytes
        layers = self.order[start:stop]
        members = set(layers)
        width = len(layers)
        n = tiles.grid.count * width
        local = {v: range(k, n, width) for k, v in enumerate(layers)}
        diff = np.zeros(n + 1, dtype=np.int64)
        base = np.zeros(n, dtype=np.int64)
        src_dram: dict[str, np.ndarray] = {}
        src_edge: dict[str, Edge] = {}
        own: list[tuple[Edge, np.ndarray, np.ndarray, bool]] = []  # edge, agg, store, out
        outputs = set(wl.outputs)
        for name in layers:
            layer = wl.layers[name]
            qs = local[name]
            channels = layer.out.c
            inside = [v for v in wl.consumers(name) if v in members]
            after = [v for v in wl.consumers(name) if v not in members]
            if layer.has_weights:
                diff[max(qs[0] - 1, 0)] += wl.weight_bytes(name)
                diff[qs[-1] + 1] -= wl.weight_bytes(name)
            agg = np.zeros(n + 1, dtype=np.int64)
            store = np.zeros(n, dtype=np.int64)
            for i, q in enumerate(qs):
                region = tiles.produced[name][i]
                agg_from = q
                if inside and region is not None:
                    end = max(local[v][i] for v in inside)
                    diff[q] += region.elems(channels) * eb
                    diff[end + 1] -= region.elems(channels) * eb
                    agg_from = end + 1
                share = tiles.share[name][i].elems(channels) * eb
                agg[agg_from] += share
                store[q:q + 2] += share
                for src, elems in zip(layer.inputs, tiles.read_elems[name][i], strict=True):
                    if elems is None or src in members:
                        continue
                    size = elems * eb
                    if src in wl.layers:
                        target = src_dram.setdefault(src, np.zeros(n, dtype=np.int64))
                        src_edge.setdefault(src, (src, name))
                    else:
                        target = base
                    target[max(q - 1, 0):q + 1] += size
            if name in outputs:
                base += store
            if after:
                first = min(after, key=self.pos.__getitem__)
                own.append(((name, first), np.cumsum(agg)[:n], store, name in outputs))
        base += np.cumsum(diff)[:n]
        if stop < len(self.order) and wl.layers[self.order[stop]].has_weights:
            base[n - 1] += wl.weight_bytes(self.order[stop])  # prefetched by the next FLG
        span = self._spanning(start, stop)
        span_tail: list[tuple[Edge, int]] = []  # read here, kept for later: (edge, from q)
        src_chip: dict[str, np.ndarray] = {}
        for u in src_dram:
            last = max(local[v][-1] for v in wl.consumers(u) if v in members)
            src_chip[u] = np.where(np.arange(n) <= last, self.ofmap[u], 0)
            later = [self.pos[v] for v in wl.consumers(u) if self.pos[v] >= stop]
            if later and last < n - 1:
                span_tail.append(((u, self.order[min(later)]), last + 1))
        zero = np.zeros(n, dtype=np.int64)
        tail = sum((np.where(np.arange(n) >= q0, self.ofmap[e[0]], 0)
                    for e, q0 in span_tail), zero)
        loaded = sum(src_dram.values(), zero)
        held = (sum(src_chip.values(), zero) + sum(self.ofmap[u] for u, _ in span)
                + tail)
        kept = sum((agg for _, agg, _, _ in own), zero)
        stored = sum((st for _, _, st, out in own if not out), zero)
        floor = (base + sum((np.minimum(src_dram[u], src_chip[u]) for u in src_dram), zero)
                 + sum((np.minimum(agg, st) for _, agg, st, out in own if not out), zero))
        picks = {int(np.argmax(v)) for v in (floor, base + loaded + stored, base + loaded + kept,
                                             base + held + stored, base + held + kept)}
        picks.add(n - 1)
        rows = []
        for q in sorted(picks):
            edges = [(src_edge[u], int(src_dram[u][q]), int(src_chip[u][q])) for u in src_dram]
            edges += [(e, 0, self.ofmap[e[0]]) for e in span]
            edges += [(e, 0, self.ofmap[e[0]]) for e, q0 in span_tail if q >= q0]
            edges += [(e, 0, int(agg[q])) for e, agg, _, _ in own]
            stores = [(e[0], int(st[q])) for e, _, st, out in own if not out and st[q]]
            rows.append(BufferRow(q, int(base[q]), tuple(x for x in edges if x[1] or x[2]),
                                  tuple(stores), q == n - 1 and stop < len(self.order)))
        return int(floor.max()), tuple(rows)

    def tally(self, lfa: Lfa) -> Tally:
        """Compute cycles, DRAM bytes and energy of `lfa` (same order) by the model's
        accounting; raises KeyError when one of its FLGs is not a candidate."""
        segs = [self.segments[(a, b, t)] for (a, b), t in zip(lfa.flg_bounds(), lfa.tiling,
                                                             strict=True)]
        seg_of = {p: s for s in segs for p in range(s.start, s.stop)}
        cuts = sorted(lfa.dram_cuts)
        dram = sum(s.fixed_bytes for s in segs) + self.output_bytes
        dram_cycles = sum(s.fixed_cycles for s in segs)
        outputs = set(self.lowerer.workload.outputs)
        for u in self.order:
            if u in outputs:  # always stored; its bytes are in output_bytes
                dram_cycles += seg_of[self.pos[u]].store_cycles[u]
            elif _crosses(cuts, self.pos[u], self.last_use[u]):
                dram += self.ofmap[u]
                dram_cycles += seg_of[self.pos[u]].store_cycles[u]
        for u, v in self.edges:
            if _crosses(cuts, self.pos[u], self.pos[v]):
                dram += seg_of[self.pos[v]].loads.get((u, v), 0)
                dram_cycles += seg_of[self.pos[v]].load_cycles.get((u, v), 0)
        return Tally(sum(s.compute_cycles for s in segs), dram,
                     sum(s.energy_pj for s in segs)
                     + dram * self.lowerer.hw.dram.energy_pj_per_byte, dram_cycles)


def _fit_floor(wl, plan) -> int:
    """Segment.fit_floor of an FLG plan (bytes)."""
    layers = plan.layers
    width = len(layers)
    count = plan.tiles.grid.count
    live = np.array(plan.local_onchip, dtype=np.int64)
    members = set(layers)
    for j, name in enumerate(layers):
        if wl.layers[name].has_weights:
            live[j:(count - 1) * width + j + 1] += wl.weight_bytes(name)
        outside: dict[str, list[int]] = {}  # input indices per source outside the FLG
        for k, src in enumerate(wl.layers[name].inputs):
            if src not in members:
                outside.setdefault(src, []).append(k)
        for i, sizes in enumerate(plan.read_bytes[name]):
            # a source read twice may be one ofmap kept on chip: count its larger read
            live[i * width + j] += sum(max(sizes[k] or 0 for k in ks)
                                       for ks in outside.values())
        if not any(v in members for v in wl.consumers(name)):
            live[j::width] += [size or 0 for size in plan.share_bytes[name]]
    return int(live.max())


def _crosses(cuts: list[int], lo: int, hi: int) -> bool:
    """Whether a cut k lies in lo < k <= hi."""
    return any(lo < k <= hi for k in cuts)


class SegmentModel:
    """The CP-SAT model over a SegmentTable; positions outside [w0, w1) are pinned to
    `fixed` (the incumbent's segments and DRAM cuts)."""

    def __init__(self, table: SegmentTable, objective: str, w0: int, w1: int,
                 fixed: Lfa | None, reference: Tally,
                 groups: frozenset[str] = GROUPS, upper: int | None = None) -> None:
        """`upper` (cycles): LFAs whose `ideal` exceeds it are of no interest and become
        infeasible; it also caps the model's domains, which matters: with domains of
        billions of cycles (gpt2_small_prefill at batch 16 with tilings up to 8192)
        CP-SAT's presolve was seen to call a feasible model infeasible."""
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
        holding: dict[Edge, list[tuple[object, int, int]]] = {e: [] for e in table.edges}
        for key, seg in table.segments.items():
            for e, size in seg.loads.items():
                holding[e].append((self.x[key], size, seg.load_cycles[e]))
        self.t = {}
        self.tc: dict[Edge, IntVar] = {}
        """DRAM cycles of the loads over edge (u, v)."""
        cycles_top = 0  # no LFA moves more DRAM cycles
        for e, terms in holding.items():
            top = max((size for _, size, _ in terms), default=0)
            ctop = max((cyc for _, _, cyc in terms), default=0)
            cycles_top += ctop
            var = self.t[e] = m.new_int_var(0, top, f"t_{e[0]}_{e[1]}")
            cvar = self.tc[e] = m.new_int_var(0, ctop, f"tc_{e[0]}_{e[1]}")
            if "load" in groups:
                m.add(var == sum(x * size for x, size, _ in terms)).only_enforce_if(self.c[e])
                m.add(var == 0).only_enforce_if(self.c[e].negated())
                m.add(cvar == sum(x * cyc for x, _, cyc in terms)).only_enforce_if(
                    self.c[e])
                m.add(cvar == 0).only_enforce_if(self.c[e].negated())
        holding_u: dict[str, list[tuple[object, int]]] = {u: [] for u in order}
        for key, seg in table.segments.items():
            for u, cyc in seg.store_cycles.items():
                holding_u[u].append((self.x[key], cyc))
        self.sc: dict[str, IntVar] = {}
        """DRAM cycles of storing u's ofmap (0 when it stays on chip)."""
        for u, terms in holding_u.items():
            ctop = max((cyc for _, cyc in terms), default=0)
            cycles_top += ctop
            var = self.sc[u] = m.new_int_var(0, ctop, f"sc_{u}")
            made = sum(x * cyc for x, cyc in terms)
            if u in self.st:
                m.add(var == made).only_enforce_if(self.st[u])
                m.add(var == 0).only_enforce_if(self.st[u].negated())
            else:  # a network output, always stored
                m.add(var == made)
        self.pf: dict[Edge, IntVar] = {}
        """Prefetched first-tile load of v from u (v first in its FLG), buffer group."""
        if "buffer" in groups:
            if not table.with_buffer:
                raise ValueError("the buffer group needs a SegmentTable with buffer rows")
            self._buffer()

        bpc = hw.dram.bytes_per_cycle
        self.compute = sum(seg.compute_cycles * self.x[key]
                           for key, seg in table.segments.items())
        self.dram = (sum(seg.fixed_bytes * self.x[key] for key, seg in table.segments.items())
                     + table.output_bytes + sum(table.ofmap[u] * var
                                                for u, var in self.st.items())
                     + sum(self.t.values()))
        """DRAM bytes."""
        self.dram_cycles = (sum(seg.fixed_cycles * self.x[key]
                                for key, seg in table.segments.items())
                            + sum(self.sc.values()) + sum(self.tc.values()))
        """DRAM cycles: the sum of ceil(bytes / bandwidth) over the DRAM tensors."""
        most: dict[int, tuple[int, int]] = {}  # per start: max compute, max fixed cycles
        for (a, _, _), seg in table.segments.items():
            c0, f0 = most.get(a, (0, 0))
            most[a] = (max(c0, seg.compute_cycles), max(f0, seg.fixed_cycles))
        cycles_top += sum(f for _, f in most.values())
        horizon = max(sum(c for c, _ in most.values()), cycles_top)
        if "head_tail" in groups:
            # every head-and-tail bound is at most (DRAM cycles before) + (a head of one
            # FLG) + (compute from there on) + (a tail of another FLG): a horizon below
            # that would make the LFAs whose bound exceeds it infeasible, and the least
            # bound over the rest no bound at all
            segs = table.segments.values()
            heads = max((s.head_gain for s in segs), default=0)
            tails = max((s.tail_gain for s in segs), default=0)
            horizon = sum(c for c, _ in most.values()) + cycles_top + heads + tails
        self.horizon = horizon if upper is None else min(horizon, upper)
        self.ideal = m.new_int_var(0, horizon, "ideal")
        m.add(self.ideal >= self.compute)
        m.add(self.ideal >= self.dram_cycles)
        self.head_tail_terms: list[tuple[object, object]] = []
        """(an FLG starts at k, the head-and-tail bound in cycles) of the group."""
        if "head_tail" in groups:
            self._head_tail(starting)
        if "fit" in groups:
            self._fit(starting)
        per_byte = Fraction(hw.dram.energy_pj_per_byte).limit_denominator(1000)
        self.per_byte = per_byte
        """DRAM pJ per byte as a fraction: energy is counted in 1 / denominator pJ."""
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
                                      / max(1, reference.ideal)))
            self.cost = self.alpha * self.ideal + energy
        m.minimize(self.cost)
        self.tie = self.compute * bpc + self.dram
        """Tie-break of the "ideal" objective (bytes): compute x bandwidth + DRAM bytes."""

    def _head_tail(self, starting: list[list]) -> None:
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
        tail = sum(seg.tail_gain * self.x[key] for key, seg in segs.items() if key[1] == n)
        for k in range(n):
            if not starting[k]:
                continue
            before = (sum(seg.fixed_cycles * self.x[key] for key, seg in segs.items()
                          if key[1] <= k)
                      + sum(var for (u, v), var in self.tc.items() if pos[v] < k))
            at_k = [(self.x[key], seg) for key, seg in segs.items() if key[0] == k]
            head = sum(seg.head_gain * x for x, seg in at_k if seg.stop < n)
            own = sum(seg.own_bound * x for x, seg in at_k if seg.stop == n)
            after = sum(seg.compute_cycles * self.x[key] for key, seg in segs.items()
                        if key[0] >= k)
            not_last = m.new_bool_var(f"flg_starts_{k}_not_last")
            m.add(not_last == sum(x for x, seg in at_k if seg.stop < n))
            last = m.new_bool_var(f"flg_starts_{k}_last")
            m.add(last == sum(x for x, seg in at_k if seg.stop == n))
            for literal, bound in ((not_last, before + head + after + tail),
                                   (last, before + own)):
                m.add(self.ideal >= bound).only_enforce_if(literal)
                self.head_tail_terms.append((literal, bound))

    def _fit(self, starting: list[list]) -> None:
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
                m.add(self.x[key] == 0)
        for u, v in table.edges:
            if table.ofmap[u] + wl.weight_bytes(v) <= cap:
                continue
            for k in range(table.pos[u] + 1, table.pos[v] + 1):
                m.add(sum(starting[k]) <= self.c[(u, v)])

    def pin_ideal(self) -> None:
        """Makes `ideal` equal to the largest of its lower bounds, not just at least it,
        so that every LFA has one value and LFAs can be enumerated one by one."""
        m = self.model
        top = self.horizon

        def term(expr, name: str, when=None):
            var = m.new_int_var(-top, top, name)
            if when is None:
                m.add(var == expr)
            else:
                m.add(var == expr).only_enforce_if(when)
                m.add(var == 0).only_enforce_if(when.negated())
            return var

        terms = [term(self.compute, "compute"), term(self.dram_cycles, "dram_cycles")]
        terms += [term(bound, f"head_tail_{k}", here)
                  for k, (here, bound) in enumerate(self.head_tail_terms)]
        m.add_max_equality(self.ideal, terms)

    def _buffer(self) -> None:
        """The `buffer` group: every row of a chosen segment within the capacity; the
        row at a segment's last tile also holds the next FLG's prefetched first-tile
        loads (pf[u, v] = its load from u if u -> v crosses a cut, v the FLG's first
        layer)."""
        table, m = self.table, self.model
        cap = table.lowerer.hw.gbuf.capacity_bytes
        wl = table.lowerer.workload
        by_start: dict[int, list[tuple[tuple[int, int, int], Segment]]] = {}
        for key, seg in table.segments.items():
            by_start.setdefault(key[0], []).append((key, seg))
        prefetch, prefetch_top = {}, {}
        for k in range(1, len(table.order)):
            v = table.order[k]
            segs = by_start.get(k, [])
            expr = sum(self.x[key] * seg.first_fixed for key, seg in segs)
            prefetch_top[k] = max((seg.first_fixed + sum(seg.first_loads.values())
                                   for _, seg in segs), default=0)
            for u in dict.fromkeys(wl.layers[v].inputs):
                if u not in wl.layers:
                    continue
                top = max((seg.first_loads.get(u, 0) for _, seg in segs), default=0)
                pf = self.pf[(u, v)] = m.new_int_var(0, top, f"pf_{u}_{v}")
                m.add(pf == sum(self.x[key] * seg.first_loads.get(u, 0)
                                for key, seg in segs)).only_enforce_if(self.c[(u, v)])
                m.add(pf == 0).only_enforce_if(self.c[(u, v)].negated())
                expr += pf
            prefetch[k] = expr
        for key, seg in table.segments.items():
            if seg.floor > cap:
                m.add(self.x[key] == 0)
                continue
            for row in seg.rows:
                top = (row.const + sum(max(a1, a0) for _, a1, a0 in row.edges)
                       + sum(size for _, size in row.stores)
                       + (prefetch_top[key[1]] if row.prefetch else 0))
                if top <= cap:
                    continue
                used = (row.const + sum(a0 + (a1 - a0) * self.c[e] for e, a1, a0 in row.edges)
                        + sum(size * self.st[u] for u, size in row.stores))
                if row.prefetch:
                    used += prefetch[key[1]]
                m.add(used <= cap).only_enforce_if(self.x[key])

    def _energy_units(self, seg: Segment) -> int:
        """Tile energy of a segment in the energy unit, 1 / per_byte.denominator pJ."""
        return round(seg.energy_pj * self.per_byte.denominator)

    def rank(self, lfa: Lfa) -> tuple[int, int]:
        """(objective, tie-break) the model gives `lfa` (model units)."""
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

    def tie_break(self, found: _Found) -> None:
        """Second phase of the "ideal" objective: keep the ideal at most `found`'s and
        minimise compute x bandwidth + DRAM bytes (both resources' total use), hinted
        with `found`."""
        self.model.add(self.ideal <= found.ideal)
        self.model.minimize(self.tie)
        self.model.clear_hints()
        self.hint(found.lfa)

    def hint(self, lfa: Lfa) -> None:
        """Hints every variable with `lfa` (its FLGs must be candidates)."""
        table, m = self.table, self.model
        chosen = set(flg_keys(lfa))
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
            m.add_hint(self.tc[(u, v)],
                       seg_of[pos[v]].load_cycles.get((u, v), 0) if crossing else 0)
        for u, var in self.st.items():
            m.add_hint(var, _crosses(cuts, pos[u], table.last_use[u]))
        for u, var in self.sc.items():
            stored = u not in self.st or _crosses(cuts, pos[u], table.last_use[u])
            m.add_hint(var, seg_of[pos[u]].store_cycles[u] if stored else 0)
        for (u, v), var in self.pf.items():
            first = seg_of[pos[v]] if seg_of[pos[v]].start == pos[v] else None
            m.add_hint(var, first.first_loads.get(u, 0)
                       if first is not None and _crosses(cuts, pos[u], pos[v]) else 0)
        m.add_hint(self.ideal, table.tally(lfa).ideal)

    def decode(self, solution) -> tuple[Lfa, list[tuple[int, int, int]]]:
        keys = sorted(key for key, var in self.x.items() if solution.boolean(var))
        flc = tuple(a for a, _, _ in keys[1:])
        cuts = tuple(k for k in flc if solution.boolean(self.d[k]))
        return Lfa(self.table.order, flc, tuple(t for _, _, t in keys), cuts), keys

    def exclude(self, literals: list) -> None:
        """No-good: at least one of `literals` must be true."""
        self.model.add_bool_or(literals)


def flg_keys(lfa: Lfa) -> list[tuple[int, int, int]]:
    return [(a, b, t) for (a, b), t in zip(lfa.flg_bounds(), lfa.tiling, strict=True)]


def _no_goods(model: SegmentModel, lfa: Lfa, keys: list[tuple[int, int, int]],
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
              groups: frozenset[str] = GROUPS, stop: threading.Event | None = None,
              target: int | None = None) -> LfaSolution:
    """The best LFA of `order` (default: the incumbent's order, else the workload's layer
    order) for `objective` ("ideal": max(compute cycles, DRAM cycles), as in its tile
    program;
    "energy": tile energy + DRAM energy; "edp": ideal x E_ref / D_ref + energy, the
    first-order expansion of E x D around the incumbent (or the unfused LFA)).
    FLGs are drawn from segments of at most `max_segment` layers with a tiling number
    in `tilings`, plus the incumbent's FLGs. With `window` = (w0, w1) (widened to the
    incumbent's FLG boundaries; needs an incumbent) only FLCs, DRAM cuts and tilings
    strictly inside it change. `time_limit` (seconds) bounds the whole call, including
    the precomputation and building the model (when that alone takes it, the incumbent
    is returned with status None); each CP-SAT run gets what is left. With `target`
    (cycles), the search ends at the first LFA whose schedule under the default DLSA has
    at most that latency. Never worse than the incumbent (returned when the model does
    not beat it under `objective`). The returned LFA lowers and fits the buffer under
    the default DLSA."""
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
    check_lfa(wl, Lfa.unfused(order))  # the order is a topological order of all layers
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
    inc_candidate = inc_tally = inc_program = None
    if incumbent is not None:
        inc_program = lowerer.lower(incumbent)  # raises ScheduleError naming what is wrong
        inc_candidate = _fitting(lowerer, incumbent)[0]
        keys += flg_keys(incumbent)
    deadline = None if time_limit is None else started + time_limit
    try:
        table = SegmentTable(lowerer, order, keys, deadline)
        if incumbent is not None:
            inc_tally = table.tally(incumbent)
        reference = inc_tally or unfused_tally(table)
        model = SegmentModel(table, objective, w0, w1, incumbent, reference, groups)
        if incumbent is not None:
            model.hint(incumbent)
        if deadline is not None and time.perf_counter() > deadline:
            raise TimeoutError("the LFA model was not built in time")
    except TimeoutError:  # the incumbent, with its program's figures (= the model's)
        figures = ((None,) * 3 if inc_program is None else
                   (inc_program.ideal_cycles, inc_program.dram_bytes,
                    inc_program.compute_cycles))
        return LfaSolution(incumbent, inc_candidate, *figures, None, 0, improved=False,
                           window=(w0, w1), segments=0)
    status, found, runs, rounds = _rounds(model, deadline, max_rounds + 1, workers, seed,
                                          stop, target)
    if found is None and status is not None and status.has_solution:
        status = dataclasses.replace(status, status="unknown")  # out of rounds or time
    reached = found is not None and target is not None and \
        found.candidate.evaluation.latency_cycles <= target
    if found is not None and objective == "ideal" and status is not None \
            and status.status == "optimal" and not reached:
        model.tie_break(found)
        _, better, _, more_rounds = _rounds(model, deadline, max_rounds + 1 - runs, workers,
                                            seed, stop)
        rounds += more_rounds
        if better is not None and better.rank < found.rank:
            found = better
    common = {"status": status, "rounds": rounds, "window": (w0, w1),
              "segments": len(table.segments)}
    if inc_candidate is not None and inc_tally is not None and (
            found is None or found.rank >= model.rank(incumbent)):
        return LfaSolution(incumbent, inc_candidate, inc_tally.ideal,
                           inc_tally.dram_bytes, inc_tally.compute_cycles, improved=False,
                           **common)
    if found is None:
        return LfaSolution(None, None, None, None, None, improved=False, **common)
    return LfaSolution(found.lfa, found.candidate, found.ideal, found.dram_bytes,
                       found.compute_cycles, improved=incumbent is not None, **common)


@dataclasses.dataclass(frozen=True)
class _Found:
    """A decoded LFA that fits, with the model's figures for it."""

    lfa: Lfa
    candidate: Candidate
    ideal: int
    dram_bytes: int
    compute_cycles: int
    rank: tuple[int, int]
    """(objective, tie-break) in model units: smaller is better."""


def _rounds(model: SegmentModel, deadline: float | None, runs: int, workers: int | None,
            seed: int, stop: threading.Event | None = None, target: int | None = None
            ) -> tuple[SolveStatus | None, _Found | None, int, int]:
    """Solves the model until a decoded LFA fits, adding no-good cuts for those that
    do not, in at most `runs` CP-SAT runs (each ends early at an LFA whose default-DLSA
    latency is at most `target` cycles). Returns the last status, the LFA found, the
    runs made and the rounds of cuts added."""
    lowerer = model.table.lowerer
    status = None
    done = rounds = 0
    good_enough = None if target is None else _reaches(model, target)
    while done < runs:
        left = None if deadline is None else deadline - time.perf_counter()
        if left is not None and left <= 0:
            break
        done += 1
        status, solution = solve(model.model, left, workers, seed, stop, good_enough)
        if not status.has_solution:
            break
        lfa, keys = model.decode(solution)
        candidate, program = _fitting(lowerer, lfa)
        if candidate is not None:
            rank = (solution.value(model.cost),
                    solution.value(model.tie) if model.objective == "ideal" else 0)
            dram, compute = solution.value(model.dram), solution.value(model.compute)
            ideal = max(compute, solution.value(model.dram_cycles))
            return status, _Found(lfa, candidate, ideal, dram, compute, rank), done, rounds
        if status.interrupted:
            break
        rounds += 1
        for clause in _no_goods(model, lfa, keys, program):
            model.exclude(clause)
    return status, None, done, rounds


def _reaches(model: SegmentModel, target: int) -> Callable[[Solution], bool]:
    """Whether a solution's LFA fits and has at most `target` cycles of latency under
    the default DLSA (its model ideal, a lower bound on that latency, is checked
    first)."""
    def accept(solution: Solution) -> bool:
        ideal = max(solution.value(model.compute), solution.value(model.dram_cycles))
        if ideal > target:
            return False
        candidate = _fitting(model.table.lowerer, model.decode(solution)[0])[0]
        return candidate is not None and candidate.evaluation.latency_cycles <= target

    return accept


def unfused_tally(table: SegmentTable) -> Tally:
    """Figures of every layer its own FLG and LG at the smallest candidate tiling (a
    scale for the "edp" objective)."""
    n = len(table.order)
    tiling = []
    for p in range(n):
        options = [t for (a, b, t) in table.segments if a == p and b == p + 1]
        if not options:
            return Tally(1, 0, 1.0, 0)
        tiling.append(min(options))
    cuts = tuple(range(1, n))
    return table.tally(Lfa(table.order, cuts, tuple(tiling), cuts))


def _fitting(lowerer: Lowerer, lfa: Lfa) -> tuple[Candidate | None, TileProgram | None]:
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
