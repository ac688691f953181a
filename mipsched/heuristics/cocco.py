"""Cocco's genetic algorithm over graph partitions (Cocco §4.3-4.4), as SoMa's baseline
(SoMa §VI-A3): the computing order is the workload's layer order, a genome is the set of
cut positions, every group is one LG and one FLG (FLC set = DRAM cut set) with the tiling
number of `tiling_rule`, and the DLSA is the default double buffering.

- Initialisation: the unfused partition plus random ones (each position cut with a
  per-genome probability drawn from `GaSettings.cut_rate`).
- Crossover by subgraph inheritance (Cocco Fig. 9(b)): positions are assigned in order;
  each undecided position picks a parent and reproduces that parent's group from there on;
  when the group started before it (its first layers are already decided), the rest either
  forms a new group (Child-1) or joins the previous one (Child-2), at random.
- Mutations (Fig. 9(c-e)): modify-node moves a boundary layer to the neighbouring group,
  split-subgraph cuts a group at a random interior position, merge-subgraph removes a cut.
- Repair (§4.4.4): groups that overflow the buffer are split until the genome fits
  (`Partitioner.repair`; a single layer is tiled finer instead).
- Selection: parents by tournament; the best `elites` genomes survive unchanged.
"""

from __future__ import annotations

import bisect
import random
from dataclasses import dataclass

from mipsched.core import MethodResult, SearchOptions
from mipsched.heuristics.partition import Cuts, Partitioner, past, record, search_end
from mipsched.schedule.lowering import Lowerer


@dataclass(frozen=True)
class GaSettings:
    """Knobs of the GA."""

    population: int = 32
    generations: int | None = None
    """None: 8 + layers // 6 (ResNet-50: 20; a few hundred evaluations)."""
    tournament: int = 3
    """Genomes drawn per tournament."""
    elites: int = 2
    """Best genomes copied into the next generation."""
    crossover_rate: float = 0.8
    """Probability that a child is a crossover of two parents (else a copy of one)."""
    mutation_rate: float = 0.6
    """Probability that a child then gets one mutation."""
    cut_rate: tuple[float, float] = (0.05, 0.6)
    """Range of the per-genome probability of cutting a position at initialisation."""


def cocco_ga(lowerer: Lowerer, options: SearchOptions,
             settings: GaSettings | None = None) -> MethodResult:
    """Best partition found by the GA (deterministic per `options.seed`; stops at the
    deadline with the best so far, after at least the unfused genome). Stage 'unfused':
    the unfused genome it starts from."""
    settings = settings or GaSettings()
    deadline = options.deadline()
    rng = random.Random(options.seed)
    part = Partitioner(lowerer, options.objective)
    n = part.n
    generations = (settings.generations if settings.generations is not None
                   else 8 + n // 6)

    best: tuple[float, Cuts] | None = None

    def admit(cuts: Cuts) -> tuple[float, Cuts]:
        """The genome repaired, with its cost; a new best goes to the trail."""
        nonlocal best
        fitted = part.repair(cuts)
        cost = part.cost(fitted)
        assert cost is not None
        if best is None or (cost, fitted) < best:
            best = (cost, fitted)
            record(options, part, fitted)
        return cost, fitted

    unfused = admit(tuple(range(1, n)))
    deadline = search_end(deadline, part, unfused[1])
    population = [unfused]
    while len(population) < settings.population and not past(deadline):
        rate = rng.uniform(*settings.cut_rate)
        population.append(admit(tuple(k for k in range(1, n) if rng.random() < rate)))
    for _ in range(generations):
        if past(deadline):
            break
        ranked = sorted(set(population))
        nxt = ranked[:settings.elites]
        while len(nxt) < settings.population and not past(deadline):
            mom = _tournament(population, settings.tournament, rng)
            child = mom
            if rng.random() < settings.crossover_rate:
                dad = _tournament(population, settings.tournament, rng)
                child = crossover(mom, dad, n, rng)
            if rng.random() < settings.mutation_rate:
                child = mutate(child, n, rng)
            nxt.append(admit(child))
        population = nxt
    assert best is not None  # the least of every genome admitted
    return part.result(best[1], {"unfused": unfused[1]})


def _tournament(population: list[tuple[float, Cuts]], size: int, rng: random.Random) -> Cuts:
    """The best of `size` genomes drawn at random."""
    return min(rng.sample(population, min(size, len(population))))[1]


def _group_at(cuts: Cuts, n: int, p: int) -> tuple[int, int]:
    """[start, stop) of the group holding position p."""
    k = bisect.bisect_right(cuts, p)
    return (cuts[k - 1] if k else 0, cuts[k] if k < len(cuts) else n)


def crossover(mom: Cuts, dad: Cuts, n: int, rng: random.Random) -> Cuts:
    """A child inheriting whole groups from its parents (Cocco Fig. 9(b))."""
    cuts: list[int] = []
    p = 0
    while p < n:
        a, b = _group_at(mom if rng.random() < 0.5 else dad, n, p)
        if p > 0 and (a == p or rng.random() < 0.5):
            cuts.append(p)  # the parent's group, or its undecided rest as a new group
        p = b
    return tuple(cuts)


def mutate(cuts: Cuts, n: int, rng: random.Random) -> Cuts:
    """One of modify-node, split-subgraph, merge-subgraph, at random (one that applies)."""
    edges = [0, *cuts, n]
    moves = [(k, d) for k in range(1, len(edges) - 1) for d in (-1, 1)
             if edges[k - 1] < edges[k] + d < edges[k + 1]]
    splittable = [(a, b) for a, b in zip(edges[:-1], edges[1:], strict=True) if b - a >= 2]
    ops = [op for op, ok in (("modify", moves), ("split", splittable), ("merge", cuts)) if ok]
    if not ops:
        return cuts
    op = rng.choice(ops)
    if op == "modify":
        k, d = rng.choice(moves)
        edges[k] += d
        return tuple(edges[1:-1])
    if op == "split":
        a, b = rng.choice(splittable)
        return tuple(sorted((*cuts, rng.randrange(a + 1, b))))
    gone = rng.choice(cuts)
    return tuple(c for c in cuts if c != gone)
