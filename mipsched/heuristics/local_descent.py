"""Local descent over the LFA: every LFA one stage-1 operator away (lfa_neighbours) is
timed with its greedy prefetching DLSA, as the prefetch-scored annealing times them, and
the first one that lowers the objective becomes the current LFA, until none does.

Annealing draws its moves at random, so a single improving move among a few thousand
(one FLG's tiling number doubled) can go untried for a whole pass: on the reference's
GPT-2 small prefill (edge, batch 1) the annealing ended at 649,728 cycles on some seeds
and 646,656 on others, and one tiling change more gives 643,584. The descent tries every
move, cheaply (lowering is memoised per FLG: about 0.5 ms per LFA there).

Tiling moves come first, for the FLGs whose tiles spend the most cycles above their
layers' least compute (`bounds.layer_compute_cycles`) first: on GPT-2 XL prefill (cloud,
batch 16, 25-30 FLGs at 35 ms per LFA) the FLGs whose tilings cost the most are
otherwise reached only after the 3 s auto gives the descent.

Batch splits (`lfa_neighbours.batch_tilings`: tiling numbers that are not powers of two),
the isolations of sparse ends (`sparse_ends`) and the plane releases (`plane_releases`),
whose tilings are not either, are tried only where `certified_over_powers_of_two` is
false: on nets of at most MAX_LAYERS layers the LFA relaxation and the exact search
certify over power-of-two tilings, so a schedule off them could fall below a reported
bound.

The scan is cyclic: after an improvement it goes on from the same place in the new
LFA's neighbourhood, and it ends once a whole neighbourhood has been tried without one
(a local optimum), at the deadline, on Ctrl-C or at the target latency. It times blocks
of neighbours in worker processes (descent_scan: the same steps as in one process),
skipping the neighbours no DLSA fits before their programs are built and those whose
latency bound already loses before their DLSAs are grown. From ResNet-101 / edge / b16's
DP split, the descent to its local optimum (16,195,964 cycles) took 201 s timing every
neighbour in one process, 150 s with the skips and 75 s with the skips on two CPUs.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

from mipsched.core import Candidate, SearchOptions
from mipsched.evaluate import evaluate
from mipsched.formulations.bounds import layer_compute_cycles
from mipsched.formulations.lfa.relaxation import certified_over_powers_of_two
from mipsched.heuristics.descent_scan import NeighbourScan
from mipsched.heuristics.lfa_neighbours import neighbours
from mipsched.heuristics.plane_releases import releases, whole_readers
from mipsched.heuristics.prefetch_anneal import prefetched, prefetched_cost
from mipsched.heuristics.soma_sa import sa_workers
from mipsched.heuristics.sparse_ends import SparseEnd, sparse_ends
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.tile_program import TileProgram


def descend(lowerer: Lowerer, start: Candidate, options: SearchOptions,
            deadline: float | None) -> Candidate | None:
    """The local optimum reached from `start`'s LFA (with its prefetching DLSA), if its
    objective is lower than `start`'s; else None. `deadline`: time.perf_counter()."""
    first = prefetched(lowerer, start.lfa)
    if first is None:
        return None
    lfa, (program, dlsa, latency) = start.lfa, first
    cost = prefetched_cost(lowerer, options, program.energy_pj, latency)
    graph = lowerer.workload.graph
    split = None if certified_over_powers_of_two(lowerer.workload) else lowerer.workload.batch
    least = _least_compute(lowerer)
    ends = _sparse_ends(lowerer)
    readers = _whole_readers(lowerer)
    around = neighbours(lfa, graph, by_excess(program, least), split, ends,
                        releases(lfa, lowerer.workload, readers))
    at = tried = 0
    with NeighbourScan(lowerer, options, sa_workers(options), program.n_tiles,
                       deadline) as scan:
        while tried < len(around) and not options.should_stop(deadline, latency):
            block = [around[(at + k) % len(around)]
                     for k in range(min(scan.block, len(around) - tried))]
            hit = scan.first_better(block, cost)
            if hit is None:
                at, tried = at + len(block), tried + len(block)
                continue
            k, found = hit
            lfa, (program, dlsa, latency) = block[k], found
            cost = prefetched_cost(lowerer, options, program.energy_pj, latency)
            if options.trail is not None:
                options.trail.offer(latency, cost)
            around = neighbours(lfa, graph, by_excess(program, least), split, ends,
                                releases(lfa, lowerer.workload, readers))
            at, tried = at + k, 0
    if lfa == start.lfa:
        return None
    better = Candidate(lfa, program, dlsa, evaluate(program, dlsa, check=False))
    objective = options.objective
    return better if objective.cost(better.evaluation) < objective.cost(start.evaluation) \
        else None


@lru_cache(maxsize=1)
def _least_compute(lowerer: Lowerer) -> dict[str, Fraction]:
    """bounds.layer_compute_cycles of the lowerer's workload (cycles per layer), once per
    lowerer: auto descends after every polishing pass (0.15 s on ResNet-50 at b16); the
    last lowerer stays referenced until the next one comes."""
    return layer_compute_cycles(lowerer.workload, lowerer.hw)


@lru_cache(maxsize=1)
def _sparse_ends(lowerer: Lowerer) -> tuple[SparseEnd, ...]:
    """sparse_ends.sparse_ends of the lowerer's workload, once per lowerer."""
    return sparse_ends(lowerer.workload)


@lru_cache(maxsize=1)
def _whole_readers(lowerer: Lowerer) -> dict[str, frozenset[str]]:
    """plane_releases.whole_readers of the lowerer's workload, once per lowerer."""
    return whole_readers(lowerer.workload)


def by_excess(program: TileProgram, least: dict[str, Fraction]) -> list[int]:
    """The program's FLGs, those whose tiles take the most cycles above their layers'
    least compute (`least`, cycles per layer) first; ties in FLG order."""
    excess: dict[int, Fraction] = {}
    seen: set[str] = set()
    for tile in program.tiles:
        g = tile.flg if tile.flg is not None else 0
        excess[g] = excess.get(g, Fraction(0)) + tile.compute_cycles
        if tile.layer not in seen:
            seen.add(tile.layer)
            excess[g] -= least[tile.layer]
    return sorted(excess, key=lambda g: (-excess[g], g))
