"""The joint space of Cocco's hardware-mapping co-exploration (ASPLOS'24 §4.2, Eq. 2):
a buffer capacity from a grid and a partition of the layer order (heuristics/partition.py:
every group one LG and one FLG at the tiling rule's number, default double buffering),
scored by

    objective = capacity_bytes + alpha * metric(schedule)

with metric = energy (pJ) or DRAM traffic (bytes). `CoSpace` evaluates samples
(capacity, partition): one Partitioner per capacity, on the hardware with that capacity
and the energies that follow it (hw/overrides.py), repairing partitions that overflow
(Cocco §4.4.4) and counting samples (genomes scored, as Cocco counts them) against a
budget.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from mipsched.core import OBJECTIVES, InfeasibleError
from mipsched.errors import InputError
from mipsched.evaluate import Evaluation
from mipsched.heuristics.partition import RESULT_SECONDS_PER_TILE, Cuts, Partitioner
from mipsched.hw.model import Hardware
from mipsched.hw.overrides import with_overrides
from mipsched.schedule.lowering import Lowerer
from mipsched.workload.graph import Workload

KIB = 1024
MIB = 1024 * KIB
_UNITS = {"": 1, "b": 1, "kib": KIB, "kb": KIB, "k": KIB, "mib": MIB, "mb": MIB, "m": MIB}
METRICS = ("energy", "dram")
"""What alpha weighs: the schedule's energy (pJ) or its DRAM traffic (bytes)."""
DEFAULT_ALPHA = 0.002
"""Cocco's alpha (§5.3; capacity in bytes, energy in pJ)."""
RESULT_RESERVE_SECONDS = 0.5
"""Kept back from the deadline, besides RESULT_SECONDS_PER_TILE per tile of the best
schedule, for lowering it again, replaying it in the simulator and writing the files."""


@dataclass(frozen=True)
class CapacityGrid:
    """The buffer capacities a co-exploration may choose (bytes, ascending)."""

    values: tuple[int, ...]

    @classmethod
    def span(cls, low: int, high: int, step: int) -> CapacityGrid:
        """low, low + step, ... up to high (included when a step reaches it)."""
        if not 0 < low <= high or step <= 0:
            raise InputError(f"capacities: need 0 < low <= high and step > 0, got "
                             f"{low:,}:{high:,}:{step:,} bytes")
        return cls(tuple(range(low, high + 1, step)))

    def nearest(self, capacity: float, allowed: list[int]) -> int:
        """Index (among `allowed` indices) of the capacity nearest to `capacity` bytes;
        ties go to the smaller."""
        return min(allowed, key=lambda i: (abs(self.values[i] - capacity), i))


DEFAULT_GRID = CapacityGrid.span(128 * KIB, 3 * MIB, 64 * KIB)
"""Cocco's shared-buffer range (§5.3): 128 KiB to 3 MiB in 64 KiB steps (47 values)."""


def parse_size(text: str) -> int:
    """'64KiB', '3 MiB', '131072' -> bytes (InputError naming the text otherwise)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _UNITS:
        raise InputError(f"capacities: '{text}' is not a size (e.g. 131072, 128KiB, 3MiB)")
    return int(round(float(m.group(1)) * _UNITS[unit]))


def parse_grid(text: str) -> CapacityGrid:
    """'LOW:HIGH:STEP' (e.g. '128KiB:3MiB:64KiB') or a comma list ('1MiB,2MiB')."""
    if ":" in text:
        parts = text.split(":")
        if len(parts) != 3:
            raise InputError(f"capacities: '{text}' is not LOW:HIGH:STEP")
        return CapacityGrid.span(*(parse_size(p) for p in parts))
    values = sorted({parse_size(p) for p in text.split(",") if p.strip()})
    if not values or values[0] <= 0:
        raise InputError(f"capacities: '{text}' names no capacity > 0")
    return CapacityGrid(tuple(values))


@dataclass(frozen=True)
class ExploreCost:
    """Cocco's Eq. 2: capacity (bytes) + alpha x metric (pJ or bytes)."""

    alpha: float = DEFAULT_ALPHA
    metric: str = "energy"

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise InputError(f"metric: '{self.metric}' is not one of {', '.join(METRICS)}")
        if not self.alpha >= 0:
            raise InputError(f"alpha: must be >= 0, got {self.alpha}")

    def measure(self, ev: Evaluation) -> float:
        """The schedule's metric: energy in pJ or DRAM traffic in bytes."""
        return ev.energy_pj if self.metric == "energy" else float(ev.dram_bytes)

    def objective(self, capacity_bytes: int, metric: float) -> float:
        """Eq. 2 for a capacity (bytes) and a metric value (pJ or bytes)."""
        return capacity_bytes + self.alpha * metric


@dataclass(frozen=True)
class Sample:
    """One evaluated point of the joint space (its partition as repaired to fit)."""

    capacity_index: int
    capacity_bytes: int
    cuts: Cuts
    metric: float
    objective: float


@dataclass(frozen=True)
class TracePoint:
    """The best objective after `evaluations` samples (at `seconds` into the run)."""

    evaluations: int
    seconds: float
    objective: float
    capacity_bytes: int


@dataclass
class CoSpace:
    """Evaluates samples of one workload over a capacity grid, within a budget of
    `max_evaluations` samples (each a partition scored at a capacity, repeats included:
    Cocco's count) and a `deadline`
    (time.perf_counter(); None: none). Keeps the best sample, the best metric per
    capacity, the capacities with no schedule (and why) and the convergence trace."""

    workload: Workload
    hardware: Hardware
    grid: CapacityGrid
    cost: ExploreCost
    max_evaluations: int
    deadline: float | None = None
    started: float = field(default_factory=time.perf_counter)
    on_sample: Callable[[CoSpace], None] | None = None
    """Called after every sample (progress bars)."""
    best: Sample | None = None
    best_metric: dict[int, Sample] = field(default_factory=dict)
    infeasible: dict[int, str] = field(default_factory=dict)
    trace: list[TracePoint] = field(default_factory=list)
    _parts: dict[int, Partitioner] = field(default_factory=dict)
    _cap: int | None = None
    _best_tiles: int = 0
    _unrepairable: set[tuple[int, Cuts]] = field(default_factory=set)
    evaluations: int = 0
    """Samples scored so far."""

    def hardware_at(self, index: int) -> Hardware:
        """The hardware with the grid's index-th capacity (and the energies that follow)."""
        return with_overrides(self.hardware, {"gbuf.capacity_bytes": self.grid.values[index]})

    def partitioner(self, index: int) -> Partitioner | None:
        """The partitioner at capacity `index` (None: no schedule fits there)."""
        if index in self.infeasible:
            return None
        if index not in self._parts:
            try:
                lowerer = Lowerer(self.workload, self.hardware_at(index))
                self._parts[index] = Partitioner(lowerer, OBJECTIVES["energy"])
            except InfeasibleError as err:
                self.infeasible[index] = str(err)
                return None
        return self._parts[index]

    @property
    def lowerings(self) -> int:
        """Distinct schedules lowered and evaluated so far (repairs included), over
        every capacity."""
        return sum(p.evaluations for p in self._parts.values())

    def exhausted(self) -> bool:
        """Whether the budget (or the current `limited` share of it) or the time is up."""
        used = self.evaluations
        if used >= self.max_evaluations or (self._cap is not None and used >= self._cap):
            return True
        return self.deadline is not None and time.perf_counter() >= self._search_end()

    def limited(self, evaluations: int) -> _Share:
        """A context in which at most `evaluations` more samples are scored."""
        return _Share(self, evaluations)

    def sample(self, index: int, cuts: Cuts) -> Sample | None:
        """The partition `cuts` at capacity `index`, repaired to fit and scored (None: no
        schedule there; a capacity where even the unfused partition fails is recorded
        as infeasible)."""
        self.evaluations += 1
        found = self._score(index, cuts)
        if self.on_sample is not None:
            self.on_sample(self)
        return found

    def _score(self, index: int, cuts: Cuts) -> Sample | None:
        part = self.partitioner(index)
        if part is None or (index, cuts) in self._unrepairable:
            return None
        try:
            fitted = part.repair(cuts)
        except InfeasibleError as err:
            self._unrepairable.add((index, cuts))
            if cuts == self.unfused():
                self.infeasible[index] = str(err)
            return None
        ev = part.evaluation(fitted)
        assert ev is not None  # repair returns a partition that fits
        metric = self.cost.measure(ev)
        capacity = self.grid.values[index]
        found = Sample(index, capacity, fitted, metric, self.cost.objective(capacity, metric))
        self._keep(found)
        return found

    def _keep(self, found: Sample) -> None:
        i = found.capacity_index
        if i not in self.best_metric or found.metric < self.best_metric[i].metric:
            self.best_metric[i] = found
        if self.best is None or found.objective < self.best.objective:
            self.best = found
            self._best_tiles = self._parts[i].n_tiles(found.cuts)
            self.trace.append(TracePoint(self.evaluations, time.perf_counter() - self.started,
                                         found.objective, found.capacity_bytes))

    def _search_end(self) -> float:
        """The deadline less the time to deliver the best sample so far."""
        assert self.deadline is not None
        return (self.deadline - RESULT_RESERVE_SECONDS
                - RESULT_SECONDS_PER_TILE * self._best_tiles)

    def unfused(self) -> Cuts:
        """The partition with every layer its own group."""
        return tuple(range(1, len(self.workload.layers)))


class _Share:
    """`CoSpace.limited`: caps the evaluations within a `with` block."""

    def __init__(self, space: CoSpace, evaluations: int) -> None:
        self.space, self.evaluations = space, evaluations

    def __enter__(self) -> CoSpace:
        self.outer = self.space._cap
        cap = self.space.evaluations + self.evaluations
        self.space._cap = cap if self.outer is None else min(cap, self.outer)
        return self.space

    def __exit__(self, *exc: object) -> None:
        self.space._cap = self.outer
