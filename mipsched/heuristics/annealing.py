"""SoMa's simulated-annealing schedule (§V-C).

Temperature T_n = T0 · (1 − n/N) / (1 + α·n/N) over N iterations; a worse candidate is
accepted with probability exp(−Δ / T_n), where Δ = (c' − c) / c is the *relative* cost
change (so one temperature suits networks whose costs differ by orders of magnitude).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Cooling:
    """T0: initial temperature (a relative worsening of T0·ln 2 is accepted half the time at
    the start); alpha: cooling rate."""

    t0: float = 0.05
    alpha: float = 5.0

    def temperature(self, n: int, total: int) -> float:
        x = n / total if total else 1.0
        return self.t0 * (1.0 - x) / (1.0 + self.alpha * x)

    def accept(self, cost: float, new_cost: float, n: int, total: int,
               rng: random.Random) -> bool:
        """Always accept an improvement; a worse candidate with exp(−Δ/T_n)."""
        if new_cost <= cost:
            return True
        temp = self.temperature(n, total)
        if temp <= 0.0 or cost <= 0.0:
            return False
        return rng.random() < math.exp(-(new_cost - cost) / cost / temp)
