"""Orchestration of `mipsched solve`: run a method, bound it, and describe the result
(machine-interface result object, certificate)."""

from __future__ import annotations

import importlib.metadata
import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mipsched.core import (
    OBJECTIVES,
    Bound,
    Candidate,
    InfeasibleError,
    MethodResult,
    ModelRecord,
    Objective,
    SearchOptions,
    Trail,
    WindowSettings,
    stop_on_ctrl_c,
)
from mipsched.dlsa_starts import prefetch_affordable, prefetch_dlsa
from mipsched.errors import InputError
from mipsched.evaluate import Evaluation, evaluate, latency, mac_utilization, utilization
from mipsched.formulations.bounds import (
    LatencyBound,
    compulsory_dram_bound,
    compute_bound,
    edp_bound,
    energy_bound,
    network_latency_bound,
    program_bound,
    strongest,
)
from mipsched.formulations.dlsa import whole_model_fits
from mipsched.formulations.dlsa_windows import improve_dlsa
from mipsched.formulations.feasibility import explain_infeasibility
from mipsched.formulations.lfa import SegmentCache
from mipsched.formulations.lfa.relaxation import (
    MAX_LAYERS,
    MAX_ORDERS,
    energy_relaxation_bound,
    relaxation_bound,
)
from mipsched.heuristics.auto import auto, cpsat, exact
from mipsched.heuristics.baseline import single_flg_start, unfused_baseline
from mipsched.heuristics.cocco import cocco_ga
from mipsched.heuristics.dlsa_search import search_dlsa
from mipsched.heuristics.partition import (
    RESULT_SECONDS_PER_TILE,
    dp_partition,
    greedy_fusion,
)
from mipsched.heuristics.soma_sa import soma_sa
from mipsched.hw.model import Hardware
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Dlsa
from mipsched.schedule.tile_program import TileProgram
from mipsched.sim import SimResult, SimulationError, simulate
from mipsched.workload.graph import Workload

#: Seconds a run may take when no --time-limit is given: the default budget, which a
#: method with a gap target (DEFAULT_GAPS) leaves as soon as it reaches that target.
DEFAULT_TIME_LIMIT = 60.0
#: Certified latency gap, (latency - bound) / latency, at which a method stops under the
#: default budget (with --time-limit the default gap is 0: the time given is used); the
#: methods not named run their own course (gap 0: exact proves optimality, the others
#: are the comparison baselines).
DEFAULT_GAPS = {"auto": 0.01, "cpsat": 0.01}
#: Kept back from --time-limit for what follows the search: replaying the schedule in
#: the simulator, the certificate, writing schedule.json and program.json, exiting.
#: Measured: 0.05 s for a result of a hundred tiles, 0.5 s (unloaded) for one of 10,240
#: (fsrcnn/edge/b4 with dp), for which the partition methods keep back more
#: (partition.RESULT_SECONDS_PER_TILE).
RESERVE_SECONDS = 0.3
#: ... plus this share of --time-limit (longer runs tend to return larger programs).
RESERVE_SHARE = 0.04
#: A search that ends within this many seconds of its deadline counts as stopped by the
#: time limit (CP-SAT's own clock starts after the model is loaded).
DEADLINE_SLACK = 0.05
#: Why a run stopped (certificate.json `stopped_by`).
STOP_REASONS = ("gap", "time_limit", "search_end", "ctrl_c")


@dataclass(frozen=True)
class Method:
    """A scheduling method: what it does and the function that runs it."""

    description: str
    run: Callable[[Lowerer, SearchOptions], MethodResult]
    anytime: bool = True
    """Whether it searches until its deadline (else it constructs one schedule and ends:
    its run never stops for the time limit)."""


#: Methods `solve` runs today.
METHODS: dict[str, Method] = {
    "baseline": Method("no fusion: every layer its own LG, tiling doubled until it fits, "
                       "double-buffered DLSA", unfused_baseline, anytime=False),
    "sa": Method("SoMa: two-stage simulated annealing (LFA, then DLSA) inside the buffer "
                 "allocator", soma_sa),
    "auto": Method("SA for 60 % of the time budget, then the CP-SAT LFA model and the "
                   "exact DLSA model on its best LFA(s)", auto),
    "cpsat": Method("the CP-SAT LFA segment model, then the exact DLSA model on its LFA",
                    cpsat),
    "exact": Method("SA for a quarter of the time budget, then branch and bound over LFAs "
                    "(CP-SAT) with the exact DLSA model: proves the latency optimum over "
                    "power-of-two tilings, or reports the certified gap", exact),
    "cocco": Method("Cocco's GA over partitions of the layer order (FLC set = DRAM cut set), "
                    "tiling from the core array's parallelism, double-buffered DLSA", cocco_ga),
    "greedy": Method("Halide-style greedy fusion of adjacent groups, Cocco's tiling rule, "
                     "double-buffered DLSA", greedy_fusion),
    "dp": Method("sequential DP over contiguous groups (at most 12 layers), Cocco's tiling "
                 "rule, double-buffered DLSA", dp_partition),
}


@dataclass(frozen=True)
class SolveOutcome:
    """What one `solve` run produced. `candidate` is None when status is infeasible."""

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


def reserve_seconds(time_limit: float) -> float:
    """Seconds of `time_limit` kept back for replaying, certifying and writing the
    result (see RESERVE_SECONDS)."""
    return RESERVE_SECONDS + RESERVE_SHARE * time_limit


def search_deadline(started: float, time_limit: float) -> float:
    """time.perf_counter() value at which the search of a run started at `started` with
    `time_limit` seconds must end: the limit less the reserve."""
    return started + time_limit - reserve_seconds(time_limit)


def target_latency(bound_cycles: int, gap: float) -> int | None:
    """The largest latency L (cycles) whose certified gap (L - bound) / L is at most
    `gap` (None when gap is 0: no target)."""
    if gap <= 0:
        return None
    latency = math.floor(bound_cycles / (1.0 - gap))
    while (latency + 1 - bound_cycles) <= gap * (latency + 1):
        latency += 1
    while latency > bound_cycles and (latency - bound_cycles) > gap * latency:
        latency -= 1
    return latency


def check_gap(gap: float | None) -> None:
    """Raises InputError unless gap is None or in [0, 1)."""
    if gap is not None and not 0.0 <= gap < 1.0:
        raise InputError(f"--gap must be at least 0 and below 1, not {gap:g}")


def stop_reason(options: SearchOptions, latency_cycles: int, deadline: float,
                kept_back: float = 0.0) -> str:
    """Why a search that has just returned stopped (one of STOP_REASONS): it counts as
    stopped by the time limit when it ended within `kept_back` seconds (what the
    method reserved for delivering its result) + DEADLINE_SLACK of `deadline`."""
    if options.stop.is_set():
        return "ctrl_c"
    if options.reached(latency_cycles):
        return "gap"
    if time.perf_counter() >= deadline - kept_back - DEADLINE_SLACK:
        return "time_limit"
    return "search_end"


def kept_back(result: MethodResult) -> float:
    """Seconds a method may have kept back from its deadline to deliver its result: the
    partition methods RESULT_SECONDS_PER_TILE per tile of their start (the 'unfused'
    stage)."""
    tiles = max((c.program.n_tiles for c in (result.best, *result.stages.values())),
                default=0)
    return RESULT_SECONDS_PER_TILE * tiles


def solve(workload: Workload, hw: Hardware, method: str = "baseline", seed: int = 0,
          time_limit: float | None = None, objective: str = "edp",
          workers: int | None = None, windows: WindowSettings | None = None,
          gap: float | None = None, started: float | None = None) -> SolveOutcome:
    """Runs `method` on the workload; never returns a schedule that overflows. Ctrl-C
    ends the search with its best so far.

    The run ends by `started` (time.perf_counter(); default: now) + `time_limit`
    seconds (default DEFAULT_TIME_LIMIT), its search by that less the reserve for the
    replay and the caller's files (reserve_seconds). `gap`: stop once the certified
    latency gap to the network bound is at most this (default: DEFAULT_GAPS without a
    `time_limit`, else 0)."""
    if method not in METHODS:
        raise InputError(f"unknown method '{method}' (available: {', '.join(METHODS)})")
    if objective not in OBJECTIVES:
        raise InputError(f"unknown objective '{objective}' (available: "
                         f"{', '.join(OBJECTIVES)})")
    check_gap(gap)
    started = time.perf_counter() if started is None else started
    limit = DEFAULT_TIME_LIMIT if time_limit is None else time_limit
    deadline = search_deadline(started, limit)
    if gap is None:  # a time limit given is time to use; the default budget stops early
        gap = DEFAULT_GAPS.get(method, 0.0) if time_limit is None else 0.0
    trail = Trail(started=started)
    bound = network_latency_bound(workload, hw)
    target = target_latency(bound.cycles, gap)
    common = {"seed": seed, "time_limit": limit, "gap_target": gap,
              "target_latency": target}
    reason = explain_infeasibility(workload, hw)
    if reason is not None:
        return SolveOutcome(method, "infeasible", None, bound, time.perf_counter() - started,
                            reason=reason, **common)
    options = SearchOptions(seed, max(0.0, deadline - time.perf_counter()),
                            OBJECTIVES[objective], workers,
                            windows=windows or WindowSettings(), target_latency=target,
                            trail=trail)
    try:
        with stop_on_ctrl_c(options.stop):
            result = METHODS[method].run(Lowerer(workload, hw), options)
    except InfeasibleError as err:
        return SolveOutcome(method, "infeasible", None, bound,
                            time.perf_counter() - started, reason=str(err), **common)
    candidate = result.best
    ev = candidate.evaluation
    stopped_by = (stop_reason(options, ev.latency_cycles, deadline, kept_back(result))
                  if METHODS[method].anytime else "search_end")
    trail.offer(ev.latency_cycles, options.objective.cost(ev))
    common.update(stopped_by=stopped_by, trail=list(trail.points))
    rejection = replay_rejection(candidate)
    if rejection is not None:
        return SolveOutcome(method, "error", None, bound, time.perf_counter() - started,
                            reason=f"the {method} schedule failed the simulator: "
                                   f"{rejection}", **common)
    if result.bounds:
        bound = strongest([*bound.bounds, *result.bounds])
    latency_optimal = ev.latency_cycles <= bound.cycles
    status = ("optimal" if latency_optimal and (objective == "latency" or method == "exact")
              else "feasible")
    return SolveOutcome(method, status, candidate, bound, time.perf_counter() - started,
                        stages=result.stages, models=result.models, **common)


def replay_rejection(candidate: Candidate) -> str | None:
    """Why the simulator refuses a method's schedule (None: it replays it to the same
    latency, energy and peak buffer as the evaluator)."""
    try:
        sim = simulate(candidate.program, candidate.dlsa)
    except SimulationError as err:
        return str(err)
    ev = candidate.evaluation
    if (sim.latency_cycles, sim.peak_buffer_bytes) != (ev.latency_cycles,
                                                        ev.peak_buffer_bytes):
        return (f"simulated {sim.latency_cycles} cycles / {sim.peak_buffer_bytes} B peak, "
                f"but the evaluator says {ev.latency_cycles} / {ev.peak_buffer_bytes}")
    if abs(sim.energy_pj - ev.energy_pj) > 1e-9 * abs(ev.energy_pj):
        return f"simulated energy {sim.energy_pj} pJ, evaluator {ev.energy_pj} pJ"
    return None


def evaluation_json(ev: Evaluation, workload: Workload | None) -> dict[str, Any]:
    """The machine-interface figures of one evaluated schedule (DESIGN §5)."""
    return {
        "latency_cycles": ev.latency_cycles,
        "energy_pj": ev.energy_pj,
        "edp": ev.edp,
        "utilization": ev.utilization,
        "mac_utilization": ev.mac_utilization,
        "peak_buffer_bytes": ev.peak_buffer_bytes,
        "avg_buffer_bytes": ev.avg_buffer_bytes,
        "dram_bytes": ev.dram_bytes,
        "compute_cycles": ev.compute_cycles,
        "dram_cycles": ev.dram_cycles,
        "compute_busy": ev.compute_busy,
        "dram_busy": ev.dram_busy,
        "stall_cycles": ev.stall_cycles,
        "total_macs": workload.total_macs if workload else None,
        "weight_bytes": workload.total_weight_bytes if workload else None,
    }


def simulation_json(sim: SimResult, workload: Workload | None,
                    program: TileProgram) -> dict[str, Any]:
    """The machine-interface figures of one simulated schedule (DESIGN §5)."""
    return {
        "latency_cycles": sim.latency_cycles,
        "energy_pj": sim.energy_pj,
        "edp": sim.energy_pj * sim.latency_cycles,
        "utilization": utilization(program, sim.latency_cycles),
        "mac_utilization": mac_utilization(program, sim.latency_cycles),
        "peak_buffer_bytes": sim.peak_buffer_bytes,
        "avg_buffer_bytes": sim.avg_buffer_bytes,
        "time_avg_buffer_bytes": sim.time_avg_buffer_bytes,
        "dram_bytes": sum(t.bytes for t in sim.transfers),
        "compute_busy": sim.compute_busy,
        "dram_busy": sim.dram_busy,
        "stall_cycles": sim.stall_cycles,
        "stalled_tiles": len(sim.stalls),
        "energy_by_component": sim.energy_by_component,
        "total_macs": workload.total_macs if workload else None,
        "weight_bytes": workload.total_weight_bytes if workload else None,
    }


def outcome_json(outcome: SolveOutcome, workload: Workload) -> dict[str, Any]:
    """Result object of `solve --json`."""
    out: dict[str, Any] = {"network": workload.name, "batch": workload.batch}
    if outcome.candidate is not None:
        c = outcome.candidate
        out.update(evaluation_json(c.evaluation, workload))
        lfa = c.lfa
        out.update(n_lg=len(lfa.dram_cuts) + 1, n_flg=len(lfa.flc) + 1,
                   n_tiles=c.program.n_tiles, n_dram_tensors=len(c.program.tensors),
                   gap=(c.evaluation.latency_cycles - outcome.bound.cycles)
                   / c.evaluation.latency_cycles)
    else:
        out.update(latency_cycles=None, energy_pj=None, edp=None, utilization=None,
                   mac_utilization=None, peak_buffer_bytes=None, avg_buffer_bytes=None,
                   dram_bytes=None, gap=None,
                   total_macs=workload.total_macs, weight_bytes=workload.total_weight_bytes)
    out.update(method=outcome.method, status=outcome.status,
               lower_bound_cycles=outcome.bound.cycles, wall_seconds=outcome.wall_seconds,
               gap_target=outcome.gap_target, stopped_by=outcome.stopped_by)
    if outcome.reason:
        out["reason"] = outcome.reason
    return out


def certificate_json(outcome: SolveOutcome, workload: Workload, hw: Hardware) -> dict[str, Any]:
    """certificate.json (DESIGN §4): what was solved, how, and how far from the bound."""
    c = outcome.candidate
    ev = c.evaluation if c else None
    return {
        "format": "mipsched-certificate",
        "version": 1,
        "workload": {"name": workload.name, "batch": workload.batch,
                     "digest": workload.digest()},
        "hardware": {"name": hw.name, "digest": hw.digest()},
        "method": outcome.method,
        "seed": outcome.seed,
        "time_limit_s": outcome.time_limit,
        "wall_seconds": outcome.wall_seconds,
        "solver_versions": {pkg: _version(pkg) for pkg in ("mipsched", "ortools", "pulp")},
        "incumbent": None if ev is None else {
            "latency_cycles": ev.latency_cycles, "energy_pj": ev.energy_pj, "edp": ev.edp},
        "lower_bound": bounds_json(outcome.bound, workload, hw),
        "gap": None if ev is None else
        (ev.latency_cycles - outcome.bound.cycles) / ev.latency_cycles,
        "status": outcome.status,
        "reason": outcome.reason,
        "gap_target": outcome.gap_target,
        "target_latency_cycles": outcome.target_latency,
        "stopped_by": outcome.stopped_by,
        "trail": trail_json(outcome.trail),
        "models": [m.to_json() for m in outcome.models],
    }


def trail_json(points: list[tuple[float, int, float]]) -> list[dict[str, Any]]:
    """The certificate's `trail`: one object per improvement of the best schedule."""
    return [{"seconds": seconds, "latency_cycles": latency, "cost": cost}
            for seconds, latency, cost in points]


def bounds_json(bound: LatencyBound, workload: Workload, hw: Hardware) -> dict[str, Any]:
    """Every bound with its derivation; latency_cycles is the binding one."""
    energy = energy_bound(workload, hw, bound.cycles)
    edp = edp_bound(energy, bound)
    return {"latency_cycles": bound.cycles, "binding": bound.binding,
            "components": bound.components, "derivation": bound.derivation,
            "energy_pj": energy.value, "edp": edp.value,
            "bounds": [{"name": b.name, "value": b.value, "derivation": b.derivation}
                       for b in (*bound.bounds, energy, edp)]}


#: Time for the LFA relaxations of `mipsched bound` when no --time-limit is given (s).
RELAXATION_SECONDS = 60.0


@dataclass(frozen=True)
class BoundReport:
    """Every bound of a workload on a hardware (`mipsched bound`)."""

    latency: LatencyBound
    energy: Bound
    edp: Bound
    skipped: dict[str, str]
    """Bounds not computed, and why."""
    wall_seconds: float


RELAXATION_SKIPPED = (f"not every computing order covered in time (or more than "
                      f"{MAX_ORDERS} orders): raise --time-limit")


def bound_report(workload: Workload, hw: Hardware, time_limit: float | None = None,
                 workers: int | None = None, started: float | None = None) -> BoundReport:
    """The network bounds, and for nets of at most MAX_LAYERS layers the LFA relaxations
    of latency and energy (CP-SAT, each given half the time). With `time_limit`, the run
    ends by `started` (time.perf_counter(); default now) + `time_limit` seconds, less the
    reserve for reporting (reserve_seconds); without, each relaxation gets half of
    RELAXATION_SECONDS."""
    started = time.perf_counter() if started is None else started
    deadline = None if time_limit is None else search_deadline(started, time_limit)
    latency_bounds = [compute_bound(workload, hw), compulsory_dram_bound(workload, hw)]
    skipped: dict[str, str] = {}
    relaxed_energy = None
    n = len(workload.layers)
    if n > MAX_LAYERS:
        reason = f"{n} layers: computed for nets of at most {MAX_LAYERS}"
        skipped = {"lfa_relaxation": reason, "lfa_energy": reason}
    else:
        lowerer = Lowerer(workload, hw)
        segments: SegmentCache = {}
        upper_cycles, upper_pj = _relaxation_upper_bounds(lowerer, deadline)
        cycles, complete = relaxation_bound(lowerer, _relaxation_seconds(deadline, 0.5),
                                            workers, shared=segments, upper=upper_cycles)
        energy_pj, energy_complete = energy_relaxation_bound(
            lowerer, _relaxation_seconds(deadline, 1.0), workers, shared=segments,
            upper_pj=upper_pj)
        if complete:
            latency_bounds.append(Bound(
                "lfa_relaxation", math.ceil(cycles),
                "least over every LFA (all orders, FLC and DRAM cut sets, power-of-two "
                "tilings) of its ideal raised by head-and-tail terms (CP-SAT, "
                "formulations/exact.py)"))
        else:
            skipped["lfa_relaxation"] = RELAXATION_SKIPPED
        if energy_complete:
            relaxed_energy = energy_pj
        else:
            skipped["lfa_energy"] = RELAXATION_SKIPPED
    best = strongest(latency_bounds)
    energy = energy_bound(workload, hw, best.cycles)
    if relaxed_energy is not None and \
            relaxed_energy + hw.static_pj_per_cycle * best.cycles > energy.value:
        energy = Bound("lfa_energy", relaxed_energy + hw.static_pj_per_cycle * best.cycles,
                       "least energy over every LFA (all orders, FLC and DRAM cut sets, "
                       "power-of-two tilings; energy does not depend on the DLSA) + static "
                       "power x the latency bound")
    return BoundReport(best, energy, edp_bound(energy, best), skipped,
                       time.perf_counter() - started)


def _relaxation_seconds(deadline: float | None, share: float) -> float:
    """`share` of the seconds left until `deadline` (time.perf_counter()); without a
    deadline, half of RELAXATION_SECONDS (each relaxation's time)."""
    if deadline is None:
        return RELAXATION_SECONDS / 2
    return share * max(deadline - time.perf_counter(), 0.0)


def _relaxation_upper_bounds(lowerer: Lowerer, deadline: float | None = None
                             ) -> tuple[int | None, float | None]:
    """Latency (cycles) and energy without static power (pJ) of quick schedules with
    power-of-two tilings (the better of the unfused and the single-FLG start, tried until
    `deadline`), which the LFA relaxations' least values cannot exceed; None when the
    unfused one does not fit."""
    try:
        unfused = unfused_baseline(lowerer).best
    except InfeasibleError:
        return None, None
    fused = single_flg_start(lowerer, Objective(), unfused.lfa.order, deadline=deadline)
    found = [c for c in (unfused, fused) if c is not None]
    return (min(c.evaluation.latency_cycles for c in found),
            min(c.program.energy_pj for c in found))


def bound_report_json(report: BoundReport, workload: Workload, hw: Hardware
                      ) -> dict[str, Any]:
    """Result object of `bound --json`."""
    return {"network": workload.name, "batch": workload.batch, "hardware": hw.name,
            "total_macs": workload.total_macs, "weight_bytes": workload.total_weight_bytes,
            "lower_bound_cycles": report.latency.cycles, "binding": report.latency.binding,
            "energy_pj": report.energy.value, "edp": report.edp.value,
            "bounds": [{"name": b.name, "value": b.value, "derivation": b.derivation}
                       for b in (*report.latency.bounds, report.energy, report.edp)],
            "skipped": report.skipped, "wall_seconds": report.wall_seconds}


def _version(pkg: str) -> str | None:
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return None


#: Methods for a tile program whose LFA is fixed (only the DLSA is searched).
PROGRAM_METHODS = ("cpsat", "sa")
#: For a program too large for one DLSA model, the share of --time-limit that the
#: stage-2 annealer gets before the windowed model refines its result.
SA_FIRST_SHARE = 0.5
#: Time budget of `solve INSTANCE.json` when no --time-limit is given (seconds).
PROGRAM_SECONDS = 60.0


@dataclass(frozen=True)
class ProgramOutcome:
    """Result of solving the DLSA of a fixed tile program."""

    method: str
    status: str
    """optimal (latency equals a proven bound) / feasible."""
    dlsa: Dlsa
    evaluation: Evaluation
    lower_bound_cycles: int
    """The program bound (ideal, head and tail), raised to the model's proven bound."""
    start_name: str
    """Which DLSA the search started from (reference, default)."""
    start_latency: int
    models: list[ModelRecord]
    wall_seconds: float
    seed: int = 0
    time_limit: float | None = None
    gap_target: float = 0.0
    stopped_by: str = "search_end"
    """One of STOP_REASONS."""
    trail: list[tuple[float, int, float]] = field(default_factory=list)
    """(seconds since the run started, latency in cycles, latency) per improvement."""


def solve_program(program: TileProgram, method: str = "cpsat", seed: int = 0,
                  time_limit: float | None = None, workers: int | None = None,
                  windows: WindowSettings | None = None, gap: float = 0.0,
                  started: float | None = None) -> ProgramOutcome:
    """Searches the DLSA of `program`, starting from its `reference` solution when it has
    one, else its only stored one, else the default DLSA (or that DLSA's greedy
    prefetching variant when faster); replays the result in the simulator. The run ends
    by `started` (time.perf_counter(); default now) + `time_limit` (default
    PROGRAM_SECONDS), its search by that less the reserve (reserve_seconds); with `gap`
    > 0, cpsat stops once the latency is within that certified gap of the program bound.
    Ctrl-C ends the search with its best so far."""
    stop = threading.Event()
    check_gap(gap)
    started = time.perf_counter() if started is None else started
    with stop_on_ctrl_c(stop):
        return _solve_program(program, method, seed, time_limit, workers,
                              windows or WindowSettings(), stop, gap, started)


def _solve_program(program: TileProgram, method: str, seed: int, time_limit: float | None,
                   workers: int | None, windows: WindowSettings, stop: threading.Event,
                   gap: float, started: float) -> ProgramOutcome:
    if method not in PROGRAM_METHODS:
        raise InputError(f"method '{method}' does not apply to a tile program "
                         f"(available: {', '.join(PROGRAM_METHODS)})")
    limit = PROGRAM_SECONDS if time_limit is None else time_limit
    deadline = search_deadline(started, limit)
    budget = deadline - started
    trail = Trail(started=started)
    stored = list(program.solutions)
    name = ("reference" if "reference" in stored
            else stored[0] if len(stored) == 1 else "default")
    origin = program.solutions[name][0] if name in program.solutions else default_dlsa(program)
    origin_ev = evaluate(program, origin)
    if not origin_ev.fits:
        raise InputError(f"the {name} DLSA of this program overflows the buffer")
    models: list[ModelRecord] = []
    bound = program_bound(program)
    target = target_latency(bound, gap)
    trail.offer(origin_ev.latency_cycles, origin_ev.latency_cycles)
    start = origin
    if prefetch_affordable(program, origin, (deadline + time.perf_counter()) / 2):
        prefetched = prefetch_dlsa(program, origin)  # at most half the time left
        if latency(program, prefetched) < origin_ev.latency_cycles:
            start = prefetched
    reached = target is not None and latency(program, start) <= target
    if reached:  # the start is within the gap target: nothing to search
        dlsa = start
    elif method == "cpsat":
        if not whole_model_fits(program):
            # too large for one model: anneal first (cheap, broad), then windows refine
            start = search_dlsa(program, start, None, Objective(),
                                1000 * len(program.tensors), random.Random(seed),
                                started + SA_FIRST_SHARE * budget, stop=stop).best.dlsa
            start_latency = evaluate(program, start).latency_cycles
            trail.offer(start_latency, start_latency)
            models.append(ModelRecord("sa-dlsa", "feasible", objective=start_latency,
                                      wall_seconds=time.perf_counter() - started, workers=1))
        result = improve_dlsa(program, start, max(deadline - time.perf_counter(), 0.0),
                              workers, seed, windows, stop, target)
        dlsa = result.dlsa
        if result.lower_bound is not None:
            bound = max(bound, result.lower_bound)
        models += result.records()
    else:
        dlsa = search_dlsa(program, start, None, Objective(), 1000 * len(program.tensors),
                           random.Random(seed), deadline, stop=stop).best.dlsa
    ev = evaluate(program, dlsa)
    options = SearchOptions(stop=stop, target_latency=target)
    stopped_by = stop_reason(options, ev.latency_cycles, deadline)
    trail.offer(ev.latency_cycles, ev.latency_cycles)
    rejection = replay_rejection(Candidate(None, program, dlsa, ev))
    if rejection is not None:  # never report what the simulator refuses: keep the origin
        models.append(ModelRecord("simulator", "rejected", reason=rejection, timed=False))
        dlsa, ev = origin, origin_ev
    status = "optimal" if ev.latency_cycles == bound else "feasible"
    return ProgramOutcome(method, status, dlsa, ev, bound, name, origin_ev.latency_cycles,
                          models, time.perf_counter() - started, seed, limit, gap,
                          stopped_by, list(trail.points))


def program_json(outcome: ProgramOutcome, program: TileProgram) -> dict[str, Any]:
    """Result object of `solve INSTANCE.json --json`."""
    ev = outcome.evaluation
    reference = program.solutions.get("reference")
    totals = program.totals
    return {
        "instance": program.name,
        **evaluation_json(ev, None),
        "total_macs": totals.total_macs if totals else None,
        "weight_bytes": totals.weight_bytes if totals else None,
        "method": outcome.method,
        "status": outcome.status,
        "lower_bound_cycles": outcome.lower_bound_cycles,
        "gap": (ev.latency_cycles - outcome.lower_bound_cycles) / ev.latency_cycles,
        "ideal_cycles": program.ideal_cycles,
        "reference_latency_cycles": reference[1] if reference else None,
        "start": outcome.start_name,
        "start_latency_cycles": outcome.start_latency,
        "wall_seconds": outcome.wall_seconds,
    }


def program_certificate(outcome: ProgramOutcome, program: TileProgram) -> dict[str, Any]:
    """certificate.json for a solved tile program."""
    ev = outcome.evaluation
    return {
        "format": "mipsched-certificate",
        "version": 1,
        "instance": {"name": program.name, "source": program.source,
                     "tiles": program.n_tiles, "dram_tensors": len(program.tensors)},
        "method": outcome.method,
        "seed": outcome.seed,
        "time_limit_s": outcome.time_limit,
        "solver_versions": {pkg: _version(pkg) for pkg in ("mipsched", "ortools", "pulp")},
        "incumbent": {"latency_cycles": ev.latency_cycles, "energy_pj": ev.energy_pj,
                      "edp": ev.edp},
        "lower_bound": {"latency_cycles": outcome.lower_bound_cycles,
                        "components": {"ideal_cycles": program.ideal_cycles},
                        "derivation": "the program bound (max(sum of tile cycles, sum of "
                                      "DRAM cycles) and head-and-tail terms, "
                                      "bounds.program_bound), raised to the DLSA model's "
                                      "proven bound when the whole program was solved"},
        "gap": (ev.latency_cycles - outcome.lower_bound_cycles) / ev.latency_cycles,
        "status": outcome.status,
        "reason": None,
        "gap_target": outcome.gap_target,
        "stopped_by": outcome.stopped_by,
        "trail": trail_json(outcome.trail),
        "models": [m.to_json() for m in outcome.models],
        "wall_seconds": outcome.wall_seconds,
    }
