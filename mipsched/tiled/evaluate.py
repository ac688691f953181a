"""Evaluation of a whole RA tree with SET's reference cost model (docs/set-model.md §3.1,
§3.9-§3.11): bottom-up, a T Cut passes its cores to every child, an S Cut splits them
with `structure.child_spans` (SET's `allocate` + `sub_clusters`, or the cut's own
`ranges`); leaves run the intra-layer search of
`mipsched.tiled.leaf`.

- T Cut: time = n x sum of the children's times, energy and traffic record likewise.
- S Cut: time = (n + S) x the largest child time; energy and record n x the sums.
- A segment (a child of the root) is bounded by its aggregated DRAM and busiest-link
  times: max(time, ceil(DRAM bytes / DRAM bandwidth), ceil(busiest link / link
  bandwidth)). A leaf segment gets the same bound in `search_leaf`.
- The root: n_root x the sum of the segments, with no bound.

- Buffers (§3.12): per core, the ifmaps to prefetch, the pinned weights and the
  working set are combined up the tree as the reference does (`BufferUsage`); a node
  whose usage exceeds a tile's buffer on some core makes the tree invalid. The root
  does no buffer accounting.

Units: cycles, pJ, bytes.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from mipsched.hw.tiled import TiledHardware
from mipsched.tiled.leaf import OFM_UBUF_BYTES, LeafResult, cached_leaf, leaf_sources
from mipsched.tiled.noc import LinkLoads
from mipsched.tiled.ratree import Cut, Leaf, Node, RaTree
from mipsched.tiled.structure import (
    child_spans,
    stages,
    stores_to_dram,
    via_dram,
)
from mipsched.workload.graph import Workload

Usage = dict[tuple[int, int], int]
"""Bytes per core (tile position) of one buffer-usage map."""
DEFAULT_STRIDE = 2
"""The reference's core-numbering snake stride for its 4 x 4 and 12 x 12 runs."""


@dataclass
class NodeCost:
    """Time, energy and traffic record of one invocation of a node."""

    cycles: int
    energy_pj: float
    record: LinkLoads
    ifm: Usage = field(default_factory=dict)
    """Bytes per core of the ifmaps to prefetch (§3.12 `ifm`)."""
    wgt: Usage = field(default_factory=dict)
    """Bytes per core of the pinned weights (`wgt`)."""
    buf: Usage = field(default_factory=dict)
    """Bytes per core of the working set without weights (`buf`)."""


@dataclass
class SegmentCost:
    """One child of the root, for one of the root's sub-batches."""

    layers: list[str]
    cycles: int
    energy_pj: float
    dram_bytes: int
    byte_hops: int
    max_link_bytes: int


@dataclass
class Evaluation:
    """A whole tree: latency (cycles), energy (pJ), their product, and the parts."""

    latency: int
    energy_pj: float
    segments: list[SegmentCost]
    leaves: dict[str, LeafResult]
    record: LinkLoads
    """The root's traffic record (n_root x the segments'), the reference's
    "NoC & DRAM latency bound" line."""

    @property
    def edp(self) -> float:
        """Energy x delay, pJ x cycles (the reference's default objective)."""
        return self.energy_pj * self.latency


@dataclass
class _Context:
    hw: TiledHardware
    workload: Workload
    tree: RaTree
    stride: int
    min_util: float
    shortcuts: set[tuple[str, str]]
    stores: set[str]
    layouts: dict = field(default_factory=dict)
    leaves: dict[str, LeafResult] = field(default_factory=dict)
    cache: dict = field(default_factory=dict)


class InvalidTree(Exception):
    """The reference would reject the tree (allocation or leaf search failed)."""


def evaluate_tree(hw: TiledHardware, workload: Workload, tree: RaTree,
                  stride: int = DEFAULT_STRIDE, min_util: float = 0.75,
                  cache: dict | None = None) -> Evaluation | None:
    """Latency, energy and the per-segment and per-leaf figures of `tree` on `hw`; None
    when the reference rejects the tree (an S Cut's allocation fails its utilisation
    test, or a leaf finds no partition). `cache` may be shared between calls on the
    same hardware and workload: leaf searches are memoised in it."""
    root = tree.root
    if not (isinstance(root, Cut) and root.kind == "T"):
        raise ValueError("the root of an RA tree must be a T Cut")
    ctx = _Context(hw, workload, tree, stride, min_util, via_dram(tree, workload),
                   stores_to_dram(tree, workload))
    if cache is not None:
        ctx.cache = cache
    child_batch = tree.batch // root.subbatches
    n_cores = hw.n_tiles
    segments, energy, cycles, record = [], 0.0, 0, LinkLoads()
    try:
        for child in root.children:
            cost = _segment(ctx, child, child_batch, n_cores)
            energy += cost.energy_pj
            cycles += cost.cycles
            record += cost.record
            segments.append(SegmentCost(_layers(child), cost.cycles, cost.energy_pj,
                                        cost.record.dram_bytes, cost.record.byte_hops,
                                        cost.record.max_link_bytes()))
    except InvalidTree:
        return None
    n = root.subbatches
    return Evaluation(cycles * n, energy * n, segments, ctx.leaves, record.scaled(n))


def _segment(ctx: _Context, child: Node, batch: int, n_cores: int) -> NodeCost:
    """One child of the root on all cores, memoised in the shared cache: a segment's cost
    depends only on its subtree, its batch, the root's batch and which of its layers
    store to DRAM (every edge from another segment comes through DRAM)."""
    key = ("segment", child, batch, ctx.tree.batch, ctx.stride, ctx.min_util,
           frozenset(ctx.stores.intersection(_layers(child))))
    if key not in ctx.cache:
        outer, ctx.leaves = ctx.leaves, {}
        try:
            ctx.cache[key] = (_node(ctx, child, batch, 0, n_cores, True), ctx.leaves)
        except InvalidTree:
            ctx.cache[key] = None
        finally:
            ctx.leaves = outer
    hit = ctx.cache[key]
    if hit is None:
        raise InvalidTree
    cost, leaves = hit
    ctx.leaves.update(leaves)
    return cost


def _layers(node: Node) -> list[str]:
    if isinstance(node, Leaf):
        return [node.layer]
    return [name for c in node.children for name in _layers(c)]


def _node(ctx: _Context, node: Node, batch: int, first: int, last: int,
          segment: bool) -> NodeCost:
    if isinstance(node, Leaf):
        return _leaf(ctx, node.layer, batch, first, last, segment)
    child_batch = batch // node.subbatches
    if node.kind == "T":
        costs = [_node(ctx, c, child_batch, first, last, False) for c in node.children]
        time = sum(c.cycles for c in costs)
        stage_count = 0
    else:
        ranges = child_spans(node, ctx.workload, first, last, ctx.min_util)
        if ranges is None:
            raise InvalidTree
        costs = [_node(ctx, c, child_batch, lo, hi, False)
                 for c, (lo, hi) in zip(node.children, ranges, strict=True)]
        time = max(c.cycles for c in costs)
        stage_count = max(stages(node, ctx.workload))
    energy, record = 0.0, LinkLoads()
    for c in costs:
        energy += c.energy_pj
        record += c.record
    n = node.subbatches
    time = time * (n + stage_count) if node.kind == "S" else time * n
    record = record.scaled(n)
    if segment:
        time = max(time, record.cycles(ctx.hw))
    cap = ctx.hw.tile.gbuf.capacity_bytes
    if node.kind == "S":
        ifm, wgt, buf = _s_buffers(costs, n, segment, cap)
    else:
        ifm, wgt, buf = _t_buffers(costs, n, segment, cap)
    return NodeCost(time, energy * n, record, ifm, wgt, buf)


# --- buffer model (§3.12) ------------------------------------------------------------------
def _sum(*maps: Usage) -> Usage:
    total: Usage = {}
    for m in maps:
        for tile, n in m.items():
            total[tile] = total.get(tile, 0) + n
    return total


def _fit(m: Usage, cap: int) -> Usage:
    """`m`, or InvalidTree when a core's usage exceeds the capacity."""
    if any(n > cap for n in m.values()):
        raise InvalidTree
    return m


def _max_into(into: Usage, m: Usage) -> None:
    for tile, n in m.items():
        into[tile] = max(into.get(tile, 0), n)


def _s_buffers(costs: list[NodeCost], n: int, segment: bool,
               cap: int) -> tuple[Usage, Usage, Usage]:
    """S Cut: children on disjoint cores; a child's ifmap is double-buffered when the
    cut has sub-batches."""
    buf = _fit(_sum(*(c.ifm for c in costs if n > 1), *(c.buf for c in costs)), cap)
    wgt = _fit(_sum(*(c.wgt for c in costs)), cap)
    _fit(_sum(buf, wgt), cap)
    ifm: Usage = {}
    if not segment:
        ifm = _fit({t: v * n for t, v in _sum(*(c.ifm for c in costs)).items()}, cap)
    return ifm, wgt, buf


def _t_buffers(costs: list[NodeCost], n: int, segment: bool,
               cap: int) -> tuple[Usage, Usage, Usage]:
    """T Cut: the next child's ifmap (and, for a one-sub-batch segment, its weights) is
    prefetched while the previous child runs."""
    shift = segment and n == 1
    ifm = {} if segment else _fit(_sum(*(c.ifm for c in costs)), cap)
    buf: Usage = {}
    for prev, cur in itertools.pairwise(costs):
        extra = (prev.wgt, cur.wgt) if shift else ()
        _max_into(buf, _fit(_sum(cur.ifm, prev.buf, *extra), cap))
    wgt = {} if shift else _fit(_sum(*(c.wgt for c in costs)), cap)
    last = costs[-1]
    if n == 1:
        _max_into(buf, _fit(_sum(last.buf, *((last.wgt,) if shift else ())), cap))
    else:
        if not segment:
            ifm = _fit({t: v * n for t, v in ifm.items()}, cap)
        _max_into(buf, _fit(_sum(costs[0].ifm, last.buf), cap))
    _fit(_sum(buf, wgt), cap)
    return ifm, wgt, buf


def _leaf(ctx: _Context, name: str, batch: int, first: int, last: int,
          segment: bool) -> NodeCost:
    sources = leaf_sources(ctx.workload, name, ctx.shortcuts, ctx.layouts)
    result = cached_leaf(ctx.cache, ctx.hw, ctx.workload, name, batch, ctx.tree.batch,
                         first, last, ctx.stride, sources, name in ctx.stores, segment)
    if result is None:
        raise InvalidTree
    ctx.layouts[name] = result.layout
    ctx.leaves[name] = result
    cap = ctx.hw.tile.gbuf.capacity_bytes
    ifm = _sum(*({t: v} for t, v in result.ifm_bytes))
    wgt = _sum(*({t: v} for t, v in result.wgt_bytes))
    buf = {t: v + OFM_UBUF_BYTES for t, v in ifm.items()}
    _fit(_sum(buf, wgt), cap)
    return NodeCost(result.cycles, result.energy_pj, result.record, ifm, wgt, buf)
