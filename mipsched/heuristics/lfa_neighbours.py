"""Every LFA one stage-1 operator away from a given one (lfa_moves enumerated instead of
drawn, built by its helpers), for the local descent (local_descent).

The neighbourhood, in the order it is listed: where batch splits are asked for, each
sparse end isolated (`sparse_ends.isolations`: a compound step, and on ResNet at batch
16 the move that pays most) and each plane release (`plane_releases.releases`: a
compound step moving the readers of whole planes out of an FLG so that it can split
rows; on GPT-2 prefill at batch 16 the move that pays most); each FLG's tiling number
doubled or halved, and where asked moved to the nearest tiling numbers that split the
batch into each of its divisors (`batch_tilings`); each FLC deleted (the merged FLG
inheriting either side's tiling number, a DRAM cut there going too); an FLC added at
each uncut position (both halves keep the tiling number); a DRAM cut added at each FLC
without one, or one deleted; each layer moved to each other valid place in the
computing order; last, where batch splits are asked for, each tiling number scaled by
the odd ratios of ODD_FACTORS (same samples per tile, other row and column parts); then
each FLG split in two (`split_neighbours`: a compound step, the halves retiled
together); then, with or without a batch, each bridge across an FLC (`bridges`: the
end of one FLG and the start of the next made an FLG of its own, at a tiling number of
its own). Cheap moves that often pay come first; the odd ratios, the splits and the
bridges come last, so the descent takes them only where nothing else pays (listed
earlier, the odd ratios changed which local optimum 60-s runs reach:
docs/decisions.md).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Iterator, Sequence

import networkx as nx

from mipsched.heuristics.lfa_moves import moved, valid_places, with_flc, with_tiling, without_flc
from mipsched.heuristics.sparse_ends import SparseEnd, isolations
from mipsched.schedule.notation import Lfa

ODD_FACTORS = (1, 3, 5, 7)
"""With a batch to split, a tiling number T also moves to T x a / b for a != b among
these, where that is whole: an odd ratio keeps the samples per tile wherever the batch is
a power of two and changes only the row and column parts, in steps doubling and halving
cannot take. ResNet-50 / edge / b16's FLG of stage 3's end and stage 4's readers: 13
tiles beats 11, 15, 26, 6 and every batch split near it, and 39, 65 and 91 tiles (16
samples in 7 x 13 parts) beat 13; 91 takes 38,016 cycles off the 60-s schedule."""


BRIDGE_SPAN = 3
"""A bridge takes at most this many layers from the end of the FLG before an FLC and
from the start of the FLG after it: 72 bridges on GPT-2 small prefill b1's 3-FLG LFA,
178 on ResNet-50 b16's 60-s LFA, 509 on ResNet-101 b16's (2.0 s per scan with the
greedy prefetching DLSA, the longest on the Fig. 6 nets)."""


def tiling_neighbours(lfa: Lfa, flgs: Sequence[int] | None = None,
                      split_batch: int | None = None) -> Iterator[Lfa]:
    """Each FLG's tiling number (FLGs in the order `flgs`, default first to last) doubled
    and halved (SoMa's moves), then, with `split_batch` (the workload's batch), its
    `batch_tilings`."""
    for g in range(len(lfa.tiling)) if flgs is None else flgs:
        for new in _moved_tilings(lfa.tiling[g], split_batch):
            yield with_tiling(lfa, g, new)


def _moved_tilings(tiling: int, split_batch: int | None) -> list[int]:
    """`tiling` doubled and halved, then its `batch_tilings` with a `split_batch`; each
    once, all >= 1 and none equal to `tiling`."""
    splits = batch_tilings(tiling, split_batch) if split_batch is not None else []
    return [t for t in dict.fromkeys((tiling * 2, tiling // 2, *splits))
            if t >= 1 and t != tiling]


def odd_ratio_neighbours(lfa: Lfa, flgs: Sequence[int] | None = None) -> Iterator[Lfa]:
    """Each FLG's tiling number T (FLGs in the order `flgs`, default first to last) moved
    to T x a / b for a != b in ODD_FACTORS, where that is whole."""
    for g in range(len(lfa.tiling)) if flgs is None else flgs:
        for new in ratio_tilings(lfa.tiling[g], ODD_FACTORS):
            yield with_tiling(lfa, g, new)


def ratio_tilings(tiling: int, factors: Sequence[int]) -> list[int]:
    """tiling x a / b for a != b in `factors`, where whole, without repeats, in the order
    of the pairs (a, b)."""
    return list(dict.fromkeys(tiling * a // b for a in factors for b in factors
                              if a != b and tiling * a % b == 0))


def split_neighbours(lfa: Lfa, batch: int, flgs: Sequence[int] | None = None
                     ) -> Iterator[Lfa]:
    """Each FLG (in the order `flgs`, default first to last) split at each position
    inside it, first with a DRAM cut there (two LGs), then without, both halves at one
    tiling number: the FLG's own, its double and half, its `batch_tilings` and every
    divisor of `batch` (whole samples per tile).

    One move instead of three or four (an FLC, a DRAM cut, a tiling number per half),
    none of which pays alone: GPT-2 small prefill / edge / b16's 60-s schedule runs its
    attention and feed-forward layers as one FLG of 48 tiles (1 sample, 3 row parts);
    split into two LGs at 16 tiles each it is 113,905 cycles faster (greedy prefetching
    DLSA), while no single move from it is faster."""
    bounds = (0, *lfa.flc, len(lfa.order))
    samples = [d for d in range(1, batch + 1) if batch % d == 0]
    for g in range(len(lfa.tiling)) if flgs is None else flgs:
        t = lfa.tiling[g]
        tilings = list(dict.fromkeys((t, *_moved_tilings(t, batch), *samples)))
        for cut in range(bounds[g] + 1, bounds[g + 1]):
            halves = with_flc(lfa, cut)
            two_lgs = Lfa(halves.order, halves.flc, halves.tiling,
                          tuple(sorted((*halves.dram_cuts, cut))))
            for split in (two_lgs, halves):
                for x in tilings:
                    yield with_tiling(with_tiling(split, g, x), g + 1, x)


def batch_tilings(tiling: int, batch: int) -> list[int]:
    """For every number of batch parts d dividing `batch`, the nearest tiling numbers T
    below and above `tiling` whose batch parts gcd(T, batch) are d (choose_grid's rule).

    Doubling and halving keep a tile's samples at batch / gcd(T, batch) for powers of two
    only; an unrolling over the batch wants a multiple of the PE dimension: GPT-2 XL's
    ffn2 (cloud, batch 16) runs at 156.25 cycles per position on 4 samples per tile and
    175 on 1 or 2, and 4 whole samples do not fit the buffer, so 36 tiles (4 samples,
    9 row parts) take 2.5 % off the schedule that had 32 (1 sample, 2 row parts)."""
    found = []
    for d in (d for d in range(1, batch + 1) if batch % d == 0):
        rest = batch // d
        below = (tiling - 1) // d
        while below >= 1 and math.gcd(below, rest) != 1:
            below -= 1
        above = tiling // d + 1
        while math.gcd(above, rest) != 1:
            above += 1
        found += [d * below] if below >= 1 else []
        found.append(d * above)
    return found


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


def bridges(lfa: Lfa) -> Iterator[Lfa]:
    """Per FLC that is not a DRAM cut, between FLGs g and g + 1: the last `tail` layers
    of g (1..BRIDGE_SPAN) and the first `head` of g + 1 (0..BRIDGE_SPAN) made one FLG,
    at the tiling number of g or g + 1, or double or half either; what is left of g and
    g + 1 keeps its tiling number (a bridge taking all of g moves the FLC and retiles).

    One move instead of three (an FLC added, one moved, a tiling number), none of which
    pays alone. The reference's GPT-2 small prefill (edge, batch 1) under E x D: the
    descent's local optimum [.. FC, res1, norm2, ffn1] x 1 tile, [GeLU, ffn2, res2] x 3
    (651,792 cycles, 1.3854e9 pJ) becomes [.. FC] x 1, [res1, norm2, ffn1, GeLU] x 2,
    [ffn2, res2] x 3 (648,720 cycles, 1.3914e9 pJ, E x D 0.04 % lower): ffn1 waits for
    half the residual's reload of the input instead of all of it, and ffn2's tiles no
    longer wait for GeLU's. The FLC alone, or with the tiling number, adds energy
    faster than it takes latency off; moving GeLU alone changes nothing."""
    bounds = lfa.flg_bounds()
    for g, cut in enumerate(lfa.flc):
        if cut in lfa.dram_cuts:
            continue
        (first, _), (_, stop) = bounds[g], bounds[g + 1]
        before, after = lfa.tiling[g], lfa.tiling[g + 1]
        tilings = dict.fromkeys((before, after, *_moved_tilings(before, None),
                                 *_moved_tilings(after, None)))
        for tail in range(1, min(BRIDGE_SPAN, cut - first) + 1):
            for head in range(min(BRIDGE_SPAN, stop - cut) + 1):
                start, end = cut - tail, cut + head
                starts = (0, *sorted({*lfa.flc, start, end} - {0, len(lfa.order)}
                                     - ({cut} if head else set())))
                kept = [lfa.tiling[bisect.bisect_right(lfa.flc, s)] for s in starts]
                for bridge in tilings:
                    tiling = (bridge if s == start else t
                              for s, t in zip(starts, kept, strict=True))
                    yield Lfa(lfa.order, starts[1:], tuple(tiling), lfa.dram_cuts)


def neighbours(lfa: Lfa, graph: nx.DiGraph, flgs: Sequence[int] | None = None,
               split_batch: int | None = None, ends: Sequence[SparseEnd] = (),
               released: Iterable[Lfa] = ()) -> list[Lfa]:
    """The whole neighbourhood of `lfa`, in the module's order (no LFA twice), the tiling
    moves and splits of FLGs in the order `flgs` (default: first to last); batch splits
    of `split_batch` samples, the odd ratios, the FLG splits, the isolations of the
    sparse `ends` and the plane releases `released` (plane_releases.releases of `lfa`)
    included when it is given; the bridges always, last."""
    isolated = () if split_batch is None else (
        candidate for end in ends for candidate in isolations(lfa, end, graph))
    odd = () if split_batch is None else odd_ratio_neighbours(lfa, flgs)
    split = () if split_batch is None else split_neighbours(lfa, split_batch, flgs)
    released = () if split_batch is None else released
    found = dict.fromkeys((*isolated, *released, *tiling_neighbours(lfa, flgs, split_batch),
                           *cut_neighbours(lfa), *order_neighbours(lfa, graph), *odd,
                           *split, *bridges(lfa)))
    found.pop(lfa, None)
    return list(found)
