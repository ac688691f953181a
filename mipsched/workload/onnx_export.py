"""Workload -> ONNX model, the inverse of onnx_import for the operators the zoo uses.

Each IR tensor becomes one ONNX tensor of the same name: (N, C, H, W) for convolutional
networks, (N, tokens, features) for networks with matmul / matmul_act layers (their
tensors have W = 1). Attention layers are written the way exporters write them (reshape to
heads, transpose, MatMul, transpose back). The batch dimension is symbolic ("N"). Weights
are written as external-data stubs (dims only, no bytes, file `weights.bin` absent), so
the model is small, carries every shape and is for analysis, not for running.
"""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper

from mipsched.atomic import write_bytes_atomic
from mipsched.workload.graph import Workload, WorkloadError
from mipsched.workload.layer import Layer, Op, Shape

OPSET = 20
_BATCH = "N"


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
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[TensorProto] = []

    def model(self) -> onnx.ModelProto:
        for lay in self.wl.layers.values():
            self.layer(lay)
        graph = helper.make_graph(
            self.nodes, self.wl.name,
            [self.value(n, s) for n, s in self.wl.inputs.items()],
            [self.value(n, self.wl.layers[n].out) for n in self.wl.outputs],
            initializer=self.inits)
        return helper.make_model(graph, producer_name="mipsched",
                                 opset_imports=[helper.make_opsetid("", OPSET)])

    # --- helpers --------------------------------------------------------------------------
    def dims(self, shape: Shape) -> list[int]:
        """Canonical dims after the batch."""
        return [shape.h, shape.c] if self.sequence else [shape.c, shape.h, shape.w]

    def value(self, name: str, shape: Shape) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                             [_BATCH, *self.dims(shape)])

    def node(self, op: str, inputs: list[str], output: str, name: str = "", **attrs) -> str:
        self.nodes.append(helper.make_node(op, inputs, [output], name=name or output,
                                           **attrs))
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
        shape = helper.make_tensor(f"{output}/shape", TensorProto.INT64, [len(dims) + 1],
                                   [-1, *dims])
        self.inits.append(shape)
        return self.node("Reshape", [src, shape.name], output, name=f"{output}/reshape")

    # --- layers ---------------------------------------------------------------------------
    def layer(self, lay: Layer) -> None:
        ins = list(lay.inputs)
        shapes = self.wl.in_shapes(lay.name)
        name = lay.name
        if lay.op in (Op.CONV, Op.DEPTHWISE_CONV):
            w = self.weight(f"{name}/weight", [lay.out.c, shapes[0].c // lay.groups,
                                               *lay.kernel])
            self.window("Conv", [ins[0], w], lay, group=lay.groups)
        elif lay.op in (Op.MAX_POOL, Op.AVG_POOL):
            self.window("MaxPool" if lay.op == Op.MAX_POOL else "AveragePool", ins[:1], lay,
                        kernel_shape=list(lay.kernel))
        elif lay.op == Op.GLOBAL_POOL:
            self.node("GlobalAveragePool", ins, name)
        elif lay.op == Op.FC:
            flat = self.node("Flatten", ins, f"{name}/flat", axis=1)
            w = self.weight(f"{name}/weight", [lay.out.c, shapes[0].elems])
            gemm = self.node("Gemm", [flat, w], f"{name}/gemm", name=name, transB=1)
            self.reshape(gemm, self.dims(lay.out), name)
        elif lay.op == Op.MATMUL:
            self.need_sequence(lay)
            w = self.weight(f"{name}/weight", [shapes[0].c, lay.out.c])
            self.node("MatMul", [ins[0], w], name)
        elif lay.op == Op.MATMUL_ACT:
            self.need_sequence(lay)
            self.attention(lay, shapes)
        elif lay.op in (Op.ADD, Op.MUL):
            if len(ins) > 2 and lay.op == Op.MUL:
                raise WorkloadError(f"layer '{name}': ONNX Mul takes two inputs")
            self.node("Sum" if len(ins) > 2 else "Add" if lay.op == Op.ADD else "Mul",
                      ins, name)
        elif lay.op == Op.SOFTMAX:
            self.softmax(lay, shapes[0])
        elif lay.op == Op.LAYERNORM:
            self.need_sequence(lay)
            scale = self.weight(f"{name}/scale", [lay.out.c])
            self.node("LayerNormalization", [ins[0], scale], name, axis=-1)
        elif lay.op == Op.GELU:
            self.node("Gelu", ins, name)
        elif lay.op == Op.CONCAT:
            axis = {"c": 2, "h": 1} if self.sequence else {"c": 1, "h": 2}
            self.node("Concat", ins, name, axis=axis[lay.axis])
        else:
            raise WorkloadError(f"layer '{name}': no ONNX export for {lay.op}")

    def need_sequence(self, lay: Layer) -> None:
        if not self.sequence:
            raise WorkloadError(f"layer '{lay.name}': {lay.op} is exported only in networks "
                                "of token sequences")

    def window(self, op: str, inputs: list[str], lay: Layer, **attrs) -> None:
        if self.sequence:
            raise WorkloadError(f"layer '{lay.name}': {op} needs (N, C, H, W) tensors")
        ph, pw = lay.padding
        self.node(op, inputs, lay.name, strides=list(lay.stride), pads=[ph, pw, ph, pw],
                  dilations=list(lay.dilation), **attrs)

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
                and producer.transpose_rhs and producer.groups > 1:
            split = self.reshape(lay.inputs[0], [src.h, producer.groups,
                                                 src.c // producer.groups],
                                 f"{lay.name}/split")
            probs = self.node("Softmax", [split], f"{lay.name}/heads", name=lay.name, axis=-1)
            self.reshape(probs, self.dims(lay.out), lay.name)
        else:
            self.node("Softmax", list(lay.inputs), lay.name, axis=-1 if self.sequence else 1)
