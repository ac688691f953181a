"""Cost of one conv-like tile on the PE array, as the SoMa reference implementation's
`PolarMapper` computes it (src/coremapping.cpp, `genMapping` and `getCost`).

Model (one group; units: elements (= bytes at INT8), cycles, pJ):
- The tile is a workload C x K x R x S over an H x W x B output block. One of six
  unrollings spreads two of its dimensions over the pe_rows x pe_cols array (the first
  over the rows, the second over the columns): CxK, CxB, BxK, CxW, HxK, HxW. Inside a PE
  `vector` MACs reduce over C and `lanes` MACs produce output channels, so
  compute = ceil(C/(vec*p_c)) * ceil(K/(lane*p_k)) * ceil(H/p_h) * ceil(W/p_w)
  * ceil(B/p_b) * R * S cycles.
- Per unrolling, the reference tries every PE tile of w1 x h1 outputs that fits AL0 and
  OL0 (with K1 lane groups fitting WL0) and its dataflow variants: "plain"; weight
  broadcast between PEs ("kbsd"); activation broadcast ("wbsd"); both; and the weight-L2
  variants ("wl2"), which the reference evaluates although its WL2 has size 0, so they
  cost no energy and are bounded only by the GBUF read bandwidth. It counts AL0 / WL0 /
  OL0 / OL1 / GBUF accesses, time = max(compute, ceil(GBUF reads / read bandwidth)), and
  keeps the least energy x time (the first found on ties). GBUF reads = ifmap x its
  refetches + weights, GBUF writes = the ofmap. Like the reference, the ifmap is sized
  from the output tile: H + (R - stride) per tile boundary rows (and likewise columns)
  x C x B, which undercounts the input of strided convolutions (conv1: 112 + 5 per
  boundary rows instead of 229).
- Groups (grouped and depthwise convolutions, attention heads) run one after another;
  when a group is narrower than a PE, nDup = min(vec // C, lane // K) groups share it.
  A depthwise conv is a group conv with C = K = 1 per group: min(vec, lane) channels at
  a time, each spread over the array by its H x W (or B) unrolling.
- Integer formulas wrap around like the reference's unsigned 32-bit (`len_t`) and 64-bit
  (`access_t`) arithmetic where they subtract (e.g. R - stride < 0 for a 1x1 stride-2
  conv), so that the same mapping wins.

With elem_bytes > 1 (the reference models INT8 only), L0 buffers hold
capacity // elem_bytes elements and every access moves elem_bytes bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import lru_cache
from typing import NamedTuple

from mipsched.hw.model import Hardware
from mipsched.workload import ops
from mipsched.workload.layer import Layer, Op, Shape

#: SoMa reference (main_search.cpp, `PolarCore::Bus`): energy of passing one byte between
#: PEs in a broadcast (pJ/byte) and the bus bandwidth that must keep up with it
#: (bytes/cycle). The hardware presets do not carry these two numbers.
BUS_HOP_PJ_PER_BYTE = 0.018
BUS_BYTES_PER_CYCLE = 64

#: The six unrollings (rows dimension, columns dimension), in the reference's order.
UNROLLINGS: tuple[tuple[str, str], ...] = (
    ("C", "K"), ("C", "B"), ("B", "K"), ("C", "W"), ("H", "K"), ("H", "W"),
)

_U32 = 0xFFFFFFFF
_U64 = 0xFFFFFFFFFFFFFFFF


class NoMappingError(ValueError):
    """No unrolling fits the L0 buffers (the reference reports an infinite energy)."""


@dataclass(frozen=True)
class ConvShape:
    """A PE-array tile in the reference's conv terms, per group.

    c, k: input / output channels; r, s: kernel; h, w, batch: output extents of the tile;
    stride_h, stride_w: stride; groups: how many such groups the tile runs.
    """

    c: int
    k: int
    r: int
    s: int
    h: int
    w: int
    batch: int
    stride_h: int = 1
    stride_w: int = 1
    groups: int = 1


@dataclass(frozen=True)
class ArrayCost:
    """Best mapping of a ConvShape, all groups included. Units: cycles, pJ, bytes."""

    cycles: int
    compute_cycles: int
    bound_cycles: int
    """Least compute over the six unrollings: a lower bound on `cycles` that, unlike
    `cycles`, never decreases when the tile grows."""
    energy_pj: float
    mac_pj: float
    local_pj: float
    """AL0 / WL0 / OL0 / OL1 accesses."""
    gbuf_pj: float
    noc_pj: float
    gbuf_read_bytes: int
    gbuf_write_bytes: int
    mapping: str
    dataflow: str


def conv_shape(layer: Layer, in_shapes: tuple[Shape, ...], batch: int, height: int,
               width: int) -> ConvShape:
    """The reference's conv workload for an output tile of `layer` (all output channels).

    CONV / DEPTHWISE_CONV: the reference's (Group)ConvLayer, depthwise being groups =
    channels; several inputs count as one, concatenated along channels. FC: a conv whose
    kernel is the whole input plane (R x S = H_in x W_in) on a 1 x 1 output. MATMUL: a
    1 x 1 conv with tokens as H. MATMUL_ACT: a GroupConv whose weights are an activation
    (QK^T, scores.V): per head C = reduction, K = out / heads, with the batch folded into
    the groups (reference `wgtB`). Dilation is ignored, as in the reference.
    """
    op = layer.op
    src = ops.data_shape(layer, in_shapes)
    if op in (Op.CONV, Op.DEPTHWISE_CONV):
        g = layer.groups
        return ConvShape(src.c // g, layer.out.c // g, layer.kernel[0], layer.kernel[1],
                         height, width, batch, layer.stride[0], layer.stride[1], g)
    if op == Op.FC:
        return ConvShape(src.c, layer.out.c, src.h, src.w, height, width, batch)
    if op == Op.MATMUL:
        return ConvShape(src.c, layer.out.c, 1, 1, height, width, batch)
    if op == Op.MATMUL_ACT:
        g = layer.groups
        return ConvShape(src.c // g, layer.out.c // g, 1, 1, height, width, 1, groups=g * batch)
    raise ValueError(f"layer '{layer.name}': {op} does not run on the PE array")


def _ceil(x: int, y: int) -> int:
    """The reference's DIVCEIL (0 for x == 0)."""
    return 0 if x == 0 else (x - 1) // y + 1


class _Unrolling(NamedTuple):
    """One unrolling and its per-PE loop bounds (reference: pnum_*, tot*, K1)."""

    name: str
    pc: int
    pk: int
    ph: int
    pw: int
    pb: int
    tc: int  # vector steps over C per PE
    tk: int  # lane groups over K per PE
    oc: int  # channels of C per PE
    th: int
    tw: int
    tb: int
    compute: int
    k1: int  # lane groups held in WL0
    nk: int  # ceil(tk / k1)
    kb: int  # K tiles broadcast at once ("kbsd")
    nkb: int  # ceil(nk / kb)
    al0_rows: int  # AL0 elements per vector unit / tc
    wl0_tile: int  # WL0 elements of one PE tile


class _PeTile(NamedTuple):
    """A w1 x h1 output tile per PE and its loop counts (reference: W1, H1, H3, W loops)."""

    w1: int
    h1: int
    nh: int  # ceil(th / h1)
    nw: int  # ceil(tw / w1)
    wb: int  # W tiles broadcast at once ("wbsd")
    nwb: int  # ceil(nw / wb)
    pe_cycles: int  # compute of one tile in one PE


class _Traffic(NamedTuple):
    """Accesses (elements) of one variant, per group."""

    al0_r: int
    al0_w: int
    wl0_r: int
    wl0_w: int
    ol0_r: int
    ol0_w: int
    ofmap: int  # OL1 reads = OL1 writes = GBUF writes
    gbuf_r: int
    act_bus: int  # activation elements broadcast between PEs
    wgt_bus: int  # weight elements broadcast between PEs
    wl2_r: int  # weight reads of the (free) WL2 variant


def _unrollings(hw: Hardware, sh: ConvShape, e: int) -> Iterator[_Unrolling]:
    """All six unrollings; `k1 == 0` marks one that does not fit the L0 buffers."""
    ca = hw.core_array
    vec, lane = ca.vector, ca.lanes
    al0_unit = ca.al0.capacity_bytes // e // vec
    ol0_unit = ca.ol0.capacity_bytes // e // lane
    wl0_unit = ca.wl0.capacity_bytes // e // vec
    for rows, cols in UNROLLINGS:
        p = {"C": 1, "K": 1, "H": 1, "W": 1, "B": 1}
        p[rows] *= ca.pe_rows
        p[cols] *= ca.pe_cols
        pc, pk, ph, pw, pb = p["C"], p["K"], p["H"], p["W"], p["B"]
        tc, tk = _ceil(sh.c, vec * pc), _ceil(sh.k, lane * pk)
        th, tw, tb = _ceil(sh.h, ph), _ceil(sh.w, pw), _ceil(sh.batch, pb)
        compute = tc * tk * th * tw * tb * sh.r * sh.s
        k1_max = wl0_unit // (sh.r * sh.s * tc)
        al0_rows = al0_unit // tc
        fits = ol0_unit > 0 and k1_max > 0 and al0_rows // sh.r >= sh.s
        k1 = min(tk, k1_max) if fits else 0
        nk = _ceil(tk, k1) if fits else 0
        kb = min(nk, ph * pw * pb)
        yield _Unrolling(
            f"{rows}x{cols}", pc, pk, ph, pw, pb, tc, tk, _ceil(sh.c, pc), th, tw, tb,
            compute, k1, nk, kb, _ceil(nk, kb) if fits else 0, al0_rows,
            (sh.r * sh.s * _ceil(sh.c, pc) * min(_ceil(sh.k, pk), k1 * lane)) & _U32,
        )


def _pe_tiles(hw: Hardware, sh: ConvShape, u: _Unrolling, e: int) -> Iterator[_PeTile]:
    """PE tiles from the widest down, skipping a width whose height repeats the last."""
    ol0_unit = hw.core_array.ol0.capacity_bytes // e // hw.core_array.lanes
    max_w1 = min((u.al0_rows // sh.r - sh.s) // sh.stride_w + 1, ol0_unit, u.tw)
    last_h1 = 0
    for w1 in range(max_w1, 0, -1):
        in_w1 = (w1 - 1) * sh.stride_w + sh.s
        h1 = min(ol0_unit // w1, (u.al0_rows // in_w1 - sh.r) // sh.stride_h + 1, u.th)
        if h1 == last_h1:
            continue
        last_h1 = h1
        nw = _ceil(u.tw, w1)
        wb = min(nw, u.pk)
        yield _PeTile(w1, h1, _ceil(u.th, h1), nw, wb, _ceil(nw, wb),
                      sh.r * sh.s * u.tc * u.k1 * h1 * w1)


def _variants(u: _Unrolling, t: _PeTile) -> list[tuple[bool, bool, bool]]:
    """(kbsd, wbsd, wl2) variants the reference evaluates, in its order."""
    out = [(False, False, False)]
    several = u.tb > 1 or t.nh > 1
    if several and t.nw > 1 and u.kb > 1:
        out.append((True, False, False))
    if t.wb > 1:
        if u.kb > 1 and u.nkb > 1:
            out.append((True, True, False))
        if several and t.nwb > 1:
            if u.nk > 1:
                out.append((False, True, True))
            if u.kb > 1 and u.nkb > 1:
                out.append((True, True, True))
    return out


def _traffic(sh: ConvShape, u: _Unrolling, t: _PeTile, kbsd: bool, wbsd: bool,
             wl2: bool, lane: int) -> _Traffic:
    """Buffer accesses of one variant (reference `getCost`, dataflow KHWB)."""
    C, K, R, S, H, W, B = sh.c, sh.k, sh.r, sh.s, sh.h, sh.w, sh.batch
    sr, sc = sh.stride_h, sh.stride_w
    macs = C * K * R * S * H * W * B
    filt = R * S * C * K
    ofmap = H * W * K * B
    wdup, adup = u.ph * u.pw * u.pb, u.pk

    def rows(n: int) -> int:  # ifmap rows for n row tiles per PE row (HTOTL)
        return (H + ((R - sr) & _U32) * ((n * u.ph - 1) & _U32)) & _U32

    def cols(n: int) -> int:  # ifmap columns for n column tiles (WTOTL)
        return (W + ((S - sc) & _U32) * ((n * u.pw - 1) & _U32)) & _U32

    k3 = u.nkb if kbsd else u.nk
    w3 = t.nwb if wbsd else t.nw
    w_all = t.nw * t.nh * u.tb
    w3_all = w3 * t.nh * u.tb
    ifm_tile = (rows(1 if t.nw == 1 else t.nh) * C * B) & _U32
    wl0_fetch = w_all if kbsd else (w3_all if wl2 else 1)
    gbuf_ifm = (rows(1 if w3 == 1 else t.nh) * cols(1) * C * B) & _U32
    gbuf_ifm = gbuf_ifm * (1 if (kbsd and wbsd and not wl2) else k3)
    wl2_r = filt * (w3_all if (wbsd or wl2) else 1)

    al0_r = (macs // K) * u.tk * u.pk
    al0_w = ifm_tile * cols(w3 if wbsd else 1) * k3 * adup
    act_bus = 0
    if wbsd:
        halo = (ifm_tile * ((S - sc) & _U32) * u.pw * k3) & _U64
        span = (((t.w1 * ((t.nw - t.nw % adup) & _U32)) & _U32) + sc - S) & _U32
        rest = (W - ((span * u.pw) & _U32)) & _U32
        shared = ((ifm_tile * rest * k3 + halo) * (((adup - 1) * t.nw) % adup)) & _U64
        al0_w = (al0_w + halo * ((w3 * (adup - 1)) & _U32)) & _U64
        act_bus = (al0_w - gbuf_ifm) & _U64
        al0_r = (al0_r + ((act_bus - shared) & _U64)) & _U64
    wl0_r = filt * w_all * wdup
    wl0_w = filt * wl0_fetch * wdup
    wgt_bus = 0
    if kbsd:
        covered = (u.k1 * lane * u.pk * ((u.nk - u.nk % wdup) & _U32)) & _U32
        shared = ((filt // K) * ((K - covered) & _U32) * wl0_fetch
                  * (((wdup - 1) * u.nk) % wdup)) & _U64
        wgt_bus = (wl0_w - wl2_r) & _U64
        wl0_r = (wl0_r + ((wgt_bus - shared) & _U64)) & _U64
    ol0_w = (macs // C) * u.tc * u.pc
    gbuf_r = gbuf_ifm + (filt if wl2 else wl2_r)
    return _Traffic(al0_r, al0_w, wl0_r, wl0_w, ol0_w + u.pc * ofmap, ol0_w, ofmap, gbuf_r,
                    act_bus, wgt_bus, wl2_r)


class _Figures(NamedTuple):
    """Energy (pJ) and cycles of one variant for one group, and the energy's parts."""

    energy_pj: float
    cycles: int
    local_pj: float
    gbuf_pj: float
    noc_pj: float
    traffic: _Traffic


def _bus_keeps_up(sh: ConvShape, u: _Unrolling, t: _PeTile, kbsd: bool, wbsd: bool,
                  n_dup: int, e: int) -> bool:
    """Whether the variant's broadcasts keep up with the PE compute over the PE bus."""
    bus = BUS_BYTES_PER_CYCLE
    if kbsd and t.pe_cycles * bus < u.wl0_tile * n_dup * e:
        return False
    if wbsd:
        cyc = u.kb * t.pe_cycles if kbsd else t.pe_cycles
        need = (((t.h1 + sh.r - sh.stride_h) & _U32) * t.w1 * u.oc * n_dup) & _U32
        if cyc * bus < need * e:
            return False
    return True


def _variant_figures(hw: Hardware, sh: ConvShape, u: _Unrolling, t: _PeTile, kbsd: bool,
                     wbsd: bool, wl2: bool, n_dup: int, mac_pj: float, e: int) -> _Figures:
    """Energy and time of one variant for one group: buffer, GBUF and bus accesses
    priced per byte; time = max(compute, GBUF reads / read bandwidth)."""
    ca, gbuf = hw.core_array, hw.gbuf
    bw = gbuf.read_bytes_per_cycle
    a = _traffic(sh, u, t, kbsd, wbsd, wl2, ca.lanes)
    local = (a.al0_r * e * ca.al0.read_pj_per_byte
             + a.al0_w * e * ca.al0.write_pj_per_byte
             + a.wl0_r * e * ca.wl0.read_pj_per_byte
             + a.wl0_w * e * ca.wl0.write_pj_per_byte
             + a.ol0_r * e * ca.ol0.read_pj_per_byte
             + a.ol0_w * e * ca.ol0.write_pj_per_byte
             + a.ofmap * e * ca.ol1.read_pj_per_byte
             + a.ofmap * e * ca.ol1.write_pj_per_byte)
    gbuf_pj = (a.gbuf_r * e * gbuf.read_pj_per_byte
               + a.ofmap * e * gbuf.write_pj_per_byte)
    noc = 0.0
    if kbsd:
        noc += a.wgt_bus * e * BUS_HOP_PJ_PER_BYTE
    if wbsd:
        noc += a.act_bus * e * BUS_HOP_PJ_PER_BYTE
    energy = gbuf_pj + local + noc + mac_pj
    cycles = max(u.compute, _ceil(a.gbuf_r * n_dup * e, bw))
    if wl2:
        filt = sh.r * sh.s * sh.c * sh.k
        cycles = max(cycles, _ceil(a.wl2_r * n_dup * e, bw),
                     _ceil(filt * n_dup * e, bw))
    return _Figures(energy, cycles, local, gbuf_pj, noc, a)


@lru_cache(maxsize=65536)
def map_conv(hw: Hardware, sh: ConvShape, elem_bytes: int = 1) -> ArrayCost:
    """The least energy x time mapping of `sh` on `hw`'s PE array (all groups).

    Raises NoMappingError when no unrolling fits the L0 buffers.
    """
    ca, e = hw.core_array, elem_bytes
    groups = sh.groups
    n_dup, serial = _group_passes(hw, sh)
    mac_pj = sh.c * sh.k * sh.r * sh.s * sh.h * sh.w * sh.batch * ca.mac_pj

    unrollings = list(_unrollings(hw, sh, e))
    best: ArrayCost | None = None
    best_edp = float("inf")
    for u in unrollings:
        if u.k1 == 0:
            continue
        for t in _pe_tiles(hw, sh, u, e):
            for kbsd, wbsd, wl2 in _variants(u, t):
                if not _bus_keeps_up(sh, u, t, kbsd, wbsd, n_dup, e):
                    continue
                figures = _variant_figures(hw, sh, u, t, kbsd, wbsd, wl2, n_dup, mac_pj, e)
                energy, cycles = figures.energy_pj, figures.cycles
                if groups > 1:
                    energy *= groups
                    cycles *= serial
                if energy * cycles < best_edp:
                    best_edp = energy * cycles
                    flags = (("kbsd", kbsd), ("wbsd", wbsd), ("wl2", wl2))
                    best = ArrayCost(
                        cycles=cycles, compute_cycles=u.compute * serial, bound_cycles=0,
                        energy_pj=energy, mac_pj=mac_pj * groups,
                        local_pj=figures.local_pj * groups, gbuf_pj=figures.gbuf_pj * groups,
                        noc_pj=figures.noc_pj * groups,
                        gbuf_read_bytes=figures.traffic.gbuf_r * e * groups,
                        gbuf_write_bytes=figures.traffic.ofmap * e * groups, mapping=u.name,
                        dataflow="+".join(n for n, on in flags if on) or "plain",
                    )
    if best is None:
        raise NoMappingError(f"no PE-array mapping of {sh} fits the L0 buffers of '{hw.name}'")
    return replace(best, bound_cycles=compute_floor(hw, sh, e))


def _group_passes(hw: Hardware, sh: ConvShape) -> tuple[int, int]:
    """(groups sharing the PE array at once, passes run one after another) of `sh`."""
    if sh.groups == 1:
        return 1, 1
    n_dup = min(hw.core_array.vector // sh.c, hw.core_array.lanes // sh.k)
    if n_dup > 1:
        n_dup = min(n_dup, sh.groups)
        return n_dup, _ceil(sh.groups, n_dup)
    return n_dup, sh.groups


def compute_floor(hw: Hardware, sh: ConvShape, elem_bytes: int = 1) -> int:
    """The least cycles of any mapping of `sh` on `hw`'s PE array (all groups), without
    searching the mappings: every variant takes max(its unrolling's compute, its GBUF
    reads) per pass, so at least the least compute over the six unrollings, fitting the
    L0 buffers or not, times the passes (map_conv's `bound_cycles`)."""
    return min(u.compute for u in _unrollings(hw, sh, elem_bytes)) * _group_passes(hw, sh)[1]


def position_cycles_bound(hw: Hardware, sh: ConvShape) -> Fraction:
    """A lower bound on the PE-array compute cycles per output position (sample x row x
    column) of one group, valid for every tile of the layer `sh` describes.

    For an unrolling, a tile's compute is tc * tk * R * S * ceil(h/p_h) * ceil(w/p_w) *
    ceil(b/p_b); channels are never tiled, so tc and tk are the layer's, and ceil(x/p) >=
    x/p (or = 1 when the layer's extent along that axis is 1). Every tile may pick another
    unrolling, so the bound per position is the least over all six."""
    best: Fraction | None = None
    for u in _unrollings(hw, sh, 1):
        spread = ((u.ph if sh.h > 1 else 1) * (u.pw if sh.w > 1 else 1)
                  * (u.pb if sh.batch > 1 else 1))
        per_position = Fraction(u.tc * u.tk * sh.r * sh.s, spread)
        best = per_position if best is None else min(best, per_position)
    assert best is not None
    return best


def input_reads_per_position(hw: Hardware, sh: ConvShape) -> int:
    """A lower bound on the input elements one group of any tile of the layer `sh`
    describes (its whole output) reads from the GBUF per output position: C, or 0 where
    the model gives no such floor.

    Every variant reads gbuf_ifm = rows x cols x C x B elements at least once (times the K
    passes k3 >= 1), with rows = H + (R - stride_h) x (n p_h - 1) >= H and cols = W +
    (S - stride_w)(p_w - 1) >= W when the kernel is at least the stride; the reference
    computes them in 32-bit unsigned arithmetic, so the floor also needs the largest tile's
    product (n p_h <= H + p_h - 1) to stay below 2^32. A tile's time is at least those
    bytes x n_dup / the read bandwidth per group, times `serial` >= groups / n_dup; where
    several groups share no pass (n_dup = 0: a group wider than the vector or the lanes)
    the reference drops the read time, and so does this floor."""
    if sh.r < sh.stride_h or sh.s < sh.stride_w:
        return 0
    if sh.groups > 1 and min(hw.core_array.vector // sh.c, hw.core_array.lanes // sh.k) < 1:
        return 0
    ca = hw.core_array
    reach = max(ca.pe_rows, ca.pe_cols)
    rows = sh.h + (sh.r - sh.stride_h) * (sh.h + reach)
    cols = sh.w + (sh.s - sh.stride_w) * reach
    return sh.c if rows * cols * sh.c * sh.batch <= _U32 else 0


def group_sharing(hw: Hardware, sh: ConvShape) -> int:
    """How many groups at most share the PE array at once (the reference's nDup)."""
    n_dup = min(hw.core_array.vector // sh.c, hw.core_array.lanes // sh.k)
    return max(1, min(n_dup, sh.groups)) if sh.groups > 1 else 1
