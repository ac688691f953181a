"""Simulator outputs: CLI, Chrome trace, transfer CSV, the plot, and `solve` refusing a
schedule the simulator rejects."""

from __future__ import annotations

import csv
import io
import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mipsched import solve as solve_module
from mipsched.cli import app
from mipsched.core import Candidate, MethodResult
from mipsched.heuristics.baseline import unfused_baseline
from mipsched.hw import load_hardware
from mipsched.report.plot import MIB, schedule_figure
from mipsched.report.trace import chrome_trace, transfers_csv
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Dlsa, Lfa
from mipsched.sim import simulate
from mipsched.workload import zoo

from strategies import random_lfa

runner = CliRunner()


@pytest.fixture(scope="module")
def solved(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("solved")
    assert runner.invoke(app, ["solve", "chain5", "--method", "baseline", "--out",
                                str(out)]).exit_code == 0
    return out


def fused_resnet50():
    wl = zoo.get("resnet50")
    program = Lowerer(wl, load_hardware("edge")).lower(
        random_lfa(wl, random.Random(7), (1, 2, 4, 8), tuple(wl.layers), cut_chance=0.3))
    return program, simulate(program, default_dlsa(program))


def test_simulate_cli_matches_eval_and_writes_trace_and_csv(solved: Path) -> None:
    trace, table = solved / "trace.json", solved / "transfers.csv"
    sim = runner.invoke(app, ["simulate", str(solved / "schedule.json"), "--json",
                              "--trace", str(trace), "--csv", str(table)])
    assert sim.exit_code == 0, sim.output
    ev = json.loads(runner.invoke(app, ["eval", str(solved / "schedule.json"),
                                        "--json"]).stdout)
    result = json.loads(sim.stdout)
    for key in ("latency_cycles", "peak_buffer_bytes", "stall_cycles", "dram_bytes"):
        assert result[key] == ev[key], key
    assert result["energy_pj"] == pytest.approx(ev["energy_pj"], rel=1e-9)
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert {"COMPUTE", "DRAM"} <= names
    assert any(e["ph"] == "C" and e["name"] == "BUFFER" for e in events)
    rows = list(csv.DictReader(table.open()))
    assert len(rows) == ev["n_dram_tensors"]
    assert sum(int(r["bytes"]) for r in rows) == ev["dram_bytes"]
    assert all(int(r["end"]) >= int(r["start"]) for r in rows)


def test_trace_slices_match_the_replay() -> None:
    program, sim = fused_resnet50()
    trace = chrome_trace(program, sim)["traceEvents"]
    tiles = [e for e in trace if e.get("cat") == "tile"]
    stalls = [e for e in trace if e.get("cat") == "stall"]
    assert len(tiles) == program.n_tiles
    assert sum(e["args"]["cycles"] for e in stalls) == sim.stall_cycles
    assert max(e["args"]["bytes"] for e in trace if e["ph"] == "C") == sim.peak_buffer_bytes
    body = list(csv.reader(io.StringIO(transfers_csv(sim))))
    assert len(body) == len(program.tensors) + 1


@pytest.mark.parametrize("which", ["chain5", "resnet50"])
def test_plotted_peak_is_the_simulated_peak(which: str) -> None:
    if which == "resnet50":
        program, sim = fused_resnet50()
        assert program.n_tiles > 100  # hundreds of tiles, still drawn
    else:
        wl = zoo.get("chain5")
        program = Lowerer(wl, load_hardware("edge")).lower(
            Lfa(tuple(wl.layers), (2, 4), (4, 2, 1), (4,)))
        sim = simulate(program, default_dlsa(program))
    fig = schedule_figure(program, sim)
    (curve,) = [line for ax in fig.axes for line in ax.get_lines()
                if line.get_label() == "buffer"]
    assert max(curve.get_ydata()) * MIB == pytest.approx(sim.peak_buffer_bytes, rel=1e-12)
    capacity = [line for ax in fig.axes for line in ax.get_lines()
                if str(line.get_label()).startswith("capacity")]
    assert capacity and capacity[0].get_ydata()[0] * MIB == program.buffer_capacity_bytes


def test_plot_cli_writes_png_and_svg(solved: Path, tmp_path: Path) -> None:
    for name in ("fig.png", "fig.svg"):
        result = runner.invoke(app, ["plot", str(solved / "schedule.json"), "-o",
                                     str(tmp_path / name)])
        assert result.exit_code == 0, result.output
        assert (tmp_path / name).stat().st_size > 10_000
    assert (tmp_path / "fig.png").read_bytes()[:4] == b"\x89PNG"
    bad = runner.invoke(app, ["plot", str(solved / "schedule.json"), "-o",
                              str(tmp_path / "fig.gif")])
    assert bad.exit_code == 2 and not (tmp_path / "fig.gif").exists()


def test_simulate_rejects_an_invalid_schedule_with_its_diagnosis(solved: Path,
                                                                 tmp_path: Path) -> None:
    data = json.loads((solved / "schedule.json").read_text())
    data["dlsa"]["order"] = data["dlsa"]["order"][::-1]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    result = runner.invoke(app, ["simulate", str(path)])
    assert result.exit_code == 2
    assert "deadlock" in result.stderr or "ordered before" in result.stderr


def test_solve_refuses_a_schedule_the_simulator_rejects(monkeypatch, tmp_path: Path) -> None:
    """A method whose schedule deadlocks is reported as that method's failure."""
    def broken(lowerer: Lowerer, options) -> MethodResult:
        good = unfused_baseline(lowerer).best
        reverse = Dlsa(good.dlsa.order[::-1], good.dlsa.living)
        return MethodResult(Candidate(good.lfa, good.program, reverse, good.evaluation))

    monkeypatch.setitem(solve_module.METHODS, "baseline",
                        solve_module.Method("broken on purpose", broken))
    result = runner.invoke(app, ["solve", "chain3", "--method", "baseline", "--out",
                                 str(tmp_path), "--json"])
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    assert out["status"] == "error"
    assert "failed the simulator" in out["reason"]
    assert not (tmp_path / "schedule.json").exists()
    cert = json.loads((tmp_path / "certificate.json").read_text())
    assert cert["status"] == "error" and cert["incumbent"] is None
