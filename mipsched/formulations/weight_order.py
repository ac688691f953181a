"""The weight-order bound (cycles): weight loads and compute cannot overlap at the ends.

Facts of every schedule (mipsched's notation, DESIGN §3): each layer with weights loads
them as one DRAM transfer of ceil(bytes / bandwidth) cycles, once, and its first tile
waits for it; a layer's first tile runs after the first tile of every layer it reads
(it needs some of their output), so after the weight load of every weighted ancestor;
tiles run one at a time and DRAM serves one transfer at a time. Write a_i for the
weight-load cycles of weighted layer i, W for the weighted layers, c_j for the cycles
layer j needs at least (`bounds.layer_compute_cycles`) and cl(S) for S with every
descendant of S.

- Last loads: let S be the k weight loads a schedule issues last and s the first of
  them. Every load outside S, and s, end before s does, so s ends at or after
  a(W \\ S) + a_s, and every layer of cl(S) computes after that:
  latency >= a(W) - a(S) + a_s + c(cl(S)).
- First loads: let P be the first k - 1 weight loads and q the k-th. q ends at or after
  a(P) + a_q, and every layer of cl(W \\ P) (q among them) computes after that:
  latency >= a(P) + a_q + c(cl(W \\ P)).

The schedule picks S (or P, q); the bound for k is the least right-hand side over all
choices, a small MIP (PuLP on HiGHS, `last_loads_model` / `first_loads_model`), and the
bound is the largest over k. A MIP stopped by its time limit still gives its proven dual
bound, which is below its optimum and so still a bound: the result is anytime.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction

import networkx as nx

from mipsched.core import Bound, seconds_left
from mipsched.formulations.bounds import layer_compute_cycles
from mipsched.formulations.solver import MINIMISE, LpProblem, LpVariable, lp_sum, minimise
from mipsched.hw.model import Hardware
from mipsched.workload.graph import Workload


@dataclass(frozen=True)
class WeightOrderInputs:
    """What the bound needs: per weighted layer its load cycles and closure, per layer
    its least compute cycles, and the producer -> consumer edges between layers."""

    load_cycles: dict[str, int]
    """a_i: ceil(weight bytes / DRAM bytes per cycle), per weighted layer."""
    compute_cycles: dict[str, Fraction]
    """c_j: the least cycles of layer j's tiles, per layer."""
    closure: dict[str, frozenset[str]]
    """Per weighted layer, itself and its descendants."""
    edges: tuple[tuple[str, str], ...]
    """Producer -> consumer pairs: a closure is closed under them."""

    @classmethod
    def of(cls, workload: Workload, hw: Hardware) -> WeightOrderInputs:
        """The inputs for `workload` on `hw`."""
        bpc = hw.dram.bytes_per_cycle
        weighted = [n for n, layer in workload.layers.items() if layer.has_weights]
        return cls({n: -(-workload.weight_bytes(n) // bpc) for n in weighted},
                   layer_compute_cycles(workload, hw),
                   {n: frozenset({n, *nx.descendants(workload.graph, n)}) for n in weighted},
                   tuple(workload.graph.edges))


def last_loads_model(inputs: WeightOrderInputs, k: int) -> LpProblem:
    """min over k-sets S and s in S of a(W) - a(S) + a_s + c(cl(S)) (cycles)."""
    problem, chosen, first, covered = _variables(inputs, "last")
    a, c = inputs.load_cycles, inputs.compute_cycles
    problem += (sum(a.values()) - lp_sum(a[i] * chosen[i] for i in a)
                + lp_sum(a[i] * first[i] for i in a)
                + lp_sum(float(c[j]) * covered[j] for j in covered))
    problem += lp_sum(chosen.values()) == k
    problem += lp_sum(first.values()) == 1
    for i in inputs.closure:
        problem += first[i] <= chosen[i]
        problem += covered[i] >= chosen[i]
    _close(problem, covered, inputs.edges)
    return problem


def first_loads_model(inputs: WeightOrderInputs, k: int) -> LpProblem:
    """min over (k-1)-sets P and q outside P of a(P) + a_q + c(cl(W \\ P)) (cycles)."""
    problem, early, kth, covered = _variables(inputs, "first")
    a, c = inputs.load_cycles, inputs.compute_cycles
    problem += (lp_sum(a[i] * early[i] for i in a) + lp_sum(a[i] * kth[i] for i in a)
                + lp_sum(float(c[j]) * covered[j] for j in covered))
    problem += lp_sum(early.values()) == k - 1
    problem += lp_sum(kth.values()) == 1
    for i in inputs.closure:
        problem += kth[i] <= 1 - early[i]
        problem += covered[i] >= 1 - early[i]
    _close(problem, covered, inputs.edges)
    return problem


def _close(problem: LpProblem, covered: dict[str, LpVariable],
           edges: tuple[tuple[str, str], ...]) -> None:
    """A consumer is covered when its producer is: the cover is closed under descent."""
    for producer, consumer in edges:
        if producer in covered and consumer in covered:
            problem += covered[consumer] >= covered[producer]


def _variables(inputs: WeightOrderInputs, name: str
               ) -> tuple[LpProblem, dict[str, LpVariable], dict[str, LpVariable],
                          dict[str, LpVariable]]:
    """A minimisation with a binary per weighted layer for the set and one for the
    singled-out load, and a [0, 1] cover per layer in some closure."""
    problem = LpProblem(f"weight_order_{name}", MINIMISE)
    index = {n: k for k, n in enumerate(inputs.load_cycles)}
    pick = {n: problem.add_variable(f"x{index[n]}", cat="Binary") for n in index}
    single = {n: problem.add_variable(f"u{index[n]}", cat="Binary") for n in index}
    members = sorted(set().union(*inputs.closure.values())) if inputs.closure else []
    covered = {j: problem.add_variable(f"y{k}", 0, 1) for k, j in enumerate(members)}
    return problem, pick, single, covered


#: Share of the bound's time a single MIP may take at most.
MIP_SHARE = 0.2


def weight_order_bound(workload: Workload, hw: Hardware, time_limit: float | None = 10.0,
                       floor: float = 0.0) -> Bound | None:
    """The weight-order bound (cycles), the largest over k of both MIPs' proven bounds
    reached within `time_limit` seconds (None: no limit); None for a network without
    weights. A MIP whose optimum cannot exceed `floor` (a bound the caller already has,
    cycles) is skipped: the right-hand side at one choice of loads (`estimates`) is at
    least its optimum."""
    inputs = WeightOrderInputs.of(workload, hw)
    if not inputs.load_cycles:
        return None
    deadline = None if time_limit is None else time.perf_counter() + time_limit
    best = 0.0
    last_estimate, first_estimate = estimates(inputs)
    for k in range(1, len(inputs.load_cycles) + 1):
        for model, estimate in ((last_loads_model, last_estimate),
                                (first_loads_model, first_estimate)):
            if estimate[k] <= max(best, floor):
                continue
            left = seconds_left(deadline)
            if left is not None and left <= 0:
                return _bound(best)
            each = None if left is None else min(left, max(MIP_SHARE * time_limit, 0.05))
            status = minimise(model(inputs, k), each)
            if status.bound is not None:
                best = max(best, status.bound)
    return _bound(best)


def estimates(inputs: WeightOrderInputs) -> tuple[dict[int, float], dict[int, float]]:
    """Per k, the right-hand side of each inequality at one choice of loads, so at least
    its least value (cycles): the last k weighted layers of the computing order as S
    (s the cheapest load among them), the first k - 1 as P and the k-th as q."""
    a, c = inputs.load_cycles, inputs.compute_cycles
    weighted = list(a)  # network order, a topological order
    total = sum(a.values())
    last, first = {}, {}
    for k in range(1, len(weighted) + 1):
        chosen = weighted[-k:]
        covered = set().union(*(inputs.closure[i] for i in chosen))
        last[k] = (total - sum(a[i] for i in chosen) + min(a[i] for i in chosen)
                   + float(sum(c[j] for j in covered)))
        early, kth = weighted[:k - 1], weighted[k - 1]
        covered = set().union(*(inputs.closure[i] for i in weighted[k - 1:]))
        first[k] = sum(a[i] for i in early) + a[kth] + float(sum(c[j] for j in covered))
    return last, first


def _bound(cycles: float) -> Bound:
    """The certificate entry; the MIP's floating-point bound rounded down with a margin
    of 1e-6 relative, so that solver tolerance never overstates it."""
    return Bound("weight_order", math.floor(cycles * (1 - 1e-6)),
                 "largest over k of the least, over which k weight loads come last (or "
                 "first), of the DRAM time until the earliest of them ends plus the "
                 "compute of the layers that must wait for it (PuLP / HiGHS MIP, "
                 "formulations/weight_order.py)")
