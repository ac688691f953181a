"""The figures of an LFA under the default (double-buffered) DLSA, straight from its
placed segments (placement.Placement): latency, energy and peak buffer exactly as
evaluate(lower(lfa), default_dlsa(...)) reports them, without building the tile program.
Stage 1 of the SA evaluates thousands of LFAs, each differing from the one it came from
in a few FLGs: placement (Lowerer.place), peak buffer and timing replay all resume at the
first FLG that can differ.

Why the replay can go FLG by FLG (default_dlsa's rules; positions relative to an FLG's
first tile, n = its tiles): an ifmap load of tile p lives (p-1, p+1), a weight of step j
(j-1, last use+1), a store of tile p (p, p+2), or (p, p+1) at the end of an LG. The DRAM
order sorts by (Start, weights first, End, id), so it is a sequence of *chunks*, one per
FLG: its own tensors but the store of its last tile (its *tail*, Start n-1), which sorts
into the next FLG's chunk after that FLG's first weight (Start -1, weights first) and
before its first loads (End 1, higher ids). A chunk's transfers are released by tiles
>= -2 and needed by its FLG's tiles or the next FLG's first one, so four numbers carry
the replay from one chunk to the next: when the last two tiles end, when DRAM is free and
what the next FLG's first tile waits for. Every tile's wait is final at the end of its
FLG's chunk, so the chunk runs its tiles then.
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass

from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa, ScheduleError
from mipsched.schedule.placement import Placement, Segment
from mipsched.schedule.tile_program import TensorKind

#: A transfer in a chunk: (releasing tile, DRAM cycles, waiting tile), positions relative
#: to the FLG's first tile (-1, -2: the tiles before it).
_Transfer = tuple[int, int, int]

#: The replay between chunks: (end of the previous tile, end of the one before it, when
#: DRAM is free, what the next tile waits for), in cycles.
_State = tuple[int, int, int, int]


@dataclass(frozen=True)
class _Chunk:
    """A segment as the default DLSA times and fills it."""

    cycles: list[int]
    energies: list[float]
    """Tile energies (pJ), in order (summed with the whole program's, as TileProgram
    does, so that the total is the same float)."""
    dram_bytes: int
    lead: list[_Transfer]
    """The weight of the first step, if it has one: it sorts before the tail of the FLG
    before."""
    body: list[_Transfer]
    lead_body: list[_Transfer]
    tail: tuple[int, int] | None
    """(DRAM cycles, bytes) of the store of the last tile (None: no such store)."""
    occupancy: list[int]
    """Bytes in use per tile: on chip, plus the FLG's DRAM tensors (the tail included)."""
    before: int
    """Bytes of the FLG's DRAM tensors living on the tile before it (loads of its first
    tile, the first step's weight)."""


def _chunk(segment: Segment) -> _Chunk:
    """The segment's transfers in the default DLSA's order (its tail apart) and its bytes
    in use."""
    steps = segment.plan.steps
    n = len(steps)
    occupancy = [0] * (n + 1)  # index: position + 1
    keyed = []
    tail = None
    for k, t in enumerate(segment.transfers):
        if t.kind == TensorKind.STORE_OFMAP:
            if t.producer == n - 1:
                tail = (t.access_cycles, t.bytes)
                occupancy[n] += t.bytes
                continue
            # lives (p, p + 2): released by its producer, waited for by tile p + 2
            start, end, weight = t.producer, t.producer + 2, 1
            release, need = t.producer, end
        else:
            # lives (first use - 1, last use + 1): released by the tile before its Start
            start, end = t.first_use - 1, t.last_use + 1
            weight = 0 if t.kind == TensorKind.LOAD_WEIGHT else 1
            release, need = start - 1, t.first_use
        keyed.append(((start, weight, end, k), (release, t.access_cycles, need)))
        for q in range(start, end):
            occupancy[q + 1] += t.bytes
    keyed.sort()
    ordered = [x for _, x in keyed]
    split = 1 if keyed and keyed[0][0][:2] == (-1, 0) else 0
    return _Chunk(
        cycles=[s[3] for s in steps],
        energies=[s[4] for s in steps],
        dram_bytes=sum(t.bytes for t in segment.transfers),
        lead=ordered[:split],
        body=ordered[split:],
        lead_body=ordered,
        tail=tail,
        occupancy=list(map(operator.add, segment.onchip, occupancy[1:])),
        before=occupancy[0],
    )


def _replay(chunk: _Chunk, state: _State, tail: _Transfer | None) -> _State:
    """The replay through one chunk (with the tail of the FLG before, if any)."""
    clock, before_last, dram, waits = state
    cycles = chunk.cycles
    n = len(cycles)
    ends = [before_last, clock] + [0] * n  # end of tile p at index p + 2
    ready = [0] * (n + 1)
    ready[0] = waits
    transfers = chunk.lead_body if tail is None else [*chunk.lead, tail, *chunk.body]
    p = 0
    for release, access, need in transfers:
        while p <= release:
            r = ready[p]
            clock = (clock if clock > r else r) + cycles[p]
            p += 1
            ends[p + 1] = clock
        r = ends[release + 2]
        dram = (dram if dram > r else r) + access
        if dram > ready[need]:
            ready[need] = dram
    while p < n:
        r = ready[p]
        clock = (clock if clock > r else r) + cycles[p]
        p += 1
        ends[p + 1] = clock
    return clock, ends[n], dram, ready[n]


@dataclass(frozen=True)
class DefaultFigures:
    """An LFA's figures under the default DLSA (cycles, pJ with static energy, bytes),
    with what the evaluation of an LFA derived from it resumes from."""

    latency_cycles: int
    energy_pj: float
    peak_buffer_bytes: int
    placement: Placement
    chunks: list[_Chunk]
    states: list[_State]
    """The replay's state before each FLG's chunk, and after the last."""
    peaks_before: list[int]
    """Per FLG, the peak over the tiles before it (and the one before the first)."""


class DefaultEvaluator:
    """Evaluates LFAs of one Lowerer under the default DLSA; memoises each segment's
    chunk."""

    def __init__(self, lowerer: Lowerer) -> None:
        self.lowerer = lowerer
        self._chunks: dict[Segment, _Chunk] = {}
        hw = lowerer.hw
        self._pj_per_byte = hw.dram.energy_pj_per_byte
        self._static = hw.static_pj_per_cycle
        self._capacity = hw.gbuf.capacity_bytes

    def evaluate(self, lfa: Lfa, buffer_limit: int | None = None,
                 previous: DefaultFigures | None = None) -> DefaultFigures | None:
        """The figures of `lfa`; None when it cannot be lowered (a tiling that does not
        divide the work) or its peak buffer exceeds `buffer_limit` (default: the
        capacity). With `previous` (the figures of an LFA it was derived from), placement,
        peak and replay resume at the first FLG that can differ."""
        try:
            placed = self.lowerer.place(lfa, previous=previous and previous.placement)
        except ScheduleError:
            return None
        g0 = placed.reused
        chunks = previous.chunks[:g0] if previous is not None else []
        for segment in placed.segments[g0:]:
            chunk = self._chunks.get(segment)
            if chunk is None:
                chunk = self._chunks[segment] = _chunk(segment)
            chunks.append(chunk)
        gp = g0 - 1 if g0 else 0  # occupancy changes from FLG gp's first tile on
        peaks_before = _peaks(placed, chunks, gp,
                              previous.peaks_before if previous is not None else [])
        peak = peaks_before.pop()
        if peak > (self._capacity if buffer_limit is None else buffer_limit):
            return None
        lg_ends = placed.lg_ends
        g = gp
        if previous is not None:
            old = previous.placement
            same = min(len(chunks), len(previous.chunks))
            while g < same and chunks[g] is previous.chunks[g] and \
                    lg_ends[g] == old.lg_ends[g]:
                g += 1
        states = previous.states[:g + 1] if previous is not None else [(0, 0, 0, 0)]
        state = states[-1]
        for k in range(g, len(chunks)):
            tail = None
            if k:
                before = chunks[k - 1].tail
                if before is not None:
                    tail = (-1, before[0], 0 if lg_ends[k - 1] else 1)
            state = _replay(chunks[k], state, tail)
            states.append(state)
        clock, _, dram, _ = state
        last = chunks[-1].tail
        if last is not None:
            dram = (dram if dram > clock else clock) + last[0]
        latency = clock if clock > dram else dram
        dram_bytes = sum(map(operator.attrgetter("dram_bytes"), chunks))
        energy = (sum(itertools.chain.from_iterable(map(operator.attrgetter("energies"),
                                                        chunks)))
                  + self._pj_per_byte * dram_bytes) + self._static * latency
        return DefaultFigures(latency, energy, peak, placed, chunks, states, peaks_before)


def _peaks(placed: Placement, chunks: list[_Chunk], gp: int, known: list[int]
           ) -> list[int]:
    """Per FLG, the peak buffer bytes over the tiles before it, then the peak over all;
    from FLG gp's first tile on (`known` holds the peaks before FLGs up to gp)."""
    bases, lg_ends = placed.bases, placed.lg_ends
    start = bases[gp]
    occupancy = list(itertools.chain.from_iterable(map(operator.attrgetter("occupancy"),
                                                       chunks[gp:])))
    for g in range(gp + 1, len(chunks)):
        occupancy[bases[g] - 1 - start] += chunks[g].before
    for g in range(gp - 1 if gp else 0, len(chunks) - 1):
        tail = chunks[g].tail
        if tail is not None and not lg_ends[g]:
            occupancy[bases[g + 1] - start] += tail[1]
    holds = placed.holds
    active = list(itertools.compress(holds, map(operator.ge, map(operator.itemgetter(1), holds),
                                                itertools.repeat(start))))
    if active:
        diff = [0] * (placed.n_tiles - start + 1)
        for after, end, size, _ in active:
            diff[after - start if after > start else 0] += size
            diff[end + 1 - start] -= size
        occupancy = list(map(operator.add, occupancy, itertools.accumulate(diff)))
    running = list(itertools.accumulate(occupancy, max, initial=known[gp] if gp else
                                        chunks[0].before))
    return [*known[:gp], *map(running.__getitem__, map(operator.sub, bases[gp:],
                                                       itertools.repeat(start))),
            running[-1]]
