"""The workload: a DAG of layers with explicit network inputs and outputs."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import networkx as nx

from mipsched.errors import InputError
from mipsched.workload import ops
from mipsched.workload.layer import Layer, Op, Shape, full_region


class WorkloadError(InputError):
    """A workload that is not a well-formed DAG (names the offending layer or tensor)."""


class WorkTooLargeError(WorkloadError):
    """A layer or network input that describes more work than mipsched schedules (the
    message names it, the figure and the cap; `tensor` is its name)."""

    def __init__(self, message: str, tensor: str) -> None:
        super().__init__(message)
        self.tensor = tensor


# --- caps on the work a network may describe (docs/workload-yaml.md, "Limits") -------------
# Without them a valid file with absurd shapes loads and then exhausts memory or time: the
# needed-positions masks of the bounds take one boolean per position (per element, for
# network inputs and transposes), their window propagation one numpy pass per kernel tap,
# and the searches tile a layer finer until its tiles fit the buffer. Each cap lies well
# above the zoo at batch 64 (docs/workload-yaml.md lists the peaks).

MAX_POSITIONS = 1 << 24
"""Most output positions (batch x H x W) of one layer, or positions of one network input:
16,777,216. Every tile computes at least one position and the searches split a layer
finer until its tiles fit the buffer, so the tiles a layer may need grow with its
positions: at this cap, a layer cut into the 4 x 4-position tiles of Cocco's rule makes
schedule.tiling.MAX_TILES = 2^20 tiles. The bounds' (H, W) masks stay within 16 MiB per
layer. The zoo at batch 64 peaks at 3,211,264 (VGG's 224 x 224 convs), 5.2x below; a
3840 x 2160 frame fits at batch 2."""

MAX_SAMPLE_ELEMENTS = 1 << 28
"""Most elements (C x H x W) of one sample of a layer's output or a network input:
268,435,456. The bounds hold a boolean per element of a sample for network inputs and
transposes (256 MiB at the cap). The zoo peaks at 26,214,400 (GPT-2 XL prefill's attention
scores), 10x below."""

MAX_WINDOW_TAPS = 1 << 16
"""Most taps (kernel height x width) of a window op (conv, depthwise_conv, max_pool,
avg_pool): 65,536, a 256 x 256 window. The bounds propagate needed positions through a
window one numpy pass per tap (about 6 us each however few positions: 0.4 s at the cap).
The zoo peaks at 81 (FSRCNN's 9 x 9); a global pool written as a window of a 224 x 224
map fits."""

MAX_WINDOW_READS = 1 << 28
"""Most input positions a window op reads per sample, output H x W x taps: 268,435,456.
Each read costs the bounds' propagation 10 to 30 ns (up to about 8 s per layer at the
cap). The zoo peaks at 614,656 (ResNet's 7 x 7 conv1 over 112 x 112); a 5 x 5 conv over a
3840 x 2160 frame fits."""

_WINDOW_OPS = frozenset({Op.CONV, Op.DEPTHWISE_CONV, Op.MAX_POOL, Op.AVG_POOL})


def check_work(batch: int, tensor: str, shape: Shape, layer: Layer | None = None) -> None:
    """Raises WorkTooLargeError when `tensor` (the output of `layer`, or a network input
    when `layer` is None) of per-sample `shape` over `batch` samples exceeds a cap."""
    what = f"layer '{tensor}'" if layer is not None else f"network input '{tensor}'"
    positions = batch * shape.h * shape.w
    if positions > MAX_POSITIONS:
        raise WorkTooLargeError(
            f"{what}: {_count(positions)} {'output ' * (layer is not None)}positions (batch "
            f"{_count(batch)} x H {_count(shape.h)} x W {_count(shape.w)}) exceed the cap of "
            f"{MAX_POSITIONS:,} per {'layer' if layer is not None else 'network input'}",
            tensor)
    if shape.elems > MAX_SAMPLE_ELEMENTS:
        raise WorkTooLargeError(
            f"{what}: {_count(shape.elems)} elements per sample (C {_count(shape.c)} x H "
            f"{_count(shape.h)} x W {_count(shape.w)}) exceed the cap of "
            f"{MAX_SAMPLE_ELEMENTS:,} per tensor", tensor)
    if layer is None or layer.op not in _WINDOW_OPS:
        return
    kh, kw = layer.kernel
    if kh * kw > MAX_WINDOW_TAPS:
        raise WorkTooLargeError(
            f"{what}: a {_count(kh)} x {_count(kw)} window has {_count(kh * kw)} taps, more "
            f"than the cap of {MAX_WINDOW_TAPS:,}", tensor)
    reads = shape.h * shape.w * kh * kw
    if reads > MAX_WINDOW_READS:
        raise WorkTooLargeError(
            f"{what}: its window reads {_count(reads)} input positions per sample (H "
            f"{_count(shape.h)} x W {_count(shape.w)} x {_count(kh * kw)} taps), more than "
            f"the cap of {MAX_WINDOW_READS:,}", tensor)


def _count(n: int) -> str:
    """`n` with thousands separators (or a note, past Python's limit on digits)."""
    try:
        return f"{n:,}"
    except ValueError:
        return "<an integer too long to print>"


@dataclass
class Workload:
    """A network for one batch size.

    `layers` keeps insertion order, which is a valid topological order. `inputs` maps each
    network input tensor (loaded from DRAM) to its per-sample shape; `outputs` names the
    layers whose ofmaps are network outputs (stored to DRAM). `elem_bytes` is the size of
    one element (INT8 = 1).
    """

    name: str
    batch: int
    inputs: dict[str, Shape]
    layers: dict[str, Layer]
    outputs: tuple[str, ...]
    elem_bytes: int = 1
    graph: nx.DiGraph = field(init=False, repr=False)
    _consumers: dict[str, list[str]] = field(init=False, repr=False)
    _in_shapes: dict[str, tuple[Shape, ...]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.graph = nx.DiGraph()
        self.graph.add_nodes_from(self.layers)
        if self.batch < 1:
            raise WorkloadError(f"workload '{self.name}': batch must be >= 1, got {self.batch}")
        if self.elem_bytes < 1:
            raise WorkloadError(f"workload '{self.name}': elem_bytes must be >= 1")
        for name in self.inputs:
            if name in self.layers:
                raise WorkloadError(f"'{name}' is both a network input and a layer")
        seen: set[str] = set(self.inputs)
        self._consumers = {}
        self._in_shapes = {}
        for layer in self.layers.values():
            for src in layer.inputs:
                if src not in seen:
                    what = "unknown tensor" if src not in self.layers else "a later layer"
                    raise WorkloadError(f"layer '{layer.name}': input '{src}' is {what}")
                if src in self.layers:
                    self.graph.add_edge(src, layer.name)
                users = self._consumers.setdefault(src, [])
                if layer.name not in users:
                    users.append(layer.name)
            seen.add(layer.name)
            self._in_shapes[layer.name] = tuple(self.shape_of(s) for s in layer.inputs)
            expected = ops.infer_out_shape(layer, self._in_shapes[layer.name])
            if expected != layer.out:
                raise WorkloadError(
                    f"layer '{layer.name}': output shape {tuple(layer.out)} does not match "
                    f"{tuple(expected)} implied by its inputs"
                )
        for out in self.outputs:
            if out not in self.layers:
                raise WorkloadError(f"network output '{out}' is not a layer")
        dangling = [n for n in self.layers if self.graph.out_degree(n) == 0
                    and n not in self.outputs]
        if dangling:
            raise WorkloadError(f"layer '{dangling[0]}' has no consumer and is not an output")
        for layer in self.layers.values():
            check_work(self.batch, layer.name, layer.out, layer)
        for name, shape in self.inputs.items():
            check_work(self.batch, name, shape)

    # --- shapes -------------------------------------------------------------------------
    def shape_of(self, tensor: str) -> Shape:
        """Per-sample shape of a network input or of a layer's ofmap."""
        if tensor in self.inputs:
            return self.inputs[tensor]
        return self.layers[tensor].out

    def in_shapes(self, layer: str) -> tuple[Shape, ...]:
        """Per-sample shapes of the layer's inputs, in operand order."""
        return self._in_shapes[layer]

    # --- per-layer totals ------------------------------------------------------------------
    def macs(self, layer: str) -> int:
        """MACs of the whole layer over the batch."""
        lay = self.layers[layer]
        return self.batch * lay.out.elems * ops.reduction_size(lay, self.in_shapes(layer))

    def vector_ops(self, layer: str) -> int:
        """Vector-unit operations of the whole layer over the batch."""
        lay = self.layers[layer]
        return ops.tile_vector_ops(lay, self.in_shapes(layer), full_region(self.batch, lay.out))

    def weight_bytes(self, layer: str) -> int:
        """Bytes of the layer's weights (0 for ops without weights)."""
        lay = self.layers[layer]
        return ops.weight_elems(lay, self.in_shapes(layer)) * self.elem_bytes

    def ofmap_bytes(self, tensor: str) -> int:
        """Bytes of a layer's whole ofmap (or of a network input) over the batch."""
        return self.batch * self.shape_of(tensor).elems * self.elem_bytes

    @cached_property
    def batch_divisors(self) -> tuple[int, ...]:
        """Every number of samples a tile can hold: the divisors of the batch, ascending
        (a tiling number T splits the batch into gcd(T, batch) parts)."""
        return tuple(d for d in range(1, self.batch + 1) if self.batch % d == 0)

    # --- network totals --------------------------------------------------------------------
    @cached_property
    def total_macs(self) -> int:
        """MACs of the whole network over the batch."""
        return sum(self.macs(n) for n in self.layers)

    @cached_property
    def total_weight_bytes(self) -> int:
        """Bytes of all the network's weights."""
        return sum(self.weight_bytes(n) for n in self.layers)

    @cached_property
    def total_ops(self) -> int:
        """Operations counted for utilisation: 2 per MAC, like the peak (TOPS) they are
        divided by; vector-unit ops are excluded."""
        return 2 * self.total_macs

    def digest(self) -> str:
        """Stable hash of the whole network (layers, shapes, batch, element size). A layer
        enters it by the fields that differ from their defaults, so adding a field to
        Layer leaves the digests of existing networks unchanged."""
        blob = json.dumps([self.batch, self.elem_bytes, sorted(self.inputs.items()),
                           [_layer_fields(lay) for lay in self.layers.values()],
                           self.outputs])
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @cached_property
    def layer_index(self) -> dict[str, int]:
        """Each layer's position in the network's (topological) layer order."""
        return {name: k for k, name in enumerate(self.layers)}

    def consumers(self, tensor: str) -> list[str]:
        """Layers reading `tensor` (a layer ofmap or a network input), in layer order."""
        return self._consumers.get(tensor, [])


_LAYER_DEFAULTS = Layer("", Op.ADD, (), Shape(1, 1, 1))


def _layer_fields(layer: Layer) -> list:
    """[name, value] of every field of `layer` that differs from its default (name, op,
    inputs and out always)."""
    fixed = ("name", "op", "inputs", "out")
    return [[f.name, getattr(layer, f.name)] for f in dataclasses.fields(Layer)
            if f.name in fixed or getattr(layer, f.name) != getattr(_LAYER_DEFAULTS, f.name)
            and not (f.name == "padding_end" and layer.padding_end == layer.padding)]


class NetBuilder:
    """Builds a Workload layer by layer, inferring output shapes.

    Each method adds one layer and returns its name, so networks read like their papers:
    ``x = b.conv("conv1", x, 64, 7, stride=2, padding=3)``.
    """

    def __init__(self, name: str, batch: int = 1, elem_bytes: int = 1) -> None:
        self.name = name
        self.batch = batch
        self.elem_bytes = elem_bytes
        self._inputs: dict[str, Shape] = {}
        self._layers: dict[str, Layer] = {}
        self._outputs: list[str] = []

    def shape(self, tensor: str) -> Shape:
        """Per-sample shape of a network input or of a layer added so far; raises
        WorkloadError for an unknown tensor."""
        if tensor in self._inputs:
            return self._inputs[tensor]
        if tensor not in self._layers:
            raise WorkloadError(f"network '{self.name}': unknown tensor '{tensor}'")
        return self._layers[tensor].out

    def input(self, name: str, c: int, h: int = 1, w: int = 1) -> str:
        """Adds network input `name` of per-sample shape (c, h, w); returns its name."""
        self._inputs[name] = Shape(c, h, w)
        return name

    def output(self, *names: str) -> None:
        """Names network outputs (without any, the sinks are the outputs)."""
        self._outputs.extend(names)

    def add(self, layer: Layer) -> str:
        """Adds a layer whose `out` may hold placeholder spatial dims; they are inferred."""
        if layer.name in self._layers or layer.name in self._inputs:
            raise WorkloadError(f"network '{self.name}': duplicate layer name '{layer.name}'")
        ins = [self.shape(s) for s in layer.inputs]
        out = ops.infer_out_shape(layer, ins)
        self._layers[layer.name] = Layer(**{**layer.__dict__, "out": out})
        return layer.name

    # --- one method per operator ----------------------------------------------------------
    def conv(self, name: str, src: str | Sequence[str], out_channels: int,
             kernel: int | tuple[int, int], stride: int | tuple[int, int] = 1,
             padding: int | tuple[int, int] | None = None, dilation: int = 1,
             groups: int = 1, padding_end: int | tuple[int, int] | None = None) -> str:
        """Convolution of one input, or of several read concatenated along channels;
        `padding=None` means 'same' padding for odd kernels; `padding_end` (bottom, right)
        defaults to `padding`."""
        k = _pair(kernel)
        pad = _pair(padding) if padding is not None else (dilation * (k[0] - 1) // 2,
                                                          dilation * (k[1] - 1) // 2)
        return self.add(Layer(name, Op.CONV, _sources(src), Shape(out_channels, 0, 0), k,
                              _pair(stride), pad, _pair(dilation), groups,
                              padding_end=_optional_pair(padding_end)))

    def depthwise(self, name: str, src: str, kernel: int, stride: int = 1,
                  padding: int | None = None, dilation: int = 1) -> str:
        """Depthwise convolution (one group per channel); `padding=None` means
        'same' padding for odd kernels."""
        c = self.shape(src).c
        k = _pair(kernel)
        pad = _pair(padding) if padding is not None else (dilation * (k[0] - 1) // 2,
                                                          dilation * (k[1] - 1) // 2)
        return self.add(Layer(name, Op.DEPTHWISE_CONV, (src,), Shape(c, 0, 0), k,
                              _pair(stride), pad, _pair(dilation), groups=c))

    def fc(self, name: str, src: str | Sequence[str], out_features: int) -> str:
        """Fully connected layer of `out_features` reading a whole sample (several
        inputs read concatenated along channels)."""
        return self.add(Layer(name, Op.FC, _sources(src), Shape(out_features, 1, 1)))

    def matmul(self, name: str, src: str | Sequence[str], out_features: int) -> str:
        """Matmul with a constant weight over the features of each token: out
        channels `out_features`, tokens (H, W) kept."""
        return self.add(Layer(name, Op.MATMUL, _sources(src), Shape(out_features, 0, 0)))

    def matmul_act(self, name: str, lhs: str, rhs: str, heads: int,
                   transpose_rhs: bool) -> str:
        """Matmul of two activations per head: Q K^T (`transpose_rhs`) or scores . V."""
        return self.add(Layer(name, Op.MATMUL_ACT, (lhs, rhs), Shape(0, 0, 0), groups=heads,
                              transpose_rhs=transpose_rhs))

    def pool(self, name: str, src: str | Sequence[str], kernel: int | tuple[int, int],
             stride: int | tuple[int, int], padding: int | tuple[int, int] = 0,
             kind: str = "max", padding_end: int | tuple[int, int] | None = None) -> str:
        """Max (`kind='max'`) or average (`'avg'`) window pool; `padding_end`
        (bottom, right) defaults to `padding`."""
        op = {"max": Op.MAX_POOL, "avg": Op.AVG_POOL}[kind]
        return self.add(Layer(name, op, _sources(src), Shape(0, 0, 0), _pair(kernel),
                              _pair(stride), _pair(padding),
                              padding_end=_optional_pair(padding_end)))

    def global_pool(self, name: str, src: str | Sequence[str]) -> str:
        """Global pool: one value per channel (1 x 1), several inputs read
        concatenated along channels."""
        return self.add(Layer(name, Op.GLOBAL_POOL, _sources(src), Shape(0, 1, 1)))

    def eltwise(self, name: str, srcs: Iterable[str], kind: str = "add",
                channels: int = 0) -> str:
        """Element-wise sum / product of inputs of one shape, or, given the output's
        `channels`, of the operands that the inputs read concatenated along channels
        form (pieces of `channels` channels each)."""
        op = {"add": Op.ADD, "mul": Op.MUL}[kind]
        return self.add(Layer(name, op, tuple(srcs), Shape(channels, 0, 0)))

    def unary(self, name: str, src: str, op: Op) -> str:
        """Softmax, layernorm or GELU."""
        return self.add(Layer(name, op, (src,), Shape(0, 0, 0)))

    def concat(self, name: str, srcs: Iterable[str], axis: str = "c",
               copy: bool = False) -> str:
        """Concatenation; with `copy` the data is moved on the vector unit."""
        return self.add(Layer(name, Op.CONCAT, tuple(srcs), Shape(0, 0, 0), axis=axis,
                              copy=copy))

    def transpose(self, name: str, src: str, perm: tuple[int, int, int]) -> str:
        """Permutes the (C, H, W) axes: output axis d is input axis perm[d]."""
        return self.add(Layer(name, Op.TRANSPOSE, (src,), Shape(0, 0, 0), perm=perm))

    def build(self) -> Workload:
        """The finished workload; sinks are outputs unless outputs were named explicitly."""
        consumed = {s for lay in self._layers.values() for s in lay.inputs}
        outputs = list(self._outputs) or [n for n in self._layers if n not in consumed]
        unused = [n for n in self._inputs if n not in consumed]
        if unused:
            raise WorkloadError(f"network '{self.name}': input '{unused[0]}' is never read")
        return Workload(self.name, self.batch, dict(self._inputs), dict(self._layers),
                        tuple(outputs), self.elem_bytes)


def _pair(v: int | tuple[int, int]) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def _optional_pair(v: int | tuple[int, int] | None) -> tuple[int, int] | None:
    return None if v is None else _pair(v)


def _sources(src: str | Sequence[str]) -> tuple[str, ...]:
    return (src,) if isinstance(src, str) else tuple(src)
