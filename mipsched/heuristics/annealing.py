"""SoMa's simulated-annealing schedule (§V-C).

Temperature T_n = T0 · (1 − x) / (1 + α·x) at progress x = n/N over N iterations; a worse
candidate is accepted with probability exp(−Δ / T_n), where Δ = (c' − c) / c is the
*relative* cost change (so one temperature suits networks whose costs differ by orders of
magnitude). Under a deadline, x is the larger of n/N and the share of the time used, so a
run that the time limit cuts short still cools down instead of stopping while hot.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Cooling:
    """T0: initial temperature (a relative worsening of T0·ln 2 is accepted half the time at
    the start); alpha: cooling rate."""

    t0: float = 0.05
    alpha: float = 5.0

    def temperature(self, progress: float) -> float:
        """T at progress x in [0, 1]."""
        x = min(progress, 1.0)
        return self.t0 * (1.0 - x) / (1.0 + self.alpha * x)

    def accept(self, cost: float, new_cost: float, progress: float,
               rng: random.Random) -> bool:
        """Always accept an improvement; a worse candidate with exp(−Δ/T)."""
        if new_cost <= cost:
            return True
        temp = self.temperature(progress)
        if temp <= 0.0 or cost <= 0.0:
            return False
        return rng.random() < math.exp(-(new_cost - cost) / cost / temp)


@dataclass(frozen=True)
class Progress:
    """How far an annealing run of `total` iterations is, in [0, 1], when it must also end
    by `deadline` (time.perf_counter seconds; None: no deadline)."""

    total: int
    deadline: float | None
    begin: float = field(default_factory=time.perf_counter)

    def at(self, n: int) -> float:
        """Progress after n iterations: n/N, or the share of the time used if larger."""
        x = n / self.total if self.total else 1.0
        if self.deadline is None:
            return x
        span = self.deadline - self.begin
        used = (time.perf_counter() - self.begin) / span if span > 0 else 1.0
        return max(x, used)
