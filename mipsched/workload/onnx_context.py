"""The ONNX importer's state while it maps a model node by node, and the checks every
node kind shares: tensor shapes, views and attributes of the node being mapped, and
adding a layer or an alias for its output."""

from __future__ import annotations

from typing import NamedTuple

import onnx

from mipsched.errors import InputError
from mipsched.workload import ops
from mipsched.workload.layer import Layer, Shape
from mipsched.workload.onnx_export import Marker
from mipsched.workload.onnx_layout import LAYOUTS, View, axis_of
from mipsched.workload.onnx_read import DOCS, STANDARD, OnnxError, value_types


class Piece(NamedTuple):
    """Output `index` of a Split that cuts implicit concat `concat` into `count` equal
    pieces along channels, laid out as `view` (whose tensor is unset)."""

    concat: str
    index: int
    count: int
    view: View


def _dims(value: onnx.ValueInfoProto) -> tuple[int | str | None, ...]:
    """Dimensions of a tensor: ints, names of symbolic dims, or None when unknown."""
    return tuple(d.dim_value if d.HasField("dim_value")
                 else d.dim_param if d.HasField("dim_param") else None
                 for d in value.type.tensor_type.shape.dim)


class MappingContext:
    """What the importer knows while it maps a shape-inferred model: shapes, constants,
    the views of mapped tensors, the network inputs and layers so far, and the node being
    mapped (its name for errors, its marker)."""

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
        self.implicit: dict[str, View] = {}
        """CONCAT layers of Concat nodes marked as implicit concats, with their views."""
        self.pieces: dict[str, Piece] = {}
        """The outputs of Splits of implicit concats."""
        self.node: onnx.NodeProto = onnx.NodeProto()
        self.where = ""
        self.marker: Marker | None = None

    def fail(self, message: str) -> OnnxError:
        """An OnnxError about the node being mapped (for the caller to raise)."""
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
        if tensor in self.pieces:
            raise self.fail(f"tensor '{tensor}' is a piece of a Split, which mipsched maps "
                            f"only as an operand of an element-wise op; see {DOCS}")
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
        labels = LAYOUTS.get(rank)
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

    def string(self, attr: str, default: str, allowed: tuple[str, ...]) -> str:
        """A STRING attribute, one of `allowed`."""
        found = [a for a in self.node.attribute if a.name == attr]
        if not found:
            return default
        value = found[0].s.decode(errors="replace")
        if found[0].type != onnx.AttributeProto.STRING or value not in allowed:
            raise self.fail(f"attribute '{attr}': expected one of {', '.join(allowed)}")
        return value

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

    def _add_layer(self, layer: Layer, out_view: View) -> str:
        """Adds a layer after checking that mipsched's output shape is ONNX's; returns its
        name."""
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
        return name

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

    def _nchw_view(self, dims: tuple[int, ...]) -> View:
        """The natural (N, C, H, W) view of an output of `dims` (tensor unset)."""
        return View("", tuple(axis_of(lab, d) for lab, d in zip(LAYOUTS[4], dims, strict=True)))

    def _layer_name(self) -> str:
        return self.node.name or f"{self.node.op_type.lower()}_{len(self.layers)}"

