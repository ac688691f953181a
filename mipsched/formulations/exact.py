"""Exact search over the whole schedule space: branch and bound over LFAs (issue 6).

The space: every computing order (topological sort), every set of FLCs and DRAM cuts,
a tiling number from `tilings` per FLG, and every DLSA; nets of at most MAX_LAYERS
layers. By default `tilings` holds every power of two, which covers every schedule any
mipsched method returns (all of them double or halve tiling numbers, as SoMa's operator
does); tiling numbers that are not powers of two are outside the claim.

Every schedule's latency is at least its LFA's bound: the ideal max(sum of tile cycles,
sum of DRAM cycles) raised by head-and-tail terms (`bounds.program_bound`, restricted to
FLG starts). The LFA segment model with its `head_tail` group, without its `buffer` group
and with the bound pinned to its exact value (`lfa.SegmentModel.pin_ideal`), gives every
LFA of an order this bound and excludes none. Then:
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

from mipsched.core import Candidate
from mipsched.dlsa_starts import prefetch_dlsa, tight_dlsa
from mipsched.evaluate import Evaluation, buffer_profile, evaluate
from mipsched.formulations.bounds import program_bound
from mipsched.formulations.dlsa import solve_dlsa, whole_model_fits
from mipsched.formulations.lfa import (
    GROUPS,
    SegmentCache,
    SegmentModel,
    SegmentTable,
    unfused_tally,
)
from mipsched.formulations.solver import enumerate_solutions, solve
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Dlsa, Lfa, ScheduleError
from mipsched.schedule.tile_program import TileProgram
from mipsched.workload.graph import Workload

#: Most computing orders the search enumerates; beyond, it does not claim the whole space.
MAX_ORDERS = 64
#: Most layers the LFA relaxation and the exact search take on: they need every segment
#: of the order (n^2 / 2 FLG candidates per tiling number) to cover the whole space.
MAX_LAYERS = 16
#: Most LFAs one slice enumerates before the search gives up on completeness.
MAX_ENUMERATED = 1_000_000
#: CP-SAT time for one model run (the least LFA bound, or one LFA's DLSA), seconds.
RUN_SECONDS = 20.0
#: CP-SAT time for an LFA's DLSA when the search first meets it, seconds: one that is not
#: settled by then waits until the search has been through every LFA (with a better
#: incumbent by then, which often settles it at once: a 176-tile program of a 5-layer
#: DAG on a 10 kB buffer took 20 s unsettled against a 4,912-cycle incumbent and 0.6 s
#: against 4,622).
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
        if max(buffer_profile(program, tight_dlsa(program))) > \
                program.buffer_capacity_bytes:
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
            model = _relaxed_model(lowerer, tuple(order), tilings, deadline, shared,
                                   upper=None if math.isinf(search.best_latency)
                                   else int(search.best_latency))
        except TimeoutError:
            unbuilt = True
            break
        models.append((_least_bound(model, deadline, workers, seed, stop), len(models),
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


def relaxation_bound(lowerer: Lowerer, time_limit: float | None = None,
                     workers: int | None = None, seed: int = 0,
                     tilings: tuple[int, ...] | None = None,
                     max_orders: int = MAX_ORDERS, shared: SegmentCache | None = None,
                     upper: int | None = None) -> tuple[float, bool]:
    """The least LFA bound (the ideal raised by the head-and-tail terms) over the LFAs of
    every order (cycles), or the CP-SAT proven bound when a run does not finish; and
    whether every order was covered (not so when there are more than `max_orders`, or
    time runs out first: the value is then no bound). `shared`: segments summarised
    before, by another relaxation of the same workload and hardware. `upper`: the
    latency of some schedule whose tilings are among `tilings` (cycles): LFAs bounded
    above it are left out (see _relaxed_model)."""
    tilings = tilings or power_tilings(lowerer.workload)
    shared = {} if shared is None else shared

    def least_bound(order: tuple[str, ...], deadline: float | None) -> float:
        return _least_bound(_relaxed_model(lowerer, order, tilings, deadline, shared,
                                           upper), deadline, workers, seed)

    return _least_over_orders(lowerer, time_limit, max_orders, least_bound)


def energy_relaxation_bound(lowerer: Lowerer, time_limit: float | None = None,
                            workers: int | None = None, seed: int = 0,
                            tilings: tuple[int, ...] | None = None,
                            max_orders: int = MAX_ORDERS, shared: SegmentCache | None = None,
                            upper_pj: float | None = None) -> tuple[float, bool]:
    """The least energy over the LFAs of every order (pJ, static power excluded: the
    energy of an LFA does not depend on its DLSA), from the segment model's energy
    objective without its buffer group (or its proven CP-SAT bound when a run does not
    finish); and whether every order was covered (as in relaxation_bound). Segment
    energies are rounded to the model's unit, so the bound is lowered by half a unit per
    FLG. `shared` as in relaxation_bound. `upper_pj`: the energy (static excluded) of
    some LFA whose tilings are among `tilings`: FLGs whose tiles alone take more are
    left out, which changes no least value."""
    tilings = tilings or power_tilings(lowerer.workload)
    shared = {} if shared is None else shared

    def least_energy(order: tuple[str, ...], deadline: float | None) -> float:
        n = len(order)
        keys = [(i, j, t) for i in range(n) for j in range(i + 1, n + 1) for t in tilings]
        table = SegmentTable(lowerer, order, keys, deadline, with_buffer=False,
                             shared=shared)
        if upper_pj is not None:
            table.segments = {key: seg for key, seg in table.segments.items()
                              if seg.energy_pj <= upper_pj}
        model = SegmentModel(table, "energy", 0, n, None, unfused_tally(table),
                             GROUPS - {"buffer"})
        if deadline is not None and time.perf_counter() > deadline:
            raise TimeoutError("the LFA energy model was not built in time")
        status, _ = solve(model.model, _run_seconds(deadline), workers, seed)
        if status.status == "infeasible":
            return math.inf
        units = status.bound if status.bound is not None else 0.0
        return (units - n / 2) / model.per_byte.denominator

    least, complete = _least_over_orders(lowerer, time_limit, max_orders, least_energy)
    return max(least, 0.0), complete


def _least_over_orders(lowerer: Lowerer, time_limit: float | None, max_orders: int,
                       value_of: Callable[[tuple[str, ...], float | None], float]
                       ) -> tuple[float, bool]:
    """min of value_of(order, deadline) over the first `max_orders` computing orders, and
    whether that covered every order before the time limit (value_of raises
    TimeoutError when it cannot finish by the deadline)."""
    deadline = None if time_limit is None else time.perf_counter() + time_limit
    orders = list(itertools.islice(nx.all_topological_sorts(lowerer.workload.graph),
                                   max_orders + 1))
    least = math.inf
    for order in orders[:max_orders]:
        if deadline is not None and time.perf_counter() > deadline:
            return least, False
        try:
            least = min(least, value_of(tuple(order), deadline))
        except TimeoutError:
            return least, False
    return least, len(orders) <= max_orders


def power_tilings(workload: Workload) -> tuple[int, ...]:
    """Every power-of-two tiling number an FLG of `workload` could accept: 1, 2, 4, ...
    up to the most output positions (samples x rows x columns) of any layer."""
    most = max(workload.batch * lay.out.h * lay.out.w for lay in workload.layers.values())
    return tuple(2 ** k for k in range(most.bit_length()))


def _relaxed_model(lowerer: Lowerer, order: tuple[str, ...], tilings: tuple[int, ...],
                   deadline: float | None = None, shared: SegmentCache | None = None,
                   upper: int | None = None) -> SegmentModel:
    """The order's LFA bound model over every segment (FLG) and tiling number (segments
    shared with other orders' models through `shared`). With `upper` (cycles, at least
    the least bound over the whole space, e.g. the latency of a schedule in it), LFAs
    whose bound exceeds it are left out, first those with an FLG that alone computes
    longer: the least bound is unchanged, the model smaller and its numbers tamer.
    Raises TimeoutError when building it passes `deadline` (time.perf_counter())."""
    n = len(order)
    if n > MAX_LAYERS:
        raise ValueError(f"the LFA relaxation takes nets of at most {MAX_LAYERS} layers, "
                         f"not {n}")
    keys = [(i, j, t) for i in range(n) for j in range(i + 1, n + 1) for t in tilings]
    table = SegmentTable(lowerer, order, keys, deadline, with_buffer=False,
                         shared={} if shared is None else shared)
    if upper is not None:
        table.segments = {key: seg for key, seg in table.segments.items()
                          if seg.compute_cycles <= upper}
    model = SegmentModel(table, "ideal", 0, n, None, unfused_tally(table),
                         (GROUPS - {"buffer"}) | {"head_tail", "fit"}, upper)
    model.pin_ideal()
    if deadline is not None and time.perf_counter() > deadline:
        raise TimeoutError("the LFA bound model was not built in time")
    return model


def _least_bound(model: SegmentModel, deadline: float | None, workers: int | None,
                 seed: int, stop: threading.Event | None = None) -> float:
    """The least LFA bound of the model's order (cycles; the proven CP-SAT bound when the
    run does not finish; inf when the order has no LFA)."""
    status, _ = solve(model.model, _run_seconds(deadline), workers, seed, stop)
    if status.status == "infeasible":
        return math.inf
    return status.bound if status.bound is not None else 0.0


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

    left = None if search.deadline is None else max(0.01,
                                                      search.deadline - time.perf_counter())
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
                     _run_seconds(deadline, seconds),
                     workers, seed, stop=stop,
                     below=None if math.isinf(below) else int(below))
    assert sol.dlsa is not None  # never worse than its hint
    settled = sol.status.status in ("optimal", "infeasible")
    lower = None if settled else max(program_bound(program), sol.lower_bound or 0)
    return sol.dlsa, evaluate(program, sol.dlsa), lower


#: Steps of prefetch_dlsa's walk (tiles a living duration is moved by) per second, on
#: the bound `prefetch_steps` gives: measured 8 to 21 million on programs of 7,000 to
#: 10,000 tiles (2 to 4 s each), so this is on the safe side.
PREFETCH_STEPS_PER_SECOND = 5e6


def prefetch_steps(program: TileProgram, start: Dlsa) -> int:
    """An upper bound on the steps prefetch_dlsa(program, start) takes: every load's
    Start moved to its earliest tile, every store's End to its latest."""
    return sum(max(b - t.lo, 0) if t.is_load else max(t.hi - e, 0)
               for t, (b, e) in zip(program.tensors, start.living, strict=True))


def prefetch_affordable(program: TileProgram, start: Dlsa, deadline: float | None) -> bool:
    """Whether prefetch_dlsa(program, start), which has no deadline of its own, surely
    ends before `deadline` (time.perf_counter(); None: always)."""
    return deadline is None or prefetch_steps(program, start) <= \
        PREFETCH_STEPS_PER_SECOND * (deadline - time.perf_counter())


def constructed_dlsa(program: TileProgram, deadline: float | None = None
                     ) -> tuple[Dlsa, Evaluation]:
    """The fastest of the constructed DLSAs that fit (tight, default, and the prefetching
    ones grown from each, those that surely end before `deadline`) of a program whose
    tight DLSA fits, with its evaluation."""
    tight = tight_dlsa(program)
    starts = [tight]
    if prefetch_affordable(program, tight, deadline):
        starts.append(prefetch_dlsa(program, tight))
    default = default_dlsa(program)
    default_ev = evaluate(program, default)
    if default_ev.fits:
        starts.append(default)
        if prefetch_affordable(program, default, deadline):
            starts.append(prefetch_dlsa(program, default))
    evaluated = [(d, default_ev if d is default else evaluate(program, d)) for d in starts]
    return min(evaluated, key=lambda pair: pair[1].latency_cycles)


def _run_seconds(deadline: float | None, seconds: float = RUN_SECONDS) -> float:
    """`seconds`, or what is left before the deadline if that is less."""
    if deadline is None:
        return seconds
    return max(0.01, min(seconds, deadline - time.perf_counter()))
