"""The rival of a local optimum: a tiling the descent passes over because the greedy
prefetching DLSA times it slower, though it computes less.

The descent judges every LFA under the greedy prefetching DLSA. A tiling whose tiles
read across more samples can stall there while the DLSA model hides the loads:
ResNet-50 / edge / b16's split descends to stage 3's end at 52 tiles (4 samples per
tile, 8,624,836 cycles greedy); at 78 tiles (8 samples in 3 x 13 parts) the FLG computes
10,368 cycles less and times 8,667,508 greedy, but the DLSA model takes it to 8,580,276
in 10 s and 8,575,236 in 20 s, against 8,585,604 and 8,585,604 for the 52 tiles.
"""

from __future__ import annotations

from mipsched.core import Candidate
from mipsched.evaluate import evaluate
from mipsched.formulations.lfa.relaxation import certified_over_powers_of_two
from mipsched.heuristics.lfa_moves import with_tiling
from mipsched.heuristics.lfa_neighbours import ratio_tilings
from mipsched.heuristics.prefetch_anneal import prefetched
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa, ScheduleError

#: A rival's tiling number is T x a / b (whole) for a != b in these.
RATIO_TERMS = range(1, 9)
SLACK = 0.01
"""Most a rival's greedy latency may exceed the incumbent's, relative (ResNet-50 / edge /
b16: 0.49 %)."""
MIN_SAVING = 0.001
"""Least compute a rival must save, relative to the incumbent's (ResNet-50 / edge / b16:
0.12 %): the many changes that save a few cycles are not worth a DLSA model."""


def flg_compute_cycles(lowerer: Lowerer, layers: tuple[str, ...], tiling: int) -> int:
    """Tile cycles of an FLG of `layers` at `tiling` tiles (ScheduleError when that
    tiling does not divide its work)."""
    plan = lowerer.plan(layers, tiling, remember=False)
    return sum(c.cycles for n in layers for c in plan.costs[n] if c is not None)


def compute_saving_tilings(lowerer: Lowerer, lfa: Lfa) -> list[tuple[int, Lfa]]:
    """(cycles saved, LFA) of every change of one FLG's tiling number T to T x a / b that
    makes the FLG compute less, most saved first; on nets whose certificates rest on
    power-of-two tiling numbers (certified_over_powers_of_two) only to powers of two, so
    that the rival stays in the bounds' space as every search there does."""
    powers = certified_over_powers_of_two(lowerer.workload)
    found = []
    for g, ((a, b), tiling) in enumerate(zip(lfa.flg_bounds(), lfa.tiling, strict=True)):
        layers = lfa.order[a:b]
        try:
            own = flg_compute_cycles(lowerer, layers, tiling)
        except ScheduleError:
            continue
        for new in sorted(ratio_tilings(tiling, RATIO_TERMS)):
            if powers and new & (new - 1):
                continue
            try:
                cycles = flg_compute_cycles(lowerer, layers, new)
            except ScheduleError:
                continue
            if cycles < own:
                found.append((own - cycles, with_tiling(lfa, g, new)))
    return sorted(found, key=lambda x: -x[0])


def rival(lowerer: Lowerer, incumbent: Candidate) -> Candidate | None:
    """Among the compute-saving tilings of `incumbent`'s LFA that save at least
    MIN_SAVING of its compute, the one of least greedy latency, with its greedy DLSA, if
    that is within SLACK of the incumbent LFA's own greedy latency; else None."""
    own = prefetched(lowerer, incumbent.lfa)
    if own is None:
        return None
    least = MIN_SAVING * incumbent.program.compute_cycles
    best: tuple[int, Candidate] | None = None
    for saved, lfa in compute_saving_tilings(lowerer, incumbent.lfa):
        if saved < least:
            break
        found = prefetched(lowerer, lfa)
        if found is not None and (best is None or found[2] < best[0]):
            program, dlsa, cycles = found
            best = (cycles, Candidate(lfa, program, dlsa, evaluate(program, dlsa)))
    if best is None or best[0] > (1 + SLACK) * own[2]:
        return None
    return best[1]
