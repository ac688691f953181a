"""Inception-ResNet-v1 of Szegedy et al. (AAAI 2017, "Inception-v4, Inception-ResNet and
the Impact of Residual Connections on Learning"), Fig. 15 schema.

299x299x3 input; stem of Fig. 14; 5 x Inception-ResNet-A (Fig. 10); Reduction-A (Fig. 7,
k=192, l=192, m=256, n=384 from Table 1); 10 x Inception-ResNet-B (Fig. 11); Reduction-B
(Fig. 12); 5 x Inception-ResNet-C (Fig. 13); average pool over the 8x8 map; fc 1000.
'valid' padding where the paper marks V, 'same' elsewhere. Each residual block
concatenates its branches along channels, applies the 1x1 "linear" conv and adds the
block input; the residual scaling, ReLU, batch norm and dropout are not modelled.
"""

from __future__ import annotations

from collections.abc import Sequence

from mipsched.workload.graph import NetBuilder, Workload

Kernel = int | tuple[int, int]
#: one convolution of a branch: (out channels, kernel, stride, 'valid' padding)
Conv = tuple[int, Kernel, int, bool]


def _branch(b: NetBuilder, name: str, x: str, convs: Sequence[Conv]) -> str:
    """A chain of convolutions named `name_0`, `name_1`, ..."""
    for j, (c, k, s, valid) in enumerate(convs):
        x = b.conv(f"{name}_{j}", x, c, k, stride=s, padding=0 if valid else None)
    return x


def _stem(b: NetBuilder, x: str) -> str:
    """Fig. 14: 299x299x3 -> 35x35x256."""
    x = b.conv("stem_conv1", x, 32, 3, stride=2, padding=0)
    x = b.conv("stem_conv2", x, 32, 3, padding=0)
    x = b.conv("stem_conv3", x, 64, 3)
    x = b.pool("stem_pool", x, 3, stride=2)
    x = b.conv("stem_conv4", x, 80, 1)
    x = b.conv("stem_conv5", x, 192, 3, padding=0)
    return b.conv("stem_conv6", x, 256, 3, stride=2, padding=0)


def _residual(b: NetBuilder, name: str, x: str, branches: Sequence[Sequence[Conv]]) -> str:
    """An Inception-ResNet block: branches, concat, 1x1 linear conv, residual add."""
    outs = [_branch(b, f"{name}_b{i}", x, convs) for i, convs in enumerate(branches)]
    y = b.concat(f"{name}_cat", outs)
    y = b.conv(f"{name}_linear", y, b.shape(x).c, 1)
    return b.eltwise(f"{name}_res", [x, y])


def _reduction(b: NetBuilder, name: str, x: str, branches: Sequence[Sequence[Conv]]) -> str:
    """A reduction block: max pool 3x3/2 V next to conv branches, concatenated."""
    pool = b.pool(f"{name}_pool", x, 3, stride=2)
    outs = [_branch(b, f"{name}_b{i}", x, convs) for i, convs in enumerate(branches)]
    return b.concat(name, [pool, *outs])


#: Fig. 10 (35x35x256)
_BLOCK_A: tuple[tuple[Conv, ...], ...] = (
    ((32, 1, 1, False),),
    ((32, 1, 1, False), (32, 3, 1, False)),
    ((32, 1, 1, False), (32, 3, 1, False), (32, 3, 1, False)),
)
#: Fig. 7 with k=192, l=192, m=256, n=384 (35x35 -> 17x17x896)
_REDUCTION_A: tuple[tuple[Conv, ...], ...] = (
    ((384, 3, 2, True),),
    ((192, 1, 1, False), (192, 3, 1, False), (256, 3, 2, True)),
)
#: Fig. 11 (17x17x896)
_BLOCK_B: tuple[tuple[Conv, ...], ...] = (
    ((128, 1, 1, False),),
    ((128, 1, 1, False), (128, (1, 7), 1, False), (128, (7, 1), 1, False)),
)
#: Fig. 12 (17x17 -> 8x8x1792)
_REDUCTION_B: tuple[tuple[Conv, ...], ...] = (
    ((256, 1, 1, False), (384, 3, 2, True)),
    ((256, 1, 1, False), (256, 3, 2, True)),
    ((256, 1, 1, False), (256, 3, 1, False), (256, 3, 2, True)),
)
#: Fig. 13 (8x8x1792)
_BLOCK_C: tuple[tuple[Conv, ...], ...] = (
    ((192, 1, 1, False),),
    ((192, 1, 1, False), (192, (1, 3), 1, False), (192, (3, 1), 1, False)),
)


def inception_resnet_v1(batch: int = 1) -> Workload:
    """Inception-ResNet-v1 (Fig. 15) on a 299x299x3 image."""
    b = NetBuilder("inception_resnet_v1", batch)
    x = _stem(b, b.input("input", 3, 299, 299))
    for i in range(5):
        x = _residual(b, f"a{i}", x, _BLOCK_A)
    x = _reduction(b, "red_a", x, _REDUCTION_A)
    for i in range(10):
        x = _residual(b, f"b{i}", x, _BLOCK_B)
    x = _reduction(b, "red_b", x, _REDUCTION_B)
    for i in range(5):
        x = _residual(b, f"c{i}", x, _BLOCK_C)
    x = b.global_pool("pool", x)
    b.fc("fc", x, 1000)
    return b.build()
