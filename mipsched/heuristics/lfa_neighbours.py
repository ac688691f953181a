"""Every LFA one stage-1 operator away from a given one (lfa_moves enumerated instead of
drawn), for the local descent (local_descent).

The neighbourhood, in the order it is listed: each FLG's tiling number doubled or
halved; each FLC deleted (the merged FLG inheriting either side's tiling number, a DRAM
cut there going too); an FLC added at each uncut position (both halves keep the tiling
number); a DRAM cut added at each FLC without one, or one deleted; each layer moved to
each other valid place in the computing order. Cheap moves that often pay come first.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator

import networkx as nx

from mipsched.schedule.notation import Lfa


def tiling_neighbours(lfa: Lfa) -> Iterator[Lfa]:
    """Each FLG's tiling number doubled, then halved (when at least 2)."""
    for g, t in enumerate(lfa.tiling):
        for new in (t * 2, t // 2):
            if new >= 1:
                yield Lfa(lfa.order, lfa.flc, (*lfa.tiling[:g], new, *lfa.tiling[g + 1:]),
                          lfa.dram_cuts)


def cut_neighbours(lfa: Lfa) -> Iterator[Lfa]:
    """Each FLC deleted (either tiling number inherited), each uncut position cut, each
    FLC made a DRAM cut, each DRAM cut deleted."""
    for g, cut in enumerate(lfa.flc):
        flc = lfa.flc[:g] + lfa.flc[g + 1:]
        dram_cuts = tuple(c for c in lfa.dram_cuts if c != cut)
        for inherited in dict.fromkeys((lfa.tiling[g], lfa.tiling[g + 1])):
            yield Lfa(lfa.order, flc, (*lfa.tiling[:g], inherited, *lfa.tiling[g + 2:]),
                      dram_cuts)
    cuts = set(lfa.flc)
    for position in range(1, len(lfa.order)):
        if position not in cuts:
            g = bisect.bisect_left(lfa.flc, position)  # the FLG the new cut splits
            yield Lfa(lfa.order, tuple(sorted((*lfa.flc, position))),
                      (*lfa.tiling[:g + 1], lfa.tiling[g], *lfa.tiling[g + 1:]),
                      lfa.dram_cuts)
    dram = set(lfa.dram_cuts)
    for cut in lfa.flc:
        changed = dram ^ {cut}
        yield Lfa(lfa.order, lfa.flc, lfa.tiling, tuple(sorted(changed)))


def order_neighbours(lfa: Lfa, graph: nx.DiGraph) -> Iterator[Lfa]:
    """Each layer moved to each other place after all its inputs and before all its
    consumers (cut positions stay where they are)."""
    for k, name in enumerate(lfa.order):
        rest = lfa.order[:k] + lfa.order[k + 1:]
        index = {n: i for i, n in enumerate(rest)}
        lo = max((index[p] + 1 for p in graph.predecessors(name)), default=0)
        hi = min((index[s] for s in graph.successors(name)), default=len(rest))
        for place in range(lo, hi + 1):
            if place != k:
                yield Lfa((*rest[:place], name, *rest[place:]), lfa.flc, lfa.tiling,
                          lfa.dram_cuts)


def neighbours(lfa: Lfa, graph: nx.DiGraph) -> list[Lfa]:
    """The whole neighbourhood of `lfa`, in the module's order (no LFA twice)."""
    found = dict.fromkeys((*tiling_neighbours(lfa), *cut_neighbours(lfa),
                           *order_neighbours(lfa, graph)))
    found.pop(lfa, None)
    return list(found)
