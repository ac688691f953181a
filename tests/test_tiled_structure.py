"""SET's structural rules (docs/set-model.md §1.2, §2.3, §2.4, §3.2, §3.3): snake core
numbering, S-Cut stages, edges through DRAM, NPT and the S-Cut core allocation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_ratree import diamond

from mipsched.tiled.ratree import Cut, Leaf, RaTree, check_tree
from mipsched.tiled.structure import (
    allocate,
    core_index,
    core_position,
    core_positions,
    leaf_time,
    stages,
    stores_to_dram,
    sub_clusters,
    unit_time,
    utilisation,
    via_dram,
)
from mipsched.workload.graph import NetBuilder
from mipsched.workload.layer import Op


def chain(batch: int = 4):
    """x -> a -> b -> c."""
    n = NetBuilder("chain", batch)
    a = n.conv("a", n.input("x", 8, 8, 8), 8, 3)
    n.conv("c", n.conv("b", a, 8, 3), 8, 3)
    return n.build()


def skip(batch: int = 4):
    """x -> a -> b -> c = a + b: a residual block (the skip edge a -> c)."""
    n = NetBuilder("skip", batch)
    a = n.conv("a", n.input("x", 8, 8, 8), 8, 3)
    n.eltwise("c", [a, n.conv("b", a, 8, 3)])
    return n.build()


def leaves(names: str) -> tuple[Leaf, ...]:
    return tuple(Leaf(x) for x in names)


def tree(*segments, batch: int = 4) -> RaTree:
    """Root T over `segments` (cuts or layer names)."""
    kids = tuple(Leaf(s) if isinstance(s, str) else s for s in segments)
    return RaTree(Cut("T", kids), batch)


# --- numbering ---------------------------------------------------------------------------
def test_snake_numbering_of_the_4x4_mesh_with_stride_2() -> None:
    expected = [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2), (0, 3), (1, 3),
                (2, 3), (3, 3), (2, 2), (3, 2), (2, 1), (3, 1), (2, 0), (3, 0)]
    assert [core_position(i, 4, 4, 2) for i in range(16)] == expected
    assert core_positions(0, 16, 4, 4, 2) == expected
    assert core_positions(6, 10, 4, 4, 2) == expected[6:10]


@pytest.mark.parametrize(("cols", "rows", "stride"), [(4, 4, 2), (4, 4, 1), (4, 4, 4),
                                                      (12, 12, 2), (6, 3, 3), (1, 5, 1)])
def test_numbering_is_a_bijection_of_neighbours(cols, rows, stride) -> None:
    spots = [core_position(i, cols, rows, stride) for i in range(cols * rows)]
    assert sorted(spots) == [(x, y) for x in range(cols) for y in range(rows)]
    assert all(core_index(x, y, cols, rows, stride) == i for i, (x, y) in enumerate(spots))
    if stride <= 2:  # a snake: consecutive cores are mesh neighbours
        assert all(abs(p[0] - q[0]) + abs(p[1] - q[1]) <= stride
                   for p, q in zip(spots, spots[1:], strict=False))


@pytest.mark.parametrize("args", [(0, 4, 4, 3), (0, 4, 4, 0), (16, 4, 4, 2), (-1, 4, 4, 2)])
def test_bad_numbering_arguments(args) -> None:
    with pytest.raises(ValueError):
        core_position(*args)
    with pytest.raises(ValueError):
        core_index(4, 0, 4, 4, 2)


# --- stages ------------------------------------------------------------------------------
def test_stages() -> None:
    assert stages(Cut("S", leaves("abc")), chain()) == [0, 1, 2]
    assert stages(Cut("S", leaves("abcd")), diamond()) == [0, 1, 1, 2]
    assert stages(Cut("S", leaves("bc")), diamond()) == [0, 0]  # no edge between them
    assert stages(Cut("S", leaves("abc")), skip()) == [0, 1, 2]  # c: max(a + 1, b + 1)
    nested = Cut("S", (Leaf("a"), Cut("T", leaves("bc")), Leaf("d")))
    assert stages(nested, diamond()) == [0, 1, 2]
    # only direct edges count: a feeds c only through b
    assert stages(Cut("S", (Leaf("a"), Leaf("c"))), chain()) == [0, 0]
    with pytest.raises(ValueError, match="S Cuts only"):
        stages(Cut("T", leaves("abc")), chain())


# --- edges through DRAM ------------------------------------------------------------------
def test_edges_between_segments_always_go_through_dram() -> None:
    wl = diamond()
    t = tree(*"abcd")
    check_tree(t, wl)
    assert via_dram(t, wl) == {("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")}
    assert stores_to_dram(t, wl) == {"a", "b", "c", "d"}


def test_s_cut_stage_gap_one_on_chip_two_through_dram() -> None:
    wl = skip()
    t = tree(Cut("S", leaves("abc"), 4))
    check_tree(t, wl)
    assert via_dram(t, wl) == {("a", "c")}  # stages 0 -> 2
    assert stores_to_dram(t, wl) == {"a", "c"}
    wl = diamond()
    t = tree(Cut("S", leaves("abcd"), 4))
    assert via_dram(t, wl) == set()  # every gap is 1
    assert stores_to_dram(t, wl) == {"d"}


def test_t_cut_adjacent_on_chip_others_through_dram() -> None:
    wl = skip()
    assert via_dram(tree(Cut("T", leaves("abc"))), wl) == {("a", "c")}
    wl = diamond()
    assert via_dram(tree(Cut("T", leaves("abcd"))), wl) == {("a", "c"), ("b", "d")}
    grouped = tree(Cut("T", (Leaf("a"), Cut("S", leaves("bc"), 2), Leaf("d"))))
    check_tree(grouped, wl)
    assert via_dram(grouped, wl) == set()  # a -> S -> d: adjacent children of the T


def test_the_rule_is_decided_at_the_lowest_common_ancestor() -> None:
    wl = skip()
    # a -> c: LCA is the S Cut, whose children 0 (stage 0) and 1 (stage 1) hold them
    t = tree(Cut("S", (Leaf("a"), Cut("T", leaves("bc"))), 2))
    check_tree(t, wl)
    assert via_dram(t, wl) == set()
    # segments: a alone, then T(b, c): a -> b and a -> c cross the root
    assert via_dram(tree("a", Cut("T", leaves("bc"))), wl) == {("a", "b"), ("a", "c")}


# --- NPT ---------------------------------------------------------------------------------
def test_leaf_times_by_hand() -> None:
    wl = diamond()
    assert leaf_time("a", wl) == 8 * 8 * 9 * 64 / 1024  # 36
    assert leaf_time("c", wl) == 8 * 8 * 64 / 1024  # 4
    assert leaf_time("d", wl) == 8 * 64 * 2 / 64  # eltwise, N = 2: 16
    n = NetBuilder("misc", 1)
    x = n.input("x", 3, 8, 8)
    p = n.conv("p", x, 5, 3)  # C 3 -> 8, K 5 -> 8
    g = n.conv("g", n.conv("q", p, 16, 1), 16, 3, groups=2)  # Cg = Kg = 8
    h = n.conv("h", g, 4, 3, groups=2)  # Cg 8, Kg 2: no duplication (Cg = 8)
    k = n.conv("k", h, 4, 3, groups=2)  # Cg = Kg = 2 < 8: / min(4, 4)
    dw = n.depthwise("dw", k, 3)  # 4 groups of 1 x 1: / min(8, 8)
    m = n.pool("m", dw, 2, 2)
    n.fc("f", m, 10)  # C 4 -> 8 over a 4 x 4 kernel, K 10 -> 16
    wl = n.build()
    assert leaf_time("p", wl) == 8 * 8 * 9 * 64 / 1024
    assert leaf_time("g", wl) == 8 * 8 * 9 * 64 * 2 / 1024
    assert leaf_time("h", wl) == 8 * 8 * 9 * 64 * 2 / 1024
    assert leaf_time("k", wl) == 8 * 8 * 9 * 64 * 2 / 4 / 1024
    assert leaf_time("dw", wl) == 8 * 8 * 9 * 64 * 4 / 8 / 1024
    assert leaf_time("m", wl) == 4 * 16 * 4 / 64
    assert leaf_time("f", wl) == 8 * 16 * 16 / 1024


def test_transformer_ops_map_to_convs() -> None:
    n = NetBuilder("attn", 1)
    x = n.input("x", 12, 4, 1)  # 12 features, 4 tokens
    q, kk = n.matmul("q", x, 16), n.matmul("k", x, 16)
    s = n.matmul_act("s", q, kk, heads=2, transpose_rhs=True)  # 2 heads x 4 keys
    n.unary("sm", s, Op.SOFTMAX)
    wl = n.build()
    assert leaf_time("q", wl) == 16 * 16 * 4 / 1024  # C 12 -> 16
    # per head: Cg = 8 features, Kg = 4 keys -> 8 x 8, x 2 heads, no duplication (Cg = 8)
    assert leaf_time("s", wl) == 8 * 8 * 4 * 2 / 1024
    assert leaf_time("sm", wl) == 8 * 4 / 64


def test_unit_time_of_cuts() -> None:
    wl = diamond()
    assert unit_time(Cut("T", leaves("abcd")), wl) == 36 + 36 + 4 + 16
    assert unit_time(Cut("S", leaves("bc"), 2), wl) == 40  # no stages: (n + 0) / n
    assert unit_time(Cut("S", leaves("abcd"), 4), wl) == 92 * (4 + 2) / 4
    nested = Cut("T", (Leaf("a"), Cut("S", leaves("bc"), 1), Leaf("d")))
    assert unit_time(nested, wl) == 36 + 40 + 16
    assert unit_time(Cut("S", (Leaf("a"), Cut("T", leaves("bc"))), 1), wl) == 76 * 2


# --- core allocation ---------------------------------------------------------------------
@pytest.mark.parametrize(("times", "cores", "expected"), [
    # set-model §3.3: floors 10 and 5 tie on ratio 0.9375, the lower index gets the spare
    ([50_176, 25_088], 16, [11, 5]),
    # §5.2 segment 1: floors 3 and 12, br has the smaller ratio; then 12 of 12 is exact
    ([50_176, 12_544 + 112_896 + 50_176], 16, [4, 12]),
    # ideals 10.6 and 1.4: the smaller ratio 1/1.4 wins, not the larger remainder 0.6
    ([53, 7], 12, [10, 2]),
    # ideals 1.5 and 2.5: child 0 (ratio 0.67) takes the spare, then 2 of 2 for child 1
    ([3, 5], 4, [2, 2]),
    ([1, 1, 1], 3, [1, 1, 1]),
    ([5], 7, [7]),
])
def test_allocation_by_hand(times, cores, expected) -> None:
    assert allocate(times, cores) == expected
    assert sub_clusters(3, expected)[0] == (3, 3 + expected[0])
    assert sub_clusters(3, expected)[-1][1] == 3 + cores


def test_allocation_fails() -> None:
    assert allocate([1, 1, 1, 1, 1], 4) is None  # more children than cores
    # ideals 0.04 x 3, 3.88: each small child in turn gets 1 core, then 97 runs on 1:
    # utilisation 100 / (4 x 97) = 0.26
    assert allocate([1, 1, 1, 97], 4, min_util=0) == [1, 1, 1, 1]
    assert allocate([1, 1, 1, 97], 4) is None
    # a tie on 3 cores: [2, 1], utilisation 2 / (3 x 1) = 0.67 < 0.75
    assert allocate([1, 1], 3, min_util=0.6) == [2, 1]
    assert utilisation([1, 1], [2, 1]) == pytest.approx(2 / 3)
    assert allocate([1, 1], 3) is None
    with pytest.raises(ValueError):
        allocate([1, -1], 3)


def test_zero_time_children_still_get_a_core() -> None:
    assert allocate([0, 8], 4, min_util=0) == [1, 3]
    assert allocate([0, 8, 0], 4, min_util=0) == [1, 2, 1]
    assert allocate([0, 8, 0], 4) is None  # 8 / (4 x 8 / 2) = 0.5: idle cores count
    assert allocate([0, 0, 0], 4) == [2, 1, 1]  # nothing to run: shared evenly


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 10**7), min_size=1, max_size=12), st.integers(1, 144),
       st.sampled_from([1, 64, 1024]))
def test_allocation_uses_every_core_and_gives_each_child_one(ops, cores, scale) -> None:
    times = [o / scale for o in ops]  # NPTs are ops / 1024 or ops / 64
    sizes = allocate(times, cores, min_util=0)
    if len(times) > cores:
        assert sizes is None
        return
    assert sizes is not None and sum(sizes) == cores and min(sizes) >= 1
    strict = allocate(times, cores)
    assert strict is None or (strict == sizes and utilisation(times, sizes) >= 0.75)
