"""Property tests on random valid schedules of random small DAGs and tiny zoo nets."""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mipsched.evaluate import buffer_profile, evaluate
from mipsched.formulations.bounds import (
    compute_bound,
    edp_bound,
    energy_bound,
    network_latency_bound,
)
from mipsched.hw import load_hardware
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import ScheduleError
from mipsched.schedule.tiling import tile_flg
from mipsched.schedule.validity import check_buffer
from mipsched.workload import zoo
from mipsched.workload.ops import tile_macs
from mipsched.workload.zoo.random_dags import random_dag

from strategies import random_dlsa, random_lfa

EDGE = load_hardware("edge")
CLOUD = load_hardware("cloud")

workloads = st.one_of(
    st.builds(lambda s, n, b: random_dag(s, n_layers=n, batch=b),
              st.integers(0, 10_000), st.integers(2, 8), st.sampled_from([1, 2, 4])),
    st.builds(zoo.get, st.sampled_from(["chain3", "chain5", "resblock", "fsrcnn"]),
              st.sampled_from([1, 2])),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workload=workloads, seed=st.integers(0, 2**32 - 1),
       hw=st.sampled_from([EDGE, CLOUD]))
def test_random_schedules_respect_basic_laws(workload, seed, hw) -> None:
    rng = random.Random(seed)
    lowerer = Lowerer(workload, hw)
    program = lowerer.lower(random_lfa(workload, rng))
    dlsas = [default_dlsa(program), random_dlsa(program, rng), random_dlsa(program, rng)]
    evaluations = [evaluate(program, d) for d in dlsas]
    bound = network_latency_bound(workload, hw)
    energy = energy_bound(workload, hw, bound.cycles)
    edp = edp_bound(energy, bound)
    for d, ev in zip(dlsas, evaluations, strict=True):
        # latency >= every tile's work and >= every transfer
        assert ev.latency_cycles >= program.compute_cycles
        assert ev.latency_cycles >= program.dram_cycles
        assert ev.latency_cycles >= bound.cycles
        assert ev.energy_pj >= energy.value * (1 - 1e-12)
        assert ev.edp >= edp.value * (1 - 1e-12)
        # buffer: the evaluator's peak is the definition's peak, and "fits" agrees with
        # the validity check
        direct = max(
            (program.onchip_before_first_tile if t < 0 else program.onchip_per_tile[t])
            + sum(tn.bytes for tn, (s, e) in zip(program.tensors, d.living, strict=True)
                  if s <= t < e)
            for t in range(-1, program.n_tiles))
        assert ev.peak_buffer_bytes == direct
        assert ev.fits == (direct <= hw.gbuf.capacity_bytes)
        try:
            check_buffer(program, d, buffer_profile(program, d))
            assert direct <= hw.gbuf.capacity_bytes
        except ScheduleError:
            assert direct > hw.gbuf.capacity_bytes
    # energy does not depend on the DLSA: with static power, it is the dynamic part plus
    # static power x latency, exactly
    static = dataclasses.replace(program, static_pj_per_cycle=3.0)
    for d, ev in zip(dlsas, evaluations, strict=True):
        assert ev.energy_pj == pytest.approx(program.energy_pj, rel=1e-12)
        with_static = evaluate(static, d)
        assert with_static.energy_pj == pytest.approx(
            program.energy_pj + 3.0 * ev.latency_cycles, rel=1e-12)
        assert with_static.latency_cycles == ev.latency_cycles
        static_hw = dataclasses.replace(hw, static_pj_per_cycle=3.0)
        assert with_static.energy_pj >= energy_bound(workload, static_hw,
                                                     bound.cycles).value * (1 - 1e-12)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 8))
def test_every_tile_respects_peak_throughput(seed: int, n: int) -> None:
    """The compute bound: no LFA's tiles take fewer cycles, on either preset."""
    workload = random_dag(seed, n_layers=n)
    lfa = random_lfa(workload, random.Random(seed))
    for hw in (EDGE, CLOUD):
        program = Lowerer(workload, hw).lower(lfa)
        assert program.compute_cycles >= compute_bound(workload, hw).value


@pytest.mark.parametrize("name", ["chain3", "chain5", "resblock", "fsrcnn"])
def test_halo_recompute_only_adds_work(name: str) -> None:
    """One tile computes exactly the layer's MACs; finer nested grids (1 -> 2x2 -> 4x4)
    recompute more halo, never less."""
    wl = zoo.get(name)
    order = tuple(wl.layers)

    def flg_macs(t: int) -> int:
        tiles = tile_flg(wl, order, t)
        return sum(tile_macs(wl.layers[n], wl.in_shapes(n), r)
                   for n in order for r in tiles.produced[n] if r is not None)

    macs = [flg_macs(t) for t in (1, 4, 16)]
    assert macs[0] == wl.total_macs
    assert macs[0] < macs[1] <= macs[2]
