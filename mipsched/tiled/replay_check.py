"""The simulator's verdict on the cost model: a tree's discrete-event replay
(`mipsched.tiled.simulate`) against its analytic evaluation (`mipsched.tiled.evaluate`).
Every tree `solve` and `compare` return on a tiled machine passes it."""

from __future__ import annotations

from mipsched.hw.tiled import TiledHardware
from mipsched.tiled.evaluate import Evaluation
from mipsched.tiled.ratree import RaTree
from mipsched.tiled.simulate import TiledSimulationError, TiledTrace, simulate_tree
from mipsched.workload.graph import Workload


def replay_disagreement(ev: Evaluation, trace: TiledTrace) -> str | None:
    """Why the replay `trace` does not confirm the cost model's `ev` — its latency
    (cycles) differs, or its energy (pJ) by more than 1e-9 relative — or None."""
    if trace.latency != ev.latency:
        return (f"the replay takes {trace.latency:,} cycles, the cost model says "
                f"{ev.latency:,}")
    if abs(trace.energy_pj - ev.energy_pj) > 1e-9 * abs(ev.energy_pj):
        return (f"the replay's energy is {trace.energy_pj!r} pJ, the cost model's "
                f"{ev.energy_pj!r} pJ")
    return None


def checked_replay(hw: TiledHardware, workload: Workload, tree: RaTree, ev: Evaluation,
                   cache: dict) -> tuple[TiledTrace | None, str | None]:
    """The discrete-event replay of `tree` (`simulate_tree`, leaf searches memoised in
    `cache`) and its verdict against the cost model's `ev`: None when it agrees, else
    the diagnosis. The replay is None when it broke one of its rules or rejected the
    tree."""
    try:
        trace = simulate_tree(hw, workload, tree, cache=cache)
    except TiledSimulationError as err:
        return None, f"the replay broke its '{err.kind}' rule: {err}"
    if trace is None:
        return None, "the replay rejects the tree, which the cost model accepts"
    return trace, replay_disagreement(ev, trace)
