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
    tiles = program.tiles
    n = len(tiles)
    living: list[tuple[int, int]] = []
    for t in program.tensors:
        if t.is_load:
            start = min(max(t.first_use - 1, t.lo), t.hi)
            living.append((start, t.fixed))
        else:
            p = t.producer
            last_of_lg = p + 1 < n and tiles[p].lg is not None and tiles[p + 1].lg != tiles[p].lg
            end = p + 1 if last_of_lg else p + 2
            living.append((t.fixed, min(max(end, t.lo), t.hi)))
    kinds = [t.kind for t in program.tensors]
    order = sorted(range(len(living)), key=lambda i: (
        living[i][0], 0 if kinds[i] == TensorKind.LOAD_WEIGHT else 1, living[i][1], i))
    return Dlsa(tuple(order), tuple(living))
