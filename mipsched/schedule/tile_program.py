"""The tile program: what lowering makes of (workload, hardware, LFA) and what the
evaluator, the simulator and the formulations read.

It is exactly the content of a `dlsa-instance` file (version 1, see docs/tile-program.md
and shared/instances/README.md): tiles in execution order with cycles and energy, on-chip
bytes per tile, DRAM tensors with their bytes and allowed living durations, store->load
precedence, plus optional `workload` totals that instances from elsewhere may omit.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from mipsched.schedule.notation import Dlsa, ScheduleError

FORMAT = "dlsa-instance"
VERSION = 1


class TensorKind(StrEnum):
    LOAD_IFMAP = "load_ifmap"
    LOAD_WEIGHT = "load_weight"
    STORE_OFMAP = "store_ofmap"


@dataclass(frozen=True, slots=True)
class Tile:
    """One compute step: tile `tile` of layer `layer`, at position `pos`."""

    pos: int
    layer_id: int
    layer: str
    tile: int
    compute_cycles: int
    energy_pj: float
    lg: int | None = None
    """Index of the tile's layer-fusion group (LG), when known (optional in files)."""


@dataclass(frozen=True, slots=True)
class DramTensor:
    """One DRAM transfer. Loads: Start in `start_range`, End fixed at last_use + 1.
    Stores: Start fixed at the producer tile, End in `end_range` (hi = no deadline)."""

    id: int
    kind: TensorKind
    layer_id: int
    layer: str
    tile: int | None
    bytes: int
    access_cycles: int
    first_use: int = -1
    last_use: int = -1
    producer: int = -1
    lo: int = 0
    """Lowest allowed Start (loads) or End (stores)."""
    hi: int = 0
    """Highest allowed Start (loads) or End (stores)."""

    @property
    def is_load(self) -> bool:
        return self.kind != TensorKind.STORE_OFMAP

    @property
    def fixed(self) -> int:
        """The fixed end of the living duration: End of a load, Start of a store."""
        return self.last_use + 1 if self.is_load else self.producer

    def living(self, free: int) -> tuple[int, int]:
        """(Start, End) given the free end (Start of a load, End of a store)."""
        return (free, self.fixed) if self.is_load else (self.fixed, free)

    def free_end(self, living: tuple[int, int]) -> int:
        return living[0] if self.is_load else living[1]


@dataclass
class WorkloadTotals:
    """Network-level figures a program made by mipsched carries (for utilisation)."""

    network: str
    batch: int
    total_macs: int
    total_ops: int
    weight_bytes: int
    peak_ops_per_cycle: int


@dataclass
class TileProgram:
    """A lowered LFA. Units: cycles, bytes, pJ."""

    name: str
    dram_bytes_per_cycle: int
    buffer_capacity_bytes: int
    dram_energy_pj_per_byte: float
    tiles: list[Tile]
    onchip_before_first_tile: int
    onchip_per_tile: list[int]
    tensors: list[DramTensor]
    precedence: list[tuple[int, int]]
    static_pj_per_cycle: float = 0.0
    totals: WorkloadTotals | None = None
    source: dict[str, Any] = field(default_factory=dict)
    solutions: dict[str, tuple[Dlsa, int, int]] = field(default_factory=dict)
    """Named DLSAs carried by an imported instance: name -> (dlsa, latency, max buffer)."""

    # --- derived figures ------------------------------------------------------------------
    @property
    def n_tiles(self) -> int:
        return len(self.tiles)

    @property
    def compute_cycles(self) -> int:
        return sum(t.compute_cycles for t in self.tiles)

    @property
    def dram_cycles(self) -> int:
        return sum(t.access_cycles for t in self.tensors)

    @property
    def dram_bytes(self) -> int:
        return sum(t.bytes for t in self.tensors)

    @property
    def ideal_cycles(self) -> int:
        """max(sum of tile cycles, sum of DRAM cycles): no DLSA of this LFA is faster."""
        return max(self.compute_cycles, self.dram_cycles)

    @property
    def energy_pj(self) -> float:
        """Tile energy plus DRAM energy; it does not depend on the DLSA (static excluded)."""
        return (sum(t.energy_pj for t in self.tiles)
                + self.dram_energy_pj_per_byte * self.dram_bytes)

    # --- JSON -----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        tensors = []
        for t in self.tensors:
            d: dict[str, Any] = {"id": t.id, "kind": str(t.kind), "layer_id": t.layer_id,
                                 "layer": t.layer, "tile": t.tile, "bytes": t.bytes,
                                 "access_cycles": t.access_cycles}
            if t.is_load:
                d.update(first_use=t.first_use, last_use=t.last_use, end=t.fixed,
                         start_range=[t.lo, t.hi])
            else:
                d.update(producer=t.producer, start=t.producer, end_range=[t.lo, t.hi])
            tensors.append(d)
        out: dict[str, Any] = {
            "format": FORMAT,
            "version": VERSION,
            "name": self.name,
            "source": self.source,
            "units": {"time": "cycles (1 GHz)", "size": "bytes", "energy": "pJ"},
            "hardware": {"dram_bytes_per_cycle": self.dram_bytes_per_cycle,
                         "buffer_capacity_bytes": self.buffer_capacity_bytes,
                         "dram_energy_pj_per_byte": self.dram_energy_pj_per_byte,
                         "static_pj_per_cycle": self.static_pj_per_cycle},
            "tiles": [dataclasses.asdict(t) for t in self.tiles],
            "onchip_bytes": {"before_first_tile": self.onchip_before_first_tile,
                             "per_tile": list(self.onchip_per_tile)},
            "dram_tensors": tensors,
            "precedence": [list(p) for p in self.precedence],
            "ideal": {"compute_cycles": self.compute_cycles, "dram_cycles": self.dram_cycles},
            "energy_pj": self.energy_pj,
        }
        if self.totals is not None:
            out["workload"] = dataclasses.asdict(self.totals)
        for key, (dlsa, latency, peak) in self.solutions.items():
            out[key] = {**dlsa.to_json(), "latency_cycles": latency, "max_buffer_bytes": peak}
        return out

    def save(self, path: Path) -> None:
        write_json_atomic(path, self.to_json())

    @staticmethod
    def from_json(data: Any) -> TileProgram:
        """Reads a `dlsa-instance` v1 object; raises ScheduleError naming the bad key."""
        return _parse_program(data)

    @staticmethod
    def load(path: Path) -> TileProgram:
        return TileProgram.from_json(read_json(path))


def read_json(path: Path) -> Any:
    """Parsed JSON of `path`; ScheduleError with the line on malformed input."""
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise ScheduleError(f"{path}: cannot read ({err.strerror})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ScheduleError(f"{path}: invalid JSON at line {err.lineno}: {err.msg}") from None


def write_json_atomic(path: Path, data: Any) -> None:
    """Writes JSON to `path` via a temporary file, so no partial file is ever left."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def _parse_program(data: Any) -> TileProgram:
    if not isinstance(data, dict):
        raise ScheduleError("tile program: expected a JSON object")
    if data.get("format") != FORMAT:
        raise ScheduleError(f"tile program: 'format' must be {FORMAT!r}, got "
                            f"{data.get('format')!r}")
    if data.get("version") != VERSION:
        raise ScheduleError(f"tile program: unsupported version {data.get('version')!r}")
    where = "tile program"
    try:
        hw = data["hardware"]
        bpc = int(hw["dram_bytes_per_cycle"])
        tiles = []
        for p, t in enumerate(data["tiles"]):
            where = f"tiles[{p}]"
            if int(t["pos"]) != p:
                raise ScheduleError(f"{where}: pos must be {p}, got {t['pos']}")
            lg = t.get("lg")
            tiles.append(Tile(p, int(t["layer_id"]), str(t["layer"]), int(t["tile"]),
                              int(t["compute_cycles"]), float(t["energy_pj"]),
                              None if lg is None else int(lg)))
        n = len(tiles)
        where = "onchip_bytes"
        onchip = data["onchip_bytes"]
        per_tile = [int(x) for x in onchip["per_tile"]]
        if len(per_tile) != n:
            raise ScheduleError(f"onchip_bytes.per_tile: {len(per_tile)} entries for {n} tiles")
        tensors = []
        for i, d in enumerate(data["dram_tensors"]):
            where = f"dram_tensors[{i}]"
            tensors.append(_parse_tensor(i, d, bpc, n, where))
        where = "precedence"
        precedence = [(int(a), int(b)) for a, b in data.get("precedence", [])]
        for a, b in precedence:
            if not (0 <= a < len(tensors) and 0 <= b < len(tensors)):
                raise ScheduleError(f"precedence: pair [{a}, {b}] names an unknown tensor")
        totals = None
        if "workload" in data:
            where = "workload"
            totals = WorkloadTotals(**data["workload"])
        program = TileProgram(
            name=str(data.get("name", "instance")),
            dram_bytes_per_cycle=bpc,
            buffer_capacity_bytes=int(hw["buffer_capacity_bytes"]),
            dram_energy_pj_per_byte=float(hw["dram_energy_pj_per_byte"]),
            tiles=tiles,
            onchip_before_first_tile=int(onchip.get("before_first_tile", 0)),
            onchip_per_tile=per_tile,
            tensors=tensors,
            precedence=precedence,
            static_pj_per_cycle=float(hw.get("static_pj_per_cycle", 0.0)),
            totals=totals,
            source=dict(data.get("source", {})),
        )
        for key in ("default", "reference"):
            if key in data:
                where = key
                sol = data[key]
                program.solutions[key] = (Dlsa.from_json(sol), int(sol["latency_cycles"]),
                                          int(sol["max_buffer_bytes"]))
    except KeyError as err:
        raise ScheduleError(f"{where}: missing key {err.args[0]!r}") from None
    except (TypeError, ValueError) as err:
        if isinstance(err, ScheduleError):
            raise
        raise ScheduleError(f"{where}: malformed value ({err})") from None
    return program


def _parse_tensor(i: int, d: dict, bpc: int, n: int, where: str) -> DramTensor:
    if int(d["id"]) != i:
        raise ScheduleError(f"{where}: id must be {i}, got {d['id']}")
    kind = TensorKind(d["kind"])
    size = int(d["bytes"])
    cycles = int(d.get("access_cycles", math.ceil(size / bpc)))
    common = dict(id=i, kind=kind, layer_id=int(d["layer_id"]), layer=str(d["layer"]),
                  tile=None if d.get("tile") is None else int(d["tile"]), bytes=size,
                  access_cycles=cycles)
    if kind == TensorKind.STORE_OFMAP:
        lo, hi = (int(x) for x in d["end_range"])
        producer = int(d["producer"])
        if not (0 <= producer < n and producer < lo <= hi <= n):
            raise ScheduleError(f"{where}: producer {producer} / end_range [{lo}, {hi}] "
                                f"out of range for {n} tiles")
        return DramTensor(**common, producer=producer, lo=lo, hi=hi)
    lo, hi = (int(x) for x in d["start_range"])
    first, last = int(d["first_use"]), int(d["last_use"])
    if not (0 <= first <= last < n and -1 <= lo <= hi <= first):
        raise ScheduleError(f"{where}: first_use {first} / last_use {last} / start_range "
                            f"[{lo}, {hi}] out of range for {n} tiles")
    return DramTensor(**common, first_use=first, last_use=last, lo=lo, hi=hi)
