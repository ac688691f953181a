"""`mipsched solve INSTANCE.json`: search the DLSA of a tile program whose LFA is fixed,
from the solution it stores (`stored_solution`, the rule `mipsched eval` and `simulate`
replay by too), within its time limit and gap target (ProgramOutcome)."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field

from mipsched.core import (
    Candidate,
    ModelRecord,
    Objective,
    SearchOptions,
    Trail,
    WindowSettings,
    seconds_left,
    stop_on_ctrl_c,
)
from mipsched.dlsa_starts import fastest_order, prefetch_affordable, prefetch_dlsa
from mipsched.errors import InputError
from mipsched.evaluate import Evaluation, evaluate, latency
from mipsched.formulations.bounds import program_bound
from mipsched.formulations.dlsa import whole_model_fits
from mipsched.formulations.dlsa_windows import improve_dlsa
from mipsched.heuristics.dlsa_search import search_dlsa
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.notation import Dlsa
from mipsched.schedule.tile_program import TileProgram
from mipsched.solve.budget import check_gap, search_deadline, stop_reason, target_latency
from mipsched.solve.network import simulator_rejection

#: Methods for a tile program whose LFA is fixed (only the DLSA is searched).
PROGRAM_METHODS = ("cpsat", "sa")
#: For a program too large for one DLSA model, the share of --time-limit that the
#: stage-2 annealer gets before the windowed model refines its result.
SA_FIRST_SHARE = 0.5
#: Time budget of `solve INSTANCE.json` when no --time-limit is given (seconds).
PROGRAM_SECONDS = 60.0


def stored_solution(program: TileProgram, name: str | None = None) -> tuple[str, Dlsa]:
    """The DLSA a run on `program` starts from or replays, with its name: the stored one
    called `name` (InputError when there is none), else without a name its `reference`
    solution, else its only stored one, else the default DLSA ('default')."""
    stored = list(program.solutions)
    chosen = name or ("reference" if "reference" in stored
                      else stored[0] if len(stored) == 1 else "default")
    if chosen in program.solutions:
        return chosen, program.solutions[chosen][0]
    if name is None:
        return chosen, default_dlsa(program)
    raise InputError(f"no stored solution '{chosen}' "
                     f"(has: {', '.join(program.solutions) or 'none'})")


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
    """Searches the DLSA of `program` from its `stored_solution` (or that DLSA's greedy
    prefetching variant when faster); replays the result in the simulator. The run ends
    by `started` (time.perf_counter(); default now) + `time_limit` seconds (default
    PROGRAM_SECONDS), its search by that less the reserve (reserve_seconds); with `gap`
    > 0, cpsat stops once the latency is within that certified gap of the program bound.
    Ctrl-C ends the search with its best so far."""
    stop = threading.Event()
    check_gap(gap)
    started = time.perf_counter() if started is None else started
    with stop_on_ctrl_c(stop):
        return _solve_program(program, method, seed, time_limit, workers,
                              windows or WindowSettings(), stop, gap, started)


@dataclass(frozen=True)
class _Search:
    """What one DLSA search of a program is given: its seed, CP-SAT threads, windows, the
    Ctrl-C event, when it started and must end (perf_counter), its latency target
    (cycles) and the trail of its improvements."""

    seed: int
    workers: int | None
    windows: WindowSettings
    stop: threading.Event
    started: float
    deadline: float
    target: int | None
    trail: Trail


def _solve_program(program: TileProgram, method: str, seed: int, time_limit: float | None,
                   workers: int | None, windows: WindowSettings, stop: threading.Event,
                   gap: float, started: float) -> ProgramOutcome:
    """solve_program once the Ctrl-C handler is installed."""
    if method not in PROGRAM_METHODS:
        raise InputError(f"method '{method}' does not apply to a tile program "
                         f"(available: {', '.join(PROGRAM_METHODS)})")
    limit = PROGRAM_SECONDS if time_limit is None else time_limit
    deadline = search_deadline(started, limit)
    name, origin = stored_solution(program)
    origin_ev = evaluate(program, origin)
    if not origin_ev.fits:
        raise InputError(f"the {name} DLSA of this program overflows the buffer")
    bound = program_bound(program)
    search = _Search(seed, workers, windows, stop, started, deadline,
                     target_latency(bound, gap), Trail(started=started))
    search.trail.offer(origin_ev.latency_cycles, origin_ev.latency_cycles)
    models: list[ModelRecord] = []
    dlsa, proven = _search_dlsa(program, method, _start(program, origin, origin_ev, deadline),
                                search, models)
    bound = max(bound, proven) if proven is not None else bound
    ev = evaluate(program, dlsa)
    stopped_by = stop_reason(SearchOptions(stop=stop, target_latency=search.target),
                             ev.latency_cycles, deadline)
    search.trail.offer(ev.latency_cycles, ev.latency_cycles)
    rejection = simulator_rejection(Candidate(None, program, dlsa, ev))
    if rejection is not None:  # never report what the simulator refuses: keep the origin
        models.append(ModelRecord("simulator", "rejected", reason=rejection, timed=False))
        dlsa, ev = origin, origin_ev
    status = "optimal" if ev.latency_cycles == bound else "feasible"
    return ProgramOutcome(method, status, dlsa, ev, bound, name, origin_ev.latency_cycles,
                          models, time.perf_counter() - started, seed, limit, gap,
                          stopped_by, list(search.trail.points))


def _start(program: TileProgram, origin: Dlsa, origin_ev: Evaluation,
           deadline: float) -> Dlsa:
    """Where the search starts: `origin`, or its greedy prefetching variant (in the faster
    of release and deadline order) when that is faster and affordable in half the time
    left."""
    if prefetch_affordable(program, origin, (deadline + time.perf_counter()) / 2):
        # at most half the time left
        prefetched, cycles = fastest_order(program, prefetch_dlsa(program, origin))
        if cycles < origin_ev.latency_cycles:
            return prefetched
    return origin


def _search_dlsa(program: TileProgram, method: str, start: Dlsa, search: _Search,
                 models: list[ModelRecord]) -> tuple[Dlsa, int | None]:
    """The best DLSA `method` finds from `start`, and the latency bound (cycles) its model
    proved (None: none); appends the models it solved to `models`."""
    if search.target is not None and latency(program, start) <= search.target:
        return start, None  # the start is within the gap target: nothing to search
    if method != "cpsat":
        return _anneal(program, start, search, search.deadline), None
    if not whole_model_fits(program):
        # too large for one model: anneal first (cheap, broad), then windows refine
        budget = search.deadline - search.started
        start = _anneal(program, start, search, search.started + SA_FIRST_SHARE * budget)
        start_latency = evaluate(program, start).latency_cycles
        search.trail.offer(start_latency, start_latency)
        models.append(ModelRecord("sa-dlsa", "feasible", objective=start_latency,
                                  wall_seconds=time.perf_counter() - search.started,
                                  workers=1))
    result = improve_dlsa(program, start, seconds_left(search.deadline), search.workers,
                          search.seed, search.windows, search.stop, search.target)
    models += result.records()
    return result.dlsa, result.lower_bound


def _anneal(program: TileProgram, start: Dlsa, search: _Search, until: float) -> Dlsa:
    """The stage-2 annealer's best DLSA from `start`, until `until` (perf_counter)."""
    return search_dlsa(program, start, None, Objective(), 1000 * len(program.tensors),
                       random.Random(search.seed), until, stop=search.stop).best.dlsa
