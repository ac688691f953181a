"""Where a read of a network input sits among its reader's descendants: the cases every
schedule falls in, each of which strengthens the load-order bound (`weight_order.py`).

A transformer block reads its input twice: its first norm, and the residual add `r` after
attention. In the load-order bound alone, r's read may load last, after the feed-forward
weights, at the cost of one least tile per descendant of r (its tail): GPT-2 small
prefill at batch 1 is bounded at 619,056 cycles where every schedule found takes 642,192.
That order needs r's descendants in r's FLG; the FLG then holds their weights before its
first tile, and the tiles after the first come after those loads. Facts of mipsched's
model (DESIGN §3):

- FLGs are intervals of the computing order, which is topological: if a descendant j of
  r is in r's FLG, so is every layer on a path from r to j. So the descendants of r in
  r's FLG form a set S closed under ancestors within r's descendants (an *ideal*); the
  others are in later FLGs, all of whose tiles run after r's last tile.
- The read u completes (C_u) with the first load of some element a tile of r needs, so
  that tile, and every tile after it, runs after C_u. With T = 1 tiles in r's FLG that
  is r's only tile: all of r and all of its descendants compute after C_u. With T >= 2:
  tile i of r and of every layer of S after r, and every tile of every descendant outside
  S; t_u = least(r) + least tiles of S + c(descendants outside S).
- A layer j with weights in S loads them before its tile 0 (one transfer, once), and tile
  0 of j runs before tile 1 of every layer of the FLG: every tile but the first of each
  ancestor x of j in {r} + S runs after C_j. If every read from r onward is point-wise
  (`ops.reads_pointwise`: same rows, columns and samples, equal planes), every such x's
  tile regions are the grid's shares of its plane (its own share, or the hull of its
  consumers' regions, which are that share): tile 0 holds the share of the first part,
  at most s0 = the largest of ceil(d / 2) x (the other two extents) over the extents d of
  (batch, rows, columns) that are at least 2 (a grid of T >= 2 splits one of them, into
  parts no larger than ceil(d / 2); an extent of 1 is never split). The other tiles
  cover the rest: at least (N - s0) of the N positions x must compute, each at least
  x's least cycles per position, so at least (N - s0) / N of c_x (`bounds`: c_x is that
  rate x N, or N x read cycles + one weight read, both of which the tiles after the first
  also pay) runs after C_j.

So every schedule falls in one case: T = 1, or T >= 2 with one ideal S. Each case gives
the load-order inputs with the stronger tail of u and the shares of compute after each
weight of S (`WeightOrderInputs.partial`); the least over the cases of the bound is a
bound. A read whose reader is not point-wise onward, or whose descendants have more than
MAX_IDEALS ideals, keeps its one case.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from fractions import Fraction
from typing import TYPE_CHECKING

import networkx as nx

from mipsched.formulations.bounds import least_tile_cycles
from mipsched.formulations.needed import needed_masks, read_needs, read_unit
from mipsched.hw.model import Hardware
from mipsched.workload import ops
from mipsched.workload.graph import Workload

if TYPE_CHECKING:  # weight_order builds on this module
    from mipsched.formulations.weight_order import WeightOrderInputs

MAX_IDEALS = 32
"""Most ideals of a reader's descendants enumerated (a chain of n layers has n + 1)."""
MAX_CASES = 256
"""Most cases (products over the reads with ideals) the bound is computed for."""


def read_cases(workload: Workload, hw: Hardware, inputs: WeightOrderInputs
               ) -> list[WeightOrderInputs]:
    """The load-order inputs of every case (see the module docstring), built on `inputs`
    (WeightOrderInputs.of: its compute cycles and tails); [] when no read of a network
    input has a point-wise reader with at most MAX_IDEALS ideals, or the cases exceed
    MAX_CASES."""
    pointwise = pointwise_onward(workload)
    least = least_tile_cycles(workload, hw)
    counts = {n: workload.batch * int(m.sum()) for n, m in needed_masks(workload).items()}
    per_read = []
    for read in read_needs(workload):
        unit, reader = read_unit(read), read[1]
        if unit not in inputs.load_cycles or reader not in pointwise:
            continue
        below = nx.descendants(workload.graph, reader)
        ideals = list(_ideals(workload, reader, below))
        if len(ideals) > MAX_IDEALS:
            continue
        per_read.append([_one_tile(inputs, unit, reader, below)]
                        + [_case(workload, inputs, least, counts, unit, reader, below, s)
                           for s in ideals])
    if not per_read or math.prod(len(c) for c in per_read) > MAX_CASES:
        return []
    cases = [inputs]
    for options in per_read:
        cases = [_merge(case, option) for case in cases for option in options]
    return cases


def pointwise_onward(workload: Workload) -> set[str]:
    """Layers from which every read, theirs and their descendants', is point-wise: each
    consumer reads it point-wise (`ops.reads_pointwise`) and is itself such a layer."""
    found: set[str] = set()
    for name in reversed(workload.layers):
        if all(v in found and ops.reads_pointwise(workload.layers[v], k, workload.in_shapes(v))
               for v in workload.consumers(name)
               for k, src in enumerate(workload.layers[v].inputs) if src == name):
            found.add(name)
    return found


def first_share_fraction(workload: Workload, name: str, needed_count: int) -> Fraction:
    """(N - s0) / N: the share of layer `name`'s N = `needed_count` needed positions
    (samples x rows x columns) that the tiles after the first cover, in any grid of at
    least 2 tiles whose regions of it are shares (see the module docstring); 0 when no
    extent can be split."""
    out = workload.layers[name].out
    extents = (workload.batch, out.h, out.w)
    total = math.prod(extents)
    largest = max((-(-d // 2) * total // d for d in extents if d >= 2), default=total)
    return Fraction(max(needed_count - largest, 0), needed_count) if needed_count else Fraction(0)


def _ideals(workload: Workload, reader: str, below: set[str]) -> Iterator[frozenset[str]]:
    """Every set of descendants of `reader` closed under ancestors among them (the
    descendants that can share its FLG), at most MAX_IDEALS + 1 of them."""
    order = [n for n in workload.layers if n in below]  # topological
    found = 0
    stack: list[tuple[int, frozenset[str]]] = [(0, frozenset())]
    while stack and found <= MAX_IDEALS:
        i, chosen = stack.pop()
        if i == len(order):
            found += 1
            yield chosen
            continue
        name = order[i]
        stack.append((i + 1, chosen))
        parents = set(workload.graph.predecessors(name)) & below
        if parents <= chosen:
            stack.append((i + 1, chosen | {name}))


def _one_tile(inputs: WeightOrderInputs, unit: str, reader: str, below: set[str]
              ) -> WeightOrderInputs:
    """The fact of the case T = 1 (to `_merge` into `inputs`): all of the reader and its
    descendants compute after C_u."""
    c = inputs.compute_cycles
    tail = c[reader] + sum((c[j] for j in below), Fraction(0))
    return replace(inputs, tails={unit: tail}, partial={})


def _case(workload: Workload, inputs: WeightOrderInputs, least: dict[str, Fraction],
          counts: dict[str, int], unit: str, reader: str, below: set[str],
          same: frozenset[str]) -> WeightOrderInputs:
    """The facts of the case T >= 2 with the descendants `same` in the reader's FLG (to
    `_merge` into `inputs`; `counts`: needed positions per layer, all samples)."""
    c = inputs.compute_cycles
    tail = least[reader] + sum((least[j] for j in same), Fraction(0)) + sum(
        (c[j] for j in below - same), Fraction(0))
    partial = {j: {x: first_share_fraction(workload, x, counts[x])
                   for x in ({reader} | same) & nx.ancestors(workload.graph, j)}
               for j in same if j in inputs.load_cycles}  # the weighted ones
    return replace(inputs, tails={unit: tail}, partial=partial)


def _merge(case: WeightOrderInputs, option: WeightOrderInputs) -> WeightOrderInputs:
    """Both cases' facts (each holds for the schedules in both): the larger tail per
    unit, the larger share per unit and layer; `case`'s other fields."""
    tails = dict(case.tails)
    for u, t in option.tails.items():
        tails[u] = max(t, tails.get(u, Fraction(0)))
    partial = {u: dict(p) for u, p in case.partial.items()}
    for u, p in option.partial.items():
        for x, f in p.items():
            if f > partial.get(u, {}).get(x, 0):
                partial.setdefault(u, {})[x] = f
    return replace(case, tails=tails, partial=partial)
