"""Lowering: (workload, hardware, LFA) -> tile program (DESIGN §3-4, SoMa §IV-A).

- Tiles: FLG by FLG, tile i of every layer of the FLG in computing order, then tile i+1.
- DRAM tensors, created in tile order: for each tile, one `load_ifmap` per input that is
  a network input or comes from another LG (the region the tile reads), the layer's
  `load_weight` at its first tile (it lives until its last tile of the FLG), and a
  `store_ofmap` of the tile's share of the ofmap when a consumer lies in another LG or the
  layer is a network output.
- On-chip bytes: an ofmap read inside its FLG lives from the producing tile to the last
  tile of the same index that reads it; an ofmap read by a later FLG of the same LG is
  aggregated on chip (its share per tile) until the last tile of its last consumer.
- What depends only on an FLG's layers and tiling number (tiles, costs, bytes, on-chip
  holds inside the FLG) is memoised per FLG (its plan); what also depends on which of its
  ofmaps and inputs cross its LG's boundary (its DRAM tensors and the on-chip holds of
  ofmaps read by later FLGs of the LG, in positions relative to its first tile) is
  memoised per FLG and traffic (its segment). Per LFA, lowering places the segments one
  after another (`Lowerer.place`) and numbers what they hold; stage 1 of the SA times a
  placement without building the tile program (default_eval).
- Precedence: each load of stored data comes after every store whose share it reads.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from mipsched.cost import NoMappingError, TileCost, tile_cost
from mipsched.hw.model import Hardware
from mipsched.schedule.notation import Lfa, ScheduleError
from mipsched.schedule.tile_program import (
    DramTensor,
    EnergyParts,
    TensorKind,
    Tile,
    TileProgram,
    WorkloadTotals,
)
from mipsched.schedule.tiling import FlgTiles, LayerTiles, TileGrid, TilingMemo, tile_flg
from mipsched.schedule.validity import check_lfa
from mipsched.workload.graph import Workload
from mipsched.workload.layer import Region


@dataclass(frozen=True, eq=False)
class _FlgPlan:
    layers: tuple[str, ...]
    tiles: FlgTiles
    costs: dict[str, list[TileCost | None]]
    steps: list[tuple[str, int, int, int, float, EnergyParts]]
    """The FLG's tiles in execution order: (layer, layer index, tile index, cycles, pJ,
    energy breakdown)."""
    share_bytes: dict[str, list[int]]
    """Bytes of each tile's share of the layer's ofmap."""
    read_bytes: dict[str, list[tuple[int | None, ...]]]
    """Bytes each tile reads from each input (None: nothing)."""
    local_onchip: list[int]
    """Bytes of ofmaps held on chip for consumers inside the FLG, per step (relative tile
    position): a tile's output lives from its step to the last step of the same tile index
    that reads it."""
    held_from: dict[str, list[int]]
    """Per layer and tile index, the first step (relative position) from which the tile's
    share is held for consumers in later FLGs of its LG: after its local consumers, if
    any, else from its own step."""
    readers_outside: tuple[tuple[int, str], ...]
    """(step, consumer) of every consumer outside the FLG, by step."""
    sources_outside: tuple[tuple[int, int, str], ...]
    """(step, input index, source) of every input from outside the FLG (network inputs
    and ofmaps of earlier FLGs), by step."""
    output_steps: tuple[int, ...]
    """Steps of the network outputs."""
    neighbours: tuple[str, ...]
    """The layers outside the FLG it reads or that read it."""
    last_steps: tuple[int, ...]
    """Per layer, the step of its last tile."""
    all_inside: tuple[bool, ...]
    """The key of the segment whose neighbours all lie in its LG."""
    segments: dict[tuple[bool, ...], Segment] = field(default_factory=dict)
    """The FLG's segments met so far, by which neighbours lie in its LG (memoised with
    the plan)."""


class Traffic(NamedTuple):
    """What crosses an FLG's boundary in one LFA, by step (the layer's index in the FLG):
    the inputs it loads from DRAM (network inputs, ofmaps of other LGs), the ofmaps it
    stores (read by another LG, or network outputs) and the ofmaps it holds on chip for
    later FLGs of its LG."""

    loaded: tuple[tuple[int, int], ...]
    """(step, input index) of every loaded input."""
    stored: tuple[int, ...]
    held: tuple[int, ...]


class Transfer(NamedTuple):
    """A DRAM tensor of a segment, positions relative to the FLG's first tile."""

    kind: TensorKind
    step: int
    tile: int | None
    bytes: int
    access_cycles: int
    first_use: int
    """Loads: the first consuming tile (-1 for stores)."""
    last_use: int
    producer: int
    """Stores: the producing tile (-1 for loads)."""
    input_index: int
    """Ifmap loads: which input of the layer (-1 otherwise)."""


@dataclass(frozen=True, eq=False)
class Segment:
    """One FLG under one traffic: its DRAM tensors in tile order and its on-chip bytes per
    tile, relative to its first tile (memoised: an LFA is a sequence of segments)."""

    plan: _FlgPlan
    traffic: Traffic
    transfers: list[Transfer]
    onchip: list[int]
    """On-chip bytes per tile of the FLG: ofmaps held for consumers inside it, plus the
    shares already produced of the ofmaps it holds for later FLGs of its LG."""
    held: tuple[tuple[tuple[str, ...], int], ...]
    """Per held step (traffic.held), its readers in later FLGs of the LG and the bytes of
    its whole ofmap, held from the FLG's end to the last tile of the last of them."""


#: An ofmap held on chip for later FLGs of its LG, from the end of its FLG (the shares
#: before are in the segment's on-chip bytes): (first tile, last tile, bytes, readers).
Hold = tuple[int, int, int, tuple[str, ...]]


@dataclass(frozen=True)
class Placement:
    """An LFA's segments one after another: where each starts and which end an LG, and
    the ofmaps held on chip across FLGs."""

    lfa: Lfa
    segments: list[Segment]
    bases: list[int]
    """First tile position of each FLG."""
    lg_ends: list[bool]
    """Whether each FLG is the last of its LG."""
    holds: list[Hold]
    """By first tile."""
    n_tiles: int
    reused: int = 0
    """How many leading FLGs were taken from the placement it was derived from."""


@dataclass(frozen=True)
class _Column:
    """One layer's tiles in an FLG: costs, steps (as in _FlgPlan.steps), bytes of each
    tile's share, of what it reads from each input and of what it produces."""

    costs: list[TileCost | None]
    steps: list[tuple[str, int, int, int, float, EnergyParts]]
    share_bytes: list[int]
    read_bytes: list[tuple[int | None, ...]]
    produced_bytes: list[int]


class Lowerer:
    """Lowers LFAs of one workload on one hardware; memoises each FLG's tiles and costs
    (keyed by its layers and tiling number), so a search that revisits FLGs is fast."""

    def __init__(self, workload: Workload, hw: Hardware) -> None:
        self.workload = workload
        self.hw = hw
        self._plans: dict[tuple[tuple[str, ...], int], _FlgPlan] = {}
        self._costs: dict[tuple, tuple[TileCost, EnergyParts]] = {}
        self._overlaps: dict[tuple[str, TileGrid, Region], list[int]] = {}
        self._tilings = TilingMemo()
        self._columns: dict[LayerTiles, _Column] = {}
        self._layer_index = {n: i for i, n in enumerate(workload.layers)}
        self._weights = {n: workload.weight_bytes(n) for n, lay in workload.layers.items()
                         if lay.has_weights}

    @cached_property
    def unit_cycles(self) -> float:
        """The network's unit_cycles on this hardware (SoMa's dream time, cycles)."""
        return unit_cycles(self.workload, self.hw)

    def plan(self, layers: tuple[str, ...], tiling: int, remember: bool = True) -> _FlgPlan:
        """The FLG's plan, memoised unless `remember` is False (a caller that summarises
        thousands of FLGs once each, with up to thousands of tiles each, would otherwise
        hold gigabytes of tile regions)."""
        key = (layers, tiling)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._make_plan(layers, tiling, remember)
            if remember:
                self._plans[key] = plan
        return plan

    def _make_plan(self, layers: tuple[str, ...], tiling: int, remember: bool) -> _FlgPlan:
        """Everything about an FLG that does not depend on the rest of the LFA: tiles,
        costs, bytes, and on-chip holds at positions relative to its first tile. (FLGs
        with the same layers from some layer on share that layer's tiles and costs:
        memoised when `remember`.)"""
        tiles = tile_flg(self.workload, layers, tiling, self._tilings if remember else None)
        columns = [self._column(n, tiles, remember) for n in layers]
        count = tiles.grid.count
        steps = [column.steps[i] for i in range(count) for column in columns]
        wl = self.workload
        # steps run tile index by tile index, layer by layer: tile i of layers[j] is step
        # i * len(layers) + j
        width = len(layers)
        step_of = {n: j for j, n in enumerate(layers)}
        diff = [0] * (count * width + 1)
        held_from: dict[str, list[int]] = {}
        for j, (n, column) in enumerate(zip(layers, columns, strict=True)):
            last_reader = max((step_of[v] for v in wl.consumers(n) if v in step_of),
                              default=None)
            starts = list(range(j, count * width, width))
            if last_reader is not None:
                for i, produced in enumerate(column.produced_bytes):
                    if produced:
                        step = i * width + j
                        diff[step] += produced
                        diff[i * width + last_reader + 1] -= produced
                        starts[i] = i * width + last_reader + 1
            held_from[n] = starts
        local = list(itertools.accumulate(diff[:-1]))
        readers = tuple((j, v) for j, n in enumerate(layers) for v in wl.consumers(n)
                        if v not in step_of)
        sources = tuple((j, k, src) for j, n in enumerate(layers)
                        for k, src in enumerate(wl.layers[n].inputs) if src not in step_of)
        outputs = tuple(j for j, n in enumerate(layers) if n in wl.outputs)
        neighbours = tuple(dict.fromkeys([*(v for _, v in readers), *(
            src for _, _, src in sources if src in wl.layers)]))
        last_steps = tuple(range((count - 1) * width, count * width))
        return _FlgPlan(layers, tiles, {n: c.costs for n, c in zip(layers, columns,
                                                                   strict=True)},
                        steps, {n: c.share_bytes for n, c in zip(layers, columns, strict=True)},
                        {n: c.read_bytes for n, c in zip(layers, columns, strict=True)},
                        local, held_from, readers, sources, outputs, neighbours, last_steps,
                        (True,) * len(neighbours))

    def _column(self, name: str, tiles: FlgTiles, remember: bool) -> _Column:
        """A layer's tiles in an FLG as the plan needs them (memoised with its tiles)."""
        layer_tiles = tiles.layer(name)
        column = self._columns.get(layer_tiles)
        if column is not None:
            return column
        eb = self.workload.elem_bytes
        channels = self.workload.layers[name].out.c
        index = self._layer_index[name]
        figures = [self._cost(name, r) for r in layer_tiles.produced]
        column = _Column(
            [f[0] if f else None for f in figures],
            [(name, index, i, f[0].cycles, f[0].energy_pj, f[1]) if f else
             (name, index, i, 0, 0.0, _NO_ENERGY) for i, f in enumerate(figures)],
            [r.elems(channels) * eb for r in layer_tiles.share],
            [tuple(None if e is None else e * eb for e in es) for es in layer_tiles.read_elems],
            [0 if r is None else r.elems(channels) * eb for r in layer_tiles.produced])
        if remember:
            self._columns[layer_tiles] = column
        return column

    def _cost(self, name: str, region: Region | None
              ) -> tuple[TileCost, EnergyParts] | None:
        """Tile cost and its energy breakdown, memoised here on what they depend on: the
        layer and the extents of its output region (hardware and workload are fixed per
        Lowerer)."""
        if region is None:
            return None
        key = (name, region.batch, region.height, region.width)
        found = self._costs.get(key)
        if found is None:
            wl = self.workload
            try:
                cost = tile_cost(self.hw, wl.layers[name], wl.in_shapes(name), region,
                                 wl.elem_bytes)
            except NoMappingError as err:
                raise ScheduleError(f"layer '{name}': a tile of {region.batch} x "
                                    f"{region.height} x {region.width} cannot be mapped: "
                                    f"{err}") from None
            found = self._costs[key] = (cost, _parts(cost))
        return found

    def _stores_read(self, src: str, grid: TileGrid, region: Region) -> list[int]:
        """Tile indices of `src` (tiled by `grid`) whose stored share `region` reads."""
        key = (src, grid, region)
        hit = self._overlaps.get(key)
        if hit is None:
            shape = self.workload.layers[src].out
            hit = self._overlaps[key] = grid.overlapping(region, self.workload.batch,
                                                         shape.h, shape.w)
        return hit

    def place(self, lfa: Lfa, remember: bool = True, previous: Placement | None = None
              ) -> Placement:
        """The segments of `lfa` placed one after another (`remember` as in `plan`);
        the FLGs before the first one that can differ from `previous` (a placement of an
        LFA it was derived from) are taken from it. Raises ScheduleError when a tiling
        number does not divide its FLG's work. (Stage 1 of the SA places thousands of
        LFAs: per-layer work runs in C, in itertools and map; Python loops run per FLG.)"""
        starts = (0, *lfa.flc)
        stops = (*lfa.flc, len(lfa.order))
        g0 = 0
        if previous is not None:
            g0 = bisect.bisect_right(stops, unchanged_before(previous.lfa, lfa))
        plans = self._flg_plans(lfa, g0, remember)
        bases = [*previous.bases, previous.n_tiles][:g0 + 1] if previous is not None else [0]
        bases.extend(itertools.accumulate(map(len, map(operator.attrgetter("steps"), plans)),
                                          initial=bases.pop()))
        n_tiles = bases.pop()
        lg_ends, keys = _crossings(lfa, plans, starts, g0)
        segments = previous.segments[:g0] if previous is not None else []
        for plan, key in zip(plans, keys, strict=True):
            segment = plan.segments.get(key)
            if segment is None:
                segment = self._segment(plan, key)
                if remember:
                    plan.segments[key] = segment
            segments.append(segment)
        holds = _holds(lfa.order[starts[g0]:] if plans else (), plans, segments, bases,
                       n_tiles, g0, previous.holds if previous is not None else [])
        return Placement(lfa, segments, bases, lg_ends, holds, n_tiles, g0)

    def _flg_plans(self, lfa: Lfa, g0: int, remember: bool) -> list[_FlgPlan]:
        """The plans of the FLGs of `lfa` from FLG g0 on."""
        order = lfa.order
        starts = (0, *lfa.flc)[g0:]
        stops = (*lfa.flc, len(order))[g0:]
        tilings = lfa.tiling[g0:]
        plans = list(map(self._plans.get, zip(map(order.__getitem__, map(
            slice, starts, stops)), tilings, strict=True)))
        if None in plans:
            plans = [plan if plan is not None else self.plan(order[a:b], t, remember)
                     for plan, a, b, t in zip(plans, starts, stops, tilings, strict=True)]
        return plans

    def _segment(self, plan: _FlgPlan, inside: tuple[bool, ...]) -> Segment:
        """The DRAM tensors of `plan` when its neighbours lie in its LG as `inside` says,
        in tile order (per tile: its ifmap loads, its weights at the layer's first tile,
        its store), and its on-chip bytes."""
        in_lg = dict(zip(plan.neighbours, inside, strict=True))
        loaded = tuple((j, k) for j, k, src in plan.sources_outside
                       if not in_lg.get(src, False))  # network inputs are loaded
        stored = set(plan.output_steps)
        readers: dict[int, list[str]] = {}  # per held step, its readers in the LG
        for j, v in plan.readers_outside:
            if in_lg[v]:
                readers.setdefault(j, []).append(v)
            else:
                stored.add(j)
        traffic = Traffic(loaded, tuple(sorted(stored)), tuple(sorted(readers)))
        bpc = self.hw.dram.bytes_per_cycle
        layers = plan.layers
        width = len(layers)
        count = plan.tiles.grid.count
        loads: dict[int, list[int]] = {}
        for j, k in traffic.loaded:
            loads.setdefault(j, []).append(k)
        stored = set(traffic.stored)
        moving = sorted({*loads, *stored, *(j for j, n in enumerate(layers)
                                            if n in self._weights)})
        transfers = []
        for i in range(count):
            for j in moving:
                n = layers[j]
                p = i * width + j
                for k in loads.get(j, ()):
                    size = plan.read_bytes[n][i][k]
                    if size is not None:
                        transfers.append(Transfer(TensorKind.LOAD_IFMAP, j, i, size,
                                                  -(-size // bpc), p, p, -1, k))
                if i == 0 and n in self._weights:
                    size = self._weights[n]
                    transfers.append(Transfer(TensorKind.LOAD_WEIGHT, j, None, size,
                                              -(-size // bpc), j, (count - 1) * width + j,
                                              -1, -1))
                if j in stored:
                    size = plan.share_bytes[n][i]
                    transfers.append(Transfer(TensorKind.STORE_OFMAP, j, i, size,
                                              -(-size // bpc), -1, -1, p, -1))
        diff = [0] * (count * width + 1)
        held = []
        for j in traffic.held:
            shares = plan.share_bytes[layers[j]]
            for start, size in zip(plan.held_from[layers[j]], shares, strict=True):
                diff[start] += size
            held.append((tuple(readers[j]), sum(shares)))
        onchip = list(map(operator.add, plan.local_onchip, itertools.accumulate(diff[:-1])))
        return Segment(plan, traffic, transfers, onchip, tuple(held))

    def lower(self, lfa: Lfa, check: bool = True, remember: bool = True) -> TileProgram:
        """The tile program of `lfa`; with `check`, the LFA is validated first (unchecked
        LFAs must be valid too; lowering relies on every FLG lying inside one LG).
        `remember` as in `plan`."""
        wl = self.workload
        if check:
            check_lfa(wl, lfa)
        placed = self.place(lfa, remember)
        lg = 0
        tiles = []
        for g, (segment, base) in enumerate(zip(placed.segments, placed.bases,
                                               strict=True)):
            tiles.extend(Tile(p, index, n, i, cycles, energy, lg, g, parts)
                         for p, (n, index, i, cycles, energy, parts) in enumerate(
                             segment.plan.steps, base))
            lg += placed.lg_ends[g]
        tensors, precedence = self._dram_tensors(placed)
        later = [0] * (placed.n_tiles + 1)
        for after, end, size, _ in placed.holds:
            later[after] += size
            later[end + 1] -= size
        local = itertools.chain.from_iterable(s.onchip for s in placed.segments)
        onchip = list(map(operator.add, local, itertools.accumulate(later[:-1])))
        totals = WorkloadTotals(wl.name, wl.batch, wl.total_macs, wl.total_ops,
                                wl.total_weight_bytes, self.hw.peak_ops_per_cycle,
                                self.unit_cycles)
        return TileProgram(
            name=f"{wl.name}-{self.hw.name}-b{wl.batch}",
            dram_bytes_per_cycle=self.hw.dram.bytes_per_cycle,
            buffer_capacity_bytes=self.hw.gbuf.capacity_bytes,
            dram_energy_pj_per_byte=self.hw.dram.energy_pj_per_byte,
            tiles=tiles,
            onchip_before_first_tile=0,
            onchip_per_tile=onchip,
            tensors=tensors,
            precedence=precedence,
            static_pj_per_cycle=self.hw.static_pj_per_cycle,
            totals=totals,
            source={"tool": "mipsched", "network": wl.name, "batch": wl.batch,
                    "hardware": self.hw.name},
        )

    def _dram_tensors(self, placed: Placement
                      ) -> tuple[list[DramTensor], list[tuple[int, int]]]:
        """The segments' DRAM tensors numbered in tile order, and the store -> load
        precedence: each load of stored data after every store whose share it reads."""
        n_tiles = placed.n_tiles
        tensors: list[DramTensor] = []
        precedence: list[tuple[int, int]] = []
        stores_of: dict[str, tuple[list[int], TileGrid]] = {}  # store ids by tile index
        store = TensorKind.STORE_OFMAP
        for segment, base in zip(placed.segments, placed.bases, strict=True):
            plan = segment.plan
            for t in segment.transfers:
                n = plan.layers[t.step]
                tid = len(tensors)
                if t.kind == store:
                    p = base + t.producer
                    tensors.append(DramTensor(tid, store, self._layer_index[n], n, t.tile,
                                              t.bytes, t.access_cycles, -1, -1, p, p + 1,
                                              n_tiles))
                    stores_of.setdefault(n, ([], plan.tiles.grid))[0].append(tid)
                    continue
                first = base + t.first_use
                tensors.append(DramTensor(tid, t.kind, self._layer_index[n], n, t.tile,
                                          t.bytes, t.access_cycles, first,
                                          base + t.last_use, -1, -1, first))
                if t.kind == TensorKind.LOAD_IFMAP:
                    src = self.workload.layers[n].inputs[t.input_index]
                    if src in stores_of:
                        ids, grid = stores_of[src]
                        precedence.extend((ids[s], tid) for s in self._stores_read(
                            src, grid, plan.tiles.reads[n][t.tile][t.input_index]))
        return tensors, precedence


def _crossings(lfa: Lfa, plans: list[_FlgPlan], starts: tuple[int, ...], g0: int
               ) -> tuple[list[bool], list[tuple[bool, ...]]]:
    """Whether each FLG ends its LG, and for the FLGs from g0 on (`plans`) which of their
    neighbours lie in their LG (the key of their segment)."""
    cuts = lfa.dram_cuts
    if not cuts:
        return [False] * (len(starts) - 1) + [True], [plan.all_inside for plan in plans]
    order = lfa.order
    lg_at = list(itertools.chain.from_iterable(map(itertools.repeat, itertools.count(), map(
        operator.sub, (*cuts, len(order)), (0, *cuts)))))  # the LG of each position
    lg_of = dict(zip(order, lg_at, strict=True)).get
    flg_lg = list(map(lg_at.__getitem__, starts))
    lg_ends = [*map(operator.ne, flg_lg, flg_lg[1:]), True]
    keys = [tuple(map(operator.eq, map(lg_of, plan.neighbours), itertools.repeat(lg)))
            for plan, lg in zip(plans, flg_lg[g0:], strict=True)]
    return lg_ends, keys


def _holds(layers: tuple[str, ...], plans: list[_FlgPlan], segments: list[Segment],
           bases: list[int], n_tiles: int, g0: int, before: list[Hold]) -> list[Hold]:
    """The ofmaps held across FLGs: those of the FLGs before g0 from `before` (the
    placement the FLGs before g0 come from), their last tiles found again if a reader
    lies from FLG g0 on; then those of the FLGs from g0 on (`layers`, `plans`)."""
    last = dict(zip(layers, map(operator.add, itertools.chain.from_iterable(map(
        itertools.repeat, bases[g0:], map(len, map(operator.attrgetter("layers"), plans)))),
        itertools.chain.from_iterable(map(operator.attrgetter("last_steps"), plans))),
        strict=True))  # the last tile of each layer from FLG g0 on
    holds: list[Hold] = []
    if g0:
        # holds ending at FLG g0's first tile or later have a reader from FLG g0 on
        first = bases[g0] if g0 < len(bases) else n_tiles
        holds = before[:bisect.bisect_right(before, first, key=operator.itemgetter(0))]
        for k in itertools.compress(itertools.count(), map(
                operator.ge, map(operator.itemgetter(1), holds), itertools.repeat(first))):
            after, _, size, readers = holds[k]
            holds[k] = (after, max(map(last.get, readers, itertools.repeat(-1))), size,
                        readers)
    for segment, after in zip(segments[g0:], [*bases[1:], n_tiles][g0:], strict=True):
        for readers, size in segment.held:
            holds.append((after, max(map(last.__getitem__, readers)), size, readers))
    return holds


def unchanged_before(old: Lfa, new: Lfa) -> int:
    """An order position before which `old` and `new` have the same FLGs (layers and
    tiling numbers) in LGs of the same layers, so that they place the same segments there
    (the order's length: none differs)."""
    n = len(new.order)
    at = n
    if old.order is not new.order and old.order != new.order:
        lo = _first_difference(old.order, new.order)
        hi = n - _first_difference(old.order[::-1], new.order[::-1])
        cuts = new.dram_cuts
        lg = bisect.bisect_right(cuts, lo)  # the LG of position lo
        # the layers in [lo, hi) changed places; they stay in their LGs unless a cut
        # lies among them
        at = lo if lg == bisect.bisect_left(cuts, hi) else (0, *cuts)[lg]
    if old.flc != new.flc or old.tiling != new.tiling:
        g = _first_difference(old.flc, new.flc)  # FLGs before g have the same bounds
        g = min(g, _first_difference(old.tiling[:g + 1], new.tiling[:g + 1]))
        at = min(at, (0, *new.flc)[g])
    if old.dram_cuts != new.dram_cuts:
        k = _first_difference(old.dram_cuts, new.dram_cuts)
        at = min(at, (0, *new.dram_cuts)[k])  # the LG that splits or merges
    return at


def _first_difference(a: tuple, b: tuple) -> int:
    """The first index at which a and b differ (the shorter length if one starts the
    other)."""
    return next(itertools.compress(itertools.count(), map(operator.ne, a, b)),
                min(len(a), len(b)))


_NO_ENERGY = EnergyParts(0.0, 0.0, 0.0, 0.0)


def _parts(cost: TileCost) -> EnergyParts:
    return EnergyParts(cost.mac_pj, cost.local_pj + cost.noc_pj, cost.gbuf_pj, cost.vector_pj)


def lower(workload: Workload, hw: Hardware, lfa: Lfa) -> TileProgram:
    """One-shot lowering (use a Lowerer to lower many LFAs of one workload)."""
    return Lowerer(workload, hw).lower(lfa)


def unit_cycles(wl: Workload, hw: Hardware) -> float:
    """SoMa's "dream time" of the network (cycles): Σ over layers of the layer's work on
    its own unit at full rate, MACs / MACs per cycle (PE array) plus vector ops / vector
    ops per cycle (vector unit). Divided by a latency it is SoMa's utilisation."""
    macs = sum(wl.macs(name) for name in wl.layers)
    vector = sum(wl.vector_ops(name) for name in wl.layers)
    return macs / hw.core_array.macs_per_cycle + vector / hw.vector_unit.ops_per_cycle
