"""Where a schedule's latency lies above the compute bound (cycles), read from its
replay: what tells a user which part of a certified gap is left on the table, and where.

The simulator counts as stalled every cycle in which no tile computes, so a schedule's
latency is the sum of its tiles' compute cycles plus its stall cycles. The compute bound
charges each layer the least cycles any schedule spends on it (bounds.layer_compute_cycles,
raised by the box rates), so

    latency - compute bound = sum over layers of (its tiles' cycles - its charge)
                              + stall cycles,

each layer's term at least 0 whatever the schedule (the charge is a lower bound on that
layer alone). The stalls split into the waits before tiles, each for the DRAM transfer
that came last, and the tail: the stores still running after the last tile. Where the
binding bound is above the compute bound, that much of the split is proven unavoidable;
what is left on the table is the latency less the binding bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from mipsched.formulations.bounds import LatencyBound
from mipsched.sim import SimResult
from mipsched.sim.result import TransferRecord

#: Layers and waits a split lists, largest first (its totals count them all).
KEEP = 8


@dataclass(frozen=True)
class LayerExcess:
    """One layer's compute above the bound's charge for it (cycles)."""

    layer: str
    computed: int
    """Its tiles' compute cycles in the schedule."""
    charged: Fraction
    """What the compute bound charges it."""

    @property
    def excess(self) -> int:
        """computed - charged, rounded down (cycles)."""
        return math.floor(self.computed - self.charged)


@dataclass(frozen=True)
class Wait:
    """A tile that waited for DRAM (cycles)."""

    layer: str
    tile: int
    cycles: int
    transfer: str
    """The transfer that finished last, e.g. 'load_ifmap norm1 tile 0 (1,572,864 B)'."""


@dataclass(frozen=True)
class GapSplit:
    """latency = compute_bound + compute_above + stall (cycles), with the layers and waits
    that contribute most."""

    latency_cycles: int
    bound_cycles: int
    """The binding latency bound."""
    binding: str
    compute_bound_cycles: int
    """The per-layer charges summed and rounded up."""
    compute_above_cycles: int
    stall_cycles: int
    tail_cycles: int
    """Of the stalls, those after the last tile ends (stores still running)."""
    layers: tuple[LayerExcess, ...]
    """The KEEP layers with the largest excess above 0, largest first."""
    waits: tuple[Wait, ...]
    """The KEEP longest waits, longest first."""

    @property
    def proven_cycles(self) -> int:
        """How much of the split the binding bound proves: its excess over the compute
        bound (cycles; 0 where the compute bound binds)."""
        return max(self.bound_cycles - self.compute_bound_cycles, 0)

    def to_json(self) -> dict[str, object]:
        """The certificate's `gap_split`."""
        return {
            "latency_cycles": self.latency_cycles,
            "bound_cycles": self.bound_cycles,
            "binding": self.binding,
            "compute_bound_cycles": self.compute_bound_cycles,
            "compute_above_bound_cycles": self.compute_above_cycles,
            "stall_cycles": self.stall_cycles,
            "tail_cycles": self.tail_cycles,
            "layers": [{"layer": x.layer, "computed_cycles": x.computed,
                        "charged_cycles": float(x.charged), "excess_cycles": x.excess}
                       for x in self.layers],
            "waits": [{"layer": w.layer, "tile": w.tile, "cycles": w.cycles,
                       "waited_for": w.transfer} for w in self.waits],
        }


def gap_split(replay: SimResult, bound: LatencyBound) -> GapSplit | None:
    """The split of `replay` (the simulator's run of a schedule) against `bound`'s
    per-layer compute charges (None when it has none)."""
    if bound.compute_by_layer is None:
        return None
    charges = bound.compute_by_layer
    computed: dict[str, int] = {}
    for t in replay.tiles:
        computed[t.layer] = computed.get(t.layer, 0) + t.end - t.start
    compute = sum(computed.values())
    least = math.ceil(sum(charges.values(), Fraction(0)))
    excess = sorted((LayerExcess(name, computed.get(name, 0), charge)
                     for name, charge in charges.items()),
                    key=lambda x: (-(x.computed - x.charged), x.layer))
    transfers = {r.tensor: r for r in replay.transfers}
    stalls = replay.stalls
    waits = sorted(stalls, key=lambda t: (-t.stall, t.pos))[:KEEP]
    waited = sum(t.stall for t in stalls)
    return GapSplit(
        latency_cycles=replay.latency_cycles,
        bound_cycles=bound.cycles,
        binding=bound.binding,
        compute_bound_cycles=least,
        compute_above_cycles=compute - least,
        stall_cycles=replay.latency_cycles - compute,
        tail_cycles=replay.latency_cycles - compute - waited,
        layers=tuple(x for x in excess[:KEEP] if x.excess > 0),
        waits=tuple(Wait(t.layer, t.tile, t.stall, _transfer(transfers.get(t.waited_for)))
                    for t in waits))


def _transfer(record: TransferRecord | None) -> str:
    """A transfer record in words ('' when there is none)."""
    if record is None:
        return ""
    tile = "" if record.tile is None else f" tile {record.tile}"
    return f"{record.kind} {record.layer}{tile} ({record.bytes:,} B)"
