"""Structural rules of SET's multi-core model (docs/set-model.md §1.2, §2.3, §2.4, §3.2,
§3.3): where a core index sits on the mesh, the pipeline stages of an S Cut's children,
which producer -> consumer edges go through DRAM, the per-sample work of a node (NPT)
and how an S Cut's cores are shared among its children.

Everything here depends only on the RA tree and the workload, never on a schedule's
costs. Floating-point NPT and the allocation follow the reference code's doubles
operation by operation, so floors and ties come out as its do.
"""

from __future__ import annotations

from collections.abc import Sequence

from mipsched.tiled.ratree import Cut, Leaf, Node, RaTree, layers_of
from mipsched.workload import ops
from mipsched.workload.graph import Workload
from mipsched.workload.layer import MAC_OPS, Op, full_region

Position = tuple[int, int]
"""(x, y) of a tile: column 0..cols-1, row 0..rows-1 (as in mipsched.hw.tiled)."""


# --- core numbering (§1.2) -----------------------------------------------------------------
def _check_mesh(cols: int, rows: int, stride: int) -> None:
    if cols < 1 or rows < 1:
        raise ValueError(f"mesh {cols} x {rows}: both sides must be >= 1 tiles")
    if stride < 1 or cols % stride:
        raise ValueError(f"snake stride {stride} must be >= 1 and divide the {cols} columns")


def core_position(index: int, cols: int, rows: int, stride: int) -> Position:
    """(x, y) of core `index` in SET's strided snake numbering (`Cluster::get_pos`).

    The mesh is cut into vertical bands `stride` columns wide; a band is walked row by
    row, `stride` cores per row, and odd bands are walked with y mirrored (rows-1-y), so
    consecutive indices stay neighbours across a band boundary. SET's y is mapped to our
    row y unchanged. Raises ValueError when `stride` does not divide `cols` or `index`
    is outside [0, cols * rows)."""
    _check_mesh(cols, rows, stride)
    if not 0 <= index < cols * rows:
        raise ValueError(f"core {index} is outside [0, {cols * rows})")
    band = index // (stride * rows)
    x = band * stride + index % stride
    y = (index // stride) % rows
    return x, (rows - 1 - y if band % 2 else y)


def core_index(x: int, y: int, cols: int, rows: int, stride: int) -> int:
    """Inverse of `core_position`: the snake index of the tile at column x, row y.
    Raises ValueError for a bad stride or a tile outside the mesh."""
    _check_mesh(cols, rows, stride)
    if not (0 <= x < cols and 0 <= y < rows):
        raise ValueError(f"tile ({x}, {y}) is outside the {cols} x {rows} mesh")
    band = x // stride
    row = rows - 1 - y if band % 2 else y
    return band * stride * rows + row * stride + x % stride


def core_positions(first: int, last: int, cols: int, rows: int,
                   stride: int) -> list[Position]:
    """Positions of the cluster of cores [first, last) (SET's contiguous index range),
    in index order."""
    return [core_position(i, cols, rows, stride) for i in range(first, last)]


# --- pipeline stages (§2.3) ----------------------------------------------------------------
def _layer_inputs(names: Sequence[str], workload: Workload) -> set[str]:
    """Layers (not network inputs) that the layers `names` read directly."""
    return {src for n in names for src in workload.layers[n].inputs if src in workload.layers}


def stages(cut: Cut, workload: Workload) -> list[int]:
    """Pipeline stage of each child of an S Cut, in child order (`traverse_pass1`).

    stage(child) = max, over the earlier siblings with a direct edge into the child (a
    layer of the sibling is an input of a layer of the child), of stage(sibling) + 1;
    0 when there is none. The cut's stage count S is the largest stage. A T Cut has no
    stages (SET clears them): asking for them raises ValueError rather than returning
    zeros, so that a T Cut is never mistaken for a stage-less S Cut."""
    if cut.kind != "S":
        raise ValueError(f"stages are defined for S Cuts only, not a {cut.kind} Cut")
    members = [set(layers_of(c)) for c in cut.children]
    reads = [_layer_inputs(layers_of(c), workload) for c in cut.children]
    result: list[int] = []
    for j in range(len(cut.children)):
        result.append(max((result[i] + 1 for i in range(j) if members[i] & reads[j]),
                          default=0))
    return result


# --- edges through DRAM (§3.2) -------------------------------------------------------------
def _leaf_paths(node: Node, prefix: tuple[int, ...],
                out: dict[str, tuple[int, ...]]) -> None:
    """Child-index path from the root of every leaf's layer, into `out`."""
    if isinstance(node, Leaf):
        out[node.layer] = prefix
        return
    for k, child in enumerate(node.children):
        _leaf_paths(child, prefix + (k,), out)


def _node_at(root: Node, path: tuple[int, ...]) -> Node:
    node = root
    for k in path:
        assert isinstance(node, Cut)
        node = node.children[k]
    return node


def via_dram(tree: RaTree, workload: Workload) -> set[tuple[str, str]]:
    """The layer edges (producer, consumer) whose fmap goes through DRAM, SET's
    "shortcuts" (`LTreeNode::is_shortcut`).

    Take the lowest common ancestor (LCA) of the two leaves and its children p_from <
    p_to holding them. The edge goes through DRAM when the LCA is the root T Cut
    (different segments, adjacent or not); or the LCA is an S Cut and stage(p_to) >
    stage(p_from) + 1; or the LCA is another T Cut and p_to > p_from + 1. Every other
    edge moves on chip over the NoC. Reads of network inputs are not edges (they always
    come from DRAM). The tree must be valid for the workload (`check_tree`); a consumer
    left of its producer raises ValueError."""
    paths: dict[str, tuple[int, ...]] = {}
    _leaf_paths(tree.root, (), paths)
    stage_cache: dict[tuple[int, ...], list[int]] = {}
    found = set()
    for name, layer in workload.layers.items():
        for src in dict.fromkeys(layer.inputs):
            if src not in workload.layers:
                continue
            a, b = paths[src], paths[name]
            depth = next(d for d in range(len(a)) if a[d] != b[d])
            lca_path, p_from, p_to = a[:depth], a[depth], b[depth]
            if p_from > p_to:
                raise ValueError(f"layer '{name}' is left of its input '{src}' in the tree")
            lca = _node_at(tree.root, lca_path)
            assert isinstance(lca, Cut)
            if lca.kind == "S":
                if lca_path not in stage_cache:
                    stage_cache[lca_path] = stages(lca, workload)
                st = stage_cache[lca_path]
                shortcut = st[p_to] > st[p_from] + 1
            else:
                shortcut = not lca_path or p_to > p_from + 1
            if shortcut:
                found.add((src, name))
    return found


def stores_to_dram(tree: RaTree, workload: Workload) -> set[str]:
    """Layers that write their whole ofmap to DRAM (once per invocation, however many
    consumers read it there): the network outputs and every producer of a `via_dram`
    edge. (SET marks the layers without successors; our workload names its outputs,
    which include every sink and may include a layer that also has consumers.)"""
    return set(workload.outputs) | {src for src, _ in via_dram(tree, workload)}


# --- NPT, the per-sample work of a node (§2.4) -----------------------------------------------
def _group_view(name: str, workload: Workload) -> tuple[int, int, int, int]:
    """(G, C per group, K per group, taps x output positions) of a PE-array layer."""
    lay = workload.layers[name]
    x = ops.data_shape(lay, workload.in_shapes(name))
    hw = lay.out.h * lay.out.w
    r, s = lay.kernel
    if lay.op == Op.CONV:
        return lay.groups, x.c // lay.groups, lay.out.c // lay.groups, r * s * hw
    if lay.op == Op.DEPTHWISE_CONV:
        return x.c, 1, 1, r * s * hw
    if lay.op == Op.FC:
        return 1, x.c, lay.out.c, x.h * x.w
    if lay.op == Op.MATMUL:
        return 1, x.c, lay.out.c, hw
    g = lay.groups  # MATMUL_ACT: per head, reduction x (out channels / heads)
    return g, workload.in_shapes(name)[0].c // g, lay.out.c // g, hw


def _round_up(n: int, step: int) -> int:
    return -(-n // step) * step


def leaf_time(name: str, workload: Workload, vector: int = 8, lanes: int = 8,
              macs: int = 1024, vector_ops: int = 64) -> float:
    """NPT of one layer: tile-cycles for one sample on one tile (SET's
    `PolarMapper::set_conv_utime` / `CoreMapper::set_lr_utime`).

    PE-array ops: C8 x K8 x R x S x H x W / macs, C rounded up to `vector` and K to
    `lanes`. Grouped ops (groups G > 1): per-group C and K rounded, times G, divided by
    min(vector // Cg, lanes // Kg) when both Cg < vector and Kg < lanes (SET's
    duplication). Our ops map onto that as: depthwise conv = G = C groups of 1 x 1
    channel; FC = a conv whose kernel is the whole input plane (C = input channels of the
    concatenated inputs); MATMUL = a 1 x 1 conv over the H x W tokens; MATMUL_ACT = a
    grouped 1 x 1 conv with G = heads, Cg = reduction per head, Kg = out channels /
    heads (SET has no such layer). Dilation does not change the count. Vector ops
    (pool, eltwise, softmax, ...): mipsched's vector-op count for one sample (SET's
    K x H x W x N x R x S for its pool and eltwise) / `vector_ops`; a concat without
    copy costs 0."""
    lay = workload.layers[name]
    if lay.op not in MAC_OPS:
        count = ops.tile_vector_ops(lay, workload.in_shapes(name), full_region(1, lay.out))
        return float(count) / vector_ops
    g, cg, kg, rest = _group_view(name, workload)
    if g == 1:
        return float(_round_up(cg, vector) * _round_up(kg, lanes) * rest) / macs
    t = float(_round_up(cg, vector) * _round_up(kg, lanes) * rest * g)
    if cg < vector and kg < lanes:
        t /= min(vector // cg, lanes // kg)
    return t / macs


def unit_time(node: Node, workload: Workload, vector: int = 8, lanes: int = 8,
              macs: int = 1024, vector_ops: int = 64) -> float:
    """NPT ("unit time") of a node, tile-cycles per sample (`traverse_pass2`): a leaf's
    `leaf_time`; a T Cut the sum of its children's; an S Cut that sum x (n + S) / n, n
    its sub-batches and S its largest stage (the pipeline fill). Only the S-Cut core
    allocation uses it. Sums are taken in child order in floats, as the reference's
    doubles are."""
    if isinstance(node, Leaf):
        return leaf_time(node.layer, workload, vector, lanes, macs, vector_ops)
    total = 0.0
    for child in node.children:
        total += unit_time(child, workload, vector, lanes, macs, vector_ops)
    if node.kind == "S":
        n = node.subbatches
        total = total * (n + max(stages(node, workload))) / n
    return total


# --- core allocation of an S Cut (§3.3) ------------------------------------------------------
def _split(times: Sequence[float], cores: int) -> list[int]:
    """SET's iterative floor / spare-core split of `cores` among children of NPT `times`
    (`Cluster::try_alloc` before its utilisation test); needs len(times) <= cores.
    Zero-time children first get one core each; if all are zero, the cores are shared
    evenly (lower indices get the spares)."""
    k = len(times)
    if not any(times):
        return [cores // k + (i < cores % k) for i in range(k)]
    sizes = [0 if t else 1 for t in times]
    unplaced = [i for i in range(k) if times[i]]
    remain_nodes, remain_ops = cores - (k - len(unplaced)), sum(times, 0.0)
    while unplaced:
        ideal = {i: times[i] / remain_ops * remain_nodes for i in unplaced}
        for i in unplaced:
            sizes[i] = int(ideal[i])
        add = remain_nodes - sum(sizes[i] for i in unplaced)
        if add == 0:
            break
        order = sorted((sizes[i] / ideal[i], i) for i in unplaced)
        for _, i in order[:add]:
            sizes[i] += 1
            remain_nodes -= sizes[i]
            remain_ops -= times[i]
            unplaced.remove(i)
    return sizes


def utilisation(times: Sequence[float], sizes: Sequence[int]) -> float:
    """Fraction of the cut's core-time the children use: sum(times) / (sum(sizes) x
    max_i times_i / sizes_i). 1.0 when every time is 0."""
    worst = max(t / a for t, a in zip(times, sizes, strict=True))
    total = sum(times, 0.0)
    return total / (sum(sizes) * worst) if worst > 0 else 1.0


def allocate(unit_times: Sequence[float], cores: int,
             min_util: float = 0.75) -> list[int] | None:
    """Cores of each child of an S Cut of `cores` cores, from the children's NPT
    (`unit_time`, tile-cycles per sample), SET's `Cluster::try_alloc`; None when the cut
    is invalid: more children than cores, or `utilisation` < `min_util`.

    Repeat over the unplaced children: ideal_i = t_i / remaining_time x
    remaining_cores, a_i = floor(ideal_i), add = remaining_cores - sum a_i. If add is 0
    keep the a_i and stop; otherwise the `add` children with the smallest
    a_i / ideal_i (ties: lower index) get a_i + 1 and are placed, and the rest are
    recomputed with the reduced totals. Every child gets >= 1 core and the sizes sum to
    `cores`. Children receive consecutive core ranges in child order
    (`sub_clusters`). Zero times (our cost-free layers; SET has none, and its code would
    divide 0 by 0): each such child gets one core and the others share the rest by the
    rule; if every time is 0 the cores are shared evenly."""
    if not unit_times:
        raise ValueError("an S Cut needs at least one child")
    if any(not t >= 0 for t in unit_times):
        raise ValueError(f"unit times must be >= 0, got {list(unit_times)}")
    if len(unit_times) > cores:
        return None
    sizes = _split(unit_times, cores)
    if utilisation(unit_times, sizes) < min_util:
        return None
    return sizes


def sub_clusters(first: int, sizes: Sequence[int]) -> list[tuple[int, int]]:
    """The consecutive core ranges [from, to) of an S Cut's children, starting at core
    `first` of the cut's own range, in child order."""
    ranges = []
    for size in sizes:
        ranges.append((first, first + size))
        first += size
    return ranges


def child_spans(cut: Cut, workload: Workload, first: int, last: int,
                min_util: float = 0.75) -> list[tuple[int, int]] | None:
    """The cores [from, to) of each child of `cut`, which runs on cores [first, last):
    a T Cut gives every child all of them; an S Cut with explicit `ranges` gives child i
    [first + lo_i, first + hi_i) (None when a range ends past `last`; no utilisation
    test: mipsched's placement chose them); otherwise SET's `allocate` +
    `sub_clusters` (None when the allocation fails its utilisation test)."""
    if cut.kind == "T":
        return [(first, last)] * len(cut.children)
    if cut.ranges is not None:
        if max(hi for _, hi in cut.ranges) > last - first:
            return None
        return [(first + lo, first + hi) for lo, hi in cut.ranges]
    sizes = allocate([unit_time(c, workload) for c in cut.children], last - first, min_util)
    return None if sizes is None else sub_clusters(first, sizes)
