"""`mipsched solve NET`: run a method on a network within its time limit and gap target,
replay its schedule in the simulator, and bound it (SolveOutcome)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mipsched.core import (
    OBJECTIVES,
    Candidate,
    InfeasibleError,
    MethodResult,
    ModelRecord,
    SearchOptions,
    Trail,
    WindowSettings,
    seconds_left,
    stop_on_ctrl_c,
)
from mipsched.errors import InputError
from mipsched.evaluate import Evaluation
from mipsched.formulations.bounds import LatencyBound
from mipsched.formulations.feasibility import explain_infeasibility
from mipsched.heuristics.partition import RESULT_SECONDS_PER_TILE
from mipsched.hw.model import Hardware
from mipsched.schedule.lowering import Lowerer
from mipsched.sim import SimResult, SimulationError, simulate
from mipsched.solve.bounds import (
    RUN_BOUND_SHARE,
    WEIGHT_ORDER_SECONDS,
    raised,
    run_bound,
)
from mipsched.solve.budget import check_gap, search_deadline, stop_reason, target_latency
from mipsched.solve.gap_split import GapSplit, gap_split
from mipsched.solve.methods import METHODS
from mipsched.workload.graph import Workload

#: Seconds a run may take when no --time-limit is given: the default budget, which a
#: method with a gap target (DEFAULT_GAPS) leaves as soon as it reaches that target.
DEFAULT_TIME_LIMIT = 60.0
#: Certified latency gap, (latency - bound) / latency, at which a method stops under the
#: default budget (with --time-limit the default gap is 0: the time given is used); the
#: methods not named run their own course (gap 0: exact proves optimality, the others
#: are the comparison baselines).
DEFAULT_GAPS = {"auto": 0.01, "cpsat": 0.01}


@dataclass(frozen=True)
class SolveOutcome:
    """What one `solve_network` run produced. `candidate` is None when status is
    infeasible or error."""

    method: str
    status: str
    """optimal / feasible / infeasible / error (the simulator rejected the method's
    schedule: a bug of that method, reported instead of the schedule)."""
    candidate: Candidate | None
    bound: LatencyBound
    wall_seconds: float
    seed: int
    time_limit: float | None
    reason: str | None = None
    stages: dict[str, Candidate] = field(default_factory=dict)
    """Named intermediate schedules of the method (SA: stage1, stage2)."""
    models: list[ModelRecord] = field(default_factory=list)
    """Models the method solved (for the certificate)."""
    gap_target: float = 0.0
    """Certified latency gap the run was asked to stop at (0: none)."""
    target_latency: int | None = None
    """The largest latency within `gap_target` of the bound (cycles; None: no target)."""
    stopped_by: str = "search_end"
    """One of STOP_REASONS: the gap target was reached, the time limit passed, the
    method ended on its own, or Ctrl-C."""
    trail: list[tuple[float, int, float]] = field(default_factory=list)
    """Each improvement of the best schedule: (seconds since the run started, latency
    in cycles, objective cost)."""
    objective: str = "edp"
    """What the search minimised (core.OBJECTIVES: latency, energy or edp)."""
    gap_split: GapSplit | None = None
    """Where the schedule's latency lies above the compute bound (None: no schedule, or
    a bound without per-layer charges)."""


def kept_back(result: MethodResult) -> float:
    """Seconds a method may have kept back from its deadline to deliver its result: the
    partition methods RESULT_SECONDS_PER_TILE per tile of their start (the 'unfused'
    stage)."""
    tiles = max((c.program.n_tiles for c in (result.best, *result.stages.values())),
                default=0)
    return RESULT_SECONDS_PER_TILE * tiles


def solve_network(workload: Workload, hw: Hardware, method: str = "baseline", seed: int = 0,
                  time_limit: float | None = None, objective: str = "edp",
                  workers: int | None = None, windows: WindowSettings | None = None,
                  gap: float | None = None, started: float | None = None,
                  warm_start: Candidate | None = None) -> SolveOutcome:
    """Runs `method` on the workload; never returns a schedule that overflows. Ctrl-C
    ends the search with its best so far. The run ends by `started`
    (time.perf_counter(); default: now) + `time_limit` seconds (default
    DEFAULT_TIME_LIMIT), its search by that less the reserve for the replay and the
    caller's files (reserve_seconds). `gap`: stop once the certified latency gap to the
    network bound is at most this (default: DEFAULT_GAPS without a `time_limit`, else 0).
    `warm_start`: a schedule of this network on `hw` (solve.warm.transferred) that the
    search starts from where it can and that the result never falls behind by the
    objective."""
    _check_choices(method, objective, gap)
    started = time.perf_counter() if started is None else started
    limit = DEFAULT_TIME_LIMIT if time_limit is None else time_limit
    deadline = search_deadline(started, limit)
    if gap is None:  # a time limit given is time to use; the default budget stops early
        gap = DEFAULT_GAPS.get(method, 0.0) if time_limit is None else 0.0
    trail = Trail(started=started)
    bound = run_bound(workload, hw, min(WEIGHT_ORDER_SECONDS, RUN_BOUND_SHARE * limit))
    target = target_latency(bound.cycles, gap)
    common = {"seed": seed, "time_limit": limit, "gap_target": gap,
              "target_latency": target, "objective": objective}
    reason = explain_infeasibility(workload, hw)
    if reason is not None:
        return SolveOutcome(method, "infeasible", None, bound, time.perf_counter() - started,
                            reason=reason, **common)
    options = SearchOptions(seed, seconds_left(deadline), OBJECTIVES[objective], workers,
                            windows=windows or WindowSettings(), target_latency=target,
                            trail=trail, start=warm_start)
    try:
        with stop_on_ctrl_c(options.stop):
            result = METHODS[method].run(Lowerer(workload, hw), options)
    except InfeasibleError as err:
        if warm_start is None:
            return SolveOutcome(method, "infeasible", None, bound,
                                time.perf_counter() - started, reason=str(err), **common)
        result = MethodResult(warm_start)
    result = _not_behind(result, warm_start, OBJECTIVES[objective].cost)
    return _judge(method, objective, result, options, bound, deadline, started, common)


def _not_behind(result: MethodResult, warm_start: Candidate | None,
                cost: Callable[[Evaluation], float]) -> MethodResult:
    """`result`, or the warm start as its best (stage 'warm_start') when that is better by
    the objective `cost`."""
    if warm_start is None or cost(result.best.evaluation) <= cost(warm_start.evaluation):
        return result
    return dataclasses.replace(result, best=warm_start,
                               stages={**result.stages, "warm_start": warm_start})


def _check_choices(method: str, objective: str, gap: float | None) -> None:
    """Raises InputError for an unknown method or objective, or a gap outside [0, 1)."""
    if method not in METHODS:
        raise InputError(f"unknown method '{method}' (available: {', '.join(METHODS)})")
    if objective not in OBJECTIVES:
        raise InputError(f"unknown objective '{objective}' (available: "
                         f"{', '.join(OBJECTIVES)})")
    check_gap(gap)


def _judge(method: str, objective: str, result: MethodResult, options: SearchOptions,
           bound: LatencyBound, deadline: float, started: float,
           common: dict[str, Any]) -> SolveOutcome:
    """The outcome of a method's `result`: why its search stopped, the simulator's
    verdict on its schedule, the bound raised by what it proved, and its status."""
    candidate = result.best
    ev = candidate.evaluation
    stopped_by = (stop_reason(options, ev.latency_cycles, deadline, kept_back(result))
                  if METHODS[method].anytime else "search_end")
    trail = options.trail
    trail.offer(ev.latency_cycles, options.objective.cost(ev))
    common.update(stopped_by=stopped_by, trail=list(trail.points))
    replay, rejection = replay_checked(candidate)
    if rejection is not None:
        return SolveOutcome(method, "error", None, bound, time.perf_counter() - started,
                            reason=f"the {method} schedule failed the simulator: "
                                   f"{rejection}", **common)
    bound = raised(bound, result.bounds)
    latency_optimal = ev.latency_cycles <= bound.cycles
    status = ("optimal" if latency_optimal and (objective == "latency" or method == "exact")
              else "feasible")
    split = None if replay is None else gap_split(replay, bound)
    return SolveOutcome(method, status, candidate, bound, time.perf_counter() - started,
                        stages=result.stages, models=result.models, gap_split=split,
                        **common)


def simulator_rejection(candidate: Candidate) -> str | None:
    """The simulator's verdict on a method's schedule: why it refuses it, or None when it
    replays it to the same latency (cycles), energy (pJ) and peak buffer (bytes) as the
    evaluator."""
    return replay_checked(candidate)[1]


def replay_checked(candidate: Candidate) -> tuple[SimResult | None, str | None]:
    """The simulator's replay of a method's schedule and its verdict (see
    simulator_rejection); the replay is None when the simulator refuses the schedule."""
    try:
        sim = simulate(candidate.program, candidate.dlsa)
    except SimulationError as err:
        return None, str(err)
    ev = candidate.evaluation
    if (sim.latency_cycles, sim.peak_buffer_bytes) != (ev.latency_cycles,
                                                        ev.peak_buffer_bytes):
        return sim, (f"simulated {sim.latency_cycles} cycles / {sim.peak_buffer_bytes} B "
                     f"peak, but the evaluator says {ev.latency_cycles} / "
                     f"{ev.peak_buffer_bytes}")
    if abs(sim.energy_pj - ev.energy_pj) > 1e-9 * abs(ev.energy_pj):
        return sim, f"simulated energy {sim.energy_pj} pJ, evaluator {ev.energy_pj} pJ"
    return sim, None
