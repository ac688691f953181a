"""RA trees (SET §3.1): validity rules, node batches, JSON round trip."""

from __future__ import annotations

import pytest

from mipsched.tiled.ratree import (
    Cut,
    Leaf,
    RaTree,
    TreeError,
    check_tree,
    min_tiles,
    parse_tree,
    tree_json,
)
from mipsched.workload.graph import NetBuilder


def diamond(batch: int = 4):
    """x -> a -> (b, c) -> d: b and c are independent."""
    n = NetBuilder("diamond", batch)
    x = n.input("x", 8, 8, 8)
    a = n.conv("a", x, 8, 3)
    b, c = n.conv("b", a, 8, 3), n.conv("c", a, 8, 1)
    n.eltwise("d", [b, c])
    return n.build()


def lp_tree(batch: int = 4, sb: int = 4) -> RaTree:
    """Layer-pipelined: every layer on its own tiles, pipelined over `sb` sub-batches."""
    return RaTree(Cut("S", tuple(Leaf(x) for x in "abcd"), sb), batch)


def test_valid_trees() -> None:
    wl = diamond()
    check_tree(RaTree(Cut("T", tuple(Leaf(x) for x in "abcd")), 4), wl, 16)  # LS
    check_tree(RaTree(Cut("T", (lp_tree().root,)), 4), wl, 4)
    nested = Cut("T", (Leaf("a"), Cut("S", (Leaf("b"), Leaf("c")), 2), Leaf("d")), 2)
    check_tree(RaTree(nested, 4), wl, 2)
    batches = {p: b for p, _, b in RaTree(nested, 4).nodes()}
    assert batches == {"root": 4, "root.0": 2, "root.1": 2, "root.1.0": 1, "root.1.1": 1,
                       "root.2": 2}


@pytest.mark.parametrize(("tree", "tiles", "message"), [
    (RaTree(Cut("T", tuple(Leaf(x) for x in "abcd")), 2), None, "not the workload's batch"),
    (RaTree(Cut("T", tuple(Leaf(x) for x in "abd")), 4), None, "layer 'c': in no leaf"),
    (RaTree(Cut("T", tuple(Leaf(x) for x in "abcda")), 4), None, "layer 'a': in two"),
    (RaTree(Cut("T", tuple(Leaf(x) for x in "abcdz")), 4), None, "leaf 'z': no such"),
    (RaTree(Cut("T", tuple(Leaf(x) for x in "adbc")), 4), None, "layer 'd': its leaf"),
    (RaTree(Cut("T", tuple(Leaf(x) for x in "abcd"), 3), 4), None, "root: 3 sub-batches"),
    (RaTree(Cut("T", (Leaf("a"), Cut("X", (Leaf("b"), Leaf("c"))), Leaf("d"))), 4), None,
     "root.1: kind 'X'"),
    (RaTree(Cut("T", (Leaf("a"), Cut("S", (Leaf("b"),)), Leaf("c"), Leaf("d"))), 4), None,
     "root.1: a cut of one child"),
    (RaTree(Cut("T", (Leaf("a"), Cut("S", (Leaf("b"), Leaf("c")), 8), Leaf("d"))), 4), None,
     "root.1: 8 sub-batches"),
    (RaTree(Cut("T", (lp_tree().root,)), 4), 3, "more than the 3 tiles"),
    (lp_tree(), None, "root: must be a T Cut"),
])
def test_invalid_trees_name_the_node_or_layer(tree, tiles, message) -> None:
    with pytest.raises(TreeError, match=message):
        check_tree(tree, diamond(), tiles)


def test_min_tiles() -> None:
    assert min_tiles(lp_tree().root) == 4
    nested = Cut("T", (Leaf("a"), Cut("S", (Leaf("b"), Leaf("c"))), Leaf("d")))
    assert min_tiles(nested) == 2


def test_json_round_trip_and_errors() -> None:
    tree = RaTree(Cut("T", (Leaf("a"), Cut("S", (Leaf("b"), Leaf("c")), 2), Leaf("d")), 2), 4)
    assert parse_tree(tree_json(tree)) == tree
    with pytest.raises(TreeError, match="root.1"):
        parse_tree({"batch": 4, "root": {"kind": "T", "subbatches": 1,
                                          "children": [{"layer": "a"}, {"oops": 1}]}})
    with pytest.raises(TreeError, match="batch must be"):
        parse_tree({"batch": 0, "root": {"layer": "a"}})


@pytest.mark.parametrize(("ranges", "kind", "message"), [
    (((0, 2), (1, 3)), "S", "disjoint"),
    (((0, 2),), "S", "1 core ranges for 2 children"),
    (((2, 2), (3, 4)), "S", "non-empty"),
    (((-1, 2), (3, 4)), "S", "offsets from 0"),
    (((0, 2), (2, 4)), "T", "only an S Cut"),
])
def test_core_ranges_are_checked_naming_the_cut(ranges, kind, message) -> None:
    cut = Cut(kind, (Leaf("b"), Leaf("c")), 1, ranges)
    tree = RaTree(Cut("T", (Leaf("a"), cut, Leaf("d")), 1), 4)
    with pytest.raises(TreeError, match=message) as err:
        check_tree(tree, diamond())
    assert "root.1" in str(err.value)


def test_core_ranges_round_trip_and_bad_json() -> None:
    cut = Cut("S", (Leaf("b"), Leaf("c")), 2, ((3, 5), (0, 3)))
    tree = RaTree(Cut("T", (Leaf("a"), cut, Leaf("d")), 1), 4)
    check_tree(tree, diamond())
    data = tree_json(tree)
    assert data["root"]["children"][1]["ranges"] == [[3, 5], [0, 3]]
    assert parse_tree(data) == tree
    data["root"]["children"][1]["ranges"] = [[0, "2"], [2, 4]]
    with pytest.raises(TreeError, match="root.1: ranges must be"):
        parse_tree(data)
