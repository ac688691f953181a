"""Hardware model: SoMa's accelerator template (paper Fig. 1).

DRAM -> one shared global buffer (GBUF) -> a core array of PEs, each PE a vector x lane
MAC array with L0 buffers (AL0 activations, WL0 weights, OL0 outputs, OL1 output
accumulation), plus a vector unit for pooling / element-wise / normalisation ops.
Units: bytes, cycles (at `frequency_hz`), pJ; every number's unit is in its field's
metadata (`strict.spec`), so messages about a bad value can name it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from mipsched import strict
from mipsched.strict import spec

#: The largest integer a hardware description may hold: larger ones describe no real
#: accelerator and overflow the 64-bit arithmetic of the CP-SAT models.
MAX_INT = 2**40


@dataclass(frozen=True)
class Dram:
    bytes_per_cycle: int = field(metadata=spec("bytes per cycle", gt=0, le=MAX_INT))
    """DRAM bandwidth, bytes per cycle (one channel, loads and stores share it)."""
    energy_pj_per_byte: float = field(metadata=spec("pJ per byte", ge=0))
    """Energy of moving one byte between DRAM and GBUF, pJ."""


@dataclass(frozen=True)
class GlobalBuffer:
    capacity_bytes: int = field(metadata=spec("bytes", gt=0, le=MAX_INT))
    """Shared on-chip buffer capacity, bytes."""
    read_bytes_per_cycle: int = field(metadata=spec("bytes per cycle", gt=0, le=MAX_INT))
    """GBUF read bandwidth towards the core array, bytes per cycle."""
    read_pj_per_byte: float = field(metadata=spec("pJ per byte", ge=0))
    write_pj_per_byte: float = field(metadata=spec("pJ per byte", ge=0))


@dataclass(frozen=True)
class LocalBuffer:
    capacity_bytes: int = field(metadata=spec("bytes", gt=0, le=MAX_INT))
    """Capacity of this L0/L1 buffer in each PE, bytes."""
    read_pj_per_byte: float = field(metadata=spec("pJ per byte", ge=0))
    write_pj_per_byte: float = field(metadata=spec("pJ per byte", ge=0))


@dataclass(frozen=True)
class CoreArray:
    pe_rows: int = field(metadata=spec("PEs", gt=0, le=MAX_INT))
    pe_cols: int = field(metadata=spec("PEs", gt=0, le=MAX_INT))
    vector: int = field(metadata=spec("MACs", gt=0, le=MAX_INT))
    """MACs along the reduction (input-channel) axis inside one PE."""
    lanes: int = field(metadata=spec("output channels", gt=0, le=MAX_INT))
    """Parallel output channels inside one PE."""
    mac_pj: float = field(metadata=spec("pJ per MAC", ge=0))
    """Energy of one 8-bit MAC, pJ."""
    al0: LocalBuffer
    wl0: LocalBuffer
    ol0: LocalBuffer
    ol1: LocalBuffer

    @property
    def pes(self) -> int:
        """PEs in the array: pe_rows x pe_cols."""
        return self.pe_rows * self.pe_cols

    @property
    def macs_per_cycle(self) -> int:
        """Peak MACs per cycle of the array: PEs x vector x lanes."""
        return self.pes * self.vector * self.lanes


@dataclass(frozen=True)
class VectorUnit:
    ops_per_cycle: int = field(metadata=spec("ops per cycle", gt=0, le=MAX_INT))
    pj_per_op: float = field(metadata=spec("pJ per op", ge=0))


@dataclass(frozen=True)
class Hardware:
    """One accelerator configuration."""

    name: str
    dram: Dram
    gbuf: GlobalBuffer
    core_array: CoreArray
    vector_unit: VectorUnit
    frequency_hz: float = field(default=1e9, metadata=spec("Hz", gt=0))
    static_pj_per_cycle: float = field(default=0.0, metadata=spec("pJ per cycle", ge=0))
    """Static (leakage) energy per cycle of latency, pJ; 0 in SoMa's presets."""
    description: str = ""

    @property
    def peak_ops_per_cycle(self) -> int:
        """Peak operations per cycle counted as 2 per MAC (SoMa's TOPS figure)."""
        return 2 * self.core_array.macs_per_cycle

    def digest(self) -> str:
        """Stable hash of every number of the configuration (for certificates)."""
        blob = json.dumps(strict.to_dict(self), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]
