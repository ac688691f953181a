"""Constructed DLSAs, where every DLSA search starts: the tight one (least buffer), the
default one (double buffering) when it fits, the greedy prefetching ones grown from
either (in release or deadline order), and the fastest of them (`constructed_dlsa`).

The prefetching DLSA: from a DLSA that fits (normally the default), every load, in order
of its first use, moves its Start earlier one tile at a time while the buffer still has
room for it on that tile; then every store, in order of its producer, moves its End later
the same way. The DRAM order is then sorted by release tile (a store's producer; a load's
Start - 1, but never before the producer of data it reloads), stores before loads on a
tie, then by the tile that needs the transfer. Sorting by release can never deadlock: a
transfer j behind i has release_i <= release_j < need_j. Occupancy never exceeds the
capacity on a tile where the starting DLSA fitted, so the result fits whenever the start
did. Earlier-needed data gets buffer space first (as in Belady's rule), which keeps the
DRAM channel busy while compute-bound stretches run.

The deadline order: the same living durations served earliest-deadline-first. Replaying
the timing rules, whenever DRAM is free it takes, of the transfers already released, the
one whose waiting tile comes first (a store's also the first use of any reload of its
data). Release order serves a store as soon as its tile ends even when loads needed
sooner wait behind it; on ResNet-50 / edge / b16 the prefetching DLSA's release order
stalls 774,392 cycles and its deadline order 273,116. Neither order is always the
faster, so `fastest_order` keeps the faster.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Sequence

import numpy as np

from mipsched.evaluate import Evaluation, buffer_profile, evaluate, latency, release_and_need
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.notation import Dlsa
from mipsched.schedule.tile_program import TileProgram


def tight_dlsa(program: TileProgram) -> Dlsa:
    """Every load starting at its first use, every store ending right after its producer:
    the least buffer any DLSA holds on every tile, so an LFA has a DLSA that fits if and
    only if this one fits."""
    living = [t.living(t.hi if t.is_load else t.lo) for t in program.tensors]
    return Dlsa(release_order(program, living), tuple(living))


def fitting_start(program: TileProgram) -> tuple[Dlsa, list[int]] | None:
    """The DLSA to grow a prefetching one from: the default DLSA if it fits the buffer,
    else the tight one if only that fits, else None (no DLSA fits); with its buffer
    occupancy (bytes per tile, index tile + 1)."""
    capacity = program.buffer_capacity_bytes
    start = default_dlsa(program)
    occupancy = buffer_profile(program, start)
    if max(occupancy) > capacity:
        start = tight_dlsa(program)
        occupancy = buffer_profile(program, start)
        if max(occupancy) > capacity:
            return None
    return start, occupancy


def prefetch_dlsa(program: TileProgram, start: Dlsa,
                  occupancy: list[int] | None = None) -> Dlsa:
    """The greedy prefetching DLSA grown from `start` (which must fit the buffer);
    `occupancy`: buffer_profile(program, start) if the caller has it (bytes per tile,
    index tile + 1)."""
    tensors = program.tensors
    n = program.n_tiles
    capacity = program.buffer_capacity_bytes
    if occupancy is None:  # index tile + 1; index 0 = before tile 0
        occupancy = buffer_profile(program, start)
    room = capacity - np.asarray(occupancy, dtype=np.int64)  # free bytes per tile + 1
    living = list(start.living)
    reloaded_after = _reloaded_after(program)
    loads = sorted((i for i, t in enumerate(tensors) if t.is_load),
                   key=lambda i: (tensors[i].first_use, i))
    for i in loads:  # Start moves down over tiles with room, to the first without
        t = tensors[i]
        begin, end = living[i]
        earliest = max(t.lo, reloaded_after.get(i, -2) + 1)
        if begin <= earliest:
            continue
        full = np.flatnonzero(room[earliest + 1:begin + 1] < t.bytes)
        new_begin = earliest + 1 + int(full[-1]) if full.size else earliest
        room[new_begin + 1:begin + 1] -= t.bytes
        living[i] = (new_begin, end)

    stores = sorted((i for i, t in enumerate(tensors) if not t.is_load),
                    key=lambda i: (tensors[i].producer, i))
    for i in stores:  # End moves up over tiles with room, to the first without
        t = tensors[i]
        begin, end = living[i]
        latest = min(t.hi, n)
        if end >= latest:
            continue
        full = np.flatnonzero(room[end + 1:latest + 1] < t.bytes)
        new_end = end + int(full[0]) if full.size else latest
        room[end + 1:new_end + 1] -= t.bytes
        living[i] = (begin, new_end)
    return Dlsa(release_order(program, living, reloaded_after), tuple(living))


def release_order(program: TileProgram, living: list[tuple[int, int]],
                  reloaded_after: dict[int, int] | None = None) -> tuple[int, ...]:
    """The DRAM order by release tile (never deadlocks), stores first on a tie, then by the
    tile that needs the transfer; a load is never put before a store of its data.
    `reloaded_after`: _reloaded_after(program) if the caller has it."""
    tensors = program.tensors
    if reloaded_after is None:
        reloaded_after = _reloaded_after(program)

    def sort_key(i: int) -> tuple[int, bool, int, int]:
        t = tensors[i]
        begin, end = living[i]
        if t.is_load:
            release = max(begin - 1 if begin > 0 else -1, reloaded_after.get(i, -1))
            return (release, True, t.first_use, i)
        return (t.producer, False, end, i)

    return tuple(sorted(range(len(tensors)), key=sort_key))


def deadline_order(program: TileProgram, living: Sequence[tuple[int, int]]) -> tuple[int, ...]:
    """The DRAM order of the living durations `living` served earliest-deadline-first (see
    the module docstring and `_deadline_replay`)."""
    return _deadline_replay(program, living)[0]


def _deadline_replay(program: TileProgram, living: Sequence[tuple[int, int]]
                     ) -> tuple[tuple[int, ...], int]:
    """The deadline order of `living` and its latency (cycles), replaying the timing rules:
    tiles run once their transfers are done; whenever DRAM is free it takes, of the
    transfers whose releasing tile has ended, the one with the earliest waiting tile, else
    the one released first. Never deadlocks: a tile's transfers are released by earlier
    tiles, and a reload waits only for stores released before it."""
    release, need = release_and_need(program, living)
    n, count = program.n_tiles, len(release)
    cycles, access = program.tile_cycles, program.access_cycles
    deadline, waits_for, reloads = _precedence(program, need)
    by_release = sorted(range(count), key=lambda i: release[i])
    pending = np.bincount(np.asarray(need, dtype=np.int64), minlength=n + 1).tolist()  # per tile
    ready = [0] * (n + 1)  # cycle the tile's last transfer is done
    tile_end = [0] * n
    served: list[int] = []
    released: list[tuple[int, int, int]] = []  # heaps of (release cycle, deadline, id)
    startable: list[tuple[int, int, int]] = []  # and of (deadline, release cycle, id)
    next_release = next_tile = clock = dram_free = 0

    def run_tiles_before(moment: float) -> None:
        """Runs the tiles whose transfers are served that start before `moment`, then
        queues the transfers they release."""
        nonlocal next_tile, clock, next_release
        while next_tile < n and not pending[next_tile] \
                and max(clock, ready[next_tile]) < moment:
            clock = max(clock, ready[next_tile]) + cycles[next_tile]
            tile_end[next_tile] = clock
            next_tile += 1
        while next_release < count and release[by_release[next_release]] < next_tile:
            queue(by_release[next_release])
            next_release += 1

    def queue(i: int) -> None:
        if not waits_for[i]:
            r = release[i]
            heapq.heappush(released, (tile_end[r] if r >= 0 else 0, deadline[i], i))

    while len(served) < count:
        run_tiles_before(dram_free)
        if not released and not startable:  # the next tile's transfers are all served
            run_tiles_before(max(clock, ready[next_tile]) + 1)
            continue
        # when DRAM starts the next transfer
        moment = dram_free if startable else max(dram_free, released[0][0])
        run_tiles_before(moment)
        while released and released[0][0] <= moment:
            at, due, i = heapq.heappop(released)
            heapq.heappush(startable, (due, at, i))
        _, at, i = heapq.heappop(startable)
        dram_free = max(dram_free, at) + access[i]
        served.append(i)
        pending[need[i]] -= 1
        ready[need[i]] = max(ready[need[i]], dram_free)
        for load in reloads[i]:
            waits_for[load] -= 1
            if release[load] < next_tile:
                queue(load)
    run_tiles_before(math.inf)  # the tiles after the last transfer's waiting tile
    return tuple(served), max(clock, dram_free)


def _precedence(program: TileProgram, need: list[int]
                ) -> tuple[list[int], list[int], list[list[int]]]:
    """Per DRAM tensor: its deadline (the tile waiting for it, for a store also the first
    use of any reload of its data), how many stores it waits for (a reload), and the
    reloads waiting for it (a store)."""
    deadline = list(need)
    waits_for = [0] * len(need)
    reloads: list[list[int]] = [[] for _ in need]
    for store, load in program.precedence:
        deadline[store] = min(deadline[store], need[load])
        waits_for[load] += 1
        reloads[store].append(load)
    return deadline, waits_for, reloads


def fastest_order(program: TileProgram, dlsa: Dlsa) -> tuple[Dlsa, int]:
    """`dlsa` or the same living durations in deadline order, whichever is faster, with
    its latency (cycles)."""
    own = latency(program, dlsa)
    order, other = _deadline_replay(program, dlsa.living)
    return (Dlsa(order, dlsa.living), other) if other < own else (dlsa, own)


def _reloaded_after(program: TileProgram) -> dict[int, int]:
    """Load -> the latest producer tile of data it reloads (from the store precedence)."""
    latest: dict[int, int] = {}
    for store, load in program.precedence:
        latest[load] = max(latest.get(load, -1), program.tensors[store].producer)
    return latest


#: Steps of prefetch_dlsa's walk (tiles a living duration is moved by) per second, on
#: the bound `prefetch_steps` gives: measured 8 to 21 million on programs of 7,000 to
#: 10,000 tiles (2 to 4 s each), so this is on the safe side.
PREFETCH_STEPS_PER_SECOND = 5e6


def prefetch_steps(program: TileProgram, start: Dlsa) -> int:
    """An upper bound on the steps prefetch_dlsa(program, start) takes (tiles moved): every
    load's Start moved to its earliest tile, every store's End to its latest."""
    return sum(max(b - t.lo, 0) if t.is_load else max(t.hi - e, 0)
               for t, (b, e) in zip(program.tensors, start.living, strict=True))


def prefetch_affordable(program: TileProgram, start: Dlsa, deadline: float | None) -> bool:
    """Whether prefetch_dlsa(program, start), which has no deadline of its own, surely
    ends before `deadline` (time.perf_counter() seconds; None: always)."""
    return deadline is None or prefetch_steps(program, start) <= \
        PREFETCH_STEPS_PER_SECOND * (deadline - time.perf_counter())


def constructed_dlsa(program: TileProgram, deadline: float | None = None
                     ) -> tuple[Dlsa, Evaluation]:
    """The fastest of the constructed DLSAs that fit (tight, default, and the prefetching
    ones grown from each, in release or deadline order, those that surely end before
    `deadline`, time.perf_counter() seconds) of a program whose tight DLSA fits, with its
    evaluation."""
    tight = tight_dlsa(program)
    starts = [tight]
    if prefetch_affordable(program, tight, deadline):
        starts.append(fastest_order(program, prefetch_dlsa(program, tight))[0])
    default = default_dlsa(program)
    default_ev = evaluate(program, default)
    if default_ev.fits:
        starts.append(default)
        if prefetch_affordable(program, default, deadline):
            starts.append(fastest_order(program, prefetch_dlsa(program, default))[0])
    evaluated = [(d, default_ev if d is default else evaluate(program, d)) for d in starts]
    return min(evaluated, key=lambda pair: pair[1].latency_cycles)
