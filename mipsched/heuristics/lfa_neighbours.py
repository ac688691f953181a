"""Every LFA one stage-1 operator away from a given one (lfa_moves enumerated instead of
drawn, built by its helpers), for the local descent (local_descent).

The neighbourhood, in the order it is listed: each FLG's tiling number doubled or
halved; each FLC deleted (the merged FLG inheriting either side's tiling number, a DRAM
cut there going too); an FLC added at each uncut position (both halves keep the tiling
number); a DRAM cut added at each FLC without one, or one deleted; each layer moved to
each other valid place in the computing order. Cheap moves that often pay come first.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import networkx as nx

from mipsched.heuristics.lfa_moves import moved, valid_places, with_flc, with_tiling, without_flc
from mipsched.schedule.notation import Lfa


def tiling_neighbours(lfa: Lfa, flgs: Sequence[int] | None = None) -> Iterator[Lfa]:
    """Each FLG's tiling number (FLGs in the order `flgs`, default first to last) doubled,
    then halved (when at least 2): powers of two stay powers of two, the space the exact
    search proves its optimum over (formulations/exact.py)."""
    for g in range(len(lfa.tiling)) if flgs is None else flgs:
        t = lfa.tiling[g]
        for new in (t * 2, t // 2):
            if new >= 1:
                yield with_tiling(lfa, g, new)


def cut_neighbours(lfa: Lfa) -> Iterator[Lfa]:
    """Each FLC deleted (either tiling number inherited), each uncut position cut, each
    FLC made a DRAM cut, each DRAM cut deleted."""
    for g in range(len(lfa.flc)):
        for inherited in dict.fromkeys((lfa.tiling[g], lfa.tiling[g + 1])):
            yield without_flc(lfa, g, inherited)
    cuts = set(lfa.flc)
    for position in range(1, len(lfa.order)):
        if position not in cuts:
            yield with_flc(lfa, position)
    dram = set(lfa.dram_cuts)
    for cut in lfa.flc:
        yield Lfa(lfa.order, lfa.flc, lfa.tiling, tuple(sorted(dram ^ {cut})))


def order_neighbours(lfa: Lfa, graph: nx.DiGraph) -> Iterator[Lfa]:
    """Each layer moved to each other place after all its inputs and before all its
    consumers (cut positions stay where they are)."""
    for k, name in enumerate(lfa.order):
        rest = lfa.order[:k] + lfa.order[k + 1:]
        for place in valid_places(rest, name, graph):
            if place != k:
                yield moved(lfa, rest, name, place)


def neighbours(lfa: Lfa, graph: nx.DiGraph, flgs: Sequence[int] | None = None
               ) -> list[Lfa]:
    """The whole neighbourhood of `lfa`, in the module's order (no LFA twice), the tiling
    moves of FLGs in the order `flgs` (default: first to last)."""
    found = dict.fromkeys((*tiling_neighbours(lfa, flgs), *cut_neighbours(lfa),
                           *order_neighbours(lfa, graph)))
    found.pop(lfa, None)
    return list(found)
