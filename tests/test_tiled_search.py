"""SET's SA and its LS / LP restrictions (mipsched.tiled.search, mipsched.tiled.moves):
on the head of ResNet-50 (conv1 .. conv_2_1_res, 11 layers, two residual blocks) at
batch 4 on set-4x4, with few rounds, so that the suite stays fast."""

from __future__ import annotations

import random
import time

import pytest

from mipsched.hw.tiled import load_tiled_hardware
from mipsched.tiled.evaluate import evaluate_tree
from mipsched.tiled.moves import MNode, Mutator, copy_tree, from_ratree, to_ratree
from mipsched.tiled.ratree import Cut, Leaf, RaTree, check_tree
from mipsched.tiled.search import init_tree, objective_cost, search
from mipsched.workload.graph import Workload
from mipsched.workload.resolve import resolve_network

HW = load_tiled_hardware("set-4x4")


def _head(batch: int, n_layers: int = 11) -> Workload:
    full = resolve_network("resnet50", batch, 1)
    names = list(full.layers)[:n_layers]
    return Workload(f"resnet50-head{n_layers}", batch, dict(full.inputs),
                    {n: full.layers[n] for n in names}, (names[-1],))


WL = _head(4)
CACHE: dict = {}
ROUNDS = 4  # per layer: 44 rounds


@pytest.fixture(scope="module")
def runs():
    """One run per method, seed 0, sharing the leaf cache."""
    return {m: search(HW, WL, m, seed=0, rounds_per_layer=ROUNDS, cache=CACHE)
            for m in ("set", "ls", "lp")}


def _shape(tree: RaTree) -> list[tuple[str, int]]:
    """(kind, depth) of every cut below the root."""
    return [(n.kind, p.count(".")) for p, n, _ in tree.nodes()
            if isinstance(n, Cut) and p != "root"]


# --- start tree --------------------------------------------------------------------------
def test_init_tree_is_every_layer_under_the_root_in_layer_order() -> None:
    tree, ev = init_tree(HW, WL, CACHE)
    assert tree.leaves() == list(WL.layers)
    assert isinstance(tree.root, Cut) and tree.root.kind == "T"
    assert all(isinstance(c, Leaf) for c in tree.root.children)
    assert tree.root.subbatches == 1  # leaf batch 4 fits
    assert ev.latency == evaluate_tree(HW, WL, tree).latency


# --- results -----------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["set", "ls", "lp"])
def test_result_is_valid_and_reevaluates_to_its_numbers(runs, method) -> None:
    r = runs[method]
    check_tree(r.tree, WL, HW.n_tiles)
    fresh = evaluate_tree(HW, WL, r.tree)  # no shared cache
    assert fresh is not None
    assert fresh.latency == r.evaluation.latency
    assert fresh.energy_pj == pytest.approx(r.evaluation.energy_pj, rel=1e-12)
    assert r.cost == pytest.approx(fresh.edp, rel=1e-12)
    assert r.rounds == r.rounds_done == ROUNDS * len(WL.layers)
    assert 0 < r.valid <= r.rounds_done and r.accepted <= r.valid


@pytest.mark.parametrize("method", ["set", "ls", "lp"])
def test_best_is_never_worse_than_the_start(runs, method) -> None:
    r = runs[method]
    assert r.cost <= r.start_cost
    best = [p.best_cost for p in r.trail]
    assert best[0] == r.start_cost and best[-1] == r.cost
    assert best == sorted(best, reverse=True)


def test_ls_has_only_t_cuts_under_the_root_and_lp_only_s_cuts(runs) -> None:
    assert all(s == ("T", 1) for s in _shape(runs["ls"].tree))
    assert all(s == ("S", 1) for s in _shape(runs["lp"].tree))


def test_set_started_from_the_better_baseline_is_no_worse_than_both(runs) -> None:
    """Robust by construction: SET starts from the better of the LS and LP results, and
    SA never returns anything worse than its start."""
    base = min(runs["ls"], runs["lp"], key=lambda r: r.cost)
    r = search(HW, WL, "set", seed=1, rounds_per_layer=ROUNDS, start=base.tree,
               cache=CACHE)
    assert r.start_cost == pytest.approx(base.cost, rel=1e-12)
    assert r.cost <= runs["ls"].cost and r.cost <= runs["lp"].cost


def test_same_seed_same_run(runs) -> None:
    again = search(HW, WL, "set", seed=0, rounds_per_layer=ROUNDS, cache={})
    first = runs["set"]
    assert again.tree == first.tree and again.cost == first.cost
    assert (again.valid, again.accepted) == (first.valid, first.accepted)


def test_other_objectives() -> None:
    r = search(HW, WL, "set", seed=2, rounds_per_layer=2, objective="latency", cache=CACHE)
    assert r.cost == r.evaluation.latency <= r.start_evaluation.latency
    r = search(HW, WL, "ls", seed=2, rounds_per_layer=2, objective="energy", cache=CACHE)
    assert r.cost == objective_cost(r.evaluation, "energy") <= r.start_evaluation.energy_pj
    with pytest.raises(ValueError, match="objective"):
        search(HW, WL, objective="power")
    with pytest.raises(ValueError, match="method"):
        search(HW, WL, method="tangram")


def test_time_limit_stops_the_run_early() -> None:
    begin = time.perf_counter()
    r = search(HW, WL, "set", seed=3, rounds_per_layer=100_000, time_limit=0.5,
               cache=CACHE)
    assert time.perf_counter() - begin < 30  # generous: one round may be a slow one
    assert r.rounds_done < r.rounds
    check_tree(r.tree, WL, HW.n_tiles)
    assert r.cost <= r.start_cost


def test_a_restricted_search_refuses_a_deep_start() -> None:
    names = list(WL.layers)
    inner = Cut("T", (Leaf(names[1]), Leaf(names[2])))
    tree = RaTree(Cut("T", (Cut("S", (Leaf(names[0]), inner), 4),)
                      + tuple(Leaf(n) for n in names[3:]), 1), 4)
    with pytest.raises(ValueError, match="depth"):
        search(HW, WL, "lp", start=tree)
    with pytest.raises(ValueError, match="depth"):
        search(HW, WL, "ls", start=RaTree(Cut("T", (Cut("S", tuple(
            Leaf(n) for n in names[:3]), 4),) + tuple(Leaf(n) for n in names[3:]), 1), 4))


# --- moves -------------------------------------------------------------------------------
def _walk(method: str, steps: int, seed: int, workload: Workload = WL):
    """Trees of a random walk of accepted-always proposals."""
    mutator = Mutator(workload, method, random.Random(seed))
    root = from_ratree(init_tree(HW, workload, CACHE)[0])
    for _ in range(steps):
        new, op = mutator.propose(root)
        assert new is not None and 0 <= op <= 6
        tree = to_ratree(new)
        assert tree is not None  # batches stay consistent: equal per cut, dividing
        yield tree
        root = new


@pytest.mark.parametrize("method", ["set", "ls", "lp"])
def test_every_move_keeps_a_well_formed_tree(method) -> None:
    for tree in _walk(method, 400, seed=5):
        check_tree(tree, WL)  # kinds, sub-batches, every layer once, topological order
        if method != "set":
            want = "T" if method == "ls" else "S"
            assert all(s == (want, 1) for s in _shape(tree)), tree
        else:  # kinds alternate below depth 1
            for path, node, _ in tree.nodes():
                if isinstance(node, Cut) and path.count(".") >= 1:
                    assert all(not isinstance(c, Cut) or c.kind != node.kind
                               for c in node.children)


def test_set_walk_reaches_deep_trees_and_both_kinds_under_the_root() -> None:
    kinds, depth = set(), 0
    for tree in _walk("set", 600, seed=7):
        kinds |= {k for k, d in _shape(tree) if d == 1}
        depth = max([depth] + [d for _, d in _shape(tree)])
    assert kinds == {"S", "T"} and depth >= 2


def _leaf(root: MNode, layer: str) -> MNode:
    return next(n for n in root.walk() if n.layer == layer)


def test_new_parent_under_the_root_ls_is_t_lp_is_s_with_unit_batches() -> None:
    start = from_ratree(init_tree(HW, WL, CACHE)[0])
    for method, kind, child_batch in (("ls", "T", 4), ("lp", "S", 1)):
        mutator = Mutator(WL, method, random.Random(0))
        root = copy_tree(start)
        assert mutator._new_parent(_leaf(root, "conv_2_0_b"), 1)
        cut = next(c for c in root.children if c.kind != "L")
        assert cut.kind == kind and cut.batch == 4
        assert {c.batch for c in cut.children} == {child_batch}
        assert to_ratree(root).root.children[root.children.index(cut)].subbatches == \
            4 // child_batch


def test_delete_parent_splices_and_retypes() -> None:
    names = list(WL.layers)
    inner = Cut("S", (Leaf(names[1]), Leaf(names[2])), 2)
    tree = RaTree(Cut("T", (Leaf(names[0]), Cut("T", (inner, Leaf(names[3])), 1))
                      + tuple(Leaf(n) for n in names[4:]), 1), 4)
    root = from_ratree(tree)
    mutator = Mutator(WL, "set", random.Random(0))
    assert mutator._delete_parent(_leaf(root, names[3]))  # removes the T under the root
    out = to_ratree(root)
    spliced = out.root.children[1]
    assert isinstance(spliced, Cut) and spliced.kind == "S"  # re-deduced under the root
    assert spliced.subbatches == 2 and out.leaves() == names


def test_swaps_respect_direct_edges() -> None:
    root = from_ratree(init_tree(HW, WL, CACHE)[0])
    mutator = Mutator(WL, "set", random.Random(0))
    assert not mutator._swap_prev(_leaf(root, "pool1"))  # pool1 reads conv1
    assert not mutator._swap_prev(_leaf(root, "conv1"))  # no previous leaf
    assert mutator._swap_next(_leaf(root, "conv_2_0_c"))  # conv_2_br is independent
    assert to_ratree(root).leaves()[4:6] == ["conv_2_br", "conv_2_0_c"]


def test_batch_moves_double_and_halve() -> None:
    names = list(WL.layers)
    tree = RaTree(Cut("T", (Cut("S", tuple(Leaf(n) for n in names[:3]), 4),)
                      + tuple(Leaf(n) for n in names[3:]), 1), 4)
    root = from_ratree(tree)
    mutator = Mutator(WL, "set", random.Random(0))
    mutator.rng = _Fixed(0)  # always the parent (randrange -> 0)
    assert mutator._batch(_leaf(root, "conv1"), 2, down=True)
    assert to_ratree(root).root.children[0].subbatches == 2
    assert mutator._batch(_leaf(root, "conv1"), 2, down=False)
    assert mutator._batch(_leaf(root, "conv1"), 2, down=False) is False  # children at 1
    assert to_ratree(root).root.children[0].subbatches == 4


class _Fixed(random.Random):
    def __init__(self, value: int) -> None:
        super().__init__(0)
        self.value = value

    def randrange(self, *args, **kwargs) -> int:  # noqa: ARG002
        return self.value


# --- the reference run (slow) ------------------------------------------------------------
@pytest.mark.slow
def test_resnet50_b8_set_beats_the_reference_ls_and_nears_its_set() -> None:
    """runs.csv (seed 2023, best of 4 threads x 7,200 rounds): SET 5,427,112 cycles,
    E x D 8.80294e16; LS 9,470,792 cycles x 2.10617e10 pJ = 1.99470e17. One thread of the
    same 100 rounds per layer measured 1.149e17 .. 1.160e17 over seeds 0..3 (about 1.3x
    the reference's SET): it must beat the reference's LS and stay within 1.4x its SET."""
    wl = resolve_network("resnet50", 8, 1)
    r = search(HW, wl, "set", seed=0, rounds_per_layer=100)
    check_tree(r.tree, wl, HW.n_tiles)
    assert r.cost < 9_470_792 * 2.10617e10
    assert r.cost <= 1.4 * 8.80294e16
