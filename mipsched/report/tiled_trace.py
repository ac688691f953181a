"""Chrome / Perfetto trace (JSON), task CSV and segment rows of a replayed RA tree on a
tiled machine (`mipsched simulate ratree.json`; the replay is `mipsched.tiled.simulate`).

Trace: one process with a SEGMENTS track (a slice per segment invocation: its layers,
cycles, DRAM bytes, busiest link's bytes and what bounds it), a DRAM track (a slice per
segment invocation that moves DRAM bytes: the stream of its bytes through the channel)
and one track per tile, named by its (x, y), ordered by row then column. A task holds
several tiles: it is one slice on the track of each tile it holds, every slice with the
same `task` number (its row in the CSV, from 0) in its args. Time stamps are in
microseconds at 1 GHz (1 cycle = 1 ns), as in `mipsched.report.trace`, so Perfetto's
time axis reads in cycles as nanoseconds.

CSV: one row per task, by start cycle then first core (cycles, bytes, pJ).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from mipsched.atomic import write_json_atomic, write_text_atomic
from mipsched.hw.tiled import TiledHardware
from mipsched.tiled.evaluate import DEFAULT_STRIDE
from mipsched.tiled.simulate import SegmentRecord, TaskRecord, TiledTrace
from mipsched.tiled.structure import Position, core_positions

_PID = 1
_SEGMENTS, _DRAM, _FIRST_TILE = 1, 2, 3


def _us(cycles: int) -> float:
    """Cycles as trace microseconds (1 cycle = 1 ns)."""
    return cycles / 1000.0


def segment_bound(seg: SegmentRecord) -> str:
    """What ends a segment invocation: 'compute' when its tasks end last (ties
    included), else 'DRAM' when its DRAM stream does (ties with the links included),
    else 'link' (its busiest link's stream)."""
    if seg.end == seg.compute_end:
        return "compute"
    return "DRAM" if seg.end == seg.dram_end else "link"


def layer_span(layers: tuple[str, ...]) -> str:
    """`first..last (n)` for several layers, the name for one."""
    return layers[0] if len(layers) == 1 else f"{layers[0]}..{layers[-1]} ({len(layers)})"


def segment_rows(trace: TiledTrace) -> list[dict[str, Any]]:
    """One row per segment of the tree, from its first invocation (the root's sub-batch
    0; every invocation of a segment is the same): its index, first and last layers,
    cycles, DRAM bytes, busiest link's bytes and what bounds it."""
    return [{"index": s.index, "first_layer": s.layers[0], "last_layer": s.layers[-1],
             "n_layers": len(s.layers), "cycles": s.end - s.start,
             "dram_bytes": s.dram_bytes, "busiest_link_bytes": s.busiest_link_bytes,
             "bound": segment_bound(s)}
            for s in trace.segments if s.subbatch == 0]


def ordered_tasks(trace: TiledTrace) -> list[TaskRecord]:
    """The tasks by start cycle, then first core: the rows of the CSV."""
    return sorted(trace.tasks, key=lambda t: (t.start, t.first))


def _task_args(number: int, t: TaskRecord) -> dict[str, Any]:
    return {"task": number, "path": t.path, "subbatch": list(t.subbatch),
            "samples": f"{t.samples[0]}..{t.samples[1] - 1}",
            "cores": f"{t.first}..{t.last - 1}", "cycles": t.end - t.start,
            "dram_bytes": t.dram_bytes, "byte_hops": t.byte_hops, "energy_pj": t.energy_pj}


def _track_names(positions: list[Position], cols: int) -> list[dict[str, Any]]:
    """Metadata: the SEGMENTS and DRAM tracks first, then a track per tile by row."""
    tracks = [(_SEGMENTS, "SEGMENTS", 0), (_DRAM, "DRAM", 1)]
    tracks += [(_FIRST_TILE + core, f"tile ({x}, {y})", 2 + y * cols + x)
               for core, (x, y) in enumerate(positions)]
    events = []
    for tid, name, order in tracks:
        events.append({"ph": "M", "pid": _PID, "tid": tid, "name": "thread_name",
                       "args": {"name": name}})
        events.append({"ph": "M", "pid": _PID, "tid": tid, "name": "thread_sort_index",
                       "args": {"sort_index": order}})
    return events


def _segment_events(seg: SegmentRecord) -> list[dict[str, Any]]:
    """The slice of a segment invocation, and of its DRAM stream when it has one."""
    cycles = seg.end - seg.start
    events = [{"ph": "X", "pid": _PID, "tid": _SEGMENTS, "cat": "segment",
               "name": f"segment {seg.index}: {layer_span(seg.layers)}",
               "ts": _us(seg.start), "dur": _us(cycles),
               "args": {"index": seg.index, "subbatch": seg.subbatch, "cycles": cycles,
                        "compute_end": seg.compute_end, "dram_end": seg.dram_end,
                        "links_end": seg.links_end, "dram_bytes": seg.dram_bytes,
                        "byte_hops": seg.byte_hops,
                        "busiest_link_bytes": seg.busiest_link_bytes,
                        "transfer_energy_pj": seg.transfer_energy_pj,
                        "bound": segment_bound(seg)}}]
    if seg.dram_bytes:
        events.append({"ph": "X", "pid": _PID, "tid": _DRAM, "cat": "dram",
                       "name": f"segment {seg.index} DRAM", "ts": _us(seg.start),
                       "dur": _us(seg.dram_end - seg.start),
                       "args": {"bytes": seg.dram_bytes,
                                "cycles": seg.dram_end - seg.start}})
    return events


def chrome_trace(trace: TiledTrace, hw: TiledHardware, title: str,
                 stride: int = DEFAULT_STRIDE) -> dict[str, Any]:
    """The trace as a Chrome trace-event object ({"traceEvents": [...]}); `stride` is
    the core numbering's snake stride the replay used (core index -> tile (x, y))."""
    positions = core_positions(0, hw.n_tiles, hw.mesh.cols, hw.mesh.rows, stride)
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": _PID, "name": "process_name", "args": {"name": title}}]
    events += _track_names(positions, hw.mesh.cols)
    for seg in trace.segments:
        events += _segment_events(seg)
    for number, t in enumerate(ordered_tasks(trace)):
        args = _task_args(number, t)
        events += [{"ph": "X", "pid": _PID, "tid": _FIRST_TILE + core, "cat": "task",
                    "name": t.layer, "ts": _us(t.start), "dur": _us(t.end - t.start),
                    "args": args} for core in range(t.first, t.last)]
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"latency_cycles": trace.latency, "energy_pj": trace.energy_pj,
                          "hardware": hw.name}}


def write_tiled_trace(path: Path, trace: TiledTrace, hw: TiledHardware, title: str,
                      stride: int = DEFAULT_STRIDE) -> None:
    """Writes the Chrome / Perfetto trace to `path` (JSON, whole or not at all)."""
    write_json_atomic(path, chrome_trace(trace, hw, title, stride))


TASK_COLUMNS = ("layer", "path", "subbatch", "samples", "first_core", "last_core", "start",
                "end", "dram_bytes", "byte_hops", "energy_pj")
"""subbatch: the sub-batch index at every cut above the leaf, root first, as a list;
samples: first..last sample of the batch (inclusive); cores: SET's core indices,
inclusive; start, end: cycles; energy_pj: the task's compute and buffers (its DRAM and
NoC energy is charged to its segment)."""


def tasks_csv(trace: TiledTrace) -> str:
    """One row per task (`TASK_COLUMNS`), by start cycle then first core."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(TASK_COLUMNS)
    for t in ordered_tasks(trace):
        writer.writerow((t.layer, t.path, list(t.subbatch),
                         f"{t.samples[0]}..{t.samples[1] - 1}", t.first, t.last - 1,
                         t.start, t.end, t.dram_bytes, t.byte_hops, repr(t.energy_pj)))
    return out.getvalue()


def write_tasks_csv(path: Path, trace: TiledTrace) -> None:
    """Writes the tasks as CSV to `path` (cycles, bytes, pJ; whole or not at all)."""
    write_text_atomic(path, tasks_csv(trace))
