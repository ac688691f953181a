"""The NoC bound of mipsched/tiled/bound.py (`noc`: compulsory DRAM transfers over a cut
of the mesh's links / (its links x link bandwidth)).

Checked two ways on every evaluated tree: the bytes the root's record puts on each cut
are at least what `cut_load` guarantees (the core claim of the proof), and the bound is
at most the tree's latency. Trees: every RA tree of tiny chains (brute force), random
valid trees on machines where the term binds (1-byte links, ports on one side, two
ports) and where it does not, the reference's four ResNet-50 b8 schedules. Two broken
variants (the cut's capacity halved, every transfer's bytes counted whole on the cut)
are caught by the same checks."""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path

import pytest
from test_tiled_bound import all_trees, chain, reference_trees
from test_tiled_evaluate import CACHE, HW, WL
from test_tiled_hw import TINY
from test_tiled_simulate import HW2, HW4, HW_LINKS, workload

from mipsched.hw.tiled import DramPort, Mesh, TiledHardware, load_tiled_hardware
from mipsched.tiled.bound import (
    CompulsoryTraffic,
    LinkCut,
    compulsory_dram_bytes,
    compulsory_traffic,
    cut_load,
    link_cuts,
    tiled_bounds,
)
from mipsched.tiled.evaluate import Evaluation, evaluate_tree
from mipsched.tiled.random_trees import random_tree
from mipsched.tiled.ratree import Cut, Leaf, RaTree, TreeError, check_tree
from mipsched.workload.graph import NetBuilder, Workload
from mipsched.workload.resolve import resolve_network

CutLoad = Callable[[CompulsoryTraffic, LinkCut], Fraction]
"""Guaranteed bytes on a cut (`cut_load` or a broken variant)."""


def narrow(hw: TiledHardware, name: str, **changes) -> TiledHardware:
    """`hw` with 1-byte links and 512-byte DRAM (the NoC term binds), changed further."""
    return dataclasses.replace(
        hw, name=name, noc=dataclasses.replace(hw.noc, link_bytes_per_cycle=1),
        dram=dataclasses.replace(hw.dram, bytes_per_cycle=512,
                                 ports=changes.pop("ports", hw.dram.ports)), **changes)


ONE_SIDE = narrow(HW4, "left-ports-4x4", ports=tuple(DramPort(0, y) for y in range(4)))
"""Ports on the left column only: no column cut separates them; the row cuts do."""
TWO_PORTS = narrow(HW4, "two-ports-4x4", ports=(DramPort(0, 1), DramPort(3, 2)))
CORNER = narrow(HW4, "corner-port-4x4", ports=(DramPort(0, 0),))
"""One port: a one-core leaf on its tile needs no link, so the bound is 0."""
WIDE = narrow(HW4, "narrow-6x5", mesh=Mesh(6, 5),
              ports=tuple(DramPort(x, y) for x in (0, 5) for y in range(5)))
MACHINES = (HW4, HW2, HW_LINKS, ONE_SIDE, TWO_PORTS, CORNER, WIDE)
NETS = ("chain3", "chain5", "resblock", "dag", "fc2")


def on_cut(ev: Evaluation, cut: LinkCut) -> int:
    """Bytes the tree's root record puts on the cut's links."""
    return sum(ev.record.links.get(link, 0) for link in cut.links)


def noc_value(wl: Workload, hw: TiledHardware, load: CutLoad = cut_load,
              capacity: Fraction = Fraction(1)) -> int:
    """The NoC bound (cycles) computed with `load` and the cut's links x `capacity`."""
    traffic = compulsory_traffic(wl, hw.n_tiles)
    return max((math.ceil(load(traffic, c) / (len(c.links) * capacity
                                              * hw.noc.link_bytes_per_cycle))
                for c in link_cuts(hw)), default=0)


def whole_transfers(traffic: CompulsoryTraffic, cut: LinkCut) -> Fraction:
    """Broken: every transfer's bytes counted whole on the cut (as if a read's shares
    from both sides crossed it)."""
    return cut_load(traffic, dataclasses.replace(cut, share=Fraction(1)))


BROKEN: dict[str, Callable[[Workload, TiledHardware], int]] = {
    "capacity halved": lambda wl, hw: noc_value(wl, hw, capacity=Fraction(1, 2)),
    "whole transfers": lambda wl, hw: noc_value(wl, hw, whole_transfers),
}


def check(hw: TiledHardware, wl: Workload, ev: Evaluation) -> None:
    """The cut claims and the bound hold on one evaluated tree."""
    traffic = compulsory_traffic(wl, hw.n_tiles)
    for cut in link_cuts(hw):
        assert on_cut(ev, cut) >= cut_load(traffic, cut), (hw.name, cut.name)
    bounds = tiled_bounds(wl, hw)
    assert bounds.noc.value == noc_value(wl, hw)
    assert bounds.noc.value <= ev.latency, hw.name
    assert bounds.latency.value <= ev.latency, hw.name


def binds(wl: Workload, hw: TiledHardware) -> bool:
    """The NoC term is the strongest latency bound."""
    bounds = tiled_bounds(wl, hw)
    return bounds.latency.name == "noc" and bounds.noc.value > max(
        bounds.compute.value, bounds.compulsory_dram.value)


# --- brute force: every RA tree of tiny chains ----------------------------------------------
def tiny_machines(tmp_path: Path) -> list[TiledHardware]:
    """The 2 x 2 test machine (ports on two opposite corners) as is and with 1-byte
    links and wide DRAM."""
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    hw = load_tiled_hardware(str(path))
    return [hw, narrow(hw, "tiny-narrow")]


def every_tree(hw: TiledHardware, wl: Workload) -> Iterator[Evaluation]:
    """The evaluation of every valid RA tree of the chain `wl`."""
    cache: dict = {}
    for tree in all_trees(list(wl.layers), wl.batch):
        try:
            check_tree(tree, wl, hw.n_tiles)
        except TreeError:
            continue
        ev = evaluate_tree(hw, wl, tree, stride=1, cache=cache)
        if ev is not None:
            yield ev


@pytest.mark.parametrize(("n_layers", "batch"), [(2, 1), (2, 2), (3, 2), (3, 4)])
def test_bound_below_every_tree_of_a_tiny_chain(tmp_path: Path, n_layers: int,
                                                batch: int) -> None:
    wl = chain(n_layers, batch)
    for hw in tiny_machines(tmp_path):
        latencies = []
        for ev in every_tree(hw, wl):
            check(hw, wl, ev)
            latencies.append(ev.latency)
        assert latencies, hw.name
        assert tiled_bounds(wl, hw).noc.value <= min(latencies)
    narrow_hw = tiny_machines(tmp_path)[1]
    assert binds(wl, narrow_hw)


def fc_chain(n_layers: int, batch: int) -> Workload:
    """fc layers 1024 -> 1024: weight-bound, the NoC term is within 1.5 x of the best."""
    b = NetBuilder("fcs", batch)
    x = b.input("x", 1024, 1, 1)
    for k in range(n_layers):
        x = b.fc(f"f{k}", x, 1024)
    return b.build()


@pytest.mark.parametrize(("n_layers", "batch"), [(1, 1), (2, 1), (2, 2)])
def test_broken_variants_are_caught_by_the_brute_force(n_layers: int, batch: int) -> None:
    """Every tree of an fc chain on 1-byte links: the bound holds, binds, and a bound
    twice as high (either broken variant) is above the best tree."""
    wl = fc_chain(n_layers, batch)
    latencies = []
    for ev in every_tree(HW_LINKS, wl):
        check(HW_LINKS, wl, ev)
        latencies.append(ev.latency)
    assert binds(wl, HW_LINKS)
    assert tiled_bounds(wl, HW_LINKS).noc.value <= min(latencies) < 1.51 * noc_value(
        wl, HW_LINKS)
    for name, broken in BROKEN.items():
        assert broken(wl, HW_LINKS) > min(latencies), name


# --- random valid trees ---------------------------------------------------------------------
def random_cases(n: int, seed: int) -> Iterator[tuple[TiledHardware, Workload, Evaluation]]:
    """n random trees on random machines and workloads; the valid ones, evaluated."""
    rng = random.Random(seed)
    caches: dict[tuple[str, str, int], dict] = {}
    for _ in range(n):
        hw, net = rng.choice(MACHINES), rng.choice(NETS)
        batch = rng.choice((1, 2, 4, 8))
        wl = fc_chain(2, batch) if net == "fc2" else workload(net, batch)
        tree = random_tree(wl, rng.randint)
        check_tree(tree, wl)
        ev = evaluate_tree(hw, wl, tree, cache=caches.setdefault(
            (hw.name, wl.name, wl.batch), {}))
        if ev is not None:
            yield hw, wl, ev


def test_bound_below_random_trees() -> None:
    """The claims hold on random valid trees of every machine; the term binds on the
    narrow-link ones; each broken variant exceeds some tree's latency."""
    seen: set[str] = set()
    caught: set[str] = set()
    for hw, wl, ev in random_cases(400, 20):
        check(hw, wl, ev)
        seen.add(hw.name)
        if binds(wl, hw):
            seen.add(f"binds on {hw.name}")
        caught |= {name for name, broken in BROKEN.items() if broken(wl, hw) > ev.latency}
    assert seen >= {m.name for m in MACHINES}
    assert seen >= {f"binds on {m.name}" for m in (HW_LINKS, ONE_SIDE, TWO_PORTS, WIDE)}
    assert caught == set(BROKEN)


def test_one_port_gives_no_cut_and_a_zero_bound() -> None:
    wl = workload("chain3", 2)
    assert tiled_bounds(wl, CORNER).noc.value == 0
    one_tile = dataclasses.replace(CORNER, mesh=Mesh(1, 1))
    assert link_cuts(one_tile) == []
    assert tiled_bounds(wl, one_tile).noc.value == 0


# --- the reference's ResNet-50 b8 schedules -------------------------------------------------
def test_bound_below_the_reference_schedules() -> None:
    """On set-4x4 the term is far below the others (69,550 cycles: half the DRAM bytes
    over 8 links of 24 B/cycle); with 1-byte links it is about the DRAM bound."""
    hw_narrow = dataclasses.replace(HW, noc=dataclasses.replace(HW.noc,
                                                                link_bytes_per_cycle=1))
    bounds = tiled_bounds(WL, HW)
    assert (bounds.compute.value, bounds.compulsory_dram.value, bounds.noc.value) == (
        1_984_912, 1_669_673, 69_550)
    assert bounds.latency.name == "compute"
    cache: dict = {}
    for name, tree in reference_trees().items():
        for hw, leaf_cache in ((HW, CACHE), (hw_narrow, cache)):
            ev = evaluate_tree(hw, WL, tree, cache=leaf_cache)
            assert ev is not None, name
            check(hw, WL, ev)
            if hw is HW and name == "set":
                assert ev.latency == 5_427_112


def test_the_term_binds_with_narrow_links_on_set_12x12() -> None:
    """set-12x12 with 1-byte links: 24 links cross the middle of the mesh, the DRAM
    delivers 144 B/cycle, so the NoC term is ~3 x the DRAM bound (bounds only: a
    12 x 12 evaluation of ResNet-50 takes a minute)."""
    hw = load_tiled_hardware("set-12x12")
    hw1 = dataclasses.replace(hw, noc=dataclasses.replace(hw.noc, link_bytes_per_cycle=1))
    wl = resolve_network("resnet50", 8, 1)
    assert tiled_bounds(wl, hw).latency.name == "compute"
    bounds = tiled_bounds(wl, hw1)
    assert binds(wl, hw1)
    assert bounds.noc.value > 2.9 * bounds.compulsory_dram.value
    assert "the cut between columns" in bounds.noc.derivation


# --- units: the model counts elements ------------------------------------------------------
def test_two_byte_elements_keep_the_bounds_below_the_model() -> None:
    """The leaf counts elements (one byte each, INT8) whatever elem_bytes is; the DRAM
    and NoC bounds count elements too."""
    b = NetBuilder("c", 2, 2)
    x = b.conv("a", b.input("x", 64, 8, 8), 64, 3)
    b.conv("b", x, 64, 1)
    wl = b.build()
    ev = evaluate_tree(HW4, wl, RaTree(Cut("T", (Leaf("a"), Leaf("b"))), 2))
    assert ev is not None
    assert ev.record.dram_bytes >= compulsory_dram_bytes(wl)
    check(HW4, wl, ev)
