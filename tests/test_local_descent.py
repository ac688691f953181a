"""The LFA neighbourhood and the local descent over it (auto's step after the
prefetch-scored annealing): every neighbour is one stage-1 operator away and valid, the
descent ends at a true local optimum never worse than its start, honours its deadline,
and on the reference's GPT-2 small decode reaches the certified bound's neighbourhood
from the unfused schedule alone."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Iterator

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from mipsched.core import OBJECTIVES, Candidate, SearchOptions
from mipsched.evaluate import evaluate
from mipsched.heuristics import local_descent
from mipsched.heuristics.baseline import unfused_baseline
from mipsched.heuristics.lfa_moves import with_tiling
from mipsched.heuristics.lfa_neighbours import (
    ODD_FACTORS,
    batch_tilings,
    bridges,
    neighbours,
    odd_ratio_neighbours,
    split_neighbours,
    tiling_neighbours,
)
from mipsched.heuristics.local_descent import descend
from mipsched.heuristics.prefetch_anneal import prefetched, prefetched_cost
from mipsched.hw import load_hardware
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa
from mipsched.sim import simulate
from mipsched.solve.bounds import run_bound
from mipsched.solve.methods import _descend_starts, _descent_step
from mipsched.workload.graph import NetBuilder
from mipsched.workload.zoo import get
from mipsched.workload.zoo.random_dags import random_dag

from strategies import random_lfa

EDGE = load_hardware("edge")


def _one_operator_apart(a: Lfa, b: Lfa, batch: int | None) -> bool:
    """Whether b differs from a in exactly one of: one tiling number (x2, /2 or, with a
    `batch`, one of its batch_tilings or odd ratios), the
    FLC set by one cut, the DRAM cut set by one cut, or one layer's place in the order."""
    if a.order != b.order:
        moved = [n for n, m in zip(a.order, b.order, strict=True) if n != m]
        return a.flc == b.flc and a.tiling == b.tiling and a.dram_cuts == b.dram_cuts and \
            sorted(a.order) == sorted(b.order) and len(moved) >= 2
    if a.flc != b.flc:
        return len(set(a.flc) ^ set(b.flc)) == 1 and len(b.tiling) == len(b.flc) + 1
    if a.tiling != b.tiling:
        changed = [(x, y) for x, y in zip(a.tiling, b.tiling, strict=True) if x != y]
        if len(changed) != 1 or a.dram_cuts != b.dram_cuts:
            return False
        t, new = changed[0]
        odd = {t * x // y for x in ODD_FACTORS for y in ODD_FACTORS if t * x % y == 0}
        return new in (2 * t, t // 2, *(batch_tilings(t, batch) if batch else ()),
                       *(odd if batch else ()))
    return len(set(a.dram_cuts) ^ set(b.dram_cuts)) == 1 and set(b.dram_cuts) <= set(b.flc)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 9), split=st.booleans())
def test_every_neighbour_is_a_valid_lfa_one_operator_away(seed: int, n: int,
                                                          split: bool) -> None:
    """Neighbours are distinct, differ from the LFA, keep a topological order, cuts in
    range and one tiling number per FLG, and each is one operator away (batch splits
    only when asked for) or a bridge (test_bridges); every FLG's tiling doubled and every
    FLC deleted is among them."""
    wl = random_dag(seed, n_layers=n, batch=1 + seed % 4)
    lfa = random_lfa(wl, random.Random(seed), tilings=(1, 2, 4))
    batch = wl.batch if split else None
    around = neighbours(lfa, wl.graph, split_batch=batch)
    assert len(set(around)) == len(around) and lfa not in around
    bridged = set(bridges(lfa))
    for other in around:
        position = {name: i for i, name in enumerate(other.order)}
        assert all(position[u] < position[v] for u, v in wl.graph.edges)
        assert all(1 <= c < n for c in other.flc) and len(other.tiling) == len(other.flc) + 1
        assert other in bridged or _one_operator_apart(lfa, other, batch), (lfa, other)
    for g in range(len(lfa.tiling)):
        doubled = (*lfa.tiling[:g], 2 * lfa.tiling[g], *lfa.tiling[g + 1:])
        assert Lfa(lfa.order, lfa.flc, doubled, lfa.dram_cuts) in around
    flc_sets = {o.flc for o in around}
    assert all(lfa.flc[:g] + lfa.flc[g + 1:] in flc_sets for g in range(len(lfa.flc)))


@settings(max_examples=60, deadline=None)
@given(tiling=st.integers(1, 300), batch=st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16, 64]))
def test_batch_tilings_are_the_nearest_per_batch_split(tiling: int, batch: int) -> None:
    """By brute force: for every divisor d of the batch, the largest T < tiling and the
    smallest T > tiling with gcd(T, batch) = d, and nothing else."""
    expected = set()
    for d in (d for d in range(1, batch + 1) if batch % d == 0):
        same = [t for t in range(1, 2 * tiling + 2 * batch + 2) if math.gcd(t, batch) == d]
        expected |= {max((t for t in same if t < tiling), default=None),
                     min(t for t in same if t > tiling)}
    assert set(batch_tilings(tiling, batch)) == expected - {None}


def test_odd_ratios_reach_the_tilings_doubling_and_batch_splits_miss() -> None:
    """ResNet-50 / edge / b16's 60-s schedule before the odd ratios: its FLG of stage 3's
    end and stage 4's readers at 13 tiles (16 samples, 13 row parts) is faster than at
    each of its other tiling moves, but an odd ratio of it (39, 65 or 91 tiles, still 16
    samples per tile) is faster still (greedy prefetching DLSA). The odd ratios come last
    in the neighbourhood but for the FLG splits and the bridges."""
    workload = get("resnet50", 16)
    order = list(workload.layers)
    for stage in (2, 3, 4, 5):  # each shortcut right after its block's first conv
        order.remove(f"conv_{stage}_br")
        order.insert(order.index(f"conv_{stage}_0_a") + 1, f"conv_{stage}_br")
    lfa = Lfa(tuple(order), (29, 34, 42, 54, 59, 60, 62, 68),
              (16, 13, 16, 4, 14, 1, 1, 1, 1), (29, 42, 54))
    assert order[29] == "conv_3_3_b" and order[33] == "conv_4_br"
    lowerer = Lowerer(workload, EDGE)
    def latencies(moves: Iterator[Lfa]) -> dict[int, int]:
        return {other.tiling[1]: f[2] for other in moves
                if (f := prefetched(lowerer, other)) is not None}

    found = prefetched(lowerer, lfa)
    assert found is not None
    plain = latencies(tiling_neighbours(lfa, [1], 16))
    odd = latencies(odd_ratio_neighbours(lfa, [1]))
    assert {39, 65, 91} <= set(odd) and not set(odd) & set(plain)
    assert all(latency > found[2] for latency in plain.values())
    assert min(odd[t] for t in (39, 65, 91)) < found[2]
    around = neighbours(lfa, workload.graph, split_batch=16)
    ratios = set(odd_ratio_neighbours(lfa))
    compounds = {*split_neighbours(lfa, 16), *bridges(lfa)}
    last_single = max(i for i, other in enumerate(around)
                      if other not in ratios and other not in compounds)
    assert all(around.index(with_tiling(lfa, 1, t)) > last_single for t in (39, 65, 91))


def _ffn2() -> Lowerer:
    """GPT-2 XL prefill's ffn2 alone on cloud at batch 16: 4 whole samples per tile do
    not fit the buffer and 1 or 2 samples run the PE array at 175 cycles per position,
    not 156.25."""
    b = NetBuilder("ffn2", 16)
    b.matmul("ffn2", b.input("x", 6400, 1024), 1600)
    return Lowerer(b.build(), load_hardware("cloud"))


def test_batch_splits_beat_every_power_of_two_where_no_bound_needs_powers(monkeypatch) -> None:
    """With batch splits allowed (as on nets of more than MAX_LAYERS layers), the descent
    from the unfused schedule ends below the best power-of-two tiling (2,972,800 cycles
    at 64 tiles) at a tiling number that is not one; the simulator agrees."""
    monkeypatch.setattr(local_descent, "certified_over_powers_of_two", lambda wl: False)
    lowerer = _ffn2()
    powers = [prefetched(lowerer, Lfa(("ffn2",), (), (2 ** k,), ())) for k in range(12)]
    best_power = min(found[2] for found in powers if found is not None)
    found = descend(lowerer, unfused_baseline(lowerer).best, SearchOptions(), None)
    assert found is not None and found.evaluation.latency_cycles < 0.95 * best_power
    assert found.lfa.tiling[0] & (found.lfa.tiling[0] - 1)  # not a power of two
    assert simulate(found.program, found.dlsa).latency_cycles == \
        found.evaluation.latency_cycles


def test_on_a_net_the_relaxation_certifies_every_tiling_stays_a_power_of_two() -> None:
    """ffn2 alone has 1 layer: the LFA relaxation and the exact search certify it over
    power-of-two tilings, so the descent stays on them (here the unfused start already
    has the best one, so it finds nothing better)."""
    lowerer = _ffn2()
    start = unfused_baseline(lowerer).best
    assert all(t & (t - 1) == 0 for t in start.lfa.tiling)
    found = descend(lowerer, start, SearchOptions(), None)
    assert found is None or all(t & (t - 1) == 0 for t in found.lfa.tiling)


def test_every_order_neighbour_of_a_chain_is_none_and_of_a_fork_is_found() -> None:
    """A chain has no other topological order; in a fork a -> (b, c) the two branches
    swap."""
    chain = nx.DiGraph([("a", "b"), ("b", "c")])
    assert all(o.order == ("a", "b", "c")
               for o in neighbours(Lfa(("a", "b", "c"), (), (1,), ()), chain))
    fork = nx.DiGraph([("a", "b"), ("a", "c")])
    orders = {o.order for o in neighbours(Lfa(("a", "b", "c"), (), (1,), ()), fork)}
    assert orders == {("a", "b", "c"), ("a", "c", "b")}


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 7),
       objective=st.sampled_from(["latency", "edp"]))
def test_descent_ends_at_a_local_optimum_no_worse_than_its_start(
        seed: int, n: int, objective: str) -> None:
    """No neighbour of the result scores lower; the result is better than the start (or
    None); its schedule is what the simulator replays."""
    wl = random_dag(seed, n_layers=n)
    lowerer = Lowerer(wl, EDGE)
    options = SearchOptions(objective=OBJECTIVES[objective])
    start = unfused_baseline(lowerer).best
    found = descend(lowerer, start, options, None)
    if found is None:
        best = start
        base = prefetched(lowerer, start.lfa)
        assert base is not None
        best_cost = prefetched_cost(lowerer, options, base[0].energy_pj, base[2])
    else:
        best = found
        assert options.objective.cost(found.evaluation) < options.objective.cost(start.evaluation)
        sim = simulate(found.program, found.dlsa)
        assert sim.latency_cycles == found.evaluation.latency_cycles
        best_cost = options.objective.cost(found.evaluation)
    for other in neighbours(best.lfa, wl.graph):
        scored = prefetched(lowerer, other)
        if scored is not None:
            assert prefetched_cost(lowerer, options, scored[0].energy_pj, scored[2]) >= best_cost


def test_descent_stops_at_its_deadline() -> None:
    """A deadline already past: at most one neighbour is scored, so nothing changes."""
    lowerer = Lowerer(get("resnet50"), EDGE)
    start = unfused_baseline(lowerer).best
    began = time.perf_counter()
    assert descend(lowerer, start, SearchOptions(), began - 1.0) is None
    assert time.perf_counter() - began < 1.0


def test_descent_alone_reaches_the_bound_on_gpt2_decode() -> None:
    """From the unfused schedule of the reference's GPT-2 small decode (edge, batch 1),
    the descent alone ends within 0.05 % of the certified lower bound (SA and the
    reference end at the same 500,895 cycles)."""
    workload = get("gpt2_small_decode")
    lowerer = Lowerer(workload, EDGE)
    start = unfused_baseline(lowerer).best
    found = descend(lowerer, start, SearchOptions(objective=OBJECTIVES["latency"]), None)
    assert found is not None
    bound = run_bound(workload, EDGE, 10.0).cycles
    assert bound <= found.evaluation.latency_cycles <= 1.0005 * bound


def _prefetched_candidate(lowerer: Lowerer, lfa: Lfa) -> Candidate:
    found = prefetched(lowerer, lfa)
    assert found is not None
    program, dlsa, _ = found
    return Candidate(lfa, program, dlsa, evaluate(program, dlsa, check=False))


def test_auto_keeps_the_best_local_optimum_of_its_starts() -> None:
    """chain5 at batch 1: the descent from the fused schedule at 2 tiles ends in another
    local optimum than the one from the unfused schedule at 2 tiles, which is faster;
    descending from both (first the fused) returns the faster, replayable."""
    lowerer = Lowerer(get("chain5"), EDGE)
    order = tuple(lowerer.workload.layers)
    cuts = tuple(range(1, len(order)))
    unfused = _prefetched_candidate(lowerer, Lfa(order, cuts, (2,) * len(order), cuts))
    fused = _prefetched_candidate(lowerer, Lfa(order, (), (2,), ()))
    options = SearchOptions(objective=OBJECTIVES["latency"])
    alone = [_descent_step(lowerer, c, options, None)[0].evaluation.latency_cycles
             for c in (fused, unfused)]
    assert alone[1] < alone[0]
    best, cut = _descend_starts(lowerer, [fused, unfused], options, None)
    assert not cut
    assert best.evaluation.latency_cycles == min(alone)
    assert simulate(best.program, best.dlsa).latency_cycles == best.evaluation.latency_cycles
