"""The scheduling methods `solve_network` runs (METHODS), and the pipelines behind
`--method auto`, `cpsat` and `exact`.

- auto: the DP's split of the order into LGs with their own tilings (lg_split),
  descended to a local optimum (local_descent; where its share of the time runs out
  first, the descent is resumed once more), the DLSA model on it and on its rival
  tiling (tiling_rivals) where it has one, then SoMa's SA for a share of the
  budget; then the LFA annealed again with every
  candidate timed under its prefetching DLSA (prefetch_anneal), from the better of SA's
  best and the split, and
  descended to a local optimum under the same timing (local_descent); then the
  LFA segment model with the best LFA so far as incumbent (never worse than it); then the
  exact DLSA model on that program and on the LFA model's (if it found a better LFA),
  each hinted with its current DLSA. Time left over goes first to resuming a descent
  that ran out of time, then to further prefetch-scored annealing from the best
  schedule (a new seed each pass), each new best descended and polished by the DLSA
  model, until POLISH_PATIENCE passes in a row find nothing better. The best schedule
  by the objective is kept, so auto is never worse than its own SA run.
- cpsat: the LFA model from the unfused schedule, then the DLSA model on its LFA.
- exact: SA for a share of the budget as the incumbent, then the exact branch and bound
  over LFAs (formulations.exact, nets of at most MAX_LAYERS layers); its certified bound
  is reported with the schedule.
Every CP-SAT model solved is reported (scope, status, objective, bound, time). Each
pipeline stops as soon as its best schedule reaches `SearchOptions.target_latency` (the
certified-gap target `solve_network` sets) and offers every new best to
`SearchOptions.trail`.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from mipsched.core import (
    Bound,
    Candidate,
    MethodResult,
    ModelRecord,
    SearchOptions,
    seconds_left,
)
from mipsched.evaluate import evaluate
from mipsched.formulations.dlsa_windows import improve_dlsa
from mipsched.formulations.exact import exact_search
from mipsched.formulations.lfa import solve_lfa
from mipsched.formulations.lfa.relaxation import MAX_LAYERS, certified_over_powers_of_two
from mipsched.heuristics.baseline import unfused_baseline
from mipsched.heuristics.cocco import cocco_ga
from mipsched.heuristics.lg_split import lg_split_start
from mipsched.heuristics.local_descent import descend
from mipsched.heuristics.partition import dp_partition, greedy_fusion
from mipsched.heuristics.prefetch_anneal import anneal_prefetched_chains, prefetched
from mipsched.heuristics.soma_sa import sa_workers, soma_sa
from mipsched.heuristics.tiling_rivals import rival
from mipsched.schedule.lowering import Lowerer

SA_SHARE = 0.6
"""Share of --time-limit given to SA in auto."""
LFA_SHARE = 0.15
"""Share of --time-limit given to the LFA model (auto and cpsat take what is left for
the DLSA model)."""
MODEL_SECONDS = 30.0
"""Each model's time when no --time-limit is given."""
SPLIT_SHARE = 0.1
"""Share of auto's time that the DP's LG split may use first (lg_split, its group costs
on every CPU; measured with two workers and nothing else running, the prefetching DLSA
included: GPT-2 small prefill b16 (38 layers) 3.1 s, ResNet-50 b16 5.5 s, GPT-2 XL
prefill / cloud / b16 5.2 s, ResNet-101 b16 about 8 s, Inception-ResNet-v1 b16 (153
layers) about 20 s; where it does not finish, this share is lost to SA). The descent
from the split then has DESCENT_SHARE of the time left."""
SPLIT_MIN_SECONDS = 8.0
"""...but at least this long (s), if that is at most SPLIT_MAX_SHARE of the time: at
--time-limit 20 a 10 % share does not finish GPT-2 prefill b16's split, and at 60 s 6 s
left GPT-2 XL prefill b16's split no margin."""
SPLIT_MAX_SHARE = 0.3
PREFETCH_SHARE = 0.5
"""Share of the time left after SA given to the prefetch-scored LFA annealing."""
DESCENT_SHARE = 0.3
"""Share of the time left that each local descent may use (from a poor start on a big
program it could take the rest: ResNet-50 / edge / b16 from the unfused schedule, 26 s)."""
POLISH_SHARE = 0.7
"""In the passes on time left over, the annealing's share (the DLSA model gets the
rest when the annealing found a better schedule)."""
POLISH_PATIENCE = 3
"""Passes on time left over that find nothing, in a row, after which auto ends (each
anneals from the best schedule with a new seed)."""
POLISH_MIN_SECONDS = 1.0
"""Time left below which auto ends instead of starting another pass."""
DLSA_RESERVE_SHARE = 0.25
"""Share of the time left after SA kept for the DLSA model of auto's first finalist: the
steps before it end that much earlier (GPT-2 small prefill / edge / b16 at --time-limit
60: the windows had 0.2 s and left 66,000 cycles that 7 s of them find)."""
FIRST_DLSA_SHARE = 0.6
"""Most of the time left that the DLSA model of auto's first finalist may use, before
the LFA model: the windows converge in seconds on the Fig. 6 cases, while the LFA model
found nothing better in 60-s runs on ResNet-50 b1, GPT-2 small prefill b1, RandWire b16
and Inception-ResNet-v1 b16 (on large nets its segment table takes all its time to
build), so it comes second."""
RIVAL_SHARE = 0.5
"""Share of the time left after the split's descent for the DLSA model on its LFA and on
its rival (tiling_rivals), half each, where it has one; SA has its share of the rest.
ResNet-50 / edge / b16 at --time-limit 60: about 10 s each, the rival (stage 3's end at
78 tiles, not 52) wins and auto ends at 8,575,236 cycles, where it ended at 8,587,468 on
the split's own LFA."""
LFA_AFTER_DLSA_SHARE = 0.25
"""Most of the time left then that the LFA model may use (the rest goes to the passes
on time left, whose annealing, descent and DLSA model do find better schedules there)."""


def _left(deadline: float | None, share_of_rest: float = 1.0) -> float:
    """Seconds to the deadline (time.perf_counter()) times `share_of_rest`; MODEL_SECONDS
    without a deadline."""
    left = seconds_left(deadline, share_of_rest)
    return MODEL_SECONDS if left is None else left


def _limited(options: SearchOptions, seconds: float | None) -> SearchOptions:
    """`options` for a sub-search of at most `seconds` (None: no limit)."""
    return dataclasses.replace(options, time_limit=seconds)


def offer(options: SearchOptions, cand: Candidate) -> None:
    """Records `cand` in the run's trail (if any) as a schedule found now."""
    if options.trail is not None:
        options.trail.offer(cand.evaluation.latency_cycles,
                            options.objective.cost(cand.evaluation))


def _reached(options: SearchOptions, cand: Candidate) -> bool:
    """Whether `cand` meets the run's latency target."""
    return options.reached(cand.evaluation.latency_cycles)


def _lfa_step(lowerer: Lowerer, incumbent: Candidate, options: SearchOptions,
              seconds: float, models: list[ModelRecord]) -> Candidate | None:
    """The LFA model's better LFA (with its default DLSA), or None."""
    if seconds <= 0 or options.stop.is_set():
        return None
    sol = solve_lfa(lowerer, incumbent=incumbent.lfa, objective="ideal",
                    time_limit=seconds, workers=options.workers, seed=options.seed,
                    stop=options.stop, target=options.target_latency)
    s = sol.status
    whole = sol.window == (0, len(lowerer.workload.layers))
    models.append(ModelRecord(
        "lfa", s.status if s else "unknown", "whole" if whole else "window",
        sol.model_ideal, s.bound if s else None, s.wall_seconds if s else 0.0,
        s.workers if s else 0))
    if sol.improved and sol.candidate is not None:
        offer(options, sol.candidate)
        return sol.candidate
    return None


def _dlsa_step(cand: Candidate, options: SearchOptions, seconds: float,
               models: list[ModelRecord]) -> Candidate:
    """`cand` with the DLSA model's best DLSA for its LFA (never worse)."""
    if seconds <= 0 or options.stop.is_set() or _reached(options, cand):
        return cand
    result = improve_dlsa(cand.program, cand.dlsa, seconds, options.workers, options.seed,
                          options.windows, options.stop, options.target_latency)
    models.extend(result.records())
    if result.latency_cycles < cand.evaluation.latency_cycles:
        better = Candidate(cand.lfa, cand.program, result.dlsa,
                           evaluate(cand.program, result.dlsa))
        offer(options, better)
        return better
    return cand


def auto(lowerer: Lowerer, options: SearchOptions) -> MethodResult:
    """`--method auto`: the DP's LG split (at most SPLIT_SHARE of the time) and the
    descent from it, resumed once if it ran out of its share, SA for SA_SHARE of the time
    left, then `refine` from the better of the two; the best schedule by the objective
    (latency in cycles, energy in pJ).

    A descent still cut short after its share is on a net where each step still gains
    and SA's share gains less: ResNet-101 / edge / b16 at --time-limit 60 (latency), SA
    never gave the final schedule, and resuming the descent there took auto from
    16,287,428 / 16,294,564 / 16,188,916 cycles to 16,147,108 (twice) on the same
    machine. Where the split's descent ends at a local optimum (ResNet-50 and GPT-2
    small prefill b16, GoogLeNet b16, VGG-19 b16) nothing changes."""
    deadline = options.deadline()
    models: list[ModelRecord] = []
    split, cut = _split_step(lowerer, options, deadline)
    if split is not None and cut:  # a net this large gains more from the descent than SA
        split = _resumed_descent(lowerer, split, options, deadline)[0] or split
    if split is not None:
        split = _rival_step(lowerer, split, options, deadline, models)
    sa_limit = None if deadline is None else SA_SHARE * _left(deadline)
    sa = soma_sa(lowerer, _limited(options, sa_limit))
    offer(options, sa.best)
    if _reached(options, sa.best):  # the certified-gap target: no model needed
        return sa
    return refine(lowerer, sa, options, deadline, split, models)


def _rival_step(lowerer: Lowerer, best: Candidate, options: SearchOptions,
                deadline: float | None, models: list[ModelRecord]) -> Candidate:
    """`best` and its rival (tiling_rivals.rival), each with the DLSA model for half of
    RIVAL_SHARE of the time left: the better by the objective; `best` itself when it has
    no rival."""
    if options.stop.is_set() or _reached(options, best):
        return best
    other = rival(lowerer, best)
    if other is None:
        return best
    seconds = _left(deadline, RIVAL_SHARE) / 2
    own = _dlsa_step(best, options, seconds, models)
    theirs = _dlsa_step(other, options, seconds, models)
    return min((own, theirs), key=lambda c: options.objective.cost(c.evaluation))


def _prefetch_step(lowerer: Lowerer, start: Candidate, options: SearchOptions,
                   until: float | None, seed: int) -> Candidate | None:
    """The prefetch-scored annealing's best from `start`'s LFA, until `until`
    (perf_counter; None: one pass), if better than `start` by the objective."""
    if options.stop.is_set() or _reached(options, start):
        return None
    found = anneal_prefetched_chains(lowerer, start.lfa, options, until, seed,
                                     sa_workers(options))
    cost = options.objective.cost
    if found is None or cost(found.evaluation) >= cost(start.evaluation):
        return None
    offer(options, found)
    return found


def _descent_step(lowerer: Lowerer, start: Candidate, options: SearchOptions,
                  deadline: float | None) -> tuple[Candidate, bool]:
    """`start`, or the local optimum the descent reaches from it (within DESCENT_SHARE
    of the time left) when that is better by the objective; and whether the descent ran
    out of that time (so that its result may not be a local optimum yet)."""
    if options.stop.is_set() or _reached(options, start):
        return start, False
    until = None if deadline is None else time.perf_counter() + _left(deadline, DESCENT_SHARE)
    found = descend(lowerer, start, options, until)
    cut = until is not None and time.perf_counter() >= until
    if found is None:
        return start, cut
    offer(options, found)
    return found, cut


def _resumed_descent(lowerer: Lowerer, best: Candidate, options: SearchOptions,
                     deadline: float | None) -> tuple[Candidate | None, bool]:
    """The descent resumed from `best`'s LFA with its prefetching DLSA (the DLSA model
    may have left `best` faster than any LFA is timed in the descent): its local optimum
    if the LFA changed (None if not), and whether it ran out of time again. ResNet-50 /
    edge / b16 at --time-limit 60: the first descent is cut after 1.9 s at 8,766,100
    cycles (prefetching DLSA); resumed, it reaches 8,647,172 in 6.8 s more."""
    first = prefetched(lowerer, best.lfa)
    if first is None:
        return None, False
    program, dlsa, _ = first
    start = Candidate(best.lfa, program, dlsa, evaluate(program, dlsa, check=False))
    found, cut = _descent_step(lowerer, start, options, deadline)
    return (None if found is start else found), cut


def refine(lowerer: Lowerer, sa: MethodResult, options: SearchOptions,
           deadline: float | None, split: Candidate | None = None,
           models: list[ModelRecord] | None = None) -> MethodResult:
    """auto after its SA run: from the best of SA's best, `split` (the DP's LG split)
    and the warm start, the prefetch-scored annealing, then the descent from what it
    finds and from SA's best and the warm start (`_descend_starts`; all ending
    DLSA_RESERVE_SHARE of the time earlier), then the DLSA model (at most
    FIRST_DLSA_SHARE of the time left), then the LFA model from its result (at most
    LFA_AFTER_DLSA_SHARE of the time left) and the DLSA model on what that finds, then
    passes on the time left; never worse than `sa` under the objective. Without a
    deadline each model gets MODEL_SECONDS and the annealing one pass. Stops once a
    schedule reaches `options.target_latency`. `models`: the CP-SAT models solved
    before (this run's are added)."""
    models = [] if models is None else models
    cost = options.objective.cost
    starts = [sa.best, *(c for c in (options.start, split) if c is not None)]
    first_start = min(starts, key=lambda c: cost(c.evaluation))
    early = None if deadline is None else deadline - DLSA_RESERVE_SHARE * _left(deadline)
    until = None if early is None else time.perf_counter() + _left(early, PREFETCH_SHARE)
    start = _prefetch_step(lowerer, first_start, options, until, options.seed) or first_start
    others = [c for c in (sa.best, options.start)
              if c is not None and c.lfa not in (first_start.lfa, start.lfa)]
    start, cut = _descend_starts(lowerer, [start, *others], options, early)
    first = _dlsa_step(start, options, _left(deadline, FIRST_DLSA_SHARE), models)
    lfa_limit = (MODEL_SECONDS if deadline is None or options.time_limit is None
                 else LFA_SHARE * options.time_limit)
    from_lfa = _lfa_step(lowerer, first, options,
                         min(lfa_limit, _left(deadline, LFA_AFTER_DLSA_SHARE)), models)
    finalists = [first]
    if from_lfa is not None and not _reached(options, first):
        finalists.append(_dlsa_step(from_lfa, options, _left(deadline), models))
    best = min(finalists, key=lambda c: cost(c.evaluation))
    best = _polish(lowerer, best, options, deadline, models, cut)
    stages = dict(sa.stages) if best is sa.best else {**sa.stages, "cpsat": best}
    if split is not None:
        stages["lg_split"] = split
    return MethodResult(best, stages, sa.evaluations, models)


def _descend_starts(lowerer: Lowerer, starts: list[Candidate], options: SearchOptions,
                    deadline: float | None) -> tuple[Candidate, bool]:
    """The best, by the objective, of the local optima the descent reaches from each of
    `starts` in turn (`_descent_step`, each within DESCENT_SHARE of the time left to
    `deadline`), and whether its descent ran out of time. Different starts end in
    different basins: ResNet-50 / edge / b16 at --time-limit 60, seed 0, the DP split's
    descent ends at 8,739,908 cycles and SA's best (8,957,412) is slower, but the descent
    from SA's best reaches 8,635,876 (auto then ends at 8,629,604, not 8,739,908)."""
    cost = options.objective.cost
    best, best_cut = _descent_step(lowerer, starts[0], options, deadline)
    for start in starts[1:]:
        found, cut = _descent_step(lowerer, start, options, deadline)
        if cost(found.evaluation) < cost(best.evaluation):
            best, best_cut = found, cut
    return best, best_cut


def _polish(lowerer: Lowerer, best: Candidate, options: SearchOptions,
            deadline: float | None, models: list[ModelRecord], cut: bool) -> Candidate:
    """auto's passes on the time left: the descent resumed while the last one ran out of
    time (`cut`), else the prefetch-scored annealing from `best` with a new seed and the
    descent from what it finds; each new LFA polished by the DLSA model. Ends after
    POLISH_PATIENCE passes in a row find nothing better; the best schedule found."""
    cost = options.objective.cost
    passes = fruitless = 0
    while deadline is not None and _left(deadline) > POLISH_MIN_SECONDS and \
            not options.stop.is_set() and not _reached(options, best) and \
            fruitless < POLISH_PATIENCE:
        passes += 1
        if cut:
            more, cut = _resumed_descent(lowerer, best, options, deadline)
        else:
            until = time.perf_counter() + _left(deadline, POLISH_SHARE)
            more = _prefetch_step(lowerer, best, options, until, options.seed + 100 * passes)
            if more is not None:
                more, cut = _descent_step(lowerer, more, options, deadline)
        if more is None:  # a new seed may still find something, up to POLISH_PATIENCE
            fruitless += 1
            continue
        polished = _dlsa_step(more, options, _left(deadline), models)
        fruitless = 0 if cost(polished.evaluation) < cost(best.evaluation) else fruitless + 1
        best = min((best, polished), key=lambda c: cost(c.evaluation))
    return best


def _split_step(lowerer: Lowerer, options: SearchOptions, deadline: float | None
                ) -> tuple[Candidate | None, bool]:
    """The local optimum the descent reaches (within DESCENT_SHARE of the time left) from
    the DP's LG split with its prefetching DLSA (`lg_split.lg_split_start`, its group
    costs on `sa_workers` processes), the split found within SPLIT_SHARE of the time to
    `deadline` or SPLIT_MIN_SECONDS if longer (and at most SPLIT_MAX_SHARE of it; no
    limit without a deadline), None if the split is not found in time; and whether the
    descent ran out of its time (`_descent_step`).

    The split keeps the workload's layer order, and from it the descent reaches what SA's
    annealed orders do not: GPT-2 XL prefill / cloud / b16, split 11,537,400 cycles,
    descended in 14 s to 10,946,898, where 60 s of auto without this step had reached
    11,254,231 (SA had moved each head's key transpose away from its projection, so that
    26 MB of transposed keys are stored in one burst and the attention waits 139,000
    cycles for its first load behind them)."""
    if options.stop.is_set():
        return None, False
    until = None
    if deadline is not None:
        left = _left(deadline)
        until = time.perf_counter() + max(SPLIT_SHARE * left,
                                          min(SPLIT_MIN_SECONDS, SPLIT_MAX_SHARE * left))
    found = lg_split_start(lowerer, until, sa_workers(options), options.stop.is_set)
    if found is None:
        return None, False
    offer(options, found)
    return _descent_step(lowerer, found, options, deadline)


def cpsat(lowerer: Lowerer, options: SearchOptions) -> MethodResult:
    """`--method cpsat`: the LFA model from the unfused schedule (half the seconds left,
    MODEL_SECONDS without a limit), then the DLSA model on its LFA (the rest)."""
    deadline = options.deadline()
    start = unfused_baseline(lowerer).best
    offer(options, start)
    models: list[ModelRecord] = []
    chosen = start
    if not _reached(options, start):
        lfa_limit = MODEL_SECONDS if deadline is None else _left(deadline, 0.5)
        chosen = _lfa_step(lowerer, start, options, lfa_limit, models) or start
    best = _dlsa_step(chosen, options, _left(deadline), models)
    return MethodResult(best, {"lfa": chosen, "dlsa": best}, 0, models)


EXACT_SA_SHARE = 0.25
"""Share of --time-limit given to SA (the incumbent) in exact."""
EXACT_SA_SECONDS = 20.0
"""SA's time in exact when no --time-limit is given."""


def exact(lowerer: Lowerer, options: SearchOptions) -> MethodResult:
    """`--method exact`: SA as the incumbent (EXACT_SA_SHARE of the seconds, or
    EXACT_SA_SECONDS), then the branch and bound over LFAs with its latency bound
    (cycles) when it covered every computing order."""
    deadline = options.deadline()
    sa_limit = (EXACT_SA_SECONDS if options.time_limit is None
                else EXACT_SA_SHARE * options.time_limit)
    sa = soma_sa(lowerer, _limited(options, sa_limit))
    offer(options, sa.best)
    skipped = (f"the branch and bound takes nets of at most {MAX_LAYERS} layers"
               if not certified_over_powers_of_two(lowerer.workload)
               else "sa reached the certified-gap target" if _reached(options, sa.best)
               else None)
    if skipped is not None:
        return MethodResult(sa.best, {"incumbent": sa.best}, sa.evaluations, [ModelRecord(
            "exact", "skipped", objective=sa.best.evaluation.latency_cycles,
            workers=options.workers, reason=skipped)])
    result = exact_search(lowerer, sa.best, seconds_left(deadline), options.workers, options.seed,
                          stop=options.stop, target=options.target_latency,
                          on_better=lambda cand: offer(options, cand))
    best = result.best or sa.best
    status = "optimal" if result.proven else "feasible"
    models = [ModelRecord("exact", status, objective=best.evaluation.latency_cycles,
                          bound=result.lower_bound, wall_seconds=result.wall_seconds,
                          workers=options.workers, counts={
                              "space": result.space, "lfas_explored": result.lfas_explored,
                              "lfas_without_fit": result.lfas_without_fit,
                              "lfas_pruned": result.lfas_pruned,
                              "lfas_too_big": result.lfas_too_big,
                              "dlsas_solved": result.dlsas_solved})]
    bounds = (Bound("exact_search", math.floor(result.lower_bound),
                    f"branch and bound over {result.space}: no schedule there is faster"),
              ) if result.all_orders else ()
    return MethodResult(best, {"incumbent": sa.best, "exact": best}, sa.evaluations,
                        models, bounds)


@dataclass(frozen=True)
class Method:
    """A scheduling method: what it does and the function that runs it."""

    description: str
    run: Callable[[Lowerer, SearchOptions], MethodResult]
    anytime: bool = True
    """Whether it searches until its deadline (else it constructs one schedule and ends:
    its run never stops for the time limit)."""


#: The methods `solve_network` runs, by `--method` name.
METHODS: dict[str, Method] = {
    "baseline": Method("no fusion: every layer its own LG, tiling doubled until it fits, "
                       "double-buffered DLSA", unfused_baseline, anytime=False),
    "sa": Method("SoMa: two-stage simulated annealing (LFA, then DLSA) inside the buffer "
                 "allocator", soma_sa),
    "auto": Method("the DP's split into LGs and the local descent from it (with the DLSA "
                   "model on it and on a tiling rival that computes less), SA for 60 % of "
                   "the time left, the LFA annealed again and descended under greedy "
                   "prefetching DLSAs, then the exact DLSA model and the CP-SAT LFA model "
                   "on the best LFA(s); time left goes to more annealing and descent", auto),
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
