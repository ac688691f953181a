"""Calibration against the SET reference code (../shared/set-reference/runs.csv: its
ResNet-50 b8 run on its 4 x 4 machine, seed 2023, 4 SA threads of 100 rounds per layer):
mipsched's default SET search is at most the reference's latency and E x D, and its LS
and LP restrictions within the reference's seed spread (~10 %) of its LS and LP.
Benchmark-grade (about two minutes on 2 cores): marked slow."""

from __future__ import annotations

import pytest

from mipsched.hw.tiled import load_tiled_hardware
from mipsched.tiled.method import search_method
from mipsched.tiled.multistart import leaf_cache
from mipsched.tiled.replay_check import checked_replay
from mipsched.workload.resolve import resolve_network

REFERENCE = {"set": (5_427_112, 8.802940e16), "ls": (9_470_792, 1.994712e17),
             "lp": (11_016_352, 2.656752e17)}
"""runs.csv: latency (cycles) and E x D (pJ x cycles) per method."""
BAND = 0.10


@pytest.mark.slow
@pytest.mark.parametrize("method", ["set", "ls", "lp"])
def test_resnet50_b8_on_4x4_against_the_reference(method: str) -> None:
    hw, wl = load_tiled_hardware("set-4x4"), resolve_network("resnet50", 8, 1)
    found = search_method(hw, wl, method, seed=0, jobs=2).best
    ev = found.evaluation
    _, failure = checked_replay(hw, wl, found.tree, ev, leaf_cache(hw, wl))
    assert failure is None
    latency, edp = REFERENCE[method]
    if method == "set":
        assert ev.latency <= latency and ev.edp <= edp
    else:
        assert ev.edp <= edp * (1 + BAND) and ev.latency <= latency * (1 + BAND)
