"""Chrome / Perfetto trace (JSON) and CSV of a simulated schedule.

Trace: one process with a COMPUTE track (a slice per tile; a 'stall' slice for each wait,
naming what the tile waited for, and one for the stores that drain after the last tile,
so the stall slices add up to the simulator's stall cycles), a DRAM track (a slice per
transfer) and a BUFFER counter (bytes in use). Time stamps are in microseconds at 1 GHz
(1 cycle = 1 ns), so Perfetto's time axis reads in cycles as nanoseconds.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from mipsched.atomic import write_json_atomic, write_text_atomic
from mipsched.schedule.tile_program import TileProgram
from mipsched.sim.result import SimResult

_PID = 1
_COMPUTE, _DRAM = 1, 2


def _us(cycles: int) -> float:
    return cycles / 1000.0


def chrome_trace(program: TileProgram, sim: SimResult) -> dict[str, Any]:
    """The trace as a Chrome trace-event object ({"traceEvents": [...]})."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": _PID, "name": "process_name", "args": {"name": program.name}},
        {"ph": "M", "pid": _PID, "tid": _COMPUTE, "name": "thread_name",
         "args": {"name": "COMPUTE"}},
        {"ph": "M", "pid": _PID, "tid": _DRAM, "name": "thread_name", "args": {"name": "DRAM"}},
    ]
    previous_end = 0
    for t in sim.tiles:
        if t.stall:
            cause = ("" if t.waited_for is None
                     else f"waiting for tensor {t.waited_for} "
                          f"({program.tensors[t.waited_for].kind} of "
                          f"{program.tensors[t.waited_for].layer})")
            events.append({"ph": "X", "pid": _PID, "tid": _COMPUTE, "cat": "stall",
                           "name": "stall", "ts": _us(previous_end), "dur": _us(t.stall),
                           "args": {"cycles": t.stall, "cause": cause}})
        tile = program.tiles[t.pos]
        events.append({"ph": "X", "pid": _PID, "tid": _COMPUTE, "cat": "tile",
                       "name": f"{t.layer} #{t.tile}", "ts": _us(t.start),
                       "dur": _us(t.end - t.start),
                       "args": {"pos": t.pos, "cycles": t.end - t.start,
                                "energy_pj": tile.energy_pj, "flg": tile.flg, "lg": tile.lg}})
        previous_end = t.end
    if sim.latency_cycles > previous_end:  # the engine idles while the last stores drain
        events.append({"ph": "X", "pid": _PID, "tid": _COMPUTE, "cat": "stall",
                       "name": "stall", "ts": _us(previous_end),
                       "dur": _us(sim.latency_cycles - previous_end),
                       "args": {"cycles": sim.latency_cycles - previous_end,
                                "cause": "last DRAM transfers after the last tile"}})
    for x in sim.transfers:
        events.append({"ph": "X", "pid": _PID, "tid": _DRAM, "cat": x.kind,
                       "name": f"{x.kind} {x.layer}" + ("" if x.tile is None else f" #{x.tile}"),
                       "ts": _us(x.start), "dur": _us(x.end - x.start),
                       "args": {"tensor": x.tensor, "bytes": x.bytes}})
    for step in sim.buffer:
        events.append({"ph": "C", "pid": _PID, "name": "BUFFER", "ts": _us(step.time),
                       "args": {"bytes": step.bytes}})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"latency_cycles": sim.latency_cycles,
                          "capacity_bytes": sim.capacity_bytes}}


def write_trace(path: Path, program: TileProgram, sim: SimResult) -> None:
    """Writes the Chrome / Perfetto trace to `path` (JSON, whole or not at all)."""
    write_json_atomic(path, chrome_trace(program, sim))


TRANSFER_COLUMNS = ("tensor", "kind", "layer", "tile", "bytes", "start", "end")


def transfers_csv(sim: SimResult) -> str:
    """One row per DRAM transfer in the order they ran (cycles, bytes)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(TRANSFER_COLUMNS)
    for x in sim.transfers:
        writer.writerow((x.tensor, x.kind, x.layer, "" if x.tile is None else x.tile,
                         x.bytes, x.start, x.end))
    return out.getvalue()


def write_csv(path: Path, sim: SimResult) -> None:
    """Writes the DRAM transfers as CSV to `path` (cycles, bytes; whole or not at
    all)."""
    write_text_atomic(path, transfers_csv(sim))
