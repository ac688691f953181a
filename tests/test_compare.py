"""`mipsched compare`: rows per method (SA as two stages), ratios against the baseline,
CSV and markdown written and consistent."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mipsched.cli import app

runner = CliRunner()


def test_compare_writes_consistent_tables(tmp_path: Path) -> None:
    result = runner.invoke(app, ["compare", "chain5", "fsrcnn", "--methods", "baseline,sa",
                                 "--out", str(tmp_path), "--json", "--time-limit", "20"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["method"] for r in rows] == ["baseline", "sa:stage1", "sa:stage2", "sa"] * 2
    for net in ("chain5", "fsrcnn"):
        base, s1, s2, final = [r for r in rows if r["network"] == net]
        assert final["latency_cycles"] == s2["latency_cycles"]
        assert base["speedup"] == 1.0 and base["energy_ratio"] == 1.0
        assert s2["latency_cycles"] <= s1["latency_cycles"]
        assert s2["speedup"] == pytest.approx(base["latency_cycles"] / s2["latency_cycles"])
        assert s2["energy_ratio"] == pytest.approx(s2["energy_pj"] / base["energy_pj"])
        assert s2["latency_cycles"] >= s2["ideal_cycles"]
    table = list(csv.DictReader((tmp_path / "compare.csv").open()))
    assert [r["method"] for r in table] == [r["method"] for r in rows]
    markdown = (tmp_path / "compare.md").read_text().splitlines()
    assert len(markdown) == 2 + len(rows) and "speedup" in markdown[0]


def test_compare_rejects_unknown_method_and_baseline(tmp_path: Path) -> None:
    bad = runner.invoke(app, ["compare", "chain5", "--methods", "sa,magic",
                              "--out", str(tmp_path)])
    assert bad.exit_code == 2 and "unknown method 'magic'" in bad.stderr
    bad = runner.invoke(app, ["compare", "chain5", "--methods", "sa", "--baseline",
                              "baseline", "--out", str(tmp_path)])
    assert bad.exit_code == 2 and "--baseline 'baseline' is not among" in bad.stderr


def test_every_method_has_a_row_for_its_result(tmp_path: Path) -> None:
    result = runner.invoke(app, ["compare", "chain5", "--methods", "cocco,dp,sa",
                                 "--out", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["method"]: r for r in json.loads(result.stdout)}
    assert {"cocco", "cocco:unfused", "dp", "dp:unfused", "sa:stage1", "sa:stage2",
            "sa"} <= set(rows)
    assert rows["cocco"]["speedup"] == 1.0
    assert rows["cocco"]["edp"] <= rows["cocco:unfused"]["edp"]  # GA starts from it
