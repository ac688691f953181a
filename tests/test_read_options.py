"""The read cases of the load-order bound (`formulations/read_options.py`): the ideals and
the first-share lemma against brute force and the lowering, the MIPs with shares against
enumeration, the bound on GPT-2 prefill against a schedule of it, and over-tight variants
caught by that schedule."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import networkx as nx
import pytest
from test_weight_order import brute_force

from mipsched.formulations import read_options, weight_order
from mipsched.formulations.needed import needed_masks
from mipsched.formulations.read_options import (
    first_share_fraction,
    pointwise_onward,
    read_cases,
)
from mipsched.formulations.weight_order import WeightOrderInputs, weight_order_bound
from mipsched.heuristics.prefetch_anneal import prefetched
from mipsched.hw import load_hardware
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa, ScheduleError
from mipsched.schedule.tiling import tile_flg
from mipsched.workload import zoo
from mipsched.workload.graph import NetBuilder, Workload
from mipsched.workload.zoo.random_dags import random_dag

EDGE = load_hardware("edge")
SCHEDULE = Path(__file__).parent / "data" / "gpt2_small_prefill_edge_b1_lfa.json"


def residual_block(batch: int, tokens: int) -> Workload:
    """A transformer block's second half: the input read by a projection and again by
    the residual add, then a two-layer feed-forward."""
    b = NetBuilder("residual", batch)
    x = b.input("x", 16, tokens)
    r = b.eltwise("r", [x, b.matmul("a", x, 16)])
    b.output(b.matmul("down", b.matmul("up", r, 64), 16))
    return b.build()


@pytest.mark.parametrize("seed", range(8))
def test_the_ideals_are_every_ancestor_closed_set(seed: int) -> None:
    workload = random_dag(seed, n_layers=5 + seed % 3, batch=1)
    for reader in workload.layers:
        below = nx.descendants(workload.graph, reader)
        found = set(read_options._ideals(workload, reader, below))
        expected = {frozenset(s) for k in range(len(below) + 1)
                    for s in itertools.combinations(sorted(below), k)
                    if all(set(workload.graph.predecessors(j)) & below <= set(s) for j in s)}
        assert found == expected or len(found) > read_options.MAX_IDEALS


def test_pointwise_onward_follows_the_reads() -> None:
    gpt2 = zoo.get("gpt2_small_prefill")
    onward = pointwise_onward(gpt2)
    assert {"res1", "norm2", "ffn1", "GeLU", "ffn2", "res2"} <= onward
    assert "norm1" not in onward and "attention_K0" not in onward  # K^T reads every token
    assert "conv1" not in pointwise_onward(zoo.get("resnet50"))


@pytest.mark.parametrize("batch", [1, 2, 3])
@pytest.mark.parametrize("tiling", [2, 3, 4, 6, 8])
def test_the_tiles_after_the_first_cover_the_first_share_fraction(batch: int,
                                                                  tiling: int) -> None:
    """The lemma under the shares: in an FLG of r and its point-wise descendants, at any
    tiling number >= 2, every layer's tiles after the first hold at least (N - s0) of
    its N positions."""
    workload = residual_block(batch, tokens=6)
    layers = ("r", "up", "down")
    try:
        tiles = tile_flg(workload, layers, tiling)
    except ScheduleError:
        pytest.skip("a tiling number the grid rule cannot split")
    masks = needed_masks(workload)
    for name in layers:
        count = batch * int(masks[name].sum())
        later = sum(r.batch * (r.h1 - r.h0) * (r.w1 - r.w0)
                    for r in tiles.produced[name][1:] if r is not None)
        assert later >= first_share_fraction(workload, name, count) * count


def _brute_cases(workload: Workload) -> list[float]:
    return [max(brute_force(inputs) for inputs in case.unit_sets())
            for case in read_cases(workload, EDGE, WeightOrderInputs.of(workload, EDGE))]


@pytest.mark.parametrize(("batch", "tokens"), [(1, 4), (2, 2)])
def test_the_mips_with_shares_find_the_least_choice_of_loads(batch: int,
                                                            tokens: int) -> None:
    workload = residual_block(batch, tokens)
    every = WeightOrderInputs.of(workload, EDGE)
    cases = read_cases(workload, EDGE, every)
    assert cases and any(case.partial for case in cases)
    for case, expected in zip(cases, _brute_cases(workload), strict=True):
        value, complete = weight_order._largest(case, None, None, 0.0)
        assert complete
        assert expected * (1 - 1e-5) - 1 <= value <= math.ceil(expected) + 1


def _schedule_latency(workload: Workload) -> int:
    """Latency of the saved GPT-2 prefill schedule (its LFA with the prefetching DLSA)."""
    saved = json.loads(SCHEDULE.read_text())
    lfa = Lfa(tuple(saved["order"]), tuple(saved["flc"]), tuple(saved["tiling"]),
              tuple(saved["dram_cuts"]))
    found = prefetched(Lowerer(workload, EDGE), lfa)
    assert found is not None
    return found[2]


def test_the_cases_raise_gpt2_prefill_to_just_below_a_schedule(monkeypatch) -> None:
    """The residual's read of the token cannot load after the feed-forward weights for
    free: 619,056 -> 640,560 cycles, below the saved schedule (642,192)."""
    workload = zoo.get("gpt2_small_prefill")
    latency = _schedule_latency(workload)
    bound = weight_order_bound(workload, EDGE, None).value
    monkeypatch.setattr(weight_order, "read_cases", lambda *args: [])
    without = weight_order_bound(workload, EDGE, None).value
    assert without + 20_000 < bound <= latency


def _only_later_flgs(workload, reader, below):
    """Over-tight: as if a reader's descendants were never in its FLG."""
    return iter([frozenset()])


def _fused_at_full_compute(workload, inputs, least, counts, unit, reader, below, same):
    """Over-tight: as if the descendants in the reader's FLG ran whole after the read."""
    full = {name: inputs.compute_cycles[name] for name in least}
    return _true_case(workload, inputs, full, counts, unit, reader, below, same)


_true_case = read_options._case


@pytest.mark.parametrize(("name", "variant"), [("_ideals", _only_later_flgs),
                                               ("_case", _fused_at_full_compute)])
def test_over_tight_cases_are_caught(monkeypatch, name: str, variant) -> None:
    workload = zoo.get("gpt2_small_prefill")
    latency = _schedule_latency(workload)
    monkeypatch.setattr(read_options, name, variant)
    assert weight_order_bound(workload, EDGE, None).value > latency, \
        "the check cannot tell a wrong bound"


def test_a_read_with_too_many_ideals_keeps_one_case(monkeypatch) -> None:
    workload = residual_block(1, 4)
    every = WeightOrderInputs.of(workload, EDGE)
    assert read_cases(workload, EDGE, every)
    monkeypatch.setattr(read_options, "MAX_IDEALS", 1)
    assert read_cases(workload, EDGE, every) == []
