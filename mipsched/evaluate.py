"""Fast analytic evaluator of a tile program under a DLSA (DESIGN §3, SoMa §V-D).

Timing rules (shared/instances/README.md restates them; they reproduce the SoMa
reference's latencies exactly):
1. one DRAM channel serves the tensors in DLSA order; transfer i starts at
   max(end of transfer i-1, release_i) and takes `access_cycles`;
2. a load with Start S is released when tile S-1 ends (time 0 if S <= 0); a store when
   its producer tile ends;
3. tile p starts at max(end of tile p-1, end of every load whose first use is p, end of
   every store whose End is p);
4. latency = max(end of the last tile, end of the last transfer).
One pass over tiles and tensors: O(tiles + tensors).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from dataclasses import dataclass

from mipsched.schedule.notation import Dlsa, ScheduleError
from mipsched.schedule.tile_program import TileProgram
from mipsched.schedule.validity import check_dlsa_structure, describe_tensor


class DeadlockError(ScheduleError):
    """A transfer needed by a tile sits in the DRAM order behind one released later."""


@dataclass(frozen=True)
class Overflow:
    """The first tile whose buffer occupancy exceeds the capacity."""

    tile: int
    """Tile position (-1 = before the first tile)."""
    bytes_over: int
    occupancy_bytes: int


@dataclass(frozen=True)
class Evaluation:
    """Figures of one schedule. Units: cycles, bytes, pJ."""

    latency_cycles: int
    energy_pj: float
    edp: float
    """energy_pj x latency_cycles (pJ x cycles)."""
    utilization: float | None
    """SoMa's utilisation (paper Fig. 6, the reference's "Real Util"): Σ over layers of
    the layer's ideal time on its own unit (WorkloadTotals.unit_cycles) / latency; None
    when the program does not carry it."""
    mac_utilization: float | None
    """Network MACs / (MACs per cycle x latency): the PE array's share of busy cycles;
    None when the program carries no workload totals."""
    peak_buffer_bytes: int
    avg_buffer_bytes: float
    """Buffer occupancy weighted by tile compute time (SoMa Fig. 6)."""
    dram_bytes: int
    compute_cycles: int
    dram_cycles: int
    compute_busy: float
    """Fraction of the latency the core array computes."""
    dram_busy: float
    """Fraction of the latency DRAM transfers."""
    stall_cycles: int
    """Cycles the core array waits: latency - sum of tile cycles."""
    overflow: Overflow | None

    @property
    def fits(self) -> bool:
        """Whether the buffer never overflows."""
        return self.overflow is None


@dataclass(frozen=True)
class Timeline:
    """Start and end time of every tile and every transfer (cycles)."""

    tile_start: list[int]
    tile_end: list[int]
    transfer_start: list[int]
    transfer_end: list[int]

    @property
    def makespan(self) -> int:
        """When the last tile and the last transfer are done."""
        return max(self.tile_end[-1] if self.tile_end else 0,
                   max(self.transfer_end, default=0))


def timeline(program: TileProgram, dlsa: Dlsa) -> Timeline:
    """Replays the timing rules; raises DeadlockError naming the waiting pair."""
    release, need = release_and_need(program, dlsa.living)
    return replay(program, dlsa.order, release, need)


def release_and_need(program: TileProgram, living: Sequence[tuple[int, int]]
                     ) -> tuple[list[int], list[int]]:
    """Per DRAM tensor (by id), the tile whose end releases it (-1: time 0) and the tile
    that waits for it (a load's first use, a store's End; n: nobody)."""
    release = []
    need = []
    for (start, end), first_use, producer in zip(living, program.first_uses,
                                                 program.producers, strict=True):
        if first_use >= 0:  # a load: released by tile Start - 1, needed by its first use
            release.append(start - 1 if start > 0 else -1)
            need.append(first_use)
        else:  # a store: released by its producer, needed by tile End
            release.append(producer)
            need.append(end)
    return release, need


def replay(program: TileProgram, order: Sequence[int], release: Sequence[int],
           need: Sequence[int]) -> Timeline:
    """The timeline of the DRAM order `order` given each tensor's releasing and waiting
    tile (see release_and_need); raises DeadlockError naming the waiting pair."""
    n = program.n_tiles
    tensors = program.tensors
    cycles = program.tile_cycles
    access = program.access_cycles
    pending = [0] * (n + 1)
    for nt in need:
        pending[nt] += 1
    ready = [0] * (n + 1)
    tile_start = [0] * n
    tile_end = [0] * n
    t_start = [0] * len(tensors)
    t_end = [0] * len(tensors)
    next_tile = 0
    clock = 0
    dram_free = 0
    for i in order:
        r = release[i]
        while next_tile <= r:
            p = next_tile
            if pending[p]:
                _raise_deadlock(program, order, p, i, need)
            start = clock if clock > ready[p] else ready[p]
            tile_start[p] = start
            clock = start + cycles[p]
            tile_end[p] = clock
            next_tile += 1
        rel = tile_end[r] if r >= 0 else 0
        start = dram_free if dram_free > rel else rel
        t_start[i] = start
        dram_free = start + access[i]
        t_end[i] = dram_free
        nt = need[i]
        pending[nt] -= 1
        if dram_free > ready[nt]:
            ready[nt] = dram_free
    while next_tile < n:
        p = next_tile
        start = clock if clock > ready[p] else ready[p]
        tile_start[p] = start
        clock = start + cycles[p]
        tile_end[p] = clock
        next_tile += 1
    return Timeline(tile_start, tile_end, t_start, t_end)


def latency(program: TileProgram, dlsa: Dlsa) -> int:
    """Latency in cycles (the hot path of DLSA search)."""
    return timeline(program, dlsa).makespan


def buffer_profile(program: TileProgram, dlsa: Dlsa) -> list[int]:
    """Buffer bytes in use at t = -1, 0, ..., n-1 (index t + 1): on-chip tensors plus
    every DRAM tensor with Start <= t < End."""
    n = program.n_tiles
    diff = [0] * (n + 2)
    for size, (s, e) in zip(program.tensor_bytes, dlsa.living, strict=True):
        diff[s + 1] += size
        diff[e + 1] -= size
    return [a + b for a, b in zip(program.onchip_profile,
                                  itertools.accumulate(diff[:n + 1]), strict=True)]


def evaluate(program: TileProgram, dlsa: Dlsa, check: bool = True) -> Evaluation:
    """All figures of `dlsa` on `program`. With `check`, the DLSA's structure (a
    permutation, living durations in range, store->load precedence) is validated first."""
    if check:
        check_dlsa_structure(program, dlsa)
    lat = latency(program, dlsa)
    occupancy = buffer_profile(program, dlsa)
    peak = max(occupancy)
    overflow = None
    cap = program.buffer_capacity_bytes
    if peak > cap:
        k = next(k for k, b in enumerate(occupancy) if b > cap)
        overflow = Overflow(k - 1, occupancy[k] - cap, occupancy[k])
    compute = program.compute_cycles
    weighted = sum(map(operator.mul, occupancy[1:], program.tile_cycles))
    energy = program.energy_pj + program.static_pj_per_cycle * lat
    dram_cycles = program.dram_cycles
    return Evaluation(
        latency_cycles=lat,
        energy_pj=energy,
        edp=energy * lat,
        utilization=utilization(program, lat),
        mac_utilization=mac_utilization(program, lat),
        peak_buffer_bytes=peak,
        avg_buffer_bytes=weighted / compute if compute else 0.0,
        dram_bytes=program.dram_bytes,
        compute_cycles=compute,
        dram_cycles=dram_cycles,
        compute_busy=compute / lat if lat else 0.0,
        dram_busy=dram_cycles / lat if lat else 0.0,
        stall_cycles=lat - compute,
        overflow=overflow,
    )


def utilization(program: TileProgram, latency_cycles: int) -> float | None:
    """SoMa's utilisation: Σ of every layer's ideal time on its own unit (cycles) /
    latency; None when the program does not carry that sum."""
    totals = program.totals
    if totals is None or totals.unit_cycles is None or latency_cycles <= 0:
        return None
    return totals.unit_cycles / latency_cycles


def mac_utilization(program: TileProgram, latency_cycles: int) -> float | None:
    """Network ops (2 per MAC) / (peak ops per cycle x latency); None without totals."""
    totals = program.totals
    if totals is None or latency_cycles <= 0:
        return None
    return totals.total_ops / (totals.peak_ops_per_cycle * latency_cycles)


def _raise_deadlock(program: TileProgram, order: Sequence[int], p: int, waiting: int,
                    need: Sequence[int]) -> None:
    raise deadlock_error(program, order, p, waiting, need)


def deadlock_error(program: TileProgram, order: Sequence[int], p: int, waiting: int,
                   need: Sequence[int]) -> DeadlockError:
    """The error of a replay in which tensor `waiting` waits for tile p, which waits for a
    transfer ordered behind it (`need`: the tile waiting for each tensor)."""
    pos = {tid: k for k, tid in enumerate(order)}
    blocked = min((i for i in range(len(need)) if need[i] == p and pos[i] > pos[waiting]),
                  key=lambda i: pos[i], default=None)
    tile = program.tiles[p]
    msg = (f"deadlock: {describe_tensor(program.tensors[waiting])} waits for tile {p} "
           f"({tile.layer} #{tile.tile}) to finish")
    if blocked is not None:
        msg += (f", but tile {p} needs {describe_tensor(program.tensors[blocked])}, "
                "which is ordered after it")
    return DeadlockError(msg)
