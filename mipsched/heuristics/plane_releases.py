"""Plane releases: LFA moves that let an FLG split the rows and columns of its planes by
moving the layers that read a whole plane, and what depends on them, out of it.

A tile computes the hull of what its FLG's later layers read at its index. A layer one
output position of which reads the whole plane of a producer in its FLG (a transpose
that turns tokens into channels, the right operand of attention's QK, a global pool, an
FC) makes every tile of that producer, and of the producer's own producers, a whole
plane of its samples: the FLG can then split only its samples, and its first tile loads
the network input of as many samples as a tile holds. Moving those readers and their
descendants in the FLG behind the rest (a valid order: nothing else in the FLG depends
on them) lets the rest split rows too.

GPT-2 small prefill / edge / b16, from the 60-s schedule's LFA (8,780,544 cycles): its
first FLG [norm1, K0, Kt0, .., K11, Kt11, K, Q, V] runs at 4 tiles of 4 samples because
each transpose Kt_i reads all 512 tokens of K_i, and its first tile waits 98,304 cycles
for 4 samples of input. With the transposes and the concat K moved into the next FLG
behind a DRAM cut, [norm1, K0, .., K11, Q, V] runs at 12 tiles (4 samples x 171 tokens)
at the compute bound: 8,802,624 cycles with the greedy prefetching DLSA (the LFA before:
8,811,264) and 8,671,620 after 40 s of the DLSA model. No single stage-1 operator gets
there: it takes twelve moves in the order, a new FLC and DRAM cut, one FLC and cut
fewer and a tiling number that is not a power of two.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import networkx as nx

from mipsched.heuristics.lfa_moves import with_flc, with_tiling, without_flc
from mipsched.heuristics.tiling_rule import accepts
from mipsched.schedule.notation import Lfa
from mipsched.workload.graph import Workload
from mipsched.workload.layer import Region
from mipsched.workload.ops import input_region

#: Per divisor d of the batch, how many tiling numbers d x k (d batch parts, each in
#: k >= 2 row and column parts) a release tries: the least ones.
PARTS_PER_DIVISOR = 2


def whole_readers(workload: Workload) -> dict[str, frozenset[str]]:
    """Per layer, the layers (not network inputs) of which one of its output positions
    reads the whole plane of a sample, where that plane has more than one position."""
    one = Region(0, 1, 0, 1, 0, 1)
    found: dict[str, frozenset[str]] = {}
    for name, layer in workload.layers.items():
        ins = workload.in_shapes(name)
        read = set()
        for k, src in enumerate(layer.inputs):
            shape = ins[k]
            region = input_region(layer, k, ins, one)
            if (src in workload.layers and region is not None and shape.h * shape.w > 1
                    and region.height == shape.h and region.width == shape.w):
                read.add(src)
        if read:
            found[name] = frozenset(read)
    return found


def release_tilings(workload: Workload, layers: tuple[str, ...], tiling: int
                    ) -> tuple[int, ...]:
    """The tiling numbers a release tries for the FLG of `layers` left behind: `tiling`
    (its FLG's before), then, per divisor d of the batch, the PARTS_PER_DIVISOR least
    d x k (k >= 2) with gcd(d k, batch) = d that choose_grid accepts: d batch parts,
    each in k row and column parts."""
    batch = workload.batch
    found = [tiling]
    for d in (d for d in range(1, batch + 1) if batch % d == 0):
        parts = (k for k in range(2, 2 * batch + 2)
                 if math.gcd(d * k, batch) == d and accepts(workload, layers, d * k))
        found.extend(d * k for k in itertools.islice(parts, PARTS_PER_DIVISOR))
    return tuple(dict.fromkeys(found))


def releases(lfa: Lfa, workload: Workload, readers: dict[str, frozenset[str]]
             ) -> Iterator[Lfa]:
    """For each FLG holding a whole reader of another of its layers (`readers`, from
    whole_readers): `lfa` with those readers and their descendants in the FLG moved
    behind the rest, as an FLG of their own at the old tiling number or joined to the
    next FLG (the FLC and any DRAM cut between them gone), with and without a DRAM cut
    in front of them, the rest at each of its release_tilings. Every other FLG keeps its
    layers, tiling number and DRAM cuts."""
    graph = workload.graph
    for g, (lo, hi) in enumerate(lfa.flg_bounds()):
        members = lfa.order[lo:hi]
        inside = set(members)
        held = {r for r in members if readers.get(r, frozenset()) & inside}
        if not held:
            continue
        leaving = _closed_downstream(held, inside, graph)
        kept = tuple(n for n in members if n not in leaving)
        if not kept:
            continue
        order = (*lfa.order[:lo], *kept, *(n for n in members if n in leaving),
                 *lfa.order[hi:])
        mid = lo + len(kept)
        split = with_flc(Lfa(order, lfa.flc, lfa.tiling, lfa.dram_cuts), mid)
        shapes = [split] if g + 1 == len(lfa.tiling) else [
            split, without_flc(split, g + 1, lfa.tiling[g + 1])]
        for tiling in release_tilings(workload, kept, lfa.tiling[g]):
            for cut in (False, True):
                for shape in shapes:
                    yield _with_cut(with_tiling(shape, g, tiling), mid, cut)


def _closed_downstream(held: set[str], inside: set[str], graph: nx.DiGraph) -> set[str]:
    """`held` and every layer of `inside` that depends on one of them."""
    closed = set(held)
    for name in held:
        closed |= nx.descendants(graph, name) & inside
    return closed


def _with_cut(lfa: Lfa, at: int, cut: bool) -> Lfa:
    """`lfa` with a DRAM cut added at FLC `at` when `cut`."""
    if not cut:
        return lfa
    return Lfa(lfa.order, lfa.flc, lfa.tiling, tuple(sorted({*lfa.dram_cuts, at})))
