"""ONNX import: layer counts, shapes, MACs and weight bytes of hand-built models against
hand-computed truth; exact pads (asymmetric, auto_pad, ceil_mode); mipsched's markers
(transpose, copying and implicit concats, GELU layers); zoo networks and networks using
every IR construct round-trip exactly through mipsched's own ONNX export, which passes
onnx.checker and shape inference; models that do not map give one clear error."""

from __future__ import annotations

import json
import re
from pathlib import Path

import onnx
import pytest
from onnx import helper
from typer.testing import CliRunner

from mipsched.cli import app
from mipsched.errors import InputError
from mipsched.workload import zoo
from mipsched.workload.graph import NetBuilder, Workload
from mipsched.workload.layer import Op, Shape
from mipsched.workload.onnx_export import IR_VERSION, MARKER_KEY, export_onnx, save_onnx
from mipsched.workload.onnx_import import load_onnx
from mipsched.workload.onnx_read import read_model
from mipsched.workload.yaml_format import dump_workload, load_workload

import onnx_models as om

runner = CliRunner()


def imported(tmp_path: Path, model: onnx.ModelProto, name: str = "net", **kw) -> Workload:
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    return load_onnx(path, **kw)


def test_conv_chain(tmp_path: Path) -> None:
    wl = imported(tmp_path, om.conv_chain())
    # BatchNormalization, Relu, Clip and Flatten make no layer.
    assert [(n, lay.op) for n, lay in wl.layers.items()] == [
        ("conv1", Op.CONV), ("dw", Op.DEPTHWISE_CONV), ("conv2", Op.CONV),
        ("pool", Op.MAX_POOL), ("gap", Op.GLOBAL_POOL), ("fc", Op.FC),
        ("softmax", Op.SOFTMAX)]
    assert wl.inputs == {"x": Shape(3, 32, 32)}
    assert wl.layers["dw"].inputs == ("conv1",)  # BN + Relu fused into conv1
    # pads (top, left, bottom, right) = (0, 0, 1, 1): exactly, as leading and trailing pads
    assert wl.layers["conv2"].pads(0) == wl.layers["conv2"].pads(1) == (0, 1)
    assert [tuple(lay.out) for lay in wl.layers.values()] == [
        (16, 32, 32), (16, 32, 32), (32, 16, 16), (32, 8, 8), (32, 1, 1), (10, 1, 1),
        (10, 1, 1)]
    assert wl.outputs == ("softmax",)
    conv1 = 16 * 32 * 32 * (3 * 3 * 3)
    dw = 16 * 32 * 32 * (3 * 3)
    conv2 = 32 * 16 * 16 * (16 * 3 * 3)
    fc = 10 * 32
    assert wl.total_macs == conv1 + dw + conv2 + fc == 1_769_792
    assert wl.total_weight_bytes == 16 * 3 * 3 * 3 + 16 * 3 * 3 + 32 * 16 * 3 * 3 + 10 * 32
    double = load_onnx(tmp_path / "net.onnx", batch=2, elem_bytes=2)
    assert double.batch == 2
    assert double.total_macs == 2 * wl.total_macs
    assert double.total_weight_bytes == 2 * wl.total_weight_bytes


def test_conv_variants_and_free_ops(tmp_path: Path) -> None:
    """Grouped and dilated conv, auto_pad, strides, Mul / Sub / Concat of activations, an
    average pool with ceil_mode, MatMul with a weight on a vector (fc); Identity, Dropout,
    Constant, Squeeze and Unsqueeze make no layer."""
    wl = imported(tmp_path, om.conv_variants())
    assert [(n, lay.op) for n, lay in wl.layers.items()] == [
        ("grouped", Op.CONV), ("down_a", Op.CONV), ("down_b", Op.CONV), ("gate", Op.MUL),
        ("diff", Op.ADD), ("cat", Op.CONCAT), ("avg", Op.AVG_POOL), ("gap", Op.GLOBAL_POOL),
        ("fc", Op.FC)]
    grouped = wl.layers["grouped"]
    assert (grouped.groups, grouped.dilation, grouped.padding) == (4, (2, 2), (2, 2))
    assert wl.layers["down_a"].inputs == wl.layers["down_b"].inputs == ("grouped",)
    # SAME_UPPER on 20 rows, 3x3 / 2: 1 row of padding in all, behind; ceil_mode (10 rows,
    # pads 1 + 1, 3x3 / 2: 6 windows, the last reading one row past the padding): one
    # more trailing row.
    assert wl.layers["down_a"].pads(0) == wl.layers["down_a"].pads(1) == (0, 1)
    assert wl.layers["avg"].pads(0) == wl.layers["avg"].pads(1) == (1, 2)
    assert wl.layers["cat"].inputs == ("gate", "diff")
    assert [tuple(lay.out) for lay in wl.layers.values()] == [
        (16, 20, 20), (8, 10, 10), (8, 10, 10), (8, 10, 10), (8, 10, 10), (16, 10, 10),
        (16, 6, 6), (16, 1, 1), (5, 1, 1)]
    assert wl.outputs == ("fc",)
    grouped_macs = 16 * 20 * 20 * (8 // 4 * 3 * 3)
    down_a = 8 * 10 * 10 * (16 * 3 * 3)
    down_b = 8 * 10 * 10 * 16
    fc = 5 * 16
    assert wl.total_macs == grouped_macs + down_a + down_b + fc == 243_280
    assert wl.total_weight_bytes == 16 * 2 * 9 + 8 * 16 * 9 + 8 * 16 + 16 * 5 == 1648


@pytest.mark.parametrize("storage", ["external", "stripped"])
def test_weights_are_never_read(tmp_path: Path, storage: str) -> None:
    """Initialisers pointing at a missing external file, or holding dims only, import to
    the same workload as real ones."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    real = imported(tmp_path / "a", om.conv_chain("data"))
    stub = imported(tmp_path / "b", om.conv_chain(storage))
    assert not (tmp_path / "b" / "missing_weights.bin").exists()
    assert stub.digest() == real.digest()


def test_large_values_stay_in_the_child(tmp_path: Path) -> None:
    """read_model hands back dims for every initialiser but values only for small ones
    (shapes, axes): weights never travel back from the child process."""
    onnx.save(om.conv_chain("data"), tmp_path / "net.onnx")
    inits = {t.name: t for t in read_model(tmp_path / "net.onnx", False).graph.initializer}
    assert list(inits["w2"].dims) == [32, 16, 3, 3]
    assert not inits["w2"].raw_data and not inits["w2"].float_data  # 4608 elements
    assert len(inits["wfc"].raw_data) == 4 * 10 * 32  # 320 elements: kept


def test_residual_block(tmp_path: Path) -> None:
    wl = imported(tmp_path, om.residual_block())
    assert list(wl.layers) == ["conv_a", "conv_b", "conv_c", "shortcut", "add"]
    assert wl.layers["add"].op == Op.ADD
    assert wl.layers["add"].inputs == ("conv_c", "shortcut")
    assert wl.layers["shortcut"].inputs == ("x",)
    assert wl.layers["conv_b"].padding == (1, 1)
    assert wl.layers["add"].out == Shape(256, 56, 56)
    conv_a = 64 * 56 * 56 * 64
    conv_b = 64 * 56 * 56 * (64 * 3 * 3)
    conv_c = 256 * 56 * 56 * 64
    shortcut = 256 * 56 * 56 * 64
    assert wl.total_macs == conv_a + conv_b + conv_c + shortcut == 231_211_008
    assert wl.total_weight_bytes == 64 * 64 + 64 * 64 * 9 + 256 * 64 + 256 * 64
    assert wl.total_macs == zoo.get("resblock").total_macs  # the zoo's block, from ONNX


def test_attention_head(tmp_path: Path) -> None:
    """16 tokens, d = 64, 4 heads of 16: tokens and head width are equal on purpose, so
    only the tracked layouts can tell Q.K^T from P.V."""
    wl = imported(tmp_path, om.attention_head(tokens=16, d=64, heads=4))
    assert list(wl.layers) == ["ln", "q", "k", "v", "qk", "softmax", "pv", "proj",
                               "residual"]  # the 1/sqrt(d) Div is fused
    assert wl.inputs == {"x": Shape(64, 16, 1)}
    qk, pv = wl.layers["qk"], wl.layers["pv"]
    assert (qk.op, qk.inputs, qk.groups, qk.transpose_rhs) == (Op.MATMUL_ACT, ("q", "k"), 4,
                                                               True)
    assert (pv.op, pv.inputs, pv.groups, pv.transpose_rhs) == (Op.MATMUL_ACT,
                                                               ("softmax", "v"), 4, False)
    assert qk.out == Shape(4 * 16, 16, 1)  # heads x keys, tokens
    assert pv.out == Shape(64, 16, 1)
    assert wl.layers["proj"].inputs == ("pv",)  # transpose + reshape back are free
    assert wl.layers["residual"].inputs == ("x", "proj")
    projections = 4 * (16 * 64 * 64)  # q, k, v, proj: tokens x d x d
    scores = 4 * 16 * 16 * 16  # heads x queries x keys, each a 16-long dot product
    context = 16 * 64 * 16  # tokens x d outputs, each summing 16 keys
    assert wl.total_macs == projections + scores + context == 294_912
    assert wl.total_weight_bytes == 4 * 64 * 64  # layer-norm scale and bias not counted


def test_custom_domain_op(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        imported(tmp_path, om.custom_op())
    message = str(err.value)
    assert "com.example::Swish" in message and "my_swish" in message
    assert "docs/onnx.md" in message and "--unknown-as-eltwise" in message

    fused = load_onnx(tmp_path / "net.onnx", unknown_as_eltwise=True)
    assert list(fused.layers) == ["conv_in", "conv_out"]
    assert fused.layers["conv_out"].inputs == ("conv_in",)
    assert fused.total_macs == 2 * (8 * 16 * 16 * (8 * 3 * 3))

    two = imported(tmp_path, om.custom_op(two_inputs=True), "two", unknown_as_eltwise=True)
    assert two.layers["my_swish"].op == Op.ADD
    assert two.layers["my_swish"].inputs == ("conv_in", "x")


def test_unknown_ops_in_a_chain(tmp_path: Path) -> None:
    """Two custom ops one after the other and a standard op mipsched does not map (Exp):
    all listed without the option; with it, all fused, and the shapes flow through."""
    with pytest.raises(InputError) as err:
        imported(tmp_path, om.custom_chain())
    assert ("com.example::Swish (node 'sw1'), com.example::Swish (node 'sw2'), Exp (node "
            "'exp')") in str(err.value)
    wl = load_onnx(tmp_path / "net.onnx", unknown_as_eltwise=True)
    assert [(n, lay.inputs) for n, lay in wl.layers.items()] == [
        ("c1", ("x",)), ("c2", ("c1",)), ("c3", ("c2",))]
    assert wl.total_macs == 3 * (8 * 16 * 16 * (8 * 3 * 3))


def test_custom_op_error_through_the_cli(tmp_path: Path) -> None:
    onnx.save(om.custom_op(), tmp_path / "m.onnx")
    out = tmp_path / "m.yaml"
    result = runner.invoke(app, ["import", str(tmp_path / "m.onnx"), "-o", str(out)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "com.example::Swish (node 'my_swish')" in lines[0]
    assert not out.exists()
    ok = runner.invoke(app, ["import", str(tmp_path / "m.onnx"), "-o", str(out),
                             "--unknown-as-eltwise", "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["layers"] == 2


def check_valid(path: Path) -> None:
    """onnx.checker (the external-data stubs pointing at an empty weights.bin) and strict
    shape inference accept the model at `path`."""
    (path.parent / "weights.bin").write_bytes(b"")
    onnx.checker.check_model(str(path), full_check=True)
    onnx.shape_inference.infer_shapes(onnx.load(path, load_external_data=False),
                                      check_type=True, strict_mode=True)


def assert_same(back: Workload, net: Workload) -> None:
    assert back.layers == net.layers
    assert (back.inputs, back.outputs) == (net.inputs, net.outputs)
    assert back.digest() == net.digest()


@pytest.mark.parametrize("name", list(zoo.NETWORKS))
def test_zoo_round_trip(tmp_path: Path, name: str) -> None:
    """zoo -> ONNX (`mipsched import NAME -o NAME.onnx`, weights as stubs; a valid model)
    -> import: the same network exactly (layers, inputs, outputs, digest)."""
    path = tmp_path / f"{name}.onnx"
    written = runner.invoke(app, ["import", name, "-o", str(path)])
    assert written.exit_code == 0, written.output
    check_valid(path)
    assert_same(load_onnx(path), zoo.get(name))


@pytest.mark.parametrize("name", list(om.CONSTRUCT_NETS))
def test_every_construct_round_trips(tmp_path: Path, name: str) -> None:
    """Asymmetric pads, implicit concats (conv, max pool, global pool, fc, matmul),
    copying concats over channels and height, transposes of conv maps and C <-> tokens
    transposes of token sequences, matmul_act with K in weight layout, a KV cache: a
    valid ONNX model that imports to the same network, batch and element size applied."""
    net = om.CONSTRUCT_NETS[name]()
    path = tmp_path / f"{name}.onnx"
    save_onnx(net, path)
    check_valid(path)
    assert_same(load_onnx(path), net)
    assert load_onnx(path, batch=3, elem_bytes=2).digest() == Workload(
        net.name, 3, net.inputs, net.layers, net.outputs, 2).digest()


def _markers(model: onnx.ModelProto) -> dict[str, tuple[str, str, dict]]:
    """Marked nodes: name -> (op type, marker, attributes)."""
    return {n.name: (n.op_type, {p.key: p.value for p in n.metadata_props}[MARKER_KEY],
                     {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute})
            for n in model.graph.node if n.metadata_props}


def test_exported_markers_and_pads() -> None:
    """What the exporter writes for each construct (docs/onnx.md): pads as (top, left,
    bottom, right); a Transpose whose ONNX perm is the IR perm over (N, C, H, W) or
    (N, tokens, features); Concats marked as copies or as implicit concats; IR version
    10, the first with node metadata."""
    conv = export_onnx(om.conv_constructs())
    assert conv.ir_version == IR_VERSION == 10
    assert _markers(conv) == {
        "mix/concat": ("Concat", "implicit-concat", {"axis": 1}),
        "res/concat": ("Concat", "implicit-concat", {"axis": 1}),  # cut by a Split
        "down/concat": ("Concat", "implicit-concat", {"axis": 1}),
        "swap_hw": ("Transpose", "transpose", {"perm": [0, 1, 3, 2]}),
        "turn": ("Transpose", "transpose", {"perm": [0, 3, 1, 2]}),  # IR (2, 0, 1)
        "both": ("Concat", "concat-copy", {"axis": 1}),
        "rows": ("Concat", "concat-copy", {"axis": 2}),
        "gap/concat": ("Concat", "implicit-concat", {"axis": 1}),
        "fc/concat": ("Concat", "implicit-concat", {"axis": 1})}
    pads = {n.name: onnx.helper.get_attribute_value(a) for n in conv.graph.node
            for a in n.attribute if a.name == "pads"}
    assert pads["stem"] == [2, 2, 3, 3]
    assert pads["b3"] == [1, 0, 1, 1]
    assert pads["avg"] == [1, 1, 2, 2]
    split = next(n for n in conv.graph.node if n.op_type == "Split")
    assert (list(split.input), list(split.output)) == (
        ["res/concat"], ["res/operand0", "res/operand1", "res/operand2"])
    assert next(n for n in conv.graph.node if n.name == "res").op_type == "Sum"
    gpt = _markers(export_onnx(om.gpt_constructs()))
    assert gpt["kt0"] == ("Transpose", "transpose", {"perm": [0, 2, 1]})
    assert gpt["kt"] == ("Concat", "concat-copy", {"axis": 2})
    assert gpt["proj/concat"] == ("Concat", "implicit-concat", {"axis": 2})
    assert len(gpt) == 4 + 2  # the layout changes around the 1x1 convs are not marked
    gelu = _markers(export_onnx(zoo.get("gpt2_small_decode")))
    assert [op for op, marker, _ in gelu.values() if marker == "gelu"] == ["Gelu"]


def test_split_of_an_implicit_concat(tmp_path: Path) -> None:
    """An Add of the two halves of a marked implicit concat of x (8 channels) and a conv
    of x (8): one add layer reading x and the conv as two operands of 8 channels."""
    wl = imported(tmp_path, _split_read_by(["p0", "p1"]))
    assert list(wl.layers) == ["conv", "n1"]
    add = wl.layers["n1"]
    assert (add.op, add.inputs, add.out) == (Op.ADD, ("x", "conv"), Shape(8, 4, 4))
    assert wl.vector_ops("n1") == 2 * 8 * 4 * 4


@pytest.mark.parametrize(("perm", "needle"), [
    ((0, 2, 1), "is exported as token sequences, which need W = 1"),
    ((2, 0, 1), "layer 't': perm [2, 0, 1] moves W, which a network of token sequences "
                "does not have"),
])
def test_sequence_transposes_keep_w(tmp_path: Path, perm: tuple[int, int, int],
                                    needle: str) -> None:
    """Networks with matmul layers are written as (N, tokens, features): a transpose that
    gives W a size, or moves the (size 1) W axis, is refused, through the CLI too."""
    b = NetBuilder("seq")
    x = b.matmul("m", b.input("x", 4, 1 if perm == (2, 0, 1) else 3), 4)
    b.transpose("t", x, perm)
    with pytest.raises(InputError, match=re.escape(needle)):
        export_onnx(b.build())
    (tmp_path / "seq.yaml").write_text(dump_workload(b.build()))
    result = runner.invoke(app, ["import", str(tmp_path / "seq.yaml"), "-o",
                                 str(tmp_path / "seq.onnx")])
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1 and needle in result.stderr
    assert not (tmp_path / "seq.onnx").exists()


def test_exact_pads(tmp_path: Path) -> None:
    """ONNX pads become leading (top, left) and trailing (bottom, right) pads exactly;
    auto_pad SAME_UPPER puts the odd row behind, SAME_LOWER in front; ceil_mode adds the
    rows its last window reads past the end, only where it adds a window."""
    wl = imported(tmp_path, om.padding_variants())
    pads = {n: (lay.pads(0), lay.pads(1)) for n, lay in wl.layers.items()}
    assert pads == {"pads": ((0, 2), (1, 1)),  # pads (0, 1, 2, 1)
                    "same_lower": ((1, 1), (1, 0)),  # 11 -> 6: 2 in all; 10 -> 5: 1
                    "same_upper": ((1, 2), (1, 2)),  # 4x4 kernel: 3 in all
                    "ceil": ((0, 0), (0, 1)),  # 11 -> 5 either way; 10 -> 5, not 4
                    "valid": ((0, 0), (0, 0))}
    assert [tuple(lay.out) for lay in wl.layers.values()] == [
        (8, 11, 10), (8, 6, 5), (8, 11, 10), (8, 5, 5), (8, 3, 2)]


def test_markers_written_by_another_tool(tmp_path: Path) -> None:
    """A marked Transpose is a layer (perm over the IR axes from the ONNX layout); an
    implicit concat read only by convs and pools is folded into them, one that an Add
    also reads stays a concat layer; a copying concat is one; an unmarked Transpose stays
    a free layout change."""
    wl = imported(tmp_path, om.marked_nodes())
    t = wl.layers["to_hwc"]
    assert (t.op, t.perm, t.out) == (Op.TRANSPOSE, (1, 2, 0), Shape(6, 5, 4))
    assert wl.vector_ops("to_hwc") == 4 * 6 * 5  # it moves every element
    assert wl.layers["conv_join"].inputs == wl.layers["pool_join"].inputs == ("x", "conv_x")
    assert "join" not in wl.layers
    kept = wl.layers["kept"]
    assert (kept.op, kept.copy, wl.vector_ops("kept")) == (Op.CONCAT, False, 0)
    assert wl.layers["conv_kept"].inputs == ("kept",)
    copy = wl.layers["copy"]
    assert (copy.op, copy.copy, wl.vector_ops("copy")) == (Op.CONCAT, True, 8 * 6 * 5)
    assert wl.outputs == ("conv_t", "add", "copy")  # the free transpose: no layer
    assert wl.layers["conv_join"].out == Shape(4, 6, 5)
    assert wl.weight_bytes("conv_join") == 4 * 8 * 3 * 3  # reads 4 + 4 channels


def test_import_then_solve_the_yaml(tmp_path: Path) -> None:
    """`import` writes a YAML workload equal to the ONNX import; `solve model.onnx --batch
    2` (the file says batch 1: it is ignored) writes a schedule.json that `eval` replays to
    the same numbers without the model."""
    onnx.save(om.residual_block(), tmp_path / "block.onnx")
    yaml_path = tmp_path / "block.yaml"
    result = runner.invoke(app, ["import", str(tmp_path / "block.onnx"), "-o",
                                 str(yaml_path)])
    assert result.exit_code == 0, result.output
    assert load_workload(yaml_path).digest() == load_onnx(tmp_path / "block.onnx").digest()

    solved = runner.invoke(app, ["solve", str(tmp_path / "block.onnx"), "--method",
                                 "baseline", "--batch", "2", "--out", str(tmp_path / "out"),
                                 "--json"])
    assert solved.exit_code == 0, solved.output
    assert json.loads(solved.stdout)["total_macs"] == 2 * 231_211_008
    (tmp_path / "block.onnx").unlink()
    replay = runner.invoke(app, ["eval", str(tmp_path / "out" / "schedule.json"), "--json"])
    assert replay.exit_code == 0, replay.output
    for key in ("latency_cycles", "energy_pj", "total_macs", "weight_bytes"):
        assert json.loads(replay.stdout)[key] == json.loads(solved.stdout)[key]


def _single(op: str, inputs: list, out_dims: list | None, inits: list, **attrs):
    node = helper.make_node(op, [i.name for i in inputs] + [t.name for t in inits], ["y"],
                            name="n1", **attrs)
    return om.model([node], inputs, [om.tensor("y", out_dims)], inits)


def _marked(op: str, marker: str, **attrs) -> onnx.ModelProto:
    """One node on x[N,8,4,4] carrying `marker`."""
    node = om.mark(helper.make_node(op, ["x"], ["y"], name="n1", **attrs), marker)
    return om.model([node], [om.tensor("x", ["N", 8, 4, 4])], [om.tensor("y", None)], [])


def _split_read_by(pieces: list[str], op: str = "Add") -> onnx.ModelProto:
    """x[N,8,4,4] and a conv of it joined by a Concat marked implicit, split in two
    (p0, p1), `pieces` read by `op`."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], name="conv"),
             om.mark(helper.make_node("Concat", ["x", "a"], ["xa"], name="join", axis=1),
                     "implicit-concat"),
             helper.make_node("Split", ["xa"], ["p0", "p1"], name="split", axis=1,
                              num_outputs=2),
             helper.make_node(op, pieces, ["y"], name="n1")]
    return om.model(nodes, [om.tensor("x", ["N", 8, 4, 4])], [om.tensor("y", None)],
                    [om.weight("w", [8, 8, 1, 1])])


@pytest.mark.parametrize(("build", "needle"), [
    (lambda: _single("Relu", [om.tensor("x", ["N", "seq", 8])], None, []),
     "input 'x': dimension 1 is symbolic ('seq')"),
    (lambda: _single("Split", [om.tensor("x", ["N", 8, 4, 4])], None, [], num_outputs=1),
     "node 'n1' (Split): a Split of an activation maps only when it cuts a Concat marked "
     "implicit-concat"),
    (lambda: _single("Conv", [om.tensor("x", ["N", 8, 16])], None,
                     [om.weight("w", [8, 8, 3])]), "not a 2-D feature map"),
    (lambda: om.model([helper.make_node("Relu", ["x"], ["a"]),
                       helper.make_node("Add", ["a", "b"], ["y"], name="n1")],
                      [om.tensor("x", ["N", 8, 4, 4]), om.tensor("b", ["N", 8, 1, 1])],
                      [om.tensor("y", None)], []),
     "broadcasting between activations is not supported"),
    (lambda: _single("Reshape", [om.tensor("x", ["N", 6, 4])], None,
                     [om.ints("s", [-1, 4, 6])]), "mixes axes"),
    (lambda: _single("Relu", [om.tensor("x", ["N", 0, 4, 4])], None, []), "zero-sized"),
    (lambda: om.model([helper.make_node("Relu", ["a"], ["y"], name="after"),
                       helper.make_node("Relu", ["b"], ["a"], name="n1"),
                       helper.make_node("Relu", ["a"], ["b"], name="n2")],
                      [om.tensor("x", ["N", 8])], [om.tensor("y", None)], []),
     "nodes form a cycle: 'n1' (Relu) -> 'n2' (Relu) -> 'n1' (Relu)"),
    (lambda: om.model([helper.make_node("Relu", ["x"], ["y"], name="n1"),
                       helper.make_node("Relu", ["x"], ["y"], name="n2")],
                      [om.tensor("x", ["N", 8])], [om.tensor("y", None)], []),
     "node 'n2' (Relu): output 'y' is also produced by node 'n1' (Relu)"),
    (lambda: _single("Conv", [om.tensor("x", ["N", 8, 16, 16])], None,
                     [om.weight("w", [8, 8, 3, 3])], kernel_shape=[5, 5]),
     "kernel_shape [5, 5] does not match weight [8, 8, 3, 3]"),
    (lambda: om.model([helper.make_node("Mul", ["x", "s"], ["a"], name="n1"),
                       helper.make_node("Conv", ["a", "w"], ["y"], name="n2")],
                      [om.tensor("x", ["N", 1, 4, 4])], [om.tensor("y", None)],
                      [om.weight("s", [1, 8, 1, 1]), om.weight("w", [8, 8, 1, 1])]),
     "node 'n1' (Mul): output [1, 8, 4, 4] is not the shape [1, 1, 4, 4] of its input"),
    (lambda: _single("Relu", [om.tensor("x", ["N", 8, 4, 4])], None, []),
     "computed by no layer"),  # an activation of the input alone is fused away
    (lambda: om.model([helper.make_node("Relu", ["nowhere"], ["y"], name="n1")],
                      [om.tensor("x", ["N", 8])], [om.tensor("y", None)], []),
     "input 'nowhere' is not a graph input, an initializer or any node's output"),
    (lambda: _split_read_by(["p1", "p0"]),
     "node 'n1' (Add): it reads pieces of a Split (p1, p0): it must read all pieces of one "
     "Split, in order"),
    (lambda: _split_read_by(["p0"], "Relu"),
     "node 'n1' (Relu): tensor 'p0' is a piece of a Split, which mipsched maps only as an "
     "operand of an element-wise op"),
    (lambda: _marked("Relu", "transpose"),
     "node 'n1' (Relu): metadata mipsched.layer = 'transpose': a Relu node takes none"),
    (lambda: _marked("Transpose", "concat-copy", perm=[0, 1, 3, 2]),
     "a Transpose node takes 'transpose'; see docs/onnx.md"),
    (lambda: _marked("Concat", "copy", axis=1),
     "'copy': a Concat node takes 'concat-copy' or 'implicit-concat'"),
    (lambda: _marked("Transpose", "transpose", perm=[1, 0, 2, 3]),
     "perm [1, 0, 2, 3] of [1, 8, 4, 4]: a transpose layer keeps the batch"),
])
def test_models_that_do_not_map(tmp_path: Path, build, needle: str) -> None:
    with pytest.raises(InputError) as err:
        imported(tmp_path, build())
    assert needle in str(err.value)


def test_not_an_onnx_file(tmp_path: Path) -> None:
    (tmp_path / "junk.onnx").write_bytes(b"\x08\x07garbage\xff\xff\xff")
    result = runner.invoke(app, ["solve", str(tmp_path / "junk.onnx"), "--out",
                                 str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "junk.onnx: not an ONNX model" in result.stderr
    assert not (tmp_path / "o").exists()
