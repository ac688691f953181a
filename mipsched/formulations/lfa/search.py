"""The LFA search (DESIGN §3-4): `solve_lfa` builds the segment model of one computing
order, optionally with only a window of it free, and solves it in rounds.

The model's buffer rows only relax the fit, so the fit is enforced lazily: a decoded LFA
that does not fit under the default DLSA gets no-good cuts (one per overflowing LG, see
`_no_goods`) and the model is solved again. A returned LFA always lowers and fits; with
status "optimal" it is the best fitting LFA over the candidate segments.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from mipsched.core import Candidate, lower_and_fit, seconds_left
from mipsched.evaluate import buffer_profile
from mipsched.formulations.lfa.model import GROUPS, MODEL_OBJECTIVES, Groups, SegmentModel
from mipsched.formulations.lfa.segments import (
    SegmentKey,
    SegmentTable,
    Tally,
    flg_keys,
    unfused_tally,
)
from mipsched.formulations.solver import Solution, SolveStatus, solve
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa, ScheduleError
from mipsched.schedule.tile_program import TileProgram
from mipsched.schedule.validity import check_lfa

if TYPE_CHECKING:
    from mipsched.formulations.solver import IntVar

#: The tiling numbers of the candidate segments, by default.
TILINGS = (1, 2, 4, 8, 16, 32, 64)

@dataclasses.dataclass(frozen=True)
class LfaSolution:
    """The best LFA found (None when nothing that fits was found) and how."""

    lfa: Lfa | None
    candidate: Candidate | None
    """`lfa` lowered and evaluated with the default DLSA (it fits the buffer)."""
    model_ideal: int | None
    """The model's ideal of `lfa` (cycles): max(compute cycles, DRAM cycles), equal to
    its tile program's ideal."""
    model_dram_bytes: int | None
    model_compute_cycles: int | None
    status: SolveStatus | None
    """The CP-SAT run that settled the objective (None when none ran; "unknown" when the
    rounds or the time ran out before a decoded LFA fitted). "optimal": `lfa` is the
    best fitting LFA over the candidates (with "ideal", ties are then broken by a second
    run, not reflected here)."""
    rounds: int
    """No-good rounds: how many times decoded LFAs that did not fit were cut off and the
    model solved again."""
    improved: bool
    """Whether the model's LFA beats the incumbent (False: `lfa` is the incumbent)."""
    window: tuple[int, int]
    """Positions [start, stop) of the order the model was free to change."""
    segments: int
    """Number of candidate segments in the model."""


def solve_lfa(lowerer: Lowerer, order: tuple[str, ...] | None = None,
              incumbent: Lfa | None = None, objective: str = "ideal",
              window: tuple[int, int] | None = None, time_limit: float | None = None,
              workers: int | None = None, seed: int = 0, max_segment: int = 12,
              tilings: tuple[int, ...] = TILINGS, max_rounds: int = 200,
              groups: Groups = GROUPS, stop: threading.Event | None = None,
              target: int | None = None) -> LfaSolution:
    """The best LFA of `order` (default: the incumbent's order, else the workload's layer
    order) for `objective` ("ideal": max(compute cycles, DRAM cycles), as in its tile
    program; "energy": tile energy + DRAM energy (pJ); "edp": ideal x E_ref / D_ref +
    energy, the first-order expansion of E x D around the incumbent (or the unfused LFA)).
    FLGs are drawn from segments of at most `max_segment` layers with a tiling number
    in `tilings`, plus the incumbent's FLGs. With `window` = (start, stop) (widened to
    the incumbent's FLG boundaries; needs an incumbent) only FLCs, DRAM cuts and tilings
    strictly inside it change. `time_limit` (seconds) bounds the whole call, including
    the precomputation and building the model (when that alone takes it, the incumbent
    is returned with status None); each CP-SAT run gets what is left. With `target`
    (cycles), the search ends at the first LFA whose schedule under the default DLSA has
    at most that latency. Never worse than the incumbent (returned when the model does
    not beat it under `objective`). The returned LFA lowers and fits the buffer under
    the default DLSA."""
    started = time.perf_counter()
    order = _checked_order(lowerer, order, incumbent, objective)
    w0, w1 = _free_window(order, incumbent, window)
    keys = [(i, j, t) for i in range(w0, w1) for j in range(i + 1, min(w1, i + max_segment)
                                                            + 1) for t in tilings]
    inc_candidate = inc_program = None
    if incumbent is not None:
        inc_program = lowerer.lower(incumbent)  # raises ScheduleError naming what is wrong
        inc_candidate = lower_and_fit(lowerer, incumbent, check=True)[0]
        keys += flg_keys(incumbent)
    deadline = None if time_limit is None else started + time_limit
    try:
        model, inc_tally = _built_model(lowerer, order, keys, deadline, objective, (w0, w1),
                                        incumbent, groups)
    except TimeoutError:  # the incumbent, with its program's figures (= the model's)
        figures = ((None,) * 3 if inc_program is None else
                   (inc_program.ideal_cycles, inc_program.dram_bytes,
                    inc_program.compute_cycles))
        return LfaSolution(incumbent, inc_candidate, *figures, None, 0, improved=False,
                           window=(w0, w1), segments=0)
    status, found, rounds = _search(model, deadline, max_rounds, workers, seed, stop, target)
    common = {"status": status, "rounds": rounds, "window": (w0, w1),
              "segments": len(model.table.segments)}
    if inc_candidate is not None and inc_tally is not None and (
            found is None or found.rank >= model.rank(incumbent)):
        return LfaSolution(incumbent, inc_candidate, inc_tally.ideal,
                           inc_tally.dram_bytes, inc_tally.compute_cycles, improved=False,
                           **common)
    if found is None:
        return LfaSolution(None, None, None, None, None, improved=False, **common)
    return LfaSolution(found.lfa, found.candidate, found.ideal, found.dram_bytes,
                       found.compute_cycles, improved=incumbent is not None, **common)


def _checked_order(lowerer: Lowerer, order: tuple[str, ...] | None, incumbent: Lfa | None,
                   objective: str) -> tuple[str, ...]:
    """The order solve_lfa models (see there); raises ValueError for an unknown
    objective, ScheduleError for an incumbent of another order or an order that is no
    topological order of every layer."""
    if objective not in MODEL_OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(MODEL_OBJECTIVES)}, "
                         f"got {objective!r}")
    wl = lowerer.workload
    if order is None:
        order = incumbent.order if incumbent is not None else tuple(wl.layers)
    order = tuple(order)
    if incumbent is not None and incumbent.order != order:
        raise ScheduleError("the incumbent LFA has another computing order than the model")
    check_lfa(wl, Lfa.unfused(order))  # the order is a topological order of all layers
    return order


def _free_window(order: tuple[str, ...], incumbent: Lfa | None,
                 window: tuple[int, int] | None) -> tuple[int, int]:
    """The positions [start, stop) the model may change: all without `window`, else
    `window` widened to the incumbent's FLG boundaries."""
    n = len(order)
    if window is None:
        return 0, n
    if incumbent is None:
        raise ScheduleError("an LFA window needs an incumbent to fix the rest")
    starts = [a for a, _ in incumbent.flg_bounds()] + [n]
    w0 = max(a for a in starts if a <= max(window[0], 0))
    w1 = min(a for a in starts if a >= min(window[1], n))
    if w1 <= w0:
        raise ScheduleError(f"LFA window {window} is empty")
    return w0, w1


def _built_model(lowerer: Lowerer, order: tuple[str, ...], keys: list[SegmentKey],
                 deadline: float | None, objective: str, free: tuple[int, int],
                 incumbent: Lfa | None, groups: Groups
                 ) -> tuple[SegmentModel, Tally | None]:
    """The model of `order` over the segments `keys`, positions outside `free` pinned to
    the incumbent's and hinted with it, and the incumbent's tally. Raises TimeoutError
    when building it passes `deadline` (time.perf_counter())."""
    table = SegmentTable(lowerer, order, keys, deadline)
    inc_tally = None if incumbent is None else table.tally(incumbent)
    reference = inc_tally or unfused_tally(table)
    model = SegmentModel(table, objective, *free, incumbent, reference, groups)
    if incumbent is not None:
        model.hint(incumbent)
    if deadline is not None and time.perf_counter() > deadline:
        raise TimeoutError("the LFA model was not built in time")
    return model, inc_tally


@dataclasses.dataclass(frozen=True)
class _Found:
    """A decoded LFA that fits, with the model's figures for it."""

    lfa: Lfa
    candidate: Candidate
    ideal: int
    dram_bytes: int
    compute_cycles: int
    rank: tuple[int, int]
    """(objective, tie-break) in model units: smaller is better."""


def _search(model: SegmentModel, deadline: float | None, max_rounds: int,
            workers: int | None, seed: int, stop: threading.Event | None,
            target: int | None) -> tuple[SolveStatus | None, _Found | None, int]:
    """Solves the model until a decoded LFA fits (at most `max_rounds` rounds of no-good
    cuts in all), then for the "ideal" objective at its optimum once more to break ties.
    Returns the status of the run that settled the objective, the LFA found and the
    rounds of cuts added."""
    status, found, runs, rounds = _rounds(model, deadline, max_rounds + 1, workers, seed,
                                          stop, target)
    if found is None and status is not None and status.has_solution:
        status = dataclasses.replace(status, status="unknown")  # out of rounds or time
    reached = found is not None and target is not None and \
        found.candidate.evaluation.latency_cycles <= target
    if found is not None and model.objective == "ideal" and status is not None \
            and status.status == "optimal" and not reached:
        model.tie_break(found.lfa, found.ideal)
        _, better, _, more_rounds = _rounds(model, deadline, max_rounds + 1 - runs, workers,
                                            seed, stop)
        rounds += more_rounds
        if better is not None and better.rank < found.rank:
            found = better
    return status, found, rounds


def _rounds(model: SegmentModel, deadline: float | None, runs: int, workers: int | None,
            seed: int, stop: threading.Event | None = None, target: int | None = None
            ) -> tuple[SolveStatus | None, _Found | None, int, int]:
    """Solves the model until a decoded LFA fits, adding no-good cuts for those that
    do not, in at most `runs` CP-SAT runs (each ends early at an LFA whose default-DLSA
    latency is at most `target` cycles). Returns the last status, the LFA found, the
    runs made and the rounds of cuts added."""
    lowerer = model.table.lowerer
    status = None
    done = rounds = 0
    good_enough = None if target is None else _reaches(model, target)
    while done < runs:
        left = seconds_left(deadline)
        if left is not None and left <= 0:
            break
        done += 1
        status, solution = solve(model.model, left, workers, seed, stop, good_enough)
        if not status.has_solution:
            break
        lfa, keys = model.decode(solution)
        candidate, program = lower_and_fit(lowerer, lfa, check=True)
        if candidate is not None:
            rank = (solution.value(model.cost),
                    solution.value(model.tie) if model.objective == "ideal" else 0)
            dram = solution.value(model.dram_bytes)
            compute = solution.value(model.compute_cycles)
            ideal = max(compute, solution.value(model.dram_cycles))
            return status, _Found(lfa, candidate, ideal, dram, compute, rank), done, rounds
        if status.interrupted:
            break
        rounds += 1
        for clause in _no_goods(model, lfa, keys, program):
            model.exclude(clause)
    return status, None, done, rounds


def _reaches(model: SegmentModel, target: int) -> Callable[[Solution], bool]:
    """Whether a solution's LFA fits and has at most `target` cycles of latency under
    the default DLSA (its model ideal, a lower bound on that latency, is checked
    first)."""
    def accept(solution: Solution) -> bool:
        ideal = max(solution.value(model.compute_cycles), solution.value(model.dram_cycles))
        if ideal > target:
            return False
        candidate = lower_and_fit(model.table.lowerer, model.decode(solution)[0], check=True)[0]
        return candidate is not None and candidate.evaluation.latency_cycles <= target

    return accept


def _no_goods(model: SegmentModel, lfa: Lfa, keys: list[SegmentKey],
              program: TileProgram | None) -> list[list[IntVar]]:
    """No-good clauses for an LFA that does not fit under the default DLSA. The default
    DLSA's occupancy at a tile depends only on the tile's LG (its FLGs, tilings and that
    it is delimited by DRAM cuts) and, at the LG's last tile, on the next FLG (prefetch of
    its first tile's loads and first weight); so each overflowing LG excludes every LFA
    containing that same LG (and next FLG). Without a program (the LFA did not lower),
    the exact set of segments and cuts is excluded."""
    n = len(lfa.order)
    x, d = model.chosen, model.dram_cut
    if program is None:
        return [[x[k].negated() for k in keys] + [d[k].negated() for k in lfa.dram_cuts]
                + [d[k] for k in lfa.flc if k not in lfa.dram_cuts]]
    occupancy = buffer_profile(program, default_dlsa(program))
    cap = program.buffer_capacity_bytes
    lg_bounds = lfa.lg_bounds()
    tiles = program.tiles
    clauses = {}
    for k, used in enumerate(occupancy):
        if used <= cap:
            continue
        p = max(k - 1, 0)
        g = tiles[p].lg
        a, b = lg_bounds[g]
        lits = [x[key].negated() for key in keys if a <= key[0] < b]
        lits += [d[c] for c in lfa.flc if a < c < b]
        lits += [d[c].negated() for c in (a, b) if 0 < c < n]
        if k >= 1 and b < n and (p + 1 == len(tiles) or tiles[p + 1].lg != g):
            lits += [x[key].negated() for key in keys if key[0] == b]
        clauses[(a, b, len(lits))] = lits
    return list(clauses.values())
