"""The state of SoMa's stage 2 (dlsa_search): one DLSA of a fixed tile program, the
moves on it, and its latency replayed incrementally.

A move changes one tensor's place in the DRAM order or its free end. The replay (the
evaluator's timing rules, evaluate.replay) serves the DRAM order position by position and
runs each tile when a transfer waits for its end; everything before the first position a
move can affect is unchanged, so `latency` resumes there:
- an order move from k to q: min(k, q);
- a load's Start (its releasing tile): the load's position;
- a store's End (the tile that waits for it): the position at which the replay ran the
  earlier of the two tiles.
A tile's wait is read from the transfers that need it when it runs (all served before it,
else the order deadlocks). `discard` restores the timing of the last kept state after a
rejected move has been undone, so a rejected move costs one partial replay.
"""

from __future__ import annotations

import bisect

from mipsched.evaluate import buffer_profile, deadlock_error
from mipsched.schedule.notation import Dlsa
from mipsched.schedule.tile_program import TileProgram


class DlsaState:
    """A DLSA being searched, with what the operators need to stay valid. Units: tile
    positions, cycles, bytes."""

    def __init__(self, program: TileProgram, dlsa: Dlsa) -> None:
        self.program = program
        tensors = program.tensors
        self.n = n = program.n_tiles
        self.order = list(dlsa.order)
        self.pos = [0] * len(tensors)
        for k, i in enumerate(self.order):
            self.pos[i] = k
        self.living = list(dlsa.living)
        self.occupancy = buffer_profile(program, dlsa)  # index t + 1
        self.release = [self._release(i, s) for i, (s, _) in enumerate(self.living)]
        self.need = [t.first_use if t.is_load else e
                     for t, (_, e) in zip(tensors, self.living, strict=True)]
        self.needers: list[list[int]] = [[] for _ in range(n + 1)]
        for i, p in enumerate(self.need):
            self.needers[p].append(i)
        self.stores_of: dict[int, list[int]] = {}
        self.loads_of: dict[int, list[int]] = {}
        for store, load in program.precedence:
            self.stores_of.setdefault(load, []).append(store)
            self.loads_of.setdefault(store, []).append(load)
        self._cycles = program.tile_cycles
        self._access = program.access_cycles
        self.tile_end = [0] * n
        self.transfer_end = [0] * len(tensors)
        """End of the transfer at each position of the order."""
        self.tiles_before = [0] * (len(tensors) + 1)
        """Tiles run before the transfer at each position is served (the last entry:
        before the tiles after the last transfer)."""
        self._dirty = 0  # first position to replay
        self._latency = 0
        self._undo: tuple[int, int, list[int], list[int], list[int], int] | None = None
        self.latency()

    def _release(self, i: int, start: int) -> int:
        t = self.program.tensors[i]
        return (start - 1 if start > 0 else -1) if t.is_load else t.producer

    def dlsa(self) -> Dlsa:
        """The current DLSA."""
        return Dlsa(tuple(self.order), tuple(self.living))

    # --- timing -------------------------------------------------------------------------
    def latency(self) -> int:
        """Latency of the current DLSA (cycles), replayed from the first position the
        changes since the last call can affect; raises DeadlockError on a deadlock."""
        x = self._dirty
        m = len(self.order)
        if x > m:
            self._undo = None
            return self._latency
        tile_end, ends, before = self.tile_end, self.transfer_end, self.tiles_before
        p = before[x]
        self._undo = (x, p, ends[x:], tile_end[p:], before[x:], self._latency)
        order, release, pos, needers = self.order, self.release, self.pos, self.needers
        cycles, access = self._cycles, self._access
        clock = tile_end[p - 1] if p else 0
        dram = ends[x - 1] if x else 0
        for y in range(x, m):
            i = order[y]
            r = release[i]
            before[y] = p
            while p <= r:
                ready = 0
                for j in needers[p]:
                    z = pos[j]
                    if z >= y:  # tile p waits for a transfer behind the one waiting for it
                        self._deadlock(p, i)
                    if ends[z] > ready:
                        ready = ends[z]
                clock = (clock if clock > ready else ready) + cycles[p]
                tile_end[p] = clock
                p += 1
            r = tile_end[r] if r >= 0 else 0
            dram = (dram if dram > r else r) + access[i]
            ends[y] = dram
        before[m] = p
        n = self.n
        while p < n:
            ready = 0
            for j in needers[p]:
                z = ends[pos[j]]
                if z > ready:
                    ready = z
            clock = (clock if clock > ready else ready) + cycles[p]
            tile_end[p] = clock
            p += 1
        last_tile = tile_end[-1] if n else 0
        self._latency = last_tile if last_tile > dram else dram
        self._dirty = m + 1
        return self._latency

    def discard(self) -> None:
        """After the move since the last `latency` has been undone: the timing of the
        state before it, without replaying."""
        if self._undo is None:
            return
        x, p, ends, tiles, before, latency = self._undo
        self.transfer_end[x:] = ends
        self.tile_end[p:] = tiles
        self.tiles_before[x:] = before
        self._latency = latency
        self._dirty = len(self.order) + 1
        self._undo = None

    def _touch(self, x: int) -> None:
        if x < self._dirty:
            self._dirty = x

    def _touch_tile(self, p: int) -> None:
        """Marks dirty the position at which the replay ran tile p."""
        self._touch(bisect.bisect_right(self.tiles_before, p) - 1)

    def _deadlock(self, p: int, waiting: int) -> None:
        self._dirty = 0
        raise deadlock_error(self.program, self.order, p, waiting, self.need)

    # --- order moves --------------------------------------------------------------------
    def order_places(self, i: int) -> tuple[list[int], int]:
        """Valid insertion indices for tensor i in the order without it, and its index.
        The current order is valid, so every transfer ahead of i is released before the
        tile that needs i and every one behind i is needed after the tile releasing i:
        the bounds are found scanning outwards from i."""
        k = self.pos[i]
        order, release, need = self.order, self.release, self.need
        m = len(order)
        rel, needed = release[i], need[i]
        hi = k + 1
        while hi < m and release[order[hi]] < needed:
            hi += 1
        hi -= 1  # an index into the order without i
        lo = k - 1
        while lo >= 0 and need[order[lo]] > rel:
            lo -= 1
        lo += 1
        pos = self.pos
        for store in self.stores_of.get(i, ()):
            z = pos[store]
            lo = max(lo, z if z > k else z + 1)
        for load in self.loads_of.get(i, ()):
            z = pos[load]
            hi = min(hi, z - 1 if z > k else z)
        return [q for q in range(lo, hi + 1) if q != k], k

    def move(self, i: int, k: int, q: int) -> None:
        """Moves tensor i from index k to index q (an index into the order without it)."""
        order, pos = self.order, self.pos
        del order[k]
        order.insert(q, i)
        for z in range(min(k, q), max(k, q) + 1):
            pos[order[z]] = z
        self._touch(min(k, q))

    # --- living-duration moves ----------------------------------------------------------
    def valid_free_end(self, i: int, free: int) -> bool:
        """Whether tensor i may take this Start (load) / End (store) without deadlock:
        a later Start of a load must stay before every tile needing a transfer behind it,
        an earlier End of a store after every tile releasing a transfer ahead of it."""
        t = self.program.tensors[i]
        k = self.pos[i]
        if t.is_load:
            rel = free - 1 if free > 0 else -1
            if rel <= self.release[i]:
                return True
            return min(map(self.need.__getitem__, self.order[k + 1:]), default=rel + 1) > rel
        if free >= self.need[i]:
            return True
        return max(map(self.release.__getitem__, self.order[:k]), default=free - 1) < free

    def set_living(self, i: int, living: tuple[int, int]) -> bool:
        """Applies the new living duration; False (and unchanged) if it overflows. Only
        the tiles between the old and the new free end change occupancy."""
        t = self.program.tensors[i]
        old = self.living[i]
        size = t.bytes
        occ = self.occupancy
        if t.is_load:
            a, b = living[0], old[0]  # Start moves from b to a
        else:
            a, b = old[1], living[1]  # End moves from a to b
        lo, hi = (a, b) if a < b else (b, a)
        if a < b:  # the tensor lives on more tiles
            cap = self.program.buffer_capacity_bytes - size
            if any(occ[q + 1] > cap for q in range(lo, hi)):
                return False
            for q in range(lo + 1, hi + 1):
                occ[q] += size
        else:
            for q in range(lo + 1, hi + 1):
                occ[q] -= size
        self.living[i] = living
        if t.is_load:
            self.release[i] = self._release(i, living[0])
            self._touch(self.pos[i])
        else:
            needers = self.needers
            needers[old[1]].remove(i)
            needers[living[1]].append(i)
            self.need[i] = living[1]
            self._touch_tile(min(old[1], living[1]))
        return True
