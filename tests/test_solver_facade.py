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
