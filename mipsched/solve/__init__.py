"""Orchestration: run a method on a network (`solve_network`) or the DLSA search on a
tile program (`solve_program`), bound a network (`bound_report`), compare methods
(`compare_methods`). The schedules and bounds come from the layers below; what is written
where is report.results'."""

from mipsched.solve.bounds import BoundReport, bound_report
from mipsched.solve.budget import STOP_REASONS, target_latency
from mipsched.solve.compare import BOUND, CompareRow, compare_methods
from mipsched.solve.methods import METHODS, Method
from mipsched.solve.network import (
    DEFAULT_GAPS,
    DEFAULT_TIME_LIMIT,
    SolveOutcome,
    replay_checked,
    simulator_rejection,
    solve_network,
)
from mipsched.solve.program import (
    PROGRAM_METHODS,
    ProgramOutcome,
    solve_program,
    stored_solution,
)

__all__ = [
    "BOUND",
    "DEFAULT_GAPS",
    "DEFAULT_TIME_LIMIT",
    "METHODS",
    "PROGRAM_METHODS",
    "STOP_REASONS",
    "BoundReport",
    "CompareRow",
    "Method",
    "ProgramOutcome",
    "SolveOutcome",
    "bound_report",
    "compare_methods",
    "replay_checked",
    "simulator_rejection",
    "solve_network",
    "solve_program",
    "stored_solution",
    "target_latency",
]
