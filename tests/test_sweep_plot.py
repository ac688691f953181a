"""`mipsched sweep plot`: the best-per-cell table, the Pareto set and the within-1 % mask
on hand-made rows; the heatmap and Pareto files of a results table; bad input as one
line and no files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from matplotlib.collections import LineCollection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from typer.testing import CliRunner

from mipsched.cli import app
from mipsched.errors import InputError
from mipsched.sweep.journal import append_journal
from mipsched.sweep.plots import (
    best_cells,
    heatmap_figure,
    load_rows,
    pareto_mask,
    within_best,
    write_plots,
)
from mipsched.sweep.results import write_results

runner = CliRunner()
MIB = 1 << 20
PNG = b"\x89PNG\r\n\x1a\n"


def _row(cap: int | None, bw: int | None, latency: int | None, method: str = "sa",
         network: str = "chain3", batch: int = 1, energy: float = 4e7) -> dict[str, Any]:
    """A sweep row as task.py writes it (a failed point: latency None, status crashed)."""
    row: dict[str, Any] = {
        "network": network, "batch": batch, "method": method, "objective": "latency",
        "seed": 0, "time_limit": 2, "hardware": "edge[...]",
        "latency_cycles": latency, "lower_bound_cycles": None if latency is None else
        latency * 9 // 10, "energy_pj": None if latency is None else energy,
        "status": "feasible" if latency is not None else "crashed",
        "point": f"{network}{batch}{method}{cap}{bw}", "dir": "points/x"}
    if cap is not None:
        row["gbuf.capacity_bytes"] = cap
    if bw is not None:
        row["dram.bytes_per_cycle"] = bw
    return row


#: 2 capacities x 3 bandwidths, two methods, one cell without a schedule.
ROWS = [
    _row(1 * MIB, 8, 30000), _row(1 * MIB, 8, 31000, "greedy"),
    _row(1 * MIB, 16, 20000), _row(1 * MIB, 64, None),
    _row(4 * MIB, 8, 29000), _row(4 * MIB, 16, 10100, energy=3e7),
    _row(4 * MIB, 64, 10000, "greedy"), _row(4 * MIB, 64, 10050),
]


def test_pareto_mask_keeps_exactly_the_undominated_points():
    points = [(1, 10), (2, 8), (2, 9), (3, 8), (4, 5), (4, 5), (1, 12), (5, 6), (0.5, 20)]
    assert pareto_mask(points) == [True, True, False, False, True, True, False, False, True]
    assert pareto_mask([]) == []
    assert pareto_mask([(3, 3)]) == [True]


def test_within_one_percent_of_the_best():
    latency = {(8, 1): 1000, (16, 1): 1010, (32, 1): 1011, (64, 1): None, (8, 4): 1005}
    assert within_best(latency) == {(8, 1): True, (16, 1): True, (32, 1): False,
                                    (64, 1): False, (8, 4): True}
    assert within_best(latency, 0.0) == {(8, 1): True, (16, 1): False, (32, 1): False,
                                         (64, 1): False, (8, 4): False}


def test_best_cells_take_the_least_latency_and_say_over_what():
    panel = best_cells(ROWS)["chain3", 1]
    assert panel.bandwidths == (8, 16, 64)
    assert panel.capacities == (MIB, 4 * MIB)
    assert panel.latency[8, MIB] == 30000  # sa beats greedy's 31000
    assert panel.latency[64, MIB] is None  # its only run crashed
    assert panel.latency[64, 4 * MIB] == 10000
    assert panel.best == 10000
    assert (panel.runs, panel.pooled) == (2, ("method",))
    strip = best_cells([_row(MIB, None, 5), _row(2 * MIB, None, 4)])["chain3", 1]
    assert (strip.bandwidths, strip.capacities) == ((None,), (MIB, 2 * MIB))
    assert strip.pooled == ()


def test_the_envelope_encloses_the_cells_within_one_percent():
    fig = heatmap_figure(best_cells(ROWS)["chain3", 1])
    red = [c for c in fig.axes[0].collections if isinstance(c, LineCollection)
           and tuple(c.get_colors()[0]) == to_rgba("red")]
    # 10,000 and 10,100 (16 and 64 B/cycle at 4 MiB): two cells side by side, 6 sides
    assert len(red) == 1 and len(red[0].get_segments()) == 6
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "—" in texts and "1.01\n10.1k" in texts and "3.00\n30k" in texts


def test_results_csv_and_journal_are_read_back_as_numbers(tmp_path):
    write_results(tmp_path, ROWS)
    rows = load_rows(tmp_path)
    assert rows[0]["latency_cycles"] == 30000 and rows[0]["gbuf.capacity_bytes"] == MIB
    assert rows[3]["latency_cycles"] is None and rows[3]["status"] == "crashed"
    assert best_cells(rows) == best_cells(ROWS)
    journal = tmp_path / "journal_only"
    journal.mkdir()
    for row in ROWS:
        append_journal(journal, row)
    assert best_cells(load_rows(journal)) == best_cells(ROWS)


def test_the_figures_are_written_whole(tmp_path):
    rows = ROWS + [_row(MIB, 8, 70000, network="resblock", batch=4)]
    write_results(tmp_path, rows)
    written = write_plots(tmp_path)
    out = tmp_path / "plots"
    assert written.files == [out / "heatmap-chain3-b1.png", out / "pareto-chain3-b1.png",
                             out / "heatmap-resblock-b4.png", out / "pareto-resblock-b4.png"]
    assert sorted(out.iterdir()) == sorted(written.files)  # no temporary files left
    for path in written.files:
        assert path.read_bytes().startswith(PNG) and path.stat().st_size > 5000
    svg = write_plots(tmp_path, tmp_path / "svg", "svg")
    assert [p.name for p in svg.files][0] == "heatmap-chain3-b1.svg"
    assert svg.files[1].read_text().lstrip().startswith("<?xml")


def test_without_a_capacity_axis_a_strip_and_no_pareto_front(tmp_path):
    write_results(tmp_path, [_row(None, 8, 300), _row(None, 16, 200), _row(None, 32, 199)])
    written = write_plots(tmp_path, tmp_path / "figs")
    assert [p.name for p in written.files] == ["heatmap-chain3-b1.png"]
    assert written.notes == ["chain3 batch 1: gbuf.capacity_bytes is not an axis; no "
                             "Pareto front"]


def test_cli_plot_prints_the_files(tmp_path):
    write_results(tmp_path, ROWS)
    result = runner.invoke(app, ["sweep", "plot", str(tmp_path), "-o", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert result.stdout.split() == [str(tmp_path / "o" / "heatmap-chain3-b1.png"),
                                     str(tmp_path / "o" / "pareto-chain3-b1.png")]


@pytest.mark.parametrize(("rows", "message"), [
    (None, "no sweep results (no results.csv or journal.jsonl)"),
    ([_row(MIB, 8, None), _row(MIB, 16, None)],
     "no point of the sweep has a schedule (2 finished); nothing to plot"),
    ([_row(None, None, 100)], "neither gbuf.capacity_bytes nor dram.bytes_per_cycle is an "
                              "axis of the sweep; nothing to plot"),
])
def test_cli_bad_directory_is_one_line_and_writes_nothing(tmp_path, rows, message):
    if rows is not None:
        write_results(tmp_path, rows)
    before = sorted(tmp_path.iterdir())
    result = runner.invoke(app, ["sweep", "plot", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"mipsched: error: {tmp_path}: {message}"]
    assert "Traceback" not in result.output
    assert sorted(tmp_path.iterdir()) == before  # not even the plots folder


def test_cli_missing_directory_and_format(tmp_path):
    missing = runner.invoke(app, ["sweep", "plot", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2
    assert missing.stderr.splitlines() == [f"mipsched: error: {tmp_path / 'nowhere'}: "
                                           "no such directory"]
    with pytest.raises(InputError, match="--format: 'pdf' is not one of png, svg"):
        write_plots(tmp_path, fmt="pdf")


def test_a_failing_save_leaves_no_partial_file(tmp_path, monkeypatch):
    write_results(tmp_path, ROWS)

    def broken(self, fname, **kw) -> None:
        Path(fname).write_bytes(PNG + b"half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", broken)
    result = runner.invoke(app, ["sweep", "plot", str(tmp_path)])
    assert result.exit_code == 2
    assert list((tmp_path / "plots").iterdir()) == []


def test_a_real_sweep_is_plotted(tmp_path):
    """Four greedy points of chain3: the rows `mipsched sweep` writes, end to end."""
    grid = tmp_path / "grid.yaml"
    grid.write_text("networks: [chain3]\nbatches: [1]\nhardware: edge\naxes:\n"
                    "  gbuf.capacity_bytes: [1048576, 4194304]\n"
                    "  dram.bytes_per_cycle: [8, 64]\nmethod: greedy\nobjective: latency\n"
                    "time_limit: 2\n")
    out = tmp_path / "sweep"
    assert runner.invoke(app, ["sweep", str(grid), "-o", str(out), "--jobs", "2"]
                         ).exit_code == 0
    panel = best_cells(load_rows(out))["chain3", 1]
    assert len(panel.latency) == 4 and panel.pooled == ()
    assert panel.latency[64, 4 * MIB] == panel.best  # latency never rises along the axes
    result = runner.invoke(app, ["sweep", "plot", str(out)])
    assert result.exit_code == 0, result.output
    files = sorted((out / "plots").iterdir())
    assert [p.name for p in files] == ["heatmap-chain3-b1.png", "pareto-chain3-b1.png"]
    assert all(p.read_bytes().startswith(PNG) for p in files)
