"""Partitioning the workload's layer order into contiguous groups (each one LG and one FLG:
FLC set = DRAM cut set, tiling number from `tiling_rule`, double-buffered default DLSA),
and two classic partitioners that Cocco compares against (Cocco §4.2): Halide-style
greedy fusion and a sequential DP.

A partition is the sorted tuple of its cut positions (cut k separates order[k-1] from
order[k]). `Partitioner` turns partitions into LFAs, evaluates them (memoised) and
repairs those that overflow the buffer; cocco.py's GA shares it.
"""

from __future__ import annotations

import math
import sys
import time

from mipsched.core import (
    Candidate,
    InfeasibleError,
    MethodResult,
    Objective,
    SearchOptions,
    evaluate_lfa,
)
from mipsched.evaluate import Evaluation
from mipsched.heuristics.tiling_rule import finer_tiling, group_tiling
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa, ScheduleError
from mipsched.schedule.tiling import MAX_TILES
from mipsched.workload.graph import Workload

Cuts = tuple[int, ...]

DP_MAX_SEGMENT = 12
"""Longest group (layers) the DP considers: n x 12 segments keep ResNet-50 to seconds."""

DP_ROUNDS = 4
"""Re-linearisations of the objective around the DP's latest partition."""


RESULT_SECONDS_PER_TILE = 1e-4
"""Seconds per tile of the result that the partition methods keep back from their
deadline for what follows the search: lowering and evaluating the result, its replay in
the simulator, writing schedule.json and program.json. Measured 60 to 120 us per tile
(unloaded to loaded machine) on fsrcnn/edge/b4's partitions of 8,192 to 10,240 tiles,
where that alone took 0.6 to 1.2 s."""


def past(deadline: float | None) -> bool:
    """Whether the search must stop (`deadline` from SearchOptions.deadline())."""
    return deadline is not None and time.perf_counter() >= deadline


def search_end(deadline: float | None, part: Partitioner, cuts: Cuts) -> float | None:
    """`deadline` less the time to deliver a result the size of the partition `cuts`
    (RESULT_SECONDS_PER_TILE per tile); None without a deadline."""
    if deadline is None:
        return None
    return deadline - RESULT_SECONDS_PER_TILE * part.n_tiles(cuts)


def record(options: SearchOptions, part: Partitioner, cuts: Cuts) -> None:
    """Offers the partition, a new best of the search, to the run's trail (if any)."""
    ev = part.evaluation(cuts) if options.trail is not None else None
    if options.trail is not None and ev is not None:
        options.trail.offer(ev.latency_cycles, part.objective.cost(ev))


class Partitioner:
    """Evaluates partitions of one workload's layer order on one hardware (memoised).

    Single-layer groups that overflow even alone get a finer tiling (the next power of
    two `choose_grid` accepts); that refinement is kept per position for every later
    partition, so a given sequence of calls is deterministic."""

    def __init__(self, lowerer: Lowerer, objective: Objective) -> None:
        wl = lowerer.workload
        self.lowerer = lowerer
        self.objective = objective
        self.workload = wl
        self.order = tuple(wl.layers)
        self.n = len(self.order)
        self.capacity = lowerer.hw.gbuf.capacity_bytes
        for name in self.order:
            if wl.weight_bytes(name) > self.capacity:
                raise InfeasibleError(
                    f"layer '{name}' needs its {wl.weight_bytes(name):,} B of weights on chip "
                    f"at once (weights are never tiled), more than the {self.capacity:,} B "
                    "buffer")
        self.refined: dict[int, int] = {}
        """Position of a layer -> the tiling number it needs as a single-layer group."""
        self.evaluations = 0
        """Schedules lowered and evaluated so far."""
        self._rule: dict[tuple[int, int], int] = {}
        self._evals: dict[tuple[Cuts, tuple[int, ...]], Evaluation | None] = {}
        self._repaired: dict[Cuts, Cuts] = {}

    # --- partitions -> LFAs ---------------------------------------------------------------
    def groups(self, cuts: Cuts) -> list[tuple[int, int]]:
        """[start, stop) positions of each group."""
        edges = [0, *cuts, self.n]
        return list(zip(edges[:-1], edges[1:], strict=True))

    def tiling(self, a: int, b: int) -> int:
        """Tiling number of the group [a, b): the rule's, or a single layer's refinement."""
        if b - a == 1 and a in self.refined:
            return self.refined[a]
        key = (a, b)
        if key not in self._rule:
            self._rule[key] = group_tiling(self.workload, self.lowerer.hw, self.order[a:b])
        return self._rule[key]

    def lfa(self, cuts: Cuts) -> Lfa:
        """The LFA of partition `cuts`: every group one LG and one FLG, at its
        tiling number from `tiling_rule`."""
        tilings = tuple(self.tiling(a, b) for a, b in self.groups(cuts))
        return Lfa(self.order, cuts, tilings, cuts)

    # --- evaluation -----------------------------------------------------------------------
    def evaluation(self, cuts: Cuts) -> Evaluation | None:
        """Evaluation of the partition (None: it does not lower or does not fit)."""
        ev = self._evaluate(cuts)
        return ev if ev is not None and ev.fits else None

    def cost(self, cuts: Cuts) -> float | None:
        """Objective cost of the partition (None: it does not lower or does not fit)."""
        ev = self.evaluation(cuts)
        return None if ev is None else self.objective.cost(ev)

    def candidate(self, cuts: Cuts) -> Candidate:
        """The full schedule of a partition known to fit."""
        cand = evaluate_lfa(self.lowerer, self.lfa(cuts))
        if cand is None:
            raise ValueError(f"partition {cuts} does not fit")
        return cand

    def result(self, cuts: Cuts, stages: dict[str, Cuts] | None = None) -> MethodResult:
        """The method's result: the schedule of `cuts` and of each named stage (one
        lowering per distinct partition: on fsrcnn/edge/b4 one takes 0.1 s)."""
        made = {cuts: self.candidate(cuts)}
        for c in (stages or {}).values():
            if c not in made:
                made[c] = self.candidate(c)
        return MethodResult(made[cuts], {k: made[c] for k, c in (stages or {}).items()},
                            self.evaluations)

    def _evaluate(self, cuts: Cuts) -> Evaluation | None:
        """Evaluation even when it overflows (None: it does not lower)."""
        lfa = self.lfa(cuts)
        key = (cuts, lfa.tiling)
        if key not in self._evals:
            self.evaluations += 1
            cand = evaluate_lfa(self.lowerer, lfa, buffer_limit=sys.maxsize)
            self._evals[key] = None if cand is None else cand.evaluation
        return self._evals[key]

    # --- repair ---------------------------------------------------------------------------
    def repair(self, cuts: Cuts) -> Cuts:
        """`cuts` made to fit (Cocco §4.4.4): the group holding the first overflowing tile
        (else its successor, whose prefetch may overlap it, else its predecessor) is split
        in the middle, or, as a single layer, tiled finer. Raises InfeasibleError naming
        the layer when neither helps."""
        original = cuts
        cuts = self._repaired.get(original, original)  # re-checked: refinements may differ
        while True:
            bad = self._unplannable(cuts)
            over: int | None = None
            if bad is not None:
                targets = [bad]
            else:
                ev = self._evaluate(cuts)
                if ev is None:  # every group plans, so the program has too many tiles
                    raise InfeasibleError(
                        f"the partition needs {self.n_tiles(cuts):,} tiles, more than the "
                        f"cap of {MAX_TILES:,} per tile program")
                if ev.overflow is None:
                    break
                g = self._group_of_tile(cuts, max(ev.overflow.tile, 0))
                targets, over = [g, g + 1, g - 1], ev.overflow.bytes_over
            for g in targets:
                if 0 <= g <= len(cuts) and (shrunk := self._shrink(cuts, g)) is not None:
                    cuts = shrunk
                    break
            else:
                raise InfeasibleError(self._infeasible(cuts, targets[0], over))
        self._repaired[original] = cuts
        return cuts

    def _shrink(self, cuts: Cuts, g: int) -> Cuts | None:
        """Group g split in the middle, or refined if a single layer (None: neither)."""
        a, b = self.groups(cuts)[g]
        if b - a >= 2:
            return tuple(sorted((*cuts, (a + b) // 2)))
        finer = finer_tiling(self.workload, (self.order[a],), self.tiling(a, b))
        if finer is None:
            return None
        self.refined[a] = finer
        return cuts

    def _unplannable(self, cuts: Cuts) -> int | None:
        """A group whose tiles cannot be mapped on the core array (None: all can)."""
        for g, (a, b) in enumerate(self.groups(cuts)):
            try:
                self.lowerer.plan(self.order[a:b], self.tiling(a, b))
            except ScheduleError:
                return g
        return None

    def n_tiles(self, cuts: Cuts) -> int:
        """Tiles of the partition's tile program (every group planned before)."""
        return sum(self.lowerer.plan(self.order[a:b], self.tiling(a, b)).tiles.grid.count
                   * (b - a) for a, b in self.groups(cuts))

    def _group_of_tile(self, cuts: Cuts, pos: int) -> int:
        """Group index of the tile at position `pos` of the partition's tile program."""
        for g, (a, b) in enumerate(self.groups(cuts)):
            count = self.lowerer.plan(self.order[a:b], self.tiling(a, b)).tiles.grid.count
            if pos < count * (b - a):
                return g
            pos -= count * (b - a)
        raise ValueError(f"tile {pos} beyond the program")

    def _infeasible(self, cuts: Cuts, g: int, over: int | None) -> str:
        a, b = self.groups(cuts)[g]
        layer, tiling = self.order[a], self.tiling(a, b)
        if over is None:
            return (f"layer '{layer}': no tiling number up to {tiling} maps its tiles on the "
                    "core array")
        return (f"layer '{layer}' alone at its finest power-of-two tiling ({tiling} tiles) "
                f"overflows the {self.capacity:,} B buffer by {over:,} B (with its neighbours' "
                "double-buffered transfers)")

    # --- segments (for the DP) --------------------------------------------------------------
    def segment(self, a: int, b: int) -> Evaluation | None:
        """The group [a, b) scheduled alone (its external inputs loaded, its outputs
        stored, default DLSA); None if it does not fit. A single layer that does not fit is
        refined until it does (InfeasibleError if it never does)."""
        while True:
            sub = sub_workload(self.workload, self.order[a:b])
            lfa = Lfa(self.order[a:b], (), (self.tiling(a, b),), ())
            cand = evaluate_lfa(Lowerer(sub, self.lowerer.hw), lfa, buffer_limit=sys.maxsize)
            self.evaluations += 1
            overflow = None if cand is None else cand.evaluation.overflow
            if cand is not None and overflow is None:
                return cand.evaluation
            if b - a > 1:
                return None
            finer = finer_tiling(self.workload, (self.order[a],), self.tiling(a, b))
            if finer is None:
                by = "" if overflow is None else f" by {overflow.bytes_over:,} B"
                raise InfeasibleError(
                    f"layer '{self.order[a]}' alone at its finest power-of-two tiling "
                    f"({self.tiling(a, b)} tiles) does not fit the {self.capacity:,} B "
                    f"buffer{by}")
            self.refined[a] = finer


def sub_workload(wl: Workload, layers: tuple[str, ...]) -> Workload:
    """The layers as a network of their own: tensors from outside become inputs, layers
    read outside (or network outputs) become outputs."""
    members = set(layers)
    inputs = {src: wl.shape_of(src) for n in layers for src in wl.layers[n].inputs
              if src not in members}
    outputs = tuple(n for n in layers if n in wl.outputs
                    or any(v not in members for v in wl.consumers(n)))
    return Workload(f"{wl.name}[{layers[0]}..{layers[-1]}]", wl.batch, inputs,
                    {n: wl.layers[n] for n in layers}, outputs, wl.elem_bytes)


def greedy_fusion(lowerer: Lowerer, options: SearchOptions) -> MethodResult:
    """Halide-style greedy fusion (Cocco §4.2.2): from single-layer groups in the layer
    order, repeatedly merge the adjacent pair whose merge lowers the exact cost most, until
    no merge lowers it. Gains are re-measured lazily: the best-looking merge is
    re-evaluated against the current partition before it is taken, and all stale gains are
    refreshed before stopping, so every step is a true greedy step. Stage 'unfused': the
    starting partition."""
    deadline = options.deadline()
    part = Partitioner(lowerer, options.objective)
    start = part.repair(tuple(range(1, part.n)))
    deadline = search_end(deadline, part, start)
    cuts = start
    base = part.cost(cuts)
    assert base is not None
    record(options, part, cuts)
    gains: dict[int, tuple[float, int]] = {}
    """cut -> (cost decrease when it is removed, partition version it was measured on)"""
    version = 0

    def measure(c: int) -> None:
        merged = part.cost(tuple(x for x in cuts if x != c))
        gains[c] = (-math.inf if merged is None else base - merged, version)

    for c in cuts:
        if past(deadline):
            break
        measure(c)
    while gains and not past(deadline):
        c = max(gains, key=lambda x: (gains[x][0], -x))
        gain, seen = gains[c]
        if seen != version:
            measure(c)
        elif gain > 0:
            cuts = tuple(x for x in cuts if x != c)
            base = part.cost(cuts)
            assert base is not None
            record(options, part, cuts)
            del gains[c]
            version += 1
        else:
            stale = [x for x, (_, v) in gains.items() if v != version]
            if not stale:
                break
            for x in stale:
                if past(deadline):
                    break
                measure(x)
    return part.result(cuts, {"unfused": start})


def dp_partition(lowerer: Lowerer, options: SearchOptions,
                 max_segment: int = DP_MAX_SEGMENT) -> MethodResult:
    """Sequential DP over the layer order (Cocco §4.2.3) with contiguous groups of at most
    `max_segment` layers.

    Each group is costed alone (`Partitioner.segment`): its energy (pJ) and its latency
    (cycles, including its own fill and drain, which neighbours partly hide in context;
    this proxy did marginally better than max(compute, DRAM) cycles on ResNet-50 and
    MobileNet-V2). Energy adds up exactly across groups, latency only roughly, so the DP
    minimises the linearisation n·E/E0 + m·D/D0 of the objective E^n·D^m around a
    reference (E0, D0): first the unfused partition, then each new DP result, for up to
    DP_ROUNDS rounds. Every result is evaluated exactly (repaired if it overflows in
    context) and the best, unfused included, is returned. A group is extended only while
    it fits alone (a pruning, not a guarantee: a longer group could fit again)."""
    deadline = options.deadline()
    part = Partitioner(lowerer, options.objective)
    n = part.n
    start = part.repair(tuple(range(1, n)))
    deadline = search_end(deadline, part, start)
    record(options, part, start)
    segments = _segment_costs(part, max_segment, deadline)
    obj = options.objective
    best, best_ev = start, part.evaluation(start)
    assert best_ev is not None
    reference, tried = best_ev, {start}
    rounds = 0 if segments is None else DP_ROUNDS  # no split without every single layer
    for _ in range(rounds):
        if past(deadline):
            break
        w_energy = obj.energy_exp / reference.energy_pj if reference.energy_pj else 0.0
        w_delay = obj.delay_exp / reference.latency_cycles if reference.latency_cycles else 0.0
        cuts = part.repair(cheapest_split(n, segments, w_energy, w_delay))
        if cuts in tried:
            break
        tried.add(cuts)
        reference = part.evaluation(cuts)
        assert reference is not None
        if obj.cost(reference) < obj.cost(best_ev):
            best, best_ev = cuts, reference
            record(options, part, best)
    return part.result(best, {"unfused": start})


def _segment_costs(part: Partitioner, max_segment: int, deadline: float | None
                   ) -> dict[tuple[int, int], tuple[float, int]] | None:
    """(energy pJ, latency cycles) of every group [a, b) of at most `max_segment` layers
    scheduled alone, grown while it fits, until `deadline`; None when even the single
    layers (which every split needs) were not all costed by then."""
    n = part.n
    segments: dict[tuple[int, int], tuple[float, int]] = {}
    for length in range(1, max_segment + 1):
        for a in range(n - length + 1):
            if past(deadline):
                return segments if length > 1 else None
            b = a + length
            if length > 1 and (a, b - 1) not in segments:
                continue
            ev = part.segment(a, b)
            if ev is not None:
                segments[(a, b)] = (ev.energy_pj, ev.latency_cycles)
    return segments


def cheapest_split(n: int, segments: dict[tuple[int, int], tuple[float, int]],
                w_energy: float, w_delay: float) -> Cuts:
    """Cuts minimising the sum of w_energy·E + w_delay·D over groups (every single layer
    is a segment, so a split always exists)."""
    value = [0.0] + [math.inf] * n
    back = [0] * (n + 1)
    for (a, b), (energy, cycles) in sorted(segments.items(), key=lambda s: (s[0][1], s[0][0])):
        v = value[a] + w_energy * energy + w_delay * cycles
        if v < value[b]:
            value[b], back[b] = v, a
    cuts = []
    b = n
    while b > 0:
        b = back[b]
        if b > 0:
            cuts.append(b)
    return tuple(reversed(cuts))
