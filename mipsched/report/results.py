"""What a run writes and prints as JSON (DESIGN §4, §5): the result objects of solve,
eval, simulate and bound, the certificates, and the output directory of `solve` (which
files a run leaves there: schedule.json, program.json, certificate.json)."""

from __future__ import annotations

import importlib.metadata
import json
import re
from pathlib import Path
from typing import Any

from mipsched.atomic import write_json_atomic, write_text_atomic
from mipsched.evaluate import Evaluation, mac_utilization, utilization
from mipsched.formulations.bounds import LatencyBound
from mipsched.hw.model import Hardware
from mipsched.schedule.notation import Dlsa
from mipsched.schedule.schedule_file import save_schedule
from mipsched.schedule.tile_program import TileProgram
from mipsched.sim import SimResult
from mipsched.solve import BoundReport, ProgramOutcome, SolveOutcome
from mipsched.solve.bounds import energy_and_edp
from mipsched.workload.graph import Workload


def evaluation_json(ev: Evaluation, workload: Workload | None) -> dict[str, Any]:
    """The machine-interface figures of one evaluated schedule (DESIGN §5)."""
    return {
        "latency_cycles": ev.latency_cycles,
        "energy_pj": ev.energy_pj,
        "edp": ev.edp,
        "utilization": ev.utilization,
        "mac_utilization": ev.mac_utilization,
        "peak_buffer_bytes": ev.peak_buffer_bytes,
        "avg_buffer_bytes": ev.avg_buffer_bytes,
        "dram_bytes": ev.dram_bytes,
        "compute_cycles": ev.compute_cycles,
        "dram_cycles": ev.dram_cycles,
        "compute_busy": ev.compute_busy,
        "dram_busy": ev.dram_busy,
        "stall_cycles": ev.stall_cycles,
        "total_macs": workload.total_macs if workload else None,
        "weight_bytes": workload.total_weight_bytes if workload else None,
    }


def simulation_json(sim: SimResult, workload: Workload | None,
                    program: TileProgram) -> dict[str, Any]:
    """The machine-interface figures of one simulated schedule (DESIGN §5)."""
    return {
        "latency_cycles": sim.latency_cycles,
        "energy_pj": sim.energy_pj,
        "edp": sim.energy_pj * sim.latency_cycles,
        "utilization": utilization(program, sim.latency_cycles),
        "mac_utilization": mac_utilization(program, sim.latency_cycles),
        "peak_buffer_bytes": sim.peak_buffer_bytes,
        "avg_buffer_bytes": sim.avg_buffer_bytes,
        "time_avg_buffer_bytes": sim.time_avg_buffer_bytes,
        "dram_bytes": sum(t.bytes for t in sim.transfers),
        "compute_busy": sim.compute_busy,
        "dram_busy": sim.dram_busy,
        "stall_cycles": sim.stall_cycles,
        "stalled_tiles": len(sim.stalls),
        "energy_by_component": sim.energy_by_component,
        "total_macs": workload.total_macs if workload else None,
        "weight_bytes": workload.total_weight_bytes if workload else None,
    }


def outcome_json(outcome: SolveOutcome, workload: Workload) -> dict[str, Any]:
    """Result object of `solve --json`."""
    out: dict[str, Any] = {"network": workload.name, "batch": workload.batch}
    if outcome.candidate is not None:
        c = outcome.candidate
        out.update(evaluation_json(c.evaluation, workload))
        lfa = c.lfa
        out.update(n_lg=len(lfa.dram_cuts) + 1, n_flg=len(lfa.flc) + 1,
                   n_tiles=c.program.n_tiles, n_dram_tensors=len(c.program.tensors),
                   gap=(c.evaluation.latency_cycles - outcome.bound.cycles)
                   / c.evaluation.latency_cycles)
    else:
        out.update(latency_cycles=None, energy_pj=None, edp=None, utilization=None,
                   mac_utilization=None, peak_buffer_bytes=None, avg_buffer_bytes=None,
                   dram_bytes=None, gap=None,
                   total_macs=workload.total_macs, weight_bytes=workload.total_weight_bytes)
    out.update(method=outcome.method, status=outcome.status,
               lower_bound_cycles=outcome.bound.cycles, wall_seconds=outcome.wall_seconds,
               gap_target=outcome.gap_target, stopped_by=outcome.stopped_by)
    if outcome.reason:
        out["reason"] = outcome.reason
    return out


def certificate_json(outcome: SolveOutcome, workload: Workload, hw: Hardware) -> dict[str, Any]:
    """certificate.json (DESIGN §4): what was solved, how, and how far from the bound."""
    c = outcome.candidate
    ev = c.evaluation if c else None
    return {
        "format": "mipsched-certificate",
        "version": 1,
        "workload": {"name": workload.name, "batch": workload.batch,
                     "digest": workload.digest()},
        "hardware": {"name": hw.name, "digest": hw.digest()},
        "method": outcome.method,
        "objective": outcome.objective,
        "seed": outcome.seed,
        "time_limit_s": outcome.time_limit,
        "wall_seconds": outcome.wall_seconds,
        "solver_versions": {pkg: _version(pkg) for pkg in ("mipsched", "ortools", "pulp")},
        "incumbent": None if ev is None else {
            "latency_cycles": ev.latency_cycles, "energy_pj": ev.energy_pj, "edp": ev.edp},
        "lower_bound": bounds_json(outcome.bound, workload, hw),
        "gap": None if ev is None else
        (ev.latency_cycles - outcome.bound.cycles) / ev.latency_cycles,
        "gap_split": None if outcome.gap_split is None else outcome.gap_split.to_json(),
        "status": outcome.status,
        "reason": outcome.reason,
        "gap_target": outcome.gap_target,
        "target_latency_cycles": outcome.target_latency,
        "stopped_by": outcome.stopped_by,
        "trail": trail_json(outcome.trail),
        "models": [m.to_json() for m in outcome.models],
    }


def trail_json(points: list[tuple[float, int, float]]) -> list[dict[str, Any]]:
    """The certificate's `trail`: one object per improvement of the best schedule."""
    return [{"seconds": seconds, "latency_cycles": latency, "cost": cost}
            for seconds, latency, cost in points]


def bounds_json(bound: LatencyBound, workload: Workload, hw: Hardware) -> dict[str, Any]:
    """Every bound with its derivation; latency_cycles is the binding one."""
    energy, edp = energy_and_edp(workload, hw, bound)
    return {"latency_cycles": bound.cycles, "binding": bound.binding,
            "components": bound.components, "derivation": bound.derivation,
            "energy_pj": energy.value, "edp": edp.value,
            "bounds": [{"name": b.name, "value": b.value, "derivation": b.derivation}
                       for b in (*bound.bounds, energy, edp)]}


def bound_report_json(report: BoundReport, workload: Workload, hw: Hardware
                      ) -> dict[str, Any]:
    """Result object of `bound --json`."""
    return {"network": workload.name, "batch": workload.batch, "hardware": hw.name,
            "total_macs": workload.total_macs, "weight_bytes": workload.total_weight_bytes,
            "lower_bound_cycles": report.latency.cycles, "binding": report.latency.binding,
            "energy_pj": report.energy.value, "edp": report.edp.value,
            "bounds": [{"name": b.name, "value": b.value, "derivation": b.derivation}
                       for b in (*report.latency.bounds, report.energy, report.edp)],
            "skipped": report.skipped, "wall_seconds": report.wall_seconds}


def _version(pkg: str) -> str | None:
    """The installed version of `pkg` (None: not installed)."""
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return None


def program_json(outcome: ProgramOutcome, program: TileProgram) -> dict[str, Any]:
    """Result object of `solve INSTANCE.json --json`."""
    ev = outcome.evaluation
    reference = program.solutions.get("reference")
    totals = program.totals
    return {
        "instance": program.name,
        **evaluation_json(ev, None),
        "total_macs": totals.total_macs if totals else None,
        "weight_bytes": totals.weight_bytes if totals else None,
        "method": outcome.method,
        "status": outcome.status,
        "lower_bound_cycles": outcome.lower_bound_cycles,
        "gap": (ev.latency_cycles - outcome.lower_bound_cycles) / ev.latency_cycles,
        "ideal_cycles": program.ideal_cycles,
        "reference_latency_cycles": reference[1] if reference else None,
        "start": outcome.start_name,
        "start_latency_cycles": outcome.start_latency,
        "wall_seconds": outcome.wall_seconds,
    }


def program_certificate(outcome: ProgramOutcome, program: TileProgram) -> dict[str, Any]:
    """certificate.json for a solved tile program."""
    ev = outcome.evaluation
    return {
        "format": "mipsched-certificate",
        "version": 1,
        "instance": {"name": program.name, "source": program.source,
                     "tiles": program.n_tiles, "dram_tensors": len(program.tensors)},
        "method": outcome.method,
        "seed": outcome.seed,
        "time_limit_s": outcome.time_limit,
        "solver_versions": {pkg: _version(pkg) for pkg in ("mipsched", "ortools", "pulp")},
        "incumbent": {"latency_cycles": ev.latency_cycles, "energy_pj": ev.energy_pj,
                      "edp": ev.edp},
        "lower_bound": {"latency_cycles": outcome.lower_bound_cycles,
                        "components": {"ideal_cycles": program.ideal_cycles},
                        "derivation": "the program bound (max(sum of tile cycles, sum of "
                                      "DRAM cycles) and head-and-tail terms, "
                                      "bounds.program_bound), raised to the DLSA model's "
                                      "proven bound when the whole program was solved"},
        "gap": (ev.latency_cycles - outcome.lower_bound_cycles) / ev.latency_cycles,
        "status": outcome.status,
        "reason": None,
        "gap_target": outcome.gap_target,
        "stopped_by": outcome.stopped_by,
        "trail": trail_json(outcome.trail),
        "models": [m.to_json() for m in outcome.models],
        "wall_seconds": outcome.wall_seconds,
    }


def safe_name(name: str) -> str:
    """A single, harmless path component made of `name`."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".") or "run"


def network_out_dir(workload: Workload, hw: Hardware, batch: int) -> Path:
    """Where `solve NET` writes without --out: out/NET-HW-bBATCH."""
    return Path("out") / safe_name(f"{workload.name}-{hw.name}-b{batch}")


def program_out_dir(file: Path) -> Path:
    """Where `solve INSTANCE.json` writes without --out: out/INSTANCE."""
    return Path("out") / safe_name(file.stem)


def write_network_run(out_dir: Path, outcome: SolveOutcome, workload: Workload,
                      hw: Hardware) -> dict[str, Any]:
    """Writes a network run into `out_dir` (created if missing): schedule.json and the
    tile program with the schedule's DLSA stored under the method's name (program.json)
    when it found a schedule, else removes those left by an earlier run; always
    certificate.json. Returns the result object (outcome_json)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    result = outcome_json(outcome, workload)
    if outcome.candidate is not None:
        c = outcome.candidate
        save_schedule(out_dir / "schedule.json", workload, hw, c.lfa, c.dlsa,
                      c.program.tensors, outcome.method, result)
        _store(c.program, outcome.method, c.dlsa, c.evaluation)
        save_program(c.program, out_dir / "program.json")
    else:
        for stale in ("schedule.json", "program.json"):
            (out_dir / stale).unlink(missing_ok=True)
    write_json_atomic(out_dir / "certificate.json", certificate_json(outcome, workload, hw))
    return result


def write_program_run(out_dir: Path, outcome: ProgramOutcome,
                      program: TileProgram) -> dict[str, Any]:
    """Writes a tile-program run into `out_dir` (created if missing): the program with
    the new DLSA stored under the method's name (program.json) and certificate.json.
    Returns the result object (program_json)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    _store(program, outcome.method, outcome.dlsa, outcome.evaluation)
    save_program(program, out_dir / "program.json")
    write_json_atomic(out_dir / "certificate.json", program_certificate(outcome, program))
    return program_json(outcome, program)


def _store(program: TileProgram, name: str, dlsa: Dlsa, ev: Evaluation) -> None:
    """Stores `dlsa` in `program` as its solution `name` (with its latency in cycles and
    peak buffer in bytes)."""
    program.solutions[name] = (dlsa, ev.latency_cycles, ev.peak_buffer_bytes)


def save_program(program: TileProgram, path: Path) -> None:
    """Writes the tile program as compact JSON (atomically; Python's C encoder, much
    faster than the indented one on programs of thousands of tiles)."""
    write_text_atomic(path, json.dumps(program.to_json(), separators=(",", ":")))
