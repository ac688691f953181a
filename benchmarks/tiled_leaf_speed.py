"""Speed of SET's leaf search (mipsched/tiled/leaf.py, `search_leaf`) on the start tree:
`init_tree` evaluates every layer alone on all cores of the mesh, so its time is almost
all leaf searches (partitions x placement orders, NoC hop counts, the winner's record).

Run: python benchmarks/tiled_leaf_speed.py [--cases NET:BATCH:HW,...] [--before REV]
                                           [--repeat K] [--out FILE.md]
Each run is a fresh process (cold caches, as a fresh `mipsched solve`); the time is
`init_tree` alone (imports and loading excluded), wall seconds, median (min-max) over K
runs; CPU seconds are the process's own (the fairer figure on a shared machine).
"before" runs the same script on the leaf search of git revision REV (default 17fb6f5,
the last commit before the vectorised hop counting; name the commit before a change to
measure it): its
mipsched/tiled/leaf.py and noc.py, read with `git show`, replace the working tree's in
that process (nothing in the working tree changes); "after" is the working tree.
`result` is a digest of the evaluation (latency, energy, and per leaf its partition,
order, cycles, energy, byte-hops and DRAM bytes): before and after must agree (the
script stops otherwise). Writes benchmarks/results/tiled_leaf_speed.md by default.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

from publish import publish  # benchmarks/ is on sys.path when a benchmark runs

ROOT = Path(__file__).resolve().parents[1]
CASES = "resnet50:8:set-4x4,resnet50:8:set-12x12,googlenet:1:set-12x12"
OLD_MODULES = ("noc", "leaf")
"""Modules of mipsched.tiled taken from the "before" revision, in import order."""


def load_revision(rev: str) -> None:
    """Put REV's mipsched/tiled/{noc,leaf}.py in sys.modules before anything imports
    them."""
    import mipsched.tiled as package

    for name in OLD_MODULES:
        source = subprocess.run(["git", "show", f"{rev}:mipsched/tiled/{name}.py"],
                                cwd=ROOT, check=True, capture_output=True, text=True).stdout
        module = types.ModuleType(f"mipsched.tiled.{name}")
        module.__file__ = f"{rev}:mipsched/tiled/{name}.py"
        sys.modules[module.__name__] = module
        exec(compile(source, module.__file__, "exec"), module.__dict__)
        setattr(package, name, module)


def digest(ev) -> str:
    """Short hash of an evaluation's numbers."""
    leaves = [(n, r.partition, r.order, r.cycles, repr(r.energy_pj), r.record.byte_hops,
               r.record.dram_bytes) for n, r in sorted(ev.leaves.items())]
    text = json.dumps([ev.latency, repr(ev.energy_pj), leaves])
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def child(net: str, batch: int, hw_name: str, rev: str | None) -> None:
    """One timed start-tree evaluation; prints {"seconds", "cpu", "layers", "result"}."""
    if rev is not None:
        load_revision(rev)
    from mipsched.hw.tiled import load_tiled_hardware
    from mipsched.tiled.search import init_tree
    from mipsched.workload.resolve import resolve_network

    hw = load_tiled_hardware(hw_name)
    wl = resolve_network(net, batch, 1)
    began, cpu = time.perf_counter(), time.process_time()
    _, ev = init_tree(hw, wl, {})
    seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
    print(json.dumps({"seconds": seconds, "cpu": cpu, "layers": len(wl.layers),
                      "result": digest(ev)}))


def timed(case: str, rev: str | None) -> dict:
    net, batch, hw = case.split(":")
    command = [sys.executable, __file__, "--child", net, batch, hw]
    if rev is not None:
        command += ["--code", rev]
    done = subprocess.run(command, cwd=ROOT, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def spread(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=CASES)
    parser.add_argument("--before", default="17fb6f5")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).parent / "results" / "tiled_leaf_speed.md")
    parser.add_argument("--child", nargs=3, metavar=("NET", "BATCH", "HW"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--code", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        net, batch, hw = args.child
        child(net, int(batch), hw, args.code)
        return
    commit = subprocess.run(["git", "rev-parse", "--short", args.before], cwd=ROOT,
                            check=True, capture_output=True, text=True).stdout.strip()
    lines = [f"Start-tree evaluation (`init_tree`: every layer alone on all cores), wall "
             f"seconds, median (min-max) of {args.repeat} fresh processes. before: the leaf "
             f"search (mipsched/tiled/leaf.py, noc.py) of {args.before} ({commit}); after: "
             "the working tree.", "",
             "| case | layers | before (s) | after (s) | speed-up | before CPU (s) | "
             "after CPU (s) | result |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for case in args.cases.split(","):
        before = [timed(case, args.before) for _ in range(args.repeat)]
        after = [timed(case, None) for _ in range(args.repeat)]
        results = {r["result"] for r in before + after}
        if len(results) != 1:
            raise SystemExit(f"{case}: before and after disagree ({sorted(results)})")
        old = statistics.median(r["seconds"] for r in before)
        new = statistics.median(r["seconds"] for r in after)
        lines.append(f"| {case.replace(':', ' b', 1).replace(':', ', ')} | "
                     f"{after[0]['layers']} | {spread([r['seconds'] for r in before])} | "
                     f"{spread([r['seconds'] for r in after])} | {old / new:.1f}x | "
                     f"{spread([r['cpu'] for r in before])} | "
                     f"{spread([r['cpu'] for r in after])} | {results.pop()} |")
    publish(lines, args.out)


if __name__ == "__main__":
    main()
