"""Cost of one tile: cycles and energy of computing an output region of a layer.

PE-array ops (conv, depthwise conv, fc, matmul, matmul of activations) go through the
reference's PE-array mapping search (`core_array`); pooling, element-wise, softmax,
layernorm, GELU, transposes and copying concats run on the vector unit (`vector`); a
concat without `copy` is a layout change and costs nothing. As in the SoMa reference
(`Graph::getTileCost`), the cost depends only on the layer and the extents of the output
tile (batch, rows, columns; all channels), not on where the tile lies, so it is memoised
on those extents.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from mipsched.cost.core_array import conv_shape, map_conv
from mipsched.cost.vector import vector_cycles, vector_energy_pj
from mipsched.hw.model import Hardware
from mipsched.workload import ops
from mipsched.workload.layer import MAC_OPS, Layer, Region, Shape


@dataclass(frozen=True)
class TileCost:
    """Cost of one tile. Units: cycles, pJ, bytes, MACs, vector operations."""

    cycles: int
    """Tile time: max(PE compute, GBUF read time) or the vector-unit time."""
    energy_pj: float
    """mac_pj + local_pj + gbuf_pj + noc_pj + vector_pj."""
    macs: int
    vector_ops: int
    mapping: str
    """PE-array unrolling ("CxK", "CxB", "BxK", "CxW", "HxK", "HxW"), "vector" or "none"."""
    dataflow: str
    """Reference dataflow variant of the mapping ("plain", "kbsd", "wbsd", "wl2" joined
    by "+"), "" for vector ops."""
    compute_cycles: int
    """PE-array compute cycles before the GBUF bandwidth bound (= cycles for vector ops)."""
    bound_cycles: int
    """A lower bound on `cycles` that never decreases when the tile grows (least compute
    over the six unrollings; = cycles for vector ops). `cycles` itself may decrease when
    a tile grows, because the reference keeps the least energy x time mapping."""
    gbuf_read_bytes: int
    gbuf_write_bytes: int
    mac_pj: float
    local_pj: float
    """AL0 / WL0 / OL0 / OL1 accesses."""
    gbuf_pj: float
    noc_pj: float
    """Broadcasts between PEs."""
    vector_pj: float


def tile_cost(hw: Hardware, layer: Layer, in_shapes: tuple[Shape, ...], out_region: Region,
              elem_bytes: int) -> TileCost:
    """Cost of computing `out_region` (all output channels) of `layer` on `hw`.

    As in the reference model, input traffic is sized from the output tile itself (see
    `core_array`), so the cost depends on `out_region`'s extents only; equal extents
    return the identical object. Raises core_array.NoMappingError when no unrolling fits
    the L0 buffers.
    """
    return _tile_cost(hw, layer, in_shapes, out_region[1] - out_region[0],
                      out_region[3] - out_region[2], out_region[5] - out_region[4],
                      elem_bytes)


@lru_cache(maxsize=1 << 16)
def _tile_cost(hw: Hardware, layer: Layer, in_shapes: tuple[Shape, ...], batch: int,
               height: int, width: int, elem_bytes: int) -> TileCost:
    region = Region(0, batch, 0, height, 0, width)
    if layer.op in MAC_OPS:
        a = map_conv(hw, conv_shape(layer, in_shapes, batch, height, width), elem_bytes)
        return TileCost(
            cycles=a.cycles, energy_pj=a.energy_pj,
            macs=ops.tile_macs(layer, in_shapes, region), vector_ops=0,
            mapping=a.mapping, dataflow=a.dataflow, compute_cycles=a.compute_cycles,
            bound_cycles=a.bound_cycles,
            gbuf_read_bytes=a.gbuf_read_bytes, gbuf_write_bytes=a.gbuf_write_bytes,
            mac_pj=a.mac_pj, local_pj=a.local_pj, gbuf_pj=a.gbuf_pj, noc_pj=a.noc_pj,
            vector_pj=0.0,
        )
    n = ops.tile_vector_ops(layer, in_shapes, region)
    cycles = vector_cycles(hw, n)
    energy = vector_energy_pj(hw, n)
    return TileCost(
        cycles=cycles, energy_pj=energy, macs=0, vector_ops=n,
        mapping="vector" if n else "none", dataflow="",
        compute_cycles=cycles, bound_cycles=cycles, gbuf_read_bytes=0, gbuf_write_bytes=0,
        mac_pj=0.0, local_pj=0.0, gbuf_pj=0.0, noc_pj=0.0, vector_pj=energy,
    )
