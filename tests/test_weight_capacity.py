"""The weight-capacity bound (formulations/weight_capacity): at or below the brute-force
optimum of tiny weight-heavy nets at buffers where it is active, its knapsack equal to
enumeration, binding on VGG-19 (edge, b1) below a schedule, and tightened variants
caught there."""

from __future__ import annotations

import dataclasses
import itertools
import random

import pytest
from brute import schedule_optimum

from mipsched.formulations import weight_capacity
from mipsched.formulations.bounds import layer_compute_cycles
from mipsched.formulations.solver import minimise
from mipsched.formulations.weight_capacity import late_loads_model, weight_capacity_bound
from mipsched.heuristics.lg_split import lg_split_start
from mipsched.hw import load_hardware
from mipsched.hw.model import Hardware
from mipsched.schedule.lowering import Lowerer
from mipsched.solve.bounds import run_bound
from mipsched.workload import zoo
from mipsched.workload.graph import NetBuilder, Workload

EDGE = load_hardware("edge")


def _with_buffer(capacity: int) -> Hardware:
    return dataclasses.replace(EDGE, name=f"edge-{capacity}B", gbuf=dataclasses.replace(
        EDGE.gbuf, capacity_bytes=capacity))


def _conv_chain(batch: int, layers: int, size: int) -> Workload:
    """`layers` 3x3 convs of 64 channels on a size x size plane: 36 KB of weights each."""
    net = NetBuilder("conv_chain", batch=batch)
    x = net.input("x", 64, size, size)
    for i in range(layers):
        x = net.conv(f"c{i}", x, 64, 3)
    net.output(x)
    return net.build()


def _fc_chain(batch: int, widths: tuple[int, ...]) -> Workload:
    net = NetBuilder("fc_chain", batch=batch)
    x = net.input("x", widths[0])
    for i, width in enumerate(widths[1:]):
        x = net.fc(f"fc{i}", x, width)
    net.output(x)
    return net.build()


CASES = [(_conv_chain(1, 3, 16), 71_680), (_conv_chain(1, 3, 16), 93_798),
         (_conv_chain(1, 4, 16), 90_112), (_conv_chain(1, 4, 16), 119_603),
         (_fc_chain(1, (64, 256, 256, 64)), 69_632),
         (_fc_chain(2, (64, 256, 256, 64)), 86_016),
         (_fc_chain(1, (128, 256, 256, 256, 64)), 102_400)]


@pytest.mark.parametrize(("workload", "capacity"), CASES)
def test_active_and_below_the_brute_force_optimum(workload: Workload, capacity: int) -> None:
    """At these buffers some layer's descendants' weights do not fit beside its own, so
    the bound exceeds the compute bound; it stays at or below the optimum over every
    schedule (tilings 1 and 2), as does every bound a run starts from."""
    hw = _with_buffer(capacity)
    bound = weight_capacity_bound(workload, hw, None)
    assert bound is not None
    assert bound.value > sum(layer_compute_cycles(workload, hw).values())
    optimum = schedule_optimum(workload, hw, (1, 2))
    assert optimum is not None
    assert bound.value <= optimum
    assert run_bound(workload, hw, None).cycles <= optimum


@pytest.mark.parametrize("seed", range(20))
def test_the_knapsack_finds_the_least_late_loads(seed: int) -> None:
    rng = random.Random(seed)
    later = [f"d{i}" for i in range(rng.randint(1, 8))]
    weight = {d: rng.randint(1, 100) * 16 for d in later}
    load = {d: -(-w // 16) for d, w in weight.items()}
    room = rng.randint(0, sum(weight.values()))
    best = min(sum(load[d] for d in late)
               for k in range(len(later) + 1) for late in itertools.combinations(later, k)
               if sum(weight.values()) - sum(weight[d] for d in late) <= room)
    assert minimise(late_loads_model(later, weight, load, room), None).bound == \
        pytest.approx(best)
    assert weight_capacity._greedy_late_loads(later, weight, load, room) >= best


def test_binds_on_vgg19_below_a_schedule_and_tightened_variants_are_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """VGG-19 (edge, b1): conv13-conv16 weigh 2.36 MB each and compute 56,448 cycles each;
    at conv12's last tile at most two fit beside conv12's own, so two load after it
    (module docstring: 2,564,036 cycles less the rounding margin). The bound exceeds the
    weight-order bound and stays below the DP split's schedule (2,575,088). Halving the
    room beside p's weights, or charging all of p's descendants after the late loads,
    gives more than that schedule."""
    workload = zoo.get("vgg19", 1)
    schedule = lg_split_start(Lowerer(workload, EDGE))
    assert schedule is not None
    latency = schedule.evaluation.latency_cycles
    bound = weight_capacity_bound(workload, EDGE, None)
    assert bound is not None
    run = run_bound(workload, EDGE, None)
    assert run.binding == "weight_capacity" and run.cycles == bound.value
    assert 2_564_000 <= bound.value <= latency
    real_model = weight_capacity.late_loads_model
    monkeypatch.setattr(weight_capacity, "late_loads_model",
                        lambda later, w, a, room: real_model(later, w, a, room // 2))
    assert weight_capacity_bound(workload, EDGE, None).value > latency
    monkeypatch.setattr(weight_capacity, "late_loads_model", real_model)
    real_tails = weight_capacity.layer_tails
    monkeypatch.setattr(weight_capacity, "layer_tails",
                        lambda wl, c: {n: 2 * t for n, t in real_tails(wl, c).items()})
    assert weight_capacity_bound(workload, EDGE, None).value > latency
