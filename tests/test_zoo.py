"""Built-in networks: they build, scale with batch, and match their published totals."""

from __future__ import annotations

from collections import Counter

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mipsched.workload.graph import Workload
from mipsched.workload.layer import Op, Shape
from mipsched.workload.zoo import NETWORKS, get
from mipsched.workload.zoo.random_dags import random_dag


def _ops(w: Workload) -> Counter[Op]:
    return Counter(lay.op for lay in w.layers.values())


def _within(value: float, published: float, rel: float = 0.02) -> bool:
    return abs(value - published) <= rel * published


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_builds_and_scales_with_batch(name: str) -> None:
    one, four = get(name, 1), get(name, 4)
    assert one.batch == 1 and four.batch == 4
    assert list(one.layers) == list(four.layers)
    assert four.total_macs == 4 * one.total_macs > 0
    assert four.total_weight_bytes == one.total_weight_bytes


# Totals at batch 1 (MACs; weights = weight elements, no biases / batch norm).
# ResNet-50/101, VGG-16, MobileNetV2: the torchvision model-zoo figures (GFLOPS there are
# MACs); MobileNetV2 also Sandler et al. Table 4 (300 M MAdds). RandWire-WS small (C=78):
# Xie et al. Table 2 (583 M FLOPs = multiply-adds, 5.6 M params). GoogLeNet: the sum of
# the "ops" column of Szegedy et al. 2015 Table 1 (1586 M). GPT-2 block: 12 d^2 weights.
PUBLISHED = [
    ("resnet50", 4.1e9, 25.5e6),
    ("resnet101", 7.8e9, 44.5e6),
    ("vgg16", 15.5e9, 138e6),
    ("mobilenet_v2", 0.30e9, 3.5e6),
    ("randwire_small", 583e6, 5.6e6),
    ("googlenet", 1586e6, None),
    ("gpt2_small_prefill", None, 7.08e6),
    ("gpt2_small_decode", None, 7.08e6),
    ("gpt2_xl_prefill", None, 30.7e6),
    ("gpt2_xl_decode", None, 30.7e6),
]


@pytest.mark.parametrize(("name", "macs", "weights"), PUBLISHED)
def test_published_totals(name: str, macs: float | None, weights: float | None) -> None:
    w = get(name)
    if macs is not None:
        assert _within(w.total_macs, macs), w.total_macs
    if weights is not None:
        assert _within(w.total_weight_bytes, weights), w.total_weight_bytes


def test_resnet_structure_and_soma_names() -> None:
    r50, r101 = get("resnet50"), get("resnet101")
    assert _ops(r50)[Op.CONV] == 53 and _ops(r50)[Op.FC] == 1 and _ops(r50)[Op.ADD] == 16
    assert _ops(r101)[Op.CONV] == 104 and _ops(r101)[Op.ADD] == 33
    names = list(r50.layers)
    assert names[:7] == ["conv1", "pool1", "conv_2_0_a", "conv_2_0_b", "conv_2_0_c",
                         "conv_2_br", "conv_2_0_res"]
    assert names[-2:] == ["pool5", "fc"]
    assert r50.layers["conv_2_0_res"].inputs == ("conv_2_0_c", "conv_2_br")
    assert r50.layers["conv_3_0_b"].stride == (2, 2)
    assert r50.shape_of("conv_5_2_res") == Shape(2048, 7, 7)


def test_vgg16_and_mobilenet_v2_structure() -> None:
    vgg = get("vgg16")
    assert _ops(vgg)[Op.CONV] == 13 and _ops(vgg)[Op.MAX_POOL] == 5
    assert vgg.weight_bytes("fc6") == 7 * 7 * 512 * 4096
    mb = get("mobilenet_v2")
    assert _ops(mb)[Op.DEPTHWISE_CONV] == 17 and _ops(mb)[Op.ADD] == 10
    assert mb.shape_of("conv_last") == Shape(1280, 7, 7)


def test_googlenet_follows_table1() -> None:
    w = get("googlenet")
    assert _ops(w)[Op.CONCAT] == 9
    # output sizes of Table 1
    for layer, shape in [("conv2", (192, 56, 56)), ("inc3a", (256, 28, 28)),
                         ("inc3b", (480, 28, 28)), ("inc4e", (832, 14, 14)),
                         ("inc5b", (1024, 7, 7)), ("pool5", (1024, 1, 1))]:
        assert w.shape_of(layer) == Shape(*shape), layer
    assert w.macs("conv1") == 118_013_952  # Table 1: 118 M ops


def test_inception_resnet_v1_follows_figures() -> None:
    w = get("inception_resnet_v1")
    # map sizes annotated in Figs. 14, 7, 12 and 15
    assert w.shape_of("stem_conv6") == Shape(256, 35, 35)
    assert w.shape_of("red_a") == Shape(896, 17, 17)
    assert w.shape_of("red_b") == Shape(1792, 8, 8)
    assert w.layers["b0_b1_1"].kernel == (1, 7) and w.layers["c0_b1_2"].kernel == (3, 1)
    assert _ops(w)[Op.ADD] == 5 + 10 + 5
    # no published MAC count to pin; 6.21 G follows from the figures
    assert 5.5e9 < w.total_macs < 7e9


def test_randwire_is_deterministic() -> None:
    first, second = get("randwire_small"), get("randwire_small")
    assert first.layers == second.layers and first.outputs == second.outputs
    assert _ops(first)[Op.DEPTHWISE_CONV] == 3 * 32
    assert first.shape_of("conv_head") == Shape(1280, 7, 7)
    input_nodes = [n for n, lay in first.layers.items()
                   if lay.op == Op.DEPTHWISE_CONV and lay.stride == (2, 2)]
    assert input_nodes and all(n.endswith("_dw") for n in input_nodes)


@pytest.mark.parametrize(("size", "d", "heads", "cache"),
                         [("small", 768, 12, 512), ("xl", 1600, 25, 1024)])
def test_gpt2_blocks(size: str, d: int, heads: int, cache: int) -> None:
    pre = get(f"gpt2_{size}_prefill")
    assert pre.inputs == {"x": Shape(d, cache, 1)}
    assert pre.outputs == ("res2",)
    assert pre.shape_of("qk") == Shape(heads * cache, cache, 1)
    dec = get(f"gpt2_{size}_decode")
    assert dec.inputs == {"x": Shape(d, 1, 1), "k_cache": Shape(d, cache, 1),
                          "v_cache": Shape(d, cache, 1)}
    assert set(dec.outputs) == {"res2", "k", "v"}
    assert dec.shape_of("k_cat") == Shape(d, cache + 1, 1)
    assert dec.shape_of("qk") == Shape(heads * (cache + 1), 1, 1)
    assert dec.shape_of("pv") == Shape(d, 1, 1)
    # attention MACs: QK^T and P.V each d x queries x keys
    assert dec.macs("qk") == dec.macs("pv") == d * (cache + 1)
    assert pre.macs("qk") == d * cache * cache


def _check_random_dag(w: Workload) -> None:
    assert len(w.inputs) == 1
    (src,) = w.inputs
    roots = [n for n, lay in w.layers.items() if src in lay.inputs]
    reachable = set(roots).union(*(nx.descendants(w.graph, r) for r in roots))
    assert reachable == set(w.layers)
    sinks = {n for n in w.layers if w.graph.out_degree(n) == 0}
    assert sinks == set(w.outputs)
    for name in w.layers:
        shape = w.shape_of(name)
        assert 4 <= shape.c <= 64 and 4 <= shape.h == shape.w <= 16


def test_random_dag_is_deterministic_and_valid_for_50_seeds() -> None:
    for seed in range(50):
        w = random_dag(seed)
        assert w.layers == random_dag(seed).layers
        assert len(w.layers) == 6
        _check_random_dag(w)
    assert len({tuple(random_dag(s).layers.values()) for s in range(50)}) > 40


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32), n_layers=st.integers(1, 20), batch=st.integers(1, 4))
def test_random_dag_always_builds(seed: int, n_layers: int, batch: int) -> None:
    w = random_dag(seed, n_layers, batch)
    assert len(w.layers) == n_layers and w.batch == batch
    _check_random_dag(w)
