"""Crafted bad inputs: each gives one line on stderr naming the problem, exit code 2, no
traceback and no output file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mipsched.cli import app, main

runner = CliRunner()
INSTANCE = {
    "format": "dlsa-instance", "version": 1, "name": "t",
    "hardware": {"dram_bytes_per_cycle": 4, "buffer_capacity_bytes": 1000,
                 "dram_energy_pj_per_byte": 1.0},
    "tiles": [{"pos": 0, "layer_id": 0, "layer": "a", "tile": 0, "compute_cycles": 10,
               "energy_pj": 1.0}],
    "onchip_bytes": {"before_first_tile": 0, "per_tile": [0]},
    "dram_tensors": [{"id": 0, "kind": "load_ifmap", "layer_id": 0, "layer": "a",
                      "tile": 0, "bytes": 40, "access_cycles": 10, "first_use": 0,
                      "last_use": 0, "end": 1, "start_range": [-1, 0]}],
    "precedence": [],
}


def edit(data: dict, path: str, value) -> dict:
    """Copy of `data` with the dotted `path` set to `value` (or deleted when value is
    the string '<del>')."""
    data = json.loads(json.dumps(data))
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value == "<del>":
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return data


def assert_one_line_error(result, needle: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert needle in lines[0], lines[0]
    assert "Traceback" not in result.output


def test_valid_instance_evaluates(tmp_path: Path) -> None:
    path = tmp_path / "i.json"
    path.write_text(json.dumps(INSTANCE))
    result = runner.invoke(app, ["eval", str(path), "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["latency_cycles"] == 20


@pytest.mark.parametrize(("path", "value", "needle"), [
    ("hardware.dram_bytes_per_cycle", 0, "hardware.dram_bytes_per_cycle: must be >= 1"),
    ("dram_tensors.0.bytes", -5, "dram_tensors[0].bytes: must be >= 0"),
    ("tiles.0.compute_cycles", "many", "tiles[0].compute_cycles: expected an integer"),
    ("tiles.0.energy_pj", float("nan"), "tiles[0].energy_pj: expected a finite number"),
    ("tiles", {"a": 1}, "tiles: expected a list"),
    ("hardware", [1, 2], "hardware: expected an object"),
    ("hardware.static_pj_per_cycle", "x", "hardware.static_pj_per_cycle"),
    ("dram_tensors.0.kind", "load_magic", "dram_tensors[0].kind: must be one of"),
    ("dram_tensors.0.start_range", [-1], "start_range: expected 2 integers"),
    ("dram_tensors.0.first_use", 3, "out of range for 1 tiles"),
    ("precedence", [[0, 7]], "precedence[0]: pair [0, 7] names an unknown tensor"),
    ("onchip_bytes.per_tile", [0, 0], "per_tile: expected 1 integers"),
    ("dram_tensors.0.id", True, "dram_tensors[0].id: expected an integer"),
    ("workload", {"network": "x", "batch": 1, "total_macs": 1, "total_ops": 2,
                  "weight_bytes": 0, "peak_ops_per_cycle": 0},
     "workload.peak_ops_per_cycle: must be > 0"),
    ("reference", {"order": "0", "living": [[-1, 1]], "latency_cycles": 1,
                   "max_buffer_bytes": 1}, "reference.order: expected a list"),
])
def test_malformed_instance(tmp_path: Path, path: str, value, needle: str) -> None:
    file = tmp_path / "i.json"
    file.write_text(json.dumps(edit(INSTANCE, path, value)))
    assert_one_line_error(runner.invoke(app, ["eval", str(file)]), needle)


def test_unreadable_files(tmp_path: Path) -> None:
    binary = tmp_path / "b.json"
    binary.write_bytes(b"\xff\xfe\x00\x81")
    assert_one_line_error(runner.invoke(app, ["eval", str(binary)]), "not a UTF-8")
    deep = tmp_path / "d.json"
    deep.write_text("[" * 100_000)
    assert_one_line_error(runner.invoke(app, ["eval", str(deep)]), "d.json")


@pytest.fixture(scope="module")
def schedule(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("s")
    assert runner.invoke(app, ["solve", "chain3", "--method", "baseline", "--out",
                                str(out)]).exit_code == 0
    return json.loads((out / "schedule.json").read_text())


@pytest.mark.parametrize(("path", "value", "needle"), [
    ("network", ["chain3"], "network: expected an object"),
    ("network.batch", "x", "network.batch: expected an integer"),
    ("network.batch", 0, "network.batch: must be >= 1"),
    ("dlsa", "0 1 2", "dlsa: expected an object"),
    ("dlsa.tensors", "<del>", "dlsa.tensors: missing key"),
    ("results", [1], "results: expected an object"),
    ("lfa.tiling.0", 1.7, "lfa.tiling[0]: expected an integer"),
    ("lfa.tiling.0", 1_000_003, "tiling number 1000003 does not divide the work"),
    ("lfa.tiling.0", 1_000_000_007, "tiling number 1,000,000,007 x 1 layer), more than the "
                                    "cap of 1,048,576 per tile program"),
    ("network.batch", 10**9, "layer 'conv1': 3,136,000,000,000 output positions"),
    ("lfa.order", "conv1", "lfa.order: expected a list"),
    ("hardware", [1], "hardware: expected a mapping"),
    ("hardware.gbuf.read_pj_per_byte", float("inf"), "expected a finite number"),
])
def test_malformed_schedule(tmp_path: Path, schedule: dict, path: str, value,
                            needle: str) -> None:
    file = tmp_path / "s.json"
    file.write_text(json.dumps(edit(schedule, path, value)))
    assert_one_line_error(runner.invoke(app, ["eval", str(file)]), needle)


def test_bad_hardware_files(tmp_path: Path) -> None:
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n- 2\n")
    assert_one_line_error(runner.invoke(app, ["solve", "chain3", "--hw", str(listed),
                                              "--out", str(tmp_path / "o")]),
                          "expected a mapping")
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\ndram: {bytes_per_cycle: 4\n")
    assert_one_line_error(runner.invoke(app, ["solve", "chain3", "--hw", str(broken),
                                              "--out", str(tmp_path / "o")]),
                          "invalid YAML")
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00\x81")
    assert_one_line_error(runner.invoke(app, ["solve", "chain3", "--hw", str(binary),
                                              "--out", str(tmp_path / "o")]),
                          "cannot read as text")
    assert not (tmp_path / "o").exists()


def test_out_that_is_a_file(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert_one_line_error(runner.invoke(app, ["solve", "chain3", "--out", str(blocker)]),
                          "file")


@pytest.mark.parametrize(("argv", "needle"), [
    (["solve", "chain3", "--batch", "0"], "--batch"),
    (["solve", "chain3", "--batch", "abc"], "--batch"),
    (["solve", "chain3", "--bogus"], "No such option: --bogus"),
    (["solve"], "Missing argument"),
    (["eval"], "Missing argument"),
])
def test_usage_errors_are_one_line(argv: list[str], needle: str, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


def test_solve_rejects_a_schedule_json_and_fixed_program_options(schedule: dict,
                                                                 tmp_path: Path) -> None:
    file = tmp_path / "s.json"
    file.write_text(json.dumps(schedule))
    assert_one_line_error(runner.invoke(app, ["solve", str(file)]), "is a schedule.json")
    assert_one_line_error(runner.invoke(app, ["solve", str(file), "--batch", "4"]),
                          "do not apply to a tile program")
