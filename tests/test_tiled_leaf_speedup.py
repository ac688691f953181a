"""The fast paths of SET's leaf search (mipsched/tiled/leaf.py) against slow, plain
versions written here (docs/set-model.md §3.4, §3.6):

- hop counting: the byte-hops of every placement order of a partition, counted at once
  with numpy, equal a per-order count that builds each X-first tree as the union of its
  XY routes, link by link, and splits DRAM bytes over the ports with floor(n i / L);
- the lower bound used to prune partitions lies below the hops of every placement;
- the per-axis tiles and the array transfers equal a per-core construction with
  `ifm_range` and `intersect_volume`;
- pruning by the lower bound changes no search result.

Random partitions, placements and traffic on the 4 x 4 and 12 x 12 presets (hypothesis).
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mipsched.hw.tiled import TiledHardware, load_tiled_hardware
from mipsched.tiled import leaf, order_hops
from mipsched.tiled.leaf import Layout, Source
from mipsched.tiled.leaf_kinds import (
    LayerView,
    fmap_weight_range,
    ifm_range,
    layer_view,
    split_sources,
)
from mipsched.tiled.noc import FmapRange, intersect_volume
from mipsched.tiled.partitions import all_partitions, part_intv, placement_orders
from mipsched.tiled.structure import core_positions
from mipsched.workload.graph import Workload
from mipsched.workload.resolve import resolve_network

Tile = tuple[int, int]
HWS = {name: load_tiled_hardware(name) for name in ("set-4x4", "set-12x12")}
EMPTY = FmapRange((0, 0), (0, 0), (0, 0), (0, 0))


# --- the slow count --------------------------------------------------------------------------
def route(src: Tile, dst: Tile) -> list[tuple[Tile, Tile]]:
    """The links (from, to) of the XY route: along x on src's row, then along y on dst's
    column."""
    (x, y), links = src, []
    while x != dst[0]:
        step = 1 if dst[0] > x else -1
        links.append(((x, y), (x + step, y)))
        x += step
    while y != dst[1]:
        step = 1 if dst[1] > y else -1
        links.append(((x, y), (x, y + step)))
        y += step
    return links


def tree_links(src: Tile, dsts: list[Tile]) -> int:
    """Links of the X-first multicast tree: the union of the XY routes to every dst."""
    return len(set().union(*(route(src, d) for d in dsts)))


def shares(n: int, ports: int) -> list[int]:
    """n bytes over the ports: port i (1-based) gets floor(n i / L) - floor(n (i-1) / L)."""
    return [n * i // ports - n * (i - 1) // ports for i in range(1, ports + 1)]


def dram_read_hops(ports: list[Tile], dsts: list[Tile], n: int) -> int:
    """Each port's share of n bytes over its tree to dsts."""
    return sum(s * tree_links(p, dsts) for p, s in zip(ports, shares(n, len(ports)),
                                                       strict=True))


def dram_write_hops(ports: list[Tile], src: Tile, n: int) -> int:
    """Each port's share of n bytes over the route from src to the port."""
    return sum(s * len(route(src, p)) for p, s in zip(ports, shares(n, len(ports)),
                                                      strict=True))


def slow_hops(tr: order_hops.Traffic, pos: list[Tile], ports: list[Tile], wgt_div: int) -> int:
    """Byte-hops of one placement (`pos`: the tile of each ofm index), transfer by
    transfer: the weights' total floor-divided by wgt_div."""
    def group(members: tuple[int, ...]) -> list[Tile]:
        return [pos[i] for i in members]

    h = sum(dram_read_hops(ports, group(g), s) for s, g in tr.wgt) // wgt_div
    h += sum(dram_read_hops(ports, group(g), s) for s, g in tr.reads)
    h += sum(s * tree_links(src, group(g)) for s, src, g in tr.moves)
    return h + sum(dram_write_hops(ports, pos[i], s) for i, s in tr.writes)


def placement(part: tuple[int, ...], order: tuple[int, ...], cores: list[Tile]) -> list[Tile]:
    """`initPlacement`: the ofm indices (k, b, h, w order) visited with the order's first
    dimension outermost take consecutive cores."""
    pos: dict[tuple[int, ...], Tile] = {}
    for i, digits in enumerate(itertools.product(*(range(part[d]) for d in order))):
        pos[tuple(digits[order.index(d)] for d in range(4))] = cores[i]
    return [pos[k] for k in itertools.product(*(range(p) for p in part))]


def ports_of(hw: TiledHardware) -> list[Tile]:
    """The DRAM ports' tiles, in list order."""
    return [(p.x, p.y) for p in hw.dram.ports]


# --- random clusters and traffic ---------------------------------------------------------------
@st.composite
def clusters(draw: st.DrawFn, most: int = 48) -> tuple[TiledHardware, list[Tile]]:
    """A preset and a contiguous cluster of its cores (SET's snake numbering)."""
    hw = HWS[draw(st.sampled_from(sorted(HWS)))]
    stride = draw(st.sampled_from([s for s in (1, 2, 3, 4) if hw.mesh.cols % s == 0]))
    n = draw(st.integers(1, min(most, hw.n_tiles)))
    first = draw(st.integers(0, hw.n_tiles - n))
    return hw, core_positions(first, first + n, hw.mesh.cols, hw.mesh.rows, stride)


@st.composite
def partitions(draw: st.DrawFn, n: int) -> tuple[int, int, int, int]:
    """Any (K, B, H, W) split of n cores, the filtered-out ones included."""
    return draw(st.sampled_from(all_partitions(n)))


def random_groups(rng: random.Random, n: int) -> np.ndarray:
    """The ofm indices shuffled and cut into groups of equal size: (G, m)."""
    sizes = [m for m in range(1, n + 1) if n % m == 0]
    return np.array(rng.sample(range(n), n)).reshape(-1, rng.choice(sizes))


def random_bytes(rng: random.Random, count: int) -> np.ndarray:
    """Byte counts of one scale, a fifth of them 0."""
    big = rng.choice([30, 5_000, 3_000_000])
    return np.array([rng.randrange(big) if rng.random() < 0.8 else 0 for _ in range(count)],
                    np.int64)


def random_traffic(rng: random.Random, hw: TiledHardware, n: int) -> order_hops.Traffic:
    """Weights, reads and moves to random groups, writes from every core."""
    wgt = random_groups(rng, n)
    reads = [(g, random_bytes(rng, len(g)))
             for g in (random_groups(rng, n) for _ in range(rng.randrange(3)))]
    moves = []
    for _ in range(rng.randrange(3)):
        g = random_groups(rng, n)
        tiles = np.array([(rng.randrange(hw.mesh.cols), rng.randrange(hw.mesh.rows))
                          for _ in range(rng.randrange(1, 12))])
        sent = random_bytes(rng, len(g) * len(tiles)).reshape(len(g), len(tiles))
        moves.append((g, tiles, sent))
    cores = np.arange(n)[:, None]
    return order_hops.Traffic((wgt, random_bytes(rng, len(wgt))), reads, moves,
                         (cores, random_bytes(rng, n)), 0)


# --- hop counting ------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(clusters(), st.data(), st.randoms(use_true_random=False),
       st.sampled_from([1, 2, 8]))
def test_every_orders_hops_equal_the_slow_count(cluster, data, rng: random.Random,
                                                wgt_div: int) -> None:
    hw, cores = cluster
    part = data.draw(partitions(len(cores)))
    tr = random_traffic(rng, hw, len(cores))
    orders = placement_orders(part)
    mesh = order_hops.cluster_mesh(hw, cores)
    fast = order_hops.order_hops(tr, order_hops.order_cells(part, orders), mesh, wgt_div)
    slow = [slow_hops(tr, placement(part, o, cores), ports_of(hw), wgt_div) for o in orders]
    assert fast == slow


@settings(max_examples=60, deadline=None)
@given(clusters(), st.randoms(use_true_random=False), st.sampled_from([1, 2, 8]))
def test_the_lower_bound_holds_for_any_placement(cluster, rng: random.Random,
                                                 wgt_div: int) -> None:
    """Below the hops of random placements, not only of the placement orders."""
    hw, cores = cluster
    tr = random_traffic(rng, hw, len(cores))
    floor = order_hops.hops_floor(tr, order_hops.cluster_mesh(hw, cores), wgt_div)
    for _ in range(3):
        assert floor <= slow_hops(tr, rng.sample(cores, len(cores)), ports_of(hw), wgt_div)


def test_the_lower_bound_is_tight_for_a_whole_mesh_multicast() -> None:
    """A read into all 144 cores: every port's tree spans the mesh, 143 links."""
    hw = HWS["set-12x12"]
    cores = core_positions(0, 144, 12, 12, 2)
    everyone = np.arange(144)[None, :]
    tr = order_hops.Traffic((everyone[:, :0], np.zeros(0, np.int64)),
                       [(everyone, np.array([24_001]))], [],
                       (np.arange(144)[:, None], np.zeros(144, np.int64)), 24_001)
    mesh = order_hops.cluster_mesh(hw, cores)
    assert order_hops.hops_floor(tr, mesh, 1) == 24_001 * 143
    cells = order_hops.order_cells((1, 1, 1, 144), [(3, 2, 1, 0)])
    assert order_hops.order_hops(tr, cells, mesh, 1) == [24_001 * 143]


# --- tiles and transfers of real layers ----------------------------------------------------------
NETS = {name: resolve_network(name, 1, 1)
        for name in ("resnet50", "googlenet", "transformer_cell", "mobilenet_v2")}


def slow_tiling(v: LayerView, batch: int,
                part: tuple[int, int, int, int]) -> tuple[list, list, list, list]:
    """(ofm, ifm, wgt, fwgt) core by core, as the reference's `initLayouts`."""
    pk, pb, ph, pw = part
    cuts = [part_intv(v.k, pk), part_intv(batch, pb), part_intv(v.h, ph), part_intv(v.w, pw)]
    bhw = pb * ph * pw
    ofm, ifm, wgt, fwgt = [], [], [], []
    for k, b, h, w in itertools.product(range(pk), range(pb), range(ph), range(pw)):
        rng = FmapRange(*((c[i], c[i + 1]) for c, i in zip(cuts, (k, b, h, w), strict=True)))
        idx = len(ofm)
        ofm.append(rng)
        empty = rng.volume() == 0
        if v.kind != "conv" or k == 0:
            members = tuple(idx + kk * bhw for kk in range(pk)) if v.kind == "conv" else (idx,)
            ifm.append((EMPTY if empty else ifm_range(v, rng), members))
        if h or w:
            continue
        if v.fmap_wgt:
            fwgt.append((EMPTY if empty else fmap_weight_range(v, rng),
                         tuple(range(idx, idx + ph * pw))))
        elif v.weights_per_k and b == 0:
            wgt.append((0 if empty else (rng.c[1] - rng.c[0]) * v.weights_per_k,
                        tuple(range(idx, idx + bhw))))
    return ofm, ifm, wgt, fwgt


def slow_fetch(src: Source, lo: int, hi: int, ranges: list, batch: int, reads: list,
               moves: list) -> None:
    """Source `src` filling channels [lo, hi) of `ranges`, range by range, producer tile
    by producer tile."""
    for rng, members in ranges:
        if not src.direct:
            cut = rng._replace(c=(max(rng.c[0], lo), min(rng.c[1], hi)))
            if cut.volume() > 0:
                reads.append((cut.volume(), members))
            continue
        if rng.c[1] <= lo or (leaf.WRAP_CHANNEL_OFFSET and rng.c[0] < lo):
            continue
        wanted = rng._replace(c=(rng.c[0] - lo, rng.c[1] - lo))
        for tile, have in src.layout.tiles:
            n = intersect_volume(have, wanted, src.layout.batch, batch)
            if n > 0:
                moves.append((n, tile, members))


def random_layout(rng: random.Random, hw: TiledHardware, wl: Workload, name: str,
                  batch: int) -> Layout:
    """A producer's ofmap cut by a random partition onto random distinct tiles."""
    shape = wl.shape_of(name)
    n = rng.randint(1, min(24, hw.n_tiles))
    part = rng.choice(all_partitions(n))
    cuts = [part_intv(size, p) for size, p in zip((shape.c, batch, shape.h, shape.w), part,
                                                   strict=True)]
    tiles = rng.sample([(x, y) for x in range(hw.mesh.cols) for y in range(hw.mesh.rows)], n)
    ranges = [FmapRange(*((c[i], c[i + 1]) for c, i in zip(cuts, idx, strict=True)))
              for idx in itertools.product(*(range(p) for p in part))]
    return Layout(batch, tuple(zip(tiles, ranges, strict=True)))


def random_sources(rng: random.Random, hw: TiledHardware, wl: Workload, name: str,
                   batch: int) -> list[Source]:
    """The leaf's inputs as `mipsched.tiled.evaluate` lists them, each producer read
    from DRAM or (at this or another batch) from a random layout."""
    inputs = list(dict.fromkeys(wl.layers[name].inputs))
    sources = [Source(wl.shape_of(s).c) for s in inputs if s not in wl.layers]
    for src in (s for s in wl.layers if s in inputs):
        direct = rng.random() < 0.6
        other = rng.choice([batch, 2 * batch] + ([batch // 2] if batch % 2 == 0 else []))
        sources.append(Source(wl.shape_of(src).c, direct,
                              random_layout(rng, hw, wl, src, other) if direct else None))
    return sources


@st.composite
def leaves(draw: st.DrawFn) -> tuple[Workload, str, int]:
    """A layer the SET leaf models, from a zoo network, and a leaf batch."""
    net = draw(st.sampled_from(sorted(NETS)))
    wl = NETS[net]
    name = draw(st.sampled_from([n for n in wl.layers if _modelled(wl, n)]))
    return wl, name, draw(st.sampled_from([1, 2, 4]))


def _modelled(wl: Workload, name: str) -> bool:
    """Whether the SET leaf models the layer (`layer_view` does not refuse it)."""
    try:
        layer_view(wl, name)
    except ValueError:
        return False
    return True


@settings(max_examples=80, deadline=None)
@given(leaves(), clusters(most=32), st.data(), st.randoms(use_true_random=False),
       st.booleans(), st.sampled_from([1, 2]))
def test_tiles_transfers_and_hops_of_real_layers(leaf_case, cluster, data,
                                                 rng: random.Random, to_dram: bool,
                                                 wgt_div: int) -> None:
    wl, name, batch = leaf_case
    hw, cores = cluster
    v = layer_view(wl, name)
    part = data.draw(partitions(len(cores)))
    ofm, ifm, wgt, fwgt = slow_tiling(v, batch, part)
    t = leaf._tiling(v, batch, part)
    assert (t.ofm, t.ifm, t.wgt, t.fwgt) == (ofm, ifm, wgt, fwgt)
    sizes = [r.volume() for r, _ in ifm]
    mult = v.c if v.kind == "elt" else 1
    assert t.ifm_total == sum(sizes) * (part[0] if v.kind == "conv" else 1) * mult
    assert t.ifm_max == max(sizes) * mult
    assert t.wgt_total == (sum(s for s, _ in wgt) * part[1] * part[2] * part[3]
                           + sum(r.volume() for r, _ in fwgt) * part[2] * part[3])
    assert t.wgt_max == max([s for s, _ in wgt] + [r.volume() for r, _ in fwgt], default=0)

    sources, wgt_sources = split_sources(wl, name, random_sources(rng, hw, wl, name, batch))
    reads, moves = [], []
    cur = 0
    for src in wgt_sources:
        slow_fetch(src, cur, cur + src.channels, fwgt, batch, reads, moves)
        cur += src.channels
    cur = 0
    for src in sources:
        lo, hi = cur, cur + src.channels
        cur = 0 if v.kind == "elt" and hi == v.k else hi
        slow_fetch(src, lo, hi, ifm, batch, reads, moves)
    writes = [(i, r.volume()) for i, r in enumerate(ofm) if r.volume() > 0] if to_dram else []
    tr = leaf._traffic(v, t, batch, sources, wgt_sources, to_dram, wgt_div)
    assert (tr.wgt, tr.reads, tr.moves, tr.writes) == (
        [(s, g) for s, g in wgt if s > 0], reads, moves, writes)
    assert tr.dram == (sum(s for s, _ in wgt) // wgt_div + sum(s for s, _ in reads)
                       + sum(s for _, s in writes))

    orders = placement_orders(part)
    mesh = order_hops.cluster_mesh(hw, cores)
    hops = order_hops.order_hops(tr, order_hops.order_cells(part, orders), mesh, wgt_div)
    assert hops == [slow_hops(tr, placement(part, o, cores), ports_of(hw), wgt_div)
                    for o in orders]
    assert order_hops.hops_floor(tr, mesh, wgt_div) <= min(hops)


# --- pruning ----------------------------------------------------------------------------------
def _outcome(res: leaf.LeafResult | None) -> tuple | None:
    """What a search chose and what it costs."""
    if res is None:
        return None
    return (res.partition, res.order, res.cycles, res.energy_pj, res.record.byte_hops,
            res.record.dram_bytes, res.record.links, res.layout)


@settings(max_examples=25, deadline=None)
@given(leaves(), clusters(most=144), st.randoms(use_true_random=False), st.booleans())
def test_pruning_by_the_lower_bound_changes_no_result(leaf_case, cluster, rng: random.Random,
                                                      to_dram: bool) -> None:
    wl, name, batch = leaf_case
    hw, cores = cluster
    sources = random_sources(rng, hw, wl, name, batch)
    args = (hw, wl, name, batch, 2 * batch, cores, sources, to_dram, True)
    pruned = _outcome(leaf.search_leaf(*args))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(leaf, "hops_floor", lambda *_: 0)
        assert _outcome(leaf.search_leaf(*args)) == pruned
