"""Discrete-event replay of a schedule: the judge of every schedule mipsched reports.

A heap of timed events drives three resources, independently of the analytic evaluator
(`mipsched.evaluate`), so that the two check each other:
- the compute engine runs tiles in order; tile p starts once tile p-1 is done, every load
  it consumes first has arrived and every store whose End is p has left;
- one DRAM channel serves the tensors in the DLSA order; a load with Start S may begin
  once tile S-1 is done, a store once its producing tile is done;
- the buffer: when tile slot p begins (tile p starts; slot -1 at time 0), the tensors whose
  living duration ends at p are freed, those starting at p are allocated, and the on-chip
  feature maps are set to the program's bytes for p. It never exceeds the capacity.
Stops with a SimulationError on overflow, deadlock (the cycle of waits) or a load ordered
before the store of its data.
"""

from __future__ import annotations

import heapq

from mipsched.schedule.notation import Dlsa
from mipsched.schedule.tile_program import EnergyParts, TileProgram
from mipsched.sim.result import BufferStep, SimResult, SimulationError, TileRecord, TransferRecord

_TILE_END = 0
_TRANSFER_END = 1


def simulate(program: TileProgram, dlsa: Dlsa) -> SimResult:
    """Replays `dlsa` on `program`; raises SimulationError with a diagnosis when invalid."""
    return _Replay(program, dlsa).run()


def _name(program: TileProgram, i: int) -> str:
    t = program.tensors[i]
    tile = "" if t.tile is None else f" tile {t.tile}"
    return f"tensor {i} ({t.kind} of {t.layer}{tile})"


def _tile_name(program: TileProgram, p: int) -> str:
    t = program.tiles[p]
    return f"tile {p} ({t.layer} #{t.tile})"


class _Replay:
    """State of one replay; `run` executes it."""

    def __init__(self, program: TileProgram, dlsa: Dlsa) -> None:
        self.program = program
        self.dlsa = dlsa
        self.n = n = program.n_tiles
        self._check_shape()
        tensors = program.tensors
        self.release: list[int] = []  # tile whose end releases each tensor (-1: time 0)
        self.needs: list[list[int]] = [[] for _ in range(n)]
        self.allocs: list[list[int]] = [[] for _ in range(n + 1)]  # index: Start + 1
        self.frees: list[list[int]] = [[] for _ in range(n + 1)]   # index: End
        for i, (t, (start, end)) in enumerate(zip(tensors, dlsa.living, strict=True)):
            if t.is_load:
                self.release.append(start - 1 if start > 0 else -1)
                self.needs[t.first_use].append(i)
            else:
                self.release.append(t.producer)
                if end < n:
                    self.needs[end].append(i)
            self.allocs[start + 1].append(i)
            self.frees[end].append(i)
        self.stores_before: dict[int, list[int]] = {}
        for store, load in program.precedence:
            self.stores_before.setdefault(load, []).append(store)
        # the replay's progress
        n_tensors = len(tensors)
        self.events: list[tuple[int, int, int, int]] = []
        """(time, sequence number, kind, tile or tensor) of every running tile / transfer."""
        self.seq = 0
        self.tile_done = [False] * n
        self.sent = [False] * n_tensors
        self.waiting = [len(self.needs[p]) for p in range(n)]
        """Per tile, the transfers it waits for that have not arrived."""
        self.last_arrival: list[int | None] = [None] * n
        """Per tile, the transfer that arrived last of those it waits for."""
        self.transfer_start = [0] * n_tensors
        self.tile_records: list[TileRecord] = []
        self.transfers: list[TransferRecord | None] = [None] * n_tensors
        self.live: set[int] = set()
        self.live_bytes = 0
        self.steps: list[BufferStep] = []
        self.next_tile = 0
        self.next_transfer = 0
        """Position in the DRAM order of the next transfer to start."""
        self.engine_busy = self.dram_busy = False
        self.previous_end = 0
        """When the last tile ended (cycles)."""
        self.now = 0

    def _check_shape(self) -> None:
        program, dlsa = self.program, self.dlsa
        m = len(program.tensors)
        if len(dlsa.living) != m or sorted(dlsa.order) != list(range(m)):
            raise SimulationError("range", f"DLSA must order and give a living duration to "
                                           f"each of the {m} DRAM tensors exactly once")
        for i, (t, (start, end)) in enumerate(zip(program.tensors, dlsa.living, strict=True)):
            free, fixed = (start, end) if t.is_load else (end, start)
            if fixed != t.fixed or not t.lo <= free <= t.hi:
                raise SimulationError(
                    "range", f"{_name(program, i)}: living duration ({start}, {end}) outside "
                             f"its allowed range")

    def run(self) -> SimResult:
        """Runs the replay: tiles and transfers start as soon as the rules allow, event by
        event (cycles), until every tile and transfer is done or nothing can start."""
        self._buffer_step(-1)
        while True:
            self._start_ready()
            if not self.events:
                break
            self._finish_next()
        order = self.dlsa.order
        if self.next_tile < self.n or self.next_transfer < len(order):
            self._deadlock(self.next_tile, order[self.next_transfer]
                           if self.next_transfer < len(order) else None, self.sent)
        return self._result(self.now, self.tile_records,
                            [t for t in self.transfers if t is not None], self.steps)

    def _buffer_step(self, slot: int) -> None:
        """Tile slot `slot` begins (-1: time 0): frees the tensors whose living duration
        ends there, allocates those starting there, and records the bytes in use."""
        program, tensors, live = self.program, self.program.tensors, self.live
        for i in self.frees[slot] if slot >= 0 else ():
            live.discard(i)
            self.live_bytes -= tensors[i].bytes
        for i in self.allocs[slot + 1]:
            live.add(i)
            self.live_bytes += tensors[i].bytes
        onchip = program.onchip_before_first_tile if slot < 0 else program.onchip_per_tile[
            slot]
        used = onchip + self.live_bytes
        self.steps.append(BufferStep(self.now, slot, used))
        if used > program.buffer_capacity_bytes:
            self._overflow(self.now, slot, used, onchip, live)

    def _start_ready(self) -> None:
        """Starts whatever may start now: the DRAM channel, then the compute engine, until
        neither can start anything more."""
        started = True
        while started:
            transfer = self._start_transfer()
            tile = self._start_tile()
            started = transfer or tile

    def _start_transfer(self) -> bool:
        """Starts the next transfer in the DRAM order if the channel is free and the
        transfer is released; whether it started."""
        order = self.dlsa.order
        if self.dram_busy or self.next_transfer >= len(order):
            return False
        i = order[self.next_transfer]
        r = self.release[i]
        if not (r < 0 or self.tile_done[r]):
            return False
        for store in self.stores_before.get(i, ()):
            if not self.sent[store]:
                raise SimulationError(
                    "order", f"{_name(self.program, i)} is ordered before "
                             f"{_name(self.program, store)}, the store of its data")
        self.dram_busy = True
        self.transfer_start[i] = self.now
        heapq.heappush(self.events, (self.now + self.program.tensors[i].access_cycles,
                                     self.seq, _TRANSFER_END, i))
        self.seq += 1
        self.next_transfer += 1
        return True

    def _start_tile(self) -> bool:
        """Starts the next tile if the engine is free and nothing it needs is missing;
        whether it started."""
        p, now = self.next_tile, self.now
        if self.engine_busy or p >= self.n or self.waiting[p] != 0:
            return False
        tile = self.program.tiles[p]
        self._buffer_step(p)
        self.tile_records.append(TileRecord(p, tile.layer, tile.tile, now,
                                            now + tile.compute_cycles,
                                            now - self.previous_end,
                                            self.last_arrival[p] if now > self.previous_end
                                            else None))
        self.engine_busy = True
        heapq.heappush(self.events, (now + tile.compute_cycles, self.seq, _TILE_END, p))
        self.seq += 1
        self.next_tile += 1
        return True

    def _finish_next(self) -> None:
        """Advances the clock to the next event and ends its tile or transfer."""
        self.now, _, kind, k = heapq.heappop(self.events)
        if kind == _TILE_END:
            self.tile_done[k] = True
            self.engine_busy = False
            self.previous_end = self.now
            return
        self.sent[k] = True
        self.dram_busy = False
        t = self.program.tensors[k]
        self.transfers[k] = TransferRecord(k, str(t.kind), t.layer, t.tile, t.bytes,
                                           self.transfer_start[k], self.now)
        need = t.first_use if t.is_load else self.dlsa.living[k][1]
        if need < self.n:
            self.waiting[need] -= 1
            self.last_arrival[need] = k

    def _result(self, end: int, tiles: list[TileRecord], transfers: list[TransferRecord],
                steps: list[BufferStep]) -> SimResult:
        program = self.program
        latency = end
        compute = sum(t.end - t.start for t in tiles)
        dram = sum(t.end - t.start for t in transfers)
        weighted = sum(step.bytes * (nxt.time - step.time)
                       for step, nxt in zip(steps, steps[1:], strict=False))
        weighted += steps[-1].bytes * (latency - steps[-1].time)
        cycles = program.tile_cycles
        per_tile = sum(step.bytes * cycles[step.tile] for step in steps if step.tile >= 0)
        energy = _energy_by_component(program, latency)
        return SimResult(
            latency_cycles=latency,
            energy_pj=sum(energy.values()),
            energy_by_component=energy,
            peak_buffer_bytes=max(s.bytes for s in steps),
            avg_buffer_bytes=per_tile / compute if compute else 0.0,
            time_avg_buffer_bytes=weighted / latency if latency else float(steps[-1].bytes),
            compute_busy=compute / latency if latency else 0.0,
            dram_busy=dram / latency if latency else 0.0,
            stall_cycles=latency - compute,
            tiles=tiles,
            transfers=sorted(transfers, key=lambda t: t.start),
            buffer=steps,
            capacity_bytes=program.buffer_capacity_bytes,
        )

    def _overflow(self, now: int, slot: int, used: int, onchip: int, live: set[int]) -> None:
        program = self.program
        cap = program.buffer_capacity_bytes
        where = "before the first tile" if slot < 0 else f"when {_tile_name(program, slot)} starts"
        biggest = sorted(live, key=lambda i: -program.tensors[i].bytes)
        parts = [f"{_name(program, i)} {program.tensors[i].bytes} B" for i in biggest[:6]]
        more = f" and {len(biggest) - 6} more" if len(biggest) > 6 else ""
        raise SimulationError(
            "overflow", f"buffer overflow at cycle {now} {where}: {used} B in use, capacity "
                        f"{cap} B, over by {used - cap} B; live: on-chip feature maps "
                        f"{onchip} B, {', '.join(parts) or 'no DRAM tensors'}{more}")

    def _deadlock(self, tile: int, head: int | None, sent: list[bool]) -> None:
        """Names the cycle: tile -> missing transfer -> transfer at the head of the DRAM
        queue -> the later tile that releases it -> (in-order compute) -> tile."""
        program = self.program
        if tile >= self.n or head is None:
            raise SimulationError("deadlock", "deadlock: the replay stopped with work left")
        missing = [i for i in self.needs[tile] if not sent[i]]
        first = min(missing, key=self.dlsa.order.index)
        releaser = self.release[head]
        raise SimulationError(
            "deadlock",
            f"deadlock: {_tile_name(program, tile)} waits for {_name(program, first)}, which "
            f"is queued in the DRAM order behind {_name(program, head)}, which waits for "
            f"{_tile_name(program, releaser)} to finish, which runs after "
            f"{_tile_name(program, tile)}")


def _energy_by_component(program: TileProgram, latency: int) -> dict[str, float]:
    """pJ per component: MAC, core buffers, GBUF, vector unit (when the tiles carry a
    breakdown, else one 'tiles' entry), DRAM, and static power when the preset has it."""
    parts = [t.energy_parts for t in program.tiles]
    energy: dict[str, float] = {}
    if all(p is not None for p in parts):
        for name in EnergyParts._fields:
            energy[name] = sum(getattr(p, name) for p in parts)
    else:
        energy["tiles"] = sum(t.energy_pj for t in program.tiles)
    energy["dram"] = sum(t.bytes for t in program.tensors) * program.dram_energy_pj_per_byte
    if program.static_pj_per_cycle:
        energy["static"] = program.static_pj_per_cycle * latency
    return energy
