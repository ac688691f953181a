"""Cocco's GA with the buffer capacity in the genome (ASPLOS'24 §4.4): a genome is
(capacity index, partition). On top of the partition GA of heuristics/cocco.py:

- initialisation draws each genome's capacity uniformly from the allowed ones (§4.4.1);
- crossover gives the child the mean of its parents' capacities, rounded to the nearest
  allowed value (§4.4.2), and a partition inherited group by group;
- mutation-DSE (§4.4.3) moves the capacity to a value drawn from a normal distribution
  centred on it (standard deviation `dse_sigma` x the allowed span), rounded to the grid;
  the other mutations are the partition's (modify-node, split, merge);
- evaluation repairs a partition that overflows (§4.4.4) and keeps the repaired genome.

With one allowed capacity it is the partition-only GA at that capacity (the fixed-HW and
two-step baselines of Cocco §5.3).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from mipsched.explore.space import CoSpace, Sample
from mipsched.heuristics.cocco import crossover, mutate
from mipsched.heuristics.partition import Cuts

Genome = tuple[int, Cuts]
"""(capacity index into the grid, partition)."""
Scored = tuple[float, Genome]
"""(objective, genome): infeasible genomes score infinity."""


@dataclass(frozen=True)
class CoGaSettings:
    """Knobs of the co-exploration GA."""

    population: int = 24
    tournament: int = 3
    """Genomes drawn per tournament."""
    elites: int = 2
    """Best genomes copied into the next generation."""
    crossover_rate: float = 0.8
    mutation_rate: float = 0.6
    """Probability that a child gets one mutation."""
    dse_share: float = 0.4
    """Share of mutations that are mutation-DSE (when more than one capacity is allowed)."""
    dse_sigma: float = 0.15
    """Standard deviation of mutation-DSE, as a fraction of the allowed capacity span."""
    cut_rate: tuple[float, float] = (0.05, 0.6)
    """Range of the per-genome probability of cutting a position at initialisation."""


def co_ga(space: CoSpace, allowed: list[int], rng: random.Random,
          settings: CoGaSettings | None = None, seeds: tuple[Genome, ...] = ()) -> None:
    """Runs the GA over capacities `allowed` (grid indices) until the space's budget is
    spent; the best sample is `space.best` (and each capacity's in `space.best_metric`).
    `seeds` join the initial population first."""
    settings = settings or CoGaSettings()
    n = len(space.workload.layers)
    population = [_admit(space, g) for g in seeds]
    while len(population) < settings.population and not space.exhausted():
        rate = rng.uniform(*settings.cut_rate)
        cuts = tuple(k for k in range(1, n) if rng.random() < rate)
        population.append(_admit(space, (rng.choice(allowed), cuts)))
    while population and not space.exhausted():
        nxt = sorted(set(population))[:settings.elites]
        while len(nxt) < settings.population and not space.exhausted():
            nxt.append(_admit(space, _child(space, population, allowed, n, rng, settings)))
        population = nxt


def ga_per_capacity(space: CoSpace, ordered: list[int], rng: random.Random,
                    settings: CoGaSettings | None = None, warm: bool = False) -> None:
    """The partition-only GA at each capacity of `ordered` (grid indices) in turn, each
    with an equal share of the samples left, seeded with the unfused partition and, with
    `warm`, the best partition found at the capacity before (the two-step baseline and
    the capacity curve)."""
    before = None
    for k, index in enumerate(ordered):
        if space.exhausted():
            break
        share = max(1, (space.max_evaluations - space.evaluations) // (len(ordered) - k))
        seeds = [(index, space.unfused())] + ([] if before is None else [(index, before)])
        with space.limited(share):
            co_ga(space, [index], rng, settings, tuple(seeds))
        if warm and index in space.best_metric:
            before = space.best_metric[index].cuts


def _child(space: CoSpace, population: list[Scored], allowed: list[int], n: int,
           rng: random.Random, settings: CoGaSettings) -> Genome:
    """A child of two tournament winners (or a copy of one), perhaps mutated."""
    child = _tournament(population, settings.tournament, rng)
    if rng.random() < settings.crossover_rate:
        dad = _tournament(population, settings.tournament, rng)
        mean = (space.grid.values[child[0]] + space.grid.values[dad[0]]) / 2
        child = (space.grid.nearest(mean, allowed), crossover(child[1], dad[1], n, rng))
    if rng.random() < settings.mutation_rate:
        if len(allowed) > 1 and rng.random() < settings.dse_share:
            child = (mutate_capacity(space, child[0], allowed, rng, settings.dse_sigma),
                     child[1])
        else:
            child = (child[0], mutate(child[1], n, rng))
    return child


def mutate_capacity(space: CoSpace, index: int, allowed: list[int], rng: random.Random,
                    sigma: float) -> int:
    """Mutation-DSE: a capacity drawn from N(current, (sigma x allowed span)^2), rounded
    to the nearest allowed value; a draw that rounds back to the current value moves one
    allowed step instead, so the mutation always changes the genome."""
    values = space.grid.values
    span = values[max(allowed)] - values[min(allowed)]
    drawn = space.grid.nearest(rng.gauss(values[index], sigma * span), allowed)
    if drawn != index:
        return drawn
    k = allowed.index(index) if index in allowed else 0
    steps = [j for j in (k - 1, k + 1) if 0 <= j < len(allowed)]
    return allowed[rng.choice(steps)] if steps else index


def _admit(space: CoSpace, genome: Genome) -> Scored:
    """The genome evaluated (repaired) with its objective; infinity without a schedule."""
    found: Sample | None = space.sample(*genome)
    if found is None:
        return (float("inf"), genome)
    return (found.objective, (genome[0], found.cuts))


def _tournament(population: list[Scored], size: int, rng: random.Random) -> Genome:
    """The best of `size` genomes drawn at random."""
    return min(rng.sample(population, min(size, len(population))))[1]
