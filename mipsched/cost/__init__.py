"""Core-array (intra-tile) cost model: cycles and energy of one tile, as in SoMa's
reference implementation (PE-array mapping search, vector unit)."""

from mipsched.cost.core_array import NoMappingError
from mipsched.cost.tile import TileCost, tile_cost

__all__ = ["NoMappingError", "TileCost", "tile_cost"]
