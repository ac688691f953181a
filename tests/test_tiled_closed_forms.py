"""Closed forms of SET's tiled model for a chain of layers, derived from the rules of
docs/set-model.md §3.7-§3.11 (the replay's semantics, mipsched/tiled/simulate.py), and
checked against both the analytic model (`evaluate_tree`) and the replay
(`simulate_tree`).

Notation. Layers 1..k of a chain, each in one leaf; for one invocation of leaf i (from
its `LeafResult`): c_i its tile cycles (the ceiling tile), D_i its DRAM bytes, L_i its
bytes per directed link, E_i its energy. beta_D is the DRAM bandwidth and beta_L a link's
(bytes per cycle). A leaf inside a cut takes t_i = max(c_i, ceil(D_i / beta_D)) cycles
(§3.7: every leaf may use the whole DRAM bandwidth). A segment (a child of the root)
streams all its DRAM bytes and each link's bytes from its start, so it lasts
max(its compute, ceil(DRAM bytes / beta_D), ceil(busiest link / beta_L)); the root runs
its segments one after another, once per root sub-batch, with no bound of its own.

(a) Layer by layer: root T b/n0 over k one-leaf segments. Segment i is one task of t_i
    and its two streams, so
        latency = n0 x sum_i max(c_i, ceil(D_i / beta_D), ceil(max_l L_i[l] / beta_L)),
        energy = n0 x sum_i E_i,  DRAM bytes = n0 x sum_i D_i.
(a') Layer-sequential segment: root T b/1 over one segment T b/n of the k leaves (LS).
    The T Cut runs, per sub-batch, the leaves one after another on all cores: n x sum
    t_i of compute; its streams carry n x sum_i D_i bytes and n x sum_i L_i[l] per link:
        latency = max(n x sum_i t_i, ceil(n sum_i D_i / beta_D),
                      ceil(max_l n sum_i L_i[l] / beta_L)).
(b) Layer-pipelined segment: root T b/1 over one segment S b/n of the k leaves (LP).
    Leaf i reads leaf i-1, so its pipeline stage is i - 1 and the cut has S = k - 1.
    Slots are max_i t_i long; sub-batch j of leaf i runs in slot j + i - 1, so the last
    one ends with slot n + k - 2: n + k - 1 slots, and
        latency = max((n + k - 1) x max_i t_i, ceil(n sum_i D_i / beta_D),
                      ceil(max_l n sum_i L_i[l] / beta_L)).
(c) Two balanced stages: (b) with k = 2, t_1 = t_2 = t, and streams shorter than the
    pipeline: slot 0 runs layer 1 on sample 0, slot j (1 <= j < B) layer 1 on sample j
    beside layer 2 on sample j - 1, slot B layer 2 on sample B - 1:
        latency = (B + 1) x t  for B sub-batches of one sample.
The tests fail if the model (or the replay) composed T Cuts, S Cuts, segments or the
root differently, e.g. n x max for an S Cut, a sum of stages, a bound at the root.
"""

from __future__ import annotations

from collections import Counter

import pytest
from test_tiled_simulate import HW2, HW4, HW_LINKS

from mipsched.hw.tiled import TiledHardware
from mipsched.tiled.evaluate import Evaluation, evaluate_tree
from mipsched.tiled.ratree import Cut, Leaf, RaTree
from mipsched.tiled.simulate import simulate_tree
from mipsched.tiled.structure import stages
from mipsched.workload.graph import NetBuilder, Workload
from mipsched.workload.resolve import resolve_network

MACHINES = {m.name: m for m in (HW4, HW2, HW_LINKS)}


def _workload(net: str, batch: int) -> Workload:
    return twins(batch) if net == "twins" else resolve_network(net, batch, 1)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _both(hw: TiledHardware, wl: Workload, tree: RaTree) -> tuple[Evaluation, int]:
    """The model's evaluation and the replay's latency, which must agree."""
    ev = evaluate_tree(hw, wl, tree)
    trace = simulate_tree(hw, wl, tree)
    assert ev is not None and trace is not None
    assert trace.latency == ev.latency
    return ev, trace.latency


def _t(hw: TiledHardware, ev: Evaluation, name: str) -> int:
    """t_i = max(c_i, ceil(D_i / beta_D)) of a leaf inside a cut."""
    leaf = ev.leaves[name]
    return max(leaf.tile_cycles, _ceil(leaf.record.dram_bytes, hw.dram.bytes_per_cycle))


def _streams(hw: TiledHardware, ev: Evaluation, names: list[str], n: int) -> tuple[int, int]:
    """(ceil(n sum D_i / beta_D), ceil(max_l n sum L_i[l] / beta_L)) of a segment."""
    links: Counter = Counter()
    for name in names:
        links.update(ev.leaves[name].record.links)
    dram = n * sum(ev.leaves[name].record.dram_bytes for name in names)
    busiest = n * max(links.values(), default=0)
    return (_ceil(dram, hw.dram.bytes_per_cycle),
            _ceil(busiest, hw.noc.link_bytes_per_cycle))


# --- (a) layer by layer ---------------------------------------------------------------------
@pytest.mark.parametrize(("machine", "net", "batch", "n0", "bound"), [
    ("set-4x4", "chain5", 4, 1, "dram"), ("set-4x4", "chain5", 4, 4, "dram"),
    ("set-4x4", "twins", 4, 2, "compute"), ("tiny-2x2", "chain3", 4, 2, "dram"),
    ("narrow-links-4x4", "chain3", 2, 2, "link")])
def test_layer_by_layer(machine, net, batch, n0, bound) -> None:
    hw, wl = MACHINES[machine], _workload(net, batch)
    names = list(wl.layers)
    ev, _ = _both(hw, wl, RaTree(Cut("T", tuple(Leaf(x) for x in names), n0), batch))
    terms = []
    for name in names:
        dram, link = _streams(hw, ev, [name], 1)
        terms.append({"compute": ev.leaves[name].tile_cycles, "dram": dram, "link": link})
    assert ev.latency == n0 * sum(max(t.values()) for t in terms)
    assert ev.record.dram_bytes == n0 * sum(ev.leaves[x].record.dram_bytes for x in names)
    assert ev.energy_pj == pytest.approx(n0 * sum(ev.leaves[x].energy_pj for x in names),
                                         rel=1e-12)
    assert any(max(t, key=t.__getitem__) == bound for t in terms)


# --- (a') a layer-sequential segment ------------------------------------------------------------
@pytest.mark.parametrize(("machine", "net", "batch", "n", "bound"), [
    ("set-4x4", "chain5", 4, 1, "compute"), ("set-4x4", "chain5", 4, 4, "compute"),
    ("tiny-2x2", "chain3", 4, 4, "compute"), ("narrow-links-4x4", "chain5", 2, 2, "link")])
def test_layer_sequential_segment(machine, net, batch, n, bound) -> None:
    hw, wl = MACHINES[machine], _workload(net, batch)
    names = list(wl.layers)
    segment = Cut("T", tuple(Leaf(x) for x in names), n)
    ev, _ = _both(hw, wl, RaTree(Cut("T", (segment,)), batch))
    dram, link = _streams(hw, ev, names, n)
    terms = {"compute": n * sum(_t(hw, ev, x) for x in names), "dram": dram, "link": link}
    assert ev.latency == max(terms.values())
    assert max(terms, key=terms.__getitem__) == bound
    # ceil(n sum D_i / beta_D) <= n sum ceil(D_i / beta_D) <= n sum t_i: never binds
    assert terms["dram"] <= terms["compute"]
    assert ev.energy_pj == pytest.approx(n * sum(ev.leaves[x].energy_pj for x in names),
                                         rel=1e-12)


# --- (b) a layer-pipelined segment --------------------------------------------------------------
@pytest.mark.parametrize(("machine", "net", "batch", "n", "bound"), [
    ("set-4x4", "chain3", 8, 8, "dram"), ("set-4x4", "chain5", 4, 4, "compute"),
    ("set-4x4", "chain5", 8, 2, "compute"), ("tiny-2x2", "chain3", 4, 4, "dram"),
    ("narrow-links-4x4", "chain3", 4, 2, "link")])
def test_layer_pipelined_segment(machine, net, batch, n, bound) -> None:
    hw, wl = MACHINES[machine], _workload(net, batch)
    names = list(wl.layers)
    k = len(names)
    segment = Cut("S", tuple(Leaf(x) for x in names), n)
    assert stages(segment, wl) == list(range(k))
    ev, _ = _both(hw, wl, RaTree(Cut("T", (segment,)), batch))
    dram, link = _streams(hw, ev, names, n)
    pipeline = (n + k - 1) * max(_t(hw, ev, x) for x in names)
    terms = {"compute": pipeline, "dram": dram, "link": link}
    assert ev.latency == max(terms.values())
    assert max(terms, key=terms.__getitem__) == bound


# --- (c) two balanced stages --------------------------------------------------------------------
def twins(batch: int) -> Workload:
    """Two identical 5 x 5 convolutions, 128 -> 128 channels on 28 x 28: on 8 cores each
    they take the same 39,200 cycles per sample, well above their DRAM time."""
    n = NetBuilder("twins", batch)
    x = n.input("x", 128, 28, 28)
    n.conv("l2", n.conv("l1", x, 128, 5), 128, 5)
    return n.build()


@pytest.mark.parametrize("b", [1, 2, 4, 8])
def test_two_balanced_stages_take_b_plus_one_slots(b) -> None:
    wl = twins(b)
    tree = RaTree(Cut("T", (Cut("S", (Leaf("l1"), Leaf("l2")), b),)), b)
    ev, _ = _both(HW4, wl, tree)
    t1, t2 = _t(HW4, ev, "l1"), _t(HW4, ev, "l2")
    assert t1 == t2 == 39_200  # balanced: the stages take the same time
    assert ev.leaves["l1"].cores == ev.leaves["l2"].cores == 8
    assert max(_streams(HW4, ev, ["l1", "l2"], b)) < (b + 1) * t1  # no stream binds
    assert ev.latency == (b + 1) * t1
    trace = simulate_tree(HW4, wl, tree)
    assert trace is not None
    starts = {(t.layer, t.samples[0]): t.start for t in trace.tasks}
    assert starts == {**{("l1", j): j * t1 for j in range(b)},
                      **{("l2", j): (j + 1) * t1 for j in range(b)}}
