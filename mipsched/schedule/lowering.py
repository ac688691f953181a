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
- Memoised per FLG (its plan) and per FLG and traffic (its segment), see placement; per
  LFA, lowering places the segments one after another (`Lowerer.place`) and numbers
  what they hold.
- Precedence: each load of stored data comes after every store whose share it reads.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from functools import cached_property

from mipsched.cost import NoMappingError, TileCost, tile_cost
from mipsched.hw.model import Hardware
from mipsched.schedule.notation import Lfa, ScheduleError
from mipsched.schedule.placement import (
    Column,
    FlgPlan,
    Placement,
    assemble_plan,
    cross_flg_holds,
    lg_crossings,
    make_segment,
    unchanged_before,
)
from mipsched.schedule.tile_program import (
    DramTensor,
    EnergyParts,
    TensorKind,
    Tile,
    TileProgram,
    WorkloadTotals,
)
from mipsched.schedule.tiling import (
    MAX_TILES,
    FlgTiles,
    LayerTiles,
    TileGrid,
    TilingMemo,
    tile_flg,
)
from mipsched.schedule.validity import check_lfa
from mipsched.workload.graph import Workload
from mipsched.workload.layer import Region


class Lowerer:
    """Lowers LFAs of one workload on one hardware; memoises each FLG's tiles and costs
    (keyed by its layers and tiling number), so a search that revisits FLGs is fast."""

    def __init__(self, workload: Workload, hw: Hardware) -> None:
        self.workload = workload
        self.hw = hw
        self._plans: dict[tuple[tuple[str, ...], int], FlgPlan] = {}
        self._costs: dict[tuple, tuple[TileCost, EnergyParts]] = {}
        self._overlaps: dict[tuple[str, TileGrid, Region], list[int]] = {}
        self._tilings = TilingMemo()
        self._columns: dict[LayerTiles, Column] = {}
        self._layer_index = {n: i for i, n in enumerate(workload.layers)}
        self._weights = {n: workload.weight_bytes(n) for n, lay in workload.layers.items()
                         if lay.has_weights}

    @cached_property
    def unit_cycles(self) -> float:
        """The network's unit_cycles on this hardware (SoMa's dream time, cycles)."""
        return unit_cycles(self.workload, self.hw)

    def plan(self, layers: tuple[str, ...], tiling: int, remember: bool = True) -> FlgPlan:
        """The FLG's plan, memoised unless `remember` is False (a caller that summarises
        thousands of FLGs once each, with up to thousands of tiles each, would otherwise
        hold gigabytes of tile regions). ScheduleError when the FLG has more than
        MAX_TILES tiles or its tiling number does not divide its work."""
        key = (layers, tiling)
        plan = self._plans.get(key)
        if plan is None:
            if tiling * len(layers) > MAX_TILES:
                raise ScheduleError(_too_many_tiles(tiling * len(layers), layers, tiling,
                                                    False))
            plan = self._make_plan(layers, tiling, remember)
            if remember:
                self._plans[key] = plan
        return plan

    def _make_plan(self, layers: tuple[str, ...], tiling: int, remember: bool) -> FlgPlan:
        """Everything about an FLG that does not depend on the rest of the LFA: tiles,
        costs, bytes, and on-chip holds at positions relative to its first tile. (FLGs
        with the same layers from some layer on share that layer's tiles and costs:
        memoised when `remember`.)"""
        tiles = tile_flg(self.workload, layers, tiling, self._tilings if remember else None)
        columns = [self._column(n, tiles, remember) for n in layers]
        return assemble_plan(self.workload, layers, tiles, columns)

    def _column(self, name: str, tiles: FlgTiles, remember: bool) -> Column:
        """A layer's tiles in an FLG as the plan needs them (memoised with its tiles)."""
        layer_tiles = tiles.layer(name)
        column = self._columns.get(layer_tiles)
        if column is not None:
            return column
        eb = self.workload.elem_bytes
        channels = self.workload.layers[name].out.c
        index = self._layer_index[name]
        figures = [self._cost(name, r) for r in layer_tiles.produced]
        column = Column(
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
        number does not divide its FLG's work or the LFA has more than MAX_TILES tiles
        (tiling number x layers, summed over its FLGs). (Stage 1 of the SA places thousands of
        LFAs: per-layer work runs in C, in itertools and map; Python loops run per FLG.)"""
        starts = (0, *lfa.flc)
        stops = (*lfa.flc, len(lfa.order))
        if sum(lfa.tiling) * len(lfa.order) > MAX_TILES:  # a quick bound on the tiles
            _check_tiles(lfa, starts, stops)
        g0 = 0
        if previous is not None:
            g0 = bisect.bisect_right(stops, unchanged_before(previous.lfa, lfa))
        plans = self._flg_plans(lfa, g0, remember)
        bases = [*previous.bases, previous.n_tiles][:g0 + 1] if previous is not None else [0]
        bases.extend(itertools.accumulate(map(len, map(operator.attrgetter("steps"), plans)),
                                          initial=bases.pop()))
        n_tiles = bases.pop()
        lg_ends, keys = lg_crossings(lfa, plans, starts, g0)
        segments = previous.segments[:g0] if previous is not None else []
        for plan, key in zip(plans, keys, strict=True):
            segment = plan.segments.get(key)
            if segment is None:
                segment = make_segment(plan, key, self._weights,
                                       self.hw.dram.bytes_per_cycle)
                if remember:
                    plan.segments[key] = segment
            segments.append(segment)
        holds = cross_flg_holds(lfa.order[starts[g0]:] if plans else (), plans, segments,
                                bases, n_tiles, g0,
                                previous.holds if previous is not None else [])
        return Placement(lfa, segments, bases, lg_ends, holds, n_tiles, g0)

    def _flg_plans(self, lfa: Lfa, g0: int, remember: bool) -> list[FlgPlan]:
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

    def lower(self, lfa: Lfa, check: bool = True, remember: bool = True) -> TileProgram:
        """The tile program of `lfa`; with `check`, the LFA is validated first (unchecked
        LFAs must be valid too; lowering relies on every FLG lying inside one LG).
        `remember` as in `plan`."""
        if check:
            check_lfa(self.workload, lfa)
        return self.lower_placed(self.place(lfa, remember))

    def lower_placed(self, placed: Placement) -> TileProgram:
        """The tile program of an LFA placed by `place`."""
        wl = self.workload
        lg = 0
        tiles = []
        for g, (segment, base) in enumerate(zip(placed.segments, placed.bases,
                                               strict=True)):
            tiles.extend(Tile(p, index, n, i, cycles, energy, lg, g, parts)
                         for p, (n, index, i, cycles, energy, parts) in enumerate(
                             segment.plan.steps, base))
            lg += placed.lg_ends[g]
        tensors, precedence = self._dram_tensors(placed)
        local = itertools.chain.from_iterable(s.onchip for s in placed.segments)
        onchip = list(map(operator.add, local, placed.held_bytes))
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


_NO_ENERGY = EnergyParts(0.0, 0.0, 0.0, 0.0)


def _check_tiles(lfa: Lfa, starts: tuple[int, ...], stops: tuple[int, ...]) -> None:
    """Raises ScheduleError when `lfa` (its FLGs from `starts` to `stops`) has more than
    MAX_TILES tiles: tiling number x layers, summed over its FLGs."""
    tiles = sum(map(operator.mul, lfa.tiling, map(operator.sub, stops, starts)))
    if tiles > MAX_TILES:
        a, b, t = max(zip(starts, stops, lfa.tiling, strict=False),
                      key=lambda flg: flg[2] * (flg[1] - flg[0]))
        raise ScheduleError(_too_many_tiles(tiles, lfa.order[a:b], t, True))


def _too_many_tiles(tiles: int, layers: tuple[str, ...], tiling: int, lfa: bool) -> str:
    """The message of an LFA (`lfa`) or FLG of `tiles` tiles past MAX_TILES, naming the
    FLG (of an LFA, its largest) of `layers` at `tiling`."""
    n = len(layers)
    flg = (f"FLG [{layers[0]} .. {layers[-1]}]: tiling number {tiling:,} x {n} "
           f"layer{'s' * (n != 1)}")
    what = (f"the LFA has {tiles:,} tiles (tiling number x layers, summed over its FLGs; "
            f"the largest, {flg})" if lfa else f"{flg} = {tiles:,} tiles")
    return f"{what}, more than the cap of {MAX_TILES:,} per tile program"


def _parts(cost: TileCost) -> EnergyParts:
    """The energy breakdown of a tile's cost (pJ): MACs, core buffers and NoC, GBUF,
    vector unit."""
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
