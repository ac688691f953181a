"""What lowering memoises, and an LFA's segments placed one after another.

- An FLG's *plan*: what depends only on its layers and tiling number (tiles, costs,
  bytes, the on-chip holds inside the FLG), memoised per FLG.
- An FLG's *segment*: what also depends on which of its ofmaps and inputs cross its LG's
  boundary (its DRAM tensors and the on-chip holds of ofmaps read by later FLGs of the
  LG, in positions relative to its first tile), memoised per FLG and traffic.
- A *placement*: an LFA's segments one after another (Lowerer.place), with the ofmaps
  held on chip across FLGs; stage 1 of the SA times a placement without building the
  tile program (default_eval).
"""

from __future__ import annotations

import bisect
import itertools
import operator
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from mipsched.cost import TileCost
from mipsched.schedule.notation import Lfa
from mipsched.schedule.tile_program import EnergyParts, TensorKind
from mipsched.schedule.tiling import FlgTiles
from mipsched.workload.graph import Workload

#: One tile of an FLG in execution order: (layer, layer index, tile index, cycles, pJ,
#: energy breakdown).
Step = tuple[str, int, int, int, float, EnergyParts]


@dataclass(frozen=True, eq=False)
class FlgPlan:
    """Everything about an FLG that does not depend on the rest of the LFA: its tiles,
    their costs and bytes, and the on-chip holds at positions (steps) relative to its
    first tile."""

    layers: tuple[str, ...]
    tiles: FlgTiles
    costs: dict[str, list[TileCost | None]]
    steps: list[Step]
    """The FLG's tiles in execution order."""
    share_bytes: dict[str, list[int]]
    """Bytes of each tile's share of the layer's ofmap."""
    read_bytes: dict[str, list[tuple[int | None, ...]]]
    """Bytes each tile reads from each input (None: nothing)."""
    local_onchip: list[int]
    """Bytes of ofmaps held on chip for consumers inside the FLG, per step (relative tile
    position): a tile's output lives from its step to the last step of the same tile index
    that reads it."""
    held_from: dict[str, list[int]]
    """Per layer and tile index, the first step (relative position) from which the tile's
    share is held for consumers in later FLGs of its LG: after its local consumers, if
    any, else from its own step."""
    readers_outside: tuple[tuple[int, str], ...]
    """(step, consumer) of every consumer outside the FLG, by step."""
    sources_outside: tuple[tuple[int, int, str], ...]
    """(step, input index, source) of every input from outside the FLG (network inputs
    and ofmaps of earlier FLGs), by step."""
    output_steps: tuple[int, ...]
    """Steps of the network outputs."""
    neighbours: tuple[str, ...]
    """The layers outside the FLG it reads or that read it."""
    last_steps: tuple[int, ...]
    """Per layer, the step of its last tile."""
    all_inside: tuple[bool, ...]
    """The key of the segment whose neighbours all lie in its LG."""
    segments: dict[tuple[bool, ...], Segment] = field(default_factory=dict)
    """The FLG's segments met so far, by which neighbours lie in its LG (memoised with
    the plan)."""


class Traffic(NamedTuple):
    """What crosses an FLG's boundary in one LFA, by step (the layer's index in the FLG):
    the inputs it loads from DRAM (network inputs, ofmaps of other LGs), the ofmaps it
    stores (read by another LG, or network outputs) and the ofmaps it holds on chip for
    later FLGs of its LG."""

    loaded: tuple[tuple[int, int], ...]
    """(step, input index) of every loaded input."""
    stored: tuple[int, ...]
    held: tuple[int, ...]


class Transfer(NamedTuple):
    """A DRAM tensor of a segment, positions relative to the FLG's first tile."""

    kind: TensorKind
    step: int
    tile: int | None
    bytes: int
    access_cycles: int
    first_use: int
    """Loads: the first consuming tile (-1 for stores)."""
    last_use: int
    producer: int
    """Stores: the producing tile (-1 for loads)."""
    input_index: int
    """Ifmap loads: which input of the layer (-1 otherwise)."""


@dataclass(frozen=True, eq=False)
class Segment:
    """One FLG under one traffic: its DRAM tensors in tile order and its on-chip bytes per
    tile, relative to its first tile (memoised: an LFA is a sequence of segments)."""

    plan: FlgPlan
    traffic: Traffic
    transfers: list[Transfer]
    onchip: list[int]
    """On-chip bytes per tile of the FLG: ofmaps held for consumers inside it, plus the
    shares already produced of the ofmaps it holds for later FLGs of its LG."""
    held: tuple[tuple[tuple[str, ...], int], ...]
    """Per held step (traffic.held), its readers in later FLGs of the LG and the bytes of
    its whole ofmap, held from the FLG's end to the last tile of the last of them."""

    @cached_property
    def tight_bytes(self) -> list[int]:
        """The least buffer bytes any DLSA holds on each tile of the FLG for it (relative
        positions): its on-chip bytes, every load from its first use to its last, every
        store on its producer's tile (dlsa_starts.tight_dlsa); memoised with the segment."""
        diff = [0] * (len(self.onchip) + 1)
        for t in self.transfers:
            first, last = ((t.producer, t.producer) if t.kind == TensorKind.STORE_OFMAP
                           else (t.first_use, t.last_use))
            diff[first] += t.bytes
            diff[last + 1] -= t.bytes
        return list(map(operator.add, self.onchip, itertools.accumulate(diff[:-1])))

    @cached_property
    def dram_by_tile(self) -> tuple[list[int], list[int]]:
        """DRAM cycles of the loads first used by each tile of the FLG, and of the stores
        each tile produces (relative positions); memoised with the segment."""
        loads, stores = [0] * len(self.onchip), [0] * len(self.onchip)
        for t in self.transfers:
            if t.kind == TensorKind.STORE_OFMAP:
                stores[t.producer] += t.access_cycles
            else:
                loads[t.first_use] += t.access_cycles
        return loads, stores


#: An ofmap held on chip for later FLGs of its LG, from the end of its FLG (the shares
#: before are in the segment's on-chip bytes): (first tile, last tile, bytes, readers).
Hold = tuple[int, int, int, tuple[str, ...]]


@dataclass(frozen=True)
class Placement:
    """An LFA's segments one after another: where each starts and which end an LG, and
    the ofmaps held on chip across FLGs."""

    lfa: Lfa
    segments: list[Segment]
    bases: list[int]
    """First tile position of each FLG."""
    lg_ends: list[bool]
    """Whether each FLG is the last of its LG."""
    holds: list[Hold]
    """By first tile."""
    n_tiles: int
    reused: int = 0
    """How many leading FLGs were taken from the placement it was derived from."""

    @cached_property
    def held_bytes(self) -> list[int]:
        """Bytes of the ofmaps held across FLGs (`holds`) on each tile; memoised with the
        placement (the buffer check and the lowering of a descent's neighbour both read
        it)."""
        later = [0] * (self.n_tiles + 1)
        for after, end, size, _ in self.holds:
            later[after] += size
            later[end + 1] -= size
        return list(itertools.accumulate(later[:-1]))

    def energy_pj(self, dram_pj_per_byte: float) -> float:
        """The lowered program's energy_pj (tile energy plus DRAM energy, pJ), summed in
        the same order, so equal to the last bit, before the program is built."""
        steps = itertools.chain.from_iterable(s.plan.steps for s in self.segments)
        dram_bytes = sum(t.bytes for s in self.segments for t in s.transfers)
        return sum(map(operator.itemgetter(4), steps)) + dram_pj_per_byte * dram_bytes


@dataclass(frozen=True)
class Column:
    """One layer's tiles in an FLG: costs, steps (as in FlgPlan.steps), bytes of each
    tile's share, of what it reads from each input and of what it produces."""

    costs: list[TileCost | None]
    steps: list[Step]
    share_bytes: list[int]
    read_bytes: list[tuple[int | None, ...]]
    produced_bytes: list[int]


def assemble_plan(wl: Workload, layers: tuple[str, ...], tiles: FlgTiles,
                  columns: list[Column]) -> FlgPlan:
    """The plan of the FLG of `layers` tiled as `tiles`, from its layers' columns: steps,
    bytes, the on-chip holds inside the FLG and what crosses its boundary."""
    count = tiles.grid.count
    steps = [column.steps[i] for i in range(count) for column in columns]
    # steps run tile index by tile index, layer by layer: tile i of layers[j] is step
    # i * len(layers) + j
    width = len(layers)
    step_of = {n: j for j, n in enumerate(layers)}
    diff = [0] * (count * width + 1)
    held_from: dict[str, list[int]] = {}
    for j, (n, column) in enumerate(zip(layers, columns, strict=True)):
        last_reader = max((step_of[v] for v in wl.consumers(n) if v in step_of),
                          default=None)
        starts = list(range(j, count * width, width))
        if last_reader is not None:
            for i, produced in enumerate(column.produced_bytes):
                if produced:
                    step = i * width + j
                    diff[step] += produced
                    diff[i * width + last_reader + 1] -= produced
                    starts[i] = i * width + last_reader + 1
        held_from[n] = starts
    local = list(itertools.accumulate(diff[:-1]))
    readers = tuple((j, v) for j, n in enumerate(layers) for v in wl.consumers(n)
                    if v not in step_of)
    sources = tuple((j, k, src) for j, n in enumerate(layers)
                    for k, src in enumerate(wl.layers[n].inputs) if src not in step_of)
    outputs = tuple(j for j, n in enumerate(layers) if n in wl.outputs)
    neighbours = tuple(dict.fromkeys([*(v for _, v in readers), *(
        src for _, _, src in sources if src in wl.layers)]))
    last_steps = tuple(range((count - 1) * width, count * width))
    by_layer = dict(zip(layers, columns, strict=True))
    return FlgPlan(layers, tiles, {n: c.costs for n, c in by_layer.items()}, steps,
                   {n: c.share_bytes for n, c in by_layer.items()},
                   {n: c.read_bytes for n, c in by_layer.items()},
                   local, held_from, readers, sources, outputs, neighbours, last_steps,
                   (True,) * len(neighbours))


def make_segment(plan: FlgPlan, inside: tuple[bool, ...], weights: dict[str, int],
                 bytes_per_cycle: int) -> Segment:
    """The segment of `plan` when its neighbours lie in its LG as `inside` says: its
    DRAM tensors in tile order (per tile: its ifmap loads, its weights at the layer's
    first tile, its store) and its on-chip bytes. `weights`: bytes of each layer's
    weights (layers with weights only); DRAM moves `bytes_per_cycle`."""
    in_lg = dict(zip(plan.neighbours, inside, strict=True))
    loaded = tuple((j, k) for j, k, src in plan.sources_outside
                   if not in_lg.get(src, False))  # network inputs are loaded
    stored = set(plan.output_steps)
    readers: dict[int, list[str]] = {}  # per held step, its readers in the LG
    for j, v in plan.readers_outside:
        if in_lg[v]:
            readers.setdefault(j, []).append(v)
        else:
            stored.add(j)
    traffic = Traffic(loaded, tuple(sorted(stored)), tuple(sorted(readers)))
    bpc = bytes_per_cycle
    layers = plan.layers
    width = len(layers)
    count = plan.tiles.grid.count
    loads: dict[int, list[int]] = {}
    for j, k in traffic.loaded:
        loads.setdefault(j, []).append(k)
    stored = set(traffic.stored)
    moving = sorted({*loads, *stored, *(j for j, n in enumerate(layers)
                                        if n in weights)})
    transfers = []
    for i in range(count):
        for j in moving:
            n = layers[j]
            p = i * width + j
            for k in loads.get(j, ()):
                size = plan.read_bytes[n][i][k]
                if size is not None:
                    transfers.append(Transfer(TensorKind.LOAD_IFMAP, j, i, size,
                                              -(-size // bpc), p, p, -1, k))
            if i == 0 and n in weights:
                size = weights[n]
                transfers.append(Transfer(TensorKind.LOAD_WEIGHT, j, None, size,
                                          -(-size // bpc), j, (count - 1) * width + j,
                                          -1, -1))
            if j in stored:
                size = plan.share_bytes[n][i]
                transfers.append(Transfer(TensorKind.STORE_OFMAP, j, i, size,
                                          -(-size // bpc), -1, -1, p, -1))
    diff = [0] * (count * width + 1)
    held = []
    for j in traffic.held:
        shares = plan.share_bytes[layers[j]]
        for start, size in zip(plan.held_from[layers[j]], shares, strict=True):
            diff[start] += size
        held.append((tuple(readers[j]), sum(shares)))
    onchip = list(map(operator.add, plan.local_onchip, itertools.accumulate(diff[:-1])))
    return Segment(plan, traffic, transfers, onchip, tuple(held))


def tight_peak(placed: Placement) -> int:
    """The least buffer peak (bytes) of any DLSA of the placed LFA: the peak of its
    segments' tight_bytes plus the ofmaps held across FLGs. It equals the peak of
    dlsa_starts.tight_dlsa on the lowered program, so the LFA has a DLSA that fits a
    buffer if and only if this fits it, known before the tile program is built."""
    tight = itertools.chain.from_iterable(map(operator.attrgetter("tight_bytes"),
                                              placed.segments))
    return max(map(operator.add, tight, placed.held_bytes), default=0)


def lg_crossings(lfa: Lfa, plans: list[FlgPlan], starts: tuple[int, ...], g0: int
               ) -> tuple[list[bool], list[tuple[bool, ...]]]:
    """Whether each FLG ends its LG, and for the FLGs from g0 on (`plans`) which of their
    neighbours lie in their LG (the key of their segment)."""
    cuts = lfa.dram_cuts
    if not cuts:
        return [False] * (len(starts) - 1) + [True], [plan.all_inside for plan in plans]
    order = lfa.order
    lg_at = list(itertools.chain.from_iterable(map(itertools.repeat, itertools.count(), map(
        operator.sub, (*cuts, len(order)), (0, *cuts)))))  # the LG of each position
    lg_of = dict(zip(order, lg_at, strict=True)).get
    flg_lg = list(map(lg_at.__getitem__, starts))
    lg_ends = [*map(operator.ne, flg_lg, flg_lg[1:]), True]
    keys = [tuple(map(operator.eq, map(lg_of, plan.neighbours), itertools.repeat(lg)))
            for plan, lg in zip(plans, flg_lg[g0:], strict=True)]
    return lg_ends, keys


def cross_flg_holds(layers: tuple[str, ...], plans: list[FlgPlan], segments: list[Segment],
           bases: list[int], n_tiles: int, g0: int, before: list[Hold]) -> list[Hold]:
    """The ofmaps held across FLGs: those of the FLGs before g0 from `before` (the
    placement the FLGs before g0 come from), their last tiles found again if a reader
    lies from FLG g0 on; then those of the FLGs from g0 on (`layers`, `plans`)."""
    last = dict(zip(layers, map(operator.add, itertools.chain.from_iterable(map(
        itertools.repeat, bases[g0:], map(len, map(operator.attrgetter("layers"), plans)))),
        itertools.chain.from_iterable(map(operator.attrgetter("last_steps"), plans))),
        strict=True))  # the last tile of each layer from FLG g0 on
    holds: list[Hold] = []
    if g0:
        # holds ending at FLG g0's first tile or later have a reader from FLG g0 on
        first = bases[g0] if g0 < len(bases) else n_tiles
        holds = before[:bisect.bisect_right(before, first, key=operator.itemgetter(0))]
        for k in itertools.compress(itertools.count(), map(
                operator.ge, map(operator.itemgetter(1), holds), itertools.repeat(first))):
            after, _, size, readers = holds[k]
            holds[k] = (after, max(map(last.get, readers, itertools.repeat(-1))), size,
                        readers)
    for segment, after in zip(segments[g0:], [*bases[1:], n_tiles][g0:], strict=True):
        for readers, size in segment.held:
            holds.append((after, max(map(last.__getitem__, readers)), size, readers))
    return holds


def unchanged_before(old: Lfa, new: Lfa) -> int:
    """An order position before which `old` and `new` have the same FLGs (layers and
    tiling numbers) in LGs of the same layers, so that they place the same segments there
    (the order's length: none differs)."""
    n = len(new.order)
    at = n
    if old.order is not new.order and old.order != new.order:
        lo = _first_difference(old.order, new.order)
        hi = n - _first_difference(old.order[::-1], new.order[::-1])
        cuts = new.dram_cuts
        lg = bisect.bisect_right(cuts, lo)  # the LG of position lo
        # the layers in [lo, hi) changed places; they stay in their LGs unless a cut
        # lies among them
        at = lo if lg == bisect.bisect_left(cuts, hi) else (0, *cuts)[lg]
    if old.flc != new.flc or old.tiling != new.tiling:
        g = _first_difference(old.flc, new.flc)  # FLGs before g have the same bounds
        g = min(g, _first_difference(old.tiling[:g + 1], new.tiling[:g + 1]))
        at = min(at, (0, *new.flc)[g])
    if old.dram_cuts != new.dram_cuts:
        k = _first_difference(old.dram_cuts, new.dram_cuts)
        at = min(at, (0, *new.dram_cuts)[k])  # the LG that splits or merges
    return at


def _first_difference(a: tuple, b: tuple) -> int:
    """The first index at which a and b differ (the shorter length if one starts the
    other)."""
    return next(itertools.compress(itertools.count(), map(operator.ne, a, b)),
                min(len(a), len(b)))

