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
from dataclasses import dataclass, field
from functools import cached_property

from mipsched.schedule.notation import ScheduleError
from mipsched.workload import ops
from mipsched.workload.graph import Workload
from mipsched.workload.layer import Region

MAX_TILES = 1 << 20
"""Most tiles of one tile program: 1,048,576, counted as the tiling number times the
layers of each FLG, summed over the FLGs of an LFA (Lowerer.place; one FLG alone in
Lowerer.plan; a tiling number alone in choose_grid). Lowering takes about 2.3 KB and
20 us per tile (resblock at batch 64: 81,920 tiles, 184 MB, 1.7 s), so a program at the cap
takes about 2.5 GB and 20 s before it is evaluated; an LFA past it is invalid (a
ScheduleError, which the searches skip). The largest programs the searches build on the
SoMa Fig. 6 cases are Cocco's at batch 16 (145,824 tiles, Inception-ResNet-v1), 7x below;
Cocco's unfused partitions of the zoo at batch 64 have at most 459,840 (the same network
on cloud)."""


@dataclass(frozen=True)
class TileGrid:
    """T = batch_parts x h_parts x w_parts tiles, enumerated batch-major."""

    batch_parts: int
    h_parts: int
    w_parts: int

    @property
    def count(self) -> int:
        """Number of tiles: batch parts x height parts x width parts."""
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
    no part larger than the smallest output plane of the FLG (every tile non-empty).
    ScheduleError when no such split exists or T exceeds MAX_TILES."""
    if tiling > MAX_TILES:
        raise ScheduleError(f"tiling number {tiling:,} of FLG [{layers[0]} .. {layers[-1]}] "
                            f"exceeds the cap of {MAX_TILES:,} tiles per tile program")
    batch_parts = math.gcd(tiling, workload.batch)
    h_min = min(workload.layers[n].out.h for n in layers)
    w_min = min(workload.layers[n].out.w for n in layers)
    split = plane_split(tiling // batch_parts, h_min, w_min)
    if split is None:
        raise ScheduleError(
            f"tiling number {tiling} does not divide the work of FLG [{layers[0]} .. "
            f"{layers[-1]}]: batch {workload.batch}, smallest output plane {h_min}x{w_min} "
            f"(layer '{_smallest(workload, layers)}')"
        )
    return TileGrid(batch_parts, *split)


def plane_split(parts: int, h_min: int, w_min: int) -> tuple[int, int] | None:
    """(height parts, width parts) of `parts` plane parts: the factor pair whose part
    aspect is nearest the smallest plane's (h_min x w_min), the fewest height parts on a
    tie, neither above the plane's side; None when no pair fits."""
    best: tuple[float, int, int] | None = None
    for hp in range(1, min(parts, h_min) + 1 if parts <= h_min * w_min else 1):
        if parts % hp:
            continue
        wp = parts // hp
        if hp > h_min or wp > w_min:
            continue
        skew = abs(math.log((h_min / hp) / (w_min / wp)))
        if best is None or skew < best[0]:
            best = (skew, hp, wp)
    return None if best is None else (best[1], best[2])


def _smallest(workload: Workload, layers: tuple[str, ...]) -> str:
    return min(layers, key=lambda n: workload.layers[n].out.h * workload.layers[n].out.w)


@dataclass(frozen=True, eq=False)
class LayerTiles:
    """One layer's regions in an FLG, per tile index (see FlgTiles)."""

    produced: list[Region | None]
    share: list[Region]
    reads: list[tuple[Region | None, ...]]
    read_elems: list[tuple[int | None, ...]]


@dataclass(frozen=True)
class FlgTiles:
    """Regions of every layer of one FLG, per tile index."""

    grid: TileGrid
    layers: dict[str, LayerTiles]
    """Each layer's tiles, in the FLG's order."""

    def layer(self, name: str) -> LayerTiles:
        """The tiles of layer `name`."""
        return self.layers[name]

    @cached_property
    def produced(self) -> dict[str, list[Region | None]]:
        """Output region each tile of the layer computes (None: nothing in this tile)."""
        return {n: t.produced for n, t in self.layers.items()}

    @cached_property
    def share(self) -> dict[str, list[Region]]:
        """Even split of the layer's output: the part tile i contributes to the whole
        ofmap."""
        return {n: t.share for n, t in self.layers.items()}

    @cached_property
    def reads(self) -> dict[str, list[tuple[Region | None, ...]]]:
        """Per tile, the region read from each input (None: input not read)."""
        return {n: t.reads for n, t in self.layers.items()}

    @cached_property
    def read_elems(self) -> dict[str, list[tuple[int | None, ...]]]:
        """Per tile, the elements read from each input (None: input not read): the
        region's positions times the channels read (all but for a transpose,
        ops.input_channels)."""
        return {n: t.read_elems for n, t in self.layers.items()}


@dataclass
class TilingMemo:
    """What tile_flg memoises across the FLGs of one workload."""

    layers: dict[tuple[tuple[str, ...], TileGrid], LayerTiles] = field(default_factory=dict)
    """A layer's tiles by (the layer and the FLG's layers after it, grid): they depend only
    on the grid and on its consumers' tiles inside the FLG, which lie after it."""
    reads: dict[tuple[str, Region], tuple[tuple[Region | None, ...], tuple[int | None, ...]]
                ] = field(default_factory=dict)
    """What an output region of a layer reads from each input: regions and elements."""
    shares: dict[tuple[TileGrid, int, int], list[Region]] = field(default_factory=dict)
    """The even split of an (h, w) map by a grid."""


def tile_flg(workload: Workload, layers: tuple[str, ...], tiling: int,
             memo: TilingMemo | None = None) -> FlgTiles:
    """Back-propagates tile regions from the FLG's consumers to its producers (looking
    each layer up in `memo` first, and adding it there)."""
    grid = choose_grid(workload, layers, tiling)
    memo = memo or TilingMemo()
    found: dict[str, LayerTiles] = {}
    for j in range(len(layers) - 1, -1, -1):
        key = (layers[j:], grid)
        tiles = memo.layers.get(key)
        if tiles is None:
            tiles = memo.layers[key] = _tile_layer(workload, layers[j], grid, found, memo)
        found[layers[j]] = tiles
    return FlgTiles(grid, {n: found[n] for n in layers})


def _tile_layer(workload: Workload, name: str, grid: TileGrid,
                after: dict[str, LayerTiles], memo: TilingMemo) -> LayerTiles:
    """The tiles of `name` given those of the FLG's layers after it (`after`)."""
    layer = workload.layers[name]
    h, w = layer.out.h, layer.out.w
    share = memo.shares.get((grid, h, w))
    if share is None:
        share = memo.shares[grid, h, w] = [grid.share(i, workload.batch, h, w)
                                          for i in range(grid.count)]
    consumers = workload.consumers(name)
    inside = [v for v in consumers if v in after]
    needed_outside = len(inside) < len(consumers) or name in workload.outputs
    regions: list[Region | None] = []
    for i in range(grid.count):
        region = share[i] if needed_outside or not inside else None
        for v in inside:
            for k, src in enumerate(workload.layers[v].inputs):
                if src == name:
                    r = after[v].reads[i][k]
                    if r is not None:
                        region = r if region is None else region.hull(r)
        regions.append(region)
    none = (None,) * len(layer.inputs)
    reads = []
    read_elems = []
    for r in regions:
        if r is None:
            reads.append(none)
            read_elems.append(none)
            continue
        found = memo.reads.get((name, r))
        if found is None:
            found = memo.reads[name, r] = _reads(workload, name, r)
        reads.append(found[0])
        read_elems.append(found[1])
    return LayerTiles(regions, share, reads, read_elems)


def _reads(workload: Workload, name: str, region: Region
           ) -> tuple[tuple[Region | None, ...], tuple[int | None, ...]]:
    """The regions and elements output `region` of `name` reads from each input."""
    layer = workload.layers[name]
    in_shapes = workload.in_shapes(name)
    regions = tuple(ops.input_region(layer, k, in_shapes, region)
                    for k in range(len(layer.inputs)))
    return regions, tuple(
        None if rk is None else rk.elems(ops.input_channels(layer, k, in_shapes, region))
        for k, rk in enumerate(regions))
