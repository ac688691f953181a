"""SoMa SA speed at the paper's iteration counts (stage 1 N = 100 x layers LFAs, stage 2
N = 1000 x DRAM tensors, allocator rounds until two without improvement), with one and
with two worker processes, optionally under a time cap.

Run: python benchmarks/sa_speed.py [--cases NET:BATCH[:CAP],...] [--hw HW] [--seed S]
                                   [--workers 1,2] [--repeat K] [--profile]
                                   [--label TEXT] [--out FILE.md]
Prints markdown tables and writes them to --out (default benchmarks/results/sa_speed.md).
Every run starts from cold caches, as a fresh `mipsched solve` would. CPU seconds add the
worker processes' (the fair figure on a machine others use too); each cell shows the
median and the spread (min-max) over the repeats. `result` is a digest of the best LFA
and DLSA: a change that keeps the search's results leaves it unchanged (with one worker
it is the serial search's; with two, the parallel allocator's, the same for any number
of workers above one). Where ../shared/reference-nets/reference-runs.csv has the case,
the table shows when the run first held a schedule at most as slow as the reference's.
--profile adds a one-worker run under pyinstrument and the share of its time each part
of the search takes. The script also runs on code from before the workers existed (it
then runs one worker whatever --workers says).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import hashlib
import json
import resource
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from publish import publish  # benchmarks/ is on sys.path when a benchmark runs

from mipsched.core import SearchOptions
from mipsched.cost import core_array, tile
from mipsched.heuristics.soma_sa import SaRun, run_sa
from mipsched.hw import load_hardware
from mipsched.hw.model import Hardware
from mipsched.schedule.lowering import Lowerer
from mipsched.workload import zoo

REFERENCE_RUNS = Path(__file__).resolve().parents[2] / "shared" / "reference-nets" / \
    "reference-runs.csv"

#: Profile categories: label, the functions (Class.name) whose time counts, outermost call
#: only; before and after the workers existed.
PARTS = [
    ("stage 1", ("anneal_lfa",)),
    ("stage 1 / placing LFAs", ("Lowerer.place", "Lowerer.lower")),
    ("stage 1 / building FLG plans", ("Lowerer._make_plan",)),
    ("stage 1 / peak buffer and timing", ("_peaks", "_replay", "evaluate", "default_dlsa")),
    ("stage 2", ("search_dlsa",)),
    ("stage 2 / replay", ("DlsaState.latency", "_State.latency")),
    ("stage 2 / moves", ("DlsaState.order_places", "DlsaState.set_living", "DlsaState.move",
                         "DlsaState.valid_free_end", "_State.order_places",
                         "_State.set_living", "_State.move", "_State.valid_free_end")),
    ("start schedules", ("initial_lfa",)),
]


@dataclass(frozen=True)
class Case:
    net: str
    batch: int
    cap: float | None
    """Time limit (seconds; None: none)."""

    @property
    def name(self) -> str:
        cap = "" if self.cap is None else f", {self.cap:g} s cap"
        return f"{self.net} b{self.batch}{cap}"


@dataclass(frozen=True)
class Measured:
    cpu_s: float
    wall_s: float
    run: SaRun
    reached_at_s: float | None
    """When the run first held a schedule at most as slow as the reference's (None:
    never, or unknown)."""


def parse_cases(text: str) -> list[Case]:
    cases = []
    for item in text.split(","):
        net, batch, *cap = item.split(":")
        cases.append(Case(net, int(batch), float(cap[0]) if cap else None))
    return cases


def reference_latency(net: str, hw: str, batch: int) -> int | None:
    """The SoMa reference's final latency for this case, if it was run."""
    if not REFERENCE_RUNS.exists():
        return None
    with REFERENCE_RUNS.open() as f:
        for row in csv.DictReader(f):
            if (row["network"], row["hw"], int(row["batch"])) == (net, hw, batch):
                return int(row["stage2_latency_cycles"])
    return None


def digest(run: SaRun) -> str:
    """Short hash of the best schedule's LFA and DLSA."""
    best = run.best.stage2
    text = json.dumps([best.lfa.to_json(), best.dlsa.to_json()])
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def options_for(case: Case, seed: int, workers: int) -> SearchOptions:
    """SearchOptions with a trail when the code has one."""
    fields = {f.name for f in dataclasses.fields(SearchOptions)}
    extra = {}
    if "trail" in fields:
        from mipsched.core import Trail
        extra["trail"] = Trail()
    return SearchOptions(seed=seed, time_limit=case.cap, workers=workers, **extra)


def timed_run(case: Case, hw: Hardware, seed: int, workers: int,
              reference: int | None) -> Measured:
    """One SA run from cold caches: a new Lowerer and no memoised tile costs."""
    tile._tile_cost.cache_clear()  # process-wide lru_caches
    core_array.map_conv.cache_clear()
    wl = zoo.get(case.net, case.batch)
    options = options_for(case, seed, workers)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu, wall = time.process_time(), time.perf_counter()
    run = run_sa(Lowerer(wl, hw), options)
    cpu = time.process_time() - cpu
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu += (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
    trail = getattr(options, "trail", None)
    reached = None
    if reference is not None and trail is not None:
        reached = trail.first_at_most(reference)
    return Measured(cpu, wall, run, reached)


def spread(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def profile_shares(case: Case, hw: Hardware, seed: int) -> dict[str, float] | None:
    """Share of a one-worker run's time per PARTS entry (None: pyinstrument missing)."""
    try:
        from pyinstrument import Profiler
    except ImportError:
        return None
    tile._tile_cost.cache_clear()
    core_array.map_conv.cache_clear()
    profiler = Profiler(interval=0.001)
    profiler.start()
    run_sa(Lowerer(zoo.get(case.net, case.batch), hw), options_for(case, seed, 1))
    profiler.stop()
    root = profiler.last_session.root_frame()
    totals = dict.fromkeys((label for label, _ in PARTS), 0.0)

    def visit(frame, inside: frozenset[str]) -> None:
        entered = set(inside)
        name = f"{frame.class_name}.{frame.function}" if frame.class_name else frame.function
        for label, names in PARTS:
            if label not in inside and name in names:
                totals[label] += frame.time
                entered.add(label)
        for child in frame.children:
            visit(child, frozenset(entered))

    visit(root, frozenset())
    return {label: value / root.time for label, value in totals.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="resnet50:1,resnet50:16:60")
    parser.add_argument("--hw", default="edge")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--label", default="")
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).parent / "results" / "sa_speed.md")
    args = parser.parse_args()
    hw = load_hardware(args.hw)
    cases = parse_cases(args.cases)
    lines = [f"SoMa SA{' (' + args.label + ')' if args.label else ''}: paper iteration "
             f"counts, hw {args.hw}, seed {args.seed}, {args.repeat} runs per row from cold "
             "caches; CPU s include the workers'; median (min-max).", "",
             "| case | workers | CPU s | wall s | rounds | stage-1 LFAs evaluated / N | "
             "stage-2 iterations / N | latency (cycles) | reference (cycles) | first at "
             "most the reference (s) | result |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for case in cases:
        reference = reference_latency(case.net, args.hw, case.batch)
        layers = len(zoo.get(case.net, case.batch).layers)
        for workers in (int(w) for w in args.workers.split(",")):
            runs = [timed_run(case, hw, args.seed, workers, reference)
                    for _ in range(args.repeat)]
            first = runs[0].run
            if case.cap is None:
                assert len({digest(m.run) for m in runs}) == 1, "SA is not deterministic"
            latencies = sorted({m.run.best.stage2.evaluation.latency_cycles for m in runs})
            reached = [m.reached_at_s for m in runs if m.reached_at_s is not None]
            n1 = sum(r.stage1_evaluations for r in first.rounds)
            n2 = sum(r.stage2_iterations for r in first.rounds)
            big_n1 = 100 * layers * len(first.rounds)
            big_n2 = sum(1000 * len(r.stage1.program.tensors) for r in first.rounds)
            lines.append(
                f"| {case.name} | {workers} | {spread([m.cpu_s for m in runs])} | "
                f"{spread([m.wall_s for m in runs])} | {len(first.rounds)} | "
                f"{n1:,} / {big_n1:,} | {n2:,} / {big_n2:,} | "
                f"{' - '.join(f'{x:,}' for x in latencies)} | "
                f"{'' if reference is None else f'{reference:,}'} | "
                f"{spread(reached) + f' ({len(reached)}/{len(runs)})' if reached else ''} | "
                f"{digest(first) if case.cap is None else ''} |")
    if args.profile:
        lines += ["", "Share of a one-worker run's time (pyinstrument, 1 ms samples):", "",
                  "| part | " + " | ".join(c.name for c in cases) + " |",
                  "|---|" + "---:|" * len(cases)]
        shares = [profile_shares(case, hw, args.seed) for case in cases]
        for label, _ in PARTS:
            cells = ["" if s is None else f"{100 * s[label]:.0f} %" for s in shares]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    publish(lines, args.out)


if __name__ == "__main__":
    main()
