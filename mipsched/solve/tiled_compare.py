"""`mipsched compare --hw set-4x4`: SET's search and its LS / LP restrictions on several
networks of a tiled machine, one row per (network, method).

Each row is the best RA tree of one `search_method` run (the method's default seeds and
rounds, `mipsched.tiled.method.PLANS`; a fresh leaf cache each, so the wall times
compare), re-evaluated figures of that tree, the multi-core lower bounds of the network
(`tiled_bounds`) and the gaps to them, and the ratios against a baseline method on the
same network: speedup = baseline latency / latency, energy and E x D as fractions of the
baseline's.

Units: cycles, pJ, pJ x cycles (E x D), bytes, byte-hops, seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from mipsched.errors import InputError
from mipsched.hw.tiled import TiledHardware
from mipsched.solve.network import DEFAULT_TIME_LIMIT
from mipsched.tiled.bound import tiled_bounds
from mipsched.tiled.method import search_method
from mipsched.tiled.multistart import leaf_cache
from mipsched.tiled.ratree import RaTree
from mipsched.tiled.replay_check import checked_replay
from mipsched.tiled.search import OBJECTIVES
from mipsched.workload.graph import Workload

TILED_METHODS = ("set", "ls", "lp")
"""set: SET's annealing over RA trees; ls / lp: restricted to layer-sequential /
layer-pipelined trees."""


@dataclass(kw_only=True)
class TiledCompareRow:
    """One method's best tree on one network of a tiled machine; None where the row has
    no schedule (status 'error', with the reason)."""

    network: str
    batch: int
    method: str
    status: str
    latency_cycles: int | None = None
    energy_pj: float | None = None
    edp: float | None = None
    """Energy x latency, pJ x cycles."""
    dram_bytes: int | None = None
    noc_byte_hops: int | None = None
    """Sum over transfers of bytes x links crossed."""
    n_segments: int | None = None
    runtime_s: float
    """Wall seconds of the search, its start and re-evaluations included."""
    rounds_done: int | None = None
    speedup: float | None = None
    energy_ratio: float | None = None
    edp_ratio: float | None = None
    lower_bound_cycles: int | None = None
    """The strongest multi-core latency bound of the network (`tiled_bounds`)."""
    gap: float | None = None
    """(latency - lower bound) / latency."""
    edp_lower_bound: float | None = None
    """Energy bound x latency bound, pJ x cycles."""
    edp_gap: float | None = None
    """(E x D - its bound) / E x D."""
    seed: int = 0
    reason: str | None = None
    tree: RaTree | None = field(default=None, repr=False, compare=False)
    """The row's RA tree (not a column of the tables)."""


def tiled_methods_and_baseline(methods: str | None,
                               baseline: str | None) -> tuple[list[str], str]:
    """The methods of `--methods` (comma-separated; default every tiled method) and the
    one the ratios are against (default the first); InputError for a method that does
    not schedule a tiled machine, or a baseline not among them."""
    chosen = list(dict.fromkeys(m.strip() for m in (methods or ",".join(TILED_METHODS))
                                .split(",") if m.strip()))
    bad = [m for m in chosen if m not in TILED_METHODS]
    if bad or not chosen:
        raise InputError(f"--methods: '{bad[0] if bad else methods}' does not schedule a "
                         f"tiled machine (available: {', '.join(TILED_METHODS)}; every row "
                         "carries the multi-core bound)")
    base = baseline or chosen[0]
    if base not in chosen:
        raise InputError(f"--baseline '{base}' is not among the --methods")
    return chosen, base


def check_objective(objective: str) -> None:
    """InputError unless `objective` is one the search minimises."""
    if objective not in OBJECTIVES:
        raise InputError(f"--objective: '{objective}' is not one of {', '.join(OBJECTIVES)}")


def compare_tiled(workloads: Iterable[Workload], methods: list[str], hw: TiledHardware,
                  baseline: str | None = None, seed: int = 0,
                  time_limit: float | None = None, objective: str = "edp",
                  rounds_per_layer: int | None = None, jobs: int = 2,
                  progress: Callable[[str], None] | None = None) -> list[TiledCompareRow]:
    """Runs `search_method` (`jobs` processes) with every method on every workload, each
    for at most `time_limit` seconds (default 60) and `rounds_per_layer` x layers rounds
    per seed (default: the method's), and fills the ratios
    against `baseline` (default the first method) and the gaps to the bounds."""
    check_objective(objective)
    limit = DEFAULT_TIME_LIMIT if time_limit is None else time_limit
    rows: list[TiledCompareRow] = []
    for wl in workloads:
        bounds = tiled_bounds(wl, hw)
        first = len(rows)
        for method in methods:
            if progress:
                progress(f"{wl.name} b{wl.batch} on {hw.name}: {method}")
            rows.append(_run(wl, hw, method, seed, limit, objective, rounds_per_layer, jobs))
        for r in rows[first:]:
            r.lower_bound_cycles, r.edp_lower_bound = bounds.latency.value, bounds.edp
            if r.latency_cycles and r.edp:
                r.gap = (r.latency_cycles - r.lower_bound_cycles) / r.latency_cycles
                r.edp_gap = (r.edp - bounds.edp) / r.edp
        fill_ratios(rows[first:], baseline or methods[0])
    return rows


def _run(wl: Workload, hw: TiledHardware, method: str, seed: int, limit: float,
         objective: str, rounds_per_layer: int | None, jobs: int) -> TiledCompareRow:
    """The row of one search (status 'error' when SET's model cannot schedule it)."""
    began = time.perf_counter()
    leaf_cache(hw, wl).clear()  # every method starts cold: the wall times compare
    try:
        found = search_method(hw, wl, method, seed, jobs, limit, objective,
                              rounds_per_layer).best
    except ValueError as err:  # a layer kind SET's model does not cover; no start tree
        return TiledCompareRow(network=wl.name, batch=wl.batch, method=method,
                               status="error", runtime_s=time.perf_counter() - began,
                               seed=seed, reason=str(err))
    ev = found.evaluation
    _, failure = checked_replay(hw, wl, found.tree, ev, leaf_cache(hw, wl))
    if failure is not None:
        return TiledCompareRow(network=wl.name, batch=wl.batch, method=method,
                               status="error", runtime_s=time.perf_counter() - began,
                               seed=seed, reason=f"the tree failed the replay: {failure}")
    return TiledCompareRow(network=wl.name, batch=wl.batch, method=method,
                           status="feasible", latency_cycles=ev.latency,
                           energy_pj=ev.energy_pj, edp=ev.edp,
                           dram_bytes=ev.record.dram_bytes,
                           noc_byte_hops=ev.record.byte_hops, n_segments=len(ev.segments),
                           runtime_s=time.perf_counter() - began,
                           rounds_done=found.rounds_done, seed=seed, tree=found.tree)


def fill_ratios(rows: list[TiledCompareRow], baseline: str) -> None:
    """Speedup, energy and E x D ratios of every row with a schedule against the
    `baseline` row with one (none when it has no schedule)."""
    base = next((r for r in rows if r.method == baseline and r.latency_cycles), None)
    if base is None or not (base.energy_pj and base.edp):
        return
    for r in rows:
        if r.latency_cycles and r.energy_pj is not None and r.edp is not None:
            r.speedup = base.latency_cycles / r.latency_cycles
            r.energy_ratio = r.energy_pj / base.energy_pj
            r.edp_ratio = r.edp / base.edp
