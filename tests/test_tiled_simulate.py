"""The discrete-event replay of RA trees (mipsched/tiled/simulate.py) is the judge of the
analytic model (mipsched/tiled/evaluate.py): on random valid trees of small workloads,
on three machines, the two agree exactly; the replay reproduces the reference's four
ResNet-50 schedules; and a broken replay is caught."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from functools import cache

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_tiled_evaluate import CACHE, HW, SET_TREE, WL, lp_tree, ls_tree, parse_printed_tree

import mipsched.tiled.simulate as simulate_module
from mipsched.hw.tiled import DramPort, Mesh, TiledHardware, load_tiled_hardware
from mipsched.tiled.evaluate import evaluate_tree
from mipsched.tiled.random_trees import random_order, random_tree
from mipsched.tiled.ratree import Cut, Leaf, RaTree, TreeError, check_tree
from mipsched.tiled.simulate import TiledSimulationError, check_tasks, simulate_tree
from mipsched.tiled.structure import stages
from mipsched.workload.graph import NetBuilder, Workload
from mipsched.workload.resolve import resolve_network

HW4 = load_tiled_hardware("set-4x4")
HW2 = dataclasses.replace(
    HW4, name="tiny-2x2", mesh=Mesh(2, 2),
    noc=dataclasses.replace(HW4.noc, link_bytes_per_cycle=8),
    dram=dataclasses.replace(HW4.dram, bytes_per_cycle=4,
                             ports=tuple(DramPort(x, y) for x in (0, 1) for y in (0, 1))))
"""2 x 2 tiles, narrow DRAM: segments are often DRAM-bound."""
HW_LINKS = dataclasses.replace(
    HW4, name="narrow-links-4x4", noc=dataclasses.replace(HW4.noc, link_bytes_per_cycle=1),
    dram=dataclasses.replace(HW4.dram, bytes_per_cycle=512))
"""4 x 4 tiles, wide DRAM, 1-byte links: segments are often bound by their busiest link."""
MACHINES = (HW4, HW2, HW_LINKS)
NETS = ("chain3", "chain5", "resblock", "dag")
CACHES: dict[tuple[str, str, int], dict] = {}
"""One leaf cache per (machine, workload, batch), shared by all examples."""


def small_dag(batch: int) -> Workload:
    """x -> a -> (b, c) -> d = b + c -> e = d + a: a branch and a skip edge."""
    n = NetBuilder("dag", batch)
    x = n.input("x", 32, 28, 28)
    a = n.conv("a", x, 32, 3)
    b, c = n.conv("b", a, 32, 3), n.conv("c", a, 32, 1)
    d = n.eltwise("d", [b, c])
    n.eltwise("e", [d, a])
    return n.build()


@cache
def workload(net: str, batch: int) -> Workload:
    return small_dag(batch) if net == "dag" else resolve_network(net, batch, 1)


@st.composite
def cases(draw: st.DrawFn) -> tuple[TiledHardware, Workload, RaTree]:
    hw = draw(st.sampled_from(MACHINES))
    wl = workload(draw(st.sampled_from(NETS)), draw(st.sampled_from((1, 2, 4, 8))))
    tree = random_tree(wl, lambda lo, hi: draw(st.integers(lo, hi)))
    return hw, wl, tree


def _model_and_replay(hw: TiledHardware, wl: Workload, tree: RaTree):
    """The model's evaluation and the replay's trace of a well-formed tree (each None
    when it rejects the tree)."""
    check_tree(tree, wl)
    leaf_cache = CACHES.setdefault((hw.name, wl.name, wl.batch), {})
    return (evaluate_tree(hw, wl, tree, cache=leaf_cache),
            simulate_tree(hw, wl, tree, cache=leaf_cache))


def _differences(tree: RaTree, ev, trace) -> list[str]:
    """The figures on which the replay of an accepted tree differs from the model."""
    busiest = trace.busiest_link()
    figures = {
        "latency": (trace.latency, ev.latency),
        "dram bytes": (trace.dram_bytes, ev.record.dram_bytes),
        "byte-hops": (trace.byte_hops, ev.record.byte_hops),
        "busiest link": (busiest[1] if busiest else 0, ev.record.max_link_bytes()),
        "segments": (len(trace.segments), tree.root.subbatches * len(ev.segments)),
        "last end": (trace.segments[-1].end, trace.latency),
    }
    out = [name for name, (got, want) in figures.items() if got != want]
    if trace.energy_pj != pytest.approx(ev.energy_pj, rel=1e-9, abs=0):
        out.append("energy")
    for k, seg in enumerate(trace.segments):
        model = ev.segments[k % len(ev.segments)]
        if (seg.end - seg.start, seg.dram_bytes) != (model.cycles, model.dram_bytes):
            out.append(f"segment {k}")
    return out


@settings(max_examples=250, deadline=None, database=None)
@given(cases())
def test_the_replay_equals_the_model_on_random_trees(case) -> None:
    """Figure by figure (latency, energy, DRAM bytes, byte-hops, busiest link, every
    segment); trees the model rejects are discarded (the replay must reject them too)."""
    hw, wl, tree = case
    ev, trace = _model_and_replay(hw, wl, tree)
    assert (trace is None) == (ev is None)
    assume(ev is not None)
    assert _differences(tree, ev, trace) == []


def test_the_replay_equals_the_model_on_200_valid_random_trees() -> None:
    """The same check on a fixed stream of random trees, counted: 200 that the model
    accepts (the hypothesis test above may discard rejected trees without a count)."""
    rng = random.Random(20)
    agreed = tried = 0
    while agreed < 200:
        tried += 1
        hw, net = rng.choice(MACHINES), rng.choice(NETS)
        wl = workload(net, rng.choice((1, 2, 4, 8)))
        tree = random_tree(wl, rng.randint)
        ev, trace = _model_and_replay(hw, wl, tree)
        assert (trace is None) == (ev is None)
        if ev is not None:
            assert _differences(tree, ev, trace) == []
            agreed += 1
    assert tried < 2_000


def test_random_trees_are_valid_and_cover_the_rules() -> None:
    """The generator's trees pass check_tree; among them are pipelined S Cuts (stages and
    sub-batches), nested cuts and DRAM- and link-bound segments."""
    rng = random.Random(7)
    seen = set()
    for _ in range(150):
        hw, net = rng.choice(MACHINES), rng.choice(NETS)
        wl = workload(net, rng.choice((2, 4, 8)))
        tree = random_tree(wl, rng.randint)
        check_tree(tree, wl)
        trace = simulate_tree(hw, wl, tree, cache=CACHES.setdefault(
            (hw.name, wl.name, wl.batch), {}))
        if trace is None:
            seen.add("rejected")
            continue
        depth = max(path.count(".") for path, _, _ in tree.nodes())
        seen.add(f"depth {min(depth, 3)}")
        for seg in trace.segments:
            if seg.end > seg.compute_end:
                seen.add("dram-bound" if seg.end == seg.dram_end else "link-bound")
        if any(isinstance(n, Cut) and n.kind == "S" and n.subbatches > 1 and max(stages(n, wl))
               for _, n, _ in tree.nodes()):
            seen.add("pipelined S")
        if any(isinstance(n, Cut) and n.ranges is not None for _, n, _ in tree.nodes()):
            seen.add("explicit ranges")
    assert seen >= {"rejected", "depth 1", "depth 2", "depth 3", "dram-bound", "link-bound",
                    "pipelined S", "explicit ranges"}
    order = random_order(small_dag(1), rng.randint)
    assert order.index("a") < min(order.index("b"), order.index("c")) < order.index("e")


# --- the reference's ResNet-50 schedules (docs/set-model.md §5) ------------------------------
@pytest.mark.parametrize(("name", "latency", "energy", "dram"), [
    ("init", 20_266_192, 33_903_298_437.491180, 324_259_072),
    ("ls", 9_470_792, 21_061_725_256.004799, 138_506_008),
    ("lp", 11_016_352, 24_116_442_153.294003, 175_455_744),
    ("set", 5_427_112, 16_220_303_347.951199, 59_971_352)])
def test_the_replay_reproduces_the_reference_schedules(name, latency, energy, dram) -> None:
    trees = {"init": lambda: RaTree(Cut("T", tuple(Leaf(n) for n in WL.layers)), 8),
             "ls": ls_tree, "lp": lp_tree, "set": lambda: parse_printed_tree(SET_TREE)}
    trace = simulate_tree(HW, WL, trees[name](), cache=CACHE)
    assert trace is not None
    assert (trace.latency, trace.dram_bytes) == (latency, dram)
    assert trace.energy_pj == pytest.approx(energy, rel=1e-12)
    samples = Counter()
    for t in trace.tasks:
        samples[t.layer] += t.samples[1] - t.samples[0]
    assert samples == dict.fromkeys(WL.layers, 8)  # every layer runs every sample once


def test_the_set_tree_runs_its_s_cut_side_by_side() -> None:
    """SET segment 1 (§5.2): conv1 19,208 and pool1 1,764 cycles on all cores, then the S
    Cut: conv_2_br on 4 cores and T(conv_2_0_a, b, c) on 12 start together; conv_2_0_res
    starts once the slower side (15,176) is over."""
    trace = simulate_tree(HW, WL, parse_printed_tree(SET_TREE), cache=CACHE)
    assert trace is not None
    first = {t.layer: t for t in trace.tasks if t.subbatch[0] == 0}
    assert (first["conv1"].start, first["pool1"].start) == (0, 19_208)
    s_start = 19_208 + 1_764
    assert first["conv_2_br"].start == first["conv_2_0_a"].start == s_start
    assert (first["conv_2_br"].first, first["conv_2_br"].last) == (0, 4)
    assert (first["conv_2_0_b"].first, first["conv_2_0_b"].last) == (4, 16)
    assert first["conv_2_0_c"].end == s_start + 15_176
    assert first["conv_2_0_res"].start == s_start + 15_176
    assert [s.end - s.start for s in trace.segments[:3]] == [98_996, 278_512, 300_881]
    assert trace.segments[3].subbatch == 1 and trace.segments[3].start == 678_389


# --- a broken replay is caught -----------------------------------------------------------------
def _chain_trace(tree: RaTree):
    wl = workload("chain3", 2)
    trace = simulate_tree(HW4, wl, tree, cache=CACHES.setdefault((HW4.name, wl.name, 2), {}))
    assert trace is not None
    check_tasks(trace.tasks, wl)
    return wl, trace


def test_overlapping_tasks_on_a_core_are_caught() -> None:
    wl, trace = _chain_trace(RaTree(Cut("T", (Leaf("conv1"), Leaf("conv2"), Leaf("conv3"))),
                                    2))
    tasks = list(trace.tasks)
    k = next(i for i, t in enumerate(tasks) if t.layer == "conv3")
    tasks[k] = dataclasses.replace(tasks[k], start=tasks[k].start - 1)
    with pytest.raises(TiledSimulationError, match=r"core 0: root.2 \(conv3.*runs until") as err:
        check_tasks(tasks, wl)
    assert err.value.kind == "overlap"


def test_a_consumer_before_its_producer_is_caught() -> None:
    """Root T 2/2 over three one-layer segments: conv2's task of sample 0 runs before
    conv1's task of sample 1; relabelled to sample 1, it comes too early."""
    wl, trace = _chain_trace(RaTree(Cut("T", (Leaf("conv1"), Leaf("conv2"), Leaf("conv3")),
                                        2), 2))
    tasks = list(trace.tasks)
    k = next(i for i, t in enumerate(tasks) if t.layer == "conv2" and t.samples == (0, 1))
    tasks[k] = dataclasses.replace(tasks[k], samples=(1, 2))
    with pytest.raises(TiledSimulationError, match=r"root.1 \(conv2, samples 1..1\) starts "
                       r"at cycle \d+, before root.0 \(conv1") as err:
        check_tasks(tasks, wl)
    assert err.value.kind == "order"
    missing = [t for t in trace.tasks if not (t.layer == "conv1" and t.samples == (1, 2))]
    with pytest.raises(TiledSimulationError, match="no task of conv1 produced its samples "
                       "from 1 on"):
        check_tasks(missing, wl)


def test_the_replay_catches_a_stage_outlasting_its_slot(monkeypatch) -> None:
    """A pipeline clock one cycle short of the slowest stage (one sub-batch: each slot
    runs one stage, so the stage overruns its slot before anything else collides)."""
    real = simulate_module._Replay._period
    monkeypatch.setattr(simulate_module._Replay, "_period",
                        lambda self, job: real(self, job) - 1)
    tree = RaTree(Cut("T", (Cut("S", (Leaf("conv1"), Leaf("conv2"), Leaf("conv3")), 1),)), 2)
    with pytest.raises(TiledSimulationError, match=r"root.0.\d \(sub-batch .*after its "
                       r"pipeline slot of root.0") as err:
        _chain_trace(tree)
    assert err.value.kind == "slot"


def test_the_replay_catches_two_stages_on_the_same_cores(monkeypatch) -> None:
    """Every child of an S Cut given all its cores: two stages share them."""
    monkeypatch.setattr(simulate_module.structure, "sub_clusters",
                        lambda first, sizes: [(first, first + sum(sizes))] * len(sizes))
    tree = RaTree(Cut("T", (Cut("S", (Leaf("conv1"), Leaf("conv2"), Leaf("conv3")), 2),)), 2)
    with pytest.raises(TiledSimulationError, match="needs core 0 at cycle") as err:
        simulate_tree(HW4, workload("chain3", 2), tree)
    assert err.value.kind == "overlap"


def test_rejected_and_malformed_trees() -> None:
    """None where the model rejects the tree; TreeError for a tree of another workload."""
    wl = workload("chain5", 2)
    too_many = RaTree(Cut("T", (Cut("S", tuple(Leaf(f"conv{i}") for i in range(1, 6))),)), 2)
    assert evaluate_tree(HW2, wl, too_many) is None
    assert simulate_tree(HW2, wl, too_many) is None
    with pytest.raises(TreeError):
        simulate_tree(HW4, wl, RaTree(Cut("T", (Leaf("conv1"),)), 2))
    with pytest.raises(ValueError, match="root"):
        simulate_tree(HW4, wl, RaTree(Cut("S", tuple(Leaf(f"conv{i}") for i in range(1, 6))),
                                      2))
