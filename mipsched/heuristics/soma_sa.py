"""SoMa's search (§V-A..C): two-stage simulated annealing inside a buffer allocator.

- Stage 1 anneals the LFA (lfa_moves) with the default double-buffered DLSA, for
  N = 100 × layers iterations; schedules whose peak buffer exceeds the stage's limit are
  rejected. It starts from SoMa's start, the unfused schedule with the smallest tiling
  that fits, or from the single-FLG start (the whole order one FLG, baseline.
  single_flg_start) when that costs less. (A departure from the paper: on
  randwire_small/edge/b16 the paper's start led stage 1 to a 3-LG LFA whose best DLSA is
  42 % above its ideal, 6.1 M cycles; the single-FLG start, 4.5 M before any search, is
  one no run of 25,500 moves reached from the unfused one.)
- Stage 2 anneals the DLSA of stage 1's best LFA (dlsa_search) for N = 1000 × DRAM tensors
  iterations, within the full buffer, from the default DLSA or its greedy prefetching
  variant (prefetch_dlsa), whichever is faster: on large programs the time limit allows
  only a few per cent of N, and the greedy start is worth more than the missing iterations.
- The buffer allocator runs both stages with stage 1 limited to the whole buffer, then
  lowers stage 1's limit by 10 % of that first stage-1 peak per round, keeping the best
  overall, until two rounds in a row bring no improvement; a round whose limit the
  start no longer fits starts again from the better of the two starts that fit it.
Deterministic for a seed; at the deadline every loop stops and the best so far is kept.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from mipsched.evaluate import evaluate
from mipsched.heuristics.annealing import Cooling, Progress
from mipsched.heuristics.baseline import single_flg_start, unfused_baseline
from mipsched.heuristics.common import (
    Candidate,
    InfeasibleError,
    MethodResult,
    SearchOptions,
    evaluate_lfa,
    stop_on_ctrl_c,
)
from mipsched.heuristics.dlsa_search import search_dlsa
from mipsched.heuristics.lfa_moves import propose
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.prefetch_dlsa import prefetch_dlsa


@dataclass(frozen=True)
class SaSettings:
    """Iteration counts per SoMa: stage 1 = lfa_factor × layers, stage 2 = dlsa_factor ×
    DRAM tensors; allocator step and patience."""

    lfa_factor: int = 100
    dlsa_factor: int = 1000
    allocator_step: float = 0.10
    patience: int = 2
    max_rounds: int = 10
    stage1_share: float = 0.5
    """Under a time limit, the share of the remaining time stage 1 may use, so that
    stage 2 always runs. (Sharing the time among several allocator rounds instead was
    measured worse: randwire_small/edge/b16 in 120 s, 7.14 M cycles over 3 rounds against
    6.70 M from one, as stage 1 at a quarter of the time finds poorer LFAs.)"""
    cooling: Cooling = field(default_factory=Cooling)
    """Stage 1's annealing schedule."""
    dlsa_cooling: Cooling = field(default_factory=lambda: Cooling(t0=0.0005))
    """Stage 2's: a DLSA move changes the latency by a fraction of a per cent, so stage 1's
    T0 = 0.05 would accept nearly every worsening and random-walk away from the start;
    measured on SA's resnet101/edge/b16 program (962 tiles, 172 DRAM tensors) it ended at
    its start (4.0 % above the ideal) where T0 = 0.0005 reaches 1.6 %."""


@dataclass(frozen=True)
class SaRound:
    """One allocator round: stage 1's buffer limit (bytes), both stages' best schedules,
    and what each stage did: LFAs evaluated / DLSA iterations, CPU seconds."""

    limit_bytes: int
    stage1: Candidate
    stage2: Candidate
    stage1_evaluations: int
    stage2_iterations: int
    stage1_cpu_s: float
    stage2_cpu_s: float


@dataclass(frozen=True)
class SaRun:
    """Every allocator round, in order, and the best one."""

    rounds: list[SaRound]
    best: SaRound

    @property
    def evaluations(self) -> int:
        """Schedules evaluated: stage-1 LFAs plus stage-2 DLSAs."""
        return sum(r.stage1_evaluations + r.stage2_iterations for r in self.rounds)


def anneal_lfa(lowerer: Lowerer, start: Candidate, options: SearchOptions, buffer_limit: int,
               iterations: int, rng: random.Random, deadline: float | None,
               cooling: Cooling) -> tuple[Candidate, int]:
    """Stage 1: the best candidate found and the number of LFAs evaluated."""
    objective = options.objective
    graph = lowerer.workload.graph
    current = best = start
    cost = best_cost = objective.cost(start.evaluation)
    evaluated = 0
    progress = Progress(iterations, deadline)
    for n in range(iterations):
        if deadline is not None and time.perf_counter() > deadline:
            break
        if options.stop.is_set():
            break
        lfa = propose(current.lfa, graph, rng)
        if lfa is None:
            continue
        candidate = evaluate_lfa(lowerer, lfa, buffer_limit)
        evaluated += 1
        if candidate is None:
            continue
        new_cost = objective.cost(candidate.evaluation)
        if cooling.accept(cost, new_cost, progress.at(n), rng):
            current, cost = candidate, new_cost
            if cost < best_cost:
                best, best_cost = current, cost
    return best, evaluated


def with_prefetch(candidate: Candidate) -> Candidate:
    """`candidate` with its greedy prefetching DLSA (prefetch_dlsa) if that is faster."""
    program = candidate.program
    prefetched = prefetch_dlsa(program, candidate.dlsa)
    ev = evaluate(program, prefetched, check=False)
    if ev.latency_cycles < candidate.evaluation.latency_cycles:
        return Candidate(candidate.lfa, program, prefetched, ev)
    return candidate


def soma_sa(lowerer: Lowerer, options: SearchOptions,
            settings: SaSettings | None = None) -> MethodResult:
    """The SoMa search; stages of the best round are reported as 'stage1' / 'stage2'.
    Ctrl-C ends it with the best so far."""
    run = run_sa(lowerer, options, settings)
    return MethodResult(run.best.stage2, {"stage1": run.best.stage1,
                                          "stage2": run.best.stage2}, run.evaluations)


def run_sa(lowerer: Lowerer, options: SearchOptions,
           settings: SaSettings | None = None) -> SaRun:
    """The SoMa search with every round's figures. Ctrl-C ends it with the best so far."""
    with stop_on_ctrl_c(options.stop):
        return _run_sa(lowerer, options, settings or SaSettings())


def initial_lfa(lowerer: Lowerer, options: SearchOptions, limit: int,
                deadline: float | None = None) -> Candidate:
    """Stage 1's start under a buffer limit (bytes): the unfused schedule, or the
    single-FLG one over the same order when its cost is lower (tried until `deadline`,
    time.perf_counter() seconds). Raises InfeasibleError when the unfused schedule
    cannot fit."""
    unfused = unfused_baseline(lowerer, buffer_limit=limit).best
    fused = single_flg_start(lowerer, options.objective, unfused.lfa.order, limit, deadline)
    if fused is not None and options.objective.cost(fused.evaluation) < \
            options.objective.cost(unfused.evaluation):
        return fused
    return unfused


def _run_sa(lowerer: Lowerer, options: SearchOptions, settings: SaSettings) -> SaRun:
    deadline = options.deadline()
    rng = random.Random(options.seed)
    capacity = lowerer.hw.gbuf.capacity_bytes
    limit = capacity
    start = initial_lfa(lowerer, options, limit, deadline)
    rounds: list[SaRound] = []
    best_round: SaRound | None = None
    misses = 0
    while len(rounds) < settings.max_rounds and misses < settings.patience and limit > 0:
        if start.evaluation.peak_buffer_bytes > limit:
            try:  # a start that fits the lower limit
                start = initial_lfa(lowerer, options, limit, deadline)
            except InfeasibleError:
                break
        layers = len(lowerer.workload.layers)
        stage1_deadline = None if deadline is None else time.perf_counter() + (
            settings.stage1_share * max(deadline - time.perf_counter(), 0.0))
        cpu = time.process_time()
        stage1, n1 = anneal_lfa(lowerer, start, options, limit, settings.lfa_factor * layers,
                                rng, stage1_deadline, settings.cooling)
        cpu1 = time.process_time()
        tensors = len(stage1.program.tensors)
        result = search_dlsa(stage1.program, with_prefetch(stage1).dlsa, stage1.lfa,
                             options.objective, settings.dlsa_factor * tensors, rng,
                             deadline, settings.dlsa_cooling, options.stop)
        this = SaRound(limit, stage1, result.best, n1, result.iterations, cpu1 - cpu,
                       time.process_time() - cpu1)
        rounds.append(this)
        cost = options.objective.cost(this.stage2.evaluation)
        if best_round is None or cost < options.objective.cost(best_round.stage2.evaluation):
            best_round, misses = this, 0
        else:
            misses += 1
        if options.stop.is_set() or (deadline is not None
                                      and time.perf_counter() > deadline):
            break
        limit -= int(settings.allocator_step * rounds[0].stage1.evaluation.peak_buffer_bytes)
    assert best_round is not None
    return SaRun(rounds, best_round)

