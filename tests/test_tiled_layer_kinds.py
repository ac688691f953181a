"""SET's leaf model for the layer kinds beyond ResNet (mipsched.tiled.leaf_kinds,
docs/set-model.md §3.13): GroupConv with fmap weights (MATMUL_ACT), PTP (softmax, GELU,
copying concat), Transpose, grouped / depthwise conv, global pool; and the reference's
GoogLeNet, Inception-ResNet-v1 and Transformer as zoo networks.

Machine constants used by the hand checks (set-4x4, docs/set-model.md §1): global buffer
1.0537 pJ per byte read, 1.8722 pJ per byte written; DRAM 16 bytes/cycle, 60 pJ/byte,
8 ports at (0, y) and (3, y); NoC 5.6 pJ per byte-hop; vector unit 64 ops/cycle,
0.0873 pJ/op. A transfer of n bytes (n a multiple of 8) between DRAM and the core at
(0, 0) is n / 8 bytes per port over 0+1+2+3 + 3+4+5+6 = 24 hops: 3 n byte-hops.
"""

from __future__ import annotations

import pytest

from mipsched.cost.core_array import ConvShape, map_conv
from mipsched.hw.tiled import load_tiled_hardware
from mipsched.tiled import leaf
from mipsched.tiled.evaluate import evaluate_tree
from mipsched.tiled.leaf import Layout, Source, search_leaf
from mipsched.tiled.leaf_kinds import group_tile, ifm_range, layer_view
from mipsched.tiled.noc import FmapRange
from mipsched.tiled.ratree import Cut, Leaf, RaTree
from mipsched.tiled.search import init_tree
from mipsched.workload.graph import NetBuilder, Workload
from mipsched.workload.layer import Op
from mipsched.workload.zoo import get

HW = load_tiled_hardware("set-4x4")
CORE = HW.core()
R, W, HOP, DRAM = 1.0537, 1.8722, 5.6, 60.0
ORIGIN = [(0, 0)]


def _full(c: int, b: int, h: int, w: int = 1) -> FmapRange:
    return FmapRange((0, c), (0, b), (0, h), (0, w))


def _attention_net(weights_from_layer: bool) -> Workload:
    """q (16, 8) x weights (16, 8) per head, 2 heads: the reference's GroupConv C = K =
    16, G = 2, C and K per group 8, H = 8, W = 1."""
    b = NetBuilder("qk", 4)
    q = b.input("q", 16, 8)
    kw = b.input("kw", 16, 8)
    if weights_from_layer:
        kw = b.unary("kw_layer", kw, Op.GELU)
    b.matmul_act("qk", q, kw, 2, transpose_rhs=False)
    return b.build()


# --- GroupConv with fmap weights (MATMUL_ACT) ---------------------------------------------
def test_fmap_weights_from_dram_are_not_amortised() -> None:
    """Batch 2 of 4 on one core. Ifmap q 16 x 2 x 8 = 256 B and weights (K 16 x B 2 x
    plane 8; the batch is kept, `ofm_to_wgt` with wgtPrevs) 256 B, both read from DRAM,
    the weights not divided by tot_batch / B = 2; ofmap 256 B written: DRAM 768 B,
    3 x 768 = 2,304 byte-hops, time ceil(768 / 16) = 48. ubuf_ext = 256 x 1.0537 +
    (256 + 256) x 1.8722. Tile: nGroup = ceil(16 / 8) = 2 groups of C 8 x K 8 over
    8 x 1 positions, times B' = 2 folded into the groups (4 groups, B = 1)."""
    wl = _attention_net(False)
    res = search_leaf(HW, wl, "qk", 2, 4, ORIGIN, [Source(16), Source(16)], True, False)
    assert res is not None
    assert res.record.dram_bytes == 768 and res.record.byte_hops == 2304
    assert res.ubuf_ext_pj == pytest.approx(256 * R + 512 * W)
    tile = map_conv(CORE, ConvShape(8, 8, 1, 1, 8, 1, 1, groups=4))
    assert (res.tile_cycles, res.tile_energy_pj) == (tile.cycles, tile.energy_pj)
    assert res.cycles == 48
    assert res.energy_pj == pytest.approx(tile.energy_pj + res.ubuf_ext_pj + 2304 * HOP
                                          + 768 * DRAM)
    assert res.ifm_bytes == (((0, 0), 256), ((0, 0), 256)) and res.wgt_bytes == ()


def test_fmap_weights_from_a_direct_producer_move_on_chip() -> None:
    """The weights' producer holds its whole ofmap on (1, 0): 256 B move one hop; DRAM
    is q (256 B) and the ofmap (256 B): 512 B, 3 x 512 + 256 = 1,792 byte-hops,
    time ceil(512 / 16) = 32."""
    wl = _attention_net(True)
    held = Layout(2, (((1, 0), _full(16, 2, 8)),))
    res = search_leaf(HW, wl, "qk", 2, 4, ORIGIN, [Source(16), Source(16, True, held)],
                      True, False)
    assert res is not None
    assert res.record.dram_bytes == 512 and res.record.byte_hops == 1792
    assert res.cycles == 32


def test_fmap_weight_ranges_and_groups() -> None:
    """Weights: one range per (K, B) slice, multicast to its H x W cores (`setBcast(H x
    W, 1)`), counted once per receiving core in ubuf_ext. Ifmap of a K slice: the
    channels of the groups it touches."""
    v = layer_view(_attention_net(False), "qk")
    t = leaf._tiling(v, 2, (1, 1, 2, 1))
    assert t.fwgt == [(_full(16, 2, 8), (0, 1))] and t.wgt == []
    assert t.wgt_total == 2 * 256 and t.wgt_max == 256
    t = leaf._tiling(v, 2, (2, 1, 1, 1))
    assert [r.c for r, _ in t.fwgt] == [(0, 8), (8, 16)]
    assert [g for _, g in t.fwgt] == [(0,), (1,)]
    assert [r.c for r, _ in t.ifm] == [(0, 8), (8, 16)]
    assert group_tile(v, (8, 2, 8, 1)) == ConvShape(8, 8, 1, 1, 8, 1, 1, groups=2)


# --- PTP: concat of several inputs, softmax ---------------------------------------------
def _concat_net() -> Workload:
    b = NetBuilder("cat", 1)
    parts = [b.unary(f"{n}2", b.input(n, 8, 4), Op.GELU) for n in ("a", "b")]
    b.concat("cat", parts, copy=True)
    return b.build()


@pytest.mark.parametrize(("wrap", "hops"), [(True, 32), (False, 64)])
def test_concat_reads_its_inputs_by_channel_offset(monkeypatch, wrap: bool,
                                                   hops: int) -> None:
    """Two direct inputs of 8 x 4 x 1 = 32 B on (1, 0) and (0, 1), one hop each, into a
    16-channel range on (0, 0). The reference shifts the range by the second input's
    offset 8 in unsigned arithmetic: it starts below 8, wraps, and that input sends
    nothing (32 byte-hops); counted in full, 64. Tile: 16 x 4 = 64 vector ops, 1 cycle,
    64 x 0.0873 pJ; ubuf_ext 64 x 1.0537 + 64 x 1.8722."""
    monkeypatch.setattr(leaf, "WRAP_CHANNEL_OFFSET", wrap)
    wl = _concat_net()
    srcs = [Source(8, True, Layout(1, ((tile, _full(8, 1, 4)),))) for tile in ((1, 0), (0, 1))]
    res = search_leaf(HW, wl, "cat", 1, 1, ORIGIN, srcs, False, False)
    assert res is not None
    assert res.record.byte_hops == hops and res.record.dram_bytes == 0
    assert (res.tile_cycles, res.cycles) == (1, 1)
    assert res.tile_energy_pj == pytest.approx(64 * 0.0873)
    assert res.ubuf_ext_pj == pytest.approx(64 * R + 64 * W)


def test_a_range_starting_at_the_offset_gets_its_input() -> None:
    """Split over K, the second core's range starts at channel 8: the second input fills
    it (32 B), the first input fills the first range."""
    wl = _concat_net()
    v = layer_view(wl, "cat")
    srcs = [Source(8, True, Layout(1, ((tile, _full(8, 1, 4)),))) for tile in ((1, 0), (0, 1))]
    tr = leaf._traffic(v, leaf._tiling(v, 1, (2, 1, 1, 1)), 1, srcs, [], False, 1)
    assert tr.moves == [(32, (1, 0), (0,)), (32, (0, 1), (1,))]


def test_softmax_from_dram() -> None:
    """Softmax over 64 x 16: 1,024 vector ops = 16 cycles; ifmap and ofmap through DRAM
    (2,048 B, 128 cycles, 6,144 byte-hops)."""
    b = NetBuilder("sm", 1)
    b.unary("sm", b.input("x", 64, 16), Op.SOFTMAX)
    res = search_leaf(HW, b.build(), "sm", 1, 1, ORIGIN, [Source(64)], True, False)
    assert res is not None
    assert (res.tile_cycles, res.cycles) == (16, 128)
    assert res.record.byte_hops == 6144
    assert res.energy_pj == pytest.approx(1024 * 0.0873 + 1024 * (R + W) + 6144 * HOP
                                          + 2048 * DRAM)


# --- Transpose ------------------------------------------------------------------------------
def test_transpose_reads_the_permuted_range() -> None:
    """(8, 4, 1) -> (4, 8, 1): the producer's two channel halves (16 B each) on (1, 0)
    and (0, 1) both feed the single range, one hop each; an ofmap range (c 0-2, h 4-8)
    needs input channels 4-8, rows 0-2."""
    b = NetBuilder("tr", 1)
    x = b.unary("x2", b.input("x", 8, 4), Op.GELU)
    b.transpose("t", x, (1, 0, 2))
    wl = b.build()
    v = layer_view(wl, "t")
    got = ifm_range(v, FmapRange((0, 2), (0, 1), (4, 8), (0, 1)))
    assert got == FmapRange((4, 8), (0, 1), (0, 2), (0, 1))
    held = Layout(1, (((1, 0), FmapRange((0, 4), (0, 1), (0, 4), (0, 1))),
                      ((0, 1), FmapRange((4, 8), (0, 1), (0, 4), (0, 1)))))
    res = search_leaf(HW, wl, "t", 1, 1, ORIGIN, [Source(8, True, held)], False, False)
    assert res is not None
    assert res.record.byte_hops == 32 and res.cycles == 1


# --- grouped / depthwise conv, global pool ----------------------------------------------------
def test_grouped_conv_ranges_and_tile() -> None:
    """1x1 conv 8 -> 8 in 2 groups over 4 x 4: a K slice of 4 reads its group's 4
    channels (64 B); its DRAM weights are 4 x 4 = 16 B. Unsplit over K, the 32 B of
    weights go to both H cores; the ceiling tile (K' 8, H' 2) is nGroup 2 of C 4 x K 4."""
    b = NetBuilder("gc", 1)
    b.conv("g", b.input("x", 8, 4, 4), 8, 1, groups=2)
    v = layer_view(b.build(), "g")
    assert v.kind == "gconv" and (v.gc, v.gk, v.weights_per_k) == (4, 4, 4)
    t = leaf._tiling(v, 1, (2, 1, 1, 1))
    assert [(r.c, r.volume()) for r, _ in t.ifm] == [((0, 4), 64), ((4, 8), 64)]
    assert t.wgt == [(16, (0,)), (16, (1,))]
    t = leaf._tiling(v, 1, (1, 1, 2, 1))
    assert t.wgt == [(32, (0, 1))] and t.wgt_total == 64
    assert group_tile(v, (8, 1, 2, 4)) == ConvShape(4, 4, 1, 1, 2, 4, 1, groups=2)


def test_depthwise_conv_and_global_pool_views() -> None:
    b = NetBuilder("dw", 1)
    x = b.depthwise("dw", b.input("x", 8, 6, 6), 3)
    b.global_pool("gp", x)
    wl = b.build()
    v = layer_view(wl, "dw")
    assert group_tile(v, (8, 1, 6, 6)) == ConvShape(1, 1, 3, 3, 6, 6, 1, groups=8)
    gp = layer_view(wl, "gp")
    assert (gp.kind, gp.window, gp.kernel) == ("pool", 36, (6, 6))


def test_unmodelled_kinds_are_rejected() -> None:
    b = NetBuilder("bad", 1)
    q, k = b.input("q", 16, 8), b.input("k", 16, 8)
    b.matmul_act("qkt", q, k, 2, transpose_rhs=True)
    with pytest.raises(ValueError, match="transpose_rhs"):
        layer_view(b.build(), "qkt")


# --- zoo networks vs the reference's definitions ----------------------------------------
# Counted from the reference's src/nns: 23 layers per attention, 27 per encoder, 51 per
# decoder; MACs = C K R S H W (GroupConv: / G) summed over Conv, FC and GroupConv layers.
REFERENCE_NETS = [("transformer", 471, 27_642_560_512),
                  ("transformer_cell", 81, 4_825_546_752),
                  ("googlenet", 72, 1_582_671_872),
                  ("inception_resnet_v1", 153, 6_209_572_960)]


@pytest.mark.parametrize(("name", "layers", "macs"), REFERENCE_NETS)
def test_zoo_nets_match_the_reference_definitions(name: str, layers: int, macs: int) -> None:
    wl = get(name, 1)
    assert (len(wl.layers), wl.total_macs) == (layers, macs)


def test_transformer_layers_match_the_reference() -> None:
    """Per layer: MACs (Conv, GroupConv) or vector ops (PTP, Transpose, Eltwise)."""
    wl = get("transformer", 1)
    macs = {"encoder1_Q": 134_217_728, "encoder1_K0": 16_777_216,
            "encoder1_QK": 134_217_728, "decoder6_2_QKV": 134_217_728,
            "encoder3_feedfwd1": 536_870_912, "proj": 262_144_000}
    vec = {"word_embed_enc": 262_144, "encoder1_Kt0": 32_768, "encoder1_K": 262_144,
           "encoder1_QK_elt": 2_097_152, "decoder2_elt3": 524_288}
    assert {n: wl.macs(n) for n in macs} == macs
    assert {n: wl.vector_ops(n) for n in vec} == vec
    names = list(wl.layers)
    assert names[:4] == ["word_embed_enc", "encoder1_Q", "encoder1_K0", "encoder1_Kt0"]
    assert names[names.index("encoder6_elt2") + 1] == "word_embed_dec"
    assert wl.layers["decoder1_2_K3"].inputs == ("encoder6_elt2",)
    assert wl.layers["decoder1_2_Q"].inputs == ("decoder1_elt1",)
    assert wl.shape_of("encoder1_K") == (4096, 64, 1)


# --- whole trees against reference runs (trans_cell, batch 1, set-4x4, stride 2) -------------
CELL = get("transformer_cell", 1)


def test_transformer_cell_init_tree_matches_the_reference() -> None:
    """The reference's init: E 6.46302e9 pJ, D 3,881,472 cycles; its QK leaf (K:8,H:2)
    163,840 cycles, 7,667,712 hops, 2,621,440 DRAM words, E 2.4367e8."""
    tree, ev = init_tree(HW, CELL)
    assert ev.latency == 3_881_472
    assert ev.energy_pj == pytest.approx(6.46302e9, rel=1e-5)
    qk = ev.leaves["encoder_QK"]
    assert qk.partition_text() == "K:8,H:2,W:1,B:1"
    assert (qk.cycles, qk.record.byte_hops, qk.record.dram_bytes) == (163_840, 7_667_712,
                                                                     2_621_440)
    assert qk.energy_pj == pytest.approx(2.4367e8, rel=1e-5)
    kcat = ev.leaves["encoder_K"]
    assert (kcat.cycles, kcat.record.byte_hops, kcat.record.dram_bytes) == (32_768, 1_441_792,
                                                                           524_288)


def _cell_set_tree() -> RaTree:
    """The reference's SET tree for trans_cell batch 1 (seed 1, 1 round per layer): two
    attention matmuls read their weights on chip, four K concats read inputs on chip."""
    e, d1, d2 = "encoder_", "decoder_1_", "decoder_2_"

    def ks(p: str, i: int, j: int) -> list[str]:
        return [f"{p}{x}{n}" for n in range(i, j) for x in ("K", "Kt")]

    def t(*xs):
        return Cut("T", tuple(Leaf(x) if isinstance(x, str) else x for x in xs), 1)

    def s(*xs):
        return Cut("S", tuple(Leaf(x) if isinstance(x, str) else x for x in xs), 1)

    root = t("word_embed_enc", e + "Q", t(*ks(e, 0, 3)), e + "K3",
             t(e + "Kt3", e + "K4", e + "Kt4", s(*ks(e, 5, 7)), e + "K7",
               s(e + "Kt7", e + "K", e + "V"), e + "QK", e + "QK_elt", e + "QKV",
               e + "FC", e + "elt1", e + "feedfwd1",
               s(e + "feedfwd2", e + "elt2", "word_embed_dec", d1 + "Q", d1 + "K0"),
               d1 + "Kt0", d1 + "K1"),
             d1 + "K2", d1 + "Kt1", d1 + "Kt2", d1 + "K3", d1 + "K4",
             s(d1 + "Kt3", d1 + "Kt4", d1 + "K5", d1 + "K6", d1 + "Kt5", d1 + "K7",
               d1 + "Kt6"),
             t(d1 + "Kt7", d1 + "K", s(d1 + "V", d1 + "QK"), d1 + "QK_elt", d1 + "QKV",
               d1 + "FC", s("decoder_elt1", d2 + "K0"), d2 + "Q", d2 + "Kt0", *ks(d2, 1, 2),
               d2 + "K2", s(d2 + "Kt2", *ks(d2, 3, 6), d2 + "K6"), d2 + "Kt6",
               s(*ks(d2, 7, 8), d2 + "K", d2 + "V")),
             t(d2 + "QK", d2 + "QK_elt", d2 + "QKV", d2 + "FC", "decoder_elt2",
               "decoder_feedfwd1", "decoder_feedfwd2"),
             "decoder_elt3", "proj")
    return RaTree(root, 1)


def test_transformer_cell_set_tree_matches_the_reference() -> None:
    """The reference prints E 3.71704e9, D 1,585,664, NoC 131,829,248 hops, 25,337,856
    DRAM words, busiest link 4,224,448."""
    ev = evaluate_tree(HW, CELL, _cell_set_tree())
    assert ev is not None
    assert ev.latency == 1_585_664
    assert ev.energy_pj == pytest.approx(3.71704e9, rel=1e-5)
    assert (ev.record.byte_hops, ev.record.dram_bytes, ev.record.max_link_bytes()) == (
        131_829_248, 25_337_856, 4_224_448)


@pytest.mark.parametrize("name", ["googlenet", "inception_resnet_v1", "transformer"])
def test_init_trees_evaluate(name: str) -> None:
    tree, ev = init_tree(HW, get(name, 1))
    assert ev.latency > 0 and len(ev.leaves) == len(tree.root.children)
