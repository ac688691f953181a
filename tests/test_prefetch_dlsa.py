"""The greedy prefetching DLSA: always valid when its start fits, and it does prefetch."""

from __future__ import annotations

import random

import pytest
from brute import tiny_program

from mipsched.dlsa_starts import prefetch_dlsa, tight_dlsa
from mipsched.evaluate import buffer_profile, evaluate
from mipsched.hw import load_hardware
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.lowering import Lowerer
from mipsched.sim import simulate
from mipsched.workload.zoo.random_dags import random_dag

from handmade import program
from strategies import random_dlsa, random_lfa


def _check_valid(prog, start) -> None:
    result = prefetch_dlsa(prog, start)
    ev = evaluate(prog, result)  # raises on a deadlock or a broken precedence
    assert ev.fits
    sim = simulate(prog, result)  # the simulator agrees it is a valid schedule
    assert sim.latency_cycles == ev.latency_cycles
    for tensor, (begin, end) in zip(prog.tensors, result.living, strict=True):
        assert tensor.lo <= tensor.free_end((begin, end)) <= tensor.hi


@pytest.mark.parametrize("seed", range(150))
def test_valid_on_tiny_programs_from_any_fitting_start(seed: int) -> None:
    rng = random.Random(seed)
    prog = tiny_program(rng)
    for _ in range(20):
        start = random_dlsa(prog, rng)
        if max(buffer_profile(prog, start)) <= prog.buffer_capacity_bytes:
            _check_valid(prog, start)
            return
    pytest.skip("no fitting random DLSA drawn")


@pytest.mark.parametrize("seed", range(100))
def test_tight_dlsa_holds_the_least_buffer_on_every_tile(seed: int) -> None:
    rng = random.Random(seed)
    prog = tiny_program(rng)
    tight = tight_dlsa(prog)
    least = buffer_profile(prog, tight)
    evaluate(prog, tight)  # valid: no deadlock, precedence kept
    if max(least) <= prog.buffer_capacity_bytes:
        assert simulate(prog, tight).peak_buffer_bytes == max(least)
    for _ in range(10):
        other = buffer_profile(prog, random_dlsa(prog, rng))
        assert all(a <= b for a, b in zip(least, other, strict=True))


@pytest.mark.parametrize("seed", range(25))
def test_valid_on_lowered_random_nets(seed: int) -> None:
    rng = random.Random(seed)
    workload = random_dag(seed, n_layers=rng.randint(2, 8), batch=rng.choice([1, 4]))
    hw = load_hardware("edge")
    prog = Lowerer(workload, hw).lower(random_lfa(workload, rng), check=False)
    start = default_dlsa(prog)
    if max(buffer_profile(prog, start)) > prog.buffer_capacity_bytes:
        pytest.skip("default DLSA of this LFA overflows")
    _check_valid(prog, start)


def test_prefetches_during_a_long_tile() -> None:
    """Tile 0 computes 100 cycles; tiles 1 and 2 each need a 50-byte load (1 byte/cycle).
    Double buffering loads tile 2's data only once tile 0 is done, so tile 2 waits for it:
    latency 100 + 50 + 1; prefetching both during tile 0 hides them: 100 + 1 + 1."""
    prog = program([("a", 100), ("b", 1), ("c", 1)],
                   [{"kind": "load", "layer": "b", "bytes": 50, "use": 1},
                    {"kind": "load", "layer": "c", "bytes": 50, "use": 2}], capacity=100)
    start = default_dlsa(prog)
    assert evaluate(prog, start).latency_cycles == 100 + 50 + 1
    result = prefetch_dlsa(prog, start)
    assert result.living == ((-1, 2), (-1, 3))
    assert evaluate(prog, result).latency_cycles == 102


def test_respects_the_capacity_it_is_given() -> None:
    """Same program, but tile 0 keeps 50 bytes on chip in a 100-byte buffer: only the first
    load fits beside it, so the second may not be prefetched into tile 0."""
    prog = program([("a", 100), ("b", 1), ("c", 1)],
                   [{"kind": "load", "layer": "b", "bytes": 50, "use": 1},
                    {"kind": "load", "layer": "c", "bytes": 50, "use": 2}], capacity=100,
                   onchip=[50, 0, 0])
    start = default_dlsa(prog)
    assert max(buffer_profile(prog, start)) <= 100
    result = prefetch_dlsa(prog, start)
    assert max(buffer_profile(prog, result)) <= 100
    assert result.living == ((-1, 2), (1, 3))  # b moves before tile 0, c cannot
    assert evaluate(prog, result).latency_cycles == 151
