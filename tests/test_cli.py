"""The command line: solve -> eval reproduces the same numbers; machine interface; bad
input gives one line and exit code 2 without partial files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mipsched.cli import app

runner = CliRunner()
REQUIRED_KEYS = {"latency_cycles", "energy_pj", "edp", "utilization", "peak_buffer_bytes",
                 "dram_bytes", "total_macs", "weight_bytes", "method", "status"}


def run(*args: str):
    return runner.invoke(app, list(args))


@pytest.mark.parametrize(("net", "hw", "batch"), [("chain3", "edge", "1"),
                                                  ("resnet50", "edge", "1"),
                                                  ("gpt2_small_decode", "edge", "2")])
def test_solve_then_eval_reproduces_the_numbers(tmp_path: Path, net: str, hw: str,
                                                 batch: str) -> None:
    solved = run("solve", net, "--hw", hw, "--batch", batch, "--method", "baseline", "--out",
                 str(tmp_path), "--json")
    assert solved.exit_code == 0, solved.output
    result = json.loads(solved.stdout)
    assert set(result) >= REQUIRED_KEYS
    assert result["status"] in ("feasible", "optimal")
    assert result["lower_bound_cycles"] <= result["latency_cycles"]
    assert (tmp_path / "schedule.json").is_file()
    cert = json.loads((tmp_path / "certificate.json").read_text())
    assert cert["incumbent"]["latency_cycles"] == result["latency_cycles"]
    assert cert["lower_bound"]["latency_cycles"] == result["lower_bound_cycles"]

    for replayed in ("schedule.json", "program.json"):
        replay = run("eval", str(tmp_path / replayed), "--json")
        assert replay.exit_code == 0, replay.output
        again = json.loads(replay.stdout)
        for key in ("latency_cycles", "energy_pj", "edp", "utilization", "peak_buffer_bytes",
                    "dram_bytes", "total_macs", "weight_bytes"):
            assert again[key] == result[key], (replayed, key)


def test_human_output_is_a_table(tmp_path: Path) -> None:
    out = run("solve", "chain3", "--method", "baseline", "--out", str(tmp_path))
    assert out.exit_code == 0
    assert "latency_cycles" in out.stdout and "chain3 on edge" in out.stdout


def test_infeasible_network_reports_the_layer(tmp_path: Path) -> None:
    out = run("solve", "vgg16", "--hw", "edge", "--method", "baseline", "--out",
              str(tmp_path), "--json")
    assert out.exit_code == 1
    result = json.loads(out.stdout)
    assert result["status"] == "infeasible"
    assert "fc6" in result["reason"]
    assert not (tmp_path / "schedule.json").exists()


def test_zoo_and_hw_json() -> None:
    zoo = run("zoo", "--json")
    assert zoo.exit_code == 0
    rows = json.loads(zoo.stdout)
    by_name = {r["name"]: r for r in rows}
    assert by_name["resnet50"]["layers"] == 72
    assert {"name", "layers", "total_macs", "weight_bytes", "source"} <= set(rows[0])
    assert by_name["resnet50"]["source"].startswith("SoMa reference network")
    assert by_name["resnet50_v1_5"]["source"].startswith("torchvision-style")
    hw = run("hw", "--json")
    presets = {h["name"]: h for h in json.loads(hw.stdout)}
    assert presets["edge"]["gbuf"]["capacity_bytes"] == 8 * 2**20
    assert presets["cloud"]["peak_ops_per_cycle"] == 2 * 65536


def test_help_shows_summaries_whole_and_defaults_in_brackets() -> None:
    """A command's summary in `mipsched --help` is its docstring's first paragraph with
    the source's line breaks joined, wrapped only at the terminal's width; an option's
    default written in square brackets is shown, not taken for console markup."""
    listed = runner.invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert listed.exit_code == 0
    assert "certificate.json and the tile program (program.json" in listed.output
    solve = runner.invoke(app, ["solve", "--help"], env={"COLUMNS": "300"})
    text = " ".join(solve.output.replace("│", " ").split())
    assert "[default: auto for a network, cpsat for a tile program" in text
    assert "[default: all cores]" in text


def check_bad_input(result, needle: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr
    assert "Traceback" not in result.output


def test_unknown_network(tmp_path: Path) -> None:
    check_bad_input(run("solve", "resnet51", "--out", str(tmp_path / "o")),
                    "unknown network 'resnet51'")
    assert not (tmp_path / "o").exists()


def test_unknown_preset(tmp_path: Path) -> None:
    check_bad_input(run("solve", "chain3", "--hw", "tpu", "--out", str(tmp_path / "o")),
         "unknown hardware 'tpu'")
    assert not (tmp_path / "o").exists()


def test_bad_hardware_yaml_names_the_key(tmp_path: Path) -> None:
    text = (Path(__file__).parents[1] / "mipsched/hw/presets/edge.yaml").read_text()
    bad = tmp_path / "hw.yaml"
    bad.write_text(text.replace("capacity_bytes: 8388608", "capacity_bytes: -1"))
    check_bad_input(run("solve", "chain3", "--hw", str(bad), "--out", str(tmp_path / "o")),
         "gbuf.capacity_bytes: must be > 0")
    bad.write_text(text.replace("lanes: 32", "lanez: 32"))
    check_bad_input(run("solve", "chain3", "--hw", str(bad), "--out", str(tmp_path / "o")),
         "core_array.lanez: unknown key")


def test_malformed_schedule_json(tmp_path: Path) -> None:
    good = tmp_path / "good"
    assert run("solve", "chain3", "--method", "baseline", "--out", str(good)).exit_code == 0
    path = tmp_path / "s.json"
    path.write_text("{ not json")
    check_bad_input(run("eval", str(path)), "invalid JSON at line 1")
    data = json.loads((good / "schedule.json").read_text())
    data["lfa"]["order"] = ["conv2", "conv1", "conv3"]
    path.write_text(json.dumps(data))
    check_bad_input(run("eval", str(path)), "not topological")
    data = json.loads((good / "schedule.json").read_text())
    del data["dlsa"]["living"]
    path.write_text(json.dumps(data))
    check_bad_input(run("eval", str(path)), "dlsa.living: missing key")
    data = json.loads((good / "schedule.json").read_text())
    data["dlsa"]["order"] = data["dlsa"]["order"][::-1]
    path.write_text(json.dumps(data))
    result = run("eval", str(path))
    assert result.exit_code == 2 and ("deadlock" in result.stderr
                                      or "ordered before" in result.stderr)
    check_bad_input(run("eval", str(tmp_path / "missing.json")), "cannot read")


def test_unknown_method() -> None:
    check_bad_input(run("solve", "chain3", "--method", "magic"), "unknown method 'magic'")


def test_element_size_doubles_traffic_and_round_trips(tmp_path: Path) -> None:
    int8 = json.loads(run("solve", "chain5", "--method", "baseline", "--out",
                          str(tmp_path / "a"), "--json").stdout)
    int16 = json.loads(run("solve", "chain5", "--method", "baseline", "--elem-bytes", "2",
                           "--out", str(tmp_path / "b"), "--json").stdout)
    assert int16["weight_bytes"] == 2 * int8["weight_bytes"]
    assert int16["dram_bytes"] >= 2 * int8["dram_bytes"] * 0.99
    again = json.loads(run("eval", str(tmp_path / "b" / "schedule.json"), "--json").stdout)
    assert again["latency_cycles"] == int16["latency_cycles"]


def test_auto_is_the_default_and_certifies_its_models(tmp_path: Path) -> None:
    default = run("solve", "chain3", "--workers", "1", "--out", str(tmp_path / "d"),
                  "--json")
    assert default.exit_code == 0, default.output
    cert = json.loads((tmp_path / "d" / "certificate.json").read_text())
    assert (cert["method"], cert["gap_target"], cert["time_limit_s"]) == ("auto", 0.01, 60)
    assert (cert["stopped_by"] == "gap") == (cert["gap"] <= 0.01)
    assert cert["trail"][-1]["latency_cycles"] == cert["incumbent"]["latency_cycles"]

    result = run("solve", "chain3", "--time-limit", "20", "--gap", "0", "--workers", "1",
                 "--out", str(tmp_path), "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["method"] == "auto"
    cert = json.loads((tmp_path / "certificate.json").read_text())
    assert cert["gap_target"] == 0 and cert["stopped_by"] in ("search_end", "time_limit")
    assert {m["model"] for m in cert["models"]} == {"lfa", "dlsa"}
    assert cert["models"][0]["status"] in ("optimal", "feasible")
    assert out["latency_cycles"] >= out["lower_bound_cycles"]
    sa = json.loads(run("solve", "chain3", "--method", "sa", "--out", str(tmp_path / "sa"),
                        "--json").stdout)
    assert out["latency_cycles"] <= sa["latency_cycles"]
