"""Workload -> ONNX model, the inverse of onnx_import.

Each IR tensor becomes one ONNX tensor of the same name: (N, C, H, W) for convolutional
networks, (N, tokens, features) for networks with matmul / matmul_act layers (their
tensors have W = 1; their convolutions and pools run on the (N, features, tokens, 1)
view). Attention layers are written the way exporters write them (reshape to heads,
transpose, MatMul, transpose back). The batch dimension is symbolic ("N"). Weights are
written as external-data stubs (dims only, no bytes, file `weights.bin` absent), so the
model is small, carries every shape and is for analysis, not for running.

ONNX cannot say that a Transpose or a Concat moves data, or that a Gelu is a layer of
its own, so the nodes of IR constructs that do carry a marker in their `metadata_props`
(key MARKER_KEY, docs/onnx.md): a TRANSPOSE layer, a CONCAT with `copy`, a GELU layer,
and the Concat written in front of a conv / pool / fc / matmul that reads several inputs
(implicit concat) or that a Split cuts into the operands of an element-wise op. Node
metadata needs IR version 10 (onnx 1.16), which is what the models are written with.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any

import onnx
from onnx import TensorProto, helper

from mipsched.atomic import write_bytes_atomic
from mipsched.workload import ops
from mipsched.workload.graph import Workload, WorkloadError
from mipsched.workload.layer import Layer, Op, Shape
from mipsched.workload.onnx_layout import IR_AXES, LAYOUTS

OPSET = 20
IR_VERSION = 10
"""The first IR version with NodeProto.metadata_props (onnx 1.16, the oldest supported)."""
MARKER_KEY = "mipsched.layer"
_BATCH = "N"


class Marker(StrEnum):
    """What a marked ONNX node is to mipsched (the value of MARKER_KEY)."""

    TRANSPOSE = "transpose"  # a Transpose that moves data: a TRANSPOSE layer
    CONCAT_COPY = "concat-copy"  # a Concat that copies: a CONCAT layer with `copy`
    IMPLICIT_CONCAT = "implicit-concat"  # the several inputs of the layer it feeds
    GELU = "gelu"  # a Gelu computed by a layer of its own (vector unit), not fused


def save_onnx(workload: Workload, path: Path) -> None:
    """Writes `export_onnx(workload)` to `path` atomically."""
    write_bytes_atomic(path, export_onnx(workload).SerializeToString())


def export_onnx(workload: Workload) -> onnx.ModelProto:
    """The ONNX model of `workload` (opset 20)."""
    return _Exporter(workload).model()


class _Exporter:
    def __init__(self, workload: Workload) -> None:
        self.wl = workload
        self.sequence = any(lay.op in (Op.MATMUL, Op.MATMUL_ACT)
                            for lay in workload.layers.values())
        if self.sequence and any(workload.shape_of(t).w != 1
                                 for t in (*workload.inputs, *workload.layers)):
            raise WorkloadError(f"network '{workload.name}': a network with matmul layers "
                                "is exported as token sequences, which need W = 1")
        self.layout = LAYOUTS[3] if self.sequence else LAYOUTS[4]
        """The IR role (n batch, c, h, w) of each ONNX axis of a tensor."""
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[TensorProto] = []

    def model(self) -> onnx.ModelProto:
        """The ONNX model: every layer's nodes in layer order, the network inputs
        and outputs with a symbolic batch."""
        for lay in self.wl.layers.values():
            self.layer(lay)
        graph = helper.make_graph(
            self.nodes, self.wl.name,
            [self.value(n, s) for n, s in self.wl.inputs.items()],
            [self.value(n, self.wl.layers[n].out) for n in self.wl.outputs],
            initializer=self.inits)
        return helper.make_model(graph, producer_name="mipsched", ir_version=IR_VERSION,
                                 opset_imports=[helper.make_opsetid("", OPSET)])

    # --- helpers --------------------------------------------------------------------------
    def dims(self, shape: Shape) -> list[int]:
        """Canonical dims after the batch."""
        return [shape[IR_AXES.index(role)] for role in self.layout[1:]]

    def value(self, name: str, shape: Shape) -> onnx.ValueInfoProto:
        """The value info of tensor `name` of per-sample `shape`, batch symbolic."""
        return helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                             [_BATCH, *self.dims(shape)])

    def node(self, op: str, inputs: list[str], output: str, name: str = "",
             marker: Marker | None = None, **attrs: Any) -> str:
        """Adds a node (named after its output unless `name` is given), marked with
        `marker` when given; returns its output."""
        node = helper.make_node(op, inputs, [output], name=name or output, **attrs)
        if marker is not None:
            node.metadata_props.add(key=MARKER_KEY, value=marker.value)
        self.nodes.append(node)
        return output

    def weight(self, name: str, dims: list[int]) -> str:
        """An external-data stub: the dims of a float tensor whose bytes are elsewhere."""
        t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=dims,
                        data_location=TensorProto.EXTERNAL)
        for key, value in (("location", "weights.bin"), ("offset", "0"), ("length", "0")):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        self.inits.append(t)
        return name

    def reshape(self, src: str, dims: list[int], output: str) -> str:
        """Adds a Reshape of `src` to (batch, *dims) named `output`; returns it."""
        shape = helper.make_tensor(f"{output}/shape", TensorProto.INT64, [len(dims) + 1],
                                   [-1, *dims])
        self.inits.append(shape)
        return self.node("Reshape", [src, shape.name], output, name=f"{output}/reshape")

    def channel_axis(self) -> int:
        """The ONNX axis of the channels / features."""
        return self.layout.index("c")

    # --- layers ---------------------------------------------------------------------------
    def layer(self, lay: Layer) -> None:
        """Adds the nodes (and weight stubs) of layer `lay`."""
        ins = list(lay.inputs)
        shapes = self.wl.in_shapes(lay.name)
        data = ops.data_shape(lay, shapes)
        name = lay.name
        if lay.op in (Op.CONV, Op.DEPTHWISE_CONV):
            w = self.weight(f"{name}/weight", [lay.out.c, data.c // lay.groups, *lay.kernel])
            self.spatial("Conv", lay, [w], group=lay.groups, **self.window_attrs(lay))
        elif lay.op in (Op.MAX_POOL, Op.AVG_POOL):
            self.spatial("MaxPool" if lay.op == Op.MAX_POOL else "AveragePool", lay, [],
                         kernel_shape=list(lay.kernel), **self.window_attrs(lay))
        elif lay.op == Op.GLOBAL_POOL:
            self.spatial("GlobalAveragePool", lay, [])
        elif lay.op == Op.FC:
            flat = self.node("Flatten", [self.operand(lay)], f"{name}/flat", axis=1)
            w = self.weight(f"{name}/weight", [lay.out.c, data.elems])
            gemm = self.node("Gemm", [flat, w], f"{name}/gemm", name=name, transB=1)
            self.reshape(gemm, self.dims(lay.out), name)
        elif lay.op == Op.MATMUL:
            self.need_sequence(lay)
            w = self.weight(f"{name}/weight", [data.c, lay.out.c])
            self.node("MatMul", [self.operand(lay), w], name)
        elif lay.op == Op.MATMUL_ACT:
            self.need_sequence(lay)
            self.attention(lay, shapes)
        elif lay.op in (Op.ADD, Op.MUL):
            self.eltwise(lay, shapes)
        elif lay.op == Op.SOFTMAX:
            self.softmax(lay, shapes[0])
        elif lay.op == Op.LAYERNORM:
            self.need_sequence(lay)
            scale = self.weight(f"{name}/scale", [lay.out.c])
            self.node("LayerNormalization", [ins[0], scale], name, axis=-1)
        elif lay.op == Op.GELU:
            self.node("Gelu", ins, name, marker=Marker.GELU)
        elif lay.op == Op.CONCAT:
            axis = self.channel_axis() if lay.axis == "c" else self.layout.index("h")
            self.node("Concat", ins, name, axis=axis,
                      marker=Marker.CONCAT_COPY if lay.copy else None)
        elif lay.op == Op.TRANSPOSE:
            self.node("Transpose", ins, name, perm=self.onnx_perm(lay),
                      marker=Marker.TRANSPOSE)
        else:
            raise WorkloadError(f"layer '{name}': no ONNX export for {lay.op}")

    def need_sequence(self, lay: Layer) -> None:
        """Raises WorkloadError unless the network is exported as token
        sequences (`lay` needs them)."""
        if not self.sequence:
            raise WorkloadError(f"layer '{lay.name}': {lay.op} is exported only in networks "
                                "of token sequences")

    def operand(self, lay: Layer) -> str:
        """The input of a layer reading one map; several inputs (read concatenated
        along channels) are first joined by a Concat marked as the implicit concat."""
        if len(lay.inputs) == 1:
            return lay.inputs[0]
        return self.node("Concat", list(lay.inputs), f"{lay.name}/concat",
                         axis=self.channel_axis(), marker=Marker.IMPLICIT_CONCAT)

    def eltwise(self, lay: Layer, shapes: tuple[Shape, ...]) -> None:
        """Add / Sum / Mul of the layer's operands: its inputs, or, when their shapes
        differ, the pieces of `out.c` channels of the inputs concatenated along channels
        (a Concat marked as the implicit concat, cut by a Split)."""
        operands = list(lay.inputs)
        if any(s != shapes[0] for s in shapes):
            count = ops.operand_count(lay, shapes)
            operands = [f"{lay.name}/operand{k}" for k in range(count)]
            self.nodes.append(helper.make_node(
                "Split", [self.operand(lay)], operands, name=f"{lay.name}/split",
                axis=self.channel_axis(), num_outputs=count))
        if len(operands) > 2 and lay.op == Op.MUL:
            raise WorkloadError(f"layer '{lay.name}': ONNX Mul takes two inputs")
        self.node("Sum" if len(operands) > 2 else "Add" if lay.op == Op.ADD else "Mul",
                  operands, lay.name)

    @staticmethod
    def window_attrs(lay: Layer) -> dict[str, list[int]]:
        """Strides, pads (ONNX order: top, left, bottom, right) and dilations."""
        (top, bottom), (left, right) = lay.pads(0), lay.pads(1)
        return {"strides": list(lay.stride), "pads": [top, left, bottom, right],
                "dilations": list(lay.dilation)}

    def spatial(self, op: str, lay: Layer, weights: list[str], **attrs: Any) -> None:
        """A conv / pool node on the layer's input; in networks of token sequences on its
        (N, features, tokens, 1) view, with free layout changes before and after."""
        src = self.operand(lay)
        name = lay.name
        if not self.sequence:
            self.node(op, [src, *weights], name, **attrs)
            return
        data = ops.data_shape(lay, self.wl.in_shapes(name))
        flip = self.node("Transpose", [src], f"{name}/in_t", perm=[0, 2, 1])
        grid = self.reshape(flip, [data.c, data.h, 1], f"{name}/in_nchw")
        out = self.node(op, [grid, *weights], f"{name}/nchw", name=name, **attrs)
        flat = self.reshape(out, [lay.out.c, lay.out.h], f"{name}/out_t")
        self.node("Transpose", [flat], name, name=f"{name}/out", perm=[0, 2, 1])

    def onnx_perm(self, lay: Layer) -> list[int]:
        """The ONNX perm of a TRANSPOSE layer between tensors in the network's layout:
        ONNX output axis j holds the input axis of the IR axis that output axis j's role
        takes (`lay.perm`). Token sequences have no W axis, so perm must keep it."""
        if self.sequence and lay.perm[2] != 2:
            raise WorkloadError(f"layer '{lay.name}': perm {list(lay.perm)} moves W, which "
                                "a network of token sequences does not have")
        return [0, *(self.layout.index(IR_AXES[lay.perm[IR_AXES.index(role)]])
                     for role in self.layout[1:])]

    def heads(self, src: str, shape: Shape, heads: int, perm: list[int], out: str) -> str:
        """(N, tokens, features) -> (N, heads, ., .) by a reshape and a transpose."""
        split = self.reshape(src, [shape.h, heads, shape.c // heads], f"{out}/split")
        return self.node("Transpose", [split], out, perm=perm)

    def attention(self, lay: Layer, shapes: tuple[Shape, ...]) -> None:
        """Q.K^T (transpose_rhs) or P.V per head, as (N, heads, tokens, .) MatMuls."""
        g, name = lay.groups, lay.name
        lhs, rhs = shapes
        q = self.heads(lay.inputs[0], lhs, g, [0, 2, 1, 3], f"{name}/lhs")
        k = self.heads(lay.inputs[1], rhs, g, [0, 2, 3, 1] if lay.transpose_rhs
                       else [0, 2, 1, 3], f"{name}/rhs")
        prod = self.node("MatMul", [q, k], f"{name}/heads", name=name)
        back = self.node("Transpose", [prod], f"{name}/merge", perm=[0, 2, 1, 3])
        self.reshape(back, [lay.out.h, lay.out.c], name)

    def softmax(self, lay: Layer, src: Shape) -> None:
        """Softmax over the channel axis; per head for multi-head attention scores."""
        producer = self.wl.layers.get(lay.inputs[0])
        if self.sequence and producer is not None and producer.op == Op.MATMUL_ACT \
                and producer.groups > 1:
            split = self.reshape(lay.inputs[0], [src.h, producer.groups,
                                                 src.c // producer.groups],
                                 f"{lay.name}/split")
            probs = self.node("Softmax", [split], f"{lay.name}/heads", name=lay.name, axis=-1)
            self.reshape(probs, self.dims(lay.out), lay.name)
        else:
            self.node("Softmax", list(lay.inputs), lay.name, axis=-1 if self.sequence else 1)
