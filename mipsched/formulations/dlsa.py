"""Exact CP-SAT model of the DLSA of a fixed LFA (DESIGN §3-4).

Variables: the start s_p of every tile (it ends at e_p = s_p + cycles_p), the start a_i of
every DRAM transfer (an interval of its access cycles; all of them in one NoOverlap: one
channel), and the free end of every living duration in order encoding — for a load
z[i,t] = [Start_i <= t], for a store w[i,t] = [End_i <= t], monotone in t.

Constraint groups (named, so a test can drop one and see the exactness check fail):
- `tile_chain`:    s_p >= e_(p-1)
- `dram_serial`:   NoOverlap of the transfer intervals
- `load_release`:  a_i >= e_(v-1) whenever Start_i >= v      (released when tile S-1 ends)
- `load_need`:     s_(first use) >= a_i + d_i
- `store_release`: a_i >= e_(producer)
- `store_need`:    s_v >= a_i + d_i whenever End_i <= v < n
- `precedence`:    a_load >= a_store + d_store for a store and a later load of its data
- `buffer`:        per tile t: on-chip(t) + sum of bytes of tensors with Start <= t < End
                   <= capacity
Objective: the makespan M >= e_(n-1), M >= a_i + d_i.

Exact: any DLSA's ASAP timing satisfies the model, and the order of a model solution
(by transfer start) with its living durations, replayed ASAP by the evaluator, finishes no
later than the model says; so the optimum equals the best DLSA's latency.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mipsched.core import seconds_left
from mipsched.evaluate import evaluate, timeline
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
    from mipsched.formulations.solver import CpModel, IntVar

GROUPS = frozenset({"tile_chain", "dram_serial", "load_release", "load_need",
                    "store_release", "store_need", "precedence", "buffer"})


@dataclass(frozen=True)
class DlsaSolution:
    """The model's best DLSA (replayed by the evaluator) and the solver's verdict."""

    dlsa: Dlsa | None
    latency_cycles: int | None
    """Evaluator latency of `dlsa`."""
    status: SolveStatus
    lower_bound: int | None
    """Proven lower bound on the latency of every DLSA of this program (cycles)."""


class _Model:
    """The CP-SAT model of one tile program (optionally without some groups)."""

    def __init__(self, program: TileProgram, groups: frozenset[str] = GROUPS,
                 deadline: float | None = None) -> None:
        """Raises TimeoutError when building passes `deadline` (time.perf_counter()
        seconds): a model of WHOLE_MODEL_LITERALS literals takes about half a second;
        ValueError on a group that is not in GROUPS."""
        if unknown := groups - GROUPS:
            raise ValueError(f"unknown DLSA constraint groups: {sorted(unknown)}")
        self.program = program
        self.ranges = [(t.lo, t.hi) for t in program.tensors]
        self.model = m = new_model()
        n = program.n_tiles
        tensors = program.tensors
        horizon = program.compute_cycles + program.dram_cycles
        cycles = program.tile_cycles
        self.s = [m.new_int_var(0, horizon, f"s{p}") for p in range(n)]
        self.e = [self.s[p] + cycles[p] for p in range(n)]
        self.a = [m.new_int_var(0, horizon, f"a{i}") for i in range(len(tensors))]
        self.free: list[dict[int, IntVar]] = []  # z (loads) / w (stores) literals by t
        if "tile_chain" in groups:
            for p in range(1, n):
                m.add(self.s[p] >= self.e[p - 1])
        if "dram_serial" in groups:
            m.add_no_overlap([m.new_fixed_size_interval_var(self.a[i], t.access_cycles,
                                                             f"x{i}")
                              for i, t in enumerate(tensors)])
        for i in range(len(tensors)):
            if deadline is not None and time.perf_counter() > deadline:
                raise TimeoutError("the DLSA model was not built in time")
            self._add_transfer(i, groups)
        if "precedence" in groups:
            for store, load in program.precedence:
                m.add(self.a[load] >= self.a[store] + tensors[store].access_cycles)
        if "buffer" in groups:
            add_buffer_limits(m, program, self.ranges, self.free)
        self.makespan = m.new_int_var(0, horizon, "makespan")
        if n:
            m.add(self.makespan >= self.e[n - 1])
        for i, t in enumerate(tensors):
            m.add(self.makespan >= self.a[i] + t.access_cycles)
        m.minimize(self.makespan)

    def _add_transfer(self, i: int, groups: frozenset[str]) -> None:
        """Transfer i's free-end literals (monotone in t) and, by `groups`, its release
        and need constraints."""
        m = self.model
        t = self.program.tensors[i]
        n = self.program.n_tiles
        lo, hi = self.ranges[i]
        lits = {tt: m.new_bool_var(f"f{i}_{tt}") for tt in range(lo, hi)}
        for tt in range(lo, hi - 1):
            m.add_implication(lits[tt], lits[tt + 1])
        self.free.append(lits)
        done = self.a[i] + t.access_cycles
        if t.is_load:
            if "load_release" in groups:
                for v in range(max(lo, 1), hi + 1):
                    if v - 1 in lits:   # Start >= v  <=>  not z[v-1]
                        m.add(self.a[i] >= self.e[v - 1]).only_enforce_if(
                            lits[v - 1].negated())
                    else:               # Start >= lo >= v always
                        m.add(self.a[i] >= self.e[v - 1])
            if "load_need" in groups:
                m.add(self.s[t.first_use] >= done)
        else:
            if "store_release" in groups:
                m.add(self.a[i] >= self.e[t.producer])
            if "store_need" in groups:
                for v in range(lo, min(hi, n - 1) + 1):
                    if v in lits:       # End <= v  <=>  w[v]
                        m.add(self.s[v] >= done).only_enforce_if(lits[v])
                    else:               # v == hi < n: End <= hi always
                        m.add(self.s[v] >= done)

    def hint(self, dlsa: Dlsa) -> None:
        """Hints every variable with `dlsa`'s ASAP timing."""
        tl = timeline(self.program, dlsa)
        for p, v in enumerate(tl.tile_start):
            self.model.add_hint(self.s[p], v)
        for i, v in enumerate(tl.transfer_start):
            self.model.add_hint(self.a[i], v)
        for i, t in enumerate(self.program.tensors):
            free = t.free_end(dlsa.living[i])
            for tt, lit in self.free[i].items():
                self.model.add_hint(lit, tt >= free)
        self.model.add_hint(self.makespan, tl.makespan)

    def decode(self, solution: Solution) -> Dlsa:
        """The DLSA of a solution: its living durations, and the DRAM order by start."""
        tensors = self.program.tensors
        living = []
        for i, t in enumerate(tensors):
            free = next((tt for tt, lit in sorted(self.free[i].items())
                         if solution.boolean(lit)), self.ranges[i][1])
            living.append(t.living(free))
        starts = [solution.value(a) for a in self.a]
        order = sorted(range(len(tensors)),
                       key=lambda i: (starts[i], starts[i] + tensors[i].access_cycles, i))
        return Dlsa(tuple(order), tuple(living))


def add_buffer_limits(m: CpModel, program: TileProgram, ranges: list[tuple[int, int]],
                      free: list[dict[int, IntVar]], base: list[int] | None = None,
                      ids: list[int] | None = None) -> None:
    """Per tile t: base(t) + bytes of the tensors `ids` with Start <= t < End <= capacity,
    where tensor i's free end lies in `ranges[i]` and `free[i]` maps t to its literal
    (z = [Start <= t] for a load, w = [End <= t] for a store). `base` (index t + 1,
    default: the on-chip bytes) holds every tensor not in `ids` (default: all). Only tiles
    some literal touches get a constraint: the others hold what `ranges` fixes."""
    n = program.n_tiles
    fixed = list(base or program.onchip_profile)  # index t + 1
    terms: list[list] = [[] for _ in range(n + 1)]
    for i in range(len(program.tensors)) if ids is None else ids:
        t = program.tensors[i]
        lits = free[i]
        lo, hi = ranges[i]
        if t.is_load:   # live at t for Start <= t < End: z[t] (or 1 once t >= hi)
            for tt in range(lo, t.fixed):
                if tt in lits:
                    terms[tt + 1].append(t.bytes * lits[tt])
                else:
                    fixed[tt + 1] += t.bytes
        else:           # live at t for producer <= t < End: not w[t] (0 once t >= hi)
            for tt in range(t.producer, hi):
                if tt in lits:
                    terms[tt + 1].append(t.bytes * (1 - lits[tt]))
                elif tt < lo:
                    fixed[tt + 1] += t.bytes
    cap = program.buffer_capacity_bytes
    for k in range(n + 1):
        if terms[k]:
            m.add(sum(terms[k]) + fixed[k] <= cap)
        elif fixed[k] > cap:
            m.add_bool_or([])  # nothing can fit this tile: infeasible


def solve_dlsa(program: TileProgram, hint: Dlsa | None = None,
               time_limit: float | None = None, workers: int | None = None, seed: int = 0,
               groups: frozenset[str] = GROUPS, stop: threading.Event | None = None,
               below: int | None = None, target: int | None = None) -> DlsaSolution:
    """The best DLSA of `program` the model finds within the limit (or until `stop` is
    set); never worse than `hint` (which must be valid). With every group enabled and
    status optimal, it is the best DLSA there is. With `below` (cycles), only DLSAs
    faster than that are sought: status infeasible then proves there is none (bound =
    `below`), usually much sooner than an optimum would be proven. `time_limit`
    (seconds) covers building the model too (status "unknown" when that alone takes
    it); with `target` (cycles) the search ends at the first DLSA of at most that
    latency."""
    started = time.perf_counter()
    deadline = None if time_limit is None else started + time_limit
    hint_latency = None if hint is None else evaluate(program, hint).latency_cycles
    try:
        model = _Model(program, groups, deadline)
        if below is not None:
            model.model.add(model.makespan <= below - 1)
        if hint is not None:
            model.hint(hint)
    except TimeoutError:
        return DlsaSolution(hint, hint_latency, timed_out(started), None)
    left = seconds_left(deadline)
    if left is not None and left <= 0:
        return DlsaSolution(hint, hint_latency, timed_out(started), None)
    good_enough = None if target is None else (lambda sol: sol.objective <= target)
    status, solution = solve(model.model, left, workers, seed, stop, good_enough)
    dlsa = latency = None
    if status.has_solution:
        dlsa = model.decode(solution)
        try:
            ev = evaluate(program, dlsa)
            latency = ev.latency_cycles if ev.fits else None
        except ScheduleError:
            latency = None
        if latency is None:
            dlsa = None
    improved = latency is not None and (hint_latency is None or latency < hint_latency)
    if hint is not None and not improved:
        dlsa, latency = hint, hint_latency
    bound = int(status.bound) if status.bound is not None and groups == GROUPS else None
    if status.status == "infeasible" and groups == GROUPS:
        bound = below
    return DlsaSolution(dlsa, latency, status, bound)


#: A whole program is solved at once when its free-end literals number at most this.
WHOLE_MODEL_LITERALS = 40_000


def whole_model_fits(program: TileProgram) -> bool:
    """Whether the whole program is small enough for one DLSA model."""
    return sum(t.hi - t.lo for t in program.tensors) <= WHOLE_MODEL_LITERALS
