"""Exact search over the whole schedule space: branch and bound over LFAs.

The space: every computing order (topological sort), every set of FLCs and DRAM cuts,
a tiling number from `tilings` per FLG, and every DLSA; nets of at most MAX_LAYERS
layers. By default `tilings` holds every power of two, which covers every schedule any
mipsched method returns (all of them double or halve tiling numbers, as SoMa's operator
does); tiling numbers that are not powers of two are outside the claim.

Every schedule's latency is at least its LFA's bound, the ideal raised by head-and-tail
terms; the relaxed segment model of an order (`lfa.relaxation.relaxed_model`) gives
every LFA of the order this bound and excludes none. Then:
1. per order, the model's optimum (or proven CP-SAT bound) is the least bound of the
   order's LFAs; orders are searched from the least;
2. CP-SAT enumerates the order's LFAs by slices of bound [lo, hi), from its least bound
   up, the slices doubling in width, until lo reaches the incumbent; each is lowered;
   if even its tight DLSA (the least buffer on every tile) overflows, no DLSA fits; if
   its program bound reaches the incumbent, it cannot beat it; otherwise the exact DLSA
   model gives its best DLSA, which may become the incumbent;
3. when every order is done, the incumbent is optimal over the space.
Anytime: at the deadline it returns the incumbent and the least bound of what is left
(including LFAs whose DLSA was not proven optimal): a certified lower bound.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import networkx as nx

from mipsched.core import Candidate, seconds_left
from mipsched.dlsa_starts import constructed_dlsa, fitting_start
from mipsched.evaluate import Evaluation, evaluate
from mipsched.formulations.bounds import program_bound
from mipsched.formulations.dlsa import solve_dlsa, whole_model_fits
from mipsched.formulations.lfa.model import SegmentModel
from mipsched.formulations.lfa.relaxation import (
    MAX_ORDERS,
    RUN_SECONDS,
    least_bound,
    power_tilings,
    relaxed_model,
    run_seconds,
)
from mipsched.formulations.lfa.segments import SegmentCache
from mipsched.formulations.solver import enumerate_solutions
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Dlsa, Lfa, ScheduleError
from mipsched.schedule.tile_program import TileProgram

#: Most LFAs one slice enumerates before the search gives up on completeness.
MAX_ENUMERATED = 1_000_000
#: CP-SAT time for an LFA's DLSA when the search first meets it, seconds: one that is not
#: settled by then waits until the search has been through every LFA, with a better
#: incumbent by then, which often settles it at once (docs/decisions.md).
FIRST_SECONDS = 2.0


@dataclass(frozen=True)
class ExactResult:
    """The best schedule found over the space and what is proven about it."""

    best: Candidate | None
    lower_bound: float
    """No schedule of the space is faster (cycles); = best latency when proven."""
    proven: bool
    orders: int
    """Computing orders searched."""
    all_orders: bool
    """Whether those are all the orders (else the bound covers only them)."""
    lfas_explored: int
    lfas_without_fit: int
    """LFAs whose tight DLSA overflows: no DLSA of theirs fits."""
    lfas_pruned: int
    """LFAs whose program bound (ideal, head and tail) already reached the incumbent."""
    lfas_too_big: int
    """LFAs left open as too big for one DLSA model (their program bound counts)."""
    dlsas_solved: int
    wall_seconds: float
    space: str


class _Search:
    """The incumbent and the counters of one exact search."""

    def __init__(self, lowerer: Lowerer, incumbent: Candidate | None,
                 deadline: float | None, workers: int | None, seed: int,
                 stop: threading.Event | None, target: int | None = None,
                 on_better: Callable[[Candidate], None] | None = None) -> None:
        self.target, self.on_better = target, on_better
        self.lowerer = lowerer
        self.best = incumbent
        self.best_latency = (math.inf if incumbent is None
                             else incumbent.evaluation.latency_cycles)
        self.deadline, self.workers, self.seed, self.stop = deadline, workers, seed, stop
        self.explored = self.no_fit = self.pruned = self.solved = 0
        self.too_big = 0
        """LFAs whose program is too big for one DLSA model (left unresolved)."""
        self.unresolved: list[tuple[float, Lfa, TileProgram | None]] = []
        """LFAs whose DLSA was not settled in time, with the lower bound proven on their
        latency (cycles) and their programs (None: too big to solve)."""

    def out_of_time(self) -> bool:
        """Whether the search must end: the deadline passed, `stop` is set, or the
        incumbent reached the target latency."""
        return (self.deadline is not None and time.perf_counter() > self.deadline) or (
            self.stop is not None and self.stop.is_set()) or (
            self.target is not None and self.best_latency <= self.target)

    def examine(self, lfa: Lfa) -> None:
        """Finds the best DLSA of `lfa` (if any fits and it may beat the incumbent)."""
        self.explored += 1
        try:  # LFAs are met once each, some with huge FLGs: their plans are not kept
            program = self.lowerer.lower(lfa, remember=False)
        except ScheduleError:
            return  # not a valid LFA (e.g. an FLG the lowering rejects)
        if fitting_start(program) is None:  # not even the tight DLSA fits
            self.no_fit += 1
            return
        bound = program_bound(program)
        if bound >= self.best_latency:
            self.pruned += 1
            return
        if not whole_model_fits(program):  # too big for the DLSA model: left open,
            self.too_big += 1                # its best constructed DLSA may still win
            self.unresolved.append((bound, lfa, None))
            self._offer(lfa, program, *constructed_dlsa(program, self.deadline))
            return
        self.solved += 1
        self._solve(lfa, program, FIRST_SECONDS)

    def _solve(self, lfa: Lfa, program: TileProgram, seconds: float) -> None:
        """Whether the program has a DLSA faster than the incumbent (then it becomes the
        incumbent), in at most `seconds`; if that is not settled, it is kept as
        unresolved."""
        dlsa, ev, lower = _best_dlsa(program, self.deadline, self.workers, self.seed,
                                     self.stop, self.best_latency, seconds)
        self._offer(lfa, program, dlsa, ev)
        if lower is not None:
            self.unresolved.append((lower, lfa, program))

    def _offer(self, lfa: Lfa, program: TileProgram, dlsa: Dlsa, ev: Evaluation) -> None:
        """Makes the schedule the incumbent if it fits and is faster."""
        if ev.fits and ev.latency_cycles < self.best_latency:
            self.best = Candidate(lfa, program, dlsa, ev)
            self.best_latency = ev.latency_cycles
            if self.on_better is not None:
                self.on_better(self.best)

    def revisit(self) -> None:
        """Solves the unresolved DLSAs again, least bound first, against the incumbent
        as it is now (a better incumbent often settles them at once)."""
        waiting, self.unresolved = sorted(self.unresolved, key=lambda u: u[0]), []
        for k, (lower, lfa, program) in enumerate(waiting):
            if lower >= self.best_latency:
                continue
            if program is None:
                self.unresolved.append((lower, lfa, program))
                continue
            if self.out_of_time():
                self.unresolved += waiting[k:]
                return
            self._solve(lfa, program, RUN_SECONDS)


def exact_search(lowerer: Lowerer, incumbent: Candidate | None = None,
                 time_limit: float | None = None, workers: int | None = None, seed: int = 0,
                 tilings: tuple[int, ...] | None = None, max_orders: int = MAX_ORDERS,
                 stop: threading.Event | None = None, target: int | None = None,
                 on_better: Callable[[Candidate], None] | None = None) -> ExactResult:
    """Branch and bound over the LFAs of the space from `incumbent` (may be None); the
    returned schedule fits and is no slower than the incumbent. `tilings` defaults to
    every power of two (`power_tilings`): all the tiling numbers mipsched's methods use.
    `time_limit` (seconds) covers building the orders' models; the search also ends
    once the incumbent has at most `target` cycles. `on_better` is called with every new
    incumbent."""
    started = time.perf_counter()
    deadline = None if time_limit is None else started + time_limit
    wl = lowerer.workload
    tilings = tilings or power_tilings(wl)
    orders = list(itertools.islice(nx.all_topological_sorts(wl.graph), max_orders + 1))
    all_orders = len(orders) <= max_orders
    search = _Search(lowerer, incumbent, deadline, workers, seed, stop, target, on_better)
    models = []
    shared: SegmentCache = {}
    unbuilt = False  # an order whose model was not built in time: nothing is proven
    for order in orders[:max_orders]:
        try:
            model = relaxed_model(lowerer, tuple(order), tilings, deadline, shared,
                                  upper=None if math.isinf(search.best_latency)
                                  else int(search.best_latency))
        except TimeoutError:
            unbuilt = True
            break
        models.append((least_bound(model, deadline, workers, seed, stop), len(models),
                       model))
    left = [_search_order(model, least, search)
            for least, _, model in sorted(models, key=lambda item: item[:2])]
    search.revisit()
    lower_bound = min([search.best_latency, *left,
                       *(lower for lower, _, _ in search.unresolved)])
    if unbuilt:
        lower_bound = 0.0
    proven = (all_orders and not unbuilt and search.best is not None
              and lower_bound >= search.best_latency)
    space = (f"{'all' if all_orders else f'the first {max_orders}'} computing orders x "
             f"every FLC and DRAM cut set x tiling numbers {list(tilings)} x every DLSA")
    return ExactResult(search.best, lower_bound, proven, min(len(orders), max_orders),
                       all_orders and not unbuilt, search.explored, search.no_fit,
                       search.pruned, search.too_big, search.solved,
                       time.perf_counter() - started, space)


def _search_order(model: SegmentModel, least: float, search: _Search) -> float:
    """Examines the order's LFAs by slices of bound [lo, hi), from its least bound up,
    slices doubling in width, until the incumbent is at most lo. Returns the least bound
    of the order's LFAs left unexamined (inf when none may beat the incumbent)."""
    lo, width = least, 1
    top = model.horizon + 1  # no LFA's bound reaches it
    while lo < min(search.best_latency, top):
        if search.out_of_time():
            return lo
        hi = min(lo + width, search.best_latency, top)
        if not _examine_slice(model, int(lo), int(hi), search):
            return lo if search.best_latency > lo else math.inf
        lo, width = hi, 2 * width
    return math.inf


def _examine_slice(model: SegmentModel, lo: int, hi: int, search: _Search) -> bool:
    """Enumerates (CP-SAT) and examines every LFA of bound in [lo, hi); stops early when
    the incumbent reaches lo or the time is out. True when the slice was done."""
    m = model.model.clone()
    m.clear_objective()
    ideal = m.get_int_var_from_proto_index(model.ideal.index)
    m.add(ideal >= lo)
    m.add(ideal <= hi - 1)
    seen = 0

    def examine(solution) -> bool:
        nonlocal seen
        seen += 1
        search.examine(model.decode(solution)[0])
        return (search.best_latency > lo and not search.out_of_time()
                and seen < MAX_ENUMERATED)

    left = seconds_left(search.deadline)
    if left is not None:
        left = max(0.01, left)
    return enumerate_solutions(m, left, examine, search.seed, search.stop)


def _best_dlsa(program: TileProgram, deadline: float | None, workers: int | None,
               seed: int, stop: threading.Event | None, below: float = math.inf,
               seconds: float = RUN_SECONDS) -> tuple[Dlsa, Evaluation, float | None]:
    """The exact DLSA model's best DLSA of a program that fits, hinted with the fastest
    constructed DLSA (tight, default, prefetching), where only DLSAs faster than `below`
    (the incumbent, cycles) matter; its evaluation; and, unless that is settled (the
    optimum found, or none faster than `below`), a lower bound on the program's latency
    (cycles)."""
    sol = solve_dlsa(program, constructed_dlsa(program, deadline)[0],
                     run_seconds(deadline, seconds), workers, seed, stop=stop,
                     below=None if math.isinf(below) else int(below))
    assert sol.dlsa is not None  # never worse than its hint
    settled = sol.status.status in ("optimal", "infeasible")
    lower = None if settled else max(program_bound(program), sol.lower_bound or 0)
    return sol.dlsa, evaluate(program, sol.dlsa), lower

