"""One GPT-2 transformer block (Radford et al. 2019), as SoMa schedules it.

Pre-LN block: ln1 -> q, k, v (d -> d each) -> qk = Q K^T per head -> softmax -> pv =
scores . V -> proj (d -> d) -> res1 (+ block input) -> ln2 -> ffn1 (d -> 4d) -> gelu ->
ffn2 (4d -> d) -> res2 (+ res1). Activations are (features, tokens, 1). Biases are not
modelled and the causal mask is not modelled (prefill computes the full score matrix).

Prefill processes all `tokens` of the prompt. Decode processes one new token: the
per-sample KV cache of `tokens` entries is loaded from DRAM (network inputs `k_cache` and
`v_cache`), the new k and v are appended along the token axis, and k and v are network
outputs besides `res2` (they are stored back to the cache).
"""

from __future__ import annotations

from mipsched.workload.graph import NetBuilder, Workload
from mipsched.workload.layer import Op


def _block(name: str, d: int, heads: int, tokens: int, decode: bool, batch: int) -> Workload:
    b = NetBuilder(name, batch)
    x = b.input("x", d, 1 if decode else tokens)
    h = b.unary("ln1", x, Op.LAYERNORM)
    q = b.matmul("q", h, d)
    k = b.matmul("k", h, d)
    v = b.matmul("v", h, d)
    keys, values = k, v
    if decode:
        keys = b.concat("k_cat", [b.input("k_cache", d, tokens), k], axis="h")
        values = b.concat("v_cat", [b.input("v_cache", d, tokens), v], axis="h")
    s = b.matmul_act("qk", q, keys, heads, transpose_rhs=True)
    s = b.unary("softmax", s, Op.SOFTMAX)
    a = b.matmul_act("pv", s, values, heads, transpose_rhs=False)
    a = b.matmul("proj", a, d)
    r = b.eltwise("res1", [x, a])
    h = b.unary("ln2", r, Op.LAYERNORM)
    h = b.matmul("ffn1", h, 4 * d)
    h = b.unary("gelu", h, Op.GELU)
    h = b.matmul("ffn2", h, d)
    b.eltwise("res2", [r, h])
    if decode:
        b.output("res2", "k", "v")
    return b.build()


def gpt2_small_prefill(batch: int = 1) -> Workload:
    """GPT-2 small block (d=768, 12 heads) on a 512-token prompt."""
    return _block("gpt2_small_prefill", 768, 12, 512, False, batch)


def gpt2_small_decode(batch: int = 1) -> Workload:
    """GPT-2 small block (d=768, 12 heads) decoding the 513th token."""
    return _block("gpt2_small_decode", 768, 12, 512, True, batch)


def gpt2_xl_prefill(batch: int = 1) -> Workload:
    """GPT-2 XL block (d=1600, 25 heads) on a 1024-token prompt."""
    return _block("gpt2_xl_prefill", 1600, 25, 1024, False, batch)


def gpt2_xl_decode(batch: int = 1) -> Workload:
    """GPT-2 XL block (d=1600, 25 heads) decoding the 1025th token."""
    return _block("gpt2_xl_decode", 1600, 25, 1024, True, batch)
