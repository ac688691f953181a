"""The YAML workload format (`mipsched-workload` v1, docs/workload-yaml.md).

A network per sample: named inputs with their [C, H, W] shapes, layers (one flow mapping
per line when written by mipsched) and outputs. The batch size and element size are not
part of it: they come from the command line, as for zoo networks. `dump_workload` and
`read_workload` are inverses (same layers, same digest). Errors name the layer or key and
the line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import networkx as nx
import yaml

from mipsched.errors import InputError, show
from mipsched.workload import ops
from mipsched.workload.graph import Workload, WorkloadError, WorkTooLargeError
from mipsched.workload.layer import Layer, Op, Shape
from mipsched.yamlsrc import Dumper, Key, YamlDoc, parse_yaml

FORMAT = "mipsched-workload"
VERSION = 1
_TOP_KEYS = ("format", "version", "name", "inputs", "layers", "outputs")
_WINDOW = ("kernel", "stride", "padding", "padding_end", "dilation")
#: Optional layer keys per op (besides name, op, inputs, out). `heads` is Layer.groups.
_OP_KEYS: dict[Op, tuple[str, ...]] = {
    Op.CONV: (*_WINDOW, "groups"),
    Op.DEPTHWISE_CONV: _WINDOW,
    Op.MAX_POOL: _WINDOW,
    Op.AVG_POOL: _WINDOW,
    Op.MATMUL_ACT: ("heads", "transpose_rhs"),
    Op.CONCAT: ("axis", "copy"),
    Op.TRANSPOSE: ("perm",),
}
#: The ops each optional layer key belongs to (for "applies to ... only" messages).
_KEY_OPS: dict[str, tuple[str, ...]] = {
    key: tuple(op.value for op, keys in _OP_KEYS.items() if key in keys)
    for keys in _OP_KEYS.values() for key in keys}
_DEFAULTS = Layer("", Op.ADD, (), Shape(1, 1, 1))
_HEADER = ("# mipsched workload (docs/workload-yaml.md). Shapes are per sample, [C, H, W]"
           " (transformers:\n# [features, tokens, 1]); --batch and --elem-bytes set the "
           "batch and the element size.\n")


# --- writing ------------------------------------------------------------------------------
def layer_dict(layer: Layer) -> dict[str, Any]:
    """The YAML mapping of one layer: the keys that differ from their defaults."""
    out: dict[str, Any] = {"name": layer.name, "op": layer.op.value,
                           "inputs": list(layer.inputs), "out": list(layer.out)}
    for key in _WINDOW:
        if getattr(layer, key) != _window_default(layer, key):
            out[key] = list(getattr(layer, key))
    if layer.op == Op.CONV and layer.groups != 1:
        out["groups"] = layer.groups
    if layer.op == Op.MATMUL_ACT:
        out["heads"] = layer.groups
        out["transpose_rhs"] = layer.transpose_rhs
    if layer.op == Op.CONCAT:
        out["axis"] = layer.axis
        if layer.copy:
            out["copy"] = True
    if layer.op == Op.TRANSPOSE:
        out["perm"] = list(layer.perm)
    return out


def _window_default(layer: Layer, key: str) -> tuple[int, int]:
    """The value a window key takes when the file leaves it out (`padding_end`: the
    layer's `padding`)."""
    return layer.padding if key == "padding_end" else getattr(_DEFAULTS, key)


def workload_dict(workload: Workload) -> dict[str, Any]:
    """The document of `workload` as plain data (what `dump_workload` writes)."""
    return {"format": FORMAT, "version": VERSION, "name": workload.name,
            "inputs": {name: list(shape) for name, shape in workload.inputs.items()},
            "layers": [layer_dict(lay) for lay in workload.layers.values()],
            "outputs": list(workload.outputs)}


def dump_workload(workload: Workload) -> str:
    """The YAML text of `workload` (one line per input and per layer)."""
    doc = workload_dict(workload)
    head = {key: doc[key] for key in ("format", "version", "name")}
    lines = [_HEADER + yaml.dump(head, Dumper=Dumper, sort_keys=False,
                                 width=1 << 20).rstrip(),
             "inputs:"]
    lines += [f"  {_flow(name)}: {_flow(dims)}" for name, dims in doc["inputs"].items()]
    lines.append("layers:")
    lines += [f"  - {_flow(layer)}" for layer in doc["layers"]]
    lines.append(f"outputs: {_flow(doc['outputs'])}")
    return "\n".join(lines) + "\n"


def _flow(value: Any) -> str:
    return yaml.dump(value, Dumper=Dumper, default_flow_style=True, sort_keys=False,
                     width=1 << 20).removesuffix("\n...\n").strip()


# --- reading ------------------------------------------------------------------------------
def load_workload(path: Path, batch: int = 1, elem_bytes: int = 1) -> Workload:
    """The workload of a YAML file for `batch` samples of `elem_bytes`-byte elements."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise WorkloadError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise WorkloadError(f"{path}: cannot read as text ({err})") from None
    return read_workload(parse_yaml(text, str(path)), batch, elem_bytes, path.stem)


def read_workload(doc: YamlDoc, batch: int = 1, elem_bytes: int = 1,
                  default_name: str = "network") -> Workload:
    """The workload described by a parsed YAML (or JSON) document."""
    return _Reader(doc).workload(batch, elem_bytes, default_name)


class _Reader:
    """Validates a workload document; every error carries the source and the line."""

    def __init__(self, doc: YamlDoc) -> None:
        self.doc = doc

    def fail(self, path: tuple[Key, ...], message: str) -> WorkloadError:
        """A WorkloadError about the value at `path`, naming the source and the line
        (for the caller to raise)."""
        return WorkloadError(f"{self.doc.where(path)}: {message}")

    def workload(self, batch: int, elem_bytes: int, default_name: str) -> Workload:
        """The document's workload for `batch` samples of `elem_bytes`-byte
        elements (`default_name` when it names none)."""
        data = self.doc.data
        if not isinstance(data, dict):
            raise self.fail((), f"expected a mapping with keys {', '.join(_TOP_KEYS)}, "
                                f"got {show(data)}")
        self.check_keys((), data, _TOP_KEYS, ("inputs", "layers"))
        if data.get("format", FORMAT) != FORMAT:
            raise self.fail(("format",), f"format must be '{FORMAT}', got "
                                         f"{show(data['format'])}")
        if data.get("version", VERSION) != VERSION:
            raise self.fail(("version",), f"unsupported version {show(data['version'])} "
                                          f"(this mipsched reads version {VERSION})")
        name = data.get("name", default_name)
        if not isinstance(name, str) or not name:
            raise self.fail(("name",), f"name: expected a non-empty string, got {show(name)}")
        inputs = self.inputs(data["inputs"])
        entries = self.list(("layers",), data["layers"])
        layers = [self.layer(k, raw) for k, raw in enumerate(entries)]
        index = self.unique_names(inputs, layers)
        layers = self.ordered(inputs, layers, index)
        shaped = self.shaped(inputs, layers, index)
        read = {s for lay in layers for s in lay.inputs}
        unread = next((n for n in inputs if n not in read), None)
        if unread is not None:
            raise self.fail(("inputs", unread), f"network input '{unread}' is never read")
        outputs = self.outputs(data.get("outputs"), shaped, index)
        try:
            return Workload(name, batch, inputs, shaped, outputs, elem_bytes)
        except WorkTooLargeError as err:  # a cap on the work: at the layer's (input's) line
            at = ("layers", index[err.tensor]) if err.tensor in index else ("inputs",
                                                                              err.tensor)
            raise WorkTooLargeError(f"{self.doc.where(at)}: {err}", err.tensor) from None
        except WorkloadError as err:
            raise WorkloadError(f"{self.doc.source}: {err}") from None

    # --- generic checks -------------------------------------------------------------------
    def check_keys(self, path: tuple[Key, ...], data: dict, allowed: tuple[str, ...],
                   required: tuple[str, ...], what: str = "") -> None:
        """Raises WorkloadError on a key of `data` not in `allowed` or a missing
        `required` one; `what` prefixes the message."""
        for key in data:
            if key not in allowed:
                extra = (" (the batch and element size are command-line options: "
                         "--batch, --elem-bytes)" if key in ("batch", "elem_bytes") else "")
                raise self.fail((*path, str(key)), f"{what}unknown key {show(key)} "
                                                   f"(allowed: {', '.join(allowed)}){extra}")
        for key in required:
            if key not in data:
                raise self.fail(path, f"{what}missing key '{key}'")

    def list(self, path: tuple[Key, ...], value: Any, what: str = "") -> list:
        """`value` if it is a list, else a WorkloadError naming `path`."""
        if not isinstance(value, list):
            raise self.fail(path, f"{what}{path[-1]}: expected a list, got {show(value)}")
        return value

    def ints(self, path: tuple[Key, ...], value: Any, n: int, lo: int, what: str) -> tuple:
        """`n` integers >= `lo` (a single integer stands for a pair when n == 2)."""
        if n == 2 and isinstance(value, int) and not isinstance(value, bool):
            value = [value, value]
        if (not isinstance(value, list) or len(value) != n
                or any(isinstance(v, bool) or not isinstance(v, int) for v in value)):
            raise self.fail(path, f"{what}{path[-1]}: expected {n} integers, "
                                  f"got {show(value)}")
        if any(v < lo for v in value):
            raise self.fail(path, f"{what}{path[-1]} {show(value)}: every entry must be "
                                  f">= {lo}")
        return tuple(value)

    # --- parts ----------------------------------------------------------------------------
    def inputs(self, raw: Any) -> dict[str, Shape]:
        """The network inputs: name -> per-sample [C, H, W] shape."""
        if not isinstance(raw, dict) or not raw:
            raise self.fail(("inputs",), "inputs: expected a mapping of input names to "
                                         f"[C, H, W], got {show(raw)}")
        shapes = {}
        for name, dims in raw.items():
            if not isinstance(name, str) or not name:
                raise self.fail(("inputs", str(name)), f"input name {show(name)}: expected "
                                                       "a non-empty string")
            shapes[name] = Shape(*self.shape(("inputs", name), dims, f"input '{name}': "))
        return shapes

    def shape(self, path: tuple[Key, ...], value: Any, what: str) -> tuple[int, int, int]:
        """A [C, H, W] shape; `what` names it (``input 'x': ``, ``layer 'a': out: ``)."""
        if (not isinstance(value, list) or len(value) != 3
                or any(isinstance(v, bool) or not isinstance(v, int) for v in value)):
            raise self.fail(path, f"{what}expected [C, H, W] (3 integers), got {show(value)}")
        if any(v < 1 for v in value):
            raise self.fail(path, f"{what}zero-sized tensor {show(value)}: C, H and W must "
                                  "be >= 1")
        return value[0], value[1], value[2]

    def layer(self, k: int, raw: Any) -> Layer:
        """Layer `k` of the document (its `out` as written; checked later against
        its inputs)."""
        path: tuple[Key, ...] = ("layers", k)
        if not isinstance(raw, dict):
            raise self.fail(path, f"layers[{k}]: expected a mapping with name, op, inputs "
                                  f"and out, got {show(raw)}")
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise self.fail((*path, "name"), f"layers[{k}]: name: expected a non-empty "
                                             f"string, got {show(name)}")
        what = f"layer '{name}': "
        op_name = raw.get("op")
        if not isinstance(op_name, str) or op_name not in {o.value for o in Op}:
            raise self.fail((*path, "op"), f"{what}unknown op {show(op_name)} (known: "
                                           f"{', '.join(o.value for o in Op)})")
        op = Op(op_name)
        self.misplaced_keys(path, raw, op, what)
        self.check_keys(path, raw, ("name", "op", "inputs", "out", *_OP_KEYS.get(op, ())),
                        ("inputs", "out"), what)
        srcs = self.list((*path, "inputs"), raw["inputs"], what)
        for j, src in enumerate(srcs):
            if not isinstance(src, str):
                raise self.fail((*path, "inputs", j), f"{what}inputs[{j}]: expected a tensor "
                                                      f"name, got {show(src)}")
        params: dict[str, Any] = {}
        for key in _WINDOW:
            if key in raw:
                params[key] = self.ints((*path, key), raw[key], 2,
                                        0 if key.startswith("padding") else 1, what)
        for key in ("groups", "heads"):  # `heads` is the groups of a matmul_act
            if key in raw:
                value = raw[key]
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise self.fail((*path, key), f"{what}{key}: expected an integer >= 1, "
                                                  f"got {show(value)}")
                params["groups"] = value
        if "transpose_rhs" in raw:
            if not isinstance(raw["transpose_rhs"], bool):
                raise self.fail((*path, "transpose_rhs"), f"{what}transpose_rhs: expected "
                                f"true/false, got {show(raw['transpose_rhs'])}")
            params["transpose_rhs"] = raw["transpose_rhs"]
        if "axis" in raw:
            if raw["axis"] not in ("c", "h"):
                raise self.fail((*path, "axis"), f"{what}axis: expected 'c' or 'h', got "
                                                 f"{show(raw['axis'])}")
            params["axis"] = raw["axis"]
        if "copy" in raw:
            if not isinstance(raw["copy"], bool):
                raise self.fail((*path, "copy"), f"{what}copy: expected true/false, got "
                                                 f"{show(raw['copy'])}")
            params["copy"] = raw["copy"]
        if "perm" in raw:
            params["perm"] = self.perm((*path, "perm"), raw["perm"], what)
        out = Shape(*self.shape((*path, "out"), raw["out"], f"{what}out: "))
        return Layer(name, op, tuple(srcs), out, **params)

    def misplaced_keys(self, path: tuple[Key, ...], raw: dict, op: Op, what: str) -> None:
        """Errors on an optional key that belongs to other ops than `op`."""
        for key in raw:
            owners = _KEY_OPS.get(key, ()) if isinstance(key, str) else ()
            if owners and op.value not in owners:
                raise self.fail((*path, key), f"{what}key '{key}' applies to "
                                              f"{', '.join(owners)} only, not to {op}")

    def perm(self, path: tuple[Key, ...], value: Any, what: str) -> tuple[int, int, int]:
        """A transpose's permutation of the axes 0 (C), 1 (H), 2 (W)."""
        perm = self.ints(path, value, 3, 0, what)
        if sorted(perm) != [0, 1, 2]:
            raise self.fail(path, f"{what}perm {show(value)}: expected a permutation of "
                                  "0 (C), 1 (H), 2 (W)")
        return perm

    def unique_names(self, inputs: dict[str, Shape], layers: list[Layer]) -> dict[str, int]:
        """Index of each layer in the file; errors on duplicate names."""
        index: dict[str, int] = {}
        for k, lay in enumerate(layers):
            if lay.name in inputs:
                raise self.fail(("layers", k), f"layer '{lay.name}': name already used by a "
                                               f"network input (line "
                                               f"{self.doc.line(('inputs', lay.name))})")
            if lay.name in index:
                raise self.fail(("layers", k), f"duplicate layer name '{lay.name}' (first "
                                               f"at line "
                                               f"{self.doc.line(('layers', index[lay.name]))})")
            index[lay.name] = k
        return index

    def ordered(self, inputs: dict[str, Shape], layers: list[Layer],
                index: dict[str, int]) -> list[Layer]:
        """The layers in a topological order that keeps the file's order where it can;
        errors on inputs naming unknown tensors and on cycles."""
        graph = nx.DiGraph()
        graph.add_nodes_from(index)
        for k, lay in enumerate(layers):
            for j, src in enumerate(lay.inputs):
                if src in index:
                    graph.add_edge(src, lay.name)
                elif src not in inputs:
                    raise self.fail(("layers", k, "inputs", j),
                                    f"layer '{lay.name}': input '{src}' is not a network "
                                    "input or a layer (dangling input)")
        if not nx.is_directed_acyclic_graph(graph):
            cycle = [u for u, _ in nx.find_cycle(graph)]
            first = min(cycle, key=index.__getitem__)
            at = cycle.index(first)
            cycle = cycle[at:] + cycle[:at]
            raise self.fail(("layers", index[first]),
                            f"layers form a cycle: {' -> '.join([*cycle, first])}")
        order = nx.lexicographical_topological_sort(graph, key=index.__getitem__)
        return [layers[index[n]] for n in order]

    def shaped(self, inputs: dict[str, Shape], layers: list[Layer],
               index: dict[str, int]) -> dict[str, Layer]:
        """The layers after checking each output shape against its inputs (a depthwise
        convolution's groups are its input channels)."""
        shapes: dict[str, Shape] = dict(inputs)
        shaped: dict[str, Layer] = {}
        for lay in layers:
            path: tuple[Key, ...] = ("layers", index[lay.name])
            ins = [shapes[s] for s in lay.inputs]
            if lay.op == Op.DEPTHWISE_CONV and len(ins) == 1:
                lay = Layer(**{**lay.__dict__, "groups": ins[0].c})
            try:
                expected = ops.infer_out_shape(lay, ins)
            except InputError as err:
                raise self.fail(path, str(err)) from None
            if expected != lay.out:
                raise self.fail((*path, "out"),
                                f"layer '{lay.name}': out {list(lay.out)} does not match "
                                f"{list(expected)} implied by its inputs")
            shapes[lay.name] = lay.out
            shaped[lay.name] = lay
        return shaped

    def outputs(self, raw: Any, layers: dict[str, Layer], index: dict[str, int]
                ) -> tuple[str, ...]:
        """The network outputs: as listed (each a layer, once, and every sink
        among them), or without a list the layers nothing reads."""
        consumed = {s for lay in layers.values() for s in lay.inputs}
        if raw is None:
            return tuple(n for n in layers if n not in consumed)
        names = self.list(("outputs",), raw)
        for j, name in enumerate(names):
            if not isinstance(name, str) or name not in layers:
                raise self.fail(("outputs", j), f"outputs[{j}]: {show(name)} is not a layer")
            if name in names[:j]:
                raise self.fail(("outputs", j), f"outputs[{j}]: '{name}' is listed twice")
        for name in layers:
            if name not in consumed and name not in names:
                raise self.fail(("layers", index[name]),
                                f"layer '{name}' has no consumer and is not in outputs")
        return tuple(names)

