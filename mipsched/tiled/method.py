"""What `mipsched solve --hw TILED --method M` runs (`search_method`): phases of
independent SA seeds (`multistart.search_seeds`), then, for `set`, mipsched's two passes
(`mipsched.tiled.passes`).

- `ls`, `lp`: the reference's runs of its restricted searches, 4 seeds of 100 rounds
  per layer from the layer-by-layer tree, the best kept.
- `set`: the reference's 4 x 100 rounds per layer, as 8 SET seeds of 50 from the
  layer-by-layer tree (short independent chains are more diverse, and recombination takes
  the best part of each), plus mipsched's warm start: first 2 LP-restricted seeds of 50
  (cheap: their trees share leaves), then 2 SET seeds of 50 from the best LP tree. On a
  12 x 12 mesh a SET round from the layer-by-layer tree costs ~0.3 s (every new S Cut
  child searches its leaves on a new range of up to 144 cores), so under a time limit
  those seeds barely move, while the warm seeds start from a pipelined tree (ResNet-50
  b8 set-12x12 in 81 s: LP 3.78e16, warm SET 2.06e16 pJ x cycles; from the
  layer-by-layer tree 4.08e16), so meshes of LARGE_MESH_TILES tiles or more run
  `LARGE_SET_PLAN`, which gives the LP and warm seeds most of the time. Then segment
  recombination over every seed of every phase, and CP-SAT placement.
  Measured on ResNet-50 b8 set-4x4 without a time limit (E x D in pJ x cycles; the
  reference's 4 threads of 100: 0.88e17 .. 1.22e17, best 0.880e17): the best of 2 x 200
  seeds 0.96e17; 4 x 100 recombined 0.93e17 / 0.94e17 (seeds 0-3 / 4-7); 8 x 50
  recombined 0.83e17 / 0.86e17 (seeds 0-7 / 8-15); 16 x 25 0.86e17.

Under a time limit the passes keep PASSES_SHARE of it (recombination gives up halfway
through what is left then, placement takes the rest) and each phase gets its share
(`Phase.share`) of the time left when it starts, so time an early phase saves goes to
the later ones; without one every phase runs all its rounds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from mipsched.hw.tiled import TiledHardware
from mipsched.tiled.multistart import leaf_cache, search_seeds
from mipsched.tiled.passes import PassGain, place_best, recombine_best
from mipsched.tiled.recombine import Segment, pareto_pool
from mipsched.tiled.search import SearchResult, init_tree
from mipsched.workload.graph import Workload


@dataclass(frozen=True)
class Phase:
    """Seeds of one search method run together (`search_seeds`)."""

    label: str
    method: str
    seeds: int
    rounds_per_layer: int
    share: float
    """Share of the search's time limit (the phases' shares sum to 1)."""
    warm: bool = False
    """Start from the best tree of the phases before (else the layer-by-layer tree)."""


PLANS: dict[str, tuple[Phase, ...]] = {
    "set": (Phase("lp", "lp", 2, 50, 0.15), Phase("warm", "set", 2, 50, 0.35, True),
            Phase("init", "set", 8, 50, 0.5)),
    "ls": (Phase("ls", "ls", 4, 100, 1.0),),
    "lp": (Phase("lp", "lp", 4, 100, 1.0),),
}
LARGE_MESH_TILES = 64
"""Meshes with at least this many tiles run `LARGE_SET_PLAN` for `set`."""
LARGE_SET_PLAN = (Phase("lp", "lp", 2, 50, 0.35), Phase("warm", "set", 4, 50, 0.45, True),
                  Phase("init", "set", 2, 50, 0.2))
"""`set` on a large mesh: more of the time to the LP seeds and the warm SET seeds from
their best tree, since a SET round from the layer-by-layer tree costs ~0.3 s there (every
new S Cut child searches its leaves on a new range of up to 144 cores) and those seeds
barely move under a time limit. ResNet-50 on set-12x12 at --time-limit 90 (E x D in pJ x
cycles, `benchmarks/set_fig.py`): batch 64, with `PLANS['set']` 1.59e18, its LP phase
5.96e18 against 1.11e18 for `--method lp` (4 x 100) with the same time."""


def plan(method: str, hw: TiledHardware) -> tuple[Phase, ...]:
    """The phases `method` runs on `hw`. ValueError for an unknown method."""
    if method not in PLANS:
        raise ValueError(f"method '{method}': expected one of {', '.join(PLANS)}")
    if method == "set" and hw.n_tiles >= LARGE_MESH_TILES:
        return LARGE_SET_PLAN
    return PLANS[method]
PASSES_SHARE = 0.1
"""Share of a `set` search's time limit kept for recombination and placement."""


@dataclass
class MethodResult:
    """The best tree of a method's phases and passes, every seed's final objective
    ("phase/seed"), the wall seconds and what each pass did (None: not run)."""

    best: SearchResult
    costs: dict[str, float]
    seconds: float
    recombination: PassGain | None = None
    placement: PassGain | None = None


def plan_summary(method: str, hw: TiledHardware) -> str:
    """The method's phases on `hw` in words, e.g. '2 lp x 50 + 2 warm x 50 + 8 init x 50
    rounds per layer'."""
    return " + ".join(f"{p.seeds} {p.label} x {p.rounds_per_layer}"
                      for p in plan(method, hw)) + " rounds per layer"


def search_method(hw: TiledHardware, workload: Workload, method: str, seed: int = 0,
                  jobs: int = 2, time_limit: float | None = None, objective: str = "edp",
                  rounds_per_layer: int | None = None, passes: bool = True) -> MethodResult:
    """The method's phases (`plan`, seeds seed, seed + 1, ... in each;
    `rounds_per_layer` overrides their rounds), then for `set` with `passes` segment
    recombination and placement. The layer-by-layer start tree is evaluated first (its
    leaf searches fill the cache every phase and worker shares), and the phases share
    the time left after it. ValueError for an unknown method."""
    phases = plan(method, hw)
    began = time.perf_counter()
    init_tree(hw, workload, leaf_cache(hw, workload))
    extra = passes and method == "set"
    budget = None if time_limit is None else time_limit * (1 - PASSES_SHARE * extra)
    best: SearchResult | None = None
    costs: dict[str, float] = {}
    pool: list[Segment] = []
    for k, phase in enumerate(phases):
        limit = None
        if budget is not None:  # its share of what is left: time an early phase saves
            left = budget - (time.perf_counter() - began)
            limit = max(0.0, left * phase.share / sum(p.share for p in phases[k:]))
        found = search_seeds(hw, workload, phase.method,
                             tuple(range(seed, seed + phase.seeds)), jobs,
                             rounds_per_layer or phase.rounds_per_layer, limit, objective,
                             best.tree if phase.warm and best is not None else None)
        costs.update({f"{phase.label}/{s}": c for s, c in found.costs.items()})
        pool += found.pool
        if best is None or found.best.cost < best.cost:
            best = found.best
    assert best is not None  # every plan has a phase
    result = MethodResult(best, costs, time.perf_counter() - began)
    if extra:
        deadline = None if time_limit is None else began + time_limit
        halfway = None if deadline is None else (time.perf_counter() + deadline) / 2
        cache = leaf_cache(hw, workload)
        result.best, result.recombination = recombine_best(hw, workload, result.best,
                                                           pareto_pool(pool), objective,
                                                           cache, halfway)
        result.best, result.placement = place_best(hw, workload, result.best, objective,
                                                   cache, deadline)
        result.seconds = time.perf_counter() - began
    return result
