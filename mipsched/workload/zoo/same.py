"""Windows with the SoMa reference's 'same' padding.

The reference gives every conv and pool ceil(input / stride) output rows and columns and
pads the missing total, floor(total / 2) rows (columns) in front and the rest behind: conv
7x7/2 on 224 pads 2 on top and 3 at the bottom, pool 3x3/2 on 112 pads 0 and 1, a 1x1/2
conv on 56 pads nothing (and reads rows 0, 2, ..., 54).
"""

from __future__ import annotations

from collections.abc import Sequence

from mipsched.workload.graph import NetBuilder

Pair = int | tuple[int, int]


def same_pads(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """(leading, trailing) pads (rows) that give ceil(size / stride) outputs."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def conv(b: NetBuilder, name: str, src: str | Sequence[str], out_channels: int,
         kernel: Pair, stride: Pair = 1) -> str:
    """A convolution with 'same' padding (several sources: read concatenated along C)."""
    lead, end = _pads(b, src, kernel, stride)
    return b.conv(name, src, out_channels, kernel, stride, padding=lead, padding_end=end)


def pool(b: NetBuilder, name: str, src: str | Sequence[str], kernel: Pair, stride: Pair,
         kind: str = "max") -> str:
    """A window pool with 'same' padding (several sources: read concatenated along C)."""
    lead, end = _pads(b, src, kernel, stride)
    return b.pool(name, src, kernel, stride, padding=lead, kind=kind, padding_end=end)


def _pads(b: NetBuilder, src: str | Sequence[str], kernel: Pair,
          stride: Pair) -> tuple[tuple[int, int], tuple[int, int]]:
    """(top, left) and (bottom, right) pads of a 'same' window over `src`."""
    shape = b.shape(src if isinstance(src, str) else src[0])
    (r, s), (sh, sw) = _pair(kernel), _pair(stride)
    top, bottom = same_pads(shape.h, r, sh)
    left, right = same_pads(shape.w, s, sw)
    return (top, left), (bottom, right)


def _pair(v: Pair) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else v
