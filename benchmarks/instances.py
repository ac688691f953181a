"""The DLSA model on the SoMa reference instances (shared/instances): reference vs
mipsched vs the ideal, solve time, proven optimal or gap.

Run: python benchmarks/instances.py [--dir ../shared/instances] [--time-limit 60]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from publish import publish  # benchmarks/ is on sys.path when a benchmark runs

from mipsched.schedule.tile_program import TileProgram
from mipsched.solve import solve_program


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path,
                        default=Path(__file__).resolve().parents[2] / "shared" / "instances")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).parent / "results" / "instances.md")
    args = parser.parse_args()
    lines = ["| instance | tiles | DRAM tensors | ideal | default | reference | mipsched | "
             "vs reference | status | gap to bound | seconds |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    for path in sorted(args.dir.glob("*.json")):
        program = TileProgram.load(path)
        outcome = solve_program(program, "cpsat", time_limit=args.time_limit)
        latency = outcome.evaluation.latency_cycles
        ref = program.solutions.get("reference")
        default = program.solutions.get("default")
        gap = (latency - outcome.lower_bound_cycles) / latency
        lines.append(
            f"| {path.stem} | {program.n_tiles} | {len(program.tensors)} | "
            f"{program.ideal_cycles:,} | {default[1] if default else '—':,} | "
            f"{ref[1] if ref else '—':,} | {latency:,} | "
            f"{(latency / ref[1] - 1) if ref else 0:+.2%} | {outcome.status} | {gap:.2%} | "
            f"{outcome.wall_seconds:.1f} |")
    publish(lines, args.out)


if __name__ == "__main__":
    main()
