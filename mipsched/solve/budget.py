"""The rules every run follows, network or tile program or bounds: the time it keeps back
from --time-limit for its result, the deadline of its search, the latency its gap
target asks for, and why its search stopped."""

from __future__ import annotations

import math
import time

from mipsched.core import SearchOptions
from mipsched.errors import InputError

#: Kept back from --time-limit for what follows the search: replaying the schedule in
#: the simulator, the certificate, writing schedule.json and program.json, exiting
#: (seconds; 0.05 s for a result of a hundred tiles, 0.5 s for one of 10,240, for which
#: the partition methods keep back more: partition.RESULT_SECONDS_PER_TILE).
RESERVE_SECONDS = 0.3
#: ... plus this share of --time-limit (longer runs tend to return larger programs).
RESERVE_SHARE = 0.04
#: A search that ends within this many seconds of its deadline counts as stopped by the
#: time limit (CP-SAT's own clock starts after the model is loaded).
DEADLINE_SLACK = 0.05
#: Why a run stopped (certificate.json `stopped_by`).
STOP_REASONS = ("gap", "time_limit", "search_end", "ctrl_c")


def reserve_seconds(time_limit: float) -> float:
    """Seconds of `time_limit` (seconds) kept back for replaying, certifying and writing
    the result (see RESERVE_SECONDS)."""
    return RESERVE_SECONDS + RESERVE_SHARE * time_limit


def search_deadline(started: float, time_limit: float) -> float:
    """time.perf_counter() value at which the search of a run started at `started` with
    `time_limit` seconds must end: the limit less the reserve."""
    return started + time_limit - reserve_seconds(time_limit)


def target_latency(bound_cycles: int, gap: float) -> int | None:
    """The largest latency L (cycles) whose certified gap (L - bound) / L is at most
    `gap` (None when gap is 0: no target)."""
    if gap <= 0:
        return None
    latency = math.floor(bound_cycles / (1.0 - gap))
    while (latency + 1 - bound_cycles) <= gap * (latency + 1):
        latency += 1
    while latency > bound_cycles and (latency - bound_cycles) > gap * latency:
        latency -= 1
    return latency


def check_gap(gap: float | None) -> None:
    """Raises InputError unless gap is None or in [0, 1)."""
    if gap is not None and not 0.0 <= gap < 1.0:
        raise InputError(f"--gap must be at least 0 and below 1, not {gap:g}")


def stop_reason(options: SearchOptions, latency_cycles: int, deadline: float,
                kept_back: float = 0.0) -> str:
    """Why a search that has just returned stopped (one of STOP_REASONS): it counts as
    stopped by the time limit when it ended within `kept_back` seconds (what the
    method reserved for delivering its result) + DEADLINE_SLACK of `deadline`."""
    if options.stop.is_set():
        return "ctrl_c"
    if options.reached(latency_cycles):
        return "gap"
    if time.perf_counter() >= deadline - kept_back - DEADLINE_SLACK:
        return "time_limit"
    return "search_end"
