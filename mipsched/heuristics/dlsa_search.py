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

    def is_set(self) -> bool:
        """Whether the search must end now."""
        ...


@dataclass(frozen=True)
class DlsaSearchResult:
    """The best schedule found, the iterations run and the moves accepted."""

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

    def report(latency_cycles: int) -> None:
        """Tells `on_best` of a new best, its cost with static energy included."""
        if on_best is not None:
            on_best(latency_cycles, objective.cost_of(energy + static * latency_cycles,
                                                      latency_cycles))

    cum = list(itertools.accumulate(max(t.bytes, 1) for t in tensors))
    total = cum[-1] + 0.0 if cum else 0.0
    last = len(tensors) - 1
    best_latency = state.latency()
    cost = best_cost = objective.cost_of(energy, best_latency)
    report(best_latency)
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
        undo = _random_move(state, i, rng)
        if undo is None:
            continue
        new_latency = state.latency()
        new_cost = objective.cost_of(energy, new_latency)
        if not cooling.accept(cost, new_cost, progress.at(n), rng):
            undo()
            state.discard()
            continue
        cost = new_cost
        accepted += 1
        if cost < best_cost:
            best_cost, best, best_latency = cost, state.dlsa(), new_latency
            report(best_latency)
    return DlsaSearchResult(Candidate(lfa, program, best, evaluate(program, best)), n_done,
                            accepted)


def _random_move(state: DlsaState, i: int, rng: random.Random) -> Callable[[], None] | None:
    """Applies a random move of tensor `i`, with even odds a new place in the DRAM order
    or a new free end; returns what undoes it, or None when the drawn move does not apply
    (nothing changed)."""
    if rng.random() < 0.5:
        places, k = state.order_places(i)
        if not places:
            return None
        q = rng.choice(places)
        state.move(i, k, q)
        return lambda: state.move(i, q, k)
    t = state.program.tensors[i]
    old = state.living[i]
    free = rng.randint(t.lo, t.hi)
    if free == t.free_end(old) or not state.valid_free_end(i, free):
        return None
    if not state.set_living(i, t.living(free)):
        return None
    return lambda: state.set_living(i, old)
