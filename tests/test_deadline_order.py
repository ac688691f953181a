"""The deadline (earliest-deadline-first) DRAM order: always a valid schedule of the same
living durations, and faster than release order where a store blocks a needed load."""

from __future__ import annotations

import random

import pytest
from brute import tiny_program

from mipsched.dlsa_starts import deadline_order, fastest_order, prefetch_dlsa
from mipsched.evaluate import buffer_profile, evaluate, latency
from mipsched.hw import load_hardware
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Dlsa
from mipsched.sim import simulate
from mipsched.workload.zoo.random_dags import random_dag

from handmade import program
from strategies import random_dlsa, random_lfa


def _check(prog, dlsa: Dlsa) -> None:
    """The deadline order of `dlsa` replays (no deadlock, stores before their reloads),
    the simulator agrees with its latency where the living durations fit the buffer,
    and fastest_order is the faster of the two."""
    order = deadline_order(prog, dlsa.living)
    assert sorted(order) == list(range(len(prog.tensors)))
    by_deadline = Dlsa(order, dlsa.living)
    ev = evaluate(prog, by_deadline)  # raises on a deadlock or a broken precedence
    if ev.fits:  # the simulator refuses an overflowing buffer, whatever the order
        assert simulate(prog, by_deadline).latency_cycles == ev.latency_cycles
    best, cycles = fastest_order(prog, dlsa)
    assert best.living == dlsa.living
    assert cycles == latency(prog, best) == min(ev.latency_cycles, latency(prog, dlsa))


@pytest.mark.parametrize("seed", range(150))
def test_valid_on_tiny_programs_from_any_dlsa(seed: int) -> None:
    rng = random.Random(seed)
    prog = tiny_program(rng)
    _check(prog, random_dlsa(prog, rng))


@pytest.mark.parametrize("seed", range(25))
def test_valid_on_lowered_random_nets(seed: int) -> None:
    rng = random.Random(seed)
    workload = random_dag(seed, n_layers=rng.randint(2, 8), batch=rng.choice([1, 4]))
    prog = Lowerer(workload, load_hardware("edge")).lower(random_lfa(workload, rng),
                                                           check=False)
    start = default_dlsa(prog)
    _check(prog, start)
    if max(buffer_profile(prog, start)) <= prog.buffer_capacity_bytes:
        _check(prog, prefetch_dlsa(prog, start))


def test_a_load_needed_sooner_goes_before_a_store_released_with_it() -> None:
    """Tile 0 (10 cycles) stores 100 bytes that nobody waits for; tile 1 (10 cycles) needs
    a 50-byte load released by tile 0 too (1 byte per cycle). Release order serves the
    store first (stores first on a tie): load 110-160, tiles end at 170 and 180. The
    deadline order serves the load first: load 10-60, tiles end at 70 and 80, store
    60-160."""
    prog = program([("a", 10), ("b", 10), ("c", 10)],
                   [{"kind": "store", "layer": "a", "bytes": 100, "producer": 0},
                    {"kind": "load", "layer": "b", "bytes": 50, "use": 1}])
    living = ((0, 3), (1, 2))
    by_release = Dlsa((0, 1), living)
    assert latency(prog, by_release) == 180
    assert deadline_order(prog, living) == (1, 0)
    best, cycles = fastest_order(prog, by_release)
    assert (best.order, cycles) == ((1, 0), 160)

