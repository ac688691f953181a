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

import multiprocessing
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.pool import IMapIterator

from mipsched.core import Candidate
from mipsched.evaluate import evaluate
from mipsched.formulations.lfa.relaxation import power_tilings
from mipsched.heuristics.partition import cheapest_split, sub_workload
from mipsched.heuristics.prefetch_anneal import prefetched
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa, ScheduleError
from mipsched.schedule.placement import tight_peak

MAX_GROUP_TILES = 2048
"""Most tiles (tiling number x layers) of a group the DP costs: lowering a group takes
~20 us per tile, and without a cap the long groups of ResNet-50 or Inception-ResNet-v1
at batch 16, which fit only at thousands of tiles, kept the DP past a minute."""

MIN_LAYERS_FOR_WORKERS = 24
"""Workload size (layers) up to which the group costs are found in this process: forking
the pool costs about what it saves there (VGG-19, 21 layers: 0.09 s in one process, 0.10
s with two workers; GPT-2 small prefill b1, 38 layers: 0.44 -> 0.33 s; GPT-2 XL prefill
/ cloud / b16, 64 layers: 8.2 -> 4.9 s; ResNet-50 / edge / b16: 6.2 -> 3.9 s)."""
POLL_S = 0.05
"""How often the parent looks at `stop` while it waits for the workers (seconds)."""

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
            placed = alone.place(Lfa(layers, (), (tiling,), ()))
        except ScheduleError:  # the tiling does not divide the work
            continue
        if tight_peak(placed) > hw.gbuf.capacity_bytes:
            continue
        program = alone.lower_placed(placed)
        tile_cycles = sum(t.compute_cycles for t in program.tiles)
        dram_cycles = sum(t.access_cycles for t in program.tensors)
        return tiling, max(tile_cycles, dram_cycles)
    return None


def group_costs(lowerer: Lowerer, deadline: float | None = None, workers: int = 1,
                stop: Callable[[], bool] | None = None
                ) -> dict[tuple[int, int], GroupCost] | None:
    """`group_cost` of every group [a, b) of the workload's layer order that the pruning
    keeps (see the module docstring); None when `deadline` (time.perf_counter()) passes
    or `stop()` turns true first, or some single layer fits at no tiling. With `workers`
    > 1 (and more than MIN_LAYERS_FOR_WORKERS layers), forked processes cost the groups
    of different first layers a; the table is the same."""
    n = len(lowerer.workload.layers)
    if workers <= 1 or n <= MIN_LAYERS_FOR_WORKERS:
        rows: Iterable[_Row | None] = (_groups_from(lowerer, a, deadline) for a in range(n))
        return _table(rows, stop)
    context = multiprocessing.get_context("fork")
    with context.Pool(min(workers, n), _init_worker, (lowerer, deadline)) as pool:
        return _table(_waiting(pool.imap_unordered(_worker_groups, range(n)), stop), stop)


#: The groups [a, b) costed from one first layer a (empty: [a, a + 1) fits at no tiling).
_Row = list[tuple[tuple[int, int], GroupCost]]


def _groups_from(lowerer: Lowerer, a: int, deadline: float | None) -> _Row | None:
    """`group_cost` of [a, b) for b = a + 1, a + 2, ... until a group fits at no tiling
    (each tried from the tiling the shorter one took); None if `deadline` passes."""
    order = tuple(lowerer.workload.layers)
    row: _Row = []
    least = 1
    for b in range(a + 1, len(order) + 1):
        if deadline is not None and time.perf_counter() > deadline:
            return None
        found = group_cost(lowerer, order[a:b], least)
        if found is None:
            break
        row.append(((a, b), found))
        least = found[0]
    return row


def _table(rows: Iterable[_Row | None], stop: Callable[[], bool] | None
           ) -> dict[tuple[int, int], GroupCost] | None:
    """The rows merged into one table; None as soon as one is None (deadline) or empty
    (its single layer [a, a + 1) fits at no tiling), or stop() turns true."""
    costs: dict[tuple[int, int], GroupCost] = {}
    for row in rows:
        if not row or (stop is not None and stop()):
            return None
        costs.update(row)
    return costs


def _waiting(results: IMapIterator, stop: Callable[[], bool] | None
             ) -> Iterator[_Row | None]:
    """The pool's rows as they come, looking at `stop` every POLL_S while waiting (a
    None row when it turns true)."""
    while True:
        try:
            yield results.next(timeout=POLL_S)
        except multiprocessing.TimeoutError:
            if stop is not None and stop():
                yield None
                return
        except StopIteration:
            return


_worker_state: tuple[Lowerer, float | None] | None = None
"""A forked worker's lowerer and deadline (set by `_init_worker`)."""


def _init_worker(lowerer: Lowerer, deadline: float | None) -> None:
    """Runs in each forked worker: keeps its arguments; Ctrl-C is the parent's to handle
    (it stops waiting, and leaving the pool ends the workers)."""
    global _worker_state
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker_state = (lowerer, deadline)


def _worker_groups(a: int) -> _Row | None:
    """`_groups_from` in a worker."""
    assert _worker_state is not None
    lowerer, deadline = _worker_state
    return _groups_from(lowerer, a, deadline)


def best_split(n: int, costs: dict[tuple[int, int], GroupCost]) -> list[tuple[int, int]]:
    """The groups [a, b) covering 0..n that minimise the sum of their costs
    (`partition.cheapest_split`, the DP Cocco's partitioner uses); every single layer must
    be in `costs`."""
    cuts = cheapest_split(n, {g: (0.0, cycles) for g, (_, cycles) in costs.items()},
                          0.0, 1.0)
    edges = [0, *cuts, n]
    return list(zip(edges[:-1], edges[1:], strict=True))


def lg_split_start(lowerer: Lowerer, deadline: float | None = None, workers: int = 1,
                   stop: Callable[[], bool] | None = None) -> Candidate | None:
    """The DP's split as a schedule with its greedy prefetching DLSA (module docstring),
    its group costs found by `workers` processes; None when they are not all found by
    `deadline` or before `stop()`, or the whole does not fit."""
    costs = group_costs(lowerer, deadline, workers, stop)
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
