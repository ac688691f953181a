"""The one place that runs a solver (STYLE: one facade for solvers): OR-Tools CP-SAT,
and PuLP on HiGHS for the (mixed-integer) linear programs.

Models are built in `mipsched.formulations`; this module solves them under a time limit
and a thread count, and returns a frozen, typed result.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

import pulp

from mipsched.core import stop_on_ctrl_c

if TYPE_CHECKING:  # CP-SAT's types, for annotations only (see cp_sat)
    from ortools.sat.python import cp_model

    CpModel = cp_model.CpModel
    IntVar = cp_model.IntVar
    LinearExpr = cp_model.LinearExprT

LpProblem = pulp.LpProblem
LpVariable = pulp.LpVariable
LpExpression = pulp.LpAffineExpression
lp_sum = pulp.lpSum
MINIMISE = pulp.LpMinimize


@functools.cache
def cp_sat() -> ModuleType:
    """OR-Tools' CP-SAT module, imported on first use: it pulls in pandas, ~0.3 s of
    start-up that a run building no CP-SAT model (a short --time-limit, `zoo`, `eval`)
    is spared."""
    from ortools.sat.python import cp_model

    return cp_model


def new_model() -> CpModel:
    """An empty CP-SAT model."""
    return cp_sat().CpModel()


def _status_name(code: int) -> str:
    """optimal / feasible / infeasible / invalid / unknown for a CP-SAT status code."""
    cp = cp_sat()
    return {cp.OPTIMAL: "optimal", cp.FEASIBLE: "feasible", cp.INFEASIBLE: "infeasible",
            cp.MODEL_INVALID: "invalid"}.get(code, "unknown")


@dataclass(frozen=True)
class SolveStatus:
    """Outcome of one CP-SAT run. `objective` / `bound` are in the model's units."""

    status: str
    """optimal / feasible / infeasible / invalid / unknown (no solution in time)."""
    objective: float | None
    bound: float | None
    wall_seconds: float
    workers: int
    interrupted: bool = False
    """Ctrl-C or the caller's stop event ended the search."""

    @property
    def has_solution(self) -> bool:
        """Whether the run found a solution (optimal or feasible)."""
        return self.status in ("optimal", "feasible")


def timed_out(started: float) -> SolveStatus:
    """The status of a model whose building used up its time (no CP-SAT run):
    "unknown", with the seconds since `started` (time.perf_counter())."""
    return SolveStatus("unknown", None, None, time.perf_counter() - started, 0)


def default_workers() -> int:
    """CP-SAT threads when the caller gives none: one per CPU."""
    return max(1, os.cpu_count() or 1)


class Solution:
    """Values of a solved model's variables (valid only when a solution exists), read
    from the solver or from the solution a callback is handed."""

    def __init__(self, solver: cp_model.CpSolver | cp_model.CpSolverSolutionCallback
                 ) -> None:
        self._solver = solver

    def value(self, expr: LinearExpr) -> int:
        """The value of a variable or linear expression (model units)."""
        return int(self._solver.value(expr))

    def boolean(self, literal: IntVar) -> bool:
        """The value of a Boolean literal."""
        return bool(self._solver.boolean_value(literal))

    @property
    def objective(self) -> float:
        """The objective value of the solution (model units)."""
        return float(self._solver.objective_value)


def solve(model: cp_model.CpModel, time_limit: float | None, workers: int | None = None,
          seed: int = 0, stop: threading.Event | None = None,
          good_enough: Callable[[Solution], bool] | None = None
          ) -> tuple[SolveStatus, Solution]:
    """Solves `model` (which carries its objective and hints) for at most `time_limit`
    seconds. Ctrl-C (main thread) or `stop` ends the search with its best so far; Ctrl-C
    also sets `stop`, so that the caller's loop ends too. `good_enough`: called on every
    improving solution; the search ends at the first one it accepts (e.g. a makespan that
    reaches the certified-gap target)."""
    cp = cp_sat()
    solver = cp.CpSolver()
    threads = workers or default_workers()
    solver.parameters.num_workers = threads
    solver.parameters.random_seed = seed
    if time_limit is not None:
        solver.parameters.max_time_in_seconds = max(time_limit, 0.01)
    started = time.perf_counter()
    stop = stop or threading.Event()
    callback = None if good_enough is None else _callbacks()[0](good_enough)
    code = _run(solver, lambda: solver.solve(model, callback), stop)
    elapsed = time.perf_counter() - started
    status = _status_name(code)
    has = code in (cp.OPTIMAL, cp.FEASIBLE)
    return (SolveStatus(status, solver.objective_value if has else None,
                        solver.best_objective_bound if has else None, elapsed, threads,
                        stop.is_set()),
            Solution(solver))


#: How often a waiting solve looks at its stop event (seconds).
POLL_SECONDS = 0.05


def _run(solver: cp_model.CpSolver, call: Callable[[], int], stop: threading.Event) -> int:
    """`call()` (a solve of `solver`) in a worker thread, the caller's thread waiting: a
    Ctrl-C while it runs sets `stop` (main thread only), and a set `stop` ends the search.
    CP-SAT releases the GIL while it solves, so the wait costs nothing."""
    solver.parameters.catch_sigint_signal = False  # Ctrl-C is ours (see above)
    result: list[int] = []
    worker = threading.Thread(target=lambda: result.append(call()), daemon=True)
    try:
        with stop_on_ctrl_c(stop):
            worker.start()
            while worker.is_alive():
                if stop.is_set():
                    solver.stop_search()
                worker.join(POLL_SECONDS)
    finally:
        solver.stop_search()
        worker.join()
    return result[0]


@functools.cache
def _callbacks() -> tuple[type, type]:
    """The solution callbacks (StopWhen, Enumerator), defined on CP-SAT's first use."""
    base = cp_sat().CpSolverSolutionCallback

    class StopWhen(base):  # type: ignore[misc, valid-type]
        """Ends the search at the first solution `accept` takes."""

        def __init__(self, accept: Callable[[Solution], bool]) -> None:
            super().__init__()
            self._accept = accept

        def on_solution_callback(self) -> None:
            """Called by CP-SAT on every improving solution."""
            if self._accept(Solution(self)):
                self.stop_search()

    class Enumerator(base):  # type: ignore[misc, valid-type]
        """Hands every solution to `on_solution`; ends the search when it returns
        False."""

        def __init__(self, on_solution: Callable[[Solution], bool]) -> None:
            super().__init__()
            self._on_solution = on_solution
            self.stopped = False

        def on_solution_callback(self) -> None:
            """Called by CP-SAT on every solution."""
            if not self._on_solution(Solution(self)):
                self.stopped = True
                self.stop_search()

    return StopWhen, Enumerator


def enumerate_solutions(model: cp_model.CpModel, time_limit: float | None,
                        on_solution: Callable[[Solution], bool], seed: int = 0,
                        stop: threading.Event | None = None) -> bool:
    """Calls `on_solution` on every solution of `model` (which must have no objective)
    until it returns False, for at most `time_limit` seconds; single-threaded, as CP-SAT
    enumerates. True when every solution was seen (not stopped, not interrupted, not
    out of time)."""
    cp = cp_sat()
    solver = cp.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = seed
    solver.parameters.enumerate_all_solutions = True
    if time_limit is not None:
        solver.parameters.max_time_in_seconds = max(time_limit, 0.01)
    callback = _callbacks()[1](on_solution)
    stop = stop or threading.Event()
    code = _run(solver, lambda: solver.solve(model, callback), stop)
    return (not callback.stopped and not stop.is_set()
            and code in (cp.OPTIMAL, cp.INFEASIBLE))


@dataclass(frozen=True)
class MipStatus:
    """Outcome of one HiGHS run of a minimisation, in the model's units."""

    status: str
    """optimal / feasible (stopped by the time limit) / infeasible / unknown."""
    objective: float | None
    """The best solution's objective (None: no solution)."""
    bound: float | None
    """A proven lower bound on the minimum (None: none): HiGHS's dual bound for a MIP,
    which an optimal run brings within MIP_GAP of the minimum, the optimum for an LP
    solved to optimality."""
    wall_seconds: float


#: Relative gap at which HiGHS stops a MIP (its default, 1e-4, leaves a dual bound up to
#: 50 cycles below a 500,000-cycle optimum; the bounds built on these MIPs are whole
#: cycles).
MIP_GAP = 1e-9


def minimise(problem: pulp.LpProblem, time_limit: float | None) -> MipStatus:
    """Solves `problem` (a minimisation) with HiGHS on one thread within `time_limit`
    seconds (None: no limit); HiGHS's console output is suppressed.

    PuLP reports a run that HiGHS stopped at its time limit as "Optimal" with an integer
    feasible solution; only a solution status of optimal means HiGHS proved it, and
    even then a MIP's objective may exceed the minimum by the gap tolerance (MIP_GAP).
    So the bound of a MIP is always HiGHS's dual bound (plus the objective's constant,
    which PuLP does not pass to HiGHS)."""
    started = time.perf_counter()
    options = {"msg": False, "threads": 1, "gapRel": MIP_GAP}
    if time_limit is not None:
        options["timeLimit"] = max(time_limit, 0.01)
    with _quiet_stdout():
        problem.solve(pulp.HiGHS(**options))
    info = problem.solverModel.getInfo()
    if pulp.LpStatus[problem.status] == "Infeasible":
        return MipStatus("infeasible", None, None, time.perf_counter() - started)
    proven = problem.sol_status == pulp.LpSolutionOptimal
    has_solution = proven or problem.sol_status == pulp.LpSolutionIntegerFeasible
    objective = pulp.value(problem.objective) if has_solution else None
    if problem.isMIP():
        bound = info.mip_dual_bound
        # HiGHS bounds the objective without PuLP's constant term (unless it was given
        # the constant as its offset): shift the dual bound by what it was not given.
        shift = problem.objective.constant - problem.solverModel.getLp().offset_
        bound = bound + shift if bound is not None and abs(bound) < 1e30 else None
    else:
        bound = objective if proven else None
    status = "optimal" if proven else "feasible" if has_solution else "unknown"
    return MipStatus(status, objective, bound, time.perf_counter() - started)


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
    """Sends file descriptor 1 to /dev/null meanwhile: HiGHS prints a banner on
    construction whatever its options, which would corrupt `--json` output."""
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)
