"""The DLSA model over a window of a large program (DESIGN §4 "Windows").

A window is a run of tiles [w0, w1) and the run of DRAM transfers [k0, k1) of the
incumbent order that happen around them. The incumbent's ASAP timing is a longest-path
schedule over a DAG (tile chain, DRAM order, release and need edges); the window splits
that DAG in three:
- the *prefix* (tiles < w0, transfers < k0) is closed under predecessors, so its times
  do not depend on the window: they are constants;
- the *suffix* (tiles >= w1, transfers >= k1) is closed under successors and keeps its
  order and living durations, so its finish is max over edges (window node u -> suffix
  node v) of end(u) + tail(v), where tail(v) is the longest path from v's start to the
  end of the program (cycles);
- the window's transfers are re-ordered freely among themselves (after the prefix's, before
  the suffix's) and choose their free ends (a load's Start, a store's End), with the
  constraints of the whole model (`dlsa.py`) restricted to window nodes.
Exactness: the model's makespan is the latency of the DLSA it decodes to, so its optimum is
the best DLSA that agrees with the incumbent outside the window. Buffer limits apply on
every tile a window tensor may occupy, prefix and suffix tiles included.

Cut points and tails: `dlsa_cuts.py`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mipsched.core import ModelRecord, WindowSettings, seconds_left
from mipsched.evaluate import Timeline, buffer_profile, evaluate, timeline
from mipsched.formulations.dlsa import add_buffer_limits, solve_dlsa, whole_model_fits
from mipsched.formulations.dlsa_cuts import Tails, Window, cut, split_points, tails
from mipsched.formulations.solver import (
    Solution,
    SolveStatus,
    new_model,
    solve,
    timed_out,
)
from mipsched.schedule.notation import Dlsa, ScheduleError
from mipsched.schedule.tile_program import TileProgram

if TYPE_CHECKING:
    from mipsched.formulations.solver import IntVar, LinearExpr


class WindowModel:
    """CP-SAT model of one window (variables only for window tiles and transfers)."""

    def __init__(self, program: TileProgram, incumbent: Dlsa, times: Timeline, tail: Tails,
                 window: Window, reach: int) -> None:
        """`times` and `tail`: the incumbent's timeline and tails; a window transfer's
        free end may lie up to `reach` tiles outside the window."""
        self.program, self.incumbent, self.window = program, incumbent, window
        self.times = times
        w0, w1, k0, k1 = window.w0, window.w1, window.k0, window.k1
        order = incumbent.order
        self.free_ids = list(order[k0:k1])
        tensors = program.tensors
        horizon = times.makespan
        self.model = m = new_model()
        self.s = {p: m.new_int_var(0, horizon, f"s{p}") for p in range(w0, w1)}
        self.makespan = m.new_int_var(0, horizon, "makespan")
        for p in range(w0, w1):  # chain, and the prefix's transfers each tile needs
            m.add(self.s[p] >= self._end(p - 1))
        for i in order[:k0]:
            if w0 <= tail.need[i] < w1:
                m.add(self.s[tail.need[i]] >= times.transfer_end[i])
        dram_free = times.transfer_end[order[k0 - 1]] if k0 else 0
        self.a = {i: m.new_int_var(dram_free, horizon, f"a{i}") for i in self.free_ids}
        m.add_no_overlap([m.new_fixed_size_interval_var(self.a[i], tensors[i].access_cycles,
                                                        f"x{i}") for i in self.free_ids])
        first_suffix = tail.transfer[order[k1]] if k1 < len(order) else 0
        self.ranges = [(t.free_end(v), t.free_end(v))
                       for t, v in zip(tensors, incumbent.living, strict=True)]
        self.free: list[dict[int, IntVar]] = [{} for _ in tensors]
        for i in self.free_ids:
            self._add_transfer(i, reach, first_suffix, tail)
        self._add_precedence()
        self._add_suffix_edges(tail)
        self._add_buffer_limits()
        m.minimize(self.makespan)

    def _end(self, p: int) -> LinearExpr:
        """End of tile p (cycles): a variable inside the window, a constant before it."""
        if p >= self.window.w0:
            return self.s[p] + self.program.tile_cycles[p]
        return self.times.tile_end[p] if p >= 0 else 0

    def _add_transfer(self, i: int, reach: int, first_suffix: int, tail: Tails) -> None:
        """Window transfer i: its free-end literals over its range, its release (tile
        Start - 1 of a load, a store's producer) and the tiles that need it."""
        m = self.model
        t = self.program.tensors[i]
        n = self.program.n_tiles
        w0, w1 = self.window.w0, self.window.w1
        value = self.ranges[i][0]
        if t.is_load:
            lo, hi = max(t.lo, w0 - reach), min(t.hi, w1)
        else:
            lo, hi = max(t.lo, w0), min(t.hi, w1 + reach)
        lo, hi = min(lo, value), max(hi, value)
        self.ranges[i] = (lo, hi)
        lits = {tt: m.new_bool_var(f"f{i}_{tt}") for tt in range(lo, hi)}
        for tt in range(lo, hi - 1):
            m.add_implication(lits[tt], lits[tt + 1])
        self.free[i] = lits
        done = self.a[i] + t.access_cycles
        m.add(self.makespan >= done + first_suffix)
        if t.is_load:  # released by tile Start - 1; needed by its first use
            for v in range(max(lo, 1), hi + 1):
                if v - 1 in lits:
                    m.add(self.a[i] >= self._end(v - 1)).only_enforce_if(lits[v - 1].negated())
                else:
                    m.add(self.a[i] >= self._end(v - 1))
            self._need(t.first_use, done, None, tail)
        else:          # released by its producer; needed by tile End
            m.add(self.a[i] >= self._end(t.producer))
            for v in range(lo, min(hi, n - 1) + 1):
                self._need(v, done, lits.get(v), tail)

    def _add_precedence(self) -> None:
        """A load of stored data after the store, both in the window; raises
        ScheduleError when the incumbent stores the data only after the window."""
        tensors = self.program.tensors
        position = {i: k for k, i in enumerate(self.incumbent.order)}
        for store, load in self.program.precedence:
            if store in self.a and load in self.a:
                self.model.add(self.a[load] >= self.a[store] + tensors[store].access_cycles)
            elif load in self.a and position[store] >= self.window.k1:
                raise ScheduleError("incumbent loads data before storing it")

    def _add_suffix_edges(self, tail: Tails) -> None:
        """The makespan after the paths from window tiles into the suffix, and after the
        constant paths from the prefix (`_prefix_floor`)."""
        m = self.model
        w0, w1 = self.window.w0, self.window.w1
        for p in range(w0, w1):  # edges from window tiles into the suffix
            m.add(self.makespan >= self._end(p))
        if w1 < self.program.n_tiles:
            m.add(self.makespan >= self._end(w1 - 1) + tail.tile[w1])
        for j in self.incumbent.order[self.window.k1:]:
            if w0 <= tail.release[j] < w1:
                m.add(self.makespan >= self._end(tail.release[j]) + tail.transfer[j])
        m.add(self.makespan >= self._prefix_floor(self.times, tail))

    def _add_buffer_limits(self) -> None:
        """The buffer limit on every tile a window transfer may occupy, the other
        transfers as the incumbent holds them."""
        tensors = self.program.tensors
        base = buffer_profile(self.program, self.incumbent)  # index t + 1
        for i in self.free_ids:
            start, stop = self.incumbent.living[i]
            for k in range(start + 1, stop + 1):
                base[k] -= tensors[i].bytes
        add_buffer_limits(self.model, self.program, self.ranges, self.free, base,
                          self.free_ids)

    def _need(self, v: int, done: LinearExpr, literal: IntVar | None, tail: Tails) -> None:
        """Tile v waits for a window transfer (when `literal` holds, if given)."""
        w0, w1 = self.window.w0, self.window.w1
        if v >= self.program.n_tiles:
            return
        assert v >= w0, "a window transfer is needed by a prefix tile"
        c = (self.s[v] >= done) if v < w1 else (self.makespan >= done + tail.tile[v])
        ct = self.model.add(c)
        if literal is not None:
            ct.only_enforce_if(literal)

    def _prefix_floor(self, times: Timeline, tail: Tails) -> int:
        """Constant part of the makespan: paths that leave the prefix straight into the
        suffix, and prefix nodes that end the program (cycles)."""
        w0, w1, k0, k1 = self.window.w0, self.window.w1, self.window.k0, self.window.k1
        order = self.incumbent.order
        floor = max(times.tile_end[:w0], default=0)
        for k in range(k0):
            i = order[k]
            floor = max(floor, times.transfer_end[i])
            if tail.need[i] >= w1 and tail.need[i] < self.program.n_tiles:
                floor = max(floor, times.transfer_end[i] + tail.tile[tail.need[i]])
        for j in order[k1:]:
            if 0 <= tail.release[j] < w0:
                floor = max(floor, times.tile_end[tail.release[j]] + tail.transfer[j])
        return floor

    def hint(self) -> None:
        """Hints the incumbent's ASAP timing and living durations."""
        times = self.times
        for p, var in self.s.items():
            self.model.add_hint(var, times.tile_start[p])
        for i, var in self.a.items():
            self.model.add_hint(var, times.transfer_start[i])
            value = self.program.tensors[i].free_end(self.incumbent.living[i])
            for tt, lit in self.free[i].items():
                self.model.add_hint(lit, tt >= value)
        self.model.add_hint(self.makespan, times.makespan)

    def decode(self, solution: Solution) -> Dlsa:
        """The incumbent with the window's order and free ends replaced."""
        tensors = self.program.tensors
        living = list(self.incumbent.living)
        for i in self.free_ids:
            free = next((tt for tt, lit in sorted(self.free[i].items())
                         if solution.boolean(lit)), self.ranges[i][1])
            living[i] = tensors[i].living(free)
        starts = {i: solution.value(a) for i, a in self.a.items()}
        window = sorted(self.free_ids, key=lambda i: (starts[i],
                                                      starts[i] + tensors[i].access_cycles, i))
        order = self.incumbent.order
        return Dlsa((*order[:self.window.k0], *window, *order[self.window.k1:]),
                    tuple(living))


def solve_window(program: TileProgram, incumbent: Dlsa, w0: int, w1: int,
                 settings: WindowSettings, time_limit: float | None = None,
                 workers: int | None = None, seed: int = 0,
                 stop: threading.Event | None = None, target: int | None = None
                 ) -> tuple[Dlsa, int, SolveStatus | None]:
    """The best DLSA that agrees with `incumbent` outside tiles [w0, w1), its latency, and
    the solver's status (None: the window holds no transfer, nothing to decide). Never
    worse than `incumbent`. `time_limit` (seconds) covers building the model too; with
    `target` (cycles) the search ends at the first DLSA of at most that latency."""
    started = time.perf_counter()
    times, tail = timeline(program, incumbent), tails(program, incumbent)
    window = cut(program, incumbent, times, tail, w0, w1)
    best_latency = times.makespan
    if window.k0 == window.k1:
        return incumbent, best_latency, None
    model = WindowModel(program, incumbent, times, tail, window, settings.reach)
    model.hint()
    left = seconds_left(None if time_limit is None else started + time_limit)
    if left is not None and left <= 0:
        return incumbent, best_latency, timed_out(started)
    good_enough = None if target is None else (lambda sol: sol.objective <= target)
    status, solution = solve(model.model, left, workers, seed, stop, good_enough)
    if status.has_solution:
        candidate = model.decode(solution)
        try:
            ev = evaluate(program, candidate)
        except ScheduleError:
            ev = None
        if ev is not None and ev.fits and ev.latency_cycles < best_latency:
            return candidate, ev.latency_cycles, status
    return incumbent, best_latency, status


@dataclass(frozen=True)
class DlsaImprovement:
    """Result of `improve_dlsa`: the best DLSA, its latency, how it was found."""

    dlsa: Dlsa
    latency_cycles: int
    runs: list[tuple[str, SolveStatus]]
    """Each CP-SAT run: its scope ("window" or "whole") and status."""
    lower_bound: int | None
    """Proven bound (whole-program model only)."""

    @property
    def windows(self) -> int:
        """How many window models were solved."""
        return sum(scope == "window" for scope, _ in self.runs)

    def records(self) -> list[ModelRecord]:
        """One record per CP-SAT run (scope, status, objective, bound, time)."""
        return [ModelRecord("dlsa", s.status, scope, s.objective, s.bound, s.wall_seconds,
                            s.workers) for scope, s in self.runs]


#: When the whole program fits one model, the share of the time windows may take first:
#: they improve a poor incumbent much faster than the whole model does, which then
#: starts from their result and proves a bound.
WINDOW_SHARE = 0.5
#: Most of the time left one window may take (at least MIN_WINDOW_SECONDS unless less is
#: left, at most WindowSettings.seconds): a window CP-SAT cannot close in that time
#: rarely pays, and in a 60-s solve the DLSA model has about 5 s for all its windows.
WINDOW_TIME_SHARE = 0.25
MIN_WINDOW_SECONDS = 0.5


def improve_dlsa(program: TileProgram, incumbent: Dlsa, time_limit: float | None = None,
                 workers: int | None = None, seed: int = 0,
                 settings: WindowSettings | None = None,
                 stop: threading.Event | None = None,
                 target: int | None = None) -> DlsaImprovement:
    """Sliding windows (see WindowSettings), pass after pass until a pass improves
    nothing; then, when the program is small enough, the model of the whole program
    (exact, with a proven bound) from their result. Ends early when time runs out
    (`time_limit` in seconds, building the models included), `stop` is set or the
    latency reaches `target` (cycles); never worse than the incumbent."""
    settings = settings or WindowSettings()
    stop = stop or threading.Event()
    started = time.perf_counter()
    deadline = None if time_limit is None else started + time_limit
    whole = whole_model_fits(program)
    one_window = (program.n_tiles <= settings.tiles
                  and len(program.tensors) <= settings.transfers)
    runs: list[tuple[str, SolveStatus]] = []
    best, best_latency = incumbent, evaluate(program, incumbent).latency_cycles
    if not (whole and one_window):
        share = WINDOW_SHARE if whole else 1.0
        slide_end = None if time_limit is None else started + share * time_limit
        best, best_latency = _slide(program, best, best_latency, slide_end, workers, seed,
                                    settings, stop, runs, target)
    reached = target is not None and best_latency <= target
    if not whole or stop.is_set() or reached:
        return DlsaImprovement(best, best_latency, runs, None)
    left = seconds_left(deadline)
    if left is not None and left <= 0:
        return DlsaImprovement(best, best_latency, runs, None)
    result = solve_dlsa(program, best, left, workers, seed, stop=stop, target=target)
    runs.append(("whole", result.status))
    return DlsaImprovement(result.dlsa, result.latency_cycles, runs, result.lower_bound)


def _slide(program: TileProgram, best: Dlsa, best_latency: int, deadline: float | None,
           workers: int | None, seed: int, settings: WindowSettings, stop: threading.Event,
           runs: list[tuple[str, SolveStatus]], target: int | None = None
           ) -> tuple[Dlsa, int]:
    """Window passes over the program (appending each run to `runs`) until one improves
    nothing, the deadline (time.perf_counter() seconds) passes, `stop` is set or the
    latency reaches `target` (cycles): the best DLSA and its latency. A pass first solves
    the windows that hold the incumbent's stalled tiles, most stalled first
    (stalled_windows; a tile inside a window already solved for this incumbent is
    passed over), then slides over the whole program. A window gets at most
    WINDOW_TIME_SHARE of the time left."""
    n = program.n_tiles
    improved = True
    while improved:
        improved = False
        tried: set[tuple[int, int]] = set()
        since_better: list[tuple[int, int]] = []  # windows solved for this incumbent
        times, splits = _incumbent_splits(program, best)
        stalled = _stalled_windows(times, splits, settings)
        w0 = 0  # where the slide goes on
        while True:
            if stop.is_set() or (target is not None and best_latency <= target):
                return best, best_latency
            left = seconds_left(deadline)
            if left is not None and left <= 0:
                return best, best_latency
            span = next((w for tile, w in stalled if w not in tried and not any(
                a <= tile < b for a, b in since_better)), None)
            if span is None:
                if w0 >= n:
                    break
                span = (w0, _window_end(splits, w0, settings))
                w1 = span[1]
                w0 = n if w1 == n else max(w0 + (w1 - w0 + 1) // 2, w1 - settings.overlap)
                if span in tried:
                    continue
            tried.add(span)
            budget = settings.seconds if left is None else min(
                settings.seconds, left, max(WINDOW_TIME_SHARE * left, MIN_WINDOW_SECONDS))
            best, latency, status = solve_window(program, best, *span, settings, budget,
                                                 workers, seed, stop, target)
            if status is not None:
                runs.append(("window", status))
            if latency < best_latency:
                best_latency, improved = latency, True
                since_better = []
                times, splits = _incumbent_splits(program, best)
                stalled = _stalled_windows(times, splits, settings)
            else:
                since_better.append(span)
    return best, best_latency


def stalled_windows(program: TileProgram, incumbent: Dlsa, settings: WindowSettings
                    ) -> Iterator[tuple[int, tuple[int, int]]]:
    """(tile, window [w0, w1)) per tile the incumbent stalls before (the last tile also
    for the stores after it), most stall cycles first, ties by tile: the window holds the
    tile and reaches back as far as settings.transfers allows (the least such w0), since
    a stall's cure is an earlier load or store."""
    return _stalled_windows(*_incumbent_splits(program, incumbent), settings)


def _stalled_windows(times: Timeline, splits: list[int], settings: WindowSettings
                     ) -> Iterator[tuple[int, tuple[int, int]]]:
    """stalled_windows with the incumbent's timeline and split_points given."""
    n = len(times.tile_start)
    stalls = [(times.tile_start[i] - (times.tile_end[i - 1] if i else 0), i)
              for i in range(n)]
    if n:
        stalls.append((times.makespan - times.tile_end[-1], n - 1))
    for stall, tile in sorted(stalls, key=lambda st: (-st[0], st[1])):
        if stall <= 0:
            return
        lo, hi = max(0, tile - settings.tiles + 1), tile
        while lo < hi:  # the window end grows with w0: the least w0 still holding tile
            mid = (lo + hi) // 2
            if _window_end(splits, mid, settings) > tile:
                hi = mid
            else:
                lo = mid + 1
        yield tile, (lo, _window_end(splits, lo, settings))


def window_end(program: TileProgram, incumbent: Dlsa, w0: int,
               settings: WindowSettings) -> int:
    """The largest w1 <= w0 + settings.tiles whose window holds at most
    settings.transfers transfers (w0 + 1 at least)."""
    return _window_end(_incumbent_splits(program, incumbent)[1], w0, settings)


def _incumbent_splits(program: TileProgram, incumbent: Dlsa) -> tuple[Timeline, list[int]]:
    """The incumbent's timeline and its split_points (with its own tails): what a pass
    of windows reads, computed once per incumbent."""
    times = timeline(program, incumbent)
    return times, split_points(incumbent, times, tails(program, incumbent))


def _window_end(splits: list[int], w0: int, settings: WindowSettings) -> int:
    """window_end with the incumbent's split_points given."""
    lo, hi = w0 + 1, min(len(splits) - 1, w0 + settings.tiles)
    while lo < hi:  # the split grows with w: bisect for the last w1 within the limit
        mid = (lo + hi + 1) // 2
        if splits[mid] - splits[w0] <= settings.transfers:
            lo = mid
        else:
            hi = mid - 1
    return lo
