"""The Cocco baseline's tiling number, derived from the core array's parallelism (SoMa
§VI-A3, §VII-B1; the rule of the SoMa reference's Cocco baseline).

Per layer, with C1 = input channels / vector, K1 = output channels / lanes (a layer with
several inputs counts all their channels, as the reference's total ifmap shape does) and
a px x py PE array (pe_rows x pe_cols), the unrollings CK, CB, CW, BK, HK, HW are tried in
that order. An unrolling's utilisation is the product of its terms min(factor / PE dim, 1)
(CB and CW also count min(K1, 1); BK, HK and HW min(C1, 1)). The
first one with utilisation >= 1, else the one with the best utilisation (earliest on a
tie), fixes the layer's *minimum tile*: all channels, a batch slice b (min(batch, PE dim)
when the batch is unrolled, else 1), and h x w = min(dim, 4) on an axis that is not
unrolled, min(dim, PE dim) on one that is. The layer's tiling number is the number of such
tiles in its output: ceil(batch / b) x ceil(H / h) x ceil(W / w).

A group's (LG = FLG) tiling number is the largest power of two not above the *largest*
tiling number of its layers: Cocco sizes tiles by the parallelism the core array needs,
conservatively, so the group is cut as finely as its most demanding layer asks (SoMa
§VII-B1: Cocco's tiling numbers are higher than SoMa's). A group whose layers cannot all
be split that finely (`choose_grid` rejects it: e.g. a 1 x 1 fc plane in a group of large
convolutions) is not a valid Cocco group; the partition methods split it. A single layer
always gets a tiling (halved until accepted).

Channel dims enter the rule only through the batch: a layer whose channels fill the array
(CK) gets one sample per tile, one with few output channels (CB / BK) packs up to PE-dim
samples in a tile and so gets fewer tiles. At batch 1, every unrolling yields a 4 x 4 (or
smaller) spatial tile on 4 x 4 arrays, so the tiling number follows the output plane.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mipsched.hw.model import Hardware
from mipsched.schedule.notation import ScheduleError
from mipsched.schedule.tiling import choose_grid
from mipsched.workload.graph import Workload

MIN_TILE_EDGE = 4
"""Smallest tile edge (rows or columns) on an axis the unrolling does not spread."""

UNROLLINGS = {"CK": "", "CB": "K", "CW": "K", "BK": "C", "HK": "C", "HW": "C"}
"""Unrollings of the reference rule, in the order they are tried (first axis over the PE
rows, second over the PE columns), each with the channel axis whose factor it also counts
as min(factor, 1)."""


@dataclass(frozen=True)
class MinTile:
    """A layer's minimum tile under its chosen unrolling (all channels)."""

    unrolling: str
    utilisation: float
    batch: int
    h: int
    w: int


def min_tile(workload: Workload, hw: Hardware, name: str) -> MinTile:
    """The first unrolling with full utilisation (else the best) and its minimum tile."""
    ca = hw.core_array
    px, py = ca.pe_rows, ca.pe_cols
    out = workload.layers[name].out
    batch = workload.batch
    c1 = sum(s.c for s in workload.in_shapes(name)) / ca.vector
    k1 = out.c / ca.lanes
    factor = {"C": c1, "K": k1, "B": batch, "H": out.h, "W": out.w}
    best: MinTile | None = None
    for unrolling, inside in UNROLLINGS.items():
        row, col = unrolling
        util = min(factor[row] / px, 1.0) * min(factor[col] / py, 1.0)
        for axis in inside:
            util *= min(factor[axis], 1.0)
        tile = MinTile(
            unrolling, util,
            batch=min(batch, px if row == "B" else py) if "B" in unrolling else 1,
            h=min(out.h, px) if row == "H" else min(out.h, MIN_TILE_EDGE),
            w=min(out.w, py) if col == "W" else min(out.w, MIN_TILE_EDGE))
        if util >= 1.0:
            return tile
        if best is None or util > best.utilisation:
            best = tile
    assert best is not None
    return best


def layer_tiling(workload: Workload, hw: Hardware, name: str) -> int:
    """Number of minimum tiles in the layer's output (>= 1)."""
    tile = min_tile(workload, hw, name)
    out = workload.layers[name].out
    return (math.ceil(workload.batch / tile.batch) * math.ceil(out.h / tile.h)
            * math.ceil(out.w / tile.w))


def group_tiling(workload: Workload, hw: Hardware, layers: tuple[str, ...]) -> int:
    """Largest power of two <= the largest tiling number of the group's layers; for a
    single layer, halved until `choose_grid` accepts it. (For a group the result may be
    rejected by `choose_grid`: such a group is invalid and gets split.)"""
    most = max(layer_tiling(workload, hw, n) for n in layers)
    tiling = 1 << (most.bit_length() - 1)
    while len(layers) == 1 and tiling > 1 and not accepts(workload, layers, tiling):
        tiling //= 2
    return tiling


def finer_tiling(workload: Workload, layers: tuple[str, ...], tiling: int) -> int | None:
    """The next power-of-two multiple of `tiling` that `choose_grid` accepts for the
    group (None: no finer tiling divides its work)."""
    limit = workload.batch * min(workload.layers[n].out.h * workload.layers[n].out.w
                                 for n in layers)
    finer = tiling * 2
    while finer <= limit:
        if accepts(workload, layers, finer):
            return finer
        finer *= 2
    return None


def accepts(workload: Workload, layers: tuple[str, ...], tiling: int) -> bool:
    """Whether `choose_grid` can split every layer of the group into `tiling` tiles."""
    try:
        choose_grid(workload, layers, tiling)
    except ScheduleError:
        return False
    return True
