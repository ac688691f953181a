"""Plane releases (heuristics/plane_releases.py, a move of the local descent): the whole
readers are the layers one position of which reads a producer's whole plane; every
release is a valid LFA that moves exactly those readers and their descendants out of
their FLG and keeps every other FLG; on GPT-2 small prefill / edge / b16 the release of
the key transposes lets the first FLG split tokens and is faster than the LFA it leaves,
as the module says."""

from __future__ import annotations

import math

from mipsched.heuristics.lfa_neighbours import neighbours
from mipsched.heuristics.plane_releases import release_tilings, releases, whole_readers
from mipsched.heuristics.prefetch_anneal import prefetched
from mipsched.hw import load_hardware
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa
from mipsched.schedule.tiling import choose_grid
from mipsched.workload.zoo import get

HEADS = 12
KEYS = tuple(f"attention_K{i}" for i in range(HEADS))
TRANSPOSES = tuple(f"attention_Kt{i}" for i in range(HEADS))
TAIL = ("attention_QK", "attention_QK_elt", "attention_QKV", "attention_FC", "res1",
        "norm2", "ffn1", "GeLU", "ffn2", "res2")


def _fused_keys_lfa() -> Lfa:
    """The LFA of the 60-s GPT-2 small prefill / edge / b16 schedule of 8,780,544 cycles:
    each key head fused with its transpose in a first FLG of 4 tiles."""
    heads = tuple(n for pair in zip(KEYS, TRANSPOSES, strict=True) for n in pair)
    order = ("norm1", *heads, "attention_K", "attention_Q", "attention_V", *TAIL)
    return Lfa(order, (28, 32), (4, 16, 16), (28, 32))


def _released_keys_lfa() -> Lfa:
    """Its release: the transposes and the concat K joined to the attention FLG behind a
    DRAM cut, the rest at 12 tiles (4 samples x 3 token parts)."""
    order = ("norm1", *KEYS, "attention_Q", "attention_V", *TRANSPOSES, "attention_K",
             *TAIL)
    return Lfa(order, (15, 32), (12, 16, 16), (15, 32))


def test_whole_readers_are_the_transposes_attention_operands_and_global_pools() -> None:
    """GPT-2 prefill: each key transpose reads all tokens of its head, QK all of K and
    QKV all of V; ResNet-50: only the global pool (the FC reads a 1 x 1 plane)."""
    expected = {t: frozenset({k}) for k, t in zip(KEYS, TRANSPOSES, strict=True)}
    expected |= {"attention_QK": frozenset({"attention_K"}),
                 "attention_QKV": frozenset({"attention_V"})}
    assert whole_readers(get("gpt2_small_prefill", 16)) == expected
    assert whole_readers(get("resnet50", 16)) == {"pool5": frozenset({"conv_5_2_res"})}
    assert whole_readers(get("vgg19")) == {}


def test_release_tilings_split_rows_and_keep_the_batch_parts_asked() -> None:
    """The old tiling number first; then per divisor d of the batch, two tiling numbers
    d x k that choose_grid splits into d batch parts and more than one token part."""
    workload = get("gpt2_small_prefill", 16)
    first = ("norm1", *KEYS, "attention_Q", "attention_V")
    tilings = release_tilings(workload, first, 4)
    assert tilings[0] == 4 and len(set(tilings)) == len(tilings)
    for t in tilings[1:]:
        grid = choose_grid(workload, first, t)
        assert grid.batch_parts == math.gcd(t, 16) and grid.h_parts * grid.w_parts > 1
    assert {d: sum(math.gcd(t, 16) == d for t in tilings[1:]) for d in (1, 2, 4, 8, 16)} \
        == dict.fromkeys((1, 2, 4, 8, 16), 2)
    assert 12 in tilings


def test_every_release_moves_exactly_the_readers_and_keeps_the_other_flgs() -> None:
    """Each release is a topological order; its first FLG holds no transpose, no concat K
    and nothing depending on them, the moved layers follow it, and the attention FLG
    and the last FLG keep their layers; own-FLG releases add one FLG, joined ones none."""
    workload = get("gpt2_small_prefill", 16)
    lfa = _fused_keys_lfa()
    found = list(releases(lfa, workload, whole_readers(workload)))
    assert found and len(set(found)) == len(found)
    moved = {*TRANSPOSES, "attention_K"}
    for new in found:
        position = {n: k for k, n in enumerate(new.order)}
        assert all(position[u] < position[v] for u, v in workload.graph.edges)
        assert new.flc[0] == 15 and set(new.order[:15]).isdisjoint(moved)
        assert set(new.order[15:28]) == moved
        bounds = new.flg_bounds()
        assert len(bounds) in (len(lfa.tiling), len(lfa.tiling) + 1)
        assert new.order[-10:] == TAIL and bounds[-1] == (32, 38)
        assert new.tiling[-1] == 16
    assert _released_keys_lfa() in found


def test_gpt2_release_is_faster_and_listed_in_the_descents_neighbourhood() -> None:
    """The release of the key transposes runs in less time than the LFA it leaves under
    the greedy prefetching DLSA (the descent's measure), and the descent lists it."""
    workload = get("gpt2_small_prefill", 16)
    lowerer = Lowerer(workload, load_hardware("edge"))
    fused, released = _fused_keys_lfa(), _released_keys_lfa()
    before, after = prefetched(lowerer, fused), prefetched(lowerer, released)
    assert before is not None and after is not None
    assert after[2] < before[2]
    assert after[0].compute_cycles == before[0].compute_cycles
    around = neighbours(fused, workload.graph, None, 16, (),
                        releases(fused, workload, whole_readers(workload)))
    assert released in around
    assert released not in neighbours(fused, workload.graph, None, None, (),
                                      releases(fused, workload, whole_readers(workload)))
