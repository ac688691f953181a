"""`--time-limit T` is a promise: the `mipsched` process exits by T + 1 s of wall time
from its start, whatever the method; the default budget stops at a certified gap; and
every run records its best-so-far trail in certificate.json.

The promise checks run the real command in a subprocess on nets where each method runs
much longer without the limit, and check that the limit is what stopped it. Before the
deadline was handed down, at T = 2: auto 14 s and cpsat 14 s on resnet50, exact 52 s
on fsrcnn at batch 4, cocco, greedy and dp 3.3 to 3.4 s on googlenet (17, 8 and 5 s
without a limit), bound 3.6 s; at T = 3: dp 5.5 s on resnet50 at batch 4, solve
INSTANCE.json 6.2 to 6.5 s. They are promise checks, not benchmarks: the margin of 1 s
absorbs a shared machine's load.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mipsched import clock
from mipsched.cli import app
from mipsched.errors import InputError
from mipsched.evaluate import evaluate
from mipsched.formulations.dlsa import solve_dlsa
from mipsched.formulations.exact import exact_search
from mipsched.formulations.lfa import solve_lfa
from mipsched.heuristics.baseline import unfused_baseline
from mipsched.hw import load_hardware
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa
from mipsched.solve import (
    DEFAULT_GAPS,
    DEFAULT_TIME_LIMIT,
    STOP_REASONS,
    target_latency,
)
from mipsched.solve import solve_network as solve
from mipsched.workload import zoo

EDGE = load_hardware("edge")
MARGIN = 1.0
"""Seconds past --time-limit the process may take to exit."""
LIMIT = 2.0
"""--time-limit of the promise checks (seconds)."""
HEAVY_LIMIT = 3.0
"""... for results of some 10,000 tiles (test_heavy_results_exit_by_the_time_limit)."""


def run_process(args: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    """Wall seconds of `mipsched ARGS` as a fresh process (start-up included)."""
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", "from mipsched.cli import main; main()",
                           *args], capture_output=True, text=True, timeout=300)
    return time.perf_counter() - started, proc


def check_promise(args: list[str], out: Path, limited: bool = True,
                  limit: float = LIMIT) -> dict:
    """Runs `solve ARGS --time-limit limit`; asserts the exit by limit + MARGIN and, if
    `limited`, that the time limit ended the search. Returns the certificate."""
    wall, proc = run_process([*args, "--time-limit", str(limit), "--out", str(out),
                              "--json"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert wall <= limit + MARGIN, f"{' '.join(args)}: {wall:.2f} s"
    cert = json.loads((out / "certificate.json").read_text())
    if limited:
        assert cert["stopped_by"] == "time_limit", cert["stopped_by"]
    return cert


# name -> (args, whether the time limit must be what ended the search); the fast set
# has one case per layer where the overshoot came from (SA and the LFA model's segment
# table in auto, the exact search's order models, a partition method's loops), the
# rest are slow.
CASES = {
    "auto": (["resnet50", "--method", "auto", "--gap", "0"], True),
    "exact": (["fsrcnn", "--batch", "4", "--method", "exact"], True),
    "dp": (["googlenet", "--method", "dp"], True),
    "sa": (["resnet50", "--method", "sa"], True),
    "cpsat": (["resnet50", "--method", "cpsat", "--gap", "0"], True),
    "cocco": (["googlenet", "--method", "cocco"], True),
    "greedy": (["googlenet", "--method", "greedy"], True),
    "baseline": (["fsrcnn", "--batch", "4", "--method", "baseline"], False),
}
FAST = ("auto", "exact", "dp")


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in FAST
                                               else pytest.mark.slow) for n in CASES])
def test_solve_exits_by_the_time_limit(name: str, tmp_path: Path) -> None:
    args, limited = CASES[name]
    cert = check_promise(["solve", *args], tmp_path, limited)
    assert cert["time_limit_s"] == LIMIT
    assert cert["incumbent"] is not None


@pytest.fixture(scope="module")
def big_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tile program of 10,240 tiles (resblock at batch 16, every layer its own FLG at
    tiling 2,048) whose greedy prefetching DLSA alone took 4 s."""
    wl = zoo.get("resblock", 16)
    order = tuple(wl.layers)
    cuts = tuple(range(1, len(order)))
    program = Lowerer(wl, EDGE).lower(Lfa(order, cuts, (2048,) * len(order), cuts))
    dlsa = default_dlsa(program)
    ev = evaluate(program, dlsa)
    assert ev.fits
    program.solutions["default"] = (dlsa, ev.latency_cycles, ev.peak_buffer_bytes)
    path = tmp_path_factory.mktemp("program") / "big.json"
    program.save(path)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("args", [["resnet50", "--batch", "4", "--method", "dp"],
                                  ["BIG", "--method", "cpsat"], ["BIG", "--method", "sa"]],
                         ids=["dp-resnet50-b4", "instance-cpsat", "instance-sa"])
def test_heavy_results_exit_by_the_time_limit(args: list[str], big_program: Path,
                                              tmp_path: Path) -> None:
    """Results of some 10,000 tiles (dp's on resnet50/b4; a program whose prefetching
    DLSA took 4 s, where the search used to start): start-up, the start, the replay
    and the files take 3 to 3.5 s of a loaded machine, so the limit is HEAVY_LIMIT."""
    args = [str(big_program) if a == "BIG" else a for a in args]
    check_promise(["solve", *args], tmp_path, limit=HEAVY_LIMIT)


@pytest.mark.slow
def test_bound_and_compare_exit_by_the_time_limit(tmp_path: Path) -> None:
    wall, proc = run_process(["bound", "fsrcnn", "--batch", "4", "--time-limit",
                              str(LIMIT), "--json"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert wall <= LIMIT + MARGIN
    methods = ["exact", "dp"]
    wall, proc = run_process(["compare", "fsrcnn", "--batch", "4", "--methods",
                              ",".join(methods), "--time-limit", str(LIMIT), "--out",
                              str(tmp_path), "--json"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert wall <= len(methods) * (LIMIT + MARGIN)
    rows = json.loads(proc.stdout)
    assert all(r["runtime_s"] <= LIMIT + MARGIN for r in rows if r["method"] in methods)


def test_process_start_counts_the_interpreter_start_up() -> None:
    """In a fresh process the start lies before the import of mipsched (Python's own
    start-up: tens of milliseconds), not seconds before."""
    assert clock.process_start() <= clock.IMPORTED <= time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", "from mipsched import clock; "
                           "print(clock.IMPORTED - clock.process_start())"],
                          capture_output=True, text=True, timeout=60, check=True)
    assert 0.0 <= float(proc.stdout) < 5.0
    if sys.platform.startswith("linux"):
        assert float(proc.stdout) > 0.0


# --- the models and the exact search count building against their time --------------

def test_lfa_model_counts_its_segment_table() -> None:
    """resnet50's segment table alone took 15 to 25 s whatever the time limit."""
    lowerer = Lowerer(zoo.get("resnet50"), EDGE)
    incumbent = unfused_baseline(lowerer).best
    started = time.perf_counter()
    sol = solve_lfa(lowerer, incumbent=incumbent.lfa, time_limit=0.5, workers=1)
    assert time.perf_counter() - started < 0.5 + MARGIN
    assert sol.lfa == incumbent.lfa and not sol.improved and sol.status is None


def test_dlsa_model_without_time_returns_its_hint() -> None:
    lowerer = Lowerer(zoo.get("chain5"), EDGE)
    start = unfused_baseline(lowerer).best
    sol = solve_dlsa(start.program, start.dlsa, time_limit=0.0, workers=1)
    assert sol.dlsa == start.dlsa and sol.status.status == "unknown"
    assert sol.lower_bound is None


def test_exact_search_counts_building_its_order_models() -> None:
    """fsrcnn at batch 4: the first order's model took 68 s to build."""
    lowerer = Lowerer(zoo.get("fsrcnn", 4), EDGE)
    incumbent = unfused_baseline(lowerer).best
    started = time.perf_counter()
    result = exact_search(lowerer, incumbent, 1.0, workers=1)
    assert time.perf_counter() - started < 1.0 + MARGIN
    assert not result.proven and not result.all_orders
    assert result.lower_bound <= result.best.evaluation.latency_cycles


# --- the certified-gap target ---------------------------------------------------------

@pytest.mark.parametrize("bound", [1, 7, 999, 1_611_411, 10**9 + 7])
@pytest.mark.parametrize("gap", [0.001, 0.01, 0.05, 0.5])
def test_target_latency_is_the_largest_within_the_gap(bound: int, gap: float) -> None:
    target = target_latency(bound, gap)
    assert target is not None and target >= bound
    assert (target - bound) / target <= gap
    assert (target + 1 - bound) / (target + 1) > gap
    assert target_latency(bound, 0.0) is None


def test_default_budget_and_gaps() -> None:
    wl = zoo.get("chain3")
    base = solve(wl, EDGE, "baseline")
    assert base.time_limit == DEFAULT_TIME_LIMIT and base.gap_target == 0.0
    assert base.target_latency is None and base.stopped_by == "search_end"
    assert DEFAULT_GAPS == {"auto": 0.01, "cpsat": 0.01}
    assert solve(wl, EDGE, "auto", workers=1).gap_target == 0.01
    assert solve(wl, EDGE, "auto", time_limit=5, workers=1).gap_target == 0.0
    with pytest.raises(InputError, match="--gap"):
        solve(wl, EDGE, "auto", gap=1.0)


@pytest.mark.parametrize("method", ["auto", "cpsat"])
def test_a_reached_gap_target_ends_the_search(method: str) -> None:
    """A loose target is reached by the first schedule (SA's, or the unfused start):
    no CP-SAT model runs after it."""
    outcome = solve(zoo.get("chain5"), EDGE, method, seed=1, workers=1, gap=0.9)
    latency = outcome.candidate.evaluation.latency_cycles
    assert outcome.stopped_by == "gap"
    assert latency <= outcome.target_latency
    assert (latency - outcome.bound.cycles) / latency <= 0.9
    assert not any(m.model == "dlsa" for m in outcome.models)


def test_exact_stops_at_its_target() -> None:
    outcome = solve(zoo.get("chain3"), EDGE, "exact", seed=1, workers=1, gap=0.9,
                    objective="latency")
    assert outcome.stopped_by == "gap"
    assert outcome.models[0].status == "skipped"


# --- the trail ------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["cocco", "greedy", "dp", "cpsat", "baseline"])
def test_trail_records_each_improvement(method: str) -> None:
    started = time.perf_counter()
    outcome = solve(zoo.get("resblock", 4), EDGE, method, seed=1, time_limit=20,
                    workers=1, gap=0.0, started=started)
    trail = outcome.trail
    assert trail, "at least the result"
    seconds = [t for t, _, _ in trail]
    costs = [c for _, _, c in trail]
    assert seconds == sorted(seconds) and seconds[0] >= 0
    assert seconds[-1] <= time.perf_counter() - started
    assert all(a > b for a, b in zip(costs, costs[1:], strict=False))
    ev = outcome.candidate.evaluation
    assert trail[-1][1:] == (ev.latency_cycles, pytest.approx(ev.edp))


def test_certificate_carries_trail_gap_target_and_stop(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["solve", "chain5", "--method", "cocco",
                                      "--time-limit", "10", "--objective", "latency",
                                      "--out", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    cert = json.loads((tmp_path / "certificate.json").read_text())
    assert cert["objective"] == "latency"
    assert cert["gap_target"] == 0.0 and cert["target_latency_cycles"] is None
    assert cert["stopped_by"] in STOP_REASONS and cert["stopped_by"] != "gap"
    assert cert["time_limit_s"] == 10
    assert cert["trail"] and set(cert["trail"][0]) == {"seconds", "latency_cycles",
                                                        "cost"}
    assert cert["trail"][-1]["latency_cycles"] == cert["incumbent"]["latency_cycles"]
    assert math.isclose(cert["trail"][-1]["cost"], cert["incumbent"]["latency_cycles"])
    out = CliRunner().invoke(app, ["solve", "chain5", "--gap", "1.5"])
    assert out.exit_code == 2
