"""A start for auto's prefetch-scored search: the layer order split into LGs of one FLG
each, every LG at its own tiling number, the split chosen by dynamic programming.

SoMa's SA ranks LFAs by their latency under the double-buffered default DLSA, and on
networks whose buffer forces some tensors to be re-read (GPT-2 prefill at batch 16:
K and V are read whole by every attention tile) it wanders among LFAs whose FLGs share
one tiling number poorly. What a prefetching DLSA reaches instead is close to, for each
LG, max(its tile cycles, its DRAM cycles): DRAM transfers hide behind compute when the
buffer has room for them. So:

- every contiguous group [a, b) of the layer order is costed alone as one LG and one FLG
  (its inputs from outside loaded, its outputs stored) at the least power-of-two tiling
  number whose tile program fits the buffer under its tight DLSA (every transfer held
  for the tile that uses it only) and has at most MAX_GROUP_TILES tiles: cost =
  max(sum of tile cycles, sum of DRAM cycles);
  the least tiling tried for [a, b + 1) is the one [a, b) took (a longer group needs at
  least as many tiles to fit; a pruning, not a guarantee), and a group stops growing at
  the first length that fits at no tiling;
- the split minimising the sum of the groups' costs is found by DP over the order;
- the result is lowered whole and given its greedy prefetching DLSA
  (`prefetch_anneal.prefetched`), so it is a complete schedule that fits, or None.

Measured: gpt2_small_prefill on edge at batch 16, the split [norm1 .. attention_V] at
4 tiles + [attention_QK .. res2] at 64 takes 9,086,784 cycles under its prefetching
DLSA, where 60 s of auto had reached 9,861,760; 60 s of auto from it reach 8,994,624
(benchmarks/results/optimality.md: certified gap 13.5 % -> 5.5 %). On ResNet-50 at
batch 1 the split alone is 1,611,411 cycles, the best known (bound 1,611,410).
"""

from __future__ import annotations

import time

from mipsched.core import Candidate
from mipsched.dlsa_starts import tight_dlsa
from mipsched.evaluate import buffer_profile, evaluate
from mipsched.formulations.lfa.relaxation import power_tilings
from mipsched.heuristics.partition import cheapest_split, sub_workload
from mipsched.heuristics.prefetch_anneal import prefetched
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa, ScheduleError

MAX_GROUP_TILES = 2048
"""Most tiles (tiling number x layers) of a group the DP costs: lowering a group takes
~20 us per tile, and without a cap the long groups of ResNet-50 or Inception-ResNet-v1
at batch 16, which fit only at thousands of tiles, kept the DP past a minute."""

#: (tiling number, max(tile cycles, DRAM cycles)) of a group [a, b) scheduled alone.
GroupCost = tuple[int, int]


def group_cost(lowerer: Lowerer, layers: tuple[str, ...], least_tiling: int = 1
               ) -> GroupCost | None:
    """The least power-of-two tiling number, at least `least_tiling`, at which `layers`
    (contiguous in the order) fit the buffer as one LG and one FLG under the tight DLSA
    in at most MAX_GROUP_TILES tiles, with max(sum of tile cycles, sum of DRAM cycles)
    at it; None when none does."""
    hw = lowerer.hw
    sub = sub_workload(lowerer.workload, layers)
    alone = Lowerer(sub, hw)
    for tiling in power_tilings(sub):
        if tiling < least_tiling:
            continue
        if tiling * len(layers) > MAX_GROUP_TILES:
            return None
        try:
            program = alone.lower(Lfa(layers, (), (tiling,), ()), check=False)
        except ScheduleError:  # the tiling does not divide the work
            continue
        if max(buffer_profile(program, tight_dlsa(program))) > hw.gbuf.capacity_bytes:
            continue
        tile_cycles = sum(t.compute_cycles for t in program.tiles)
        dram_cycles = sum(t.access_cycles for t in program.tensors)
        return tiling, max(tile_cycles, dram_cycles)
    return None


def group_costs(lowerer: Lowerer, deadline: float | None = None
                ) -> dict[tuple[int, int], GroupCost] | None:
    """`group_cost` of every group [a, b) of the workload's layer order that the pruning
    keeps (see the module docstring); None when `deadline` (time.perf_counter()) passes
    first or some single layer fits at no tiling."""
    order = tuple(lowerer.workload.layers)
    costs: dict[tuple[int, int], GroupCost] = {}
    for a in range(len(order)):
        least = 1
        for b in range(a + 1, len(order) + 1):
            if deadline is not None and time.perf_counter() > deadline:
                return None
            found = group_cost(lowerer, order[a:b], least)
            if found is None:
                break
            costs[(a, b)] = found
            least = found[0]
        if (a, a + 1) not in costs:
            return None
    return costs


def best_split(n: int, costs: dict[tuple[int, int], GroupCost]) -> list[tuple[int, int]]:
    """The groups [a, b) covering 0..n that minimise the sum of their costs
    (`partition.cheapest_split`, the DP Cocco's partitioner uses); every single layer must
    be in `costs`."""
    cuts = cheapest_split(n, {g: (0.0, cycles) for g, (_, cycles) in costs.items()},
                          0.0, 1.0)
    edges = [0, *cuts, n]
    return list(zip(edges[:-1], edges[1:], strict=True))


def lg_split_start(lowerer: Lowerer, deadline: float | None = None) -> Candidate | None:
    """The DP's split as a schedule with its greedy prefetching DLSA (module docstring);
    None when the costs are not all found by `deadline` or the whole does not fit."""
    costs = group_costs(lowerer, deadline)
    if costs is None:
        return None
    order = tuple(lowerer.workload.layers)
    groups = best_split(len(order), costs)
    cuts = tuple(a for a, _ in groups[1:])
    lfa = Lfa(order, cuts, tuple(costs[g][0] for g in groups), cuts)
    found = prefetched(lowerer, lfa)
    if found is None:
        return None
    program, dlsa, _ = found
    return Candidate(lfa, program, dlsa, evaluate(program, dlsa))
