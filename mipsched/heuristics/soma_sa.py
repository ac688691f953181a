"""SoMa's search (§V-A..C): two-stage simulated annealing inside a buffer allocator.

- Stage 1 anneals the LFA (lfa_moves) with the default double-buffered DLSA, for
  N = 100 × layers iterations; schedules whose peak buffer exceeds the stage's limit are
  rejected. It starts from SoMa's start, the unfused schedule with the smallest tiling
  that fits, or from the single-FLG start (the whole order one FLG, baseline.
  single_flg_start) when that costs less (a departure from the paper: from the unfused
  start alone, stage 1 can miss a far better single-FLG schedule).
- Stage 2 anneals the DLSA of stage 1's best LFA (dlsa_search) for N = 1000 × DRAM tensors
  iterations, within the full buffer, from the default DLSA or its greedy prefetching
  variant (prefetch_dlsa), whichever is faster: on large programs the time limit allows
  only a few per cent of N, and the greedy start is worth more than the missing iterations.
- The buffer allocator runs both stages with stage 1 limited to the whole buffer, then
  lowers stage 1's limit by 10 % of that first stage-1 peak per round, keeping the best
  overall, until two rounds in a row bring no improvement; a round whose limit the
  start no longer fits starts again from the better of the two starts that fit it.
- With more than one worker (SearchOptions.workers, at most and by default the CPUs this
  process may run on) the rounds run in worker processes (sa_parallel): each round draws
  from its own random stream and a second round at the whole buffer runs beside the
  first, so the trajectory differs from one worker's, which runs the rounds in order on
  one stream.
soma_sa returns the best round's stage-2 schedule, or stage 1's start with its prefetching
DLSA if that is better (stage 1 may leave a start whose DLSA stage 2 would have improved
most).
Deterministic for a seed: one worker finds the serial allocator's schedules, any number
of workers above one the parallel allocator's. At the deadline, on Ctrl-C and once the
best schedule reaches SearchOptions.target_latency, every loop stops and the best so far
is kept. Every new best of either stage is offered to SearchOptions.trail.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

from mipsched.core import (
    Candidate,
    InfeasibleError,
    MethodResult,
    SearchOptions,
    stop_on_ctrl_c,
)
from mipsched.heuristics.sa_parallel import run_parallel
from mipsched.heuristics.sa_stages import (
    Patience,
    Report,
    SaRound,
    SaSettings,
    anneal_lfa,
    fewer_full_collections,
    initial_lfa,
    run_round,
    with_prefetch,
)
from mipsched.schedule.default_eval import DefaultEvaluator
from mipsched.schedule.lowering import Lowerer

__all__ = ["SaRound", "SaRun", "SaSettings", "anneal_lfa", "initial_lfa", "run_sa",
           "sa_workers", "soma_sa", "with_prefetch"]


@dataclass(frozen=True)
class SaRun:
    """Every allocator round, in order, and the best one; `start` is stage 1's start
    with its greedy prefetching DLSA where that is faster, a schedule soma_sa returns
    when no round beats it."""

    rounds: list[SaRound]
    best: SaRound
    start: Candidate

    @property
    def evaluations(self) -> int:
        """Schedules evaluated: stage-1 LFAs plus stage-2 DLSAs."""
        return sum(r.stage1_evaluations + r.stage2_iterations for r in self.rounds)


def soma_sa(lowerer: Lowerer, options: SearchOptions,
            settings: SaSettings | None = None) -> MethodResult:
    """The SoMa search; stages of the best round are reported as 'stage1' / 'stage2'.
    Ctrl-C ends it with the best so far."""
    run = run_sa(lowerer, options, settings)
    cost = options.objective.cost
    best = run.best.stage2 if cost(run.best.stage2.evaluation) <= cost(
        run.start.evaluation) else run.start
    return MethodResult(best, {"stage1": run.best.stage1, "stage2": best}, run.evaluations)


def run_sa(lowerer: Lowerer, options: SearchOptions,
           settings: SaSettings | None = None) -> SaRun:
    """The SoMa search with every round's figures. Ctrl-C ends it with the best so far."""
    settings = settings or SaSettings()
    with stop_on_ctrl_c(options.stop), fewer_full_collections():
        deadline = options.deadline()
        start = initial_lfa(lowerer, options, lowerer.hw.gbuf.capacity_bytes, deadline)
        prefetched = with_prefetch(start)
        if options.trail is not None:
            options.trail.offer(prefetched.evaluation.latency_cycles,
                                options.objective.cost(prefetched.evaluation))
        workers = sa_workers(options)
        if options.reached(prefetched.evaluation.latency_cycles):
            rounds = []
        elif workers > 1:
            rounds = run_parallel(lowerer, options, settings, start, workers, deadline)
        else:
            rounds = _serial_rounds(lowerer, options, settings, start, deadline)
    if not rounds:  # the time ran out before a round ended: the start is the best
        rounds = [SaRound(lowerer.hw.gbuf.capacity_bytes, start, start, 0, 0, 0.0, 0.0)]
    costs = [options.objective.cost(r.stage2.evaluation) for r in rounds]
    return SaRun(rounds, rounds[costs.index(min(costs))], prefetched)


def sa_workers(options: SearchOptions) -> int:
    """Worker processes for the allocator's rounds: SearchOptions.workers, at most the
    CPUs this process may run on (more would only slow each job down under a deadline:
    `--workers` also sets CP-SAT's threads, which gain from more than the CPUs), and all
    of them by default."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    return cpus if options.workers is None else max(1, min(options.workers, cpus))


def _serial_rounds(lowerer: Lowerer, options: SearchOptions, settings: SaSettings,
                   start: Candidate, deadline: float | None) -> list[SaRound]:
    """The allocator's rounds one after another, drawing from one random stream."""
    rng = random.Random(options.seed)
    evaluator = DefaultEvaluator(lowerer)
    trail = options.trail
    report: Report | None = None if trail is None else (
        lambda latency, cost: trail.offer(latency, cost))
    limit = lowerer.hw.gbuf.capacity_bytes
    rounds: list[SaRound] = []
    patience = Patience(options, settings.patience)
    while len(rounds) < settings.max_rounds and not patience.exhausted and limit > 0:
        if start.evaluation.peak_buffer_bytes > limit:
            try:  # a start that fits the lower limit
                start = initial_lfa(lowerer, options, limit, deadline)
            except InfeasibleError:
                break
        rounds.append(run_round(lowerer, options, settings, start, limit, rng, deadline,
                                evaluator, report))
        patience.add(rounds[-1])
        if options.should_stop(deadline, rounds[-1].stage2.evaluation.latency_cycles):
            break
        limit -= int(settings.allocator_step * rounds[0].stage1.evaluation.peak_buffer_bytes)
    return rounds
