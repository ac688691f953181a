"""Segment recombination (mipsched's extension to SET's search): the best RA tree that
strings together segments the searches have already evaluated.

Why it is exact: under the cost model (`mipsched.tiled.evaluate`) the root runs its
segments (its children) one after another, n_root times, so a tree's latency is
n_root x the sum of its segments' cycles and its energy n_root x the sum of their pJ.
A segment's cost depends only on its own subtree, its batch, the root's batch and which
of its layers store to DRAM (`evaluate._segment`'s cache key). In any valid tree a layer
of segment S stores to DRAM exactly when a layer outside S (necessarily a later
segment) or the network output reads it, and every edge from another segment comes
through DRAM; so a segment costs the same in every tree that contains it. Any sequence
of segments that covers every layer once, each after the segments holding its layers'
producers, is therefore a valid tree whose figures are the sums of the parts.

Every SA run leaves its evaluated segments in its leaf cache (`harvest`). `recombine`
keeps, per (layer set, batch), the segments on the (cycles, pJ) Pareto front, and finds
by dynamic programming over the sets of layers done (each a union of whole segments) the
sequence with the least objective: per state the Pareto front of (sum of cycles, sum of
pJ), so that E x D (a product of the two sums), latency and energy are all exact
minima over the pool. The best seed's own tree is in the pool, so the result is never
worse than it. Units: cycles, pJ.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mipsched.tiled.evaluate import NodeCost
from mipsched.tiled.ratree import Cut, Node, RaTree, layers_of
from mipsched.workload.graph import Workload

MAX_FRONT = 64
"""Points kept on a state's Pareto front (the extremes and an even spread between)."""
MAX_STATES = 50_000
"""Most sets of layers done the DP builds per batch before it gives up: on networks of
many parallel branches (a Transformer's heads) the sets that some sequence of pooled
segments reaches grow exponentially."""


@dataclass(frozen=True)
class Segment:
    """One evaluated child of the root: its subtree, its batch (samples per invocation)
    and the cycles and pJ of one invocation."""

    node: Node
    batch: int
    cycles: int
    energy_pj: float


def harvest(cache: dict, tot_batch: int, stride: int, min_util: float) -> list[Segment]:
    """The segments `evaluate_tree` memoised in `cache` for trees of root batch
    `tot_batch`, snake `stride` and `min_util` (the valid ones only)."""
    found = []
    for key, hit in cache.items():
        if (isinstance(key, tuple) and key[:1] == ("segment",) and hit is not None
                and key[3:6] == (tot_batch, stride, min_util)):
            cost: NodeCost = hit[0]
            found.append(Segment(key[1], key[2], cost.cycles, cost.energy_pj))
    return pareto_pool(found)


def pareto_pool(segments: Iterable[Segment]) -> list[Segment]:
    """Per (layer set, batch), the segments no other one beats in both cycles and pJ."""
    groups: dict[tuple[frozenset[str], int], list[Segment]] = defaultdict(list)
    for s in segments:
        groups[frozenset(layers_of(s.node)), s.batch].append(s)
    return [s for group in groups.values() for s in _front(group, lambda s: (s.cycles,
                                                                            s.energy_pj))]


def _front(items: Sequence, key) -> list:
    """The items not dominated in both coordinates of `key` (ties: the first kept)."""
    kept, best_second = [], float("inf")
    for item in sorted(items, key=key):
        if key(item)[1] < best_second:
            kept.append(item)
            best_second = key(item)[1]
    return kept


@dataclass(frozen=True)
class _Path:
    """A sequence of segments: the sums of their cycles and pJ, and the last segment
    with the path before it."""

    cycles: int
    energy_pj: float
    last: Segment | None
    before: _Path | None

    def segments(self) -> list[Segment]:
        """The path's segments, first to last."""
        out, path = [], self
        while path is not None and path.last is not None:
            out.append(path.last)
            path = path.before
        return out[::-1]


def recombine(workload: Workload, pool: Iterable[Segment], objective: str = "edp",
              deadline: float | None = None, max_states: int = MAX_STATES
              ) -> RaTree | None:
    """The tree of least `objective` ('edp', 'latency' or 'energy') that strings
    segments of `pool` together (module docstring), or None when no sequence of them
    covers the workload, or the DP passes `deadline` (time.perf_counter()) or
    `max_states` sets of layers done for some batch (it gives up: no partial answer)."""
    best: tuple[float, RaTree] | None = None
    by_batch: dict[int, list[Segment]] = defaultdict(list)
    for s in pool:
        by_batch[s.batch].append(s)
    for batch, segments in by_batch.items():
        if workload.batch % batch:
            continue
        n_root = workload.batch // batch
        try:
            path = _best_path(workload, segments, objective, deadline, max_states)
        except _GaveUp:
            return None
        if path is None:
            continue
        score = _score(path.cycles * n_root, path.energy_pj * n_root, objective)
        if best is None or score < best[0]:
            children = tuple(s.node for s in path.segments())
            best = score, RaTree(Cut("T", children, n_root), workload.batch)
    return None if best is None else best[1]


def _score(cycles: float, energy_pj: float, objective: str) -> float:
    return {"edp": cycles * energy_pj, "latency": cycles, "energy": energy_pj}[objective]


class _GaveUp(Exception):
    """The DP passed its deadline or its most states."""


def _best_path(workload: Workload, segments: list[Segment], objective: str,
               deadline: float | None = None, max_states: int = MAX_STATES
               ) -> _Path | None:
    """Dynamic programming over the sets of layers done (bit masks), by number of
    layers done (every predecessor of a state has fewer); a segment extends a state when
    it shares no layer with it and every producer of its layers is in the state or in
    the segment. _GaveUp past `deadline` or `max_states` states."""
    bit = {name: 1 << k for k, name in enumerate(workload.layers)}
    moves = []
    for s in segments:
        names = layers_of(s.node)
        mask = sum(bit[n] for n in names)
        needs = 0
        for n in names:
            needs |= sum(bit[p] for p in workload.layers[n].inputs if p in bit)
        moves.append((mask, needs & ~mask, s))
    full = (1 << len(bit)) - 1
    levels: list[dict[int, list[_Path]]] = [{} for _ in range(len(bit) + 1)]
    levels[0][0] = [_Path(0, 0.0, None, None)]
    states = 1
    for level in levels[:-1]:
        for state, front in level.items():
            if deadline is not None and time.perf_counter() > deadline:
                raise _GaveUp
            for mask, needs, s in moves:
                if mask & state or needs & ~state:
                    continue
                grown = [_Path(p.cycles + s.cycles, p.energy_pj + s.energy_pj, s, p)
                         for p in front]
                target = levels[(state | mask).bit_count()]
                if state | mask not in target:
                    states += 1
                    if states > max_states:
                        raise _GaveUp
                target[state | mask] = _thin(target.get(state | mask, []) + grown)
        level.clear()  # every state it extends has more layers done
    done = levels[-1].get(full)
    if not done:
        return None
    return min(done, key=lambda p: _score(p.cycles, p.energy_pj, objective))


def _thin(paths: list[_Path]) -> list[_Path]:
    """The Pareto front of `paths` in (cycles, pJ), at most MAX_FRONT points: the two
    extremes, the least product, and an even spread of the rest."""
    front = _front(paths, lambda p: (p.cycles, p.energy_pj))
    if len(front) <= MAX_FRONT:
        return front
    keep = {0, len(front) - 1,
            min(range(len(front)), key=lambda k: front[k].cycles * front[k].energy_pj)}
    step = (len(front) - 1) / (MAX_FRONT - len(keep))
    keep.update(round(k * step) for k in range(MAX_FRONT - len(keep)))
    return [front[k] for k in sorted(keep)]
