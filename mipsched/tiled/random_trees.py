"""Random RA trees of a workload, for property tests (the simulator against the analytic
model) and for fuzzing: a random topological order of the layers, cut into segments
under a root T Cut, each segment a leaf or a random nesting of S and T Cuts with random
sub-batch counts (divisors of the node's batch); a third of the S Cuts carry explicit
core ranges (`Cut.ranges`, as mipsched's placement writes them).

The choices come from a `pick(lo, hi)` callable returning an integer in [lo, hi], so
that a caller may draw them from `random.Random.randint` or from a hypothesis strategy
(which then shrinks them). Every tree passes `check_tree` without a tile count; whether
the reference accepts it on a machine (S-Cut allocations, leaf partitions, buffers) is
for `evaluate_tree` to say.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mipsched.tiled.ratree import Cut, Leaf, Node, RaTree
from mipsched.workload.graph import Workload

Pick = Callable[[int, int], int]
"""pick(lo, hi): an integer in [lo, hi]."""


def random_order(workload: Workload, pick: Pick) -> list[str]:
    """A topological order of the layers: repeatedly one of the layers whose inputs
    are all placed."""
    placed: list[str] = []
    done: set[str] = set()
    while len(placed) < len(workload.layers):
        ready = [name for name, layer in workload.layers.items() if name not in done
                 and all(s in done or s not in workload.layers for s in layer.inputs)]
        name = ready[pick(0, len(ready) - 1)]
        placed.append(name)
        done.add(name)
    return placed


def _divisor(n: int, pick: Pick) -> int:
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    return divisors[pick(0, len(divisors) - 1)]


def _groups(items: Sequence[str], pick: Pick, at_least_two: bool) -> list[list[str]]:
    """`items` cut into consecutive groups at random gaps (at least one cut when
    `at_least_two`)."""
    cuts = {gap for gap in range(1, len(items)) if pick(0, 1)}
    if at_least_two and not cuts:
        cuts.add(pick(1, len(items) - 1))
    edges = [0, *sorted(cuts), len(items)]
    return [list(items[a:b]) for a, b in zip(edges, edges[1:], strict=False)]


def _node(layers: list[str], batch: int, depth: int, pick: Pick) -> tuple[Node, int]:
    """A node over `layers` (consecutive in the order) and the batch it leaves its
    children; at depth 0 a cut's children are leaves."""
    if len(layers) == 1:
        return Leaf(layers[0]), batch
    kind = "ST"[pick(0, 1)]
    n = _divisor(batch, pick)
    parts = [[x] for x in layers] if depth == 0 else _groups(layers, pick, True)
    children = tuple(_node(p, batch // n, depth - 1, pick)[0] for p in parts)
    ranges = _ranges(len(children), pick) if kind == "S" and pick(0, 2) == 0 else None
    return Cut(kind, children, n, ranges), batch // n


def _ranges(k: int, pick: Pick) -> tuple[tuple[int, int], ...]:
    """Explicit core ranges for `k` children: 1 to 3 cores each, gaps of 0 or 1 core,
    in a random order of the children (it may not fit a small cut: then the machine
    rejects the tree)."""
    order = list(range(k))
    for i in range(k - 1, 0, -1):  # Fisher-Yates with `pick`
        j = pick(0, i)
        order[i], order[j] = order[j], order[i]
    spans: dict[int, tuple[int, int]] = {}
    lo = pick(0, 1)
    for child in order:
        size = pick(1, 3)
        spans[child] = (lo, lo + size)
        lo += size + pick(0, 1)
    return tuple(spans[c] for c in range(k))


def random_tree(workload: Workload, pick: Pick, max_depth: int = 3) -> RaTree:
    """A random RA tree of `workload`: the root T Cut (sub-batches a random divisor of
    the batch) over random segments of a random topological order; a segment of more
    than one layer is an S or T Cut, nested at most `max_depth` levels below the root."""
    order = random_order(workload, pick)
    n_root = _divisor(workload.batch, pick)
    segments = _groups(order, pick, False)
    children = tuple(_node(seg, workload.batch // n_root, max_depth - 1, pick)[0]
                     for seg in segments)
    return RaTree(Cut("T", children, n_root), workload.batch)
