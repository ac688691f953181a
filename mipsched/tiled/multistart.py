"""Several independent SET searches, one per seed, on worker processes; the best wins.

The reference runs its SA in 4 threads (seeds s, s+1, s+2, s+3, each the full
100 x layers rounds from the same start) and keeps the best tree; its threads' results
differ by up to ~40 % on ResNet-50 (E x D 0.88e17 .. 1.22e17 at batch 8 on 4 x 4).
`search_seeds` does the same with forked processes (`concurrent.futures`): `jobs` at a
time, each seed a whole `search` call. The parent first evaluates the start tree, so
every worker inherits a warm leaf cache.

Time limit: the seeds run in ceil(seeds / jobs) waves; each seed gets the time left
divided by the waves still to run, so the last wave ends by the deadline.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from mipsched.hw.tiled import TiledHardware
from mipsched.tiled.ratree import RaTree
from mipsched.tiled.search import SearchResult, init_tree, search
from mipsched.workload.graph import Workload

RUNS = {"set": (2, 200), "ls": (4, 100), "lp": (4, 100)}
"""(seeds, SA rounds per layer) per method by default. LS and LP as the reference runs
them: 4 seeds of 100 x layers rounds. SET: the same total rounds as 2 longer chains,
which measured better on ResNet-50 b8 / set-4x4 (E x D, pJ x cycles): 8 seeds of 100
rounds per layer gave 0.86e17 .. 1.24e17 (mean 1.09e17; the reference's 4 threads:
0.88e17 .. 1.22e17), 2 seeds of 200 gave 0.81e17 and 0.96e17."""
_CACHES: dict[tuple[str, str], dict] = {}
"""The leaf cache of this process for one (hardware, workload) digest pair (a forked
worker inherits the parent's); a new pair replaces the old one."""


def _cache_for(hw: TiledHardware, workload: Workload) -> dict:
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


@dataclass(frozen=True)
class _Job:
    hw: TiledHardware
    workload: Workload
    method: str
    seed: int
    rounds_per_layer: int
    time_limit: float | None
    objective: str
    start: RaTree | None


def _run(job: _Job) -> SearchResult:
    return search(job.hw, job.workload, job.method, seed=job.seed,
                  rounds_per_layer=job.rounds_per_layer, time_limit=job.time_limit,
                  objective=job.objective, start=job.start,
                  cache=_cache_for(job.hw, job.workload))


def search_seeds(hw: TiledHardware, workload: Workload, method: str = "set",
                 seeds: Sequence[int] = (0, 1, 2, 3), jobs: int = 2,
                 rounds_per_layer: int = 100, time_limit: float | None = None,
                 objective: str = "edp", start: RaTree | None = None) -> SeedsResult:
    """`search` once per seed (at most `jobs` processes at a time) and the best result
    (lowest objective; ties: the first seed). `time_limit`: seconds for the whole call."""
    if not seeds:
        raise ValueError("search_seeds needs at least one seed")
    began = time.perf_counter()
    if start is None:
        init_tree(hw, workload, _cache_for(hw, workload))  # warms the cache every worker inherits
    jobs = max(1, min(jobs, len(seeds)))
    results: dict[int, SearchResult] = {}
    groups = [list(seeds[i:i + jobs]) for i in range(0, len(seeds), jobs)]
    pool = None if jobs == 1 else ProcessPoolExecutor(
        max_workers=jobs, mp_context=multiprocessing.get_context("fork"))
    try:
        for k, group in enumerate(groups):
            limit = None
            if time_limit is not None:
                left = time_limit - (time.perf_counter() - began)
                limit = max(0.0, left / (len(groups) - k))
            batch = [_Job(hw, workload, method, s, rounds_per_layer, limit, objective, start)
                     for s in group]
            outcomes = map(_run, batch) if pool is None else pool.map(_run, batch)
            results.update(zip(group, outcomes, strict=True))
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    best = min(results.values(), key=lambda r: (r.cost, seeds.index(r.seed)))
    return SeedsResult(best, {s: r.cost for s, r in results.items()},
                       time.perf_counter() - began)


def search_method(hw: TiledHardware, workload: Workload, method: str, seed: int = 0,
                  jobs: int = 2, time_limit: float | None = None, objective: str = "edp",
                  rounds_per_layer: int | None = None) -> SeedsResult:
    """`search_seeds` with the method's default runs (`RUNS`): seeds seed, seed + 1, ...;
    `rounds_per_layer` overrides the method's rounds."""
    if method not in RUNS:
        raise ValueError(f"method '{method}': expected one of {', '.join(RUNS)}")
    n_seeds, rounds = RUNS[method]
    return search_seeds(hw, workload, method, tuple(range(seed, seed + n_seeds)), jobs,
                        rounds_per_layer or rounds, time_limit, objective)

