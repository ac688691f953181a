"""The LFA relaxation: lower bounds over every LFA of every computing order, from the
segment model without its buffer group (DESIGN §3-4).

Every schedule's latency is at least its LFA's bound: the ideal max(sum of tile cycles,
sum of DRAM cycles) raised by head-and-tail terms (`bounds.program_bound`, restricted to
FLG starts). The segment model with its `head_tail` and `fit` groups, without its
`buffer` group and with the bound pinned to its exact value (`SegmentModel.pin_ideal`),
gives every LFA of an order this bound and excludes none (`relaxed_model`), so its
optimum over every order is a latency bound (`relaxation_bound`); the model's energy
objective likewise gives an energy bound (`energy_relaxation_bound`). The exact search
enumerates the relaxed models' LFAs.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable

import networkx as nx

from mipsched.core import seconds_left
from mipsched.formulations.lfa.model import GROUPS, Groups, SegmentModel
from mipsched.formulations.lfa.segments import SegmentCache, SegmentTable, unfused_tally
from mipsched.formulations.solver import solve
from mipsched.schedule.lowering import Lowerer
from mipsched.workload.graph import Workload

#: Most computing orders the relaxations and the exact search enumerate; beyond, they do
#: not claim the whole space.
MAX_ORDERS = 64
#: Most layers the LFA relaxation and the exact search take on: they need every segment
#: of the order (n^2 / 2 FLG candidates per tiling number) to cover the whole space.
MAX_LAYERS = 16
#: CP-SAT time for one model run (the least LFA bound, or one LFA's DLSA), seconds.
RUN_SECONDS = 20.0


def relaxation_bound(lowerer: Lowerer, time_limit: float | None = None,
                     workers: int | None = None, seed: int = 0,
                     tilings: tuple[int, ...] | None = None,
                     max_orders: int = MAX_ORDERS, shared: SegmentCache | None = None,
                     upper: int | None = None) -> tuple[float, bool]:
    """The least LFA bound (the ideal raised by the head-and-tail terms) over the LFAs of
    every order (cycles), or the CP-SAT proven bound when a run does not finish; and
    whether every order was covered (not so when there are more than `max_orders`, or
    `time_limit` (seconds) runs out first: the value is then no bound). `shared`:
    segments summarised before, by another relaxation of the same workload and
    hardware. `upper`: the latency of some schedule whose tilings are among `tilings`
    (cycles): LFAs bounded above it are left out (see relaxed_model)."""
    tilings = tilings or power_tilings(lowerer.workload)
    shared = {} if shared is None else shared

    def order_bound(order: tuple[str, ...], deadline: float | None) -> float:
        return least_bound(relaxed_model(lowerer, order, tilings, deadline, shared, upper),
                           deadline, workers, seed)

    return _least_over_orders(lowerer, time_limit, max_orders, order_bound)


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
                             GROUPS.without("buffer"))
        if deadline is not None and time.perf_counter() > deadline:
            raise TimeoutError("the LFA energy model was not built in time")
        status, _ = solve(model.model, run_seconds(deadline), workers, seed)
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


def certified_over_powers_of_two(workload: Workload) -> bool:
    """Whether `workload`'s certificates may rest on bounds proven over power-of-two tiling
    numbers only: the LFA relaxation and the exact search (nets of at most MAX_LAYERS
    layers). Covering every tiling number there would take ~80x the segments (978 tiling
    numbers against 12 on a 56 x 56 net), so on such nets every search keeps its tiling
    numbers powers of two, and its schedules stay inside the bounds' space."""
    return len(workload.layers) <= MAX_LAYERS


def relaxed_model(lowerer: Lowerer, order: tuple[str, ...], tilings: tuple[int, ...],
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
                         Groups(buffer=False, head_tail=True, fit=True), upper)
    model.pin_ideal()
    if deadline is not None and time.perf_counter() > deadline:
        raise TimeoutError("the LFA bound model was not built in time")
    return model


def least_bound(model: SegmentModel, deadline: float | None, workers: int | None,
                seed: int, stop: threading.Event | None = None) -> float:
    """The least LFA bound of the model's order (cycles; the proven CP-SAT bound when the
    run does not finish; inf when the order has no LFA)."""
    status, _ = solve(model.model, run_seconds(deadline), workers, seed, stop)
    if status.status == "infeasible":
        return math.inf
    return status.bound if status.bound is not None else 0.0


def run_seconds(deadline: float | None, seconds: float = RUN_SECONDS) -> float:
    """`seconds` for one CP-SAT run, or what is left before the deadline
    (time.perf_counter()) if that is less, never below 0.01 s."""
    left = seconds_left(deadline)
    if left is None:
        return seconds
    return max(0.01, min(seconds, left))
