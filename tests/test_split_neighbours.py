"""The descent's FLG splits (lfa_neighbours.split_neighbours): one FLG cut in two, with
or without a DRAM cut, both halves retiled together."""

from __future__ import annotations

from mipsched.heuristics.lfa_neighbours import (
    batch_tilings,
    cut_neighbours,
    neighbours,
    odd_ratio_neighbours,
    split_neighbours,
)
from mipsched.heuristics.prefetch_anneal import prefetched
from mipsched.hw import load_hardware
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa
from mipsched.workload.zoo import get

EDGE = load_hardware("edge")


def _gpt2_b16_local_optimum() -> tuple[Lfa, Lowerer]:
    """GPT-2 small prefill / edge / b16's 60-s schedule before the splits (the descent's
    local optimum, 8,925,169 cycles under the greedy prefetching DLSA): the projections
    at 4 samples per tile, then one LG of attention and feed-forward at 48 tiles."""
    workload = get("gpt2_small_prefill", 16)
    order = list(workload.layers)
    heads = [name for i in range(12) for name in (f"attention_K{i}", f"attention_Kt{i}")]
    first = ["norm1", *heads, "attention_K", "attention_Q", "attention_V"]
    lfa = Lfa(tuple(first + [n for n in order if n not in first]), (28,), (4, 48), (28,))
    assert lfa.order[27:29] == ("attention_V", "attention_QK")
    return lfa, Lowerer(workload, EDGE)


def test_a_split_adds_one_cut_and_retiles_both_halves_alike() -> None:
    """Per FLG, per position inside it: the DRAM-cut variant, then the plain one, each at
    every tiling of the FLG's own, double, half, batch tilings and whole-sample counts;
    the other FLGs keep their cuts and tilings."""
    lfa = Lfa(tuple("abcdef"), (2,), (4, 6), (2,))
    found = list(split_neighbours(lfa, 4))
    tilings = {0: {4, 8, 2, *batch_tilings(4, 4), 1}, 1: {6, 12, 3, *batch_tilings(6, 4),
                                                           1, 2, 4}}
    assert len(found) == 2 * (1 * len(tilings[0]) + 3 * len(tilings[1]))
    for other in found:
        assert len(other.flc) == 2 and set(lfa.flc) < set(other.flc)
        cut = (set(other.flc) - set(lfa.flc)).pop()
        g = other.flc.index(cut)  # the halves are FLGs g and g + 1
        assert other.tiling[g] == other.tiling[g + 1] in tilings[g]
        assert [t for k, t in enumerate(other.tiling) if k not in (g, g + 1)] == \
            [t for k, t in enumerate(lfa.tiling) if k != g]
        assert set(other.dram_cuts) - {cut} == set(lfa.dram_cuts)
    at_one = [other for other in found if 1 in other.flc]  # FLG 0 split after "a"
    assert [1 in other.dram_cuts for other in at_one] == \
        [True] * len(tilings[0]) + [False] * len(tilings[0])


def test_splits_are_listed_last_and_only_with_a_batch_to_split() -> None:
    """The compound splits (all but the plain FLC, which keeps the tiling on both sides)
    follow the odd ratios with a batch to split and are not listed without one."""
    workload = get("resnet50", 16)
    lfa = Lfa(tuple(workload.layers), (20,), (16, 8), ())
    with_batch = neighbours(lfa, workload.graph, split_batch=16)
    splits = set(split_neighbours(lfa, 16)) - set(cut_neighbours(lfa))
    assert splits and splits <= set(with_batch)
    first_split = min(with_batch.index(s) for s in splits)
    assert all(with_batch.index(o) < first_split for o in odd_ratio_neighbours(lfa))
    assert not splits & set(neighbours(lfa, workload.graph))


def test_the_split_is_faster_where_no_single_move_is() -> None:
    """From GPT-2 small prefill / b16's local optimum, no move of the neighbourhood
    without splits is faster (some are invalid), and the split at the feed-forward's
    residual (two LGs, 16 tiles each: one sample per tile) is faster (greedy prefetching
    DLSA)."""
    lfa, lowerer = _gpt2_b16_local_optimum()
    start = prefetched(lowerer, lfa)
    assert start is not None
    graph = lowerer.workload.graph
    splits = set(split_neighbours(lfa, 16))
    singles = [o for o in neighbours(lfa, graph, split_batch=16) if o not in splits]
    assert all((f := prefetched(lowerer, o)) is None or f[2] >= start[2] for o in singles)
    split = Lfa(lfa.order, (28, 32), (4, 16, 16), (28, 32))
    assert split in splits
    found = prefetched(lowerer, split)
    assert found is not None and found[2] < start[2] - 100_000
