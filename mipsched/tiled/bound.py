"""Lower bounds on every RA-tree schedule of a workload on a tiled machine, under SET's
cost model (docs/set-model.md §3; `evaluate.evaluate_tree`), each with its derivation.

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
Energy (pJ), `energy`: every MAC of the network (ceiling tiles only add) x MAC energy,
plus the compulsory DRAM bytes x DRAM energy per byte.
E x D: the product of the two bounds (both factors positive).
The NoC is not bounded here (the DRAM ports sit on the edge columns, but the reference
applies link bandwidth only per segment to aggregated loads; a bisection bound is left
for later).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from mipsched.core import Bound
from mipsched.formulations.needed import needed
from mipsched.hw.tiled import TiledHardware
from mipsched.workload import ops
from mipsched.workload.graph import Workload
from mipsched.workload.layer import MAC_OPS, full_region


@dataclass(frozen=True)
class TiledBounds:
    """The bounds of one workload on one tiled machine."""

    compute: Bound
    compulsory_dram: Bound
    energy: Bound

    @property
    def latency(self) -> Bound:
        """The stronger latency bound (cycles)."""
        return max(self.compute, self.compulsory_dram, key=lambda b: b.value)

    @property
    def edp(self) -> float:
        """Energy bound x latency bound (pJ x cycles)."""
        return self.energy.value * self.latency.value


def tiled_bounds(workload: Workload, hw: TiledHardware) -> TiledBounds:
    """Every bound of `workload` on `hw` (see the module docstring)."""
    tile = hw.tile
    macs = sum(workload.macs(n) for n, lay in workload.layers.items() if lay.op in MAC_OPS)
    vector = sum(ops.tile_vector_ops(lay, workload.in_shapes(n),
                                     full_region(workload.batch, lay.out))
                 for n, lay in workload.layers.items() if lay.op not in MAC_OPS)
    compute = (Fraction(macs, hw.macs_per_cycle)
               + Fraction(vector, hw.n_tiles * tile.vector_unit.ops_per_cycle))
    dram_bytes = compulsory_dram_bytes(workload)
    return TiledBounds(
        Bound("compute", math.ceil(compute),
              "all MACs / MACs per cycle of all tiles + all vector ops / vector rate of "
              "all tiles (a leaf's busiest core holds >= 1/c of its work; S Cuts take "
              "their slowest child's time for every sub-batch)"),
        Bound("compulsory_dram", math.ceil(Fraction(dram_bytes, hw.dram.bytes_per_cycle)),
              "weights (charged once per batch, >= bytes - (batch - 1) after rounding), "
              "network inputs once and outputs once, over the DRAM bandwidth of all ports"),
        Bound("energy", macs * tile.core_array.mac_pj + dram_bytes * hw.dram.energy_pj_per_byte,
              "every MAC x MAC energy + compulsory DRAM bytes x DRAM energy"))


def compulsory_dram_bytes(workload: Workload) -> int:
    """Bytes every schedule moves between DRAM and the tiles under SET's model."""
    weights = sum(max(0, workload.weight_bytes(n) - (workload.batch - 1))
                  for n in workload.layers)
    read = needed(workload).input_elems  # per sample: each tile reads a contiguous range
    inputs = sum(read[t] for t in workload.inputs) * workload.batch * workload.elem_bytes
    outputs = sum(workload.ofmap_bytes(t) for t in workload.outputs)
    return weights + inputs + outputs
