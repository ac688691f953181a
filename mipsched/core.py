"""The types every search and pipeline shares, below the formulations and the
heuristics: a candidate schedule and what a method returns, the objective, the knobs every
method takes (SearchOptions, the DLSA model's window sizes), the time a search has left
(Deadline, with Ctrl-C), the record of a model solved, a certified bound, and the
evaluation of an LFA under the default DLSA."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from mipsched.errors import InputError
from mipsched.evaluate import Evaluation, evaluate
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Dlsa, Lfa, ScheduleError
from mipsched.schedule.tile_program import TileProgram


@dataclass(frozen=True)
class Bound:
    """One certified lower bound."""

    name: str
    value: float
    """cycles (latency bounds), pJ (energy) or pJ x cycles (E x D)."""
    derivation: str


@dataclass(frozen=True)
class WindowSettings:
    """Sliding windows over the tile sequence: at most `tiles` tiles and `transfers` DRAM
    transfers per window, consecutive windows sharing up to `overlap` tiles, at most
    `seconds` of CP-SAT each. A window's loads may start up to `reach` tiles before it
    and its stores end up to `reach` tiles after it."""

    tiles: int = 64
    transfers: int = 32
    """A window shrinks (down to one tile) until it holds at most this many transfers."""
    overlap: int = 16
    seconds: float = 5.0
    reach: int = 32


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
    models: list[ModelRecord] = field(default_factory=list)
    """Models solved on the way (CP-SAT, the exact search)."""
    bounds: tuple[Bound, ...] = ()
    """Latency lower bounds the method proved (cycles), e.g. the exact search's."""


@dataclass(frozen=True)
class ModelRecord:
    """One model solved on the way to a schedule, as the certificate lists it: which
    (`model`: lfa, dlsa, exact, sa-dlsa, simulator), over what (`scope`: whole or window),
    how it ended (`status`), its objective and proved bound (cycles), wall time
    (seconds) and threads. `timed`: False for a record that is a verdict, not a solve
    (the simulator's rejection), which lists only model, status and reason."""

    model: str
    status: str
    scope: str = "whole"
    objective: float | None = None
    bound: float | None = None
    wall_seconds: float = 0.0
    workers: int | None = 0
    reason: str | None = None
    counts: dict[str, Any] = field(default_factory=dict)
    """Search figures the model reports besides (the exact search: space, LFAs explored,
    pruned, ...)."""
    timed: bool = True

    def to_json(self) -> dict[str, Any]:
        """The certificate entry."""
        if not self.timed:
            return {"model": self.model, "status": self.status, "reason": self.reason}
        entry: dict[str, Any] = {"model": self.model, "scope": self.scope,
                                 "status": self.status}
        if self.reason is not None:
            entry["reason"] = self.reason
        entry.update(objective=self.objective, bound=self.bound,
                     wall_seconds=self.wall_seconds, workers=self.workers)
        return {**entry, **self.counts}


@dataclass(frozen=True)
class Objective:
    """Cost = energy^energy_exp x latency^delay_exp (SoMa: Energy^n x Delay^m)."""

    energy_exp: float = 1.0
    delay_exp: float = 1.0

    def cost(self, ev: Evaluation) -> float:
        """The cost of an evaluated schedule (pJ^energy_exp x cycles^delay_exp)."""
        return self.cost_of(ev.energy_pj, ev.latency_cycles)

    def cost_of(self, energy_pj: float, latency_cycles: int) -> float:
        """The cost of a schedule of this energy (pJ) and latency (cycles)."""
        return energy_pj ** self.energy_exp * float(latency_cycles) ** self.delay_exp


OBJECTIVES = {"edp": Objective(1.0, 1.0), "latency": Objective(0.0, 1.0),
              "energy": Objective(1.0, 0.0)}


@dataclass
class Trail:
    """The best-so-far history of a search: one point per improvement of the objective,
    (seconds since `started`, latency in cycles, objective cost). Searches offer every
    schedule they keep as their best; a point is added when it improves the cost."""

    started: float = field(default_factory=time.perf_counter)
    """time.perf_counter() at the start of the run (CLOCK_MONOTONIC: comparable across
    forked worker processes)."""
    points: list[tuple[float, int, float]] = field(default_factory=list)

    def offer(self, latency_cycles: int, cost: float, at: float | None = None) -> None:
        """Records a schedule found at perf_counter() time `at` (default: now)."""
        if self.points and cost >= self.points[-1][2]:
            return
        when = (time.perf_counter() if at is None else at) - self.started
        self.points.append((when, latency_cycles, cost))

    def first_at_most(self, latency_cycles: int) -> float | None:
        """Seconds until the first recorded schedule with at most this latency (None:
        none)."""
        return next((t for t, lat, _ in self.points if lat <= latency_cycles), None)


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
    target_latency: int | None = None
    """Searches stop as soon as they hold a schedule of at most this latency (cycles):
    `solve_network` sets it from the certified bound and the gap it is asked to reach. None:
    search until the time limit (or the method's own end)."""
    trail: Trail | None = field(default=None, compare=False)
    """Where searches record their best-so-far history (None: not recorded)."""
    start: Candidate | None = field(default=None, compare=False)
    """A schedule of the same network on the same hardware to start from (a sweep's warm
    start): auto refines the better of it and its annealing's best; every method's
    result is at least as good by the objective (`solve_network`)."""

    def reached(self, latency_cycles: int) -> bool:
        """Whether a schedule of this latency meets `target_latency`."""
        return self.target_latency is not None and latency_cycles <= self.target_latency

    def deadline(self) -> float | None:
        """perf_counter() value at which the search must stop."""
        return None if self.time_limit is None else time.perf_counter() + self.time_limit

    def should_stop(self, deadline: float | None, best_latency: int) -> bool:
        """Whether a search whose best so far has `best_latency` cycles must end now:
        past `deadline` (perf_counter; None: none), on Ctrl-C, or at the target."""
        return (deadline is not None and time.perf_counter() > deadline) or \
            self.stop.is_set() or self.reached(best_latency)


def seconds_left(deadline: float | None, share: float = 1.0) -> float | None:
    """Seconds until `deadline` (time.perf_counter(); None: no limit, gives None), never
    below 0, times `share`."""
    if deadline is None:
        return None
    return max(deadline - time.perf_counter(), 0.0) * share


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


def lower_and_fit(lowerer: Lowerer, lfa: Lfa, buffer_limit: int | None = None,
                  check: bool = False) -> tuple[Candidate | None, TileProgram | None]:
    """`lfa` lowered (None when it cannot be: a tiling that does not divide the work, or,
    with `check`, an invalid LFA) and its candidate under the default DLSA (None when its
    peak buffer exceeds `buffer_limit` bytes, default the hardware capacity)."""
    try:
        program = lowerer.lower(lfa, check=check)
    except ScheduleError:
        return None, None
    dlsa = default_dlsa(program)
    ev = evaluate(program, dlsa, check=False)
    limit = program.buffer_capacity_bytes if buffer_limit is None else buffer_limit
    if ev.peak_buffer_bytes > limit:
        return None, program
    return Candidate(lfa, program, dlsa, ev), program


def evaluate_lfa(lowerer: Lowerer, lfa: Lfa, buffer_limit: int | None = None
                 ) -> Candidate | None:
    """`lfa` lowered and evaluated with the default DLSA; None when it cannot be lowered
    or its peak buffer exceeds `buffer_limit` bytes (default: the hardware capacity)."""
    return lower_and_fit(lowerer, lfa, buffer_limit)[0]
