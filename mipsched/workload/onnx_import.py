"""ONNX model -> Workload (docs/onnx.md says what maps to what, and why).

onnx_read parses, checks and shape-infers the model (weights are never read: shapes come
from initialiser dims and shape inference) with the batch set to 1; here every node
becomes a layer, an alias or nothing:

* layers: Conv (grouped / depthwise), Gemm and MatMul with a constant weight (fc when it
  contracts a whole sample, matmul when it contracts the feature axis of a token
  sequence), MatMul of two activations (matmul_act: heads and transpose from the layouts),
  MaxPool / AveragePool / GlobalAveragePool / GlobalMaxPool, Add / Sub / Sum (add), Mul /
  Div (mul), Softmax / LogSoftmax, LayerNormalization, Concat, and a Transpose marked as
  moving data (transpose);
* aliases (no layer, no data moved): layout ops (Reshape, Flatten, unmarked Transpose,
  Squeeze, Unsqueeze), Identity, Dropout, Cast, (De)QuantizeLinear, BatchNormalization and
  activation functions (fused into their producer), and element-wise ops with constants
  or whose operands are all the same tensor (biases, scales, x * sigmoid(x), erf-GELU);
* nothing: nodes that only compute on constants and shapes (Constant, Shape, Gather ...).

Markers (onnx_export.Marker in a node's metadata_props) carry what ONNX cannot say: a
Transpose that moves data, a Concat that copies, a Gelu that is a layer of its own, and a
Concat that is the implicit concat of the conv / pool / fc / matmul layers reading it
(folded into them after mapping), or, cut by a Split into equal pieces, of the
element-wise op that reads the pieces as its operands.

Per-sample IR shapes: NCHW -> (C, H, W); (batch, tokens, features) -> (features, tokens,
1); (batch, features) -> (features, 1, 1). The first axis of every network input is the
batch; its size in the file is ignored and the workload's batch is `batch` (`--batch`).

Here the model is read and the workload assembled; onnx_nodes converts each node, on the
importer's state and shared checks in onnx_context.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import onnx

from mipsched.errors import InputError
from mipsched.workload.graph import Workload
from mipsched.workload.layer import CONCAT_READERS, Layer
from mipsched.workload.onnx_export import MARKER_KEY, Marker
from mipsched.workload.onnx_nodes import MAPPED, NodeConverter
from mipsched.workload.onnx_read import (
    DOCS,
    STANDARD,
    OnnxError,
    node_name,
    op_type,
    read_model,
    topological,
)

#: Ops whose output depends only on input shapes, never on their values.
_SHAPE_ONLY = frozenset({"Shape", "Size"})
_KNOWN = MAPPED | _SHAPE_ONLY
#: The markers each operator may carry.
_MARKERS = {"Transpose": (Marker.TRANSPOSE,),
            "Concat": (Marker.CONCAT_COPY, Marker.IMPLICIT_CONCAT),
            "Gelu": (Marker.GELU,)}


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
    """Whether mipsched maps `node`'s operator (or knows it computes only on shapes)."""
    return node.domain in STANDARD and node.op_type in _KNOWN


class _Importer(NodeConverter):
    """Maps the nodes of a shape-inferred model to layers, aliases and constants, then
    assembles the workload: implicit concats folded, dead branches dropped."""

    def workload(self, name: str, batch: int, elem_bytes: int) -> Workload:
        """The model as workload `name` of `batch` samples of `elem_bytes`-byte elements:
        every node mapped in topological order, then the layers the outputs depend on."""
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
            self.marker = self._marker()
            self._map(node)
        outputs = list(dict.fromkeys(self.views[o.name].tensor for o in self.graph.output
                                     if o.name in self.views))
        outputs = [o for o in outputs if o in self.layers]
        if not outputs:
            raise OnnxError("the model's outputs are computed by no layer mipsched "
                            f"schedules (only constants and layout ops); see {DOCS}")
        for concat in self.implicit:
            self._fold(concat, outputs)
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

    def _marker(self) -> Marker | None:
        """The node's mipsched marker (MARKER_KEY in its metadata_props), checked against
        its operator."""
        values = [p.value for p in self.node.metadata_props if p.key == MARKER_KEY]
        if not values:
            return None
        allowed = _MARKERS.get(self.node.op_type, ()) if self.node.domain in STANDARD else ()
        if len(values) > 1 or values[0] not in allowed:
            takes = (" or ".join(repr(m.value) for m in allowed) if allowed else
                     f"none (only {', '.join(_MARKERS)} nodes are marked)")
            raise self.fail(f"metadata {MARKER_KEY} = {', '.join(map(repr, values))}: a "
                            f"{op_type(self.node)} node takes {takes}; see {DOCS}")
        return Marker(values[0])

    def _fold(self, concat: str, outputs: list[str]) -> None:
        """Folds an implicit concat into the layers reading it when they all read several
        inputs as one along channels (CONCAT_READERS): they read its inputs instead."""
        layer = self.layers[concat]
        readers = [lay for lay in self.layers.values() if concat in lay.inputs]
        if (layer.axis != "c" or concat in outputs or not readers
                or any(lay.op not in CONCAT_READERS for lay in readers)):
            return
        for lay in readers:
            inputs = tuple(s for src in lay.inputs
                           for s in (layer.inputs if src == concat else (src,)))
            self.layers[lay.name] = dataclasses.replace(lay, inputs=inputs)
        del self.layers[concat]

    def _live(self, outputs: list[str]) -> dict[str, Layer]:
        """The layers that some output depends on (dead branches are dropped)."""
        live, stack = set(outputs), list(outputs)
        while stack:
            for src in self.layers[stack.pop()].inputs:
                if src in self.layers and src not in live:
                    live.add(src)
                    stack.append(src)
        return {n: lay for n, lay in self.layers.items() if n in live}

