"""The DLSA solver (`mipsched solve PROGRAM.json`) on tile programs of shared/instances'
size class (up to thousands of tiles and DRAM tensors), too big for one CP-SAT model.

Each case: SoMa's SA (latency objective, --sa-seconds) picks an LFA and a DLSA; its
program is saved in the dlsa-instance format with SA's DLSA as the `reference`, then
solved as an instance within --time-limit (annealing, then sliding CP-SAT windows). The
table shows reference vs mipsched vs the ideal and the program bound (ideal + head and
tail: no DLSA of that LFA is faster), like benchmarks/instances.py.

A case is net:hw:batch[:SA seconds] (default --sa-seconds); the two with 120 s of SA
give programs of the hidden instances' size (about 3,000 tiles, 700 to 2,000 tensors).

Run: python benchmarks/large_programs.py [--time-limit 60] [--sa-seconds 30]
     [--cases resnet101:edge:16 inception_resnet_v1:edge:16:120 ...] [--cache DIR]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from publish import publish  # benchmarks/ is on sys.path when a benchmark runs

from mipsched.formulations.bounds import program_bound
from mipsched.hw import load_hardware
from mipsched.schedule.tile_program import TileProgram
from mipsched.solve import solve_network, solve_program
from mipsched.workload import zoo

CASES = ["resnet50:edge:16", "resnet101:edge:16", "inception_resnet_v1:edge:16",
         "randwire_small:edge:16", "gpt2_small_prefill:edge:16", "resnet50:cloud:16",
         "inception_resnet_v1:edge:16:120", "randwire_small:edge:16:120"]


def make_program(case: str, sa_seconds: float, cache: Path) -> Path:
    """SA's program for `case` (net:hw:batch[:SA seconds]) with its DLSA as `reference`
    (cached)."""
    path = cache / (case.replace(":", "-") + ".json")
    if path.exists():
        return path
    net, hw, batch, *seconds = case.split(":")
    if seconds:
        sa_seconds = float(seconds[0])
    outcome = solve_network(zoo.get(net, int(batch)), load_hardware(hw), "sa", 0, sa_seconds,
                    "latency")
    c = outcome.candidate
    if c is None:
        raise SystemExit(f"{case}: SA found no schedule ({outcome.reason})")
    c.program.solutions["reference"] = (c.dlsa, c.evaluation.latency_cycles,
                                        c.evaluation.peak_buffer_bytes)
    c.program.save(path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=CASES, help="net:hw:batch")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--sa-seconds", type=float, default=30.0)
    parser.add_argument("--cache", type=Path,
                        default=Path(tempfile.gettempdir()) / "mipsched-large-programs")
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).parent / "results" / "large_programs.md")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    lines = ["| program | tiles | DRAM tensors | ideal | program bound | reference | "
             "mipsched | vs reference | reference gap | mipsched gap | windows | seconds |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for case in args.cases:
        program = TileProgram.load(make_program(case, args.sa_seconds, args.cache))
        outcome = solve_program(program, "cpsat", time_limit=args.time_limit)
        latency = outcome.evaluation.latency_cycles
        reference = program.solutions["reference"][1]
        bound = program_bound(program)
        windows = sum(1 for m in outcome.models if m.scope == "window")
        lines.append(
            f"| {case} | {program.n_tiles:,} | {len(program.tensors):,} | "
            f"{program.ideal_cycles:,} | {bound:,} | {reference:,} | {latency:,} | "
            f"{latency / reference - 1:+.2%} | {reference / bound - 1:.2%} | "
            f"{latency / bound - 1:.2%} | {windows} | {outcome.wall_seconds:.1f} |")
        print(lines[-1], flush=True)
    lines.append("")
    lines.append(f"Time limit {args.time_limit:g} s per program; gaps are to the program "
                 "bound.")
    publish(lines, args.out)


if __name__ == "__main__":
    main()
