"""Lowering: halo back-propagation, DRAM tensors at LG boundaries, on-chip bytes and
LFA validity errors."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mipsched.dlsa_starts import tight_dlsa
from mipsched.evaluate import buffer_profile, evaluate
from mipsched.formulations.bounds import placement_bound, program_bound
from mipsched.hw import load_hardware
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.lowering import Lowerer, lower
from mipsched.schedule.notation import Lfa, ScheduleError
from mipsched.schedule.placement import tight_peak
from mipsched.schedule.tile_program import TensorKind
from mipsched.schedule.tiling import tile_flg
from mipsched.workload import zoo
from mipsched.workload.graph import NetBuilder
from mipsched.workload.layer import Region
from mipsched.workload.zoo.random_dags import random_dag

from strategies import random_lfa

EDGE = load_hardware("edge")


def test_three_conv_chain_tiles_grow_by_the_halo() -> None:
    """chain3: three 3x3 'same' convs on 56x56; T=4 -> a 2x2 grid of 28x28 output tiles.
    Each conv back-propagates one row/column of halo on every inner side."""
    wl = zoo.get("chain3")
    tiles = tile_flg(wl, ("conv1", "conv2", "conv3"), 4)
    assert (tiles.grid.h_parts, tiles.grid.w_parts) == (2, 2)
    assert tiles.produced["conv3"][0] == Region(0, 1, 0, 28, 0, 28)
    assert tiles.produced["conv2"][0] == Region(0, 1, 0, 29, 0, 29)
    assert tiles.produced["conv1"][0] == Region(0, 1, 0, 30, 0, 30)
    assert tiles.reads["conv1"][0] == (Region(0, 1, 0, 31, 0, 31),)
    # the last tile grows up/left instead
    assert tiles.produced["conv1"][3] == Region(0, 1, 26, 56, 26, 56)
    assert tiles.reads["conv1"][3] == (Region(0, 1, 25, 56, 25, 56),)


def test_cocco_fig5_extent_and_offset() -> None:
    """Cocco Fig. 5 (1-D): node(-2) feeds node 0 (F=3, s=2) and node 1 (F=3, s=1), which
    also reads node(-1); node 2 (F=3, s=1) reads node(-1). With 2-row tiles of node 0
    (4-row tiles of nodes 1, 2 over the same span) Cocco gets Δ(-2) = 4 and
    x(-2) = max{f_0(2), f_1(4)} = max{5, 6} = 6; interior tiles here match."""
    b = NetBuilder("cocco_fig5")
    x = b.input("x", 4, 32, 1)
    m2 = b.conv("n_m2", x, 4, (1, 1))
    m1 = b.conv("n_m1", x, 4, (1, 1))
    b.conv("n0", m2, 4, (3, 1), stride=(2, 1), padding=(1, 0))
    both = b.concat("n1_in", [m2, m1])
    b.conv("n1", both, 4, (3, 1), padding=(1, 0))
    b.conv("n2", m1, 4, (3, 1), padding=(1, 0))
    wl = b.build()
    tiles = tile_flg(wl, tuple(wl.layers), 8)
    assert tiles.produced["n0"][2].height == 2
    assert tiles.produced["n1"][2].height == 4
    extents = [tiles.produced["n_m2"][i] for i in (2, 3)]
    assert [r.height for r in extents] == [6, 6]                 # x(-2) = 6
    assert extents[1].h0 - extents[0].h0 == 4                   # Δ(-2) = 4


def test_dram_cut_creates_store_load_pair_with_precedence() -> None:
    wl = zoo.get("chain3")
    fused = lower(wl, EDGE, Lfa(("conv1", "conv2", "conv3"), (), (1,), ()))
    kinds = sorted(t.kind for t in fused.tensors)
    # input load, three weights, one output store
    assert kinds == sorted([TensorKind.LOAD_IFMAP] + [TensorKind.LOAD_WEIGHT] * 3
                           + [TensorKind.STORE_OFMAP])
    cut = lower(wl, EDGE, Lfa(("conv1", "conv2", "conv3"), (1,), (1, 1), (1,)))
    stores = [t for t in cut.tensors if t.kind == TensorKind.STORE_OFMAP]
    assert {t.layer for t in stores} == {"conv1", "conv3"}
    (store1,) = [t for t in stores if t.layer == "conv1"]
    (load2,) = [t for t in cut.tensors
                if t.kind == TensorKind.LOAD_IFMAP and t.layer == "conv2"]
    assert (store1.id, load2.id) in cut.precedence
    assert store1.bytes == load2.bytes == 32 * 56 * 56
    # conv1's ofmap no longer lives on chip: the fused program holds more per tile
    assert max(fused.onchip_per_tile) > max(cut.onchip_per_tile)


def test_flc_inside_an_lg_aggregates_the_ofmap_on_chip() -> None:
    """FLC after conv1, no DRAM cut: conv1's whole ofmap stays on chip from its tile
    until conv2's last tile, and is never stored. Exact bytes per tile."""
    wl = zoo.get("chain3")
    prog = lower(wl, EDGE, Lfa(("conv1", "conv2", "conv3"), (1,), (1, 4), ()))
    assert not any(t.layer == "conv1" and t.kind == TensorKind.STORE_OFMAP
                   for t in prog.tensors)
    tiles = tile_flg(wl, ("conv2", "conv3"), 4)
    conv1 = 32 * 56 * 56
    expected = [conv1]
    for i in range(4):
        conv2_tile = tiles.produced["conv2"][i].elems(32)  # lives until conv3 tile i
        expected += [conv1 + conv2_tile, conv1 + conv2_tile]
    expected[-1] -= conv1  # conv3 #3 runs after conv2's last tile: conv1 is freed
    expected[-2] = conv1 + tiles.produced["conv2"][3].elems(32)
    assert prog.onchip_per_tile == expected
    assert prog.n_tiles == 1 + 4 * 2


def test_weights_live_from_first_to_last_tile_of_their_layer() -> None:
    wl = zoo.get("chain3")
    prog = lower(wl, EDGE, Lfa(("conv1", "conv2", "conv3"), (), (4,), ()))
    (w2,) = [t for t in prog.tensors if t.kind == TensorKind.LOAD_WEIGHT
             and t.layer == "conv2"]
    assert (w2.first_use, w2.last_use) == (1, 10)
    assert w2.bytes == 32 * 32 * 9


@pytest.mark.parametrize(("lfa", "message"), [
    (Lfa(("conv2", "conv1", "conv3"), (1, 2), (1, 1, 1), (1, 2)), "not topological.*conv2"),
    (Lfa(("conv1", "conv2"), (1,), (1, 1), (1,)), "misses layer 'conv3'"),
    (Lfa(("conv1", "conv2", "convX"), (1,), (1, 1), ()), "unknown layer 'convX'"),
    (Lfa(("conv1", "conv2", "conv3"), (1,), (1, 1), (2,)), "DRAM cut 2 .*conv3.*not in the FLC"),
    (Lfa(("conv1", "conv2", "conv3"), (1,), (1,), ()), "2 FLGs need as many tiling numbers"),
    (Lfa(("conv1", "conv2", "conv3"), (3,), (1, 1), ()), "FLC 3 out of range"),
    (Lfa(("conv1", "conv2", "conv3"), (), (0,), ()), "tiling number must be >= 1"),
])
def test_invalid_lfa_names_the_offender(lfa: Lfa, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        lower(zoo.get("chain3"), EDGE, lfa)


def test_tiling_number_that_does_not_divide_the_work() -> None:
    wl = zoo.get("resnet50")
    order = tuple(wl.layers)
    lfa = Lfa(order, (len(order) - 1,), (1, 2), (len(order) - 1,))  # fc: 1x1 output
    with pytest.raises(ScheduleError, match=r"tiling number 2 .*\[fc \.\. fc\].*batch 1"):
        lower(wl, EDGE, lfa)


def test_unfused_resnet50_default_schedule_fits_and_counts_every_weight() -> None:
    wl = zoo.get("resnet50")
    prog = lower(wl, EDGE, Lfa.unfused(tuple(wl.layers)))
    weights = sum(t.bytes for t in prog.tensors if t.kind == TensorKind.LOAD_WEIGHT)
    assert weights == wl.total_weight_bytes
    ev = evaluate(prog, default_dlsa(prog))
    assert ev.fits
    assert ev.latency_cycles >= max(prog.compute_cycles, prog.dram_cycles)


@pytest.mark.parametrize(("t_producer", "t_consumer"), [(4, 2), (2, 4), (3, 4), (16, 1)])
def test_precedence_links_each_load_to_exactly_the_stores_it_reads(
        t_producer: int, t_consumer: int) -> None:
    """Brute force: a load of conv1's ofmap must follow every store whose share of the
    ofmap intersects the region the load reads (halo included), and no other."""
    wl = zoo.get("chain3")
    order = ("conv1", "conv2", "conv3")
    prog = lower(wl, EDGE, Lfa(order, (1,), (t_producer, t_consumer), (1,)))
    producer = tile_flg(wl, ("conv1",), t_producer)
    consumer = tile_flg(wl, ("conv2", "conv3"), t_consumer)
    stores = [t for t in prog.tensors if t.layer == "conv1" and t.kind == TensorKind.STORE_OFMAP]
    loads = [t for t in prog.tensors if t.layer == "conv2" and t.kind == TensorKind.LOAD_IFMAP]
    expected = set()
    for load in loads:
        (read,) = consumer.reads["conv2"][load.tile]
        for store in stores:
            share = producer.share["conv1"][store.tile]
            if (share.h0 < read.h1 and read.h0 < share.h1 and share.w0 < read.w1
                    and read.w0 < share.w1):
                expected.add((store.id, load.id))
    assert set(prog.precedence) == expected
    assert len(stores) == t_producer and len(loads) == t_consumer


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 9), cut_chance=st.sampled_from([0.2, 0.6]))
def test_tight_peak_is_the_tight_dlsas_peak(seed: int, n: int, cut_chance: float) -> None:
    """placement.tight_peak, found before the program is built, is the peak buffer of the
    lowered program's tight DLSA (the least any DLSA holds), on random DAGs and LFAs with
    ofmaps held across FLGs of an LG and DRAM traffic between LGs; the placement's
    latency bound and energy are the program's, to the last bit."""
    wl = random_dag(seed, n_layers=n)
    lowerer = Lowerer(wl, EDGE)
    lfa = random_lfa(wl, random.Random(seed), tilings=(1, 2, 4), cut_chance=cut_chance)
    try:
        placed = lowerer.place(lfa)
    except ScheduleError:
        return
    program = lowerer.lower_placed(placed)
    assert tight_peak(placed) == max(buffer_profile(program, tight_dlsa(program)))
    assert program.tiles == lowerer.lower(lfa).tiles
    assert placement_bound(placed) == program_bound(program)
    assert placed.energy_pj(EDGE.dram.energy_pj_per_byte) == program.energy_pj
