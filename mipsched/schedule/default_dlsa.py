"""The default DLSA: double buffering (SoMa's stage 1, DESIGN §3).

An ifmap load lives (p-1, p+1) around its consuming tile p, a weight (first-1, last+1), a
stored ofmap (p, p+2), or (p, p+1) when p is the last tile of its LG (the next LG may
read it at once); all clamped to the allowed ranges. DRAM order: sorted by Start, weights
before other tensors, then End (then id). On the SoMa reference instances it reproduces
the `default` order exactly, and every living duration except stores at the end of an LG:
instances carry no LG ids, so there (p, p+2) is used where the reference has (p, p+1).
"""

from __future__ import annotations

from mipsched.schedule.notation import Dlsa
from mipsched.schedule.tile_program import TensorKind, TileProgram


def default_dlsa(program: TileProgram) -> Dlsa:
    """The double-buffered DLSA of `program` (the module's rules), DRAM order
    included."""
    tiles = program.tiles
    n = len(tiles)
    living: list[tuple[int, int]] = []
    keys: list[tuple[int, int, int, int]] = []  # DRAM order: (Start, weights first, End, id)
    for i, t in enumerate(program.tensors):
        kind = t.kind
        if kind == TensorKind.STORE_OFMAP:
            p = t.producer
            last_of_lg = p + 1 < n and tiles[p].lg is not None and tiles[p + 1].lg != tiles[p].lg
            start, end = p, min(max(p + 1 if last_of_lg else p + 2, t.lo), t.hi)
        else:
            start, end = min(max(t.first_use - 1, t.lo), t.hi), t.last_use + 1
        living.append((start, end))
        keys.append((start, 0 if kind == TensorKind.LOAD_WEIGHT else 1, end, i))
    keys.sort()
    return Dlsa(tuple(k[3] for k in keys), tuple(living))
