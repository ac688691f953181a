"""A local optimum's rival (heuristics/tiling_rivals.py) and auto's duel between the two
under the DLSA model: every compute-saving tiling is one FLG's tiling number moved by a
ratio (to a power of two on a net the bounds certify over powers of two) and saves
exactly what it reports; the rival computes less, replays in the
simulator as evaluated, and respects the slack; the duel is never worse than the
incumbent under the DLSA model."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from test_sparse_groups import two_stages

from mipsched.core import OBJECTIVES, Candidate, SearchOptions
from mipsched.evaluate import evaluate
from mipsched.heuristics import tiling_rivals
from mipsched.heuristics.prefetch_anneal import prefetched
from mipsched.heuristics.tiling_rivals import compute_saving_tilings, rival
from mipsched.hw import load_hardware
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa
from mipsched.sim import simulate
from mipsched.solve.methods import _dlsa_step, _rival_step

from strategies import random_lfa


def _incumbent(lowerer: Lowerer, lfa: Lfa) -> Candidate:
    program, dlsa, _ = prefetched(lowerer, lfa)
    return Candidate(lfa, program, dlsa, evaluate(program, dlsa))


def _lfas(seed: int) -> tuple[Lowerer, list[Lfa]]:
    wl = two_stages(4)
    lowerer = Lowerer(wl, load_hardware("edge"))
    rng = random.Random(seed)
    found = []
    while len(found) < 6:
        lfa = random_lfa(wl, rng, tilings=(1, 2, 4, 6, 8, 12))
        if prefetched(lowerer, lfa) is not None:
            found.append(lfa)
    return lowerer, found


@pytest.mark.parametrize("seed", [0, 1])
def test_each_compute_saving_tiling_moves_one_flg_by_a_ratio_and_saves_what_it_says(
        seed: int) -> None:
    lowerer, lfas = _lfas(seed)
    checked = 0
    for lfa in lfas:
        own = lowerer.lower(lfa).compute_cycles
        saved = [s for s, _ in compute_saving_tilings(lowerer, lfa)]
        assert saved == sorted(saved, reverse=True)
        for cycles, other in compute_saving_tilings(lowerer, lfa):
            moved = [g for g, (a, b) in enumerate(zip(lfa.tiling, other.tiling, strict=True))
                     if a != b]
            assert len(moved) == 1 and other.order == lfa.order and other.flc == lfa.flc
            ratio = Fraction(other.tiling[moved[0]], lfa.tiling[moved[0]])
            assert ratio.numerator <= 8 and ratio.denominator <= 8
            new = other.tiling[moved[0]]
            assert new & (new - 1) == 0  # 14 layers: the bounds' space is powers of two
            assert cycles > 0 and lowerer.lower(other).compute_cycles == own - cycles
            checked += 1
    assert checked > 0


def test_the_rival_computes_less_replays_as_evaluated_and_respects_the_slack(
        monkeypatch) -> None:
    lowerer, lfas = _lfas(2)
    monkeypatch.setattr(tiling_rivals, "MIN_SAVING", 0.0)
    found = 0
    for lfa in lfas:
        incumbent = _incumbent(lowerer, lfa)
        monkeypatch.setattr(tiling_rivals, "SLACK", 10.0)
        other = rival(lowerer, incumbent)
        if other is None:
            assert compute_saving_tilings(lowerer, lfa) == [] or all(
                prefetched(lowerer, x) is None for _, x in compute_saving_tilings(lowerer, lfa))
            continue
        found += 1
        assert other.program.compute_cycles < incumbent.program.compute_cycles
        assert simulate(other.program, other.dlsa).latency_cycles == \
            other.evaluation.latency_cycles
        slower = other.evaluation.latency_cycles > incumbent.evaluation.latency_cycles
        monkeypatch.setattr(tiling_rivals, "SLACK", 0.0)
        assert (rival(lowerer, incumbent) is None) == slower
    assert found > 0


def test_the_duel_is_never_worse_than_the_incumbent_under_the_dlsa_model(monkeypatch) -> None:
    lowerer, lfas = _lfas(3)
    monkeypatch.setattr(tiling_rivals, "MIN_SAVING", 0.0)
    monkeypatch.setattr(tiling_rivals, "SLACK", 10.0)
    options = SearchOptions(0, None, OBJECTIVES["latency"], 1)
    incumbent = _incumbent(lowerer, lfas[0])
    duel = _rival_step(lowerer, incumbent, options, None, [])
    alone = _dlsa_step(incumbent, options, 30.0, [])
    assert duel.evaluation.latency_cycles <= alone.evaluation.latency_cycles
    assert simulate(duel.program, duel.dlsa).latency_cycles == duel.evaluation.latency_cycles
