"""What `mipsched explore` writes: explore.json (the best capacity, the cost breakdown,
every capacity's best metric, the hull, the convergence trace) and the best schedule as
schedule.json on the explored hardware (so `mipsched eval` / `plot` / `simulate` replay
it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mipsched.atomic import write_json_atomic
from mipsched.explore.run import ExploreResult
from mipsched.report.results import simulation_json
from mipsched.schedule.schedule_file import save_schedule
from mipsched.workload.graph import Workload


def explore_json(result: ExploreResult, workload: Workload) -> dict[str, Any]:
    """The result object of `explore --json` (units: bytes, pJ, cycles, seconds)."""
    best, cost = result.best, result.cost
    return {
        "network": workload.name,
        "batch": workload.batch,
        "hardware": result.hardware.name,
        "method": result.method,
        "alpha": cost.alpha,
        "metric": cost.metric,
        "capacity_bytes": best.capacity_bytes,
        "objective": best.objective,
        "breakdown": {"buffer_bytes": best.capacity_bytes,
                      "alpha_x_metric": cost.alpha * best.metric,
                      "metric": best.metric,
                      **simulation_json(result.simulation, workload,
                                        result.candidate.program)},
        "n_groups": len(best.cuts) + 1,
        "evaluations": result.evaluations,
        "lowerings": result.lowerings,
        "seconds": result.seconds,
        "grid_bytes": list(result.grid.values),
        "per_capacity": [{"capacity_bytes": s.capacity_bytes, "metric": s.metric,
                          "objective": s.objective} for s in result.per_capacity.values()],
        "no_schedule": [{"capacity_bytes": result.grid.values[i], "reason": why}
                        for i, why in sorted(result.infeasible.items())],
        "hull": [{"capacity_bytes": v.capacity_bytes, "metric": v.metric,
                  "alpha_from": v.alpha_from,
                  "alpha_to": None if v.alpha_to == float("inf") else v.alpha_to}
                 for v in result.hull],
        "trace": [{"evaluations": t.evaluations, "seconds": t.seconds,
                   "objective": t.objective, "capacity_bytes": t.capacity_bytes}
                  for t in result.trace],
    }


def write_explore_run(out_dir: Path, result: ExploreResult,
                      workload: Workload) -> dict[str, Any]:
    """Writes explore.json and schedule.json into `out_dir` (created); returns the
    result object."""
    out_dir.mkdir(parents=True, exist_ok=True)
    data = explore_json(result, workload)
    c = result.candidate
    save_schedule(out_dir / "schedule.json", workload, result.hardware, c.lfa, c.dlsa,
                  c.program.tensors, f"explore:{result.method}", data["breakdown"])
    write_json_atomic(out_dir / "explore.json", data)
    return data
