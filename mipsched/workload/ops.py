"""Operator math: output shapes, MACs, vector ops, weights and the input region that an
output region needs (the basis of halo back-propagation).

All counts are for the samples and rows inside the given output region; units are
elements, MACs or vector ops, never bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

from mipsched.errors import InputError
from mipsched.workload.layer import CONCAT_READERS, Layer, Op, Region, Shape


class ShapeError(InputError):
    """A layer's parameters do not fit the shapes of its inputs."""


def conv_out_extent(size: int, kernel: int, stride: int, pad: int, dilation: int,
                    pad_end: int | None = None) -> int:
    """Output rows (or columns) of a sliding window over `size` input rows padded with
    `pad` rows in front and `pad_end` (default: `pad`) behind."""
    span = dilation * (kernel - 1) + 1
    return (size + pad + (pad if pad_end is None else pad_end) - span) // stride + 1


def data_shape(layer: Layer, ins: Sequence[Shape]) -> Shape:
    """The map a single-operand op computes on: its input, or for the ops of
    CONCAT_READERS its inputs concatenated along channels (equal H x W checked)."""
    if layer.op in CONCAT_READERS and len(ins) > 1:
        if any((s.h, s.w) != (ins[0].h, ins[0].w) for s in ins):
            raise ShapeError(f"layer '{layer.name}': inputs read as one along channels need "
                             f"equal H x W, got {[tuple(s) for s in ins]}")
        return Shape(sum(s.c for s in ins), ins[0].h, ins[0].w)
    return ins[0]


def window_input_range(
    lo: int, hi: int, kernel: int, stride: int, pad: int, dilation: int, size: int
) -> tuple[int, int]:
    """Input rows [lo', hi') that output rows [lo, hi) of a sliding window read, clipped to
    the `size` real rows (padding is not data). Its length is Cocco's f(x) = F + (x-1)*s
    for an interior tile of x rows."""
    first = lo * stride - pad
    last = (hi - 1) * stride - pad + dilation * (kernel - 1)
    return max(first, 0), min(last + 1, size)


def infer_out_shape(layer: Layer, ins: Sequence[Shape]) -> Shape:
    """Output shape of `layer` given its input shapes; raises ShapeError when they clash."""
    op = layer.op
    _check_input_count(layer, ins)
    if op in (Op.CONV, Op.DEPTHWISE_CONV, Op.MAX_POOL, Op.AVG_POOL):
        return _window_out_shape(layer, ins)
    if op == Op.GLOBAL_POOL:
        return Shape(data_shape(layer, ins).c, 1, 1)
    if op == Op.FC:
        data_shape(layer, ins)
        return Shape(layer.out.c, 1, 1)
    if op == Op.MATMUL:
        x = data_shape(layer, ins)
        return Shape(layer.out.c, x.h, x.w)
    if op == Op.MATMUL_ACT:
        return _matmul_act_out_shape(layer, ins)
    if op in (Op.ADD, Op.MUL):
        return _eltwise_out_shape(layer, ins)
    if op in (Op.SOFTMAX, Op.LAYERNORM, Op.GELU):
        return ins[0]
    if op == Op.TRANSPOSE:
        if sorted(layer.perm) != [0, 1, 2]:
            raise ShapeError(f"layer '{layer.name}': perm {list(layer.perm)} is not a "
                             "permutation of the axes 0 (C), 1 (H), 2 (W)")
        return Shape(*(ins[0][a] for a in layer.perm))
    if op == Op.CONCAT:
        return _concat_out_shape(layer, ins)
    raise ShapeError(f"layer '{layer.name}': unknown op {op!r}")


def _need_inputs(layer: Layer, ins: Sequence[Shape], n: int) -> None:
    """Raises ShapeError unless `layer` has exactly `n` inputs."""
    if len(ins) != n:
        raise ShapeError(f"layer '{layer.name}': {layer.op} takes {n} input(s), got "
                         f"{len(ins)}")


def _check_input_count(layer: Layer, ins: Sequence[Shape]) -> None:
    """Raises ShapeError when `layer` has no input, or for a single-operand op that does
    not read several inputs as one, more than one."""
    op = layer.op
    if op in CONCAT_READERS:
        if not ins:
            raise ShapeError(f"layer '{layer.name}': {op} needs at least one input")
    elif op != Op.CONCAT and op not in (Op.ADD, Op.MUL, Op.MATMUL_ACT):
        _need_inputs(layer, ins, 1)


def _window_out_shape(layer: Layer, ins: Sequence[Shape]) -> Shape:
    """Output shape of a conv, depthwise conv or window pool."""
    name = layer.name
    x = data_shape(layer, ins)
    (top, bottom), (left, right) = layer.pads(0), layer.pads(1)
    h = conv_out_extent(x.h, layer.kernel[0], layer.stride[0], top, layer.dilation[0],
                        bottom)
    w = conv_out_extent(x.w, layer.kernel[1], layer.stride[1], left, layer.dilation[1],
                        right)
    if h <= 0 or w <= 0:
        raise ShapeError(f"layer '{name}': window {layer.kernel} does not fit input {x}")
    if layer.op == Op.CONV:
        if x.c % layer.groups or layer.out.c % layer.groups:
            raise ShapeError(
                f"layer '{name}': groups={layer.groups} must divide in channels {x.c} "
                f"and out channels {layer.out.c}"
            )
        return Shape(layer.out.c, h, w)
    return Shape(x.c, h, w)


def _matmul_act_out_shape(layer: Layer, ins: Sequence[Shape]) -> Shape:
    """Output shape of a matmul of two activations, per head: Q K^T (`transpose_rhs`) or
    scores . V."""
    name = layer.name
    _need_inputs(layer, ins, 2)
    lhs, rhs = ins
    g = layer.groups
    if layer.transpose_rhs:
        if lhs.c != rhs.c or lhs.c % g:
            raise ShapeError(
                f"layer '{name}': QK^T needs equal feature counts divisible by "
                f"{g} heads, got {lhs.c} and {rhs.c}"
            )
        return Shape(g * rhs.h * rhs.w, lhs.h, lhs.w)
    if lhs.c != g * rhs.h * rhs.w or rhs.c % g:
        raise ShapeError(
            f"layer '{name}': scores.V needs {g} x {rhs.h * rhs.w} score columns, "
            f"got {lhs.c}"
        )
    return Shape(rhs.c, lhs.h, lhs.w)


def _eltwise_out_shape(layer: Layer, ins: Sequence[Shape]) -> Shape:
    """Output shape of an add / mul: its inputs' shape, or the output's channels when the
    inputs, read concatenated along channels, form several operands."""
    if len(ins) >= 2 and all(s == ins[0] for s in ins):
        return ins[0]
    channels = layer.out.c
    if (len(ins) < 2 or any((s.h, s.w) != (ins[0].h, ins[0].w) for s in ins)
            or channels < 1 or sum(s.c for s in ins) % channels
            or sum(s.c for s in ins) < 2 * channels):
        raise ShapeError(f"layer '{layer.name}': {layer.op} needs >= 2 inputs of one shape, "
                         f"or inputs of one H x W whose channels, read concatenated, form "
                         f">= 2 operands of the output's {channels} channels; got "
                         f"{[tuple(s) for s in ins]}")
    return Shape(channels, ins[0].h, ins[0].w)


def _concat_out_shape(layer: Layer, ins: Sequence[Shape]) -> Shape:
    """Output shape of a concat along channels or height."""
    name = layer.name
    if not ins:
        raise ShapeError(f"layer '{name}': concat needs inputs")
    if layer.axis == "c":
        if any((s.h, s.w) != (ins[0].h, ins[0].w) for s in ins):
            raise ShapeError(f"layer '{name}': concat over channels needs equal H x W")
        return Shape(sum(s.c for s in ins), ins[0].h, ins[0].w)
    if layer.axis == "h":
        if any((s.c, s.w) != (ins[0].c, ins[0].w) for s in ins):
            raise ShapeError(f"layer '{name}': concat over height needs equal C and W")
        return Shape(ins[0].c, sum(s.h for s in ins), ins[0].w)
    raise ShapeError(f"layer '{name}': concat axis must be 'c' or 'h', got {layer.axis!r}")


def weight_elems(layer: Layer, ins: Sequence[Shape]) -> int:
    """Weight elements of the layer (0 for ops without weights); biases are not modelled."""
    r, s = layer.kernel
    x = data_shape(layer, ins)
    if layer.op == Op.CONV:
        return layer.out.c * (x.c // layer.groups) * r * s
    if layer.op == Op.DEPTHWISE_CONV:
        return x.c * r * s
    if layer.op == Op.FC:
        return layer.out.c * x.elems
    if layer.op == Op.MATMUL:
        return layer.out.c * x.c
    return 0


def reduction_size(layer: Layer, ins: Sequence[Shape]) -> int:
    """MACs per output element (the reduction length) of a PE-array op."""
    r, s = layer.kernel
    x = data_shape(layer, ins)
    if layer.op == Op.CONV:
        return (x.c // layer.groups) * r * s
    if layer.op == Op.DEPTHWISE_CONV:
        return r * s
    if layer.op == Op.FC:
        return x.elems
    if layer.op == Op.MATMUL:
        return x.c
    if layer.op == Op.MATMUL_ACT:
        return ins[0].c // layer.groups
    return 0


def tile_macs(layer: Layer, ins: Sequence[Shape], out: Region) -> int:
    """MACs to produce output region `out` (0 for vector ops)."""
    return out.elems(layer.out.c) * reduction_size(layer, ins)


def tile_vector_ops(layer: Layer, ins: Sequence[Shape], out: Region) -> int:
    """Vector-unit operations to produce output region `out` (0 for PE-array ops).

    Counts as the SoMa reference does: a window pool does kernel-area ops per output
    element, a global pool one op per input element, an element-wise op one op per
    operand (`operand_count`) and output element, softmax / layernorm / GELU one op per
    element, a transpose and a copying concat one op per element they move; a concat
    without `copy` is a layout change and costs nothing.
    """
    elems = out.elems(layer.out.c)
    op = layer.op
    if op in (Op.MAX_POOL, Op.AVG_POOL):
        return elems * layer.kernel[0] * layer.kernel[1]
    if op == Op.GLOBAL_POOL:
        return out.batch * data_shape(layer, ins).elems
    if op in (Op.ADD, Op.MUL):
        return elems * operand_count(layer, ins)
    if op in (Op.SOFTMAX, Op.LAYERNORM, Op.GELU, Op.TRANSPOSE) or (
            op == Op.CONCAT and layer.copy):
        return elems
    return 0


def operand_count(layer: Layer, ins: Sequence[Shape]) -> int:
    """Operands of an element-wise op: its inputs, read concatenated along channels and
    cut into pieces of the output's channels (the reference's Eltwise `N`; an input of
    Inception-ResNet's residual adds is the concatenation of a reduction block's
    branches)."""
    return sum(s.c for s in ins) // layer.out.c


def input_region(layer: Layer, index: int, ins: Sequence[Shape], out: Region) -> Region | None:
    """Region of input `index` that output region `out` reads (None: it reads nothing).

    Sliding windows read their window with halo (clipped to real rows); FC, global pool and
    the right operand of MATMUL_ACT read whole planes; concat over height reads the slice of
    the input that falls into `out`; a transpose reads, along each input axis, the rows its
    output region holds there (all of them for the axis that becomes the channels);
    everything else is point-wise in H and W.
    """
    src = ins[index]
    op = layer.op
    if op == Op.TRANSPOSE:
        spans = ((0, layer.out.c), (out.h0, out.h1), (out.w0, out.w1))
        (h0, h1), (w0, w1) = spans[layer.perm.index(1)], spans[layer.perm.index(2)]
        return Region(out.b0, out.b1, h0, h1, w0, w1)
    if op in (Op.CONV, Op.DEPTHWISE_CONV, Op.MAX_POOL, Op.AVG_POOL):
        h0, h1 = window_input_range(out.h0, out.h1, layer.kernel[0], layer.stride[0],
                                    layer.padding[0], layer.dilation[0], src.h)
        w0, w1 = window_input_range(out.w0, out.w1, layer.kernel[1], layer.stride[1],
                                    layer.padding[1], layer.dilation[1], src.w)
        return Region(out.b0, out.b1, h0, h1, w0, w1)
    if op in (Op.FC, Op.GLOBAL_POOL) or (op == Op.MATMUL_ACT and index == 1):
        return Region(out.b0, out.b1, 0, src.h, 0, src.w)
    if op == Op.CONCAT and layer.axis == "h":
        offset = sum(s.h for s in ins[:index])
        lo, hi = max(out.h0 - offset, 0), min(out.h1 - offset, src.h)
        if lo >= hi:
            return None
        return Region(out.b0, out.b1, lo, hi, out.w0, out.w1)
    return out


def reads_pointwise(layer: Layer, index: int, ins: Sequence[Shape]) -> bool:
    """Whether every output region of `layer` reads exactly that region (same rows,
    columns and samples) of input `index`, whose plane is the output's: no window larger
    than one position, no stride, no whole-plane or transposed read (see input_region)."""
    src = ins[index]
    if (src.h, src.w) != (layer.out.h, layer.out.w):
        return False
    if layer.op in (Op.CONV, Op.DEPTHWISE_CONV, Op.MAX_POOL, Op.AVG_POOL):
        return (layer.kernel == (1, 1) and layer.stride == (1, 1)
                and tuple(layer.padding) == (0, 0) and tuple(layer.padding_end) == (0, 0))
    return not (layer.op in (Op.TRANSPOSE, Op.FC, Op.GLOBAL_POOL)
                or (layer.op == Op.MATMUL_ACT and index == 1)
                or (layer.op == Op.CONCAT and layer.axis == "h"))


def input_channels(layer: Layer, index: int, ins: Sequence[Shape], out: Region) -> int:
    """Channels of input `index` that output region `out` reads: all of them, except for a
    transpose, whose input channels are the rows or columns of its output region."""
    if layer.op != Op.TRANSPOSE:
        return ins[index].c
    holder = layer.perm.index(0)  # the output axis that holds the input channels
    return (ins[index].c, out.height, out.width)[holder]


def input_elems(layer: Layer, index: int, ins: Sequence[Shape], out: Region) -> int | None:
    """Per-tile elements of input `index` that output region `out` reads (None: none)."""
    region = input_region(layer, index, ins, out)
    return None if region is None else region.elems(input_channels(layer, index, ins, out))
