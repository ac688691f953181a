"""Tiled hardware descriptions (SET's machines): presets, validation with one-line errors
naming file, line and key, and the per-tile view for the core-array cost model."""

from __future__ import annotations

from pathlib import Path

import pytest

from mipsched.errors import InputError
from mipsched.hw.tiled import TILED_PRESETS, load_tiled_hardware

TINY = """\
name: tiny-2x2
mesh: {cols: 2, rows: 2}
tile:
  gbuf: {capacity_bytes: 1048576, read_bytes_per_cycle: 64, read_pj_per_byte: 1.0,
         write_pj_per_byte: 1.8}
  core_array:
    pe_rows: 4
    pe_cols: 4
    vector: 8
    lanes: 8
    mac_pj: 0.018
    al0: {capacity_bytes: 8192, read_pj_per_byte: 0.1, write_pj_per_byte: 0.1}
    wl0: {capacity_bytes: 4096, read_pj_per_byte: 0.1, write_pj_per_byte: 0.1}
    ol0: {capacity_bytes: 2048, read_pj_per_byte: 0.1, write_pj_per_byte: 0.1}
    ol1: {capacity_bytes: 28672, read_pj_per_byte: 0.1, write_pj_per_byte: 0.1}
  vector_unit: {ops_per_cycle: 64, pj_per_op: 0.0873}
noc: {link_bytes_per_cycle: 24, hop_pj_per_byte: 5.6}
dram:
  bytes_per_cycle: 4
  energy_pj_per_byte: 60.0
  ports:
    - {x: 0, y: 0}
    - {x: 1, y: 1}
"""


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "tiled.yaml"
    path.write_text(text)
    return str(path)


def test_a_file_loads_and_gives_a_tile_for_the_cost_model(tmp_path) -> None:
    hw = load_tiled_hardware(write(tmp_path, TINY))
    assert hw.n_tiles == 4 and hw.macs_per_cycle == 4 * 1024
    core = hw.core()
    assert core.core_array.macs_per_cycle == 1024
    assert core.gbuf.capacity_bytes == 1 << 20 and core.dram.bytes_per_cycle == 2
    assert hw.noc.routing == "xy" and hw.noc.multicast


@pytest.mark.parametrize(("old", "new", "message"), [
    ("cols: 2", "cols: 0", "line 2: mesh.cols: must be > 0"),
    ("    - {x: 1, y: 1}", "    - {x: 2, y: 1}", "dram.ports[1]: tile (2, 1) is outside"),
    ("    - {x: 1, y: 1}", "    - {x: 0, y: 0}", "dram.ports[1]: tile (0, 0) has a port"),
    ("noc: {link_bytes_per_cycle: 24, hop_pj_per_byte: 5.6}",
     "noc: {link_bytes_per_cycle: 24, hop_pj_per_byte: 5.6, routing: yx}",
     "noc.routing: 'yx'"),
    ("  ports:\n    - {x: 0, y: 0}\n    - {x: 1, y: 1}\n", "  ports: []\n",
     "at least one DRAM port"),
    ("mesh: {cols: 2, rows: 2}", "mesh: {cols: 2, rows: 2, depth: 3}", "mesh.depth: unknown"),
])
def test_bad_files_name_line_and_key(tmp_path, old, new, message) -> None:
    assert old in TINY
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]")):
        load_tiled_hardware(write(tmp_path, TINY.replace(old, new)))


def test_a_port_inside_the_mesh_is_refused(tmp_path) -> None:
    text = TINY.replace("mesh: {cols: 2, rows: 2}", "mesh: {cols: 3, rows: 3}").replace(
        "    - {x: 1, y: 1}", "    - {x: 1, y: 1}\n    - {x: 2, y: 2}")
    with pytest.raises(InputError, match=r"dram.ports\[1\]: tile \(1, 1\) is not on the"):
        load_tiled_hardware(write(tmp_path, text))


def test_unknown_name(tmp_path) -> None:
    with pytest.raises(InputError, match="not a preset"):
        load_tiled_hardware("set-99x99")


@pytest.mark.parametrize("name", TILED_PRESETS)
def test_presets_load(name: str) -> None:
    hw = load_tiled_hardware(name)
    assert hw.name == name
    assert hw.tile.core_array.macs_per_cycle == 1024
    assert hw.tile.gbuf.capacity_bytes == 1 << 20


@pytest.mark.parametrize(("layer", "extent", "cycles", "energy_pj"), [
    ("conv_2_0_a", (1, 56, 28), 6272, 1_556_840.96 + 297_935.872 + 115_605.504),
    ("conv_2_0_b", (1, 28, 56), 56448, 13_486_756.45),
    ("conv_3_0_a", (8, 28, 2), 14336, None)])
def test_a_set_tile_costs_what_the_reference_computes(layer, extent, cycles,
                                                     energy_pj) -> None:
    """One core's tile of ResNet-50 (batch 8) on set-4x4, by mipsched's core-array model:
    the reference's cycles and energy (docs/set-model.md §3.8, verified against its run)."""
    from mipsched.cost.tile import tile_cost
    from mipsched.workload.layer import Region
    from mipsched.workload.resolve import resolve_network
    wl = resolve_network("resnet50", 8, 1)
    b, h, w = extent
    cost = tile_cost(load_tiled_hardware("set-4x4").core(), wl.layers[layer],
                     wl.in_shapes(layer), Region(0, b, 0, h, 0, w), 1)
    assert cost.cycles == cycles
    if energy_pj is not None:
        assert cost.energy_pj == pytest.approx(energy_pj, rel=1e-9)


def test_hw_command_lists_shows_and_validates_tiled_machines(tmp_path) -> None:
    import json

    from typer.testing import CliRunner

    from mipsched.cli import app
    runner = CliRunner()
    listed = {h["name"]: h for h in json.loads(runner.invoke(app, ["hw", "--json"]).stdout)}
    assert listed["set-12x12"]["peak_ops_per_cycle"] == 2 * 144 * 1024
    assert "edge" in listed
    shown = runner.invoke(app, ["hw", "--show", "set-4x4"])
    assert shown.exit_code == 0 and "name: set-4x4" in shown.stdout
    bad = runner.invoke(app, ["hw", "--show", write(tmp_path, TINY.replace("cols: 2", "cols: 0"))])
    assert bad.exit_code == 2
    assert "line 2: mesh.cols: must be > 0" in bad.output and "Traceback" not in bad.output
