"""SoMa's stage-1 operators on the layer-fusion attributes (§V-C1).

- move a layer to another valid place in the computing order (after all its inputs,
  before all its consumers; cut positions stay where they are);
- multiply or divide an FLG's tiling number by 2;
- add an FLC (the FLG splits, both halves keep its tiling number) or delete one (the two
  FLGs merge and inherit one tiling number with probability proportional to their layer
  counts; a DRAM cut there goes too);
- add a DRAM cut at an FLC, or delete one;
- mipsched's seventh, for the prefetch-scored annealing's worker chains only (SA keeps
  SoMa's six): add an FLC that is a DRAM cut too (`add_lg_cut`). Splitting an LG often
  fits only when the new cut also goes through DRAM, which SoMa's operators reach in two
  steps through an overflowing LFA.
Each returns a new Lfa, or None when the operator does not apply; whether the tiling
divides the work is left to lowering.
"""

from __future__ import annotations

import bisect
import random

import networkx as nx

from mipsched.schedule.notation import Lfa


def move_layer(lfa: Lfa, graph: nx.DiGraph, rng: random.Random) -> Lfa | None:
    """A random layer moved to another valid place in the computing order (after
    its inputs, before its consumers); None when it has none."""
    k = rng.randrange(len(lfa.order))
    name = lfa.order[k]
    rest = lfa.order[:k] + lfa.order[k + 1:]
    places = [q for q in valid_places(rest, name, graph) if q != k]
    if not places:
        return None
    return moved(lfa, rest, name, rng.choice(places))


def valid_places(rest: tuple[str, ...], name: str, graph: nx.DiGraph) -> range:
    """Where layer `name` may go in `rest` (the order without it): after all its
    inputs, before all its consumers."""
    index = {n: i for i, n in enumerate(rest)}
    lo = max((index[p] + 1 for p in graph.predecessors(name)), default=0)
    hi = min((index[s] for s in graph.successors(name)), default=len(rest))
    return range(lo, hi + 1)


def moved(lfa: Lfa, rest: tuple[str, ...], name: str, place: int) -> Lfa:
    """`lfa` with layer `name` put at `place` of `rest` (its order without it)."""
    return Lfa((*rest[:place], name, *rest[place:]), lfa.flc, lfa.tiling, lfa.dram_cuts)


def with_tiling(lfa: Lfa, g: int, tiling: int) -> Lfa:
    """`lfa` with FLG g's tiling number set to `tiling`."""
    return Lfa(lfa.order, lfa.flc, (*lfa.tiling[:g], tiling, *lfa.tiling[g + 1:]),
               lfa.dram_cuts)


def with_flc(lfa: Lfa, cut: int) -> Lfa:
    """`lfa` with an FLC added at uncut position `cut`: the FLG splits and both halves
    keep its tiling number."""
    g = bisect.bisect_left(lfa.flc, cut)  # the FLG that contains the new cut
    return Lfa(lfa.order, tuple(sorted((*lfa.flc, cut))),
               (*lfa.tiling[:g + 1], lfa.tiling[g], *lfa.tiling[g + 1:]), lfa.dram_cuts)


def without_flc(lfa: Lfa, g: int, inherited: int) -> Lfa:
    """`lfa` with its g-th FLC deleted: FLGs g and g + 1 merge with tiling number
    `inherited`; a DRAM cut there goes too."""
    cut = lfa.flc[g]
    return Lfa(lfa.order, lfa.flc[:g] + lfa.flc[g + 1:],
               (*lfa.tiling[:g], inherited, *lfa.tiling[g + 2:]),
               tuple(c for c in lfa.dram_cuts if c != cut))


def change_tiling(lfa: Lfa, rng: random.Random) -> Lfa | None:
    """A random FLG's tiling number doubled, or halved (even odds; a tiling
    number of 1 is always doubled)."""
    g = rng.randrange(len(lfa.tiling))
    t = lfa.tiling[g]
    return with_tiling(lfa, g, t * 2 if t == 1 or rng.random() < 0.5 else t // 2)


def add_flc(lfa: Lfa, rng: random.Random) -> Lfa | None:
    """An FLC added at a random position that has none: the FLG splits and both
    halves keep its tiling number; None when every position is cut."""
    cuts = set(lfa.flc)
    free = [p for p in range(1, len(lfa.order)) if p not in cuts]
    if not free:
        return None
    return with_flc(lfa, rng.choice(free))


def delete_flc(lfa: Lfa, rng: random.Random) -> Lfa | None:
    """A random FLC deleted: the two FLGs merge and inherit one tiling number with
    probability proportional to their layer counts; a DRAM cut there goes too. None
    without FLCs."""
    if not lfa.flc:
        return None
    g = rng.randrange(len(lfa.flc))  # merge FLG g and g + 1
    bounds = lfa.flg_bounds()
    left = bounds[g][1] - bounds[g][0]
    right = bounds[g + 1][1] - bounds[g + 1][0]
    inherited = lfa.tiling[g] if rng.random() < left / (left + right) else lfa.tiling[g + 1]
    return without_flc(lfa, g, inherited)


def add_dram_cut(lfa: Lfa, rng: random.Random) -> Lfa | None:
    """A DRAM cut added at a random FLC that has none; None when every FLC is one."""
    cuts = set(lfa.dram_cuts)
    free = [c for c in lfa.flc if c not in cuts]
    if not free:
        return None
    return Lfa(lfa.order, lfa.flc, lfa.tiling, tuple(sorted((*lfa.dram_cuts,
                                                            rng.choice(free)))))


def add_lg_cut(lfa: Lfa, rng: random.Random) -> Lfa | None:
    """An FLC added at a random uncut position, as a DRAM cut too (a new LG boundary);
    None when every position is cut."""
    split = add_flc(lfa, rng)
    if split is None:
        return None
    cut = next(c for c in split.flc if c not in lfa.flc)
    return Lfa(split.order, split.flc, split.tiling, tuple(sorted((*split.dram_cuts, cut))))


def delete_dram_cut(lfa: Lfa, rng: random.Random) -> Lfa | None:
    """A random DRAM cut deleted (its FLC stays); None without DRAM cuts."""
    if not lfa.dram_cuts:
        return None
    drop = rng.choice(lfa.dram_cuts)
    return Lfa(lfa.order, lfa.flc, lfa.tiling, tuple(c for c in lfa.dram_cuts if c != drop))


def propose(lfa: Lfa, graph: nx.DiGraph, rng: random.Random, lg_cuts: bool = False
            ) -> Lfa | None:
    """One random operator applied to `lfa` (None if the drawn operator does not apply):
    SoMa's six, or with `lg_cuts` also add_lg_cut, all equally likely."""
    op = rng.randrange(7 if lg_cuts else 6)
    if op == 6:
        return add_lg_cut(lfa, rng)
    if op == 0:
        return move_layer(lfa, graph, rng)
    if op == 1:
        return change_tiling(lfa, rng)
    if op == 2:
        return add_flc(lfa, rng)
    if op == 3:
        return delete_flc(lfa, rng)
    if op == 4:
        return add_dram_cut(lfa, rng)
    return delete_dram_cut(lfa, rng)
