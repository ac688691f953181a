"""Hardware YAML: each class of mistake (unknown key, missing key, a value with a unit,
a zero or negative size, a wrong type, broken YAML) is reported with the key and its line;
`hw --show` prints a preset that loads back to the same hardware."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mipsched.cli import app
from mipsched.errors import InputError
from mipsched.hw import load_hardware
from mipsched.hw.load import hardware_text

runner = CliRunner()
EDGE = hardware_text("edge")[0]


VECTOR_BLOCK = EDGE[EDGE.index("vector_unit:"):]


def variant(tmp_path: Path, old: str, new: str) -> Path:
    """A file holding the edge preset with `old` replaced by `new`."""
    assert EDGE.count(old) == 1, old
    path = tmp_path / "hw.yaml"
    path.write_text(EDGE.replace(old, new))
    return path


@pytest.mark.parametrize(("old", "new", "at", "needle"), [
    # unknown keys
    ("  lanes: 32", "  lanes: 32\n  lane: 32", "lane: 32",
     "core_array.lane: unknown key (allowed: al0,"),
    ("vector_unit:", "vectorunit:", "vectorunit", "vectorunit: unknown key"),
    # values written with units
    ("capacity_bytes: 8388608", "capacity_bytes: 8 MiB", "capacity_bytes: 8 MiB",
     "gbuf.capacity_bytes: expected an integer (unit: bytes), got '8 MiB' (the key fixes "
     "the unit: write a plain number, e.g. 8388608)"),
    ("bytes_per_cycle: 16 ", "bytes_per_cycle: 16GB/s ", "16GB/s",
     "dram.bytes_per_cycle: expected an integer (unit: bytes per cycle), got '16GB/s'"),
    ("frequency_hz: 1.0e+9", "frequency_hz: 1 GHz", "frequency_hz: 1 GHz",
     "frequency_hz: expected a finite number (unit: Hz), got '1 GHz' (the key fixes the "
     "unit: write a plain number, e.g. 1000000000)"),
    ("mac_pj: 0.018", "mac_pj: 18 fJ", "18 fJ",
     "core_array.mac_pj: expected a finite number (unit: pJ per MAC), got '18 fJ'"),
    # zero and negative sizes
    ("capacity_bytes: 8388608", "capacity_bytes: 0", "capacity_bytes: 0",
     "gbuf.capacity_bytes: must be > 0 bytes, got 0"),
    ("al0: {capacity_bytes: 16384", "al0: {capacity_bytes: -16384", "-16384",
     "core_array.al0.capacity_bytes: must be > 0 bytes, got -16384"),
    ("  pe_rows: 4", "  pe_rows: 0", "pe_rows: 0", "core_array.pe_rows: must be > 0 PEs, got 0"),
    ("energy_pj_per_byte: 84.0", "energy_pj_per_byte: -84.0", "-84.0",
     "dram.energy_pj_per_byte: must be >= 0 pJ per byte, got -84.0"),
    # sizes beyond any accelerator (they would overflow the solvers' 64-bit arithmetic)
    ("capacity_bytes: 8388608", f"capacity_bytes: {10**30}", str(10**30),
     "gbuf.capacity_bytes: must be <= 1099511627776 bytes, got 1000000"),
    ("frequency_hz: 1.0e+9", f"frequency_hz: {10**400}", str(10**400),
     "frequency_hz: expected a finite number (unit: Hz), got 1000000"),
    # wrong types
    ("capacity_bytes: 8388608", "capacity_bytes: 8.0e+6", "8.0e+6",
     "gbuf.capacity_bytes: expected an integer (unit: bytes), got 8000000.0 (write 8000000)"),
    ("ops_per_cycle: 512", "ops_per_cycle: [512]", "[512]",
     "vector_unit.ops_per_cycle: expected an integer"),
    (VECTOR_BLOCK, "vector_unit: 512\n", "vector_unit: 512",
     "vector_unit: expected a mapping, got 512"),
    # broken YAML
    ("  lanes: 32", "  lanes: 32: 4", "lanes: 32: 4",
     "invalid YAML: mapping values are not allowed here"),
    ("gbuf:", "dram:\n  bytes_per_cycle: 1\ngbuf:", "dram:\n  bytes_per_cycle: 1\n",
     "duplicate key 'dram' (first at line"),
])
def test_mistakes_name_the_key_and_the_line(tmp_path: Path, old: str, new: str, at: str,
                                            needle: str) -> None:
    path = variant(tmp_path, old, new)
    text = path.read_text()
    line = text[:text.index(at)].count("\n") + 1
    with pytest.raises(InputError) as err:
        load_hardware(str(path))
    message = str(err.value)
    assert needle in message
    assert message.startswith(f"{path}, line {line}: "), message


def test_missing_key_points_at_its_mapping(tmp_path: Path) -> None:
    path = variant(tmp_path, "  bytes_per_cycle: 16 ", "  # no bandwidth ")
    with pytest.raises(InputError) as err:
        load_hardware(str(path))
    dram_line = EDGE[:EDGE.index("dram:")].count("\n") + 1
    assert str(err.value).startswith(f"{path}, line {dram_line}: dram.bytes_per_cycle: "
                                     "missing required key")


def test_yaml_1_2_numbers(tmp_path: Path) -> None:
    """`1e9` (no dot) is a number, as in YAML 1.2 and JSON, not the string PyYAML's 1.1
    rules would make of it."""
    path = variant(tmp_path, "frequency_hz: 1.0e+9", "frequency_hz: 2e9")
    assert load_hardware(str(path)).frequency_hz == 2e9


@pytest.mark.parametrize("preset", ["edge", "cloud"])
def test_show_prints_the_commented_preset(tmp_path: Path, preset: str) -> None:
    shown = runner.invoke(app, ["hw", "--show", preset])
    assert shown.exit_code == 0
    assert shown.stdout == hardware_text(preset)[0]
    assert shown.stdout.startswith("#")  # the comments that say where numbers come from
    mine = tmp_path / "mine.yaml"
    mine.write_text(shown.stdout)
    assert load_hardware(str(mine)) == load_hardware(preset)
    as_json = runner.invoke(app, ["hw", "--show", str(mine), "--json"])
    assert json.loads(as_json.stdout)["gbuf"] == json.loads(
        runner.invoke(app, ["hw", "--json"]).stdout)[["cloud", "edge"].index(preset)]["gbuf"]


def test_show_validates_a_file_in_one_line(tmp_path: Path) -> None:
    path = variant(tmp_path, "capacity_bytes: 8388608", "capacity_bytes: 8 MiB")
    line = EDGE[:EDGE.index("capacity_bytes: 8388608")].count("\n") + 1
    result = runner.invoke(app, ["hw", "--show", str(path)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"line {line}: gbuf.capacity_bytes" in lines[0]
    unknown = runner.invoke(app, ["hw", "--show", "edgy"])
    assert unknown.exit_code == 2
    assert ("unknown hardware 'edgy': not a preset (cloud, edge, set-12x12, set-4x4)"
            in unknown.stderr)
