"""`mipsched compare`: rows per method (SA as two stages), ratios against the baseline,
CSV and markdown written and consistent; the terminal table fits 80 columns, --wide
shows every column."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from mipsched import cli
from mipsched.cli import app
from mipsched.report.compare import compare_table
from mipsched.solve import CompareRow

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


COMPACT = ("network", "method", "status", "latency", "energy", "E×D", "gap")
"""The terminal table's columns at 80 columns."""
WIDE = ("network", "method", "status", "latency", "energy", "E×D", "util", "LG/FLG", "tiles",
        "s", "speedup", "energy×", "bound", "gap")
"""... and with --wide."""


def _long_rows() -> list[CompareRow]:
    """Rows as wide as they come: the zoo's longest name, nine-digit latencies, the
    bound pseudo-method and a row without a schedule."""
    net = "gpt2_small_prefill_s1024"
    return [
        CompareRow(network=net, method="greedy:unfused", status="feasible",
                   latency_cycles=123_456_789, energy_pj=98_765_432_109.0, edp=1.219e19,
                   utilization=0.123, dram_bytes=9_876_543_210, n_lg=120, n_flg=340,
                   n_tiles=10_240, ideal_cycles=100_000_000, runtime_s=1234.5, speedup=0.83,
                   energy_ratio=1.25, edp_ratio=1.04, lower_bound_cycles=100_000_000,
                   gap=0.19),
        CompareRow(network=net, method="bound", status="lfa_relaxation", runtime_s=60.0,
                   lower_bound_cycles=100_000_000),
        CompareRow(network="vgg16", method="baseline", status="infeasible", runtime_s=0.1,
                   reason="layer 'fc6' fits in no schedule"),
    ]


def _rendered(table, width: int) -> list[str]:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(table)
    return console.export_text().splitlines()


def _headers(lines: list[str]) -> list[str]:
    """The header row: the line above the rule under it."""
    rule = next(i for i, line in enumerate(lines) if set(line.strip()) == {"─"})
    return lines[rule - 1].split()


def test_compare_table_fits_80_columns_with_every_header_whole() -> None:
    lines = _rendered(compare_table(_long_rows(), "compare on edge, batch 1", width=80), 80)
    assert max(len(line) for line in lines) <= 80
    assert _headers(lines) == list(COMPACT)
    text = "\n".join(lines)
    assert "…" not in text
    for cell in ("123,456,789", "98,765.4", "1.22e+19", "19.0%", "infeasible"):
        assert cell in text


def test_wide_compare_table_has_every_column() -> None:
    lines = _rendered(compare_table(_long_rows(), "compare on edge, batch 1", wide=True,
                                    width=200), 200)
    assert _headers(lines) == list(WIDE)
    text = "\n".join(lines)
    for cell in ("120/340", "10,240", "1234.5", "0.83×", "1.25", "100,000,000"):
        assert cell in text


def test_compare_prints_more_columns_with_wide(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}
    for flag in ((), ("--wide",)):
        console = Console(width=200, record=True, file=io.StringIO())
        monkeypatch.setattr(cli, "console", console)
        result = runner.invoke(app, ["compare", "chain5", "--methods", "baseline",
                                     "--out", str(tmp_path), *flag])
        assert result.exit_code == 0, result.output
        seen[flag] = _headers(console.export_text().splitlines())
    assert seen[()] == list(COMPACT)
    assert seen[("--wide",)] == list(WIDE)
