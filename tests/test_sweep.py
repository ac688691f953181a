"""`mipsched sweep`: grid validation, results files, monotone warm starts, resume after a
kill or Ctrl-C, a bad point that does not sink the sweep, the Ray executor."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from mipsched.cli import app
from mipsched.errors import InputError
from mipsched.hw import load_hardware
from mipsched.hw.overrides import capacity_energy_factor, with_overrides
from mipsched.sweep.executors import LocalExecutor, RayExecutor
from mipsched.sweep.grid import parse_grid
from mipsched.sweep.journal import read_journal
from mipsched.sweep.runner import plan_sweep, run_sweep
from mipsched.sweep.task import run_task
from mipsched.workload import zoo

ISSUE_GRID = """\
networks: [resnet50]
batches: [1, 4]
hardware: edge
axes:
  gbuf.capacity_bytes: [4194304, 8388608, 16777216, 33554432]
  dram.bytes_per_cycle: [16, 64]
method: auto
objective: latency
time_limit: 20
"""

TINY_GRID = """\
networks: [chain3]
batches: [1]
hardware: edge
axes:
  gbuf.capacity_bytes: {from: 131072, to: 524288, factor: 2}
  dram.bytes_per_cycle: [4, 16]
method: METHOD
objective: latency
time_limit: 3
"""
#: Figures of a point that do not depend on how long the run took.
SAME = ("network", "batch", "gbuf.capacity_bytes", "dram.bytes_per_cycle",
        "latency_cycles", "energy_pj", "peak_buffer_bytes", "lower_bound_cycles", "status")


def _grid(text: str, tmp_path: Path):
    return parse_grid(text, "grid.yaml", tmp_path)


def _setup(text: str, tmp_path: Path):
    return plan_sweep(_grid(text, tmp_path), lambda spec, batch: zoo.get(spec, batch))


def _rows(out: Path) -> list[dict[str, str]]:
    with (out / "results.csv").open() as f:
        return list(csv.DictReader(f))


def test_the_issue_grid_is_accepted_as_written(tmp_path):
    setup = _setup(ISSUE_GRID, tmp_path)
    assert len(setup.plan.points) == 2 * 4 * 2
    assert {p.method for p in setup.plan.points} == {"auto"}
    # the 8 MiB / 64 B-per-cycle point warm-starts from 4 MiB / 64 and 8 MiB / 16
    p = next(p for p in setup.plan.points if dict(p.params) == {
        "gbuf.capacity_bytes": 8388608, "dram.bytes_per_cycle": 64} and p.batch == 1)
    lower = {tuple(sorted(dict(q.params).items())) for q in setup.plan.points
             if q.key in setup.plan.predecessors[p.key]}
    assert lower == {(("dram.bytes_per_cycle", 64), ("gbuf.capacity_bytes", 4194304)),
                     (("dram.bytes_per_cycle", 16), ("gbuf.capacity_bytes", 8388608))}


@pytest.mark.parametrize(("text", "message"), [
    ("networks: [chain3]\nbatches: [1]\nhardware: edge\nmethds: sa\n",
     "grid.yaml, line 4: unknown key 'methds'"),
    ("networks: [chain3]\nbatches: [1]\nhardware: edge\naxes:\n  gbuf.capacty: [1]\n",
     "grid.yaml, line 5: axes: 'gbuf.capacty' is not a number"),
    ("networks: [chain3]\nbatches: [1]\nhardware: edge\naxes:\n"
     "  gbuf.capacity_bytes: [1024, 0]\n",
     "grid.yaml, line 5: axes.gbuf.capacity_bytes: must be > 0"),
    ("networks: [chain3]\nbatches: [1, 0]\nhardware: edge\n",
     "grid.yaml, line 2: batches: must be >= 1"),
    ("networks: [chain3]\nbatches: [1]\nhardware: edge\nmethod: fastest\n",
     "grid.yaml, line 4: method: unknown method 'fastest'"),
    ("networks: [chain3]\nbatches: [1]\nhardware: edge\naxes:\n"
     "  dram.bytes_per_cycle: {from: 4, to: 64}\n",
     "grid.yaml, line 5: axes.dram.bytes_per_cycle: a range is {from, to, factor}"),
    ("networks: [chain3]\nbatches: [1]\nhardware: nowhere\n",
     "grid.yaml, line 3: hardware: unknown hardware 'nowhere'"),
    ("batches: [1]\nhardware: edge\n", "grid.yaml: missing key 'networks'"),
])
def test_bad_grids_name_line_and_key(tmp_path, text, message):
    with pytest.raises(InputError) as err:
        _grid(text, tmp_path)
    assert str(err.value).startswith(message), str(err.value)


def test_ranges_expand_both_ways(tmp_path):
    grid = _grid("networks: [chain3]\nbatches: {from: 1, to: 16, factor: 4}\nhardware: edge\n"
                 "axes:\n  dram.bytes_per_cycle: {from: 8, to: 32, step: 8}\n", tmp_path)
    assert grid.batches == (1, 4, 16)
    assert grid.axes == (("dram.bytes_per_cycle", (8, 16, 24, 32)),)


def test_capacity_scales_gbuf_energy_as_the_reference():
    edge = load_hardware("edge")  # 8 MiB: 1.1^4 in the preset's numbers
    small = with_overrides(edge, {"gbuf.capacity_bytes": 4 * 2**20})
    assert small.gbuf.read_pj_per_byte == pytest.approx(edge.gbuf.read_pj_per_byte / 1.1**2)
    assert small.core_array.ol1.write_pj_per_byte == pytest.approx(
        edge.core_array.ol1.write_pj_per_byte / 1.1**2)
    assert capacity_energy_factor(8 * 2**20, 9 * 2**20) == 1.0  # whole 2 MiB steps only
    fixed = with_overrides(edge, {"gbuf.capacity_bytes": 4 * 2**20,
                                  "gbuf.read_pj_per_byte": 1.0})
    assert fixed.gbuf.read_pj_per_byte == 1.0


def test_local_sweep_writes_tables_and_is_monotone(tmp_path):
    out = tmp_path / "out"
    progress = run_sweep(_setup(TINY_GRID.replace("METHOD", "sa"), tmp_path), out,
                         LocalExecutor(2))
    assert progress.done == progress.total == 6
    rows = _rows(out)
    for column in ("network", "batch", "gbuf.capacity_bytes", "dram.bytes_per_cycle",
                   "latency_cycles", "energy_pj", "edp", "lower_bound_cycles", "gap",
                   "status"):
        assert column in rows[0]
    latency = {(int(r["gbuf.capacity_bytes"]), int(r["dram.bytes_per_cycle"])):
               int(r["latency_cycles"]) for r in rows}
    for (cap, bw), value in latency.items():
        for (cap2, bw2), value2 in latency.items():
            if cap2 >= cap and bw2 >= bw:
                assert value2 <= value, (cap, bw, cap2, bw2)
        assert int(next(r for r in rows if int(r["gbuf.capacity_bytes"]) == cap and
                        int(r["dram.bytes_per_cycle"]) == bw)["lower_bound_cycles"]) <= value
    table = pq.read_table(out / "results.parquet").to_pylist()
    assert [t["latency_cycles"] for t in table] == [int(r["latency_cycles"]) for r in rows]
    for r in rows:
        point = out / r["dir"]
        assert json.loads((point / "certificate.json").read_text())["incumbent"][
            "latency_cycles"] == int(r["latency_cycles"])
        assert (point / "schedule.json").exists()


def test_a_warm_start_is_kept_when_the_search_does_worse(tmp_path):
    """baseline (no fusion) cannot beat SA's schedule of the smaller machine."""
    setup = _setup(TINY_GRID.replace("METHOD", "sa"), tmp_path)
    run_sweep(setup, tmp_path / "sa", LocalExecutor(2))
    small = setup.plan.points[0]
    schedule = json.loads(next((tmp_path / "sa" / "points").glob(
        f"*{small.key[:8]}/schedule.json")).read_text())
    big = setup.plan.points[-1]
    from dataclasses import replace

    from mipsched.sweep.task import PointTask
    task = PointTask(replace(big, method="baseline"), zoo.get("chain3"),
                     setup.plan.hardware[big.key], (schedule,))
    result = run_task(task)
    assert result.row["warm_start_kept"] is True
    assert result.row["latency_cycles"] <= schedule["results"]["latency_cycles"]


class _InterruptAfter(LocalExecutor):
    """A local executor whose driver gets Ctrl-C once `n` points have finished."""

    def __init__(self, jobs: int, n: int) -> None:
        super().__init__(jobs)
        self.n, self.seen = n, 0

    def finished(self, timeout):
        done = super().finished(timeout)
        self.seen += len(done)
        if self.seen >= self.n:
            self._deliver = done
            raise KeyboardInterrupt
        return done


def test_a_torn_journal_line_is_skipped_and_the_next_stays_whole(tmp_path):
    from mipsched.sweep.journal import JOURNAL, append_journal

    append_journal(tmp_path, {"point": "a", "latency_cycles": 1})
    with (tmp_path / JOURNAL).open("ab") as f:
        f.write(b'{"point": "b", "lat')  # the machine died here
    append_journal(tmp_path, {"point": "c", "latency_cycles": 3})
    assert sorted(read_journal(tmp_path)) == ["a", "c"]


def test_ctrl_c_keeps_finished_points_and_resume_completes(tmp_path):
    text = TINY_GRID.replace("METHOD", "greedy")
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        run_sweep(_setup(text, tmp_path), out, _InterruptAfter(1, 2))
    kept = read_journal(out)
    assert 1 <= len(kept) < 6
    assert len(_rows(out)) == len(kept)
    run_sweep(_setup(text, tmp_path), out, LocalExecutor(2))
    fresh = tmp_path / "fresh"
    run_sweep(_setup(text, tmp_path), fresh, LocalExecutor(2))
    assert [{k: r[k] for k in SAME} for r in _rows(out)] == \
        [{k: r[k] for k in SAME} for r in _rows(fresh)]


def test_a_killed_sweep_resumes_to_the_same_results(tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text(TINY_GRID.replace("METHOD", "greedy"))
    out = tmp_path / "out"
    command = [sys.executable, "-c", "from mipsched.cli import main; main()", "sweep",
               str(grid), "-o", str(out), "--jobs", "1"]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    deadline = time.monotonic() + 120
    while not read_journal(out) and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.05)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    assert 1 <= len(read_journal(out)) < 6
    assert subprocess.run(command).returncode == 0
    fresh = tmp_path / "fresh"
    assert subprocess.run(command[:-4] + [str(grid), "-o", str(fresh)]).returncode == 0
    assert [{k: r[k] for k in SAME} for r in _rows(out)] == \
        [{k: r[k] for k in SAME} for r in _rows(fresh)]


def test_a_crashing_point_is_recorded_and_the_sweep_goes_on(tmp_path, monkeypatch):
    import mipsched.sweep.executors as executors

    def crash_one(task):  # runs in the forked child
        if dict(task.point.params)["gbuf.capacity_bytes"] == 262144:
            os.kill(os.getpid(), signal.SIGSEGV)
        return run_task(task)

    monkeypatch.setattr(executors, "run_task", crash_one)
    out = tmp_path / "out"
    progress = run_sweep(_setup(TINY_GRID.replace("METHOD", "greedy"), tmp_path), out,
                         LocalExecutor(2))
    assert progress.done == 6
    for row in _rows(out):
        if row["gbuf.capacity_bytes"] == "262144":
            assert row["status"] == "crashed"
            assert "SIGSEGV" in row["reason"]
        else:
            assert row["status"] == "feasible"


def test_a_point_over_its_memory_cap_is_recorded(tmp_path, monkeypatch):
    import mipsched.sweep.task as task_module

    def hog(*args, **kwargs):
        return bytearray(8 * 2**30)

    monkeypatch.setattr(task_module, "solve_network", hog)
    setup = _setup(TINY_GRID.replace("METHOD", "greedy") + "memory_gib: 4\n", tmp_path)
    run_sweep(setup, tmp_path / "out", LocalExecutor(2))
    for row in _rows(tmp_path / "out"):
        assert row["status"] == "out_of_memory"
        assert str(4 * 2**30) in row["reason"]


def test_cli_sweep_and_status(tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text(TINY_GRID.replace("METHOD", "greedy"))
    out = tmp_path / "out"
    runner = CliRunner()
    result = runner.invoke(app, ["sweep", str(grid), "-o", str(out)])
    assert result.exit_code == 0, result.output
    status = runner.invoke(app, ["sweep", "status", str(out)])
    assert status.exit_code == 0
    assert "6 of 6 points, finished" in " ".join(status.output.split())
    bad = runner.invoke(app, ["sweep", str(grid)])
    assert bad.exit_code == 2


def test_ray_and_local_executors_agree(tmp_path):
    ray = pytest.importorskip("ray")
    text = TINY_GRID.replace("METHOD", "greedy")
    run_sweep(_setup(text, tmp_path), tmp_path / "local", LocalExecutor(2))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        run_sweep(_setup(text, tmp_path), tmp_path / "ray", RayExecutor(None, 1))
    finally:
        ray.shutdown()
    assert [{k: r[k] for k in SAME} for r in _rows(tmp_path / "ray")] == \
        [{k: r[k] for k in SAME} for r in _rows(tmp_path / "local")]
