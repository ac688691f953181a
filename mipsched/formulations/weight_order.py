"""The load-order bound (cycles): DRAM loads and compute cannot overlap at the ends.

Facts of every schedule (mipsched's notation, DESIGN §3): each layer with weights loads
them as one DRAM transfer of ceil(bytes / bandwidth) cycles, once, and its first tile
waits for it; each layer that reads a network input loads, per tile, the part it reads
(placement.make_segment: two layers reading one input load it twice); a layer's first
tile runs after the first tile of every layer it reads (it needs some of their output);
tiles run one at a time and DRAM serves one transfer at a time; the last tile of a
schedule is a network output's (any other tile's output is read by a later tile or
stored for a later LG), and its share of the output, one position of all channels at
least, is stored after it.

A load unit u is a weighted layer's weights or one read of a network input r by a layer
v (`needed.InputRead`); a_u is ceil(bytes / bandwidth) of the weights or of the elements
of r that v must read in every schedule (`needed.read_needs`). Write C_u for the time by
which every byte of u has been loaded at least once, and F_u for the layers that compute
after C_u in every schedule: for weights, the layer and its descendants; for a read, the
layers that need all of it to compute any of their output, with their descendants. At
batch 1 that is a layer every single output position of which needs, directly or
through other layers, every element the read must load: a tile computes at least one
position (all channels) and only after every element that position needs has been
loaded, so the layer's first tile comes after C_u. (A transpose that turns tokens into
channels is such a layer in GPT-2 prefill: any position of K^T needs K at every token;
in GPT-2 decode, whose layers have one position, every reader of the token waits for
its own load.) At batch > 1 one position belongs to one sample, no layer is known to
wait for a whole read, and F_u is empty. By C_u the DRAM has spent at least a_u cycles
on u. The final store takes at least z = the least, over sink layers, of
ceil(channels x bytes per element / bandwidth) cycles after the last tile (every sink
is a network output: Workload refuses any other).

Tails t_u of reads (`read_tails`): the load that completes at C_u is the first of some
element a tile T of the reader r needs, so T starts after C_u. Tiles run in program
order: within an FLG tile index by tile index, layer by layer; FLGs one after another,
in the computing order, in which r's descendants come after r. So after T run tile i
(T's index) of every descendant in T's FLG and every tile of every descendant in a
later FLG, and each descendant has such a tile: every layer of an FLG has a region at
every tile index (its share, or the hull of what its consumers in the FLG read there,
which only a concatenation along rows can leave empty; with one, no tails are used).
Each of those tiles, and T, takes at least its layer's least tile cycles (one position
at least, `bounds.least_tile_cycles`): t_u = least(r) + the sum over r's descendants.
So every unit u whose C_u is at or after a time t has t_u of compute after t, as F_u's
layers do: the terms c(F(S)) below are max(c(F(S)), the largest t_u in S). In GPT-2
decode at batch 16 no layer waits for a whole read, yet after the last of the token
arrives ffn1 and ffn2 still read their 10 MB weights from the GBUF once per tile.

- Last loads: let S be the k units with the latest C_u and s the earliest of them.
  Every unit outside S, and s, are complete by C_s, so C_s >= a(U) - a(S) + a_s, and
  every layer of F(S) (the union of F_u, u in S) computes after C_s:
  latency >= a(U) - a(S) + a_s + max(c(F(S)), t(S)) + z, t(S) the largest t_u in S.
- First loads: let P be the k - 1 units with the earliest C_u and q the k-th. C_q >= a(P)
  + a_q, and every layer of F(U \\ P) (q's among them) computes after C_q:
  latency >= a(P) + a_q + max(c(F(U \\ P)), t(U \\ P)) + z.
c_j is the least compute cycles of layer j (`bounds.layer_compute_cycles`).

The argument holds for any set U of load units (a(U) counts only U's loads), so the
bound is computed for three: the weights alone, the weights and the reads some layer
waits for whole, and every unit. A read that no layer waits for may complete last at
little cost (its tail), which can make a larger set weaker (GPT-2 prefill: the
residual's second read of the input) as often as its extra DRAM time makes it stronger
(GPT-2 decode, where the KV cache is 10 % of the traffic and the token is read twice).

The schedule picks S (or P, q); the bound for k is the least right-hand side over all
choices, a small MIP (PuLP on HiGHS, `last_loads_model` / `first_loads_model`), and the
bound is the largest over k and the three unit sets. A MIP stopped by its time limit still
gives its proven dual bound, which is below its optimum and so still a bound: the result
is anytime.

Cases (`read_options.py`): where a read's reader may or may not keep its descendants in
its FLG, every schedule falls in one case, each with longer tails t_u and shares of
compute after some weight loads (`WeightOrderInputs.partial`: at least a share f of c_j
runs after C_u, so the terms c(F(S)) count f x c_j); the least over the cases of the
bound above is a bound, taken when every case was bounded in time.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction

import networkx as nx
import numpy as np

from mipsched.core import Bound, seconds_left
from mipsched.formulations.bounds import (
    layer_compute_cycles,
    least_tile_cycles,
    may_leave_tiles_empty,
    proven_cycles,
)
from mipsched.formulations.needed import (
    InputRead,
    position_read_needs,
    read_needs,
    read_unit,
)
from mipsched.formulations.read_options import read_cases
from mipsched.formulations.solver import (
    MINIMISE,
    LpExpression,
    LpProblem,
    LpVariable,
    lp_sum,
    minimise,
)
from mipsched.hw.model import Hardware
from mipsched.workload.graph import Workload


@dataclass(frozen=True)
class WeightOrderInputs:
    """What the bound needs: per load unit (a weighted layer's name for its weights,
    `read_unit` for a read of a network input) its load cycles and the layers that
    compute after it completes, per layer its least compute cycles, and z."""

    load_cycles: dict[str, int]
    """a_u: ceil(bytes / DRAM bytes per cycle), per load unit."""
    compute_cycles: dict[str, Fraction]
    """c_j: the least cycles of layer j's tiles, per layer."""
    closure: dict[str, frozenset[str]]
    """F_u: per load unit, the layers that compute after it completes (closed under
    descent)."""
    final_store: int = 0
    """z: cycles of the least store that follows the last tile."""
    tails: dict[str, Fraction] = field(default_factory=dict)
    """t_u: per load unit, cycles of tiles that run after C_u in every schedule besides
    (or within) c(F_u): for a read, its reader's and every descendant's least tile
    (`read_tails`); units without one have none."""
    partial: dict[str, dict[str, Fraction]] = field(default_factory=dict)
    """Per load unit u, layers j outside F_u of which at least the share f (0 < f <= 1)
    of c_j computes after C_u in every schedule considered (`read_options`: the tiles
    after the first of a weighted layer's ancestors in its FLG)."""

    @classmethod
    def of(cls, workload: Workload, hw: Hardware, deadline: float | None = None,
           compute_cycles: dict[str, Fraction] | None = None) -> WeightOrderInputs:
        """The inputs for `workload` on `hw`: its reads of network inputs, then its
        weights; layers not examined by `deadline` (time.perf_counter()) are left out of
        the reads' F (`_waiting_for_reads`). `compute_cycles`: c_j per layer (default
        `bounds.layer_compute_cycles`)."""
        bpc = hw.dram.bytes_per_cycle
        needs = {r: m for r, m in read_needs(workload).items() if m.any()}
        loads = {read_unit(r): -(-workload.batch * workload.elem_bytes * int(m.sum()) // bpc)
                 for r, m in needs.items()}
        closure = {read_unit(r): f
                   for r, f in _waiting_for_reads(workload, needs, deadline).items()}
        for n, layer in workload.layers.items():
            if layer.has_weights:
                loads[n] = -(-workload.weight_bytes(n) // bpc)
                closure[n] = frozenset({n, *nx.descendants(workload.graph, n)})
        if compute_cycles is None:
            compute_cycles = layer_compute_cycles(workload, hw)
        return cls(loads, compute_cycles, closure, final_store_cycles(workload, hw),
                   {read_unit(r): t for r, t in read_tails(workload, hw, needs).items()})

    def without(self, units: Iterable[str]) -> WeightOrderInputs:
        """The same inputs without the load units `units` (the bound holds for any set
        of units)."""
        dropped = set(units)
        return WeightOrderInputs(
            {u: a for u, a in self.load_cycles.items() if u not in dropped},
            self.compute_cycles,
            {u: f for u, f in self.closure.items() if u not in dropped}, self.final_store,
            {u: t for u, t in self.tails.items() if u not in dropped},
            {u: p for u, p in self.partial.items() if u not in dropped})

    def unit_sets(self) -> list[WeightOrderInputs]:
        """The unit sets the bound is computed for: the weights alone; the weights and
        the input reads some layer waits for whole; every unit (empty sets and repeats
        left out)."""
        reads = [u for u in self.load_cycles if u not in self.compute_cycles]
        unwaited = [u for u in reads if not self.closure[u]]
        sets = [self.without(reads), self.without(unwaited), self]
        distinct = {tuple(x.load_cycles): x for x in sets if x.load_cycles}
        return list(distinct.values())


def final_store_cycles(workload: Workload, hw: Hardware) -> int:
    """z (cycles): the least store of one position of a sink layer, the last tile being
    a sink's (a Workload's sinks are all network outputs: it refuses any other)."""
    sinks = [n for n in workload.layers if workload.graph.out_degree(n) == 0]
    bpc = hw.dram.bytes_per_cycle
    return min(-(-workload.layers[o].out.c * workload.elem_bytes // bpc) for o in sinks)


def read_tails(workload: Workload, hw: Hardware, reads: Iterable[InputRead]
               ) -> dict[InputRead, Fraction]:
    """t_u per read of a network input (cycles): the least tile of its reader plus the
    least tile of every descendant of the reader (`bounds.least_tile_cycles`); none when
    the network concatenates along rows (see the module docstring)."""
    if may_leave_tiles_empty(workload):
        return {}
    least = least_tile_cycles(workload, hw)
    tails = {}
    for read in reads:
        reader = read[1]
        tails[read] = least[reader] + sum(
            (least[v] for v in nx.descendants(workload.graph, reader)), Fraction(0))
    return tails


#: A layer with more output positions than this is not examined as one that waits for
#: a whole network input (skipping one only weakens the bound; examining one costs a
#: back-propagation per position).
MAX_POSITIONS_EXAMINED = 1024


def _waiting_for_reads(workload: Workload, needs: dict[InputRead, np.ndarray],
                       deadline: float | None = None) -> dict[InputRead, frozenset[str]]:
    """F per read of a network input (`needs`: what each read must load): at batch 1,
    the layers any one output position of which needs everything that read must load,
    with their descendants; at batch > 1, none. Layers are examined in network order,
    the corner position first (most often the one that needs least); a descendant of a
    waiting layer waits too. Past `deadline` (time.perf_counter()) no further layer is
    examined: a subset of F still holds (every layer in it computes after C_u), so the
    bound is weaker, never wrong (GoogLeNet at batch 1 takes ~1 s to examine)."""
    waiting: dict[InputRead, set[str]] = {r: set() for r in needs}
    if workload.batch != 1:
        return {r: frozenset() for r in waiting}
    for j, layer in workload.layers.items():
        if deadline is not None and time.perf_counter() > deadline:
            break
        open_reads = [r for r in waiting if j not in waiting[r]]
        if not open_reads or layer.out.h * layer.out.w > MAX_POSITIONS_EXAMINED:
            continue
        for row, col in np.ndindex(layer.out.h, layer.out.w):
            reads = position_read_needs(workload, j, row, col)
            open_reads = [r for r in open_reads if not (needs[r] & ~reads[r]).any()]
            if not open_reads:
                break
        for r in open_reads:
            waiting[r] |= {j, *nx.descendants(workload.graph, j)}
    return {r: frozenset(f) for r, f in waiting.items()}


def last_loads_model(inputs: WeightOrderInputs, k: int) -> LpProblem:
    """min over k-sets S and s in S of a(U) - a(S) + a_s + max(c(F(S)), t_u for u in S)
    (cycles)."""
    problem, chosen, first, covered = _variables(inputs, "last")
    a = inputs.load_cycles
    after_cs = _after(problem, inputs, covered, chosen)
    problem += (sum(a.values()) - lp_sum(a[i] * chosen[i] for i in a)
                + lp_sum(a[i] * first[i] for i in a) + after_cs + inputs.final_store)
    problem += lp_sum(chosen.values()) == k
    problem += lp_sum(first.values()) == 1
    for u, after in inputs.closure.items():
        problem += first[u] <= chosen[u]
        for j in after:
            problem += covered[j] >= chosen[u]
    for u, shares in inputs.partial.items():
        for j, share in shares.items():
            problem += covered[j] >= float(share) * chosen[u]
    return problem


def first_loads_model(inputs: WeightOrderInputs, k: int) -> LpProblem:
    """min over (k-1)-sets P and q outside P of a(P) + a_q + max(c(F(U \\ P)), t_u for u
    outside P) (cycles)."""
    problem, early, kth, covered = _variables(inputs, "first")
    a = inputs.load_cycles
    late = {u: 1 - early[u] for u in early}
    after_cq = _after(problem, inputs, covered, late)
    problem += (lp_sum(a[i] * early[i] for i in a) + lp_sum(a[i] * kth[i] for i in a)
                + after_cq + inputs.final_store)
    problem += lp_sum(early.values()) == k - 1
    problem += lp_sum(kth.values()) == 1
    for u, after in inputs.closure.items():
        problem += kth[u] <= 1 - early[u]
        for j in after:
            problem += covered[j] >= 1 - early[u]
    for u, shares in inputs.partial.items():
        for j, share in shares.items():
            problem += covered[j] >= float(share) * (1 - early[u])
    return problem


def _after(problem: LpProblem, inputs: WeightOrderInputs, covered: dict[str, LpVariable],
           late: dict[str, LpVariable | LpExpression]) -> LpVariable | LpExpression:
    """The compute after the singled-out completion (cycles): c(F) of the covered layers,
    or a variable at least that and at least t_u of every unit with `late[u]` = 1 (the
    units completing after it) when some unit has a tail."""
    compute = lp_sum(float(inputs.compute_cycles[j]) * covered[j] for j in covered)
    if not inputs.tails:
        return compute
    after = problem.add_variable("after", 0, None)
    problem += after >= compute
    for u, tail in inputs.tails.items():
        problem += after >= float(tail) * late[u]
    return after


def _variables(inputs: WeightOrderInputs, name: str
               ) -> tuple[LpProblem, dict[str, LpVariable], dict[str, LpVariable],
                          dict[str, LpVariable]]:
    """A minimisation with a binary per load unit for the set and one for the
    singled-out load, and a [0, 1] cover per layer in some closure."""
    problem = LpProblem(f"weight_order_{name}", MINIMISE)
    index = {n: k for k, n in enumerate(inputs.load_cycles)}
    pick = {n: problem.add_variable(f"x{index[n]}", cat="Binary") for n in index}
    single = {n: problem.add_variable(f"u{index[n]}", cat="Binary") for n in index}
    members = sorted(set().union(*inputs.closure.values(),
                                 *(p.keys() for p in inputs.partial.values())))
    covered = {j: problem.add_variable(f"y{k}", 0, 1) for k, j in enumerate(members)}
    return problem, pick, single, covered


#: Share of the bound's time a single MIP may take at most.
MIP_SHARE = 0.2


def weight_order_bound(workload: Workload, hw: Hardware, time_limit: float | None = 10.0,
                       floor: float = 0.0,
                       compute_cycles: dict[str, Fraction] | None = None) -> Bound | None:
    """The weight-order bound (cycles), the largest over k and the unit sets of both
    MIPs' proven bounds reached within `time_limit` seconds (None: no limit; the reads'
    F are examined within it too); None for a network without loads. Then, where a read
    of a network input splits the schedules into cases (`read_options.read_cases`), the
    least over the cases of the same, if every case was bounded in time. A MIP whose
    optimum cannot exceed `floor` (a bound the caller already has, cycles) is skipped:
    the right-hand side at one choice of loads (`estimates`) is at least its optimum.
    `compute_cycles` as in WeightOrderInputs.of."""
    deadline = None if time_limit is None else time.perf_counter() + time_limit
    every_unit = WeightOrderInputs.of(workload, hw, deadline, compute_cycles)
    if not every_unit.load_cycles:
        return None
    mip_seconds = None if time_limit is None else max(MIP_SHARE * time_limit, 0.05)
    best, _ = _largest(every_unit, deadline, mip_seconds, floor)
    by_case = []
    for case in read_cases(workload, hw, every_unit):
        value, complete = _largest(case, deadline, mip_seconds, max(best, floor))
        if not complete:
            return _bound(best)
        by_case.append(value)
    return _bound(max([best, min(by_case)] if by_case else [best]))


def _bound(cycles: float) -> Bound | None:
    """The certificate entry (`bounds.proven_cycles`; None when no MIP ran, every one
    being unable to beat the floor)."""
    return proven_cycles(
        "weight_order", cycles,
        "largest over k of the least, over which k loads (weights or reads of network "
        "inputs) complete last (or first), of the DRAM time until the earliest of them "
        "completes plus the compute of the layers that must wait for it plus the least "
        "store after the last tile (PuLP / HiGHS MIP, formulations/weight_order.py)")


def _largest(every_unit: WeightOrderInputs, deadline: float | None,
             mip_seconds: float | None, floor: float) -> tuple[float, bool]:
    """The largest proven bound over k, both MIPs and the unit sets of `every_unit`,
    each MIP given at most `mip_seconds` until `deadline`, skipping those whose optimum
    cannot exceed max(what is found, `floor`); and whether every MIP was run or
    skipped (False: the deadline passed first)."""
    best = 0.0
    for inputs in every_unit.unit_sets():
        last_estimate, first_estimate = estimates(inputs)
        for k in range(1, len(inputs.load_cycles) + 1):
            for model, estimate in ((last_loads_model, last_estimate),
                                    (first_loads_model, first_estimate)):
                if estimate[k] <= max(best, floor):
                    continue
                left = seconds_left(deadline)
                if left is not None and left <= 0:
                    return best, False
                each = left if mip_seconds is None else min(left, mip_seconds)
                status = minimise(model(inputs, k), each)
                if status.bound is not None:
                    best = max(best, status.bound)
    return best, True


def estimates(inputs: WeightOrderInputs) -> tuple[dict[int, float], dict[int, float]]:
    """Per k, the right-hand side of each inequality at one choice of loads, so at least
    its least value (cycles): the last k load units (network inputs first, then weights
    in network order, a topological order) as S (s the cheapest among them), the first
    k - 1 as P and the k-th as q."""
    a, c = inputs.load_cycles, inputs.compute_cycles
    units = list(a)
    total = sum(a.values())
    last, first = {}, {}

    def after(late: list[str]) -> float:
        covered: dict[str, Fraction] = {}
        for i in late:
            for j, share in inputs.partial.get(i, {}).items():
                covered[j] = max(covered.get(j, Fraction(0)), share)
        for j in set().union(*(inputs.closure[i] for i in late)):
            covered[j] = Fraction(1)
        return float(max(sum((c[j] * f for j, f in covered.items()), Fraction(0)),
                         *(inputs.tails.get(i, Fraction(0)) for i in late)))

    for k in range(1, len(units) + 1):
        chosen = units[-k:]
        last[k] = (total - sum(a[i] for i in chosen) + min(a[i] for i in chosen)
                   + inputs.final_store + after(chosen))
        early, kth = units[:k - 1], units[k - 1]
        first[k] = sum(a[i] for i in early) + a[kth] + after(units[k - 1:]) \
            + inputs.final_store
    return last, first

