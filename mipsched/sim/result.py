"""What a simulation reports, and how it fails."""

from __future__ import annotations

from dataclasses import dataclass, field

from mipsched.schedule.notation import ScheduleError


class SimulationError(ScheduleError):
    """The simulator rejected the schedule; `kind` says why (overflow, deadlock, order,
    range) and the message gives the full diagnosis."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class TransferRecord:
    """One DRAM transfer as it happened (cycles)."""

    tensor: int
    kind: str
    layer: str
    tile: int | None
    bytes: int
    start: int
    end: int


@dataclass(frozen=True)
class TileRecord:
    """One tile as it ran (cycles). `stall` cycles passed between the previous tile's end
    and this start, waiting for `waited_for` (the transfer that finished last)."""

    pos: int
    layer: str
    tile: int
    start: int
    end: int
    stall: int
    waited_for: int | None


@dataclass(frozen=True)
class BufferStep:
    """From `time` on, `bytes` are in use (until the next step)."""

    time: int
    tile: int
    """The tile slot that begins here (-1: before the first tile)."""
    bytes: int


@dataclass
class SimResult:
    """Figures of one replayed schedule. Units: cycles, bytes, pJ."""

    latency_cycles: int
    energy_pj: float
    energy_by_component: dict[str, float]
    peak_buffer_bytes: int
    avg_buffer_bytes: float
    """SoMa's average (Fig. 6): each tile slot's occupancy weighted by the tile's compute
    cycles, as the evaluator's."""
    time_avg_buffer_bytes: float
    """Occupancy weighted by time over the whole latency, stalls included."""
    compute_busy: float
    dram_busy: float
    stall_cycles: int
    tiles: list[TileRecord] = field(repr=False)
    transfers: list[TransferRecord] = field(repr=False)
    buffer: list[BufferStep] = field(repr=False)
    capacity_bytes: int = 0

    @property
    def stalls(self) -> list[TileRecord]:
        """Tiles that waited, with what they waited for."""
        return [t for t in self.tiles if t.stall > 0]
