"""Sparse ends: LFA moves that let a schedule compute only the positions a strided reader
needs, which no single stage-1 operator reaches.

Some layers are needed only in part (`needed.py`): ResNet v1's last bottleneck of a
stage [conv_x_y_b, conv_x_y_c, conv_x_y_res] is read only by the next stage's stride-2
1x1 convolutions, at even rows and columns. A tile still computes the hull of what its
FLG's tiles read, so fused in an FLG of one sample per tile such a chain computes its
whole plane. In an FLG of its own with its readers, whose tiling number cuts the
readers' plane into parts of a row (or a column) or two, each tile computes only the
rows (or columns) read.

ResNet-50 / edge / b16, from the schedule of 8,752,452 cycles (greedy prefetching DLSA)
with its stage-3 end fused in one-sample tiles: the stage-3 end and its two readers moved
together, [conv_3_3_b, conv_3_3_c, conv_3_3_res, conv_4_0_a, conv_4_br], as an FLG of 13
tiles (all 16 samples, the 14 x 14 plane in 13 column parts) behind a DRAM cut computes
in 8,583,760 cycles what took 8,728,912 and runs in 8,653,908. Reaching it takes a
reorder (conv_4_br up to conv_4_0_a), two FLCs, a DRAM cut and a tiling number that is
not a power of two, each worse alone; `isolations` makes the whole step at once.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import networkx as nx

from mipsched.formulations.needed import needed_masks
from mipsched.schedule.notation import Lfa
from mipsched.schedule.tiling import choose_grid
from mipsched.workload.graph import Workload

SPARSE_SHARE = 0.5
"""A layer is part of a sparse end when every schedule needs at most this share of its
output positions (ResNet's stage ends: a quarter)."""


@dataclass(frozen=True)
class SparseEnd:
    """A connected run of partly needed layers and the layers that read it whole."""

    chain: tuple[str, ...]
    """The partly needed layers, in the workload's order."""
    readers: tuple[str, ...]
    """Their consumers outside the chain, in the workload's order."""
    parts: tuple[int, ...]
    """Numbers of parts, per sample group, of the readers' smallest plane to try: from
    half its smaller side to that side (one or two rows or columns per reader tile)."""
    tilings: tuple[int, ...]
    """The tiling numbers an isolation tries (`sparse_tilings`)."""


def sparse_ends(workload: Workload) -> tuple[SparseEnd, ...]:
    """The workload's sparse ends, in the workload's order: connected sets of layers of
    which every schedule needs at most SPARSE_SHARE of the positions, with their readers."""
    masks = needed_masks(workload)
    rank = {name: k for k, name in enumerate(workload.layers)}
    sparse = {n for n, m in masks.items() if m.any() and m.sum() <= SPARSE_SHARE * m.size}
    graph = workload.graph
    ends = []
    for part in nx.weakly_connected_components(graph.subgraph(sparse)):
        readers = tuple(sorted({s for n in part for s in graph.successors(n)} - part,
                               key=rank.__getitem__))
        if not readers:
            continue
        chain = tuple(sorted(part, key=rank.__getitem__))
        side = min(min(workload.layers[r].out.h, workload.layers[r].out.w) for r in readers)
        parts = tuple(range(math.ceil(side / 2), side + 1))
        tilings = sparse_tilings(workload, (*chain, *readers), parts, side)
        ends.append(SparseEnd(chain, readers, parts, tilings))
    return tuple(sorted(ends, key=lambda e: rank[e.chain[0]]))


def sparse_tilings(workload: Workload, block: tuple[str, ...], parts: tuple[int, ...],
                   side: int) -> tuple[int, ...]:
    """Per part count p in `parts`, the two least tiling numbers d x p (d dividing the
    batch) for which choose_grid gives d batch parts (gcd(d p, batch) = d): as many
    samples per tile as the part count allows, and half as many (ResNet-50 / edge / b16:
    the stage-4 end runs best at 14 tiles, 8 samples in 7 row parts); kept where the
    grid of FLG `block` gives each tile at most two rows or two columns of a plane whose
    smaller side is `side` (a part count of 9 is split 3 x 3). The descent's batch
    splits and doublings reach other sample counts."""
    batch = workload.batch
    found: set[int] = set()
    for p in parts:
        for t in [d * p for d in workload.batch_divisors if math.gcd(d * p, batch) == d][:2]:
            grid = choose_grid(workload, block, t)
            if math.ceil(side / max(grid.h_parts, grid.w_parts)) <= 2:
                found.add(t)
    return tuple(sorted(found))


def isolations(lfa: Lfa, end: SparseEnd, graph: nx.DiGraph) -> Iterator[Lfa]:
    """`lfa` with `end`'s chain and readers made one FLG, at each of its tilings, with and
    without a DRAM cut on either side; nothing when no valid order keeps them together.
    Every other layer keeps its FLG, its tiling number and its DRAM cuts; each such LFA
    is followed by its `merged_before` variant, where there is one."""
    block = (*end.chain, *end.readers)
    order = _with_block(lfa.order, block, graph)
    if order is None:
        return
    start = order.index(block[0])
    stop = start + len(block)
    flc, tiling, kept = _around(lfa, order, start, stop)
    at = flc.index(start) + 1 if start > 0 else 0  # the block's FLG
    for t in end.tilings:
        new_tiling = (*tiling[:at], t, *tiling[at + 1:])
        for before in (False, True):
            for after in (False, True):
                cuts = kept | ({start} if before and start > 0 else set()) | (
                    {stop} if after and stop < len(order) else set())
                isolated = Lfa(order, tuple(flc), new_tiling, tuple(sorted(cuts)))
                yield isolated
                if at >= 2:
                    yield merged_before(isolated, at)


def merged_before(lfa: Lfa, at: int) -> Lfa:
    """`lfa` with FLG `at - 1` (the one before the isolated block `at`, at least 2) joined
    to FLG `at - 2` at that FLG's tiling number, the FLC and any DRAM cut between them
    gone. Isolating an end that sat inside a larger FLG leaves the layers before it as an
    FLG of their own; joined to the FLG before, they no longer add a cut whose stores and
    loads the isolation did not need. ResNet-50 / edge / b16, from a local optimum of
    8,752,452 cycles (greedy prefetching DLSA) with stage 3's end inside an FLG of 8 tiles
    that starts behind a DRAM cut: every isolation of that end is slower (9,265,700 at
    best: stage 3's 6.4 MB residual goes through DRAM), the best merged one takes
    8,676,484, and the descent from that local optimum, with these variants, reaches
    8,626,676."""
    cut = lfa.flc[at - 2]
    return Lfa(lfa.order, tuple(c for c in lfa.flc if c != cut),
               (*lfa.tiling[:at - 1], *lfa.tiling[at:]),
               tuple(c for c in lfa.dram_cuts if c != cut))


def _with_block(order: tuple[str, ...], block: tuple[str, ...], graph: nx.DiGraph
                ) -> tuple[str, ...] | None:
    """`order` with `block` moved together, right after the last layer outside it that
    any of its layers reads; None when that breaks a dependency."""
    members = set(block)
    rest = [n for n in order if n not in members]
    index = {n: k for k, n in enumerate(rest)}
    feeds = [index[p] for n in block for p in graph.predecessors(n) if p not in members]
    place = max(feeds, default=-1) + 1
    new = (*rest[:place], *block, *rest[place:])
    position = {n: k for k, n in enumerate(new)}
    if any(position[u] >= position[v] for u, v in graph.edges):
        return None
    return new


def _around(lfa: Lfa, order: tuple[str, ...], start: int, stop: int
            ) -> tuple[list[int], list[int], set[int]]:
    """FLCs, tiling numbers (the block's a placeholder 0) and kept DRAM cuts of `order`
    with positions [start, stop) one FLG and every other layer in its old FLG."""
    bounds = lfa.flg_bounds()
    flg_of = {name: g for g, (lo, hi) in enumerate(bounds) for name in lfa.order[lo:hi]}
    after_dram = {g for g, (lo, _) in enumerate(bounds) if lo in lfa.dram_cuts}
    flc: list[int] = []
    tiling: list[int] = []
    kept: set[int] = set()
    previous = -2  # no FLG yet (-1: the block)
    for k, name in enumerate(order):
        group = -1 if start <= k < stop else flg_of[name]
        if group == previous:
            continue
        if k > 0:
            flc.append(k)
            if group >= 0 and previous >= 0 and group in after_dram:
                kept.add(k)
        tiling.append(lfa.tiling[group] if group >= 0 else 0)
        previous = group
    return flc, tiling, kept
