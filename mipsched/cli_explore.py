"""`mipsched explore NET`: Cocco's hardware-mapping co-exploration — the buffer capacity
and the schedule chosen together to minimise capacity + alpha x (energy or DRAM bytes),
with a progress bar on stderr."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from mipsched.cli_common import (
    EXIT_NO_SCHEDULE,
    console,
    emit_json,
    progress,
    run_command,
    run_started,
)
from mipsched.core import InfeasibleError
from mipsched.errors import InputError
from mipsched.explore import (
    DEFAULT_ALPHA,
    DEFAULT_EVALUATIONS,
    METHODS,
    METRICS,
    ExploreCost,
    explore_network,
    parse_grid,
)
from mipsched.explore.files import write_explore_run
from mipsched.explore.run import ExploreResult
from mipsched.explore.space import CapacityGrid, CoSpace
from mipsched.hw.load import load_hardware
from mipsched.hw.model import Hardware
from mipsched.report.results import safe_name
from mipsched.workload.graph import Workload
from mipsched.workload.resolve import resolve_network

DEFAULT_CAPACITIES = "128KiB:3MiB:64KiB"


def explore_cmd(
    net: Annotated[str, typer.Argument(help="Zoo name, ONNX or YAML workload.")],
    hw: Annotated[str, typer.Option(help="Base hardware: a preset or a YAML file; its "
                                    "buffer capacity is what is explored.")] = "edge",
    batch: Annotated[int, typer.Option(min=1, help="Batch size.")] = 1,
    method: Annotated[str, typer.Option(
        help="ga (Cocco's GA, capacity in the genome), two-step (grid search, then the "
             "partition GA per capacity), sa, or curve (every capacity once; the best for "
             "every alpha off the lower convex hull).")] = "ga",
    alpha: Annotated[float, typer.Option(
        help="Weight of the metric: objective = capacity bytes + alpha x metric.")]
    = DEFAULT_ALPHA,
    metric: Annotated[str, typer.Option(help="energy (pJ) or dram (bytes).")] = "energy",
    capacities: Annotated[str, typer.Option(
        help="Capacity grid: LOW:HIGH:STEP or a comma list (sizes in B, KiB, MiB).")]
    = DEFAULT_CAPACITIES,
    evaluations: Annotated[int, typer.Option(
        min=1, help="Samples to score (each a partition at a capacity).")]
    = DEFAULT_EVALUATIONS,
    time_limit: Annotated[float | None, typer.Option(
        min=0.0, help="Seconds for the whole run (default: the samples budget ends it).")]
    = None,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Output directory (default out/explore-NET-HW-bB).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
    = False,
) -> None:
    """Co-explore the buffer capacity and the schedule of NET (Cocco, ASPLOS'24 Eq. 2);
    write explore.json and the best schedule (schedule.json) into --out."""
    def body() -> int:
        if method not in METHODS:
            raise InputError(f"--method: '{method}' is not one of {', '.join(METHODS)}")
        if metric not in METRICS:
            raise InputError(f"--metric: '{metric}' is not one of {', '.join(METRICS)}")
        grid = parse_grid(capacities)
        cost = ExploreCost(alpha, metric)
        workload = resolve_network(net, batch, 1)
        hardware = load_hardware(hw)
        try:
            result = _run(workload, hardware, grid, cost, evaluations, time_limit, seed,
                          method)
        except InfeasibleError as err:
            print(f"mipsched: no schedule: {err}", file=sys.stderr)
            return EXIT_NO_SCHEDULE
        out_dir = out or Path("out") / safe_name(f"explore-{workload.name}-{hardware.name}"
                                                  f"-b{batch}")
        data = write_explore_run(out_dir, result, workload)
        if as_json:
            emit_json(data)
        else:
            _show(data)
            console.print(f"wrote {out_dir}/explore.json, schedule.json")
        return 0

    run_command(body)


def _run(workload: Workload, hardware: Hardware, grid: CapacityGrid, cost: ExploreCost,
         evaluations: int, time_limit: float | None, seed: int,
         method: str) -> ExploreResult:
    """The exploration with a progress bar (samples done / budget, best objective)."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeRemainingColumn(), TextColumn("{task.fields[best]}"))
    with Progress(*columns, console=progress) as bar:
        task = bar.add_task(f"explore {workload.name} ({method})", total=evaluations,
                            best="")

        def tick(space: CoSpace) -> None:
            best = space.best
            bar.update(task, completed=space.evaluations, best="" if best is None else
                       f"best {best.objective:.4g} at {best.capacity_bytes / 1024:g} KiB")

        return explore_network(workload, hardware, method, grid, cost, evaluations, seed,
                               time_limit, run_started(), tick)


def _show(data: dict[str, Any]) -> None:
    """The terminal report: best capacity and breakdown, the hull, the convergence."""
    b = data["breakdown"]
    table = Table("", "value", title=f"{data['network']} b{data['batch']} on "
                  f"{data['hardware']} — explore {data['method']} (alpha {data['alpha']:g}, "
                  f"metric {data['metric']})")
    unit = "pJ" if data["metric"] == "energy" else "B"
    for name, value in (
            ("best capacity", f"{data['capacity_bytes']:,} B "
                              f"({data['capacity_bytes'] / 1024:g} KiB)"),
            ("objective", f"{data['objective']:,.0f}"),
            ("  buffer bytes", f"{b['buffer_bytes']:,}"),
            ("  alpha x metric", f"{b['alpha_x_metric']:,.0f}"),
            (f"metric ({data['metric']}, {unit})", f"{b['metric']:,.0f}"),
            ("latency (cycles)", f"{b['latency_cycles']:,}"),
            ("energy (pJ)", f"{b['energy_pj']:,.0f}"),
            ("DRAM (bytes)", f"{b['dram_bytes']:,}"),
            ("groups (LG = FLG)", str(data["n_groups"])),
            ("samples / lowerings", f"{data['evaluations']:,} / {data['lowerings']:,}"),
            ("seconds", f"{data['seconds']:.1f}")):
        table.add_row(name, value)
    for part, pj in b["energy_by_component"].items():
        table.add_row(f"  energy: {part} (pJ)", f"{pj:,.0f}")
    console.print(table)
    hull = Table("capacity (KiB)", f"best metric ({unit})", "optimal for alpha in",
                 title="the best capacity for every alpha (lower convex hull)")
    for v in data["hull"]:
        hi = "inf" if v["alpha_to"] is None else f"{v['alpha_to']:.4g}"
        hull.add_row(f"{v['capacity_bytes'] / 1024:g}", f"{v['metric']:,.0f}",
                     f"[{v['alpha_from']:.4g}, {hi}]")
    console.print(hull)
    trace = data["trace"]
    if trace:
        final = trace[-1]["objective"]
        near = next(t for t in trace if t["objective"] <= final * 1.01)
        console.print(f"convergence: {len(trace)} improvements; within 1 % of the final "
                      f"objective after {near['evaluations']:,} samples "
                      f"({near['seconds']:.1f} s)")
