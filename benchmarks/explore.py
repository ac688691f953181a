"""Cocco's hardware-mapping co-exploration (ASPLOS'24 §5.3, Table 2; issue 19): the
objective capacity + alpha x energy (bytes + pJ, alpha = 0.002) reached by each method
of `mipsched explore` at the same number of samples, beside Cocco's baselines:

- fixed S / M / L: the partition GA at one capacity: Cocco's 576 KiB / 1152 KiB /
  2304 KiB on its grid; 4 / 6 / 8 MiB (8 MiB: the edge preset's) on the wider grid;
- two-step: grid search over 8 capacities, then the partition GA at each;
- sa: annealing over (capacity, partition);
- curve: every capacity once, warm-started upward, read off the lower convex hull;
- ga: Cocco's GA with the capacity in the genome.

Networks: resnet50, googlenet, randwire_small, gpt2_small_prefill at batch 1 on edge.
Grids: Cocco's shared-buffer range 128 KiB to 3 MiB in 64 KiB steps; for resnet50 and
gpt2_small_prefill, whose largest layers hold 2.25 MiB of weights (which SoMa's notation
never tiles) and so have no schedule below 2.5 MiB (gpt2) or 3.5 MiB (resnet50), 2 MiB to
8 MiB in 128 KiB steps.
Runs two at a time (one core each).

Run: python benchmarks/explore.py [--evaluations 500] [--seed 0] [--jobs 2] [--networks ...]
     [--out benchmarks/results/explore.md]
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from publish import publish  # benchmarks/ is on sys.path when a benchmark runs

from mipsched.core import InfeasibleError
from mipsched.explore import CapacityGrid, ExploreCost, explore_network, parse_grid
from mipsched.hw import load_hardware
from mipsched.workload.resolve import resolve_network

GRIDS = {"googlenet": "128KiB:3MiB:64KiB", "randwire_small": "128KiB:3MiB:64KiB",
         "resnet50": "2MiB:8MiB:128KiB", "gpt2_small_prefill": "2MiB:8MiB:128KiB"}
KIB, MIB = 1024, 1024 * 1024
FIXED = {"fixed S": (576 * KIB, 4 * MIB), "fixed M": (1152 * KIB, 6 * MIB),
         "fixed L": (2304 * KIB, 8 * MIB)}
"""Label -> (capacity on Cocco's grid, on the wider grid), bytes."""
METHODS = ("two-step", "sa", "curve", "ga")
RESULTS = Path(__file__).parent / "results"


@dataclass(frozen=True)
class Run:
    network: str
    label: str
    capacity_bytes: int | None
    objective: float | None
    energy_pj: float | None
    latency_cycles: int | None
    samples: int
    seconds: float
    to_within_1pct: int | None
    """Samples after which the best objective was within 1 % of the run's final one."""
    note: str = ""


def run_one(network: str, label: str, grid_text: str, evaluations: int, seed: int) -> Run:
    """One method (or one fixed capacity) on one network."""
    grid = parse_grid(grid_text)
    method = "ga"
    if label in FIXED:
        small, large = FIXED[label]
        grid = CapacityGrid((small if grid.values[-1] <= 3 * MIB else large,))
    else:
        method = label
    wl = resolve_network(network, 1, 1)
    started = time.perf_counter()
    try:
        r = explore_network(wl, load_hardware("edge"), method, grid, ExploreCost(0.002),
                            evaluations, seed)
    except InfeasibleError as err:
        return Run(network, label, grid.values[0] if label in FIXED else None, None, None,
                   None, evaluations, time.perf_counter() - started,
                   None, f"no schedule: {str(err)[:90]}")
    final = r.best.objective
    near = next(t.evaluations for t in r.trace if t.objective <= final * 1.01)
    return Run(network, label, r.best.capacity_bytes, final, r.simulation.energy_pj,
               r.simulation.latency_cycles, r.evaluations, time.perf_counter() - started,
               near)


def table(runs: list[Run]) -> list[str]:
    lines = ["| network | method | capacity (KiB) | objective | vs ga | energy (uJ) | "
             "latency (cycles) | samples | to 1 % | s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for net in GRIDS:
        mine = [r for r in runs if r.network == net]
        ga = next((r.objective for r in mine if r.label == "ga"), None)
        for r in mine:
            cap = "—" if r.capacity_bytes is None else f"{r.capacity_bytes / 1024:g}"
            if r.objective is None:
                lines.append(f"| {net} | {r.label} | {cap} | {r.note} | | | | {r.samples} "
                             f"| | {r.seconds:.0f} |")
                continue
            rel = "" if ga is None else f"{(r.objective - ga) / r.objective:+.2%}"
            lines.append(f"| {net} | {r.label} | {cap} | {r.objective:,.0f} | {rel} | "
                         f"{r.energy_pj / 1e6:,.1f} | {r.latency_cycles:,} | {r.samples} | "
                         f"{r.to_within_1pct} | {r.seconds:.0f} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--evaluations", type=int, default=500, help="samples per run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--networks", nargs="+", default=list(GRIDS), choices=list(GRIDS))
    ap.add_argument("--out", type=Path, default=RESULTS / "explore.md")
    args = ap.parse_args()
    labels = (*FIXED, *METHODS)
    started = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(run_one, net, label, grid, args.evaluations, args.seed)
                   for net, grid in GRIDS.items() if net in args.networks
                   for label in labels]
        runs = [f.result() for f in futures]
    wall = time.perf_counter() - started
    lines = ["# Co-exploration of buffer capacity and schedule (Cocco Eq. 2)", "",
             f"`python benchmarks/explore.py --evaluations {args.evaluations} --seed "
             f"{args.seed} --jobs {args.jobs}`: objective = capacity (bytes) + 0.002 x "
             f"energy (pJ), batch 1 on edge, {args.evaluations} samples per run (a sample = "
             "one partition scored at one capacity, Cocco's count), "
             f"{args.jobs} runs at once; wall {wall:.0f} s. 'vs ga' = (objective - ga's) / "
             "objective: how much more the method's result costs than the co-exploring GA's "
             "(positive: ga is better). 'to 1 %' = samples until the run's best was within "
             "1 % of its final one.", "", *table(runs), ""]
    publish(lines, args.out)


if __name__ == "__main__":
    main()
