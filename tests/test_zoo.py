"""Built-in networks: they build, scale with batch, match their published totals and say
where they come from (tests/test_reference_nets.py pins the SoMa ones layer for layer)."""

from __future__ import annotations

from collections import Counter

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mipsched.workload import ops
from mipsched.workload.graph import Workload, WorkloadError
from mipsched.workload.layer import Op, Shape
from mipsched.workload.zoo import NETWORKS, describe, get
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
# ResNet-50/101 v1: He et al. 2016 Table 1 (3.8 and 7.6 x 10^9 FLOPs = multiply-adds);
# their v1.5 variants, VGG-16, MobileNetV2: the torchvision model-zoo figures (GFLOPS there
# are MACs); MobileNetV2 also Sandler et al. Table 4 (300 M MAdds). VGG-19 without fc:
# torchvision's 19.6 GFLOPS (its fc layers add 0.12 G) and 143.7 M parameters less its fc
# layers' 123.6 M. RandWire-WS small (C=78): Xie et al. Table 2 (583 M FLOPs =
# multiply-adds, 5.6 M params). GoogLeNet: Szegedy et al. 2015 Table 1, the sum of its
# "ops" column (1586 M) and of its "params" column (6798 K, K = 1024). GPT-2 block: 12 d^2
# weights.
PUBLISHED = [
    ("resnet50", 3.8e9, 25.5e6),
    ("resnet101", 7.6e9, 44.5e6),
    ("resnet50_v1_5", 4.1e9, 25.5e6),
    ("resnet101_v1_5", 7.8e9, 44.5e6),
    ("vgg16", 15.5e9, 138e6),
    ("vgg19", 19.6e9, 20.0e6),
    ("mobilenet_v2", 0.30e9, 3.5e6),
    ("randwire_ws_small", 583e6, 5.6e6),
    ("googlenet", 1586e6, 6.96e6),
    ("gpt2_small_prefill", None, 7.08e6),
    ("gpt2_small_prefill_s1024", None, 7.08e6),
    ("gpt2_small_decode", None, 7.08e6),
    ("gpt2_xl_prefill", None, 30.7e6),
    ("gpt2_xl_decode", None, 30.7e6),
]
#: the zoo names that are the SoMa reference implementation's networks
SOMA_REFERENCE = {"resnet50", "resnet101", "inception_resnet_v1", "randwire_small",
                  "googlenet", "vgg19", "gpt2_small_prefill", "gpt2_small_prefill_s1024",
                  "gpt2_small_decode", "gpt2_xl_prefill", "gpt2_xl_decode"}


@pytest.mark.parametrize(("name", "macs", "weights"), PUBLISHED)
def test_published_totals(name: str, macs: float | None, weights: float | None) -> None:
    w = get(name)
    if macs is not None:
        assert _within(w.total_macs, macs), w.total_macs
    if weights is not None:
        assert _within(w.total_weight_bytes, weights), w.total_weight_bytes


@pytest.mark.parametrize("name", list(NETWORKS))
def test_every_network_says_where_it_comes_from(name: str) -> None:
    text = describe(name)
    assert text and "\n" not in text
    assert text.startswith("SoMa reference network (") == (name in SOMA_REFERENCE)
    assert text.startswith("torchvision-style") == name.endswith("_v1_5")
    assert get(name).name == name


def test_unknown_network_is_an_input_error() -> None:
    with pytest.raises(WorkloadError, match="unknown network 'resnet5'"):
        describe("resnet5")
    with pytest.raises(WorkloadError, match="unknown network"):
        get("resnet5")


def test_resnet_v1_strides_in_the_first_1x1_like_the_reference() -> None:
    r50, r101 = get("resnet50"), get("resnet101")
    assert _ops(r50)[Op.CONV] == 53 and _ops(r50)[Op.FC] == 1 and _ops(r50)[Op.ADD] == 16
    assert _ops(r101)[Op.CONV] == 104 and _ops(r101)[Op.ADD] == 33
    names = list(r50.layers)
    assert names[:7] == ["conv1", "pool1", "conv_2_0_a", "conv_2_0_b", "conv_2_0_c",
                         "conv_2_br", "conv_2_0_res"]
    assert names[-2:] == ["pool5", "fc"]
    assert r50.layers["conv_2_0_res"].inputs == ("conv_2_0_c", "conv_2_br")
    assert r50.layers["conv_2_1_res"].inputs == ("conv_2_0_res", "conv_2_1_c")
    for layer in ("conv_3_0_a", "conv_3_br", "conv_5_0_a"):
        assert r50.layers[layer].stride == (2, 2), layer
    assert r50.layers["conv_3_0_b"].stride == (1, 1)
    # 'same' padding with floor(total / 2) in front: 7x7/2 on 224 pads 2 + 3, 3x3/2 on 112
    # pads 0 + 1
    assert (r50.layers["conv1"].padding, r50.layers["conv1"].padding_end) == ((2, 2), (3, 3))
    assert (r50.layers["pool1"].padding, r50.layers["pool1"].padding_end) == ((0, 0), (1, 1))
    assert r50.shape_of("conv_5_2_res") == Shape(2048, 7, 7)
    assert r50.layers["pool5"].op == Op.AVG_POOL and r50.layers["pool5"].kernel == (7, 7)
    # reference/README.md: 3.858 GMACs against v1.5's 4.089
    assert (r50.total_macs, get("resnet50_v1_5").total_macs) == (3_857_973_248, 4_089_184_256)


def test_resnet_v1_5_strides_in_the_3x3() -> None:
    r50, r101 = get("resnet50_v1_5"), get("resnet101_v1_5")
    assert list(r50.layers) == list(get("resnet50").layers)
    assert _ops(r101)[Op.CONV] == 104 and _ops(r101)[Op.ADD] == 33
    assert r50.layers["conv_3_0_b"].stride == (2, 2)
    assert r50.layers["conv_3_0_a"].stride == (1, 1)
    assert r50.layers["conv_2_0_res"].inputs == ("conv_2_0_c", "conv_2_br")
    assert r50.layers["pool5"].op == Op.GLOBAL_POOL


def test_vgg_and_mobilenet_v2_structure() -> None:
    vgg = get("vgg16")
    assert _ops(vgg)[Op.CONV] == 13 and _ops(vgg)[Op.MAX_POOL] == 5
    assert vgg.weight_bytes("fc6") == 7 * 7 * 512 * 4096
    vgg19 = get("vgg19")
    assert _ops(vgg19) == Counter({Op.CONV: 16, Op.MAX_POOL: 5})
    assert vgg19.outputs == ("pool5",) and vgg19.shape_of("pool5") == Shape(512, 7, 7)
    assert list(vgg19.layers)[:3] == ["conv1", "conv2", "pool1"]
    mb = get("mobilenet_v2")
    assert _ops(mb)[Op.DEPTHWISE_CONV] == 17 and _ops(mb)[Op.ADD] == 10
    assert mb.shape_of("conv_last") == Shape(1280, 7, 7)


def _read_shape(w: Workload, layer: str) -> Shape:
    """The map a layer reads: its inputs concatenated along channels."""
    return ops.data_shape(w.layers[layer], w.in_shapes(layer))


def test_googlenet_reads_its_modules_through_implicit_concat() -> None:
    w = get("googlenet")
    assert Op.CONCAT not in _ops(w) and len(w.layers) == 72
    branches = tuple(f"inception_3a_{b}" for b in ("1x1", "3x3", "5x5", "pool_proj"))
    for reader in ("inception_3b_1x1", "inception_3b_3x3_reduce", "inception_3b_pool"):
        assert w.layers[reader].inputs == branches
    # output sizes of Table 1, as the maps the next layers read
    assert w.shape_of("conv2_3x3") == Shape(192, 56, 56)
    for reader, shape in [("inception_3b_1x1", (256, 28, 28)), ("pool3", (480, 28, 28)),
                          ("pool4", (832, 14, 14)), ("pool5", (1024, 7, 7))]:
        assert _read_shape(w, reader) == Shape(*shape), reader
    assert w.shape_of("pool5") == Shape(1024, 1, 1)
    assert w.macs("conv1") == 118_013_952  # Table 1: 118 M ops


def test_inception_resnet_v1_follows_figures_and_the_reference() -> None:
    w = get("inception_resnet_v1")
    # map sizes annotated in Figs. 14, 7, 12 and 15
    assert w.shape_of("Conv_4b_3x3") == Shape(256, 35, 35)
    assert _read_shape(w, "B1_Conv_1a_1x1") == Shape(896, 17, 17)
    assert _read_shape(w, "C1_Conv_1a_1x1") == Shape(1792, 8, 8)
    assert w.layers["B1_Conv_2b_1x7"].kernel == (1, 7)
    assert w.layers["C1_Conv_2c_3x1"].kernel == (3, 1)
    assert _ops(w)[Op.ADD] == 5 + 10 + 5
    # the first B and C adds read the reduction branches concatenated as one operand
    assert not any(lay.op == Op.CONCAT for lay in w.layers.values())
    assert w.layers["B1_Eltwise"].inputs == ("RA_Conv_1a_3x3", "RA_Conv_2c_3x3",
                                             "RA_MaxPool_3a_3x3", "B1_Conv_3_1x1")
    assert w.vector_ops("B1_Eltwise") == 2 * 896 * 17 * 17
    assert w.layers["Dropout"].op == Op.FC and w.weight_bytes("Dropout") == 1792 * 1792
    assert list(w.layers)[-3:] == ["AvgPool", "Dropout", "FC"]
    # no published MAC count to pin; 6.21 G follows from the figures
    assert 5.5e9 < w.total_macs < 7e9


def test_randwire_small_is_the_reference_graph() -> None:
    w = get("randwire_small")
    assert len(w.layers) == 85 and w.outputs == ("conv2d_63",)
    assert _ops(w) == Counter({Op.CONV: 63, Op.ADD: 20, Op.GELU: 2})
    assert w.shape_of("conv2d_63") == Shape(1024, 7, 7)
    # reference-nets/README.md: 0.928 GMACs, 7.58 MB of weights
    assert (w.total_macs, w.total_weight_bytes) == (928_456_704, 7_576_416)
    assert w.layers["element_wise4"].inputs == ("conv2d_6", "conv2d_10", "conv2d_12",
                                                "conv2d_14")
    assert w.layers["conv2d_5"].inputs == ("conv2d_4",)
    strided = [n for n, lay in w.layers.items() if lay.stride == (2, 2)]
    assert strided == ["conv2d_1", "conv2d_2", "conv2d_3", "conv2d_7", "conv2d_23",
                       "conv2d_25", "conv2d_27", "conv2d_43", "conv2d_45"]


def test_randwire_ws_is_deterministic() -> None:
    first, second = get("randwire_ws_small"), get("randwire_ws_small")
    assert first.layers == second.layers and first.outputs == second.outputs
    assert _ops(first)[Op.DEPTHWISE_CONV] == 3 * 32
    assert first.shape_of("conv_head") == Shape(1280, 7, 7)
    input_nodes = [n for n, lay in first.layers.items()
                   if lay.op == Op.DEPTHWISE_CONV and lay.stride == (2, 2)]
    assert input_nodes and all(n.endswith("_dw") for n in input_nodes)


@pytest.mark.parametrize(("size", "d", "heads", "seq"),
                         [("small", 768, 12, 512), ("xl", 1600, 25, 1024)])
def test_gpt2_prefill_keys_per_head(size: str, d: int, heads: int, seq: int) -> None:
    w = get(f"gpt2_{size}_prefill")
    assert w.inputs == {"input_qkv": Shape(d, seq, 1)} and w.outputs == ("res2",)
    assert _ops(w)[Op.TRANSPOSE] == heads and _ops(w)[Op.MATMUL] == heads + 5
    assert w.shape_of("attention_K0") == Shape(64, seq, 1)
    assert w.layers["attention_Kt0"].perm == (1, 0, 2)
    assert w.shape_of("attention_Kt0") == Shape(seq, 64, 1)
    k = w.layers["attention_K"]
    assert k.op == Op.CONCAT and k.copy and len(k.inputs) == heads
    assert w.vector_ops("attention_K") == heads * seq * 64
    qk = w.layers["attention_QK"]
    assert qk.inputs == ("attention_Q", "attention_K") and qk.groups == heads
    assert not qk.transpose_rhs and w.weight_bytes("attention_QK") == 0
    assert w.shape_of("attention_QK") == Shape(heads * seq, seq, 1)
    assert w.macs("attention_QK") == w.macs("attention_QKV") == d * seq * seq
    assert w.shape_of("attention_QKV") == Shape(d, seq, 1)
    assert get("gpt2_small_prefill_s1024").inputs == {"input_qkv": Shape(768, 1024, 1)}


@pytest.mark.parametrize(("size", "d", "heads", "cache"),
                         [("small", 768, 12, 512), ("xl", 1600, 25, 1024)])
def test_gpt2_decode_reads_the_kv_cache(size: str, d: int, heads: int, cache: int) -> None:
    w = get(f"gpt2_{size}_decode")
    assert w.inputs == {"input_q": Shape(d, 1, 1), "k_cache": Shape(heads * cache, 64, 1),
                        "v_cache": Shape(cache, d, 1)}
    assert w.outputs == ("res2",)  # the new K and V are not stored back
    assert w.layers["attention_K"].inputs == ("k_cache", "attention_newK")
    assert w.shape_of("attention_K") == Shape(heads * (cache + 1), 64, 1)
    assert w.layers["attention_Vt_concat"].inputs == ("v_cache", "attention_newVt")
    assert w.shape_of("attention_V") == Shape(d, cache + 1, 1)
    for copy in ("attention_newK", "attention_K", "attention_Vt_concat"):
        assert w.layers[copy].copy, copy
    # attention MACs: QK^T and P.V each d x keys for one query
    assert w.macs("attention_QK") == w.macs("attention_QKV") == d * (cache + 1)


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
