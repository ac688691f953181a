"""The moves of SET's simulated annealing on RA trees (docs/set-model.md §4.3, §4.4).

The SA mutates a mutable copy of the tree (`MNode`), as the reference mutates its
`LTreeNode`s: every node keeps its own batch (`num_batch`), a cut's sub-batch count is
its batch over its children's (equal) batch, and a cut's kind is re-deduced by
alternation (S under T, T under S) whenever a move resets it. `to_ratree` turns the
result back into an immutable `RaTree` for `check_tree` and `evaluate_tree`.

One proposal (`Mutator.propose`) picks a layer uniformly, walks to its leaf, draws one of
the seven operations with weights 10, 10, 20, 20, 20, 20, 40 and applies it if its
preconditions hold; otherwise it draws a new layer and operation. A failed attempt
leaves the tree untouched.

- 0 swap with the previous leaf, 1 with the next one (not if a direct edge joins them);
- 2 delete the leaf's parent (not the root), splicing its children into the grandparent;
- 3 a new cut over a range of the parent's children (>= 3 children, not all of them;
  depth limit; under the root: "T under T" with probability 1/2 in SET, always in LS,
  never in LP; a new cut that is not a forced T under a T cut resets the batches in the
  range to 1);
- 4 / 5 double / halve the batch of an ancestor's children (the root only with
  probability 0.1 x depth);
- 6 move the leaf into its neighbour cut before / after it, or out of its parent to the
  grandparent when it is at that end (the parent needs >= 3 children).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

from mipsched.tiled.ratree import Cut, Leaf, Node, RaTree
from mipsched.workload.graph import Workload

WEIGHTS = (10, 10, 20, 20, 20, 20, 40)
"""Draw weights of the operations 0..6 (`sa_change`)."""
OP_NAMES = ("swap_prev", "swap_next", "delete_parent", "new_parent", "batch_down",
            "batch_up", "move_leaf")
METHODS = ("set", "ls", "lp")
MAX_TRIES = 10_000
"""Attempts per proposal before giving up (the round then counts as rejected)."""
_CUMULATIVE = tuple(itertools.accumulate(WEIGHTS))


class MNode:
    """A mutable RA-tree node: kind 'L' (leaf, with `layer`), 'S' or 'T'; `batch` is the
    node's own batch (samples per invocation)."""

    __slots__ = ("kind", "layer", "children", "batch", "parent")

    def __init__(self, kind: str, batch: int, layer: str = "",
                 parent: MNode | None = None) -> None:
        self.kind = kind
        self.layer = layer
        self.children: list[MNode] = []
        self.batch = batch
        self.parent = parent

    def walk(self) -> Iterator[MNode]:
        """This node and all below it, depth first."""
        yield self
        for c in self.children:
            yield from c.walk()

    def height(self) -> int:
        """0 for a leaf, else 1 + the largest child height (the reference's `height`)."""
        return 1 + max(c.height() for c in self.children) if self.children else 0


def copy_tree(node: MNode, parent: MNode | None = None) -> MNode:
    """A deep copy of the sub-tree under `node`."""
    new = MNode(node.kind, node.batch, node.layer, parent)
    new.children = [copy_tree(c, new) for c in node.children]
    return new


def from_ratree(tree: RaTree) -> MNode:
    """The mutable form of `tree` (each node's batch from the sub-batch counts)."""
    def build(node: Node, batch: int, parent: MNode | None) -> MNode:
        if isinstance(node, Leaf):
            return MNode("L", batch, node.layer, parent)
        new = MNode(node.kind, batch, "", parent)
        child_batch = batch // node.subbatches
        new.children = [build(c, child_batch, new) for c in node.children]
        return new
    return build(tree.root, tree.batch, None)


def to_ratree(root: MNode) -> RaTree | None:
    """The immutable tree of `root`; None when a cut's children differ in batch or their
    batch does not divide the cut's (a tree the reference would assert on)."""
    def build(node: MNode) -> Node | None:
        if node.kind == "L":
            return Leaf(node.layer)
        child_batch = node.children[0].batch
        if child_batch < 1 or node.batch % child_batch or any(
                c.batch != child_batch for c in node.children):
            return None
        children = [build(c) for c in node.children]
        if any(c is None for c in children):
            return None
        return Cut(node.kind, tuple(children), node.batch // child_batch)
    built = build(root)
    return None if built is None else RaTree(built, root.batch)


def _retype(node: MNode, parent_kind: str) -> None:
    """Re-deduce the kinds of the sub-tree under `node` by alternation."""
    if node.kind == "L":
        return
    node.kind = "T" if parent_kind == "S" else "S"
    for c in node.children:
        _retype(c, node.kind)


def _flat(node: MNode) -> None:
    """Every batch in the sub-tree to 1 (`flat_bat`)."""
    node.batch = 1
    for c in node.children:
        _flat(c)


def _halve(node: MNode) -> None:
    """Halve the batch, recursing into children that had the same batch (`halv_bat`)."""
    old = node.batch
    node.batch //= 2
    for c in node.children:
        if c.batch == old:
            _halve(c)


def _swap(a: MNode, b: MNode) -> None:
    pa, pb = a.parent, b.parent
    ia, ib = pa.children.index(a), pb.children.index(b)
    pa.children[ia] = b
    pb.children[ib] = a
    a.parent, b.parent = pb, pa
    a.batch, b.batch = b.batch, a.batch


def is_chain(workload: Workload) -> bool:
    """Every layer but the first reads the layer before it (swaps are then useless)."""
    names = list(workload.layers)
    return all(names[i - 1] in workload.layers[names[i]].inputs
               for i in range(1, len(names)))


class Mutator:
    """Proposes neighbours of an RA tree for SET's SA (`method` 'set'), or its LS / LP
    restrictions ('ls', 'lp': depth 2, new cuts under the root always T / S)."""

    def __init__(self, workload: Workload, method: str, rng: random.Random) -> None:
        if method not in METHODS:
            raise ValueError(f"method '{method}': expected one of {', '.join(METHODS)}")
        self.method = method
        self.rng = rng
        self.layers = list(workload.layers)
        self.prevs = {n: set(layer.inputs) for n, layer in workload.layers.items()}
        self.max_depth = len(self.layers) if method == "set" else 2
        self.enabled = [True] * len(WEIGHTS)
        if is_chain(workload):
            self.enabled[0] = self.enabled[1] = False
        if workload.batch == 1:
            self.enabled[4] = self.enabled[5] = False

    def propose(self, root: MNode) -> tuple[MNode | None, int]:
        """A mutated copy of the tree `root` and the operation applied; (None, -1) when
        no operation applied in MAX_TRIES attempts."""
        new = copy_tree(root)
        leaves = {n.layer: n for n in new.walk() if n.kind == "L"}
        for _ in range(MAX_TRIES):
            leaf = leaves[self.layers[self.rng.randrange(len(self.layers))]]
            depth, up = 0, leaf
            while up.parent is not None:
                depth, up = depth + 1, up.parent
            op = self._pick_op()
            if self._apply(op, leaf, depth):
                return new, op
        return None, -1

    def _pick_op(self) -> int:
        while True:
            r = self.rng.randrange(_CUMULATIVE[-1])
            op = next(k for k, c in enumerate(_CUMULATIVE) if r < c)
            if self.enabled[op]:
                return op

    def _apply(self, op: int, leaf: MNode, depth: int) -> bool:
        if op == 0:
            return self._swap_prev(leaf)
        if op == 1:
            return self._swap_next(leaf)
        if op == 2:
            return self._delete_parent(leaf)
        if op == 3:
            return self._new_parent(leaf, depth)
        if op in (4, 5):
            return self._batch(leaf, depth, op == 4)
        return self._move_leaf(leaf)

    def _swap_prev(self, leaf: MNode) -> bool:
        c, front = leaf, leaf.parent
        while front is not None and front.children[0] is c:
            c, front = front, front.parent
        if front is None:
            return False
        other = front.children[front.children.index(c) - 1]
        while other.children:
            other = other.children[-1]
        if other.layer in self.prevs[leaf.layer]:
            return False
        _swap(leaf, other)
        return True

    def _swap_next(self, leaf: MNode) -> bool:
        c, back = leaf, leaf.parent
        while back is not None and back.children[-1] is c:
            c, back = back, back.parent
        if back is None:
            return False
        other = back.children[back.children.index(c) + 1]
        while other.children:
            other = other.children[0]
        if leaf.layer in self.prevs[other.layer]:
            return False
        _swap(leaf, other)
        return True

    @staticmethod
    def _delete_parent(leaf: MNode) -> bool:
        par = leaf.parent
        grandma = par.parent
        if grandma is None:
            return False
        i = grandma.children.index(par)
        grandma.children[i:i + 1] = par.children
        for x in par.children:
            x.parent = grandma
            x.batch = par.batch
            _retype(x, grandma.kind)
        return True

    def _new_parent(self, leaf: MNode, depth: int) -> bool:
        par = leaf.parent
        n = len(par.children)
        if n <= 2:
            return False
        i, last = par.children.index(leaf), n - 1
        while True:
            j = self.rng.randrange(last)
            j += j >= i
            if not (i * j == 0 and i + j == last):
                break
        lo, hi = min(i, j), max(i, j) + 1
        if par.height() + depth > self.max_depth and any(
                c.height() + depth >= self.max_depth for c in par.children[lo:hi]):
            return False
        forced_t = False
        if par.parent is None and par.kind == "T":
            forced_t = {"set": self.rng.random() < 0.5, "lp": False, "ls": True}[self.method]
        new = MNode("T" if forced_t or par.kind == "S" else "S", leaf.batch, "", par)
        new.children = par.children[lo:hi]
        par.children[lo:hi] = [new]
        for x in new.children:
            x.parent = new
            _retype(x, new.kind)
            if not forced_t and par.kind == "T":
                _flat(x)
        return True

    def _batch(self, leaf: MNode, depth: int, down: bool) -> bool:
        cur = leaf.parent
        for _ in range(self.rng.randrange(depth)):
            cur = cur.parent
        child_batch = cur.children[0].batch
        if (child_batch == cur.batch) if down else (child_batch == 1):
            return False
        if cur.parent is None and not self.rng.random() < 0.1 * depth:
            return False
        for x in cur.children:
            if down:
                x.batch *= 2
            else:
                _halve(x)
        return True

    def _move_leaf(self, leaf: MNode) -> bool:
        par = leaf.parent
        n = len(par.children)
        if n <= 2:
            return False
        pos = par.children.index(leaf)
        before = self.rng.randrange(2) == 0
        if pos > 0 if before else pos < n - 1:
            cut = par.children[pos - 1 if before else pos + 1]
            if cut.kind == "L":
                return False
            leaf.batch = cut.children[0].batch
            del par.children[pos]
            cut.children.insert(len(cut.children) if before else 0, leaf)
            leaf.parent = cut
            return True
        grandma = par.parent
        if grandma is None:
            return False
        del par.children[pos]
        grandma.children.insert(grandma.children.index(par) + (0 if before else 1), leaf)
        leaf.parent = grandma
        leaf.batch = par.batch
        return True
