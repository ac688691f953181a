"""Lower bounds that hold for every schedule (all six attributes) of a workload on a
hardware, each with its derivation.

Two facts carry them all:
- every output position that a consumer reads to compute what it must compute (or that
  is a network output) is computed by at least one tile (`needed.py`: propagated back
  from the outputs); tiling only adds work (halo recompute), never removes it;
- tiles run one at a time on the core array, and DRAM serves one transfer at a time.

Latency (cycles):
- `compute`: per PE-array layer, every tile's compute is at least tc * tk * R * S *
  ceil(h/p_h) * ceil(w/p_w) * ceil(b/p_b) * serial groups for its unrolling, and ceil(x/p)
  >= x/p, so the layer's tiles take at least (least over the six unrollings of the
  cycles per output position) x (positions it must compute) (`position_cycles_bound`);
  per vector layer, sum of ceil(ops/rate) >= its ops / rate. A tile also takes at least
  its GBUF reads / the GBUF read bandwidth, and every tile reads all of its layer's
  weights (channels are never tiled): a layer with weights takes at least weight bytes /
  read bandwidth (GPT-2 decode's ffn2: 9,216 cycles, 32 x its MAC time). It also reads
  its input activations from the GBUF at least once per output position: C x groups
  bytes per position where the kernel is at least the stride (`input_reads_per_position`
  states where the cost model guarantees it), so a tile of n positions takes at least
  (n x those bytes + weight bytes) / read bandwidth (GPT-2 XL's per-head key projection
  on cloud: 3.125 cycles per position against 1.75 on the PE array). These floors hold
  per tile, and a tile is a dense box (b samples x h rows x w columns): when a layer must
  compute only some positions (a stride-2 1x1 conv reads every other row and column),
  a box holds at most b x m(h, w) of them, m(h, w) = the most needed positions in any
  h x w window, at a cost of at least max(cycles per position x b h w, (read bytes per
  position x b h w + weight bytes) / read bandwidth); so every needed position costs at
  least the least of that ratio over all boxes (b = batch is best: the weight floor is
  shared by more samples), and the
  layer at least its needed positions x that rate (`least_rate_per_needed`: ResNet-50's
  last bottleneck of a stage at batch 16, 1.5 x the per-position rate). A layer of one
  output position at batch 1 always runs as one tile of all of it, whose cycles the cost
  model gives exactly (a tile's cost depends on its layer and extents only); that
  replaces its term when larger (GPT-2 decode's ffn2: 9,228). Summed over layers.
- `compulsory_dram`: every weight is loaded at least once; every layer that reads a
  network input loads the part of it its tiles read (placement.make_segment), so of
  every read, the elements needed to compute the reader's needed positions
  (`needed.py`) are loaded at least once; every network output is stored at least once;
  each byte takes 1 / bandwidth cycles.
- `lfa_relaxation` (see `lfa/relaxation.py`): latency >= the ideal max(sum of tile cycles,
  sum of DRAM cycles) of its LFA, so the least ideal over the LFAs is a bound.
Energy (pJ), `energy`: MACs of the positions that must be computed x MAC energy; each such
output element passes OL1 once (read and write) and is written once to the GBUF; OL0 is
written R x S times and read R x S + 1 times per output element (reference `getCost`:
ol0_w = MACs / C x tc x p_c, ol0_r = ol0_w + p_c x ofmap); vector ops x their energy;
compulsory DRAM bytes x DRAM energy; static power x the latency bound. Every term appears
in every tile's energy.
Per tile program (a fixed LFA), `program_bound`: the ideal, and the head-and-tail bound.
E x D (pJ x cycles), `edp`: energy and latency are both positive and each is at least its
bound, so their product is at least the product of the bounds.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np

from mipsched.core import Bound
from mipsched.cost.core_array import (
    NoMappingError,
    conv_shape,
    group_sharing,
    input_reads_per_position,
    position_cycles_bound,
)
from mipsched.cost.tile import tile_cost
from mipsched.formulations.needed import needed, needed_masks, read_needs
from mipsched.hw.model import Hardware
from mipsched.schedule.placement import Placement
from mipsched.schedule.tile_program import TileProgram
from mipsched.workload.graph import Workload
from mipsched.workload.layer import MAC_OPS, Layer, Op, Region


@dataclass(frozen=True)
class LatencyBound:
    """The strongest latency bound (cycles), the name of the one that binds, and every
    bound that was computed."""

    cycles: int
    binding: str
    bounds: tuple[Bound, ...]
    compute_by_layer: Mapping[str, Fraction] | None = None
    """Per layer, the cycles the compute bound charges it (their sum, rounded up, is
    the compute bound; solve.gap_split); None when not kept."""

    @property
    def components(self) -> dict[str, int]:
        """Every computed bound by name (cycles)."""
        return {b.name: int(b.value) for b in self.bounds}

    @property
    def derivation(self) -> str:
        """How the binding bound is derived."""
        return next(b.derivation for b in self.bounds if b.name == self.binding)


def proven_cycles(name: str, cycles: float, derivation: str) -> Bound | None:
    """A latency bound from a MIP's floating-point bound (cycles): less a margin of 1e-6
    relative, so that solver tolerance never overstates it, rounded up (latencies are
    whole cycles); None when nothing above 0 was proved."""
    if cycles <= 0:
        return None
    return Bound(name, math.ceil(cycles * (1 - 1e-6)), derivation)


def strongest(bounds: list[Bound],
              compute_by_layer: Mapping[str, Fraction] | None = None) -> LatencyBound:
    """The largest of several latency bounds (cycles; all valid, so their max is too),
    with the compute bound's per-layer charges when given."""
    best = max(bounds, key=lambda b: b.value)
    return LatencyBound(int(best.value), best.name, tuple(bounds), compute_by_layer)


def network_latency_bound(workload: Workload, hw: Hardware) -> LatencyBound:
    """max(compute, compulsory DRAM) (cycles): the bounds that need no model."""
    per_layer = layer_compute_cycles(workload, hw)
    return strongest([compute_bound(workload, hw, per_layer=per_layer),
                      compulsory_dram_bound(workload, hw)], per_layer)


def compute_bound(workload: Workload, hw: Hardware,
                  box_rates: dict[str, Fraction] | None = None,
                  per_layer: dict[str, Fraction] | None = None) -> Bound:
    """The cycles the core array and the vector unit need for the positions every
    schedule computes (see the module docstring), with `box_rates` as in
    layer_compute_cycles; `per_layer`: that function's result, when the caller has it."""
    if per_layer is None:
        per_layer = layer_compute_cycles(workload, hw, box_rates)
    cycles = sum(per_layer.values(), Fraction(0))
    boxes = (f"; {len(box_rates)} layers at least their least tile cycles per needed "
             "position over every tile box of the cost model (formulations/box_rates.py)"
             if box_rates else "")
    return Bound("compute", math.ceil(cycles),
                 "sum over layers of (least PE-array cycles per output position over the "
                 "six unrollings x the positions every schedule computes: those its "
                 "consumers read to compute theirs, back from the outputs; every tile a dense "
                 "box taking at least (its input bytes + weight bytes) / GBUF read "
                 "bandwidth, so a layer "
                 "with sparse needed positions pays the least cost per needed position of "
                 "any box), plus vector ops of those positions / vector rate" + boxes)


def layer_compute_cycles(workload: Workload, hw: Hardware,
                         box_rates: dict[str, Fraction] | None = None
                         ) -> dict[str, Fraction]:
    """Per layer, the cycles its unit needs for the positions every schedule computes
    (exact fractions; their sum is the compute bound). `box_rates`: per layer, a least
    tile cycles per needed position (box_rates.py), which raises its term to that x its
    needed positions where larger."""
    masks = needed_masks(workload)
    cycles = {}
    for name, layer in workload.layers.items():
        count = workload.batch * int(masks[name].sum())
        total = workload.batch * layer.out.h * layer.out.w
        if layer.op in MAC_OPS:
            floor = tile_floor(workload, hw, layer)
            rate = least_rate_per_needed(masks[name], floor.per_position, floor.weights,
                                         workload.batch, floor.reads)
            cycles[name] = max(count * rate, count * floor.reads + floor.weights)
        else:
            cycles[name] = Fraction(workload.vector_ops(name) * count,
                                    total * hw.vector_unit.ops_per_cycle)
        if total == 1:
            cycles[name] = max(cycles[name], _whole_tile_cycles(workload, hw, name))
    return with_box_rates(workload, cycles, box_rates) if box_rates else cycles


@dataclass(frozen=True)
class TileFloor:
    """What every tile of a PE-array layer takes at least (see the module docstring):
    max(per_position x n, reads x n + weights) cycles for a tile of n output positions."""

    per_position: Fraction
    """Least PE-array cycles per output position (sample x row x column)."""
    reads: Fraction
    """Least GBUF read cycles of input activations per output position."""
    weights: Fraction
    """GBUF read cycles of the layer's weights, which every tile reads."""

    def cycles(self, positions: int) -> Fraction:
        """The least cycles of a tile of `positions` output positions."""
        return max(self.per_position * positions, self.reads * positions + self.weights)


def tile_floor(workload: Workload, hw: Hardware, layer: Layer) -> TileFloor:
    """The per-tile floor of PE-array layer `layer` on `hw`."""
    return TileFloor(_cycles_per_position(workload, hw, layer),
                     _read_cycles_per_position(workload, hw, layer),
                     Fraction(workload.weight_bytes(layer.name), hw.gbuf.read_bytes_per_cycle))


def with_box_rates(workload: Workload, cycles: dict[str, Fraction],
                   box_rates: dict[str, Fraction]) -> dict[str, Fraction]:
    """Per-layer `cycles` raised to each layer's box rate (cycles per needed position,
    box_rates.py) x its needed positions where that is larger."""
    positions = needed(workload).positions
    raised = dict(cycles)
    for name, rate in box_rates.items():
        raised[name] = max(raised[name], rate * workload.batch * positions[name])
    return raised


def may_leave_tiles_empty(workload: Workload) -> bool:
    """Whether some layer concatenates along rows, the only way a layer of an FLG can
    have no region at some tile index (so bounds that count a tile of every layer at
    every index, or every tile of an ancestor before a layer's last, do not hold)."""
    return any(layer.op == Op.CONCAT and layer.axis == "h"
               for layer in workload.layers.values())


def least_tile_cycles(workload: Workload, hw: Hardware) -> dict[str, Fraction]:
    """Per layer, a lower bound on the cycles of any one of its tiles (cycles): a tile
    computes one output position at least, so on the PE array max(cycles per position,
    read cycles per position + weight bytes / read bandwidth), on the vector unit the
    ops of one position / vector rate (see the module docstring)."""
    least = {}
    for name, layer in workload.layers.items():
        if layer.op in MAC_OPS:
            least[name] = tile_floor(workload, hw, layer).cycles(1)
        else:
            positions = workload.batch * layer.out.h * layer.out.w
            least[name] = Fraction(workload.vector_ops(name),
                                   positions * hw.vector_unit.ops_per_cycle)
    return least


def least_rate_per_needed(mask: np.ndarray, per_position: Fraction, floor: Fraction,
                          batch: int, reads: Fraction = Fraction(0)) -> Fraction:
    """Least cycles per needed (sample, position) that any tile of a layer can reach (see
    the module docstring): over every box of `batch` samples x h rows x w columns,
    max(per_position x n, reads x n + floor) / (batch x m(h, w)) with n = batch x h x w
    positions in the box, where m(h, w) is the most True cells of `mask` in any h x w
    window; max(per_position, reads) when the mask is full or the layer has no weights
    (floor 0: single positions are as cheap)."""
    dense = max(per_position, reads)
    if floor == 0 or mask.all() or not mask.any():
        return dense
    best: Fraction | None = None
    for h, w, most in window_maxima(mask):
        n = batch * h * w
        rate = max(per_position * n, reads * n + floor) / (batch * most)
        best = rate if best is None or rate < best else best
    assert best is not None  # a 1 x 1 window holds a needed position
    return best


def window_maxima(mask: np.ndarray) -> list[tuple[int, int, int]]:
    """(h, w, most True cells of `mask` in any h x w window) for every window size that
    holds at least one, from the mask's summed-area table."""
    rows, cols = mask.shape
    table = np.zeros((rows + 1, cols + 1), dtype=np.int64)
    table[1:, 1:] = mask.astype(np.int64).cumsum(0).cumsum(1)
    out = []
    for h in range(1, rows + 1):
        for w in range(1, cols + 1):
            sums = table[h:, w:] - table[:-h, w:] - table[h:, :-w] + table[:-h, :-w]
            most = int(sums.max())
            if most:
                out.append((h, w, most))
    return out


def _whole_tile_cycles(workload: Workload, hw: Hardware, name: str) -> int:
    """Cycles of a tile of all of layer `name` (0 when no unrolling fits it)."""
    layer = workload.layers[name]
    whole = Region(0, workload.batch, 0, layer.out.h, 0, layer.out.w)
    try:
        return tile_cost(hw, layer, workload.in_shapes(name), whole, workload.elem_bytes).cycles
    except NoMappingError:
        return 0


def compulsory_dram_bound(workload: Workload, hw: Hardware) -> Bound:
    """The DRAM cycles of the bytes every schedule moves (compulsory_dram_bytes)."""
    dram_bytes = compulsory_dram_bytes(workload)
    return Bound("compulsory_dram", math.ceil(dram_bytes / hw.dram.bytes_per_cycle),
                 "(weights + read part of network inputs + network outputs) bytes / DRAM "
                 "bandwidth")


def compulsory_dram_bytes(workload: Workload) -> int:
    """Bytes every schedule moves: weights, the needed part of each read of a network
    input (each reading layer loads its own), the outputs."""
    input_elems = sum(int(m.sum()) for m in read_needs(workload).values())
    return (workload.total_weight_bytes + workload.batch * workload.elem_bytes * input_elems
            + sum(workload.ofmap_bytes(t) for t in workload.outputs))


def energy_bound(workload: Workload, hw: Hardware, latency_cycles: int) -> Bound:
    """Energy (pJ) of every schedule whose latency is at least `latency_cycles`."""
    ca = hw.core_array
    e = workload.elem_bytes
    pj = 0.0
    needed_positions = needed(workload).positions
    for name, layer in workload.layers.items():
        positions = workload.batch * needed_positions[name]
        total = workload.batch * layer.out.h * layer.out.w
        if layer.op in MAC_OPS:
            sh = conv_shape(layer, workload.in_shapes(name), 1, 1, 1)
            outputs = positions * layer.out.c  # output elements
            pj += Fraction(workload.macs(name) * positions, total) * ca.mac_pj
            per_output = e * (ca.ol1.read_pj_per_byte + ca.ol1.write_pj_per_byte
                              + hw.gbuf.write_pj_per_byte
                              + (sh.r * sh.s + 1) * ca.ol0.read_pj_per_byte
                              + sh.r * sh.s * ca.ol0.write_pj_per_byte)
            pj += outputs * per_output
        else:
            pj += Fraction(workload.vector_ops(name) * positions, total) \
                * hw.vector_unit.pj_per_op
    pj += compulsory_dram_bytes(workload) * hw.dram.energy_pj_per_byte
    pj += hw.static_pj_per_cycle * latency_cycles
    return Bound("energy", float(pj),
                 "MAC, OL0/OL1 and GBUF-write energy of the output positions that must be "
                 "computed + vector-op energy + compulsory DRAM bytes x DRAM energy + static "
                 "power x the latency bound")


def edp_bound(energy: Bound, latency: LatencyBound) -> Bound:
    """Energy bound (pJ) x latency bound (cycles): a bound on E x D (pJ x cycles)."""
    return Bound("edp", energy.value * latency.cycles,
                 f"energy bound x latency bound ({latency.binding}): both are positive and "
                 "each is at least its bound")


def _read_cycles_per_position(workload: Workload, hw: Hardware, layer: Layer) -> Fraction:
    """Least GBUF read cycles per output position (one sample) of `layer`'s input
    activations: input elements per position and group (`input_reads_per_position`) x
    groups x element bytes / read bandwidth (0 where the cost model gives no floor)."""
    ins = workload.in_shapes(layer.name)
    sh = conv_shape(layer, ins, workload.batch, layer.out.h, layer.out.w)
    elems = input_reads_per_position(hw, sh)
    return Fraction(elems * layer.groups * workload.elem_bytes, hw.gbuf.read_bytes_per_cycle)


def _cycles_per_position(workload: Workload, hw: Hardware, layer: Layer) -> Fraction:
    """Least PE-array cycles per output position of `layer`, all groups together."""
    ins = workload.in_shapes(layer.name)
    if layer.op == Op.MATMUL_ACT:  # groups = heads x samples of the tile: per sample
        sh = conv_shape(layer, ins, 1, layer.out.h, layer.out.w)
        full = replace(sh, groups=layer.groups * workload.batch)
        return position_cycles_bound(hw, sh) * Fraction(layer.groups,
                                                        group_sharing(hw, full))
    sh = conv_shape(layer, ins, workload.batch, layer.out.h, layer.out.w)
    serial = -(-sh.groups // group_sharing(hw, sh))
    return position_cycles_bound(hw, sh) * serial


def program_bound(program: TileProgram) -> int:
    """A lower bound on the latency of every DLSA of `program` (cycles): the ideal
    max(sum of tile cycles, sum of DRAM cycles), and, for every p <= r, (DRAM cycles of
    the loads first used by tiles 0..p) + (cycles of tiles p..r) + (DRAM cycles of the
    stores produced by tiles r..end). Why: tiles run in order, each after its loads, so
    tile p starts after every load first used at or before it; DRAM serves one transfer
    at a time from time 0; a store starts after its producer, so those of tiles r.. all
    start after tile r ends."""
    n = program.n_tiles
    loads_by = [0] * n
    stores_by = [0] * n
    for t in program.tensors:
        if t.is_load:
            loads_by[t.first_use] += t.access_cycles
        elif 0 <= t.producer < n:
            stores_by[t.producer] += t.access_cycles
    return _head_and_tail(program.ideal_cycles, program.tile_cycles, loads_by, stores_by)


def placement_bound(placed: Placement) -> int:
    """program_bound of the placed LFA's tile program, from its segments, before the
    program is built (the descent skips, unbuilt, the neighbours it shows cannot win)."""
    cycles = [step[3] for segment in placed.segments for step in segment.plan.steps]
    by_tile = [segment.dram_by_tile for segment in placed.segments]
    loads_by = list(itertools.chain.from_iterable(loads for loads, _ in by_tile))
    stores_by = list(itertools.chain.from_iterable(stores for _, stores in by_tile))
    return _head_and_tail(max(sum(cycles), sum(loads_by) + sum(stores_by)), cycles, loads_by,
                          stores_by)


def _head_and_tail(ideal: int, cycles: Sequence[int], loads_by: Sequence[int],
                   stores_by: Sequence[int]) -> int:
    """program_bound from the ideal (cycles), the tiles' cycles and, per tile, the DRAM
    cycles of the loads it uses first and of the stores it produces."""
    n = len(cycles)
    best = ideal
    loads_upto = 0  # DRAM cycles of loads first used by tiles 0..p
    compute_before = 0  # cycles of tiles 0..p-1
    head = -math.inf  # max over p <= r of loads_upto(p) - compute_before(p)
    stores_from = [0] * (n + 1)  # DRAM cycles of stores produced by tiles r..n-1
    for r in range(n - 1, -1, -1):
        stores_from[r] = stores_from[r + 1] + stores_by[r]
    for r in range(n):
        loads_upto += loads_by[r]
        head = max(head, loads_upto - compute_before)
        compute_before += cycles[r]
        best = max(best, head + compute_before + stores_from[r])
    return int(best)
