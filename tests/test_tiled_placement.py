"""CP-SAT core counts and placement of an S Cut's children (mipsched.tiled.placement):
the solvers against brute force on small cases, a wrong model caught by the same check,
SET's proportional allocation never better on the model's objective, and the tree-level
re-evaluation against `evaluate_tree` on the reference's SET tree (ResNet-50, batch 8,
set-4x4)."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_tiled_evaluate import CACHE, HW, SET_TREE, WL, parse_printed_tree

from mipsched.tiled import placement
from mipsched.tiled.evaluate import evaluate_tree
from mipsched.tiled.placement import (
    CutMesh,
    CutTraffic,
    best_order,
    consecutive,
    cp_sat_counts,
    cp_sat_placement,
    cut_traffic,
    frontier,
    placement_byte_hops,
    plan_tree,
    with_ranges,
)
from mipsched.tiled.ratree import Cut, Leaf, parse_tree, tree_json
from mipsched.tiled.simulate import simulate_tree
from mipsched.tiled.structure import allocate, core_positions, stores_to_dram, via_dram

PROPERTY = settings(max_examples=40, deadline=None, derandomize=True, database=None)
PORTS = tuple((p.x, p.y) for p in HW.dram.ports)


# --- counts ------------------------------------------------------------------------------------
def _value(tables: list[list[int | None]], counts: tuple[int, ...],
           prefer: list[int] | None) -> tuple[int, int] | None:
    """(slowest time, distance to `prefer` or total cores); None: a count not allowed."""
    times = [t[c - 1] if 1 <= c <= len(t) else None
             for t, c in zip(tables, counts, strict=True)]
    if None in times or min(counts) < 1:
        return None
    ref = prefer or [0] * len(counts)
    return max(times), sum(abs(c - r) for c, r in zip(counts, ref, strict=True))


def brute_counts(tables: list[list[int | None]], cores: int,
                 prefer: list[int] | None = None) -> tuple[int, int] | None:
    """The lexicographic optimum's value by trying every count vector (None: none)."""
    values = [_value(tables, counts, prefer)
              for counts in itertools.product(*(range(1, len(t) + 1) for t in tables))
              if sum(counts) <= cores]
    return min((v for v in values if v is not None), default=None)


def count_problems(result, tables: list[list[int | None]], cores: int,
                   prefer: list[int] | None = None) -> list[str]:
    """What is wrong with a counts result against brute force (empty: nothing)."""
    want = brute_counts(tables, cores, prefer)
    if result is None:
        return [] if want is None else ["no result, but a feasible choice exists"]
    problems = []
    got = _value(tables, result.counts, prefer)
    if sum(result.counts) > cores or got is None:
        problems.append(f"infeasible counts {result.counts}")
    elif got != want or result.cycles != got[0]:
        problems.append(f"{result.counts} gives {got}, optimum {want}")
    if result.status != "optimal":
        problems.append(f"status {result.status}")
    return problems


tables_strategy = st.integers(1, 6).flatmap(lambda cores: st.tuples(
    st.just(cores), st.lists(st.lists(st.one_of(st.none(), st.integers(0, 50)),
                                      min_size=1, max_size=cores), min_size=1, max_size=4)))


@PROPERTY
@given(tables_strategy, st.lists(st.integers(1, 6), min_size=4, max_size=4))
def test_counts_match_brute_force(case: tuple[int, list[list[int | None]]],
                                  prefer: list[int]) -> None:
    """Slowest child first, then the fewest cores, or the closest to a preferred
    allocation (L1)."""
    cores, tables = case
    assert count_problems(cp_sat_counts(tables, cores), tables, cores) == []
    near = prefer[:len(tables)]
    assert count_problems(cp_sat_counts(tables, cores, near), tables, cores, near) == []


def test_a_model_without_the_capacity_constraint_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Drop sum c_i <= cores (the one constraint not on `worst`) from both solves: the
    check sees counts that use more cores than the cut has."""
    tables: list[list[int | None]] = [[40, 20, 10, 5], [40, 20, 10, 5]]
    assert count_problems(cp_sat_counts(tables, 4), tables, 4) == []
    real = placement.new_model

    def without_add():
        model = real()
        add = model.add
        model.add = lambda ct: add(ct) if "worst" in str(ct) else None
        return model

    monkeypatch.setattr(placement, "new_model", without_add)
    wrong = cp_sat_counts(tables, 4, prefer=[4, 4])
    assert wrong is not None and sum(wrong.counts) > 4
    assert count_problems(wrong, tables, 4, [4, 4]) != []


@PROPERTY
@given(st.lists(st.integers(1, 10**6), min_size=1, max_size=6), st.integers(6, 24))
def test_counts_are_never_worse_than_sets_allocation(unit_times: list[int],
                                                     cores: int) -> None:
    """On SET's own proportional model, time_i(c) = ceil(NPT_i x 1000 / c) cycles, the
    CP-SAT counts' slowest child is never slower than `allocate`'s."""
    tables: list[list[int | None]] = [[math.ceil(t * 1000 / c) for c in range(1, cores + 1)]
                                      for t in unit_times]
    result = cp_sat_counts(tables, cores)
    sizes = allocate([float(t) for t in unit_times], cores, min_util=0.0)
    assert result is not None and sizes is not None
    assert result.cycles <= max(t[c - 1] for t, c in zip(tables, sizes, strict=True))


def test_frontier_drops_counts_a_smaller_count_matches() -> None:
    assert frontier([50, None, 50, 30, 30, 10], 5) == [(1, 50), (4, 30)]
    assert cp_sat_counts([[5], [5]], 1) is None  # more children than cores


# --- placement ---------------------------------------------------------------------------------
def brute_byte_hops(mesh: CutMesh, counts: tuple[int, ...], traffic: CutTraffic,
                    starts: tuple[int, ...]) -> int:
    """The placement model written out tile by tile (no tables, no numpy)."""
    pos = core_positions(mesh.first, mesh.first + mesh.cores, mesh.cols, mesh.rows,
                         mesh.stride)
    tiles = [pos[s:s + c] for s, c in zip(starts, counts, strict=True)]

    def term(weight: int, a: list, b: list) -> int:
        total = sum(abs(x - u) + abs(y - v) for x, y in a for u, v in b)
        return (2 * weight * total + len(a) * len(b)) // (2 * len(a) * len(b))

    cost = sum(term(traffic.dram[i], tiles[i], list(mesh.ports)) for i in range(len(counts)))
    for i, j in itertools.combinations(range(len(counts)), 2):
        cost += term(traffic.pair[i][j] + traffic.pair[j][i], tiles[i], tiles[j])
    return cost


def _disjoint(counts: tuple[int, ...], starts: tuple[int, ...], cores: int) -> bool:
    spans = sorted(zip(starts, counts, strict=True))
    return spans[-1][0] + spans[-1][1] <= cores and all(
        s + c <= t for (s, c), (t, _) in itertools.pairwise(spans))


def orders(counts: tuple[int, ...], cores: int) -> list[tuple[int, ...]]:
    """Starts of every order of the children back to back, spare cores one idle block."""
    sizes = list(counts) + ([cores - sum(counts)] if sum(counts) < cores else [])
    found = []
    for perm in itertools.permutations(range(len(sizes))):
        starts, at = [0] * len(sizes), 0
        for i in perm:
            starts[i], at = at, at + sizes[i]
        found.append(tuple(starts[:len(counts)]))
    return found


@st.composite
def placements(draw: st.DrawFn, max_children: int, spare: int) -> tuple:
    """A cut on a range of the 4x4 mesh, counts, and random traffic (some pairs none)."""
    k = draw(st.integers(2, max_children))
    counts = tuple(draw(st.lists(st.integers(1, min(4, (16 - spare) // k)), min_size=k,
                                 max_size=k)))
    first = draw(st.integers(0, 16 - sum(counts) - spare))
    mesh = CutMesh(first, sum(counts) + spare, 4, 4, 2, PORTS)
    weight = st.one_of(st.just(0), st.integers(1, 10**6))
    pair = tuple(tuple(draw(weight) if i < j else 0 for j in range(k)) for i in range(k))
    return mesh, counts, CutTraffic(pair, tuple(draw(weight) for _ in range(k)))


@PROPERTY
@given(placements(5, 0))
def test_order_placement_matches_brute_force_over_orderings(case: tuple) -> None:
    mesh, counts, traffic = case
    best = min(brute_byte_hops(mesh, counts, traffic, s) for s in orders(counts, mesh.cores))
    by_order = best_order(mesh, counts, traffic)
    by_cp_sat = cp_sat_placement(mesh, counts, traffic)
    for result in (by_order, by_cp_sat):
        assert result is not None and result.status == "optimal"
        assert _disjoint(counts, result.starts, mesh.cores)
        assert result.byte_hops == best == brute_byte_hops(mesh, counts, traffic,
                                                           result.starts)
    assert placement_byte_hops(mesh, counts, traffic, by_order.starts) == best


@PROPERTY
@given(placements(3, 3))
def test_cp_sat_placement_matches_brute_force_with_gaps(case: tuple) -> None:
    """With spare cores CP-SAT may leave gaps anywhere: it matches the minimum over every
    disjoint placement; `best_order` matches the orders with one idle block."""
    mesh, counts, traffic = case
    every = [s for s in itertools.product(*(range(mesh.cores - c + 1) for c in counts))
             if _disjoint(counts, s, mesh.cores)]
    result = cp_sat_placement(mesh, counts, traffic)
    assert result is not None and result.status == "optimal"
    assert _disjoint(counts, result.starts, mesh.cores)
    assert result.byte_hops == min(brute_byte_hops(mesh, counts, traffic, s) for s in every)
    by_order = best_order(mesh, counts, traffic)
    assert by_order is not None and by_order.byte_hops == min(
        brute_byte_hops(mesh, counts, traffic, s) for s in orders(counts, mesh.cores))


def test_a_placement_without_no_overlap_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two children that exchange nothing and both want the DRAM ports' column: without
    the no-overlap constraint CP-SAT stacks them on the same cores."""
    mesh = CutMesh(0, 16, 4, 4, 2, PORTS)
    counts, traffic = (2, 2), CutTraffic(((0, 0), (0, 0)), (10**6, 10**6))
    assert _disjoint(counts, cp_sat_placement(mesh, counts, traffic).starts, 16)
    real = placement.new_model

    def without_no_overlap():
        model = real()
        model.add_no_overlap = lambda *args, **kw: None
        return model

    monkeypatch.setattr(placement, "new_model", without_no_overlap)
    wrong = cp_sat_placement(mesh, counts, traffic)
    assert wrong is not None and not _disjoint(counts, wrong.starts, 16)


def test_placement_scales_to_eight_children_on_144_tiles() -> None:
    """Enumerating the 8! orders of eight children on a 12 x 12 mesh stays well under a
    second (CP-SAT over every disjoint placement does not: see the docs)."""
    mesh = CutMesh(0, 144, 12, 12, 2, tuple((0, y) for y in range(12)) +
                   tuple((11, y) for y in range(12)))
    counts = (30, 10, 20, 14, 16, 18, 24, 12)
    pair = tuple(tuple(10**5 * (i + 1) if j == i + 1 else 0 for j in range(8))
                 for i in range(8))
    result = best_order(mesh, counts, CutTraffic(pair, tuple(range(10**4, 9 * 10**4, 10**4))))
    assert result is not None and result.seconds < 1.0
    assert _disjoint(counts, result.starts, 144)


# --- a whole tree ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def set_plan() -> placement.TreePlan:
    return plan_tree(HW, WL, parse_printed_tree(SET_TREE), cache=CACHE)


def test_sets_own_ranges_reproduce_evaluate_tree() -> None:
    """A tree given SET's own allocation as explicit ranges evaluates, simulates and
    round-trips through JSON exactly as without them; a changed range reaches the
    leaves; bad ranges are refused naming the cut."""
    tree = parse_printed_tree(SET_TREE)
    ev = evaluate_tree(HW, WL, tree, cache=CACHE)
    same_tree = with_ranges(tree, {"root.1.2": consecutive((2, 14)),
                                   "root.2.6": consecutive((1, 15))})
    assert same_tree != tree and parse_tree(tree_json(same_tree)) == same_tree
    same = evaluate_tree(HW, WL, same_tree, cache=CACHE)
    assert (same.latency, same.energy_pj) == (ev.latency, ev.energy_pj) == (
        5_427_112, pytest.approx(16_220_303_347.951199, rel=0, abs=1e-5))
    moved_tree = with_ranges(tree, {"root.1.2": ((11, 13), (0, 5))})
    moved = evaluate_tree(HW, WL, moved_tree, cache=CACHE)
    assert moved.leaves["conv_2_1_res"].cores == 2 and moved.leaves["conv_2_2_a"].cores == 5
    replay = simulate_tree(HW, WL, moved_tree, cache=CACHE)
    assert replay is not None and replay.latency == moved.latency
    assert replay.energy_pj == pytest.approx(moved.energy_pj, rel=1e-9)
    with pytest.raises(ValueError, match="root.1.2"):
        with_ranges(tree, {"root.1.2": ((0, 4), (3, 8))})
    with pytest.raises(ValueError, match="root.1"):
        with_ranges(tree, {"root.1": ((0, 4), (4, 8))})
    too_wide = with_ranges(tree, {"root.1.2": ((0, 4), (4, 17))})
    assert evaluate_tree(HW, WL, too_wide, cache=CACHE) is None


def test_cut_traffic_counts_the_fmaps_between_children() -> None:
    """SET's root.1.2 = S(conv_2_1_res, T(conv_2_2_a, b, c)) at batch 1: conv_2_2_a
    reads conv_2_1_res's 256 x 56 x 56 ofmap over the NoC."""
    tree = parse_printed_tree(SET_TREE)
    cut = tree.root.children[1].children[2]
    assert isinstance(cut, Cut) and cut.children[0] == Leaf("conv_2_1_res")
    traffic = cut_traffic(WL, cut, 1, 8, via_dram(tree, WL), stores_to_dram(tree, WL))
    assert traffic.pair == ((0, 256 * 56 * 56), (0, 0))


def test_set_tree_plan(set_plan: placement.TreePlan) -> None:
    """Every S Cut of the SET tree: both solves optimal, the CP-SAT counts' cut time at
    most SET's on the same tables, and the tree re-evaluated under the plans."""
    assert len(set_plan.cuts) == 10
    for cut in set_plan.cuts:
        assert cut.counts.status == cut.placement.status == "optimal"
        assert cut.set_counts is not None
        assert cut.cut_cycles(cut.counts.counts) <= cut.cut_cycles(cut.set_counts)
        assert _disjoint(cut.counts.counts, cut.placement.starts, cut.cores)
    assert set_plan.baseline.latency == 5_427_112
    assert set_plan.evaluation is not None
    assert set_plan.evaluation.latency <= set_plan.baseline.latency
