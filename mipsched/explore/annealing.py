"""Simulated annealing over (capacity, partition): Cocco's SA co-optimisation baseline
(§5.3). A move is either a capacity step (mutation-DSE: a normal draw around the current
capacity, rounded to the grid) or one partition mutation (modify-node, split, merge);
acceptance and cooling are SoMa's (heuristics/annealing.py: relative cost change,
T0 = 0.05), progress = samples used / budget (or the share of the time, if larger).
"""

from __future__ import annotations

import random

from mipsched.explore.genetic import mutate_capacity
from mipsched.explore.space import CoSpace, Sample
from mipsched.heuristics.annealing import Cooling, Progress
from mipsched.heuristics.cocco import mutate

CAPACITY_MOVE_SHARE = 0.3
"""Share of moves that change the capacity."""
CAPACITY_SIGMA = 0.1
"""Standard deviation of a capacity move, as a fraction of the grid's span."""


def co_sa(space: CoSpace, allowed: list[int], rng: random.Random,
          cooling: Cooling | None = None) -> None:
    """Anneals from the unfused partition at the largest allowed capacity that has a
    schedule (else the first feasible sample drawn) until the budget is spent; the best
    sample is `space.best`."""
    cooling = cooling or Cooling()
    n = len(space.workload.layers)
    current = _start(space, allowed)
    if current is None:
        return
    progress = Progress(space.max_evaluations, space.deadline)
    while not space.exhausted():
        index, cuts = current.capacity_index, current.cuts
        if len(allowed) > 1 and rng.random() < CAPACITY_MOVE_SHARE:
            index = mutate_capacity(space, index, allowed, rng, CAPACITY_SIGMA)
        else:
            cuts = mutate(cuts, n, rng)
        moved = space.sample(index, cuts)
        if moved is not None and cooling.accept(current.objective, moved.objective,
                                                progress.at(space.evaluations), rng):
            current = moved


def _start(space: CoSpace, allowed: list[int]) -> Sample | None:
    """The unfused partition at the largest allowed capacity with a schedule."""
    for index in sorted(allowed, reverse=True):
        if space.exhausted():
            return None
        found = space.sample(index, space.unfused())
        if found is not None:
            return found
    return None
