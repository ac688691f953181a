"""Slow: on every SoMa Fig. 6 case, the certified bound (`mipsched bound`'s, 120 s at most)
is at most the latency of every schedule the methods find (auto and cocco for 10 s each,
the unfused baseline, and every stage of auto's run), and each layer's least compute
(read floor and box rates included) is at most the cycles of that layer's tiles in each
of those schedules: a layer-by-layer check of the compute bound on real networks."""

from __future__ import annotations

from collections import defaultdict

import pytest

from mipsched.core import Candidate
from mipsched.formulations.bounds import layer_compute_cycles, with_box_rates
from mipsched.formulations.box_rates import least_box_rates
from mipsched.hw import load_hardware
from mipsched.solve import bound_report, solve_network
from mipsched.workload import zoo

FIG6 = [(net, hw, batch) for batch in (1, 16) for net, hw in (
    ("resnet50", "edge"), ("resnet101", "edge"), ("inception_resnet_v1", "edge"),
    ("randwire_small", "edge"), ("gpt2_small_prefill", "edge"), ("gpt2_small_decode", "edge"),
    ("gpt2_xl_prefill", "cloud"), ("gpt2_xl_decode", "cloud"), ("resnet50", "cloud"))]


def _layer_cycles(candidate: Candidate) -> dict[str, int]:
    """Tile cycles per layer of a schedule's program."""
    cycles: dict[str, int] = defaultdict(int)
    for tile in candidate.program.tiles:
        cycles[tile.layer] += tile.compute_cycles
    return cycles


@pytest.mark.slow
@pytest.mark.parametrize(("net", "hw_name", "batch"), FIG6)
def test_the_bound_is_below_every_schedule_found(net: str, hw_name: str, batch: int) -> None:
    workload, hw = zoo.get(net, batch=batch), load_hardware(hw_name)
    bound = bound_report(workload, hw, time_limit=120.0).latency.cycles
    closed = layer_compute_cycles(workload, hw)
    least = with_box_rates(workload, closed, least_box_rates(workload, hw, closed))
    found: list[Candidate] = []
    for method in ("baseline", "cocco", "auto"):
        outcome = solve_network(workload, hw, method, time_limit=10.0)
        assert outcome.candidate is not None, method
        found += [outcome.candidate, *outcome.stages.values()]
    for candidate in found:
        assert bound <= candidate.evaluation.latency_cycles
        cycles = _layer_cycles(candidate)
        assert [n for n in workload.layers if least[n] > cycles[n]] == []
