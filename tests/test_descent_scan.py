"""The descent's neighbour scan: what it skips unscored could not have been taken (no
DLSA fits, or its latency bound already loses), and spread over worker processes it
takes the neighbour, and the descent the steps, that one process takes."""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mipsched.core import OBJECTIVES, SearchOptions
from mipsched.heuristics import descent_scan
from mipsched.heuristics.baseline import unfused_baseline
from mipsched.heuristics.descent_scan import NeighbourScan, better_than
from mipsched.heuristics.lfa_neighbours import neighbours
from mipsched.heuristics.local_descent import descend
from mipsched.heuristics.prefetch_anneal import prefetched, prefetched_cost
from mipsched.hw import load_hardware
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa
from mipsched.workload.zoo import get
from mipsched.workload.zoo.random_dags import random_dag

from strategies import random_lfa

EDGE = load_hardware("edge")


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 8),
       capacity=st.sampled_from([60_000, 200_000, 8 * 2**20]),
       objective=st.sampled_from(["latency", "edp", "energy"]),
       margin=st.sampled_from([0.9, 1.0, 1.0000001, 1.05]))
def test_better_than_is_the_prefetched_cost_below_the_threshold(
        seed: int, n: int, capacity: int, objective: str, margin: float) -> None:
    """better_than(lfa, cost) times an LFA exactly when its prefetched objective is below
    `cost`, with that timing: the fit check and the placement_bound cut lose nothing
    (thresholds just above, at and below the LFA's own objective, small buffers)."""
    wl = random_dag(seed, n_layers=n)
    hw = dataclasses.replace(EDGE, gbuf=dataclasses.replace(EDGE.gbuf,
                                                            capacity_bytes=capacity))
    lowerer = Lowerer(wl, hw)
    options = SearchOptions(objective=OBJECTIVES[objective])
    lfa = random_lfa(wl, random.Random(seed), tilings=(1, 2, 4))
    timed = prefetched(lowerer, lfa)
    own = None if timed is None else prefetched_cost(lowerer, options, timed[0].energy_pj,
                                                     timed[2])
    cost = margin * (own if own is not None else 1e30)
    found = better_than(lowerer, options, lfa, cost)
    if own is None or own >= cost:
        assert found is None
    else:
        assert found is not None and found[1:] == timed[1:]


def _scored_neighbours(lowerer: Lowerer, options: SearchOptions, lfa: Lfa, count: int
                       ) -> tuple[list[Lfa], list[float]]:
    """The first `count` neighbours of `lfa` and their prefetched objectives (inf where
    no DLSA fits)."""
    around = neighbours(lfa, lowerer.workload.graph)[:count]
    costs = []
    for other in around:
        timed = prefetched(lowerer, other)
        costs.append(float("inf") if timed is None else
                     prefetched_cost(lowerer, options, timed[0].energy_pj, timed[2]))
    return around, costs


def test_workers_take_the_first_better_neighbour_of_the_block(monkeypatch) -> None:
    """ResNet-50 at batch 1 from its unfused schedule: for thresholds that make the
    first better neighbour lie at different places of a 24-neighbour block, a scan in
    two processes returns that neighbour with the timing one process gives, and None
    below every neighbour's objective."""
    monkeypatch.setattr(descent_scan, "MIN_TILES_FOR_WORKERS", 0)
    monkeypatch.setattr(descent_scan, "BLOCK_PER_PROCESS", 12)
    lowerer = Lowerer(get("resnet50"), EDGE)
    options = SearchOptions(objective=OBJECTIVES["latency"])
    start = unfused_baseline(lowerer).best
    block, costs = _scored_neighbours(lowerer, options, start.lfa, 24)
    finite = sorted({c for c in costs if c != float("inf")})
    assert len(finite) >= 4
    thresholds = [finite[0], *(c + 1 for c in finite[::max(1, len(finite) // 5)])]
    with NeighbourScan(lowerer, options, 2, start.program.n_tiles, None) as scan:
        assert scan.block == 24
        for cost in thresholds:
            first = next((k for k, c in enumerate(costs) if c < cost), None)
            hit = scan.first_better(block, cost)
            if first is None:
                assert hit is None
                continue
            assert hit is not None and hit[0] == first
            assert hit[1][2] == prefetched(lowerer, block[first])[2]


@pytest.mark.parametrize("objective", ["latency", "edp"])
def test_the_descent_takes_the_same_steps_in_two_processes(monkeypatch, objective: str
                                                            ) -> None:
    """From GoogLeNet's unfused schedule at batch 1 (1,438,268 cycles) the descent ends
    at the same LFA with one process and with two, blocks of 8 neighbours per
    process."""
    monkeypatch.setattr(descent_scan, "MIN_TILES_FOR_WORKERS", 0)
    monkeypatch.setattr(descent_scan, "BLOCK_PER_PROCESS", 8)
    lowerer = Lowerer(get("googlenet"), EDGE)
    start = unfused_baseline(lowerer).best
    found = [descend(lowerer, start, SearchOptions(objective=OBJECTIVES[objective],
                                                   workers=workers), None)
             for workers in (1, 2)]
    assert found[0] is not None and found[1] is not None
    assert found[0].lfa == found[1].lfa
    assert found[0].evaluation.latency_cycles == found[1].evaluation.latency_cycles
