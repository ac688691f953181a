"""YAML workloads: every zoo network, and networks using every IR construct, round-trip
exactly; keys are written only where they differ from their defaults; hand-written files
(any order, block or flow style) read as documented; each kind of mistake gives a
specific message naming the layer and the line."""

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

import onnx_models as om

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

#: Asymmetric pads, implicit concats into a conv, a transpose, a copying concat.
CONSTRUCTS = """\
name: t2
inputs:
  x: [4, 8, 6]
layers:
  - {name: a, op: conv, inputs: [x], out: [8, 4, 3], kernel: 3, stride: 2, padding_end: 1}
  - {name: p, op: max_pool, inputs: [x], out: [4, 4, 3], kernel: 2, stride: 2}
  - {name: m, op: conv, inputs: [a, p], out: [6, 4, 3]}
  - {name: t, op: transpose, inputs: [m], out: [3, 4, 6], perm: [2, 1, 0]}
  - {name: c, op: concat, inputs: [t, t], out: [6, 4, 6], copy: true}
outputs: [c]
"""


def read(text: str, **kw):
    return read_workload(parse_yaml(text, "net.yaml"), **kw)


def assert_round_trip(net) -> None:
    back = read(dump_workload(net))
    assert back.digest() == net.digest()
    assert back.layers == net.layers
    assert (back.name, back.inputs, back.outputs) == (net.name, net.inputs, net.outputs)


@pytest.mark.parametrize("name", list(zoo.NETWORKS))
def test_zoo_round_trip(name: str) -> None:
    assert_round_trip(zoo.get(name))


@pytest.mark.parametrize("name", list(om.CONSTRUCT_NETS))
def test_every_construct_round_trips(name: str) -> None:
    assert_round_trip(om.CONSTRUCT_NETS[name]())


def test_new_keys_are_written_only_where_they_differ_from_their_defaults() -> None:
    """padding_end only when it differs from padding, copy only when true, perm on every
    transpose; a network without the new constructs is written as before."""
    lines = {ln.split(",")[0].removeprefix("  - {name: "): ln
             for ln in dump_workload(om.conv_constructs()).splitlines()
             if ln.startswith("  - ")}
    assert "padding: [2, 2], padding_end: [3, 3]" in lines["stem"]
    assert "padding_end" not in lines["bp"] and "padding: [1, 1]" in lines["bp"]
    assert "padding_end: [1, 1]" in lines["down"] and "padding:" not in lines["down"]
    assert "inputs: [b1, b3, bp]" in lines["mix"]
    assert lines["swap_hw"].endswith("perm: [0, 2, 1]}")
    assert lines["both"].endswith("axis: c, copy: true}")
    text = dump_workload(zoo.get("resblock"))
    assert not any(key in text for key in ("padding_end", "perm", "copy"))
    assert text.splitlines()[-3] == ("  - {name: shortcut, op: conv, inputs: [input], "
                                     "out: [256, 56, 56]}")


def test_hand_written_constructs() -> None:
    net = read(CONSTRUCTS)
    a, m, t, c = (net.layers[n] for n in "amtc")
    assert (a.padding, a.padding_end) == ((0, 0), (1, 1))  # a single number: both axes
    assert m.inputs == ("a", "p")  # read as one 12-channel map
    assert net.weight_bytes("m") == 6 * 12 and net.macs("m") == 6 * 4 * 3 * 12
    assert t.perm == (2, 1, 0) and net.vector_ops("t") == 72
    assert c.copy and net.vector_ops("c") == 144
    plain = read(CONSTRUCTS.replace(", copy: true", ""))
    assert not plain.layers["c"].copy and plain.vector_ops("c") == 0


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
    examples = re.findall(r"```yaml\n(.*?)```", DOCS.read_text(), re.S)
    assert read(examples[0]).digest() == zoo.get("resblock").digest()
    assert read(examples[1]).layers == read(CONSTRUCTS).layers


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
     "layer 'c': key 'axis' applies to concat only, not to add"),
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


@pytest.mark.parametrize(("old", "new", "line", "needle"), [
    ("perm: [2, 1, 0]", "perm: [2, 2, 0]", 8,
     "layer 't': perm [2, 2, 0]: expected a permutation of 0 (C), 1 (H), 2 (W)"),
    ("perm: [2, 1, 0]", "perm: [2, 1]", 8, "layer 't': perm: expected 3 integers, got [2, 1]"),
    ("perm: [2, 1, 0]", "perm: [2, 1, 3]", 8, "layer 't': perm [2, 1, 3]: expected a "
                                              "permutation"),
    ("out: [3, 4, 6], perm: [2, 1, 0]", "out: [3, 4, 6], perm: [0, 1, 2]", 8,
     "layer 't': out [3, 4, 6] does not match [6, 4, 3] implied by its inputs"),
    ("copy: true", "copy: yes please", 9, "layer 'c': copy: expected true/false, got "
                                          "'yes please'"),
    ("out: [4, 4, 3], kernel: 2", "out: [4, 4, 3], copy: true, kernel: 2", 6,
     "layer 'p': key 'copy' applies to concat only, not to max_pool"),
    ("perm: [2, 1, 0]", "perm: [2, 1, 0], padding_end: 1", 8,
     "layer 't': key 'padding_end' applies to conv, depthwise_conv, max_pool, avg_pool "
     "only, not to transpose"),
    ("inputs: [a, p], out: [6, 4, 3]", "inputs: [a, p], out: [6, 4, 3], perm: [0, 1, 2]", 7,
     "layer 'm': key 'perm' applies to transpose only, not to conv"),
    ("padding_end: 1", "padding_end: -1", 5, "layer 'a': padding_end [-1, -1]: every entry "
                                             "must be >= 0"),
    ("padding_end: 1", "padding_end: [1, 1, 1]", 5, "layer 'a': padding_end: expected 2 "
                                                    "integers"),
    ("inputs: [a, p]", "inputs: [a, x]", 7, "layer 'm': inputs read as one along channels "
                                            "need equal H x W, got [(8, 4, 3), (4, 8, 6)]"),
    ("padding_end: 1", "padding_end: 3", 5, "layer 'a': out [8, 4, 3] does not match "
                                            "[8, 5, 4] implied by its inputs"),
    ("op: transpose, inputs: [m]", "op: transpose, inputs: [m, m]", 8,
     "layer 't': transpose takes 1 input(s), got 2"),
    ("op: conv, inputs: [a, p]", "op: depthwise_conv, inputs: [a, p]", 7,
     "layer 'm': depthwise_conv takes 1 input(s), got 2"),
    ("op: conv, inputs: [a, p]", "op: conv, inputs: []", 7,
     "layer 'm': conv needs at least one input"),
])
def test_mistakes_in_new_keys(old: str, new: str, line: int, needle: str) -> None:
    assert old in CONSTRUCTS
    with pytest.raises(InputError) as err:
        read(CONSTRUCTS.replace(old, new, 1))
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
    net = om.gpt_decode_constructs()
    text = dump_workload(net)
    layer_lines = [ln for ln in text.splitlines() if ln.startswith("  - ")]
    assert len(layer_lines) == len(net.layers) == 16
    qk = next(ln for ln in layer_lines if "name: qk," in ln)
    assert "heads: 4" in qk and "transpose_rhs: false" in qk
    back = read(text)
    assert back.layers["values"].axis == "h" and back.layers["values"].copy
    assert back.layers["qk"].op == Op.MATMUL_ACT
    assert back.inputs["k_cache"] == Shape(44, 8, 1)
    decode = zoo.get("gpt2_small_decode")
    assert len([ln for ln in dump_workload(decode).splitlines()
                if ln.startswith("  - ")]) == len(decode.layers)
