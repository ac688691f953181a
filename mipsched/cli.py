"""The `mipsched` command line (typer): each command parses its options, calls one
function of solve/ or report/, and renders the result. Bad input: one line on stderr,
exit code 2.

With `--json`, stdout carries only JSON (DESIGN §5, a public contract)."""

from __future__ import annotations

from mipsched import clock  # first: the fallback start of the run's clock (clock.py)

# isort: split
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

from mipsched import cli_tiled, strict
from mipsched.atomic import write_text_atomic
from mipsched.cli_common import (
    EXIT_BAD_INPUT,
    EXIT_NO_SCHEDULE,
    console,
    mark_process_start,
    progress,
    run_started,
)
from mipsched.cli_common import emit_json as _emit_json
from mipsched.cli_common import run_command as _run
from mipsched.cli_explore import explore_cmd
from mipsched.cli_sweep import sweep_cmd
from mipsched.core import WindowSettings
from mipsched.errors import InputError
from mipsched.hw import PRESETS, load_hardware
from mipsched.hw.load import hardware_text
from mipsched.hw.tiled import (
    TILED_PRESETS,
    TiledHardware,
    load_any_hardware,
    load_tiled_hardware,
    tiled_text,
)
from mipsched.report.compare import compare_table, write_compare
from mipsched.report.replay import (
    evaluation_result,
    load_program,
    load_replayable,
    simulation_result,
)
from mipsched.report.results import (
    bound_report_json,
    network_out_dir,
    program_out_dir,
    write_network_run,
    write_program_run,
)
from mipsched.report.tables import (
    bounds_table,
    energy_table,
    figures_table,
    presets_table,
    solve_summary,
    stalls_table,
    tiled_presets_table,
    zoo_table,
)
from mipsched.sim import simulate
from mipsched.solve import (
    BOUND,
    DEFAULT_TIME_LIMIT,
    METHODS,
    bound_report,
    compare_methods,
    solve_network,
    solve_program,
)
from mipsched.solve.compare import methods_and_baseline
from mipsched.workload import zoo
from mipsched.workload.resolve import resolve_network
from mipsched.workload.yaml_format import dump_workload

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode="markdown",
                  pretty_exceptions_show_locals=False,
                  help="Schedule DNN workloads on an accelerator and certify the result.")

def main(argv: list[str] | None = None) -> None:
    """Console entry point: like `app`, but a usage error (unknown option, bad number)
    is one line on stderr with exit code 2, like every other bad input. Run as the
    process's command (argv None), --time-limit counts from the process start."""
    if argv is None:
        mark_process_start(clock.process_start())
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
    closed: without freeing the heap object by object, which after a large search takes
    a noticeable share of a short --time-limit."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _show_figures(figures: dict[str, Any], title: str, as_json: bool) -> None:
    """`figures` as the only JSON on stdout, or as a titled table."""
    if as_json:
        _emit_json(figures)
    else:
        console.print(figures_table(title, figures))


UNKNOWN_AS_ELTWISE_HELP = ("ONNX: take an operator mipsched does not know as element-wise "
                           "when its output has the shape of its inputs (docs/onnx.md).")
FILE_HELP = ("schedule.json, or a tile-program / DLSA instance JSON (its `reference` "
             "solution, else its only stored one, else `default`).")
SOLUTION_HELP = "For an instance: which stored DLSA to replay (reference, default)."

# The options several commands share.
Hw = Annotated[str, typer.Option("--hw", help="Hardware preset name or YAML file "
                                  "(single-core, or tiled: set-4x4, set-12x12).")]
Batch = Annotated[int, typer.Option("--batch", min=1, help="Batch size.")]
ElemBytes = Annotated[int, typer.Option("--elem-bytes", min=1,
                                        help="Bytes per element (1 = INT8).")]
UnknownAsEltwise = Annotated[bool, typer.Option("--unknown-as-eltwise",
                                                help=UNKNOWN_AS_ELTWISE_HELP)]
Workers = Annotated[int | None, typer.Option("--workers", min=1,
                                             help="CP-SAT threads [default: all cores].")]
JsonObject = Annotated[bool, typer.Option("--json", help="Print one JSON object only.")]
JsonList = Annotated[bool, typer.Option("--json", help="Print one JSON list only.")]
File = Annotated[Path, typer.Argument(help=FILE_HELP)]
Solution = Annotated[str | None, typer.Option("--solution", help=SOLUTION_HELP)]

# The options of `solve`.
Net = Annotated[str, typer.Argument(
    help="Zoo network name (see `mipsched zoo`), ONNX model (.onnx), YAML workload (.yaml), "
         "or a tile-program / DLSA-instance JSON (only its DLSA is solved).")]
Method = Annotated[str | None, typer.Option(
    "--method", help="Scheduling method [default: auto for a network, cpsat for a tile "
    "program, set for a tiled machine]: " + "; ".join(
        f"{k} = {m.description}" for k, m in METHODS.items())
    + "; on a tiled machine (--hw set-4x4, set-12x12): set = SET's annealing over RA "
    "trees, ls / lp = the same restricted to layer-sequential / layer-pipelined trees")]
Objective = Annotated[str, typer.Option(
    "--objective", help="What to minimise: edp (energy x delay), latency or energy.")]
Seed = Annotated[int, typer.Option("--seed",
                                   help="Random seed (recorded in the certificate).")]
SolveTimeLimit = Annotated[float | None, typer.Option(
    "--time-limit", min=0.0, help="Seconds from process start to exit (the search ends "
    "earlier, leaving time to replay and write the result) [default: 60].")]
Gap = Annotated[float | None, typer.Option(
    "--gap", min=0.0, max=0.99, help="Stop once the certified latency gap (latency - bound) "
    "/ latency is at most this [default: 0.01 for auto and cpsat without --time-limit, "
    "else 0 (run to the end or the time limit)].")]
WindowTiles = Annotated[int, typer.Option(
    "--window-tiles", min=1, help="DLSA model on a program too big for one model: at most "
    "this many tiles per window.")]
WindowTransfers = Annotated[int, typer.Option(
    "--window-transfers", min=1, help="... and this many DRAM transfers.")]
WindowOverlap = Annotated[int, typer.Option(
    "--window-overlap", min=0, help="Tiles shared by consecutive windows.")]
SolveOut = Annotated[Path | None, typer.Option(
    "--out", help="Output directory [default: out/NET-HW-bBATCH or out/INSTANCE].")]


@app.command("solve")
def solve_cmd(net: Net, hw: Hw = "edge", batch: Batch = 1,
              unknown_as_eltwise: UnknownAsEltwise = False, elem_bytes: ElemBytes = 1,
              method: Method = None, objective: Objective = "edp", seed: Seed = 0,
              time_limit: SolveTimeLimit = None, gap: Gap = None, workers: Workers = None,
              window_tiles: WindowTiles = WindowSettings.tiles,
              window_transfers: WindowTransfers = WindowSettings.transfers,
              window_overlap: WindowOverlap = WindowSettings.overlap,
              out: SolveOut = None, as_json: JsonObject = False) -> None:
    """Schedule NET on a hardware; write schedule.json, certificate.json and the tile
    program (program.json, the dlsa-instance format) into --out."""
    windows = WindowSettings(tiles=window_tiles, transfers=window_transfers,
                             overlap=window_overlap)

    def body() -> int:
        if net.endswith(".json"):
            if (hw, batch, elem_bytes) != ("edge", 1, 1):
                raise InputError("--hw, --batch and --elem-bytes do not apply to a tile "
                                 "program: its hardware and tiles are fixed in the file")
            return _solve_program_file(Path(net), method or "cpsat", seed, time_limit,
                                       workers, windows, out, as_json, gap or 0.0)
        chosen = method or "auto"
        workload = resolve_network(net, batch, elem_bytes,
                                   unknown_as_eltwise=unknown_as_eltwise)
        machine = load_any_hardware(hw)
        if isinstance(machine, TiledHardware):
            return cli_tiled.solve_tiled(workload, machine, method, seed, time_limit,
                                         objective, out, as_json, run_started(), workers)
        hardware = machine
        limit = DEFAULT_TIME_LIMIT if time_limit is None else time_limit
        with progress.status(f"solving {workload.name} on {hardware.name} with {chosen}, "
                             f"at most {limit:g} s (Ctrl-C: stop with the best so far)",
                             spinner="dots"):
            outcome = solve_network(workload, hardware, chosen, seed, time_limit, objective,
                                    workers, windows, gap, run_started())
        out_dir = out or network_out_dir(workload, hardware, batch)
        result = write_network_run(out_dir, outcome, workload, hardware)
        if as_json:
            _emit_json(result)
        else:
            console.print(solve_summary(result, outcome.gap_split, hardware.name, chosen))
            console.print(f"wrote {out_dir}/")
        if outcome.candidate is None:
            print(f"mipsched: no schedule: {outcome.reason}", file=sys.stderr)
            return EXIT_NO_SCHEDULE
        return 0

    _run(body)


def _solve_program_file(file: Path, method: str, seed: int, time_limit: float | None,
                        workers: int | None, windows: WindowSettings, out: Path | None,
                        as_json: bool, gap: float) -> int:
    """`solve INSTANCE.json`: search the DLSA of a fixed tile program."""
    program = load_program(file)
    with progress.status(f"solving the DLSA of {file.name} with {method}", spinner="dots"):
        outcome = solve_program(program, method, seed, time_limit, workers, windows, gap,
                                run_started())
    out_dir = out or program_out_dir(file)
    result = write_program_run(out_dir, outcome, program)
    if as_json:
        _emit_json(result)
    else:
        console.print(figures_table(f"{file.name} — {method}", result))
        console.print(f"wrote {out_dir}/ (replay: mipsched eval {out_dir}/program.json "
                      f"--solution {method})")
    return 0


@app.command("eval")
def eval_cmd(file: File, solution: Solution = None, as_json: JsonObject = False) -> None:
    """Replay a schedule with the evaluator and print its figures (a tiled machine's
    ratree.json: its cost model)."""

    def body() -> int:
        if cli_tiled.is_ratree(file):  # a tiled machine's RA tree: SET's cost model
            return cli_tiled.eval_ratree(file, solution, as_json)
        r = load_replayable(file, solution)
        result = evaluation_result(r)
        _show_figures(result, f"{file.name} ({r.method})", as_json)
        return 0

    _run(body)


@app.command("simulate")
def simulate_cmd(
    file: File,
    solution: Solution = None,
    trace: Annotated[Path | None, typer.Option(
        "--trace", help="Write a Chrome/Perfetto trace (JSON; open in ui.perfetto.dev or "
        "chrome://tracing).")] = None,
    csv_path: Annotated[Path | None, typer.Option(
        "--csv", help="Write the DRAM transfers as CSV (tensor, kind, layer, tile, bytes, "
        "start, end); for a ratree.json, the tasks (layer, path, subbatch, samples, cores, "
        "start, end, bytes, byte-hops, energy).")] = None,
    as_json: JsonObject = False,
) -> None:
    """Replay a schedule in the discrete-event simulator: figures, stalls, trace, CSV (a
    tiled machine's ratree.json: the replay of its RA tree, checked against the cost
    model; exit code 1 when they disagree)."""

    def body() -> int:
        if cli_tiled.is_ratree(file):  # a tiled machine's RA tree: its discrete-event replay
            return cli_tiled.simulate_ratree(file, solution, trace, csv_path, as_json)
        r = load_replayable(file, solution)
        sim, result = simulation_result(r, trace, csv_path)
        if as_json:
            _emit_json(result)
            return 0
        summary = {k: v for k, v in result.items() if k not in ("energy_by_component",
                                                                 "stalled_tiles")}
        console.print(figures_table(f"{file.name} ({r.method}) — simulated", summary))
        console.print(energy_table(sim))
        stalls = stalls_table(sim, r.program)
        if stalls is not None:
            console.print(stalls)
        return 0

    _run(body)


@app.command("plot")
def plot_cmd(
    file: File,
    output: Annotated[Path, typer.Option("-o", "--output",
                                         help="Picture to write: .png or .svg")],
    solution: Solution = None,
) -> None:
    """Draw the schedule: DRAM and COMPUTE rows, stalls, buffer occupancy vs capacity; for
    a tiled machine's ratree.json, the mesh per segment: layers on tiles, link loads."""

    def body() -> int:
        if output.suffix.lower() not in (".png", ".svg"):
            raise InputError(f"{output}: the picture must end in .png or .svg")
        if cli_tiled.is_ratree(file):  # a tiled machine's RA tree: the mesh picture
            return cli_tiled.plot_ratree(file, output, solution)
        from mipsched.report.plot import save_plot  # matplotlib: only when plotting

        r = load_replayable(file, solution)
        sim = simulate(r.program, r.dlsa)
        save_plot(output, r.program, sim, f"{r.program.name} ({r.method})")
        console.print(f"wrote {output}")
        return 0

    _run(body)


@app.command("compare")
def compare_cmd(
    nets: Annotated[list[str], typer.Argument(help="Zoo network names.")],
    methods: Annotated[str | None, typer.Option(
        "--methods", help="Comma-separated methods: " + ", ".join(METHODS)
        + f", and {BOUND} (a row of bounds, no schedule) [default: baseline,sa; on a tiled "
        "machine set,ls,lp]")] = None,
    hw: Hw = "edge",
    batch: Batch = 1,
    baseline: Annotated[str | None, typer.Option(
        "--baseline", help="Method the ratios are against [default: the first "
        "method].")] = None,
    objective: Annotated[str, typer.Option("--objective",
                                           help="edp, latency or energy.")] = "edp",
    seed: Annotated[int, typer.Option("--seed")] = 0,
    time_limit: Annotated[float | None, typer.Option(
        "--time-limit", min=0.0, help="Seconds per method and network, its replay "
        "included [default: 60].")] = None,
    out: Annotated[Path, typer.Option(
        "--out", help="Directory for compare.csv and compare.md.")] = Path("out/compare"),
    wide: Annotated[bool, typer.Option(
        "--wide", help="Print every column of the table (wider than 80 columns: "
        "utilisation, groups, tiles, runtime, ratios, bound).")] = False,
    as_json: JsonList = False,
) -> None:
    """Run several methods on several networks; print and write one comparison table."""

    def body() -> int:
        hardware = load_any_hardware(hw)
        if isinstance(hardware, TiledHardware):
            return cli_tiled.compare_tiled_cmd(nets, hardware, methods, batch, baseline,
                                               objective, seed, time_limit, out, wide,
                                               as_json)
        chosen, base = methods_and_baseline(methods or "baseline,sa", baseline)
        workloads = [resolve_network(n, batch) for n in nets]
        out.mkdir(parents=True, exist_ok=True)
        with progress.status("comparing", spinner="dots") as status:
            rows = compare_methods(workloads, chosen, hardware, base, seed, time_limit,
                                   objective, progress=None if as_json else status.update)
        write_compare(out, rows)
        if as_json:
            _emit_json([asdict(r) for r in rows])
            return 0
        title = f"compare on {hardware.name}, batch {batch}"
        console.print(compare_table(rows, f"{title}, ratios vs {base}" if wide else title,
                                    wide, console.width))
        console.print(f"wrote {out}/compare.csv and compare.md")
        return 0

    _run(body)


@app.command("import")
def import_cmd(
    net: Annotated[str, typer.Argument(help="ONNX model (.onnx), YAML workload (.yaml) or "
                                            "zoo network name.")],
    output: Annotated[Path, typer.Option(
        "-o", "--output", help="File to write: a YAML workload (.yaml, .yml) or an ONNX "
        "model of the shapes (.onnx; weights as external-data stubs).")],
    unknown_as_eltwise: UnknownAsEltwise = False,
    as_json: JsonObject = False,
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
        _show_figures(summary, f"{net} -> {output}", as_json)
        return 0

    _run(body)


@app.command("bound")
def bound_cmd(
    net: Annotated[str, typer.Argument(help="Zoo network name, ONNX model or YAML "
                                            "workload.")],
    hw: Hw = "edge",
    batch: Batch = 1,
    elem_bytes: ElemBytes = 1,
    time_limit: Annotated[float | None, typer.Option(
        "--time-limit", min=0.0, help="Seconds from process start to exit [default: 60 s "
        "for the LFA relaxations, or on nets too large for them for the box rates and "
        "the load-order MIPs; these end early when done].")] = None,
    workers: Workers = None,
    as_json: JsonObject = False,
) -> None:
    """Print every certified lower bound of NET on a hardware (latency, energy, E x D),
    which one binds, and how each is derived."""

    def body() -> None:
        workload = resolve_network(net, batch, elem_bytes)
        hardware = load_hardware(hw)
        with progress.status(f"bounding {workload.name} on {hardware.name}", spinner="dots"):
            report = bound_report(workload, hardware, time_limit, workers, run_started())
        if as_json:
            _emit_json(bound_report_json(report, workload, hardware))
        else:
            console.print(bounds_table(f"lower bounds: {workload.name} on {hardware.name}, "
                                       f"batch {batch}", report))

    _run(body)


@app.command("zoo")
def zoo_cmd(
    batch: Annotated[int, typer.Option("--batch", min=1,
                                       help="Batch size for the totals.")] = 1,
    as_json: JsonList = False,
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
        else:
            console.print(zoo_table(rows, batch))

    _run(body)


app.command("sweep")(sweep_cmd)
app.command("explore")(explore_cmd)


@app.command("hw")
def hw_cmd(
    as_json: JsonList = False,
    show: Annotated[str | None, typer.Option(
        "--show", metavar="PRESET|FILE", help="Print a preset as commented YAML, the start "
        "of a custom hardware file (a file: validate it and print it).")] = None,
) -> None:
    """List the hardware presets, or print one as YAML."""

    def body() -> None:
        if show is not None:
            hardware = load_any_hardware(show)
            if as_json:
                _emit_json({**strict.to_dict(hardware),
                            "peak_ops_per_cycle": hardware.peak_ops_per_cycle})
            elif isinstance(hardware, TiledHardware):
                sys.stdout.write(tiled_text(show))
            else:
                sys.stdout.write(hardware_text(show)[0])
            return
        presets = [load_hardware(name) for name in PRESETS]
        tiled = [load_tiled_hardware(name) for name in TILED_PRESETS]
        if as_json:
            _emit_json([{**strict.to_dict(h), "peak_ops_per_cycle": h.peak_ops_per_cycle}
                        for h in [*presets, *tiled]])
        else:
            console.print(presets_table(presets))
            console.print(tiled_presets_table(tiled))

    _run(body)
