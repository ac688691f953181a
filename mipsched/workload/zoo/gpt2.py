"""One GPT-2 transformer block (Radford et al. 2019) as the SoMa reference builds it,
layer for layer: GPT-2 small (d = 768, 12 heads of 64) and XL (d = 1600, 25 heads of 64).

Activations are (features, tokens, 1); the reference's 1x1 convs are MATMULs (the same
cost). Pre-LN block: norm1 (layernorm) -> Q, K, V projections -> attention_QK = Q K^T per
head -> attention_QK_elt (softmax) -> attention_QKV = scores . V per head -> output
projection -> res1 (+ block input) -> norm2 -> ffn1 (d -> 4d) -> GeLU -> ffn2 (4d -> d) ->
res2 (+ res1). Biases and the causal mask are not modelled.

Keys are computed per head, as in the reference: one d -> 64 projection per head, each
transposed to (tokens, 64, 1), and the heads joined by a concat that copies (one vector
op per element) into K^T in weight layout [heads x keys, 64]. The attention matmuls read
their right operand in weight layout (`transpose_rhs=False`): K^T for QK, V as
[heads x 64, keys] for scores . V.

Prefill (`input_qkv`, seq tokens) processes a whole prompt. Decode (`input_q`, one token,
the seq-th) projects the new token's K per head and its V, and reads the cache of the
seq - 1 earlier tokens as network inputs: `k_cache` (heads x (seq - 1), 64, 1), already
transposed, and `v_cache` (seq - 1, d, 1). K = concat(k_cache, new K) and V^T =
concat(v_cache, new V^T) are copies; V^T is transposed to V. The new K and V are not
stored back.
"""

from __future__ import annotations

from mipsched.workload.graph import NetBuilder, Workload
from mipsched.workload.layer import Op

HEAD = 64  # features per head
SWAP_CH = (1, 0, 2)  # transpose: swap channels and rows (tokens)


def _ffn(b: NetBuilder, x: str, attention: str, d: int) -> None:
    """res1, norm2, ffn1, GeLU, ffn2, res2 after the attention's output projection."""
    r = b.eltwise("res1", [x, attention])
    h = b.unary("norm2", r, Op.LAYERNORM)
    h = b.matmul("ffn1", h, 4 * d)
    h = b.unary("GeLU", h, Op.GELU)
    h = b.matmul("ffn2", h, d)
    b.eltwise("res2", [r, h])


def _head_keys(b: NetBuilder, h: str, heads: int, k_name: str, kt_name: str) -> list[str]:
    """Per head, K = h · W_K (one d -> 64 matmul, named k_name.format(head)) and its
    transpose (kt_name), as the reference computes attention keys."""
    return [b.transpose(kt_name.format(i), b.matmul(k_name.format(i), h, HEAD), SWAP_CH)
            for i in range(heads)]


def _prefill(name: str, heads: int, seq: int, batch: int) -> Workload:
    d = heads * HEAD
    b = NetBuilder(name, batch)
    x = b.input("input_qkv", d, seq)
    h = b.unary("norm1", x, Op.LAYERNORM)
    q = b.matmul("attention_Q", h, d)
    k = b.concat("attention_K", _head_keys(b, h, heads, "attention_K{}", "attention_Kt{}"),
                 copy=True)
    v = b.matmul("attention_V", h, d)
    s = b.matmul_act("attention_QK", q, k, heads, transpose_rhs=False)
    s = b.unary("attention_QK_elt", s, Op.SOFTMAX)
    a = b.matmul_act("attention_QKV", s, v, heads, transpose_rhs=False)
    _ffn(b, x, b.matmul("attention_FC", a, d), d)
    return b.build()


def _decode(name: str, heads: int, seq: int, batch: int) -> Workload:
    d = heads * HEAD
    b = NetBuilder(name, batch)
    x = b.input("input_q", d)
    k_cache = b.input("k_cache", heads * (seq - 1), HEAD)
    v_cache = b.input("v_cache", seq - 1, d)
    h = b.unary("norm1", x, Op.LAYERNORM)
    q = b.matmul("attention_Q", h, d)
    new_k = b.concat("attention_newK", _head_keys(b, h, heads, "attention_newK_head_{}",
                                                  "attention_newKt_head_{}"), copy=True)
    new_v = b.matmul("attention_newV", h, d)
    k = b.concat("attention_K", [k_cache, new_k], copy=True)
    new_vt = b.transpose("attention_newVt", new_v, SWAP_CH)
    vt = b.concat("attention_Vt_concat", [v_cache, new_vt], copy=True)
    v = b.transpose("attention_V", vt, SWAP_CH)
    s = b.matmul_act("attention_QK", q, k, heads, transpose_rhs=False)
    s = b.unary("attention_QK_elt", s, Op.SOFTMAX)
    a = b.matmul_act("attention_QKV", s, v, heads, transpose_rhs=False)
    _ffn(b, x, b.matmul("attention_Out_proj", a, d), d)
    return b.build()


def gpt2_small_prefill(batch: int = 1) -> Workload:
    """GPT-2 small block on a 512-token prompt."""
    return _prefill("gpt2_small_prefill", 12, 512, batch)


def gpt2_small_prefill_s1024(batch: int = 1) -> Workload:
    """GPT-2 small block on a 1024-token prompt."""
    return _prefill("gpt2_small_prefill_s1024", 12, 1024, batch)


def gpt2_small_decode(batch: int = 1) -> Workload:
    """GPT-2 small block decoding token 513 (a cache of 512)."""
    return _decode("gpt2_small_decode", 12, 513, batch)


def gpt2_xl_prefill(batch: int = 1) -> Workload:
    """GPT-2 XL block on a 1024-token prompt."""
    return _prefill("gpt2_xl_prefill", 25, 1024, batch)


def gpt2_xl_decode(batch: int = 1) -> Workload:
    """GPT-2 XL block decoding token 1025 (a cache of 1024)."""
    return _decode("gpt2_xl_decode", 25, 1025, batch)
