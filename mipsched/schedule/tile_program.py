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
import operator
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

from mipsched import strict
from mipsched.atomic import write_json_atomic
from mipsched.jsonread import JsonObject, as_int
from mipsched.schedule.notation import Dlsa, ScheduleError

FORMAT = "dlsa-instance"
VERSION = 1
#: Solutions stored at the top level, as the SoMa exports do; others go under "solutions".
INSTANCE_SOLUTIONS = ("default", "reference")


class TensorKind(StrEnum):
    LOAD_IFMAP = "load_ifmap"
    LOAD_WEIGHT = "load_weight"
    STORE_OFMAP = "store_ofmap"


class EnergyParts(NamedTuple):
    """Where a tile's energy goes (pJ); they add up to the tile's energy_pj."""

    mac: float
    core_buffers: float
    """L0 / L1 buffers inside the PEs and the links between PEs."""
    gbuf: float
    vector: float


class Tile(NamedTuple):
    """One compute step: tile `tile` of layer `layer`, at position `pos`."""

    pos: int
    layer_id: int
    layer: str
    tile: int
    compute_cycles: int
    energy_pj: float
    lg: int | None = None
    """Index of the tile's layer-fusion group (LG), when known (optional in files)."""
    flg: int | None = None
    """Index of the tile's fine-grained fusion group (FLG), when known."""
    energy_parts: EnergyParts | None = None
    """Breakdown of energy_pj, when known (optional in files)."""


class DramTensor(NamedTuple):
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
        """Whether the tensor is loaded (an ifmap or weight load), not stored."""
        return self.kind != TensorKind.STORE_OFMAP

    @property
    def fixed(self) -> int:
        """The fixed end of the living duration: End of a load, Start of a store."""
        return self.last_use + 1 if self.is_load else self.producer

    def living(self, free: int) -> tuple[int, int]:
        """(Start, End) given the free end (Start of a load, End of a store)."""
        return (free, self.fixed) if self.is_load else (self.fixed, free)

    def free_end(self, living: tuple[int, int]) -> int:
        """The end of `living` a DLSA may choose: Start of a load, End of a store."""
        return living[0] if self.is_load else living[1]


@dataclass
class WorkloadTotals:
    """Network-level figures a program made by mipsched carries (for utilisation)."""

    network: str
    batch: int = field(metadata={"min": 1})
    total_macs: int = field(metadata={"min": 0})
    total_ops: int = field(metadata={"min": 0})
    """Operations counted for utilisation (2 per MAC)."""
    weight_bytes: int = field(metadata={"min": 0})
    peak_ops_per_cycle: int = field(metadata={"gt": 0})
    unit_cycles: float | None = field(default=None, metadata={"min": 0})
    """SoMa's "dream time" (cycles): Σ over layers of the layer's time on its own unit at
    full rate, MACs / MACs per cycle on the PE array, vector ops / vector ops per cycle on
    the vector unit. None in programs written before it was recorded."""


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

    # --- derived figures (cached: tiles and tensors are not changed after lowering) ------
    @property
    def n_tiles(self) -> int:
        """Number of tiles."""
        return len(self.tiles)

    @cached_property
    def compute_cycles(self) -> int:
        """Sum of the tiles' compute cycles."""
        return sum(self.tile_cycles)

    @cached_property
    def dram_cycles(self) -> int:
        """Sum of the DRAM tensors' access cycles."""
        return sum(self.access_cycles)

    @cached_property
    def dram_bytes(self) -> int:
        """Sum of the DRAM tensors' bytes."""
        return sum(self.tensor_bytes)

    @cached_property
    def tile_cycles(self) -> list[int]:
        """compute_cycles of every tile, in order (cached for the evaluator)."""
        return list(map(operator.attrgetter("compute_cycles"), self.tiles))

    @cached_property
    def tensor_bytes(self) -> list[int]:
        """bytes of every DRAM tensor, by id."""
        return list(map(operator.attrgetter("bytes"), self.tensors))

    @cached_property
    def onchip_profile(self) -> list[int]:
        """On-chip bytes at t = -1, 0, ..., n-1 (index t + 1)."""
        return [self.onchip_before_first_tile, *self.onchip_per_tile]

    @cached_property
    def access_cycles(self) -> list[int]:
        """access_cycles of every DRAM tensor, by id."""
        return list(map(operator.attrgetter("access_cycles"), self.tensors))

    @cached_property
    def first_uses(self) -> list[int]:
        """First consuming tile of every load (-1 for stores), by tensor id."""
        store = TensorKind.STORE_OFMAP
        return [-1 if t.kind == store else t.first_use for t in self.tensors]

    @cached_property
    def producers(self) -> list[int]:
        """Producing tile of every store (-1 for loads), by tensor id."""
        store = TensorKind.STORE_OFMAP
        return [t.producer if t.kind == store else -1 for t in self.tensors]

    @property
    def ideal_cycles(self) -> int:
        """max(sum of tile cycles, sum of DRAM cycles): no DLSA of this LFA is faster."""
        return max(self.compute_cycles, self.dram_cycles)

    @cached_property
    def energy_pj(self) -> float:
        """Tile energy plus DRAM energy; it does not depend on the DLSA (static excluded)."""
        return (sum(map(operator.attrgetter("energy_pj"), self.tiles))
                + self.dram_energy_pj_per_byte * self.dram_bytes)

    # --- JSON -----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The program as a `dlsa-instance` v1 object (docs/tile-program.md; units:
        cycles, bytes, pJ)."""
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
            "tiles": [_tile_json(t) for t in self.tiles],
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
            entry = {**dlsa.to_json(), "latency_cycles": latency, "max_buffer_bytes": peak}
            if key in INSTANCE_SOLUTIONS:
                out[key] = entry
            else:
                out.setdefault("solutions", {})[key] = entry
        return out

    def save(self, path: Path) -> None:
        """Writes the program as JSON to `path` (whole or not at all)."""
        write_json_atomic(path, self.to_json())

    @staticmethod
    def from_json(data: Any) -> TileProgram:
        """Reads a `dlsa-instance` v1 object; raises ScheduleError naming the bad key."""
        return _parse_program(data)

    @staticmethod
    def load(path: Path) -> TileProgram:
        """Reads a `dlsa-instance` v1 file; raises ScheduleError naming the bad key."""
        return TileProgram.from_json(read_json(path))


def _tile_json(t: Tile) -> dict[str, Any]:
    out = t._asdict()
    for key in ("lg", "flg", "energy_parts"):
        if out[key] is None:
            del out[key]
    if t.energy_parts is not None:
        out["energy_parts"] = t.energy_parts._asdict()
    return out


def read_json(path: Path) -> Any:
    """Parsed JSON of `path`; ScheduleError with the line on malformed input."""
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise ScheduleError(f"{path}: cannot read ({err.strerror})") from None
    except UnicodeDecodeError:
        raise ScheduleError(f"{path}: not a UTF-8 text file") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ScheduleError(f"{path}: invalid JSON at line {err.lineno}: {err.msg}") from None
    except RecursionError:
        raise ScheduleError(f"{path}: JSON nested too deeply") from None
    except ValueError as err:  # an integer of more digits than Python converts
        raise ScheduleError(f"{path}: invalid JSON: {err}") from None


def _parse_program(data: Any) -> TileProgram:
    root = JsonObject(data, "")
    if root.raw("format", None) != FORMAT:
        raise ScheduleError(f"tile program: 'format' must be {FORMAT!r}, got "
                            f"{root.raw('format', None)!r}")
    if root.raw("version", None) != VERSION:
        raise ScheduleError(f"tile program: unsupported version {root.raw('version', None)!r}")
    hw = root.obj("hardware")
    bpc = hw.int("dram_bytes_per_cycle", lo=1)
    tiles = []
    for p, raw in enumerate(root.list("tiles")):
        t = JsonObject(raw, f"tiles[{p}]")
        if t.int("pos") != p:
            raise ScheduleError(f"tiles[{p}].pos: must be {p}, got {t.int('pos')}")
        parts = None
        if t.has("energy_parts"):
            e = t.obj("energy_parts")
            parts = EnergyParts(*(e.num(k, lo=0) for k in EnergyParts._fields))
        tiles.append(Tile(p, t.int("layer_id"), t.str("layer"), t.int("tile", lo=0),
                          t.int("compute_cycles", lo=0), t.num("energy_pj", lo=0),
                          t.opt_int("lg", lo=0), t.opt_int("flg", lo=0), parts))
    n = len(tiles)
    onchip = root.obj("onchip_bytes")
    per_tile = onchip.int_list("per_tile", lo=0, length=n)
    tensors = [_parse_tensor(i, JsonObject(raw, f"dram_tensors[{i}]"), bpc, n)
               for i, raw in enumerate(root.list("dram_tensors"))]
    precedence = []
    for k, pair in enumerate(root.list("precedence", [])):
        if not isinstance(pair, list) or len(pair) != 2:
            raise ScheduleError(f"precedence[{k}]: expected a [store, load] pair")
        a, b = (as_int(x, f"precedence[{k}]", 0) for x in pair)
        if not (a < len(tensors) and b < len(tensors)):
            raise ScheduleError(f"precedence[{k}]: pair [{a}, {b}] names an unknown tensor")
        precedence.append((a, b))
    totals = None
    if root.has("workload"):
        totals = strict.build(WorkloadTotals, root.raw("workload"), "workload")
    program = TileProgram(
        name=root.str("name", "instance"),
        dram_bytes_per_cycle=bpc,
        buffer_capacity_bytes=hw.int("buffer_capacity_bytes", lo=0),
        dram_energy_pj_per_byte=hw.num("dram_energy_pj_per_byte", lo=0),
        tiles=tiles,
        onchip_before_first_tile=onchip.int("before_first_tile", lo=0, default=0),
        onchip_per_tile=per_tile,
        tensors=tensors,
        precedence=precedence,
        static_pj_per_cycle=hw.num("static_pj_per_cycle", lo=0, default=0.0),
        totals=totals,
        source=dict(root.obj("source", {}).data),
    )
    named = [(key, root.obj(key)) for key in INSTANCE_SOLUTIONS if root.has(key)]
    if root.has("solutions"):
        extra = root.obj("solutions")
        named += [(key, extra.obj(key)) for key in extra.data]
    for key, sol in named:
        program.solutions[key] = (Dlsa.from_json(sol.data, sol.path),
                                  sol.int("latency_cycles", lo=0),
                                  sol.int("max_buffer_bytes", lo=0))
    return program


def _parse_tensor(i: int, d: JsonObject, bpc: int, n: int) -> DramTensor:
    if d.int("id") != i:
        raise ScheduleError(f"{d.path}.id: must be {i}, got {d.int('id')}")
    kind_name = d.str("kind")
    if kind_name not in TensorKind.__members__.values():
        raise ScheduleError(f"{d.path}.kind: must be one of "
                            f"{', '.join(TensorKind)}, got {kind_name!r}")
    kind = TensorKind(kind_name)
    size = d.int("bytes", lo=0)
    cycles = (d.int("access_cycles", lo=0) if d.has("access_cycles")
              else math.ceil(size / bpc))
    common = dict(id=i, kind=kind, layer_id=d.int("layer_id"), layer=d.str("layer"),
                  tile=d.opt_int("tile", lo=0), bytes=size, access_cycles=cycles)
    if kind == TensorKind.STORE_OFMAP:
        lo, hi = d.int_list("end_range", length=2)
        producer = d.int("producer")
        if not (0 <= producer < n and producer < lo <= hi <= n):
            raise ScheduleError(f"{d.path}: producer {producer} / end_range [{lo}, {hi}] "
                                f"out of range for {n} tiles")
        return DramTensor(**common, producer=producer, lo=lo, hi=hi)
    lo, hi = d.int_list("start_range", length=2)
    first, last = d.int("first_use"), d.int("last_use")
    if not (0 <= first <= last < n and -1 <= lo <= hi <= first):
        raise ScheduleError(f"{d.path}: first_use {first} / last_use {last} / start_range "
                            f"[{lo}, {hi}] out of range for {n} tiles")
    return DramTensor(**common, first_use=first, last_use=last, lo=lo, hi=hi)
