"""Random tiny tile programs and brute-force DLSA optima, for exactness tests."""

from __future__ import annotations

import itertools
import random

from mipsched.evaluate import buffer_profile, latency
from mipsched.schedule.notation import Dlsa
from mipsched.schedule.tile_program import DramTensor, TensorKind, Tile, TileProgram


def tiny_program(rng: random.Random, max_tiles: int = 10, max_tensors: int = 8,
                 max_work: int = 1500) -> TileProgram:
    """A random program with a tight buffer whose DLSA space (valid orders x living
    durations) has at most `max_work` members, so brute force stays cheap."""
    while True:
        program = _draw(rng, max_tiles, max_tensors)
        if program is not None and space_size(program, max_work) <= max_work:
            return program


def _draw(rng: random.Random, max_tiles: int, max_tensors: int) -> TileProgram | None:
    n = rng.randint(2, max_tiles)
    tiles = [Tile(p, p, f"L{p}", 0, rng.randint(1, 40), float(rng.randint(1, 9)))
             for p in range(n)]
    tensors: list[DramTensor] = []
    stores: list[int] = []
    precedence: list[tuple[int, int]] = []
    for i in range(rng.randint(1, max_tensors)):
        size = rng.randint(1, 60)
        if rng.random() < 0.35 and n >= 2:
            producer = rng.randrange(n - 1)
            hi = min(n, producer + 1 + rng.randint(0, 2))
            tensors.append(DramTensor(i, TensorKind.STORE_OFMAP, producer, f"L{producer}",
                                      0, size, rng.randint(0, 30), producer=producer,
                                      lo=producer + 1, hi=hi))
            stores.append(i)
        else:
            first = rng.randrange(n)
            last = min(n - 1, first + rng.randint(0, 1))
            lo = max(-1, first - rng.randint(0, 2))
            kind = TensorKind.LOAD_WEIGHT if rng.random() < 0.5 else TensorKind.LOAD_IFMAP
            tensors.append(DramTensor(i, kind, first, f"L{first}", 0, size,
                                      rng.randint(0, 30), first_use=first, last_use=last,
                                      lo=lo, hi=first))
            readable = [s for s in stores if tensors[s].producer < first]
            if readable and rng.random() < 0.5:
                precedence.append((rng.choice(readable), i))
    onchip = [rng.randint(0, 30) for _ in range(n)]
    program = TileProgram("tiny", 1, 10**9, 1.0, tiles, 0, onchip, tensors, precedence)
    # tight buffer: between the least and the most any DLSA needs at its peak
    peaks = [max(buffer_profile(program, d)) for d in _livings_only(program)]
    program.buffer_capacity_bytes = rng.randint(min(peaks), max(peaks))
    return program


def _livings_only(program: TileProgram):
    for living in itertools.product(*(
            [t.living(v) for v in range(t.lo, t.hi + 1)] for t in program.tensors)):
        yield Dlsa(tuple(range(len(living))), tuple(living))


def _valid_orders(program: TileProgram, living, limit: int | None = None
                  ) -> list[tuple[int, ...]]:
    """Orders with no deadlock (nothing behind a transfer released at or after the tile
    that needs it) that respect store -> load precedence (stops after `limit`)."""
    n = program.n_tiles
    rel, need = [], []
    for t, (s, e) in zip(program.tensors, living, strict=True):
        rel.append((s - 1 if s > 0 else -1) if t.is_load else t.producer)
        need.append(t.first_use if t.is_load else (e if e < n else n + 1))
    before = {b: {a for a, bb in program.precedence if bb == b} for b in range(len(rel))}
    out: list[tuple[int, ...]] = []

    def extend(prefix: list[int], left: set[int]) -> None:
        if not left:
            out.append(tuple(prefix))
            return
        for j in sorted(left):
            if limit is not None and len(out) > limit:
                return
            if before[j] & left:
                continue
            if any(rel[i] >= need[j] for i in prefix):
                continue
            prefix.append(j)
            left.remove(j)
            extend(prefix, left)
            left.add(j)
            prefix.pop()

    extend([], set(range(len(rel))))
    return out


def space_size(program: TileProgram, limit: int) -> int:
    """Number of (living durations, valid order) pairs, counted up to just past `limit`."""
    total = 0
    for d in _livings_only(program):
        total += len(_valid_orders(program, d.living, limit - total))
        if total > limit:
            break
    return total


def brute_force_optimum(program: TileProgram) -> int | None:
    """Least latency over every valid DLSA that fits the buffer (None: none fits)."""
    best = None
    cap = program.buffer_capacity_bytes
    for d in _livings_only(program):
        if max(buffer_profile(program, d)) > cap:
            continue
        for order in _valid_orders(program, d.living):
            value = latency(program, Dlsa(order, d.living))
            if best is None or value < best:
                best = value
    return best


def schedule_optimum(workload, hw, tilings: tuple[int, ...]) -> int | None:
    """Least latency over every six-attribute schedule whose tiling numbers are in
    `tilings` (None: nothing fits): every computing order, FLC set, DRAM cut set and
    tiling per FLG, each LFA's DLSA by brute force (or, for more than 7 DRAM tensors or a
    large space, by the exact DLSA model, itself checked against brute force in
    test_dlsa_model). LFAs whose ideal, max(sum of tile cycles, sum of DRAM cycles),
    is no better than the best so far are skipped: no DLSA of theirs is faster."""
    import networkx as nx

    from mipsched.dlsa_starts import tight_dlsa
    from mipsched.formulations.dlsa import solve_dlsa
    from mipsched.schedule.lowering import Lowerer
    from mipsched.schedule.notation import Lfa, ScheduleError

    lowerer = Lowerer(workload, hw)
    best = None
    for order in nx.all_topological_sorts(workload.graph):
        n = len(order)
        for flc_mask in range(2 ** (n - 1)):
            flc = tuple(k for k in range(1, n) if flc_mask >> (k - 1) & 1)
            for dram_mask in range(2 ** len(flc)):
                cuts = tuple(c for j, c in enumerate(flc) if dram_mask >> j & 1)
                for tiling in itertools.product(tilings, repeat=len(flc) + 1):
                    try:
                        program = lowerer.lower(Lfa(tuple(order), flc, tiling, cuts))
                    except ScheduleError:
                        continue
                    cap = program.buffer_capacity_bytes
                    if max(buffer_profile(program, tight_dlsa(program))) > cap:
                        continue
                    if best is not None and program.ideal_cycles >= best:
                        continue  # no DLSA beats the ideal max(sum compute, sum DRAM)
                    if len(program.tensors) <= 7 and space_size(program, 2000) <= 2000:
                        value = brute_force_optimum(program)
                    else:
                        sol = solve_dlsa(program, tight_dlsa(program), 120, 1)
                        if sol.status.status != "optimal":  # then it must not matter
                            assert best is not None and sol.lower_bound is not None
                            assert sol.lower_bound >= best
                            continue
                        value = sol.latency_cycles
                    if value is not None and (best is None or value < best):
                        best = value
    return best
