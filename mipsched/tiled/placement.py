"""Core counts and placement of an S Cut's children, exact over stated models
(mipsched's extension, docs/set-model.md §7.2).

1. Counts (`cp_sat_counts`): from tables time_i(c) (cycles at c cores), c_i >= 1 with
   sum c_i <= cores minimising max_i time_i(c_i), then the distance to a preferred
   allocation (SET's; or the fewest cores). OPTIMAL proves it.
2. Placement: disjoint ranges [s_i, s_i + c_i) of the cut's snake-numbered cores
   minimising model byte-hops: per pair of children, bytes exchanged x the mean
   Manhattan distance between their tiles; per child, DRAM bytes x the mean distance
   between the ports and its tiles; each term rounded. `best_order`: exact over the
   orders of the children back to back; `cp_sat_placement`: over any disjoint ranges.
3. A tree (`plan_tree`): every S Cut top-down, then the tree re-evaluated under the
   chosen ranges (`with_ranges`: the tree with every S Cut's `ranges` set, which
   `evaluate_tree`, the simulator and the plot honour). Units: cycles, bytes, byte-hops.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mipsched.formulations.solver import SolveStatus, new_model, solve
from mipsched.hw.tiled import TiledHardware
from mipsched.tiled.evaluate import DEFAULT_STRIDE, Evaluation, evaluate_tree
from mipsched.tiled.leaf import Layout, cached_leaf, leaf_sources
from mipsched.tiled.ratree import Cut, Leaf, Node, RaTree, TreeError, check_ranges, layers_of
from mipsched.tiled.structure import (
    allocate,
    child_spans,
    core_positions,
    stages,
    stores_to_dram,
    unit_time,
    via_dram,
)
from mipsched.workload.graph import Workload

Table = Sequence[int | None]  # time(c), c = 1, 2, ...: cycles at c cores (None: not allowed)
Ranges = tuple[tuple[int, int], ...]  # [lo, hi) core offsets from the cut's first, per child
TIME_LIMIT = 10.0  # seconds per CP-SAT solve


# --- 1. core counts --------------------------------------------------------------------------
@dataclass(frozen=True)
class CountsResult:
    """Cores per child and the slowest child's time, max_i time_i(c_i) (cycles)."""

    counts: tuple[int, ...]
    cycles: int
    status: str  # the solver's; "optimal" proves the minimum
    seconds: float


def frontier(table: Table, cores: int) -> list[tuple[int, int]]:
    """The (c, time) pairs of `table`, c <= `cores`, whose time no smaller c matches: the
    only ones a minimum of the slowest time needs (an exact reduction)."""
    pairs: list[tuple[int, int]] = []
    for c, t in enumerate(table[:cores], start=1):
        if t is not None and (not pairs or t < pairs[-1][1]):
            pairs.append((c, t))
    return pairs


def cp_sat_counts(tables: Sequence[Table], cores: int, prefer: Sequence[int] | None = None,
                  time_limit: float = TIME_LIMIT, workers: int = 1) -> CountsResult | None:
    """Counts c_i >= 1, sum <= `cores`, minimising max_i tables[i][c_i - 1] (cycles), then
    sum_i |c_i - prefer_i| (default: sum c_i, the fewest cores); None when nothing is
    feasible. Two CP-SAT solves, one Boolean per (child, count), exactly one per child:
    (1) the slowest time over each child's `frontier`; (2) every time within (1)'s."""
    if any(t is not None and t < 0 for table in tables for t in table):
        raise ValueError("times must be >= 0 cycles")
    if not tables or len(tables) > cores or any(not frontier(t, cores) for t in tables):
        return None
    first = _choose([frontier(t, cores) for t in tables], cores, None, time_limit, workers)
    if first is None:
        return None
    bound = max(t for _, t in first[1])
    second = _choose([[(c, t) for c, t in enumerate(table[:cores], start=1)
                       if t is not None and t <= bound] for table in tables], cores,
                     prefer or [0] * len(tables), time_limit, workers)
    if second is None:
        return None
    proved = first[0].status == second[0].status == "optimal"
    return CountsResult(tuple(c for c, _ in second[1]), bound, "optimal" if proved else
                        "feasible", first[0].wall_seconds + second[0].wall_seconds)


def _choose(pairs: list[list[tuple[int, int]]], cores: int, prefer: Sequence[int] | None,
            time_limit: float, workers: int
            ) -> tuple[SolveStatus, list[tuple[int, int]]] | None:
    """One (count, time) pair per child, counts within `cores`, minimising the slowest
    time (`prefer` None) or sum |count - prefer_i|."""
    model = new_model()
    picks = [[(c, t, model.new_bool_var(f"x{i}_{c}")) for c, t in p] for i, p in enumerate(pairs)]
    for p in picks:
        model.add_exactly_one(x for _, _, x in p)
    model.add(sum(c * x for p in picks for c, _, x in p) <= cores)
    if prefer is None:
        worst = model.new_int_var(0, max(t for p in pairs for _, t in p), "worst")
        for p in picks:
            model.add(worst >= sum(t * x for _, t, x in p))
        model.minimize(worst)
    else:
        model.minimize(sum(abs(c - prefer[i]) * x for i, p in enumerate(picks) for c, _, x in p))
    status, sol = solve(model, time_limit, workers)
    if not status.has_solution:
        return None
    return status, [next((c, t) for c, t, x in p if sol.boolean(x)) for p in picks]


# --- 2. placement ----------------------------------------------------------------------------
@dataclass(frozen=True)
class CutTraffic:
    """Bytes of one invocation of an S Cut's children (each child runs its batch once)."""

    pair: tuple[tuple[int, ...], ...]  # [i][j]: fmap bytes i sends j over the NoC (direct)
    dram: tuple[int, ...]  # bytes i moves from/to DRAM (weights, inputs, via DRAM, stores)


@dataclass(frozen=True)
class CutMesh:
    """Where the cut's cores are: snake indices [first, first + cores) of a cols x rows
    mesh numbered with `stride` (docs/set-model.md §1.2), and the DRAM port tiles."""

    first: int
    cores: int
    cols: int
    rows: int
    stride: int
    ports: tuple[tuple[int, int], ...]


def cut_traffic(workload: Workload, cut: Cut, child_batch: int, tot_batch: int,
                shortcuts: set[tuple[str, str]], stores: set[str]) -> CutTraffic:
    """Bytes of `cut`'s children per invocation (per-sample volumes x `child_batch`): a
    direct edge between layers of children i != j adds the producer's ofmap to pair[i][j];
    reads of network inputs and `shortcuts` producers, ofmaps of `stores` and weights
    (x child_batch // tot_batch, as leaves amortise them) add to dram[i]. Edges from
    layers outside the cut are not counted."""
    owner = {name: i for i, c in enumerate(cut.children) for name in layers_of(c)}
    k, eb = len(cut.children), workload.elem_bytes
    pair, dram = [[0] * k for _ in range(k)], [0] * k
    for name, i in owner.items():
        for src in dict.fromkeys(workload.layers[name].inputs):
            size = workload.shape_of(src).elems * eb * child_batch
            if src not in workload.layers or (src, name) in shortcuts:
                dram[i] += size
            elif owner.get(src, i) != i:
                pair[owner[src]][i] += size
        dram[i] += workload.weight_bytes(name) * child_batch // tot_batch
        if name in stores:
            dram[i] += workload.shape_of(name).elems * eb * child_batch
    return CutTraffic(tuple(map(tuple, pair)), tuple(dram))


def _histograms(mesh: CutMesh, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Tiles per column and per row of the `count` cores at every start (two arrays)."""
    pos = np.array(core_positions(mesh.first, mesh.first + mesh.cores, mesh.cols,
                                  mesh.rows, mesh.stride), dtype=np.int64).reshape(-1, 2)
    xs, ys = (np.cumsum(np.eye(n + 1, n, -1, dtype=np.int64)[np.r_[0, pos[:, a] + 1]], axis=0)
              for a, n in ((0, mesh.cols), (1, mesh.rows)))
    return xs[count:] - xs[:-count], ys[count:] - ys[:-count]


def _gaps(n: int) -> np.ndarray:
    return np.abs(np.subtract.outer(np.arange(n, dtype=np.int64), np.arange(n)))


def pair_table(mesh: CutMesh, ca: int, cb: int, weight: int) -> np.ndarray:
    """Model byte-hops of `weight` bytes between `ca` cores at start s and `cb` cores at
    start t, every (s, t): weight x the mean Manhattan distance of the ca x cb tile pairs,
    rounded half up."""
    (xa, ya), (xb, yb) = _histograms(mesh, ca), _histograms(mesh, cb)
    total = xa @ _gaps(mesh.cols) @ xb.T + ya @ _gaps(mesh.rows) @ yb.T
    return (2 * weight * total + ca * cb) // (2 * ca * cb)


def dram_table(mesh: CutMesh, count: int, weight: int) -> np.ndarray:
    """Model byte-hops of `weight` DRAM bytes to or from `count` cores at every start:
    weight x the mean Manhattan distance of the (port, tile) pairs, rounded half up (the
    bytes are spread evenly over the ports, docs/set-model.md §3.6)."""
    xs, ys = _histograms(mesh, count)
    px = np.bincount([p[0] for p in mesh.ports], minlength=mesh.cols).astype(np.int64)
    py = np.bincount([p[1] for p in mesh.ports], minlength=mesh.rows).astype(np.int64)
    total = xs @ _gaps(mesh.cols) @ px + ys @ _gaps(mesh.rows) @ py
    pairs = count * len(mesh.ports)
    return (2 * weight * total + pairs) // (2 * pairs)


@dataclass(frozen=True)
class PlacementResult:
    """Start offsets (from the cut's first core) and the model's byte-hops."""

    starts: tuple[int, ...]
    byte_hops: int
    status: str  # "optimal": proved minimal over the method's family
    seconds: float


def _terms(mesh: CutMesh, counts: Sequence[int], traffic: CutTraffic
           ) -> Iterator[tuple[int, int | None, np.ndarray]]:
    """The objective's terms: (i, None, DRAM byte-hops by start of i) and, for every pair
    that exchanges bytes, (i, j, byte-hops by the starts of i and j)."""
    for i, c in enumerate(counts):
        yield i, None, dram_table(mesh, c, traffic.dram[i])
    for i, j in itertools.combinations(range(len(counts)), 2):
        if w := traffic.pair[i][j] + traffic.pair[j][i]:
            yield i, j, pair_table(mesh, counts[i], counts[j], w)


def placement_byte_hops(mesh: CutMesh, counts: Sequence[int], traffic: CutTraffic,
                        starts: Sequence[int]) -> int:
    """The placement model's objective for given starts (ranges must be disjoint)."""
    return sum(int(t[starts[i]] if j is None else t[starts[i], starts[j]])
               for i, j, t in _terms(mesh, counts, traffic))


MAX_ORDER_BLOCKS = 9  # children + idle block whose orders `best_order` enumerates


def best_order(mesh: CutMesh, counts: Sequence[int], traffic: CutTraffic
               ) -> PlacementResult | None:
    """Minimum of `placement_byte_hops` over the orders of the children back to back, spare
    cores one idle block anywhere: all orders, vectorised; ties go to the first order
    (child order first). None: the counts do not fit; ValueError: too many blocks."""
    began = time.perf_counter()
    spare = mesh.cores - sum(counts)
    if spare < 0 or min(counts, default=1) < 1:
        return None
    sizes = np.array([*counts, spare] if spare else list(counts), dtype=np.int64)
    if len(sizes) > MAX_ORDER_BLOCKS:
        raise ValueError(f"{len(sizes)} blocks: too many orders to enumerate")
    order = np.fromiter(itertools.chain.from_iterable(itertools.permutations(range(
        len(sizes)))), dtype=np.int64).reshape(-1, len(sizes)).T  # blocks x orders
    starts = np.empty_like(order)  # starts[block, order], column by column
    starts[order, np.arange(order.shape[1])] = np.cumsum(sizes[order], axis=0) - sizes[order]
    cost = np.zeros(order.shape[1], dtype=np.int64)
    for i, j, t in _terms(mesh, counts, traffic):
        cost += t[starts[i]] if j is None else t[starts[i], starts[j]]
    best = int(np.argmin(cost))
    return PlacementResult(tuple(int(s) for s in starts[:len(counts), best]),
                           int(cost[best]), "optimal", time.perf_counter() - began)


def cp_sat_placement(mesh: CutMesh, counts: Sequence[int], traffic: CutTraffic,
                     time_limit: float = TIME_LIMIT, workers: int = 1,
                     hint: Sequence[int] | None = None) -> PlacementResult | None:
    """Disjoint starts minimising `placement_byte_hops`, gaps allowed (None: the counts do
    not fit, or no solution in time). s_i in [0, cores - c_i], a no-overlap, a table per
    term: (s_i, byte-hops) or disjoint (s_i, s_j, byte-hops). `hint`: starts to begin
    from (default: back to back in child order)."""
    if sum(counts) > mesh.cores or min(counts, default=1) < 1:
        return None
    model = new_model()
    starts = [model.new_int_var(0, mesh.cores - c, f"s{i}") for i, c in enumerate(counts)]
    model.add_no_overlap([model.new_fixed_size_interval_var(s, c, f"r{i}")
                          for i, (s, c) in enumerate(zip(starts, counts, strict=True))])
    terms = []
    for i, j, t in _terms(mesh, counts, traffic):
        tuples = [(a, int(v)) for a, v in enumerate(t)] if j is None else [
            (a, b, int(t[a, b])) for a in range(t.shape[0]) for b in range(t.shape[1])
            if a + counts[i] <= b or b + counts[j] <= a]
        terms.append(model.new_int_var(min(u[-1] for u in tuples),
                                       max(u[-1] for u in tuples), f"term{len(terms)}"))
        model.add_allowed_assignments([starts[i], *([] if j is None else [starts[j]]),
                                       terms[-1]], tuples)
    model.minimize(sum(terms))
    hint = hint or [lo for lo, _ in consecutive(counts)]
    for s, h in zip(starts, hint, strict=True):
        model.add_hint(s, h)
    status, sol = solve(model, time_limit, workers)
    if not status.has_solution:
        return None
    return PlacementResult(tuple(sol.value(s) for s in starts),
                           sum(sol.value(t) for t in terms), status.status, status.wall_seconds)


def consecutive(counts: Sequence[int]) -> Ranges:
    """The reference's layout: the children's ranges back to back in child order."""
    return tuple((lo, lo + c) for lo, c in
                 zip(itertools.accumulate(counts, initial=0), counts, strict=False))


# --- 3. a whole tree -------------------------------------------------------------------------
@dataclass(frozen=True)
class CutPlan:
    """One S Cut (by path) on its `cores` under the plan: the reference's allocation,
    the CP-SAT counts and their placement (offsets from the cut's first core)."""

    path: str
    cores: int
    set_counts: tuple[int, ...] | None  # `allocate` on `cores` (None: it rejects the cut)
    counts: CountsResult
    placement: PlacementResult
    stage_factor: int  # n + S: the cut's time is this x its slowest child's
    tables: tuple[tuple[int | None, ...], ...]  # time_i(c), c = 1 .. cores - (k - 1), cycles
    mesh: CutMesh
    traffic: CutTraffic

    @property
    def ranges(self) -> Ranges:
        """The chosen [lo, hi) offsets of every child."""
        return tuple((s, s + c) for s, c in
                     zip(self.placement.starts, self.counts.counts, strict=True))

    def cut_cycles(self, counts: Sequence[int]) -> int | None:
        """The tables' cut time under `counts` (cycles); None: a count not allowed."""
        times = [t[c - 1] for t, c in zip(self.tables, counts, strict=True)]
        known = [t for t in times if t is not None]
        return self.stage_factor * max(known) if len(known) == len(times) else None


@dataclass(frozen=True)
class TreePlan:
    """Every S Cut's plan (depth first); the tree evaluated without and with them."""

    baseline: Evaluation
    cuts: tuple[CutPlan, ...]
    tree: RaTree
    """The tree with every S Cut's planned `ranges`."""
    evaluation: Evaluation | None


class _OutOfTime(Exception):
    """The deadline passed while a cut's tables were being filled."""


class _Timer:
    """Cycles of a node on a core range inside an S Cut (leaves in evaluate's cache);
    raises _OutOfTime once `time.perf_counter()` passes `deadline`."""

    def __init__(self, hw: TiledHardware, workload: Workload, tree: RaTree, stride: int,
                 min_util: float, baseline: Evaluation, cache: dict,
                 deadline: float | None) -> None:
        self.hw, self.workload, self.tree, self.stride = hw, workload, tree, stride
        self.min_util, self.cache, self.deadline = min_util, cache, deadline
        self.layouts: dict[str, Layout] = {n: r.layout for n, r in baseline.leaves.items()}
        self.shortcuts, self.stores = via_dram(tree, workload), stores_to_dram(tree, workload)

    def leaf(self, name: str, batch: int, first: int, last: int) -> int | None:
        """`search_leaf`'s cycles on cores [first, last), direct producers read from their
        layouts in the baseline evaluation; None: no partition fits."""
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise _OutOfTime
        sources = leaf_sources(self.workload, name, self.shortcuts, self.layouts)
        result = cached_leaf(self.cache, self.hw, self.workload, name, batch, self.tree.batch,
                             first, last, self.stride, sources, name in self.stores, False)
        return None if result is None else result.cycles

    def node(self, node: Node, batch: int, first: int, last: int) -> int | None:
        """Cycles of `node` on [first, last): a T Cut n x the sum of its children's, a
        nested S Cut (n + S) x its slowest child's under the reference's allocation."""
        if isinstance(node, Leaf):
            return self.leaf(node.layer, batch, first, last)
        spans = child_spans(node, self.workload, first, last, self.min_util)
        if spans is None:
            return None
        times = [self.node(c, batch // node.subbatches, lo, hi)
                 for c, (lo, hi) in zip(node.children, spans, strict=True)]
        known = [t for t in times if t is not None]
        if len(known) < len(times):
            return None
        if node.kind == "T":
            return node.subbatches * sum(known)
        return (node.subbatches + max(stages(node, self.workload))) * max(known)


def plan_tree(hw: TiledHardware, workload: Workload, tree: RaTree,
              stride: int = DEFAULT_STRIDE, min_util: float = 0.75, cache: dict | None = None,
              place: bool = True, time_limit: float = TIME_LIMIT,
              deadline: float | None = None) -> TreePlan:
    """`cp_sat_counts` and (with `place`; else the children back to back in child order)
    `best_order` for every S Cut of `tree`, top-down, then the tree re-evaluated under
    them. A cut's tables: time_i(c) = `_Timer.node` of child i on the cut's first c
    cores. Once `time.perf_counter()` passes `deadline` (checked before every leaf
    search of the tables), the remaining cuts keep their allocation. ValueError when
    the reference rejects the tree or a cut has no feasible counts."""
    cache = {} if cache is None else cache
    baseline = evaluate_tree(hw, workload, tree, stride, min_util, cache)
    if baseline is None:
        raise ValueError("the reference model rejects the tree: nothing to re-plan")
    timer = _Timer(hw, workload, tree, stride, min_util, baseline, cache, deadline)
    plans: list[CutPlan] = []
    spans = {"root": (0, hw.n_tiles)}
    for path, node, batch in tree.nodes():  # parents first
        if not isinstance(node, Cut):
            continue
        first, last = spans[path]
        planned = None
        if node.kind == "S" and (deadline is None or time.perf_counter() < deadline):
            limit = time_limit if deadline is None else max(
                0.01, min(time_limit, deadline - time.perf_counter()))
            with contextlib.suppress(_OutOfTime):  # then it and the rest keep theirs
                planned = _plan_cut(timer, node, path, batch // node.subbatches,
                                    spans[path], place, limit)
        if planned is not None:
            plans.append(planned)
            children = [(first + lo, first + hi) for lo, hi in planned.ranges]
        else:
            kept = child_spans(node, workload, first, last, min_util)
            if kept is None:  # its allocation fails on its new cores: the tree is rejected
                break
            children = kept
        spans.update({f"{path}.{k}": span for k, span in enumerate(children)})
    planned = with_ranges(tree, {p.path: p.ranges for p in plans})
    return TreePlan(baseline, tuple(plans), planned,
                    evaluate_tree(hw, workload, planned, stride, min_util, cache))


def _plan_cut(timer: _Timer, cut: Cut, path: str, child_batch: int, span: tuple[int, int],
              place: bool, time_limit: float) -> CutPlan:
    wl, hw = timer.workload, timer.hw
    first, last = span
    cores, k = last - first, len(cut.children)
    tables = tuple(tuple(timer.node(c, child_batch, first, first + n)
                         for n in range(1, cores - k + 2)) for c in cut.children)
    set_counts = allocate([unit_time(c, wl) for c in cut.children], cores, timer.min_util)
    counts = cp_sat_counts(tables, cores, set_counts, time_limit)
    if counts is None:
        raise ValueError(f"{path}: no core counts make every child feasible")
    traffic = cut_traffic(wl, cut, child_batch, timer.tree.batch, timer.shortcuts,
                          timer.stores)
    mesh = CutMesh(first, cores, hw.mesh.cols, hw.mesh.rows, timer.stride,
                   tuple((p.x, p.y) for p in hw.dram.ports))
    starts = [lo for lo, _ in consecutive(counts.counts)]
    placed = best_order(mesh, counts.counts, traffic) if place else None
    placed = placed or PlacementResult(tuple(starts), placement_byte_hops(
        mesh, counts.counts, traffic, starts), "fixed", 0.0)
    return CutPlan(path, cores, None if set_counts is None else tuple(set_counts), counts,
                   placed, cut.subbatches + max(stages(cut, wl)), tables, mesh, traffic)


def with_ranges(tree: RaTree, ranges: Mapping[str, Ranges]) -> RaTree:
    """`tree` with the S Cut at each path ("root.1.2") of `ranges` given those core
    ranges (offsets from the cut's first core); ValueError when a path is not an S Cut
    of as many children or the ranges are not disjoint."""
    def build(node: Node, path: str) -> Node:
        if isinstance(node, Leaf):
            return node
        children = tuple(build(c, f"{path}.{k}") for k, c in enumerate(node.children))
        own = ranges.get(path, node.ranges)
        if path in ranges and node.kind != "S":
            raise ValueError(f"{path}: not an S Cut")
        planned = Cut(node.kind, children, node.subbatches, own)
        if own is not None:
            try:
                check_ranges(path, planned)
            except TreeError as err:
                raise ValueError(str(err)) from None
        return planned

    missing = set(ranges) - {p for p, _, _ in tree.nodes()}
    if missing:
        raise ValueError(f"{sorted(missing)[0]}: no such node")
    return RaTree(build(tree.root, "root"), tree.batch)
