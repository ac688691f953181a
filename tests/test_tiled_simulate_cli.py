"""`mipsched simulate ratree.json` and `mipsched eval ratree.json` on a tiled machine, and
the replay check of `mipsched solve --hw set-4x4`: the figures against a direct
evaluation, the trace and task CSV against the replay, one-line errors without files,
and a broken replay caught (exit 1, no ratree.json)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import mipsched.tiled.simulate as simulate_module
from mipsched.cli import app
from mipsched.cli_tiled import load_ratree, ratree_document, tree_figures
from mipsched.hw.tiled import load_tiled_hardware
from mipsched.report.tiled_trace import TASK_COLUMNS
from mipsched.tiled.bound import tiled_bounds
from mipsched.tiled.evaluate import DEFAULT_STRIDE, evaluate_tree
from mipsched.tiled.ratree import Cut, Leaf, RaTree
from mipsched.tiled.simulate import TaskRecord, TiledSimulationError, simulate_tree
from mipsched.tiled.structure import core_positions
from mipsched.workload import zoo
from mipsched.workload.graph import Workload

runner = CliRunner()
HW = load_tiled_hardware("set-4x4")
NETS = ("chain3", "resblock")


def _solve(out: Path, net: str, limit: str = "10") -> object:
    """`mipsched solve NET --hw set-4x4 --batch 2 --json` into `out`."""
    return runner.invoke(app, ["solve", net, "--hw", "set-4x4", "--batch", "2",
                               "--time-limit", limit, "--out", str(out), "--json"])


def _pipelined_chain5() -> tuple[Workload, RaTree]:
    """chain5 b4: the root over 2 sub-batches of S/2(conv1, conv2, conv3) on 7, 3 and 6
    tiles, then T/2(conv4, conv5): 20 tasks, 4 segment runs."""
    wl = zoo.get("chain5", 4)
    leaf = [Leaf(n) for n in wl.layers]
    return wl, RaTree(Cut("T", (Cut("S", tuple(leaf[:3]), 2), Cut("T", tuple(leaf[3:]), 2)),
                          2), 4)


@pytest.fixture(scope="module")
def solved(tmp_path_factory) -> dict[str, Path]:
    """The ratree.json `solve` writes for each net (the search's tree, replayed), and one
    of a hand-made pipelined tree of chain5 (as `solve` would write it)."""
    files = {}
    for net in NETS:
        out = tmp_path_factory.mktemp(net)
        done = _solve(out, net)
        assert done.exit_code == 0, done.output
        result = json.loads(done.stdout)
        assert (result["status"], result["simulated"]) == ("feasible", True)
        files[net] = out / "ratree.json"
    wl, tree = _pipelined_chain5()
    ev = evaluate_tree(HW, wl, tree)
    assert ev is not None
    files["chain5"] = tmp_path_factory.mktemp("chain5") / "ratree.json"
    figures = tree_figures(wl, HW, "hand", ev, tiled_bounds(wl, HW))
    files["chain5"].write_text(json.dumps(ratree_document(wl, HW, "hand", tree, figures)))
    return files


def _direct(path: Path):
    """The tree of `path`, its evaluation and replay, each with its own leaf cache."""
    r = load_ratree(path)
    ev = evaluate_tree(r.hw, r.workload, r.tree)
    trace = simulate_tree(r.hw, r.workload, r.tree)
    assert ev is not None and trace is not None
    return r, ev, trace


@pytest.mark.parametrize("net", [*NETS, "chain5"])
def test_simulate_figures_equal_the_model(tmp_path, solved, net) -> None:
    r, ev, trace = _direct(solved[net])
    done = runner.invoke(app, ["simulate", str(solved[net]), "--json"])
    assert done.exit_code == 0, done.output
    got = json.loads(done.stdout)
    assert (got["status"], got["matches_model"]) == ("feasible", True)
    assert got["latency_cycles"] == got["model_latency_cycles"] == ev.latency
    assert got["energy_pj"] == pytest.approx(ev.energy_pj, rel=1e-9, abs=0)
    assert got["model_energy_pj"] == ev.energy_pj
    assert got["edp"] == pytest.approx(ev.edp, rel=1e-9, abs=0)
    assert (got["dram_bytes"], got["noc_byte_hops"]) == (ev.record.dram_bytes,
                                                         ev.record.byte_hops)
    assert got["n_segments"] == len(ev.segments)
    assert got["segment_runs"] == len(ev.segments) * r.tree.root.subbatches
    assert got["n_tasks"] == len(trace.tasks)
    assert got["busiest_link_bytes"] == ev.record.max_link_bytes()
    assert [(s["index"], s["cycles"], s["dram_bytes"], s["busiest_link_bytes"])
            for s in got["segments"]] == [(k, s.cycles, s.dram_bytes, s.max_link_bytes)
                                          for k, s in enumerate(ev.segments)]
    assert {s["bound"] for s in got["segments"]} <= {"compute", "DRAM", "link"}


@pytest.mark.parametrize("net", [*NETS, "chain5"])
def test_trace_and_csv_have_every_task(tmp_path, solved, net) -> None:
    r, ev, trace = _direct(solved[net])
    out_trace, out_csv = tmp_path / "trace.json", tmp_path / "tasks.csv"
    done = runner.invoke(app, ["simulate", str(solved[net]), "--trace", str(out_trace),
                               "--csv", str(out_csv)])
    assert done.exit_code == 0, done.output
    assert "matches_model" in done.stdout and "longest segments" in done.stdout
    events = json.loads(out_trace.read_text())["traceEvents"]
    tracks = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert sorted(tracks.values()) == sorted(
        ["SEGMENTS", "DRAM", *(f"tile ({x}, {y})" for x in range(4) for y in range(4))])
    slices = [e for e in events if e.get("cat") == "task"]
    groups: dict[int, list[dict]] = {}
    for e in slices:
        groups.setdefault(e["args"]["task"], []).append(e)
    assert sorted(groups) == list(range(len(trace.tasks)))  # one number per task
    drawn = {}
    for group in groups.values():
        (task,) = {(e["args"]["path"], tuple(e["args"]["subbatch"])) for e in group}
        drawn[task] = sorted(tracks[e["tid"]] for e in group)
    tile = core_positions(0, HW.n_tiles, 4, 4, DEFAULT_STRIDE)  # core index -> (x, y)
    assert drawn == {(t.path, t.subbatch): sorted(f"tile {tile[c]}"
                                                  for c in range(t.first, t.last))
                     for t in trace.tasks}  # a slice on each tile the task holds
    segments = [e for e in events if e.get("cat") == "segment"]
    assert len(segments) == len(trace.segments)
    assert max(e["ts"] + e["dur"] for e in segments) == pytest.approx(ev.latency / 1000)
    rows = list(csv.DictReader(io.StringIO(out_csv.read_text())))
    assert len(rows) == len(trace.tasks) and tuple(rows[0]) == TASK_COLUMNS
    assert sum(int(row["dram_bytes"]) for row in rows) == ev.record.dram_bytes
    assert max(int(row["end"]) for row in rows) <= ev.latency
    assert {row["layer"] for row in rows} == set(r.workload.layers)
    if net == "chain5":
        assert (len(rows), len(segments)) == (20, 4)
        assert {(row["first_core"], row["last_core"]) for row in rows} == {
            ("0", "6"), ("7", "9"), ("10", "15"), ("0", "15")}


def test_eval_prints_the_figures_solve_printed(solved) -> None:
    for path in solved.values():
        done = runner.invoke(app, ["eval", str(path), "--json"])
        assert done.exit_code == 0, done.output
        got = json.loads(done.stdout)
        saved = json.loads(path.read_text())["results"]
        assert got == {k: saved[k] for k in got}  # the same keys and values as solve's
        r = load_ratree(path)
        ev = evaluate_tree(r.hw, r.workload, r.tree)
        assert set(got) == set(tree_figures(r.workload, r.hw, r.method, ev,
                                              tiled_bounds(r.workload, r.hw)))
        shown = runner.invoke(app, ["eval", str(path)])
        assert shown.exit_code == 0 and "latency_cycles" in shown.stdout


# --- bad input: one line, exit 2, no files ------------------------------------------------------
REJECTED = RaTree(Cut("T", (Leaf("conv_a"), Leaf("conv_b"), Cut(
    "S", (Leaf("shortcut"), Leaf("conv_c"), Leaf("add")), 2))), 2)
"""A valid RA tree of resblock b2 that SET's cost model rejects on set-4x4."""


def _bad_file(tmp_path: Path, how: str) -> Path:
    path = tmp_path / "ratree.json"
    wl = zoo.get("resblock", 2)
    good = RaTree(Cut("T", tuple(Leaf(n) for n in wl.layers)), 2)
    doc = ratree_document(wl, HW, "hand", REJECTED if how == "rejected" else good, {})
    if how == "not json":
        path.write_text('{"format": "mipsched-ratree", ')
        return path
    if how == "format":
        doc = {"format": "something-else"}
    elif how == "digest":
        doc["network"]["digest"] = "0" * 16
    elif how == "order":  # add before its inputs
        kids = doc["tree"]["root"]["children"]
        kids[0], kids[-1] = kids[-1], kids[0]
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("command", ["simulate", "eval"])
@pytest.mark.parametrize(("how", "says"), [
    ("not json", "invalid JSON"), ("format", ""), ("digest", "digest mismatch"),
    ("order", "topological order"), ("rejected", "rejected by SET's cost model"),
    ("solution", "--solution")])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, command, how, says) -> None:
    path = _bad_file(tmp_path, how)
    args = [command, str(path)]
    if command == "simulate":
        args += ["--trace", str(tmp_path / "t.json"), "--csv", str(tmp_path / "t.csv")]
    if how == "solution":
        args += ["--solution", "reference"]
    done = runner.invoke(app, args)
    assert done.exit_code == 2, done.output
    assert len(done.stderr.splitlines()) == 1 and says in done.stderr, done.stderr
    assert "Traceback" not in done.output
    assert [p.name for p in tmp_path.iterdir()] == ["ratree.json"]


# --- a broken replay ---------------------------------------------------------------------------
def _costlier_tasks(monkeypatch) -> None:
    """Every replayed task charges 1 % more energy than its leaf: the replay disagrees."""
    monkeypatch.setattr(simulate_module, "TaskRecord",
                        lambda *fields: TaskRecord(*fields[:-1], fields[-1] * 1.01))


def _broken_rule(monkeypatch) -> None:
    def refuse(tasks, workload) -> None:
        raise TiledSimulationError("order", "root.1 (conv2) starts before conv1 ends")
    monkeypatch.setattr(simulate_module, "check_tasks", refuse)


@pytest.mark.parametrize(("breaks", "says"), [
    (_costlier_tasks, "the replay's energy is"), (_broken_rule, "broke its 'order' rule")])
def test_solve_with_a_broken_replay_writes_no_tree(tmp_path, monkeypatch, breaks,
                                                   says) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "ratree.json").write_text("{}")  # an earlier run's: removed
    breaks(monkeypatch)
    done = _solve(out, "chain3", "5")
    assert done.exit_code == 1, done.output
    assert says in done.stderr and "Traceback" not in done.output
    result = json.loads(done.stdout)
    assert (result["status"], result["simulated"], result["latency_cycles"]) == (
        "error", False, None)
    assert says in result["reason"]
    assert [p.name for p in out.iterdir()] == ["certificate.json"]
    certificate = json.loads((out / "certificate.json").read_text())
    assert (certificate["status"], certificate["incumbent"]) == ("error", None)


@pytest.mark.parametrize(("breaks", "says", "wrote"), [
    (_costlier_tasks, "the replay's energy is", True),
    (_broken_rule, "broke its 'order' rule", False)])
def test_simulate_with_a_broken_replay_exits_1(tmp_path, solved, monkeypatch, breaks, says,
                                               wrote) -> None:
    breaks(monkeypatch)
    out_trace = tmp_path / "t.json"
    done = runner.invoke(app, ["simulate", str(solved["resblock"]), "--json", "--trace",
                               str(out_trace)])
    assert done.exit_code == 1, done.output
    assert len(done.stderr.splitlines()) == 1 and says in done.stderr
    got = json.loads(done.stdout)
    assert got["status"] == "error" and says in got["reason"]
    assert got.get("matches_model", False) is False
    assert out_trace.exists() == wrote  # a disagreeing replay's trace, to look into
