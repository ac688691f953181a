"""Random valid LFAs and DLSAs for property tests."""

from __future__ import annotations

import random

from mipsched.schedule.notation import Dlsa, Lfa, ScheduleError
from mipsched.schedule.tile_program import TileProgram
from mipsched.schedule.tiling import choose_grid
from mipsched.workload.graph import Workload


def random_order(workload: Workload, rng: random.Random) -> tuple[str, ...]:
    """A uniformly-chosen next ready layer at each step (random topological order)."""
    indegree = {n: workload.graph.in_degree(n) for n in workload.layers}
    ready = [n for n, d in indegree.items() if d == 0]
    order = []
    while ready:
        n = ready.pop(rng.randrange(len(ready)))
        order.append(n)
        for v in workload.graph.successors(n):
            indegree[v] -= 1
            if indegree[v] == 0:
                ready.append(v)
    return tuple(order)


def random_lfa(workload: Workload, rng: random.Random,
               tilings: tuple[int, ...] = tuple(range(1, 9)),
               order: tuple[str, ...] | None = None, cut_chance: float = 0.5) -> Lfa:
    """Random FLCs (each position with `cut_chance`), DRAM cuts (half of the FLCs) and a
    tiling number from `tilings` that divides each FLG's work; random order unless
    given."""
    order = order or random_order(workload, rng)
    n = len(order)
    flc = tuple(k for k in range(1, n) if rng.random() < cut_chance)
    dram = tuple(k for k in flc if rng.random() < 0.5)
    bounds = [0, *flc, n]
    tiling = []
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        options = []
        for t in tilings:
            try:
                choose_grid(workload, order[a:b], t)
                options.append(t)
            except ScheduleError:
                pass
        tiling.append(rng.choice(options))
    return Lfa(order, flc, tuple(tiling), dram)


def random_dlsa(program: TileProgram, rng: random.Random) -> Dlsa:
    """A random valid DLSA: living durations uniform in their ranges; the order sorts the
    tensors by a random key drawn between the tile that releases each one and the tile
    that needs it (so nothing waits behind a later release: no deadlock), stores before
    the loads of their data (keys raised to respect precedence)."""
    living = []
    low = []
    high = []
    for t in program.tensors:
        free = rng.randint(t.lo, t.hi)
        start, end = t.living(free)
        living.append((start, end))
        low.append(max(start - 1, -1) if t.is_load else t.producer)
        high.append((t.first_use if t.is_load else end) - 1)
    for a, b in program.precedence:  # a store may not be keyed after its loads' needs
        high[a] = min(high[a], high[b])
    key = [rng.uniform(lo, hi) for lo, hi in zip(low, high, strict=True)]
    for a, b in sorted(program.precedence, key=lambda pair: key[pair[0]]):
        key[b] = max(key[b], key[a])
    rank = {i: (key[i], 0 if not t.is_load else 1, rng.random())
            for i, t in enumerate(program.tensors)}
    return Dlsa(tuple(sorted(rank, key=rank.__getitem__)), tuple(living))
