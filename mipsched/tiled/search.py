"""SET's simulated annealing over RA trees, and its LS / LP restrictions
(docs/set-model.md §4).

- Start: the reference's init tree, a root T over every layer in layer order; the leaf
  batch is the largest of batch, batch/2, ... (integer halving) that evaluates.
- Rounds: `rounds_per_layer` x the number of layers (the reference's 100 x layers). Each
  round proposes one applied move (`mipsched.tiled.moves`); the candidate is checked with
  `check_tree` and evaluated with `evaluate_tree`; an invalid or rejected tree is dropped
  and the round still counts.
- The best tree is updated before the acceptance test; acceptance is the reference's:
  always when not worse, else with probability exp(-((c' - c) / c) / T) at
  T = 0.07 (1 - x) / (1 + 8x), x = round / rounds (`Cooling(t0=0.07, alpha=8)`).
- Once x >= 0.9 the current tree is replaced by the best so far (once).
- One thread per call, deterministic per seed (the reference runs 4 seeds in threads and
  keeps the best; a caller may do the same with several calls). Under `time_limit`, x is
  the larger of round / rounds and the share of the time used, so a run cut short still
  cools down, and the run stops with the best so far once the longest round so far
  would end past the deadline; such a run is no longer reproducible round for round.

Departures from the reference: Python's Mersenne-Twister draws are not libstdc++'s
distributions, so no run reproduces the reference's trees draw for draw.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from mipsched.errors import InputError
from mipsched.heuristics.annealing import Cooling, Progress
from mipsched.hw.tiled import TiledHardware
from mipsched.tiled.evaluate import DEFAULT_STRIDE, Evaluation, evaluate_tree
from mipsched.tiled.moves import METHODS, MNode, Mutator, from_ratree, to_ratree
from mipsched.tiled.ratree import Cut, Leaf, RaTree, TreeError, check_tree
from mipsched.workload.graph import Workload

OBJECTIVES = ("edp", "latency", "energy")
COOLING = Cooling(t0=0.07, alpha=8.0)
"""The reference's temperature schedule (`sa_accept`)."""
RESTART_AT = 0.9
"""Progress at which the run jumps back to the best tree, once."""
MEMO_LIMIT = 20_000
"""Evaluated trees remembered per run (the memo is cleared when it grows past this)."""


@dataclass(frozen=True)
class TrailPoint:
    """The best cost after `evaluations` trees were evaluated, `seconds` into the run."""

    evaluations: int
    seconds: float
    best_cost: float


@dataclass
class SearchResult:
    """The best tree found, its evaluation and cost, the start's, and how the run went."""

    method: str
    objective: str
    seed: int
    tree: RaTree
    evaluation: Evaluation
    cost: float
    start_tree: RaTree
    start_evaluation: Evaluation
    start_cost: float
    rounds: int
    """Rounds planned (rounds_per_layer x layers)."""
    rounds_done: int
    valid: int
    """Rounds whose candidate was a valid, evaluable tree."""
    accepted: int
    seconds: float
    trail: list[TrailPoint] = field(default_factory=list)


def objective_cost(evaluation: Evaluation, objective: str = "edp") -> float:
    """The value SA minimises: E x D (pJ x cycles), latency (cycles) or energy (pJ)."""
    if objective == "edp":
        return evaluation.edp
    if objective == "latency":
        return float(evaluation.latency)
    if objective == "energy":
        return evaluation.energy_pj
    raise ValueError(f"objective '{objective}': expected one of {', '.join(OBJECTIVES)}")


class _Evaluator:
    """check_tree + evaluate_tree with a shared leaf cache and a memo of whole trees."""

    def __init__(self, hw: TiledHardware, workload: Workload, cache: dict | None,
                 stride: int, min_util: float) -> None:
        self.hw, self.workload = hw, workload
        self.cache = {} if cache is None else cache
        self.stride, self.min_util = stride, min_util
        self.memo: dict[RaTree, Evaluation | None] = {}
        self.count = 0

    def __call__(self, tree: RaTree) -> Evaluation | None:
        """The evaluation of `tree`, or None when it is invalid or rejected."""
        self.count += 1
        if tree in self.memo:
            return self.memo[tree]
        try:
            check_tree(tree, self.workload, self.hw.n_tiles)
        except TreeError:
            result = None
        else:
            result = evaluate_tree(self.hw, self.workload, tree, self.stride,
                                   self.min_util, self.cache)
        if len(self.memo) >= MEMO_LIMIT:
            self.memo.clear()
        self.memo[tree] = result
        return result


def init_tree(hw: TiledHardware, workload: Workload, cache: dict | None = None,
              stride: int = DEFAULT_STRIDE,
              min_util: float = 0.75) -> tuple[RaTree, Evaluation]:
    """The reference's start tree and its evaluation: a root T over every layer in layer
    order, leaf batch = batch, batch/2, ... (integer halving, only values dividing the
    batch), the first that evaluates. InputError when none does."""
    evaluate = _Evaluator(hw, workload, cache, stride, min_util)
    leaves = tuple(Leaf(n) for n in workload.layers)
    lb = workload.batch
    while lb >= 1:
        if workload.batch % lb == 0:
            tree = RaTree(Cut("T", leaves, workload.batch // lb), workload.batch)
            ev = evaluate(tree)
            if ev is not None:
                return tree, ev
        lb //= 2
    raise InputError(f"{workload.name}: no leaf batch makes the layer-by-layer tree fit "
                     f"{hw.name}")


def _check_start(tree: RaTree, method: str) -> None:
    if method == "set":
        return
    root = from_ratree(tree)
    want = "T" if method == "ls" else "S"
    if root.height() > 2 or any(c.kind not in ("L", want) for c in root.children):
        raise ValueError(f"a '{method}' search needs a start tree of depth <= 2 with only "
                         f"{want} cuts under the root")


@dataclass
class _State:
    cur: MNode
    cur_cost: float
    best: MNode
    best_tree: RaTree
    best_ev: Evaluation
    best_cost: float


def search(hw: TiledHardware, workload: Workload, method: str = "set", seed: int = 0,
           rounds_per_layer: int = 100, time_limit: float | None = None,
           objective: str = "edp", start: RaTree | None = None, cache: dict | None = None,
           stride: int = DEFAULT_STRIDE, min_util: float = 0.75) -> SearchResult:
    """SET's SA (`method` 'set') or its LS / LP restrictions ('ls', 'lp') on `workload`
    on the tiled machine `hw`, minimising `objective` ('edp', 'latency', 'energy').

    `start`: the tree to start from (default: `init_tree`; for 'ls' / 'lp' it must obey
    their shape). `cache`: a leaf cache for `evaluate_tree`, shareable between calls on
    the same hardware and workload. `time_limit` (seconds): stop early with the best
    so far. Deterministic per seed when no time limit is given."""
    if method not in METHODS:
        raise ValueError(f"method '{method}': expected one of {', '.join(METHODS)}")
    if rounds_per_layer < 1:
        raise ValueError(f"rounds_per_layer must be >= 1, got {rounds_per_layer}")
    if objective not in OBJECTIVES:
        raise ValueError(f"objective '{objective}': expected one of {', '.join(OBJECTIVES)}")
    began = time.perf_counter()
    evaluate = _Evaluator(hw, workload, cache, stride, min_util)
    if start is None:
        start, start_ev = init_tree(hw, workload, evaluate.cache, stride, min_util)
    else:
        _check_start(start, method)
        start_ev = evaluate(start)
        if start_ev is None:
            raise ValueError("the start tree is invalid or rejected by the cost model")
    start_cost = objective_cost(start_ev, objective)
    rounds = rounds_per_layer * len(workload.layers)
    root = from_ratree(start)
    state = _State(root, start_cost, root, start, start_ev, start_cost)
    deadline = None if time_limit is None else began + time_limit
    stats = _anneal(state, Mutator(workload, method, random.Random(seed)), evaluate,
                    objective, Progress(rounds, deadline, began))
    return SearchResult(method, objective, seed, state.best_tree, state.best_ev,
                        state.best_cost, start, start_ev, start_cost, rounds, stats[0],
                        stats[1], stats[2], time.perf_counter() - began, stats[3])


def _anneal(state: _State, mutator: Mutator, evaluate: _Evaluator, objective: str,
            progress: Progress) -> tuple[int, int, int, list[TrailPoint]]:
    """The SA loop; updates `state`. Returns (rounds done, valid, accepted, trail)."""
    trail = [TrailPoint(evaluate.count, 0.0, state.best_cost)]
    valid = accepted = done = 0
    restarted = False
    rng = mutator.rng
    slowest, last = 0.0, time.perf_counter()  # the longest round so far (s), its start
    for r in range(progress.total):
        x = progress.at(r)
        now = time.perf_counter()
        slowest, last = max(slowest, now - last), now
        if progress.deadline is not None and now + slowest >= progress.deadline:
            break  # the next round would likely end past the deadline
        done = r + 1
        if x >= RESTART_AT and not restarted:
            restarted = True
            state.cur, state.cur_cost = state.best, state.best_cost
        new, _ = mutator.propose(state.cur)
        tree = None if new is None else to_ratree(new)
        ev = None if tree is None else evaluate(tree)
        if ev is None:
            continue
        valid += 1
        cost = objective_cost(ev, objective)
        if cost < state.best_cost:
            state.best, state.best_tree, state.best_ev, state.best_cost = new, tree, ev, cost
            trail.append(TrailPoint(evaluate.count, time.perf_counter() - progress.begin,
                                    cost))
        if COOLING.accept(state.cur_cost, cost, x, rng):
            state.cur, state.cur_cost = new, cost
            accepted += 1
    trail.append(TrailPoint(evaluate.count, time.perf_counter() - progress.begin,
                            state.best_cost))
    return done, valid, accepted, trail
