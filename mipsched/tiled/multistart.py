"""Several independent SET searches, one per seed, on worker processes; the best wins.

The reference runs its SA in 4 threads (seeds s, s+1, s+2, s+3, each the full
100 x layers rounds from the same start) and keeps the best tree; its threads' results
differ by up to ~40 % on ResNet-50 (E x D 0.88e17 .. 1.22e17 at batch 8 on 4 x 4).
`search_seeds` does the same with forked worker processes (`multiprocessing.Pool`):
`jobs` at a time, each seed a whole `search` call. The parent first evaluates the start tree, so
every worker inherits a warm leaf cache.

Time limit: the seeds run in ceil(seeds / jobs) waves; each wave gets the time left
divided by the waves still to run, so the last wave ends by the deadline (a search
stops before a round that would likely end past it); a wave still running at the
deadline is abandoned and its workers killed. A worker's search ends by an absolute
instant (`time.perf_counter` is the system-wide monotonic clock, shared by forked
processes), so the time a busy machine takes to hand it the job counts, and
`WRAP_UP_SHARE` of each wave (at least `WRAP_UP_SECONDS`) is left for the worker's
evaluation, harvest and reply.

`mipsched.tiled.method` strings such calls together into what `solve` and `compare`
run.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from mipsched.hw.tiled import TiledHardware
from mipsched.tiled.evaluate import DEFAULT_STRIDE, Evaluation, evaluate_tree
from mipsched.tiled.ratree import RaTree
from mipsched.tiled.recombine import Segment, harvest, pareto_pool
from mipsched.tiled.search import SearchResult, init_tree, objective_cost, search
from mipsched.workload.graph import Workload

_CACHES: dict[tuple[str, str], dict] = {}
"""The leaf cache of this process for one (hardware, workload) digest pair (a forked
worker inherits the parent's); a new pair replaces the old one."""


def leaf_cache(hw: TiledHardware, workload: Workload) -> dict:
    """This process's leaf cache for (`hw`, `workload`): after `search_seeds` it holds
    the leaf searches of every seed's best tree, so evaluating, replaying or re-planning
    that tree searches no leaf again."""
    key = (hw.digest(), workload.digest())
    if key not in _CACHES:
        _CACHES.clear()
        _CACHES[key] = {}
    return _CACHES[key]


@dataclass
class SeedsResult:
    """The best of several seeds and every seed's final cost."""

    best: SearchResult
    costs: dict[int, float]
    """Final objective value per seed."""
    seconds: float
    pool: list[Segment] = field(default_factory=list, repr=False)
    """Every seed's evaluated segments on their Pareto fronts (`recombine.harvest`)."""


@dataclass(frozen=True)
class _Job:
    hw: TiledHardware
    workload: Workload
    method: str
    seed: int
    rounds_per_layer: int
    search_until: float | None
    """The `time.perf_counter` instant by which the search stops; None: no limit."""
    objective: str
    start: RaTree | None


Outcome = tuple[SearchResult, dict, list[Segment]]
"""A seed's result, the leaf cache entries of its best tree, its harvested segments."""


def _run(job: _Job) -> Outcome:
    """One seed's search, the cache entries that evaluate its best tree (so the parent
    re-evaluates, replays and re-plans that tree without searching its leaves again: a
    forked worker's cache does not come back by itself) and the segments it evaluated
    (`recombine.harvest`)."""
    cache = leaf_cache(job.hw, job.workload)
    limit = None if job.search_until is None else max(
        0.0, job.search_until - time.perf_counter())
    found = search(job.hw, job.workload, job.method, seed=job.seed,
                   rounds_per_layer=job.rounds_per_layer, time_limit=limit,
                   objective=job.objective, start=job.start, cache=cache)
    used = _Recorder(cache)
    evaluate_tree(job.hw, job.workload, found.tree, cache=used)
    return found, dict(used), harvest(cache, job.workload.batch, DEFAULT_STRIDE, 0.75)


class _Recorder(dict):
    """A cache that starts empty and copies in every leaf entry of `source` it is asked
    for: afterwards it holds exactly the leaf searches an evaluation used. Whole
    segments (`evaluate._segment`'s entries) are not copied, so that the evaluation
    asks for their leaves, which the simulator and the placement pass look up."""

    def __init__(self, source: dict) -> None:
        super().__init__()
        self.source = source

    def __contains__(self, key: object) -> bool:
        if dict.__contains__(self, key):
            return True
        if not (isinstance(key, tuple) and key[:1] == ("segment",)) and key in self.source:
            self[key] = self.source[key]
            return True
        return False


def search_seeds(hw: TiledHardware, workload: Workload, method: str = "set",
                 seeds: Sequence[int] = (0, 1, 2, 3), jobs: int = 2,
                 rounds_per_layer: int = 100, time_limit: float | None = None,
                 objective: str = "edp", start: RaTree | None = None) -> SeedsResult:
    """`search` once per seed (at most `jobs` processes at a time) and the best result
    (lowest objective; ties: the first seed). `time_limit`: seconds for the whole call,
    a promise: a seed not done by then (+ LATE_SECONDS) is abandoned, its worker
    killed; with no seed done, the start tree is the result."""
    if not seeds:
        raise ValueError("search_seeds needs at least one seed")
    began = time.perf_counter()
    cache = leaf_cache(hw, workload)
    if start is None:  # also warms the cache every worker inherits
        start_tree, start_ev = init_tree(hw, workload, cache)
    else:
        start_tree, start_ev = start, evaluate_tree(hw, workload, start, cache=cache)
    jobs = max(1, min(jobs, len(seeds)))
    results: dict[int, SearchResult] = {}
    harvested: list[Segment] = []
    waves = [list(seeds[i:i + jobs]) for i in range(0, len(seeds), jobs)]
    deadline = None if time_limit is None else began + time_limit
    outcomes = (_waves_in_process if jobs == 1 and deadline is None else _waves_in_pool)(
        [[_Job(hw, workload, method, s, rounds_per_layer, None, objective, start)
          for s in wave] for wave in waves], jobs, deadline)
    for found, used, segments in outcomes:
        results[found.seed] = found
        cache.update(used)
        harvested += segments
    if not results:
        if start_ev is None:
            raise ValueError("the start tree is invalid or rejected by the cost model")
        results[seeds[0]] = _unsearched(method, objective, seeds[0], start_tree, start_ev,
                                        rounds_per_layer * len(workload.layers), began)
    best = min(results.values(), key=lambda r: (r.cost, seeds.index(r.seed)))
    return SeedsResult(best, {s: r.cost for s, r in results.items()},
                       time.perf_counter() - began, pareto_pool(harvested))


LATE_SECONDS = 0.3
"""How long past its deadline a wave of seeds is waited for before it is abandoned."""

WRAP_UP_SHARE = 0.1
"""The share of a wave's seconds kept for what a worker does after its search (the
best tree's evaluation, the harvest, pickling the reply)."""

WRAP_UP_SECONDS = 0.3
"""The least kept for that wrap-up (at most half a wave): on a loaded machine a worker
may wait this long for a core, and a late reply loses the seed's whole search."""


def _waves_in_process(waves: list[list[_Job]], jobs: int,
                      deadline: float | None) -> list[Outcome]:
    """Every job, one after another, in this process (no time limit)."""
    return [_run(job) for wave in waves for job in wave]


def _waves_in_pool(waves: list[list[_Job]], jobs: int,
                   deadline: float | None) -> list[Outcome]:
    """The waves one after another on `jobs` forked workers; each wave's seeds get the
    time left over the waves left, less `WRAP_UP_SHARE` of it (at least `WRAP_UP_SECONDS`)
    for their wrap-up. Once a wave is late, the rest are dropped and the workers killed
    (leaving the pool terminates them)."""
    done: list[Outcome] = []
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        for k, wave in enumerate(waves):
            until = None
            if deadline is not None:
                now = time.perf_counter()
                share = (deadline - now) / (len(waves) - k)
                if share <= 0:
                    break
                until = now + share - min(share / 2, max(WRAP_UP_SHARE * share,
                                                         WRAP_UP_SECONDS))
            pending = [pool.apply_async(_run, (dataclasses.replace(job, search_until=until),))
                       for job in wave]
            for job in pending:
                wait = None if deadline is None else max(
                    0.0, deadline + LATE_SECONDS - time.perf_counter())
                try:
                    done.append(job.get(wait))
                except multiprocessing.TimeoutError:
                    return done
    return done


def _unsearched(method: str, objective: str, seed: int, tree: RaTree, ev: Evaluation,
                rounds: int, began: float) -> SearchResult:
    """The start tree as the result of a search that ran no round."""
    cost = objective_cost(ev, objective)
    return SearchResult(method, objective, seed, tree, ev, cost, tree, ev, cost, rounds, 0,
                        0, 0, time.perf_counter() - began)
