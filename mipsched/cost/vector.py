"""Cost of a tile on the vector unit (pooling, element-wise, softmax, layernorm, GELU).

Follows the SoMa reference's LR layers (`CoreMapper::genWlMap`): the unit does
`ops_per_cycle` operations per cycle at `pj_per_op` each; no GBUF or L0 traffic is
charged. Operation counts come from `ops.tile_vector_ops`.
"""

from __future__ import annotations

from mipsched.hw.model import Hardware


def vector_cycles(hw: Hardware, ops: int) -> int:
    """ceil(ops / ops per cycle), cycles."""
    return -(-ops // hw.vector_unit.ops_per_cycle)


def vector_energy_pj(hw: Hardware, ops: int) -> float:
    """ops x pJ per op, pJ."""
    return ops * hw.vector_unit.pj_per_op
