"""The NoC and DRAM traffic record of SET's reference (docs/set-model.md §1.4, §1.5, §3.6):
hand-computed link loads for unicast, multicast and DRAM transfers on a 4 x 4 mesh, the
port split, time and energy, layouts, and multicast against its unicasts (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mipsched.hw.tiled import load_tiled_hardware
from mipsched.tiled.noc import (
    MINUS_X,
    MINUS_Y,
    PLUS_X,
    PLUS_Y,
    FmapRange,
    LinkLoads,
    intersect_volume,
    link_target,
    multicast_tree,
    port_shares,
    xy_route,
)

HW = load_tiled_hardware("set-4x4")
PORTS = [(0, 0), (0, 1), (0, 2), (0, 3), (3, 0), (3, 1), (3, 2), (3, 3)]


def test_the_preset_lists_the_ports_in_the_references_order() -> None:
    assert [(p.x, p.y) for p in HW.dram.ports] == PORTS


def test_unicast_goes_along_x_then_along_y() -> None:
    loads = LinkLoads()
    loads.unicast((0, 0), (3, 2), 10)
    assert loads.links == {(0, 0, PLUS_X): 10, (1, 0, PLUS_X): 10, (2, 0, PLUS_X): 10,
                           (3, 0, PLUS_Y): 10, (3, 1, PLUS_Y): 10}
    assert loads.byte_hops == 50 and loads.dram_bytes == 0
    back = LinkLoads()
    back.unicast((3, 2), (0, 0), 10)        # not the same links reversed: x first again
    assert back.links == {(3, 2, MINUS_X): 10, (2, 2, MINUS_X): 10, (1, 2, MINUS_X): 10,
                          (0, 2, MINUS_Y): 10, (0, 1, MINUS_Y): 10}
    assert [link_target(k) for k in xy_route((3, 2), (0, 0))] == \
        [(2, 2), (1, 2), (0, 2), (0, 1), (0, 0)]
    same = LinkLoads()
    same.unicast((2, 2), (2, 2), 99)
    assert same == LinkLoads()


def test_a_multicast_to_a_row_shares_the_x_links() -> None:
    loads = LinkLoads()
    loads.multicast((0, 1), [(1, 1), (2, 1), (3, 1)], 7)
    assert loads.links == {(0, 1, PLUS_X): 7, (1, 1, PLUS_X): 7, (2, 1, PLUS_X): 7}
    assert loads.byte_hops == 21
    separate = LinkLoads()
    for dst in [(1, 1), (2, 1), (3, 1)]:
        separate.unicast((0, 1), dst, 7)
    assert separate.byte_hops == 42 and separate.busiest_link() == ((0, 1, PLUS_X), 21)


def test_a_multicast_tree_has_a_trunk_and_one_branch_per_column() -> None:
    # from (1, 1): trunk west to x = 0 and east to x = 3; columns 0: {0}, 1: {3}, 3: {0, 3}
    tree = multicast_tree((1, 1), [(3, 3), (0, 0), (1, 3), (3, 0)])
    assert sorted(tree) == sorted([
        (1, 1, MINUS_X), (1, 1, PLUS_X), (2, 1, PLUS_X),      # trunk: 3 links
        (0, 1, MINUS_Y),                                     # column 0
        (1, 1, PLUS_Y), (1, 2, PLUS_Y),                      # column 1
        (3, 1, MINUS_Y), (3, 1, PLUS_Y), (3, 2, PLUS_Y)])    # column 3
    loads = LinkLoads()
    loads.multicast((1, 1), [(3, 3), (0, 0), (1, 3), (3, 0), (1, 1)], 4)
    # (max(1,3) - min(1,0)) + (1 - 0) + (3 - 1) + (3 - 0) = 9 links; the source itself is free
    assert loads.byte_hops == 9 * 4 and set(loads.links.values()) == {4}
    with pytest.raises(ValueError, match="at least one destination"):
        loads.multicast((0, 0), [], 1)


def test_port_shares_differ_by_at_most_one() -> None:
    assert port_shares(10, 8) == [1, 1, 1, 2, 1, 1, 1, 2]
    assert port_shares(5, 8) == [0, 1, 0, 1, 1, 0, 1, 1]
    assert port_shares(16, 8) == [2] * 8 and port_shares(0, 3) == [0, 0, 0]
    with pytest.raises(ValueError):
        port_shares(-1, 8)


def test_a_dram_read_to_one_tile_comes_from_every_port() -> None:
    loads = LinkLoads()
    loads.from_dram(HW, [(1, 0)], 16)       # 2 bytes from each of the 8 ports
    # hops from the ports to (1, 0): left 1, 2, 3, 4; right 2, 3, 4, 5
    assert loads.byte_hops == 2 * 24 and loads.dram_bytes == 16
    # (1, 1) -> (1, 0) is on the routes from (0,1), (0,2), (0,3), (3,1), (3,2), (3,3)
    assert loads.busiest_link() == ((1, 1, MINUS_Y), 12)
    assert loads.links[(0, 0, PLUS_X)] == 2 and loads.links[(3, 0, MINUS_X)] == 2
    assert loads.links[(2, 0, MINUS_X)] == 2 and loads.links[(1, 3, MINUS_Y)] == 4
    assert sum(loads.links.values()) == loads.byte_hops
    assert loads.dram_cycles(HW) == 1 and loads.noc_cycles(HW) == 1


def test_a_dram_write_goes_to_every_port_x_first() -> None:
    loads = LinkLoads()
    loads.to_dram(HW, (1, 0), 16)
    assert loads.byte_hops == 2 * 24 and loads.dram_bytes == 16
    assert loads.links[(1, 0, MINUS_X)] == 8 and loads.links[(1, 0, PLUS_X)] == 8
    assert loads.links[(2, 0, PLUS_X)] == 8 and loads.links[(0, 0, PLUS_Y)] == 6
    assert loads.links[(3, 2, PLUS_Y)] == 2
    assert loads.busiest_link() == ((1, 0, PLUS_X), 8)     # ties: smallest (x, y, d)


def test_a_dram_multicast_counts_dram_bytes_once() -> None:
    everyone = [(x, y) for x in range(4) for y in range(4)]
    loads = LinkLoads()
    loads.from_dram(HW, everyone, 80)       # 10 bytes per port, each to all 16 tiles
    assert loads.dram_bytes == 80 and loads.byte_hops == 8 * 15 * 10
    # (a, 1) -> (a, 0) is on the trees of the ports of rows 1..3, left and right
    assert loads.links[(2, 1, MINUS_Y)] == 60 and loads.links[(2, 0, PLUS_Y)] == 20
    assert loads.links[(0, 2, PLUS_X)] == 10 and loads.links[(3, 2, MINUS_X)] == 10
    assert loads.busiest_link() == ((0, 1, MINUS_Y), 60)
    separate = LinkLoads()
    for tile in everyone:
        separate.from_dram(HW, [tile], 80)
    assert separate.dram_bytes == 16 * 80 and separate.byte_hops > loads.byte_hops
    assert loads.dram_cycles(HW) == 5 and separate.dram_cycles(HW) == 80


def test_time_and_energy() -> None:
    loads = LinkLoads({(0, 0, PLUS_X): 25, (1, 0, PLUS_X): 24}, byte_hops=49, dram_bytes=17)
    assert loads.noc_cycles(HW) == 2 and loads.dram_cycles(HW) == 2
    assert loads.cycles(HW) == 2
    assert loads.hop_energy_pj(HW) == pytest.approx(49 * 5.6)
    assert loads.dram_energy_pj(HW) == pytest.approx(17 * 60.0)
    assert loads.energy_pj(HW) == pytest.approx(49 * 5.6 + 17 * 60.0)
    assert LinkLoads(dram_bytes=16 * 1000).cycles(HW) == 1000
    assert LinkLoads({(0, 0, PLUS_Y): 24 * 7 + 1}).cycles(HW) == 8
    empty = LinkLoads()
    assert (empty.cycles(HW), empty.busiest_link(), empty.max_link_bytes()) == (0, None, 0)


def test_records_add_scale_and_divide() -> None:
    a, b = LinkLoads(), LinkLoads()
    a.unicast((0, 0), (2, 0), 7)
    b.from_dram(HW, [(1, 0)], 3)         # 1 byte from each of ports (0,2), (3,1), (3,3)
    assert b.byte_hops == 3 + 3 + 5
    total = a + b
    assert total.byte_hops == a.byte_hops + b.byte_hops and total.dram_bytes == 3
    assert total.links[(0, 0, PLUS_X)] == 7 and total.links[(1, 1, MINUS_Y)] == 3
    assert a.links == {(0, 0, PLUS_X): 7, (1, 0, PLUS_X): 7}       # operands unchanged
    three = a.scaled(3)
    assert three.links == {(0, 0, PLUS_X): 21, (1, 0, PLUS_X): 21} and three.byte_hops == 42
    half = a.divided(2)                     # each link and each total floored on its own
    assert half.links == {(0, 0, PLUS_X): 3, (1, 0, PLUS_X): 3} and half.byte_hops == 7
    assert a.divided(15) == LinkLoads() and a.scaled(0) == LinkLoads()
    with pytest.raises(ValueError):
        a.divided(0)
    with pytest.raises(ValueError):
        a.unicast((0, 0), (1, 0), -1)


def box(c: tuple[int, int], b: tuple[int, int] = (0, 1), h: tuple[int, int] = (0, 2),
        w: tuple[int, int] = (0, 2)) -> FmapRange:
    return FmapRange(c, b, h, w)


def test_intersection_volumes_across_batch_sizes() -> None:
    assert intersect_volume(box((0, 4)), box((2, 8)), 1, 1) == 2 * 1 * 2 * 2
    assert intersect_volume(box((0, 4)), box((4, 8)), 1, 1) == 0
    # producer samples [0, 4) of 8, consumer sub-batch of 2 samples: 4 match, per 2
    assert intersect_volume(box((0, 1), (0, 4)), box((0, 1), (0, 2)), 8, 2) == 4 * 4 // 4
    # producer of 1 sample feeding a consumer of 4: all 4 consumer samples match
    assert intersect_volume(box((0, 1), (0, 1)), box((0, 1), (0, 4)), 1, 4) == 4 * 4
    # samples are matched modulo the smaller batch: producer sample 2 of 4 is sample 0 of 2
    assert intersect_volume(box((0, 1), (2, 3)), box((0, 1), (0, 1)), 4, 2) == 4 // 2
    assert intersect_volume(box((0, 1), (1, 2)), box((0, 1), (0, 1)), 4, 2) == 0
    with pytest.raises(ValueError, match="multiple"):
        intersect_volume(box((0, 1)), box((0, 1)), 3, 2)


_SPAN = st.tuples(st.integers(0, 6), st.integers(0, 6)).map(lambda t: (min(t), max(t)))


def _sample_count(producer: FmapRange, consumer: FmapRange, pb: int, cb: int) -> int:
    """Brute force of the batch rule: every (producer sample, consumer sample) pair
    equal modulo the smaller batch, times the common c x h x w elements, per consumer
    batch when the producer's batch is the larger."""
    step = min(pb, cb)
    pairs = sum(1 for p in range(*producer.b) for c in range(*consumer.b)
                if p % step == c % step and (pb == cb and p == c or pb != cb))
    plane = 1
    for (a, b), (c, d) in zip((producer.c, producer.h, producer.w),
                              (consumer.c, consumer.h, consumer.w), strict=True):
        plane *= max(0, min(b, d) - max(a, c))
    total = pairs * plane
    return total // (pb // cb) if pb > cb else total


@settings(max_examples=300, deadline=None)
@given(st.tuples(_SPAN, _SPAN, _SPAN, _SPAN), st.tuples(_SPAN, _SPAN, _SPAN, _SPAN),
       st.sampled_from([(1, 1), (2, 2), (4, 4), (8, 2), (2, 8), (4, 1), (1, 4), (4, 2)]))
def test_intersection_volume_equals_a_count_of_matching_elements(p, c, batches) -> None:
    pb, cb = batches
    producer = FmapRange(p[0], (p[1][0] % pb, min(p[1][1], pb)), p[2], p[3])
    consumer = FmapRange(c[0], (c[1][0] % cb, min(c[1][1], cb)), c[2], c[3])
    assert intersect_volume(producer, consumer, pb, cb) == \
        _sample_count(producer, consumer, pb, cb)


def test_an_fmap_moves_from_producer_tiles_to_a_consumer_group() -> None:
    producers = [((0, 0), box((0, 4))), ((1, 0), box((4, 8)))]
    # the consumer's channels 8..15 are this producer's 0..7; its second group wants
    # channels 0..7 only (another producer's) and gets nothing from this one
    groups = [(box((8, 16)), [(3, 0), (3, 1)]), (box((0, 8)), [(2, 2)])]
    loads = LinkLoads()
    loads.between_layouts(producers, groups, producer_batch=1, consumer_batch=1, c_offset=8)
    assert loads.links == {(0, 0, PLUS_X): 16, (1, 0, PLUS_X): 32, (2, 0, PLUS_X): 32,
                           (3, 0, PLUS_Y): 32}
    assert loads.byte_hops == 16 * 4 + 16 * 3 and loads.dram_bytes == 0
    inside = LinkLoads()                     # a producer in the group serves itself free
    inside.between_layouts([((1, 0), box((0, 4)))], [(box((0, 4)), [(1, 0), (2, 0)])],
                           producer_batch=1, consumer_batch=1)
    assert inside.links == {(1, 0, PLUS_X): 16} and inside.byte_hops == 16


def test_layouts_to_and_from_dram() -> None:
    loads = LinkLoads()
    loads.read_layout(HW, [(box((0, 8)), [(0, 0)]), (box((0, 8)), [(1, 0), (1, 1)])],
                      channels=(2, 6))
    assert loads.dram_bytes == 2 * 16
    expect = LinkLoads()
    expect.from_dram(HW, [(0, 0)], 16)
    expect.from_dram(HW, [(1, 0), (1, 1)], 16)
    assert loads == expect
    nothing = LinkLoads()
    nothing.read_layout(HW, [(box((0, 8)), [(0, 0)])], channels=(8, 12))
    assert nothing == LinkLoads()
    out = LinkLoads()
    out.write_layout(HW, [((1, 0), box((0, 4))), ((2, 0), box((4, 4)))])
    expect = LinkLoads()
    expect.to_dram(HW, (1, 0), 16)
    assert out == expect


tiles = st.tuples(st.integers(0, 5), st.integers(0, 5))


@settings(max_examples=200, deadline=None)
@given(src=tiles, dsts=st.lists(tiles, min_size=1, max_size=12), n=st.integers(1, 1000))
def test_a_multicast_is_the_union_of_its_unicasts(src, dsts, n) -> None:
    tree = LinkLoads()
    tree.multicast(src, dsts, n)
    single = []
    for dst in dsts:
        one = LinkLoads()
        one.unicast(src, dst, n)
        single.append(one)
    together = sum(single, LinkLoads())
    assert tree.byte_hops <= together.byte_hops
    assert tree.byte_hops >= max(one.byte_hops for one in single)
    assert tree.max_link_bytes() <= together.max_link_bytes()
    assert set(tree.links) == {link for dst in dsts for link in xy_route(src, dst)}
    assert set(tree.links.values()) <= {n} and tree.byte_hops == n * len(tree.links)


@settings(max_examples=100, deadline=None)
@given(n=st.integers(0, 10**6), ports=st.integers(1, 24))
def test_port_shares_sum_to_the_transfer(n, ports) -> None:
    shares = port_shares(n, ports)
    assert sum(shares) == n and len(shares) == ports
    assert max(shares) - min(shares) <= 1
