"""The layer kinds of SET's leaf model (docs/set-model.md §3.4, §3.5, §3.13): how a
mipsched layer looks to the reference (`layer_view`), which input range an ofmap range
needs (`ifm_range`, the reference's `ofm_to_ifm`), which fmap range serves as the
weights of an ofmap range (`fmap_weight_range`, `ofm_to_wgt` of a GroupConv with
`wgtPrevs`), which of a leaf's sources feed its weights (`split_sources`) and the
per-core ceiling tile of a grouped layer (`group_tile`, `genLayerMap`).

Kinds ('kind' of `LayerView`):

- 'conv': the reference's ConvLayer / FCLayer (plain conv, fc, MATMUL = 1x1 conv with
  H = tokens, W = 1). Ifmap: all C, multicast over the K partition; weights from DRAM.
- 'gconv': the reference's GroupConvLayer (grouped conv, depthwise conv = one channel per
  group, MATMUL_ACT = one group per head). Ifmap: one range per core, the channels of the
  groups its K slice touches; weights the K slice x C per group x R x S, from DRAM, or for
  MATMUL_ACT the right operand's fmap (`fmap_wgt`, the reference's `wgtPrevs`).
- 'pool': PoolingLayer (max / avg window pool; a global pool is a window of the whole
  plane). 'elt': EltwiseLayer (add / mul of N operands).
- 'ptp': PTPLayer / TransposeLayer (softmax, layernorm, GELU, copying concat along
  channels, transpose): one vector op per output element; the ifmap range is the ofmap
  range (a transpose permutes its axes; several inputs are concatenated by channel).

Units: elements (= bytes at INT8), cycles, pJ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mipsched.cost.core_array import ConvShape, NoMappingError, map_conv
from mipsched.hw.model import Hardware
from mipsched.tiled.noc import FmapRange
from mipsched.workload import ops
from mipsched.workload.graph import Workload
from mipsched.workload.layer import Op

if TYPE_CHECKING:
    from mipsched.tiled.leaf import Source

PTP_OPS = frozenset({Op.SOFTMAX, Op.LAYERNORM, Op.GELU, Op.TRANSPOSE, Op.CONCAT})
IDENTITY = (0, 1, 2)


@dataclass(frozen=True)
class LayerView:
    """One layer in the reference's terms: ofmap (K, H, W), kind, input geometry."""

    kind: str
    """'conv', 'gconv', 'pool', 'elt' or 'ptp' (module docstring)."""
    k: int
    h: int
    w: int
    c: int
    """Input channels (conv, gconv) or operands N (elt)."""
    kernel: tuple[int, int]
    stride: tuple[int, int]
    pad: tuple[int, int]
    in_hw: tuple[int, int]
    weights_per_k: int
    """Weight elements of one output channel (C per group x R x S)."""
    window: int
    """Vector ops per output element (pool: R x S; elt: N; ptp: 1)."""
    gc: int = 0
    """Input channels per group (gconv)."""
    gk: int = 0
    """Output channels per group (gconv)."""
    fmap_wgt: bool = False
    """The weights are the fmap of the layer's second input (MATMUL_ACT)."""
    wgt_plane: tuple[int, int] = (1, 1)
    """(H, W) of that fmap: one weight range covers its whole plane."""
    perm: tuple[int, int, int] = IDENTITY
    """Transpose: output axis d is input axis perm[d] (0 = C, 1 = H, 2 = W)."""


def layer_view(workload: Workload, name: str) -> LayerView:
    """The reference's view of layer `name`; ValueError for what it cannot express (a
    MATMUL_ACT with a transposed right operand, a concat along rows or without copy)."""
    lay = workload.layers[name]
    ins = workload.in_shapes(name)
    x = ops.data_shape(lay, ins)
    out = lay.out
    hw_in = (x.h, x.w)
    if lay.op == Op.FC:
        return LayerView("conv", out.c, 1, 1, x.c, hw_in, (1, 1), (0, 0), hw_in,
                         x.c * x.h * x.w, 0)
    if lay.op == Op.MATMUL:
        return LayerView("conv", out.c, out.h, out.w, x.c, (1, 1), (1, 1), (0, 0), hw_in,
                         x.c, 0)
    if lay.op == Op.MATMUL_ACT:
        if lay.transpose_rhs:
            raise ValueError(f"layer '{name}': SET's GroupConv reads its fmap weights in "
                             "weight layout; transpose_rhs is not modelled")
        g, rhs = lay.groups, ins[1]
        return LayerView("gconv", out.c, out.h, out.w, x.c, (1, 1), (1, 1), (0, 0), hw_in,
                         x.c // g, 0, x.c // g, out.c // g, True, (rhs.h, rhs.w))
    if lay.op in (Op.CONV, Op.DEPTHWISE_CONV):
        r, s = lay.kernel
        g = lay.groups
        kind = "conv" if lay.op == Op.CONV and g == 1 else "gconv"
        return LayerView(kind, out.c, out.h, out.w, x.c, lay.kernel, lay.stride,
                         lay.padding, hw_in, x.c // g * r * s, 0, x.c // g, out.c // g)
    if lay.op in (Op.MAX_POOL, Op.AVG_POOL):
        return LayerView("pool", out.c, out.h, out.w, 1, lay.kernel, lay.stride,
                         lay.padding, hw_in, 0, lay.kernel[0] * lay.kernel[1])
    if lay.op == Op.GLOBAL_POOL:
        return LayerView("pool", out.c, 1, 1, 1, hw_in, hw_in, (0, 0), hw_in, 0,
                         x.h * x.w)
    if lay.op in (Op.ADD, Op.MUL):
        n = ops.operand_count(lay, ins)
        return LayerView("elt", out.c, out.h, out.w, n, (1, 1), (1, 1), (0, 0),
                         (out.h, out.w), 0, n)
    if lay.op in PTP_OPS:
        if lay.op == Op.CONCAT and (lay.axis != "c" or not lay.copy):
            raise ValueError(f"layer '{name}': only a copying concat along channels is "
                             "SET's PTP")
        perm = lay.perm if lay.op == Op.TRANSPOSE else IDENTITY
        return LayerView("ptp", out.c, out.h, out.w, 1, (1, 1), (1, 1), (0, 0),
                         (out.h, out.w), 0, 1, perm=perm)
    raise ValueError(f"layer '{name}': op {lay.op} is not modelled by the SET leaf")


def _in_interval(lo: int, hi: int, kernel: int, stride: int, pad: int,
                 size: int) -> tuple[int, int]:
    """The reference's `ofm_to_ifm` along one axis (bounding interval, clipped)."""
    first = max(lo * stride - pad, 0)
    return first, min((hi - 1) * stride + kernel - pad, size)


def ifm_range(v: LayerView, ofm: FmapRange) -> FmapRange:
    """The ifmap range (input coordinates) that ofmap range `ofm` needs."""
    if v.kind == "elt":
        return ofm
    if v.kind == "ptp":
        spans = (ofm.c, ofm.h, ofm.w)
        axes = [spans[v.perm.index(a)] for a in range(3)]
        return FmapRange(axes[0], ofm.b, axes[1], axes[2])
    h = _in_interval(ofm.h[0], ofm.h[1], v.kernel[0], v.stride[0], v.pad[0], v.in_hw[0])
    w = _in_interval(ofm.w[0], ofm.w[1], v.kernel[1], v.stride[1], v.pad[1], v.in_hw[1])
    if v.kind == "conv":
        c = (0, v.c)
    elif v.kind == "gconv":
        c = (ofm.c[0] // v.gk * v.gc, -(-ofm.c[1] // v.gk) * v.gc)
    else:
        c = ofm.c
    return FmapRange(c, ofm.b, h, w)


def fmap_weight_range(v: LayerView, ofm: FmapRange) -> FmapRange:
    """The producer fmap range that serves as the weights of ofmap range `ofm` (the
    reference's `ofm_to_wgt` with the batch kept): its K slice as channels, its samples,
    the whole plane."""
    return FmapRange(ofm.c, ofm.b, (0, v.wgt_plane[0]), (0, v.wgt_plane[1]))


def split_sources(workload: Workload, name: str,
                  sources: Sequence[Source]) -> tuple[list[Source], list[Source]]:
    """(ifmap sources, weight sources) of a leaf. `sources` are in the order
    `mipsched.tiled.evaluate` builds them (network inputs in input order, then producers
    in layer order); for a MATMUL_ACT the source of its right operand feeds the weights
    (also the ifmap when both operands are one tensor), for every other layer all feed
    the ifmap."""
    lay = workload.layers[name]
    if lay.op != Op.MATMUL_ACT:
        return list(sources), []
    inputs = list(dict.fromkeys(lay.inputs))
    order = {n: i for i, n in enumerate(workload.layers)}
    names = [s for s in inputs if s not in workload.layers]
    names += sorted((s for s in inputs if s in workload.layers), key=order.__getitem__)
    lhs, rhs = lay.inputs
    ifm = [s for n, s in zip(names, sources, strict=True) if n == lhs]
    wgt = [s for n, s in zip(names, sources, strict=True) if n == rhs]
    return ifm, wgt


def group_tile(v: LayerView, tile: tuple[int, int, int, int]) -> ConvShape:
    """The reference's per-core workload of a GroupConv for the ceiling tile `tile` =
    (K', B', H', W'): nGroup = ceil(K' / K per group) groups of C per group; K = K per
    group when nGroup > 1, else K'; with fmap weights the samples become groups too
    (nGroup x B', B = 1)."""
    kk, bb, hh, ww = tile
    groups = -(-kk // v.gk)
    k = v.gk if groups > 1 else kk
    if v.fmap_wgt:
        groups, bb = groups * bb, 1
    return ConvShape(v.gc, k, v.kernel[0], v.kernel[1], hh, ww, bb, v.stride[0],
                     v.stride[1], groups)


def group_tile_cost(core: Hardware, v: LayerView,
                    tile: tuple[int, int, int, int]) -> tuple[int, float] | None:
    """(cycles, pJ) of a GroupConv ceiling tile on the PE array (energy x nGroup, time x
    ceil(nGroup / nDup)); None when no PE-array mapping fits (the reference skips the
    partition)."""
    try:
        cost = map_conv(core, group_tile(v, tile), 1)
    except NoMappingError:
        return None
    return cost.cycles, cost.energy_pj
