"""The commands on a tiled multi-core machine (docs/tiled.md):

- `mipsched solve NET --hw set-4x4`: SET's search (method `set`, or its
  layer-sequential / layer-pipelined restrictions `ls`, `lp`), writing the RA tree
  (ratree.json) and the certificate of its bounds;
- `mipsched plot DIR/ratree.json -o mesh.png|svg`: the mesh picture of the tree
  (`mipsched.report.mesh_plot`);
- `mipsched eval DIR/ratree.json`: the tree's figures by the cost model again;
- `mipsched simulate DIR/ratree.json [--trace T] [--csv C]`: the discrete-event replay
  (`mipsched.tiled.simulate`) checked against the cost model, its trace and task CSV
  (`mipsched.report.tiled_trace`);
- `mipsched compare NETS --hw set-4x4 --methods set,ls,lp`: the methods side by side
  (`mipsched.solve.tiled_compare`), compare.csv and compare.md.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mipsched import strict
from mipsched.atomic import write_json_atomic, write_text_atomic
from mipsched.cli_common import EXIT_NO_SCHEDULE, console, emit_json, progress
from mipsched.errors import InputError
from mipsched.hw.tiled import TiledHardware, check_tiled
from mipsched.jsonread import JsonObject
from mipsched.report.results import safe_name
from mipsched.report.tables import figures_table, tiled_segments_table
from mipsched.report.tiled_compare import (
    compare_csv,
    compare_markdown,
    compare_tiled_table,
    row_dict,
)
from mipsched.report.tiled_trace import (
    segment_rows,
    write_tasks_csv,
    write_tiled_trace,
)
from mipsched.schedule.tile_program import read_json
from mipsched.solve.tiled_compare import (
    TILED_METHODS,
    check_objective,
    compare_tiled,
    tiled_methods_and_baseline,
)
from mipsched.tiled.bound import TiledBounds, tiled_bounds
from mipsched.tiled.evaluate import Evaluation, evaluate_tree
from mipsched.tiled.method import plan_summary, search_method
from mipsched.tiled.multistart import leaf_cache
from mipsched.tiled.noc import Link, link_target
from mipsched.tiled.ratree import Cut, RaTree, check_tree, parse_tree, tree_json
from mipsched.tiled.replay_check import checked_replay
from mipsched.tiled.search import SearchResult
from mipsched.tiled.simulate import TiledTrace
from mipsched.workload.graph import Workload
from mipsched.workload.resolve import resolve_network
from mipsched.workload.yaml_format import read_workload, workload_dict
from mipsched.yamlsrc import YamlDoc

RESULT_RESERVE_SECONDS = 2.0
"""Kept back from --time-limit for the bounds, the files and the report."""
RATREE_FORMAT, RATREE_VERSION = "mipsched-ratree", 1
"""ratree.json: the network (name, batch, element size, digest, and the network itself
in the YAML workload format, as data), the hardware, the method, the tree (`tree_json`)
and the figures."""


def solve_tiled(workload: Workload, hw: TiledHardware, method: str | None, seed: int,
                time_limit: float | None, objective: str, out: Path | None,
                as_json: bool, started: float, workers: int | None = None) -> int:
    """Runs the multi-core search (the method's seeds on `workers` processes, default
    all cores), writes ratree.json and certificate.json into `out` (default
    out/NET-HW-bB) and prints the figures; the exit code."""
    chosen = method or "set"
    if workload.elem_bytes != 1:
        raise InputError(f"--elem-bytes {workload.elem_bytes}: SET's model on a tiled "
                         "machine counts 8-bit elements only (use --elem-bytes 1)")
    if chosen not in TILED_METHODS:
        raise InputError(f"--method: '{chosen}' does not schedule a tiled machine "
                         f"({', '.join(TILED_METHODS)})")
    limit = None
    if time_limit is not None:
        limit = max(0.0, time_limit - (time.perf_counter() - started) - RESULT_RESERVE_SECONDS)
    with progress.status(f"SET search ({chosen}) of {workload.name} on {hw.name}: "
                         f"{plan_summary(chosen, hw)}", spinner="dots"):
        try:
            runs = search_method(hw, workload, chosen, seed, workers or os.cpu_count() or 1,
                                 limit, objective)
        except ValueError as err:  # a layer kind SET's model does not cover, no start
            raise InputError(f"{workload.name} on {hw.name}: {err}") from None
    found = runs.best
    with progress.status(f"replaying the {chosen} tree", spinner="dots"):
        _, failure = checked_replay(hw, workload, found.tree, found.evaluation,
                                    leaf_cache(hw, workload))
    bounds = tiled_bounds(workload, hw)
    result = _result(workload, hw, chosen, found, bounds, time.perf_counter() - started)
    result["seed_costs"] = {str(k): v for k, v in runs.costs.items()}
    for name in ("recombination", "placement"):
        if (gain := getattr(runs, name)) is not None:
            result[name] = dataclasses.asdict(gain)
    result["simulated"] = failure is None
    out_dir = out or Path("out") / safe_name(f"{workload.name}-{hw.name}-b{workload.batch}")
    out_dir.mkdir(parents=True, exist_ok=True)
    if failure is None:
        write_json_atomic(out_dir / "ratree.json",
                          ratree_document(workload, hw, chosen, found.tree, result))
    else:
        _as_error(result, f"the {chosen} tree failed the replay: {failure}")
        (out_dir / "ratree.json").unlink(missing_ok=True)  # an earlier run's
    write_json_atomic(out_dir / "certificate.json", _certificate(workload, hw, bounds, result))
    if as_json:
        emit_json(result)
    else:
        console.print(figures_table(f"{workload.name} on {hw.name}, batch "
                                    f"{workload.batch} — {chosen}", result))
        console.print(f"wrote {out_dir}/")
    if failure is not None:
        print(f"mipsched: no schedule: {result['reason']}", file=sys.stderr)
        return EXIT_NO_SCHEDULE
    return 0


def _as_error(result: dict[str, Any], reason: str) -> None:
    """Turns a solve result into the one of a run without a schedule (status 'error',
    no figures of a tree, `reason`), as a single-core run reports it."""
    for key in ("latency_cycles", "energy_pj", "edp", "gap", "dram_bytes", "noc_byte_hops",
                "n_segments"):
        result[key] = None
    result.update(status="error", reason=reason)


def ratree_document(workload: Workload, hw: TiledHardware, method: str, tree: RaTree,
                    results: dict[str, Any]) -> dict[str, Any]:
    """The content of ratree.json (format `RATREE_FORMAT`): the network (embedded, so
    that the file replays without its source), the hardware, the method, the tree and
    the figures `results`."""
    return {"format": RATREE_FORMAT, "version": RATREE_VERSION,
            "network": {"name": workload.name, "batch": workload.batch,
                        "elem_bytes": workload.elem_bytes, "digest": workload.digest(),
                        "workload": workload_dict(workload)},
            "hardware": strict.to_dict(hw), "method": method, "tree": tree_json(tree),
            "results": results}


def tree_figures(workload: Workload, hw: TiledHardware, method: str, ev: Evaluation,
                 bounds: TiledBounds) -> dict[str, Any]:
    """The figures of a tree by the cost model, as `solve` and `eval` print them:
    latency (cycles), energy (pJ), E x D (pJ x cycles), the latency bound (cycles) and
    the gap to it, DRAM bytes, NoC byte-hops, segments, MACs and weight bytes."""
    bound = bounds.latency
    return {"network": workload.name, "batch": workload.batch, "hardware": hw.name,
            "method": method, "status": "feasible",
            "latency_cycles": ev.latency, "energy_pj": ev.energy_pj, "edp": ev.edp,
            "lower_bound_cycles": bound.value,
            "gap": (ev.latency - bound.value) / ev.latency,
            "dram_bytes": ev.record.dram_bytes, "noc_byte_hops": ev.record.byte_hops,
            "n_segments": len(ev.segments),
            "total_macs": workload.total_macs, "weight_bytes": workload.total_weight_bytes}


def _result(workload: Workload, hw: TiledHardware, method: str, found: SearchResult,
            bounds: TiledBounds, seconds: float) -> dict[str, Any]:
    """The `solve --json` object of a tiled run (the same keys as a single-core run):
    `tree_figures`, the start tree's E x D (pJ x cycles) and the wall seconds."""
    return {**tree_figures(workload, hw, method, found.evaluation, bounds),
            "start_edp": found.start_evaluation.edp, "wall_seconds": seconds}


def _certificate(workload: Workload, hw: TiledHardware, b: TiledBounds,
                 result: dict[str, Any]) -> dict[str, Any]:
    """Every multi-core bound with its derivation, the incumbent and its gap."""
    return {"format": "mipsched-certificate", "version": 1,
            "workload": {"name": workload.name, "batch": workload.batch,
                         "digest": workload.digest()},
            "hardware": {"name": hw.name, "digest": hw.digest()},
            "method": result["method"],
            "incumbent": None if result["latency_cycles"] is None else
            {k: result[k] for k in ("latency_cycles", "energy_pj", "edp")},
            "lower_bound": {"latency_cycles": b.latency.value, "binding": b.latency.name,
                            "energy_pj": b.energy.value, "edp": b.edp,
                            "bounds": [{"name": x.name, "value": x.value,
                                        "derivation": x.derivation}
                                       for x in (*b.latency_bounds, b.energy)]},
            "gap": result["gap"], "status": result["status"],
            **({"reason": result["reason"]} if "reason" in result else {})}


# --- plot: the mesh picture of a ratree.json ---------------------------------------------------
@dataclass(frozen=True)
class RatreeFile:
    """A ratree.json read back: the network, the machine, the tree and its method."""

    workload: Workload
    hw: TiledHardware
    tree: RaTree
    method: str


def is_ratree(file: Path) -> bool:
    """Whether `file` (JSON; ScheduleError when it is not) claims to be a ratree.json."""
    data = read_json(file)
    return isinstance(data, dict) and data.get("format") == RATREE_FORMAT


def load_ratree(file: Path) -> RatreeFile:
    """The ratree.json `file`; InputError (one line naming the file) when it is not one,
    its network differs from the one it was made for (digest), or its tree is not a
    valid RA tree of that network on that machine."""
    data = read_json(file)
    if not (isinstance(data, dict) and data.get("format") == RATREE_FORMAT):
        raise InputError(f"{file}: not a {RATREE_FORMAT} file (missing 'format': "
                         f"'{RATREE_FORMAT}')")
    try:
        root = JsonObject(data, "")
        if root.raw("version", None) != RATREE_VERSION:
            raise InputError(f"unsupported version {root.raw('version', None)!r}")
        net = root.obj("network")
        batch, elem_bytes = net.int("batch", lo=1), net.int("elem_bytes", lo=1, default=1)
        if net.has("workload"):
            doc = YamlDoc(net.raw("workload"), "network.workload", {})
            workload = read_workload(doc, batch, elem_bytes)
        else:  # a zoo network, named
            workload = resolve_network(net.str("name"), batch, elem_bytes)
        if workload.digest() != net.raw("digest", None):
            raise InputError(f"network '{workload.name}' (batch {batch}) differs from the "
                             "one this tree was made for (digest mismatch)")
        hw = strict.build(TiledHardware, root.raw("hardware"), "hardware")
        check_tiled(hw)
        tree = parse_tree(root.raw("tree"))
        check_tree(tree, workload, hw.n_tiles)
        return RatreeFile(workload, hw, tree, root.str("method", "unknown"))
    except InputError as err:
        raise InputError(f"{file}: {err}") from None


def plot_ratree(file: Path, output: Path, solution: str | None) -> int:
    """`mipsched plot ratree.json -o OUT`: re-evaluates the tree and writes the mesh
    picture (PNG or SVG by suffix); the exit code."""
    if solution is not None:
        raise InputError(f"{file}: --solution applies to tile-program instances, not to "
                         "a ratree.json")
    r = load_ratree(file)
    from mipsched.report.mesh_plot import mesh_picture, save_mesh_plot  # matplotlib

    try:
        picture = mesh_picture(r.hw, r.workload, r.tree, r.method)
    except ValueError as err:  # rejected by the cost model, a layer kind it lacks
        raise InputError(f"{file}: {err}") from None
    save_mesh_plot(output, picture)
    console.print(f"wrote {output}")
    return 0


# --- eval and simulate: the model and the replay of a ratree.json -----------------------------
def _no_solution(file: Path, solution: str | None) -> None:
    """InputError when --solution is given with a ratree.json."""
    if solution is not None:
        raise InputError(f"{file}: --solution applies to tile-program instances, not to "
                         "a ratree.json")


def _evaluated(file: Path, r: RatreeFile, cache: dict) -> Evaluation:
    """The cost model's evaluation of the tree in `file` (leaf searches memoised in
    `cache`); InputError naming the file when the model rejects it."""
    try:
        ev = evaluate_tree(r.hw, r.workload, r.tree, cache=cache)
    except ValueError as err:  # a layer kind the model lacks
        raise InputError(f"{file}: {err}") from None
    if ev is None:
        raise InputError(f"{file}: the RA tree of {r.workload.name} is rejected by SET's "
                         f"cost model on {r.hw.name} (an S Cut's allocation or a leaf does "
                         "not fit)")
    return ev


def _show(figures: dict[str, Any], title: str, as_json: bool) -> None:
    """`figures` as the only JSON on stdout, or as a titled table."""
    if as_json:
        emit_json(figures)
    else:
        console.print(figures_table(title, figures))


def eval_ratree(file: Path, solution: str | None, as_json: bool) -> int:
    """`mipsched eval ratree.json`: the tree's figures by the cost model again (the keys
    `solve` prints, `tree_figures`); the exit code."""
    _no_solution(file, solution)
    r = load_ratree(file)
    ev = _evaluated(file, r, {})
    figures = tree_figures(r.workload, r.hw, r.method, ev, tiled_bounds(r.workload, r.hw))
    _show(figures, f"{file.name} ({r.method})", as_json)
    return 0


def link_name(link: Link) -> str:
    """A directed link as `(x, y) -> (x', y')`."""
    x, y, _ = link
    tx, ty = link_target(link)
    return f"({x}, {y}) -> ({tx}, {ty})"


def simulation_figures(r: RatreeFile, ev: Evaluation, trace: TiledTrace,
                       failure: str | None) -> dict[str, Any]:
    """The figures of `simulate ratree.json`: the replay's latency (cycles), energy (pJ),
    E x D (pJ x cycles), DRAM bytes, NoC byte-hops, segments and their invocations,
    tasks, busiest link and its bytes over the run; the model's latency and energy and
    whether the replay equals them (`failure` is None)."""
    busiest = trace.busiest_link()
    figures = {
        "network": r.workload.name, "batch": r.workload.batch, "hardware": r.hw.name,
        "method": r.method, "status": "feasible" if failure is None else "error",
        "latency_cycles": trace.latency, "energy_pj": trace.energy_pj,
        "edp": trace.energy_pj * trace.latency, "dram_bytes": trace.dram_bytes,
        "noc_byte_hops": trace.byte_hops,
        "n_segments": len({s.index for s in trace.segments}),
        "segment_runs": len(trace.segments), "n_tasks": len(trace.tasks),
        "busiest_link": None if busiest is None else link_name(busiest[0]),
        "busiest_link_bytes": 0 if busiest is None else busiest[1],
        "model_latency_cycles": ev.latency, "model_energy_pj": ev.energy_pj,
        "matches_model": failure is None}
    if failure is not None:
        figures["reason"] = failure
    return figures


def simulate_ratree(file: Path, solution: str | None, trace_path: Path | None,
                    csv_path: Path | None, as_json: bool) -> int:
    """`mipsched simulate ratree.json`: replays the tree event by event, checks it
    against the cost model (one leaf cache for both), writes the trace and the task CSV
    when asked, prints the figures and the longest segments (or `--json`: one object,
    all segments); exit code 1 with the diagnosis when the replay breaks a rule or
    disagrees with the model (the trace and CSV of a disagreeing replay are written)."""
    _no_solution(file, solution)
    r = load_ratree(file)
    cache: dict = {}
    ev = _evaluated(file, r, cache)
    trace, failure = checked_replay(r.hw, r.workload, r.tree, ev, cache)
    if trace is None:
        if as_json:
            emit_json({"network": r.workload.name, "batch": r.workload.batch,
                       "hardware": r.hw.name, "method": r.method, "status": "error",
                       "reason": failure})
        print(f"mipsched: {file}: {failure}", file=sys.stderr)
        return EXIT_NO_SCHEDULE
    figures = simulation_figures(r, ev, trace, failure)
    title = f"{file.name} ({r.method})"
    if trace_path is not None:
        write_tiled_trace(trace_path, trace, r.hw, f"{r.workload.name} on {r.hw.name} — "
                                                   f"{r.method}")
    if csv_path is not None:
        write_tasks_csv(csv_path, trace)
    _show_simulation(figures, segment_rows(trace), f"{title} — simulated", r, as_json)
    if failure is not None:
        print(f"mipsched: {file}: {failure}", file=sys.stderr)
        return EXIT_NO_SCHEDULE
    return 0


def _show_simulation(figures: dict[str, Any], segments: list[dict[str, Any]], title: str,
                     r: RatreeFile, as_json: bool) -> None:
    """The figures and the segments as one JSON object, or the figures table and the
    table of the longest segments (per invocation)."""
    if as_json:
        emit_json({**figures, "segments": segments})
        return
    console.print(figures_table(title, figures))
    runs = r.tree.root.subbatches if isinstance(r.tree.root, Cut) else 1
    times = f", each run {runs} times" if runs > 1 else ""
    shown = min(len(segments), SEGMENT_ROWS)
    console.print(tiled_segments_table(
        segments, f"longest segments ({shown} of {len(segments)}; cycles and bytes per "
                  f"invocation{times})", SEGMENT_ROWS))


SEGMENT_ROWS = 10
"""Segments in the terminal table of `simulate ratree.json` (the longest)."""


# --- compare: set / ls / lp side by side ---------------------------------------------------------
def compare_tiled_cmd(nets: list[str], hw: TiledHardware, methods: str | None,
                      batch: int, baseline: str | None, objective: str, seed: int,
                      time_limit: float | None, out: Path, wide: bool,
                      as_json: bool) -> int:
    """`mipsched compare NETS --hw TILED`: every method on every network (each at most
    `time_limit` seconds, default 60), compare.csv and compare.md in `out`, the table or
    the JSON list; the exit code."""
    chosen, base = tiled_methods_and_baseline(methods, baseline)
    check_objective(objective)
    workloads = [resolve_network(n, batch) for n in nets]
    out.mkdir(parents=True, exist_ok=True)
    with progress.status("comparing", spinner="dots") as status:
        rows = compare_tiled(workloads, chosen, hw, base, seed, time_limit, objective,
                             progress=None if as_json else status.update)
    write_text_atomic(out / "compare.csv", compare_csv(rows))
    write_text_atomic(out / "compare.md", compare_markdown(rows))
    if as_json:
        emit_json([row_dict(r) for r in rows])
        return 0
    title = f"compare on {hw.name}, batch {batch}, ratios vs {base}"
    console.print(compare_tiled_table(rows, title, wide))
    console.print(f"wrote {out}/compare.csv and compare.md")
    return 0
