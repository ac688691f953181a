"""The windowed DLSA model is exact over its space: on random tiny programs, from a random
valid incumbent, a window's optimum equals brute force over every DLSA that keeps the
incumbent outside the window (window transfers re-ordered among themselves, their free
ends anywhere the window allows), and a window over all tiles finds the global optimum.
The longest-path tails it rests on match the evaluator's timeline."""

from __future__ import annotations

import itertools
import random
import threading

import pytest
from brute import _livings_only, _valid_orders, brute_force_optimum, tiny_program

from mipsched.core import WindowSettings
from mipsched.evaluate import buffer_profile, evaluate, latency, timeline
from mipsched.formulations.dlsa_cuts import Tails, cut, split_points, tails
from mipsched.formulations.dlsa_windows import (
    improve_dlsa,
    solve_window,
    stalled_windows,
    window_end,
)
from mipsched.schedule.notation import Dlsa, ScheduleError
from mipsched.schedule.tile_program import TileProgram

CASES = 120
#: Reach past any tiny program: the window's ranges are then those of the docstring.
WIDE = WindowSettings(reach=100)


def _random_incumbent(program: TileProgram, rng: random.Random) -> Dlsa | None:
    """A random valid DLSA that fits the buffer (None: none does)."""
    cap = program.buffer_capacity_bytes
    fitting = [d for d in _livings_only(program) if max(buffer_profile(program, d)) <= cap]
    if not fitting:
        return None
    living = rng.choice(fitting).living
    return Dlsa(rng.choice(_valid_orders(program, living)), living)


@pytest.fixture(scope="module")
def cases() -> list[tuple[TileProgram, Dlsa, int, int]]:
    rng = random.Random(77)
    out = []
    while len(out) < CASES:
        program = tiny_program(rng)
        incumbent = _random_incumbent(program, rng)
        if incumbent is None:
            continue
        n = program.n_tiles
        w0 = rng.randrange(n)
        out.append((program, incumbent, w0, rng.randint(w0 + 1, n)))
    return out


def _window_optimum(program: TileProgram, incumbent: Dlsa, w0: int, w1: int) -> int:
    """Brute force over the window's space (see the module docstring of dlsa_windows)."""
    window = cut(program, incumbent, timeline(program, incumbent),
                 tails(program, incumbent), w0, w1)
    order = incumbent.order
    free = order[window.k0:window.k1]
    choices = []
    for i in free:
        t = program.tensors[i]
        lo, hi = (t.lo, min(t.hi, w1)) if t.is_load else (max(t.lo, w0), t.hi)
        value = t.free_end(incumbent.living[i])
        choices.append(range(min(lo, value), max(hi, value) + 1))
    best = latency(program, incumbent)
    for ends in itertools.product(*choices):
        living = list(incumbent.living)
        for i, v in zip(free, ends, strict=True):
            living[i] = program.tensors[i].living(v)
        for perm in itertools.permutations(free):
            dlsa = Dlsa((*order[:window.k0], *perm, *order[window.k1:]), tuple(living))
            try:
                ev = evaluate(program, dlsa)
            except ScheduleError:
                continue
            if ev.fits:
                best = min(best, ev.latency_cycles)
    return best


def test_tails_are_longest_paths_of_the_timeline(cases) -> None:
    for program, incumbent, _, _ in cases:
        times = timeline(program, incumbent)
        tail = tails(program, incumbent)
        reach = [s + t for s, t in zip(times.tile_start, tail.tile, strict=True)]
        reach += [s + t for s, t in zip(times.transfer_start, tail.transfer, strict=True)]
        assert max(reach) == times.makespan


def test_a_window_is_exact_over_its_space(cases) -> None:
    improved = 0
    for program, incumbent, w0, w1 in cases:
        expected = _window_optimum(program, incumbent, w0, w1)
        dlsa, value, status = solve_window(program, incumbent, w0, w1, WIDE, 10, 1)
        assert value == expected, (w0, w1)
        ev = evaluate(program, dlsa)
        assert ev.fits and ev.latency_cycles == value
        if status is not None:
            assert status.status == "optimal"
            assert status.objective == expected
        improved += value < latency(program, incumbent)
    assert improved >= 20  # the cases do exercise re-ordering and living durations


def test_the_suffix_tails_matter(cases, monkeypatch) -> None:
    """With every tail taken as zero the model would ignore what its choices cost the
    suffix: the exactness comparison above catches that."""
    real = tails

    def zero(program: TileProgram, dlsa: Dlsa) -> Tails:
        t = real(program, dlsa)
        return Tails([0] * len(t.tile), [0] * len(t.transfer), t.release, t.need)

    monkeypatch.setattr("mipsched.formulations.dlsa_windows.tails", zero)
    wrong = 0
    for program, incumbent, w0, w1 in cases:
        _, _, status = solve_window(program, incumbent, w0, w1, WIDE, 10, 1)
        if status is not None and status.objective != _window_optimum(program, incumbent,
                                                                       w0, w1):
            wrong += 1
    assert wrong > 0


def test_a_window_over_every_tile_finds_the_optimum(cases) -> None:
    for program, incumbent, _, _ in cases[:60]:
        _, value, _ = solve_window(program, incumbent, 0, program.n_tiles, WIDE, 10, 1)
        assert value == brute_force_optimum(program)


def test_sliding_windows_never_lose_and_keep_the_rest(cases, monkeypatch) -> None:
    """Forced onto windows (as if the program were too big for one model), the result is
    valid, fits, and is no worse than the incumbent."""
    monkeypatch.setattr("mipsched.formulations.dlsa_windows.whole_model_fits",
                        lambda program: False)
    for program, incumbent, _, _ in cases[:40]:
        result = improve_dlsa(program, incumbent, 20, 1,
                              settings=WindowSettings(tiles=3, overlap=1, reach=2))
        ev = evaluate(program, result.dlsa)
        assert ev.fits and ev.latency_cycles == result.latency_cycles
        assert result.latency_cycles <= latency(program, incumbent)
        assert result.lower_bound is None
        assert {scope for scope, _ in result.runs} <= {"window"}


def test_windows_then_the_whole_model_reach_the_optimum(cases) -> None:
    """On a program that fits one model, windows run first and the whole model, started
    from their result, still proves the optimum."""
    for program, incumbent, _, _ in cases[:30]:
        result = improve_dlsa(program, incumbent, 20, 1,
                              settings=WindowSettings(tiles=3, overlap=1, transfers=2))
        assert result.runs[-1][0] == "whole"
        best = brute_force_optimum(program)
        assert result.latency_cycles == best == result.lower_bound


def test_a_set_stop_event_ends_the_windows_with_the_incumbent(cases, monkeypatch) -> None:
    monkeypatch.setattr("mipsched.formulations.dlsa_windows.whole_model_fits",
                        lambda program: False)
    program, incumbent, _, _ = cases[0]
    stop = threading.Event()
    stop.set()
    result = improve_dlsa(program, incumbent, 20, 1, stop=stop)
    assert result.windows == 0 and result.dlsa == incumbent


def _stalls(program: TileProgram, incumbent: Dlsa) -> list[tuple[int, int]]:
    """(stall, tile) for every positive wait: a tile after the previous one ends, and the
    stores after the last tile (counted on the last tile)."""
    times = timeline(program, incumbent)
    waits = [(times.tile_start[i] - (times.tile_end[i - 1] if i else 0), i)
             for i in range(program.n_tiles)]
    waits.append((times.makespan - times.tile_end[-1], program.n_tiles - 1))
    return [(stall, tile) for stall, tile in waits if stall > 0]


def test_split_points_are_the_clamped_count_of_transfers_started(cases) -> None:
    """At every w, the cut is the number of transfers that start before tile w (the
    makespan for w = n), raised to just past the last transfer a tile < w needs and
    lowered to the first transfer a tile >= w releases (the module docstring), and it
    never decreases in w (window_end bisects on it)."""
    for program, incumbent, _, _ in cases:
        times, tail = timeline(program, incumbent), tails(program, incumbent)
        order, n = incumbent.order, program.n_tiles
        splits = split_points(incumbent, times, tail)
        assert len(splits) == n + 1
        for w in range(n + 1):
            start = times.tile_start[w] if w < n else times.makespan
            started = sum(times.transfer_start[i] < start for i in order)
            needed = max((k + 1 for k, i in enumerate(order) if tail.need[i] < w), default=0)
            released = min((k for k, i in enumerate(order) if tail.release[i] >= w),
                           default=len(order))
            assert splits[w] == min(max(started, needed), released)
        assert splits == sorted(splits)


def test_stalled_windows_hold_their_tile_and_reach_back_as_far_as_allowed(cases) -> None:
    """One window per stall, most stall cycles first; each holds its tile, is a window
    window_end allows, and starts at the least such w0."""
    settings = WindowSettings(tiles=3, overlap=1, transfers=2)
    seen = 0
    for program, incumbent, _, _ in cases:
        stalls = _stalls(program, incumbent)
        found = list(stalled_windows(program, incumbent, settings))
        assert [tile for tile, _ in found] == [
            tile for _, tile in sorted(stalls, key=lambda st: (-st[0], st[1]))]
        for tile, (w0, w1) in found:
            assert w0 <= tile < w1 and w0 >= tile - settings.tiles + 1
            assert w1 == window_end(program, incumbent, w0, settings)
            assert w0 == tile - settings.tiles + 1 or w0 == 0 or \
                window_end(program, incumbent, w0 - 1, settings) <= tile
        seen += len(found)
    assert seen > len(cases)  # the random incumbents do stall


def test_the_windows_start_at_the_largest_stall_within_a_share_of_the_time(
        cases, monkeypatch) -> None:
    """Forced onto windows, the first window solved is the largest stall's, and no window
    is given more than WINDOW_TIME_SHARE of the time left (MIN_WINDOW_SECONDS at least)."""
    import mipsched.formulations.dlsa_windows as windows
    monkeypatch.setattr(windows, "whole_model_fits", lambda program: False)
    settings = WindowSettings(tiles=3, overlap=1, transfers=2)
    solved: list[tuple[tuple[int, int], float]] = []
    real = windows.solve_window

    def recording(program, incumbent, w0, w1, settings, time_limit, *rest):
        solved.append(((w0, w1), time_limit))
        return real(program, incumbent, w0, w1, settings, time_limit, *rest)
    monkeypatch.setattr(windows, "solve_window", recording)
    for program, incumbent, _, _ in cases[:30]:
        solved.clear()
        first = next(stalled_windows(program, incumbent, settings), None)
        improve_dlsa(program, incumbent, 2.0, 1, settings=settings)
        if first is not None:
            assert solved[0][0] == first[1]
        assert all(limit <= max(windows.WINDOW_TIME_SHARE * 2.0,
                                windows.MIN_WINDOW_SECONDS) for _, limit in solved)
