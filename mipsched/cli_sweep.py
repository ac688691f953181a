"""`mipsched sweep`: run a grid of points (`sweep GRID.yaml -o DIR`), summarise one
(`sweep status DIR`) and draw it (`sweep plot DIR [-o OUT]`), with a progress bar on
stderr."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from mipsched.atomic import write_text_atomic
from mipsched.cli_common import console, progress, run_command
from mipsched.errors import InputError
from mipsched.sweep.executors import LocalExecutor, RayExecutor, default_jobs
from mipsched.sweep.grid import parse_grid, read_grid
from mipsched.sweep.journal import read_journal
from mipsched.sweep.plots import write_plots
from mipsched.sweep.results import summarise
from mipsched.sweep.runner import SweepProgress, plan_sweep, run_sweep
from mipsched.workload.resolve import resolve_network

EXIT_INTERRUPTED = 130
LOCK = "sweep.lock"


def sweep_cmd(
    target: Annotated[str, typer.Argument(
        help="The grid YAML file to run, or `status` / `plot` followed by a sweep "
             "directory.", metavar="GRID|status|plot")],
    directory: Annotated[Path | None, typer.Argument(
        help="With `status` or `plot`: the sweep directory.", show_default=False)] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Sweep directory (created; an existing one is resumed); with "
                            "`plot`: the folder for the figures (default DIR/plots).")]
    = None,
    jobs: Annotated[int | None, typer.Option(
        min=1, help="Points at once (local executor). Default: cores / workers per point.")]
    = None,
    executor: Annotated[str, typer.Option(
        help="local (a child process per point) or ray (a Ray cluster).")] = "local",
    address: Annotated[str | None, typer.Option(
        help="Ray: the cluster's address (e.g. ray://head:10001 or auto); default: a "
             "local Ray instance.")] = None,
    resume: Annotated[bool, typer.Option(
        help="Skip the points already in DIR's journal (--no-resume: refuse an existing "
             "sweep directory).")] = True,
    fmt: Annotated[str, typer.Option(
        "--format", help="With `plot`: png or svg.")] = "png",
) -> None:
    """Run every point of a sweep grid (networks x batches x hardware axes x methods x
    seeds), resumably; `status DIR` to summarise a sweep; `plot DIR` to draw its
    latency heatmaps and Pareto fronts."""
    def body() -> int:
        if target in ("status", "plot"):
            if directory is None:
                raise InputError(f"sweep {target}: give the sweep directory")
            if target == "status":
                _status(directory)
            else:
                _plot(directory, out, fmt)
            return 0
        if out is None:
            raise InputError("sweep: give the output directory with -o DIR")
        return _run_grid(Path(target), out, jobs, executor, address, resume)

    run_command(body)


def _run_grid(grid_file: Path, out: Path, jobs: int | None, executor: str,
              address: str | None, resume: bool) -> int:
    """Plans and runs the grid into `out`; exit code 130 when interrupted."""
    grid = read_grid(grid_file)
    if (out / "journal.jsonl").exists() and not resume:
        raise InputError(f"{out}: already holds a sweep (resume it, or choose another -o)")
    setup = plan_sweep(grid, lambda spec, batch: resolve_network(spec, batch, 1))
    if executor == "local":
        runner = LocalExecutor(jobs or default_jobs(grid.workers))
    elif executor == "ray":
        runner = RayExecutor(address, grid.workers)
    else:
        raise InputError(f"--executor: unknown executor '{executor}' (local, ray)")
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / LOCK, str(os.getpid()))
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeRemainingColumn(), TextColumn("{task.fields[best]}"))
    try:
        with Progress(*columns, console=progress) as bar:
            task = bar.add_task("sweep", total=len(setup.plan.points), best="")
            result = run_sweep(setup, out, runner,
                               lambda p: bar.update(task, completed=p.done, best=_best(p)))
    except KeyboardInterrupt:
        progress.print(f"interrupted: the finished points are in {out}/journal.jsonl and "
                       f"results.csv; run the same command again to resume")
        return EXIT_INTERRUPTED
    finally:
        (out / LOCK).unlink(missing_ok=True)
    console.print(f"{result.done} of {result.total} points in "
                  f"{time.perf_counter() - result.started:.0f} s; wrote {out}/results.csv, "
                  "results.parquet")
    return 0


def _best(p: SweepProgress) -> str:
    return "" if p.best_latency is None else f"best {p.best_latency:,} cycles ({p.best_point})"


def _status(directory: Path) -> None:
    """Prints the summary of the sweep in `directory`."""
    grid_file = directory / "grid.yaml"
    if not grid_file.exists():
        raise InputError(f"{directory}: not a sweep directory (no grid.yaml)")
    grid = parse_grid(grid_file.read_text(), str(grid_file), directory)
    setup = plan_sweep(grid, lambda spec, batch: resolve_network(spec, batch, 1))
    journal = read_journal(directory)
    rows = [journal[p.key] for p in setup.plan.points if p.key in journal]
    status = summarise(rows, len(setup.plan.points))
    lock = directory / LOCK
    state = "running" if lock.exists() and _alive(lock) else (
        "finished" if status.done == status.total else "stopped (resume with the same command)")
    console.print(f"{directory}: {status.done} of {status.total} points, {state}; "
                  f"{status.solve_seconds:.0f} s of solving")
    counts = sorted(status.by_status.items())
    console.print("by status: " + ", ".join(f"{k} {v}" for k, v in counts))
    table = Table("network", "batch", "best latency (cycles)", "certified gap", "point")
    for (network, batch), (latency, gap, where) in sorted(status.best.items()):
        table.add_row(network, str(batch), f"{latency:,}",
                      "—" if gap is None else f"{gap:.2%}", where)
    console.print(table)


def _plot(directory: Path, out: Path | None, fmt: str) -> None:
    """Draws the sweep in `directory` and prints the files written."""
    written = write_plots(directory, out, fmt)
    for note in written.notes:
        progress.print(f"note: {note}")
    for path in written.files:
        console.print(str(path), highlight=False, soft_wrap=True)


def _alive(lock: Path) -> bool:
    """Whether the process named in the lock file still runs."""
    try:
        os.kill(int(lock.read_text()), 0)
    except (ValueError, ProcessLookupError, PermissionError):
        return False
    return True
