"""The capacity curve: the best metric at every capacity of the grid, searched once
(upward, each capacity's search seeded with the best partition of the one below), and
the capacities that are optimal for some alpha read off its lower convex hull — so one
run answers Cocco's Eq. 2 for every alpha.

Why the hull: for a given alpha the objective c + alpha * m is a linear function of the
point (c, m) = (capacity in bytes, best metric there). A linear function with positive
weights on both coordinates is minimised over a finite point set at a vertex of the set's
lower-left convex hull, and as alpha grows from 0 to infinity the minimiser walks along
that hull from the least capacity to the least metric. Between consecutive vertices
(c_j, m_j) and (c_k, m_k) (c_j < c_k, m_j > m_k) the switch happens at
alpha = (c_k - c_j) / (m_j - m_k).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from mipsched.explore.genetic import CoGaSettings, ga_per_capacity
from mipsched.explore.space import CoSpace


@dataclass(frozen=True)
class HullVertex:
    """A capacity that minimises the objective for every alpha in [alpha_from, alpha_to]."""

    capacity_bytes: int
    metric: float
    alpha_from: float
    alpha_to: float


def curve_search(space: CoSpace, allowed: list[int], rng: random.Random,
                 settings: CoGaSettings | None = None) -> None:
    """The partition-only GA at each allowed capacity, smallest first, each with an equal
    share of the budget left, seeded with the unfused partition and the best partition of
    the capacity below (which still fits with more buffer)."""
    ga_per_capacity(space, sorted(allowed), rng, settings, warm=True)


def lower_hull(points: list[tuple[int, float]]) -> list[HullVertex]:
    """The vertices of the lower-left convex hull of (capacity bytes, metric) points, in
    capacity order, each with the range of alpha for which it is optimal."""
    front: list[tuple[int, float]] = []
    for c, m in sorted(points):
        if not front or m < front[-1][1]:  # Pareto: more capacity only for less metric
            front.append((c, m))
    hull: list[tuple[int, float]] = []
    for p in front:
        while len(hull) >= 2 and _cross(hull[-2], hull[-1], p) <= 0:
            hull.pop()
        hull.append(p)
    switches = [(c1 - c0) / (m0 - m1) for (c0, m0), (c1, m1) in zip(hull, hull[1:], strict=False)]
    edges = [0.0, *switches, math.inf]
    return [HullVertex(c, m, edges[j], edges[j + 1]) for j, (c, m) in enumerate(hull)]


def _cross(o: tuple[int, float], a: tuple[int, float], b: tuple[int, float]) -> float:
    """z of (a - o) x (b - o): > 0 when o -> a -> b turns left (counter-clockwise)."""
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def best_for(hull: list[HullVertex], alpha: float) -> HullVertex:
    """The hull vertex optimal at `alpha` (the smaller capacity at a switch point)."""
    return next(v for v in hull if v.alpha_from <= alpha <= v.alpha_to)
