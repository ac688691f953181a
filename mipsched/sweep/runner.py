"""`mipsched sweep GRID -o DIR`: run every point of a grid on an executor, in warm-start
order, and keep the sweep's directory:

    DIR/grid.yaml                the grid as given (the last run's)
    DIR/journal.jsonl            one line per finished point (journal.py)
    DIR/points/NAME/             schedule.json (when it found one) + certificate.json
    DIR/results.csv, .parquet    one row per point of the grid, in grid order

A point runs once every predecessor (points.py) has finished, with their schedules as
warm starts. Points already in the journal are skipped (resume). Ctrl-C stops the running
points, writes the results of the finished ones and leaves the rest for a resume.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mipsched.atomic import write_json_atomic, write_text_atomic
from mipsched.hw.load import load_hardware
from mipsched.sweep.executors import Executor
from mipsched.sweep.grid import Grid, NetworkLoader, network_workloads
from mipsched.sweep.journal import append_journal, read_journal
from mipsched.sweep.points import Point, PointPlan, plan_points
from mipsched.sweep.results import write_results
from mipsched.sweep.task import PointResult, PointTask
from mipsched.workload.graph import Workload

#: Seconds between looks at the running points (and at Ctrl-C).
POLL_SECONDS = 0.5


@dataclass
class SweepProgress:
    """What the progress display shows: points done / total, seconds so far, the best
    latency (cycles) and its point."""

    total: int
    done: int = 0
    started: float = 0.0
    best_latency: int | None = None
    best_point: str = ""

    def record(self, row: dict[str, Any]) -> None:
        """Counts a finished point and keeps the best latency."""
        self.done += 1
        latency = row.get("latency_cycles")
        if latency is not None and (self.best_latency is None or latency < self.best_latency):
            self.best_latency = latency
            self.best_point = f"{row['network']} b{row['batch']}"


Listener = Callable[[SweepProgress], None]


@dataclass(frozen=True)
class SweepSetup:
    """A planned sweep: the grid, its networks and points."""

    grid: Grid
    workloads: dict[tuple[str, int], Workload]
    plan: PointPlan


def plan_sweep(grid: Grid, load: NetworkLoader) -> SweepSetup:
    """Builds every network of the grid (`load(spec, batch)`) and plans its points."""
    workloads = network_workloads(grid, load)
    return SweepSetup(grid, workloads, plan_points(grid, workloads,
                                                   load_hardware(grid.hardware)))


def run_sweep(setup: SweepSetup, out: Path, executor: Executor,
              listener: Listener | None = None) -> SweepProgress:
    """Runs the points of `setup` not yet in `out`'s journal. Returns the progress at the
    end; KeyboardInterrupt after stopping the running points and writing the results."""
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "grid.yaml", setup.grid.text)
    rows = read_journal(out)
    plan = setup.plan
    pending = [p for p in plan.points if p.key not in rows]
    progress = SweepProgress(total=len(plan.points), started=time.perf_counter())
    for p in plan.points:
        if p.key in rows:
            progress.record(rows[p.key])
    running: set[str] = set()
    if listener:
        listener(progress)
    try:
        while pending or running:
            for point in _ready(pending, running, rows, plan, executor.slots - len(running)):
                pending.remove(point)
                running.add(point.key)
                executor.submit(_task(setup, point, out))
            for task, result in executor.finished(POLL_SECONDS):
                running.discard(task.point.key)
                rows[task.point.key] = _keep(out, task.point, result)
                progress.record(result.row)
            if listener:
                listener(progress)
    finally:
        executor.stop()
        write_results(out, [rows[p.key] for p in plan.points if p.key in rows])
    return progress


def _ready(pending: list[Point], running: set[str], rows: dict[str, Any],
           plan: PointPlan, free: int) -> list[Point]:
    """Up to `free` pending points whose predecessors have all finished."""
    ready = []
    for point in pending:
        if len(ready) >= free:
            break
        if all(k in rows and k not in running for k in plan.predecessors[point.key]):
            ready.append(point)
    return ready


def _task(setup: SweepSetup, point: Point, out: Path) -> PointTask:
    """The task of `point`, with its predecessors' schedules as warm starts."""
    warm = []
    for key in setup.plan.predecessors[point.key]:
        path = _point_dir(out, setup.plan.by_key[key]) / "schedule.json"
        if path.exists():
            warm.append(json.loads(path.read_text()))
    memory = setup.grid.memory_gib
    return PointTask(point, setup.workloads[point.network, point.batch],
                     setup.plan.hardware[point.key], tuple(warm),
                     None if memory is None else int(memory * 2**30))


def _point_dir(out: Path, point: Point) -> Path:
    return out / "points" / point.dirname


def _keep(out: Path, point: Point, result: PointResult) -> dict[str, Any]:
    """Writes the point's files, then its journal line (so a line means the files are
    there); returns its row."""
    folder = _point_dir(out, point)
    folder.mkdir(parents=True, exist_ok=True)
    if result.schedule is not None:
        write_json_atomic(folder / "schedule.json", result.schedule)
    else:
        (folder / "schedule.json").unlink(missing_ok=True)
    if result.certificate is not None:
        write_json_atomic(folder / "certificate.json", result.certificate)
    row = {**result.row, "dir": str(folder.relative_to(out))}
    append_journal(out, row)
    return row
