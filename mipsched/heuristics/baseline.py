"""The unfused baseline: every layer its own FLG and LG, default (double-buffered) DLSA,
each layer's tiling number doubled from 1 until the schedule fits the buffer (or a lower
limit, for SoMa's buffer allocator)."""

from __future__ import annotations

from mipsched.evaluate import buffer_profile, evaluate
from mipsched.heuristics.common import Candidate, InfeasibleError, MethodResult, SearchOptions
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa, ScheduleError
from mipsched.schedule.tile_program import TensorKind
from mipsched.schedule.tiling import choose_grid
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
