"""The descent's bridges (lfa_neighbours.bridges): the end of one FLG and the start of
the next made an FLG of its own, at a tiling number of its own."""

from __future__ import annotations

from mipsched.core import OBJECTIVES, SearchOptions
from mipsched.heuristics.lfa_neighbours import (
    BRIDGE_SPAN,
    bridges,
    cut_neighbours,
    neighbours,
    order_neighbours,
    tiling_neighbours,
)
from mipsched.heuristics.prefetch_anneal import prefetched, prefetched_cost
from mipsched.hw import load_hardware
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa
from mipsched.workload.zoo import get

EDGE = load_hardware("edge")
REFERENCE_LATENCY = 649_728
"""The SoMa reference's latency on its GPT-2 small prefill (edge, batch 1), cycles
(../shared/reference-nets/reference-runs.csv)."""


def _tiling_at(lfa: Lfa, position: int) -> int:
    """The tiling number of the FLG holding `position`."""
    return next(t for (start, stop), t in zip(lfa.flg_bounds(), lfa.tiling, strict=True)
                if start <= position < stop)


def test_a_bridge_is_one_new_flg_across_an_flc() -> None:
    """FLGs [a b c] x 4 and [d e f g] x 2: one bridge per tail of 1 to 3 layers, head of
    0 to BRIDGE_SPAN and tiling number among 4, 2, 8 and 1, each a different LFA; the
    rest of each FLG keeps its tiling number; a bridge of all of [a b c] moves the FLC."""
    lfa = Lfa(tuple("abcdefg"), (3,), (4, 2), ())
    found = list(bridges(lfa))
    assert BRIDGE_SPAN == 3
    assert len(found) == 3 * 4 * 4 == len(set(found))
    assert Lfa(lfa.order, (2, 3), (4, 8, 2), ()) in found  # [c] x 8
    assert Lfa(lfa.order, (1, 4), (4, 1, 2), ()) in found  # [b c d] x 1
    assert Lfa(lfa.order, (2, 6), (4, 4, 2), ()) in found  # [c d e f] x 4
    assert Lfa(lfa.order, (5,), (8, 2), ()) in found  # [a .. e] x 8: the FLC moved
    assert all(other.order == lfa.order and other.dram_cuts == () and
               len(other.tiling) == len(other.flc) + 1 for other in found)


def test_no_bridge_crosses_a_dram_cut() -> None:
    """FLGs [a b] x 1 | [c d] x 2 [e f] x 4 with a DRAM cut at c: bridges only across
    the FLC at e (tails 1-2, heads 0-2, 4 tiling numbers); [a b] and the cut stay."""
    lfa = Lfa(tuple("abcdef"), (2, 4), (1, 2, 4), (2,))
    found = list(bridges(lfa))
    assert len(found) == 2 * 3 * 4
    for other in found:
        assert 2 in other.flc and other.dram_cuts == (2,)
        assert _tiling_at(other, 0) == _tiling_at(other, 1) == 1


def _gpt2_b1_local_optimum() -> tuple[Lfa, Lowerer]:
    """GPT-2 small prefill / edge / b1, the keys, Q and the transposes first and V after
    the softmax, with every layer up to ffn1 in one FLG and [GeLU, ffn2, res2] at 3
    tiles: no move of the neighbourhood but a bridge lowers its E x D (greedy
    prefetching DLSA, 651,792 cycles, as the descent's local optimum in 15-s solves)."""
    workload = get("gpt2_small_prefill")
    keys = [f"attention_K{h}" for h in range(12)]
    transposed = [f"attention_Kt{h}" for h in range(12)]
    rest = ["attention_K", "attention_QK", "attention_QK_elt", "attention_V",
            "attention_QKV", "attention_FC", "res1", "norm2", "ffn1", "GeLU", "ffn2", "res2"]
    order = ("norm1", *keys, "attention_Q", *transposed, *rest)
    assert set(order) == set(workload.layers) and len(order) == len(workload.layers)
    return Lfa(order, (order.index("GeLU"),), (1, 3), ()), Lowerer(workload, EDGE)


def _gpt2_bridge(lfa: Lfa) -> Lfa:
    """The bridge from that LFA: [res1, norm2, ffn1, GeLU] x 2 tiles, [ffn2, res2] x 3."""
    return Lfa(lfa.order, (lfa.order.index("res1"), lfa.order.index("ffn2")), (1, 2, 3), ())


def test_the_bridge_lowers_e_x_d_where_no_other_move_does() -> None:
    """From that local optimum the bridge [res1, norm2, ffn1, GeLU] x 2 tiles, [ffn2,
    res2] x 3 lowers E x D and the latency, to below the reference's (649,728 cycles)."""
    lfa, lowerer = _gpt2_b1_local_optimum()
    options = SearchOptions(objective=OBJECTIVES["edp"])
    start = prefetched(lowerer, lfa)
    assert start is not None and start[2] > REFERENCE_LATENCY
    cost = prefetched_cost(lowerer, options, start[0].energy_pj, start[2])
    found = set(bridges(lfa))
    for other in neighbours(lfa, lowerer.workload.graph, split_batch=1):
        scored = prefetched(lowerer, other)
        if other not in found and scored is not None:
            assert prefetched_cost(lowerer, options, scored[0].energy_pj, scored[2]) >= cost
    bridge = _gpt2_bridge(lfa)
    assert bridge in found
    better = prefetched(lowerer, bridge)
    assert better is not None and better[2] < REFERENCE_LATENCY
    assert prefetched_cost(lowerer, options, better[0].energy_pj, better[2]) < cost


def test_bridges_are_listed_last_with_or_without_a_batch_to_split() -> None:
    """The GPT-2 bridge, which no single move gives, follows every FLC, tiling and order
    move in the neighbourhood, with a batch to split or without."""
    lfa, lowerer = _gpt2_b1_local_optimum()
    graph = lowerer.workload.graph
    bridge = _gpt2_bridge(lfa)
    singles = {*tiling_neighbours(lfa), *cut_neighbours(lfa), *order_neighbours(lfa, graph)}
    assert bridge not in singles
    for split_batch in (None, 1):
        around = neighbours(lfa, graph, split_batch=split_batch)
        assert max(around.index(other) for other in singles if other in around) < \
            around.index(bridge)
