"""`mipsched compare`'s runs: several methods on several networks, one CompareRow each.

A row per (network, method) with its result, plus one per named stage before it: SA
`sa:stage1` and `sa:stage2` (SoMa Fig. 6's Ours_1 / Ours_2; the `sa` row repeats stage
2), auto also `auto:cpsat` when the models improved on SA, the partition methods
`:unfused` (their starting point).
Ratios are against a chosen baseline method on the same network: speedup = baseline
latency / latency, energy and EDP as fractions of the baseline's. Every row carries the
network's strongest known latency bound and its gap to it; the pseudo-method `bound`
adds the LFA relaxation (`mipsched bound`) and `exact` the branch and bound's bound.
Every row's schedule has been replayed by the simulator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from mipsched.core import Candidate
from mipsched.errors import InputError
from mipsched.hw.model import Hardware
from mipsched.solve.bounds import bound_report
from mipsched.solve.methods import METHODS
from mipsched.solve.network import SolveOutcome, simulator_rejection, solve_network
from mipsched.workload.graph import Workload

BOUND = "bound"
"""Pseudo-method of `--methods`: a row with every bound of `mipsched bound` (no schedule)."""


@dataclass(kw_only=True)
class CompareRow:
    """One row of the comparison: a method's (or stage's) schedule on a network. Units:
    cycles, pJ, pJ x cycles (edp), bytes, seconds; None where the row has no schedule."""

    network: str
    method: str
    status: str
    latency_cycles: int | None = None
    energy_pj: float | None = None
    edp: float | None = None
    utilization: float | None = None
    dram_bytes: int | None = None
    n_lg: int | None = None
    n_flg: int | None = None
    n_tiles: int | None = None
    ideal_cycles: int | None = None
    """max(sum of tile cycles, sum of DRAM cycles) of the row's LFA."""
    runtime_s: float
    speedup: float | None = None
    energy_ratio: float | None = None
    edp_ratio: float | None = None
    lower_bound_cycles: int | None = None
    """The strongest latency bound known for the network (every method's proven bounds
    and, with the `bound` pseudo-method, the LFA relaxation)."""
    gap: float | None = None
    """(latency - lower bound) / latency: how far the row can be from the optimum."""
    reason: str | None = None
    mac_utilization: float | None = None
    """Network MACs / (MACs per cycle x latency); `utilization` is SoMa's."""
    avg_buffer_bytes: float | None = None
    """Buffer occupancy weighted by tile compute time (SoMa Fig. 6)."""


def methods_and_baseline(methods: str, baseline: str | None) -> tuple[list[str], str]:
    """The methods of `--methods` (comma-separated; BOUND among them) and the method
    the ratios are against (default: the first that schedules); InputError for an
    unknown one or a baseline not among them."""
    chosen = [m.strip() for m in methods.split(",") if m.strip()]
    unknown = [m for m in chosen if m not in METHODS and m != BOUND]
    real = [m for m in chosen if m != BOUND]
    if unknown or not real:
        raise InputError(f"unknown method '{unknown[0] if unknown else methods}' "
                         f"(available: {', '.join(METHODS)}, and {BOUND})")
    base = baseline or real[0]
    if base not in real:
        raise InputError(f"--baseline '{base}' is not among the --methods that "
                         "schedule")
    return chosen, base


def _row(network: str, method: str, cand: Candidate, runtime: float,
         status: str = "feasible") -> CompareRow:
    """The row of one schedule."""
    ev = cand.evaluation
    return CompareRow(network=network, method=method, status=status,
                      latency_cycles=ev.latency_cycles, energy_pj=ev.energy_pj, edp=ev.edp,
                      utilization=ev.utilization, dram_bytes=ev.dram_bytes,
                      n_lg=len(cand.lfa.dram_cuts) + 1, n_flg=len(cand.lfa.flc) + 1,
                      n_tiles=cand.program.n_tiles, ideal_cycles=cand.program.ideal_cycles,
                      runtime_s=runtime, mac_utilization=ev.mac_utilization,
                      avg_buffer_bytes=ev.avg_buffer_bytes)


def compare_methods(workloads: Iterable[Workload], methods: list[str], hw: Hardware,
                    baseline: str | None, seed: int = 0, time_limit: float | None = None,
                    objective: str = "edp", progress: Callable[[str], None] | None = None
                    ) -> list[CompareRow]:
    """Runs every method on every workload (each within `time_limit` seconds) and fills
    the ratio columns against `baseline` and the gaps to the strongest bound (cycles)."""
    rows: list[CompareRow] = []
    for wl in workloads:
        first = len(rows)
        bounds: list[int] = []
        for method in methods:
            if progress:
                progress(f"{wl.name} b{wl.batch}: {method}")
            if method == BOUND:
                report = bound_report(wl, hw, time_limit)
                bounds.append(report.latency.cycles)
                rows.append(CompareRow(network=wl.name, method=BOUND,
                                       status=report.latency.binding,
                                       runtime_s=report.wall_seconds))
                continue
            outcome = solve_network(wl, hw, method, seed, time_limit, objective)
            bounds.append(outcome.bound.cycles)
            rows += _outcome_rows(wl.name, method, outcome)
        _fill_ratios(rows[first:], baseline)
        _fill_gaps(rows[first:], max(bounds, default=None))
    return rows


def _outcome_rows(network: str, method: str, outcome: SolveOutcome) -> list[CompareRow]:
    """The rows of one run: its stages (each replayed by the simulator), then its result."""
    if outcome.candidate is None:
        return [CompareRow(network=network, method=method, status=outcome.status,
                           runtime_s=outcome.wall_seconds, reason=outcome.reason)]
    rows = []
    for stage, cand in outcome.stages.items():  # solve replayed its result already
        rejection = None if cand is outcome.candidate else simulator_rejection(cand)
        if rejection is not None:
            rows.append(CompareRow(network=network, method=f"{method}:{stage}",
                                   status="error", runtime_s=outcome.wall_seconds,
                                   reason=rejection))
        else:
            rows.append(_row(network, f"{method}:{stage}", cand, outcome.wall_seconds))
    rows.append(_row(network, method, outcome.candidate, outcome.wall_seconds,
                     outcome.status))
    return rows


def _fill_ratios(rows: list[CompareRow], baseline: str | None) -> None:
    """Speedup, energy and EDP ratios of every row with a schedule against the first
    `baseline` row with one (none when there is no such row)."""
    base = next((r for r in rows if r.method == baseline and r.latency_cycles), None)
    if base is None:
        return
    for r in rows:
        if r.latency_cycles:
            r.speedup = base.latency_cycles / r.latency_cycles
            r.energy_ratio = r.energy_pj / base.energy_pj
            r.edp_ratio = r.edp / base.edp


def _fill_gaps(rows: list[CompareRow], bound_cycles: int | None) -> None:
    """Every row's network bound (cycles) and, where it has a schedule, its gap to it."""
    for r in rows:
        r.lower_bound_cycles = bound_cycles
        if r.latency_cycles and r.lower_bound_cycles is not None:
            r.gap = (r.latency_cycles - r.lower_bound_cycles) / r.latency_cycles
