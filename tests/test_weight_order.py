"""The weight-order bound: its MIPs find the least right-hand side the formula asks for
(brute force over every choice of loads), it is below every schedule (brute-force optima
of tiny nets and random DAGs, the reference's GPT-2 run), it binds where the compute and
DRAM bounds leave a gap (GPT-2 prefill), and a tightened variant is caught."""

from __future__ import annotations

import csv
import dataclasses
import itertools
import math
from fractions import Fraction
from pathlib import Path

import pytest
from brute import schedule_optimum

from mipsched.formulations import weight_order
from mipsched.formulations.bounds import layer_compute_cycles, network_latency_bound
from mipsched.formulations.solver import minimise
from mipsched.formulations.weight_order import WeightOrderInputs, weight_order_bound
from mipsched.hw import load_hardware
from mipsched.hw.model import Hardware
from mipsched.solve import solve_network as solve
from mipsched.solve.bounds import run_bound
from mipsched.workload import zoo
from mipsched.workload.graph import NetBuilder, Workload
from mipsched.workload.layer import Op
from mipsched.workload.zoo.random_dags import random_dag

EDGE = load_hardware("edge")
CLOUD = load_hardware("cloud")
RUNS = Path(__file__).resolve().parents[2] / "shared" / "reference-nets" / "reference-runs.csv"


def brute_force(inputs: WeightOrderInputs) -> float:
    """max over k of the least right-hand side of both inequalities (tails included), by
    enumeration."""
    a, c = inputs.load_cycles, inputs.compute_cycles
    weighted = list(a)

    def work(late: list[str]) -> float:
        """Compute after the singled-out completion: c of the closures of the units that
        complete after it and their shares of other layers, or the largest of their
        tails."""
        share = {j: max((inputs.partial.get(i, {}).get(j, 0) for i in late), default=0)
                 for j in c}
        share |= {j: 1 for j in set().union(*(inputs.closure[i] for i in late))}
        return float(max(sum(c[j] * f for j, f in share.items()),
                         *(inputs.tails.get(i, 0) for i in late)))

    best = 0.0
    for k in range(1, len(weighted) + 1):
        last = min(sum(a.values()) - sum(a[i] for i in s) + min(a[i] for i in s)
                   + work(list(s))
                   for s in itertools.combinations(weighted, k))
        first = min(sum(a[i] for i in p) + a[q]
                    + work([i for i in weighted if i not in p])
                    for p in itertools.combinations(weighted, k - 1)
                    for q in weighted if q not in p)
        best = max(best, last, first)
    return best + inputs.final_store


@pytest.mark.parametrize("seed", range(6))
def test_the_mips_find_the_least_choice_of_loads(seed: int) -> None:
    workload = random_dag(seed, n_layers=4 + seed % 3, batch=1 + seed % 2)
    bound = weight_order_bound(workload, EDGE, time_limit=None)
    expected = max(brute_force(inputs)
                   for inputs in WeightOrderInputs.of(workload, EDGE).unit_sets())
    assert bound is not None
    assert expected * (1 - 1e-5) - 1 <= bound.value <= math.ceil(expected)


def _token_block(batch: int) -> Workload:
    """A decode-shaped net: one token (1 x 1 positions) through a norm and a key
    projection appended to a key cache (15 tokens x 64, rows tileable) that a
    one-position matmul reads whole: every input has layers that need all of it."""
    net = NetBuilder("token_block", batch=batch)
    x = net.input("x", 64)
    cache = net.input("cache", 15, 64)
    norm = net.unary("norm", x, Op.LAYERNORM)
    new_key = net.transpose("kt", net.fc("k", norm, 64), (1, 0, 2))
    keys = net.concat("keys", [cache, new_key], copy=True)
    net.output(net.matmul_act("scores", norm, keys, heads=1, transpose_rhs=False))
    return net.build()


def _token_rows(batch: int) -> Workload:
    """A prefill-shaped net: 2 tokens (rows) of 8 channels through a per-token norm, a
    key projection transposed (tokens become channels: any position of it needs every
    token), a query projection, their scores and an output projection."""
    net = NetBuilder("token_rows", batch=batch)
    x = net.input("x", 8, 2)
    norm = net.unary("norm", x, Op.LAYERNORM)
    keys = net.transpose("kt", net.matmul("k", norm, 8), (1, 0, 2))
    scores = net.matmul_act("s", net.matmul("q", norm, 8), keys, 1, transpose_rhs=False)
    net.output(net.matmul("o", scores, 8))
    return net.build()


CASES = [("chain3", 1, None), ("chain3", 2, 60_000)] + [
    (f"dag{seed}", 1 + seed % 4, [None, 40_000, 16_000][seed % 3]) for seed in range(10)] + [
    ("token", 1, None), ("token", 2, None), ("token", 1, 20_000),
    pytest.param("rows", 1, None, marks=pytest.mark.slow)]  # brute force: about 40 s


@pytest.mark.parametrize(("name", "batch", "capacity"), CASES)
def test_below_the_brute_force_optimum(name: str, batch: int, capacity: int | None) -> None:
    workload = (random_dag(int(name[3:]), n_layers=2 + int(name[3:]) % 3, batch=batch)
                if name.startswith("dag") else _token_block(batch) if name == "token"
                else _token_rows(batch) if name == "rows" else zoo.get(name, batch))
    hw = EDGE if capacity is None else _with_buffer(capacity)
    optimum = schedule_optimum(workload, hw, (1, 2))
    bound = weight_order_bound(workload, hw, time_limit=None)
    if optimum is not None and bound is not None:
        assert bound.value <= optimum
    if optimum is not None:  # and every bound a run starts from (compute with box rates)
        assert run_bound(workload, hw, None).cycles <= optimum


def _with_buffer(capacity: int) -> Hardware:
    return dataclasses.replace(EDGE, name=f"edge-{capacity}B", gbuf=dataclasses.replace(
        EDGE.gbuf, capacity_bytes=capacity))


def _reference_gpt2_prefill() -> int:
    with RUNS.open() as f:
        run = next(r for r in csv.DictReader(f) if r["network"] == "gpt2_small_prefill")
    return int(run["stage2_latency_cycles"])


@pytest.mark.skipif(not RUNS.is_file(), reason="shared/reference-nets not present")
def test_binds_on_gpt2_prefill_and_stays_below_the_reference() -> None:
    """On the reference's GPT-2 small prefill (edge, b1) the compute bound is 568,320;
    the weight loads that end last (ffn2's 2.36 MB) cannot overlap ffn2's compute, and
    the input must be loaded whole before any K^T position (so before ffn2): the bound
    exceeds the compute bound by more than the input's load, yet stays below the
    reference's schedule (649,728) and mipsched's."""
    workload = zoo.get("gpt2_small_prefill")
    bound = weight_order_bound(workload, EDGE, time_limit=None)
    assert bound is not None
    inputs = WeightOrderInputs.of(workload, EDGE)
    waits = inputs.closure["input_qkv -> norm1[0]"]
    assert {f"attention_Kt{i}" for i in range(12)} | {"ffn2", "res2"} <= waits
    assert not waits & {"norm1", "attention_Q", "attention_K0", "attention_V"}
    assert not inputs.closure["input_qkv -> res1[0]"]  # res1 reads one token per position
    assert network_latency_bound(workload, EDGE).cycles + \
        inputs.load_cycles["input_qkv -> norm1[0]"] \
        < bound.value <= _reference_gpt2_prefill()
    found = solve(workload, EDGE, "auto", time_limit=4.0)
    assert found.candidate is not None
    assert bound.value <= found.candidate.evaluation.latency_cycles


def test_a_layer_counted_as_waiting_for_its_whole_read_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A per-token norm of 2 tokens x 256 channels on a vector unit as fast as the DRAM:
    its second token loads while its first computes (optimum 64 cycles by brute force).
    Counting the norm as waiting for the whole input (computing all of it reads all of
    it) instead of asking it of every *one* position gives 80, above that optimum."""
    net = NetBuilder("per_token", batch=1)
    net.unary("norm", net.input("x", 256, 2), Op.LAYERNORM)
    workload = net.build()
    hw = dataclasses.replace(EDGE, vector_unit=dataclasses.replace(EDGE.vector_unit,
                                                                   ops_per_cycle=16))
    real = WeightOrderInputs.of(workload, hw)
    assert real.closure == {"x -> norm[0]": frozenset()}
    optimum = schedule_optimum(workload, hw, (1, 2, 4))
    assert optimum is not None
    assert weight_order_bound(workload, hw, None).value <= optimum
    broken = dataclasses.replace(real, closure={"x -> norm[0]": frozenset({"norm"})})
    monkeypatch.setattr(weight_order.WeightOrderInputs, "of",
                        classmethod(lambda cls, wl, hw, deadline=None, cycles=None: broken))
    assert weight_order_bound(workload, hw, None).value > optimum


def test_the_tail_of_a_read_raises_the_bound_and_a_whole_layer_tail_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A 3x3 conv on an input of 4 samples (edge): no layer waits for the whole input, yet
    after its last element arrives one tile of the conv still runs (at least its weight
    bytes / read bandwidth, 144 cycles): the tail raises the bound, which stays below the
    brute-force optimum (4,352). Charging the conv's whole compute instead (as if no
    tile could run before the last load) exceeds that optimum."""
    net = NetBuilder("conv_after_input", batch=4)
    net.output(net.conv("c", net.input("x", 64, 8, 8), 64, 3))
    workload = net.build()
    real = WeightOrderInputs.of(workload, EDGE)
    assert real.tails == {"x -> c[0]": Fraction(577, 4)}
    optimum = schedule_optimum(workload, EDGE, (1, 2, 4))
    assert optimum == 4352
    with_tails = weight_order_bound(workload, EDGE, None).value
    assert with_tails <= optimum
    monkeypatch.setattr(weight_order, "read_cases", lambda *args: [])  # the tails alone
    for tails, check in (({}, lambda value: value < with_tails),
                         ({"x -> c[0]": sum(layer_compute_cycles(workload, EDGE).values())},
                          lambda value: value > optimum)):
        changed = dataclasses.replace(real, tails=tails)
        monkeypatch.setattr(weight_order.WeightOrderInputs, "of", classmethod(
            lambda cls, wl, hw, deadline=None, cycles=None, inputs=changed: inputs))
        assert check(weight_order_bound(workload, EDGE, None).value)


def test_gpt2_decode_at_batch_16_is_within_a_tenth_of_a_percent() -> None:
    """No layer of GPT-2 decode at batch 16 waits for a whole read, but after the last of
    the token arrives ffn1 and ffn2 still read 10 MB of weights each from the GBUF per
    tile: GPT-2 XL decode (cloud) is bound at 670,225 cycles (compulsory DRAM: 650,200),
    0.03 % below the 670,413 that auto reaches."""
    workload = zoo.get("gpt2_xl_decode", batch=16)
    assert weight_order_bound(workload, CLOUD, 10.0).value == 670_225


def test_a_missing_final_store_is_what_keeps_gpt2_decode_from_its_optimum(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With the store after the last tile, GPT-2 small decode's bound equals the latency
    mipsched (and the reference) reach; without it, 48 cycles (768 B at 16 B / cycle)
    less: the term binds and is exactly the output's one position."""
    workload = zoo.get("gpt2_small_decode")
    real = WeightOrderInputs.of(workload, EDGE)
    assert real.final_store == 48
    with_store = weight_order_bound(workload, EDGE, None).value
    monkeypatch.setattr(weight_order.WeightOrderInputs, "of", classmethod(
        lambda cls, wl, hw, deadline=None, cycles=None: dataclasses.replace(real,
                                                                       final_store=0)))
    assert weight_order_bound(workload, EDGE, None).value == with_store - 48


def test_a_short_time_limit_gives_a_weaker_bound_never_a_stronger_one() -> None:
    workload = zoo.get("gpt2_small_decode")
    full = weight_order_bound(workload, EDGE, time_limit=None)
    quick = weight_order_bound(workload, EDGE, time_limit=0.05)
    assert full is not None
    assert quick is None or 0 < quick.value <= full.value  # None: no MIP ran in time


def test_a_network_without_weights_is_bounded_by_its_input_load() -> None:
    """A pooling layer alone: its input (256 B, 16 cycles) is the only load; the bound
    is at least that load and at most the brute-force optimum."""
    net = NetBuilder("pool_only")
    net.pool("p", net.input("x", 4, 8, 8), kernel=2, stride=2)
    workload = net.build()
    bound = weight_order_bound(workload, EDGE)
    optimum = schedule_optimum(workload, EDGE, (1, 2))
    assert bound is not None and optimum is not None
    assert 15 <= bound.value <= optimum  # 16 less the rounding margin of _bound


@pytest.mark.parametrize("seed", range(4))
def test_the_estimates_are_at_least_each_least_choice(seed: int) -> None:
    """The skip rule is sound: per k, the estimate (one choice of loads) is at least the
    MIP's optimum, so skipping a MIP whose estimate is below the bound held loses
    nothing."""
    workload = random_dag(seed + 10, n_layers=5, batch=1)
    inputs = WeightOrderInputs.of(workload, EDGE)
    last, first = weight_order.estimates(inputs)
    for k in last:
        for model, estimate in ((weight_order.last_loads_model, last),
                                (weight_order.first_loads_model, first)):
            status = minimise(model(inputs, k), None)
            assert status.objective is not None
            assert status.objective <= estimate[k] + 1e-6


@pytest.mark.skipif(not RUNS.is_file(), reason="shared/reference-nets not present")
def test_every_run_starts_from_it_where_it_binds() -> None:
    workload = zoo.get("gpt2_small_prefill")
    bound = run_bound(workload, EDGE, None)
    assert bound.binding == "weight_order"
    assert bound.cycles == weight_order_bound(workload, EDGE, None).value
    closed = run_bound(zoo.get("chain5"), EDGE, None)
    assert closed.binding == network_latency_bound(zoo.get("chain5"), EDGE).binding


def test_network_inputs_are_loads_whose_wholes_one_position_layers_wait_for() -> None:
    """On the token block at batch 1 the input `x` is needed whole by the norm (one
    position) and so by every layer after it, the cache by the matmul; at batch 2 no
    layer is known to wait for a whole input."""
    one = WeightOrderInputs.of(_token_block(1), EDGE)
    assert one.closure["x -> norm[0]"] == frozenset(_token_block(1).layers)
    assert one.closure["cache -> keys[0]"] == frozenset({"scores"})
    assert one.closure["k"] == frozenset({"k", "kt", "keys", "scores"})
    two = WeightOrderInputs.of(_token_block(2), EDGE)
    assert two.closure["x -> norm[0]"] == two.closure["cache -> keys[0]"] == frozenset()


@pytest.mark.skipif(not RUNS.is_file(), reason="shared/reference-nets not present")
def test_binds_on_gpt2_decode_below_the_reference_and_mipsched() -> None:
    """GPT-2 small decode / edge / b1: whatever load completes last (the token read
    twice, by norm1 and res1, counted), at least ffn2 (9,228 cycles, its one tile),
    res2 and the output's store follow it; the bound equals the reference's 500,895
    (run here with seq_len 513, benchmarks/reference_runs_here.csv) and mipsched's
    schedule, which is therefore optimal."""
    workload = zoo.get("gpt2_small_decode")
    bound = weight_order_bound(workload, EDGE, time_limit=None)
    assert bound is not None
    assert network_latency_bound(workload, EDGE).cycles + 9_000 < bound.value <= 500_895
    found = solve(workload, EDGE, "auto", time_limit=3.0)
    assert found.candidate is not None
    assert bound.value == found.candidate.evaluation.latency_cycles  # proven optimal


def test_a_tightened_weight_read_term_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Claiming a layer reads its weights from the GBUF twice (2 x weight bytes / read
    bandwidth) puts the GPT-2 decode bound above the reference's schedule."""
    workload = zoo.get("gpt2_small_decode")
    real = WeightOrderInputs.of(workload, EDGE)
    bandwidth = EDGE.gbuf.read_bytes_per_cycle
    doubled = {n: max(c, Fraction(2 * workload.weight_bytes(n), bandwidth))
               for n, c in real.compute_cycles.items()}
    broken = WeightOrderInputs(real.load_cycles, doubled, real.closure)
    monkeypatch.setattr(weight_order.WeightOrderInputs, "of",
                        classmethod(lambda cls, wl, hw, deadline=None, cycles=None: broken))
    bound = weight_order_bound(workload, EDGE, time_limit=None)
    assert bound is not None and bound.value > 500_895


def test_reads_examined_past_the_deadline_give_subsets_of_f() -> None:
    """GoogLeNet at batch 1: a passed deadline examines no layer (every F empty), and
    each F so found is a subset of the full one, so the bound is weaker, never wrong."""
    workload = zoo.get("googlenet")
    full = WeightOrderInputs.of(workload, EDGE)
    cut = WeightOrderInputs.of(workload, EDGE, deadline=0.0)
    reads = [u for u in full.closure if u not in workload.layers]
    assert reads and any(full.closure[u] for u in reads)
    assert all(not cut.closure[u] for u in reads)
    assert all(cut.closure[u] <= full.closure[u] for u in full.closure)
    assert cut.load_cycles == full.load_cycles
