"""The CP-SAT LFA model (mipsched.formulations.lfa): its DRAM bytes and compute cycles are
those of the lowered tile program, its buffer rows are lower bounds of the default
DLSA's occupancy, its optimum equals brute force over every LFA of a fixed order, it
keeps good hints, and windows leave the rest of the LFA alone."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import random
from collections.abc import Iterator

import pytest

from mipsched.dlsa_starts import tight_dlsa
from mipsched.evaluate import buffer_profile, evaluate
from mipsched.formulations.lfa import (
    GROUPS,
    BufferRow,
    LfaSolution,
    SegmentModel,
    SegmentTable,
    flg_keys,
    solve_lfa,
)
from mipsched.formulations.lfa.model import Groups
from mipsched.formulations.solver import solve
from mipsched.hw.load import load_hardware
from mipsched.hw.model import Hardware
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa, ScheduleError
from mipsched.workload import zoo
from mipsched.workload.graph import Workload
from mipsched.workload.zoo.random_dags import random_dag

EDGE = load_hardware("edge")
SMALL = (1, 2, 4)


def _net(name: str) -> Workload:
    if name.startswith("dag"):
        seed, layers = (int(x) for x in name[3:].split("_"))
        return random_dag(seed, layers)
    return zoo.get(name)


def _with_capacity(cap: int) -> Hardware:
    return dataclasses.replace(EDGE, gbuf=dataclasses.replace(EDGE.gbuf, capacity_bytes=cap))


def _all_lfas(order: tuple[str, ...], tilings: tuple[int, ...]) -> Iterator[Lfa]:
    n = len(order)
    for r in range(n):
        for flc in itertools.combinations(range(1, n), r):
            for m in range(len(flc) + 1):
                for cuts in itertools.combinations(flc, m):
                    for tiling in itertools.product(tilings, repeat=len(flc) + 1):
                        yield Lfa(order, flc, tiling, cuts)


@functools.cache
def _brute(name: str, tilings: tuple[int, ...] = SMALL) -> list[tuple[Lfa, int, int, int, float]]:
    """Every LFA of the layer order that lowers: (lfa, ideal, tie-break, default-DLSA
    peak buffer, energy)."""
    wl = _net(name)
    lowerer = Lowerer(wl, EDGE)
    rows = []
    for lfa in _all_lfas(tuple(wl.layers), tilings):
        try:
            program = lowerer.lower(lfa, check=False)
        except ScheduleError:
            continue
        ev = evaluate(program, default_dlsa(program), check=False)
        tie = program.compute_cycles * program.dram_bytes_per_cycle + program.dram_bytes
        rows.append((lfa, program.ideal_cycles, tie, ev.peak_buffer_bytes, program.energy_pj))
    return rows


def _capacities(name: str) -> list[int]:
    """Tight buffers: the least peak of any LFA, and a few low quantiles."""
    peaks = sorted(row[3] for row in _brute(name))
    return sorted({peaks[int(q * (len(peaks) - 1))] for q in (0.0, 0.03, 0.15, 0.5)})


def _check_exact(lowerer: Lowerer, result: LfaSolution) -> None:
    """The result lowers (checked), fits, and the model's figures are the program's."""
    program = lowerer.lower(result.lfa)
    ev = evaluate(program, default_dlsa(program))
    assert ev.fits
    assert result.candidate.evaluation.latency_cycles == ev.latency_cycles
    assert result.model_dram_bytes == program.dram_bytes
    assert result.model_compute_cycles == program.compute_cycles
    assert result.model_ideal == program.ideal_cycles


NETS = ["chain3", "chain5", "resblock", "fsrcnn", "dag0_6", "dag1_6", "dag2_5", "dag7_6"]
#: nets whose optimum under a third of the unconstrained optimum's peak has DRAM cuts
CUT_BY_TIGHT_BUFFER = {"chain5", "fsrcnn"}


@pytest.mark.parametrize("name", NETS)
def test_model_figures_equal_the_lowered_program(name: str) -> None:
    wl = _net(name)
    lowerer = Lowerer(wl, EDGE)
    first = solve_lfa(lowerer, workers=1, time_limit=20)
    assert first.status.status == "optimal"
    _check_exact(lowerer, first)
    peak = first.candidate.evaluation.peak_buffer_bytes
    cuts = 0
    for fraction in (2, 3):
        tight = Lowerer(wl, _with_capacity(peak // fraction))
        for objective in ("ideal", "energy", "edp"):
            result = solve_lfa(tight, objective=objective, workers=1, time_limit=20)
            if result.lfa is not None:
                _check_exact(tight, result)
                cuts += len(result.lfa.dram_cuts)
    assert cuts > 0 or name not in CUT_BY_TIGHT_BUFFER


def _random_lfas(name: str, count: int) -> list[tuple[Lowerer, Lfa]]:
    """`count` random LFAs of the layer order of `name` that lower (tilings 1..8)."""
    lowerer = Lowerer(_net(name), EDGE)
    order = tuple(lowerer.workload.layers)
    rng = random.Random(name)
    out: list[tuple[Lowerer, Lfa]] = []
    while len(out) < count:
        flc = tuple(k for k in range(1, len(order)) if rng.random() < 0.5)
        lfa = Lfa(order, flc, tuple(rng.choice((1, 2, 4, 8)) for _ in range(len(flc) + 1)),
                  tuple(k for k in flc if rng.random() < 0.6))
        try:
            lowerer.lower(lfa)
        except ScheduleError:
            continue
        out.append((lowerer, lfa))
    return out


def _pinned(lowerer: Lowerer, lfa: Lfa, objective: str,
            groups: Groups
            ) -> tuple[SegmentModel, SegmentTable, tuple[int, int, int, int]]:
    """The model with only `lfa`'s FLGs as candidates and every DRAM cut fixed (window
    [0, 0)); the model's DRAM bytes, compute cycles, ideal and DRAM cycles at its
    optimum."""
    table = SegmentTable(lowerer, lfa.order, [(a, b, t) for (a, b), t in
                                              zip(lfa.flg_bounds(), lfa.tiling, strict=True)])
    model = SegmentModel(table, objective, 0, 0, lfa, table.tally(lfa), groups)
    status, solution = solve(model.model, 10, 1)
    assert status.status == "optimal"
    if groups.path:
        assert model.decode(solution)[0] == lfa
    return model, table, (solution.value(model.dram_bytes), solution.value(model.compute_cycles),
                          solution.value(model.ideal), solution.value(model.dram_cycles))


ACCOUNTING = ["chain5", "resblock", "dag3_6", "dag5_6"]


@pytest.mark.parametrize("name", ACCOUNTING)
def test_model_counts_every_lfa_like_lowering(name: str) -> None:
    """Pinned to random LFAs, CP-SAT's DRAM bytes, DRAM cycles and compute cycles equal
    the lowered program's (whether the objective pushes DRAM bytes down or not), and so
    does the table's own tally used for incumbents."""
    for lowerer, lfa in _random_lfas(name, 10):
        program = lowerer.lower(lfa)
        for objective in ("ideal", "energy"):
            _, table, (dram, compute, ideal, dram_cycles) = _pinned(lowerer, lfa, objective,
                                                                    GROUPS.without("buffer"))
            assert (dram, compute, dram_cycles) == (program.dram_bytes,
                                                    program.compute_cycles,
                                                    program.dram_cycles)
            if objective == "ideal":
                assert ideal == program.ideal_cycles
        tally = table.tally(lfa)
        assert (tally.dram_bytes, tally.compute_cycles, tally.dram_cycles) == (
            program.dram_bytes, program.compute_cycles, program.dram_cycles)
        assert tally.ideal == program.ideal_cycles
        assert tally.energy_pj == pytest.approx(program.energy_pj)


@pytest.mark.parametrize("dropped",
                         sorted(GROUPS.without("buffer", "cut_on_boundary").names()))
def test_dropping_a_constraint_group_is_caught(dropped: str) -> None:
    """Without one group, the pinned model's DRAM bytes or compute cycles differ from the
    program's for some LFA. (Without `buffer` the no-good cuts still make the result
    exact, see below; `cut_on_boundary` only keeps the decoded DRAM cuts among the
    FLCs.)"""
    caught = 0
    for name in ACCOUNTING[:2]:
        for lowerer, lfa in _random_lfas(name, 6):
            program = lowerer.lower(lfa)
            _, _, (dram, compute, _, dram_cycles) = _pinned(lowerer, lfa, "energy",
                                                            GROUPS.without("buffer", dropped))
            caught += (dram, compute, dram_cycles) != (
                program.dram_bytes, program.compute_cycles, program.dram_cycles)
    assert caught > 0


def _row_value(table: SegmentTable, lfa: Lfa, row: BufferRow, stop: int) -> int:
    """The row's bytes in `lfa` (`stop`: the end of the row's FLG)."""
    cuts = lfa.dram_cuts
    pos = table.pos

    def crosses(lo: int, hi: int) -> bool:
        return any(lo < k <= hi for k in cuts)

    value = row.const + sum(a1 if crosses(pos[u], pos[v]) else a0
                            for (u, v), a1, a0 in row.edges)
    value += sum(size for u, size in row.stores if crosses(pos[u], table.last_use[u]))
    if row.prefetch:
        bounds = lfa.flg_bounds()
        g = next(g for g, (a, _) in enumerate(bounds) if a == stop)
        nxt = table.segments[(*bounds[g], lfa.tiling[g])]
        first = table.order[stop]
        value += nxt.first_fixed + sum(size for u, size in nxt.first_loads.items()
                                       if crosses(pos[u], pos[first]))
    return value


@pytest.mark.parametrize("name", ["chain5", "resblock", "dag0_5", "dag4_5"])
def test_buffer_rows_are_lower_bounds(name: str) -> None:
    """In every LFA (tilings 1, 2), each row of each FLG is at most the default DLSA's
    occupancy at its tile, and each floor at most the FLG's peak."""
    wl = _net(name)
    lowerer = Lowerer(wl, EDGE)
    order = tuple(wl.layers)
    n = len(order)
    table = SegmentTable(lowerer, order, [(i, j, t) for i in range(n)
                                          for j in range(i + 1, n + 1) for t in (1, 2)])
    rows_checked = 0
    for lfa in _all_lfas(order, (1, 2)):
        try:
            program = lowerer.lower(lfa, check=False)
        except ScheduleError:
            continue
        occupancy = buffer_profile(program, default_dlsa(program))
        first_tile = 0
        for (a, b), t in zip(lfa.flg_bounds(), lfa.tiling, strict=True):
            seg = table.segments[(a, b, t)]
            size = (b - a) * t
            assert seg.floor <= max(occupancy[first_tile + 1:first_tile + size + 1])
            for row in seg.rows:
                assert _row_value(table, lfa, row, b) <= occupancy[first_tile + row.tile + 1]
                rows_checked += 1
            first_tile += size
    assert rows_checked > 500


BRUTE = ["chain3", "chain5", "resblock", "dag3_4", "dag5_5", "dag9_5"]


@pytest.mark.parametrize("name", BRUTE)
def test_optimum_equals_brute_force(name: str) -> None:
    """For tight buffers: the model's ideal equals the least ideal of all LFAs that fit
    under the default DLSA, and its tie-break (compute x bandwidth + DRAM bytes) the
    least among those; below the least peak nothing is returned."""
    wl = _net(name)
    rows = _brute(name)
    caps = _capacities(name)
    for cap in [caps[0] - 1, *caps]:
        lowerer = Lowerer(wl, _with_capacity(cap))
        result = solve_lfa(lowerer, max_segment=len(wl.layers), tilings=SMALL, workers=1,
                           time_limit=20)
        fitting = [row for row in rows if row[3] <= cap]
        if not fitting:
            assert result.lfa is None
            continue
        best = min((row[1], row[2]) for row in fitting)
        assert result.status.status == "optimal"
        assert result.model_ideal == best[0]
        _check_exact(lowerer, result)
        program = result.candidate.program
        assert (program.compute_cycles * program.dram_bytes_per_cycle
                + program.dram_bytes) == best[1]


def test_energy_optimum_equals_brute_force() -> None:
    name = "chain5"
    wl = _net(name)
    for cap in _capacities(name):
        lowerer = Lowerer(wl, _with_capacity(cap))
        result = solve_lfa(lowerer, objective="energy", max_segment=len(wl.layers),
                           tilings=SMALL, workers=1, time_limit=20)
        best = min(row[4] for row in _brute(name) if row[3] <= cap)
        # tile energies enter the model rounded to whole pJ per FLG
        assert result.candidate.program.energy_pj == pytest.approx(best, abs=len(wl.layers))


def test_buffer_group_only_saves_rounds() -> None:
    """Without the buffer rows the no-good cuts alone still reach the exact optimum,
    after more rounds."""
    rounds = {True: 0, False: 0}
    for name in ("chain3", "dag3_4"):
        wl = _net(name)
        for cap in _capacities(name)[:2]:
            lowerer = Lowerer(wl, _with_capacity(cap))
            best = min(row[1] for row in _brute(name) if row[3] <= cap)
            for with_rows in (True, False):
                groups = GROUPS if with_rows else GROUPS.without("buffer")
                result = solve_lfa(lowerer, max_segment=len(wl.layers), tilings=SMALL,
                                   workers=1, time_limit=20, groups=groups, max_rounds=2000)
                assert result.model_ideal == best
                rounds[with_rows] += result.rounds
    assert rounds[False] > rounds[True]


@pytest.mark.parametrize("name", ["chain5", "dag0_6", "fsrcnn"])
def test_an_optimal_hint_is_kept(name: str) -> None:
    lowerer = Lowerer(_net(name), EDGE)
    first = solve_lfa(lowerer, workers=1, time_limit=20)
    again = solve_lfa(lowerer, incumbent=first.lfa, workers=1, time_limit=20)
    assert again.lfa == first.lfa
    assert not again.improved
    assert again.model_ideal == first.model_ideal
    _check_exact(lowerer, again)


@pytest.mark.parametrize("name", ["chain5", "dag0_6", "fsrcnn"])
def test_never_worse_than_the_incumbent(name: str) -> None:
    """An incumbent outside the candidate set (one FLG of every layer, tiling 3) is
    still a candidate; with no time left after the precomputation it comes back."""
    wl = _net(name)
    lowerer = Lowerer(wl, EDGE)
    order = tuple(wl.layers)
    incumbent = Lfa(order, (), (3,), ())
    inc_ideal = lowerer.lower(incumbent).ideal_cycles
    for time_limit, max_segment in ((20, 1), (0.0, 12)):
        result = solve_lfa(lowerer, incumbent=incumbent, max_segment=max_segment,
                           workers=1, time_limit=time_limit)
        assert result.model_ideal <= inc_ideal
        _check_exact(lowerer, result)
    unfused = Lfa.unfused(order)
    result = solve_lfa(lowerer, incumbent=unfused, objective="energy", workers=1,
                       time_limit=20)
    assert result.candidate.program.energy_pj <= lowerer.lower(unfused).energy_pj + 1e-6
    assert result.improved


def test_windows_leave_the_rest_alone() -> None:
    """Only FLCs, DRAM cuts and tilings strictly inside the window (widened to the
    incumbent's FLG boundaries) change; the buffer is the incumbent's peak."""
    wl = _net("fsrcnn")
    order = tuple(wl.layers)
    incumbent = Lfa(order, (2, 4, 6), (1, 2, 1, 1), (2, 4, 6))
    program = Lowerer(wl, EDGE).lower(incumbent)
    peak = evaluate(program, default_dlsa(program)).peak_buffer_bytes
    lowerer = Lowerer(wl, _with_capacity(peak))
    whole = lowerer.lower(incumbent).ideal_cycles
    for window, expected in (((2, 6), (2, 6)), ((3, 5), (2, 6)), ((0, 3), (0, 4))):
        result = solve_lfa(lowerer, incumbent=incumbent, window=window, workers=1,
                           time_limit=20)
        w0, w1 = result.window
        assert (w0, w1) == expected
        _check_exact(lowerer, result)
        assert result.model_ideal <= whole
        lfa = result.lfa

        def outside(x: Lfa, w0: int = w0, w1: int = w1) -> tuple:
            flgs = [(a, b, t) for (a, b), t in zip(x.flg_bounds(), x.tiling, strict=True)
                    if b <= w0 or a >= w1]
            return (flgs, [k for k in x.flc if k <= w0 or k >= w1],
                    [k for k in x.dram_cuts if k <= w0 or k >= w1])

        assert outside(lfa) == outside(incumbent)
        assert result.improved


def test_bad_arguments() -> None:
    lowerer = Lowerer(_net("chain3"), EDGE)
    order = tuple(lowerer.workload.layers)
    with pytest.raises(ValueError):
        solve_lfa(lowerer, objective="speed")
    with pytest.raises(ScheduleError):
        solve_lfa(lowerer, window=(0, 2))
    with pytest.raises(ScheduleError):
        solve_lfa(lowerer, order=tuple(reversed(order)))
    with pytest.raises(ScheduleError):
        solve_lfa(lowerer, order=order, incumbent=Lfa(order[::-1], (), (1,), ()))


@pytest.mark.parametrize("name", ["chain5", "resblock", "fsrcnn", "dag3_6", "dag5_6",
                                  "dag7_6"])
def test_fit_floor_is_held_under_the_tightest_dlsa(name: str) -> None:
    """For random LFAs, every FLG's fit_floor is at most the peak, over its tiles, of the
    occupancy under the tight DLSA (each load live only over its uses, each store only
    at its producer): the least buffer any DLSA holds there. So excluding segments whose
    floor exceeds the buffer excludes no LFA that fits."""
    for lowerer, lfa in _random_lfas(name, 10):
        program = lowerer.lower(lfa)
        occupancy = buffer_profile(program, tight_dlsa(program))  # index: tile + 1
        table = SegmentTable(lowerer, lfa.order, flg_keys(lfa))
        first = 0
        for key in flg_keys(lfa):
            seg = table.segments[key]
            tiles = sum(1 for t in program.tiles if seg.start <= lfa.order.index(t.layer)
                        < seg.stop)
            peak = max(occupancy[first + 1:first + tiles + 1])
            assert seg.fit_floor <= peak, (key, seg.fit_floor, peak)
            assert seg.fit_floor > 0
            first += tiles
