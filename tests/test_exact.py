"""The exact search against brute force over every six-attribute schedule, and every
bound against the optimum and against every method's schedules."""

from __future__ import annotations

import dataclasses

import pytest
from brute import schedule_optimum

from mipsched.evaluate import evaluate
from mipsched.formulations import exact as exact_module
from mipsched.formulations.bounds import (
    edp_bound,
    energy_bound,
    network_latency_bound,
)
from mipsched.formulations.exact import exact_search
from mipsched.formulations.lfa.relaxation import relaxation_bound
from mipsched.hw import load_hardware
from mipsched.hw.model import Hardware
from mipsched.schedule.lowering import Lowerer
from mipsched.solve import bound_report
from mipsched.solve import solve_network as solve
from mipsched.workload import zoo
from mipsched.workload.zoo.random_dags import random_dag

EDGE = load_hardware("edge")
SMALL = (1, 2)


def with_buffer(hw: Hardware, capacity: int) -> Hardware:
    return dataclasses.replace(hw, name=f"{hw.name}-{capacity}B",
                               gbuf=dataclasses.replace(hw.gbuf, capacity_bytes=capacity))


def check_against_brute_force(workload, hw: Hardware) -> None:
    optimum = schedule_optimum(workload, hw, SMALL)
    lowerer = Lowerer(workload, hw)
    result = exact_search(lowerer, tilings=SMALL, workers=1, time_limit=120)
    if optimum is None:
        assert result.best is None
        return
    assert result.proven
    assert result.best is not None
    assert result.best.evaluation.latency_cycles == optimum
    ev = evaluate(result.best.program, result.best.dlsa)  # replays to the same figures
    assert ev.fits and ev.latency_cycles == optimum
    bound, complete = relaxation_bound(lowerer, tilings=SMALL, workers=1)
    assert complete and bound <= optimum
    assert network_latency_bound(workload, hw).cycles <= optimum


CASES = ([("chain3", 1, None), ("chain3", 2, 60_000), ("chain3", 1, 20_000)]
         + [(f"dag{seed}", 1 + seed % 4, [None, 40_000, 16_000][seed % 3])
            for seed in range(16)])
"""The CI set; test_exact_equals_brute_force_bigger (marked slow) adds 60 DAGs of 5
layers and chain5 / resblock."""


def _workload(name: str, batch: int):
    if name.startswith("dag"):
        seed = int(name[3:])
        return random_dag(seed, n_layers=2 + seed % 3, batch=batch)
    return zoo.get(name, batch)


@pytest.mark.parametrize(("name", "batch", "capacity"), CASES)
def test_exact_equals_brute_force(name: str, batch: int, capacity: int | None) -> None:
    hw = EDGE if capacity is None else with_buffer(EDGE, capacity)
    check_against_brute_force(_workload(name, batch), hw)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "batch", "capacity"),
                         [("chain5", 1, None), ("resblock", 1, None), ("resblock", 2, 2**19)]
                         + [(f"dag{seed}", 1 + seed % 4, [None, 60_000, 20_000][seed % 3])
                            for seed in range(100, 160)])
def test_exact_equals_brute_force_bigger(name: str, batch: int, capacity: int | None) -> None:
    hw = EDGE if capacity is None else with_buffer(EDGE, capacity)
    wl = (random_dag(int(name[3:]), n_layers=5, batch=batch) if name.startswith("dag")
          else zoo.get(name, batch))
    check_against_brute_force(wl, hw)


def test_programs_too_big_for_the_dlsa_model_still_give_schedules_and_no_false_proof(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With every program called too big for one DLSA model, the search has no exact
    DLSA to prove anything with: it must still return a fitting schedule (the best
    constructed DLSA of the LFAs it met), keep those LFAs open, and report a bound no
    larger than the true optimum."""
    wl, hw = random_dag(10, n_layers=4, batch=2), with_buffer(EDGE, 20_000)
    optimum = exact_search(Lowerer(wl, hw), tilings=SMALL, workers=1, time_limit=120)
    assert optimum.proven and optimum.best is not None
    monkeypatch.setattr(exact_module, "whole_model_fits", lambda program: False)
    result = exact_search(Lowerer(wl, hw), tilings=SMALL, workers=1, time_limit=120)
    assert result.best is not None and result.lfas_too_big > 0 and result.dlsas_solved == 0
    ev = evaluate(result.best.program, result.best.dlsa)
    assert ev.fits and ev.latency_cycles >= optimum.best.evaluation.latency_cycles
    assert result.lower_bound <= optimum.best.evaluation.latency_cycles
    assert result.proven == (result.lower_bound >= ev.latency_cycles)
    assert not result.proven  # here the constructed DLSAs miss the optimum (1,635 vs 1,540)


def check_methods_against_exact(name: str, capacity: int | None) -> None:
    """Over every power-of-two tiling: `solve --method exact` proves its optimum; every
    other method's schedule is no faster, and every bound is no larger."""
    hw = EDGE if capacity is None else with_buffer(EDGE, capacity)
    wl = zoo.get(name)
    exact = solve(wl, hw, "exact", time_limit=60, objective="latency")
    assert exact.status == "optimal"
    assert exact.candidate is not None
    optimum = exact.candidate.evaluation.latency_cycles
    assert exact.bound.cycles == optimum
    bound = network_latency_bound(wl, hw)
    assert bound.cycles <= optimum
    energy = energy_bound(wl, hw, bound.cycles)
    for method in ("baseline", "greedy", "dp", "cocco", "sa", "auto"):
        outcome = solve(wl, hw, method, time_limit=8, objective="latency")
        assert outcome.candidate is not None
        ev = outcome.candidate.evaluation
        assert ev.latency_cycles >= optimum, method
        assert ev.energy_pj >= energy.value * (1 - 1e-12)
        assert ev.edp >= edp_bound(energy, bound).value * (1 - 1e-12)


@pytest.mark.parametrize("capacity", [None, 2**19])
def test_exact_proves_chain3_and_no_method_is_faster(capacity: int | None) -> None:
    check_methods_against_exact("chain3", capacity)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["chain5", "resblock", "fsrcnn"])
@pytest.mark.parametrize("capacity", [None, 2**19])
def test_exact_proves_tiny_nets_and_no_method_is_faster(name: str,
                                                        capacity: int | None) -> None:
    check_methods_against_exact(name, capacity)


def check_every_method_against_every_bound(seed: int, batch: int,
                                           capacity: int | None) -> str:
    """On a random DAG of at most 5 layers: every certified bound (network bounds, the
    LFA relaxations of latency and energy, and the exact search's bound, which is the
    optimum over power-of-two tilings, the ones every method uses, when it is proven) is
    at most the latency, energy and E x D of every schedule every method returns.
    Returns the exact search's status."""
    hw = EDGE if capacity is None else with_buffer(EDGE, capacity)
    wl = random_dag(seed, n_layers=2 + seed % 4, batch=batch)
    report = bound_report(wl, hw, time_limit=60, workers=1)
    assert not report.skipped
    exact = solve(wl, hw, "exact", time_limit=60, objective="latency", workers=1)
    if exact.candidate is None:  # nothing fits: then no method finds a schedule either
        assert exact.status == "infeasible"
    else:
        assert exact.status in ("optimal", "feasible")
        assert report.latency.cycles <= exact.candidate.evaluation.latency_cycles
        assert exact.bound.cycles <= exact.candidate.evaluation.latency_cycles
    for method in ("baseline", "greedy", "dp", "cocco", "sa", "auto", "cpsat"):
        outcome = solve(wl, hw, method, seed=seed, time_limit=3, workers=1)
        if exact.candidate is None:
            assert outcome.candidate is None, method
            continue
        assert outcome.status != "error", (method, outcome.reason)
        if outcome.candidate is None:
            continue  # a partition method may find nothing where other schedules fit
        ev = outcome.candidate.evaluation
        assert ev.latency_cycles >= exact.bound.cycles, method
        assert ev.latency_cycles >= report.latency.cycles, method
        assert ev.energy_pj >= report.energy.value * (1 - 1e-12), method
        assert ev.edp >= report.edp.value * (1 - 1e-12), method
    return exact.status


@pytest.mark.parametrize(("seed", "batch", "capacity"),
                         [(3, 1, None), (6, 2, 40_000), (9, 4, 16_000)])
def test_no_method_beats_a_bound_or_the_optimum(seed: int, batch: int,
                                               capacity: int | None) -> None:
    # these three are proven well within the minute
    assert check_every_method_against_every_bound(seed, batch, capacity) == "optimal"


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(200, 230))
def test_no_method_beats_a_bound_or_the_optimum_more_nets(seed: int) -> None:
    check_every_method_against_every_bound(seed, 1 + seed % 4,
                                           [None, 60_000, 20_000, 10_000][seed % 4])
