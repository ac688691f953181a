"""ONNX model -> Workload (docs/onnx.md says what maps to what, and why).

onnx_read parses, checks and shape-infers the model (weights are never read: shapes come
from initialiser dims and shape inference) with the batch set to 1; here every node
becomes a layer, an alias or nothing:

* layers: Conv (grouped / depthwise), Gemm and MatMul with a constant weight (fc when it
  contracts a whole sample, matmul when it contracts the feature axis of a token
  sequence), MatMul of two activations (matmul_act: heads and transpose from the layouts),
  MaxPool / AveragePool / GlobalAveragePool / GlobalMaxPool, Add / Sub / Sum (add), Mul /
  Div (mul), Softmax / LogSoftmax, LayerNormalization, Concat;
* aliases (no layer, no data moved): layout ops (Reshape, Flatten, Transpose, Squeeze,
  Unsqueeze), Identity, Dropout, Cast, (De)QuantizeLinear, BatchNormalization and
  activation functions (fused into their producer), and element-wise ops with constants
  or whose operands are all the same tensor (biases, scales, x * sigmoid(x), erf-GELU);
* nothing: nodes that only compute on constants and shapes (Constant, Shape, Gather ...).

Per-sample IR shapes: NCHW -> (C, H, W); (batch, tokens, features) -> (features, tokens,
1); (batch, features) -> (features, 1, 1). The first axis of every network input is the
batch; its size in the file is ignored and the workload's batch is `batch` (`--batch`).
"""

from __future__ import annotations

from pathlib import Path

import onnx

from mipsched.errors import InputError
from mipsched.workload import ops
from mipsched.workload.graph import Workload
from mipsched.workload.layer import Layer, Op, Shape
from mipsched.workload.onnx_layout import BATCH, CHANNEL, LEAD, SPATIAL, View, axis_of
from mipsched.workload.onnx_read import (
    DOCS,
    STANDARD,
    OnnxError,
    node_name,
    op_type,
    read_model,
    topological,
    value_types,
)

_LAYOUT = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze"})
_FUSED = frozenset({
    "Identity", "Dropout", "Cast", "QuantizeLinear", "DequantizeLinear",
    "BatchNormalization", "Relu", "LeakyRelu", "PRelu", "Clip", "Sigmoid", "HardSigmoid",
    "HardSwish", "Tanh", "Elu", "Selu", "Celu", "Softplus", "Softsign", "Mish", "Gelu",
    "Erf", "ThresholdedRelu",
})
_ELTWISE = {"Add": Op.ADD, "Sub": Op.ADD, "Sum": Op.ADD, "Mul": Op.MUL, "Div": Op.MUL}
_POOLS = {"MaxPool": Op.MAX_POOL, "AveragePool": Op.AVG_POOL}
_MAPPED = frozenset({"Transpose", "Conv", "Gemm", "MatMul", "GlobalAveragePool",
                     "GlobalMaxPool", "Softmax", "LogSoftmax", "LayerNormalization",
                     "Concat", *_LAYOUT, *_FUSED, *_ELTWISE, *_POOLS})
#: Ops whose output depends only on input shapes, never on their values.
_SHAPE_ONLY = frozenset({"Shape", "Size"})
_KNOWN = _MAPPED | _SHAPE_ONLY
_NCHW = (BATCH, CHANNEL, frozenset("h"), frozenset("w"))


def load_onnx(path: Path, batch: int = 1, elem_bytes: int = 1,
              unknown_as_eltwise: bool = False) -> Workload:
    """The workload of ONNX file `path` for `batch` samples of `elem_bytes`-byte elements.

    With `unknown_as_eltwise`, an operator mipsched does not know whose single output has
    the shape of its activation inputs is taken as element-wise (see docs/onnx.md)."""
    path = Path(path)
    try:
        model = read_model(path, unknown_as_eltwise)
        return _Importer(model, unknown_as_eltwise).workload(path.stem, batch, elem_bytes)
    except InputError as err:
        raise OnnxError(f"{path}: {err}") from None


def _known(node: onnx.NodeProto) -> bool:
    return node.domain in STANDARD and node.op_type in _KNOWN


def _dims(value: onnx.ValueInfoProto) -> tuple[int | str | None, ...]:
    """Dimensions of a tensor: ints, names of symbolic dims, or None when unknown."""
    return tuple(d.dim_value if d.HasField("dim_value")
                 else d.dim_param if d.HasField("dim_param") else None
                 for d in value.type.tensor_type.shape.dim)


# --- mapping ------------------------------------------------------------------------------
class _Importer:
    """Maps the nodes of a shape-inferred model to layers, aliases and constants."""

    def __init__(self, model: onnx.ModelProto, unknown_as_eltwise: bool) -> None:
        self.graph = model.graph
        self.unknown_as_eltwise = unknown_as_eltwise
        self.opset = next((o.version for o in model.opset_import if o.domain in STANDARD), 1)
        self.shapes = {name: _dims(v) for name, v in value_types(model).items()}
        for t in self.graph.initializer:
            self.shapes[t.name] = tuple(t.dims)
        self.consts = {t.name for t in self.graph.initializer}
        self.consts |= {t.values.name for t in self.graph.sparse_initializer}
        for t in self.graph.sparse_initializer:
            self.shapes[t.values.name] = tuple(t.dims)
        self.graph_inputs = {v.name for v in self.graph.input} - self.consts
        self.views: dict[str, View] = {}
        self.inputs: dict[str, Shape] = {}
        self.layers: dict[str, Layer] = {}
        self.node: onnx.NodeProto = onnx.NodeProto()
        self.where = ""

    # --- driver ---------------------------------------------------------------------------
    def workload(self, name: str, batch: int, elem_bytes: int) -> Workload:
        active = [(k, n) for k, n in topological(self.graph) if not self._constant(n)]
        unknown = [(k, n) for k, n in active if not _known(n)]
        if unknown and not self.unknown_as_eltwise:
            listed = ", ".join(f"{op_type(n)} (node '{n.name or f'#{k}'}')"
                               for k, n in unknown[:5])
            more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
            raise OnnxError(f"unsupported ONNX operator(s): {listed}{more}; see {DOCS} for "
                            "what maps and how to proceed (e.g. --unknown-as-eltwise for "
                            "element-wise operators)")
        for k, node in active:
            self.node = node
            self.where = f"node {node_name(node, k)}"
            self._map(node)
        outputs = list(dict.fromkeys(self.views[o.name].tensor for o in self.graph.output
                                     if o.name in self.views))
        outputs = [o for o in outputs if o in self.layers]
        if not outputs:
            raise OnnxError("the model's outputs are computed by no layer mipsched "
                            f"schedules (only constants and layout ops); see {DOCS}")
        layers = self._live(outputs)
        read = {s for lay in layers.values() for s in lay.inputs}
        inputs = {k: v for k, v in self.inputs.items() if k in read}
        return Workload(name, batch, inputs, layers, tuple(outputs), elem_bytes)

    def _constant(self, node: onnx.NodeProto) -> bool:
        """Whether `node` computes only on constants and shapes; its outputs are then
        constants too."""
        if node.op_type in _SHAPE_ONLY or all(i in self.consts for i in node.input if i):
            self.consts.update(node.output)
            return True
        return False

    def _live(self, outputs: list[str]) -> dict[str, Layer]:
        """The layers that some output depends on (dead branches are dropped)."""
        live, stack = set(outputs), list(outputs)
        while stack:
            for src in self.layers[stack.pop()].inputs:
                if src in self.layers and src not in live:
                    live.add(src)
                    stack.append(src)
        return {n: lay for n, lay in self.layers.items() if n in live}

    def _map(self, node: onnx.NodeProto) -> None:
        op = node.op_type if node.domain in STANDARD else None
        if op in _FUSED:
            self._alias(self._view(self._activations()[0]))
        elif op in _LAYOUT:
            self._reshape()
        elif op == "Transpose":
            self._transpose()
        elif op == "Conv":
            self._conv()
        elif op in _POOLS:
            self._pool(_POOLS[op])
        elif op in ("GlobalAveragePool", "GlobalMaxPool"):
            self._global_pool()
        elif op in ("Gemm", "MatMul"):
            self._matmul(op)
        elif op in _ELTWISE:
            self._eltwise(_ELTWISE[op])
        elif op in ("Softmax", "LogSoftmax", "LayerNormalization"):
            self._normalise(Op.LAYERNORM if op == "LayerNormalization" else Op.SOFTMAX)
        elif op == "Concat":
            self._concat()
        else:
            self._unknown()

    # --- helpers --------------------------------------------------------------------------
    def fail(self, message: str) -> OnnxError:
        return OnnxError(f"{self.where}: {message}")

    def _out(self) -> str:
        if not self.node.output or not self.node.output[0]:
            raise self.fail("has no output")
        return self.node.output[0]

    def _activations(self) -> list[str]:
        """The node's inputs that are not constants (at least one, or it would be one)."""
        return [i for i in self.node.input if i and i not in self.consts]

    def dims(self, tensor: str) -> tuple[int, ...]:
        """Concrete, positive dimensions of `tensor` from the model or shape inference."""
        raw = self.shapes.get(tensor)
        dims = tuple(d for d in raw or () if isinstance(d, int))
        if raw is None or len(dims) != len(raw):
            raise self.fail(f"the shape of tensor '{tensor}' is unknown after ONNX shape "
                            f"inference ({'dims ' + str(list(raw)) if raw else 'no shape'})"
                            f"; see {DOCS}")
        if any(d < 1 for d in dims):
            raise self.fail(f"tensor '{tensor}' has a zero-sized (or negative) dimension: "
                            f"shape {list(dims)}")
        return dims

    def _view(self, tensor: str) -> View:
        """The view of an activation tensor; a network input gets its natural layout."""
        if tensor in self.views:
            return self.views[tensor]
        if tensor not in self.graph_inputs:
            raise self.fail(f"tensor '{tensor}' has no producer mipsched mapped")
        return self._new_input(tensor)

    def _new_input(self, tensor: str) -> View:
        """A network input (or a constant used as data) with its natural layout."""
        raw = self.shapes.get(tensor, ())
        for k, d in enumerate(raw[1:], start=1):
            if not isinstance(d, int):
                what = f"symbolic ('{d}')" if isinstance(d, str) else "unknown"
                raise self.fail(f"input '{tensor}': dimension {k} is {what}; only the batch "
                                f"(first) dimension may be symbolic — fix the others, see "
                                f"{DOCS}")
        dims = self.dims(tensor)
        rank = len(dims)
        labels = {4: "nchw", 3: "nhc", 2: "nc"}.get(rank)
        if labels is None:
            raise self.fail(f"input '{tensor}' has rank {rank}: mipsched reads (N, C, H, "
                            "W), (N, tokens, features) or (N, features) tensors")
        view = View(self._unique(tensor), tuple(axis_of(lab, d)
                                                for lab, d in zip(labels, dims, strict=True)))
        self.inputs[view.tensor] = view.ir_shape()
        self.views[tensor] = view
        return view

    def _unique(self, name: str) -> str:
        taken = self.inputs.keys() | self.layers.keys()
        base, k = name or self.node.op_type.lower(), 1
        while name in taken or not name:
            k += 1
            name = f"{base}_{k}"
        return name

    def ints(self, attr: str, default: list[int] | None, n: int | None = None,
             lo: int | None = None) -> list[int]:
        """An INT or INTS attribute as a list, checked for length and lower bound."""
        found = [a for a in self.node.attribute if a.name == attr]
        if not found:
            if default is None:
                raise self.fail(f"attribute '{attr}' is missing")
            return default
        a = found[0]
        values = ([a.i] if a.type == onnx.AttributeProto.INT
                  else list(a.ints) if a.type == onnx.AttributeProto.INTS else None)
        if values is None or (n is not None and len(values) != n) or (
                lo is not None and any(v < lo for v in values)):
            need = f"{n} integers" if n is not None else "integers"
            bound = f" >= {lo}" if lo is not None else ""
            raise self.fail(f"attribute '{attr}': expected {need}{bound}")
        return values

    def _alias(self, view: View) -> None:
        """Makes the node's output another name of the tensor of `view` (no layer, no data
        moved), once ONNX agrees on its shape: broadcasting to a larger tensor is no alias."""
        out = self._out()
        known = self.shapes.get(out)
        if (known is not None and all(isinstance(d, int) for d in known)
                and tuple(known) != view.dims):
            raise self.fail(f"output {list(known)} is not the shape {list(view.dims)} of its "
                            f"input (broadcasting to a larger tensor is not supported); see "
                            f"{DOCS}")
        self.views[out] = view

    def _add_layer(self, layer: Layer, out_view: View) -> None:
        """Adds a layer after checking that mipsched's output shape is ONNX's."""
        name = self._unique(layer.name)
        ins = [self._shape(s) for s in layer.inputs]
        try:
            out = ops.infer_out_shape(layer, ins)
        except InputError as err:
            raise self.fail(str(err)) from None
        expected = out_view.ir_shape()
        if out != expected:
            raise self.fail(f"mipsched's {layer.op} gives per-sample shape {tuple(out)}, the "
                            f"model says {list(out_view.dims)} = {tuple(expected)}")
        self.layers[name] = Layer(**{**layer.__dict__, "name": name, "out": out})
        self.views[self._out()] = out_view.renamed(name)

    def _shape(self, tensor: str) -> Shape:
        return self.inputs[tensor] if tensor in self.inputs else self.layers[tensor].out

    def _weight(self, index: int, rank: int) -> tuple[int, ...]:
        """Dimensions of the constant operand `index` (a weight) of the node."""
        if len(self.node.input) <= index or self.node.input[index] not in self.consts:
            raise self.fail(f"operand {index + 1} must be a constant weight")
        dims = self.dims(self.node.input[index])
        if len(dims) != rank:
            raise self.fail(f"weight '{self.node.input[index]}' has rank {len(dims)}, "
                            f"expected {rank}")
        return dims

    # --- node kinds -----------------------------------------------------------------------
    def _reshape(self) -> None:
        src = self._view(self._activations()[0])
        out = self.dims(self._out())
        view = src.reshape(out)
        if view is None:
            raise self.fail(f"reshape {list(src.dims)} -> {list(out)} mixes axes in a way "
                            f"mipsched cannot follow; see {DOCS}")
        self.views[self._out()] = view

    def _transpose(self) -> None:
        src = self._view(self._activations()[0])
        rank = len(src.axes)
        perm = self.ints("perm", list(range(rank))[::-1], rank, 0)
        if sorted(perm) != list(range(rank)):
            raise self.fail(f"perm {perm} is not a permutation of {rank} axes")
        self.views[self._out()] = src.permute(perm)

    def _window_input(self) -> tuple[View, tuple[int, ...]]:
        """The NCHW input of a conv / pool and the node's output dims."""
        src = self._view(self._activations()[0])
        if not src.fits(*_NCHW):
            raise self.fail(f"input of shape {list(src.dims)} is not a 2-D feature map "
                            f"(N, C, H, W); see {DOCS}")
        out = self.dims(self._out())
        if len(out) != 4:
            raise self.fail(f"output has rank {len(out)}, expected 4")
        return src, out

    def _padding(self, src: View, out: tuple[int, ...], kernel: list[int],
                 stride: list[int], dilation: list[int]) -> tuple[int, int]:
        """The symmetric padding giving ONNX's output size (pads, auto_pad, ceil_mode)."""
        pads = self.ints("pads", [0, 0, 0, 0], 4, 0)
        pad = []
        for k in range(2):
            size = src.dims[2 + k]
            lo, hi = pads[k], pads[k + 2]
            span = dilation[k] * (kernel[k] - 1) + 1
            total = max((out[2 + k] - 1) * stride[k] + span - size, 0)
            candidates = dict.fromkeys([(lo + hi) // 2, (lo + hi + 1) // 2, lo, hi,
                                        total // 2, (total + 1) // 2])
            fit = [p for p in candidates if ops.conv_out_extent(
                size, kernel[k], stride[k], p, dilation[k]) == out[2 + k]]
            if not fit:
                raise self.fail(f"padding {pads} cannot be made symmetric with the same "
                                f"output size {out[2 + k]}; see {DOCS}")
            pad.append(fit[0])
        return pad[0], pad[1]

    def _conv(self) -> None:
        src, out = self._window_input()
        weight = self._weight(1, 4)
        c_in = src.ir_shape().c
        groups = self.ints("group", [1], 1, 1)[0]
        kernel = self.ints("kernel_shape", list(weight[2:]), 2, 1)
        if kernel != list(weight[2:]):
            raise self.fail(f"kernel_shape {kernel} does not match weight {list(weight)}")
        stride = self.ints("strides", [1, 1], 2, 1)
        dilation = self.ints("dilations", [1, 1], 2, 1)
        if weight[1] * groups != c_in or weight[0] % groups:
            raise self.fail(f"weight {list(weight)} with group={groups} does not fit "
                            f"{c_in} input channels")
        pad = self._padding(src, out, kernel, stride, dilation)
        depthwise = groups == c_in == weight[0] and groups > 1
        layer = Layer(self._layer_name(), Op.DEPTHWISE_CONV if depthwise else Op.CONV,
                      (src.tensor,), Shape(weight[0], 0, 0), tuple(kernel), tuple(stride),
                      pad, tuple(dilation), groups)
        self._add_layer(layer, self._nchw_view(out))

    def _pool(self, op: Op) -> None:
        src, out = self._window_input()
        kernel = self.ints("kernel_shape", None, 2, 1)
        stride = self.ints("strides", [1, 1], 2, 1)
        dilation = self.ints("dilations", [1, 1], 2, 1)
        pad = self._padding(src, out, kernel, stride, dilation)
        layer = Layer(self._layer_name(), op, (src.tensor,), Shape(0, 0, 0), tuple(kernel),
                      tuple(stride), pad, tuple(dilation))
        self._add_layer(layer, self._nchw_view(out))

    def _global_pool(self) -> None:
        src, out = self._window_input()
        layer = Layer(self._layer_name(), Op.GLOBAL_POOL, (src.tensor,), Shape(0, 1, 1))
        self._add_layer(layer, self._nchw_view(out))

    def _nchw_view(self, dims: tuple[int, ...]) -> View:
        return View("", tuple(axis_of(lab, d) for lab, d in zip("nchw", dims, strict=True)))

    def _layer_name(self) -> str:
        return self.node.name or f"{self.node.op_type.lower()}_{len(self.layers)}"

    def _matmul(self, op: str) -> None:
        acts = self._activations()
        if len(acts) == 2:
            if op == "Gemm":
                raise self.fail(f"Gemm of two activations is not supported; see {DOCS}")
            self._matmul_act(self._view(acts[0]), self._view(acts[1]))
            return
        if self.node.input[0] != acts[0]:
            raise self.fail("the activation must be the first operand")
        src = self._view(acts[0])
        if op == "Gemm":
            if self.ints("transA", [0], 1)[0]:
                raise self.fail(f"Gemm with transA=1 is not supported; see {DOCS}")
            weight = self._weight(1, 2)
            k, m = weight[::-1] if self.ints("transB", [0], 1)[0] else weight
        else:
            k, m = self._weight(1, 2)
        if src.dims[-1] != k:
            raise self.fail(f"weight rows {k} do not match the input's last axis "
                            f"{src.dims[-1]}")
        out = self.dims(self._out())
        rank = len(src.axes)
        if rank == 2 and src.fits(BATCH, frozenset("cghw")):  # a whole sample: fc
            layer = Layer(self._layer_name(), Op.FC, (src.tensor,), Shape(m, 1, 1))
            view = View("", (src.axes[0], axis_of("c", m)))
        elif (src.labels(rank - 1) <= CHANNEL and src.size(CHANNEL, slice(-1)) == 1
              and all(src.labels(a) <= BATCH | SPATIAL for a in range(rank - 1))):
            layer = Layer(self._layer_name(), Op.MATMUL, (src.tensor,), Shape(m, 0, 0))
            view = View("", (*src.axes[:-1], axis_of("c", m)))
        else:
            raise self.fail(f"it contracts the last axis of {list(src.dims)}, which is not "
                            f"the feature axis of a token sequence; see {DOCS}")
        if view.dims != out:
            raise self.fail(f"output {list(out)} is not {list(view.dims)}")
        self._add_layer(layer, view)

    def _matmul_act(self, lhs: View, rhs: View) -> None:
        rank = len(lhs.axes)
        if rank < 2 or len(rhs.axes) != rank:
            raise self.fail(f"operands {list(lhs.dims)} and {list(rhs.dims)} need the same "
                            "rank >= 2")
        lead = slice(0, rank - 2)
        if not all(v.labels(a) <= LEAD for v in (lhs, rhs) for a in range(rank - 2)):
            raise self.fail("the leading axes must be batch and heads only; see " + DOCS)
        heads = lhs.size(frozenset("g"), lead)
        if rhs.size(frozenset("g"), lead) != heads:
            raise self.fail(f"operands split into different head counts {list(lhs.dims)}, "
                            f"{list(rhs.dims)}")
        if not (lhs.labels(rank - 2) <= SPATIAL and lhs.labels(rank - 1) <= {"c"}):
            raise self.fail(f"left operand {list(lhs.dims)} is not (tokens x features) per "
                            f"head; see {DOCS}")
        if rhs.labels(rank - 2) <= {"c"} and rhs.labels(rank - 1) <= SPATIAL:
            transpose = True  # Q . K^T: features x tokens
        elif rhs.labels(rank - 2) <= SPATIAL and rhs.labels(rank - 1) <= {"c"}:
            transpose = False  # P . V: tokens x features
        else:
            raise self.fail(f"right operand {list(rhs.dims)} is neither (features x tokens) "
                            f"nor (tokens x features) per head; see {DOCS}")
        out = self.dims(self._out())
        view = View("", (*lhs.axes[:-1], axis_of("c", out[-1])))
        if view.dims != out:
            raise self.fail(f"output {list(out)} is not {list(view.dims)}")
        layer = Layer(self._layer_name(), Op.MATMUL_ACT, (lhs.tensor, rhs.tensor),
                      Shape(0, 0, 0), groups=heads, transpose_rhs=transpose)
        self._add_layer(layer, view)

    def _eltwise(self, op: Op) -> None:
        views = [self._view(a) for a in self._activations()]
        tensors = list(dict.fromkeys(v.tensor for v in views))
        if any(v.axes != views[0].axes for v in views):
            raise self.fail(f"element-wise operands of shapes {[list(v.dims) for v in views]}"
                            " differ (broadcasting between activations is not supported); "
                            f"see {DOCS}")
        if len(tensors) == 1:  # with constants, or x (op) f(x): fused into the producer
            self._alias(views[0])
            return
        layer = Layer(self._layer_name(), op, tuple(tensors), Shape(0, 0, 0))
        self._add_layer(layer, views[0])

    def _normalise(self, op: Op) -> None:
        src = self._view(self._activations()[0])
        rank = len(src.axes)
        default = -1 if op == Op.LAYERNORM or self.opset >= 13 else 1
        axis = self.ints("axis", [default], 1)[0]
        if not -rank <= axis < rank:
            raise self.fail(f"axis {axis} out of range for rank {rank}")
        axis %= rank
        over = range(axis, rank) if op == Op.LAYERNORM else (axis,)
        if not all(src.labels(a) <= CHANNEL for a in over):
            raise self.fail(f"it normalises axis {axis} of {list(src.dims)}, which is not "
                            f"the channel / feature axis; see {DOCS}")
        layer = Layer(self._layer_name(), op, (src.tensor,), Shape(0, 0, 0))
        self._add_layer(layer, src)

    def _concat(self) -> None:
        views = [self._view(i) if i not in self.consts else self._new_input(i)
                 for i in self.node.input if i]
        rank = len(views[0].axes)
        axis = self.ints("axis", None, 1)[0]
        if not -rank <= axis < rank:
            raise self.fail(f"axis {axis} out of range for rank {rank}")
        axis %= rank
        if any(len(v.axes) != rank or v.axes[:axis] + v.axes[axis + 1:]
               != views[0].axes[:axis] + views[0].axes[axis + 1:] for v in views):
            raise self.fail(f"inputs {[list(v.dims) for v in views]} differ off the concat "
                            "axis")
        labels = set().union(*(v.labels(axis) for v in views))
        kind = "c" if labels <= {"c"} else "h" if labels <= {"h"} else None
        if kind is None:
            raise self.fail(f"concatenation along axis {axis} of {list(views[0].dims)} is "
                            f"neither the channel nor the height / token axis; see {DOCS}")
        if len(views) == 1:
            self._alias(views[0])
            return
        out = self.dims(self._out())
        view = View("", (*views[0].axes[:axis], axis_of(kind, out[axis]),
                         *views[0].axes[axis + 1:]))
        layer = Layer(self._layer_name(), Op.CONCAT, tuple(v.tensor for v in views),
                      Shape(0, 0, 0), axis=kind)
        self._add_layer(layer, view)

    def _unknown(self) -> None:
        """An operator mipsched does not know, taken as element-wise (the option is on)."""
        views = [self._view(a) for a in self._activations()]
        out = self.dims(self._out())
        if len(self.node.output) != 1 or any(v.dims != out for v in views):
            raise self.fail(f"unsupported operator: not element-wise (outputs "
                            f"{len(self.node.output)}, output {list(out)}, inputs "
                            f"{[list(v.dims) for v in views]}); see {DOCS}")
        self._eltwise(Op.ADD)

