"""The CP-SAT DLSA model is exact: on random tiny programs its optimum equals brute
force over all orders and living durations, and dropping any one constraint group is
caught by the same comparison."""

from __future__ import annotations

import random

import pytest
from brute import brute_force_optimum, tiny_program

from mipsched.evaluate import evaluate
from mipsched.formulations.dlsa import GROUPS, solve_dlsa

CASES = 200


@pytest.fixture(scope="module")
def cases():
    rng = random.Random(2024)
    programs = [tiny_program(rng) for _ in range(CASES)]
    return [(p, brute_force_optimum(p)) for p in programs]


def test_model_optimum_equals_brute_force(cases) -> None:
    feasible = 0
    for program, best in cases:
        result = solve_dlsa(program, time_limit=10, workers=1)
        if best is None:
            assert result.status.status == "infeasible"
            continue
        feasible += 1
        assert result.status.status == "optimal"
        assert result.status.objective == best
        assert result.latency_cycles == best
        ev = evaluate(program, result.dlsa)
        assert ev.fits and ev.latency_cycles == best
        assert result.lower_bound == best
    assert feasible >= 150


@pytest.mark.parametrize("dropped", sorted(GROUPS))
def test_dropping_a_constraint_group_is_caught(cases, dropped: str) -> None:
    """Without one group the model claims a makespan that no valid DLSA reaches (or
    misses a feasible one) on at least one of the cases."""
    caught = 0
    for program, best in cases:
        result = solve_dlsa(program, time_limit=10, workers=1,
                            groups=GROUPS - {dropped})
        claimed = result.status.objective if result.status.has_solution else None
        if claimed != best:
            caught += 1
    assert caught > 0


def test_a_misspelt_constraint_group_fails() -> None:
    program = tiny_program(random.Random(0))
    with pytest.raises(ValueError, match="bufer"):
        solve_dlsa(program, groups=GROUPS - {"buffer"} | {"bufer"})
