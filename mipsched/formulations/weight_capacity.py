"""The weight-capacity bound (cycles): weights the buffer cannot hold ahead of a layer's
last tile load after it.

Facts of every schedule (DESIGN §3): a layer's weights are one DRAM load of W bytes,
ceil(W / bandwidth) cycles, live in the buffer from their Start (at or before the
layer's first tile) to just after the layer's last tile; a load whose Start is tile s
begins only once tile s - 1 has finished; every tile's occupancy is at most the
capacity M; tiles run one at a time in program order (tile index by tile index within
an FLG, FLGs in the computing order), and a layer's first tile waits for its weights.

Take any layer p and let pi be its last tile. Every tile of p and of its ancestors runs
at or before pi (an ancestor in p's FLG comes before p at every tile index), so pi ends
at e >= c(p) + c(ancestors of p), c the least compute of a layer (`bounds`). Every
weighted descendant d of p has a tile after pi (at p's last index, after p, or in a
later FLG), so if its weights' Start is at most pi they are live at pi, together with
p's own W_p: those descendants' weights total at most M - W_p. Every other weighted
descendant's load starts after e, one at a time, so the last of them ends at
e + (their load cycles) or later, and its layer d then still computes all its tiles and
every tile of its descendants (all after d's first): tail(d) = c(d) + c(descendants).
After the last tile the least store z follows (`weight_order.final_store_cycles`). So

  latency >= c(p) + c(ancestors of p) + K_p + min over weighted descendants d of tail(d) + z,

K_p = the least load cycles of a set D of p's weighted descendants whose complement
weighs at most M - W_p (a knapsack, solved as a MIP on HiGHS; its dual bound when
stopped early), whenever all of them weigh more than M - W_p (D is then not empty). The
bound is the largest over p.

Where the network concatenates along rows a layer's tile at some index can be empty, so
"every tile of an ancestor runs at or before pi" is not known; no bound is given there.

VGG-19 / edge / b1: conv13-conv16 carry 2.36 MB of weights each and compute 56,448
cycles each against 147,456 cycles of loading; at conv12's last tile at most two of
them fit beside conv12's own, so the other two load after it: 1,986,656 + 225,792 +
294,912 + 56,644 + 32 = 2,564,036 cycles, against 2,439,358 from the weight-order MIPs
(and 2,564,782 found).
"""

from __future__ import annotations

import time
from fractions import Fraction

import networkx as nx

from mipsched.core import Bound, seconds_left
from mipsched.formulations.bounds import (
    layer_compute_cycles,
    may_leave_tiles_empty,
    proven_cycles,
)
from mipsched.formulations.solver import MINIMISE, LpProblem, lp_sum, minimise
from mipsched.formulations.weight_order import final_store_cycles
from mipsched.hw.model import Hardware
from mipsched.workload.graph import Workload


def weight_capacity_bound(workload: Workload, hw: Hardware, time_limit: float | None = 10.0,
                          floor: float = 0.0,
                          compute_cycles: dict[str, Fraction] | None = None
                          ) -> Bound | None:
    """The weight-capacity bound (module docstring), the largest over the layers p whose
    knapsack could lift it above `floor` (cycles; the knapsack at a feasible choice of
    D is at least its optimum), each MIP within the `time_limit` (s; None: no limit);
    None when no layer gives one. `compute_cycles`: c per layer (default
    `bounds.layer_compute_cycles`)."""
    if may_leave_tiles_empty(workload):
        return None
    deadline = None if time_limit is None else time.perf_counter() + time_limit
    c = compute_cycles if compute_cycles is not None else layer_compute_cycles(workload, hw)
    graph = workload.graph
    capacity = hw.gbuf.capacity_bytes
    z = final_store_cycles(workload, hw)
    weight = {n: workload.weight_bytes(n) for n, layer in workload.layers.items()
              if layer.has_weights}
    load = {n: -(-w // hw.dram.bytes_per_cycle) for n, w in weight.items()}
    tail = layer_tails(workload, c)
    best = 0.0
    for p in workload.layers:
        later = [d for d in nx.descendants(graph, p) if d in weight]
        room = capacity - weight.get(p, 0)
        if not later or room < 0 or sum(weight[d] for d in later) <= room:
            continue  # (room < 0: p's weights alone overflow, no schedule exists)
        head = c[p] + sum((c[a] for a in nx.ancestors(graph, p)), Fraction(0))
        rest = float(head + min(tail[d] for d in later)) + z
        if rest + _greedy_late_loads(later, weight, load, room) <= max(best, floor):
            continue
        left = seconds_left(deadline)
        if left is not None and left <= 0:
            break
        status = minimise(late_loads_model(later, weight, load, room), left)
        if status.bound is not None:
            best = max(best, rest + status.bound)
    return proven_cycles(
        "weight_capacity", best,
        "largest over layers p of the least compute of p and its ancestors, plus the least "
        "load cycles of the weights of p's descendants that cannot be in the buffer beside "
        "p's own at p's last tile, plus the least compute from a descendant's first tile "
        "on, plus the least store after the last tile (knapsack MIP on HiGHS, "
        "formulations/weight_capacity.py)")


def layer_tails(workload: Workload, compute_cycles: dict[str, Fraction]
                ) -> dict[str, Fraction]:
    """tail(d) per layer d (cycles): the least compute of d and of its descendants, all
    of whose tiles run from d's first tile on."""
    graph = workload.graph
    return {n: compute_cycles[n] + sum((compute_cycles[e] for e in nx.descendants(graph, n)),
                                       Fraction(0))
            for n in workload.layers}


def late_loads_model(later: list[str], weight: dict[str, int], load: dict[str, int],
                     room: int) -> LpProblem:
    """min over sets D of `later` (weighted layers) of the load cycles of D, the others
    weighing at most `room` bytes (x_d = 1: d in D, loaded after p's last tile)."""
    problem = LpProblem("weight_capacity", MINIMISE)
    late = {d: problem.add_variable(f"x{k}", cat="Binary") for k, d in enumerate(later)}
    problem += lp_sum(load[d] * late[d] for d in later)
    problem += lp_sum(weight[d] * (1 - late[d]) for d in later) <= room
    return problem


def _greedy_late_loads(later: list[str], weight: dict[str, int], load: dict[str, int],
                       room: int) -> int:
    """The load cycles of one feasible D (cycles): the smallest weights kept in `room`,
    the rest loaded late; at least the knapsack's optimum."""
    kept = 0
    late = 0
    for d in sorted(later, key=lambda d: weight[d]):
        if kept + weight[d] <= room:
            kept += weight[d]
        else:
            late += load[d]
    return late
