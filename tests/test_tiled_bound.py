"""Multi-core lower bounds (mipsched/tiled/bound.py): below the SET reference's four
ResNet-50 schedules, and below the best of every RA tree of tiny chains (brute force)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
from test_tiled_evaluate import HW, SET_TREE, WL, lp_tree, ls_tree, parse_printed_tree
from test_tiled_hw import TINY

from mipsched.hw.tiled import load_tiled_hardware
from mipsched.tiled.bound import compulsory_dram_bytes, tiled_bounds
from mipsched.tiled.evaluate import evaluate_tree
from mipsched.tiled.ratree import Cut, Leaf, RaTree, TreeError, check_tree
from mipsched.workload.graph import NetBuilder


def reference_trees() -> dict[str, RaTree]:
    init = RaTree(Cut("T", tuple(Leaf(n) for n in WL.layers)), WL.batch)
    return {"init": init, "ls": ls_tree(), "lp": lp_tree(),
            "set": parse_printed_tree(SET_TREE)}


def test_bounds_below_the_reference_schedules() -> None:
    bounds = tiled_bounds(WL, HW)
    for name, tree in reference_trees().items():
        ev = evaluate_tree(HW, WL, tree)
        assert ev is not None, name
        assert bounds.latency.value <= ev.latency, name
        assert bounds.energy.value <= ev.energy_pj, name
        assert bounds.edp <= ev.edp, name
        assert ev.record.dram_bytes >= compulsory_dram_bytes(WL), name


def chain(n_layers: int, batch: int):
    b = NetBuilder("chain", batch)
    x = b.input("x", 64, 8, 8)
    for k in range(n_layers):
        x = b.conv(f"l{k}", x, 64, 3 if k % 2 == 0 else 1)
    return b.build()


def all_trees(layers: list[str], batch: int):
    """Every RA tree of a chain: the root T over consecutive segments, each segment a
    leaf or an S / T Cut of its leaves, every cut's sub-batches a power of two."""
    splits = [1 << k for k in range(batch.bit_length()) if batch % (1 << k) == 0]
    n = len(layers)
    for cuts in itertools.product((0, 1), repeat=n - 1):
        edges = [0, *(k + 1 for k, c in enumerate(cuts) if c), n]
        groups = [layers[a:b] for a, b in zip(edges, edges[1:], strict=False)]
        options = [[Leaf(g[0])] if len(g) == 1 else
                   [Cut(kind, tuple(Leaf(x) for x in g), sb) for kind in "ST"
                    for sb in splits] for g in groups]
        for root_sb in splits:
            for children in itertools.product(*options):
                yield RaTree(Cut("T", tuple(children), root_sb), batch)


@pytest.mark.parametrize(("n_layers", "batch"), [(2, 2), (3, 2), (3, 4)])
def test_bound_below_every_tree_of_a_tiny_chain(tmp_path: Path, n_layers: int,
                                                batch: int) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    hw = load_tiled_hardware(str(path))
    wl = chain(n_layers, batch)
    bounds = tiled_bounds(wl, hw)
    best = math.inf
    cache: dict = {}
    for tree in all_trees(list(wl.layers), batch):
        try:
            check_tree(tree, wl, hw.n_tiles)
        except TreeError:  # more S-Cut children than tiles
            continue
        ev = evaluate_tree(hw, wl, tree, stride=1, cache=cache)
        if ev is not None:
            best = min(best, ev.latency)
            assert bounds.energy.value <= ev.energy_pj * (1 + 1e-12)
    assert best < math.inf
    assert bounds.latency.value <= best
