"""Infeasibility is explained (layer, tensors, bytes) and the pre-check is sound: when it
says no schedule fits, no schedule does."""

from __future__ import annotations

import dataclasses
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from mipsched.evaluate import evaluate
from mipsched.formulations.feasibility import explain_infeasibility, layer_need
from mipsched.hw import load_hardware
from mipsched.schedule.lowering import Lowerer
from mipsched.solve import solve_network as solve
from mipsched.workload import zoo
from mipsched.workload.graph import NetBuilder
from mipsched.workload.zoo.random_dags import random_dag

from strategies import random_dlsa, random_lfa

EDGE = load_hardware("edge")


def with_capacity(capacity: int):
    return dataclasses.replace(EDGE, gbuf=dataclasses.replace(EDGE.gbuf,
                                                              capacity_bytes=capacity))


def test_weights_that_never_fit_are_named() -> None:
    outcome = solve(zoo.get("vgg16"), EDGE, "sa")
    assert outcome.status == "infeasible" and outcome.candidate is None
    assert "layer 'fc6'" in outcome.reason and "102,760,448 B" in outcome.reason


def test_a_window_of_activations_that_never_fits_is_named() -> None:
    """A 3x3 conv over 4096 channels needs at least a 2x2x4096 window at a corner."""
    b = NetBuilder("wide")
    x = b.input("x", 4096, 8, 8)
    b.conv("c", x, 8, 3)
    wl = b.build()
    need = layer_need(wl, "c")
    assert need.input_bytes == {"x": 4 * 4096}
    assert need.weight_bytes == 8 * 4096 * 9
    hw = with_capacity(need.total - 1)
    message = explain_infeasibility(wl, hw)
    assert message is not None and "layer 'c'" in message and "input 'x' 16,384 B" in message
    assert explain_infeasibility(wl, with_capacity(need.total)) is None


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 6))
def test_precheck_is_sound(seed: int, n: int) -> None:
    """With the capacity just below the largest per-layer need, no random schedule fits."""
    wl = random_dag(seed, n_layers=n)
    largest = max(layer_need(wl, name).total for name in wl.layers)
    hw = with_capacity(largest - 1)
    assert explain_infeasibility(wl, hw) is not None
    rng = random.Random(seed)
    lowerer = Lowerer(wl, hw)
    for _ in range(5):
        program = lowerer.lower(random_lfa(wl, rng, tilings=(1, 2, 4, 8, 16, 64)))
        assert not evaluate(program, random_dlsa(program, rng)).fits
