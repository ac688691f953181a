"""Reading a schedule file to replay (`mipsched eval`, `simulate`, `plot`: a schedule.json
or a tile program with its stored solutions) or to solve (`solve INSTANCE.json`), and
the result objects of a replay."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mipsched.errors import InputError
from mipsched.evaluate import buffer_profile, evaluate
from mipsched.report.results import evaluation_json, simulation_json
from mipsched.report.trace import write_csv, write_trace
from mipsched.schedule.lowering import lower
from mipsched.schedule.notation import Dlsa
from mipsched.schedule.schedule_file import check_tensor_names, is_schedule, parse_schedule
from mipsched.schedule.tile_program import TileProgram, read_json
from mipsched.schedule.validity import overflow_message
from mipsched.sim import SimResult, simulate
from mipsched.solve import stored_solution
from mipsched.workload.graph import Workload


@dataclass(frozen=True)
class Replayable:
    """A schedule read from a file: its tile program, DLSA and (if known) workload."""

    program: TileProgram
    dlsa: Dlsa
    workload: Workload | None
    method: str


def load_replayable(file: Path, solution: str | None) -> Replayable:
    """The schedule in `file`: a schedule.json (lowered again), or a tile program's
    stored solution `solution` (default: solve.stored_solution's choice)."""
    data = read_json(file)
    if is_schedule(data):
        if solution is not None:
            raise InputError(f"{file}: --solution applies to tile-program instances, "
                             "not to a schedule.json")
        sched = parse_schedule(data, str(file))
        program = lower(sched.workload, sched.hw, sched.lfa)
        check_tensor_names(sched.tensor_names, program.tensors)
        return Replayable(program, sched.dlsa, sched.workload, sched.method)
    program = TileProgram.from_json(data)
    try:
        name, dlsa = stored_solution(program, solution)
    except InputError as err:
        raise InputError(f"{file}: {err}") from None
    return Replayable(program, dlsa, None, name)


def load_program(file: Path) -> TileProgram:
    """The tile program in `file` whose DLSA `solve` searches (InputError for a
    schedule.json, which is replayed, not solved)."""
    data = read_json(file)
    if is_schedule(data):
        raise InputError(f"{file} is a schedule.json: replay it with `mipsched eval`, or "
                         "solve its network by name")
    return TileProgram.from_json(data)


def _totals(r: Replayable) -> dict[str, Any]:
    """The network totals a tile program carries (MACs, weight bytes) when there is no
    workload to take them from."""
    if r.workload is None and r.program.totals is not None:
        return {"total_macs": r.program.totals.total_macs,
                "weight_bytes": r.program.totals.weight_bytes}
    return {}


def evaluation_result(r: Replayable) -> dict[str, Any]:
    """Result object of `eval`: the evaluator's figures (cycles, pJ, bytes), feasible or
    infeasible (with why when the buffer overflows)."""
    program, dlsa = r.program, r.dlsa
    ev = evaluate(program, dlsa)
    result = {**evaluation_json(ev, r.workload), **_totals(r), "method": r.method,
              "status": "feasible" if ev.fits else "infeasible",
              "n_tiles": program.n_tiles, "n_dram_tensors": len(program.tensors),
              "ideal_cycles": program.ideal_cycles}
    if not ev.fits:
        result["reason"] = overflow_message(program, dlsa, buffer_profile(program, dlsa))
    return result


def simulation_result(r: Replayable, trace: Path | None = None, csv_path: Path | None = None
                      ) -> tuple[SimResult, dict[str, Any]]:
    """The simulator's replay and the result object of `simulate` (cycles, pJ, bytes);
    writes the Chrome/Perfetto `trace` and the transfers' CSV when given."""
    sim = simulate(r.program, r.dlsa)  # SimulationError is bad input: exit 2
    result = {**simulation_json(sim, r.workload, r.program), **_totals(r),
              "method": r.method, "status": "feasible"}
    if trace is not None:
        write_trace(trace, r.program, sim)
    if csv_path is not None:
        write_csv(csv_path, sim)
    return sim, result
