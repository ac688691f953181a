"""The compulsory latency bound holds for every schedule, including inputs that a
strided window only partly reads."""

from __future__ import annotations

import random
import time

import pytest

from mipsched.evaluate import evaluate
from mipsched.formulations.bounds import (
    compulsory_dram_bytes,
    network_latency_bound,
    touched_elems,
)
from mipsched.hw import load_hardware
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa
from mipsched.solve import solve
from mipsched.workload import zoo
from mipsched.workload.graph import NetBuilder

from strategies import random_dlsa


def strided_net():
    """A 1x1 stride-2 conv reads only every other row and column of its input."""
    b = NetBuilder("strided")
    x = b.input("x", 512, 64, 64)
    b.conv("sub", x, 64, 1, stride=2, padding=0)
    return b.build()


def test_only_touched_rows_and_columns_are_compulsory() -> None:
    wl = strided_net()
    layer = wl.layers["sub"]
    assert touched_elems(layer, 0, wl.in_shapes("sub")) == 512 * 32 * 32
    assert compulsory_dram_bytes(wl) == 512 * 32 * 32 + 512 * 64 + 64 * 32 * 32


@pytest.mark.parametrize("hw_name", ["edge", "cloud"])
@pytest.mark.parametrize("tiling", [1, 4, 16, 64])
def test_bound_below_every_schedule_of_a_strided_input(hw_name: str, tiling: int) -> None:
    wl = strided_net()
    hw = load_hardware(hw_name)
    program = Lowerer(wl, hw).lower(Lfa(("sub",), (), (tiling,), ()))
    rng = random.Random(tiling)
    bound = network_latency_bound(wl, hw).cycles
    for dlsa in [default_dlsa(program)] + [random_dlsa(program, rng) for _ in range(5)]:
        assert evaluate(program, dlsa).latency_cycles >= bound


@pytest.mark.parametrize("name", ["chain3", "chain5", "resblock", "fsrcnn", "resnet50",
                                  "mobilenet_v2", "gpt2_small_prefill", "gpt2_small_decode"])
def test_bound_below_the_baseline(name: str) -> None:
    wl = zoo.get(name)
    hw = load_hardware("edge")
    outcome = solve(wl, hw)
    assert outcome.candidate is not None
    assert outcome.bound.cycles <= outcome.candidate.evaluation.latency_cycles


def test_the_relaxations_stop_at_their_deadline_even_while_building_segments() -> None:
    """gpt2_xl_prefill at batch 16 has 15 tiling numbers: building one order's segment
    table takes minutes, so the deadline must reach into it; the bound is then marked
    incomplete rather than reported."""
    from mipsched.formulations.exact import energy_relaxation_bound, relaxation_bound
    lowerer = Lowerer(zoo.get("gpt2_xl_prefill", 16), load_hardware("cloud"))
    for bound in (relaxation_bound, energy_relaxation_bound):
        started = time.perf_counter()
        _, complete = bound(lowerer, time_limit=1.0)
        assert not complete
        assert time.perf_counter() - started < 20.0
