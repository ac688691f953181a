"""LFA annealing scored as stage 2 will see it: every candidate LFA timed with its greedy
prefetching DLSA (dlsa_starts.prefetch_dlsa, in the faster of release and deadline order)
instead of SoMa's double buffering.

SoMa's stage 1 ranks LFAs by their latency under the default DLSA, which charges every
weight load right before its layer. Which LFA is best *after* stage 2 often differs: an
order that computes layers with small weights first lets large weights load while they
compute, which only a DLSA that prefetches shows. Timing candidates with the prefetching
DLSA sees that.

A candidate whose default DLSA overflows the buffer is still scored when its tight DLSA
(every load at its first use) fits, since some DLSA then fits; the prefetching DLSA grows
from whichever fits. Passes of `LFA_FACTOR` x layers moves repeat from the best LFA so
far (re-heated) until PATIENCE passes in a row find nothing better, the deadline,
Ctrl-C or the target latency.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import random
import signal
import threading
from multiprocessing.connection import Connection

from mipsched.core import Candidate, SearchOptions, seconds_left
from mipsched.dlsa_starts import fastest_order, fitting_start, prefetch_dlsa
from mipsched.evaluate import evaluate
from mipsched.heuristics.annealing import Cooling, Progress
from mipsched.heuristics.lfa_moves import propose
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Dlsa, Lfa, ScheduleError
from mipsched.schedule.placement import Placement, tight_peak
from mipsched.schedule.tile_program import TileProgram

LFA_FACTOR = 100
"""Moves per pass per layer, as SoMa's stage 1."""
PATIENCE = 2
"""Passes in a row without a better schedule after which the search ends."""


def prefetched(lowerer: Lowerer, lfa: Lfa) -> tuple[TileProgram, Dlsa, int] | None:
    """`lfa` lowered, its greedy prefetching DLSA (in the faster of release and deadline
    order, dlsa_starts.fastest_order) and that DLSA's latency (cycles); None
    when the LFA cannot be lowered or no DLSA of it fits the buffer."""
    program = fitting_program(lowerer, lfa)
    return None if program is None else prefetched_dlsa(program)


def fitting_program(lowerer: Lowerer, lfa: Lfa) -> TileProgram | None:
    """`lfa`'s tile program if some DLSA of it fits the buffer, else None (also when it
    cannot be lowered)."""
    placed = fitting_placement(lowerer, lfa)
    return None if placed is None else lowerer.lower_placed(placed)


def fitting_placement(lowerer: Lowerer, lfa: Lfa) -> Placement | None:
    """`lfa` placed if some DLSA of it fits the buffer, else None (also when it cannot be
    lowered). Whether one fits is known from the placement (tight_peak), before the tile
    program is built: two thirds of the neighbours of ResNet-101 / edge / b16's DP split
    do not fit, and building their programs took half the descent's time."""
    try:
        placed = lowerer.place(lfa)
    except ScheduleError:
        return None
    return None if tight_peak(placed) > lowerer.hw.gbuf.capacity_bytes else placed


def prefetched_dlsa(program: TileProgram) -> tuple[TileProgram, Dlsa, int] | None:
    """`program`, its greedy prefetching DLSA and that DLSA's latency (cycles), as
    `prefetched`; None if no DLSA of it fits the buffer."""
    start = fitting_start(program)
    if start is None:
        return None
    return program, *fastest_order(program, prefetch_dlsa(program, *start))


def prefetched_cost(lowerer: Lowerer, options: SearchOptions, energy_pj: float,
                    latency_cycles: int) -> float:
    """The objective of a tile program of energy `energy_pj` (its energy_pj: static
    excluded) run in `latency_cycles` cycles, with the energy evaluate() gives (static
    power included)."""
    static = lowerer.hw.static_pj_per_cycle
    return options.objective.cost_of(energy_pj + static * latency_cycles, latency_cycles)


def anneal_prefetched(lowerer: Lowerer, start: Lfa, options: SearchOptions,
                      deadline: float | None, rng: random.Random,
                      cooling: Cooling | None = None, lg_cuts: bool = False
                      ) -> tuple[Candidate | None, int]:
    """The best candidate (LFA with its prefetching DLSA) found from `start`, by the
    objective, and the number of LFAs scored. Without a deadline, one pass; None if
    `start` has no DLSA that fits. `lg_cuts`: moves include lfa_moves.add_lg_cut."""
    cooling = cooling or Cooling()
    graph = lowerer.workload.graph

    def cost_of(program: TileProgram, latency_cycles: int) -> float:
        return prefetched_cost(lowerer, options, program.energy_pj, latency_cycles)

    first = prefetched(lowerer, start)
    if first is None:
        return None, 0
    program, dlsa, lat = first
    best = (start, program, dlsa)
    best_cost = cost_of(program, lat)
    best_latency = lat
    iterations = LFA_FACTOR * len(lowerer.workload.layers)
    scored = misses = 0
    while not options.should_stop(deadline, best_latency) and misses < PATIENCE:
        current, cost = best[0], best_cost
        cost_before = best_cost
        progress = Progress(iterations, deadline)
        scored_before = scored
        for n in range(iterations):
            if options.should_stop(deadline, best_latency):
                break
            lfa = propose(current, graph, rng, lg_cuts)
            if lfa is None:
                continue
            found = prefetched(lowerer, lfa)
            scored += 1
            if found is None:
                continue
            program, dlsa, lat = found
            new_cost = cost_of(program, lat)
            if cooling.accept(cost, new_cost, progress.at(n), rng):
                current, cost = lfa, new_cost
                if cost < best_cost:
                    best, best_cost, best_latency = (lfa, program, dlsa), cost, lat
                    if options.trail is not None:
                        options.trail.offer(lat, cost)
        if deadline is None or scored == scored_before:  # one pass, or no move applies
            break
        misses = misses + 1 if best_cost >= cost_before else 0
    lfa, program, dlsa = best
    return Candidate(lfa, program, dlsa, evaluate(program, dlsa, check=False)), scored


def anneal_prefetched_chains(lowerer: Lowerer, start: Lfa, options: SearchOptions,
                             until: float | None, seed: int, chains: int) -> Candidate | None:
    """`chains` independent runs of anneal_prefetched from `start` until `until`
    (perf_counter; None: one pass, in this process only), seeds seed, seed + 1, ...: the
    first in this process, the others in forked worker processes; the best by the
    objective (None if `start` has no DLSA that fits). Odd-numbered workers also split
    LGs in one move (lfa_moves.add_lg_cut); the rest use SoMa's six operators. A worker
    that fails or does not answer by `until` + WORKER_GRACE_S is ignored."""
    workers = [] if until is None else [
        _Chain(lowerer, start, options, until, seed + k, lg_cuts=k % 2 == 1)
        for k in range(1, chains)]
    found, _ = anneal_prefetched(lowerer, start, options, until, random.Random(seed))
    candidates = [] if found is None else [found]
    for worker in workers:
        lfa = worker.result()
        if lfa is not None and (other := prefetched(lowerer, lfa)) is not None:
            program, dlsa, _ = other
            candidates.append(Candidate(lfa, program, dlsa,
                                        evaluate(program, dlsa, check=False)))
    return min(candidates, key=lambda c: options.objective.cost(c.evaluation), default=None)


WORKER_GRACE_S = 0.5
"""How long past the deadline the parent waits for a worker's answer (seconds)."""


class _Chain:
    """One annealing chain in a forked process; sends back its best LFA (or None)."""

    def __init__(self, lowerer: Lowerer, start: Lfa, options: SearchOptions, until: float,
                 seed: int, lg_cuts: bool) -> None:
        self.until = until
        context = multiprocessing.get_context("fork")
        self.conn, child = context.Pipe(duplex=False)
        self.process = context.Process(target=_run_chain, name="mipsched-prefetch",
                                       args=(child, lowerer, start, options, until, seed,
                                             lg_cuts),
                                       daemon=True)
        self.process.start()
        child.close()

    def result(self) -> Lfa | None:
        """The chain's best LFA, or None if it has none or gives none by its deadline
        plus WORKER_GRACE_S."""
        try:
            if self.conn.poll(seconds_left(self.until + WORKER_GRACE_S)):
                return self.conn.recv()
            return None
        except (EOFError, OSError):
            return None
        finally:
            if self.process.is_alive():
                self.process.terminate()
            self.process.join()
            self.conn.close()


def _run_chain(conn: Connection, lowerer: Lowerer, start: Lfa, options: SearchOptions,
               until: float, seed: int, lg_cuts: bool) -> None:
    """A worker: anneals until `until` (Ctrl-C ends it with its best) and sends the best
    LFA, or None."""
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    local = dataclasses.replace(options, stop=stop, trail=None)
    try:
        found, _ = anneal_prefetched(lowerer, start, local, until, random.Random(seed),
                                     lg_cuts=lg_cuts)
        conn.send(None if found is None else found.lfa)
    finally:
        conn.close()
        os._exit(0)
