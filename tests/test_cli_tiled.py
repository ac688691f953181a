"""`mipsched solve NET --hw set-4x4`: the multi-core path end to end."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from mipsched.cli import app
from mipsched.tiled.ratree import check_tree, parse_tree
from mipsched.workload import zoo

runner = CliRunner()


def test_solve_on_a_tiled_machine_writes_the_tree_and_its_bound(tmp_path) -> None:
    done = runner.invoke(app, ["solve", "chain3", "--hw", "set-4x4", "--batch", "2",
                               "--method", "ls", "--time-limit", "5", "--json",
                               "--out", str(tmp_path)])
    assert done.exit_code == 0, done.output
    result = json.loads(done.stdout)
    assert result["method"] == "ls" and result["status"] == "feasible"
    assert result["lower_bound_cycles"] <= result["latency_cycles"]
    assert result["edp"] <= result["start_edp"]
    saved = json.loads((tmp_path / "ratree.json").read_text())
    check_tree(parse_tree(saved["tree"]), zoo.get("chain3", 2), 16)
    cert = json.loads((tmp_path / "certificate.json").read_text())
    assert cert["lower_bound"]["latency_cycles"] == result["lower_bound_cycles"]


def test_a_single_core_method_on_a_tiled_machine_is_one_line(tmp_path) -> None:
    done = runner.invoke(app, ["solve", "chain3", "--hw", "set-4x4", "--method", "auto",
                               "--out", str(tmp_path)])
    assert done.exit_code == 2
    assert "does not schedule a tiled machine" in done.output
    assert "Traceback" not in done.output
