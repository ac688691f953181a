"""The load-order bound (cycles): DRAM loads and compute cannot overlap at the ends.

Facts of every schedule (mipsched's notation, DESIGN §3): each layer with weights loads
them as one DRAM transfer of ceil(bytes / bandwidth) cycles, once, and its first tile
waits for it; a layer's first tile runs after the first tile of every layer it reads
(it needs some of their output); tiles run one at a time and DRAM serves one transfer
at a time. A network input may be loaded in slices, and some of it more than once.

A load unit u is a weighted layer's weights or a network input; a_u is ceil(bytes /
bandwidth) of its weights or of its needed elements (`needed`). Write C_u for the time
by which every byte of u has been loaded at least once, and F_u for the layers that
compute after C_u in every schedule: for weights, the layer and its descendants; for a
network input r, every layer that needs all of r to compute any of its output, with its
descendants. At batch 1 that is a layer with one output position (any tile of it is all
of it) whose output needs every needed element of r (`needed` from that layer alone),
since all of r must be on chip by its one tile; at batch > 1 no layer is known to, and
F_r is empty. By C_u the DRAM has spent at least a_u cycles on u.

- Last loads: let S be the k units with the latest C_u and s the earliest of them.
  Every unit outside S, and s, are complete by C_s, so C_s >= a(U) - a(S) + a_s, and
  every layer of F(S) (the union of F_u, u in S) computes after C_s:
  latency >= a(U) - a(S) + a_s + c(F(S)).
- First loads: let P be the k - 1 units with the earliest C_u and q the k-th. C_q >= a(P)
  + a_q, and every layer of F(U \\ P) (q's among them) computes after C_q:
  latency >= a(P) + a_q + c(F(U \\ P)).
c_j is the least compute cycles of layer j (`bounds.layer_compute_cycles`).

The argument holds for any set U of load units (a(U) counts only U's loads), so the
bound is computed for U = the weights alone and for U = weights and network inputs: an
input that no layer is known to wait for whole may complete last at no cost, which can
make the second weaker (GPT-2 prefill) as often as its extra DRAM time makes it stronger
(GPT-2 decode, where the KV cache is 10 % of the traffic).

The schedule picks S (or P, q); the bound for k is the least right-hand side over all
choices, a small MIP (PuLP on HiGHS, `last_loads_model` / `first_loads_model`), and the
bound is the largest over k and both unit sets. A MIP stopped by its time limit still
gives its proven dual bound, which is below its optimum and so still a bound: the result
is anytime.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

import networkx as nx

from mipsched.core import Bound, seconds_left
from mipsched.formulations.bounds import layer_compute_cycles
from mipsched.formulations.needed import needed
from mipsched.formulations.solver import MINIMISE, LpProblem, LpVariable, lp_sum, minimise
from mipsched.hw.model import Hardware
from mipsched.workload.graph import Workload


@dataclass(frozen=True)
class WeightOrderInputs:
    """What the bound needs: per load unit (a weighted layer's name for its weights, a
    network input's name) its load cycles and the layers that compute after it
    completes, and per layer its least compute cycles."""

    load_cycles: dict[str, int]
    """a_u: ceil(bytes / DRAM bytes per cycle), per load unit."""
    compute_cycles: dict[str, Fraction]
    """c_j: the least cycles of layer j's tiles, per layer."""
    closure: dict[str, frozenset[str]]
    """F_u: per load unit, the layers that compute after it completes (closed under
    descent)."""

    @classmethod
    def of(cls, workload: Workload, hw: Hardware) -> WeightOrderInputs:
        """The inputs for `workload` on `hw`: its network inputs, then its weights."""
        bpc = hw.dram.bytes_per_cycle
        counts = {t: n for t, n in needed(workload).input_elems.items() if n > 0}
        loads = {t: -(-workload.batch * workload.elem_bytes * n // bpc)
                 for t, n in counts.items()}
        whole = _whole_needs(workload)
        closure = {t: _waiting_for(workload, whole, t, n) for t, n in counts.items()}
        for n, layer in workload.layers.items():
            if layer.has_weights:
                loads[n] = -(-workload.weight_bytes(n) // bpc)
                closure[n] = frozenset({n, *nx.descendants(workload.graph, n)})
        return cls(loads, layer_compute_cycles(workload, hw), closure)

    def without(self, units: Iterable[str]) -> WeightOrderInputs:
        """The same inputs without the load units `units` (the bound holds for any set
        of units)."""
        dropped = set(units)
        return WeightOrderInputs(
            {u: a for u, a in self.load_cycles.items() if u not in dropped},
            self.compute_cycles,
            {u: f for u, f in self.closure.items() if u not in dropped})


def _whole_needs(workload: Workload) -> dict[str, dict[str, int]]:
    """Per layer of one output position (at batch 1; none at batch > 1), the needed
    elements of every network input when that layer is computed whole."""
    if workload.batch != 1:
        return {}
    return {j: needed(workload, frozenset({j})).input_elems
            for j, layer in workload.layers.items() if layer.out.h * layer.out.w == 1}


def _waiting_for(workload: Workload, whole: dict[str, dict[str, int]], tensor: str,
                 count: int) -> frozenset[str]:
    """F_r for network input `tensor` (`count` needed elements per sample): the layers
    of `whole` (`_whole_needs`) needing all of it, with their descendants."""
    waiting = [j for j, elems in whole.items() if elems[tensor] == count]
    return frozenset(waiting).union(*(nx.descendants(workload.graph, j) for j in waiting))


def last_loads_model(inputs: WeightOrderInputs, k: int) -> LpProblem:
    """min over k-sets S and s in S of a(U) - a(S) + a_s + c(F(S)) (cycles)."""
    problem, chosen, first, covered = _variables(inputs, "last")
    a, c = inputs.load_cycles, inputs.compute_cycles
    problem += (sum(a.values()) - lp_sum(a[i] * chosen[i] for i in a)
                + lp_sum(a[i] * first[i] for i in a)
                + lp_sum(float(c[j]) * covered[j] for j in covered))
    problem += lp_sum(chosen.values()) == k
    problem += lp_sum(first.values()) == 1
    for u, after in inputs.closure.items():
        problem += first[u] <= chosen[u]
        for j in after:
            problem += covered[j] >= chosen[u]
    return problem


def first_loads_model(inputs: WeightOrderInputs, k: int) -> LpProblem:
    """min over (k-1)-sets P and q outside P of a(P) + a_q + c(F(U \\ P)) (cycles)."""
    problem, early, kth, covered = _variables(inputs, "first")
    a, c = inputs.load_cycles, inputs.compute_cycles
    problem += (lp_sum(a[i] * early[i] for i in a) + lp_sum(a[i] * kth[i] for i in a)
                + lp_sum(float(c[j]) * covered[j] for j in covered))
    problem += lp_sum(early.values()) == k - 1
    problem += lp_sum(kth.values()) == 1
    for u, after in inputs.closure.items():
        problem += kth[u] <= 1 - early[u]
        for j in after:
            problem += covered[j] >= 1 - early[u]
    return problem


def _variables(inputs: WeightOrderInputs, name: str
               ) -> tuple[LpProblem, dict[str, LpVariable], dict[str, LpVariable],
                          dict[str, LpVariable]]:
    """A minimisation with a binary per load unit for the set and one for the
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
    """The weight-order bound (cycles), the largest over k and both unit sets of both
    MIPs' proven bounds reached within `time_limit` seconds (None: no limit); None for a
    network without loads. A MIP whose optimum cannot exceed `floor` (a bound the caller
    already has, cycles) is skipped: the right-hand side at one choice of loads
    (`estimates`) is at least its optimum."""
    every_unit = WeightOrderInputs.of(workload, hw)
    if not every_unit.load_cycles:
        return None
    unit_sets = [every_unit.without(workload.inputs), every_unit]
    deadline = None if time_limit is None else time.perf_counter() + time_limit
    best = 0.0
    for inputs in unit_sets:
        if not inputs.load_cycles:
            continue
        last_estimate, first_estimate = estimates(inputs)
        for k in range(1, len(inputs.load_cycles) + 1):
            for model, estimate in ((last_loads_model, last_estimate),
                                    (first_loads_model, first_estimate)):
                if estimate[k] <= max(best, floor):
                    continue
                left = seconds_left(deadline)
                if left is not None and left <= 0:
                    return _bound(best)
                each = None if left is None else min(left,
                                                     max(MIP_SHARE * time_limit, 0.05))
                status = minimise(model(inputs, k), each)
                if status.bound is not None:
                    best = max(best, status.bound)
    return _bound(best)


def estimates(inputs: WeightOrderInputs) -> tuple[dict[int, float], dict[int, float]]:
    """Per k, the right-hand side of each inequality at one choice of loads, so at least
    its least value (cycles): the last k load units (network inputs first, then weights
    in network order, a topological order) as S (s the cheapest among them), the first
    k - 1 as P and the k-th as q."""
    a, c = inputs.load_cycles, inputs.compute_cycles
    units = list(a)
    total = sum(a.values())
    last, first = {}, {}
    for k in range(1, len(units) + 1):
        chosen = units[-k:]
        covered = set().union(*(inputs.closure[i] for i in chosen))
        last[k] = (total - sum(a[i] for i in chosen) + min(a[i] for i in chosen)
                   + float(sum(c[j] for j in covered)))
        early, kth = units[:k - 1], units[k - 1]
        covered = set().union(*(inputs.closure[i] for i in units[k - 1:]))
        first[k] = sum(a[i] for i in early) + a[kth] + float(sum(c[j] for j in covered))
    return last, first


def _bound(cycles: float) -> Bound:
    """The certificate entry; the MIP's floating-point bound rounded down with a margin
    of 1e-6 relative, so that solver tolerance never overstates it."""
    return Bound("weight_order", math.floor(cycles * (1 - 1e-6)),
                 "largest over k of the least, over which k loads (weights or network "
                 "inputs) complete last (or first), of the DRAM time until the earliest "
                 "of them completes plus the compute of the layers that must wait for it "
                 "(PuLP / HiGHS MIP, formulations/weight_order.py)")
