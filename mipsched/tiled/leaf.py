"""SET's intra-layer search for one leaf of an RA tree (docs/set-model.md §3.4, §3.5,
§3.7): partition candidates in the reference's order with its filters, the tiles of
every core, the multicast groups, the rough buffer check, the per-core ceiling-tile cost
(`mipsched.cost.tile.tile_cost` for PE-array layers, ceil(ops / 64) for pooling and
element-wise layers), the base energy with the global-buffer term `ubuf_ext`, every
placement, the NoC record per placement, the min E x D pick (strict <, the first found
keeps ties), and the leaf's time and energy.

Units: bytes (= the reference's 8-bit words), cycles, pJ.

Placement search counts byte-hops and DRAM bytes only (the reference's `calc_bw =
false`); the winner's record is rebuilt with per-link loads (`LinkLoads`). The search
applies the rough buffer check of §3.4 step 3; the result lists the ifmap and weight
bytes of every core, from which `mipsched.tiled.evaluate` does the per-core buffer
accounting of §3.12.

The layer kinds (`mipsched.tiled.leaf_kinds`): plain conv, fc and matmul; grouped and
depthwise conv and the matmul of two activations (the reference's GroupConv, the latter
with another layer's fmap as weights, §3.13); window and global pools; element-wise
add / mul; softmax, layernorm, GELU, copying concat and transpose (the reference's PTP
and Transpose). `layer_view` raises ValueError for the rest.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

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
from mipsched.tiled.noc import FmapRange, LinkLoads, intersect_volume, port_shares
from mipsched.workload import ops
from mipsched.workload.graph import Workload
from mipsched.workload.layer import Region, Shape

Tile = tuple[int, int]
OFM_UBUF_BYTES = 10240
"""The reference's `ofm_ubuf_vol` (10 KB), used by the rough buffer check."""
MIN_PART_UTIL = 0.75
PART_INDEX = ("K", "B", "H", "W")
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


# --- partitions (§3.4) ---------------------------------------------------------------------
def factor_pairs(n: int) -> list[tuple[int, int]]:
    """The reference's 2-way splits of n (`factor_num`), most square first."""
    small = {1: [(1, 1)], 4: [(2, 2), (1, 4), (4, 1)], 6: [(2, 3), (3, 2), (1, 6), (6, 1)],
             8: [(2, 4), (4, 2), (1, 8), (8, 1)], 9: [(3, 3), (1, 9), (9, 1)],
             10: [(2, 5), (5, 2), (1, 10), (10, 1)]}
    if n <= 11:
        return small.get(n, [(1, n), (n, 1)])
    top = math.isqrt(n)
    pairs = []
    if n % top == 0:
        pairs.append((top, n // top))
        if top * top != n:
            pairs.append((n // top, top))
    for i in range(top - 1, 1, -1):
        if n % i == 0:
            pairs += [(i, n // i), (n // i, i)]
    return pairs + [(1, n), (n, 1)]


def all_partitions(n: int) -> list[tuple[int, int, int, int]]:
    """Every (K, B, H, W) with product n, in the reference's order (`init_all`)."""
    return [(pq[0], pq[1], rs[0], rs[1]) for xy in factor_pairs(n)
            for pq in factor_pairs(xy[0]) for rs in factor_pairs(xy[1])]


def part_intv(n: int, p: int) -> list[int]:
    """Boundaries of n cut into p pieces (larger pieces first): n - floor(n (p - i) / p)."""
    return [n - n * (p - i) // p for i in range(p + 1)]


def _util(real: int, part: int) -> float:
    return real / (-(-real // part) * part)


def candidate_partitions(n: int, dims: tuple[int, int, int, int],
                         min_cuts: int) -> list[tuple[int, int, int, int]]:
    """Partitions that pass `minCuts` and the 75 % utilisation filter, in order; if none
    does, the one of best utilisation among those meeting `minCuts` (`getBestPart`); []
    when none meets `minCuts`."""
    good, best, best_util = [], None, 0.0
    for part in all_partitions(n):
        if part[1] * part[2] * part[3] < min_cuts:
            continue
        u = _util(dims[0], part[0]) * _util(dims[1], part[1])
        u = u * _util(dims[2], part[2]) * _util(dims[3], part[3])
        if u >= MIN_PART_UTIL:
            good.append(part)
        if u > best_util:
            best, best_util = part, u
    if good:
        return good
    return [best] if best is not None else []


def placement_orders(part: tuple[int, int, int, int]) -> list[tuple[int, ...]]:
    """Dimension orders to try: the split dimensions permuted lexicographically from
    ascending (`next_permutation`), the unsplit ones appended (`PlaceIter`)."""
    split = [d for d in range(4) if part[d] > 1]
    unit = [d for d in range(4) if part[d] == 1]
    return [perm + tuple(reversed(unit)) for perm in itertools.permutations(split)]


# --- hop counting (search only: totals, no per-link loads) -------------------------------
@lru_cache(maxsize=1 << 18)
def tree_hops(src: Tile, dsts: tuple[Tile, ...]) -> int:
    """Links of the X-first multicast tree src -> dsts (one destination: the XY route)."""
    cols: dict[int, list[int]] = {}
    for x, y in dsts:
        cols.setdefault(x, []).append(y)
    sx, sy = src
    h = max(sx, max(cols)) - min(sx, min(cols))
    for ys in cols.values():
        h += max(sy, max(ys)) - min(sy, min(ys))
    return h


@lru_cache(maxsize=1 << 18)
def dram_read_hops(ports: tuple[Tile, ...], dsts: tuple[Tile, ...], n: int) -> int:
    """Byte-hops of reading n bytes from DRAM into dsts (split over the ports)."""
    return sum(s * tree_hops(p, dsts) for p, s in zip(ports, port_shares(n, len(ports)),
                                                       strict=True))


@lru_cache(maxsize=1 << 18)
def dram_write_hops(ports: tuple[Tile, ...], src: Tile, n: int) -> int:
    """Byte-hops of writing n bytes from src to DRAM (split over the ports)."""
    return sum(s * (abs(src[0] - p[0]) + abs(src[1] - p[1]))
               for p, s in zip(ports, port_shares(n, len(ports)), strict=True))


# --- one partition: tiles, groups and the placement-independent numbers ----------------------
@dataclass
class _Tiling:
    part: tuple[int, int, int, int]
    ofm: list[FmapRange]
    """Ofmap range of every core, in (k, b, h, w) order (the ofm index)."""
    ifm: list[tuple[FmapRange, tuple[int, ...]]]
    """Ifmap ranges and the ofm indices of the cores of their multicast group."""
    wgt: list[tuple[int, tuple[int, ...]]]
    """DRAM weight bytes of each K slice and the ofm indices of its group."""
    fwgt: list[tuple[FmapRange, tuple[int, ...]]]
    """Fmap weights (§3.13): the producer range of each (K, B) slice and its group."""
    ifm_total: int
    ifm_max: int
    wgt_total: int
    wgt_max: int
    ifm_mult: int
    """Operands per ifmap range (eltwise N, else 1)."""


_EMPTY = FmapRange((0, 0), (0, 0), (0, 0), (0, 0))


def _tiling(v: LayerView, batch: int, part: tuple[int, int, int, int]) -> _Tiling:
    """The reference's `initLayouts` for one partition."""
    pk, pb, ph, pw = part
    cuts = [part_intv(v.k, pk), part_intv(batch, pb), part_intv(v.h, ph), part_intv(v.w, pw)]
    bhw = pb * ph * pw
    ofm, ifm, wgt, fwgt = [], [], [], []
    for k, b, h, w in itertools.product(range(pk), range(pb), range(ph), range(pw)):
        rng = FmapRange(*((c[i], c[i + 1]) for c, i in zip(cuts, (k, b, h, w), strict=True)))
        ofm.append(rng)
        idx = len(ofm) - 1
        empty = rng.volume() == 0
        if v.kind != "conv" or k == 0:
            members = tuple(idx + kk * bhw for kk in range(pk)) if v.kind == "conv" else (idx,)
            ifm.append((_EMPTY if empty else ifm_range(v, rng), members))
        if h or w:
            continue
        if v.fmap_wgt:
            fwgt.append((_EMPTY if empty else fmap_weight_range(v, rng),
                         tuple(range(idx, idx + ph * pw))))
        elif v.weights_per_k and b == 0:
            wgt.append((0 if empty else (rng.c[1] - rng.c[0]) * v.weights_per_k,
                        tuple(range(idx, idx + bhw))))
    mult = v.c if v.kind == "elt" else 1
    bcast = pk if v.kind == "conv" else 1
    sizes = [r.volume() for r, _ in ifm]
    wsizes = [s for s, _ in wgt] + [r.volume() for r, _ in fwgt]
    wgt_total = sum(s for s, _ in wgt) * bhw + sum(r.volume() for r, _ in fwgt) * ph * pw
    return _Tiling(part, ofm, ifm, wgt, fwgt, sum(sizes) * bcast * mult, max(sizes) * mult,
                   wgt_total, max(wsizes, default=0), mult)


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


@dataclass
class _Traffic:
    """The transfers of one partition, independent of the placement (§3.6)."""

    wgt: list[tuple[int, tuple[int, ...]]]
    reads: list[tuple[int, tuple[int, ...]]]
    moves: list[tuple[int, Tile, tuple[int, ...]]]
    """(bytes, producer tile, consumer group) of the on-chip moves."""
    writes: list[tuple[int, int]]
    """(ofm index, bytes) written to DRAM."""
    dram: int


def _fetch(src: Source, lo: int, hi: int, ranges: list[tuple[FmapRange, tuple[int, ...]]],
           batch: int, reads: list[tuple[int, tuple[int, ...]]],
           moves: list[tuple[int, Tile, tuple[int, ...]]]) -> None:
    """Source `src` filling channels [lo, hi) of `ranges`: from DRAM (the channel cut of
    each range, `fromRemoteMem`) or from its layout (`betweenLayout`)."""
    for rng, members in ranges:
        if not src.direct:
            cut = rng._replace(c=(max(rng.c[0], lo), min(rng.c[1], hi)))
            if cut.volume() > 0:
                reads.append((cut.volume(), members))
            continue
        assert src.layout is not None
        if rng.c[1] <= lo or (WRAP_CHANNEL_OFFSET and rng.c[0] < lo):
            continue
        wanted = rng._replace(c=(rng.c[0] - lo, rng.c[1] - lo))
        for tile, have in src.layout.tiles:
            n = intersect_volume(have, wanted, src.layout.batch, batch)
            if n > 0:
                moves.append((n, tile, members))


def _traffic(v: LayerView, t: _Tiling, batch: int, sources: Sequence[Source],
             wgt_sources: Sequence[Source], to_dram: bool, wgt_div: int) -> _Traffic:
    """DRAM weights or fmap weights (`wgt_sources`, never divided), each ifmap source from
    DRAM or its layout, the ofmap to DRAM (`calcNoC`)."""
    wgt = [(s, g) for s, g in t.wgt if s > 0]
    reads: list[tuple[int, tuple[int, ...]]] = []
    moves: list[tuple[int, Tile, tuple[int, ...]]] = []
    cur = 0
    for src in wgt_sources:
        _fetch(src, cur, cur + src.channels, t.fwgt, batch, reads, moves)
        cur += src.channels
    cur = 0
    for src in sources:
        lo, hi = cur, cur + src.channels
        cur = 0 if v.kind == "elt" and hi == v.k else hi
        _fetch(src, lo, hi, t.ifm, batch, reads, moves)
    writes = [(i, r.volume()) for i, r in enumerate(t.ofm) if r.volume() > 0] if to_dram else []
    dram = sum(s for s, _ in wgt) // wgt_div + sum(s for s, _ in reads)
    return _Traffic(wgt, reads, moves, writes, dram + sum(s for _, s in writes))


def _groups(pos: Sequence[Tile], members: tuple[int, ...]) -> tuple[Tile, ...]:
    return tuple(sorted(pos[m] for m in members))


def _hops(tr: _Traffic, pos: Sequence[Tile], ports: tuple[Tile, ...], wgt_div: int) -> int:
    """Byte-hops of one placement (`pos`: tile of each ofm index)."""
    h = sum(dram_read_hops(ports, _groups(pos, g), s) for s, g in tr.wgt) // wgt_div
    h += sum(dram_read_hops(ports, _groups(pos, g), s) for s, g in tr.reads)
    h += sum(s * tree_hops(src, _groups(pos, g)) for s, src, g in tr.moves)
    return h + sum(dram_write_hops(ports, pos[i], s) for i, s in tr.writes)


def _record(hw: TiledHardware, tr: _Traffic, pos: Sequence[Tile], wgt_div: int) -> LinkLoads:
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


def _positions(part: tuple[int, int, int, int], order: tuple[int, ...],
               cores: Sequence[Tile]) -> list[Tile]:
    """Tile of each ofm index under a placement order (`initPlacement`)."""
    step = [1, 1, 1, 1]
    acc = 1
    for d in reversed(order):
        step[d] = acc
        acc *= part[d]
    return [cores[step[0] * k + step[1] * b + step[2] * h + step[3] * w]
            for k, b, h, w in itertools.product(*(range(p) for p in part))]


def _min_cuts(workload: Workload, name: str, v: LayerView, batch: int, n_cores: int,
              capacity: int) -> int:
    """The reference's `minCuts` (plain conv and fc only; 0 otherwise)."""
    if v.kind != "conv":
        return 0
    x = ops.data_shape(workload.layers[name], workload.in_shapes(name))
    return int(x.elems * batch / (capacity * n_cores * 0.8) + 1)


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
    ports = tuple((p.x, p.y) for p in hw.dram.ports)
    wgt_div = tot_batch // batch
    dims = (v.k, batch, v.h, v.w)
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
        for order in placement_orders(part):
            pos = _positions(part, order, cores)
            hops = _hops(tr, pos, ports, wgt_div)
            energy = base + (hops * hw.noc.hop_pj_per_byte + dram_pj)
            if energy * time < best_cost:
                best_cost = energy * time
                best = (t, order, pos, tr, cycles, e_tile, ubuf, energy, time, hops)
    if best is None:
        return None
    return _finish(hw, name, batch, len(cores), best, wgt_div, segment)


def _finish(hw: TiledHardware, name: str, batch: int, n_cores: int, best: tuple,
            wgt_div: int, segment: bool) -> LeafResult:
    t, order, pos, tr, cycles, e_tile, ubuf, energy, time, hops = best
    rec = _record(hw, tr, pos, wgt_div)
    assert rec.byte_hops == hops and rec.dram_bytes == tr.dram, "hop count mismatch"
    if segment:
        time = max(time, rec.cycles(hw))
    layout = Layout(batch, tuple(zip(pos, t.ofm, strict=True)))
    ifm = tuple((pos[m], r.volume() * t.ifm_mult) for r, g in t.ifm if r.volume() for m in g)
    ifm += tuple((pos[m], r.volume()) for r, g in t.fwgt if r.volume() for m in g)
    wgt = tuple((pos[m], s) for s, g in t.wgt if s for m in g)
    return LeafResult(name, batch, n_cores, t.part, order, cycles, e_tile, ubuf, time,
                      energy, rec, layout, ifm, wgt)


@lru_cache(maxsize=8)
def _core(hw: TiledHardware) -> Hardware:
    return hw.core()
