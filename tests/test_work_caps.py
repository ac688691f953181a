"""Caps on the work a network may describe (docs/workload-yaml.md, "Limits"): a workload
with absurd shapes or batch is refused when it is built (YAML, ONNX and zoo alike), with
one line naming the layer, the figure and the cap, before anything is solved or written;
an LFA with more tiles than a tile program may have is invalid (ScheduleError), which the
searches skip. Every zoo network at batch 64 stays accepted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from typer.testing import CliRunner

from mipsched.cli import app
from mipsched.core import InfeasibleError, Objective, evaluate_lfa
from mipsched.errors import InputError
from mipsched.heuristics.baseline import unfused_baseline
from mipsched.heuristics.partition import Partitioner
from mipsched.hw import load_hardware
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa, ScheduleError
from mipsched.schedule.tiling import MAX_TILES, choose_grid
from mipsched.workload import zoo
from mipsched.workload.graph import (
    MAX_POSITIONS,
    MAX_SAMPLE_ELEMENTS,
    MAX_WINDOW_READS,
    MAX_WINDOW_TAPS,
    NetBuilder,
    WorkTooLargeError,
)
from mipsched.workload.layer import Op
from mipsched.workload.onnx_import import load_onnx
from mipsched.workload.yaml_format import read_workload
from mipsched.yamlsrc import parse_yaml

import onnx_models as om

runner = CliRunner()
HUGE = 10**12

#: A valid workload of H = W = 10^12: layer 'a' is on line 5.
HUGE_YAML = f"""\
name: huge
inputs:
  x: [4, {HUGE}, {HUGE}]
layers:
  - {{name: a, op: conv, inputs: [x], out: [8, {HUGE}, {HUGE}], kernel: 3, padding: 1}}
  - {{name: b, op: add, inputs: [a, a], out: [8, {HUGE}, {HUGE}]}}
outputs: [b]
"""


def read(text: str, batch: int = 1):
    return read_workload(parse_yaml(text, "net.yaml"), batch)


def one_layer(layer: str, inputs: str = "[4, 8, 8]") -> str:
    """A one-layer workload: input x of `inputs`, then `layer` (a flow mapping) on line 5."""
    return f"name: t\ninputs:\n  x: {inputs}\nlayers:\n  - {layer}\n"


def test_a_yaml_of_h_10_12_is_refused_at_load_by_the_cli(tmp_path: Path) -> None:
    """The real entry point, in a fresh process: exit code 2, one line naming the file,
    the line, the layer, the figure and the cap; no traceback; nothing written (the
    default output directory lies under the working directory)."""
    net = tmp_path / "huge.yaml"
    net.write_text(HUGE_YAML)
    done = subprocess.run([sys.executable, "-c", "from mipsched.cli import main; main()",
                           "solve", str(net), "--time-limit", "5"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == [f"mipsched: error: {net}, line 5: layer 'a': "
                     "1,000,000,000,000,000,000,000,000 output positions (batch 1 x H "
                     "1,000,000,000,000 x W 1,000,000,000,000) exceed the cap of "
                     f"{MAX_POSITIONS:,} per layer"], done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert [p.name for p in tmp_path.iterdir()] == ["huge.yaml"]


def test_a_batch_of_10_9_on_a_zoo_net_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "o"
    result = runner.invoke(app, ["solve", "resnet50", "--batch", "1000000000",
                                 "--time-limit", "5", "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [
        "mipsched: error: network 'resnet50': layer 'conv1': 12,544,000,000,000 output "
        "positions (batch 1,000,000,000 x H 112 x W 112) exceed the cap of "
        f"{MAX_POSITIONS:,} per layer"]
    assert "Traceback" not in result.output
    assert not out.exists()
    with pytest.raises(WorkTooLargeError, match="network 'vgg19': layer 'conv1'") as err:
        zoo.get("vgg19", 10**9)
    assert err.value.tensor == "conv1"


def test_every_zoo_net_at_batch_64_is_accepted() -> None:
    """Positions grow with the batch and the other caps are per sample, so batch 64
    passing means every batch from 1 to 64 passes."""
    for name in zoo.NETWORKS:
        assert zoo.get(name, 64).batch == 64
    assert zoo.get("vgg19", MAX_POSITIONS // (224 * 224)).batch == 334


def test_a_zoo_net_at_batch_64_solves(tmp_path: Path) -> None:
    result = runner.invoke(app, ["solve", "chain3", "--batch", "64", "--method", "baseline",
                                 "--json", "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "o" / "schedule.json").is_file()


def test_the_caps_are_inclusive() -> None:
    """A layer of exactly MAX_POSITIONS positions is accepted; one sample more is not."""
    for batch, fits in ((1, True), (2, False)):
        b = NetBuilder("edge", batch)
        b.unary("g", b.input("x", 1, 4096, 4096), Op.GELU)
        if fits:
            assert b.build().batch == 1
        else:
            with pytest.raises(WorkTooLargeError, match="layer 'g': 33,554,432 output "
                               "positions"):
                b.build()


@pytest.mark.parametrize(("layer", "inputs", "needle"), [
    ("{name: a, op: gelu, inputs: [x], out: [1000000000000, 8, 8]}", "[1000000000000, 8, 8]",
     f"layer 'a': 64,000,000,000,000 elements per sample (C 1,000,000,000,000 x H 8 x W 8) "
     f"exceed the cap of {MAX_SAMPLE_ELEMENTS:,} per tensor"),
    ("{name: a, op: max_pool, inputs: [x], out: [4, 1, 1], kernel: 1000001, "
     "padding: 500000}", "[4, 1, 1]",
     f"layer 'a': a 1,000,001 x 1,000,001 window has 1,000,002,000,001 taps, more than the "
     f"cap of {MAX_WINDOW_TAPS:,}"),
    ("{name: a, op: conv, inputs: [x], out: [4, 4096, 4096], kernel: 5, padding: 2}",
     "[4, 4096, 4096]",
     f"layer 'a': its window reads 419,430,400 input positions per sample (H 4,096 x W "
     f"4,096 x 25 taps), more than the cap of {MAX_WINDOW_READS:,}"),
])
def test_each_cap_names_the_layer_and_the_line(layer: str, inputs: str, needle: str) -> None:
    with pytest.raises(WorkTooLargeError) as err:
        read(one_layer(layer, inputs))
    assert str(err.value) == f"net.yaml, line 5: {needle}"


def test_a_network_input_past_a_cap_is_named_at_its_line() -> None:
    """The layers are checked first; an input larger than every layer reading it (a
    strided conv) is named on its own."""
    layer = "{name: a, op: conv, inputs: [x], out: [4, 2048, 2048], kernel: 4, stride: 4}"
    with pytest.raises(WorkTooLargeError) as err:
        read(one_layer(layer, "[4, 8192, 8192]"))
    assert str(err.value) == (
        "net.yaml, line 3: network input 'x': 67,108,864 positions (batch 1 x H 8,192 x W "
        f"8,192) exceed the cap of {MAX_POSITIONS:,} per network input")
    assert read(one_layer(layer, "[4, 8192, 8192]").replace("8192", "4096")
                .replace("2048", "1024")).batch == 1


def test_the_batch_counts_in_a_yaml_workload() -> None:
    text = one_layer("{name: a, op: gelu, inputs: [x], out: [4, 8, 8]}")
    assert read(text, batch=MAX_POSITIONS // 64).batch == MAX_POSITIONS // 64
    with pytest.raises(WorkTooLargeError, match="line 5: layer 'a': 16,777,280 output "
                       r"positions \(batch 262,145 x H 8 x W 8\)"):
        read(text, batch=MAX_POSITIONS // 64 + 1)


def test_an_onnx_model_at_a_batch_of_10_9_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "net.onnx"
    onnx.save(om.conv_chain(), path)
    assert load_onnx(path, batch=64).batch == 64
    with pytest.raises(InputError, match=r"net\.onnx: layer 'conv1': 1,024,000,000,000 "
                       "output positions"):
        load_onnx(path, batch=10**9)


# --- the tiles of an LFA ------------------------------------------------------------------
def test_an_lfa_with_an_absurd_tiling_number_is_refused_by_lowering() -> None:
    wl = zoo.get("chain3")
    lowerer = Lowerer(wl, load_hardware("edge"))
    order = tuple(wl.layers)
    absurd = Lfa.unfused(order, 10**12)
    with pytest.raises(ScheduleError) as err:
        lowerer.lower(absurd)
    assert str(err.value) == (
        "the LFA has 3,000,000,000,000 tiles (tiling number x layers, summed over its FLGs; "
        "the largest, FLG [conv1 .. conv1]: tiling number 1,000,000,000,000 x 1 layer), "
        f"more than the cap of {MAX_TILES:,} per tile program")
    assert evaluate_lfa(lowerer, absurd) is None  # the searches skip it
    # FLGs each within the cap, together past it
    past = Lfa(order, (1,), (4, MAX_TILES // 2 + 1), ())
    with pytest.raises(ScheduleError, match=r"FLG \[conv2 \.\. conv3\]: tiling number "
                       "524,289 x 2 layers"):
        lowerer.place(past)
    with pytest.raises(ScheduleError, match=r"FLG \[conv1 \.\. conv3\]: tiling number "
                       "524,288 x 3 layers = 1,572,864 tiles, more than the cap"):
        lowerer.plan(order, MAX_TILES // 2)
    with pytest.raises(ScheduleError, match="tiling number 1,048,577 of FLG"):
        choose_grid(wl, order[:1], MAX_TILES + 1)
    assert evaluate_lfa(lowerer, Lfa.unfused(order, 4)) is not None


def test_the_unfused_baseline_stops_refining_at_the_cap(monkeypatch) -> None:
    """chain3 at batch 64 fits at tilings (4, 4, 4); with a cap of 6 tiles the baseline
    says no unfused tiling fits (InfeasibleError) instead of lowering past the cap."""
    lowerer = Lowerer(zoo.get("chain3", 64), load_hardware("edge"))
    assert unfused_baseline(lowerer).best.lfa.tiling == (4, 4, 4)
    monkeypatch.setattr("mipsched.heuristics.baseline.MAX_TILES", 6)
    monkeypatch.setattr("mipsched.schedule.lowering.MAX_TILES", 6)
    with pytest.raises(InfeasibleError, match="no unfused tiling fits"):
        unfused_baseline(Lowerer(zoo.get("chain3", 64), load_hardware("edge")))


def test_a_partition_past_the_cap_is_infeasible(monkeypatch) -> None:
    """Cocco's groups each within the cap but together past it: the repair says so."""
    part = Partitioner(Lowerer(zoo.get("chain3", 64), load_hardware("edge")),
                       Objective())
    unfused = tuple(range(1, part.n))
    tiles = part.n_tiles(unfused) if part._unplannable(unfused) is None else None
    assert tiles is not None and tiles > 2
    monkeypatch.setattr("mipsched.schedule.lowering.MAX_TILES", tiles - 1)
    monkeypatch.setattr("mipsched.heuristics.partition.MAX_TILES", tiles - 1)
    part = Partitioner(Lowerer(zoo.get("chain3", 64), load_hardware("edge")),
                       Objective())
    with pytest.raises(InfeasibleError, match=f"the partition needs {tiles:,} tiles, more "
                       f"than the cap of {tiles - 1:,}"):
        part.repair(unfused)
