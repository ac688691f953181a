"""SoMa's SA with worker processes, the target latency and the best-so-far trail:
determinism for a seed whatever the number of workers, the allocator's jobs, Ctrl-C in
the workers, stopping at the target, and the trail's points."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time

import pytest

from mipsched.core import SearchOptions, Trail
from mipsched.heuristics.soma_sa import SaSettings, run_sa, sa_workers
from mipsched.hw import load_hardware
from mipsched.schedule.lowering import Lowerer
from mipsched.workload import zoo

EDGE = load_hardware("edge")
QUICK = SaSettings(lfa_factor=20, dlsa_factor=50)


def _schedules(run) -> list:
    return [(r.limit_bytes, r.stage1.lfa, r.stage2.dlsa) for r in run.rounds]


def test_workers_give_the_same_rounds_whatever_their_number(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a deadline the rounds depend on the seed only: two runs with two workers
    and one with three (allowed more CPUs than the machine may have) agree, and job 0 is
    the first round of the serial allocator."""
    wl = zoo.get("resblock", 2)
    two = run_sa(Lowerer(wl, EDGE), SearchOptions(seed=4, workers=2), QUICK)
    again = run_sa(Lowerer(wl, EDGE), SearchOptions(seed=4, workers=2), QUICK)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0, 1, 2})
    assert sa_workers(SearchOptions(workers=3)) == 3
    three = run_sa(Lowerer(wl, EDGE), SearchOptions(seed=4, workers=3), QUICK)
    serial = run_sa(Lowerer(wl, EDGE), SearchOptions(seed=4, workers=1), QUICK)
    assert _schedules(two) == _schedules(again) == _schedules(three)
    assert _schedules(two)[0] == _schedules(serial)[0]
    assert multiprocessing.active_children() == []


def test_the_jobs_run_the_allocator_with_an_extra_chain_at_the_whole_buffer() -> None:
    """Jobs 0 and 1 use the whole buffer, job j >= 2 the buffer less j - 1 steps of 10 %
    of job 0's stage-1 peak; they end after `patience` jobs from job 2 on without
    improvement, and each round's schedules are lowered again in the parent and fit."""
    lowerer = Lowerer(zoo.get("resblock"), EDGE)
    run = run_sa(lowerer, SearchOptions(seed=2, workers=2), QUICK)
    capacity = EDGE.gbuf.capacity_bytes
    step = int(QUICK.allocator_step * run.rounds[0].stage1.evaluation.peak_buffer_bytes)
    assert [r.limit_bytes for r in run.rounds] == [
        capacity, *(capacity - k * step for k in range(len(run.rounds) - 1))]
    objective = SearchOptions().objective
    costs = [objective.cost(r.stage2.evaluation) for r in run.rounds]
    best = costs.index(min(costs))
    assert run.best is run.rounds[best] and len(run.rounds) >= 2 + QUICK.patience
    assert len(run.rounds) - max(best, 1) - 1 == QUICK.patience
    for r in run.rounds:
        assert r.stage1.evaluation.peak_buffer_bytes <= r.limit_bytes
        assert r.stage2.evaluation.fits and r.stage2.lfa == r.stage1.lfa
        assert r.stage2_iterations == QUICK.dlsa_factor * len(r.stage1.program.tensors)


@pytest.mark.parametrize("workers", [1, 2])
def test_the_trail_records_every_improvement_in_time_order(workers: int) -> None:
    trail = Trail()
    run = run_sa(Lowerer(zoo.get("resblock"), EDGE),
                 SearchOptions(seed=1, workers=workers, trail=trail), QUICK)
    times = [t for t, _, _ in trail.points]
    costs = [c for _, _, c in trail.points]
    assert len(trail.points) >= 2 and times == sorted(times) and times[0] >= 0.0
    assert all(a > b for a, b in zip(costs, costs[1:], strict=False))
    best = run.best.stage2.evaluation
    assert trail.points[-1][1:] == (best.latency_cycles, SearchOptions().objective.cost(best))


@pytest.mark.parametrize("workers", [1, 2])
def test_the_search_stops_once_the_target_latency_is_reached(workers: int) -> None:
    """A target the start already meets ends both stages at once with that schedule; one
    met during the search ends it early."""
    lowerer = Lowerer(zoo.get("resnet50"), EDGE)
    started = time.perf_counter()
    run = run_sa(lowerer, SearchOptions(seed=0, workers=workers, target_latency=10**12))
    assert time.perf_counter() - started < 20.0
    assert run.rounds[0].stage1_evaluations == 0 and run.rounds[0].stage2_iterations == 0
    assert run.best.stage2.evaluation.latency_cycles <= 10**12
    lowerer = Lowerer(zoo.get("resblock"), EDGE)
    full = run_sa(lowerer, SearchOptions(seed=0, workers=workers), QUICK)
    start = full.rounds[0].stage1.evaluation.latency_cycles
    early = run_sa(lowerer, SearchOptions(seed=0, workers=workers, target_latency=start),
                   QUICK)
    assert early.best.stage2.evaluation.latency_cycles <= start
    assert early.evaluations < full.evaluations


def test_ctrl_c_in_the_workers_ends_the_search_with_the_best_so_far() -> None:
    """SIGINT delivered to the workers themselves (as a terminal's Ctrl-C does) ends
    their jobs; the run returns a schedule that fits and leaves no process behind."""

    def interrupt_workers() -> None:
        time.sleep(1.5)
        for child in multiprocessing.active_children():
            os.kill(child.pid, signal.SIGINT)

    killer = threading.Thread(target=interrupt_workers)
    started = time.perf_counter()
    killer.start()
    run = run_sa(Lowerer(zoo.get("resnet50"), EDGE), SearchOptions(seed=0, workers=2))
    killer.join()
    assert time.perf_counter() - started < 10.0
    assert run.best.stage2.evaluation.fits
    assert multiprocessing.active_children() == []
