"""The zoo's SoMa networks against the SoMa reference implementation's own networks.

`shared/reference-nets/*.json` are dumped from the reference's in-memory networks. Each
zoo network of the same name must equal its file layer for layer: names and order, op
kinds, output shapes, inputs (network inputs first, then producers by layer id, then the
weight operand), kernel, stride and padding, MACs, vector ops and weights per layer, and
the totals.
"""

from __future__ import annotations

import csv
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from mipsched.formulations.bounds import network_latency_bound
from mipsched.heuristics.baseline import unfused_baseline
from mipsched.hw import load_hardware
from mipsched.report.results import evaluation_json, simulation_json
from mipsched.schedule.lowering import Lowerer
from mipsched.sim import simulate
from mipsched.workload import ops
from mipsched.workload.graph import Workload
from mipsched.workload.layer import Layer, Op, Shape
from mipsched.workload.zoo import get

REFERENCE_NETS = Path(__file__).resolve().parents[2] / "shared" / "reference-nets"
NAMES = ("googlenet", "gpt2_small_decode", "gpt2_small_prefill", "gpt2_small_prefill_s1024",
         "gpt2_xl_decode", "gpt2_xl_prefill", "inception_resnet_v1", "randwire_small",
         "resnet101", "resnet50", "vgg19")
#: the op of each one-input PTP, as its name says (randwire's element_wise8/15 average a
#: stage's single output node: an element-wise op of one vector op per element)
UNARY = {"norm1": Op.LAYERNORM, "norm2": Op.LAYERNORM, "attention_QK_elt": Op.SOFTMAX,
         "GeLU": Op.GELU, "element_wise8": Op.GELU, "element_wise15": Op.GELU}

needs_files = pytest.mark.skipif(not REFERENCE_NETS.is_dir(),
                                 reason="shared/reference-nets not present")
Json = dict[str, Any]


@cache
def reference(name: str) -> Json:
    return json.loads((REFERENCE_NETS / f"{name}.json").read_text())


@cache
def zoo_net(name: str, batch: int = 1) -> Workload:
    return get(name, batch)


def reference_view(wl: Workload) -> dict[str, tuple[str, ...]]:
    """Each layer of `wl`, in order -> its inputs."""
    return {n: lay.inputs for n, lay in wl.layers.items()}


def expected_inputs(ref: Json, layer: Json) -> tuple[str, ...]:
    """Network inputs as given, then producers by increasing id, then the weight operand."""
    ext = {e["id"]: e["name"] for e in ref["ext_inputs"]}
    names = {lay["id"]: lay["name"] for lay in ref["layers"]}
    return (*(ext[i] for i in layer["ext_prevs"]),
            *(names[i] for i in sorted(layer["ifm_prevs"])),
            *(names[i] for i in layer["wgt_prevs"]))


def check_op(net: str, lay: Layer, ref: Json) -> None:
    """The reference layer kind `ref` maps to the IR op of `lay`."""
    kind, n_in = ref["kind"], len(ref["ext_prevs"]) + len(ref["ifm_prevs"])
    if kind == "Conv":
        assert lay.op == (Op.MATMUL if net.startswith("gpt2") else Op.CONV)
    elif kind == "GroupConv":
        assert ref["wgt_prevs"], "a GroupConv without activation weights"
        assert (lay.op, lay.groups, lay.transpose_rhs) == (Op.MATMUL_ACT,
                                                           ref["workload"]["G"], False)
    elif kind == "FC":
        assert lay.op == Op.FC
    elif kind == "Pooling":
        assert lay.op in (Op.MAX_POOL, Op.AVG_POOL)
    elif kind == "Eltwise":
        assert lay.op == Op.ADD
        assert ops.operand_count(lay, zoo_net(net).in_shapes(lay.name)) == \
            ref["workload"]["N"]
    elif kind == "PTP" and n_in == 1:
        assert lay.op == UNARY[lay.name]
    elif kind == "PTP":
        assert (lay.op, lay.copy, lay.axis) == (Op.CONCAT, True, "c")
    else:
        assert (kind, lay.op) == ("Transpose", Op.TRANSPOSE)
        assert lay.perm == tuple(ref["workload"]["order"])


@pytest.fixture(params=NAMES)
def net(request: pytest.FixtureRequest) -> str:
    if not REFERENCE_NETS.is_dir():
        pytest.skip("shared/reference-nets not present")
    return request.param


@needs_files
def test_every_reference_file_is_a_zoo_network() -> None:
    assert sorted(p.stem for p in REFERENCE_NETS.glob("*.json")) == sorted(NAMES)


def test_layers_in_order_and_network_inputs_outputs(net: str) -> None:
    ref, wl = reference(net), zoo_net(net)
    view = reference_view(wl)
    assert list(view) == [lay["name"] for lay in ref["layers"]]
    assert len(view) == ref["totals"]["layers"]
    assert list(wl.inputs.items()) == [(e["name"], Shape(e["C"], e["H"], e["W"]))
                                       for e in ref["ext_inputs"]]
    assert set(wl.outputs) == {lay["name"] for lay in ref["layers"] if not lay["nexts"]}


def test_inputs_in_reference_order(net: str) -> None:
    ref, view = reference(net), reference_view(zoo_net(net))
    for lay in ref["layers"]:
        assert view[lay["name"]] == expected_inputs(ref, lay), lay["name"]


def test_ops_shapes_and_windows(net: str) -> None:
    wl = zoo_net(net)
    for ref in reference(net)["layers"]:
        lay, w = wl.layers[ref["name"]], ref["workload"]
        check_op(net, lay, ref)
        assert lay.out == Shape(*ref["ofmap_shape"]), lay.name
        assert lay.kernel == (w["R"], w["S"]), lay.name
        assert lay.stride == (w["sH"], w["sW"]), lay.name
        lead, total = tuple(ref["pad_lead_hw"]), ref["pad_total_hw"]
        assert lay.padding == lead, lay.name
        assert lay.padding_end == (total[0] - lead[0], total[1] - lead[1]), lay.name


@pytest.mark.parametrize("batch", [1, 4])
def test_macs_vector_ops_and_weights_per_layer(net: str, batch: int) -> None:
    wl = zoo_net(net, batch)
    for ref in reference(net)["layers"]:
        name, ops = ref["name"], batch * ref["num_op"]
        on_pe_array = ref["op_unit"] == "mac"
        assert wl.macs(name) == (ops if on_pe_array else 0), name
        assert wl.vector_ops(name) == (0 if on_pe_array else ops), name
        weights = 0 if ref["wgt_prevs"] else ref["weight_size"]
        assert wl.weight_bytes(name) == weights * wl.elem_bytes, name


def test_totals(net: str) -> None:
    totals, wl = reference(net)["totals"], zoo_net(net)
    assert wl.total_macs == totals["macs"]
    assert sum(wl.vector_ops(n) for n in wl.layers) == totals["vector_ops"]
    assert wl.total_weight_bytes == totals["weight_elems_from_dram"]
    assert zoo_net(net, 4).total_macs == 4 * totals["macs"]


RUNS = REFERENCE_NETS / "reference-runs.csv"


@pytest.mark.skipif(not RUNS.is_file(), reason="shared/reference-nets not present")
def test_bounds_hold_for_the_reference_runs() -> None:
    """On every reference run, mipsched's network bound is at most the reference's latency
    and at most the ideal of the reference's own LFA (max(sum of tile cycles, sum of DRAM
    cycles)): its compute bound at most the tile cycles, its DRAM bound at most the DRAM
    cycles. (Before needed positions were propagated back from the outputs, the compute
    bound of resnet50 / edge / b16 was 8,872,704 > the reference's 8,863,696.)"""
    with RUNS.open() as f:
        runs = list(csv.DictReader(f))
    assert runs
    for run in runs:
        wl = get(run["network"], int(run["batch"]))
        bound = network_latency_bound(wl, load_hardware(run["hw"]))
        assert bound.cycles <= int(run["ideal_cycles"]), run
        assert bound.cycles <= int(run["stage2_latency_cycles"]), run


@needs_files
@pytest.mark.parametrize("hw_name", ["edge", "cloud"])
def test_utilization_is_somas_real_util(hw_name: str) -> None:
    """GPT-2 decode, batch 1: `utilization` x latency is the reference's "Total Dream
    Time" (Σ of num_op / MACs per cycle over PE-array layers and num_op / vector rate over
    vector layers, from the reference's own dump) within 1 %, on the evaluator, the
    simulator and the JSON the CLI prints; MAC utilisation stays available and is ~3.4x
    lower there (the vector layers' time counts in SoMa's, not in the MAC count)."""
    hw = load_hardware(hw_name)
    ref = reference("gpt2_small_decode")
    dream = sum(lay["num_op"] / (hw.core_array.macs_per_cycle if lay["op_unit"] == "mac"
                                 else hw.vector_unit.ops_per_cycle) for lay in ref["layers"])
    cand = unfused_baseline(Lowerer(zoo_net("gpt2_small_decode"), hw)).best
    ev = cand.evaluation
    assert ev.utilization * ev.latency_cycles == pytest.approx(dream, rel=0.01)
    assert ev.mac_utilization * ev.latency_cycles == pytest.approx(
        ref["totals"]["macs"] / hw.core_array.macs_per_cycle, rel=1e-9)
    assert 3.0 < ev.utilization / ev.mac_utilization < 4.0
    sim = simulate(cand.program, cand.dlsa)
    out = simulation_json(sim, zoo_net("gpt2_small_decode"), cand.program)
    assert out["utilization"] * sim.latency_cycles == pytest.approx(dream, rel=0.01)
    assert out["avg_buffer_bytes"] == pytest.approx(ev.avg_buffer_bytes)
    assert evaluation_json(ev, None)["mac_utilization"] == ev.mac_utilization
