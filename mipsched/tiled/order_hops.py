"""Byte-hops of every placement order of one leaf partition at once (the hot path of
SET's intra-layer search, `mipsched.tiled.leaf`; docs/set-model.md §3.4, §3.6): the
partition's transfers as arrays (`Traffic`), the cluster's cores and ports
(`ClusterMesh`), the cores of every order (`order_cells`), the byte-hops of each order
(`order_hops`) and a floor on the byte-hops of any placement (`hops_floor`).

Units: bytes, byte-hops.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from mipsched.hw.tiled import TiledHardware
from mipsched.tiled.noc import port_shares

Tile = tuple[int, int]


@lru_cache(maxsize=1024)
def piece_digits(part: tuple[int, int, int, int]) -> np.ndarray:
    """Piece index along K, B, H, W of every ofm index: (n, 4), read-only."""
    digits = np.indices(part).reshape(4, -1).T
    digits.flags.writeable = False
    return digits


def members_list(members: np.ndarray) -> list[tuple[int, ...]]:
    """The rows of a (G, m) array of ofm indices as tuples."""
    return [tuple(m) for m in members.tolist()]


def nonzero_groups(members: np.ndarray, sizes: np.ndarray) -> list[tuple[int, tuple[int, ...]]]:
    """(bytes, group) of the groups that get any bytes."""
    return [(n, m) for n, m in zip(sizes.tolist(), members_list(members), strict=True)
            if n > 0]


@dataclass(eq=False)
class Traffic:
    """The transfers of one partition, independent of the placement (§3.6), as arrays:
    (members, bytes per group) from DRAM, (members, producer tiles (P, 2), bytes (G, P))
    over the NoC; members are shared with the `_Tiling`'s groups."""

    wgt_dram: tuple[np.ndarray, np.ndarray]
    """DRAM weights (their byte-hops and bytes are divided by the batch ratio)."""
    ifm_dram: list[tuple[np.ndarray, np.ndarray]]
    """Ifmap (and fmap weight) reads, one entry per source read from DRAM."""
    ifm_noc: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
    """Ifmap (and fmap weight) moves, one entry per source read from its layout."""
    ofm_dram: tuple[np.ndarray, np.ndarray]
    """Ofmap writes from each core (all 0 when the ofmap stays on chip)."""
    dram: int
    """DRAM bytes: the weights' divided by the batch ratio, the reads and the writes."""

    @property
    def wgt(self) -> list[tuple[int, tuple[int, ...]]]:
        """(bytes, group) of every DRAM weight transfer."""
        return nonzero_groups(*self.wgt_dram)

    @property
    def reads(self) -> list[tuple[int, tuple[int, ...]]]:
        """(bytes, group) of every ifmap read from DRAM."""
        return [r for members, sizes in self.ifm_dram for r in nonzero_groups(members, sizes)]

    @property
    def moves(self) -> list[tuple[int, Tile, tuple[int, ...]]]:
        """(bytes, producer tile, consumer group) of the on-chip moves."""
        out = []
        for members, tiles, sent in self.ifm_noc:
            g, p = np.nonzero(sent)
            out += [(n, tuple(tile), tuple(m)) for n, tile, m in zip(
                sent[g, p].tolist(), tiles[p].tolist(), members[g].tolist(), strict=True)]
        return out

    @property
    def writes(self) -> list[tuple[int, int]]:
        """(ofm index, bytes) written to DRAM."""
        return [(m[0], n) for n, m in nonzero_groups(*self.ofm_dram)]



# --- byte-hops of every placement order at once ----------------------------------------------
# The X-first tree from (sx, sy) to a group (`multicast_tree`) has max(sx, x1) - min(sx, x0)
# trunk links for the group's columns x0..x1, and in each of its columns a branch of
# max(sy, y1) - min(sy, y0) links for the column's rows y0..y1. Both split into a part
# below and a part above the source: max(0, s - lo) + max(0, hi - s). A unicast is the
# tree to one tile. Tables (4, sources, max(cols, rows)): [0 / 1, k, v] = max(0, s - v) /
# max(0, v - s) for the columns s, [2 / 3, k, v] the same for the rows, of the sources that
# row k stands for, summed over them.
Tables = np.ndarray


@dataclass(frozen=True, eq=False)
class ClusterMesh:
    """A cluster's cores, its mesh and its DRAM ports, for counting tree links.

    DRAM: n = q L + r bytes over L ports give port i q + `port_shares`(r, L)[i] bytes, so
    the byte-hops of a DRAM transfer are q x (links of the trees from all ports) + (links
    of the trees from the ports that get a byte of r)."""

    x: np.ndarray
    """Column of each core, by cluster index."""
    y: np.ndarray
    far: np.ndarray
    """(ports, cores): the distance from each port to each core, longest first."""
    rows: int
    ports: int
    shares: np.ndarray
    """`port_shares`(r, ports) for r in 0..ports-1: (ports, ports)."""
    tiles: Tables
    """Row k: the source in column / row k (one tile)."""
    all_ports: Tables
    """Row 0: all ports together."""
    rest: Tables
    """Row r: the ports that get a byte of r."""
    _reach: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    def reach(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        """For groups of `size` distinct cores, whatever the placement: (ports, groups)
        at [p, k] the fewest links of the tree from port p to the group k-th farthest
        from it (k = 0, 1, ...), and their sum over the ports. A tree to a group has at
        least size - 1 links and reaches the group's farthest core; the k groups
        farther away hold only k x size cores, so the k-th reaches at least
        `far`[p, k x size]."""
        if size not in self._reach:
            reach = np.maximum(size - 1, self.far[:, ::size])
            self._reach[size] = reach, reach.sum(axis=0)
        return self._reach[size]


@lru_cache(maxsize=16)
def _tables(cols: int, rows: int, ports: tuple[Tile, ...]) -> tuple[np.ndarray, ...]:
    """(shares, tiles, all_ports, rest) of `ClusterMesh`."""
    v = np.arange(max(cols, rows))
    above = np.maximum(v[None, :] - v[:, None], 0)
    tiles = np.stack([above.T, above, above.T, above])
    shares = np.array([port_shares(r, len(ports)) for r in range(len(ports))])
    px, py = (np.array([p[i] for p in ports]) for i in (0, 1))
    by_port = np.stack([above.T[px], above[px], above.T[py], above[py]])
    return shares, tiles, by_port.sum(axis=1, keepdims=True), shares @ by_port


def cluster_mesh(hw: TiledHardware, cores: Sequence[Tile]) -> ClusterMesh:
    """The `ClusterMesh` of the cluster whose tiles are `cores` (by cluster index)."""
    ports = np.array([(p.x, p.y) for p in hw.dram.ports])
    x, y = np.array(cores, np.int64).reshape(-1, 2).T
    far = -np.sort(-(abs(x - ports[:, :1]) + abs(y - ports[:, 1:])), axis=1)
    return ClusterMesh(x, y, far, hw.mesh.rows, len(ports),
                 *_tables(hw.mesh.cols, hw.mesh.rows, tuple(map(tuple, ports.tolist()))))


def _steps(part: tuple[int, int, int, int], order: tuple[int, ...]) -> list[int]:
    """Cluster index stride of each dimension under a placement order (`initPlacement`:
    the first dimension of `order` outermost)."""
    step = [1, 1, 1, 1]
    acc = 1
    for d in reversed(order):
        step[d] = acc
        acc *= part[d]
    return step


def order_cells(part: tuple[int, int, int, int], orders: list[tuple[int, ...]]) -> np.ndarray:
    """Cluster index of every ofm index (columns) under every order (rows)."""
    return np.array([_steps(part, o) for o in orders]) @ piece_digits(part).T


Spans = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""(x0, x1, y, first, last) of groups per order: the smallest and largest column
(orders, G); the rows of the tiles (orders, G, m) and whether each is the first / last of
its column (the ends of the column's branch)."""


def _spans(xs: np.ndarray, ys: np.ndarray, rows: int) -> Spans:
    """`Spans` of groups whose tiles lie in columns xs, rows ys (orders, G, m)."""
    if xs.shape[2] == 1:
        return xs[..., 0], xs[..., 0], ys, np.True_, np.True_
    x, y = np.divmod(np.sort(xs * rows + ys, axis=2), rows)
    edge = np.ones(x.shape[:2] + (1,), bool)
    step = x[..., 1:] != x[..., :-1]
    return (x[..., 0], x[..., -1], y, np.concatenate([edge, step], axis=2),
            np.concatenate([step, edge], axis=2))


def _port_tables(sizes: np.ndarray, m: ClusterMesh) -> Tables:
    """Tables with one row per group for DRAM transfers of `sizes` bytes between the
    ports and each group: q x all ports + the ports that get a byte of r."""
    q, r = np.divmod(sizes, m.ports)
    return q[:, None] * m.all_ports + m.rest[:, r]


def _tile_tables(tiles: np.ndarray, sent: np.ndarray, m: ClusterMesh) -> Tables:
    """Tables with one row per group for the moves of `sent` (G, P) bytes from producer
    tiles (P, 2) to each group (one product, in floating point when every sum is an
    integer below 2^53, hence exact)."""
    by_tile = m.tiles[np.arange(4)[:, None], tiles[:, [0, 0, 1, 1]].T]
    if int(sent.sum()) * int(by_tile.max(initial=0)) < 2 ** 53:
        return (sent.astype(float) @ by_tile).astype(np.int64)
    return sent @ by_tile


def _group_hops(xs: np.ndarray, ys: np.ndarray, members: np.ndarray, t: Tables,
                m: ClusterMesh) -> np.ndarray:
    """Byte-hops per order of the trees to groups `members` from the sources of tables t
    (one row per group); xs, ys (orders, cores) place every ofm index."""
    x0, x1, y, first, last = _spans(xs[:, members], ys[:, members], m.rows)
    g = np.arange(len(members))
    hops = (t[0, g, x0] + t[1, g, x1]).sum(axis=1)
    return hops + (first * t[2, g[:, None], y] + last * t[3, g[:, None], y]).sum(axis=(1, 2))


def _dram_floor(members: np.ndarray, sizes: np.ndarray, m: ClusterMesh) -> int:
    """A lower bound, over all placements, on the byte-hops of DRAM transfers of `sizes`
    bytes between the ports and groups `members` of equal size (`ClusterMesh.reach`): q x
    reach with the smallest q on the farthest groups (rearrangement), plus the remainder
    bytes at the nearest group's reach."""
    reach, total = m.reach(members.shape[1])
    q, r = np.divmod(sizes, m.ports)
    return int(np.sort(q) @ total[:len(q)]
               + np.bincount(r, minlength=m.ports) @ m.shares @ reach[:, len(q) - 1])


def hops_floor(tr: Traffic, m: ClusterMesh, wgt_div: int) -> int:
    """A lower bound on `order_hops` over every placement (not only the orders tried):
    `_dram_floor` for DRAM transfers, m - 1 links per tree to a group of m for moves."""
    members, sizes = tr.wgt_dram
    hops = _dram_floor(members, sizes, m) // wgt_div if len(sizes) else 0
    hops += sum(_dram_floor(members, sizes, m) for members, sizes in [*tr.ifm_dram,
                                                                       tr.ofm_dram])
    return hops + sum(int(sent.sum()) * (members.shape[1] - 1)
                      for members, _, sent in tr.ifm_noc)


def order_hops(tr: Traffic, cells: np.ndarray, m: ClusterMesh, wgt_div: int) -> list[int]:
    """Byte-hops of every placement (`cells`, the cluster index of each ofm index per
    order): the DRAM weights' floor-divided by wgt_div, plus the ifmap reads, the moves
    and the ofmap writes (their tables summed per set of groups)."""
    xs, ys = m.x[cells], m.y[cells]
    hops = np.zeros(len(cells), np.int64)
    members, sizes = tr.wgt_dram
    if len(sizes):
        hops += _group_hops(xs, ys, members, _port_tables(sizes, m), m) // wgt_div
    loads: dict[int, tuple[np.ndarray, Tables]] = {}
    for members, t in [*((g, _port_tables(n, m)) for g, n in [*tr.ifm_dram, tr.ofm_dram]),
                       *((g, _tile_tables(p, n, m)) for g, p, n in tr.ifm_noc)]:
        if id(members) in loads:
            t = t + loads[id(members)][1]
        loads[id(members)] = members, t
    for members, t in loads.values():
        hops += _group_hops(xs, ys, members, t, m)
    return hops.tolist()
