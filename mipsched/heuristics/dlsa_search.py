"""SoMa's stage 2 (§V-C2): simulated annealing over the DLSA of one fixed LFA.

Operators, on a DRAM tensor drawn with probability proportional to its size:
- move it to another valid place in the DRAM order: never behind a transfer released by
  a tile at or after the one that needs it, never ahead of one it would block, after the
  stores of its data (loads) and before the loads of its data (stores);
- change its free end: a load's Start (prefetch) or a store's End (delayed store),
  anywhere in the allowed range that keeps the order deadlock-free and the buffer within
  its capacity (checked incrementally on the tiles whose occupancy changes).
Energy does not depend on the DLSA, so the cost is the objective at that energy.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from dataclasses import dataclass

from mipsched.evaluate import buffer_profile, evaluate, latency, replay
from mipsched.heuristics.annealing import Cooling, Progress
from mipsched.heuristics.common import Candidate, Objective
from mipsched.schedule.notation import Dlsa
from mipsched.schedule.tile_program import TileProgram


@dataclass(frozen=True)
class DlsaSearchResult:
    best: Candidate
    iterations: int
    accepted: int


class _State:
    """A DLSA being searched, with what the operators need to stay valid."""

    def __init__(self, program: TileProgram, dlsa: Dlsa) -> None:
        self.program = program
        self.n = program.n_tiles
        self.order = list(dlsa.order)
        self.living = list(dlsa.living)
        self.occupancy = buffer_profile(program, dlsa)  # index t + 1
        tensors = program.tensors
        self.release = [self._release(i, s) for i, (s, _) in enumerate(self.living)]
        self.need = [t.first_use if t.is_load else e
                     for t, (_, e) in zip(tensors, self.living, strict=True)]
        self.stores_of: dict[int, list[int]] = {}
        self.loads_of: dict[int, list[int]] = {}
        for store, load in program.precedence:
            self.stores_of.setdefault(load, []).append(store)
            self.loads_of.setdefault(store, []).append(load)

    def _release(self, i: int, start: int) -> int:
        t = self.program.tensors[i]
        return (start - 1 if start > 0 else -1) if t.is_load else t.producer

    def dlsa(self) -> Dlsa:
        return Dlsa(tuple(self.order), tuple(self.living))

    def latency(self) -> int:
        """Latency of the current DLSA (cycles), replayed from the kept release / need."""
        return replay(self.program, self.order, self.release, self.need).makespan

    # --- order moves --------------------------------------------------------------------
    def order_places(self, i: int) -> tuple[list[int], int]:
        """Valid insertion indices for tensor i in the order without it, and its index."""
        k = self.order.index(i)
        rest = self.order[:k] + self.order[k + 1:]
        lo, hi = 0, len(rest)
        rel, need = self.release[i], self.need[i]
        for x, j in enumerate(rest):
            if self.release[j] >= need:
                hi = min(hi, x)
                break
        for x in range(len(rest) - 1, -1, -1):
            if self.need[rest[x]] <= rel:
                lo = max(lo, x + 1)
                break
        for store in self.stores_of.get(i, ()):
            lo = max(lo, rest.index(store) + 1)
        for load in self.loads_of.get(i, ()):
            hi = min(hi, rest.index(load))
        return [q for q in range(lo, hi + 1) if q != k], k

    def move(self, i: int, k: int, q: int) -> None:
        del self.order[k]
        self.order.insert(q, i)

    # --- living-duration moves ----------------------------------------------------------
    def valid_free_end(self, i: int, free: int) -> bool:
        """Whether tensor i may take this Start (load) / End (store) without deadlock."""
        t = self.program.tensors[i]
        k = self.order.index(i)
        if t.is_load:
            rel = free - 1 if free > 0 else -1
            return all(self.need[j] > rel for j in self.order[k + 1:])
        return all(self.release[j] < free for j in self.order[:k])

    def set_living(self, i: int, living: tuple[int, int]) -> bool:
        """Applies the new living duration; False (and unchanged) if it overflows."""
        old = self.living[i]
        size = self.program.tensors[i].bytes
        occ = self.occupancy
        for t in range(old[0], old[1]):
            occ[t + 1] -= size
        for t in range(living[0], living[1]):
            occ[t + 1] += size
        cap = self.program.buffer_capacity_bytes
        if any(occ[t + 1] > cap for t in range(living[0], living[1])):
            for t in range(living[0], living[1]):
                occ[t + 1] -= size
            for t in range(old[0], old[1]):
                occ[t + 1] += size
            return False
        self.living[i] = living
        t = self.program.tensors[i]
        if t.is_load:
            self.release[i] = self._release(i, living[0])
        else:
            self.need[i] = living[1]
        return True


def search_dlsa(program: TileProgram, start: Dlsa, lfa, objective: Objective,
                iterations: int, rng: random.Random, deadline: float | None = None,
                cooling: Cooling | None = None,
                stop: threading.Event | None = None) -> DlsaSearchResult:
    """Anneals the DLSA of `program` from `start` (which must fit); returns the best
    (early at the deadline or when `stop` is set)."""
    cooling = cooling or Cooling()
    tensors = program.tensors
    state = _State(program, start)
    energy = program.energy_pj
    cum = list(itertools.accumulate(max(t.bytes, 1) for t in tensors))
    cost = best_cost = objective.cost_of(energy, latency(program, start))
    best = start
    accepted = 0
    n_done = 0
    progress = Progress(iterations, deadline)
    for n in range(iterations if tensors else 0):
        if (deadline is not None and time.perf_counter() > deadline) or (
                stop is not None and stop.is_set()):
            break
        n_done = n + 1
        i = rng.choices(range(len(tensors)), cum_weights=cum)[0]
        if rng.random() < 0.5:
            places, k = state.order_places(i)
            if not places:
                continue
            q = rng.choice(places)
            state.move(i, k, q)
            new_cost = objective.cost_of(energy, state.latency())
            if cooling.accept(cost, new_cost, progress.at(n), rng):
                cost = new_cost
                accepted += 1
            else:
                state.move(i, q, k)
                continue
        else:
            t = tensors[i]
            old = state.living[i]
            free = rng.randint(t.lo, t.hi)
            if free == t.free_end(old) or not state.valid_free_end(i, free):
                continue
            if not state.set_living(i, t.living(free)):
                continue
            new_cost = objective.cost_of(energy, state.latency())
            if cooling.accept(cost, new_cost, progress.at(n), rng):
                cost = new_cost
                accepted += 1
            else:
                state.set_living(i, old)
                continue
        if cost < best_cost:
            best_cost, best = cost, state.dlsa()
    return DlsaSearchResult(Candidate(lfa, program, best, evaluate(program, best)), n_done,
                            accepted)
