"""What every search method shares: the candidate schedule, the objective, options, and
the evaluation of an LFA under the default DLSA."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from mipsched.errors import InputError
from mipsched.evaluate import Evaluation, evaluate
from mipsched.formulations.bounds import Bound
from mipsched.formulations.dlsa_windows import WindowSettings
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Dlsa, Lfa, ScheduleError
from mipsched.schedule.tile_program import TileProgram


class InfeasibleError(InputError):
    """No schedule of the searched kind fits the hardware; the message says why."""


@dataclass(frozen=True)
class Candidate:
    """A complete schedule with its lowering and evaluation."""

    lfa: Lfa
    program: TileProgram
    dlsa: Dlsa
    evaluation: Evaluation


@dataclass(frozen=True)
class MethodResult:
    """What a method returns: its best schedule, and named intermediate results (SA:
    'stage1' and 'stage2', like SoMa Fig. 6's Ours_1 / Ours_2)."""

    best: Candidate
    stages: dict[str, Candidate] = field(default_factory=dict)
    evaluations: int = 0
    """How many schedules the method evaluated."""
    models: list[dict] = field(default_factory=list)
    """CP-SAT models solved on the way: scope, status, objective, bound, time."""
    bounds: tuple[Bound, ...] = ()
    """Latency lower bounds the method proved (cycles), e.g. the exact search's."""


@dataclass(frozen=True)
class Objective:
    """Cost = energy^energy_exp x latency^delay_exp (SoMa: Energy^n x Delay^m)."""

    energy_exp: float = 1.0
    delay_exp: float = 1.0

    def cost(self, ev: Evaluation) -> float:
        return self.cost_of(ev.energy_pj, ev.latency_cycles)

    def cost_of(self, energy_pj: float, latency_cycles: int) -> float:
        return energy_pj ** self.energy_exp * float(latency_cycles) ** self.delay_exp


OBJECTIVES = {"edp": Objective(1.0, 1.0), "latency": Objective(0.0, 1.0),
              "energy": Objective(1.0, 0.0)}


@dataclass(frozen=True)
class SearchOptions:
    """Knobs every method accepts. `time_limit` in seconds (None: no limit)."""

    seed: int = 0
    time_limit: float | None = None
    objective: Objective = field(default_factory=Objective)
    workers: int | None = None
    """CP-SAT threads (None: all cores)."""
    stop: threading.Event = field(default_factory=threading.Event, compare=False)
    """Set by Ctrl-C (see `stop_on_ctrl_c`): searches end with their best so far."""
    windows: WindowSettings = field(default_factory=WindowSettings)
    """Sizes of the DLSA model's windows on programs too big for one model."""

    def deadline(self) -> float | None:
        """perf_counter() value at which the search must stop."""
        return None if self.time_limit is None else time.perf_counter() + self.time_limit


@contextlib.contextmanager
def stop_on_ctrl_c(stop: threading.Event) -> Iterator[None]:
    """While active, Ctrl-C sets `stop` instead of raising KeyboardInterrupt (main thread
    only; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def evaluate_lfa(lowerer: Lowerer, lfa: Lfa, buffer_limit: int | None = None
                 ) -> Candidate | None:
    """`lfa` lowered and evaluated with the default DLSA; None when it cannot be lowered
    (a tiling that does not divide the work) or its peak buffer exceeds `buffer_limit`
    (default: the hardware capacity)."""
    try:
        program = lowerer.lower(lfa, check=False)
    except ScheduleError:
        return None
    dlsa = default_dlsa(program)
    ev = evaluate(program, dlsa, check=False)
    limit = program.buffer_capacity_bytes if buffer_limit is None else buffer_limit
    if ev.peak_buffer_bytes > limit:
        return None
    return Candidate(lfa, program, dlsa, ev)
