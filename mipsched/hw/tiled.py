"""Tiled multi-core accelerators (SET, ISCA'23 §2 and its reference code): a cols x rows
mesh of identical tiles, each a core array with its own buffer and vector unit (the
single-core template's core: `core_array`, `gbuf` = the tile's buffer, `vector_unit`),
joined by a NoC of links between neighbouring tiles (XY routing, multicast), with DRAM
reached through ports attached to tiles on the mesh's edge.

Units: bytes, cycles (at `frequency_hz`), pJ. Tile (x, y): x = column 0..cols-1 (left
to right), y = row 0..rows-1 (top to bottom). A YAML file of this kind has a `mesh`
key; `load_tiled_hardware` reads presets (`set-4x4`, `set-12x12`) and files.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from mipsched import strict
from mipsched.hw.load import PRESETS, hardware_source, load_hardware
from mipsched.hw.model import (
    MAX_INT,
    CoreArray,
    Dram,
    GlobalBuffer,
    Hardware,
    VectorUnit,
)
from mipsched.strict import spec
from mipsched.yamlsrc import parse_yaml

MAX_MESH_SIDE = 64
"""Tiles along one side of the mesh at most (a 64 x 64 mesh is 4,096 tiles)."""
ROUTINGS = ("xy",)

TILED_PRESET_DIR = resources.files("mipsched.hw") / "tiled_presets"
#: Names of the built-in tiled presets (files tiled_presets/NAME.yaml).
TILED_PRESETS: tuple[str, ...] = tuple(sorted(
    p.name.removesuffix(".yaml") for p in TILED_PRESET_DIR.iterdir()
    if p.name.endswith(".yaml")))


@dataclass(frozen=True)
class Mesh:
    cols: int = field(metadata=spec("tiles", gt=0, le=MAX_MESH_SIDE))
    """Tiles along x (columns)."""
    rows: int = field(metadata=spec("tiles", gt=0, le=MAX_MESH_SIDE))
    """Tiles along y (rows)."""


@dataclass(frozen=True)
class Tile:
    """One core of the mesh: what the single-core template calls the accelerator, less
    DRAM (reached through the NoC and the ports)."""

    gbuf: GlobalBuffer
    """The tile's own buffer (SET: 1 MB per tile)."""
    core_array: CoreArray
    vector_unit: VectorUnit


@dataclass(frozen=True)
class Noc:
    link_bytes_per_cycle: int = field(metadata=spec("bytes per cycle", gt=0, le=MAX_INT))
    """Bandwidth of each link, each direction, bytes per cycle."""
    hop_pj_per_byte: float = field(metadata=spec("pJ per byte", ge=0))
    """Energy of moving one byte over one link (one hop), pJ."""
    routing: str = "xy"
    """Dimension-order routing: along x first, then along y."""
    multicast: bool = True
    """A tensor read by several tiles crosses each link of its routing tree once."""


@dataclass(frozen=True)
class DramPort:
    x: int = field(metadata=spec("tile column", ge=0, le=MAX_MESH_SIDE))
    y: int = field(metadata=spec("tile row", ge=0, le=MAX_MESH_SIDE))


@dataclass(frozen=True)
class TiledDram:
    bytes_per_cycle: int = field(metadata=spec("bytes per cycle", gt=0, le=MAX_INT))
    """DRAM bandwidth of all ports together, bytes per cycle (shared evenly)."""
    energy_pj_per_byte: float = field(metadata=spec("pJ per byte", ge=0))
    ports: tuple[DramPort, ...]
    """The tiles DRAM ports attach to (on the mesh's edge, each tile at most once)."""


@dataclass(frozen=True)
class TiledHardware:
    """One tiled accelerator."""

    name: str
    mesh: Mesh
    tile: Tile
    noc: Noc
    dram: TiledDram
    frequency_hz: float = field(default=1e9, metadata=spec("Hz", gt=0))
    static_pj_per_cycle: float = field(default=0.0, metadata=spec("pJ per cycle", ge=0))
    description: str = ""

    @property
    def n_tiles(self) -> int:
        """Tiles in the mesh: cols x rows."""
        return self.mesh.cols * self.mesh.rows

    @property
    def macs_per_cycle(self) -> int:
        """Peak MACs per cycle of all tiles."""
        return self.n_tiles * self.tile.core_array.macs_per_cycle

    @property
    def peak_ops_per_cycle(self) -> int:
        """Peak operations per cycle, 2 per MAC (the TOPS figure)."""
        return 2 * self.macs_per_cycle

    def core(self) -> Hardware:
        """One tile as a single-core hardware, for the per-tile cost model (its DRAM: one
        port's share of the bandwidth)."""
        share = max(1, self.dram.bytes_per_cycle // len(self.dram.ports))
        return Hardware(f"{self.name}:tile", Dram(share, self.dram.energy_pj_per_byte),
                        self.tile.gbuf, self.tile.core_array, self.tile.vector_unit,
                        self.frequency_hz, 0.0)

    def digest(self) -> str:
        """Stable hash of every number of the configuration (for certificates)."""
        blob = json.dumps(strict.to_dict(self), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def check_tiled(hw: TiledHardware) -> None:
    """The rules types and bounds cannot state; ConfigError naming the key."""
    cols, rows = hw.mesh.cols, hw.mesh.rows
    if hw.noc.routing not in ROUTINGS:
        raise strict.ConfigError(f"noc.routing: '{hw.noc.routing}' is not one of "
                                 f"{', '.join(ROUTINGS)}", ("noc", "routing"))
    if not hw.dram.ports:
        raise strict.ConfigError("dram.ports: at least one DRAM port is needed",
                                 ("dram", "ports"))
    seen: set[tuple[int, int]] = set()
    for i, p in enumerate(hw.dram.ports):
        where = ("dram", "ports", i)
        if not (p.x < cols and p.y < rows):
            raise strict.ConfigError(f"dram.ports[{i}]: tile ({p.x}, {p.y}) is outside the "
                                     f"{cols} x {rows} mesh", where)
        if p.x not in (0, cols - 1) and p.y not in (0, rows - 1):
            raise strict.ConfigError(f"dram.ports[{i}]: tile ({p.x}, {p.y}) is not on the "
                                     "mesh's edge", where)
        if (p.x, p.y) in seen:
            raise strict.ConfigError(f"dram.ports[{i}]: tile ({p.x}, {p.y}) has a port "
                                     "already", where)
        seen.add((p.x, p.y))


def load_tiled_hardware(name_or_path: str) -> TiledHardware:
    """A tiled preset name (`set-4x4`, `set-12x12`) or the path of a tiled hardware YAML
    file. Raises an InputError naming the file, the line and the bad key."""
    text, source = hardware_source(name_or_path, TILED_PRESET_DIR, TILED_PRESETS)
    doc = parse_yaml(text, source)
    try:
        hw = strict.build(TiledHardware, doc.data)
        check_tiled(hw)
    except strict.ConfigError as err:
        raise strict.ConfigError(f"{doc.where(err.keys)}: {err}", err.keys) from None
    return hw


def load_any_hardware(name_or_path: str) -> Hardware | TiledHardware:
    """A single-core or a tiled preset or file: a file describes a tiled machine when its
    top level has a `mesh` key."""
    if name_or_path in TILED_PRESETS:
        return load_tiled_hardware(name_or_path)
    if name_or_path in PRESETS:
        return load_hardware(name_or_path)
    if not Path(name_or_path).is_file():
        raise strict.ConfigError(
            f"unknown hardware '{name_or_path}': not a preset "
            f"({', '.join((*PRESETS, *TILED_PRESETS))}) and not a file")
    text, source = hardware_source(name_or_path, TILED_PRESET_DIR, TILED_PRESETS)
    data = parse_yaml(text, source).data
    if isinstance(data, dict) and "mesh" in data:
        return load_tiled_hardware(name_or_path)
    return load_hardware(name_or_path)


def tiled_text(name_or_path: str) -> str:
    """The YAML text of a tiled preset or file."""
    return hardware_source(name_or_path, TILED_PRESET_DIR, TILED_PRESETS)[0]
