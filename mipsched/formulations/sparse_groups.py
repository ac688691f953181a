"""The compute a stage end's group spends above the compute bound's charges, in any
schedule (the `sparse_groups` latency bound).

A *sparse* layer need compute only some of its positions (`needed.py`): ResNet v1's last
3x3, 1x1 and residual add of a stage, read at even rows and columns by the next stage's
stride-2 1x1 convs. The compute bound charges it the least cycles per needed position of
any tile box (`box_rates.py`), as if each tile held needed positions only; but a tile is
a box of its FLG's grid, and a box of one sample must be 7 x 7 or more to run at speed
while holding a quarter of needed positions. A *group* is a connected set of sparse
layers with all their consumers (the *readers*); its excess is the cycles its layers'
tiles take above their charges.

**Extents.** In an FLG S with grid (B, P_h, P_w) (`tiling.choose_grid`), tile i of layer
X covers its share of X's plane when X has a consumer outside S or is an output, and
otherwise the hull of what X's consumers in S read in tile i (`tiling.tile_flg`). So its
rows number at least min(share rows, max over consumers v of g_v(rows of v's tile)),
where g_v(x) is the fewest rows x output rows of v read of X at any position (0 where
rows depend on another axis: transposes, concats over height). `Extents.least` applies
this from the network's outputs back (a layer whose consumer's plane has fewer than P_h
rows has that consumer outside S, so it holds its share); by induction every tile's rows
and columns are at least these, whatever S is. For a layer whose consumers are all in S
the min with its share is dropped.

**Cycles.** A tile's cycles depend on its layer and its extents only (`cost.tile`) but
may fall when the box grows, so a tile of s samples and extents (h, w) is charged the
least cycles of any box of s samples holding h x w (`envelope`): at most its own.

**Group excess** is at least the lesser of two cases.
- A: every sparse layer of the group shares the FLG of each of its consumers, so the
  whole group is in one FLG S. S's grid has B dividing the batch and a plane split
  `tiling.plane_split` makes for S's smallest plane: the least height of any layer and
  the least width of any layer (h1 <= h2, w2 <= w1), neither above the group's.
  Every such grid is tried; each group layer pays max(0, its tiles' charged cycles - its
  charge).
- B: some sparse layer X has a consumer outside its FLG: X's tiles cover its plane, and
  so every position of X's sparse ancestors in the group that computing all of X needs
  is computed too; each pays max(0, least cycles per position of any box x those
  positions - its charge).
Groups share no layer, and every other layer takes at least its charge, so the compute
bound plus the groups' excess is a latency bound.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from mipsched.core import Bound
from mipsched.cost.core_array import NoMappingError
from mipsched.cost.tile import tile_cost
from mipsched.formulations.needed import needed, needed_masks
from mipsched.hw.model import Hardware
from mipsched.schedule.tiling import plane_split
from mipsched.workload import ops
from mipsched.workload.graph import Workload
from mipsched.workload.layer import Op, Region

MAX_GROUP_BOXES = 120_000
"""Most tile boxes (samples per tile x rows x columns, summed over its layers) a group may
have for its envelopes: ResNet-50's stage-2 end at batch 16 has 47,040 (about 12 s)."""
#: Cycles of a box no unrolling maps (it never occurs in a schedule).
NO_MAPPING = 1 << 60
#: Rows (axis 0) or columns (axis 1).
Axis = int


@dataclass(frozen=True)
class SparseGroup:
    """Sparse layers joined through their consumers, and those consumers."""

    sparse: tuple[str, ...]
    """Layers with some output positions no schedule needs, in layer order."""
    readers: tuple[str, ...]
    """Consumers of `sparse` that need all their positions, in layer order."""

    @property
    def layers(self) -> tuple[str, ...]:
        """Sparse layers, then readers."""
        return self.sparse + self.readers


def sparse_groups(workload: Workload) -> list[SparseGroup]:
    """The groups of the network: components of the graph joining each sparse layer (one
    with a consumer and some positions unneeded) to its consumers."""
    masks = needed_masks(workload)
    sparse = [n for n in workload.layers if workload.consumers(n) and not masks[n].all()]
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for x in sparse:
        for v in workload.consumers(x):
            parent[root(x)] = root(v)
    members: dict[str, list[str]] = {}
    for n in workload.layers:
        if n in parent:
            members.setdefault(root(n), []).append(n)
    return [SparseGroup(tuple(n for n in m if n in sparse), tuple(n for n in m if n not in sparse))
            for m in members.values()]


def _side(workload: Workload, name: str, axis: Axis) -> int:
    out = workload.layers[name].out
    return out.h if axis == 0 else out.w


def read_growth(workload: Workload, reader: str, index: int, axis: Axis) -> np.ndarray:
    """g[x]: the fewest rows (axis 0) or columns (axis 1) of input `index` that x output
    rows or columns of `reader` read, over every position (ops.input_region); 0 where
    that depends on another axis."""
    layer = workload.layers[reader]
    ins = workload.in_shapes(reader)
    size = _side(workload, reader, axis)
    growth = np.zeros(size + 1, dtype=np.int64)
    if layer.op == Op.TRANSPOSE or (layer.op == Op.CONCAT and layer.axis == "h"):
        return growth
    other = _side(workload, reader, 1 - axis)
    for x in range(1, size + 1):
        reads = []
        for lo in range(size - x + 1):
            box = (Region(0, 1, lo, lo + x, 0, other) if axis == 0
                   else Region(0, 1, 0, other, lo, lo + x))
            read = ops.input_region(layer, index, ins, box)
            reads.append(0 if read is None else read.height if axis == 0 else read.width)
        growth[x] = min(reads)
    return growth


@dataclass
class Extents:
    """The least extents (module docstring) of one workload's tiles, with its read growths
    memoised."""

    workload: Workload
    growth: dict[tuple[str, int, Axis], np.ndarray] = field(default_factory=dict)

    def least(self, parts: int, axis: Axis, layers: frozenset[str],
              together: frozenset[str] = frozenset()) -> dict[str, np.ndarray]:
        """Per layer of `layers` with at least `parts` rows (axis 0) or columns (axis 1):
        the fewest rows or columns of its tile regions, per part, in any FLG whose grid
        has `parts` parts along the axis (the module's extents). A layer of `together`
        is taken to have all its consumers in the FLG. `layers` must hold every
        consumer of each of its layers."""
        wl = self.workload
        found: dict[str, np.ndarray] = {}
        k = np.arange(parts)
        for x in reversed(wl.layers):
            side = _side(wl, x, axis)
            if x not in layers or side < parts:
                continue
            share = (k + 1) * side // parts - k * side // parts
            consumers = wl.consumers(x)
            if (x in wl.outputs or not consumers
                    or any(_side(wl, v, axis) < parts for v in consumers)):
                found[x] = share
                continue
            inside = np.zeros(parts, dtype=np.int64)
            for v in consumers:
                for index, src in enumerate(wl.layers[v].inputs):
                    if src == x:
                        inside = np.maximum(inside, self._growth(v, index, axis)[found[v]])
            found[x] = inside if x in together else np.minimum(share, inside)
        return found

    def _growth(self, reader: str, index: int, axis: Axis) -> np.ndarray:
        key = (reader, index, axis)
        if key not in self.growth:
            self.growth[key] = read_growth(self.workload, reader, index, axis)
        return self.growth[key]


@dataclass(frozen=True)
class Envelope:
    """One layer's tile cycles at one number of samples per tile."""

    cycles: np.ndarray
    """[h, w]: the least cycles of any box of these samples holding h x w (0 where h or
    w is 0; never above the box's own cycles, never falling as h or w grows)."""
    least_rate: Fraction
    """The least cycles per position over every box of these samples."""


def envelope(workload: Workload, hw: Hardware, name: str, samples: int,
             deadline: float | None = None) -> Envelope | None:
    """The layer's Envelope from the cost model, every box tried; None when `deadline`
    (time.perf_counter()) passes first."""
    layer = workload.layers[name]
    ins = workload.in_shapes(name)
    rows, cols = layer.out.h, layer.out.w
    raw = np.full((rows, cols), NO_MAPPING, dtype=np.int64)
    for h in range(1, rows + 1):
        if deadline is not None and time.perf_counter() >= deadline:
            return None
        for w in range(1, cols + 1):
            with contextlib.suppress(NoMappingError):
                raw[h - 1, w - 1] = tile_cost(hw, layer, ins, Region(0, samples, 0, h, 0, w),
                                              workload.elem_bytes).cycles
    positions = samples * np.outer(np.arange(1, rows + 1), np.arange(1, cols + 1))
    ratio = raw / positions
    near = np.argwhere(ratio <= ratio.min() * (1 + 1e-9))
    rate = min(Fraction(int(raw[h, w]), int(positions[h, w])) for h, w in near)
    least = np.minimum.accumulate(np.minimum.accumulate(raw[::-1, ::-1], axis=0), axis=1)
    cycles = np.zeros((rows + 1, cols + 1), dtype=np.int64)
    cycles[1:, 1:] = least[::-1, ::-1]
    return Envelope(cycles, rate)


def possible_grids(workload: Workload, group: SparseGroup) -> set[tuple[int, int, int]]:
    """(batch parts, height parts, width parts) of every grid an FLG holding the group
    can have (case A of the module docstring)."""
    layers = [workload.layers[n].out for n in group.layers]
    h_group, w_group = min(s.h for s in layers), min(s.w for s in layers)
    shapes = {(layer.out.h, layer.out.w) for layer in workload.layers.values()}
    planes = {(h1, w2) for h1, w1 in shapes for h2, w2 in shapes
              if h1 <= h2 and w2 <= w1 and h1 <= h_group and w2 <= w_group}
    batch = workload.batch
    grids = set()
    for h_min, w_min in planes:
        for parts in range(1, h_min * w_min + 1):
            split = plane_split(parts, h_min, w_min)
            if split is not None:
                grids |= {(d, *split) for d in workload.batch_divisors
                          if math.gcd(d * parts, batch) == d}
    return grids


def _descendants(workload: Workload, names: tuple[str, ...]) -> frozenset[str]:
    found, stack = set(names), list(names)
    while stack:
        for v in workload.consumers(stack.pop()):
            if v not in found:
                found.add(v)
                stack.append(v)
    return frozenset(found)


def _excess(charge: Fraction, cycles: Fraction | int) -> Fraction:
    return max(Fraction(0), cycles - charge)


def _case_a(workload: Workload, group: SparseGroup, charges: Mapping[str, Fraction],
            envelopes: dict[tuple[str, int], Envelope], extents: Extents) -> Fraction:
    """Least excess of the group's layers with the whole group in one FLG, over every
    grid it can have (cycles)."""
    grids = possible_grids(workload, group)
    below = _descendants(workload, group.layers)
    together = frozenset(group.sparse)
    rows = {p: extents.least(p, 0, below, together) for p in {g[1] for g in grids}}
    cols = {p: extents.least(p, 1, below, together) for p in {g[2] for g in grids}}
    least: Fraction | None = None
    for batch_parts, h_parts, w_parts in grids:
        samples = workload.batch // batch_parts
        excess = sum((_excess(charges[y], batch_parts * int(
            envelopes[y, samples].cycles[np.ix_(rows[h_parts][y], cols[w_parts][y])].sum()))
            for y in group.layers), Fraction(0))
        least = excess if least is None else min(least, excess)
    return Fraction(0) if least is None else least


def _case_b(workload: Workload, group: SparseGroup, charges: Mapping[str, Fraction],
            envelopes: dict[tuple[str, int], Envelope]) -> Fraction:
    """Least excess of the group's sparse layers when one of them has a consumer outside
    its FLG and so is computed whole, with what that needs of the others (cycles)."""
    samples = {s for _, s in envelopes}
    least: Fraction | None = None
    for x in group.sparse:
        whole = needed(workload, frozenset({x})).positions
        excess = Fraction(0)
        for y in group.sparse:
            if whole.get(y, 0):
                rate = min(envelopes[y, s].least_rate for s in samples)
                excess += _excess(charges[y], rate * workload.batch * whole[y])
        least = excess if least is None else min(least, excess)
    return Fraction(0) if least is None else least


def group_excess(workload: Workload, hw: Hardware, group: SparseGroup,
                 charges: Mapping[str, Fraction], extents: Extents,
                 deadline: float | None = None) -> Fraction | None:
    """The least cycles the group's layers take above their `charges` in any schedule
    (the lesser of the module's cases A and B); None when `deadline` passes first."""
    envelopes: dict[tuple[str, int], Envelope] = {}
    for y in group.layers:
        for s in workload.batch_divisors:
            found = envelope(workload, hw, y, s, deadline)
            if found is None:
                return None
            envelopes[y, s] = found
    return min(_case_a(workload, group, charges, envelopes, extents),
               _case_b(workload, group, charges, envelopes))


def group_boxes(workload: Workload, group: SparseGroup) -> int:
    """Tile boxes the group's envelopes try: samples per tile x rows x columns, summed
    over its layers."""
    planes = sum(workload.layers[n].out.h * workload.layers[n].out.w for n in group.layers)
    return len(workload.batch_divisors) * planes


def sparse_groups_bound(workload: Workload, hw: Hardware, charges: Mapping[str, Fraction],
                        deadline: float | None = None) -> Bound | None:
    """The compute bound (the sum of `charges`, cycles per layer) plus each group's
    excess, groups of at most MAX_GROUP_BOXES boxes tried largest charge first until
    `deadline`; None when no group adds anything."""
    groups = [g for g in sparse_groups(workload)
              if group_boxes(workload, g) <= MAX_GROUP_BOXES]
    groups.sort(key=lambda g: -sum(charges[n] for n in g.layers))
    extents = Extents(workload)
    added: list[tuple[SparseGroup, Fraction]] = []
    for group in groups:
        excess = group_excess(workload, hw, group, charges, extents, deadline)
        if excess is None:
            break
        if excess > 0:
            added.append((group, excess))
    if not added:
        return None
    total = sum(charges.values(), Fraction(0)) + sum((e for _, e in added), Fraction(0))
    terms = ", ".join(f"[{g.sparse[0]} .. {g.readers[-1]}] +{math.floor(e):,}"
                      for g, e in added)
    return Bound("sparse_groups", math.ceil(total),
                 "the compute bound + the least cycles above their charges of the groups "
                 "of layers that need only some positions, with their readers, over every "
                 "FLG and grid that can hold them (formulations/sparse_groups.py): "
                 + terms)
