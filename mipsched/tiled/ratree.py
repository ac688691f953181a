"""SET's Resource Allocation Tree (ISCA'23 §3.1): the inter-layer schedule of a tiled
accelerator.

- A Leaf processes one layer.
- A T Cut gives its children the same tiles one after another: per sub-batch, child 1,
  then child 2, ... (SET Formula (9), first case).
- An S Cut gives its children disjoint groups of tiles; they run in parallel, pipelined
  over the sub-batches: a child that reads another's output starts one sub-batch later
  (Formulas (9)-(10)).
- Every node has a batch b (the root: the workload's batch) and, for a cut, a number of
  sub-batches sb dividing it; each child's batch is b / sb (Formulas (4), (8)); a leaf
  has sb = 1 (Formula (7)).
- The root is a T Cut over all tiles; its children are the segments (SET's code).
- The leaves, left to right, are a topological order of the layers, so every dependency
  (original or deduced between nodes) points from left to right (§3.1.2).

Nodes are addressed by their path from the root: `root`, `root.0`, `root.0.2`, ...
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mipsched.errors import InputError
from mipsched.workload.graph import Workload

KINDS = ("S", "T")
MAX_DEPTH = 64
"""Nesting depth a tree may have (SET's trees of 100+ layers stay below 10)."""


class TreeError(InputError):
    """An RA tree that is not a valid schedule of its workload; the message names the
    node (by path) or the layer."""


@dataclass(frozen=True)
class Leaf:
    layer: str


@dataclass(frozen=True)
class Cut:
    kind: str
    """'S' (spatial: disjoint tile groups, pipelined) or 'T' (temporal: same tiles, in turn)."""
    children: tuple[Node, ...]
    subbatches: int = 1
    """Sub-batches the node's batch is split into; each child processes one at a time."""
    ranges: tuple[tuple[int, int], ...] | None = None
    """S Cut only: the cores [lo, hi) of each child, as offsets from the cut's first core
    (disjoint; mipsched's CP-SAT placement, `mipsched.tiled.placement`). None: SET's
    proportional allocation, children back to back in child order
    (`structure.child_spans`)."""


Node = Leaf | Cut


@dataclass(frozen=True)
class RaTree:
    """A whole schedule: the root node and the batch it processes (the workload's)."""

    root: Node
    batch: int

    def nodes(self) -> Iterator[tuple[str, Node, int]]:
        """(path, node, batch) of every node, depth first, children left to right."""
        stack: list[tuple[str, Node, int]] = [("root", self.root, self.batch)]
        while stack:
            path, node, batch = stack.pop()
            yield path, node, batch
            if isinstance(node, Cut):
                child_batch = batch // node.subbatches
                stack += [(f"{path}.{k}", c, child_batch)
                          for k, c in reversed(list(enumerate(node.children)))]

    def leaves(self) -> list[str]:
        """The layers of the leaves, left to right."""
        return [n.layer for _, n, _ in self.nodes() if isinstance(n, Leaf)]


def layers_of(node: Node) -> list[str]:
    """The layers under `node`, left to right."""
    if isinstance(node, Leaf):
        return [node.layer]
    return [name for c in node.children for name in layers_of(c)]


def min_tiles(node: Node) -> int:
    """Tiles the node needs at least: one per leaf running at once (an S Cut's children
    need disjoint groups; a T Cut's children share theirs)."""
    if isinstance(node, Leaf):
        return 1
    counts = [min_tiles(c) for c in node.children]
    return sum(counts) if node.kind == "S" else max(counts)


def check_tree(tree: RaTree, workload: Workload, n_tiles: int | None = None) -> None:
    """Raises TreeError unless `tree` is a valid RA tree of `workload` (on a machine of
    `n_tiles` tiles, when given): batch, kinds, sub-batch divisibility, every layer in
    exactly one leaf, leaves in a topological order, enough tiles for the S Cuts."""
    if not (isinstance(tree.root, Cut) and tree.root.kind == "T"):
        raise TreeError("root: must be a T Cut (its children are the segments, run one "
                        "after another on all tiles)")
    if tree.batch != workload.batch:
        raise TreeError(f"root: batch {tree.batch} is not the workload's batch "
                        f"{workload.batch}")
    for path, node, batch in tree.nodes():
        if path.count(".") > MAX_DEPTH:
            raise TreeError(f"{path}: deeper than {MAX_DEPTH} levels")
        if isinstance(node, Cut):
            _check_cut(path, node, batch)
    _check_leaves(tree.leaves(), workload)
    if n_tiles is not None and min_tiles(tree.root) > n_tiles:
        raise TreeError(f"root: its S Cuts run {min_tiles(tree.root)} layers at once, "
                        f"more than the {n_tiles} tiles")


def _check_cut(path: str, cut: Cut, batch: int) -> None:
    if cut.kind not in KINDS:
        raise TreeError(f"{path}: kind '{cut.kind}' is not S or T")
    if not cut.children:
        raise TreeError(f"{path}: a cut needs at least one child")
    if len(cut.children) == 1 and path != "root":
        raise TreeError(f"{path}: a cut of one child (only the root may have one)")
    if cut.subbatches < 1 or batch % cut.subbatches:
        raise TreeError(f"{path}: {cut.subbatches} sub-batches do not divide its batch "
                        f"of {batch}")
    if cut.ranges is not None:
        check_ranges(path, cut)


def check_ranges(path: str, cut: Cut) -> None:
    """An S Cut's explicit core ranges: one per child, non-empty, from offset 0 up,
    disjoint. Whether they fit the cut's cores is known only on a machine
    (`structure.child_spans`)."""
    ranges = cut.ranges or ()
    if cut.kind != "S":
        raise TreeError(f"{path}: only an S Cut has core ranges")
    if len(ranges) != len(cut.children):
        raise TreeError(f"{path}: {len(ranges)} core ranges for {len(cut.children)} "
                        "children")
    spans = sorted(ranges)
    if spans[0][0] < 0 or any(lo >= hi for lo, hi in spans) or any(
            a[1] > b[0] for a, b in zip(spans, spans[1:], strict=False)):
        raise TreeError(f"{path}: core ranges {[list(r) for r in ranges]} must be "
                        "non-empty, disjoint [lo, hi) offsets from 0")


def _check_leaves(order: list[str], workload: Workload) -> None:
    """Every layer once, and producers left of consumers."""
    position: dict[str, int] = {}
    for k, name in enumerate(order):
        if name not in workload.layers:
            raise TreeError(f"leaf '{name}': no such layer in {workload.name}")
        if name in position:
            raise TreeError(f"layer '{name}': in two leaves")
        position[name] = k
    missing = [n for n in workload.layers if n not in position]
    if missing:
        raise TreeError(f"layer '{missing[0]}': in no leaf ({len(missing)} layers missing)")
    for name, layer in workload.layers.items():
        for src in layer.inputs:
            if src in position and position[src] > position[name]:
                raise TreeError(f"layer '{name}': its leaf is left of the leaf of its "
                                f"input '{src}' (leaves must follow a topological order)")


def tree_json(tree: RaTree) -> dict[str, Any]:
    """The tree as JSON: {"batch": b, "root": node}; a leaf {"layer": name}, a cut
    {"kind": "S"|"T", "subbatches": sb, "children": [...]}, and an S Cut with explicit
    core ranges also "ranges": [[lo, hi], ...] (offsets from its first core)."""
    return {"batch": tree.batch, "root": _node_json(tree.root)}


def _node_json(node: Node) -> dict[str, Any]:
    if isinstance(node, Leaf):
        return {"layer": node.layer}
    data: dict[str, Any] = {"kind": node.kind, "subbatches": node.subbatches,
                            "children": [_node_json(c) for c in node.children]}
    if node.ranges is not None:
        data["ranges"] = [list(r) for r in node.ranges]
    return data


def parse_tree(data: Any) -> RaTree:
    """The RA tree of `tree_json`'s form; TreeError naming the path of a bad node."""
    if not isinstance(data, dict) or set(data) != {"batch", "root"}:
        raise TreeError("RA tree: expected an object with exactly 'batch' and 'root'")
    batch = data["batch"]
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise TreeError(f"RA tree: batch must be an integer >= 1, got {batch!r}")
    return RaTree(_parse_node(data["root"], "root", 0), batch)


def _parse_node(data: Any, path: str, depth: int) -> Node:
    if depth > MAX_DEPTH:
        raise TreeError(f"{path}: deeper than {MAX_DEPTH} levels")
    if isinstance(data, dict) and set(data) == {"layer"} and isinstance(data["layer"], str):
        return Leaf(data["layer"])
    if not (isinstance(data, dict) and {"kind", "subbatches", "children"} <= set(data)
            <= {"kind", "subbatches", "children", "ranges"}
            and isinstance(data["children"], list)):
        raise TreeError(f"{path}: expected {{\"layer\": name}} or {{\"kind\", "
                        "\"subbatches\", \"children\": [...]}} (and optionally \"ranges\")")
    sb = data["subbatches"]
    if isinstance(sb, bool) or not isinstance(sb, int):
        raise TreeError(f"{path}: subbatches must be an integer, got {sb!r}")
    return Cut(str(data["kind"]), tuple(_parse_node(c, f"{path}.{k}", depth + 1)
                                        for k, c in enumerate(data["children"])), sb,
               _parse_ranges(data.get("ranges"), path))


def _parse_ranges(data: Any, path: str) -> tuple[tuple[int, int], ...] | None:
    """The "ranges" of a cut: None, or a list of [lo, hi] integer pairs."""
    if data is None:
        return None
    if not (isinstance(data, list) and all(
            isinstance(r, list) and len(r) == 2 and all(
                isinstance(v, int) and not isinstance(v, bool) for v in r) for r in data)):
        raise TreeError(f"{path}: ranges must be a list of [lo, hi] integer pairs")
    return tuple((r[0], r[1]) for r in data)
