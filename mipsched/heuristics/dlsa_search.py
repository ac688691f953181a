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

import bisect
import itertools
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from mipsched.core import Candidate, Objective
from mipsched.evaluate import evaluate
from mipsched.heuristics.annealing import Cooling, Progress
from mipsched.heuristics.dlsa_state import DlsaState
from mipsched.schedule.notation import Dlsa, Lfa
from mipsched.schedule.tile_program import TileProgram


class StopFlag(Protocol):
    """What a search polls to end early (a threading.Event, or a flag shared with worker
    processes)."""

    def is_set(self) -> bool: ...


@dataclass(frozen=True)
class DlsaSearchResult:
    best: Candidate
    iterations: int
    accepted: int


def search_dlsa(program: TileProgram, start: Dlsa, lfa: Lfa | None, objective: Objective,
                iterations: int, rng: random.Random, deadline: float | None = None,
                cooling: Cooling | None = None, stop: StopFlag | None = None,
                target_latency: int | None = None,
                on_best: Callable[[int, float], None] | None = None) -> DlsaSearchResult:
    """Anneals the DLSA of `program` from `start` (which must fit); returns the best
    (early at the deadline, when `stop` is set, or once the best's latency is at most
    `target_latency`). `on_best(latency, cost)` hears of the start and every new best."""
    cooling = cooling or Cooling()
    tensors = program.tensors
    state = DlsaState(program, start)
    energy = program.energy_pj
    static = program.static_pj_per_cycle
    cum = list(itertools.accumulate(max(t.bytes, 1) for t in tensors))
    total = cum[-1] + 0.0 if cum else 0.0
    last = len(tensors) - 1
    best_latency = state.latency()
    cost = best_cost = objective.cost_of(energy, best_latency)
    if on_best is not None:
        on_best(best_latency, objective.cost_of(energy + static * best_latency, best_latency))
    best = start
    accepted = 0
    n_done = 0
    progress = Progress(iterations, deadline)
    for n in range(iterations if tensors else 0):
        if (deadline is not None and time.perf_counter() > deadline) or (
                stop is not None and stop.is_set()) or (
                target_latency is not None and best_latency <= target_latency):
            break
        n_done = n + 1
        i = bisect.bisect(cum, rng.random() * total, 0, last)  # = rng.choices(cum_weights)
        if rng.random() < 0.5:
            places, k = state.order_places(i)
            if not places:
                continue
            q = rng.choice(places)
            state.move(i, k, q)
            new_latency = state.latency()
            new_cost = objective.cost_of(energy, new_latency)
            if cooling.accept(cost, new_cost, progress.at(n), rng):
                cost = new_cost
                accepted += 1
            else:
                state.move(i, q, k)
                state.discard()
                continue
        else:
            t = tensors[i]
            old = state.living[i]
            free = rng.randint(t.lo, t.hi)
            if free == t.free_end(old) or not state.valid_free_end(i, free):
                continue
            if not state.set_living(i, t.living(free)):
                continue
            new_latency = state.latency()
            new_cost = objective.cost_of(energy, new_latency)
            if cooling.accept(cost, new_cost, progress.at(n), rng):
                cost = new_cost
                accepted += 1
            else:
                state.set_living(i, old)
                state.discard()
                continue
        if cost < best_cost:
            best_cost, best, best_latency = cost, state.dlsa(), new_latency
            if on_best is not None:
                on_best(best_latency, objective.cost_of(energy + static * best_latency,
                                                        best_latency))
    return DlsaSearchResult(Candidate(lfa, program, best, evaluate(program, best)), n_done,
                            accepted)
