"""Hand-worked timing examples (SoMa Fig. 4) and evaluator edge cases."""

from __future__ import annotations

import pytest

from mipsched.evaluate import DeadlockError, buffer_profile, evaluate, timeline
from mipsched.schedule.notation import Dlsa, ScheduleError
from mipsched.schedule.validity import check_buffer, check_dlsa_structure

from handmade import program

# SoMa Fig. 4: FLGs [A] (T=2), [B] (T=1), [C, E, D] (T=2); tiles in order:
TILES = [("A", 100), ("A", 100), ("B", 100), ("C", 50), ("E", 50), ("D", 50),
         ("C", 50), ("E", 50), ("D", 50)]
A1, A2, B, C1, E1, D1, C2, E2, D2 = range(9)
# tensors: W_A, I_A1, I_A2, W_B, O_E1 (store), 1 byte per cycle
TENSORS = [
    dict(kind="weight", layer="A", bytes=40, use=A1, last=A2),   # 0 W_A
    dict(kind="load", layer="A", bytes=30, use=A1),               # 1 I_A1
    dict(kind="load", layer="A", bytes=30, use=A2),               # 2 I_A2
    dict(kind="weight", layer="B", bytes=80, use=B),              # 3 W_B
    dict(kind="store", layer="E", bytes=120, producer=E1),        # 4 O_E1
]


def fig4(start_wb: int, end_oe1: int) -> Dlsa:
    living = ((-1, A2 + 1), (-1, A1 + 1), (A1, A2 + 1), (start_wb, B + 1), (E1, end_oe1))
    return Dlsa((0, 1, 2, 3, 4), living)


def test_prefetching_weight_one_tile_earlier_removes_the_stall_before_b() -> None:
    prog = program(TILES, TENSORS)
    late = timeline(prog, fig4(start_wb=B, end_oe1=len(TILES)))
    # W_B may only start once A2 is done: B waits its whole 80-cycle load.
    assert late.transfer_start[3] == late.tile_end[A2]
    assert late.tile_start[B] == late.tile_end[A2] + 80
    early = timeline(prog, fig4(start_wb=A2, end_oe1=len(TILES)))
    # Start = A2: released when A1 ends, loads during A2, B follows A2 at once.
    assert early.transfer_start[3] == early.tile_end[A1]
    assert early.tile_start[B] == early.tile_end[A2]
    assert evaluate(prog, fig4(A2, 9)).latency_cycles == (
        evaluate(prog, fig4(B, 9)).latency_cycles - 80)


def test_store_end_stalls_that_tile_until_the_store_is_done() -> None:
    prog = program(TILES, TENSORS)
    tl = timeline(prog, fig4(start_wb=A2, end_oe1=D1))
    store_done = tl.transfer_end[4]
    assert tl.transfer_start[4] == tl.tile_end[E1]  # released by its producer
    assert store_done == tl.tile_end[E1] + 120
    assert tl.tile_start[D1] == store_done  # D1 cannot start before O_E1 is stored
    free = timeline(prog, fig4(start_wb=A2, end_oe1=len(TILES)))
    assert free.tile_start[D1] == free.tile_end[E1]


def test_latency_counts_the_last_store() -> None:
    prog = program([("A", 10)], [dict(kind="store", layer="A", bytes=50, producer=0)])
    ev = evaluate(prog, Dlsa((0,), ((0, 1),)))
    assert ev.latency_cycles == 60
    assert ev.stall_cycles == 50
    assert ev.dram_busy == pytest.approx(50 / 60)


def test_deadlock_names_both_transfers() -> None:
    # I_A2 (needed by tile 1) ordered behind W_B, which is released only by tile 1.
    prog = program(TILES, TENSORS)
    bad = Dlsa((0, 1, 3, 2, 4), fig4(B, 9).living)
    with pytest.raises(DeadlockError, match=r"tensor 3 .*tile 1.*tensor 2"):
        evaluate(prog, bad)


def test_structure_errors_name_the_tensor() -> None:
    prog = program(TILES, TENSORS)
    good = fig4(A2, 9)
    with pytest.raises(ScheduleError, match="tensor 3 .*Start 3 out of range"):
        check_dlsa_structure(prog, Dlsa(good.order, (*good.living[:3], (3, 3), good.living[4])))
    with pytest.raises(ScheduleError, match="tensor 2 is missing"):
        check_dlsa_structure(prog, Dlsa((0, 1, 1, 3, 4), good.living))
    with pytest.raises(ScheduleError, match="End must be 2"):
        check_dlsa_structure(prog, Dlsa(good.order, ((-1, 5), *good.living[1:])))


def test_precedence_violation_is_reported() -> None:
    prog = program([("A", 10), ("B", 10)],
                   [dict(kind="store", layer="A", bytes=5, producer=0),
                    dict(kind="load", layer="B", bytes=5, use=1)], precedence=[(0, 1)])
    with pytest.raises(ScheduleError, match="tensor 1 .*ordered before tensor 0"):
        check_dlsa_structure(prog, Dlsa((1, 0), ((0, 2), (0, 2))))


def test_overflow_names_tile_bytes_and_live_tensors() -> None:
    prog = program(TILES, TENSORS, capacity=150, onchip=[10] * 9)
    dlsa = fig4(A2, 9)
    ev = evaluate(prog, dlsa)
    # tile 1 (A2) holds W_A 40 + I_A2 30 + W_B 80 + on-chip 10 = 160 B
    assert ev.overflow is not None and ev.overflow.tile == A2
    assert ev.overflow.bytes_over == 10
    with pytest.raises(ScheduleError, match=r"tile 1 \(A #1\): 160 B > capacity 150 B by 10 B"
                       r".*tensor 3 \(load_weight of B\) 80 B"):
        check_buffer(prog, dlsa, buffer_profile(prog, dlsa))
