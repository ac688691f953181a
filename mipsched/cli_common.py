"""What every `mipsched` command shares: the consoles, the exit codes, and running a
command body so that bad input is one line on stderr with exit code 2."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console

from mipsched.errors import InputError

console = Console()
progress = Console(stderr=True)
"""Spinners and progress bars go to stderr, so that stdout stays pure JSON with --json."""

EXIT_BAD_INPUT = 2
EXIT_NO_SCHEDULE = 1

_process_started: float | None = None
"""time.perf_counter() at which this process started, when it runs the console entry
point: `--time-limit` then counts from there (start-up and imports included)."""


def mark_process_start(at: float) -> None:
    """Records the process start (time.perf_counter() seconds) for run_started."""
    global _process_started
    _process_started = at


def run_started() -> float:
    """time.perf_counter() from which a command's --time-limit counts: the process start
    for the console entry point, else (the app called in-process, e.g. by a test) now."""
    return time.perf_counter() if _process_started is None else _process_started


def fail(message: str) -> None:
    """One line on stderr and exit code 2."""
    print(f"mipsched: error: {' '.join(message.split())}", file=sys.stderr)
    raise typer.Exit(EXIT_BAD_INPUT)


def run_command(body: Callable[[], int | None]) -> None:
    """Runs a command body, turning bad input into one stderr line and exit code 2."""
    try:
        code = body()
    except InputError as err:
        fail(str(err))
    except OSError as err:
        fail(f"{err.filename or ''}: {err.strerror or err}")
    if code:
        raise typer.Exit(code)


def emit_json(obj: Any) -> None:
    """`obj` as the only JSON on stdout."""
    sys.stdout.write(json.dumps(obj, indent=1) + "\n")
