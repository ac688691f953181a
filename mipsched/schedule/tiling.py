"""Tiling of one FLG: the tile grid and every layer's tile regions, halo included.

SoMa §IV: a tiling number T splits each layer of the FLG into T tiles, batch first, then
output height and width as evenly as possible, never channels. Regions follow Cocco's
consumption-centric rule (Cocco §3): a producer's tile is what its consumers' tiles read,
so its extent is x(u) = max over consumers v of F_v + (Δ/s_v - 1)·s_v, clipped to the
real rows (see ops.window_input_range). Overlapping halos are recomputed per tile, as in
the SoMa reference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mipsched.schedule.notation import ScheduleError
from mipsched.workload import ops
from mipsched.workload.graph import Workload
from mipsched.workload.layer import Region


@dataclass(frozen=True)
class TileGrid:
    """T = batch_parts x h_parts x w_parts tiles, enumerated batch-major."""

    batch_parts: int
    h_parts: int
    w_parts: int

    @property
    def count(self) -> int:
        return self.batch_parts * self.h_parts * self.w_parts

    def share(self, index: int, batch: int, h: int, w: int) -> Region:
        """The `index`-th part of an even split of a (batch, h, w) map."""
        ib, rest = divmod(index, self.h_parts * self.w_parts)
        ih, iw = divmod(rest, self.w_parts)
        return Region(_cut(batch, self.batch_parts, ib), _cut(batch, self.batch_parts, ib + 1),
                      _cut(h, self.h_parts, ih), _cut(h, self.h_parts, ih + 1),
                      _cut(w, self.w_parts, iw), _cut(w, self.w_parts, iw + 1))


    def overlapping(self, region: Region, batch: int, h: int, w: int) -> list[int]:
        """Indices of the parts of an even (batch, h, w) split that intersect `region`."""
        hw_parts = self.h_parts * self.w_parts
        return [ib * hw_parts + ih * self.w_parts + iw
                for ib in _parts_hit(batch, self.batch_parts, region.b0, region.b1)
                for ih in _parts_hit(h, self.h_parts, region.h0, region.h1)
                for iw in _parts_hit(w, self.w_parts, region.w0, region.w1)]


def _cut(size: int, parts: int, k: int) -> int:
    return k * size // parts


def _part_of(size: int, parts: int, x: int) -> int:
    """The part of an even split of `size` that holds element x."""
    k = min(x * parts // size, parts - 1)
    while _cut(size, parts, k) > x:
        k -= 1
    while _cut(size, parts, k + 1) <= x:
        k += 1
    return k


def _parts_hit(size: int, parts: int, lo: int, hi: int) -> range:
    """Parts of an even split of `size` that intersect [lo, hi) (non-empty)."""
    return range(_part_of(size, parts, lo), _part_of(size, parts, hi - 1) + 1)


def choose_grid(workload: Workload, layers: tuple[str, ...], tiling: int) -> TileGrid:
    """Batch parts = gcd(T, batch); the rest split over H x W as square as possible, with
    no part larger than the smallest output plane of the FLG (every tile non-empty)."""
    batch_parts = math.gcd(tiling, workload.batch)
    rest = tiling // batch_parts
    h_min = min(workload.layers[n].out.h for n in layers)
    w_min = min(workload.layers[n].out.w for n in layers)
    best: tuple[float, int, int] | None = None
    for hp in range(1, rest + 1 if rest <= h_min * w_min else 1):
        if rest % hp:
            continue
        wp = rest // hp
        if hp > h_min or wp > w_min:
            continue
        skew = abs(math.log((h_min / hp) / (w_min / wp)))
        if best is None or skew < best[0]:
            best = (skew, hp, wp)
    if best is None:
        raise ScheduleError(
            f"tiling number {tiling} does not divide the work of FLG [{layers[0]} .. "
            f"{layers[-1]}]: batch {workload.batch}, smallest output plane {h_min}x{w_min} "
            f"(layer '{_smallest(workload, layers)}')"
        )
    return TileGrid(batch_parts, best[1], best[2])


def _smallest(workload: Workload, layers: tuple[str, ...]) -> str:
    return min(layers, key=lambda n: workload.layers[n].out.h * workload.layers[n].out.w)


@dataclass(frozen=True)
class FlgTiles:
    """Regions of every layer of one FLG, per tile index."""

    grid: TileGrid
    produced: dict[str, list[Region | None]]
    """Output region each tile of the layer computes (None: nothing in this tile)."""
    share: dict[str, list[Region]]
    """Even split of the layer's output: the part tile i contributes to the whole ofmap."""
    reads: dict[str, list[tuple[Region | None, ...]]]
    """Per tile, the region read from each input (None: input not read)."""
    read_elems: dict[str, list[tuple[int | None, ...]]]
    """Per tile, the elements read from each input (None: input not read): the region's
    positions times the channels read (all but for a transpose, ops.input_channels)."""


def tile_flg(workload: Workload, layers: tuple[str, ...], tiling: int) -> FlgTiles:
    """Back-propagates tile regions from the FLG's consumers to its producers."""
    grid = choose_grid(workload, layers, tiling)
    members = set(layers)
    batch = workload.batch
    share = {n: [grid.share(i, batch, workload.layers[n].out.h, workload.layers[n].out.w)
                 for i in range(grid.count)] for n in layers}
    produced: dict[str, list[Region | None]] = {}
    reads: dict[str, list[tuple[Region | None, ...]]] = {}
    read_elems: dict[str, list[tuple[int | None, ...]]] = {}
    for name in reversed(layers):
        inside = [v for v in workload.consumers(name) if v in members]
        needed_outside = len(inside) < len(workload.consumers(name)) or (
            name in workload.outputs)
        regions: list[Region | None] = []
        for i in range(grid.count):
            region = share[name][i] if needed_outside or not inside else None
            for v in inside:
                lay_v = workload.layers[v]
                for k, src in enumerate(lay_v.inputs):
                    if src == name:
                        r = reads[v][i][k]
                        if r is not None:
                            region = r if region is None else region.hull(r)
            regions.append(region)
        produced[name] = regions
        layer = workload.layers[name]
        in_shapes = workload.in_shapes(name)
        reads[name] = [
            tuple(ops.input_region(layer, k, in_shapes, r) for k in range(len(layer.inputs)))
            if r is not None else (None,) * len(layer.inputs)
            for r in regions
        ]
        read_elems[name] = [
            tuple(None if rk is None else rk.elems(ops.input_channels(layer, k, in_shapes, r))
                  for k, rk in enumerate(rs))
            for r, rs in zip(regions, reads[name], strict=True)
        ]
    return FlgTiles(grid, produced, share, reads, read_elems)
