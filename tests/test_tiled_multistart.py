"""Several SET seeds on worker processes (mipsched.tiled.multistart)."""

from __future__ import annotations

import time

import pytest

from mipsched.hw.tiled import load_tiled_hardware
from mipsched.tiled.evaluate import evaluate_tree
from mipsched.tiled.multistart import RUNS, search_seeds
from mipsched.tiled.search import search
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


def test_default_runs_give_set_the_rounds_of_the_baselines() -> None:
    assert {m: s * r for m, (s, r) in RUNS.items()} == {"set": 400, "ls": 400, "lp": 400}
    with pytest.raises(ValueError, match="at least one seed"):
        search_seeds(HW, WL, "set", ())
