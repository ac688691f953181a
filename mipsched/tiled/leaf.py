"""SET's intra-layer search for one leaf of an RA tree (docs/set-model.md §3.4, §3.5,
§3.7): partition candidates in the reference's order with its filters, the tiles of
every core, the multicast groups, the rough buffer check, the per-core ceiling-tile cost
(`mipsched.cost.tile.tile_cost` for PE-array layers, ceil(ops / 64) for pooling and
element-wise layers), the base energy with the global-buffer term `ubuf_ext`, every
placement, the NoC record per placement, the min E x D pick (strict <, the first found
keeps ties), and the leaf's time and energy.

Units: bytes (= the reference's 8-bit words), cycles, pJ.

Placement search counts byte-hops and DRAM bytes only (the reference's `calc_bw =
false`), for all placement orders of a partition at once: tiles, groups and transfers are
numpy arrays, and a tree's links come from per-coordinate tables (`order_hops`). A
partition whose lower bound on the hops of any placement (`hops_floor`) cannot beat the
best so far is skipped, which keeps the strict-< pick. The winner's record is rebuilt
with per-link loads (`LinkLoads`) and must count the same byte-hops. The search applies
the rough buffer check of §3.4 step 3; the result lists the ifmap and weight bytes of
every core, from which `mipsched.tiled.evaluate` does the per-core buffer accounting of
§3.12.

The layer kinds (`mipsched.tiled.leaf_kinds`): plain conv, fc and matmul; grouped and
depthwise conv and the matmul of two activations (the reference's GroupConv, the latter
with another layer's fmap as weights, §3.13); window and global pools; element-wise
add / mul; softmax, layernorm, GELU, copying concat and transpose (the reference's PTP
and Transpose). `layer_view` raises ValueError for the rest.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache, partial

import numpy as np

from mipsched.cost.core_array import NoMappingError
from mipsched.cost.tile import tile_cost
from mipsched.hw.model import Hardware
from mipsched.hw.tiled import TiledHardware
from mipsched.tiled.leaf_kinds import (
    LayerView,
    fmap_weight_range,
    group_tile_cost,
    ifm_range,
    layer_view,
    split_sources,
)
from mipsched.tiled.noc import FmapRange, LinkLoads, sample_overlap
from mipsched.tiled.order_hops import (
    Traffic,
    cluster_mesh,
    hops_floor,
    members_list,
    order_cells,
    order_hops,
    piece_digits,
)
from mipsched.tiled.partitions import (
    PART_INDEX,
    candidate_partitions,
    part_intv,
    placement_orders,
)
from mipsched.tiled.structure import core_positions
from mipsched.workload import ops
from mipsched.workload.graph import Workload
from mipsched.workload.layer import Region, Shape

Tile = tuple[int, int]
OFM_UBUF_BYTES = 10240
"""The reference's `ofm_ubuf_vol` (10 KB), used by the rough buffer check."""
WRAP_CHANNEL_OFFSET = True
"""The reference's unsigned channel offset (§3.13): a direct producer whose channel slice
starts after the first channel of a consumer range sends that range nothing (the range,
shifted by the slice's offset, wraps around and meets no producer tile). False counts
those bytes too."""


@dataclass(frozen=True)
class Layout:
    """Where a leaf's ofmap lives: (tile, its ofmap range) per core, in the leaf's
    (k, b, h, w) tile order, and the leaf's batch (the b intervals lie in [0, batch))."""

    batch: int
    tiles: tuple[tuple[Tile, FmapRange], ...]


@dataclass
class LeafResult:
    """The evaluated leaf: its scheme, time, energy and traffic record (one invocation)."""

    layer: str
    batch: int
    cores: int
    partition: tuple[int, int, int, int]
    """Cores along (K, B, H, W)."""
    order: tuple[int, ...]
    """Placement order of the dimensions (indices into K, B, H, W), outermost first."""
    tile_cycles: int
    tile_energy_pj: float
    ubuf_ext_pj: float
    cycles: int
    energy_pj: float
    record: LinkLoads
    layout: Layout
    ifm_bytes: tuple[tuple[Tile, int], ...] = ()
    """Ifmap bytes each core receives (x N for eltwise), one entry per (core, range)
    with bytes > 0 (the reference's ifmap `BufferUsage`)."""
    wgt_bytes: tuple[tuple[Tile, int], ...] = ()
    """Weight bytes each core holds (its K slice, not divided by the batch ratio)."""

    def partition_text(self) -> str:
        """The partition in placement order, as the reference prints it ("B:8,H:2,...")."""
        return ",".join(f"{PART_INDEX[d]}:{self.partition[d]}" for d in self.order)


@dataclass(frozen=True)
class Source:
    """One input of a leaf: a network input (`layout` None, `direct` False), a producer
    read from DRAM (`direct` False) or a producer read over the NoC from `layout`."""

    channels: int
    direct: bool = False
    layout: Layout | None = None


# --- one partition: tiles and multicast groups, as arrays ----------------------------------
# A box is an fmap range as int64 [[lo, hi) along c, b, h, w]: shape (4, 2); the ofm index
# of a core is its position in (k, b, h, w) order.
_NO_BOXES = np.zeros((0, 4, 2), np.int64)


def _volumes(boxes: np.ndarray) -> np.ndarray:
    """Bytes in each box of (rows, 4, 2) (`FmapRange.volume`: 0 if an interval is empty)."""
    return np.maximum(boxes[:, :, 1] - boxes[:, :, 0], 0).prod(axis=1)


@dataclass(eq=False)
class _Groups:
    """Ranges and the multicast group receiving each: `boxes` (G, 4, 2) and `members`
    (G, m), the ofm indices of each group's cores."""

    boxes: np.ndarray
    members: np.ndarray

    def pairs(self) -> list[tuple[FmapRange, tuple[int, ...]]]:
        """(range, ofm indices of its group) per group."""
        return [(FmapRange(*map(tuple, box)), m)
                for box, m in zip(self.boxes.tolist(), members_list(self.members),
                                  strict=True)]


@dataclass(eq=False)
class _Tiling:
    """One partition's tiles and groups as arrays (the search's), with the lists the
    record and the result are built from (`ofm`, `ifm`, `wgt`, `fwgt`)."""

    part: tuple[int, int, int, int]
    ofm_boxes: np.ndarray
    """Ofmap box of every core, by ofm index: (n, 4, 2)."""
    cores: np.ndarray
    """Every ofm index as a group of one: (n, 1)."""
    ifm_groups: _Groups
    """Ifmap ranges and their multicast groups (a conv's K slices share its ifmap)."""
    wgt_bytes: np.ndarray
    """DRAM weight bytes of each K slice (none without DRAM weights)."""
    wgt_members: np.ndarray
    """The ofm indices of each K slice's group."""
    fwgt_groups: _Groups
    """Fmap weights (§3.13): the producer range of each (K, B) slice and its group."""
    ifm_total: int
    ifm_max: int
    wgt_total: int
    wgt_max: int
    ifm_mult: int
    """Operands per ifmap range (eltwise N, else 1)."""

    @cached_property
    def ofm(self) -> list[FmapRange]:
        """Ofmap range of every core, by ofm index."""
        return [FmapRange(*map(tuple, box)) for box in self.ofm_boxes.tolist()]

    @property
    def ifm(self) -> list[tuple[FmapRange, tuple[int, ...]]]:
        """(ifmap range, ofm indices of its group) per group."""
        return self.ifm_groups.pairs()

    @property
    def wgt(self) -> list[tuple[int, tuple[int, ...]]]:
        """(DRAM weight bytes, ofm indices of its group) per K slice."""
        return list(zip(self.wgt_bytes.tolist(), members_list(self.wgt_members),
                        strict=True))

    @property
    def fwgt(self) -> list[tuple[FmapRange, tuple[int, ...]]]:
        """(fmap weight range, ofm indices of its group) per (K, B) slice."""
        return self.fwgt_groups.pairs()


def _ifm_axes(v: LayerView) -> tuple[int | None, int, int, int]:
    """The ofm axis (0 K, 1 B, 2 H, 3 W) that each axis (c, b, h, w) of `ifm_range`'s
    result follows; None: constant (a plain conv reads every channel; a transpose
    permutes c, h and w)."""
    if v.kind == "conv":
        return None, 1, 2, 3
    if v.kind == "ptp":
        spans = (0, 2, 3)
        return (spans[v.perm.index(0)], 1, spans[v.perm.index(1)],
                spans[v.perm.index(2)])
    return 0, 1, 2, 3


def _mapped(fn: Callable[[FmapRange], FmapRange], cuts: list[list[int]],
            axes: Sequence[int | None], digits: np.ndarray, empty: np.ndarray) -> np.ndarray:
    """Boxes fn(ofm range) of the ofm ranges given by `digits` (rows of piece indices),
    all zero (the empty range) where `empty`. Axis a of fn's result depends on the ofm
    range's axis axes[a] alone (None: on none), so fn runs once per piece of the axes it
    follows (probe j takes piece j of every axis, or its last), not once per row."""
    def piece(cut: list[int], j: int) -> tuple[int, int]:
        j = min(j, len(cut) - 2)
        return cut[j], cut[j + 1]

    pieces = max((len(cuts[d]) - 1 for d in axes if d is not None), default=1)
    probes = np.array([fn(FmapRange(*(piece(c, j) for c in cuts))) for j in range(pieces)],
                      np.int64)
    out = np.empty((len(digits), 4, 2), np.int64)
    for a, d in enumerate(axes):
        out[:, a] = probes[0, a] if d is None else probes[digits[:, d], a]
    out[empty] = 0
    return out


@lru_cache(maxsize=1024)
def _tiling(v: LayerView, batch: int, part: tuple[int, int, int, int]) -> _Tiling:
    """The reference's `initLayouts` for one partition, a pure function of the view, the
    batch and the partition (memoised): the ofmap box of every core; one ifmap range per
    core, or per (B, H, W) slice for a conv (multicast over its K slices), the empty
    range (all zero) for an empty ofmap; DRAM weights per K slice, or fmap weights per
    (K, B) slice multicast to its H x W cores; the totals of the rough buffer check and
    of `ubuf_ext`."""
    pk, pb, ph, pw = part
    cuts = [part_intv(v.k, pk), part_intv(batch, pb), part_intv(v.h, ph), part_intv(v.w, pw)]
    digits = piece_digits(part)
    ofm = np.empty((len(digits), 4, 2), np.int64)
    for a, cut in enumerate(cuts):
        ofm[:, a] = np.array(cut)[np.stack([digits[:, a], digits[:, a] + 1], axis=1)]
    empty = _volumes(ofm) == 0
    bhw = pb * ph * pw
    idx = np.arange(len(digits))
    cores = idx[:, None]
    if v.kind == "conv":
        rows, members = idx[:bhw], idx[:bhw, None] + bhw * np.arange(pk)
    else:
        rows, members = idx, cores
    ifm = _Groups(_mapped(partial(ifm_range, v), cuts, _ifm_axes(v), digits[rows],
                          empty[rows]), members)
    wgt_rows = idx[::bhw] if v.weights_per_k and not v.fmap_wgt else idx[:0]
    wgt = np.where(empty[wgt_rows], 0, (ofm[wgt_rows, 0, 1] - ofm[wgt_rows, 0, 0])
                   * v.weights_per_k)
    fwgt = _Groups(_NO_BOXES, np.zeros((0, ph * pw), np.int64))
    if v.fmap_wgt:
        first = idx[::ph * pw]
        fwgt = _Groups(_mapped(partial(fmap_weight_range, v), cuts, (0, 1, None, None),
                               digits[first], empty[first]),
                       first[:, None] + np.arange(ph * pw))
    mult = v.c if v.kind == "elt" else 1
    sizes, fsizes = _volumes(ifm.boxes), _volumes(fwgt.boxes)
    return _Tiling(part, ofm, cores, ifm, wgt, wgt_rows[:, None] + np.arange(bhw), fwgt,
                   int(sizes.sum()) * (pk if v.kind == "conv" else 1) * mult,
                   int(sizes.max()) * mult,
                   int(wgt.sum()) * bhw + int(fsizes.sum()) * ph * pw,
                   max(int(wgt.max(initial=0)), int(fsizes.max(initial=0))), mult)


def _ceil_tile_cost(core: Hardware, workload: Workload, name: str, v: LayerView, batch: int,
                    part: tuple[int, int, int, int]) -> tuple[int, float] | None:
    """(cycles, pJ) of the ceiling tile of one core (§3.4 step 4, §3.5, §3.13); None when
    no PE-array mapping fits (the reference skips the partition)."""
    tile = tuple(-(-n // p) for n, p in zip((v.k, batch, v.h, v.w), part, strict=True))
    kk, bb, hh, ww = tile
    if v.kind == "gconv":
        return group_tile_cost(core, v, (kk, bb, hh, ww))
    if v.kind != "conv":
        n = kk * hh * ww * bb * v.window
        unit = core.vector_unit
        return -(-n // unit.ops_per_cycle), n * unit.pj_per_op
    lay = workload.layers[name]
    lay = dataclasses.replace(lay, out=Shape(kk, lay.out.h, lay.out.w))
    try:
        cost = tile_cost(core, lay, workload.in_shapes(name), Region(0, bb, 0, hh, 0, ww), 1)
    except NoMappingError:
        return None
    return cost.cycles, cost.energy_pj


# --- the transfers of one partition (§3.6) ---------------------------------------------------
@lru_cache(maxsize=256)
def _layout_arrays(layout: Layout) -> tuple[np.ndarray, np.ndarray]:
    """(tiles (P, 2), ofmap boxes (P, 4, 2)) of a producer's layout."""
    return (np.array([t for t, _ in layout.tiles], np.int64).reshape(-1, 2),
            np.array([r for _, r in layout.tiles], np.int64).reshape(-1, 4, 2))


def _intersect(have: np.ndarray, wanted: np.ndarray, have_batch: int,
               batch: int) -> np.ndarray:
    """`intersect_volume` of every wanted box (G) with every producer box (P): (G, P)."""
    ov = (np.minimum(wanted[:, None, :, 1], have[None, :, :, 1])
          - np.maximum(wanted[:, None, :, 0], have[None, :, :, 0]))
    ok = (ov[..., 0] > 0) & (ov[..., 2] > 0) & (ov[..., 3] > 0)
    plane = np.where(ok, ov[..., 0] * ov[..., 2] * ov[..., 3], 0)
    if have_batch == batch:
        return np.maximum(ov[..., 1], 0) * plane
    if not ok.any():
        return plane
    want_b, want_i = np.unique(wanted[:, 1], axis=0, return_inverse=True)
    have_b, have_i = np.unique(have[:, 1], axis=0, return_inverse=True)
    samples = np.array([[sample_overlap(tuple(h), tuple(w), have_batch, batch)
                         for h in have_b.tolist()] for w in want_b.tolist()], np.int64)
    sent = samples[want_i.reshape(-1)][:, have_i.reshape(-1)] * plane
    return sent // (have_batch // batch) if have_batch > batch else sent


def _fetch(src: Source, lo: int, hi: int, groups: _Groups, batch: int,
           reads: list[tuple[np.ndarray, np.ndarray]],
           moves: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> None:
    """Source `src` filling channels [lo, hi) of `groups`: from DRAM (the channel cut of
    each range, `fromRemoteMem`) or from its layout (`betweenLayout`)."""
    boxes = groups.boxes
    if not src.direct:
        cut = boxes.copy()
        cut[:, 0, 0] = np.maximum(cut[:, 0, 0], lo)
        cut[:, 0, 1] = np.minimum(cut[:, 0, 1], hi)
        reads.append((groups.members, _volumes(cut)))
        return
    assert src.layout is not None
    keep = boxes[:, 0, 1] > lo
    if WRAP_CHANNEL_OFFSET:
        keep &= boxes[:, 0, 0] >= lo
    wanted = boxes[keep]
    wanted[:, 0] -= lo
    tiles, have = _layout_arrays(src.layout)
    sent = np.zeros((len(boxes), len(tiles)), np.int64)
    sent[keep] = _intersect(have, wanted, src.layout.batch, batch)
    moves.append((groups.members, tiles, sent))


def _traffic(v: LayerView, t: _Tiling, batch: int, sources: Sequence[Source],
             wgt_sources: Sequence[Source], to_dram: bool, wgt_div: int) -> Traffic:
    """DRAM weights or fmap weights (`wgt_sources`, never divided), each ifmap source from
    DRAM or its layout, the ofmap to DRAM (`calcNoC`)."""
    reads: list[tuple[np.ndarray, np.ndarray]] = []
    moves: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    cur = 0
    for src in wgt_sources:
        _fetch(src, cur, cur + src.channels, t.fwgt_groups, batch, reads, moves)
        cur += src.channels
    cur = 0
    for src in sources:
        lo, hi = cur, cur + src.channels
        cur = 0 if v.kind == "elt" and hi == v.k else hi
        _fetch(src, lo, hi, t.ifm_groups, batch, reads, moves)
    writes = _volumes(t.ofm_boxes) if to_dram else np.zeros(len(t.cores), np.int64)
    dram = int(t.wgt_bytes.sum()) // wgt_div + sum(int(s.sum()) for _, s in reads)
    return Traffic((t.wgt_members, t.wgt_bytes), reads, moves, (t.cores, writes),
                    dram + int(writes.sum()))


def _groups(pos: Sequence[Tile], members: tuple[int, ...]) -> tuple[Tile, ...]:
    """The tiles of a group's cores under the placement `pos` (tile of each ofm index)."""
    return tuple(pos[m] for m in members)


def _record(hw: TiledHardware, tr: Traffic, pos: Sequence[Tile], wgt_div: int) -> LinkLoads:
    """The full traffic record (with per-link loads) of one placement."""
    w = LinkLoads()
    for s, g in tr.wgt:
        w.from_dram(hw, _groups(pos, g), s)
    rec = w.divided(wgt_div)
    for s, g in tr.reads:
        rec.from_dram(hw, _groups(pos, g), s)
    for s, src, g in tr.moves:
        rec.send(src, _groups(pos, g), s)
    for i, s in tr.writes:
        rec.to_dram(hw, pos[i], s)
    return rec


def _min_cuts(workload: Workload, name: str, v: LayerView, batch: int, n_cores: int,
              capacity: int) -> int:
    """The reference's `minCuts` (plain conv and fc only; 0 otherwise)."""
    if v.kind != "conv":
        return 0
    x = ops.data_shape(workload.layers[name], workload.in_shapes(name))
    return int(x.elems * batch / (capacity * n_cores * 0.8) + 1)


def leaf_sources(workload: Workload, name: str, shortcuts: Collection[tuple[str, str]],
                 layouts: Mapping[str, Layout]) -> list[Source]:
    """The inputs of layer `name` as `search_leaf` takes them: network inputs first, then
    its producers in layer order; a producer edge not in `shortcuts` (edges through
    DRAM) is direct and read from the producer's layout in `layouts`."""
    inputs = list(dict.fromkeys(workload.layers[name].inputs))
    sources = [Source(workload.shape_of(s).c) for s in inputs if s not in workload.layers]
    for src in sorted((s for s in inputs if s in workload.layers),
                      key=workload.layer_index.__getitem__):
        direct = (src, name) not in shortcuts
        sources.append(Source(workload.shape_of(src).c, direct,
                              layouts[src] if direct else None))
    return sources


def cached_leaf(cache: dict, hw: TiledHardware, workload: Workload, name: str, batch: int,
                tot_batch: int, first: int, last: int, stride: int,
                sources: Sequence[Source], to_dram: bool, segment: bool) -> LeafResult | None:
    """`search_leaf` on the cores [first, last) (snake `stride`), memoised in `cache`
    under the one key that the cost model, the simulator and the placement share."""
    key = (name, batch, tot_batch, first, last, to_dram, segment, stride, tuple(sources))
    if key not in cache:
        cores = core_positions(first, last, hw.mesh.cols, hw.mesh.rows, stride)
        cache[key] = search_leaf(hw, workload, name, batch, tot_batch, cores, sources,
                                 to_dram, segment)
    return cache[key]


def search_leaf(hw: TiledHardware, workload: Workload, name: str, batch: int,
                tot_batch: int, cores: Sequence[Tile], sources: Sequence[Source],
                to_dram: bool, segment: bool) -> LeafResult | None:
    """SET's intra-layer search for the leaf of layer `name` with batch `batch` on the
    cluster whose tiles are `cores` (in cluster index order); None when no partition is
    valid. `sources`: its inputs in channel order (network inputs first, then producers
    by layer order). `segment`: the leaf is a child of the root (adds the link bound)."""
    v = layer_view(workload, name)
    sources, wgt_sources = split_sources(workload, name, sources)
    core = _core(hw)
    gbuf = hw.tile.gbuf
    wgt_div = tot_batch // batch
    dims = (v.k, batch, v.h, v.w)
    mesh = cluster_mesh(hw, cores)
    hop_pj = hw.noc.hop_pj_per_byte
    best: tuple | None = None
    best_cost = math.inf
    ubuf_ofm = v.k * v.h * v.w * batch * gbuf.read_pj_per_byte
    for part in candidate_partitions(len(cores), dims, _min_cuts(
            workload, name, v, batch, len(cores), gbuf.capacity_bytes)):
        t = _tiling(v, batch, part)
        if OFM_UBUF_BYTES + t.ifm_max + t.wgt_max > gbuf.capacity_bytes:
            continue
        tile = _ceil_tile_cost(core, workload, name, v, batch, part)
        if tile is None:
            continue
        cycles, e_tile = tile
        ubuf_wgt = t.wgt_total * gbuf.write_pj_per_byte / (1 if v.fmap_wgt else wgt_div)
        ubuf = ubuf_wgt + ubuf_ofm
        ubuf += t.ifm_total * gbuf.write_pj_per_byte
        base = e_tile * len(cores) + ubuf
        tr = _traffic(v, t, batch, sources, wgt_sources, to_dram, wgt_div)
        time = max(cycles, -(-tr.dram // hw.dram.bytes_per_cycle))
        dram_pj = tr.dram * hw.dram.energy_pj_per_byte
        if (base + dram_pj) * time >= best_cost:  # no placement can win: hops >= 0
            continue
        floor = hops_floor(tr, mesh, wgt_div)
        if (base + (floor * hop_pj + dram_pj)) * time >= best_cost:  # nor with hops >= floor
            continue
        orders = placement_orders(part)
        cells = order_cells(part, orders)
        for order, cell, hops in zip(orders, cells, order_hops(tr, cells, mesh, wgt_div),
                                     strict=True):
            energy = base + (hops * hop_pj + dram_pj)
            if energy * time < best_cost:
                best_cost = energy * time
                best = (t, order, cell, tr, cycles, e_tile, ubuf, energy, time, hops)
    if best is None:
        return None
    return _finish(hw, name, batch, cores, best, wgt_div, segment)


def _finish(hw: TiledHardware, name: str, batch: int, cores: Sequence[Tile], best: tuple,
            wgt_div: int, segment: bool) -> LeafResult:
    t, order, cell, tr, cycles, e_tile, ubuf, energy, time, hops = best
    pos = [cores[c] for c in cell.tolist()]
    rec = _record(hw, tr, pos, wgt_div)
    assert rec.byte_hops == hops and rec.dram_bytes == tr.dram, "hop count mismatch"
    if segment:
        time = max(time, rec.cycles(hw))
    layout = Layout(batch, tuple(zip(pos, t.ofm, strict=True)))
    ifm = tuple((pos[m], r.volume() * t.ifm_mult) for r, g in t.ifm if r.volume() for m in g)
    ifm += tuple((pos[m], r.volume()) for r, g in t.fwgt if r.volume() for m in g)
    wgt = tuple((pos[m], s) for s, g in t.wgt if s for m in g)
    return LeafResult(name, batch, len(cores), t.part, order, cycles, e_tile, ubuf, time,
                      energy, rec, layout, ifm, wgt)


@lru_cache(maxsize=8)
def _core(hw: TiledHardware) -> Hardware:
    return hw.core()
