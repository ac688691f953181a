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
- Precedence: each load of stored data comes after every store whose share it reads.
"""

from __future__ import annotations

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
    tiles: FlgTiles
    costs: dict[str, list[TileCost | None]]
    steps: list[tuple[str, int, int, int, float, EnergyParts]]
    """The FLG's tiles in execution order: (layer, layer index, tile index, cycles, pJ,
    energy breakdown)."""
    produced_bytes: dict[str, list[int]]
    """Bytes of the region each tile of a layer computes (0: nothing)."""
    share_bytes: dict[str, list[int]]
    """Bytes of each tile's share of the layer's ofmap."""
    read_bytes: dict[str, list[tuple[int | None, ...]]]
    """Bytes each tile reads from each input (None: nothing)."""


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

    def plan(self, layers: tuple[str, ...], tiling: int) -> _FlgPlan:
        key = (layers, tiling)
        plan = self._plans.get(key)
        if plan is None:
            tiles = tile_flg(self.workload, layers, tiling)
            costs = {n: [self._cost(n, r) for r in tiles.produced[n]] for n in layers}
            steps = []
            for i in range(tiles.grid.count):
                for n in layers:
                    c = costs[n][i]
                    steps.append((n, self._layer_index[n], i, c.cycles if c else 0,
                                  c.energy_pj if c else 0.0, _parts(c) if c else _NO_ENERGY))
            wl = self.workload
            eb = wl.elem_bytes

            def size(region: Region | None, channels: int) -> int | None:
                return None if region is None else region.elems(channels) * eb

            produced = {n: [size(r, wl.layers[n].out.c) or 0 for r in tiles.produced[n]]
                        for n in layers}
            share = {n: [size(r, wl.layers[n].out.c) for r in tiles.share[n]]
                     for n in layers}
            reads = {n: [tuple(size(r, c.c) for r, c in zip(rs, wl.in_shapes(n),
                                                               strict=True))
                         for rs in tiles.reads[n]] for n in layers}
            plan = self._plans[key] = _FlgPlan(tiles, costs, steps, produced, share, reads)
        return plan

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

    def lower(self, lfa: Lfa, check: bool = True) -> TileProgram:
        """The tile program of `lfa`; with `check`, the LFA is validated first."""
        wl = self.workload
        if check:
            check_lfa(wl, lfa)
        order = lfa.order
        lg_of: dict[str, int] = {}
        for g, (a, b) in enumerate(lfa.lg_bounds()):
            for n in order[a:b]:
                lg_of[n] = g
        flgs = [(order[a:b], t) for (a, b), t in zip(lfa.flg_bounds(), lfa.tiling, strict=True)]
        plans = [self.plan(layers, t) for layers, t in flgs]

        # positions of every (layer, tile index)
        pos: dict[str, list[int]] = {}
        tiles: list[Tile] = []
        for g, ((layers, _), plan) in enumerate(zip(flgs, plans, strict=True)):
            count = plan.tiles.grid.count
            for n in layers:
                pos[n] = [0] * count
            for n, index, i, cycles, energy, parts in plan.steps:
                pos[n][i] = len(tiles)
                tiles.append(Tile(len(tiles), index, n, i, cycles, energy, lg_of[n], g, parts))
        n_tiles = len(tiles)
        stored = {n for n in order if n in wl.outputs
                  or any(lg_of[v] != lg_of[n] for v in wl.consumers(n))}

        bpc = self.hw.dram.bytes_per_cycle
        tensors: list[DramTensor] = []
        precedence: list[tuple[int, int]] = []
        stores_of: dict[str, list[int]] = {n: [] for n in stored}  # store ids by tile index

        def add(kind: TensorKind, layer: str, tile: int | None, size: int, **kw) -> int:
            tid = len(tensors)
            tensors.append(DramTensor(tid, kind, self._layer_index[layer], layer, tile, size,
                                      -(-size // bpc), **kw))
            return tid

        flg_of = {n: k for k, (layers, _) in enumerate(flgs) for n in layers}
        layers_of = wl.layers
        for tile in tiles:
            name, i, p = tile.layer, tile.tile, tile.pos
            plan = plans[flg_of[name]]
            lg = lg_of[name]
            reads = plan.tiles.reads[name][i]
            for k, (src, size) in enumerate(zip(layers_of[name].inputs,
                                                plan.read_bytes[name][i], strict=True)):
                if size is None or (src in layers_of and lg_of[src] == lg):
                    continue
                tid = add(TensorKind.LOAD_IFMAP, name, i, size, first_use=p, last_use=p,
                          lo=-1, hi=p)
                if src in stores_of:
                    src_ids = stores_of[src]
                    precedence.extend((src_ids[j], tid) for j in self._stores_read(
                        src, plans[flg_of[src]].tiles.grid, reads[k]))
            if i == 0 and name in self._weights:
                first, last = pos[name][0], pos[name][-1]
                add(TensorKind.LOAD_WEIGHT, name, None, self._weights[name],
                    first_use=first, last_use=last, lo=-1, hi=first)
            if name in stored:
                sid = add(TensorKind.STORE_OFMAP, name, i, plan.share_bytes[name][i],
                          producer=p, lo=p + 1, hi=n_tiles)
                stores_of[name].append(sid)

        onchip = self._onchip_bytes(flgs, plans, pos, lg_of, flg_of, n_tiles)
        totals = WorkloadTotals(wl.name, wl.batch, wl.total_macs, wl.total_ops,
                                wl.total_weight_bytes, self.hw.peak_ops_per_cycle)
        return TileProgram(
            name=f"{wl.name}-{self.hw.name}-b{wl.batch}",
            dram_bytes_per_cycle=bpc,
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

    def _onchip_bytes(self, flgs, plans, pos, lg_of, flg_of, n_tiles: int) -> list[int]:
        """Bytes of on-chip ofmaps live in each tile (difference array over tiles)."""
        wl = self.workload
        diff = [0] * (n_tiles + 1)

        def hold(size: int, first: int, last: int) -> None:
            if size and first <= last:
                diff[first] += size
                diff[last + 1] -= size

        for (layers, _), plan in zip(flgs, plans, strict=True):
            for n in layers:
                onchip_users = [v for v in wl.consumers(n) if lg_of[v] == lg_of[n]]
                if not onchip_users:
                    continue
                same_flg = [v for v in onchip_users if flg_of[v] == flg_of[n]]
                later = [v for v in onchip_users if flg_of[v] != flg_of[n]]
                later_end = max((pos[v][-1] for v in later), default=-1)
                produced = plan.produced_bytes[n]
                share = plan.share_bytes[n]
                for i, p in enumerate(pos[n]):
                    local_end = p
                    if same_flg and produced[i]:
                        local_end = max(pos[v][i] for v in same_flg)
                        hold(produced[i], p, local_end)
                    if later:
                        start = local_end + 1 if same_flg and produced[i] else p
                        hold(share[i], start, later_end)
        out = [0] * n_tiles
        running = 0
        for p in range(n_tiles):
            running += diff[p]
            out[p] = running
        return out


_NO_ENERGY = EnergyParts(0.0, 0.0, 0.0, 0.0)


def _parts(cost: TileCost) -> EnergyParts:
    return EnergyParts(cost.mac_pj, cost.local_pj + cost.noc_pj, cost.gbuf_pj, cost.vector_pj)


def lower(workload: Workload, hw: Hardware, lfa: Lfa) -> TileProgram:
    """One-shot lowering (use a Lowerer to lower many LFAs of one workload)."""
    return Lowerer(workload, hw).lower(lfa)
