"""A schedule made for one machine, replayed on another: the warm starts of a sweep.

A schedule (LFA + DLSA) that fits a machine's buffer fits every machine with a larger
one, and its latency cannot grow when the DRAM gets faster (every tile and transfer keeps
its order; each starts when the last of its predecessors ends, and none ends later), so
the schedule of a point with less buffer or bandwidth is a valid start for the next.
"""

from __future__ import annotations

from mipsched.core import Candidate
from mipsched.evaluate import evaluate
from mipsched.hw.model import Hardware
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Dlsa, Lfa, ScheduleError
from mipsched.schedule.schedule_file import check_tensor_names
from mipsched.workload.graph import Workload


def transferred(workload: Workload, hw: Hardware, lfa: Lfa, dlsa: Dlsa,
                tensor_names: tuple[str, ...]) -> Candidate | None:
    """The schedule (`lfa`, `dlsa` with its tensors' names) lowered and evaluated on
    `hw`; None when it does not lower to the same DRAM tensors or overflows `hw`'s
    buffer."""
    try:
        program = Lowerer(workload, hw).lower(lfa, check=True)
        check_tensor_names(tensor_names, program.tensors)
        ev = evaluate(program, dlsa)
    except ScheduleError:
        return None
    if ev.peak_buffer_bytes > program.buffer_capacity_bytes:
        return None
    return Candidate(lfa, program, dlsa, ev)
