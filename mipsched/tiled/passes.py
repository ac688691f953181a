"""mipsched's passes on the best tree of SET's searches (`multistart.search_method`),
each kept only when it lowers the objective:

- `recombine_best`: the best sequence of segments from every seed's evaluated segments
  (`mipsched.tiled.recombine`);
- `place_best`: CP-SAT core counts and placement of every S Cut
  (`mipsched.tiled.placement.plan_tree`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from dataclasses import dataclass

from mipsched.hw.tiled import TiledHardware
from mipsched.tiled.evaluate import Evaluation, evaluate_tree
from mipsched.tiled.placement import plan_tree
from mipsched.tiled.ratree import RaTree
from mipsched.tiled.recombine import Segment, recombine
from mipsched.tiled.search import SearchResult, objective_cost
from mipsched.workload.graph import Workload


@dataclass(frozen=True)
class PassGain:
    """What one pass did: how many parts it changed (segments of the recombined tree,
    S Cuts re-planned), the objective before and after (after = before when its tree is
    not better and is dropped) and its wall seconds."""

    changed: int
    cost_before: float
    cost_after: float
    seconds: float


def _keep_if_better(found: SearchResult, tree: RaTree, evaluation: Evaluation | None,
                    objective: str) -> SearchResult:
    """`found` with `tree` and its `evaluation` when they lower the objective."""
    if evaluation is None:
        return found
    cost = objective_cost(evaluation, objective)
    if cost >= found.cost:
        return found
    return dataclasses.replace(found, tree=tree, evaluation=evaluation, cost=cost)


def recombine_best(hw: TiledHardware, workload: Workload, found: SearchResult,
                   pool: Iterable[Segment], objective: str, cache: dict,
                   deadline: float | None = None) -> tuple[SearchResult, PassGain]:
    """`found` replaced by the best recombination of `pool` when that is better, the
    recombined tree evaluated again by the cost model (leaf searches in `cache`);
    `found` unchanged when the recombination gives up (`deadline`, time.perf_counter(),
    or too many states: `recombine`)."""
    began = time.perf_counter()
    tree = recombine(workload, pool, objective, deadline)
    better = found
    if tree is not None and tree != found.tree:
        better = _keep_if_better(found, tree, evaluate_tree(hw, workload, tree, cache=cache),
                                 objective)
    changed = 0 if tree is None else len(tree.root.children)
    return better, PassGain(changed, found.cost, better.cost, time.perf_counter() - began)


def place_best(hw: TiledHardware, workload: Workload, found: SearchResult, objective: str,
               cache: dict, deadline: float | None = None) -> tuple[SearchResult, PassGain]:
    """`found` with its tree's S Cuts re-planned by `placement.plan_tree` (CP-SAT core
    counts, then the order of the children that minimises byte-hops), when that lowers
    the objective; else `found` unchanged. Cuts not reached by `deadline`
    (`time.perf_counter()`) keep SET's allocation."""
    began = time.perf_counter()
    try:
        plan = plan_tree(hw, workload, found.tree, cache=cache, deadline=deadline)
    except ValueError:  # a cut with no feasible counts: keep SET's allocation
        plan = None
    if plan is None or not plan.cuts:
        return found, PassGain(0, found.cost, found.cost, time.perf_counter() - began)
    better = _keep_if_better(found, plan.tree, plan.evaluation, objective)
    return better, PassGain(len(plan.cuts), found.cost, better.cost,
                            time.perf_counter() - began)
