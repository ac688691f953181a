"""The candidate segments of the LFA model for one computing order, with everything the
model needs about them (DESIGN §3-4).

A segment s = (i, j, T) puts positions i..j-1 of the order in one FLG with tiling number
T. Every candidate is precomputed from the lowering's FLG plan: compute cycles, tile
energy, the DRAM bytes fixed by the segment alone (its weights, once per FLG, and its
tiles' loads of network inputs), the bytes its tiles would load over each in-edge
u -> v if that edge went through DRAM (sum of the regions v's tiles read from u, halo
included), and lower bounds on the buffer occupancy under the default DLSA, its buffer
rows (`SegmentTable._buffer_rows`). `SegmentTable.tally` counts an LFA's compute cycles,
DRAM bytes, DRAM cycles and energy the way the model does; they equal its tile
program's.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable

import numpy as np

from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa, ScheduleError
from mipsched.schedule.tiling import FlgTiles
from mipsched.workload.graph import Workload

Edge = tuple[str, str]
#: A candidate segment: (first position, position after the last, tiling number).
SegmentKey = tuple[int, int, int]


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


class SegmentTable:
    """Candidate segments of one order, with everything the model needs about them."""

    def __init__(self, lowerer: Lowerer, order: tuple[str, ...],
                 keys: Iterable[SegmentKey], deadline: float | None = None,
                 with_buffer: bool = True, shared: SegmentCache | None = None) -> None:
        """The segments `keys` of `order` that lower. Raises TimeoutError when building
        them passes `deadline` (time.perf_counter seconds): on big nets with many tiling
        numbers that alone can take minutes. Without `with_buffer` the segments carry no
        buffer rows (floor 0): enough for models without the `buffer` group, and then a
        segment depends only on its layers and tiling number, so tables of several
        orders of one workload can share them through `shared`."""
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
        self.segments: dict[SegmentKey, Segment] = {}
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
        terms = self._row_terms(start, stop, tiles)
        floor = terms.floor()
        picks = {int(np.argmax(v)) for v in (floor, *terms.corners())}
        picks.add(terms.n - 1)
        last = stop < len(self.order)  # a next FLG prefetches into the last tile
        rows = tuple(terms.row(q, last and q == terms.n - 1) for q in sorted(picks))
        return int(floor.max()), rows

    def _row_terms(self, start: int, stop: int, tiles: FlgTiles) -> _RowTerms:
        """The parts of the buffer rows of positions start..stop-1 (see _buffer_rows)."""
        wl = self.lowerer.workload
        layers = self.order[start:stop]
        width = len(layers)
        n = tiles.grid.count * width
        local = {v: range(k, n, width) for k, v in enumerate(layers)}
        terms = _RowTerms(n, np.zeros(n, dtype=np.int64), self.ofmap)
        diff = np.zeros(n + 1, dtype=np.int64)  # weights and held regions, as differences
        for name in layers:
            self._add_layer_terms(terms, diff, name, local, tiles)
        terms.base += np.cumsum(diff)[:n]
        if stop < len(self.order) and wl.layers[self.order[stop]].has_weights:
            terms.base[n - 1] += wl.weight_bytes(self.order[stop])  # prefetched by the next FLG
        terms.span = self._spanning(start, stop)
        for u in terms.loaded:
            last = max(local[v][-1] for v in wl.consumers(u) if v in local)
            terms.held[u] = np.where(np.arange(n) <= last, self.ofmap[u], 0)
            later = [self.pos[v] for v in wl.consumers(u) if self.pos[v] >= stop]
            if later and last < n - 1:
                terms.span_tail.append(((u, self.order[min(later)]), last + 1))
        return terms

    def _add_layer_terms(self, terms: _RowTerms, diff: np.ndarray, name: str,
                         local: dict[str, range], tiles: FlgTiles) -> None:
        """Adds layer `name`'s weights, held regions, network-input loads, loads from
        earlier FLGs and, with consumers after the FLG, its shares to `terms` (bytes per
        local tile; `diff`: differences of what is live over a range of tiles)."""
        wl = self.lowerer.workload
        eb = wl.elem_bytes
        layer = wl.layers[name]
        n = terms.n
        qs = local[name]
        channels = layer.out.c
        inside = [v for v in wl.consumers(name) if v in local]
        after = [v for v in wl.consumers(name) if v not in local]
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
                if elems is None or src in local:
                    continue
                if src in wl.layers:
                    target = terms.loaded.setdefault(src, np.zeros(n, dtype=np.int64))
                    terms.load_edge.setdefault(src, (src, name))
                else:
                    target = terms.base
                target[max(q - 1, 0):q + 1] += elems * eb
        if name in wl.outputs:
            terms.base += store
        if after:
            first = min(after, key=self.pos.__getitem__)
            terms.own.append(((name, first), np.cumsum(agg)[:n], store, name in wl.outputs))

    def tally(self, lfa: Lfa) -> Tally:
        """Compute cycles, DRAM bytes, energy (pJ) and DRAM cycles of `lfa` (same order)
        by the model's accounting; raises KeyError when one of its FLGs is not a candidate."""
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
            elif crosses(cuts, self.pos[u], self.last_use[u]):
                dram += self.ofmap[u]
                dram_cycles += seg_of[self.pos[u]].store_cycles[u]
        for u, v in self.edges:
            if crosses(cuts, self.pos[u], self.pos[v]):
                dram += seg_of[self.pos[v]].loads.get((u, v), 0)
                dram_cycles += seg_of[self.pos[v]].load_cycles.get((u, v), 0)
        return Tally(sum(s.compute_cycles for s in segs), dram,
                     sum(s.energy_pj for s in segs)
                     + dram * self.lowerer.hw.dram.energy_pj_per_byte, dram_cycles)


@dataclasses.dataclass
class _RowTerms:
    """The parts of an FLG's buffer rows, each per local tile (bytes; see
    SegmentTable._buffer_rows)."""

    n: int
    """Tiles of the FLG."""
    base: np.ndarray
    """Bytes live whatever the DRAM cuts."""
    ofmap: dict[str, int]
    """The table's ofmap bytes per layer."""
    loaded: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    """Per input u from an earlier FLG, its loads if u -> v crosses a DRAM cut."""
    load_edge: dict[str, Edge] = dataclasses.field(default_factory=dict)
    """The edge of those loads (v: the first layer of the FLG that reads u)."""
    held: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    """Per such u, its whole ofmap up to the last tile reading it, if it stays on chip."""
    own: list[tuple[Edge, np.ndarray, np.ndarray, bool]] = dataclasses.field(
        default_factory=list)
    """Per layer with consumers after the FLG: (the edge to its first later consumer,
    its shares aggregated so far, its stored shares, whether it is a network output)."""
    span: list[Edge] = dataclasses.field(default_factory=list)
    """Ofmaps of earlier FLGs kept on chip across the FLG (`_spanning`)."""
    span_tail: list[tuple[Edge, int]] = dataclasses.field(default_factory=list)
    """Inputs read here and kept on chip for a later FLG: (edge, from this local tile)."""

    def floor(self) -> np.ndarray:
        """Per tile, the least occupancy over every DRAM cut and store choice (bytes)."""
        zero = np.zeros(self.n, dtype=np.int64)
        return (self.base
                + sum((np.minimum(self.loaded[u], self.held[u]) for u in self.loaded), zero)
                + sum((np.minimum(agg, st) for _, agg, st, out in self.own if not out), zero))

    def corners(self) -> tuple[np.ndarray, ...]:
        """Per tile, the occupancy (bytes) with inputs loaded or on chip x outputs stored
        or kept on chip."""
        n = self.n
        zero = np.zeros(n, dtype=np.int64)
        tail = sum((np.where(np.arange(n) >= q0, self.ofmap[e[0]], 0)
                    for e, q0 in self.span_tail), zero)
        loaded = sum(self.loaded.values(), zero)
        held = (sum(self.held.values(), zero) + sum(self.ofmap[u] for u, _ in self.span)
                + tail)
        kept = sum((agg for _, agg, _, _ in self.own), zero)
        stored = sum((st for _, _, st, out in self.own if not out), zero)
        base = self.base
        return (base + loaded + stored, base + loaded + kept, base + held + stored,
                base + held + kept)

    def row(self, q: int, prefetch: bool) -> BufferRow:
        """The buffer row of local tile q (`prefetch`: the next FLG's first-tile loads
        are live there too)."""
        edges = [(self.load_edge[u], int(self.loaded[u][q]), int(self.held[u][q]))
                 for u in self.loaded]
        edges += [(e, 0, self.ofmap[e[0]]) for e in self.span]
        edges += [(e, 0, self.ofmap[e[0]]) for e, q0 in self.span_tail if q >= q0]
        edges += [(e, 0, int(agg[q])) for e, agg, _, _ in self.own]
        stores = [(e[0], int(st[q])) for e, _, st, out in self.own if not out and st[q]]
        return BufferRow(q, int(self.base[q]), tuple(x for x in edges if x[1] or x[2]),
                         tuple(stores), prefetch)


def _fit_floor(wl: Workload, plan) -> int:
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


def crosses(cuts: list[int], lo: int, hi: int) -> bool:
    """Whether one of the DRAM cuts (boundaries k) lies in lo < k <= hi (positions)."""
    return any(lo < k <= hi for k in cuts)



def flg_keys(lfa: Lfa) -> list[SegmentKey]:
    """The segment keys (start, stop, tiling number) of `lfa`'s FLGs, in order."""
    return [(a, b, t) for (a, b), t in zip(lfa.flg_bounds(), lfa.tiling, strict=True)]


def unfused_tally(table: SegmentTable) -> Tally:
    """Figures of every layer its own FLG and LG at the smallest candidate tiling (a
    scale for the "edp" objective; cycles, bytes, pJ)."""
    n = len(table.order)
    tiling = []
    for p in range(n):
        options = [t for (a, b, t) in table.segments if a == p and b == p + 1]
        if not options:
            return Tally(1, 0, 1.0, 0)
        tiling.append(min(options))
    cuts = tuple(range(1, n))
    return table.tally(Lfa(table.order, cuts, tuple(tiling), cuts))
