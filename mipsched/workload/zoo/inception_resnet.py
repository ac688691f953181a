"""Inception-ResNet-v1 of Szegedy et al. (AAAI 2017, "Inception-v4, Inception-ResNet and
the Impact of Residual Connections on Learning"), Fig. 15 schema, as the SoMa reference
builds it, layer for layer.

299x299x3 input; stem (Fig. 14); 5 x Inception-ResNet-A (Fig. 10); Reduction-A (Fig. 7,
k=192, l=192, m=256, n=384); 10 x Inception-ResNet-B (Fig. 11); Reduction-B (Fig. 12);
5 x Inception-ResNet-C (Fig. 13); an 8x8/8 average pool; an fc 1792 -> 1792 the reference
names `Dropout`; fc 1000 (`FC`). 'valid' padding where the paper marks V, the reference's
'same' padding (floor(total / 2) in front) elsewhere. A block's 1x1 "linear" conv reads
its branches directly, concatenated along channels (no concat layer); so does every layer
after a reduction block. Residual scaling, ReLU and batch norm are not modelled.

The residual add of the first B and C block adds the reduction block's branches, read
concatenated (its first operand), to the linear conv (its second).
"""

from __future__ import annotations

from collections.abc import Sequence

from mipsched.workload.graph import NetBuilder, Workload
from mipsched.workload.zoo import same

Kernel = int | tuple[int, int]
#: one conv: (name suffix, out channels, kernel, stride, 'valid' padding)
Conv = tuple[str, int, Kernel, int, bool]
#: a branch: convs applied one after the other
Branch = tuple[Conv, ...]


def _conv(b: NetBuilder, name: str, x: str | Sequence[str], spec: Conv) -> str:
    suffix, channels, kernel, stride, valid = spec
    if valid:
        return b.conv(f"{name}_{suffix}", x, channels, kernel, stride, padding=0)
    return same.conv(b, f"{name}_{suffix}", x, channels, kernel, stride)


def _branches(b: NetBuilder, name: str, x: Sequence[str],
              branches: Sequence[Branch]) -> list[str]:
    """The branches' outputs, each branch a chain of convs whose first reads `x`."""
    outs = []
    for first, *rest in branches:
        y = _conv(b, name, x, first)
        for spec in rest:
            y = _conv(b, name, y, spec)
        outs.append(y)
    return outs


#: Fig. 10 (35x35x256)
_BLOCK_A: tuple[Branch, ...] = (
    (("Conv_1a_1x1", 32, 1, 1, False),),
    (("Conv_2a_1x1", 32, 1, 1, False), ("Conv_2b_3x3", 32, 3, 1, False)),
    (("Conv_3a_1x1", 32, 1, 1, False), ("Conv_3b_3x3", 32, 3, 1, False),
     ("Conv_3c_3x3", 32, 3, 1, False)),
)
#: Fig. 11 (17x17x896)
_BLOCK_B: tuple[Branch, ...] = (
    (("Conv_1a_1x1", 128, 1, 1, False),),
    (("Conv_2a_1x1", 128, 1, 1, False), ("Conv_2b_1x7", 128, (1, 7), 1, False),
     ("Conv_2c_7x1", 128, (7, 1), 1, False)),
)
#: Fig. 13 (8x8x1792)
_BLOCK_C: tuple[Branch, ...] = (
    (("Conv_1a_1x1", 192, 1, 1, False),),
    (("Conv_2a_1x1", 192, 1, 1, False), ("Conv_2b_1x3", 192, (1, 3), 1, False),
     ("Conv_2c_3x1", 192, (3, 1), 1, False)),
)
#: Fig. 7 with k=192, l=192, m=256, n=384 (35x35x256 -> 17x17x896), before its max pool
_REDUCTION_A: tuple[Branch, ...] = (
    (("Conv_1a_3x3", 384, 3, 2, True),),
    (("Conv_2a_1x1", 192, 1, 1, False), ("Conv_2b_3x3", 192, 3, 1, False),
     ("Conv_2c_3x3", 256, 3, 2, True)),
)
#: Fig. 12 (17x17x896 -> 8x8x1792), after its max pool
_REDUCTION_B: tuple[Branch, ...] = (
    (("Conv_2a_1x1", 256, 1, 1, False), ("Conv_2b_3x3", 384, 3, 2, True)),
    (("Conv_3a_1x1", 256, 1, 1, False), ("Conv_3b_3x3", 256, 3, 2, True)),
    (("Conv_4a_1x1", 256, 1, 1, False), ("Conv_4b_3x3", 256, 3, 1, False),
     ("Conv_4c_3x3", 256, 3, 2, True)),
)


def _stem(b: NetBuilder, x: str) -> str:
    """Fig. 14: 299x299x3 -> 35x35x256."""
    x = b.conv("Conv_1a_3x3", x, 32, 3, stride=2, padding=0)
    x = b.conv("Conv_2a_3x3", x, 32, 3, padding=0)
    x = same.conv(b, "Conv_2b_3x3", x, 64, 3)
    x = b.pool("MaxPool_3a_3x3", x, 3, stride=2)
    x = same.conv(b, "Conv_3b_1x1", x, 80, 1)
    x = b.conv("Conv_4a_3x3", x, 192, 3, padding=0)
    return b.conv("Conv_4b_3x3", x, 256, 3, stride=2, padding=0)


def _residual(b: NetBuilder, name: str, x: list[str], branches: Sequence[Branch],
              linear: str) -> str:
    """A residual block reading `x` (its input, or a reduction block's branches read
    concatenated): branches, the 1x1 linear conv back to the input width, the add, whose
    first operand is `x` read concatenated along channels."""
    outs = _branches(b, name, x, branches)
    width = sum(b.shape(t).c for t in x)
    y = same.conv(b, f"{name}_{linear}", outs, width, 1)
    return b.eltwise(f"{name}_Eltwise", [*x, y], channels=width)


def _blocks(b: NetBuilder, prefix: str, count: int, x: list[str], branches: Sequence[Branch],
            linear: str) -> str:
    """`count` residual blocks named prefix1 .. prefix<count>."""
    out = _residual(b, f"{prefix}1", x, branches, linear)
    for i in range(2, count + 1):
        out = _residual(b, f"{prefix}{i}", [out], branches, linear)
    return out


def inception_resnet_v1(batch: int = 1) -> Workload:
    """The SoMa reference's Inception-ResNet-v1 on a 299x299x3 image."""
    b = NetBuilder("inception_resnet_v1", batch)
    x = _stem(b, b.input("input", 3, 299, 299))
    x = _blocks(b, "A", 5, [x], _BLOCK_A, "Conv_4_1x1")
    red_a = _branches(b, "RA", [x], _REDUCTION_A)
    red_a.append(b.pool("RA_MaxPool_3a_3x3", x, 3, stride=2))
    x = _blocks(b, "B", 10, red_a, _BLOCK_B, "Conv_3_1x1")
    red_b = [b.pool("RB_MaxPool_1a_3x3", x, 3, stride=2)]
    red_b += _branches(b, "RB", [x], _REDUCTION_B)
    x = _blocks(b, "C", 5, red_b, _BLOCK_C, "Conv_3_1x1")
    x = b.pool("AvgPool", x, 8, stride=8, kind="avg")
    x = b.fc("Dropout", x, 1792)
    b.fc("FC", x, 1000)
    return b.build()
