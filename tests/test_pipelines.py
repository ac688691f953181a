"""The CP-SAT pipelines on networks: auto is never worse than its own SA run, cpsat is
never worse than the unfused schedule it starts from, and both report their models
(with --gap 0, so that no certified-gap target ends them before their models run)."""

from __future__ import annotations

import pytest

from mipsched.hw import load_hardware
from mipsched.sim import simulate
from mipsched.solve import solve_network as solve
from mipsched.workload import zoo

EDGE = load_hardware("edge")


@pytest.mark.parametrize("name", ["chain5", "resblock"])
def test_auto_never_worse_than_sa_and_cpsat_never_worse_than_baseline(name: str) -> None:
    wl = zoo.get(name)
    sa = solve(wl, EDGE, "sa", seed=2, workers=1)
    auto = solve(wl, EDGE, "auto", seed=2, workers=1, gap=0.0)
    base = solve(wl, EDGE, "baseline")
    cp = solve(wl, EDGE, "cpsat", seed=2, workers=1, gap=0.0)
    objective = [o.candidate.evaluation.edp for o in (sa, auto, base, cp)]
    assert objective[1] <= objective[0]
    assert objective[3] <= objective[2]
    for outcome in (auto, cp):
        kinds = {m.model for m in outcome.models}
        assert kinds == {"lfa", "dlsa"}
        assert all(m.status in ("optimal", "feasible") for m in outcome.models)
        c = outcome.candidate
        assert simulate(c.program, c.dlsa).latency_cycles == c.evaluation.latency_cycles
        assert outcome.bound.cycles <= c.evaluation.latency_cycles
