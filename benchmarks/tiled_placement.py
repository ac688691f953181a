"""CP-SAT core counts and placement for SET's S Cuts (mipsched.tiled.placement) against
the reference's proportional allocation, on ResNet-50 batch 8, set-4x4.

Run: python benchmarks/tiled_placement.py [--seconds S] [--out FILE.md]
Trees: the reference's best SET tree and its LP tree (tests/test_tiled_evaluate.py) and
two short SA runs (seed 1 from the layer-by-layer tree, seed 2 from the SET tree, S
seconds each, default 40). Per S Cut: SET's counts and the CP-SAT counts, the cut's
time on the tables (cycles; `plan_tree`'s time_i(c)) and as re-evaluated (from the
leaves of the whole-tree evaluation), the solve times, and the placement model's
byte-hops for SET's layout and the chosen one. Per tree: latency and E x D with SET's
allocation, with the CP-SAT counts (children back to back) and with counts + placement.
Then the solvers alone on a 12 x 12 mesh (2..8 children). Writes the markdown with
mipsched.atomic (default benchmarks/results/tiled_placement.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from test_tiled_evaluate import HW, SET_TREE, WL, lp_tree, parse_printed_tree  # noqa: E402

from mipsched.atomic import write_text_atomic  # noqa: E402
from mipsched.hw.tiled import load_tiled_hardware  # noqa: E402
from mipsched.tiled.evaluate import Evaluation  # noqa: E402
from mipsched.tiled.placement import (  # noqa: E402
    CutMesh,
    CutTraffic,
    TreePlan,
    best_order,
    consecutive,
    cp_sat_counts,
    cp_sat_placement,
    placement_byte_hops,
    plan_tree,
)
from mipsched.tiled.ratree import Leaf, Node, RaTree  # noqa: E402
from mipsched.tiled.search import search  # noqa: E402
from mipsched.tiled.structure import stages  # noqa: E402


def node_cycles(ev: Evaluation, node: Node) -> int:
    """A non-segment node's cycles from an evaluation's leaves (evaluate_tree's rules)."""
    if isinstance(node, Leaf):
        return ev.leaves[node.layer].cycles
    times = [node_cycles(ev, c) for c in node.children]
    if node.kind == "T":
        return node.subbatches * sum(times)
    return (node.subbatches + max(stages(node, WL))) * max(times)


def _n(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _at(tree: RaTree, path: str) -> Node:
    return next(n for p, n, _ in tree.nodes() if p == path)


def cut_rows(name: str, tree: RaTree, plan: TreePlan) -> list[str]:
    rows = []
    for cut in plan.cuts:
        node = _at(tree, cut.path)
        set_hops = None if cut.set_counts is None else placement_byte_hops(
            cut.mesh, cut.set_counts, cut.traffic, [lo for lo, _ in consecutive(cut.set_counts)])
        real = "-" if plan.evaluation is None else f"{node_cycles(plan.evaluation, node):,}"
        set_time = None if cut.set_counts is None else cut.cut_cycles(cut.set_counts)
        rows.append(
            f"| {name} | {cut.path} | {cut.cores} | {cut.stage_factor} | {cut.set_counts} "
            f"| {cut.counts.counts} | {_n(set_time)} | {_n(cut.cut_cycles(cut.counts.counts))} "
            f"| {node_cycles(plan.baseline, node):,} | {real} "
            f"| {cut.counts.status} {1000 * cut.counts.seconds:.0f} | {cut.placement.starts} "
            f"| {_n(set_hops)} | {cut.placement.byte_hops:,} "
            f"| {1000 * cut.placement.seconds:.1f} |")
    return rows


def tree_row(name: str, base: Evaluation, counts: Evaluation | None,
             both: Evaluation | None) -> str:
    def cell(ev: Evaluation | None) -> str:
        if ev is None:
            return "rejected | -"
        return (f"{ev.latency:,} ({ev.latency / base.latency - 1:+.2%}) "
                f"| {ev.edp:.4e} ({ev.edp / base.edp - 1:+.2%})")
    return f"| {name} | {base.latency:,} | {base.edp:.4e} | {cell(counts)} | {cell(both)} |"


def trees(seconds: float, cache: dict) -> list[tuple[str, RaTree]]:
    found = [("SET (reference)", parse_printed_tree(SET_TREE)), ("LP (reference)", lp_tree())]
    for seed, start in ((1, None), (2, found[0][1])):
        run = search(HW, WL, "set", seed=seed, time_limit=seconds, start=start, cache=cache)
        found.append((f"SA seed {seed}, {seconds:.0f} s", run.tree))
    return found


def scaling_rows() -> list[str]:
    """The solvers alone on 12 x 12: k children in a chain, proportional tables."""
    hw = load_tiled_hardware("set-12x12")
    mesh = CutMesh(0, 144, hw.mesh.cols, hw.mesh.rows, 2,
                   tuple((p.x, p.y) for p in hw.dram.ports))
    rows = []
    for k in (2, 4, 6, 8):
        work = [10_000 * (3 + (7 * i) % 5) for i in range(k)]
        tables = [[-(-w * 100 // c) for c in range(1, 144 - k + 2)] for w in work]
        began = time.perf_counter()
        counts = cp_sat_counts(tables, 144)
        counts_s = time.perf_counter() - began
        assert counts is not None
        pair = tuple(tuple(10**5 if j == i + 1 else 0 for j in range(k)) for i in range(k))
        traffic = CutTraffic(pair, tuple(10**4 * (i + 1) for i in range(k)))
        order = best_order(mesh, counts.counts, traffic)
        sat = cp_sat_placement(mesh, counts.counts, traffic, time_limit=1.0)
        sat_cell = "none in 1 s" if sat is None else (
            f"{sat.status}, {sat.byte_hops:,} in {sat.seconds:.2f} s")
        rows.append(f"| {k} | {counts.counts} | {counts.status} {counts_s:.3f} s "
                    f"| {order.byte_hops:,} in {order.seconds:.3f} s | {sat_cell} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" /
                        "tiled_placement.md")
    args = parser.parse_args()
    began = time.perf_counter()
    cache: dict = {}
    cuts, totals = [], []
    for name, tree in trees(args.seconds, cache):
        counts_only = plan_tree(HW, WL, tree, cache=cache, place=False)
        plan = plan_tree(HW, WL, tree, cache=cache)
        cuts += cut_rows(name, tree, plan)
        totals.append(tree_row(name, plan.baseline, counts_only.evaluation, plan.evaluation))
    lines = [
        "# CP-SAT counts and placement of S Cuts (ResNet-50, batch 8, set-4x4)", "",
        f"`python benchmarks/tiled_placement.py --seconds {args.seconds:g}`; "
        "mipsched.tiled.placement, docs/set-model.md §7.2. Cycles, byte-hops; E x D in "
        "pJ x cycles.", "",
        "## Whole trees", "",
        "| tree | latency, SET alloc | E x D, SET alloc | latency, CP-SAT counts "
        "| E x D, CP-SAT counts | latency, counts + placement | E x D, counts + placement |",
        "|---|---:|---:|---:|---:|---:|---:|", *totals, "",
        "## Per S Cut", "",
        "n+S: the cut's pipeline factor. Cut time on tables = (n+S) x max_i time_i(c_i) "
        "from `plan_tree`'s tables (the model CP-SAT optimises); re-evaluated = from the "
        "leaves of the whole-tree evaluation with SET's allocation / with counts + "
        "placement. Byte-hops: the placement model for SET's counts back to back in child "
        "order / for the chosen counts and starts.", "",
        "| tree | cut | cores | n+S | SET counts | CP-SAT counts | time (tables), SET "
        "| time (tables), CP-SAT | re-evaluated, SET | re-evaluated, plan | counts solve (ms) "
        "| starts | byte-hops, SET layout | byte-hops, chosen | placement (ms) |",
        "|---|---|---:|---:|---|---|---:|---:|---:|---:|---|---|---:|---:|---:|", *cuts, "",
        "## The solvers alone on 12 x 12 (144 cores, k children in a chain)", "",
        "| k | CP-SAT counts | counts solve | best_order (exact over orders) "
        "| cp_sat_placement (any disjoint ranges, 1 s limit) |",
        "|---:|---|---|---|---|", *scaling_rows(), "",
        f"Total run time {time.perf_counter() - began:.0f} s (2 shared cores).",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(args.out, text)


if __name__ == "__main__":
    main()
