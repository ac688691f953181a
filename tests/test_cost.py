"""Tile cost model against the SoMa reference implementation's exported tile costs.

The networks are the zoo's SoMa reference networks (resnet50, gpt2_small_prefill,
randwire_small), layer for layer the reference's (tests/test_reference_nets.py).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Mapping
from functools import cache, reduce
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mipsched.cost import NoMappingError, TileCost, tile_cost
from mipsched.cost.core_array import ConvShape, map_conv
from mipsched.hw import Hardware, load_hardware
from mipsched.workload import ops, zoo
from mipsched.workload.graph import NetBuilder, Workload
from mipsched.workload.layer import Region, full_region

INSTANCES = Path(__file__).resolve().parents[2] / "shared" / "instances"
#: The presets carry the reference's unrounded per-byte energies: tile energies agree
#: with the reference to rounding of the decimal constants.
ENERGY_REL = 1e-9
#: instance -> (hardware preset, zoo network)
CASES = {
    "resnet50-edge-b1.json": ("edge", "resnet50"),
    "gpt2-small-prefill-edge-b1.json": ("edge", "gpt2_small_prefill"),
    "randwire-small-cloud-b1.json": ("cloud", "randwire_small"),
}

needs_instances = pytest.mark.skipif(not INSTANCES.is_dir(),
                                     reason="shared/instances not present")


@cache
def resnet50() -> Workload:
    return zoo.get("resnet50")


def tile_regions(wl: Workload, tiles: Mapping[str, int]) -> dict[str, Region]:
    """The region one tile of each layer computes when layer L runs as tiles[L] tiles:
    what the tiles of its consumers with as many tiles (fused with it, tile by tile) read
    of it, halo and strides included; a layer without such consumers computes 1/tiles of
    its rows. So a one-tile layer computes its whole output unless its fused consumers read
    only part of it (ResNet's conv_2_2_*: 55x55, the stride-2 1x1 convs after them read
    rows 0, 2, ..., 54), and QK's weight operand K is computed whole for each QK tile."""
    regions: dict[str, Region] = {}
    for name in reversed(wl.layers):
        reads = [ops.input_region(wl.layers[c], i, wl.in_shapes(c), regions[c])
                 for c in wl.consumers(name) if tiles[c] == tiles[name]
                 for i, src in enumerate(wl.layers[c].inputs) if src == name]
        reads = [r for r in reads if r is not None]
        out = wl.layers[name].out
        regions[name] = (reduce(Region.hull, reads) if reads else
                         Region(0, wl.batch, 0, -(-out.h // tiles[name]), 0, out.w))
    return regions


def cost_of(hw: Hardware, wl: Workload, name: str, region: Region) -> TileCost:
    lay = wl.layers[name]
    return tile_cost(hw, lay, wl.in_shapes(name), region, wl.elem_bytes)


def reference_tiles(instance: str) -> tuple[Hardware, Workload, dict[str, Region],
                                            Counter[str], list[tuple[str, int, float]]]:
    """Hardware, zoo network, tile regions, tiles per layer and the instance's tiles
    (layer, compute cycles, energy in pJ)."""
    hw_name, net = CASES[instance]
    wl = zoo.get(net)
    tiles = json.loads((INSTANCES / instance).read_text())["tiles"]
    rows = [(t["layer"], t["compute_cycles"], t["energy_pj"]) for t in tiles]
    count = Counter(name for name, _, _ in rows)
    return load_hardware(hw_name), wl, tile_regions(wl, count), count, rows


def test_conv1_edge_one_tile():
    wl = resnet50()
    c = cost_of(load_hardware("edge"), wl, "conv1", full_region(1, wl.layers["conv1"].out))
    assert c.cycles == 76_832 == 1 * 2 * 28 * 28 * 49
    assert c.mapping == "HxW"
    assert c.macs == 64 * 112 * 112 * 3 * 49
    assert c.energy_pj == pytest.approx(39416159.8962491, rel=ENERGY_REL)


@needs_instances
@pytest.mark.parametrize("instance", sorted(CASES))
def test_one_tile_layers_match_reference_tiles(instance):
    hw, wl, regions, count, rows = reference_tiles(instance)
    assert set(count) == set(wl.layers)  # the instance runs every layer of the zoo net
    for name, cycles, energy in rows:
        if count[name] > 1:
            continue
        c = cost_of(hw, wl, name, regions[name])
        assert c.cycles == cycles, name
        assert c.energy_pj == pytest.approx(energy, rel=ENERGY_REL), name


@needs_instances
def test_resnet_stage_ends_compute_what_the_stride_2_convs_read():
    _, _, regions, _, _ = reference_tiles("resnet50-edge-b1.json")
    assert regions["conv_2_2_res"] == regions["conv_2_2_b"] == Region(0, 1, 0, 55, 0, 55)
    assert regions["conv_2_2_a"] == regions["conv_2_1_res"] == Region(0, 1, 0, 56, 0, 56)
    assert regions["conv_4_5_c"] == Region(0, 1, 0, 13, 0, 13)


@needs_instances
def test_gpt2_token_slices_match_reference_tiles():
    hw, wl, regions, count, rows = reference_tiles("gpt2-small-prefill-edge-b1.json")
    sliced = [(name, cycles, energy) for name, cycles, energy in rows if count[name] > 1]
    assert {name for name, _, _ in sliced} == {"attention_K", "attention_QK",
                                               "attention_QK_elt", "attention_QKV", "GeLU",
                                               "ffn2", "res2"}
    assert regions["attention_QK"] == Region(0, 1, 0, 256, 0, 1)
    assert regions["ffn2"] == Region(0, 1, 0, 128, 0, 1)
    assert regions["attention_K"] == full_region(1, wl.layers["attention_K"].out)
    for name, cycles, energy in sliced:
        c = cost_of(hw, wl, name, regions[name])
        assert c.cycles == cycles, name
        assert c.energy_pj == pytest.approx(energy, rel=ENERGY_REL), name


@pytest.mark.parametrize("name, cycles", [("pool1", 3528), ("conv_2_0_res", 3136),
                                          ("pool5", 196)])
def test_vector_cycles(name, cycles):
    hw, wl = load_hardware("edge"), resnet50()
    c = cost_of(hw, wl, name, full_region(1, wl.layers[name].out))
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
    wl = resnet50()
    c = cost_of(load_hardware("cloud"), wl, "conv_3_0_b",
                full_region(1, wl.layers["conv_3_0_b"].out))
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
