"""The local descent's scan for the first neighbour that beats the current LFA, a block
of neighbours at a time, spread over forked worker processes and this one.

The descent (local_descent) takes the first neighbour, in list order, whose objective is
below the current LFA's. Timing one neighbour of ResNet-101 / edge / b16 takes about
10 ms (lowering and the greedy prefetching DLSA) and its neighbourhoods hold about 3,900,
so a scan on one CPU left the other idle for tens of seconds. Here a block of
BLOCK_PER_PROCESS neighbours per process is timed at once by the workers and this
process: each claims the next neighbour of the block not yet claimed (one shared
counter, so that no process idles while another has a queue), until the block ends or
one better than the next to claim has been found. Neighbours are claimed in list order,
so every neighbour before the first better one was timed and did not beat the current
LFA: that first one is the one a one-process scan takes, and the descent takes the same
steps with any number of workers, until its deadline cuts it.
"""

from __future__ import annotations

import multiprocessing
import signal
from multiprocessing.context import BaseContext
from multiprocessing.pool import Pool
from types import TracebackType

from mipsched.core import SearchOptions
from mipsched.formulations.bounds import placement_bound
from mipsched.heuristics.prefetch_anneal import (
    fitting_placement,
    prefetched,
    prefetched_cost,
    prefetched_dlsa,
)
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Dlsa, Lfa
from mipsched.schedule.tile_program import TileProgram

BLOCK_PER_PROCESS = 128
"""Neighbours each process times per block. A block costs sending its LFAs to the
workers and, at its end, the wait for the last neighbour still being timed. ResNet-101 /
edge / b16's descent from its split took 101, 88 and 84 s with blocks of 8, 32 and 128
neighbours per process dealt out in turn, and 75 s with 128 claimed from the shared
counter."""
MIN_TILES_FOR_WORKERS = 300
"""Tiles of the current program below which the scan stays in this process: a
neighbour of a small program is timed in well under a millisecond, less than the round
trip to a worker."""

#: A neighbour timed: its program, its greedy prefetching DLSA and that DLSA's latency.
Timed = tuple[TileProgram, Dlsa, int]


def better_than(lowerer: Lowerer, options: SearchOptions, lfa: Lfa, cost: float
                ) -> Timed | None:
    """`prefetched(lfa)` if its objective is below `cost`, else None. Skipped before its
    tile program is built when no DLSA of it fits (prefetch_anneal.fitting_placement)
    or when even `bounds.placement_bound`'s latency does not beat `cost` (every
    objective grows with the latency at a fixed program): at ResNet-101 / edge / b16's
    local optimum, 247 of the first 1,500 neighbours were lowered only to be skipped so."""
    placed = fitting_placement(lowerer, lfa)
    if placed is None:
        return None
    energy = placed.energy_pj(lowerer.hw.dram.energy_pj_per_byte)
    if prefetched_cost(lowerer, options, energy, placement_bound(placed)) >= cost:
        return None
    found = prefetched_dlsa(lowerer.lower_placed(placed))
    if found is None or prefetched_cost(lowerer, options, energy, found[2]) >= cost:
        return None
    return found


class _Claims:
    """Shared by the processes timing one block: the next block position to claim and
    the first position found better (both reset per block)."""

    def __init__(self, context: BaseContext) -> None:
        self.next_at = context.Value("q", 0)
        self.found_at = context.Value("q", _NONE)

    def reset(self) -> None:
        """Before a block: nothing claimed or found."""
        self.next_at.value, self.found_at.value = 0, _NONE

    def claim(self, size: int) -> int | None:
        """The next position of a block of `size` to time, or None: the block is done or
        a better neighbour lies before that position."""
        with self.next_at.get_lock():
            at = self.next_at.value
            self.next_at.value = at + 1
        return None if at >= size or self.found_at.value < at else at

    def found(self, at: int) -> None:
        """Position `at` beats the current LFA."""
        with self.found_at.get_lock():
            self.found_at.value = min(self.found_at.value, at)

    def end(self) -> None:
        """No process claims more of this block (the deadline or Ctrl-C came)."""
        self.found(-1)


_NONE = 2**62
"""No position (found_at before any is found); also a latency no target is reached by
(the scan checks its deadline and Ctrl-C only)."""


def _first_better(lowerer: Lowerer, options: SearchOptions, lfas: list[Lfa], cost: float,
                  until: float | None, claims: _Claims | None = None
                  ) -> tuple[int, Timed] | None:
    """(position, timing) of the first of `lfas` that beats `cost` among those this
    process times, None if none does; stops early at `until` (perf_counter) or on
    Ctrl-C. With `claims`, it times only the positions it claims (others time the rest)."""
    at = -1
    while True:
        at = at + 1 if claims is None else claims.claim(len(lfas))
        if at is None or at >= len(lfas):
            return None
        if options.should_stop(until, _NONE):
            if claims is not None:  # the workers see neither this one's Ctrl-C nor its stop
                claims.end()
            return None
        found = better_than(lowerer, options, lfas[at], cost)
        if found is not None:
            if claims is not None:
                claims.found(at)
            return at, found


class NeighbourScan:
    """Finds the first better neighbour of a block (`first_better`), in `workers`
    processes (this one included) when the program is big enough. A context manager:
    the workers are forked on entry and end on exit."""

    def __init__(self, lowerer: Lowerer, options: SearchOptions, workers: int,
                 n_tiles: int, until: float | None) -> None:
        self.lowerer, self.options, self.until = lowerer, options, until
        self.workers = workers if n_tiles >= MIN_TILES_FOR_WORKERS else 1
        self.pool: Pool | None = None
        self.claims: _Claims | None = None

    def __enter__(self) -> NeighbourScan:
        if self.workers > 1:
            context = multiprocessing.get_context("fork")
            self.claims = _Claims(context)
            self.pool = context.Pool(self.workers - 1, _init_worker,
                                     (self.lowerer, self.options, self.until, self.claims))
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()

    @property
    def block(self) -> int:
        """Neighbours timed per call of `first_better`."""
        return BLOCK_PER_PROCESS * self.workers

    def first_better(self, lfas: list[Lfa], cost: float) -> tuple[int, Timed] | None:
        """(index, timing) of the first of `lfas` (at most `block` of them) whose
        objective is below `cost`, or None (also when the deadline or Ctrl-C came
        first)."""
        if self.pool is None or self.claims is None:
            return _first_better(self.lowerer, self.options, lfas, cost, self.until)
        self.claims.reset()
        shares = [self.pool.apply_async(_worker_first_better, (lfas, cost))
                  for _ in range(1, self.workers)]
        own = _first_better(self.lowerer, self.options, lfas, cost, self.until, self.claims)
        hits: list[tuple[int, Timed | None]] = [] if own is None else [own]
        hits.extend((at, None) for at in (share.get() for share in shares) if at is not None)
        if not hits:
            return None
        at, timed = min(hits, key=lambda hit: hit[0])
        if timed is None:  # timed in a worker: time it again here
            timed = prefetched(self.lowerer, lfas[at])
            assert timed is not None, "a worker's better neighbour must fit here too"
        return at, timed


_worker_state: tuple[Lowerer, SearchOptions, float | None, _Claims] | None = None
"""A forked worker's lowerer, options, deadline and the blocks' shared claims (set by
`_init_worker`)."""


def _init_worker(lowerer: Lowerer, options: SearchOptions, until: float | None,
                 claims: _Claims) -> None:
    """Runs in each forked worker: keeps its arguments; Ctrl-C is the parent's to handle
    (it ends the scan, and leaving it ends the workers)."""
    global _worker_state
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker_state = (lowerer, options, until, claims)


def _worker_first_better(lfas: list[Lfa], cost: float) -> int | None:
    """`_first_better` in a worker: the position of its better neighbour; the timing
    stays there (the parent times the one neighbour it takes again)."""
    assert _worker_state is not None
    lowerer, options, until, claims = _worker_state
    found = _first_better(lowerer, options, lfas, cost, until, claims)
    return None if found is None else found[0]
