"""Tile cost model against the SoMa reference implementation's exported tile costs.

The networks are rebuilt here as the reference defines them (src/nns/resnet.cpp,
transformer.cpp, randwire_small.cpp); note that the reference's ResNet-50 puts the
stride-2 of a downsampling block on the 1x1 'a' conv (ResNet v1), not on the 3x3 'b'.
"""

from __future__ import annotations

import dataclasses
import json
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mipsched.cost import NoMappingError, TileCost, tile_cost
from mipsched.cost.core_array import ConvShape, map_conv
from mipsched.hw import Hardware, load_hardware
from mipsched.workload import ops
from mipsched.workload.graph import NetBuilder, Workload
from mipsched.workload.layer import Op, Region, full_region

INSTANCES = Path(__file__).resolve().parents[2] / "shared" / "instances"
#: The presets carry the reference's unrounded per-byte energies: tile energies agree
#: with the reference to rounding of the decimal constants.
ENERGY_REL = 1e-9


@cache
def resnet50() -> Workload:
    b = NetBuilder("resnet50-soma")
    x = b.input("input", 3, 224, 224)
    x = b.conv("conv1", x, 64, 7, stride=2, padding=3)
    x = b.pool("pool1", x, 3, 2, 1)
    stages = ((3, 64, 256), (4, 128, 512), (6, 256, 1024), (3, 512, 2048))
    for seg, (blocks, mid, out) in enumerate(stages, start=2):
        for blk in range(blocks):
            stride = 2 if blk == 0 and seg > 2 else 1
            p = f"conv_{seg}_{blk}_"
            a = b.conv(p + "a", x, mid, 1, stride=stride)
            c = b.conv(p + "c", b.conv(p + "b", a, mid, 3), out, 1)
            if blk == 0:
                x = b.conv(f"conv_{seg}_br", x, out, 1, stride=stride)
            x = b.eltwise(p + "res", [x, c])
    b.fc("fc", b.global_pool("pool5", x), 1000)
    return b.build()


@cache
def gpt2_block() -> Workload:
    """GPT-2 small prefill block (12 heads x 64, 512 tokens) in mipsched ops; the
    reference's per-head K transposes and K concat are left out; one 768-wide K
    projection stands in for its 12 per-head K convs."""
    b = NetBuilder("gpt2-soma")
    x = b.input("input_qkv", 768, 512, 1)
    n1 = b.unary("norm1", x, Op.LAYERNORM)
    b.matmul("attention_K0", n1, 64)
    q = b.matmul("attention_Q", n1, 768)
    k = b.matmul("attention_Kfull", n1, 768)
    v = b.matmul("attention_V", n1, 768)
    qk = b.matmul_act("attention_QK", q, k, heads=12, transpose_rhs=True)
    p = b.unary("attention_QK_elt", qk, Op.SOFTMAX)
    pv = b.matmul_act("attention_QKV", p, v, heads=12, transpose_rhs=False)
    r1 = b.eltwise("res1", [b.matmul("attention_FC", pv, 768), x])
    f1 = b.matmul("ffn1", b.unary("norm2", r1, Op.LAYERNORM), 3072)
    f2 = b.matmul("ffn2", b.unary("GeLU", f1, Op.GELU), 768)
    b.eltwise("res2", [r1, f2])
    b.output("res2", "attention_K0")
    return b.build()


@cache
def randwire() -> Workload:
    """The reference's randwire_small layer shapes (its wiring is not needed here)."""
    b = NetBuilder("randwire-soma")
    x = b.input("input", 3, 224, 224)
    c2 = b.conv("conv2d_2", b.conv("conv2d_1", x, 32, 3, stride=2), 64, 3, stride=2)
    c4 = b.conv("conv2d_4", b.conv("conv2d_3", c2, 64, 3, stride=2), 64, 1)
    c5 = b.conv("conv2d_5", c4, 64, 3)
    c8 = b.conv("conv2d_8", b.conv("conv2d_7", c2, 64, 3, stride=2), 64, 1)
    e1 = b.eltwise("element_wise1", [c4, c8])
    e4 = b.eltwise("element_wise4", [c5, c4, c8, e1])
    e8 = b.unary("element_wise8", b.eltwise("element_wise7", [c5, c4, e4]), Op.GELU)
    c24 = b.conv("conv2d_24", b.conv("conv2d_23", e8, 64, 3, stride=2), 128, 1)
    c30 = b.conv("conv2d_30", b.conv("conv2d_29", c24, 128, 3), 128, 1)
    e12 = b.eltwise("element_wise12", [c24, c30, c24, c30, c24])
    c44 = b.conv("conv2d_44", b.conv("conv2d_43", e12, 128, 3, stride=2), 256, 1)
    c48 = b.conv("conv2d_48", b.conv("conv2d_47", c44, 256, 3), 256, 1)
    b.conv("conv2d_63", b.eltwise("element_wise16", [c44, c48]), 1024, 1)
    return b.build()


def resnet_tile(name: str) -> Region:
    """The reference's tile of a ResNet-50 layer in resnet50-edge-b1.json: the whole
    layer, except the last block of stages 2-4, which is fused with the next stage's
    stride-2 1x1 convs and so only computes the rows and columns they read."""
    wl = resnet50()
    for last, nxt in (("conv_2_2_", "conv_3_0_a"), ("conv_3_3_", "conv_4_0_a"),
                      ("conv_4_5_", "conv_5_0_a")):
        if name.startswith(last) and name[-1] != "a":
            lay = wl.layers[nxt]
            return ops.input_region(lay, 0, wl.in_shapes(nxt), full_region(1, lay.out))
    return full_region(1, wl.layers[name].out)


def gpt2_tile(name: str) -> Region:
    """Tiles of gpt2-small-prefill-edge-b1.json: token slices of 256 or 128 rows."""
    rows = {"attention_QK": 256, "attention_QK_elt": 256, "attention_QKV": 256,
            "GeLU": 128, "ffn2": 128, "res2": 128}.get(name, 512)
    return Region(0, 1, 0, rows, 0, 1)


def cost_of(hw: Hardware, wl: Workload, name: str, region: Region) -> TileCost:
    lay = wl.layers[name]
    return tile_cost(hw, lay, wl.in_shapes(name), region, wl.elem_bytes)


CASES = {
    "resnet50-edge-b1.json": ("edge", resnet50, resnet_tile),
    "gpt2-small-prefill-edge-b1.json": ("edge", gpt2_block, gpt2_tile),
    "randwire-small-cloud-b1.json": ("cloud", randwire,
                                     lambda n: full_region(1, randwire().layers[n].out)),
}


def reference_tiles(instance: str):
    hw_name, net, tile = CASES[instance]
    wl = net()
    tiles = json.loads((INSTANCES / instance).read_text())["tiles"]
    rows = [(t["layer"], t["compute_cycles"], t["energy_pj"]) for t in tiles
            if t["layer"] in wl.layers]
    return load_hardware(hw_name), wl, tile, rows


def test_conv1_edge_one_tile():
    c = cost_of(load_hardware("edge"), resnet50(), "conv1", resnet_tile("conv1"))
    assert c.cycles == 76_832 == 1 * 2 * 28 * 28 * 49
    assert c.mapping == "HxW"
    assert c.macs == 64 * 112 * 112 * 3 * 49
    assert c.energy_pj == pytest.approx(39416159.8962491, rel=ENERGY_REL)


@pytest.mark.skipif(not INSTANCES.is_dir(), reason="shared/instances not present")
@pytest.mark.parametrize("instance", sorted(CASES))
def test_matches_reference_tiles(instance):
    hw, wl, tile, rows = reference_tiles(instance)
    assert len({name for name, _, _ in rows}) >= 14
    for name, cycles, energy in rows:
        c = cost_of(hw, wl, name, tile(name))
        assert c.cycles == cycles, name
        assert c.energy_pj == pytest.approx(energy, rel=ENERGY_REL), name


@pytest.mark.skipif(not INSTANCES.is_dir(), reason="shared/instances not present")
def test_resnet_covers_every_reference_tile():
    _, wl, _, rows = reference_tiles("resnet50-edge-b1.json")
    assert len(rows) == 72 == len(wl.layers)


@pytest.mark.parametrize("name, cycles", [("pool1", 3528), ("conv_2_0_res", 3136),
                                          ("pool5", 196)])
def test_vector_cycles(name, cycles):
    hw = load_hardware("edge")
    c = cost_of(hw, resnet50(), name, resnet_tile(name))
    assert c.cycles == cycles
    assert c.energy_pj == pytest.approx(c.vector_ops * hw.vector_unit.pj_per_op)
    assert (c.macs, c.gbuf_read_bytes, c.mapping) == (0, 0, "vector")


def test_concat_is_free():
    b = NetBuilder("cat")
    x = b.input("x", 8, 4, 4)
    b.concat("cat", [b.conv("a", x, 8, 1), b.conv("b", x, 8, 1)])
    wl = b.build()
    c = cost_of(load_hardware("edge"), wl, "cat", full_region(1, wl.layers["cat"].out))
    assert (c.cycles, c.energy_pj, c.mapping) == (0, 0.0, "none")


def test_depthwise_runs_channels_in_groups_of_min_vec_lane():
    b = NetBuilder("dw")
    b.depthwise("dw", b.input("x", 32, 112, 112), 3)
    wl = b.build()
    c = cost_of(load_hardware("edge"), wl, "dw", full_region(1, wl.layers["dw"].out))
    # 16 channels at a time (min(vector 16, lanes 32)), each spread over 4x4 PEs by HxW.
    assert c.cycles == 2 * 28 * 28 * 9
    assert c.mapping == "HxW"


def test_memoised_on_extents_not_position():
    hw, wl = load_hardware("edge"), resnet50()
    a = cost_of(hw, wl, "conv_2_0_b", Region(0, 1, 0, 14, 0, 56))
    b = cost_of(hw, wl, "conv_2_0_b", Region(0, 1, 28, 42, 0, 56))
    assert a is b
    assert cost_of(hw, wl, "conv_2_0_b", Region(0, 1, 0, 15, 0, 56)) is not a


def test_breakdown_adds_up():
    c = cost_of(load_hardware("cloud"), resnet50(), "conv_3_0_b", resnet_tile("conv_3_0_b"))
    assert c.energy_pj == pytest.approx(c.mac_pj + c.local_pj + c.gbuf_pj + c.noc_pj)
    assert c.cycles >= max(c.compute_cycles, c.bound_cycles)
    assert c.gbuf_write_bytes == 128 * 28 * 28


def test_cycles_may_shrink_when_a_tile_grows_like_the_reference():
    # The reference keeps the least energy x time mapping, so one more row can switch
    # to a faster mapping: cloud, conv_3_0_b (128->128, 3x3, 28 wide), 5 -> 6 rows.
    hw, wl = load_hardware("cloud"), resnet50()
    five = cost_of(hw, wl, "conv_3_0_b", Region(0, 1, 0, 5, 0, 28))
    six = cost_of(hw, wl, "conv_3_0_b", Region(0, 1, 0, 6, 0, 28))
    assert (five.cycles, five.mapping, six.cycles, six.mapping) == (630, "CxW", 504, "HxW")
    assert five.bound_cycles <= six.bound_cycles


def test_no_mapping_when_l0_too_small():
    with pytest.raises(NoMappingError):
        map_conv(load_hardware("edge"), ConvShape(c=2048, k=1000, r=7, s=7, h=1, w=1,
                                                  batch=1))


conv_shapes = st.builds(
    ConvShape,
    c=st.sampled_from([1, 3, 16, 32, 64, 100, 256, 512]),
    k=st.sampled_from([1, 16, 32, 64, 100, 128, 512, 1000]),
    r=st.sampled_from([1, 3, 5, 7]), s=st.sampled_from([1, 3]),
    h=st.integers(1, 40), w=st.integers(1, 40), batch=st.integers(1, 3),
    stride_h=st.sampled_from([1, 2]), stride_w=st.sampled_from([1, 2]),
    groups=st.sampled_from([1, 1, 4, 12]),
)


@settings(max_examples=150, deadline=None)
@given(shape=conv_shapes, hw_name=st.sampled_from(["edge", "cloud"]),
       grow=st.sampled_from(["h", "w", "batch"]), by=st.integers(1, 9))
def test_bound_is_monotone_and_below_cycles(shape, hw_name, grow, by):
    hw = load_hardware(hw_name)
    bigger = dataclasses.replace(shape, **{grow: getattr(shape, grow) + by})
    try:
        small, large = map_conv(hw, shape), map_conv(hw, bigger)
    except NoMappingError:
        return
    assert 0 < small.bound_cycles <= small.cycles
    assert small.bound_cycles <= large.bound_cycles <= large.cycles
    macs = shape.c * shape.k * shape.r * shape.s * shape.h * shape.w * shape.batch
    assert small.cycles * hw.core_array.macs_per_cycle >= macs * shape.groups
    assert small.energy_pj > macs * shape.groups * hw.core_array.mac_pj > 0
