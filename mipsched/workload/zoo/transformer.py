"""The SET reference's Transformer (Vaswani et al. 2017) and its one-encoder, one-decoder
cell, layer for layer (SET-ISCA2023 `src/nns/transformer.cpp`: `transformer`,
`transformer_cell`).

Activations are (features, tokens, 1): 512 features (8 heads x 64), 512 tokens. The
reference's 1x1 convs over H = tokens, W = 1 are MATMULs (the same cost). One attention
(`_attention`) is, in the reference's layer order: Q (d -> d); per head i, K_i (d -> 64)
and its transpose Kt_i (tokens x 64); the K concat (the reference's PTP over the Kt_i, a
copying concat along channels: K^T in weight layout [heads x keys, 64]); V (d -> d); QK
= Q K^T per head (the reference's GroupConv with K as weights: MATMUL_ACT with the right
operand in weight layout); QK_elt (the reference's PTP on the scores: SOFTMAX); QKV =
scores . V per head (GroupConv with V as weights: MATMUL_ACT); FC (d -> d). An encoder is
an attention, an add with its input (elt1), feedfwd1 (d -> 2048), feedfwd2 (2048 -> d)
and an add (elt2). A decoder is a self-attention (name suffix _1), elt1, an attention
whose keys and values come from the last encoder (_2), elt2, the feed-forward and elt3.
The word embeddings (`word_embed_enc` / `_dec`, the reference's PTP on the network
inputs `input_enc` / `input_dec`) are element-wise GELUs: like the reference's PTP, one
vector op per element. `proj` maps the last decoder to the 1000-word vocabulary.

Layer counts: 23 per attention, 27 per encoder, 51 per decoder; `transformer` (6 + 6)
has 471 layers, `transformer_cell` (1 + 1) 81, as in the reference. Layernorms, masks,
biases and the positional encoding are not modelled (the reference has none).
"""

from __future__ import annotations

from mipsched.workload.graph import NetBuilder, Workload
from mipsched.workload.layer import Op

HEADS = 8
HEAD = 64  # features per head
TOKENS = 512
FF = 2048
VOCAB = 1000
SWAP_CH = (1, 0, 2)  # transpose: swap channels and rows (tokens)


def _attention(b: NetBuilder, name: str, x_q: str, x_kv: str) -> str:
    """One multi-head attention, queries from `x_q`, keys and values from `x_kv`."""
    d = HEADS * HEAD
    q = b.matmul(f"{name}_Q", x_q, d)
    kts = [b.transpose(f"{name}_Kt{i}", b.matmul(f"{name}_K{i}", x_kv, HEAD), SWAP_CH)
           for i in range(HEADS)]
    k = b.concat(f"{name}_K", kts, copy=True)
    v = b.matmul(f"{name}_V", x_kv, d)
    s = b.matmul_act(f"{name}_QK", q, k, HEADS, transpose_rhs=False)
    s = b.unary(f"{name}_QK_elt", s, Op.SOFTMAX)
    a = b.matmul_act(f"{name}_QKV", s, v, HEADS, transpose_rhs=False)
    return b.matmul(f"{name}_FC", a, d)


def _feed_forward(b: NetBuilder, name: str, x: str, add: str) -> str:
    """feedfwd1 (d -> FF), feedfwd2 (FF -> d) and the add `add` with `x`."""
    h = b.matmul(f"{name}_feedfwd1", x, FF)
    h = b.matmul(f"{name}_feedfwd2", h, HEADS * HEAD)
    return b.eltwise(f"{name}_{add}", [x, h])


def _encoder(b: NetBuilder, name: str, x: str) -> str:
    x = b.eltwise(f"{name}_elt1", [x, _attention(b, name, x, x)])
    return _feed_forward(b, name, x, "elt2")


def _decoder(b: NetBuilder, name: str, x: str, enc: str) -> str:
    x = b.eltwise(f"{name}_elt1", [x, _attention(b, f"{name}_1", x, x)])
    x = b.eltwise(f"{name}_elt2", [x, _attention(b, f"{name}_2", x, enc)])
    return _feed_forward(b, name, x, "elt3")


def _build(name: str, layers: int, batch: int) -> Workload:
    """`layers` encoders then `layers` decoders (numbered from 1 when layers > 1)."""
    d = HEADS * HEAD
    b = NetBuilder(name, batch)
    enc = b.unary("word_embed_enc", b.input("input_enc", d, TOKENS), Op.GELU)
    for i in range(1, layers + 1):
        enc = _encoder(b, f"encoder{i}" if layers > 1 else "encoder", enc)
    dec = b.unary("word_embed_dec", b.input("input_dec", d, TOKENS), Op.GELU)
    for i in range(1, layers + 1):
        dec = _decoder(b, f"decoder{i}" if layers > 1 else "decoder", dec, enc)
    b.matmul("proj", dec, VOCAB)
    return b.build()


def transformer(batch: int = 1) -> Workload:
    """The reference's Transformer: 6 encoders, 6 decoders, 512 tokens (471 layers)."""
    return _build("transformer", 6, batch)


def transformer_cell(batch: int = 1) -> Workload:
    """The reference's Transformer cell: one encoder and one decoder (81 layers)."""
    return _build("transformer_cell", 1, batch)
