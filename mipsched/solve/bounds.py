"""Every lower bound of a network on a hardware, assembled in one place: the closed-form
latency bounds, raised by what a method proved; the energy and E x D bounds that
follow from the latency bound; and `mipsched bound`'s report, which adds the
weight-order bound (MIPs on HiGHS) and, on small nets, the LFA relaxations (CP-SAT)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from mipsched.core import Bound, InfeasibleError, Objective, seconds_left
from mipsched.formulations.bounds import (
    LatencyBound,
    compulsory_dram_bound,
    compute_bound,
    edp_bound,
    energy_bound,
    layer_compute_cycles,
    strongest,
    with_box_rates,
)
from mipsched.formulations.box_rates import least_box_rates
from mipsched.formulations.lfa import SegmentCache
from mipsched.formulations.lfa.relaxation import (
    MAX_LAYERS,
    MAX_ORDERS,
    certified_over_powers_of_two,
    energy_relaxation_bound,
    relaxation_bound,
)
from mipsched.formulations.sparse_groups import sparse_groups_bound
from mipsched.formulations.weight_capacity import weight_capacity_bound
from mipsched.formulations.weight_order import weight_order_bound
from mipsched.heuristics.baseline import single_flg_start, unfused_baseline
from mipsched.hw.model import Hardware
from mipsched.schedule.lowering import Lowerer
from mipsched.solve.budget import search_deadline
from mipsched.workload.graph import Workload

#: Time for the LFA relaxations of `mipsched bound` when no --time-limit is given, or on
#: nets too large for them, for the box rates and weight-order MIPs (s).
RELAXATION_SECONDS = 60.0
#: Time for the weight-order MIPs (s), at most; with a time limit, at most
#: WEIGHT_ORDER_SHARE of it (`mipsched bound`) or RUN_BOUND_SHARE of it (`solve`).
WEIGHT_ORDER_SECONDS = 10.0
WEIGHT_ORDER_SHARE = 0.25
RUN_BOUND_SHARE = 0.05
#: Share of run_bound's seconds for the box rates (the rest: the weight-capacity and
#: weight-order MIPs).
BOX_SHARE = 0.5
#: Share of the seconds left after the box rates for the stage-end groups (ResNet-50 /
#: edge / b16 needs 13 s).
GROUP_SHARE = 0.5
#: Share of the seconds left after the groups for the weight-capacity knapsacks (the
#: Fig. 6 and reference nets need 0.3 s at most).
CAPACITY_SHARE = 0.25

RELAXATION_SKIPPED = (f"not every computing order covered in time (or more than "
                      f"{MAX_ORDERS} orders): raise --time-limit")


def raised(bound: LatencyBound, proven: Sequence[Bound]) -> LatencyBound:
    """The network's latency `bound` (cycles; formulations.bounds.network_latency_bound)
    with the latency bounds a method proved added (e.g. the exact search's); `bound`
    itself when there are none."""
    return strongest([*bound.bounds, *proven], bound.compute_by_layer) if proven else bound


def run_bound(workload: Workload, hw: Hardware, seconds: float | None) -> LatencyBound:
    """The latency bound a run starts from (cycles): the closed forms, the compute bound
    raised by the layers' least tile cycles per position (box_rates, BOX_SHARE of
    `seconds`) and by the stage-end groups' excess (sparse_groups, GROUP_SHARE of the
    rest), then the weight-capacity and weight-order bounds on the same per-layer
    compute, their MIPs given the rest of `seconds` (None: no limit) and skipped where
    they cannot beat what is already found."""
    began = time.perf_counter()
    closed_form = layer_compute_cycles(workload, hw)
    rates = least_box_rates(workload, hw, closed_form,
                            None if seconds is None else began + BOX_SHARE * seconds)
    per_layer = with_box_rates(workload, closed_form, rates)

    def left(share: float = 1.0) -> float | None:
        """`share` of the seconds left (None: no limit)."""
        return None if seconds is None else \
            share * max(seconds - (time.perf_counter() - began), 0.0)

    groups_seconds = left(GROUP_SHARE)
    groups = sparse_groups_bound(workload, hw, per_layer, None if groups_seconds is None
                                 else time.perf_counter() + groups_seconds)
    closed = strongest([compute_bound(workload, hw, rates, per_layer),
                        compulsory_dram_bound(workload, hw),
                        *([groups] if groups is not None else [])])
    capacity = weight_capacity_bound(workload, hw, left(CAPACITY_SHARE), floor=closed.cycles,
                                     compute_cycles=per_layer)
    bounds = [*closed.bounds, *([capacity] if capacity is not None else [])]
    order = weight_order_bound(workload, hw, left(), floor=strongest(bounds).cycles,
                               compute_cycles=per_layer)
    return strongest([*bounds, *([order] if order is not None else [])], per_layer)


def energy_and_edp(workload: Workload, hw: Hardware, latency: LatencyBound,
                   relaxed_energy: float | None = None) -> tuple[Bound, Bound]:
    """The energy bound (pJ) and the E x D bound (pJ x cycles) that follow from the
    latency bound; `relaxed_energy` (pJ without static power, the LFA relaxation's)
    replaces the closed form when it, plus static power over `latency`, is larger."""
    energy = energy_bound(workload, hw, latency.cycles)
    static = hw.static_pj_per_cycle * latency.cycles
    if relaxed_energy is not None and relaxed_energy + static > energy.value:
        energy = Bound("lfa_energy", relaxed_energy + static,
                       "least energy over every LFA (all orders, FLC and DRAM cut sets, "
                       "power-of-two tilings; energy does not depend on the DLSA) + static "
                       "power x the latency bound")
    return energy, edp_bound(energy, latency)


@dataclass(frozen=True)
class BoundReport:
    """Every bound of a workload on a hardware (`mipsched bound`)."""

    latency: LatencyBound
    energy: Bound
    edp: Bound
    skipped: dict[str, str]
    """Bounds not computed, and why."""
    wall_seconds: float


def bound_report(workload: Workload, hw: Hardware, time_limit: float | None = None,
                 workers: int | None = None, started: float | None = None) -> BoundReport:
    """The network bounds with the box rates and the weight-order bound (run_bound), and
    for nets of at most MAX_LAYERS layers the LFA relaxations of latency and energy
    (CP-SAT, each given half the time left after at most WEIGHT_ORDER_SECONDS of
    run_bound). On larger nets run_bound has all the time. With `time_limit`, the run
    ends by `started` (time.perf_counter(); default now) + `time_limit` seconds, less the
    reserve for reporting (reserve_seconds); without, each relaxation gets half of
    RELAXATION_SECONDS, and on larger nets run_bound gets RELAXATION_SECONDS."""
    started = time.perf_counter() if started is None else started
    deadline = None if time_limit is None else search_deadline(started, time_limit)
    relaxed_energy = None
    n = len(workload.layers)
    relaxed = certified_over_powers_of_two(workload)
    if relaxed:
        left = seconds_left(deadline, WEIGHT_ORDER_SHARE)
        seconds = WEIGHT_ORDER_SECONDS if left is None else min(left, WEIGHT_ORDER_SECONDS)
    else:
        left = seconds_left(deadline)
        seconds = RELAXATION_SECONDS if left is None else left
    run = run_bound(workload, hw, seconds)
    latency_bounds = list(run.bounds)
    if not relaxed:
        reason = f"{n} layers: computed for nets of at most {MAX_LAYERS}"
        skipped = {"lfa_relaxation": reason, "lfa_energy": reason}
    else:
        relaxed_latency, relaxed_energy, skipped = _relaxations(
            Lowerer(workload, hw), deadline, workers)
        latency_bounds += relaxed_latency
    best = strongest(latency_bounds, run.compute_by_layer)
    energy, edp = energy_and_edp(workload, hw, best, relaxed_energy)
    return BoundReport(best, energy, edp, skipped, time.perf_counter() - started)


def _relaxations(lowerer: Lowerer, deadline: float | None, workers: int | None
                 ) -> tuple[list[Bound], float | None, dict[str, str]]:
    """The LFA relaxations: the latency bound (cycles; none when not every order was
    covered), the least energy without static power (pJ; None likewise), and the
    bounds skipped with why."""
    segments: SegmentCache = {}
    skipped: dict[str, str] = {}
    upper_cycles, upper_pj = _relaxation_upper_bounds(lowerer, deadline)
    cycles, complete = relaxation_bound(lowerer, _relaxation_seconds(deadline, 0.5),
                                        workers, shared=segments, upper=upper_cycles)
    energy_pj, energy_complete = energy_relaxation_bound(
        lowerer, _relaxation_seconds(deadline, 1.0), workers, shared=segments,
        upper_pj=upper_pj)
    latency: list[Bound] = []
    if complete:
        latency.append(Bound(
            "lfa_relaxation", math.ceil(cycles),
            "least over every LFA (all orders, FLC and DRAM cut sets, power-of-two "
            "tilings) of its ideal raised by head-and-tail terms (CP-SAT, "
            "formulations/lfa/relaxation.py)"))
    else:
        skipped["lfa_relaxation"] = RELAXATION_SKIPPED
    if not energy_complete:
        skipped["lfa_energy"] = RELAXATION_SKIPPED
    return latency, energy_pj if energy_complete else None, skipped


def _relaxation_seconds(deadline: float | None, share: float) -> float:
    """`share` of the seconds left until `deadline` (time.perf_counter()); without a
    deadline, half of RELAXATION_SECONDS (each relaxation's time)."""
    left = seconds_left(deadline, share)
    return RELAXATION_SECONDS / 2 if left is None else left


def _relaxation_upper_bounds(lowerer: Lowerer, deadline: float | None = None
                             ) -> tuple[int | None, float | None]:
    """Latency (cycles) and energy without static power (pJ) of quick schedules with
    power-of-two tilings (the better of the unfused and the single-FLG start, tried until
    `deadline`), which the LFA relaxations' least values cannot exceed; None when the
    unfused one does not fit."""
    try:
        unfused = unfused_baseline(lowerer).best
    except InfeasibleError:
        return None, None
    fused = single_flg_start(lowerer, Objective(), unfused.lfa.order, deadline=deadline)
    found = [c for c in (unfused, fused) if c is not None]
    return (min(c.evaluation.latency_cycles for c in found),
            min(c.program.energy_pj for c in found))
