"""SoMa's buffer allocator on worker processes (soma_sa with more than one worker).

The SoMa reference runs one allocator round at the whole buffer, then five rounds at once
in threads, with stage-1 limits of 1, 0.9, ..., 0.9^4 times that round's stage-1 peak.
Here rounds are *jobs* for forked worker processes, numbered:
- job 0: the whole buffer, drawing from random.Random(seed), as the serial allocator's
  first round (so its result is the serial one's first round);
- job 1: the whole buffer again, from its own random stream: an independent chain that
  keeps a second worker busy while job 0's stage 1 finds the allocator's step;
- job j >= 2: the whole buffer less j - 1 steps (a step: 10 % of job 0's stage-1 peak),
  from its own stream, on a start that fits that limit.
The workers are forked once and take jobs in order as they come free (job 2 once job 0's
stage 1 has ended), keeping their memoised FLG plans from one job to the next; results
are taken in job order under the serial allocator's rules (patience: two jobs in a row
without improvement end it, job 1 not counting as a miss since it tries no lower limit;
at most max_rounds + 1 jobs; a limit no start fits ends it), and jobs past the end are
cut short and dropped. Without a deadline, Ctrl-C or a target
latency, the result therefore depends on the seed alone, not on the number of workers
(above one) or on timing. Every job honours the deadline, Ctrl-C (the parent's or its
own) and the target latency; a job that reaches the target stops the others. A worker
sends back its LFA, its DLSA and the best-so-far points it found (perf_counter times);
the parent lowers the LFA again and merges the points into SearchOptions.trail.
"""

from __future__ import annotations

import dataclasses
import gc
import multiprocessing
import os
import random
import signal
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess

from mipsched.core import Candidate, InfeasibleError, SearchOptions
from mipsched.evaluate import evaluate
from mipsched.heuristics.sa_stages import Patience, SaRound, SaSettings, initial_lfa, run_round
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.default_eval import DefaultEvaluator
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Dlsa, Lfa

POLL_S = 0.05
"""How often the parent looks at Ctrl-C while it waits for workers (seconds)."""


class SharedFlag:
    """A stop flag that forked worker processes share (is_set / set, as threading.Event)."""

    def __init__(self) -> None:
        self._value = multiprocessing.get_context("fork").RawValue("b", 0)

    def is_set(self) -> bool:
        """Whether the flag is set (in any process)."""
        return self._value.value != 0

    def set(self) -> None:
        """Sets the flag for every process."""
        self._value.value = 1

    def clear(self) -> None:
        """Clears the flag for every process."""
        self._value.value = 0


@dataclass(frozen=True)
class _Either:
    """Set when either flag is: the run's (Ctrl-C, target reached) or the job's (cut
    short)."""

    run: SharedFlag
    job: SharedFlag

    def is_set(self) -> bool:
        """Whether the run's or the job's flag is set."""
        return self.run.is_set() or self.job.is_set()


def job_rng(seed: int, job: int) -> random.Random:
    """Job `job`'s random stream: job 0 draws from random.Random(seed)."""
    return random.Random(seed) if job == 0 else random.Random(f"soma-sa:{seed}:{job}")


@dataclass(frozen=True)
class _Outcome:
    """What a worker sends back: the round's schedules as notation, its figures and its
    best-so-far points (perf_counter seconds, latency, cost)."""

    limit_bytes: int
    stage1_lfa: Lfa
    stage2_dlsa: Dlsa
    latency_cycles: int
    """Of the stage-2 schedule."""
    stage1_evaluations: int
    stage2_iterations: int
    stage1_cpu_s: float
    stage2_cpu_s: float
    points: list[tuple[float, int, float]]


def run_parallel(lowerer: Lowerer, options: SearchOptions, settings: SaSettings,
                 start: Candidate, workers: int, deadline: float | None) -> list[SaRound]:
    """The allocator's rounds (jobs) run by `workers` processes, in job order; `start`
    fits the whole buffer."""
    flag = SharedFlag()
    pool = [_Worker(lowerer, options, settings, start, deadline, flag) for _ in range(workers)]
    capacity = lowerer.hw.gbuf.capacity_bytes
    outcomes: dict[int, _Outcome | None] = {}  # None: no start fits the job's limit
    rounds: list[SaRound] = []
    used: list[_Outcome] = []
    patience = Patience(options, settings.patience)
    end = settings.max_rounds + 1  # jobs from `end` on are not used
    step: int | None = None
    launched = 0
    try:
        while True:
            if options.stop.is_set():
                flag.set()
            for worker in pool:
                if worker.job is None and launched < end and not flag.is_set() and (
                        deadline is None or time.perf_counter() < deadline) and (
                        launched < 2 or step is not None):
                    limit = capacity if launched < 2 else capacity - (launched - 1) * step
                    if limit <= 0:
                        end = launched
                        break
                    worker.give(launched, limit)
                    launched += 1
            busy = {worker.conn: worker for worker in pool if worker.job is not None}
            if not busy:
                break
            for conn in wait(list(busy), timeout=POLL_S):
                kind, job, payload = busy[conn].receive()
                if kind == "stage1":
                    step = int(settings.allocator_step * payload)
                else:
                    outcomes[job] = payload
            while len(rounds) < end and len(rounds) in outcomes:
                outcome = outcomes[len(rounds)]
                if outcome is None:
                    end = len(rounds)
                    break
                rounds.append(_round(lowerer, outcome))
                used.append(outcome)
                patience.add(rounds[-1], counts=len(rounds) != 2)  # job 1: no lower limit
                if patience.exhausted:
                    end = len(rounds)
            for worker in pool:
                if worker.job is not None and worker.job >= end:
                    worker.cut_short()
    finally:
        for worker in pool:
            worker.close()
    if options.trail is not None:
        for at, latency, cost in sorted(p for outcome in used for p in outcome.points):
            options.trail.offer(latency, cost, at=at)
    return rounds


class _Worker:
    """A forked worker process and the parent's end of its pipe; `job` is the job it runs
    (None: idle)."""

    def __init__(self, lowerer: Lowerer, options: SearchOptions, settings: SaSettings,
                 start: Candidate, deadline: float | None, flag: SharedFlag) -> None:
        context = multiprocessing.get_context("fork")
        self.conn, child = context.Pipe()
        self.own = SharedFlag()
        self.job: int | None = None
        self.process: BaseProcess = context.Process(
            target=_serve, args=(child, lowerer, options, settings, start, deadline,
                                 _Either(flag, self.own)), name="mipsched-sa", daemon=True)
        self.process.start()
        child.close()

    def give(self, job: int, limit: int) -> None:
        """Sends the worker job `job` with its stage-1 buffer limit `limit` (bytes); clears
        the job's stop flag."""
        self.own.clear()
        self.conn.send((job, limit))
        self.job = job

    def receive(self) -> tuple[str, int, object]:
        """The worker's next message: ("stage1", job, peak bytes) or ("round", job,
        _Outcome | None); raises RuntimeError if the job failed."""
        try:
            kind, job, payload = self.conn.recv()
        except EOFError:
            raise RuntimeError(f"an SA worker died (exit code {self.process.exitcode}) "
                               f"in allocator round {self.job}") from None
        if kind == "error":
            raise RuntimeError(f"SA worker failed in allocator round {job}:\n{payload}")
        if kind == "round":
            self.job = None
        return kind, job, payload

    def cut_short(self) -> None:
        """Ends the current job early (its result will be ignored)."""
        self.own.set()

    def close(self) -> None:
        """Lets the worker finish (cutting its job short) and exit."""
        if self.process.is_alive():
            try:
                while self.job is not None:
                    self.cut_short()
                    self.receive()
                self.conn.send(None)
            except (RuntimeError, OSError):
                self.process.terminate()
        self.process.join()
        self.conn.close()


def _serve(conn: Connection, lowerer: Lowerer, options: SearchOptions,
           settings: SaSettings, start: Candidate, deadline: float | None,
           stop: _Either) -> None:
    """A worker process: runs the jobs it is given, sending ("stage1", job, peak bytes)
    for job 0, then ("round", job, _Outcome | None) or ("error", job, traceback). Ctrl-C
    sets the run's flag, so jobs end with their best so far."""
    signal.signal(signal.SIGINT, lambda *_: stop.run.set())
    gc.freeze()  # what the parent holds is never garbage here
    local = dataclasses.replace(options, stop=stop, trail=None)
    evaluator = DefaultEvaluator(lowerer)
    try:
        while (message := conn.recv()) is not None:
            job, limit = message
            try:
                outcome = _run_job(conn, lowerer, local, settings, start, job, limit,
                                   deadline, evaluator)
                if outcome is not None and options.reached(outcome.latency_cycles):
                    stop.run.set()  # the others stop too
                conn.send(("round", job, outcome))
            except Exception:  # noqa: BLE001 - the parent re-raises it
                conn.send(("error", job, traceback.format_exc()))
                break
    except EOFError:  # the parent is gone
        pass
    finally:
        conn.close()
        os._exit(0)


def _run_job(conn: Connection, lowerer: Lowerer, options: SearchOptions,
             settings: SaSettings, start: Candidate, job: int, limit: int,
             deadline: float | None, evaluator: DefaultEvaluator) -> _Outcome | None:
    """One job in a worker (None: no start fits its limit)."""
    if start.evaluation.peak_buffer_bytes > limit:
        try:
            start = initial_lfa(lowerer, options, limit, deadline)
        except InfeasibleError:
            return None
    points: list[tuple[float, int, float]] = []

    def report(latency: int, cost: float) -> None:
        points.append((time.perf_counter(), latency, cost))

    def after_stage1(stage1: Candidate) -> None:
        if job == 0:
            conn.send(("stage1", job, stage1.evaluation.peak_buffer_bytes))

    result = run_round(lowerer, options, settings, start, limit, job_rng(options.seed, job),
                       deadline, evaluator, report, after_stage1)
    return _Outcome(limit, result.stage1.lfa, result.stage2.dlsa,
                    result.stage2.evaluation.latency_cycles, result.stage1_evaluations,
                    result.stage2_iterations, result.stage1_cpu_s, result.stage2_cpu_s, points)


def _round(lowerer: Lowerer, outcome: _Outcome) -> SaRound:
    """A worker's round with its schedules lowered and evaluated again."""
    program = lowerer.lower(outcome.stage1_lfa, check=False)
    dlsa = default_dlsa(program)
    stage1 = Candidate(outcome.stage1_lfa, program, dlsa, evaluate(program, dlsa, check=False))
    stage2 = Candidate(outcome.stage1_lfa, program, outcome.stage2_dlsa,
                       evaluate(program, outcome.stage2_dlsa))
    return SaRound(outcome.limit_bytes, stage1, stage2, outcome.stage1_evaluations,
                   outcome.stage2_iterations, outcome.stage1_cpu_s, outcome.stage2_cpu_s)
