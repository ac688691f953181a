"""The `mipsched` command line (typer). Bad input: one line on stderr, exit code 2.

With `--json`, stdout carries only JSON (DESIGN §5, a public contract)."""

from __future__ import annotations

from mipsched import clock  # first: the fallback start of the run's clock (clock.py)

# isort: split
import json
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from mipsched import strict
from mipsched.atomic import write_json_atomic, write_text_atomic
from mipsched.core import WindowSettings
from mipsched.errors import InputError
from mipsched.evaluate import buffer_profile, evaluate
from mipsched.hw import PRESETS, load_hardware
from mipsched.hw.load import hardware_text
from mipsched.report.compare import BOUND, compare, to_csv, to_markdown
from mipsched.report.trace import write_csv, write_trace
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.lowering import lower
from mipsched.schedule.notation import Dlsa
from mipsched.schedule.schedule_file import (
    check_tensor_names,
    is_schedule,
    parse_schedule,
    save_schedule,
)
from mipsched.schedule.tile_program import TileProgram, read_json
from mipsched.schedule.validity import overflow_message
from mipsched.sim import simulate
from mipsched.solve import (
    DEFAULT_TIME_LIMIT,
    METHODS,
    bound_report,
    bound_report_json,
    certificate_json,
    evaluation_json,
    outcome_json,
    program_certificate,
    program_json,
    simulation_json,
    solve,
    solve_program,
)
from mipsched.workload import zoo
from mipsched.workload.graph import Workload
from mipsched.workload.resolve import resolve_network
from mipsched.workload.yaml_format import dump_workload

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  pretty_exceptions_show_locals=False,
                  help="Schedule DNN workloads on an accelerator and certify the result.")
console = Console()
progress = Console(stderr=True)
"""Spinners go to stderr, so that stdout stays pure JSON with --json."""

EXIT_BAD_INPUT = 2
EXIT_NO_SCHEDULE = 1

_process_started: float | None = None
"""time.perf_counter() at which this process started, when it runs the console entry
point: `--time-limit` then counts from there (start-up and imports included)."""


def _run_started() -> float:
    """time.perf_counter() from which a command's --time-limit counts: the process start
    for the console entry point, else (the app called in-process, e.g. by a test) now."""
    return time.perf_counter() if _process_started is None else _process_started


def main(argv: list[str] | None = None) -> None:
    """Console entry point: like `app`, but a usage error (unknown option, bad number)
    is one line on stderr with exit code 2, like every other bad input. Run as the
    process's command (argv None), --time-limit counts from the process start."""
    global _process_started
    if argv is None:
        _process_started = clock.process_start()
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        code = app(args=args or ["--help"], standalone_mode=False)
    except typer.Abort:
        code = 130
    except typer.TyperException as err:
        message = err.format_message() if hasattr(err, "format_message") else str(err)
        print(f"mipsched: error: {' '.join(message.split())}", file=sys.stderr)
        code = EXIT_BAD_INPUT
    code = code if isinstance(code, int) else 0
    if argv is None:
        _exit(code)
    sys.exit(code)


def _exit(code: int) -> None:
    """Ends the process at once, its output flushed and every file already written and
    closed: without freeing the heap object by object, which after a search took up to
    0.4 s (measured on fsrcnn/edge/b4 with greedy) of a 2 s --time-limit."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _fail(message: str) -> None:
    print(f"mipsched: error: {' '.join(message.split())}", file=sys.stderr)
    raise typer.Exit(EXIT_BAD_INPUT)


def _run(body: Callable[[], int | None]) -> None:
    """Runs a command body, turning bad input into one stderr line and exit code 2."""
    try:
        code = body()
    except InputError as err:
        _fail(str(err))
    except OSError as err:
        _fail(f"{err.filename or ''}: {err.strerror or err}")
    if code:
        raise typer.Exit(code)


def _safe(name: str) -> str:
    """A single, harmless path component made of `name`."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".") or "run"


def _emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=1) + "\n")


def _figures_table(title: str, rows: dict[str, Any]) -> Table:
    table = Table(title=title, show_header=False)
    table.add_column("figure", style="bold")
    table.add_column("value", justify="right")
    for key, value in rows.items():
        if isinstance(value, float):
            text = f"{value:.4g}" if abs(value) < 1e6 else f"{value:.6e}"
        elif isinstance(value, int):
            text = f"{value:,}"
        else:
            text = str(value)
        table.add_row(key, text)
    return table


UNKNOWN_AS_ELTWISE_HELP = ("ONNX: take an operator mipsched does not know as element-wise "
                           "when its output has the shape of its inputs (docs/onnx.md).")


@app.command("solve")
def solve_cmd(
    net: str = typer.Argument(..., help="Zoo network name (see `mipsched zoo`), ONNX model "
                              "(.onnx), YAML workload (.yaml), or a tile-program / "
                              "DLSA-instance JSON (only its DLSA is solved)."),
    hw: str = typer.Option("edge", "--hw", help="Hardware preset name or YAML file."),
    batch: int = typer.Option(1, "--batch", min=1, help="Batch size."),
    unknown_as_eltwise: bool = typer.Option(False, "--unknown-as-eltwise",
                                            help=UNKNOWN_AS_ELTWISE_HELP),
    elem_bytes: int = typer.Option(1, "--elem-bytes", min=1,
                                   help="Bytes per element (1 = INT8)."),
    method: str | None = typer.Option(None, "--method", help="Scheduling method "
                                      "[default: auto for a network, cpsat for a tile "
                                      "program]: " + "; ".join(
                                          f"{k} = {m.description}"
                                          for k, m in METHODS.items())),
    objective: str = typer.Option("edp", "--objective", help="What to minimise: edp "
                                  "(energy x delay), latency or energy."),
    seed: int = typer.Option(0, "--seed", help="Random seed (recorded in the certificate)."),
    time_limit: float | None = typer.Option(None, "--time-limit", min=0.0, help="Seconds "
                                            "from process start to exit (the search ends "
                                            "earlier, leaving time to replay and write the "
                                            "result) [default: 60]."),
    gap: float | None = typer.Option(None, "--gap", min=0.0, max=0.99, help="Stop once the "
                                     "certified latency gap (latency - bound) / latency is "
                                     "at most this [default: 0.01 for auto and cpsat "
                                     "without --time-limit, else 0 (run to the end or "
                                     "the time limit)]."),
    workers: int | None = typer.Option(None, "--workers", min=1,
                                       help="CP-SAT threads [default: all cores]."),
    window_tiles: int = typer.Option(WindowSettings.tiles, "--window-tiles", min=1,
                                     help="DLSA model on a program too big for one model: "
                                     "at most this many tiles per window."),
    window_transfers: int = typer.Option(WindowSettings.transfers, "--window-transfers",
                                         min=1, help="... and this many DRAM transfers."),
    window_overlap: int = typer.Option(WindowSettings.overlap, "--window-overlap", min=0,
                                       help="Tiles shared by consecutive windows."),
    out: Path | None = typer.Option(None, "--out", help="Output directory "
                                    "[default: out/NET-HW-bBATCH or out/INSTANCE]."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object only."),
) -> None:
    """Schedule NET on a hardware; write schedule.json, certificate.json and the tile
    program (program.json, the dlsa-instance format) into --out."""
    windows = WindowSettings(tiles=window_tiles, transfers=window_transfers,
                             overlap=window_overlap)

    def body() -> int:
        if net.endswith(".json"):
            if (hw, batch, elem_bytes) != ("edge", 1, 1):
                raise InputError("--hw, --batch and --elem-bytes do not apply to a tile "
                                 "program: its hardware and tiles are fixed in the file")
            return _solve_program(Path(net), method or "cpsat", seed, time_limit, workers,
                                  windows, out, as_json, gap or 0.0)
        chosen = method or "auto"
        workload = resolve_network(net, batch, elem_bytes,
                                   unknown_as_eltwise=unknown_as_eltwise)
        hardware = load_hardware(hw)
        limit = DEFAULT_TIME_LIMIT if time_limit is None else time_limit
        with progress.status(f"solving {workload.name} on {hardware.name} with {chosen}, "
                            f"at most {limit:g} s (Ctrl-C: stop with the best so far)",
                            spinner="dots"):
            outcome = solve(workload, hardware, chosen, seed, time_limit, objective, workers,
                            windows, gap, _run_started())
        out_dir = out or Path("out") / _safe(f"{workload.name}-{hardware.name}-b{batch}")
        out_dir.mkdir(parents=True, exist_ok=True)
        result = outcome_json(outcome, workload)
        if outcome.candidate is not None:
            c = outcome.candidate
            save_schedule(out_dir / "schedule.json", workload, hardware, c.lfa, c.dlsa,
                          c.program.tensors, chosen, result)
            c.program.solutions[chosen] = (c.dlsa, c.evaluation.latency_cycles,
                                           c.evaluation.peak_buffer_bytes)
            _save_program(c.program, out_dir / "program.json")
        else:
            for stale in ("schedule.json", "program.json"):
                (out_dir / stale).unlink(missing_ok=True)
        write_json_atomic(out_dir / "certificate.json",
                          certificate_json(outcome, workload, hardware))
        if as_json:
            _emit_json(result)
        else:
            console.print(_figures_table(
                f"{workload.name} on {hardware.name}, batch {batch} — {chosen}", result))
            console.print(f"wrote {out_dir}/")
        if outcome.candidate is None:
            print(f"mipsched: no schedule: {outcome.reason}", file=sys.stderr)
            return EXIT_NO_SCHEDULE
        return 0

    _run(body)


def _save_program(program: TileProgram, path: Path) -> None:
    """Writes the tile program as compact JSON (atomically): Python's C encoder, five
    times faster than the indented one, which took 0.5 s of a 2 s run for a program of
    8,192 tiles (fsrcnn/edge/b4)."""
    write_text_atomic(path, json.dumps(program.to_json(), separators=(",", ":")))


def _solve_program(file: Path, method: str, seed: int, time_limit: float | None,
                   workers: int | None, windows: WindowSettings, out: Path | None,
                   as_json: bool, gap: float) -> int:
    """`solve INSTANCE.json`: search the DLSA of a fixed tile program."""
    data = read_json(file)
    if is_schedule(data):
        raise InputError(f"{file} is a schedule.json: replay it with `mipsched eval`, or "
                         "solve its network by name")
    program = TileProgram.from_json(data)
    with progress.status(f"solving the DLSA of {file.name} with {method}", spinner="dots"):
        outcome = solve_program(program, method, seed, time_limit, workers, windows, gap,
                                _run_started())
    out_dir = out or Path("out") / _safe(file.stem)
    out_dir.mkdir(parents=True, exist_ok=True)
    program.solutions[method] = (outcome.dlsa, outcome.evaluation.latency_cycles,
                                 outcome.evaluation.peak_buffer_bytes)
    _save_program(program, out_dir / "program.json")
    write_json_atomic(out_dir / "certificate.json", program_certificate(outcome, program))
    result = program_json(outcome, program)
    if as_json:
        _emit_json(result)
    else:
        console.print(_figures_table(f"{file.name} — {method}", result))
        console.print(f"wrote {out_dir}/ (replay: mipsched eval {out_dir}/program.json "
                      f"--solution {method})")
    return 0


FILE_HELP = ("schedule.json, or a tile-program / DLSA instance JSON (its `reference` "
             "solution, else its only stored one, else `default`).")
SOLUTION_HELP = "For an instance: which stored DLSA to replay (reference, default)."


@dataclass(frozen=True)
class _Replayable:
    """A schedule read from a file: its tile program, DLSA and (if known) workload."""

    program: TileProgram
    dlsa: Dlsa
    workload: Workload | None
    method: str


def _load(file: Path, solution: str | None) -> _Replayable:
    data = read_json(file)
    if is_schedule(data):
        if solution is not None:
            raise InputError(f"{file}: --solution applies to tile-program instances, "
                             "not to a schedule.json")
        sched = parse_schedule(data, str(file))
        program = lower(sched.workload, sched.hw, sched.lfa)
        check_tensor_names(sched.tensor_names, program.tensors)
        return _Replayable(program, sched.dlsa, sched.workload, sched.method)
    program = TileProgram.from_json(data)
    stored = list(program.solutions)
    name = solution or ("reference" if "reference" in stored
                        else stored[0] if len(stored) == 1 else "default")
    if name in program.solutions:
        return _Replayable(program, program.solutions[name][0], None, name)
    if solution is None:
        return _Replayable(program, default_dlsa(program), None, name)
    raise InputError(f"{file}: no stored solution '{name}' "
                     f"(has: {', '.join(program.solutions) or 'none'})")


def _totals(r: _Replayable) -> dict[str, Any]:
    if r.workload is None and r.program.totals is not None:
        return {"total_macs": r.program.totals.total_macs,
                "weight_bytes": r.program.totals.weight_bytes}
    return {}


@app.command("eval")
def eval_cmd(
    file: Path = typer.Argument(..., help=FILE_HELP),
    solution: str | None = typer.Option(None, "--solution", help=SOLUTION_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object only."),
) -> None:
    """Replay a schedule with the evaluator and print its figures."""

    def body() -> int:
        r = _load(file, solution)
        program, dlsa = r.program, r.dlsa
        ev = evaluate(program, dlsa)
        result = {**evaluation_json(ev, r.workload), **_totals(r), "method": r.method,
                  "status": "feasible" if ev.fits else "infeasible",
                  "n_tiles": program.n_tiles, "n_dram_tensors": len(program.tensors),
                  "ideal_cycles": program.ideal_cycles}
        if not ev.fits:
            result["reason"] = overflow_message(program, dlsa, buffer_profile(program, dlsa))
        if as_json:
            _emit_json(result)
        else:
            console.print(_figures_table(f"{file.name} ({r.method})", result))
        return 0

    _run(body)


@app.command("simulate")
def simulate_cmd(
    file: Path = typer.Argument(..., help=FILE_HELP),
    solution: str | None = typer.Option(None, "--solution", help=SOLUTION_HELP),
    trace: Path | None = typer.Option(None, "--trace", help="Write a Chrome/Perfetto trace "
                                      "(JSON; open in ui.perfetto.dev or chrome://tracing)."),
    csv_path: Path | None = typer.Option(None, "--csv", help="Write the DRAM transfers as "
                                         "CSV (tensor, kind, layer, tile, bytes, start, end)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object only."),
) -> None:
    """Replay a schedule in the discrete-event simulator: figures, stalls, trace, CSV."""

    def body() -> int:
        r = _load(file, solution)
        sim = simulate(r.program, r.dlsa)  # SimulationError is bad input: exit 2
        result = {**simulation_json(sim, r.workload, r.program), **_totals(r),
                  "method": r.method, "status": "feasible"}
        if trace is not None:
            write_trace(trace, r.program, sim)
        if csv_path is not None:
            write_csv(csv_path, sim)
        if as_json:
            _emit_json(result)
            return 0
        summary = {k: v for k, v in result.items() if k not in ("energy_by_component",
                                                                 "stalled_tiles")}
        console.print(_figures_table(f"{file.name} ({r.method}) — simulated", summary))
        energy = Table(title="energy by component")
        energy.add_column("component")
        energy.add_column("pJ", justify="right")
        energy.add_column("share", justify="right")
        for name, pj in sim.energy_by_component.items():
            energy.add_row(name, f"{pj:.6e}", f"{pj / sim.energy_pj:.1%}")
        console.print(energy)
        worst = sorted(sim.stalls, key=lambda t: -t.stall)[:10]
        if worst:
            stalls = Table(title=f"longest stalls ({len(sim.stalls)} tiles stalled)")
            for col in ("tile", "layer", "stall (cycles)", "waiting for"):
                stalls.add_column(col)
            for t in worst:
                stalls.add_row(str(t.pos), f"{t.layer} #{t.tile}", f"{t.stall:,}",
                               _waited(r.program, t.waited_for))
            console.print(stalls)
        return 0

    _run(body)


def _waited(program: TileProgram, tensor: int | None) -> str:
    if tensor is None:
        return ""
    t = program.tensors[tensor]
    return f"{t.kind} {t.layer}" + ("" if t.tile is None else f" #{t.tile}")


@app.command("plot")
def plot_cmd(
    file: Path = typer.Argument(..., help=FILE_HELP),
    output: Path = typer.Option(..., "-o", "--output", help="Picture to write: .png or .svg"),
    solution: str | None = typer.Option(None, "--solution", help=SOLUTION_HELP),
) -> None:
    """Draw the schedule: DRAM and COMPUTE rows, stalls, buffer occupancy vs capacity."""

    def body() -> int:
        if output.suffix.lower() not in (".png", ".svg"):
            raise InputError(f"{output}: the picture must end in .png or .svg")
        from mipsched.report.plot import save_plot  # matplotlib: only when plotting

        r = _load(file, solution)
        sim = simulate(r.program, r.dlsa)
        save_plot(output, r.program, sim, f"{r.program.name} ({r.method})")
        console.print(f"wrote {output}")
        return 0

    _run(body)


@app.command("compare")
def compare_cmd(
    nets: list[str] = typer.Argument(..., help="Zoo network names."),
    methods: str = typer.Option("baseline,sa", "--methods",
                                help="Comma-separated methods: " + ", ".join(METHODS)
                                + f", and {BOUND} (a row of bounds, no schedule)"),
    hw: str = typer.Option("edge", "--hw", help="Hardware preset name or YAML file."),
    batch: int = typer.Option(1, "--batch", min=1, help="Batch size."),
    baseline: str | None = typer.Option(None, "--baseline", help="Method the ratios are "
                                        "against [default: the first method]."),
    objective: str = typer.Option("edp", "--objective", help="edp, latency or energy."),
    seed: int = typer.Option(0, "--seed"),
    time_limit: float | None = typer.Option(None, "--time-limit", min=0.0,
                                            help="Seconds per method and network, its "
                                            "replay included [default: 60]."),
    out: Path = typer.Option(Path("out/compare"), "--out", help="Directory for "
                             "compare.csv and compare.md."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON list only."),
) -> None:
    """Run several methods on several networks; print and write one comparison table."""

    def body() -> int:
        chosen = [m.strip() for m in methods.split(",") if m.strip()]
        unknown = [m for m in chosen if m not in METHODS and m != BOUND]
        real = [m for m in chosen if m != BOUND]
        if unknown or not real:
            raise InputError(f"unknown method '{unknown[0] if unknown else methods}' "
                             f"(available: {', '.join(METHODS)}, and {BOUND})")
        base = baseline or real[0]
        if base not in real:
            raise InputError(f"--baseline '{base}' is not among the --methods that "
                             "schedule")
        workloads = [resolve_network(n, batch) for n in nets]
        hardware = load_hardware(hw)
        out.mkdir(parents=True, exist_ok=True)
        with progress.status("comparing", spinner="dots") as status:
            rows = compare(workloads, chosen, hardware, base, seed, time_limit, objective,
                           progress=None if as_json else status.update)
        write_text_atomic(out / "compare.csv", to_csv(rows))
        markdown = to_markdown(rows)
        write_text_atomic(out / "compare.md", markdown)
        if as_json:
            _emit_json([asdict(r) for r in rows])
        else:
            table = Table(title=f"compare on {hardware.name}, batch {batch} "
                                f"(ratios vs {base}; all columns in compare.md)")
            for title in ("network", "method", "latency", "energy (µJ)", "util", "LG/FLG",
                          "tiles", "s", "speedup", "energy×", "bound", "gap"):
                table.add_column(title, justify="left" if title in ("network", "method")
                                 else "right")
            for r in rows:
                table.add_row(r.network, r.method if r.latency_cycles else
                              f"{r.method} ({r.status})",
                              *(("—",) * 4 if r.latency_cycles is None else (
                                  f"{r.latency_cycles:,}", f"{r.energy_pj / 1e6:,.1f}",
                                  f"{r.utilization:.1%}" if r.utilization else "—",
                                  f"{r.n_lg}/{r.n_flg}")),
                              "—" if r.n_tiles is None else f"{r.n_tiles:,}",
                              f"{r.runtime_s:.1f}",
                              "—" if r.speedup is None else f"{r.speedup:.2f}×",
                              "—" if r.energy_ratio is None else f"{r.energy_ratio:.2f}",
                              "—" if r.lower_bound_cycles is None
                              else f"{r.lower_bound_cycles:,}",
                              "—" if r.gap is None else f"{r.gap:.1%}")
            console.print(table)
            console.print(f"wrote {out}/compare.csv and compare.md")
        return 0

    _run(body)


@app.command("import")
def import_cmd(
    net: str = typer.Argument(..., help="ONNX model (.onnx), YAML workload (.yaml) or zoo "
                              "network name."),
    output: Path = typer.Option(..., "-o", "--output", help="File to write: a YAML workload "
                                "(.yaml, .yml) or an ONNX model of the shapes (.onnx; weights "
                                "as external-data stubs)."),
    unknown_as_eltwise: bool = typer.Option(False, "--unknown-as-eltwise",
                                            help=UNKNOWN_AS_ELTWISE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object only."),
) -> None:
    """Convert a network to a YAML workload (docs/workload-yaml.md) to inspect or edit,
    or to an ONNX model of its shapes."""

    def body() -> int:
        suffix = output.suffix.lower()
        if suffix not in (".yaml", ".yml", ".onnx"):
            raise InputError(f"{output}: the output must end in .yaml, .yml or .onnx")
        workload = resolve_network(net, unknown_as_eltwise=unknown_as_eltwise)
        if suffix == ".onnx":
            from mipsched.workload.onnx_export import save_onnx  # onnx: only for a model

            save_onnx(workload, output)
        else:
            write_text_atomic(output, dump_workload(workload))
        summary = {"name": workload.name, "layers": len(workload.layers),
                   "total_macs": workload.total_macs,
                   "weight_bytes": workload.total_weight_bytes, "output": str(output)}
        if as_json:
            _emit_json(summary)
        else:
            console.print(_figures_table(f"{net} -> {output}", summary))
        return 0

    _run(body)


@app.command("bound")
def bound_cmd(
    net: str = typer.Argument(..., help="Zoo network name, ONNX model or YAML workload."),
    hw: str = typer.Option("edge", "--hw", help="Hardware preset name or YAML file."),
    batch: int = typer.Option(1, "--batch", min=1, help="Batch size."),
    elem_bytes: int = typer.Option(1, "--elem-bytes", min=1,
                                   help="Bytes per element (1 = INT8)."),
    time_limit: float | None = typer.Option(None, "--time-limit", min=0.0,
                                            help="Seconds from process start to exit "
                                            "[default: 60 s for the LFA relaxations]."),
    workers: int | None = typer.Option(None, "--workers", min=1,
                                       help="CP-SAT threads [default: all cores]."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object only."),
) -> None:
    """Print every certified lower bound of NET on a hardware (latency, energy, E x D),
    which one binds, and how each is derived."""

    def body() -> None:
        workload = resolve_network(net, batch, elem_bytes)
        hardware = load_hardware(hw)
        with progress.status(f"bounding {workload.name} on {hardware.name}", spinner="dots"):
            report = bound_report(workload, hardware, time_limit, workers, _run_started())
        if as_json:
            _emit_json(bound_report_json(report, workload, hardware))
            return
        table = Table(title=f"lower bounds: {workload.name} on {hardware.name}, batch {batch}")
        for col in ("bound", "value", "unit", "derivation"):
            table.add_column(col, justify="right" if col == "value" else "left")
        units = {"energy": "pJ", "lfa_energy": "pJ", "edp": "pJ x cycles"}
        for b in (*report.latency.bounds, report.energy, report.edp):
            mark = " (binds)" if b.name == report.latency.binding else ""
            value = f"{b.value:,.0f}" if b.value < 1e15 else f"{b.value:.4g}"
            table.add_row(b.name + mark, value, units.get(b.name, "cycles"), b.derivation)
        for name, why in report.skipped.items():
            table.add_row(name, "—", "", f"not computed: {why}")
        console.print(table)

    _run(body)


@app.command("zoo")
def zoo_cmd(
    batch: int = typer.Option(1, "--batch", min=1, help="Batch size for the totals."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON list only."),
) -> None:
    """List the built-in networks with MACs, weights, layer counts and where each comes
    from (the names SoMa uses are the SoMa reference's own networks)."""

    def body() -> None:
        rows = []
        for name in zoo.NETWORKS:
            wl = zoo.get(name, batch)
            rows.append({"name": name, "layers": len(wl.layers), "total_macs": wl.total_macs,
                         "weight_bytes": wl.total_weight_bytes, "batch": batch,
                         "source": zoo.describe(name)})
        if as_json:
            _emit_json(rows)
            return
        table = Table(title=f"mipsched zoo (batch {batch})")
        for col in ("network", "layers", "GMACs", "weights (MB)", "source"):
            table.add_column(col, justify="left" if col in ("network", "source") else "right")
        for r in rows:
            table.add_row(r["name"], str(r["layers"]), f"{r['total_macs'] / 1e9:.3f}",
                          f"{r['weight_bytes'] / 1e6:.2f}", r["source"])
        console.print(table)

    _run(body)


@app.command("hw")
def hw_cmd(as_json: bool = typer.Option(False, "--json", help="Print one JSON list only."),
           show: str | None = typer.Option(None, "--show", metavar="PRESET|FILE",
                                           help="Print a preset as commented YAML, the start "
                                           "of a custom hardware file (a file: validate it "
                                           "and print it).")) -> None:
    """List the hardware presets, or print one as YAML."""

    def body() -> None:
        if show is not None:
            hardware = load_hardware(show)
            if as_json:
                _emit_json({**strict.to_dict(hardware),
                            "peak_ops_per_cycle": hardware.peak_ops_per_cycle})
            else:
                sys.stdout.write(hardware_text(show)[0])
            return
        presets = [load_hardware(name) for name in PRESETS]
        if as_json:
            _emit_json([{**strict.to_dict(h), "peak_ops_per_cycle": h.peak_ops_per_cycle}
                        for h in presets])
            return
        table = Table(title="mipsched hardware presets")
        for col in ("preset", "MACs/cycle", "TOPS", "GBUF (MiB)", "DRAM (B/cycle)",
                    "vector ops/cycle"):
            table.add_column(col, justify="left" if col == "preset" else "right")
        for h in presets:
            table.add_row(h.name, f"{h.core_array.macs_per_cycle:,}",
                          f"{h.peak_ops_per_cycle * h.frequency_hz / 1e12:.0f}",
                          f"{h.gbuf.capacity_bytes / 2**20:.0f}",
                          str(h.dram.bytes_per_cycle), str(h.vector_unit.ops_per_cycle))
        console.print(table)

    _run(body)
