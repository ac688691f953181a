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


def _faults(prog, dlsa: Dlsa) -> list[str]:
    """What is wrong with the deadline order of `dlsa` (empty: nothing). It must replay
    (evaluate raises on a deadlock or a store after its reload), serve every transfer
    once, agree with the simulator where the living durations fit the buffer, and
    fastest_order must return the faster of the two orders with its latency."""
    faults = []
    order = deadline_order(prog, dlsa.living)
    if sorted(order) != list(range(len(prog.tensors))):
        faults.append(f"order {order} does not serve every transfer once")
    by_deadline = Dlsa(order, dlsa.living)
    ev = evaluate(prog, by_deadline)
    if ev.fits and simulate(prog, by_deadline).latency_cycles != ev.latency_cycles:
        faults.append("the simulator disagrees with the evaluator")
    best, cycles = fastest_order(prog, dlsa)
    if best.living != dlsa.living:
        faults.append("fastest_order changed the living durations")
    if not cycles == latency(prog, best) == min(ev.latency_cycles, latency(prog, dlsa)):
        faults.append(f"fastest_order gave {cycles} cycles, not the faster order's")
    return faults


@pytest.mark.parametrize("seed", range(150))
def test_valid_on_tiny_programs_from_any_dlsa(seed: int) -> None:
    rng = random.Random(seed)
    prog = tiny_program(rng)
    assert _faults(prog, random_dlsa(prog, rng)) == []


@pytest.mark.parametrize("seed", range(25))
def test_valid_on_lowered_random_nets(seed: int) -> None:
    rng = random.Random(seed)
    workload = random_dag(seed, n_layers=rng.randint(2, 8), batch=rng.choice([1, 4]))
    prog = Lowerer(workload, load_hardware("edge")).lower(random_lfa(workload, rng),
                                                           check=False)
    start = default_dlsa(prog)
    assert _faults(prog, start) == []
    if max(buffer_profile(prog, start)) <= prog.buffer_capacity_bytes:
        assert _faults(prog, prefetch_dlsa(prog, start)) == []


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

