"""The prefetch-scored LFA annealing (auto's stage after SA): what it scores is what the
evaluator and the simulator say, it accepts exactly the LFAs some DLSA fits, and on the
reference's GPT-2 prefill it finds what stage-1 scoring misses."""

from __future__ import annotations

import dataclasses
import random
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from mipsched.core import SearchOptions
from mipsched.dlsa_starts import tight_dlsa
from mipsched.evaluate import buffer_profile, evaluate
from mipsched.heuristics.baseline import unfused_baseline
from mipsched.heuristics.prefetch_anneal import (
    WORKER_GRACE_S,
    anneal_prefetched,
    anneal_prefetched_chains,
    prefetched,
)
from mipsched.heuristics.sa_stages import with_prefetch
from mipsched.hw import load_hardware
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import ScheduleError
from mipsched.sim import simulate
from mipsched.workload.zoo import get
from mipsched.workload.zoo.random_dags import random_dag

from strategies import random_lfa

EDGE = load_hardware("edge")


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 8),
       capacity=st.sampled_from([60_000, 200_000, 8 * 2**20]))
def test_prefetched_scores_what_the_evaluator_says(seed: int, n: int, capacity: int) -> None:
    """Its latency is the evaluator's for its DLSA, the DLSA fits the buffer, and it
    refuses an LFA exactly when the tight DLSA (the least buffer) does not fit."""
    wl = random_dag(seed, n_layers=n)
    hw = dataclasses.replace(EDGE, gbuf=dataclasses.replace(EDGE.gbuf,
                                                            capacity_bytes=capacity))
    lowerer = Lowerer(wl, hw)
    lfa = random_lfa(wl, random.Random(seed), tilings=(1, 2, 4))
    try:
        program = lowerer.lower(lfa, check=False)
    except ScheduleError:
        assert prefetched(lowerer, lfa) is None
        return
    found = prefetched(lowerer, lfa)
    fits = max(buffer_profile(program, tight_dlsa(program))) <= capacity
    assert (found is not None) == fits
    if found is not None:
        program, dlsa, latency = found
        ev = evaluate(program, dlsa)
        assert ev.fits and ev.latency_cycles == latency


def test_finds_an_order_that_hides_the_weight_loads_on_gpt2_prefill() -> None:
    """Reference GPT-2 small prefill, edge, batch 1: one pass from the unfused LFA (no
    deadline) ends faster than that LFA under its prefetching DLSA and at or below the
    reference's 649,728 cycles; the simulator agrees with its figures."""
    lowerer = Lowerer(get("gpt2_small_prefill"), EDGE)
    start = with_prefetch(unfused_baseline(lowerer).best)
    best, scored = anneal_prefetched(lowerer, start.lfa, SearchOptions(seed=0), None,
                                     random.Random(0))
    assert best is not None and scored > 0
    assert best.evaluation.latency_cycles < start.evaluation.latency_cycles
    assert best.evaluation.latency_cycles <= 649_728
    sim = simulate(best.program, best.dlsa)
    assert sim.latency_cycles == best.evaluation.latency_cycles
    assert sim.peak_buffer_bytes <= EDGE.gbuf.capacity_bytes


def test_chains_in_worker_processes_return_the_best_of_all() -> None:
    """Two chains (one forked) until a deadline: the result is never worse than the
    start under its prefetching DLSA, ends by the deadline plus the grace, and replays."""
    lowerer = Lowerer(get("resblock", 2), EDGE)
    start = unfused_baseline(lowerer).best.lfa
    options = SearchOptions(seed=0)
    until = time.perf_counter() + 1.0
    both = anneal_prefetched_chains(lowerer, start, options, until, 7, 2)
    first = prefetched(lowerer, start)
    assert both is not None and first is not None
    program, _, latency = first
    assert options.objective.cost(both.evaluation) <= options.objective.cost_of(
        program.energy_pj, latency)
    assert time.perf_counter() < until + WORKER_GRACE_S + 0.5
    sim = simulate(both.program, both.dlsa)
    assert sim.latency_cycles == both.evaluation.latency_cycles
