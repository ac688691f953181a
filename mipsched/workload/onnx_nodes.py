"""ONNX node converters: what each kind of node becomes (a layer, an alias of its input
or a piece of a Split), checked against the shapes ONNX inferred; docs/onnx.md says what
maps to what, and why."""

from __future__ import annotations

import onnx

from mipsched.workload import ops
from mipsched.workload.layer import Layer, Op, Shape
from mipsched.workload.onnx_context import MappingContext, Piece
from mipsched.workload.onnx_export import Marker
from mipsched.workload.onnx_layout import (
    BATCH,
    CHANNEL,
    IR_AXES,
    LAYOUTS,
    LEAD,
    SPATIAL,
    View,
    axis_of,
)
from mipsched.workload.onnx_read import DOCS, STANDARD

_LAYOUT = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze"})
_FUSED = frozenset({
    "Identity", "Dropout", "Cast", "QuantizeLinear", "DequantizeLinear",
    "BatchNormalization", "Relu", "LeakyRelu", "PRelu", "Clip", "Sigmoid", "HardSigmoid",
    "HardSwish", "Tanh", "Elu", "Selu", "Celu", "Softplus", "Softsign", "Mish", "Gelu",
    "Erf", "ThresholdedRelu",
})
_ELTWISE = {"Add": Op.ADD, "Sub": Op.ADD, "Sum": Op.ADD, "Mul": Op.MUL, "Div": Op.MUL}
_POOLS = {"MaxPool": Op.MAX_POOL, "AveragePool": Op.AVG_POOL}
#: The operators NodeConverter maps.
MAPPED = frozenset({"Transpose", "Split", "Conv", "Gemm", "MatMul", "GlobalAveragePool",
                    "GlobalMaxPool", "Softmax", "LogSoftmax", "LayerNormalization",
                    "Concat", *_LAYOUT, *_FUSED, *_ELTWISE, *_POOLS})
_NCHW = (BATCH, CHANNEL, frozenset("h"), frozenset("w"))
_AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


class NodeConverter(MappingContext):
    """Maps one node at a time (`_map`) to layers, aliases and pieces of Splits."""

    def _map(self, node: onnx.NodeProto) -> None:
        op = node.op_type if node.domain in STANDARD else None
        if op in _FUSED and self.marker == Marker.GELU:
            self._gelu()
        elif op in _FUSED:
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
        elif op == "Split":
            self._split()
        elif op in ("Softmax", "LogSoftmax", "LayerNormalization"):
            self._normalise(Op.LAYERNORM if op == "LayerNormalization" else Op.SOFTMAX)
        elif op == "Concat":
            self._concat()
        else:
            self._unknown()

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
        if self.marker == Marker.TRANSPOSE:
            self._transpose_layer(src, perm)
        else:
            self.views[self._out()] = src.permute(perm)

    def _transpose_layer(self, src: View, perm: list[int]) -> None:
        """A Transpose marked as moving data: a TRANSPOSE layer. Its output is laid out
        naturally for its rank (LAYOUTS), so IR output axis `layout[j]` is the IR axis
        that input axis perm[j] holds."""
        layout = LAYOUTS.get(len(src.axes), "")
        roles = self._axis_roles(src, layout)
        if perm[0] != 0 or roles[0] != "n":
            raise self.fail(f"perm {perm} of {list(src.dims)}: a transpose layer keeps the "
                            "batch as the first axis")
        ir_perm = [0, 1, 2]
        for j, role in enumerate(layout[1:], start=1):
            ir_perm[IR_AXES.index(role)] = IR_AXES.index(roles[perm[j]])
        out = self.dims(self._out())
        view = View("", tuple(axis_of(lab, d) for lab, d in zip(layout, out, strict=True)))
        layer = Layer(self._layer_name(), Op.TRANSPOSE, (src.tensor,), Shape(0, 0, 0),
                      perm=(ir_perm[0], ir_perm[1], ir_perm[2]))
        self._add_layer(layer, view)

    def _axis_roles(self, src: View, layout: str) -> str:
        """The IR axis (a letter of `layout`) each ONNX axis of `src` holds: the label of
        its elements, or for an axis of size 1 the roles `layout` leaves free, in order."""
        named = [src.labels(k) for k in range(len(src.axes))]
        known = [next(iter(labels)) for labels in named if labels]
        if (not layout or any(len(labels) > 1 for labels in named)
                or not set(known) <= set(layout) or len(set(known)) < len(known)):
            raise self.fail(f"a transpose layer needs an (N, C, H, W), (N, tokens, "
                            f"features) or (N, features) tensor, got {list(src.dims)}; see "
                            f"{DOCS}")
        free = iter(role for role in layout if role not in known)
        return "".join(next(iter(labels)) if labels else next(free) for labels in named)

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

    def _pads(self, src: View, out: tuple[int, ...], kernel: list[int], stride: list[int],
              dilation: list[int]) -> tuple[tuple[int, int], tuple[int, int]]:
        """Leading (top, left) and trailing (bottom, right) pads of a window node: its
        `pads` or `auto_pad`, plus, with `ceil_mode`, the rows its last window reads past
        the end; checked against ONNX's output size."""
        auto = self.string("auto_pad", "NOTSET", _AUTO_PADS)
        pads = self.ints("pads", [0, 0, 0, 0], 4, 0)
        ceil = self.ints("ceil_mode", [0], 1)[0]
        lead, end = [0, 0], [0, 0]
        for k in range(2):
            size, want = src.dims[2 + k], out[2 + k]
            span = dilation[k] * (kernel[k] - 1) + 1
            reach = (want - 1) * stride[k] + span  # padded rows the windows cover
            if auto in ("SAME_UPPER", "SAME_LOWER"):
                total = max(reach - size, 0)
                lead[k] = total // 2 if auto == "SAME_UPPER" else (total + 1) // 2
                end[k] = total - lead[k]
            elif auto == "NOTSET":
                lead[k], end[k] = pads[k], pads[k + 2]
            if ceil:
                end[k] += max(reach - size - lead[k] - end[k], 0)
            got = ops.conv_out_extent(size, kernel[k], stride[k], lead[k], dilation[k], end[k])
            if got != want:
                raise self.fail(f"pads {lead[k]} + {end[k]} (auto_pad {auto}) give output "
                                f"size {got} along axis {2 + k}, the model says {want}")
        return (lead[0], lead[1]), (end[0], end[1])

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
        lead, end = self._pads(src, out, kernel, stride, dilation)
        depthwise = groups == c_in == weight[0] and groups > 1
        layer = Layer(self._layer_name(), Op.DEPTHWISE_CONV if depthwise else Op.CONV,
                      (src.tensor,), Shape(weight[0], 0, 0), tuple(kernel), tuple(stride),
                      lead, tuple(dilation), groups, padding_end=end)
        self._add_layer(layer, self._nchw_view(out))

    def _pool(self, op: Op) -> None:
        src, out = self._window_input()
        kernel = self.ints("kernel_shape", None, 2, 1)
        stride = self.ints("strides", [1, 1], 2, 1)
        dilation = self.ints("dilations", [1, 1], 2, 1)
        lead, end = self._pads(src, out, kernel, stride, dilation)
        layer = Layer(self._layer_name(), op, (src.tensor,), Shape(0, 0, 0), tuple(kernel),
                      tuple(stride), lead, tuple(dilation), padding_end=end)
        self._add_layer(layer, self._nchw_view(out))

    def _global_pool(self) -> None:
        src, out = self._window_input()
        layer = Layer(self._layer_name(), Op.GLOBAL_POOL, (src.tensor,), Shape(0, 1, 1))
        self._add_layer(layer, self._nchw_view(out))

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

    def _split(self) -> None:
        """A Split of an implicit concat into equal pieces along channels: the operands of
        the element-wise op that reads them (an IR ADD / MUL reading its inputs
        concatenated along channels, cut into operands of its output's channels)."""
        src = self._view(self._activations()[0])
        rank = len(src.axes)
        axis = self.ints("axis", [0], 1)[0]
        outs = list(self.node.output)
        if -rank <= axis < rank:
            axis %= rank
            sizes = {self.dims(out)[axis] for out in outs}
        if (not -rank <= axis < rank or self.implicit.get(src.tensor) != src
                or not src.labels(axis) or not src.labels(axis) <= CHANNEL
                or len(sizes) != 1 or "" in outs):
            raise self.fail(f"a Split of an activation maps only when it cuts a Concat "
                            f"marked {Marker.IMPLICIT_CONCAT.value} into equal pieces along "
                            f"channels, the operands of an element-wise op; see {DOCS}")
        piece = (*src.axes[:axis], axis_of("c", sizes.pop()), *src.axes[axis + 1:])
        for k, out in enumerate(outs):
            self.pieces[out] = Piece(src.tensor, k, len(outs), View("", piece))

    def _eltwise_of_pieces(self, op: Op, tensors: list[str]) -> None:
        """An element-wise op of all the pieces of one Split of an implicit concat, in
        order: it reads the concat's inputs, cut into operands of a piece's channels."""
        pieces = [self.pieces.get(t) for t in tensors]
        first = pieces[0]
        if first is None or any(p is None or p[:3] != (first.concat, k, len(pieces))
                                for k, p in enumerate(pieces)):
            raise self.fail(f"it reads pieces of a Split ({', '.join(tensors)}): it must "
                            f"read all pieces of one Split, in order, and nothing else; see "
                            f"{DOCS}")
        layer = Layer(self._layer_name(), op, self.layers[first.concat].inputs,
                      Shape(first.view.ir_shape().c, 0, 0))
        self._add_layer(layer, first.view)

    def _eltwise(self, op: Op) -> None:
        if any(a in self.pieces for a in self._activations()):
            self._eltwise_of_pieces(op, self._activations())
            return
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

    def _gelu(self) -> None:
        """A Gelu marked as a layer of its own (not fused into its producer)."""
        src = self._view(self._activations()[0])
        self._add_layer(Layer(self._layer_name(), Op.GELU, (src.tensor,), Shape(0, 0, 0)),
                        src)

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
        if len(views) == 1 and self.marker != Marker.CONCAT_COPY:
            self._alias(views[0])
            return
        out = self.dims(self._out())
        view = View("", (*views[0].axes[:axis], axis_of(kind, out[axis]),
                         *views[0].axes[axis + 1:]))
        layer = Layer(self._layer_name(), Op.CONCAT, tuple(v.tensor for v in views),
                      Shape(0, 0, 0), axis=kind, copy=self.marker == Marker.CONCAT_COPY)
        name = self._add_layer(layer, view)
        if self.marker == Marker.IMPLICIT_CONCAT:
            self.implicit[name] = view.renamed(name)

    def _unknown(self) -> None:
        """An operator mipsched does not know, taken as element-wise (the option is on)."""
        views = [self._view(a) for a in self._activations()]
        out = self.dims(self._out())
        if len(self.node.output) != 1 or any(v.dims != out for v in views):
            raise self.fail(f"unsupported operator: not element-wise (outputs "
                            f"{len(self.node.output)}, output {list(out)}, inputs "
                            f"{[list(v.dims) for v in views]}); see {DOCS}")
        self._eltwise(Op.ADD)

