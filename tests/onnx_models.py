"""Small ONNX models built with onnx.helper, for the importer and fuzz tests, and small IR
networks that use every construct of the IR, for the round-trip tests.

Weights are stored one of three ways: `data` (real zeros), `external` (a reference to a
weights file that does not exist) or `stripped` (dims only, no data at all)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from mipsched.workload.graph import NetBuilder, Workload
from mipsched.workload.layer import Op

OPSET = 20


def weight(name: str, dims: list[int], storage: str = "data") -> TensorProto:
    if storage == "data":
        return numpy_helper.from_array(np.zeros(dims, np.float32), name)
    t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=dims)
    if storage == "external":
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", "missing_weights.bin"), ("offset", "0"),
                           ("length", str(4 * int(np.prod(dims))))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
    return t


def ints(name: str, values: list[int]) -> TensorProto:
    return helper.make_tensor(name, TensorProto.INT64, [len(values)], values)


def scalar(name: str, value: float) -> TensorProto:
    return helper.make_tensor(name, TensorProto.FLOAT, [], [value])


def model(nodes: list, inputs: list, outputs: list, inits: list,
          domains: tuple[str, ...] = ()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "test", inputs, outputs, initializer=inits)
    opsets = [helper.make_opsetid("", OPSET), *(helper.make_opsetid(d, 1) for d in domains)]
    return helper.make_model(graph, opset_imports=opsets)


def tensor(name: str, dims: list | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def conv_chain(storage: str = "data") -> onnx.ModelProto:
    """x[N,3,32,32] -> conv1 3x3 (16, pads 1) + BN + Relu -> dw 3x3 depthwise (16) + Clip
    -> conv2 3x3 stride 2 (32, TF-style pads 0,0,1,1) -> MaxPool 2x2 -> GlobalAveragePool
    -> Flatten -> Gemm (10) -> Softmax."""
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1],
                         kernel_shape=[3, 3]),
        helper.make_node("BatchNormalization", ["c1", "bn_s", "bn_b", "bn_m", "bn_v"],
                         ["b1"], name="bn1"),
        helper.make_node("Relu", ["b1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "wd"], ["d1"], name="dw", group=16,
                         pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["d1"], ["r2"], name="relu6"),
        helper.make_node("Conv", ["r2", "w2"], ["c2"], name="conv2", strides=[2, 2],
                         pads=[0, 0, 1, 1]),
        helper.make_node("MaxPool", ["c2"], ["p"], name="pool", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten", axis=1),
        helper.make_node("Gemm", ["f", "wfc", "bfc"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
    ]
    inits = [weight("w1", [16, 3, 3, 3], storage), weight("wd", [16, 1, 3, 3], storage),
             weight("w2", [32, 16, 3, 3], storage), weight("wfc", [10, 32], storage),
             weight("bfc", [10], storage),
             *(weight(n, [16], storage) for n in ("bn_s", "bn_b", "bn_m", "bn_v"))]
    return model(nodes, [tensor("x", ["N", 3, 32, 32])], [tensor("probs", ["N", 10])], inits)


def residual_block() -> onnx.ModelProto:
    """ResNet bottleneck on x[N,64,56,56]: 1x1 (64) -> 3x3 (64) -> 1x1 (256), a 1x1 (256)
    projection shortcut, Add, Relu."""
    nodes = [
        helper.make_node("Conv", ["x", "wa"], ["a"], name="conv_a"),
        helper.make_node("Relu", ["a"], ["ra"]),
        helper.make_node("Conv", ["ra", "wb"], ["b"], name="conv_b", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["b"], ["rb"]),
        helper.make_node("Conv", ["rb", "wc"], ["c"], name="conv_c"),
        helper.make_node("Conv", ["x", "ws"], ["s"], name="shortcut"),
        helper.make_node("Add", ["c", "s"], ["sum"], name="add"),
        helper.make_node("Relu", ["sum"], ["y"]),
    ]
    inits = [weight("wa", [64, 64, 1, 1]), weight("wb", [64, 64, 3, 3]),
             weight("wc", [256, 64, 1, 1]), weight("ws", [256, 64, 1, 1])]
    return model(nodes, [tensor("x", [1, 64, 56, 56])], [tensor("y", None)], inits)


def attention_head(tokens: int = 16, d: int = 64, heads: int = 4) -> onnx.ModelProto:
    """Pre-LN multi-head self-attention as PyTorch exports it, on x[N, tokens, d]:
    LayerNorm -> Q, K, V MatMuls -> reshape to heads -> Q.K^T / sqrt(dh) -> Softmax ->
    .V -> merge heads -> output projection -> residual Add."""
    dh = d // heads
    nodes = [helper.make_node("LayerNormalization", ["x", "ln_s", "ln_b"], ["h"], name="ln",
                              axis=-1)]
    for p in "qkv":
        nodes.append(helper.make_node("MatMul", ["h", f"w{p}"], [p], name=p))
        nodes.append(helper.make_node("Reshape", [p, "split"], [f"{p}4"]))
    nodes += [
        helper.make_node("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
        helper.make_node("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3]),
        helper.make_node("MatMul", ["qh", "kt"], ["s"], name="qk"),
        helper.make_node("Div", ["s", "scale"], ["ss"]),
        helper.make_node("Softmax", ["ss"], ["p"], name="softmax", axis=-1),
        helper.make_node("MatMul", ["p", "vh"], ["ctx"], name="pv"),
        helper.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ctx_t", "merge"], ["ctx_m"]),
        helper.make_node("MatMul", ["ctx_m", "wo"], ["o"], name="proj"),
        helper.make_node("Add", ["x", "o"], ["y"], name="residual"),
    ]
    inits = [weight("ln_s", [d]), weight("ln_b", [d]), ints("split", [-1, tokens, heads, dh]),
             ints("merge", [-1, tokens, d]), scalar("scale", dh ** 0.5),
             *(weight(f"w{p}", [d, d]) for p in "qkvo")]
    return model(nodes, [tensor("x", ["batch", tokens, d])], [tensor("y", None)], inits)


def custom_op(two_inputs: bool = False) -> onnx.ModelProto:
    """conv (8) -> com.example::Swish (custom domain; with `two_inputs`, it also reads
    the network input) -> conv (8), on x[N,8,16,16]."""
    swish_in = ["a", "x"] if two_inputs else ["a"]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], name="conv_in", pads=[1, 1, 1, 1]),
        helper.make_node("Swish", swish_in, ["s"], name="my_swish", domain="com.example"),
        helper.make_node("Conv", ["s", "w2"], ["y"], name="conv_out", pads=[1, 1, 1, 1]),
    ]
    inits = [weight("w1", [8, 8, 3, 3]), weight("w2", [8, 8, 3, 3])]
    return model(nodes, [tensor("x", ["N", 8, 16, 16])], [tensor("y", None)], inits,
                 domains=("com.example",))


def conv_variants() -> onnx.ModelProto:
    """x[N,8,20,20] -> grouped conv (group 4, dilation 2, pads 2) -> Identity -> Dropout ->
    two stride-2 convs (3x3 with auto_pad SAME_UPPER; 1x1) -> their Mul and their Sub ->
    Concat on channels -> AveragePool 3x3 / 2 with pads 1 and ceil_mode -> GlobalAveragePool
    -> Squeeze (axes from a Constant node) -> MatMul with a weight -> Unsqueeze."""
    nodes = [
        helper.make_node("Conv", ["x", "wg"], ["g"], name="grouped", group=4,
                         dilations=[2, 2], pads=[2, 2, 2, 2]),
        helper.make_node("Identity", ["g"], ["gi"]),
        helper.make_node("Dropout", ["gi"], ["gd"]),
        helper.make_node("Conv", ["gd", "wa"], ["a"], name="down_a", strides=[2, 2],
                         auto_pad="SAME_UPPER"),
        helper.make_node("Conv", ["gd", "wb"], ["b"], name="down_b", strides=[2, 2]),
        helper.make_node("Mul", ["a", "b"], ["m"], name="gate"),
        helper.make_node("Sub", ["a", "b"], ["d"], name="diff"),
        helper.make_node("Concat", ["m", "d"], ["cat"], name="cat", axis=1),
        helper.make_node("AveragePool", ["cat"], ["p"], name="avg", kernel_shape=[3, 3],
                         strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
        helper.make_node("GlobalAveragePool", ["p"], ["gp"], name="gap"),
        helper.make_node("Constant", [], ["axes"], value=ints("axes_value", [2, 3])),
        helper.make_node("Squeeze", ["gp", "axes"], ["sq"]),
        helper.make_node("MatMul", ["sq", "wfc"], ["fc"], name="fc"),
        helper.make_node("Unsqueeze", ["fc", "axis2"], ["y"]),
    ]
    inits = [weight("wg", [16, 2, 3, 3]), weight("wa", [8, 16, 3, 3]),
             weight("wb", [8, 16, 1, 1]), weight("wfc", [16, 5]), ints("axis2", [2])]
    return model(nodes, [tensor("x", ["N", 8, 20, 20])], [tensor("y", None)], inits)


def custom_chain() -> onnx.ModelProto:
    """conv -> Swish (custom) -> conv -> Swish (custom) -> Exp -> conv on x[N,8,16,16]:
    shape inference stops at each custom op, so the second one's input is known only
    after the first one's output shape is filled in."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["a"], name="c1", pads=[1, 1, 1, 1]),
        helper.make_node("Swish", ["a"], ["s"], name="sw1", domain="com.example"),
        helper.make_node("Conv", ["s", "w"], ["b"], name="c2", pads=[1, 1, 1, 1]),
        helper.make_node("Swish", ["b"], ["t"], name="sw2", domain="com.example"),
        helper.make_node("Exp", ["t"], ["e"], name="exp"),
        helper.make_node("Conv", ["e", "w"], ["y"], name="c3", pads=[1, 1, 1, 1]),
    ]
    return model(nodes, [tensor("x", ["N", 8, 16, 16])], [tensor("y", None)],
                 [weight("w", [8, 8, 3, 3])], domains=("com.example",))


# --- IR networks with every construct of the IR, for the round-trip tests ----------------
def conv_constructs(batch: int = 1) -> Workload:
    """A convolutional network with asymmetric pads (conv, max and average pool), implicit
    concats read by a conv, a max pool, a global pool and an fc, an add whose three
    operands are cut from its inputs read concatenated (Inception-ResNet's first B / C
    adds), copying concats along channels and height, and transposes of a non-square
    map."""
    b = NetBuilder("conv_constructs", batch)
    x = b.input("image", 3, 15, 13)
    stem = b.conv("stem", x, 8, 7, stride=2, padding=2, padding_end=3)  # 8 x 7 x 6
    b1 = b.conv("b1", stem, 4, 1)
    b3 = b.conv("b3", stem, 6, (3, 2), padding=(1, 0), padding_end=(1, 1))
    bp = b.pool("bp", stem, 3, stride=1, padding=1)
    mix = b.conv("mix", [b1, b3, bp], 16, 3)  # reads 18 channels
    res = b.eltwise("res", [bp, b1, b3], channels=6)  # 18 channels: 3 operands of 6
    down = b.pool("down", [mix, res], 2, stride=2, padding=0, padding_end=1)  # 22 x 4 x 3
    avg = b.pool("avg", down, 3, stride=2, padding=1, padding_end=2, kind="avg")  # 3 x 2
    swap = b.transpose("swap_hw", avg, (0, 2, 1))  # 22 x 2 x 3
    turn = b.transpose("turn", swap, (2, 0, 1))  # 3 x 22 x 2
    side = b.conv("side", swap, 22, 1)
    both = b.concat("both", [swap, side], copy=True)  # 44 x 2 x 3
    rows = b.concat("rows", [swap, side], axis="h", copy=True)  # 22 x 4 x 3
    g = b.global_pool("gap", [both, swap])
    b.fc("fc", [g, b.global_pool("gap_rows", rows), b.global_pool("gap_turn", turn)], 10)
    return b.build()


def gpt_constructs(tokens: int = 12, d: int = 32, heads: int = 4) -> Workload:
    """A GPT-2 block as the SoMa reference builds it: K per head (a 1x1 conv each),
    transposed (C <-> tokens) and joined by a copying concat into the weight layout
    (heads x keys, head width) that Q.K^T reads with transpose_rhs=False; the output
    projection reads the attention and its input (implicit concat)."""
    b = NetBuilder("gpt_constructs")
    x = b.input("x", d, tokens)
    h = b.unary("ln", x, Op.LAYERNORM)
    q = b.matmul("q", h, d)
    kts = [b.transpose(f"kt{i}", b.conv(f"k{i}", h, d // heads, 1), (1, 0, 2))
           for i in range(heads)]
    s = b.matmul_act("qk", q, b.concat("kt", kts, copy=True), heads, transpose_rhs=False)
    p = b.unary("softmax", s, Op.SOFTMAX)
    a = b.matmul_act("pv", p, b.matmul("v", h, d), heads, transpose_rhs=False)
    b.eltwise("residual", [x, b.matmul("proj", [a, h], d)])
    return b.build()


def gpt_decode_constructs(past: int = 11, d: int = 32, heads: int = 4) -> Workload:
    """Decoding one token with a KV cache as network inputs (K in weight layout), new K
    per head transposed and appended by a copying concat over channels, new V by one
    over tokens; one token, so every map has H = W = 1 before the caches."""
    b = NetBuilder("gpt_decode_constructs")
    x = b.input("x", d)
    k_cache = b.input("k_cache", heads * past, d // heads)
    v_cache = b.input("v_cache", d, past)
    q = b.matmul("q", x, d)
    kts = [b.transpose(f"kt{i}", b.conv(f"k{i}", x, d // heads, 1), (1, 0, 2))
           for i in range(heads)]
    keys = b.concat("keys", [k_cache, *kts], copy=True)
    values = b.concat("values", [v_cache, b.matmul("v", x, d)], axis="h", copy=True)
    s = b.matmul_act("qk", q, keys, heads, transpose_rhs=False)
    a = b.matmul_act("pv", b.unary("softmax", s, Op.SOFTMAX), values, heads,
                     transpose_rhs=False)
    b.matmul("proj", [a, x], d)
    return b.build()


#: The networks above by name.
CONSTRUCT_NETS = {f.__name__: f for f in (conv_constructs, gpt_constructs,
                                          gpt_decode_constructs)}


def mark(node: onnx.NodeProto, value: str) -> onnx.NodeProto:
    """`node` with mipsched's marker `value` in its metadata_props."""
    node.metadata_props.add(key="mipsched.layer", value=value)
    return node


def padding_variants() -> onnx.ModelProto:
    """Window nodes on x[N,4,11,10] whose padding is asymmetric: explicit pads
    (0, 1, 2, 1); auto_pad SAME_LOWER and SAME_UPPER (odd totals); a max pool whose
    ceil_mode adds a window along W only; an average pool with auto_pad VALID."""
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="pads", pads=[0, 1, 2, 1]),
        helper.make_node("Conv", ["x", "w2"], ["c2"], name="same_lower", strides=[2, 2],
                         auto_pad="SAME_LOWER"),
        helper.make_node("Conv", ["c1", "w3"], ["c3"], name="same_upper",
                         auto_pad="SAME_UPPER"),
        helper.make_node("MaxPool", ["c3"], ["p1"], name="ceil", kernel_shape=[3, 3],
                         strides=[2, 2], ceil_mode=1),
        helper.make_node("AveragePool", ["c2"], ["p2"], name="valid", kernel_shape=[2, 2],
                         strides=[2, 2], auto_pad="VALID"),
    ]
    inits = [weight("w1", [8, 4, 3, 3]), weight("w2", [8, 4, 3, 3]),
             weight("w3", [8, 8, 4, 4])]
    return model(nodes, [tensor("x", ["N", 4, 11, 10])],
                 [tensor("p1", None), tensor("p2", None)], inits)


def marked_nodes() -> onnx.ModelProto:
    """Markers as another tool would write them, on x[N,4,6,5]: a marked Transpose
    (N, C, H, W) -> (N, H, W, C) read by a conv; a Concat marked implicit read by a conv
    and a max pool (folded into both); one read by a conv and an Add (kept); a Concat
    marked as a copy; an unmarked Transpose, which stays a free layout change."""
    nodes = [
        mark(helper.make_node("Transpose", ["x"], ["t"], name="to_hwc", perm=[0, 2, 3, 1]),
             "transpose"),
        helper.make_node("Conv", ["t", "wt"], ["a"], name="conv_t"),
        helper.make_node("Conv", ["x", "w4"], ["b"], name="conv_x"),
        mark(helper.make_node("Concat", ["x", "b"], ["ab"], name="join", axis=1),
             "implicit-concat"),
        helper.make_node("Conv", ["ab", "w8"], ["c"], name="conv_join", pads=[1, 1, 1, 1],
                         kernel_shape=[3, 3]),
        helper.make_node("MaxPool", ["ab"], ["p"], name="pool_join", kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1]),
        mark(helper.make_node("Concat", ["b", "x"], ["ba"], name="kept", axis=1),
             "implicit-concat"),
        helper.make_node("Conv", ["ba", "w8b"], ["d"], name="conv_kept"),
        helper.make_node("Add", ["ba", "p"], ["e"], name="add"),
        mark(helper.make_node("Concat", ["c", "d"], ["f"], name="copy", axis=1),
             "concat-copy"),
        helper.make_node("Transpose", ["f"], ["y"], name="free", perm=[0, 1, 3, 2]),
    ]
    inits = [weight("wt", [3, 6, 1, 1]), weight("w4", [4, 4, 1, 1]),
             weight("w8", [4, 8, 3, 3]), weight("w8b", [4, 8, 1, 1])]
    return model(nodes, [tensor("x", ["N", 4, 6, 5])],
                 [tensor("a", None), tensor("e", None), tensor("y", None)], inits)
