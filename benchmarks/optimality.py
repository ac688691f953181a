"""Optimal vs heuristic (issue 6): proven optima of tiny nets and certified gaps of big ones.

Part 1, tiny nets (chain3, chain5, resblock, fsrcnn; edge and edge with a 512 KiB
buffer): `solve --method exact` (latency), the time it takes to prove its optimum, and
every heuristic's gap to that optimum. Target: every case proven within 60 s.
Part 2, the SoMa Fig. 6 cases: the best latency found (SA stage 2 or auto, read from
the tables soma_fig6.py writes, by default results/soma_fig6.csv, or a longer `mipsched
solve` run whose certificate is given, by default results/exact/*/), the strongest certified
bound (`mipsched bound`; nets above 16 layers get the network bounds only) and the
certified gap = (best - bound) / best. Targets: <= 10 % on every case, <= 5 % geomean.

Run: python benchmarks/optimality.py [--time-limit 60] [--heuristic-seconds 20]
     [--bound-seconds 120] [--fig6-csv CSV ...] [--certificates JSON ...] [--skip-tiny]
     [--out benchmarks/results/optimality.md]
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import time
from pathlib import Path

from publish import publish  # benchmarks/ is on sys.path when a benchmark runs

from mipsched.hw import load_hardware
from mipsched.hw.model import Hardware
from mipsched.solve import bound_report, solve_network
from mipsched.workload import zoo

TINY = ("chain3", "chain5", "resblock", "fsrcnn")
HEURISTICS = ("baseline", "greedy", "dp", "cocco", "sa", "auto")
SMALL_BUFFER = 512 * 1024
RESULTS = Path(__file__).parent / "results"


def small_buffer(hw: Hardware) -> Hardware:
    return dataclasses.replace(hw, name=f"{hw.name}-512KiB", gbuf=dataclasses.replace(
        hw.gbuf, capacity_bytes=SMALL_BUFFER))


def tiny_part(time_limit: float, heuristic_seconds: float) -> list[str]:
    edge = load_hardware("edge")
    lines = ["## Tiny nets: proven optima", "",
             "| network | hw | optimum (cycles) | status | prove (s) | "
             + " | ".join(f"{h} gap" for h in HEURISTICS) + " |",
             "|---|---|---:|---|---:|" + "---:|" * len(HEURISTICS)]
    proven = 0
    for name in TINY:
        for hw in (edge, small_buffer(edge)):
            wl = zoo.get(name)
            started = time.perf_counter()
            exact = solve_network(wl, hw, "exact", time_limit=time_limit, objective="latency")
            seconds = time.perf_counter() - started
            best = exact.candidate.evaluation.latency_cycles if exact.candidate else None
            proven += exact.status == "optimal"
            gaps = []
            for method in HEURISTICS:
                out = solve_network(wl, hw, method, time_limit=heuristic_seconds,
                                    objective="latency")
                if out.candidate is None or best is None:
                    gaps.append("—")
                    continue
                latency = out.candidate.evaluation.latency_cycles
                gaps.append(f"{(latency - best) / latency:.2%}")
            lines.append(f"| {name} | {hw.name} | {best:,} | {exact.status} | {seconds:.1f} | "
                         + " | ".join(gaps) + " |")
            print(lines[-1], flush=True)
    lines += ["", f"- proven optimal: {proven} of {2 * len(TINY)} (target: all, each "
                  f"<= 60 s); heuristics ran {heuristic_seconds:g} s each, objective "
                  "latency; gap = (heuristic - optimum) / heuristic", ""]
    return lines


def kept_tiny_part(out: Path) -> list[str]:
    """The tiny-net section of an earlier run's output (empty if there is none)."""
    if not out.exists():
        return []
    text = out.read_text().split("## SoMa Fig. 6 cases")[0]
    return text.splitlines()[2:] if "## Tiny nets" in text else []


Found = dict[tuple[str, str, str], tuple[int, str]]
"""(network, hw, batch) -> (least latency found in cycles, the method that found it)."""


def _digest(network: str, batch: int) -> str:
    return zoo.get(network, batch).digest()


def best_found(fig6_csvs: list[Path], certificates: list[Path]) -> Found:
    """The least latency per Fig. 6 case of SA stage 2 or auto over the CSVs, lowered by
    any `mipsched solve` certificate of the same case (e.g. a long --method exact run)."""
    best: Found = {}

    def offer(key: tuple[str, str, str], latency: int, method: str) -> None:
        if key not in best or latency < best[key][0]:
            best[key] = (latency, method)

    for path in fig6_csvs:
        with path.open() as f:
            for row in csv.DictReader(f):
                key = (row["network"], row["hw"], row["batch"])
                if row.get("digest") != _digest(row["network"], int(row["batch"])):
                    continue  # run on an earlier network of that name
                for column, method in (("sa2_latency", "sa"), ("auto_latency", "auto")):
                    if row.get(column):
                        offer(key, int(row[column]), method)
    for path in certificates:
        cert = json.loads(path.read_text())
        key = (cert["workload"]["name"], cert["hardware"]["name"],
               str(cert["workload"]["batch"]))
        if key in best and cert.get("incumbent") and cert["workload"].get("digest") == \
                _digest(key[0], int(key[2])):
            offer(key, int(cert["incumbent"]["latency_cycles"]),
                  f"{cert['method']} ({cert['time_limit_s']:g} s, {path.parent.name})")
    return best


def big_part(found: Found, time_limit: float) -> list[str]:
    """`time_limit`: seconds for `mipsched bound` per case (its LFA relaxations, on nets
    of at most 16 layers, get half each)."""
    lines = ["## SoMa Fig. 6 cases: certified gaps", "",
             "| network | hw | batch | best found | found by | bound | binding | bound (s) "
             "| certified gap |",
             "|---|---|---:|---:|---|---:|---|---:|---:|"]
    gaps = []
    for (network, hw_name, batch), (best, method) in found.items():
        started = time.perf_counter()
        report = bound_report(zoo.get(network, int(batch)), load_hardware(hw_name), time_limit)
        seconds = time.perf_counter() - started
        gap = (best - report.latency.cycles) / best
        gaps.append(gap)
        lines.append(f"| {network} | {hw_name} | {batch} | {best:,} | {method} | "
                     f"{report.latency.cycles:,} | {report.latency.binding} | {seconds:.0f} | "
                     f"{gap:.1%} |")
        print(lines[-1], flush=True)
    if gaps:
        geo = math.exp(sum(math.log(max(g, 1e-6)) for g in gaps) / len(gaps))
        lines += ["", f"- certified gap: max {max(gaps):.1%} (target <= 10 %), geomean "
                      f"{geo:.2%} (target <= 5 %; a 0 gap counts as 1e-6), mean "
                      f"{sum(gaps) / len(gaps):.1%} (at least the geomean); "
                      f"{sum(g <= 0.10 for g in gaps)} of {len(gaps)} cases within 10 %; "
                      f"bounds had {time_limit:g} s per case"]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0,
                        help="seconds for exact per tiny case")
    parser.add_argument("--bound-seconds", type=float, default=120.0,
                        help="seconds for the bounds of each SoMa Fig. 6 case")
    parser.add_argument("--heuristic-seconds", type=float, default=20.0)
    parser.add_argument("--fig6-csv", type=Path, nargs="+",
                        default=[RESULTS / "soma_fig6.csv"],
                        help="soma_fig6.py tables; the best latency per case over all "
                             "(missing files are skipped)")
    parser.add_argument("--certificates", type=Path, nargs="*",
                        default=sorted((RESULTS / "exact").glob("*/certificate.json")),
                        help="certificate.json files of `mipsched solve` runs on Fig. 6 "
                             "cases whose schedules count as found (default: "
                             "results/exact/*/certificate.json)")
    parser.add_argument("--skip-tiny", action="store_true",
                        help="keep the tiny-net section of the existing --out file")
    parser.add_argument("--out", type=Path,
                        default=RESULTS / "optimality.md")
    args = parser.parse_args()
    lines = ["# Optimality: proven optima and certified gaps", ""]
    if args.skip_tiny:
        lines += kept_tiny_part(args.out)
    else:
        lines += tiny_part(args.time_limit, args.heuristic_seconds)
    lines += big_part(best_found([p for p in args.fig6_csv if p.exists()],
                                 args.certificates), args.bound_seconds)
    publish(lines, args.out)


if __name__ == "__main__":
    main()
