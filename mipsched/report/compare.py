"""`mipsched compare`: several methods on several networks, one table (CSV / markdown).

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

import csv
import io
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

from mipsched.core import Candidate
from mipsched.hw.model import Hardware
from mipsched.solve import bound_report, replay_rejection, solve
from mipsched.workload.graph import Workload

BOUND = "bound"
"""Pseudo-method of `--methods`: a row with every bound of `mipsched bound` (no schedule)."""


@dataclass
class CompareRow:
    network: str
    method: str
    status: str
    latency_cycles: int | None
    energy_pj: float | None
    edp: float | None
    utilization: float | None
    dram_bytes: int | None
    n_lg: int | None
    n_flg: int | None
    n_tiles: int | None
    ideal_cycles: int | None
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


def _row(network: str, method: str, cand: Candidate, runtime: float,
         status: str = "feasible") -> CompareRow:
    ev = cand.evaluation
    return CompareRow(network, method, status, ev.latency_cycles, ev.energy_pj, ev.edp,
                      ev.utilization, ev.dram_bytes, len(cand.lfa.dram_cuts) + 1,
                      len(cand.lfa.flc) + 1, cand.program.n_tiles, cand.program.ideal_cycles,
                      runtime, mac_utilization=ev.mac_utilization,
                      avg_buffer_bytes=ev.avg_buffer_bytes)


def compare(workloads: Iterable[Workload], methods: list[str], hw: Hardware,
            baseline: str | None, seed: int = 0, time_limit: float | None = None,
            objective: str = "edp",
            progress: Callable[[str], None] | None = None) -> list[CompareRow]:
    """Runs every method on every workload and fills the ratio columns."""
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
                rows.append(CompareRow(wl.name, BOUND, report.latency.binding, None, None,
                                       None, None, None, None, None, None, None,
                                       report.wall_seconds))
                continue
            outcome = solve(wl, hw, method, seed, time_limit, objective)
            bounds.append(outcome.bound.cycles)
            if outcome.candidate is None:
                rows.append(CompareRow(wl.name, method, outcome.status, None, None, None,
                                       None, None, None, None, None, None,
                                       outcome.wall_seconds, reason=outcome.reason))
                continue
            stages = outcome.stages
            for stage in stages:  # solve replayed its result already: not again
                rejection = (None if stages[stage] is outcome.candidate
                             else replay_rejection(stages[stage]))
                if rejection is not None:
                    rows.append(CompareRow(wl.name, f"{method}:{stage}", "error", None, None,
                                           None, None, None, None, None, None, None,
                                           outcome.wall_seconds, reason=rejection))
                else:
                    rows.append(_row(wl.name, f"{method}:{stage}", stages[stage],
                                     outcome.wall_seconds))
            rows.append(_row(wl.name, method, outcome.candidate, outcome.wall_seconds,
                             outcome.status))
        _fill_ratios(rows[first:], baseline)
        for r in rows[first:]:
            r.lower_bound_cycles = max(bounds, default=None)
            if r.latency_cycles and r.lower_bound_cycles is not None:
                r.gap = (r.latency_cycles - r.lower_bound_cycles) / r.latency_cycles
    return rows


def _fill_ratios(rows: list[CompareRow], baseline: str | None) -> None:
    base = next((r for r in rows if r.method == baseline and r.latency_cycles), None)
    if base is None:
        return
    for r in rows:
        if r.latency_cycles:
            r.speedup = base.latency_cycles / r.latency_cycles
            r.energy_ratio = r.energy_pj / base.energy_pj
            r.edp_ratio = r.edp / base.edp


def to_csv(rows: list[CompareRow]) -> str:
    out = io.StringIO()
    fields = list(CompareRow.__dataclass_fields__)
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow(asdict(r))
    return out.getvalue()


def _fmt(value, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1e5 else f"{value:.3e}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


MARKDOWN_COLUMNS = (("network", "network"), ("method", "method"), ("status", "status"),
                    ("latency_cycles", "latency (cycles)"), ("energy_pj", "energy (pJ)"),
                    ("edp", "EDP"), ("utilization", "util"), ("mac_utilization", "MAC util"),
                    ("avg_buffer_bytes", "avg buffer (B)"), ("dram_bytes", "DRAM bytes"),
                    ("n_lg", "#LG"), ("n_flg", "#FLG"), ("n_tiles", "tiles"),
                    ("ideal_cycles", "ideal (cycles)"), ("runtime_s", "runtime (s)"),
                    ("speedup", "speedup"), ("energy_ratio", "energy ratio"),
                    ("edp_ratio", "EDP ratio"), ("lower_bound_cycles", "bound (cycles)"),
                    ("gap", "gap to bound"))


def to_markdown(rows: list[CompareRow]) -> str:
    head = "| " + " | ".join(title for _, title in MARKDOWN_COLUMNS) + " |"
    rule = "|" + "|".join("---" for _ in MARKDOWN_COLUMNS) + "|"
    body = ["| " + " | ".join(_fmt(getattr(r, key)) for key, _ in MARKDOWN_COLUMNS) + " |"
            for r in rows]
    return "\n".join([head, rule, *body]) + "\n"
