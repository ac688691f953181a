"""Sparse ends and their isolations (heuristics/sparse_ends.py, a move of the local
descent): ResNet's stage ends are found with their strided readers and nothing is found
where every position is needed; every isolation is a valid LFA that keeps every other
layer's FLG, and the isolated stage end computes far less than fused in one-sample tiles;
auto's resumed descent returns a replayable local optimum."""

from __future__ import annotations

import math

from mipsched.core import SearchOptions
from mipsched.heuristics.baseline import unfused_baseline
from mipsched.heuristics.lfa_neighbours import neighbours
from mipsched.heuristics.prefetch_anneal import prefetched
from mipsched.heuristics.sparse_ends import isolations, merged_before, sparse_ends
from mipsched.hw import load_hardware
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa
from mipsched.schedule.tiling import choose_grid
from mipsched.sim import simulate
from mipsched.solve.methods import _resumed_descent
from mipsched.workload.zoo import get

EDGE = load_hardware("edge")


def test_resnet50_has_three_sparse_ends_with_their_stride_two_readers() -> None:
    """Each stage's last bottleneck (3x3, 1x1, add) is needed at a quarter of its
    positions and read by the next stage's two stride-2 1x1 convolutions."""
    ends = sparse_ends(get("resnet50"))
    assert [e.chain for e in ends] == [
        (f"conv_{s}_{b}_b", f"conv_{s}_{b}_c", f"conv_{s}_{b}_res")
        for s, b in ((2, 2), (3, 3), (4, 5))]
    assert [set(e.readers) for e in ends] == [
        {f"conv_{s}_0_a", f"conv_{s}_br"} for s in (3, 4, 5)]
    assert [(e.parts[0], e.parts[-1]) for e in ends] == [(14, 28), (7, 14), (4, 7)]


def test_nets_that_need_every_position_have_no_sparse_end() -> None:
    for net in ("vgg19", "gpt2_small_prefill", "inception_resnet_v1"):
        assert sparse_ends(get(net)) == ()


def test_sparse_tilings_cut_the_readers_plane_into_a_row_or_two() -> None:
    """Every tiling number gives the batch parts choose_grid's rule says and at most two
    rows or two columns of the readers' plane per tile, for at most two sample counts
    per part count."""
    workload = get("resnet50", 16)
    for end in sparse_ends(workload):
        block = (*end.chain, *end.readers)
        side = workload.layers[end.readers[0]].out.h
        tilings = end.tilings
        assert len(tilings) <= 2 * len(end.parts)
        for t in tilings:
            grid = choose_grid(workload, block, t)
            assert grid.batch_parts == math.gcd(t, 16)
            assert math.ceil(side / max(grid.h_parts, grid.w_parts)) <= 2


def _fused_per_sample(workload_batch: int) -> tuple[Lowerer, Lfa]:
    """ResNet-50 in two FLGs, the first up to the end of stage 3 in one-sample tiles."""
    workload = get("resnet50", workload_batch)
    order = tuple(workload.layers)
    cut = order.index("conv_4_0_a") + 1
    lfa = Lfa(order, (cut,), (workload_batch, 1), (cut,))
    return Lowerer(workload, EDGE), lfa


def test_isolations_are_valid_and_keep_every_other_layers_flg() -> None:
    lowerer, lfa = _fused_per_sample(16)
    workload = lowerer.workload
    end = sparse_ends(workload)[1]
    block = set(end.chain) | set(end.readers)
    old = {n: g for g, (lo, hi) in enumerate(lfa.flg_bounds()) for n in lfa.order[lo:hi]}
    found = list(isolations(lfa, end, workload.graph))
    assert len(found) == 4 * len(end.tilings)
    for new in found:
        lowerer.lower(new, check=True)
        groups = [set(new.order[lo:hi]) for lo, hi in new.flg_bounds()]
        assert block in groups
        k = groups.index(block)
        assert new.tiling[k] in end.tilings
        for group in groups[:k] + groups[k + 1:]:
            assert len({old[n] for n in group}) == 1
    assert {(new.order.index(end.chain[0]) in new.dram_cuts,
             new.order.index(end.chain[0]) + len(block) in new.dram_cuts)
            for new in found} == {(False, False), (False, True), (True, False), (True, True)}


def _stage_three_behind_a_cut() -> tuple[Lowerer, Lfa, int]:
    """A local optimum of the descent on ResNet-50 / edge / b16 (8,783,044 cycles, greedy
    prefetching DLSA): one-sample tiles up to stage 3's last-but-one block, then, behind
    a DRAM cut, two-sample tiles up to the end of stage 3 and its readers, then five
    more FLGs; and where the second FLG starts."""
    workload = get("resnet50", 16)
    order = list(workload.layers)
    for stage, after in ((2, 1), (3, 0), (4, 0), (5, 1)):  # each shortcut's place
        order.remove(f"conv_{stage}_br")
        order.insert(order.index(f"conv_{stage}_0_a") + after, f"conv_{stage}_br")
    first = order.index("conv_3_2_a")
    assert first == 24 and order[33] == "conv_4_0_a"
    lfa = Lfa(tuple(order), (24, 34, 46, 54, 59, 60), (16, 8, 8, 8, 14, 2, 1),
              (24, 34, 46, 54))
    return Lowerer(workload, EDGE), lfa, first


def test_isolations_also_join_the_layers_left_before_the_end_to_the_flg_before() -> None:
    """Isolating stage 3's end from the middle FLG leaves [conv_3_2_a, conv_3_3_a] as an
    FLG of its own; each isolation comes with its merged_before variant, where those
    layers join the first FLG at its 16 tiles and the DRAM cut between them is gone.
    Here that saves the stores and loads of stage 3's residual: the best merged variant
    is faster (greedy prefetching DLSA) than every plain isolation."""
    lowerer, lfa, first = _stage_three_behind_a_cut()
    end = sparse_ends(lowerer.workload)[1]
    found = list(isolations(lfa, end, lowerer.workload.graph))
    assert len(found) == 8 * len(end.tilings)
    plain, merged = found[0::2], found[1::2]
    for isolated, joined in zip(plain, merged, strict=True):
        assert joined == merged_before(isolated, 2)
        lowerer.lower(joined, check=True)
        assert first not in joined.flc and first not in joined.dram_cuts
        start = joined.order.index(end.chain[0])
        assert joined.flg_bounds()[0] == (0, start) and joined.tiling[0] == 16
        assert len(joined.flc) == len(isolated.flc) - 1

    def fastest(candidates: list[Lfa]) -> int:
        return min(f[2] for c in candidates if (f := prefetched(lowerer, c)))

    assert fastest(merged) < fastest(plain)


def test_the_isolated_stage_end_computes_far_less_than_fused_per_sample() -> None:
    """Stage 3's end fused in one-sample tiles computes its whole 28 x 28 plane; isolated
    at any of its sparse tilings its tiles compute at most 75 % of those cycles (13 tiles:
    16 samples, 13 column parts, about 54 %)."""
    lowerer, lfa = _fused_per_sample(16)
    end = sparse_ends(lowerer.workload)[1]

    def chain_cycles(candidate: Lfa) -> int:
        program = lowerer.lower(candidate, check=False)
        return sum(t.compute_cycles for t in program.tiles if t.layer in end.chain)

    fused = chain_cycles(lfa)
    for new in isolations(lfa, end, lowerer.workload.graph):
        assert chain_cycles(new) <= 0.75 * fused


def test_isolations_are_in_the_neighbourhood_only_with_batch_splits() -> None:
    lowerer, lfa = _fused_per_sample(16)
    ends = sparse_ends(lowerer.workload)
    graph = lowerer.workload.graph
    isolated = set(isolations(lfa, ends[1], graph))
    assert isolated <= set(neighbours(lfa, graph, split_batch=16, ends=ends))
    assert not isolated & set(neighbours(lfa, graph, ends=ends))


def test_the_resumed_descent_returns_a_replayable_better_lfa() -> None:
    """From the unfused schedule of a residual block, auto's resumed descent (no
    deadline: never cut) ends at another LFA, faster than the start, that the simulator
    replays."""
    lowerer = Lowerer(get("resblock"), EDGE)
    start = unfused_baseline(lowerer).best
    found, cut = _resumed_descent(lowerer, start, SearchOptions(), None)
    assert found is not None and not cut
    assert found.lfa != start.lfa
    assert found.evaluation.latency_cycles < start.evaluation.latency_cycles
    assert simulate(found.program, found.dlsa).latency_cycles == \
        found.evaluation.latency_cycles
