"""One round of SoMa's buffer allocator (soma_sa): stage 1 under a buffer limit, then
stage 2 on its best LFA; the pieces both the serial and the parallel allocator run."""

from __future__ import annotations

import contextlib
import gc
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from mipsched.core import Candidate, SearchOptions, evaluate_lfa, seconds_left
from mipsched.dlsa_starts import fastest_order, prefetch_dlsa
from mipsched.evaluate import evaluate
from mipsched.heuristics.annealing import Cooling, Progress
from mipsched.heuristics.baseline import single_flg_start, unfused_baseline
from mipsched.heuristics.dlsa_search import search_dlsa
from mipsched.heuristics.lfa_moves import propose
from mipsched.schedule.default_eval import DefaultEvaluator
from mipsched.schedule.lowering import Lowerer

#: Hears of every new best schedule of a stage: (latency in cycles, objective cost).
Report = Callable[[int, float], None]


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
    measured worse: randwire_ws_small/edge/b16 in 120 s, 7.14 M cycles over 3 rounds against
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


def anneal_lfa(lowerer: Lowerer, start: Candidate, options: SearchOptions, buffer_limit: int,
               iterations: int, rng: random.Random, deadline: float | None,
               cooling: Cooling, evaluator: DefaultEvaluator | None = None,
               report: Report | None = None) -> tuple[Candidate, int]:
    """Stage 1: the best candidate found and the number of LFAs evaluated; ends early at
    the deadline, on `options.stop`, or once the best reaches `options.target_latency`.
    Candidates are scored from their placed segments (default_eval); only the best is
    lowered. `report` hears of the start and every new best."""
    objective = options.objective
    graph = lowerer.workload.graph
    evaluator = evaluator or DefaultEvaluator(lowerer)
    figures = evaluator.evaluate(start.lfa, buffer_limit)
    assert figures is not None, "stage 1's start must fit its limit"
    current = best = start.lfa
    cost = best_cost = objective.cost(start.evaluation)
    best_latency = start.evaluation.latency_cycles
    if report is not None:
        report(best_latency, best_cost)
    evaluated = 0
    progress = Progress(iterations, deadline)
    for n in range(iterations):
        if options.should_stop(deadline, best_latency):
            break
        lfa = propose(current, graph, rng)
        if lfa is None:
            continue
        candidate = evaluator.evaluate(lfa, buffer_limit, figures)
        evaluated += 1
        if candidate is None:
            continue
        new_cost = objective.cost_of(candidate.energy_pj, candidate.latency_cycles)
        if cooling.accept(cost, new_cost, progress.at(n), rng):
            current, cost, figures = lfa, new_cost, candidate
            if cost < best_cost:
                best, best_cost, best_latency = current, cost, candidate.latency_cycles
                if report is not None:
                    report(best_latency, best_cost)
    if best is start.lfa:
        return start, evaluated
    kept = evaluate_lfa(lowerer, best, buffer_limit)
    assert kept is not None
    return kept, evaluated


def with_prefetch(candidate: Candidate) -> Candidate:
    """`candidate` with its greedy prefetching DLSA (prefetch_dlsa, in the faster of
    release and deadline order) if that is faster."""
    program = candidate.program
    prefetched = fastest_order(program, prefetch_dlsa(program, candidate.dlsa))[0]
    ev = evaluate(program, prefetched, check=False)
    if ev.latency_cycles < candidate.evaluation.latency_cycles:
        return Candidate(candidate.lfa, program, prefetched, ev)
    return candidate


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


def run_round(lowerer: Lowerer, options: SearchOptions, settings: SaSettings,
              start: Candidate, limit: int, rng: random.Random, deadline: float | None,
              evaluator: DefaultEvaluator, report: Report | None = None,
              after_stage1: Callable[[Candidate], None] | None = None) -> SaRound:
    """Stage 1 from `start` (which fits `limit` bytes), then stage 2 on its best LFA
    within the whole buffer; `after_stage1` hears of stage 1's best."""
    stage1_seconds = seconds_left(deadline, settings.stage1_share)
    stage1_deadline = None if stage1_seconds is None else time.perf_counter() + stage1_seconds
    cpu = time.process_time()
    layers = len(lowerer.workload.layers)
    stage1, n1 = anneal_lfa(lowerer, start, options, limit, settings.lfa_factor * layers,
                            rng, stage1_deadline, settings.cooling, evaluator, report)
    if after_stage1 is not None:
        after_stage1(stage1)
    cpu1 = time.process_time()
    tensors = len(stage1.program.tensors)
    result = search_dlsa(stage1.program, with_prefetch(stage1).dlsa, stage1.lfa,
                         options.objective, settings.dlsa_factor * tensors, rng, deadline,
                         settings.dlsa_cooling, options.stop, options.target_latency, report)
    return SaRound(limit, stage1, result.best, n1, result.iterations, cpu1 - cpu,
                   time.process_time() - cpu1)


class Patience:
    """The allocator's stopping rule: rounds are taken in order, and `patience` rounds in
    a row that do not improve on the best so far (by the objective) end it."""

    def __init__(self, options: SearchOptions, patience: int) -> None:
        self._objective = options.objective
        self._patience = patience
        self._best: float | None = None
        self.misses = 0

    def add(self, sa_round: SaRound, counts: bool = True) -> None:
        """Takes the next round; one that does not `count` cannot be a miss."""
        cost = self._objective.cost(sa_round.stage2.evaluation)
        if self._best is None or cost < self._best:
            self._best, self.misses = cost, 0
        elif counts:
            self.misses += 1

    @property
    def exhausted(self) -> bool:
        """Whether `patience` rounds in a row have missed: the allocator ends."""
        return self.misses >= self._patience


@contextlib.contextmanager
def fewer_full_collections() -> Iterator[None]:
    """While active, Python's garbage collector runs full collections a hundred times less
    often: the FLG plans a search memoises are hundreds of thousands of objects, alive
    until it ends, that every full collection scans (15 % of the CPU time of SA on
    resnet50/edge/b1)."""
    young, middle, old = gc.get_threshold()
    gc.set_threshold(young, middle, old * 100)
    try:
        yield
    finally:
        gc.set_threshold(young, middle, old)
