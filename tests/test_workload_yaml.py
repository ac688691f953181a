"""YAML workloads: every zoo network round-trips exactly; hand-written files (any order,
block or flow style) read as documented; each kind of mistake gives a specific message
naming the layer and the line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mipsched.cli import app
from mipsched.errors import InputError
from mipsched.hw.load import hardware_text
from mipsched.workload import zoo
from mipsched.workload.graph import NetBuilder
from mipsched.workload.layer import Op, Shape
from mipsched.workload.yaml_format import dump_workload, load_workload, read_workload
from mipsched.yamlsrc import parse_yaml

runner = CliRunner()
DOCS = Path(__file__).resolve().parents[1] / "docs" / "workload-yaml.md"

BASE = """\
name: t
inputs:
  x: [4, 8, 8]
layers:
  - {name: a, op: conv, inputs: [x], out: [8, 8, 8], kernel: 3, padding: 1}
  - {name: b, op: conv, inputs: [a], out: [8, 4, 4], kernel: [3, 3], stride: 2, padding: 1}
  - {name: c, op: add, inputs: [b, b], out: [8, 4, 4]}
outputs: [c]
"""


def read(text: str, **kw):
    return read_workload(parse_yaml(text, "net.yaml"), **kw)


@pytest.mark.parametrize("name", list(zoo.NETWORKS))
def test_zoo_round_trip(name: str) -> None:
    net = zoo.get(name)
    back = read(dump_workload(net))
    assert back.digest() == net.digest()
    assert back.layers == net.layers
    assert (back.name, back.inputs, back.outputs) == (net.name, net.inputs, net.outputs)


def test_names_that_need_quoting_round_trip() -> None:
    """Names as ONNX exporters make them, or that YAML would read as something else."""
    b = NetBuilder("1e5 net")
    x = b.input("2E3", 4, 8, 8)
    y = b.conv("/layer1/0/conv1/Conv", x, 4, 3)
    y = b.conv("a: b #c", y, 4, 1)
    b.eltwise("null", [y, b.conv("yes", x, 4, 1)])
    net = b.build()
    assert read(dump_workload(net)).digest() == net.digest()


def test_batch_and_element_size_come_from_the_caller() -> None:
    text = dump_workload(zoo.get("chain3"))
    assert not {"batch", "elem_bytes"} & set(parse_yaml(text, "t").data)
    net = read(text, batch=4, elem_bytes=2)
    assert net.digest() == zoo.get("chain3", 4, 2).digest()


def test_hand_written_file() -> None:
    net = read(BASE)
    assert list(net.layers) == ["a", "b", "c"]
    assert net.layers["a"].kernel == (3, 3)  # a single number stands for both
    assert net.layers["b"].stride == (2, 2)
    assert net.total_macs == 8 * 8 * 8 * (4 * 9) + 8 * 4 * 4 * (8 * 9)
    assert net.total_weight_bytes == 8 * 4 * 9 + 8 * 8 * 9


def test_layers_in_any_acyclic_order_keep_the_file_order_where_they_can() -> None:
    lines = BASE.splitlines()
    shuffled = "\n".join([*lines[:4], lines[6], lines[4], lines[5], *lines[7:]]) + "\n"
    assert list(read(shuffled).layers) == ["a", "b", "c"]


def test_docs_example_reads() -> None:
    example = re.search(r"```yaml\n(.*?)```", DOCS.read_text(), re.S).group(1)
    net = read(example)
    assert net.digest() == zoo.get("resblock").digest()


def test_outputs_default_to_sinks() -> None:
    net = read(BASE.replace("outputs: [c]\n", ""))
    assert net.outputs == ("c",)


@pytest.mark.parametrize(("old", "new", "line", "needle"), [
    ("inputs: [x], out: [8, 8, 8]", "inputs: [c], out: [8, 8, 8]", 5,
     "layers form a cycle: a -> b -> c -> a"),
    ("inputs: [a], out", "inputs: [q], out", 6,
     "layer 'b': input 'q' is not a network input or a layer (dangling input)"),
    ("x: [4, 8, 8]", "x: [4, 0, 8]", 3, "input 'x': zero-sized tensor [4, 0, 8]"),
    ("out: [8, 4, 4]}\noutputs", "out: [8, 0, 4]}\noutputs", 7,
     "layer 'c': out: zero-sized tensor [8, 0, 4]"),
    ("name: c", "name: a", 7, "duplicate layer name 'a' (first at line 5)"),
    ("name: c", "name: x", 7, "layer 'x': name already used by a network input (line 3)"),
    ("out: [8, 4, 4], kernel", "out: [8, 5, 4], kernel", 6,
     "layer 'b': out [8, 5, 4] does not match [8, 4, 4] implied by its inputs"),
    ("op: add", "op: plus", 7, "layer 'c': unknown op 'plus'"),
    ("stride: 2", "stride: 0", 6, "layer 'b': stride [0, 0]: every entry must be >= 1"),
    ("stride: 2", "strides: 2", 6, "layer 'b': unknown key 'strides'"),
    ("kernel: 3,", "kernel: 3x3,", 5, "layer 'a': kernel: expected 2 integers, got '3x3'"),
    ("op: add, inputs: [b, b]", "op: add, inputs: [b, b], axis: c", 7,
     "layer 'c': unknown key 'axis'"),
    ("outputs: [c]", "outputs: [c]\nbatch: 4", 9, "--batch"),
    ("outputs: [c]", "outputs: [c, zz]", 8, "outputs[1]: 'zz' is not a layer"),
    ("outputs: [c]", "outputs: [c, c]", 8, "outputs[1]: 'c' is listed twice"),
    ("outputs: [c]", "outputs: [b]", 7, "layer 'c' has no consumer and is not in outputs"),
    ("x: [4, 8, 8]", "x: [4, 8, 8]\n  y: [1, 1, 1]", 4, "network input 'y' is never read"),
    ("name: t", "name: t\nname: u", 2, "duplicate key 'name' (first at line 1)"),
    ("out: [8, 8, 8],", "out: [8, 8, 8,", 5, "invalid YAML"),
    ("op: add, inputs: [b, b]", "op: add, inputs: [b]", 7,
     "layer 'c': add needs >= 2 inputs of one shape"),
])
def test_mistakes_name_the_layer_and_the_line(old: str, new: str, line: int,
                                              needle: str) -> None:
    assert old in BASE
    with pytest.raises(InputError) as err:
        read(BASE.replace(old, new, 1))
    assert f"net.yaml, line {line}" in str(err.value)
    assert needle in str(err.value)


def test_cli_reads_yaml_and_reports_errors_in_one_line(tmp_path: Path) -> None:
    good = tmp_path / "net.yaml"
    good.write_text(BASE)
    result = runner.invoke(app, ["solve", str(good), "--method", "baseline", "--json",
                                 "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["total_macs"] == read(BASE).total_macs

    bad = tmp_path / "bad.yaml"
    bad.write_text(BASE.replace("inputs: [a]", "inputs: [q]"))
    result = runner.invoke(app, ["solve", str(bad), "--out", str(tmp_path / "o2")])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"mipsched: error: {bad}, line 6: layer 'b': input 'q' is not a network input or a "
        "layer (dangling input)"]
    assert not (tmp_path / "o2").exists()


def test_missing_file_and_unknown_network(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_workload(tmp_path / "nope.yaml")
    result = runner.invoke(app, ["solve", "resnet5", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "not in the zoo" in result.stderr and "not an .onnx or .yaml file" in result.stderr


def test_a_buffer_too_small_for_any_schedule(tmp_path: Path) -> None:
    """A YAML workload on a hardware YAML whose buffer cannot hold one tile of a layer:
    `solve` says which layer and why (status infeasible, exit 1), writes no schedule."""
    net = tmp_path / "net.yaml"
    net.write_text(dump_workload(zoo.get("resblock")))
    hw = tmp_path / "tiny.yaml"
    hw.write_text(hardware_text("edge")[0].replace("capacity_bytes: 8388608",
                                                   "capacity_bytes: 1024"))
    result = runner.invoke(app, ["solve", str(net), "--hw", str(hw), "--json", "--out",
                                 str(tmp_path / "o")])
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    assert out["status"] == "infeasible"
    assert "layer 'conv_a' fits in no schedule" in out["reason"]
    assert "1,024 B buffer" in out["reason"]
    assert not (tmp_path / "o" / "schedule.json").exists()


def test_written_layers_are_one_line_each() -> None:
    text = dump_workload(zoo.get("gpt2_small_decode"))
    lines = text.splitlines()
    layer_lines = [ln for ln in lines if ln.startswith("  - ")]
    assert len(layer_lines) == 16
    qk = next(ln for ln in layer_lines if "name: qk," in ln)
    assert "heads: 12" in qk and "transpose_rhs: true" in qk
    net = read(text)
    assert net.layers["k_cat"].axis == "h"
    assert net.layers["qk"].op == Op.MATMUL_ACT
    assert net.inputs["k_cache"] == Shape(768, 512, 1)
