"""The points of a sweep grid, each keyed by a hash of its full inputs, and the warm-start
order between them.

A point is one solve: a network at a batch, on the base hardware with the grid's axis
values, with one method, objective, seed, time limit and worker count. Its key hashes the
network's digest, the hardware's digest (every number, after the axes), and the rest, so
a journal line can be trusted to be about exactly these inputs.

Warm starts (solve.warm): along the monotone axes (MONOTONE_AXES, where more never
hurts), a point's predecessors are the points equal to it but one step lower on one of
those axes; their schedules are valid starts for it.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from mipsched.hw.model import Hardware
from mipsched.hw.overrides import with_overrides
from mipsched.report.results import safe_name
from mipsched.sweep.grid import MAX_POINTS, Grid, GridError
from mipsched.workload.graph import Workload

#: Axes along which a schedule of the smaller machine stays valid, and no slower, on the
#: larger: the buffer (it still fits) and the DRAM bandwidth (every transfer is shorter).
MONOTONE_AXES = ("gbuf.capacity_bytes", "dram.bytes_per_cycle")


@dataclass(frozen=True)
class Point:
    """One solve of a sweep."""

    network: str
    batch: int
    method: str
    objective: str
    seed: int
    time_limit: float
    workers: int
    params: tuple[tuple[str, int | float], ...]
    """(hardware key, value) of every axis."""
    key: str
    """Hash of the full inputs (16 hex digits)."""

    @property
    def dirname(self) -> str:
        """The point's folder name: readable parameters and the key."""
        stem = safe_name(self.network.rsplit("/", 1)[-1])
        values = "-".join(f"{v:g}" for _, v in self.params)
        return f"{stem}-b{self.batch}-{self.method}" + (f"-{values}" if values else "") + \
            f"-s{self.seed}-{self.key[:8]}"

    def columns(self) -> dict[str, Any]:
        """The point's parameters as result columns."""
        return {"point": self.key, "network": self.network, "batch": self.batch,
                "method": self.method, "objective": self.objective, "seed": self.seed,
                "time_limit": self.time_limit, **dict(self.params)}


@dataclass(frozen=True)
class PointPlan:
    """Every point of a grid in grid order, its hardware and its warm-start sources."""

    points: tuple[Point, ...]
    hardware: dict[str, Hardware]
    """Point key -> the hardware it runs on."""
    predecessors: dict[str, tuple[str, ...]]
    """Point key -> keys of the points whose schedules warm-start it."""

    @cached_property
    def by_key(self) -> dict[str, Point]:
        """Point key -> the point."""
        return {p.key: p for p in self.points}


def plan_points(grid: Grid, workloads: dict[tuple[str, int], Workload],
                base: Hardware) -> PointPlan:
    """The grid's points (network x batch x method x seed x axes, in that nesting)."""
    combos = list(itertools.product(*(values for _, values in grid.axes)))
    total = (len(grid.networks) * len(grid.batches) * len(grid.methods) * len(grid.seeds)
             * len(combos))
    if total > MAX_POINTS:
        raise GridError(f"the grid has {total:,} points (at most {MAX_POINTS:,})")
    machines = {combo: with_overrides(base, dict(zip(grid.axis_keys, combo, strict=True)))
                if combo else base for combo in combos}
    points, hardware, by_inputs = [], {}, {}
    for network, batch, method, seed in itertools.product(
            grid.networks, grid.batches, grid.methods, grid.seeds):
        digest = workloads[network, batch].digest()
        for combo in combos:
            hw = machines[combo]
            key = _key(digest, hw, method, grid, seed)
            point = Point(network, batch, method, grid.objective, seed, grid.time_limit,
                          grid.workers, tuple(zip(grid.axis_keys, combo, strict=True)), key)
            points.append(point)
            hardware[key] = hw
            by_inputs[network, batch, method, seed, combo] = key
    predecessors = {}
    for (network, batch, method, seed, combo), key in by_inputs.items():
        found = []
        for i, (axis, values) in enumerate(grid.axes):
            smaller = [v for v in values if v < combo[i]]
            if axis in MONOTONE_AXES and smaller:
                lower = combo[:i] + (max(smaller),) + combo[i + 1:]
                found.append(by_inputs[network, batch, method, seed, lower])
        predecessors[key] = tuple(found)
    return PointPlan(tuple(points), hardware, predecessors)


def _key(workload_digest: str, hw: Hardware, method: str, grid: Grid, seed: int) -> str:
    blob = json.dumps({"workload": workload_digest, "hardware": hw.digest(),
                       "method": method, "objective": grid.objective, "seed": seed,
                       "time_limit": grid.time_limit, "workers": grid.workers},
                      sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
