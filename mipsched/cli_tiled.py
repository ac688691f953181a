"""`mipsched solve NET --hw set-4x4`: scheduling on a tiled multi-core machine with SET's
search (method `set`, or its layer-sequential / layer-pipelined restrictions `ls`, `lp`),
writing the RA tree (ratree.json) and the certificate of its bounds."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from mipsched import strict
from mipsched.atomic import write_json_atomic
from mipsched.cli_common import console, emit_json, progress
from mipsched.errors import InputError
from mipsched.hw.tiled import TiledHardware
from mipsched.report.results import safe_name
from mipsched.report.tables import figures_table
from mipsched.tiled.bound import TiledBounds, tiled_bounds
from mipsched.tiled.ratree import tree_json
from mipsched.tiled.search import SearchResult, search
from mipsched.workload.graph import Workload

TILED_METHODS = ("set", "ls", "lp")
"""set: SET's simulated annealing over RA trees; ls / lp: the same restricted to
layer-sequential / layer-pipelined trees, as the reference code does them."""
RESULT_RESERVE_SECONDS = 1.0
"""Kept back from --time-limit for the bounds, the files and the report."""


def solve_tiled(workload: Workload, hw: TiledHardware, method: str | None, seed: int,
                time_limit: float | None, objective: str, out: Path | None,
                as_json: bool, started: float) -> int:
    """Runs the multi-core search, writes ratree.json and certificate.json into `out`
    (default out/NET-HW-bB) and prints the figures; the exit code."""
    chosen = method or "set"
    if chosen not in TILED_METHODS:
        raise InputError(f"--method: '{chosen}' does not schedule a tiled machine "
                         f"({', '.join(TILED_METHODS)})")
    limit = None
    if time_limit is not None:
        limit = max(0.0, time_limit - (time.perf_counter() - started) - RESULT_RESERVE_SECONDS)
    with progress.status(f"SET search ({chosen}) of {workload.name} on {hw.name}",
                         spinner="dots"):
        try:
            found = search(hw, workload, chosen, seed=seed, time_limit=limit,
                           objective=objective)
        except ValueError as err:  # a layer kind SET's model does not cover, no start
            raise InputError(f"{workload.name} on {hw.name}: {err}") from None
    bounds = tiled_bounds(workload, hw)
    result = _result(workload, hw, chosen, found, bounds, time.perf_counter() - started)
    out_dir = out or Path("out") / safe_name(f"{workload.name}-{hw.name}-b{workload.batch}")
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out_dir / "ratree.json", {
        "format": "mipsched-ratree", "version": 1,
        "network": {"name": workload.name, "batch": workload.batch,
                    "digest": workload.digest()},
        "hardware": strict.to_dict(hw), "method": chosen,
        "tree": tree_json(found.tree), "results": result})
    write_json_atomic(out_dir / "certificate.json", _certificate(workload, hw, bounds, result))
    if as_json:
        emit_json(result)
    else:
        console.print(figures_table(f"{workload.name} on {hw.name}, batch "
                                    f"{workload.batch} — {chosen}", result))
        console.print(f"wrote {out_dir}/")
    return 0


def _result(workload: Workload, hw: TiledHardware, method: str, found: SearchResult,
            bounds: TiledBounds, seconds: float) -> dict[str, Any]:
    """The `solve --json` object of a tiled run (the same keys as a single-core run)."""
    ev, bound = found.evaluation, bounds.latency
    return {"network": workload.name, "batch": workload.batch, "hardware": hw.name,
            "method": method, "status": "feasible",
            "latency_cycles": ev.latency, "energy_pj": ev.energy_pj, "edp": ev.edp,
            "lower_bound_cycles": bound.value,
            "gap": (ev.latency - bound.value) / ev.latency,
            "dram_bytes": ev.record.dram_bytes, "noc_byte_hops": ev.record.byte_hops,
            "n_segments": len(ev.segments),
            "total_macs": workload.total_macs, "weight_bytes": workload.total_weight_bytes,
            "start_edp": found.start_evaluation.edp, "wall_seconds": seconds}


def _certificate(workload: Workload, hw: TiledHardware, b: TiledBounds,
                 result: dict[str, Any]) -> dict[str, Any]:
    """Every multi-core bound with its derivation, the incumbent and its gap."""
    return {"format": "mipsched-certificate", "version": 1,
            "workload": {"name": workload.name, "batch": workload.batch,
                         "digest": workload.digest()},
            "hardware": {"name": hw.name, "digest": hw.digest()},
            "method": result["method"],
            "incumbent": {k: result[k] for k in ("latency_cycles", "energy_pj", "edp")},
            "lower_bound": {"latency_cycles": b.latency.value, "binding": b.latency.name,
                            "energy_pj": b.energy.value, "edp": b.edp,
                            "bounds": [{"name": x.name, "value": x.value,
                                        "derivation": x.derivation}
                                       for x in (b.compute, b.compulsory_dram, b.energy)]},
            "gap": result["gap"], "status": result["status"]}
