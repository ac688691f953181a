"""STYLE: every solver call goes through one facade; OR-Tools and PuLP are imported
nowhere else in the package."""

from __future__ import annotations

import os
import re
import signal
import threading
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mipsched"
FACADE = {PACKAGE / "formulations" / "solver.py"}


def test_solver_libraries_are_imported_only_in_the_facade() -> None:
    pattern = re.compile(r"^\s*(from|import)\s+(ortools|pulp|highspy)\b", re.MULTILINE)
    offenders = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                 if p not in FACADE and pattern.search(p.read_text())]
    assert offenders == []
    assert all(pattern.search(p.read_text()) for p in FACADE)


def _hard_model():
    """A model CP-SAT cannot close in well under a minute."""
    from mipsched.formulations.solver import new_model

    m = new_model()
    xs = [m.new_int_var(0, 200, f"x{i}") for i in range(80)]
    m.add_all_different(xs)
    for i in range(79):
        m.add(xs[i] + xs[i + 1] != 100)
    m.maximize(sum((i % 7 + 1) * (i % 5) * x for i, x in enumerate(xs)))
    return m


def test_a_stop_event_ends_a_solve_early_with_its_best() -> None:
    from mipsched.formulations.solver import solve

    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    status, _ = solve(_hard_model(), time_limit=60, workers=2, stop=stop)
    assert status.interrupted
    assert status.wall_seconds < 10
    assert status.has_solution


def test_ctrl_c_during_a_solve_sets_the_callers_stop_event() -> None:
    from mipsched.formulations.solver import solve

    stop = threading.Event()
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
    status, _ = solve(_hard_model(), time_limit=60, workers=2, stop=stop)
    assert stop.is_set() and status.interrupted
    assert status.wall_seconds < 10


def test_cp_sat_is_imported_only_when_a_model_is_built() -> None:
    """The CLI starts without OR-Tools (and the pandas it pulls in, ~0.3 s); building a
    model imports it."""
    import subprocess
    import sys

    probe = ("import sys, mipsched.cli; print('ortools.sat.python.cp_model' in sys.modules); "
             "from mipsched.formulations.solver import new_model; new_model(); "
             "print('ortools.sat.python.cp_model' in sys.modules)")
    lines = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                           check=True).stdout.split()
    assert lines == ["False", "True"]


def _cover(seed: int, items: int = 70, rows: int = 25):
    """A weighted cover MIP HiGHS needs about a second to prove on one thread."""
    import random

    from mipsched.formulations.solver import MINIMISE, LpProblem, lp_sum

    rng = random.Random(seed)
    problem = LpProblem("cover", MINIMISE)
    x = [problem.add_variable(f"x{i}", cat="Binary") for i in range(items)]
    for _ in range(rows):
        a = [rng.randint(0, 20) for _ in range(items)]
        problem += lp_sum(a[i] * x[i] for i in range(items)) >= sum(a) // 3
    problem += lp_sum(rng.randint(10, 40) * x[i] for i in range(items))
    return problem


def test_a_mip_stopped_by_its_time_limit_reports_its_dual_bound() -> None:
    """PuLP calls a HiGHS run stopped by its time limit "Optimal"; its incumbent (416 on
    this cover, optimum 408) is no bound. The facade reports the dual bound instead."""
    from mipsched.formulations.solver import minimise

    full = minimise(_cover(0), None)
    assert full.status == "optimal" and full.bound is not None
    short = minimise(_cover(0), 0.02)
    assert short.bound is None or short.bound <= full.bound + 1e-6
    if short.status != "optimal":  # stopped early: its incumbent may exceed the optimum
        assert short.objective is None or short.objective >= full.bound - 1e-6


def test_a_mip_bound_counts_the_objectives_constant() -> None:
    """PuLP keeps an objective's constant term to itself; HiGHS's dual bound leaves it
    out, so the facade adds it back (the load-order MIPs end with the final store)."""
    from mipsched.formulations.solver import minimise

    plain = minimise(_cover(1), None)
    shifted = _cover(1)
    shifted.objective += 48
    found = minimise(shifted, None)
    assert plain.bound is not None and found.bound is not None
    assert abs(found.bound - (plain.bound + 48)) < 1e-6
    assert abs(found.objective - (plain.objective + 48)) < 1e-6
