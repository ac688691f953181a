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
    """Random living durations in range; order sorted by release tile (stores of data a
    load reads come first), ties broken at random: never deadlocks, respects precedence."""
    living = []
    release = []
    for t in program.tensors:
        free = rng.randint(t.lo, t.hi)
        living.append(t.living(free))
        release.append(max(free - 1, -1) if t.is_load else t.producer)
    for a, b in program.precedence:
        release[b] = max(release[b], release[a])
    keys = {i: (release[i], 0 if not t.is_load else 1, rng.random())
            for i, t in enumerate(program.tensors)}
    order = sorted(keys, key=keys.__getitem__)
    return Dlsa(tuple(order), tuple(living))
