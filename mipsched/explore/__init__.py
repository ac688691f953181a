"""Cocco's hardware-mapping co-exploration (`mipsched explore`): the buffer capacity and
the schedule chosen together to minimise capacity + alpha x (energy or DRAM bytes)."""

from mipsched.explore.curve import HullVertex, best_for, lower_hull
from mipsched.explore.run import DEFAULT_EVALUATIONS, METHODS, ExploreResult, explore_network
from mipsched.explore.space import (
    DEFAULT_ALPHA,
    DEFAULT_GRID,
    METRICS,
    CapacityGrid,
    ExploreCost,
    parse_grid,
)

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_EVALUATIONS",
    "DEFAULT_GRID",
    "METHODS",
    "METRICS",
    "CapacityGrid",
    "ExploreCost",
    "ExploreResult",
    "HullVertex",
    "best_for",
    "explore_network",
    "lower_hull",
    "parse_grid",
]
