"""Lower bounds on every RA-tree schedule of a workload on a tiled machine, under SET's
cost model (docs/set-model.md §3; `evaluate.evaluate_tree`), each with its derivation.

Units: cycles; bytes are the model's (one byte per element, INT8: the leaf counts
elements whatever `workload.elem_bytes` says, so the traffic bounds count elements too).

Latency (cycles):
- `compute`: a leaf's time is at least the compute of its busiest core's (ceiling)
  tile, and a tile's compute is TC x TK x TH x TW x TB x R x S >= its MACs / the tile's
  MACs per cycle (every ceil(x / p) >= x / p, and the PE array holds pe_rows x pe_cols x
  vector x lanes MACs); the busiest core holds at least 1/c of a layer's MACs on c
  cores; a vector layer's tile takes ceil(ops / rate) >= its ops / rate. A T Cut adds its
  children's times; an S Cut takes (n + S) x its slowest child >= n x the slowest, and
  the slowest child's time x its cores' share is at least every child's work over the
  S Cut's cores (max_i w_i / c_i >= sum w_i / sum c_i); the root adds its segments. So
  latency >= (all MACs / MACs per cycle of all tiles) + (all vector ops / vector rate of
  all tiles).
- `compulsory_dram`: every segment's time is at least its DRAM bytes / the DRAM
  bandwidth of all ports, and the root adds its segments, so latency >= the DRAM bytes
  of every schedule / that bandwidth: each layer's weights (the reference charges them
  once per batch, rounded down per invocation: at least weight bytes - (batch - 1)), the
  needed elements of the network inputs (`formulations.needed`: every tile reads one
  contiguous range around what it computes) and the outputs written once.
- `noc`: the same compulsory DRAM transfers, charged to the links (`noc.LinkLoads`:
  a read's share leaves its port tile over the XY multicast tree to the receiving
  cores, a write's share goes from the core to the port), over a fixed set K of links
  (`LinkCut`) that every such transfer must cross. Segment time: a segment's (or leaf
  segment's) time is at least ceil(its busiest link / link bandwidth) (§3.7, §3.9,
  §3.10), the busiest link carries at least the mean over K, the root's latency is
  n_root x the sum of its segments and its record n_root x the sum of theirs; so
  latency >= (bytes on K in the root's record) / (|K| x link bandwidth). Bytes on K:
  every link of a multicast tree carries the share once and separate transfers add up,
  so K carries at least the sum over transfers of what each must put on K. The sets:
  * a straight cut of the mesh between columns j, j + 1 (the 2 x rows links crossing
    it, both directions) or rows i, i + 1 (2 x cols links), splitting the ports into
    sides A and B. A read's group has a tile on one side, so the shares of the ports
    on the other side cross (the XY route from a port to that tile is part of the tree
    and steps across the line); a write from a tile on one side crosses with the shares
    of the ports on the other side: at least min(S_A(s), S_B(s)) of s bytes, S_A(s) the
    shares of the ports in A. Port i of L gets floor(s i / L) - floor(s (i - 1) / L),
    so a run a+1..b of consecutive list positions gets > s (b - a) / L - 1: S_A(s) >=
    s |A| / L - runs(A), and the transfer puts >= s q - r on K with q = min(|A|, |B|)
    / L, r = max(runs(A), runs(B)).
  * the port ring: every link into or out of a port tile. A port's share leaves its
    tile unless the group is that tile alone, and reaches it unless the writer is that
    tile; that exempts one port at most (ports sit on distinct tiles), whose share is
    <= ceil(s / L) < s / L + 1: >= s q - r with q = (L - 1) / L, r = 1.
  Transfers (at most, per schedule, counted by `CompulsoryTraffic`): a layer's weights
  are one read per K slice (<= the tiles), read once per leaf invocation into a record
  whose every link is then floor-divided by k = tot_batch / batch and run k times, which
  loses < k <= batch bytes per link of K; a network input is read by each consumer leaf
  per invocation (<= batch) once per multicast group (<= the tiles), an output written
  per invocation once per core. Their bytes are those of `compulsory_dram`; each
  group's guarantee is clamped at 0 (a load is never negative). The bound is the best
  cut's. On SET's presets (24 B/cycle links, a port on every tile of both side
  columns) the best is a column cut, (DRAM bytes / 2) / (2 x rows links x 24 B/cycle):
  1/24 of the DRAM bound on set-4x4, 1/8 on set-12x12. It binds on narrow links
  (set-12x12 with 1 B/cycle links: 3 x the DRAM bound). The middle column cut is the
  mesh's bisection. Only the ports' positions are forced: a leaf may run on any cores
  (an S Cut child on a port's tile needs no link for that port's share), so no cut
  between the port columns and the interior is forced, and on-chip moves between
  layers are not compulsory. Per-segment maxima of compute, DRAM and link terms give
  no more than the max of their sums: each term is a sum over segments of a quantity
  whose total over the schedule is what is bounded.
Energy (pJ), `energy`: every MAC of the network (ceiling tiles only add) x MAC energy,
plus the compulsory DRAM bytes x DRAM energy per byte.
E x D: the product of the energy bound and the latency bound (both factors positive).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from mipsched.core import Bound
from mipsched.formulations.needed import needed
from mipsched.hw.tiled import TiledHardware
from mipsched.tiled.noc import MINUS_X, MINUS_Y, PLUS_X, PLUS_Y, Link, link_target
from mipsched.workload import ops
from mipsched.workload.graph import Workload
from mipsched.workload.layer import MAC_OPS, full_region


@dataclass(frozen=True)
class TiledBounds:
    """The bounds of one workload on one tiled machine."""

    compute: Bound
    compulsory_dram: Bound
    noc: Bound
    energy: Bound

    @property
    def latency(self) -> Bound:
        """The strongest latency bound (cycles)."""
        return max(self.latency_bounds, key=lambda b: b.value)

    @property
    def latency_bounds(self) -> tuple[Bound, ...]:
        """Every latency bound (cycles), in certificate order."""
        return self.compute, self.compulsory_dram, self.noc

    @property
    def edp(self) -> float:
        """Energy bound x latency bound (pJ x cycles)."""
        return self.energy.value * self.latency.value


@dataclass(frozen=True)
class CompulsoryTraffic:
    """The DRAM transfers every RA-tree schedule makes (model bytes), and at most how
    many transfers (`LinkLoads.from_dram` / `to_dram` calls) carry them."""

    weights: tuple[int, ...]
    """Weight bytes of each layer that reads weights from DRAM (before the division)."""
    weight_transfers: int
    """Reads per layer's weights at most (one per K slice: the tiles)."""
    batch: int
    """The root's batch: a leaf's weight record is divided by k <= batch."""
    inputs: int
    """Network-input bytes read at least."""
    input_transfers: int
    """Reads of network inputs at most."""
    outputs: int
    """Network-output bytes written."""
    output_transfers: int
    """Writes of network outputs at most."""

    @property
    def dram_bytes(self) -> int:
        """DRAM bytes of every schedule (weights less the per-invocation rounding)."""
        weights = sum(max(0, w - (self.batch - 1)) for w in self.weights)
        return weights + self.inputs + self.outputs


@dataclass(frozen=True)
class LinkCut:
    """A fixed set of directed links every compulsory DRAM transfer of s bytes loads with
    at least s x share - slack bytes (see the module docstring)."""

    name: str
    links: frozenset[Link]
    share: Fraction
    slack: int


def tiled_bounds(workload: Workload, hw: TiledHardware) -> TiledBounds:
    """Every bound of `workload` on `hw` (see the module docstring)."""
    tile = hw.tile
    macs = sum(workload.macs(n) for n, lay in workload.layers.items() if lay.op in MAC_OPS)
    vector = sum(ops.tile_vector_ops(lay, workload.in_shapes(n),
                                     full_region(workload.batch, lay.out))
                 for n, lay in workload.layers.items() if lay.op not in MAC_OPS)
    compute = (Fraction(macs, hw.macs_per_cycle)
               + Fraction(vector, hw.n_tiles * tile.vector_unit.ops_per_cycle))
    traffic = compulsory_traffic(workload, hw.n_tiles)
    dram_bytes = traffic.dram_bytes
    return TiledBounds(
        Bound("compute", math.ceil(compute),
              "all MACs / MACs per cycle of all tiles + all vector ops / vector rate of "
              "all tiles (a leaf's busiest core holds >= 1/c of its work; S Cuts take "
              "their slowest child's time for every sub-batch)"),
        Bound("compulsory_dram", math.ceil(Fraction(dram_bytes, hw.dram.bytes_per_cycle)),
              "weights (charged once per batch, >= bytes - (batch - 1) after rounding), "
              "network inputs once and outputs once, over the DRAM bandwidth of all ports"),
        noc_bound(traffic, hw),
        Bound("energy", macs * tile.core_array.mac_pj + dram_bytes * hw.dram.energy_pj_per_byte,
              "every MAC x MAC energy + compulsory DRAM bytes x DRAM energy"))


# --- compulsory DRAM traffic ---------------------------------------------------------------
def compulsory_traffic(workload: Workload, n_tiles: int) -> CompulsoryTraffic:
    """The transfers every schedule of `workload` on `n_tiles` tiles makes (model bytes:
    elements)."""
    batch = workload.batch
    weights = tuple(w for n in workload.layers
                    if (w := ops.weight_elems(workload.layers[n], workload.in_shapes(n))))
    read = needed(workload).input_elems  # per sample: each tile reads a contiguous range
    readers = sum(len({s for s in lay.inputs if s in workload.inputs})
                  for lay in workload.layers.values())
    outputs = sum(workload.shape_of(t).elems for t in workload.outputs) * batch
    return CompulsoryTraffic(
        weights, n_tiles, batch, sum(read[t] for t in workload.inputs) * batch,
        readers * batch * n_tiles, outputs, len(workload.outputs) * batch * n_tiles)


def compulsory_dram_bytes(workload: Workload) -> int:
    """Bytes every schedule moves between DRAM and the tiles under SET's model (its
    bytes: elements)."""
    return compulsory_traffic(workload, 1).dram_bytes


# --- the NoC bound ---------------------------------------------------------------------------
def noc_bound(traffic: CompulsoryTraffic, hw: TiledHardware) -> Bound:
    """latency >= bytes every schedule puts on a cut / (its links x link bandwidth), for
    the best cut of `link_cuts` (cycles; see the module docstring)."""
    bw = hw.noc.link_bytes_per_cycle
    best, value = None, Fraction(0)
    for cut in link_cuts(hw):
        v = cut_load(traffic, cut) / (len(cut.links) * bw)
        if best is None or v > value:
            best, value = cut, v
    if best is None:
        return Bound("noc", 0, "a mesh of one tile has no links")
    return Bound("noc", math.ceil(value),
                 f"compulsory DRAM transfers over the {len(best.links)} links of "
                 f"{best.name}: each of s bytes puts >= s x {best.share} - {best.slack} "
                 f"bytes on them ({math.floor(cut_load(traffic, best))} bytes in all, "
                 f"weights less < batch per link for the per-invocation rounding); / "
                 f"(links x {bw} B/cycle): the busiest link of every segment carries at "
                 "least the mean, the root adds its segments")


def cut_load(traffic: CompulsoryTraffic, cut: LinkCut) -> Fraction:
    """Bytes every schedule puts on `cut.links` in the root's record, at least."""
    def guaranteed(size: int, transfers: int) -> Fraction:
        return max(Fraction(0), size * cut.share - cut.slack * transfers)

    rounding = len(cut.links) * (traffic.batch - 1)
    weights = sum((max(Fraction(0), guaranteed(w, traffic.weight_transfers) - rounding)
                   for w in traffic.weights), Fraction(0))
    return (weights + guaranteed(traffic.inputs, traffic.input_transfers)
            + guaranteed(traffic.outputs, traffic.output_transfers))


def link_cuts(hw: TiledHardware) -> list[LinkCut]:
    """The straight cuts between neighbouring columns and rows, and the port ring."""
    cols, rows = hw.mesh.cols, hw.mesh.rows
    cuts = [_straight(hw, f"the cut between columns {j} and {j + 1}",
                      {(j, y, PLUS_X) for y in range(rows)}
                      | {(j + 1, y, MINUS_X) for y in range(rows)},
                      lambda x, _y, j=j: x <= j)
            for j in range(cols - 1)]
    cuts += [_straight(hw, f"the cut between rows {i} and {i + 1}",
                       {(x, i, PLUS_Y) for x in range(cols)}
                       | {(x, i + 1, MINUS_Y) for x in range(cols)},
                       lambda _x, y, i=i: y <= i)
             for i in range(rows - 1)]
    ring = port_ring(hw)
    return cuts + ([ring] if ring.links else [])


def _straight(hw: TiledHardware, name: str, links: set[Link],
              side: Callable[[int, int], bool]) -> LinkCut:
    """A straight cut: the ports split by `side` (x, y) -> in A."""
    ports = hw.dram.ports
    a = [i for i, p in enumerate(ports, 1) if side(p.x, p.y)]
    b = [i for i, p in enumerate(ports, 1) if not side(p.x, p.y)]
    return LinkCut(name, frozenset(links), Fraction(min(len(a), len(b)), len(ports)),
                   max(runs(a), runs(b)))


def port_ring(hw: TiledHardware) -> LinkCut:
    """Every link into or out of a DRAM port's tile."""
    ports = {(p.x, p.y) for p in hw.dram.ports}
    links = frozenset(link for link in mesh_links(hw)
                      if link[:2] in ports or link_target(link) in ports)
    n = len(hw.dram.ports)
    return LinkCut("the links into and out of the port tiles", links, Fraction(n - 1, n), 1)


def mesh_links(hw: TiledHardware) -> list[Link]:
    """Every directed link of the mesh."""
    cols, rows = hw.mesh.cols, hw.mesh.rows
    links = [(x, y, PLUS_X) for x in range(cols - 1) for y in range(rows)]
    links += [(x, y, MINUS_X) for x in range(1, cols) for y in range(rows)]
    links += [(x, y, PLUS_Y) for x in range(cols) for y in range(rows - 1)]
    return links + [(x, y, MINUS_Y) for x in range(cols) for y in range(1, rows)]


def runs(positions: Sequence[int]) -> int:
    """Maximal runs of consecutive integers in `positions` (ascending)."""
    return sum(1 for k, i in enumerate(positions) if k == 0 or positions[k - 1] != i - 1)
