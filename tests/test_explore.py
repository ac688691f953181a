"""`mipsched explore` (Cocco's co-exploration): every method against an exhaustive
search of the joint space on tiny nets, the lower hull against brute force, the budget,
the files and the CLI's errors."""

from __future__ import annotations

import itertools
import json
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from mipsched.cli import app
from mipsched.errors import InputError
from mipsched.explore import (
    METHODS,
    CapacityGrid,
    ExploreCost,
    best_for,
    explore_network,
    lower_hull,
    parse_grid,
)
from mipsched.explore.genetic import mutate_capacity
from mipsched.explore.space import CoSpace
from mipsched.hw.load import load_hardware
from mipsched.workload import zoo

GRID = parse_grid("32KiB:256KiB:32KiB")
"""Eight capacities; the smallest has no schedule for chain5 and resblock."""


def exhaustive_metrics(net: str, metric: str) -> dict[int, float]:
    """Grid index -> least metric over every partition (16 for five layers)."""
    wl = zoo.get(net)
    space = CoSpace(wl, load_hardware("edge"), GRID, ExploreCost(1.0, metric), 10**9)
    best: dict[int, float] = {}
    for i in range(len(GRID.values)):
        for bits in itertools.product((0, 1), repeat=len(wl.layers) - 1):
            found = space.sample(i, tuple(k + 1 for k, b in enumerate(bits) if b))
            if found is not None and found.metric < best.get(i, math.inf):
                best[i] = found.metric
    return best


@pytest.fixture(scope="module")
def exhaustive() -> dict[tuple[str, str], dict[int, float]]:
    return {(net, metric): exhaustive_metrics(net, metric)
            for net, metric in (("chain5", "energy"), ("resblock", "energy"),
                                ("resblock", "dram"))}


def optimum(per_capacity: dict[int, float], alpha: float) -> float:
    return min(GRID.values[i] + alpha * m for i, m in per_capacity.items())


CASES = [("chain5", "energy", 0.002), ("chain5", "energy", 0.05),
         ("resblock", "energy", 0.002), ("resblock", "energy", 0.0005),
         ("resblock", "dram", 1.0)]


def test_cases_have_interior_and_boundary_optima(exhaustive) -> None:
    """The cases exercise different optimal capacities (else agreement would be cheap)."""
    argmins = {(net, metric, alpha): min(exhaustive[net, metric].items(),
                                         key=lambda kv: GRID.values[kv[0]] + alpha * kv[1])[0]
               for net, metric, alpha in CASES}
    assert len(set(argmins.values())) >= 2
    assert 0 not in exhaustive["chain5", "energy"]  # 32 KiB: no schedule


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(("net", "metric", "alpha"), CASES)
def test_methods_find_the_exhaustive_optimum(exhaustive, method, net, metric,
                                             alpha) -> None:
    result = explore_network(zoo.get(net), load_hardware("edge"), method, GRID,
                             ExploreCost(alpha, metric), evaluations=200, seed=1)
    best = optimum(exhaustive[net, metric], alpha)
    assert result.best.objective == pytest.approx(best, rel=1e-12)
    assert result.evaluations <= 200
    # the reported schedule is the best sample, replayed by the simulator
    measured = (result.simulation.energy_pj if metric == "energy"
                else sum(t.bytes for t in result.simulation.transfers))
    assert result.best.capacity_bytes + alpha * measured == pytest.approx(best, rel=1e-9)
    assert result.hardware.gbuf.capacity_bytes == result.best.capacity_bytes


def test_one_curve_run_answers_every_alpha(exhaustive) -> None:
    result = explore_network(zoo.get("resblock"), load_hardware("edge"), "curve", GRID,
                             ExploreCost(0.002, "energy"), evaluations=300, seed=0)
    for alpha in (0.0, 1e-4, 5e-4, 0.002, 0.01, 1.0, 100.0):
        v = best_for(result.hull, alpha)
        assert v.capacity_bytes + alpha * v.metric == pytest.approx(
            optimum(exhaustive["resblock", "energy"], alpha), rel=1e-12)


points = st.lists(st.tuples(st.integers(1, 10**7), st.floats(1.0, 1e10)), min_size=1,
                  max_size=30)


@settings(max_examples=200, deadline=None)
@given(points, st.floats(0.0, 10.0))
def test_hull_vertex_is_the_brute_force_optimum(pts, alpha) -> None:
    v = best_for(lower_hull(pts), alpha)
    assert v.capacity_bytes + alpha * v.metric == pytest.approx(
        min(c + alpha * m for c, m in pts), rel=1e-9)


def test_hull_switch_points() -> None:
    """(1, 10), (2, 4), (3, 3.5), (4, 1): (3, 3.5) lies above the chord from (2, 4) to
    (4, 1) and is never optimal; switches at 1/6 and 2/3."""
    hull = lower_hull([(1, 10.0), (2, 4.0), (3, 3.5), (4, 1.0), (5, 1.0)])
    assert [(v.capacity_bytes, v.alpha_from, v.alpha_to) for v in hull] == [
        (1, 0.0, pytest.approx(1 / 6)), (2, pytest.approx(1 / 6), pytest.approx(2 / 3)),
        (4, pytest.approx(2 / 3), math.inf)]


def test_capacity_mutation_moves_to_an_allowed_value() -> None:
    space = CoSpace(zoo.get("chain3"), load_hardware("edge"), GRID, ExploreCost(), 10)
    rng = random.Random(0)
    allowed = [2, 3, 4, 5]
    for start in allowed:
        for _ in range(50):
            moved = mutate_capacity(space, start, allowed, rng, 0.15)
            assert moved in allowed and moved != start


def test_crossover_rounds_the_mean_capacity_to_the_grid() -> None:
    assert GRID.nearest((GRID.values[1] + GRID.values[4]) / 2, list(range(8))) == 2
    assert GRID.nearest(10**9, [0, 3]) == 3


def test_budget_and_seed() -> None:
    wl, hw = zoo.get("chain5"), load_hardware("edge")
    a = explore_network(wl, hw, "ga", GRID, evaluations=37, seed=3)
    b = explore_network(wl, hw, "ga", GRID, evaluations=37, seed=3)
    assert a.evaluations == 37 and b.best == a.best
    assert [t.objective for t in a.trace] == sorted((t.objective for t in a.trace),
                                                    reverse=True)


@pytest.mark.parametrize(("text", "values"), [
    ("128KiB:256KiB:64KiB", (131072, 196608, 262144)),
    ("1MiB,512KiB", (524288, 1048576)),
    ("4096", (4096,))])
def test_parse_grid(text, values) -> None:
    assert parse_grid(text) == CapacityGrid(values)


@pytest.mark.parametrize("text", ["abc", "1MiB:2MiB", "2MiB:1MiB:64KiB", "1MiB:2MiB:0",
                                  "3 parsecs", ","])
def test_parse_grid_errors(text) -> None:
    with pytest.raises(InputError, match="capacities"):
        parse_grid(text)


runner = CliRunner()


def test_cli_writes_explore_json_and_a_replayable_schedule(tmp_path) -> None:
    out = tmp_path / "run"
    done = runner.invoke(app, ["explore", "chain5", "--capacities", "64KiB:256KiB:64KiB",
                               "--evaluations", "40", "--alpha", "0.05", "-o", str(out),
                               "--json"])
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    assert json.loads((out / "explore.json").read_text()) == data
    assert data["objective"] == pytest.approx(
        data["capacity_bytes"] + 0.05 * data["breakdown"]["energy_pj"])
    assert sum(data["breakdown"]["energy_by_component"].values()) == pytest.approx(
        data["breakdown"]["energy_pj"])
    replay = runner.invoke(app, ["eval", str(out / "schedule.json"), "--json"])
    assert replay.exit_code == 0, replay.output
    figures = json.loads(replay.stdout)
    assert figures["latency_cycles"] == data["breakdown"]["latency_cycles"]
    assert figures["energy_pj"] == pytest.approx(data["breakdown"]["energy_pj"])


@pytest.mark.parametrize(("args", "message"), [
    (["--method", "bogus"], "--method: 'bogus'"),
    (["--metric", "area"], "--metric: 'area'"),
    (["--capacities", "lots"], "capacities: 'lots'"),
    (["--alpha", "-1"], "alpha: must be >= 0")])
def test_cli_bad_input_is_one_line(tmp_path, args, message) -> None:
    done = runner.invoke(app, ["explore", "chain3", "-o", str(tmp_path / "x"), *args])
    assert done.exit_code == 2
    assert message in done.output and "Traceback" not in done.output
    assert not (tmp_path / "x").exists()


def test_cli_grid_without_a_schedule(tmp_path) -> None:
    done = runner.invoke(app, ["explore", "chain5", "--capacities", "1KiB,2KiB",
                               "--evaluations", "5", "-o", str(tmp_path / "x")])
    assert done.exit_code == 1
    assert "no schedule" in done.output and "Traceback" not in done.output
    assert not (tmp_path / "x").exists()
