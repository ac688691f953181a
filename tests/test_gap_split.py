"""The gap split (solve/gap_split.py): a schedule's latency is the compute bound plus
each layer's compute above its charge plus the stalls, read from the simulator's replay;
`solve` reports it in its certificate and its table."""

from __future__ import annotations

import json
from collections import defaultdict
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mipsched.cli import app
from mipsched.formulations.bounds import LatencyBound, network_latency_bound
from mipsched.heuristics.baseline import unfused_baseline
from mipsched.hw import load_hardware
from mipsched.schedule.lowering import Lowerer
from mipsched.sim import simulate
from mipsched.solve import solve_network
from mipsched.solve.gap_split import KEEP, gap_split
from mipsched.workload import zoo


@pytest.mark.parametrize(("net", "batch", "method"), [("chain3", 1, "baseline"),
                                                      ("resblock", 1, "auto"),
                                                      ("resnet50", 4, "baseline"),
                                                      ("gpt2_small_decode", 2, "cocco")])
def test_the_split_adds_up_to_the_latency(net: str, batch: int, method: str) -> None:
    workload, hw = zoo.get(net, batch=batch), load_hardware("edge")
    outcome = solve_network(workload, hw, method, time_limit=4.0)
    split, cand = outcome.gap_split, outcome.candidate
    assert split is not None and cand is not None
    assert split.latency_cycles == cand.evaluation.latency_cycles
    assert split.compute_bound_cycles == outcome.bound.components["compute"]
    assert (split.bound_cycles, split.binding) == (outcome.bound.cycles, outcome.bound.binding)
    assert split.compute_bound_cycles + split.compute_above_cycles + split.stall_cycles \
        == split.latency_cycles
    assert split.stall_cycles == cand.evaluation.stall_cycles
    per_layer: dict[str, int] = defaultdict(int)
    for tile in cand.program.tiles:
        per_layer[tile.layer] += tile.compute_cycles
    charges = outcome.bound.compute_by_layer
    assert charges is not None
    assert all(x.computed == per_layer[x.layer] and x.charged == charges[x.layer]
               for x in split.layers)
    excess = [x.computed - x.charged for x in split.layers]
    assert excess == sorted(excess, reverse=True) and all(e > 0 for e in excess)
    above = sorted((per_layer[n] - c for n, c in charges.items()), reverse=True)
    assert excess == [e for e in above[:KEEP] if e >= 1]


def test_the_waits_name_what_the_tiles_waited_for() -> None:
    workload, hw = zoo.get("chain3", batch=1), load_hardware("edge")
    lowerer = Lowerer(workload, hw)
    cand = unfused_baseline(lowerer).best
    replay = simulate(cand.program, cand.dlsa)
    split = gap_split(replay, network_latency_bound(workload, hw))
    assert split is not None
    stalls = sorted(replay.stalls, key=lambda t: -t.stall)
    assert [(w.layer, w.tile, w.cycles) for w in split.waits] == \
        [(t.layer, t.tile, t.stall) for t in stalls[:KEEP]]
    first = replay.tiles[0]
    assert first.stall > 0  # the first tile waits for its input and weights
    wait = next(w for w in split.waits if (w.layer, w.tile) == (first.layer, first.tile))
    record = next(r for r in replay.transfers if r.tensor == first.waited_for)
    assert wait.transfer.startswith(f"{record.kind} {record.layer}")
    assert f"({record.bytes:,} B)" in wait.transfer
    if len(stalls) <= KEEP:
        assert sum(w.cycles for w in split.waits) + split.tail_cycles == split.stall_cycles


def test_no_split_without_per_layer_charges() -> None:
    workload, hw = zoo.get("chain3", batch=1), load_hardware("edge")
    cand = unfused_baseline(Lowerer(workload, hw)).best
    bare = LatencyBound(1, "compute", network_latency_bound(workload, hw).bounds)
    assert gap_split(simulate(cand.program, cand.dlsa), bare) is None


def test_charges_that_overstate_a_layer_show_as_negative_excess() -> None:
    """Each layer's excess is read against its own charge, so charges above what the
    schedule spends (a broken bound) show: no layer above its charge, and a negative
    compute above the bound."""
    workload, hw = zoo.get("chain3", batch=1), load_hardware("edge")
    cand = unfused_baseline(Lowerer(workload, hw)).best
    honest = network_latency_bound(workload, hw)
    assert honest.compute_by_layer is not None
    doubled = {n: 2 * c + Fraction(1) for n, c in honest.compute_by_layer.items()}
    broken = LatencyBound(honest.cycles, honest.binding, honest.bounds, doubled)
    split = gap_split(simulate(cand.program, cand.dlsa), broken)
    assert split is not None and split.layers == () and split.compute_above_cycles < 0


def test_solve_writes_and_prints_the_split(tmp_path: Path) -> None:
    out = CliRunner().invoke(app, ["solve", "resblock", "--method", "baseline", "--out",
                                   str(tmp_path)])
    assert out.exit_code == 0, out.output
    assert "above the compute bound" in out.stdout and "stalled on DRAM" in out.stdout
    cert = json.loads((tmp_path / "certificate.json").read_text())
    split = cert["gap_split"]
    assert split["latency_cycles"] == cert["incumbent"]["latency_cycles"]
    assert split["compute_bound_cycles"] + split["compute_above_bound_cycles"] \
        + split["stall_cycles"] == split["latency_cycles"]
    assert split["bound_cycles"] == cert["lower_bound"]["latency_cycles"]
