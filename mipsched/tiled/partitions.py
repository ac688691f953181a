"""SET's partition candidates for one leaf (docs/set-model.md §3.4): how a layer's
ofmap (K, B, H, W) is split over a group of cores, the reference's filters (`minCuts`,
75 % utilisation) and its placement orders."""

from __future__ import annotations

import itertools
import math

MIN_PART_UTIL = 0.75
PART_INDEX = ("K", "B", "H", "W")


def factor_pairs(n: int) -> list[tuple[int, int]]:
    """The reference's 2-way splits of n (`factor_num`), most square first."""
    small = {1: [(1, 1)], 4: [(2, 2), (1, 4), (4, 1)], 6: [(2, 3), (3, 2), (1, 6), (6, 1)],
             8: [(2, 4), (4, 2), (1, 8), (8, 1)], 9: [(3, 3), (1, 9), (9, 1)],
             10: [(2, 5), (5, 2), (1, 10), (10, 1)]}
    if n <= 11:
        return small.get(n, [(1, n), (n, 1)])
    top = math.isqrt(n)
    pairs = []
    if n % top == 0:
        pairs.append((top, n // top))
        if top * top != n:
            pairs.append((n // top, top))
    for i in range(top - 1, 1, -1):
        if n % i == 0:
            pairs += [(i, n // i), (n // i, i)]
    return pairs + [(1, n), (n, 1)]


def all_partitions(n: int) -> list[tuple[int, int, int, int]]:
    """Every (K, B, H, W) with product n, in the reference's order (`init_all`)."""
    return [(pq[0], pq[1], rs[0], rs[1]) for xy in factor_pairs(n)
            for pq in factor_pairs(xy[0]) for rs in factor_pairs(xy[1])]


def part_intv(n: int, p: int) -> list[int]:
    """Boundaries of n cut into p pieces (larger pieces first): n - floor(n (p - i) / p)."""
    return [n - n * (p - i) // p for i in range(p + 1)]


def _util(real: int, part: int) -> float:
    return real / (-(-real // part) * part)


def candidate_partitions(n: int, dims: tuple[int, int, int, int],
                         min_cuts: int) -> list[tuple[int, int, int, int]]:
    """Partitions that pass `minCuts` and the 75 % utilisation filter, in order; if none
    does, the one of best utilisation among those meeting `minCuts` (`getBestPart`); []
    when none meets `minCuts`."""
    good, best, best_util = [], None, 0.0
    for part in all_partitions(n):
        if part[1] * part[2] * part[3] < min_cuts:
            continue
        u = _util(dims[0], part[0]) * _util(dims[1], part[1])
        u = u * _util(dims[2], part[2]) * _util(dims[3], part[3])
        if u >= MIN_PART_UTIL:
            good.append(part)
        if u > best_util:
            best, best_util = part, u
    if good:
        return good
    return [best] if best is not None else []


def placement_orders(part: tuple[int, int, int, int]) -> list[tuple[int, ...]]:
    """Dimension orders to try: the split dimensions permuted lexicographically from
    ascending (`next_permutation`), the unsplit ones appended (`PlaceIter`)."""
    split = [d for d in range(4) if part[d] > 1]
    unit = [d for d in range(4) if part[d] == 1]
    return [perm + tuple(reversed(unit)) for perm in itertools.permutations(split)]
