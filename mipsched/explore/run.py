"""`mipsched explore NET`: one co-exploration run (explore_network) with any of the
methods of Cocco §5.3, its best capacity and schedule replayed in the simulator."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from mipsched.core import Candidate, InfeasibleError
from mipsched.explore.annealing import co_sa
from mipsched.explore.curve import HullVertex, curve_search, lower_hull
from mipsched.explore.genetic import co_ga, ga_per_capacity
from mipsched.explore.space import (
    DEFAULT_GRID,
    CapacityGrid,
    CoSpace,
    ExploreCost,
    Sample,
    TracePoint,
)
from mipsched.hw.model import Hardware
from mipsched.sim import SimResult
from mipsched.solve import replay_checked
from mipsched.workload.graph import Workload

METHODS = ("ga", "two-step", "sa", "curve")
"""ga: Cocco's GA with the capacity in the genome; two-step: grid search over
TWO_STEP_CAPACITIES capacities, then the partition GA at each with an equal share;
sa: annealing over (capacity, partition); curve: every capacity, warm-started upward,
read off the lower convex hull (curve.py)."""
TWO_STEP_CAPACITIES = 8
"""Capacities the two-step baseline tries (evenly spaced over the grid, largest first,
as Cocco's grid search runs)."""
DEFAULT_EVALUATIONS = 1000


@dataclass(frozen=True)
class ExploreResult:
    """What one co-exploration found. Units: bytes, pJ, cycles, seconds."""

    method: str
    cost: ExploreCost
    grid: CapacityGrid
    best: Sample
    hardware: Hardware
    """The base hardware with the best capacity (and the energies that follow it)."""
    candidate: Candidate
    simulation: SimResult
    evaluations: int
    """Samples scored (Cocco's count)."""
    lowerings: int
    """Distinct schedules lowered and evaluated (repairs included)."""
    seconds: float
    trace: list[TracePoint]
    per_capacity: dict[int, Sample]
    """Grid index -> the sample of least metric found at that capacity."""
    infeasible: dict[int, str]
    """Grid index -> why no schedule fits there (capacities that were tried)."""
    hull: list[HullVertex]
    """Lower convex hull of per_capacity: the best capacity for every alpha."""


def explore_network(workload: Workload, hardware: Hardware, method: str = "ga",
                    grid: CapacityGrid = DEFAULT_GRID, cost: ExploreCost | None = None,
                    evaluations: int = DEFAULT_EVALUATIONS, seed: int = 0,
                    time_limit: float | None = None, started: float | None = None,
                    on_sample: Callable[[CoSpace], None] | None = None) -> ExploreResult:
    """Co-explores the buffer capacity and the partition of `workload` with `method`
    within `evaluations` samples and `time_limit` seconds from `started`
    (time.perf_counter(); default now). Raises InfeasibleError when no capacity of the grid
    has a schedule, RuntimeError if the simulator refuses the best one (a bug)."""
    if method not in METHODS:
        raise InfeasibleError(f"method: '{method}' is not one of {', '.join(METHODS)}")
    begin = time.perf_counter() if started is None else started
    deadline = None if time_limit is None else begin + time_limit
    space = CoSpace(workload, hardware, grid, cost or ExploreCost(), evaluations, deadline,
                    begin, on_sample=on_sample)
    allowed = list(range(len(grid.values)))
    rng = random.Random(seed)
    if method == "ga":
        co_ga(space, allowed, rng)
    elif method == "sa":
        co_sa(space, allowed, rng)
    elif method == "curve":
        curve_search(space, allowed, rng)
    else:
        _two_step(space, allowed, rng)
    return _result(space, method, begin)


def _two_step(space: CoSpace, allowed: list[int], rng: random.Random) -> None:
    """Grid search (Cocco's GS+GA): TWO_STEP_CAPACITIES evenly spaced capacities, largest
    first, each the partition GA with an equal share of the budget left."""
    k = min(TWO_STEP_CAPACITIES, len(allowed))
    picks = sorted({allowed[round(j * (len(allowed) - 1) / max(k - 1, 1))] for j in range(k)},
                   reverse=True)
    ga_per_capacity(space, picks, rng)


def _result(space: CoSpace, method: str, begin: float) -> ExploreResult:
    """The best sample lowered, replayed in the simulator and packed with the run's record."""
    best = space.best
    if best is None:
        why = "; ".join(f"{space.grid.values[i]:,} B: {r}"
                        for i, r in sorted(space.infeasible.items())[-3:])
        raise InfeasibleError("no capacity of the grid has a schedule within the budget"
                              + (f" ({why})" if why else ""))
    part = space.partitioner(best.capacity_index)
    assert part is not None  # it produced the best sample
    candidate = part.candidate(best.cuts)
    sim, rejection = replay_checked(candidate)
    if sim is None or rejection is not None:
        raise RuntimeError(f"the simulator refuses the explored schedule: {rejection}")
    hull = lower_hull([(s.capacity_bytes, s.metric) for s in space.best_metric.values()])
    return ExploreResult(method, space.cost, space.grid, best, part.lowerer.hw, candidate,
                         sim, space.evaluations, space.lowerings,
                         time.perf_counter() - begin, list(space.trace),
                         dict(sorted(space.best_metric.items())), dict(space.infeasible), hull)
