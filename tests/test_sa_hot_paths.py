"""The SA's hot paths against plain restatements of their rules: lowering's on-chip bytes
and DRAM tensors, stage 1's evaluation from placed segments (resumed from the LFA a move
came from), the DLSA search's incremental state and replay, the per-round figures of
run_sa, and one worker's schedules against the search run on the plain evaluator."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import sys
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mipsched.core import SearchOptions, evaluate_lfa
from mipsched.evaluate import buffer_profile, latency
from mipsched.heuristics import sa_stages
from mipsched.heuristics import soma_sa as soma_sa_module
from mipsched.heuristics.dlsa_state import DlsaState
from mipsched.heuristics.lfa_moves import propose
from mipsched.heuristics.soma_sa import SaRun, SaSettings, run_sa, soma_sa
from mipsched.hw import load_hardware
from mipsched.schedule.default_dlsa import default_dlsa
from mipsched.schedule.default_eval import DefaultEvaluator
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa
from mipsched.schedule.tile_program import TensorKind, TileProgram
from mipsched.schedule.tiling import tile_flg
from mipsched.workload import zoo
from mipsched.workload.graph import Workload
from mipsched.workload.zoo.random_dags import random_dag

from strategies import random_dlsa, random_lfa

EDGE = load_hardware("edge")


def _groups(lfa: Lfa, bounds: list[tuple[int, int]]) -> dict[str, int]:
    return {n: g for g, (a, b) in enumerate(bounds) for n in lfa.order[a:b]}


def reference_onchip(wl: Workload, lfa: Lfa, program: TileProgram) -> list[int]:
    """On-chip bytes per tile, tile by tile from lowering's rules: an ofmap read inside
    its FLG lives from its tile to the last tile of the same index that reads it; one read
    by later FLGs of its LG holds its share until the last tile of the last such reader
    (from after its local readers, if any)."""
    lg, flg = _groups(lfa, lfa.lg_bounds()), _groups(lfa, lfa.flg_bounds())
    pos = {(t.layer, t.tile): t.pos for t in program.tiles}
    last = {t.layer: t.pos for t in program.tiles}
    occ = [0] * program.n_tiles
    for (a, b), tiling in zip(lfa.flg_bounds(), lfa.tiling, strict=True):
        tiles = tile_flg(wl, lfa.order[a:b], tiling)
        for n in lfa.order[a:b]:
            channels = wl.layers[n].out.c * wl.elem_bytes
            local = [v for v in wl.consumers(n) if flg[v] == flg[n]]
            later = [v for v in wl.consumers(n) if lg[v] == lg[n] and flg[v] != flg[n]]
            for i, region in enumerate(tiles.produced[n]):
                p = end = pos[(n, i)]
                size = region.elems(channels) if region is not None else 0
                if local and size:
                    end = max(pos[(v, i)] for v in local)
                    for q in range(p, end + 1):
                        occ[q] += size
                if later:
                    first = end + 1 if local and size else p
                    for q in range(first, max(last[v] for v in later) + 1):
                        occ[q] += tiles.share[n][i].elems(channels)
    return occ


def reference_tensors(wl: Workload, lfa: Lfa, program: TileProgram) -> list[tuple]:
    """(kind, layer, tile, bytes, first_use, last_use, producer, lo, hi) of every DRAM
    tensor, tile by tile: loads of inputs from other LGs or the network, the weights at a
    layer's first tile, the store of an ofmap that is an output or read by another LG."""
    lg = _groups(lfa, lfa.lg_bounds())
    plans = {}
    for (a, b), tiling in zip(lfa.flg_bounds(), lfa.tiling, strict=True):
        tiles = tile_flg(wl, lfa.order[a:b], tiling)
        plans.update((n, tiles) for n in lfa.order[a:b])
    first = {}
    last = {}
    for t in program.tiles:
        first.setdefault(t.layer, t.pos)
        last[t.layer] = t.pos
    n_tiles, eb = program.n_tiles, wl.elem_bytes
    out = []
    for t in program.tiles:
        n, i, p = t.layer, t.tile, t.pos
        for src, region, shape in zip(wl.layers[n].inputs, plans[n].reads[n][i],
                                      wl.in_shapes(n), strict=True):
            if region is not None and (src not in wl.layers or lg[src] != lg[n]):
                out.append((TensorKind.LOAD_IFMAP, n, i, region.elems(shape.c) * eb, p, p,
                            -1, -1, p))
        if i == 0 and wl.layers[n].has_weights:
            out.append((TensorKind.LOAD_WEIGHT, n, None, wl.weight_bytes(n), first[n],
                        last[n], -1, -1, first[n]))
        if n in wl.outputs or any(lg[v] != lg[n] for v in wl.consumers(n)):
            size = plans[n].share[n][i].elems(wl.layers[n].out.c) * eb
            out.append((TensorKind.STORE_OFMAP, n, i, size, -1, -1, p, p + 1, n_tiles))
    return out


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 9), batch=st.sampled_from([1, 2]))
def test_lowering_matches_its_rules_tile_by_tile(seed: int, n: int, batch: int) -> None:
    """One Lowerer lowers several random LFAs (so FLG plans are reused across LFAs)."""
    wl = random_dag(seed, n_layers=n, batch=batch)
    lowerer = Lowerer(wl, EDGE)
    rng = random.Random(seed)
    for _ in range(4):
        lfa = random_lfa(wl, rng, tilings=(1, 2, 4))
        program = lowerer.lower(lfa)
        assert program.onchip_per_tile == reference_onchip(wl, lfa, program)
        got = [(t.kind, t.layer, t.tile, t.bytes, t.first_use, t.last_use, t.producer, t.lo,
                t.hi) for t in program.tensors]
        assert got == reference_tensors(wl, lfa, program)
        assert [t.id for t in program.tensors] == list(range(len(program.tensors)))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 8))
def test_dlsa_search_state_tracks_the_evaluator(seed: int, n: int) -> None:
    """After every move, kept or undone, the search state's latency and occupancy are
    those of its DLSA evaluated from scratch."""
    wl = random_dag(seed, n_layers=n)
    rng = random.Random(seed)
    program = Lowerer(wl, EDGE).lower(random_lfa(wl, rng, tilings=(1, 2, 4)))
    state = DlsaState(program, random_dlsa(program, rng))
    for _ in range(40):
        if not program.tensors:
            break
        i = rng.randrange(len(program.tensors))
        if rng.random() < 0.5:
            places, k = state.order_places(i)
            if places:
                q = rng.choice(places)
                state.move(i, k, q)
                if rng.random() < 0.3:
                    state.move(i, q, k)
        else:
            t = program.tensors[i]
            free = rng.randint(t.lo, t.hi)
            if state.valid_free_end(i, free):
                state.set_living(i, t.living(free))
        dlsa = state.dlsa()
        assert state.latency() == latency(program, dlsa)
        assert state.occupancy == buffer_profile(program, dlsa)


def test_run_sa_reports_every_round() -> None:
    """Rounds lower stage 1's limit by the allocator step, stop after `patience` rounds
    without improvement, and add up to soma_sa's evaluations and best schedule."""
    lowerer = Lowerer(zoo.get("resblock"), EDGE)
    quick = SaSettings(lfa_factor=20, dlsa_factor=50)
    run = run_sa(lowerer, SearchOptions(seed=2, workers=1), quick)
    result = soma_sa(lowerer, SearchOptions(seed=2, workers=1), quick)
    assert result.best.dlsa == run.best.stage2.dlsa and result.best.lfa == run.best.stage1.lfa
    assert result.evaluations == run.evaluations
    step = int(quick.allocator_step * run.rounds[0].stage1.evaluation.peak_buffer_bytes)
    assert [r.limit_bytes for r in run.rounds] == [
        EDGE.gbuf.capacity_bytes - k * step for k in range(len(run.rounds))]
    costs = [SearchOptions().objective.cost(r.stage2.evaluation) for r in run.rounds]
    best = costs.index(min(costs))
    assert run.best is run.rounds[best]
    assert len(run.rounds) - best - 1 <= quick.patience
    for r in run.rounds:
        assert 0 < r.stage1_evaluations <= quick.lfa_factor * 5
        assert r.stage2_iterations == quick.dlsa_factor * len(r.stage1.program.tensors)
        assert r.stage1.evaluation.peak_buffer_bytes <= r.limit_bytes
        assert r.stage1_cpu_s >= 0 and r.stage2_cpu_s >= 0
    assert default_dlsa(run.best.stage1.program) == run.best.stage1.dlsa


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 9), batch=st.sampled_from([1, 2]))
def test_stage1_evaluation_equals_lowering_and_the_evaluator(seed: int, n: int,
                                                             batch: int) -> None:
    """Along a random walk of stage-1 moves (each evaluated from the figures of the LFA it
    came from, as stage 1 does), latency, energy (static power included) and peak buffer
    equal those of the lowered program under its default DLSA, bit for bit, and an LFA
    is refused exactly when it cannot be lowered or overflows the limit."""
    wl = random_dag(seed, n_layers=n, batch=batch)
    lowerer = Lowerer(wl, dataclasses.replace(EDGE, static_pj_per_cycle=0.3 * (seed % 2)))
    evaluator = DefaultEvaluator(lowerer)
    rng = random.Random(seed)
    lfa = random_lfa(wl, rng, tilings=(1, 2, 4))
    figures = evaluator.evaluate(lfa, sys.maxsize)
    again = evaluator.evaluate(lfa, sys.maxsize, figures)
    assert (again.latency_cycles, again.energy_pj, again.peak_buffer_bytes) == (
        figures.latency_cycles, figures.energy_pj, figures.peak_buffer_bytes)
    for _ in range(60):
        new = propose(lfa, wl.graph, rng)
        if new is None:
            continue
        limit = rng.choice([sys.maxsize, EDGE.gbuf.capacity_bytes, 1_000_000])
        got = evaluator.evaluate(new, limit, figures)
        want = evaluate_lfa(lowerer, new, limit)
        assert (got is None) == (want is None)
        if want is not None:
            ev = want.evaluation
            assert (got.latency_cycles, got.energy_pj, got.peak_buffer_bytes) == (
                ev.latency_cycles, ev.energy_pj, ev.peak_buffer_bytes)
            if rng.random() < 0.6:
                lfa, figures = new, got


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 8))
def test_incremental_replay_equals_the_evaluator_on_every_accepted_state(seed: int,
                                                                         n: int) -> None:
    """Driven as stage 2 drives it (a move, the latency, then keep it or undo it and
    discard the replay), the state's latency equals evaluate.latency after every step."""
    wl = random_dag(seed, n_layers=n)
    rng = random.Random(seed)
    program = Lowerer(wl, EDGE).lower(random_lfa(wl, rng, tilings=(1, 2, 4)))
    state = DlsaState(program, default_dlsa(program))
    tensors = program.tensors
    for _ in range(150 if tensors else 0):
        i = rng.randrange(len(tensors))
        t = tensors[i]
        if rng.random() < 0.5:
            places, k = state.order_places(i)
            if not places:
                continue
            q = rng.choice(places)
            state.move(i, k, q)
            undo = (state.move, (i, q, k))
        else:
            old = state.living[i]
            free = rng.randint(t.lo, t.hi)
            if free == t.free_end(old) or not state.valid_free_end(i, free) or \
                    not state.set_living(i, t.living(free)):
                continue
            undo = (state.set_living, (i, old))
        assert state.latency() == latency(program, state.dlsa())
        if rng.random() < 0.5:
            undo[0](*undo[1])
            state.discard()
            assert state.latency() == latency(program, state.dlsa())
        assert state.occupancy == buffer_profile(program, state.dlsa())


class _PlainEvaluator:
    """Stage 1 on the plain path: every LFA lowered and evaluated from scratch."""

    def __init__(self, lowerer: Lowerer) -> None:
        self.lowerer = lowerer

    def evaluate(self, lfa: Lfa, limit: int | None = None, previous: object = None
                 ) -> SimpleNamespace | None:
        found = evaluate_lfa(self.lowerer, lfa, limit)
        return None if found is None else SimpleNamespace(
            latency_cycles=found.evaluation.latency_cycles,
            energy_pj=found.evaluation.energy_pj)


def _plain_latency(state: DlsaState) -> int:
    return latency(state.program, state.dlsa())


def _digest(run: SaRun) -> str:
    text = json.dumps([[r.stage2.lfa.to_json(), r.stage2.dlsa.to_json()] for r in run.rounds])
    return hashlib.sha1(text.encode()).hexdigest()[:12]


@pytest.mark.parametrize(("name", "batch", "digest"), [
    ("chain5", 1, "f92ee1b4e2f2"), ("resblock", 2, "f4c66566826e"),
    ("resblock", 1, "b60b2602655d")])
def test_one_worker_finds_the_schedules_of_the_plain_search(
        name: str, batch: int, digest: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With one worker, every round's schedules are those of the same search with stage 1
    lowering every LFA and stage 2 replaying every DLSA from scratch, and those the
    search found before it was made incremental (the digests)."""
    quick = SaSettings(lfa_factor=20, dlsa_factor=50)
    options = SearchOptions(seed=3, workers=1)
    wl = zoo.get(name, batch)
    fast = run_sa(Lowerer(wl, EDGE), options, quick)
    monkeypatch.setattr(sa_stages, "DefaultEvaluator", _PlainEvaluator)
    monkeypatch.setattr(soma_sa_module, "DefaultEvaluator", _PlainEvaluator)
    monkeypatch.setattr(DlsaState, "latency", _plain_latency)
    monkeypatch.setattr(DlsaState, "discard", lambda self: None)
    plain = run_sa(Lowerer(wl, EDGE), options, quick)
    assert _digest(fast) == _digest(plain) == digest
