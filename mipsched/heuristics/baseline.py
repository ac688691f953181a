"""The unfused baseline: every layer its own FLG and LG, default (double-buffered) DLSA,
each layer's tiling number doubled from 1 until the schedule fits the buffer."""

from __future__ import annotations

from dataclasses import dataclass

from mipsched.errors import InputError
from mipsched.evaluate import Evaluation, buffer_profile, evaluate
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Dlsa, Lfa, ScheduleError
from mipsched.schedule.tile_program import TensorKind, TileProgram
from mipsched.schedule.tiling import choose_grid
from mipsched.schedule.validity import overflow_message


class InfeasibleError(InputError):
    """No schedule of the searched kind fits the hardware; the message says why."""


@dataclass(frozen=True)
class Candidate:
    """A complete schedule with its lowering and evaluation."""

    lfa: Lfa
    program: TileProgram
    dlsa: Dlsa
    evaluation: Evaluation


def unfused_baseline(lowerer: Lowerer) -> Candidate:
    """Raises InfeasibleError naming the layer and the bytes when no tiling fits."""
    wl = lowerer.workload
    capacity = lowerer.hw.gbuf.capacity_bytes
    for name in wl.layers:
        if wl.weight_bytes(name) > capacity:
            raise InfeasibleError(
                f"layer '{name}' needs its {wl.weight_bytes(name):,} B of weights on chip at "
                f"once (weights are never tiled), more than the {capacity:,} B buffer")
    order = tuple(wl.layers)
    tiling = [1] * len(order)
    index = {n: k for k, n in enumerate(order)}
    cuts = tuple(range(1, len(order)))
    while True:
        lfa = Lfa(order, cuts, tuple(tiling), cuts)
        program = lowerer.lower(lfa)
        dlsa = default_dlsa(program)
        ev = evaluate(program, dlsa)
        if ev.fits:
            return Candidate(lfa, program, dlsa, ev)
        t = ev.overflow.tile
        live: dict[str, int] = {}  # bytes that finer tiling can shrink, per layer
        for tn, (s, e) in zip(program.tensors, dlsa.living, strict=True):
            if s <= t < e and tn.kind != TensorKind.LOAD_WEIGHT:
                live[tn.layer] = live.get(tn.layer, 0) + tn.bytes
        for name in sorted(live, key=live.__getitem__, reverse=True):
            k = index[name]
            finer = tiling[k] * 2
            try:
                choose_grid(wl, (name,), finer)
            except ScheduleError:
                continue
            tiling[k] = finer
            break
        else:
            message = overflow_message(program, dlsa, buffer_profile(program, dlsa))
            raise InfeasibleError(f"no unfused tiling fits: {message}")
