"""Fuzzing every loader through the command line with mutated files: YAML workloads
(`import`), hardware YAML (`hw --show`), tile-program and schedule JSON (`eval`) and ONNX
models (`import`). Every case must end in a result (exit 0, a complete output file) or one
line on stderr with exit code 2 and no output file: never a traceback, a hang or a partial
file. The fast test runs 500 cases (100 per loader); the slow one 10,000. The seeds use
every construct of the IR (asymmetric pads, transposes, copying and implicit concats, and
mipsched's ONNX markers), and the ONNX mutator also rewrites markers."""

from __future__ import annotations

import json
import signal
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import onnx
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from mipsched.cli import app
from mipsched.hw.load import hardware_text
from mipsched.workload import zoo
from mipsched.workload.onnx_export import MARKER_KEY, export_onnx
from mipsched.workload.yaml_format import dump_workload, load_workload

import onnx_models as om

runner = CliRunner()
CASE_SECONDS = 20
"""A case running longer than this counts as a hang."""
#: Values that break parsers and validators: bounds, types, units, YAML and JSON oddities.
TOKENS = (b"0", b"-1", b"1e309", b"-0.0", b"NaN", b"nan", b".inf", b"true", b"null", b"~",
          b"8 MiB", b"16GB/s", b"99999999999999999999999", b"1" * 5000, b"''", b'"x"',
          b"[]", b"{}", b"[[[[[[[[", b"}", b"&a [*a]", b"*a", b"!!python/object:os.system",
          b"2024-13-45", b"\t", b"\n", b": ", b"- ", b"#", b",", b"\x00", b"\xff\xfe", b"<<",
          b"conv", b"matmul_act", b"input", b"layers", b"inputs", b"out", b"heads")
#: Ops the ONNX mutator swaps in.
ONNX_OPS = ("Conv", "Relu", "Add", "Mul", "MatMul", "Gemm", "Reshape", "Transpose", "Concat",
            "Softmax", "MaxPool", "Flatten", "Squeeze", "GlobalAveragePool", "Split", "Foo")
#: Marker values the ONNX mutator puts on nodes.
MARKERS = ("transpose", "concat-copy", "implicit-concat", "gelu", "copy", "")


# --- seeds ------------------------------------------------------------------------------
@cache
def json_seeds() -> dict[str, bytes]:
    """program.json and schedule.json of chain3 solved by the baseline method."""
    with tempfile.TemporaryDirectory() as out:
        result = runner.invoke(app, ["solve", "chain3", "--method", "baseline", "--out", out])
        assert result.exit_code == 0, result.output
        return {name: (Path(out) / name).read_bytes()
                for name in ("program.json", "schedule.json")}


SEEDS: dict[str, Callable[[], list[bytes]]] = {
    "workload": lambda: [dump_workload(net).encode()
                         for net in (zoo.get("resblock"), zoo.get("gpt2_small_decode"),
                                     om.conv_constructs(), om.gpt_decode_constructs())],
    "hardware": lambda: [hardware_text("edge")[0].encode()],
    "program": lambda: [json_seeds()["program.json"]],
    "schedule": lambda: [json_seeds()["schedule.json"]],
    "onnx": lambda: [m.SerializeToString() for m in (om.conv_chain("stripped"),
                                                      om.conv_variants(),
                                                      om.attention_head(tokens=8, d=16),
                                                      om.custom_op(two_inputs=True),
                                                      om.padding_variants(),
                                                      om.marked_nodes(),
                                                      export_onnx(om.conv_constructs()),
                                                      export_onnx(
                                                          om.gpt_decode_constructs()))],
}
SUFFIX = {"workload": ".yaml", "hardware": ".yaml", "program": ".json",
          "schedule": ".json", "onnx": ".onnx"}


# --- mutations --------------------------------------------------------------------------
byte_edits = st.lists(st.tuples(st.sampled_from(["set", "delete", "insert", "truncate",
                                                 "duplicate"]),
                                st.integers(0, 1 << 20), st.integers(1, 64),
                                st.sampled_from(TOKENS)), min_size=1, max_size=4)
proto_edits = st.lists(st.tuples(st.sampled_from(["attr", "dim", "input_dim", "op", "wire",
                                                  "drop", "marker"]),
                                 st.integers(0, 1 << 20), st.integers(0, 1 << 20),
                                 st.sampled_from([0, 1, 2, 3, -1, 7, 64, 1 << 31, -(1 << 40)])),
                       min_size=1, max_size=3)


def edit_bytes(data: bytes, edits: list) -> bytes:
    buf = bytearray(data)
    for kind, at, size, token in edits:
        k = at % (len(buf) + 1)
        if kind == "set":
            buf[k:k + len(token)] = token
        elif kind == "delete":
            del buf[k:k + size]
        elif kind == "insert":
            buf[k:k] = token
        elif kind == "truncate":
            del buf[k:]
        else:
            buf[k:k] = buf[k:k + size]
    return bytes(buf)


#: Values the tree mutator puts into YAML / JSON documents.
VALUES = (0, -1, 1, 2, 7, 1.5, -0.5, 10**30, "8 MiB", "x", "", None, True, [], {}, [0, 0],
          [1, 2, 3], {"k": 1}, "conv", "input", "conv1", "matmul_act", "h")
tree_edits = st.lists(st.tuples(st.sampled_from(["set", "delete", "add_key", "duplicate",
                                                 "swap"]),
                                st.integers(0, 1 << 20), st.integers(0, 1 << 20),
                                st.sampled_from(VALUES)), min_size=1, max_size=3)


def edit_tree(data: bytes, edits: list, as_json: bool) -> bytes:
    """Structural mutations of a YAML / JSON document: a value replaced, a key or item
    deleted, an unknown key added, a list item duplicated, two items swapped."""
    doc = json.loads(data) if as_json else yaml.safe_load(data)
    for kind, a, b, shared in edits:
        value = json.loads(json.dumps(shared))  # a fresh copy: VALUES must not change
        nodes = list(_containers(doc))
        node = nodes[a % len(nodes)]
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if kind == "add_key" and isinstance(node, dict):
            node[f"extra_{b % 3}"] = value
        if not keys:
            continue
        key = keys[b % len(keys)]
        if kind == "set":
            node[key] = value
        elif kind == "delete":
            del node[key]
        elif kind == "duplicate" and isinstance(node, list):
            node.insert(key, json.loads(json.dumps(node[key])))
        elif kind == "swap":
            other = keys[(a + b) % len(keys)]
            node[key], node[other] = node[other], node[key]
    text = json.dumps(doc) if as_json else yaml.safe_dump(doc, sort_keys=False)
    return text.encode()


def _containers(doc) -> Iterator:
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, dict | list):
            yield node
            stack.extend(node.values() if isinstance(node, dict) else node)


def edit_proto(data: bytes, edits: list) -> bytes:
    """Structural mutations of an ONNX model: attribute values, initialiser and input
    dims, op types, rewiring of inputs, dropped nodes, markers set or replaced."""
    model = onnx.load_from_string(data)
    g = model.graph
    for kind, a, b, value in edits:
        node = g.node[a % len(g.node)] if g.node else None
        if kind == "attr" and node is not None and node.attribute:
            attr = node.attribute[b % len(node.attribute)]
            if attr.ints:
                attr.ints[b % len(attr.ints)] = value
            else:
                attr.i = value
        elif kind == "dim" and g.initializer:
            t = g.initializer[a % len(g.initializer)]
            if t.dims:
                t.dims[b % len(t.dims)] = value
        elif kind == "input_dim":
            dims = g.input[a % len(g.input)].type.tensor_type.shape.dim
            if dims:
                dims[b % len(dims)].dim_value = value
        elif kind == "op" and node is not None:
            node.op_type = ONNX_OPS[b % len(ONNX_OPS)]
        elif kind == "wire" and node is not None and node.input:
            names = [o for n in g.node for o in n.output] + ["x", "", "nowhere"]
            node.input[b % len(node.input)] = names[b % len(names)]
        elif kind == "drop" and node is not None:
            g.node.remove(node)
        elif kind == "marker" and node is not None:
            del node.metadata_props[:]
            node.metadata_props.add(key=MARKER_KEY, value=MARKERS[b % len(MARKERS)])
    return model.SerializeToString()


# --- running one case -------------------------------------------------------------------
@contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    def hang(*_) -> None:
        raise TimeoutError(f"a case ran longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def check_case(kind: str, data: bytes, unknown_as_eltwise: bool = False) -> int:
    """Runs one case; returns its exit code (0 or 2) after checking the outcome."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        src = folder / f"input{SUFFIX[kind]}"
        src.write_bytes(data)
        out = folder / "out.yaml"
        flag = ["--unknown-as-eltwise"] if unknown_as_eltwise else []
        argv = {"workload": ["import", str(src), "-o", str(out), *flag],
                "onnx": ["import", str(src), "-o", str(out), *flag],
                "hardware": ["hw", "--show", str(src)],
                "program": ["eval", str(src), "--json"],
                "schedule": ["eval", str(src), "--json"]}[kind]
        with time_limit(CASE_SECONDS):
            result = runner.invoke(app, argv)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        assert "Traceback" not in result.output
        written = sorted(p.name for p in folder.iterdir())
        if result.exit_code == 2:
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("mipsched: error: "), lines
            assert written == [src.name]  # no output file, no temporary file
            return 2
        assert result.exit_code == 0, (result.exit_code, result.output)
        if kind in ("workload", "onnx"):
            assert written == sorted([src.name, out.name])
            load_workload(out)  # complete and valid
        elif kind == "hardware":
            assert result.stdout == data.decode()
        else:
            json.loads(result.stdout)
        return 0


def mutated(kind: str) -> st.SearchStrategy[bytes]:
    seeds = st.sampled_from(SEEDS[kind]())
    by_bytes = st.builds(edit_bytes, seeds, byte_edits)
    if kind == "onnx":
        return st.one_of(by_bytes, st.builds(edit_proto, seeds, proto_edits))
    as_json = SUFFIX[kind] == ".json"
    return st.one_of(by_bytes, st.builds(edit_tree, seeds, tree_edits, st.just(as_json)))


def fuzz(kind: str, cases: int, derandomize: bool) -> dict[int, int]:
    """Runs `cases` mutated inputs through check_case; returns how many ended with each
    exit code."""
    exits = {0: 0, 2: 0}

    @settings(max_examples=cases, derandomize=derandomize, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(mutated(kind), st.booleans())
    def one(data: bytes, unknown_as_eltwise: bool) -> None:
        exits[check_case(kind, data, unknown_as_eltwise)] += 1

    one()
    return exits


@pytest.mark.parametrize("kind", list(SEEDS))
def test_fuzz_loaders_fast(kind: str) -> None:
    exits = fuzz(kind, 100, derandomize=True)
    assert exits[0] > 0 and exits[2] > 0  # mutated files load, and reach the error paths
    assert sum(exits.values()) >= 90


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(SEEDS))
def test_fuzz_loaders_10k(kind: str) -> None:
    exits = fuzz(kind, 2000, derandomize=False)
    print(f"{kind}: {exits[0]} loaded, {exits[2]} one-line errors")
    assert exits[0] > 0 and exits[2] > 0
    assert sum(exits.values()) >= 1900


def _yaml_edit(old: str, new: str) -> bytes:
    text = dump_workload(om.conv_constructs())
    assert old in text
    return text.replace(old, new, 1).encode()


def _onnx_marker(node_name: str, value: str) -> bytes:
    model = om.marked_nodes()
    node = next(n for n in model.graph.node if n.name == node_name)
    node.metadata_props[0].value = value
    return model.SerializeToString()


@pytest.mark.parametrize(("kind", "build", "needle"), [
    ("workload", lambda: _yaml_edit("perm: [0, 2, 1]", "perm: [0, 2, 2]"),
     "layer 'swap_hw': perm [0, 2, 2]: expected a permutation"),
    ("workload", lambda: _yaml_edit("out: [4, 7, 6]}", "out: [4, 7, 6], copy: true}"),
     "layer 'b1': key 'copy' applies to concat only, not to conv"),
    ("workload", lambda: _yaml_edit("out: [10, 1, 1]}", "out: [10, 1, 1], padding_end: 1}"),
     "layer 'fc': key 'padding_end' applies to conv"),
    ("workload", lambda: _yaml_edit("inputs: [b1, b3, bp]", "inputs: [b1, image, bp]"),
     "layer 'mix': inputs read as one along channels need equal H x W"),
    ("onnx", lambda: _onnx_marker("to_hwc", "copy"),
     "node 'to_hwc' (Transpose): metadata mipsched.layer = 'copy'"),
    ("onnx", lambda: _onnx_marker("join", "transpose"),
     "node 'join' (Concat): metadata mipsched.layer = 'transpose'"),
])
def test_bad_constructs_end_in_one_line(tmp_path: Path, kind: str, build,
                                        needle: str) -> None:
    """Mistakes in the new constructs through the CLI: exit code 2, one line naming the
    layer or node, no output file."""
    assert check_case(kind, build()) == 2
    src = tmp_path / f"bad{SUFFIX[kind]}"
    src.write_bytes(build())
    result = runner.invoke(app, ["import", str(src), "-o", str(tmp_path / "out.yaml")])
    assert result.exit_code == 2 and needle in result.stderr


@pytest.mark.parametrize("kind", list(SEEDS))
def test_seeds_are_valid(kind: str) -> None:
    """The unmutated seeds load (exit 0), so the fuzzer starts from valid files."""
    for data in SEEDS[kind]():
        check_case(kind, data)
