"""When this process started, on the time.perf_counter() clock: `--time-limit` counts
from there (Python start-up and imports included), so a run exits by the limit it was
given, as measured from outside.

Imported first by `mipsched.cli`, so that the fallback (the time this module was
imported) is when the CLI began importing wherever /proc is missing."""

from __future__ import annotations

import os
import time

IMPORTED = time.perf_counter()
"""time.perf_counter() when this module was imported (seconds)."""


def _linux_age() -> float | None:
    """Seconds since this process started, from /proc/self/stat's start time (clock
    ticks since boot) and CLOCK_BOOTTIME; None where that is not available."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # field 22 (starttime); fields[0] is field 3
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return age if 0.0 <= age <= time.perf_counter() - IMPORTED + 60.0 else None


def process_start() -> float:
    """time.perf_counter() value at which this process started (seconds): from /proc on
    Linux, else the time this module was imported."""
    age = _linux_age()
    now = time.perf_counter()
    return IMPORTED if age is None else min(now - age, IMPORTED)
