"""Several SET seeds on worker processes (mipsched.tiled.multistart)."""

from __future__ import annotations

import time

import pytest

from mipsched.hw.tiled import load_tiled_hardware
from mipsched.tiled.evaluate import evaluate_tree
from mipsched.tiled.method import LARGE_SET_PLAN, PLANS, plan, plan_summary, search_method
from mipsched.tiled.multistart import search_seeds
from mipsched.tiled.passes import place_best
from mipsched.tiled.ratree import Cut
from mipsched.tiled.search import SearchResult, search
from mipsched.tiled.simulate import simulate_tree
from mipsched.workload.resolve import resolve_network

HW = load_tiled_hardware("set-4x4")
WL = resolve_network("resblock", 4, 1)


@pytest.fixture(scope="module")
def singles() -> dict[int, float]:
    """The cost of each seed's own `search` call."""
    return {s: search(HW, WL, "set", seed=s, rounds_per_layer=8).cost for s in (3, 4, 5)}


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_best_seed_wins_whatever_the_number_of_processes(singles, jobs) -> None:
    found = search_seeds(HW, WL, "set", (3, 4, 5), jobs=jobs, rounds_per_layer=8)
    assert found.costs == singles
    assert found.best.cost == min(singles.values())
    assert found.best.seed in singles and singles[found.best.seed] == found.best.cost
    again = evaluate_tree(HW, WL, found.best.tree)
    assert again is not None and again.edp == pytest.approx(found.best.cost, rel=1e-12)


def test_a_time_limit_covers_every_wave() -> None:
    began = time.perf_counter()
    found = search_seeds(HW, WL, "set", (0, 1, 2, 3), jobs=2, rounds_per_layer=100_000,
                         time_limit=2.0)
    assert time.perf_counter() - began < 4.0
    assert len(found.costs) == 4
    assert all(c <= found.best.start_cost for c in found.costs.values())


def test_the_plans_rounds_and_time_shares() -> None:
    """LS and LP: the reference's 4 x 100 rounds per layer; SET: 8 x 50 from the
    layer-by-layer tree + 2 LP x 50 + 2 warm x 50; every plan's shares sum to 1."""
    rounds = {m: sum(p.seeds * p.rounds_per_layer for p in plan) for m, plan in PLANS.items()}
    assert rounds == {"set": 600, "ls": 400, "lp": 400}
    assert all(sum(p.share for p in plan) == pytest.approx(1) for plan in PLANS.values())
    assert sum(p.share for p in LARGE_SET_PLAN) == pytest.approx(1)
    with pytest.raises(ValueError, match="at least one seed"):
        search_seeds(HW, WL, "set", ())


def _result_of(hw, wl, tree, cache) -> SearchResult:
    """A SearchResult holding `tree` as found and as start (the fields place_best reads)."""
    ev = evaluate_tree(hw, wl, tree, cache=cache)
    assert ev is not None
    return SearchResult("set", "edp", 0, tree, ev, ev.edp, tree, ev, ev.edp, 0, 0, 0, 0, 0.0)


def test_placement_pass_lowers_the_reference_set_tree_and_replays() -> None:
    """The reference's best ResNet-50 b8 tree: CP-SAT counts + placement lower its E x D
    (8.80e16 -> 8.74e16, benchmarks/results/tiled_placement.md); the kept tree carries
    explicit ranges, re-evaluates to its cost and the simulator agrees."""
    from test_tiled_evaluate import CACHE, SET_TREE, parse_printed_tree
    from test_tiled_evaluate import HW as HW8
    from test_tiled_evaluate import WL as WL8

    found = _result_of(HW8, WL8, parse_printed_tree(SET_TREE), CACHE)
    placed, gain = place_best(HW8, WL8, found, "edp", CACHE)
    assert gain.changed == 10 and gain.cost_before == found.cost
    assert gain.cost_after == placed.cost < 0.995 * found.cost
    assert any(isinstance(n, Cut) and n.ranges for _, n, _ in placed.tree.nodes())
    again = evaluate_tree(HW8, WL8, placed.tree, cache=CACHE)
    replay = simulate_tree(HW8, WL8, placed.tree, cache=CACHE)
    assert again is not None and again.edp == placed.cost
    assert replay is not None and replay.latency == again.latency
    assert replay.energy_pj == pytest.approx(again.energy_pj, rel=1e-9)


def test_placement_pass_never_makes_the_search_worse() -> None:
    """With or without the pass the search is the same; the pass keeps a tree only when
    it lowers the objective, and LS gets no pass (it is the reference's baseline)."""
    plain = search_method(HW, WL, "set", seed=3, jobs=1, rounds_per_layer=8, passes=False)
    placed = search_method(HW, WL, "set", seed=3, jobs=1, rounds_per_layer=8)
    assert placed.placement is not None and plain.placement is None
    assert placed.recombination.cost_before == plain.best.cost
    assert placed.placement.cost_before == placed.recombination.cost_after <= plain.best.cost
    assert placed.best.cost == placed.placement.cost_after <= placed.placement.cost_before
    assert search_method(HW, WL, "ls", jobs=1, rounds_per_layer=2).placement is None


def test_a_late_wave_is_abandoned_and_the_start_tree_returned(monkeypatch) -> None:
    """Workers that never finish (a search stuck in one long round) are killed at the
    time limit; with no seed done the start tree is the result, on time."""
    import mipsched.tiled.multistart as multistart

    def stuck(*args, **kwargs):
        time.sleep(60)

    monkeypatch.setattr(multistart, "search", stuck)
    began = time.perf_counter()
    found = search_seeds(HW, WL, "set", (0, 1, 2, 3), jobs=2, rounds_per_layer=8,
                         time_limit=1.5)
    assert time.perf_counter() - began < 1.5 + multistart.LATE_SECONDS + 0.7
    assert found.best.rounds_done == 0 and found.best.tree == found.best.start_tree
    assert evaluate_tree(HW, WL, found.best.tree).edp == pytest.approx(found.best.cost)


def test_a_large_mesh_gives_set_more_lp_and_warm_seeds_and_the_baselines_their_own() -> None:
    """set-12x12 runs LARGE_SET_PLAN for `set`, set-4x4 the default; LS and LP the same
    plan on both; an unknown method is refused naming the choices."""
    big = load_tiled_hardware("set-12x12")
    assert plan("set", big) == LARGE_SET_PLAN and plan("set", HW) == PLANS["set"]
    assert all(plan(m, big) == PLANS[m] for m in ("ls", "lp"))
    assert plan_summary("set", big) == "2 lp x 50 + 4 warm x 50 + 2 init x 50 rounds per layer"
    with pytest.raises(ValueError, match="expected one of set, ls, lp"):
        plan("tangram", HW)
