"""Where the incumbent DAG of a DLSA splits around a window of tiles (DESIGN §4 "Windows";
the window model is `dlsa_windows.py`).

The incumbent's ASAP timing is a longest-path schedule over a DAG: the tile chain, the
DRAM order, and per transfer a release edge (the tile whose end lets it start) and a need
edge (the tile that waits for it). `tails` gives each node's longest path to the end of the
program (cycles). A window of tiles [w0, w1) goes with the run [k0, k1) of the DRAM order.
Cut points: k0 must exceed every transfer a prefix tile needs and precede every transfer
a tile >= w0 releases (deadlock freedom of the incumbent makes that range non-empty); the
window takes k0 as the number of transfers that start before tile w0 does, clamped into
that range; likewise k1 for w1.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass

from mipsched.evaluate import Timeline
from mipsched.schedule.notation import Dlsa
from mipsched.schedule.tile_program import TileProgram


@dataclass(frozen=True)
class Tails:
    """Per node of the incumbent DAG, the longest path from its start to the end of the
    program (cycles), and which tile releases / needs each transfer."""

    tile: list[int]
    transfer: list[int]
    release: list[int]
    """Tile whose end releases transfer i (-1: time 0)."""
    need: list[int]
    """Tile that waits for transfer i (n: none)."""


def tails(program: TileProgram, dlsa: Dlsa) -> Tails:
    """Longest paths to the end (cycles), walking the evaluator's topological order
    backwards."""
    n = program.n_tiles
    release, need = [], []
    for t, (start, end) in zip(program.tensors, dlsa.living, strict=True):
        if t.is_load:
            release.append(start - 1 if start > 0 else -1)
            need.append(t.first_use)
        else:
            release.append(t.producer)
            need.append(end)
    sequence: list[tuple[bool, int]] = []  # (is_tile, index) in topological order
    next_tile = 0
    for i in dlsa.order:
        while next_tile <= release[i]:
            sequence.append((True, next_tile))
            next_tile += 1
        sequence.append((False, i))
    sequence += [(True, p) for p in range(next_tile, n)]
    released_by: list[list[int]] = [[] for _ in range(n)]
    for i in dlsa.order:
        if release[i] >= 0:
            released_by[release[i]].append(i)
    after = {i: j for i, j in zip(dlsa.order, dlsa.order[1:], strict=False)}
    cycles, access = program.tile_cycles, program.access_cycles
    tile_tail, transfer_tail = [0] * n, [0] * len(program.tensors)
    for is_tile, k in reversed(sequence):
        if is_tile:
            nxt = [tile_tail[k + 1]] if k + 1 < n else []
            tile_tail[k] = cycles[k] + max(nxt + [transfer_tail[j] for j in released_by[k]],
                                           default=0)
        else:
            nxt = [transfer_tail[after[k]]] if k in after else []
            if need[k] < n:
                nxt.append(tile_tail[need[k]])
            transfer_tail[k] = access[k] + max(nxt, default=0)
    return Tails(tile_tail, transfer_tail, release, need)


@dataclass(frozen=True)
class Window:
    """Tiles [w0, w1) and positions [k0, k1) of the incumbent DRAM order."""

    w0: int
    w1: int
    k0: int
    k1: int


def cut(program: TileProgram, dlsa: Dlsa, times: Timeline, tail: Tails, w0: int,
        w1: int) -> Window:
    """The transfer positions that go with tiles [w0, w1) (see the module docstring)."""
    splits = split_points(dlsa, times, tail)
    return Window(w0, w1, splits[w0], splits[w1])


def split_points(dlsa: Dlsa, times: Timeline, tail: Tails) -> list[int]:
    """Per w in 0..n (n tiles), a position k such that the transfers before k are
    released by tiles < w and include every transfer that tiles < w need: the number of
    transfers that start before tile w (the makespan for w = n), clamped into that range.
    O(n + m log m) for m transfers, so that a pass of windows reads its cuts from one list."""
    order = dlsa.order
    n = len(times.tile_start)
    last_needed = [0] * (n + 2)  # by need tile: 1 + the last position needing it
    first_released = [len(order)] * (n + 1)  # by releasing tile: the first position
    for k, i in enumerate(order):
        last_needed[tail.need[i] + 1] = max(last_needed[tail.need[i] + 1], k + 1)
        if tail.release[i] >= 0:
            first_released[tail.release[i]] = min(first_released[tail.release[i]], k)
    needed = list(itertools.accumulate(last_needed[:n + 1], max))
    released = list(itertools.accumulate(reversed(first_released), min))[::-1]
    starts = sorted(times.transfer_start[i] for i in order)
    ends = [*times.tile_start, times.makespan]
    return [min(max(bisect.bisect_left(starts, ends[w]), needed[w]), released[w])
            for w in range(n + 1)]
