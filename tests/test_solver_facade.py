"""STYLE: every solver call goes through one facade; OR-Tools and PuLP are imported
nowhere else in the package."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mipsched"
FACADE = {PACKAGE / "formulations" / "solver.py"}


def test_solver_libraries_are_imported_only_in_the_facade() -> None:
    pattern = re.compile(r"^\s*(from|import)\s+(ortools|pulp|highspy)\b", re.MULTILINE)
    offenders = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                 if p not in FACADE and pattern.search(p.read_text())]
    assert offenders == []
    assert all(pattern.search(p.read_text()) for p in FACADE)
