"""Starting schedules, default (double-buffered) DLSA:
- the unfused baseline: every layer its own FLG and LG, each layer's tiling number
  doubled from 1 until the schedule fits the buffer (or a lower limit, for SoMa's buffer
  allocator), within MAX_TILES tiles;
- the single-FLG start: the whole computing order one FLG (so one LG), at the
  power-of-two tiling number that scores best and fits."""

from __future__ import annotations

import time

from mipsched.core import (
    Candidate,
    InfeasibleError,
    MethodResult,
    Objective,
    SearchOptions,
    evaluate_lfa,
)
from mipsched.evaluate import buffer_profile, evaluate
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa, ScheduleError
from mipsched.schedule.tile_program import TensorKind
from mipsched.schedule.tiling import MAX_TILES, choose_grid
from mipsched.schedule.validity import overflow_message


def unfused_baseline(lowerer: Lowerer, options: SearchOptions | None = None,
                     buffer_limit: int | None = None) -> MethodResult:
    """The baseline whose peak fits `buffer_limit` bytes (default: the buffer). Raises
    InfeasibleError naming the layer and the bytes when no tiling fits (deterministic:
    `options` are accepted for a uniform method signature)."""
    wl = lowerer.workload
    order = tuple(wl.layers)
    tiling = [1] * len(order)
    index = {n: k for k, n in enumerate(order)}
    cuts = tuple(range(1, len(order)))
    evaluations = 0
    limit = lowerer.hw.gbuf.capacity_bytes if buffer_limit is None else buffer_limit
    while True:
        lfa = Lfa(order, cuts, tuple(tiling), cuts)
        program = lowerer.lower(lfa)
        dlsa = default_dlsa(program)
        ev = evaluate(program, dlsa)
        evaluations += 1
        occupancy = buffer_profile(program, dlsa)  # index tile + 1
        over = [k - 1 for k, b in enumerate(occupancy) if b > limit]
        if not over:
            return MethodResult(Candidate(lfa, program, dlsa, ev), evaluations=evaluations)
        t = over[0]
        live: dict[str, int] = {}  # bytes that finer tiling can shrink, per layer
        for tn, (s, e) in zip(program.tensors, dlsa.living, strict=True):
            if s <= t < e and tn.kind != TensorKind.LOAD_WEIGHT:
                live[tn.layer] = live.get(tn.layer, 0) + tn.bytes
        for name in sorted(live, key=live.__getitem__, reverse=True):
            k = index[name]
            finer = tiling[k] * 2
            if sum(tiling) + tiling[k] > MAX_TILES:  # the program would pass the cap
                continue
            try:
                choose_grid(wl, (name,), finer)
            except ScheduleError:
                continue
            tiling[k] = finer
            break
        else:
            if limit < lowerer.hw.gbuf.capacity_bytes:
                raise InfeasibleError(f"no unfused tiling fits {limit:,} bytes")
            message = overflow_message(program, dlsa, occupancy)
            raise InfeasibleError(f"no unfused tiling fits: {message}")


#: The largest tiling number the single-FLG start tries: each doubling doubles the tiles
#: to lower (gpt2_small_prefill/edge/b16 fits first at 128, lowered in 0.6 s; at 256 it
#: takes 4.5 s), and no finer single FLG was the best start in the Fig. 6 set.
SINGLE_FLG_MAX_TILING = 128


def single_flg_start(lowerer: Lowerer, objective: Objective, order: tuple[str, ...],
                     buffer_limit: int | None = None, deadline: float | None = None
                     ) -> Candidate | None:
    """The whole of `order` as one FLG at the power-of-two tiling number (1, 2, 4, ...,
    up to SINGLE_FLG_MAX_TILING, while the FLG can be tiled that finely and the
    time.perf_counter() `deadline` has not passed; tiling 1 is tried even past it, one
    lowering that a run whose start-up used up its time still gets) whose double-buffered
    schedule fits `buffer_limit` bytes (default: the buffer) and has the least
    `objective` cost; None when none fits. Every weight is then loaded once and every
    fmap stays on chip between its producer and its consumers; at tiling 1 that is
    layer by layer with no DRAM traffic for fmaps, at tiling = batch one sample at a time
    through the whole net (randwire_ws_small/edge/b16: 4.5 M cycles against the unfused
    start's 29 M)."""
    best: Candidate | None = None
    tiling = 1
    while tiling <= SINGLE_FLG_MAX_TILING and (tiling == 1 or deadline is None
                                              or time.perf_counter() < deadline):
        try:
            choose_grid(lowerer.workload, order, tiling)
        except ScheduleError:
            return best
        candidate = evaluate_lfa(lowerer, Lfa(order, (), (tiling,), ()), buffer_limit)
        if candidate is not None and (best is None or objective.cost(
                candidate.evaluation) < objective.cost(best.evaluation)):
            best = candidate
        tiling *= 2
    return best
