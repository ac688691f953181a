"""NoC and DRAM traffic of a tiled machine, as SET's reference code records it
(docs/set-model.md §1.4, §1.5, §3.6; the reference's `NoC` class, `src/noc.cpp`).

Units: bytes (the reference's words: one 8-bit word is one byte at INT8), cycles, pJ.

Positions. A tile is (x, y): x the column 0..cols-1, y the row 0..rows-1, as in
`mipsched.hw.tiled`. A link is directed and named by its source router and direction,
(x, y, d), with the reference's direction indices (`HopCount::get_idx`):
    PLUS_X  = 0: (x, y) -> (x + 1, y)
    MINUS_Y = 1: (x, y) -> (x, y - 1)   (towards row 0)
    MINUS_X = 2: (x, y) -> (x - 1, y)
    PLUS_Y  = 3: (x, y) -> (x, y + 1)
A link's load is the bytes it carries; links that carry none are not stored.

The rules (each stated again where it is implemented):
- Unicast src -> dst (XY routing): along x on row src.y, then along y on column dst.x;
  every link of the path carries the n bytes; byte-hops += (|dx| + |dy|) x n.
- Multicast src -> D: the union of the XY routes from src to every tile of D (an
  X-first tree: a trunk along row src.y, one branch per destination column); every link
  of the tree carries the n bytes once. A destination equal to src costs nothing.
- DRAM read of n bytes to D (one tile or a multicast group): the n bytes are split over
  all ports of `hw.dram.ports`, in list order, port i of L (1-based) sending
  floor(n i / L) - floor(n (i - 1) / L) bytes; each port routes its share to D by
  unicast (one tile) or multicast from its own tile (a port sits on an edge tile's
  router: no extra link). DRAM bytes += n, once, whatever the number of receivers.
- DRAM write of n bytes from a tile: split over the ports the same way, each share
  unicast from the tile to the port's tile. DRAM bytes += n.
- Between two layers' tiles (`between_layouts`): every producer tile sends its part of
  every consumer multicast group's range to that group; only byte-hops and link loads.
- Records add and multiply by an integer exactly; `divided(k)` floors every link load and
  each total on its own (the reference's `NoC::div`, used for weights).
- NoC time = ceil(busiest link's bytes / hw.noc.link_bytes_per_cycle) cycles; DRAM time
  = ceil(DRAM bytes / hw.dram.bytes_per_cycle) cycles (DRAM bandwidth is the ports'
  aggregate; ports have no bandwidth of their own); hop energy = byte-hops x
  hw.noc.hop_pj_per_byte pJ; DRAM energy = DRAM bytes x hw.dram.energy_pj_per_byte pJ
  (reads and writes alike).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

from mipsched.hw.tiled import TiledHardware

PLUS_X, MINUS_Y, MINUS_X, PLUS_Y = 0, 1, 2, 3
"""Link directions, the reference's indices (§1.5)."""

Tile = tuple[int, int]
"""(x, y): column, row."""
Link = tuple[int, int, int]
"""(x, y, direction): a directed link named by its source router."""
Interval = tuple[int, int]
"""Half-open [from, to) along one fmap dimension."""

_STEP = {PLUS_X: (1, 0), MINUS_Y: (0, -1), MINUS_X: (-1, 0), PLUS_Y: (0, 1)}


def link_target(link: Link) -> Tile:
    """The router a link leads to."""
    x, y, d = link
    dx, dy = _STEP[d]
    return x + dx, y + dy


def xy_route(src: Tile, dst: Tile) -> list[Link]:
    """The links of the XY route src -> dst (the reference's `unicastCalc`): first along
    x on row src.y (from src.x to dst.x), then along y on column dst.x (from src.y to
    dst.y). Empty when src == dst."""
    (sx, sy), (tx, ty) = src, dst
    d, step = (PLUS_X, 1) if tx > sx else (MINUS_X, -1)
    links = [(x, sy, d) for x in range(sx, tx, step)]
    d, step = (PLUS_Y, 1) if ty > sy else (MINUS_Y, -1)
    links += [(tx, y, d) for y in range(sy, ty, step)]
    return links


def multicast_tree(src: Tile, dsts: Iterable[Tile]) -> list[Link]:
    """The links of the X-first multicast tree from src to every tile of dsts (the
    reference's `multicastCalc`), each once: a trunk on row src.y from src.x out to the
    smallest and to the largest destination x, then for every destination column a a
    branch on column a from src.y out to the smallest and to the largest destination y
    of that column. This is exactly the union of the XY routes src -> d; its length is
    (max(src.x, xmax) - min(src.x, xmin)) + sum over columns a of
    (max(src.y, ymax_a) - min(src.y, ymin_a)) links. ValueError if dsts is empty."""
    columns: dict[int, list[int]] = {}
    for x, y in dsts:
        columns.setdefault(x, []).append(y)
    if not columns:
        raise ValueError("a multicast needs at least one destination")
    sx, sy = src
    links = [(x, sy, MINUS_X) for x in range(sx, min(columns), -1)]
    links += [(x, sy, PLUS_X) for x in range(sx, max(columns))]
    for a in sorted(columns):
        ys = columns[a]
        links += [(a, y, MINUS_Y) for y in range(sy, min(ys), -1)]
        links += [(a, y, PLUS_Y) for y in range(sy, max(ys))]
    return links


@lru_cache(maxsize=1 << 16)
def _route(src: Tile, dst: Tile) -> tuple[Link, ...]:
    """`xy_route`, memoised (records repeat the same routes many times)."""
    return tuple(xy_route(src, dst))


@lru_cache(maxsize=4096)
def _tree(src: Tile, dsts: tuple[Tile, ...]) -> tuple[Link, ...]:
    """`multicast_tree`, memoised."""
    return tuple(multicast_tree(src, dsts))


def port_shares(n: int, ports: int) -> list[int]:
    """How n bytes are split over `ports` DRAM ports (the reference's
    `unicast_from_dram` and kin): port i (1-based) gets floor(n i / ports) -
    floor(n (i - 1) / ports) bytes, so the shares sum to n and differ by at most 1 (the
    larger ones where the running floor steps up, e.g. 10 over 8: 1,1,1,2,1,1,1,2)."""
    _check_bytes(n)
    if ports < 1:
        raise ValueError(f"{ports} DRAM ports: at least one is needed")
    return [n * i // ports - n * (i - 1) // ports for i in range(1, ports + 1)]


class FmapRange(NamedTuple):
    """A box of an fmap (the reference's `fmap_range`): half-open intervals along the
    channels c, the samples b, the rows h and the columns w. Its volume is in bytes (one
    byte per element at INT8)."""

    c: Interval
    b: Interval
    h: Interval
    w: Interval

    def volume(self) -> int:
        """Elements (bytes) in the box; 0 if any interval is empty."""
        size = 1
        for lo, hi in self:
            size *= max(0, hi - lo)
        return size


def intersect_volume(producer: FmapRange, consumer: FmapRange, producer_batch: int,
                     consumer_batch: int) -> int:
    """Bytes of a producer ofmap tile a consumer range needs (the reference's
    `calc_intersect`, §3.6 "different batch sizes"); the b intervals lie in [0, batch)
    of their own node's batch. Same batches: the volume of the plain intersection.
    Otherwise the volume is `sample_overlap` x the intersection of c, h, w, and when the
    producer's batch is the larger it is then floor-divided by producer_batch /
    consumer_batch (expressed per consumer batch)."""
    (pc0, pc1), _, (ph0, ph1), (pw0, pw1) = producer
    (cc0, cc1), _, (ch0, ch1), (cw0, cw1) = consumer
    if min(pc1, cc1) <= max(pc0, cc0) or min(ph1, ch1) <= max(ph0, ch0) \
            or min(pw1, cw1) <= max(pw0, cw0):
        return 0
    plane = ((min(pc1, cc1) - max(pc0, cc0)) * (min(ph1, ch1) - max(ph0, ch0))
             * (min(pw1, cw1) - max(pw0, cw0)))
    volume = sample_overlap(producer.b, consumer.b, producer_batch, consumer_batch) * plane
    if producer_batch > consumer_batch:
        volume //= producer_batch // consumer_batch
    return volume


def sample_overlap(producer: Interval, consumer: Interval, producer_batch: int,
                   consumer_batch: int) -> int:
    """Samples a producer's b interval and a consumer's have in common (`calc_intersect`
    before its division). Same batches: the length of the plain intersection. Otherwise
    the larger batch must be a multiple of the smaller; the smaller side's interval is
    shifted by multiples of the smaller batch across the larger side's interval and the
    overlapping samples are counted."""
    (pb0, pb1), (cb0, cb1) = producer, consumer
    if producer_batch == consumer_batch:
        return max(0, min(pb1, cb1) - max(pb0, cb0))
    small, large, step = (((cb0, cb1), (pb0, pb1), consumer_batch)
                          if producer_batch > consumer_batch
                          else ((pb0, pb1), (cb0, cb1), producer_batch))
    if step < 1 or max(producer_batch, consumer_batch) % step:
        raise ValueError(f"batches {producer_batch} and {consumer_batch}: the larger must "
                         "be a multiple of the smaller")
    (s_from, s_to), (l_from, l_to) = small, large
    matched = 0
    while s_from < l_to:
        if s_to > l_from:
            matched += min(s_to, l_to) - max(s_from, l_from)
        s_from, s_to = s_from + step, s_to + step
    return matched


@dataclass
class LinkLoads:
    """The traffic record of a piece of work (the reference's `NoC` with per-link
    counts): bytes per directed link, total byte-hops (the sum of bytes x links crossed)
    and DRAM bytes (reads and writes). Built by the routing methods below, in place."""

    links: dict[Link, int] = field(default_factory=dict)
    """Bytes carried by each directed link (only links with bytes > 0)."""
    byte_hops: int = 0
    """Sum over transfers of bytes x links crossed (bytes x hops). Equal to the sum of
    `links` until `divided` floors the two separately."""
    dram_bytes: int = 0
    """Bytes read from or written to DRAM."""

    # -- routing ------------------------------------------------------------------------

    def _load(self, links: Sequence[Link], n: int) -> None:
        """Every link of `links` carries n more bytes; byte-hops += len(links) x n."""
        if n == 0:
            return
        loads = self.links
        get = loads.get
        for link in links:
            loads[link] = get(link, 0) + n
        self.byte_hops += len(links) * n

    def unicast(self, src: Tile, dst: Tile, n: int) -> None:
        """n bytes from src to dst on the XY route (`xy_route`): each of its |dx| + |dy|
        links carries n bytes; byte-hops += (|dx| + |dy|) x n."""
        _check_bytes(n)
        self._load(_route(src, dst), n)

    def multicast(self, src: Tile, dsts: Iterable[Tile], n: int) -> None:
        """n bytes from src to every tile of dsts over the X-first tree
        (`multicast_tree`, the union of the XY routes): each tree link carries n bytes
        once; byte-hops += tree links x n."""
        _check_bytes(n)
        self._load(_tree(src, tuple(dsts)), n)

    def send(self, src: Tile, dsts: Sequence[Tile], n: int) -> None:
        """n bytes from src to a group: unicast to a group of one tile, multicast
        otherwise (the reference's choice by group size; the loads are the same)."""
        if len(dsts) == 1:
            self.unicast(src, dsts[0], n)
        else:
            self.multicast(src, dsts, n)

    def from_dram(self, hw: TiledHardware, dsts: Sequence[Tile], n: int) -> None:
        """Read n bytes from DRAM into every tile of dsts (the reference's
        `unicast_from_dram` / `multicast_from_dram`): `port_shares(n, L)` over the L
        ports of hw.dram.ports in list order, each share sent from the port's tile to
        dsts (`send`). DRAM bytes += n, once for the whole group."""
        for port, share in zip(hw.dram.ports, port_shares(n, len(hw.dram.ports)),
                               strict=True):
            self.send((port.x, port.y), dsts, share)
        self.dram_bytes += n

    def to_dram(self, hw: TiledHardware, src: Tile, n: int) -> None:
        """Write n bytes from tile src to DRAM (the reference's `unicast_to_dram`):
        `port_shares(n, L)` over the ports in list order, each share unicast from src to
        the port's tile. DRAM bytes += n."""
        for port, share in zip(hw.dram.ports, port_shares(n, len(hw.dram.ports)),
                               strict=True):
            self.unicast(src, (port.x, port.y), share)
        self.dram_bytes += n

    # -- whole layouts --------------------------------------------------------------------

    def read_layout(self, hw: TiledHardware,
                    groups: Iterable[tuple[FmapRange, Sequence[Tile]]],
                    channels: Interval | None = None) -> None:
        """Read from DRAM every range of a layout (the reference's `fromRemoteMem`): one
        `from_dram` per (range, multicast group) with the range's volume, restricted to
        the channels [from, to) when given (a weight tile, an external input, a shortcut
        producer's channel slice). Empty ranges are skipped. The partition into ranges and
        groups is the caller's (§3.4)."""
        for rng, tiles in groups:
            if channels is not None:
                lo, hi = channels
                rng = rng._replace(c=(max(rng.c[0], lo), min(rng.c[1], hi)))
            size = rng.volume()
            if size > 0:
                self.from_dram(hw, tiles, size)

    def write_layout(self, hw: TiledHardware,
                     tiles: Iterable[tuple[Tile, FmapRange]]) -> None:
        """Write an ofmap layout to DRAM (the reference's `toRemoteMem`): one `to_dram`
        per (tile, its ofmap range) with the range's volume; empty ranges are skipped."""
        for tile, rng in tiles:
            size = rng.volume()
            if size > 0:
                self.to_dram(hw, tile, size)

    def between_layouts(self, producer_tiles: Iterable[tuple[Tile, FmapRange]],
                        consumer_groups: Iterable[tuple[FmapRange, Sequence[Tile]]], *,
                        producer_batch: int, consumer_batch: int,
                        c_offset: int = 0) -> None:
        """Move a producer's ofmap to a consumer's ifmap over the NoC (the reference's
        `betweenLayout`). producer_tiles: (tile, its ofmap range) per producer core, in
        the producer's channel numbering; consumer_groups: (ifmap range, the cores that
        need it) per multicast group, in the consumer's channel numbering, where this
        producer's channels start at c_offset. For every group whose range reaches above
        c_offset, its range is shifted down by c_offset, and every producer tile with
        v = `intersect_volume`(tile range, shifted range, batches) > 0 sends v bytes
        from its tile to the group (`send`; a producer tile in the group gets its own
        share with 0 hops). Byte-hops and link loads only: no DRAM bytes."""
        producers = list(producer_tiles)
        for rng, tiles in consumer_groups:
            if rng.c[1] <= c_offset:
                continue
            wanted = rng._replace(c=(rng.c[0] - c_offset, rng.c[1] - c_offset))
            for src, have in producers:
                v = intersect_volume(have, wanted, producer_batch, consumer_batch)
                if v > 0:
                    self.send(src, tiles, v)

    # -- arithmetic -----------------------------------------------------------------------

    def __add__(self, other: LinkLoads) -> LinkLoads:
        """The two records together: link loads, byte-hops and DRAM bytes summed."""
        total = self.scaled(1)
        total += other
        return total

    def __iadd__(self, other: LinkLoads) -> LinkLoads:
        """Adds `other` into this record."""
        for link, n in other.links.items():
            self.links[link] = self.links.get(link, 0) + n
        self.byte_hops += other.byte_hops
        self.dram_bytes += other.dram_bytes
        return self

    def scaled(self, k: int) -> LinkLoads:
        """The record of k repetitions: every number x k (exact integers)."""
        _check_bytes(k)
        if k == 0:
            return LinkLoads()
        return LinkLoads({link: n * k for link, n in self.links.items()},
                         self.byte_hops * k, self.dram_bytes * k)

    def divided(self, k: int) -> LinkLoads:
        """The reference's `NoC::div(k)` (weights loaded once per whole batch, §3.2):
        every link load, the byte-hops and the DRAM bytes each floor-divided by k on its
        own (so byte-hops may exceed the sum of the floored links)."""
        if k < 1:
            raise ValueError(f"cannot divide a traffic record by {k}")
        return LinkLoads({link: n // k for link, n in self.links.items() if n >= k},
                         self.byte_hops // k, self.dram_bytes // k)

    # -- time and energy ------------------------------------------------------------------

    def busiest_link(self) -> tuple[Link, int] | None:
        """(link, bytes) of the most loaded link, ties to the smallest (x, y, direction);
        None when no link carries anything."""
        if not self.links:
            return None
        return min(self.links.items(), key=lambda item: (-item[1], item[0]))

    def max_link_bytes(self) -> int:
        """Bytes on the most loaded link (0 without traffic)."""
        return max(self.links.values(), default=0)

    def noc_cycles(self, hw: TiledHardware) -> int:
        """ceil(max link bytes / hw.noc.link_bytes_per_cycle), cycles (`NoC::get_time`'s
        NoC term; the reference applies it at segment level only, §3.7)."""
        return _ceil_div(self.max_link_bytes(), hw.noc.link_bytes_per_cycle)

    def dram_cycles(self, hw: TiledHardware) -> int:
        """ceil(DRAM bytes / hw.dram.bytes_per_cycle), cycles: all ports share the one
        aggregate bandwidth."""
        return _ceil_div(self.dram_bytes, hw.dram.bytes_per_cycle)

    def cycles(self, hw: TiledHardware) -> int:
        """max(NoC time, DRAM time), cycles (`NoC::get_time` with per-link counts)."""
        return max(self.noc_cycles(hw), self.dram_cycles(hw))

    def hop_energy_pj(self, hw: TiledHardware) -> float:
        """byte-hops x hw.noc.hop_pj_per_byte, pJ (no router or injection term)."""
        return self.byte_hops * hw.noc.hop_pj_per_byte

    def dram_energy_pj(self, hw: TiledHardware) -> float:
        """DRAM bytes x hw.dram.energy_pj_per_byte, pJ (reads and writes alike)."""
        return self.dram_bytes * hw.dram.energy_pj_per_byte

    def energy_pj(self, hw: TiledHardware) -> float:
        """Hop energy + DRAM energy, pJ (`NoC::get_cost`)."""
        return self.hop_energy_pj(hw) + self.dram_energy_pj(hw)


def _ceil_div(a: int, b: int) -> int:
    """ceil(a / b) for a >= 0, b > 0 (0 for a = 0, as the reference's DIVCEIL)."""
    return -(-a // b)


def _check_bytes(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"a byte count must be an integer >= 0, got {n!r}")
