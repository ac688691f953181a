"""The simulator against the evaluator (two implementations of DESIGN §3 that must agree
exactly), and its diagnoses of invalid schedules."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mipsched.evaluate import Evaluation, evaluate
from mipsched.hw import load_hardware
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Dlsa
from mipsched.schedule.tile_program import TileProgram
from mipsched.sim import SimulationError, simulate
from mipsched.workload import zoo
from mipsched.workload.zoo.random_dags import random_dag

from handmade import program as handmade
from strategies import random_dlsa, random_lfa

EDGE = load_hardware("edge")
CLOUD = load_hardware("cloud")
#: edge with a 256 KiB buffer: some random schedules overflow, and both implementations
#: must reject exactly those
TIGHT = dataclasses.replace(EDGE, gbuf=dataclasses.replace(EDGE.gbuf, capacity_bytes=256 << 10))
Evaluator = Callable[[TileProgram, Dlsa], Evaluation]


def disagreements(program: TileProgram, dlsa: Dlsa, evaluator: Evaluator) -> list[str]:
    """Where the evaluator and the simulator differ on one schedule (empty: they agree).
    A schedule the evaluator finds over capacity must be rejected by the simulator as an
    overflow; otherwise every figure must match (integers equal, floats to 1e-9)."""
    ev = evaluator(program, dlsa)
    try:
        sim = simulate(program, dlsa)
    except SimulationError as err:
        if err.kind == "overflow" and not ev.fits:
            return []
        return [f"simulator rejected it ({err.kind}): {err}"]
    if not ev.fits:
        return ["evaluator sees an overflow the simulator does not"]
    out = []
    for key in ("latency_cycles", "peak_buffer_bytes", "stall_cycles"):
        if getattr(ev, key) != getattr(sim, key):
            out.append(f"{key}: evaluator {getattr(ev, key)} != simulator {getattr(sim, key)}")
    for key in ("energy_pj", "compute_busy", "dram_busy"):
        if getattr(ev, key) != pytest.approx(getattr(sim, key), rel=1e-9):
            out.append(f"{key}: evaluator {getattr(ev, key)} != simulator {getattr(sim, key)}")
    return out


workloads = st.one_of(
    st.builds(lambda s, n, b: random_dag(s, n_layers=n, batch=b),
              st.integers(0, 10_000), st.integers(2, 8), st.sampled_from([1, 2, 4])),
    st.builds(zoo.get, st.sampled_from(["chain3", "chain5", "resblock", "fsrcnn",
                                        "gpt2_small_decode"]),
              st.sampled_from([1, 2])),
)


def random_schedules(workload, hw, seed: int, count: int):
    rng = random.Random(seed)
    program = Lowerer(workload, hw).lower(random_lfa(workload, rng))
    dlsas = [default_dlsa(program)] + [random_dlsa(program, rng) for _ in range(count)]
    return program, dlsas


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workload=workloads, seed=st.integers(0, 2**32 - 1),
       hw=st.sampled_from([EDGE, CLOUD, TIGHT]))
def test_simulator_agrees_with_evaluator(workload, seed, hw) -> None:
    """200 examples x 4 schedules (default + 3 random orders and living durations) = 800
    schedules (about 600 valid, the rest over a tight buffer), on random DAGs and tiny zoo
    nets at batch 1-4, on edge, cloud and edge with 256 KiB."""
    program, dlsas = random_schedules(workload, hw, seed, 3)
    for dlsa in dlsas:
        assert disagreements(program, dlsa, evaluate) == []


def test_the_agreement_check_catches_a_broken_evaluator() -> None:
    """An evaluator that forgets store deadlines (every store's End read as 'no deadline')
    must be caught on the same kind of schedules."""
    def forgets_store_deadlines(program: TileProgram, dlsa: Dlsa) -> Evaluation:
        n = program.n_tiles
        living = tuple((s, n) if not t.is_load else (s, e)
                       for t, (s, e) in zip(program.tensors, dlsa.living, strict=True))
        return evaluate(program, Dlsa(dlsa.order, living))

    caught = 0
    for seed in range(40):
        wl = random_dag(seed, n_layers=6)
        program, dlsas = random_schedules(wl, EDGE, seed, 3)
        caught += sum(bool(disagreements(program, d, forgets_store_deadlines))
                      for d in dlsas)
    assert caught > 0
    # and the real evaluator passes the very same schedules
    for seed in range(40):
        wl = random_dag(seed, n_layers=6)
        program, dlsas = random_schedules(wl, EDGE, seed, 3)
        assert all(disagreements(program, d, evaluate) == [] for d in dlsas)


def test_energy_by_component_adds_up_and_static_power_counts() -> None:
    wl = zoo.get("resblock")
    program, (dlsa,) = random_schedules(wl, EDGE, 0, 0)
    sim = simulate(program, dlsa)
    assert set(sim.energy_by_component) == {"mac", "core_buffers", "gbuf", "vector", "dram"}
    assert sum(sim.energy_by_component.values()) == pytest.approx(sim.energy_pj, rel=1e-12)
    assert sim.energy_by_component["dram"] == pytest.approx(program.dram_bytes * 84.0)
    static = simulate(dataclasses.replace(program, static_pj_per_cycle=2.0), dlsa)
    assert static.energy_by_component["static"] == 2.0 * sim.latency_cycles


# --- diagnoses on the hand-worked SoMa Fig. 4 program ----------------------------------
TILES = [("A", 100), ("A", 100), ("B", 100), ("C", 50), ("E", 50), ("D", 50)]
TENSORS = [
    dict(kind="weight", layer="A", bytes=40, use=0, last=1),   # 0
    dict(kind="load", layer="A", bytes=30, use=0),             # 1
    dict(kind="load", layer="A", bytes=30, use=1),             # 2
    dict(kind="weight", layer="B", bytes=80, use=2),           # 3
    dict(kind="store", layer="E", bytes=120, producer=4),      # 4
]
LIVING = ((-1, 2), (-1, 1), (0, 2), (1, 3), (4, 6))


def test_stall_causes_name_the_transfer_waited_for() -> None:
    prog = handmade(TILES, TENSORS)
    late_weight = Dlsa((0, 1, 2, 3, 4), (*LIVING[:3], (2, 3), LIVING[4]))
    sim = simulate(prog, late_weight)
    (stall,) = [t for t in sim.stalls if t.pos == 2]
    assert stall.waited_for == 3 and stall.stall == 80
    assert sim.tiles[0].waited_for == 1  # tile 0 waits for its ifmap (loaded after W_A)


def test_overflow_diagnosis_names_time_tile_bytes_and_live_tensors() -> None:
    prog = handmade(TILES, TENSORS, capacity=150, onchip=[10] * 6)
    with pytest.raises(SimulationError) as err:
        simulate(prog, Dlsa((0, 1, 2, 3, 4), LIVING))
    assert err.value.kind == "overflow"
    message = str(err.value)
    assert "at cycle 170 when tile 1 (A #1) starts: 160 B in use, capacity 150 B, " \
           "over by 10 B" in message
    assert message.index("tensor 3 (load_weight of B) 80 B") < message.index(
        "tensor 0 (load_weight of A) 40 B")


def test_deadlock_diagnosis_names_the_cycle() -> None:
    prog = handmade(TILES, TENSORS)
    # W_B (released only when tile 1 ends) sits before I_A2, which tile 1 needs
    bad = Dlsa((0, 1, 3, 2, 4), (*LIVING[:3], (2, 3), LIVING[4]))
    with pytest.raises(SimulationError) as err:
        simulate(prog, bad)
    assert err.value.kind == "deadlock"
    assert str(err.value) == (
        "deadlock: tile 1 (A #1) waits for tensor 2 (load_ifmap of A), which is queued in "
        "the DRAM order behind tensor 3 (load_weight of B), which waits for tile 1 (A #1) "
        "to finish, which runs after tile 1 (A #1)")


def test_load_ordered_before_its_store_is_reported() -> None:
    prog = handmade([("A", 10), ("B", 10)],
                    [dict(kind="store", layer="A", bytes=5, producer=0),
                     dict(kind="load", layer="B", bytes=5, use=1)], precedence=[(0, 1)])
    with pytest.raises(SimulationError) as err:
        simulate(prog, Dlsa((1, 0), ((0, 2), (0, 2))))
    assert err.value.kind == "order"
    assert "tensor 1 (load_ifmap of B) is ordered before tensor 0 (store_ofmap of A)" in str(
        err.value)
