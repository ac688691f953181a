"""mipsched beside the SoMa reference implementation on the reference's own runs.

For every row of shared/reference-nets/reference-runs.csv (network, hardware, batch, the
reference's stage-1 / stage-2 latency, the ideal of its final LFA, its energy and its wall
time on 2 threads), `mipsched solve` runs on the same network, hardware and batch
(a) with `--time-limit` equal to the reference's wall time, and (b) with the default
budget, each as its own process on this machine (so start-up counts), objective E x D.
Reported per run: latency, energy, E x D, their ratios to the reference (< 1: mipsched
is better), the certified gap, the wall time, and when mipsched first held a schedule
at least as fast as the reference (from the certificate's trail).

Acceptance (issue 16): (a) latency <= the reference and E x D <= the reference on every
row; (b) strictly faster wherever the reference is more than 1 % above its ideal.

Run: python benchmarks/vs_reference.py [--csv PATH] [--only NET:HW:BATCH ...]
     [--skip-default] [--out benchmarks/results/vs_reference.md]
The further runs, made on this machine with the reference built from its public source
(benchmarks/reference_runs_here.csv, how in benchmarks/results/vs_reference_here.md):
     python benchmarks/vs_reference.py --csv benchmarks/reference_runs_here.csv \
         --out benchmarks/results/vs_reference_here.md
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from publish import publish

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT.parent / "shared" / "reference-nets" / "reference-runs.csv"


@dataclass(frozen=True)
class ReferenceRun:
    """One row of reference-runs.csv. Units: cycles, pJ, seconds."""

    network: str
    hw: str
    batch: int
    stage1_cycles: int
    stage2_cycles: int
    ideal_cycles: int
    energy_pj: float
    wall_seconds: float

    @property
    def key(self) -> str:
        return f"{self.network}:{self.hw}:{self.batch}"

    @property
    def edp(self) -> float:
        return self.energy_pj * self.stage2_cycles

    @property
    def above_ideal(self) -> float:
        return self.stage2_cycles / self.ideal_cycles - 1


@dataclass(frozen=True)
class Run:
    """One `mipsched solve` process. Units: cycles, pJ, seconds."""

    budget: str
    latency_cycles: int | None
    energy_pj: float | None
    gap: float | None
    wall_seconds: float
    matched_seconds: float | None
    """When the trail first held a latency <= the reference's (None: never)."""
    status: str


def read_runs(path: Path) -> list[ReferenceRun]:
    with path.open() as f:
        return [ReferenceRun(r["network"], r["hw"], int(r["batch"]),
                             int(r["stage1_latency_cycles"]), int(r["stage2_latency_cycles"]),
                             int(r["ideal_cycles"]), float(r["energy_pj"]),
                             float(r["wall_seconds_2_threads"]))
                for r in csv.DictReader(f)]


def solve_once(ref: ReferenceRun, time_limit: float | None) -> Run:
    """Runs `mipsched solve` in its own process and reads its JSON and certificate."""
    exe = shutil.which("mipsched")
    if exe is None:
        raise SystemExit("mipsched is not on PATH: pip install -e . first")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [exe, "solve", ref.network, "--hw", ref.hw, "--batch", str(ref.batch),
               "--json", "--out", tmp]
        if time_limit is not None:
            cmd += ["--time-limit", f"{time_limit:g}"]
        started = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
        budget = "default" if time_limit is None else f"{time_limit:g} s"
        if done.returncode not in (0, 1):
            return Run(budget, None, None, None, wall, None, f"exit {done.returncode}: "
                       f"{done.stderr.strip()[-200:]}")
        out = json.loads(done.stdout)
        certificate = json.loads((Path(tmp) / "certificate.json").read_text())
    trail = certificate.get("trail") or []
    matched = next((p["seconds"] for p in trail
                    if p["latency_cycles"] <= ref.stage2_cycles), None)
    return Run(budget, out.get("latency_cycles"), out.get("energy_pj"), out.get("gap"),
               wall, matched, out.get("status", "?"))


def _ratio(ours: float | None, theirs: float) -> str:
    return "—" if ours is None else f"{ours / theirs:.4f}"


def _row(ref: ReferenceRun, run: Run) -> str:
    # energy at the CSV's precision (whole pJ): the same schedule costs the same
    edp = None if run.latency_cycles is None or run.energy_pj is None else \
        run.latency_cycles * round(run.energy_pj)
    lat = "—" if run.latency_cycles is None else f"{run.latency_cycles:,}"
    gap = "—" if run.gap is None else f"{100 * run.gap:.2f} %"
    matched = "never" if run.matched_seconds is None else f"{run.matched_seconds:.1f}"
    strict = run.budget == "default" and ref.above_ideal > 0.01
    ok_lat = run.latency_cycles is not None and (
        run.latency_cycles < ref.stage2_cycles if strict
        else run.latency_cycles <= ref.stage2_cycles)
    ok_edp = edp is not None and edp <= ref.edp
    required = run.budget != "default" or strict
    verdict = ("yes" if ok_lat and ok_edp else "no") if required else "n/a"
    return (f"| {ref.network} | {ref.hw} | {ref.batch} | {run.budget} | "
            f"{ref.stage2_cycles:,} | {lat} | {_ratio(run.latency_cycles, ref.stage2_cycles)}"
            f" | {_ratio(run.energy_pj, ref.energy_pj)} | {_ratio(edp, ref.edp)} | {gap} | "
            f"{run.wall_seconds:.1f} | {matched} | {verdict} | {run.status} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=RUNS)
    parser.add_argument("--only", nargs="*", default=None, metavar="NET:HW:BATCH")
    parser.add_argument("--skip-default", action="store_true",
                        help="only the equal-time runs (a)")
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results" / "vs_reference.md")
    args = parser.parse_args()
    refs = [r for r in read_runs(args.csv) if args.only is None or r.key in args.only]
    lines = ["# mipsched vs the SoMa reference (benchmarks/vs_reference.py)", "",
             "Ratios are mipsched / reference (< 1: mipsched better); `matched` = seconds "
             "until mipsched first held a latency <= the reference's; `ok` = latency and "
             "E x D both <= the reference's (with the default budget, latency strictly "
             "below it where the reference is more than 1 % above its ideal; `n/a`: "
             "no requirement, the reference being within 1 % of its ideal). Energy is "
             "compared at the CSV's precision (whole pJ). (a) rows "
             "run with the reference's wall time as --time-limit, (b) rows with the "
             "default budget; each run is a fresh process (start-up included) on 2 "
             f"cores. Reference runs: `{args.csv.name}`.", "",
             "| network | hw | batch | budget | reference | mipsched | latency | energy | "
             "E x D | gap | wall s | matched s | ok | status |",
             "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for ref in refs:
        budgets: list[float | None] = [ref.wall_seconds]
        if not args.skip_default:
            budgets.append(None)
        for budget in budgets:
            run = solve_once(ref, budget)
            lines.append(_row(ref, run))
            print(lines[-1], flush=True)
    above = [r.key for r in refs if r.above_ideal > 0.01]
    lines += ["", f"Reference more than 1 % above its ideal (must be beaten strictly with "
              f"the default budget): {', '.join(above) or 'none'}."]
    publish(lines, args.out)


if __name__ == "__main__":
    main()
