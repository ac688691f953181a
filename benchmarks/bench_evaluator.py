"""Evaluator speed on resnet50 / edge / batch 1 (issue 2 targets: >= 5,000 DLSA
evaluations per second on one core; >= 300 full lowering + evaluations per second for
random LFAs with memoised tile costs).

Run: python benchmarks/bench_evaluator.py [--seconds S] [--out FILE.md]
Prints a markdown table and writes it to --out (default benchmarks/results/evaluator.md).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from publish import publish  # benchmarks/ is on sys.path when a benchmark runs

from mipsched.evaluate import evaluate, latency
from mipsched.hw import load_hardware
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa
from mipsched.workload import zoo

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from strategies import random_dlsa, random_lfa  # noqa: E402


def rate(fn, seconds: float) -> tuple[float, int]:
    """Calls per second of fn() over about `seconds`."""
    n = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        fn()
        n += 1
    return n / (time.perf_counter() - start), n


def random_resnet_lfa(workload, rng: random.Random) -> Lfa:
    """Computing order fixed (residual blocks keep their order), random FLCs, DRAM cuts
    and tiling numbers from {1, 2, 4, 8} - the kind of LFA an SA search visits."""
    return random_lfa(workload, rng, (1, 2, 4, 8), tuple(workload.layers), cut_chance=0.4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).parent / "results" / "evaluator.md")
    args = parser.parse_args()
    wl = zoo.get("resnet50", 1)
    hw = load_hardware("edge")
    lowerer = Lowerer(wl, hw)
    rng = random.Random(0)

    # a fused LFA of the kind SA reaches, to time DLSA evaluation on a realistic program
    program = lowerer.lower(random_resnet_lfa(wl, random.Random(1)))
    dlsas = [default_dlsa(program)] + [random_dlsa(program, rng) for _ in range(50)]
    k = iter(range(10**12))
    lat_rate, _ = rate(lambda: latency(program, dlsas[next(k) % len(dlsas)]), args.seconds)
    full_rate, _ = rate(lambda: evaluate(program, dlsas[next(k) % len(dlsas)], check=False),
                        args.seconds)

    # new random LFAs on a Lowerer whose tile-cost memo is warm from 300 other LFAs
    # (FLGs not seen before are still tiled and costed on the spot)
    for _ in range(300):
        lowerer.lower(random_resnet_lfa(wl, rng))
    fresh_lfas = [random_resnet_lfa(wl, rng) for _ in range(int(150 * args.seconds))]

    def lower_and_eval(low: Lowerer, lfas: list[Lfa]) -> float:
        start = time.perf_counter()
        for lfa in lfas:
            prog = low.lower(lfa, check=False)
            evaluate(prog, default_dlsa(prog), check=False)
        return len(lfas) / (time.perf_counter() - start)

    warm_rate = lower_and_eval(lowerer, fresh_lfas)
    cold_rate = lower_and_eval(Lowerer(wl, hw), [random_resnet_lfa(wl, rng)
                                                 for _ in range(50)])

    rows = [
        ("DLSA evaluations / s (latency only)", lat_rate, 5000),
        ("DLSA evaluations / s (all figures)", full_rate, 5000),
        ("lowering + evaluation / s, new random LFAs, memoised tile costs", warm_rate, 300),
        ("lowering + evaluation / s, new random LFAs, empty memo", cold_rate, None),
    ]
    lines = [f"resnet50 / edge / batch 1: program of {program.n_tiles} tiles, "
             f"{len(program.tensors)} DRAM tensors", "",
             "| measure | per second | target |", "|---|---:|---:|"]
    for name, value, target in rows:
        lines.append(f"| {name} | {value:,.0f} | {'' if target is None else f'>= {target:,}'} |")
    publish(lines, args.out)


if __name__ == "__main__":
    main()
