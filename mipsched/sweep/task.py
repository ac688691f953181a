"""One point of a sweep, run where an executor puts it (a child process, a Ray worker):
inputs in, the result row and the files' contents out. It writes nothing itself, so that
only the driver writes the sweep's directory (and a worker on another machine needs none
of it).
"""

from __future__ import annotations

import resource
import traceback
from dataclasses import dataclass
from typing import Any

from mipsched.core import OBJECTIVES, Candidate
from mipsched.errors import InputError
from mipsched.hw.model import Hardware
from mipsched.report.results import certificate_json, outcome_json
from mipsched.schedule.schedule_file import parse_schedule, schedule_json
from mipsched.solve import solve_network
from mipsched.solve.warm import transferred
from mipsched.sweep.points import Point
from mipsched.workload.graph import Workload


@dataclass(frozen=True)
class PointTask:
    """Everything a worker needs for one point (picklable)."""

    point: Point
    workload: Workload
    hw: Hardware
    warm: tuple[dict[str, Any], ...] = ()
    """schedule.json contents of the point's predecessors (warm starts)."""
    memory_bytes: int | None = None
    """Address-space cap of the process running the point (None: none)."""


@dataclass(frozen=True)
class PointResult:
    """What a point produced: its result row and, when it found one, its files."""

    row: dict[str, Any]
    schedule: dict[str, Any] | None = None
    certificate: dict[str, Any] | None = None


def run_task(task: PointTask) -> PointResult:
    """Solves the point (with its warm starts); never raises for a bad point: the row's
    status and reason say what went wrong."""
    if task.memory_bytes is not None:
        resource.setrlimit(resource.RLIMIT_AS, (task.memory_bytes, task.memory_bytes))
    p = task.point
    try:
        warm = best_warm_start(task)
        outcome = solve_network(task.workload, task.hw, p.method, p.seed, p.time_limit,
                                p.objective, workers=p.workers, warm_start=warm)
    except InputError as err:
        return failed(p, task.hw, "input_error", str(err))
    except MemoryError:
        return failed(p, task.hw, "out_of_memory", "the point ran out of memory "
                      f"(cap {task.memory_bytes} bytes)")
    except Exception as err:  # a bug must not sink the sweep: recorded with its place
        where = traceback.extract_tb(err.__traceback__)[-1]
        return failed(p, task.hw, "crashed", f"{type(err).__name__}: {err} "
                      f"({where.filename.rsplit('/', 1)[-1]}:{where.lineno})")
    result = outcome_json(outcome, task.workload)
    kept = warm is not None and outcome.candidate is warm
    certificate = certificate_json(outcome, task.workload, task.hw)
    row = {**p.columns(), "hardware": task.hw.name, **result,
           "lower_bound_energy_pj": certificate["lower_bound"]["energy_pj"],
           "warm_start_kept": kept}
    c = outcome.candidate
    schedule = None if c is None else schedule_json(
        task.workload, task.hw, c.lfa, c.dlsa, c.program.tensors, outcome.method, result)
    return PointResult(row, schedule, certificate)


def best_warm_start(task: PointTask) -> Candidate | None:
    """The best (by the point's objective) of its predecessors' schedules replayed on
    its hardware; None when there are none or none fits."""
    cost = OBJECTIVES[task.point.objective].cost
    found = []
    for data in task.warm:
        sched = parse_schedule(data, "warm start")
        cand = transferred(task.workload, task.hw, sched.lfa, sched.dlsa, sched.tensor_names)
        if cand is not None:
            found.append(cand)
    return min(found, key=lambda c: cost(c.evaluation), default=None)


def failed(point: Point, hw: Hardware, status: str, reason: str) -> PointResult:
    """The row of a point that produced no schedule."""
    return PointResult({**point.columns(), "hardware": hw.name, "status": status,
                        "reason": reason, "latency_cycles": None, "energy_pj": None,
                        "edp": None, "lower_bound_cycles": None,
                        "lower_bound_energy_pj": None, "gap": None})
