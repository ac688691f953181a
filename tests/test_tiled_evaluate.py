"""SET's cost model on whole RA trees (mipsched.tiled.leaf, mipsched.tiled.evaluate):
ResNet-50 at batch 8 on set-4x4 against the reference run of docs/set-model.md §5
(/work/shared/set-reference/runs.csv, seed 2023)."""

from __future__ import annotations

import pytest

from mipsched.hw.tiled import load_tiled_hardware
from mipsched.tiled.evaluate import evaluate_tree
from mipsched.tiled.partitions import all_partitions, candidate_partitions, part_intv
from mipsched.tiled.ratree import Cut, Leaf, RaTree
from mipsched.workload.resolve import resolve_network

HW = load_tiled_hardware("set-4x4")
WL = resolve_network("resnet50", 8, 1)
NAMES = list(WL.layers)
CACHE: dict = {}


def _evaluate(tree: RaTree):
    ev = evaluate_tree(HW, WL, tree, cache=CACHE)
    assert ev is not None
    return ev


def _t(n: int, *layers: str) -> Cut:
    return Cut("T", tuple(Leaf(x) for x in layers), n)


def _s(n: int, *layers: str) -> Cut:
    return Cut("S", tuple(Leaf(x) for x in layers), n)


def _block(stage: int, i: int, parts: list[str]) -> list[str]:
    return [f"conv_{stage}_{i}_{p}" for p in parts]


# --- building blocks -----------------------------------------------------------------------
def test_partitions_come_in_the_reference_order() -> None:
    parts = all_partitions(16)
    assert parts[:3] == [(2, 2, 2, 2), (2, 2, 1, 4), (2, 2, 4, 1)]
    assert len(parts) == len(set(parts)) == 35
    assert part_intv(10, 4) == [0, 3, 5, 8, 10]
    # fc (K = 1000, 1 x 1) of one sample on 16 cores: only K can be split
    assert candidate_partitions(16, (1000, 1, 1, 1), 1) == [(16, 1, 1, 1)]
    # nothing reaches 75 %: the best utilisation is used (first of the best)
    assert candidate_partitions(16, (3, 1, 3, 3), 1) == [(4, 1, 1, 4)]


# --- (a) the init tree: every layer a segment, batch 8 on all 16 cores (§5.1) -------------
@pytest.fixture(scope="module")
def init_eval():
    return _evaluate(RaTree(Cut("T", tuple(Leaf(n) for n in NAMES), 1), 8))


def test_init_tree_matches_the_reference_run(init_eval) -> None:
    assert init_eval.latency == 20_266_192
    assert init_eval.energy_pj == pytest.approx(33_903_298_437.491180, rel=0, abs=1e-5)
    assert init_eval.record.dram_bytes == 324_259_072
    assert init_eval.record.byte_hops == 1_008_304_624
    assert init_eval.record.max_link_bytes() == 32_949_288


@pytest.mark.parametrize(("layer", "part", "cycles", "dram", "hops", "link", "energy"), [
    ("conv1", "B:8,H:2,W:1,K:1", 478940, 7663040, 21188608, 884800, 1.05908e+09),
    ("pool1", "K:4,B:4,W:1,H:1", 501760, 8028160, 22077440, 652288, 6.20301e+08),
    ("conv_2_0_a", "B:8,W:2,H:1,K:1", 200960, 3215360, 8892416, 303104, 2.79066e+08),
    ("conv_2_0_res", "K:2,B:2,H:2,W:2", 1204224, 19267584, 52985856, 1605632, 1.48471e+09),
    ("conv_3_0_a", "W:16,H:1,B:1,K:1", 333824, 5341184, 15089664, 483328, 4.77891e+08),
    ("conv_3_0_b", "B:8,K:2,W:1,H:1", 109568, 1753088, 7073792, 237568, 3.63907e+08),
    ("conv_5_br", "K:4,W:4,H:1,B:1", 247808, 3964928, 21196800, 708096, 6.47223e+08),
    ("pool5", "K:4,B:4,W:1,H:1", 51200, 819200, 2252800, 75776, 6.33581e+07),
    ("fc", "K:16,W:1,H:1,B:1", 129524, 2072384, 5899760, 194808, 1.73719e+08)])
def test_init_tree_layers_match_the_reference_table(init_eval, layer, part, cycles, dram,
                                                    hops, link, energy) -> None:
    leaf = init_eval.leaves[layer]
    assert leaf.partition_text() == part
    assert (leaf.cycles, leaf.record.dram_bytes, leaf.record.byte_hops,
            leaf.record.max_link_bytes()) == (cycles, dram, hops, link)
    assert leaf.energy_pj == pytest.approx(energy, rel=6e-6)


def test_a_leaf_exposes_its_ofmap_layout(init_eval) -> None:
    """Every ofmap element is on exactly one core: the layout tiles sum to the ofmap."""
    for name in ("conv1", "pool1", "conv_2_0_res", "fc"):
        layout = init_eval.leaves[name].layout
        out = WL.layers[name].out
        assert layout.batch == 8 and len(layout.tiles) == 16
        assert sum(r.volume() for _, r in layout.tiles) == out.c * out.h * out.w * 8


def test_an_s_cut_with_more_children_than_cores_is_rejected() -> None:
    tree = RaTree(Cut("T", (_s(1, *NAMES[:17]), _t(1, *NAMES[17:])), 8), 8)
    assert evaluate_tree(HW, WL, tree, cache=CACHE) is None


def test_init_hand_checks(init_eval) -> None:
    """§5.1's hand checks: conv_2_0_a's energy terms and pool1's ubuf_ext."""
    leaf = init_eval.leaves["conv_2_0_a"]
    assert leaf.record.dram_bytes == 1_605_632 + 4_096 + 1_605_632
    pool1 = init_eval.leaves["pool1"]
    assert pool1.ubuf_ext_pj == pytest.approx(6_422_528 * 1.8722 + 1_605_632 * 1.0537,
                                              rel=1e-12)


# --- (b) the LS and LP trees of §5.2 ----------------------------------------------------------
def ls_tree() -> RaTree:
    """Root T 8/8 over 7 segments T 1/1 in layer order, except that conv_5_br sits right
    after conv_4_5_res, as in the reference's printed LS tree (§5.2 does not say; in
    layer order segment 6 takes 132,704 cycles instead of 130,208)."""
    starts = ["conv1", "conv_2_br", "conv_3_br", "conv_4_br", "conv_4_1_b", "conv_4_5_c",
              "conv_5_1_c"]
    idx = [NAMES.index(s) for s in starts] + [len(NAMES)]
    segs = [NAMES[idx[i]:idx[i + 1]] for i in range(7)]
    seg6 = [n for n in segs[5] if n != "conv_5_br"]
    segs[5] = seg6[:2] + ["conv_5_br"] + seg6[2:]
    return RaTree(Cut("T", tuple(_t(1, *s) for s in segs), 8), 8)


def test_ls_tree_matches_the_reference_run() -> None:
    ev = _evaluate(ls_tree())
    assert ev.latency == 9_470_792
    assert ev.energy_pj == pytest.approx(21_061_725_256.004799, rel=0, abs=1e-5)
    assert _totals(ev) == (138_506_008, 545_948_120, 17_614_344)
    table = [(89_896, 1_183_227, 3_522_303, 146_131, 2.05013e+08),
             (374_832, 5_469_184, 16_015_616, 542_336, 6.25742e+08),
             (300_352, 4_218_880, 15_702_784, 466_048, 6.20594e+08),
             (46_464, 743_424, 3_213_312, 107_200, 1.25655e+08),
             (162_544, 2_343_936, 13_729_024, 496_992, 5.00900e+08),
             (130_208, 2_083_328, 10_416_512, 346_896, 3.57070e+08),
             (79_553, 1_271_272, 5_643_964, 170_400, 1.97741e+08)]
    for seg, (cycles, dram, hops, link, energy) in zip(ev.segments, table, strict=True):
        assert (seg.cycles, seg.dram_bytes, seg.byte_hops, seg.max_link_bytes) == (
            cycles, dram, hops, link)
        assert seg.energy_pj == pytest.approx(energy, rel=6e-6)
    seg1 = [ev.leaves[n].cycles for n in ("conv1", "pool1", "conv_2_0_a", "conv_2_0_b",
                                          "conv_2_0_c")]
    assert seg1 == [19_208, 12_544, 784, 7_056, 50_304]


def lp_tree() -> RaTree:
    """Root T 8/1 over §5.2's 24 LP segments; the segment "conv_4_5_b .. conv_5_0_b"
    is (4_5_b, 4_5_c, 4_5_res, 5_0_a, 5_br, 5_0_b), as in the reference's printed LP
    tree (with 5_br before 5_0_a: the same cycles but 24,129,138,114.89 pJ)."""
    segs = [_s(8, "conv1", "pool1", "conv_2_br", "conv_2_0_a"), Leaf("conv_2_0_b"),
            _s(8, "conv_2_0_c", "conv_2_0_res"), _s(4, "conv_2_1_a", "conv_2_1_b"),
            _s(8, "conv_2_1_c", "conv_2_1_res"), _s(8, "conv_2_2_a", "conv_2_2_b"),
            _s(8, "conv_2_2_c", "conv_2_2_res", "conv_3_0_a"), Leaf("conv_3_br"),
            Leaf("conv_3_0_b"), _s(8, "conv_3_0_c", "conv_3_0_res", "conv_3_1_a"),
            Leaf("conv_3_1_b"), _s(8, "conv_3_1_c", "conv_3_1_res", "conv_3_2_a"),
            Leaf("conv_3_2_b"), _s(8, "conv_3_2_c", "conv_3_2_res", "conv_3_3_a"),
            _s(4, "conv_3_3_b", "conv_3_3_c"), _s(8, "conv_3_3_res", "conv_4_0_a", "conv_4_br"),
            _s(8, *_block(4, 0, ["b", "c", "res"]) + _block(4, 1, ["a", "b", "c", "res"])),
            _s(8, *_block(4, 2, ["a", "b", "c", "res"]) + _block(4, 3, ["a", "b"])),
            _s(8, *_block(4, 3, ["c", "res"]) + _block(4, 4, ["a", "b", "c", "res"])
               + ["conv_4_5_a"]),
            _s(8, *_block(4, 5, ["b", "c", "res"]) + ["conv_5_0_a", "conv_5_br", "conv_5_0_b"]),
            _s(4, "conv_5_0_c", "conv_5_0_res", "conv_5_1_a"),
            _s(4, *_block(5, 1, ["b", "c", "res"]) + ["conv_5_2_a"]),
            _s(4, "conv_5_2_b", "conv_5_2_c", "conv_5_2_res", "pool5"), Leaf("fc")]
    return RaTree(Cut("T", tuple(segs), 1), 8)


def test_lp_tree_matches_the_reference_run() -> None:
    ev = _evaluate(lp_tree())
    assert ev.latency == 11_016_352
    assert ev.energy_pj == pytest.approx(24_116_442_153.294003, rel=0, abs=1e-5)
    assert _totals(ev) == (175_455_744, 795_626_224, 28_912_220)
    by_first = {seg.layers[0]: seg for seg in ev.segments}
    # §3.10: the two pipeline-bound segments, and a DRAM-bound one
    assert by_first["conv_2_2_c"].cycles == 1_003_520
    assert -(-by_first["conv_2_2_c"].dram_bytes // 16) == 956_416
    assert by_first["conv_5_2_b"].cycles == 280_000
    assert by_first["conv_2_0_b"].cycles == -(-by_first["conv_2_0_b"].dram_bytes // 16)
    # §3.3: (conv_2_0_c, conv_2_0_res) get 11 + 5 cores, printed W:11 and H:5
    assert ev.leaves["conv_2_0_c"].partition == (1, 1, 1, 11)
    assert ev.leaves["conv_2_0_res"].partition == (1, 1, 5, 1)


# --- (c) SET (§5.2) -----------------------------------------------------------------------
SET_SEGMENT_1 = Cut("T", (
    Leaf("conv1"), Leaf("pool1"),
    Cut("S", (Leaf("conv_2_br"), _t(1, "conv_2_0_a", "conv_2_0_b", "conv_2_0_c")), 1),
    Leaf("conv_2_0_res"), Leaf("conv_2_1_a")), 1)


def test_set_first_segment_matches_the_worked_example() -> None:
    rest = NAMES[NAMES.index("conv_2_1_b"):]
    ev = _evaluate(RaTree(Cut("T", (SET_SEGMENT_1, _t(1, *rest)), 8), 8))
    assert ev.segments[0].cycles == 98_996
    times = {n: ev.leaves[n].cycles for n in ("conv1", "pool1", "conv_2_br", "conv_2_0_a",
                                              "conv_2_0_b", "conv_2_0_c", "conv_2_0_res",
                                              "conv_2_1_a")}
    assert times == {"conv1": 19_208, "pool1": 1_764, "conv_2_br": 12_544,
                     "conv_2_0_a": 1_120, "conv_2_0_b": 9_576, "conv_2_0_c": 4_480,
                     "conv_2_0_res": 50_176, "conv_2_1_a": 12_672}
    assert ev.leaves["conv_2_br"].cores == 4 and ev.leaves["conv_2_0_b"].cores == 12
    assert ev.leaves["conv_2_0_b"].partition[2:] == (3, 4)
    assert ev.leaves["conv_2_br"].partition[2:] == (2, 2)
    assert ev.leaves["conv_2_0_res"].record.dram_bytes == 802_816


#: The SET search's best tree (seed 2023), as the reference prints it
#: (`resnet_b8_SET_tree.txt` of a rebuild of commit a7bd739 with the seed fixed to 2023;
#: one tab per level, "T b/n" or "S b/n" for a cut, "layer b" for a leaf).
SET_TREE = """\
T 8/8
	T 1/1
		conv1 1
		pool1 1
		S 1/1
			conv_2_br 1
			T 1/1
				conv_2_0_a 1
				conv_2_0_b 1
				conv_2_0_c 1
		conv_2_0_res 1
		conv_2_1_a 1
	T 1/1
		conv_2_1_b 1
		conv_2_1_c 1
		S 1/1
			conv_2_1_res 1
			T 1/1
				conv_2_2_a 1
				conv_2_2_b 1
				conv_2_2_c 1
		conv_2_2_res 1
		S 1/1
			conv_3_br 1
			T 1/1
				conv_3_0_a 1
				conv_3_0_b 1
				conv_3_0_c 1
		S 1/1
			conv_3_0_res 1
			T 1/1
				conv_3_1_a 1
				conv_3_1_b 1
		S 1/1
			T 1/1
				conv_3_1_c 1
				conv_3_1_res 1
			T 1/1
				conv_3_2_a 1
				conv_3_2_b 1
				conv_3_2_c 1
		S 1/1
			conv_3_2_res 1
			T 1/1
				conv_3_3_a 1
				conv_3_3_b 1
		S 1/1
			conv_3_3_c 1
			T 1/1
				conv_3_3_res 1
				conv_4_0_a 1
				conv_4_0_b 1
		S 1/1
			conv_4_0_c 1
			conv_4_br 1
		conv_4_0_res 1
		conv_4_1_a 1
	T 1/1
		conv_4_1_b 1
		conv_4_1_c 1
		conv_4_1_res 1
		conv_4_2_a 1
		conv_4_2_b 1
		conv_4_2_c 1
		S 1/1
			conv_4_2_res 1
			T 1/1
				conv_4_3_a 1
				conv_4_3_b 1
				conv_4_3_c 1
		conv_4_3_res 1
		conv_4_4_a 1
		conv_4_4_b 1
		conv_4_4_c 1
		conv_4_4_res 1
		conv_4_5_a 1
		conv_4_5_b 1
		conv_4_5_c 1
		conv_4_5_res 1
		S 1/1
			conv_5_br 1
			T 1/1
				conv_5_0_a 1
				conv_5_0_b 1
				conv_5_0_c 1
		conv_5_0_res 1
		conv_5_1_a 1
		conv_5_1_b 1
		conv_5_1_c 1
		conv_5_1_res 1
		conv_5_2_a 1
		conv_5_2_b 1
		conv_5_2_c 1
		conv_5_2_res 1
		pool5 1
		fc 1
"""


def parse_printed_tree(text: str) -> RaTree:
    """An RA tree from the reference's printed form."""
    lines = [(len(ln) - len(ln.lstrip("\t")), ln.strip().split()) for ln in text.splitlines()]

    def build(i: int) -> tuple:
        depth, (head, num) = lines[i]
        if head not in ("S", "T"):
            return Leaf(head), i + 1
        children, j = [], i + 1
        while j < len(lines) and lines[j][0] > depth:
            child, j = build(j)
            children.append(child)
        _, n = num.split("/")
        return Cut(head, tuple(children), int(n)), j

    root, _ = build(0)
    return RaTree(root, int(lines[0][1][1].split("/")[0]))


def test_set_tree_matches_the_reference_run() -> None:
    tree = parse_printed_tree(SET_TREE)
    assert tree.root.children[0] == SET_SEGMENT_1
    ev = _evaluate(tree)
    assert [seg.cycles for seg in ev.segments] == [98_996, 278_512, 300_881]
    assert ev.latency == 5_427_112
    assert ev.energy_pj == pytest.approx(16_220_303_347.951199, rel=0, abs=1e-5)
    assert _totals(ev) == (59_971_352, 541_341_872, 22_951_832)


def _totals(ev) -> tuple[int, int, int]:
    """§5.1's root record: DRAM bytes, byte-hops, busiest link."""
    return ev.record.dram_bytes, ev.record.byte_hops, ev.record.max_link_bytes()


# --- buffer model (§3.12) -------------------------------------------------------------------
def test_leaf_buffer_maps_match_the_reference_scheme() -> None:
    """SET segment 1's conv1 (H:4,W:4, batch 1): the reference prints ifm max 11,163
    and weights 9,408 per core (its buf max 21,403 = ifm + 10 KB)."""
    rest = NAMES[NAMES.index("conv_2_1_b"):]
    ev = _evaluate(RaTree(Cut("T", (SET_SEGMENT_1, _t(1, *rest)), 8), 8))
    conv1 = ev.leaves["conv1"]
    assert max(n for _, n in conv1.ifm_bytes) == 11_163
    assert {n for _, n in conv1.wgt_bytes} == {9_408}
    res = ev.leaves["conv_2_0_res"]
    assert {n for _, n in res.ifm_bytes} == {100_352} and res.wgt_bytes == ()


def test_a_segment_whose_prefetch_overflows_the_buffer_is_rejected() -> None:
    """T 8/1 segment (conv_2_0_res, conv_2_1_a) at batch 8 on 16 cores: while
    conv_2_0_res runs (802,816 ifmap bytes + 10 KB per core), conv_2_1_a's ifmap
    (401,408) and weights (16,384) are prefetched: 1,230,848 > 1 MB per core."""
    a, b = NAMES.index("conv_2_0_res"), NAMES.index("conv_2_1_a")
    segs = [Leaf(n) for n in NAMES[:a]] + [_t(1, NAMES[a], NAMES[b])]
    segs += [Leaf(n) for n in NAMES[b + 1:]]
    assert evaluate_tree(HW, WL, RaTree(Cut("T", tuple(segs), 1), 8), cache=CACHE) is None
    split = [Leaf(n) for n in NAMES[:a]] + [_t(1, *NAMES[a - 1:a + 1])]
    split += [Leaf(n) for n in NAMES[b:]]
    del split[a - 1]
    assert evaluate_tree(HW, WL, RaTree(Cut("T", tuple(split), 1), 8), cache=CACHE)
