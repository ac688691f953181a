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
  holds inside the FLG) is memoised per FLG; per LFA, lowering places the FLGs and adds
  what crosses them (DRAM tensors, holds for later FLGs of the LG).
- Precedence: each load of stored data comes after every store whose share it reads.
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass

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
from mipsched.schedule.tiling import FlgTiles, TileGrid, tile_flg
from mipsched.schedule.validity import check_lfa
from mipsched.workload.graph import Workload
from mipsched.workload.layer import Region


@dataclass(frozen=True)
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
    readers_outside: dict[str, list[str]]
    """Per layer, its consumers outside the FLG."""
    sources_outside: dict[str, list[tuple[int, str]]]
    """Per layer, (input index, source) of its inputs from outside the FLG: network inputs
    and ofmaps of earlier FLGs."""


class Lowerer:
    """Lowers LFAs of one workload on one hardware; memoises each FLG's tiles and costs
    (keyed by its layers and tiling number), so a search that revisits FLGs is fast."""

    def __init__(self, workload: Workload, hw: Hardware) -> None:
        self.workload = workload
        self.hw = hw
        self._plans: dict[tuple[tuple[str, ...], int], _FlgPlan] = {}
        self._costs: dict[tuple, TileCost] = {}
        self._overlaps: dict[tuple[str, TileGrid, Region], list[int]] = {}
        self._layer_index = {n: i for i, n in enumerate(workload.layers)}
        self._weights = {n: workload.weight_bytes(n) for n, lay in workload.layers.items()
                         if lay.has_weights}

    def plan(self, layers: tuple[str, ...], tiling: int, remember: bool = True) -> _FlgPlan:
        """The FLG's plan, memoised unless `remember` is False (a caller that summarises
        thousands of FLGs once each, with up to thousands of tiles each, would otherwise
        hold gigabytes of tile regions)."""
        key = (layers, tiling)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._make_plan(layers, tiling)
            if remember:
                self._plans[key] = plan
        return plan

    def _make_plan(self, layers: tuple[str, ...], tiling: int) -> _FlgPlan:
        """Everything about an FLG that does not depend on the rest of the LFA: tiles,
        costs, bytes, and on-chip holds at positions relative to its first tile."""
        tiles = tile_flg(self.workload, layers, tiling)
        costs = {n: [self._cost(n, r) for r in tiles.produced[n]] for n in layers}
        count = tiles.grid.count
        steps = []
        for i in range(count):
            for n in layers:
                c = costs[n][i]
                steps.append((n, self._layer_index[n], i, c.cycles if c else 0,
                              c.energy_pj if c else 0.0, _parts(c) if c else _NO_ENERGY))
        wl = self.workload
        eb = wl.elem_bytes

        def size(region: Region | None, channels: int) -> int | None:
            return None if region is None else region.elems(channels) * eb

        share = {n: [size(r, wl.layers[n].out.c) for r in tiles.share[n]] for n in layers}
        reads = {n: [tuple(None if e is None else e * eb for e in es)
                     for es in tiles.read_elems[n]] for n in layers}
        # steps run tile index by tile index, layer by layer: tile i of layers[j] is step
        # i * len(layers) + j
        width = len(layers)
        step_of = {n: j for j, n in enumerate(layers)}
        diff = [0] * (count * width + 1)
        held_from: dict[str, list[int]] = {}
        for j, n in enumerate(layers):
            last_reader = max((step_of[v] for v in wl.consumers(n) if v in step_of),
                              default=None)
            channels = wl.layers[n].out.c
            starts = []
            for i, region in enumerate(tiles.produced[n]):
                step = i * width + j
                produced = size(region, channels) or 0
                if last_reader is not None and produced:
                    end = i * width + last_reader
                    diff[step] += produced
                    diff[end + 1] -= produced
                    starts.append(end + 1)
                else:
                    starts.append(step)
            held_from[n] = starts
        local = list(itertools.accumulate(diff[:-1]))
        readers = {n: [v for v in wl.consumers(n) if v not in step_of] for n in layers}
        sources = {n: [(k, src) for k, src in enumerate(wl.layers[n].inputs)
                       if src not in step_of] for n in layers}
        return _FlgPlan(layers, tiles, costs, steps, share, reads, local, held_from, readers,
                        sources)

    def _cost(self, name: str, region: Region | None) -> TileCost | None:
        """Tile cost, memoised here on what it depends on: the layer and the extents of
        its output region (hardware and workload are fixed per Lowerer)."""
        if region is None:
            return None
        key = (name, region.batch, region.height, region.width)
        cost = self._costs.get(key)
        if cost is None:
            wl = self.workload
            try:
                cost = tile_cost(self.hw, wl.layers[name], wl.in_shapes(name), region,
                                 wl.elem_bytes)
            except NoMappingError as err:
                raise ScheduleError(f"layer '{name}': a tile of {region.batch} x "
                                    f"{region.height} x {region.width} cannot be mapped: "
                                    f"{err}") from None
            self._costs[key] = cost
        return cost

    def _stores_read(self, src: str, grid: TileGrid, region: Region) -> list[int]:
        """Tile indices of `src` (tiled by `grid`) whose stored share `region` reads."""
        key = (src, grid, region)
        hit = self._overlaps.get(key)
        if hit is None:
            shape = self.workload.layers[src].out
            hit = self._overlaps[key] = grid.overlapping(region, self.workload.batch,
                                                         shape.h, shape.w)
        return hit

    def lower(self, lfa: Lfa, check: bool = True, remember: bool = True) -> TileProgram:
        """The tile program of `lfa`; with `check`, the LFA is validated first (unchecked
        LFAs must be valid too; lowering relies on every FLG lying inside one LG).
        `remember` as in `plan`."""
        wl = self.workload
        if check:
            check_lfa(wl, lfa)
        at = _Layout(lfa, [self.plan(lfa.order[a:b], t, remember) for (a, b), t in zip(
            lfa.flg_bounds(), lfa.tiling, strict=True)])
        tiles = [Tile(base + k, index, n, i, cycles, energy, lg, g, parts)
                 for g, (plan, base, lg) in enumerate(zip(at.plans, at.bases, at.flg_lg,
                                                          strict=True))
                 for k, (n, index, i, cycles, energy, parts) in enumerate(plan.steps)]
        traffic, later = self._traffic(at)
        tensors, precedence = self._dram_tensors(at, traffic)
        local = itertools.chain.from_iterable(plan.local_onchip for plan in at.plans)
        onchip = list(map(operator.add, local, itertools.accumulate(later[:-1])))
        totals = WorkloadTotals(wl.name, wl.batch, wl.total_macs, wl.total_ops,
                                wl.total_weight_bytes, self.hw.peak_ops_per_cycle)
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

    def _traffic(self, at: _Layout) -> tuple[list[_FlgTraffic], list[int]]:
        """Per FLG, its layers with DRAM traffic; and a difference array over tile
        positions of the ofmap shares read by later FLGs of the same LG, held on chip
        from the producing tile (or after its local readers) to the last tile of the last
        reader."""
        outputs = self.workload.outputs
        lg_of, last = at.lg_of, at.last
        later = [0] * (at.n_tiles + 1)
        traffic = []
        for plan, base, lg in zip(at.plans, at.bases, at.flg_lg, strict=True):
            at_first: list[_Traffic] = []  # at the FLG's first tile index
            at_others: list[_Traffic] = []
            for j, n in enumerate(plan.layers):
                store = n in outputs
                end = -1  # last tile of the last reader in a later FLG of the LG
                for v in plan.readers_outside[n]:
                    if lg_of[v] != lg:
                        store = True
                    elif last[v] > end:
                        end = last[v]
                if end >= 0:
                    shares = plan.share_bytes[n]
                    for start, size in zip(plan.held_from[n], shares, strict=True):
                        later[base + start] += size
                    later[end + 1] -= sum(shares)
                sources = plan.sources_outside[n]
                loaded = [(k, src) for k, src in sources
                          if src not in lg_of or lg_of[src] != lg] if sources else []
                weights = n in self._weights
                if loaded or weights or store:
                    at_first.append((j, n, loaded, weights, store))
                if loaded or store:
                    at_others.append(at_first[-1])
            traffic.append((at_first, at_others))
        return traffic, later

    def _dram_tensors(self, at: _Layout, traffic: list[_FlgTraffic]
                      ) -> tuple[list[DramTensor], list[tuple[int, int]]]:
        """DRAM tensors in tile order (per tile: its ifmap loads, its weights at the
        layer's first tile, its store) and the store -> load precedence."""
        bpc = self.hw.dram.bytes_per_cycle
        n_tiles = at.n_tiles
        tensors: list[DramTensor] = []
        precedence: list[tuple[int, int]] = []
        stores_of: dict[str, list[int]] = {}  # store ids by tile index

        def add(kind: TensorKind, layer: str, tile: int | None, size: int, first_use: int,
                last_use: int, producer: int, lo: int, hi: int) -> int:
            tid = len(tensors)
            tensors.append(DramTensor(tid, kind, self._layer_index[layer], layer, tile, size,
                                      -(-size // bpc), first_use, last_use, producer, lo, hi))
            return tid

        for plan, base, (first_tiles, other_tiles) in zip(at.plans, at.bases, traffic,
                                                          strict=True):
            width = len(plan.layers)
            for i in range(plan.tiles.grid.count):
                for j, n, loaded, weights, store in other_tiles if i else first_tiles:
                    p = base + i * width + j
                    for k, src in loaded:
                        size = plan.read_bytes[n][i][k]
                        if size is None:
                            continue
                        tid = add(TensorKind.LOAD_IFMAP, n, i, size, p, p, -1, -1, p)
                        if src in stores_of:
                            src_ids = stores_of[src]
                            grid = at.plans[at.flg_of[src]].tiles.grid
                            precedence.extend((src_ids[s], tid) for s in self._stores_read(
                                src, grid, plan.tiles.reads[n][i][k]))
                    if weights and i == 0:
                        first_use = at.first[n]
                        add(TensorKind.LOAD_WEIGHT, n, None, self._weights[n], first_use,
                            at.last[n], -1, -1, first_use)
                    if store:
                        tid = add(TensorKind.STORE_OFMAP, n, i, plan.share_bytes[n][i],
                                  -1, -1, p, p + 1, n_tiles)
                        stores_of.setdefault(n, []).append(tid)
        return tensors, precedence


#: A layer of an FLG that moves data to or from DRAM: (its step among the FLG's layers,
#: layer, (input index, source) of the inputs it loads (network inputs, ofmaps of other
#: LGs), whether it loads weights, whether its ofmap goes to DRAM). A plain tuple: one is
#: made per layer and lowering.
_Traffic = tuple[int, str, list[tuple[int, str]], bool, bool]

#: An FLG's layers with DRAM traffic at its first tile index (weights included), and at
#: the others.
_FlgTraffic = tuple[list[_Traffic], list[_Traffic]]


class _Layout:
    """Where an LFA puts things: each FLG's plan, first tile position and LG; each
    layer's LG, FLG and first and last tile position."""

    def __init__(self, lfa: Lfa, plans: list[_FlgPlan]) -> None:
        self.plans = plans
        self.lg_of: dict[str, int] = {}
        for g, (a, b) in enumerate(lfa.lg_bounds()):
            for n in lfa.order[a:b]:
                self.lg_of[n] = g
        self.bases: list[int] = []
        self.flg_lg: list[int] = []
        self.flg_of: dict[str, int] = {}
        self.first: dict[str, int] = {}
        self.last: dict[str, int] = {}
        base = 0
        for g, plan in enumerate(plans):
            layers = plan.layers
            self.bases.append(base)
            self.flg_lg.append(self.lg_of[layers[0]])
            tail = base + (plan.tiles.grid.count - 1) * len(layers)
            for j, n in enumerate(layers):
                self.flg_of[n], self.first[n], self.last[n] = g, base + j, tail + j
            base += len(plan.steps)
        self.n_tiles = base


_NO_ENERGY = EnergyParts(0.0, 0.0, 0.0, 0.0)


def _parts(cost: TileCost) -> EnergyParts:
    return EnergyParts(cost.mac_pj, cost.local_pj + cost.noc_pj, cost.gbuf_pj, cost.vector_pj)


def lower(workload: Workload, hw: Hardware, lfa: Lfa) -> TileProgram:
    """One-shot lowering (use a Lowerer to lower many LFAs of one workload)."""
    return Lowerer(workload, hw).lower(lfa)
