"""Reading an ONNX file for the importer: parse it without external data, set the batch
to 1, drop the values of large tensors (only their dims are used), check the graph (one
producer per tensor, no dangling input, no cycle) and run ONNX shape inference.

onnx's C++ parser and shape inference can crash on malformed files, so `read_model` does
all of this in a child process (mipsched.isolate): a crash becomes an OnnxError like any
other bad input.
"""

from __future__ import annotations

import heapq
import math
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError

from mipsched.isolate import ChildCrashed, run_isolated
from mipsched.workload.graph import WorkloadError

DOCS = "docs/onnx.md"
STANDARD = ("", "ai.onnx")
#: Tensors with more elements than this lose their values: shape inference reads values
#: only of small tensors (shapes, axes), the importer none at all.
_KEEP_VALUES = 1024
_VALUE_FIELDS = ("raw_data", "float_data", "int32_data", "int64_data", "double_data",
                 "uint64_data", "string_data")


class OnnxError(WorkloadError):
    """An ONNX model that mipsched cannot import (names the node or tensor)."""


def read_model(path: Path, unknown_as_eltwise: bool) -> onnx.ModelProto:
    """The checked, shape-inferred model of file `path` with a batch of 1 (see the module
    docstring). With `unknown_as_eltwise`, the outputs of operators ONNX has no schema for
    take the shape of their first input."""
    if not path.is_file():
        raise OnnxError("no such file")
    onnx.defs.has("Conv")  # builds onnx's operator registry once, here, not in each child
    try:
        data = run_isolated(_inferred_bytes, path, unknown_as_eltwise)
    except ChildCrashed as err:
        raise OnnxError(f"the onnx library crashed on this model ({err}): the file is "
                        "malformed or triggers an onnx bug; onnx.checker.check_model may "
                        "say which") from None
    return onnx.load_from_string(data)


def _inferred_bytes(path: Path, unknown_as_eltwise: bool) -> bytes:
    """What `read_model` computes, serialised: it runs in the child process."""
    model = _parse(path)
    _batch_one(model)
    _drop_large_values(model)
    topological(model.graph)
    return _infer(model, unknown_as_eltwise).SerializeToString()


def _parse(path: Path) -> onnx.ModelProto:
    try:
        model = onnx.load(str(path), load_external_data=False)
    except (DecodeError, RecursionError, ValueError) as err:
        raise OnnxError(f"not an ONNX model ({' '.join(str(err).split())})") from None
    if not model.HasField("graph") or not model.graph.node:
        raise OnnxError("not an ONNX model (no graph nodes)")
    g = model.graph
    names = [*(v.name for v in (*g.input, *g.output, *g.value_info, *g.initializer)),
             *(x for n in g.node for x in (n.name, n.op_type, n.domain, *n.input, *n.output)),
             *(x for n in g.node for p in n.metadata_props for x in (p.key, p.value))]
    if any(not isinstance(name, str) for name in names):  # protobuf hands back bytes
        raise OnnxError("a node or tensor name, or node metadata, is not valid UTF-8")
    return model


def _batch_one(model: onnx.ModelProto) -> None:
    """Sets a symbolic (or missing) first dimension of every network input to 1: the
    importer works per sample, and shape inference then sees concrete shapes."""
    for value in model.graph.input:
        shape = value.type.tensor_type.shape
        if value.type.HasField("tensor_type") and shape.dim:
            first = shape.dim[0]
            if not first.HasField("dim_value"):
                first.dim_value = 1


def _drop_large_values(model: onnx.ModelProto) -> None:
    """Clears the values (not the dims) of large initialisers and constant attributes, so
    that shape inference and the way back from the child process move no weights."""
    attrs = (a.t for n in model.graph.node for a in n.attribute
             if a.type == onnx.AttributeProto.TENSOR)
    for t in (*model.graph.initializer, *attrs):
        if math.prod(t.dims) > _KEEP_VALUES:
            for field in _VALUE_FIELDS:
                t.ClearField(field)


def _infer(model: onnx.ModelProto, unknown_as_eltwise: bool) -> onnx.ModelProto:
    """The model with inferred shapes; with `unknown_as_eltwise`, the unknown outputs of
    operators without an ONNX schema take the shape of their first input, round by round
    (each round lets inference continue past them)."""
    model = _run_inference(model)
    while unknown_as_eltwise:
        shapes = value_types(model)
        guesses = [node for _, node in topological(model.graph)
                   if not onnx.defs.has(node.op_type, "" if node.domain in STANDARD
                                        else node.domain)
                   and len(node.output) == 1 and node.output[0] not in shapes
                   and node.input and node.input[0] in shapes]
        if not guesses:
            break
        for node in guesses:
            info = model.graph.value_info.add()
            info.CopyFrom(shapes[node.input[0]])
            info.name = node.output[0]
        model = _run_inference(model)
    return model


def _run_inference(model: onnx.ModelProto) -> onnx.ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception as err:  # onnx's C++ checker raises several types on malformed models
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise OnnxError(f"ONNX shape inference failed: {first}") from None


def value_types(model: onnx.ModelProto) -> dict[str, onnx.ValueInfoProto]:
    """The tensors of the graph whose shape is known (inputs, value_info, outputs)."""
    g = model.graph
    return {v.name: v for v in (*g.input, *g.value_info, *g.output)
            if v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape")}


def topological(graph: onnx.GraphProto) -> list[tuple[int, onnx.NodeProto]]:
    """(index, node) in an order where every tensor is produced before it is read: the
    file's order where it allows (ONNX asks for a sorted graph, not every exporter writes
    one). Errors on tensors with two producers, unproduced inputs and cycles."""
    available = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    available |= {t.values.name for t in graph.sparse_initializer} | {""}
    producer: dict[str, int] = {}
    for k, node in enumerate(graph.node):
        for out in node.output:
            if out in producer or (out and out in available):
                first = (f"node {node_name(graph.node[producer[out]], producer[out])}"
                         if out in producer else "a graph input or initializer")
                raise OnnxError(f"node {node_name(node, k)}: output '{out}' is also produced "
                                f"by {first} (an ONNX tensor has one producer)")
            if out:
                producer[out] = k
    waiting: dict[str, list[int]] = {}
    missing = [0] * len(graph.node)
    for k, node in enumerate(graph.node):
        for name in set(node.input) - available:
            if name not in producer:
                raise OnnxError(f"node {node_name(node, k)}: input '{name}' is not a graph "
                                "input, an initializer or any node's output (dangling input)")
            waiting.setdefault(name, []).append(k)
            missing[k] += 1
    ready = [k for k in range(len(graph.node)) if missing[k] == 0]
    order: list[int] = []
    while ready:
        k = heapq.heappop(ready)
        order.append(k)
        for out in graph.node[k].output:
            for j in waiting.pop(out, ()):
                missing[j] -= 1
                if missing[j] == 0:
                    heapq.heappush(ready, j)
    if len(order) < len(graph.node):
        cycle = " -> ".join(node_name(graph.node[k], k) for k in _cycle(graph, producer,
                                                                         missing))
        raise OnnxError(f"nodes form a cycle: {cycle}")
    return [(k, graph.node[k]) for k in order]


def _cycle(graph: onnx.GraphProto, producer: dict[str, int], missing: list[int]) -> list[int]:
    """A cycle among the nodes that never became ready (closed: first == last). Each of
    them reads a tensor of another such node, so walking up producers must repeat."""
    k = next(j for j, m in enumerate(missing) if m)
    path: list[int] = []
    while k not in path:
        path.append(k)
        k = next(producer[i] for i in graph.node[k].input
                 if i in producer and missing[producer[i]])
    return [*path[path.index(k):], k]


def node_name(node: onnx.NodeProto, index: int) -> str:
    """``'name' (Op)`` of a node; unnamed nodes go by their index in the graph."""
    return f"'{node.name or f'#{index}'}' ({op_type(node)})"


def op_type(node: onnx.NodeProto) -> str:
    """The operator, prefixed by its domain when that is not the standard one."""
    return node.op_type if node.domain in STANDARD else f"{node.domain}::{node.op_type}"
