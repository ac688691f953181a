"""Simulator speed (issue 3 target: >= 50 replays per second for resnet50 / edge /
batch 1), on the baseline schedule and on a fused schedule with hundreds of tiles, for
resnet50 / edge / b1 and gpt2_xl_prefill / cloud / b1.

Run: python benchmarks/bench_sim.py [--seconds S] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from publish import publish  # benchmarks/ is on sys.path when a benchmark runs

from mipsched.hw import load_hardware
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.lowering import Lowerer
from mipsched.sim import SimulationError, simulate
from mipsched.solve import solve_network
from mipsched.workload import zoo

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from strategies import random_lfa  # noqa: E402

CASES = [("resnet50", "edge"), ("gpt2_xl_prefill", "cloud")]


def replays_per_second(program, dlsa, seconds: float) -> float:
    n = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        simulate(program, dlsa)
        n += 1
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).parent / "results" / "simulator.md")
    args = parser.parse_args()
    lines = ["| network / hw | schedule | tiles | DRAM tensors | replays / s | target |",
             "|---|---|---:|---:|---:|---:|"]
    for net, hw_name in CASES:
        wl = zoo.get(net, 1)
        hw = load_hardware(hw_name)
        baseline = solve_network(wl, hw).candidate
        schedules = [("baseline", baseline.program, baseline.dlsa)]
        rng = random.Random(11)
        lowerer = Lowerer(wl, hw)
        for _ in range(200):  # a fused LFA with many tiles that fits the buffer
            program = lowerer.lower(random_lfa(wl, rng, (1, 2, 4, 8, 16), tuple(wl.layers),
                                               cut_chance=0.3))
            dlsa = default_dlsa(program)
            try:
                simulate(program, dlsa)
            except SimulationError:  # overflowing draws are skipped
                continue
            schedules.append(("fused, default DLSA", program, dlsa))
            break
        for label, program, dlsa in schedules:
            rate = replays_per_second(program, dlsa, args.seconds)
            target = ">= 50" if net == "resnet50" else ""
            lines.append(f"| {net} / {hw_name} | {label} | {program.n_tiles} | "
                         f"{len(program.tensors)} | {rate:,.0f} | {target} |")
    publish(lines, args.out)


if __name__ == "__main__":
    main()
