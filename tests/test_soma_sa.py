"""SoMa's two-stage SA: operators keep LFAs valid, stage 2 only improves on stage 1,
results replay in the simulator, determinism, time limit."""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mipsched.core import InfeasibleError, SearchOptions, evaluate_lfa
from mipsched.evaluate import evaluate
from mipsched.heuristics.annealing import Cooling, Progress
from mipsched.heuristics.baseline import single_flg_start, unfused_baseline
from mipsched.heuristics.dlsa_search import search_dlsa
from mipsched.heuristics.lfa_moves import add_lg_cut, propose
from mipsched.heuristics.soma_sa import SaSettings, initial_lfa, run_sa, soma_sa, with_prefetch
from mipsched.hw import load_hardware
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa
from mipsched.schedule.validity import check_lfa
from mipsched.sim import simulate
from mipsched.solve import solve_network as solve
from mipsched.workload import zoo
from mipsched.workload.zoo.random_dags import random_dag

from strategies import random_lfa

EDGE = load_hardware("edge")
QUICK = SaSettings(lfa_factor=20, dlsa_factor=50)


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 9))
def test_lfa_operators_keep_the_structure_valid(seed: int, n: int) -> None:
    """Every proposal is a topological order with FLCs and DRAM cuts that check_lfa
    accepts (only the tiling's divisibility is left to lowering)."""
    wl = random_dag(seed, n_layers=n)
    rng = random.Random(seed)
    lfa = random_lfa(wl, rng)
    for _ in range(30):
        new = propose(lfa, wl.graph, rng)
        if new is None:
            continue
        check_lfa(wl, new)
        assert set(new.dram_cuts) <= set(new.flc)
        assert len(new.tiling) == len(new.flc) + 1
        lfa = new


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 9))
def test_an_lg_cut_is_a_new_flc_and_dram_cut_and_stays_valid(seed: int, n: int) -> None:
    """add_lg_cut (the prefetch-scored annealing's seventh move) adds exactly one
    position to both the FLCs and the DRAM cuts, splitting one FLG whose halves keep its
    tiling; every proposal with it keeps the structure valid."""
    wl = random_dag(seed, n_layers=n)
    rng = random.Random(seed)
    lfa = random_lfa(wl, rng)
    for _ in range(30):
        split = add_lg_cut(lfa, rng)
        if split is not None:
            new_cuts = set(split.flc) - set(lfa.flc)
            assert len(new_cuts) == 1 and new_cuts <= set(split.dram_cuts)
            assert set(split.dram_cuts) - set(lfa.dram_cuts) == new_cuts
            assert sorted(split.tiling) == sorted([*lfa.tiling, split.tiling[
                split.flc.index(next(iter(new_cuts)))]])
        new = propose(lfa, wl.graph, rng, lg_cuts=True)
        if new is None:
            continue
        check_lfa(wl, new)
        assert set(new.dram_cuts) <= set(new.flc)
        lfa = new


@pytest.mark.parametrize("name", ["chain5", "resblock", "fsrcnn"])
def test_stage2_never_worse_and_replays_in_the_simulator(name: str) -> None:
    wl = zoo.get(name)
    result = soma_sa(Lowerer(wl, EDGE), SearchOptions(seed=3), QUICK)
    stage1, stage2 = result.stages["stage1"], result.stages["stage2"]
    assert stage2.lfa == stage1.lfa
    assert stage2.evaluation.latency_cycles <= stage1.evaluation.latency_cycles
    assert stage2.evaluation.energy_pj == pytest.approx(stage1.evaluation.energy_pj)
    for cand in (stage1, stage2):
        sim = simulate(cand.program, cand.dlsa)
        assert sim.latency_cycles == cand.evaluation.latency_cycles
        assert sim.peak_buffer_bytes <= EDGE.gbuf.capacity_bytes
    assert stage2.evaluation.latency_cycles >= stage2.program.ideal_cycles


def test_sa_beats_the_unfused_baseline_and_is_deterministic() -> None:
    wl = zoo.get("chain5")
    hw = EDGE
    a = solve(wl, hw, "sa", seed=5)
    b = solve(wl, hw, "sa", seed=5)
    base = solve(wl, hw, "baseline")
    assert a.candidate.evaluation.latency_cycles == b.candidate.evaluation.latency_cycles
    assert a.candidate.lfa == b.candidate.lfa and a.candidate.dlsa == b.candidate.dlsa
    assert a.candidate.evaluation.edp < base.candidate.evaluation.edp
    assert a.bound.cycles <= a.candidate.evaluation.latency_cycles


def test_dlsa_search_keeps_every_state_valid() -> None:
    """Start from the default DLSA of a fused resblock and check the best is valid and no
    worse; the search's incremental buffer bookkeeping must match a fresh profile."""
    wl = zoo.get("resblock")
    lowerer = Lowerer(wl, EDGE)
    program = lowerer.lower(Lfa(tuple(wl.layers), (3,), (4, 2), ()))
    start = default_dlsa(program)
    result = search_dlsa(program, start, None, SearchOptions().objective, 3000,
                         random.Random(0))
    ev = evaluate(program, result.best.dlsa)
    assert ev.fits and ev == result.best.evaluation
    assert ev.latency_cycles <= evaluate(program, start).latency_cycles
    assert simulate(program, result.best.dlsa).latency_cycles == ev.latency_cycles


def test_time_limit_stops_with_the_best_so_far() -> None:
    wl = zoo.get("resnet50")
    started = time.perf_counter()
    result = soma_sa(Lowerer(wl, EDGE), SearchOptions(seed=0, time_limit=2.0))
    assert time.perf_counter() - started < 8.0
    assert result.best.evaluation.fits


def test_ctrl_c_ends_the_search_with_the_best_so_far() -> None:
    timer = threading.Timer(1.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    started = time.perf_counter()
    timer.start()
    result = soma_sa(Lowerer(zoo.get("resnet50"), EDGE), SearchOptions(seed=0))
    timer.join()
    assert time.perf_counter() - started < 10.0
    assert result.best.evaluation.fits
    assert simulate(result.best.program, result.best.dlsa).latency_cycles == (
        result.best.evaluation.latency_cycles)


def test_ctrl_c_still_reaches_the_search_after_a_cp_sat_solve() -> None:
    """OR-Tools resets SIGINT when a solve ends; the facade puts the handler back."""
    from mipsched.formulations.solver import new_model
    from mipsched.formulations.solver import solve as cp_solve

    model = new_model()
    x = model.new_int_var(0, 3, "x")
    model.maximize(x)
    before = signal.getsignal(signal.SIGINT)
    cp_solve(model, 1.0, 1)
    assert signal.getsignal(signal.SIGINT) is before


def test_a_run_cut_short_by_its_deadline_still_cools_down() -> None:
    """Progress follows the clock when the deadline comes before N iterations, so the
    temperature reaches 0 at the deadline instead of staying at its start."""
    progress = Progress(total=10**9, deadline=time.perf_counter() + 0.05)
    cooling = Cooling(t0=0.05)
    assert cooling.temperature(progress.at(0)) > 0.04
    time.sleep(0.06)
    assert progress.at(1) >= 1.0
    assert cooling.temperature(progress.at(1)) == 0.0
    assert not cooling.accept(100.0, 100.001, progress.at(1), random.Random(0))
    assert Progress(total=10, deadline=None).at(5) == 0.5


def test_the_allocator_goes_below_the_unfused_start_with_finer_tiles() -> None:
    """resblock on a 700,000-byte buffer: the unfused start peaks at 643,072 bytes; the
    allocator's later limits are lower, and its rounds go on from finer-tiled starts, each
    round's stage 1 within its limit."""
    hw = dataclasses.replace(EDGE, gbuf=dataclasses.replace(EDGE.gbuf, capacity_bytes=700_000))
    lowerer = Lowerer(zoo.get("resblock"), hw)
    start_peak = unfused_baseline(lowerer).best.evaluation.peak_buffer_bytes
    run = run_sa(lowerer, SearchOptions(seed=3), QUICK)
    assert any(r.limit_bytes < start_peak for r in run.rounds)
    for r in run.rounds:
        assert r.stage1.evaluation.peak_buffer_bytes <= r.limit_bytes
        assert r.stage2.evaluation.fits
    objective = SearchOptions().objective
    assert objective.cost(run.best.stage2.evaluation) == min(
        objective.cost(r.stage2.evaluation) for r in run.rounds)


def test_the_unfused_start_fits_a_lower_limit_or_says_it_cannot() -> None:
    lowerer = Lowerer(zoo.get("resblock"), EDGE)
    full = unfused_baseline(lowerer).best
    lower = unfused_baseline(lowerer, buffer_limit=full.evaluation.peak_buffer_bytes // 2).best
    assert lower.evaluation.peak_buffer_bytes <= full.evaluation.peak_buffer_bytes // 2
    assert sum(lower.lfa.tiling) > sum(full.lfa.tiling)
    with pytest.raises(InfeasibleError, match="no unfused tiling fits 1,000 bytes"):
        unfused_baseline(lowerer, buffer_limit=1_000)


@pytest.mark.parametrize(("name", "batch", "limit"), [
    ("chain5", 1, None), ("resblock", 2, None), ("resblock", 4, 400_000),
    ("fsrcnn", 1, 1_500_000), ("chain3", 1, 1_000)])
def test_the_single_flg_start_is_the_cheapest_fitting_power_of_two_tiling(
        name: str, batch: int, limit: int | None) -> None:
    wl = zoo.get(name, batch)
    lowerer = Lowerer(wl, EDGE)
    objective = SearchOptions().objective
    order = tuple(wl.layers)
    found = single_flg_start(lowerer, objective, order, limit)
    fitting = [c for t in (1, 2, 4, 8, 16, 32, 64)
               if (c := evaluate_lfa(lowerer, Lfa(order, (), (t,), ()), limit)) is not None]
    if not fitting:
        assert found is None
        return
    assert found is not None and found.lfa.flc == () and found.lfa.dram_cuts == ()
    assert objective.cost(found.evaluation) == min(objective.cost(c.evaluation)
                                                   for c in fitting)
    assert found.evaluation.peak_buffer_bytes <= (limit or EDGE.gbuf.capacity_bytes)


def test_a_run_out_of_time_still_gets_the_single_flg_start_at_tiling_one() -> None:
    """A deadline already passed (a --time-limit spent by start-up) still tries tiling 1,
    and only tiling 1: on GPT-2 small decode / edge that start is 500,895 cycles with its
    prefetching DLSA, against the unfused start's 671,333."""
    lowerer = Lowerer(zoo.get("gpt2_small_decode", 1), EDGE)
    order = tuple(lowerer.workload.layers)
    objective = SearchOptions().objective
    past = time.perf_counter() - 1.0
    found = single_flg_start(lowerer, objective, order, deadline=past)
    assert found is not None and found.lfa.tiling == (1,)
    start = initial_lfa(lowerer, SearchOptions(), EDGE.gbuf.capacity_bytes, past)
    unfused = unfused_baseline(lowerer).best
    assert start.lfa == found.lfa
    assert with_prefetch(start).evaluation.latency_cycles < \
        with_prefetch(unfused).evaluation.latency_cycles


def test_stage1_starts_from_the_single_flg_schedule_where_it_is_cheaper() -> None:
    """randwire_small/edge/b16 (the reference's 85-layer RandWire): its 7.6 MB of weights
    fit, and one FLG of one sample per tile (2.6 M cycles) beats the unfused start (9.8 M);
    resnet50/edge/b16 has no single FLG that fits, so stage 1 starts unfused as in SoMa."""
    options = SearchOptions()
    lowerer = Lowerer(zoo.get("randwire_small", 16), EDGE)
    start = initial_lfa(lowerer, options, EDGE.gbuf.capacity_bytes)
    unfused = unfused_baseline(lowerer).best
    assert start.lfa.flc == () and start.lfa.tiling == (16,)
    assert start.evaluation.latency_cycles < unfused.evaluation.latency_cycles / 3
    sim = simulate(start.program, start.dlsa)
    assert sim.latency_cycles == start.evaluation.latency_cycles
    assert sim.peak_buffer_bytes <= EDGE.gbuf.capacity_bytes
    lowerer = Lowerer(zoo.get("resnet50", 16), EDGE)
    assert initial_lfa(lowerer, options, EDGE.gbuf.capacity_bytes).lfa == \
        unfused_baseline(lowerer).best.lfa
