"""Segment recombination (mipsched/tiled/recombine.py): a segment costs the same in every
tree, so the recombined tree's figures are the sums of its segments' and its objective
is the least over every sequence of pooled segments (brute force), never above the
best searched tree."""

from __future__ import annotations

import random

import pytest

from mipsched.hw.tiled import load_tiled_hardware
from mipsched.tiled.evaluate import DEFAULT_STRIDE, evaluate_tree
from mipsched.tiled.random_trees import random_tree
from mipsched.tiled.ratree import Cut, Leaf, RaTree, check_tree, layers_of
from mipsched.tiled.recombine import Segment, harvest, pareto_pool, recombine
from mipsched.tiled.search import search
from mipsched.tiled.simulate import simulate_tree
from mipsched.workload.resolve import resolve_network

HW = load_tiled_hardware("set-4x4")


def _pool_from_random_trees(wl, n: int, seed: int) -> tuple[dict, list[RaTree]]:
    """A cache holding the segments of `n` random trees with a root of 1 or 2 sub-batches,
    and the trees the model accepts."""
    cache: dict = {}
    rng = random.Random(seed)
    kept = []
    while len(kept) < n:
        tree = random_tree(wl, rng.randint, max_depth=2)
        if wl.batch % 2 == 0 and tree.root.subbatches not in (1, 2):
            continue
        if evaluate_tree(HW, wl, tree, cache=cache) is not None:
            kept.append(tree)
    return cache, kept


def _brute_force(wl, pool: list[Segment], objective: str) -> float:
    """The least objective over every sequence of pooled segments of one batch that
    covers the layers once, each after its producers."""
    best = float("inf")
    for batch in {s.batch for s in pool}:
        segs = [(frozenset(layers_of(s.node)), s) for s in pool if s.batch == batch]
        n = wl.batch // batch
        for cycles, energy in _sequences(wl, segs, frozenset()):
            best = min(best, {"edp": cycles * energy * n * n, "latency": cycles * n,
                              "energy": energy * n}[objective])
    return best


def _sequences(wl, segs, done: frozenset):
    """(sum of cycles, sum of pJ) of every valid sequence of `segs` after `done`."""
    if len(done) == len(wl.layers):
        yield 0, 0.0
        return
    for names, s in segs:
        needs = {p for x in names for p in wl.layers[x].inputs if p in wl.layers}
        if not names & done and needs <= done | names:
            for cycles, energy in _sequences(wl, segs, done | names):
                yield cycles + s.cycles, energy + s.energy_pj


@pytest.mark.parametrize("objective", ["edp", "latency", "energy"])
@pytest.mark.parametrize(("net", "batch", "seed"), [("chain3", 2, 1), ("resblock", 2, 2),
                                                    ("chain5", 4, 3)])
def test_recombination_is_the_brute_force_optimum_and_evaluates_to_it(net, batch, seed,
                                                                       objective) -> None:
    wl = resolve_network(net, batch, 1)
    cache, trees = _pool_from_random_trees(wl, 12, seed)
    pool = harvest(cache, wl.batch, DEFAULT_STRIDE, 0.75)
    tree = recombine(wl, pool, objective)
    assert tree is not None
    check_tree(tree, wl, HW.n_tiles)
    ev = evaluate_tree(HW, wl, tree, cache={})  # fresh: no pooled figure reused
    score = {"edp": ev.edp, "latency": ev.latency, "energy": ev.energy_pj}[objective]
    assert score == pytest.approx(_brute_force(wl, pool, objective), rel=1e-12)
    for t in trees:  # never above any tree whose segments are pooled
        other = evaluate_tree(HW, wl, t, cache=cache)
        value = {"edp": other.edp, "latency": other.latency,
                 "energy": other.energy_pj}[objective]
        assert score <= value * (1 + 1e-12)
    replay = simulate_tree(HW, wl, tree, cache={})
    assert replay is not None and replay.latency == ev.latency


def test_a_segment_costs_the_same_in_every_tree() -> None:
    """The same segment under two different roots' other segments: same cycles, pJ."""
    wl = resolve_network("chain5", 2, 1)
    names = list(wl.layers)
    middle = Cut("S", (Leaf(names[1]), Leaf(names[2])), 1)
    trees = [RaTree(Cut("T", (Leaf(names[0]), middle, *map(Leaf, names[3:])), 1), 2),
             RaTree(Cut("T", (Leaf(names[0]), middle, Cut("T", tuple(map(
                 Leaf, names[3:])), 2)), 1), 2)]
    costs = []
    for tree in trees:
        cache: dict = {}
        assert evaluate_tree(HW, wl, tree, cache=cache) is not None
        costs.append({(frozenset(layers_of(s.node)), s.cycles, s.energy_pj)
                      for s in harvest(cache, 2, DEFAULT_STRIDE, 0.75)
                      if s.node == middle})
    assert costs[0] == costs[1] and len(costs[0]) == 1


def test_pareto_pool_keeps_only_undominated_segments_per_layer_set() -> None:
    a, b = Leaf("x"), Cut("T", (Leaf("x"),), 1)
    pool = pareto_pool([Segment(a, 1, 10, 5.0), Segment(b, 1, 12, 4.0),
                        Segment(a, 1, 11, 6.0), Segment(a, 2, 30, 9.0)])
    assert sorted((s.batch, s.cycles, s.energy_pj) for s in pool) == [
        (1, 10, 5.0), (1, 12, 4.0), (2, 30, 9.0)]


def test_recombining_several_searches_beats_their_best() -> None:
    """Four short SA runs on resblock: the recombined tree is at most the best run's
    E x D (and the pool holds every run's best tree, so never worse)."""
    wl = resolve_network("resblock", 4, 1)
    cache: dict = {}
    runs = [search(HW, wl, "set", seed=s, rounds_per_layer=6, cache=cache)
            for s in range(4)]
    tree = recombine(wl, harvest(cache, wl.batch, DEFAULT_STRIDE, 0.75), "edp")
    ev = evaluate_tree(HW, wl, tree, cache=cache)
    assert ev.edp <= min(r.cost for r in runs) * (1 + 1e-12)


def test_no_cover_gives_none() -> None:
    wl = resolve_network("chain3", 1, 1)
    only_first = [Segment(Leaf(next(iter(wl.layers))), 1, 5, 1.0)]
    assert recombine(wl, only_first) is None


def test_the_dp_gives_up_past_its_deadline_or_its_most_states() -> None:
    """A pool that covers the network still gives None when the DP may not build its
    states (max_states) or its deadline has passed; with room it finds the tree."""
    wl = resolve_network("resblock", 4, 1)
    cache: dict = {}
    search(HW, wl, "set", seed=0, rounds_per_layer=4, cache=cache)
    pool = harvest(cache, wl.batch, DEFAULT_STRIDE, 0.75)
    assert recombine(wl, pool, "edp") is not None
    assert recombine(wl, pool, "edp", max_states=1) is None
    assert recombine(wl, pool, "edp", deadline=0.0) is None
