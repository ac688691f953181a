"""ResNet-50 / ResNet-101 of He et al. (CVPR 2016), torchvision v1.5-style bottleneck.

224x224x3 input; conv1 7x7/2; max pool 3x3/2; four stages of bottleneck blocks (1x1, 3x3
with the stage's stride, 1x1 to 4x width) with a 1x1 projection shortcut on the first
block of each stage; global average pool; fc 1000. ReLU and batch norm are fused and not
modelled. Layer names follow the SoMa reference (`conv_2_0_a`, `conv_2_br`, ...).
"""

from __future__ import annotations

from collections.abc import Sequence

from mipsched.workload.graph import NetBuilder, Workload

#: (stage number, bottleneck width, stride of the first block) of conv2_x .. conv5_x
_STAGES = ((2, 64, 1), (3, 128, 2), (4, 256, 2), (5, 512, 2))


def _resnet(name: str, blocks: Sequence[int], batch: int) -> Workload:
    b = NetBuilder(name, batch)
    x = b.input("input", 3, 224, 224)
    x = b.conv("conv1", x, 64, 7, stride=2, padding=3)
    x = b.pool("pool1", x, 3, stride=2, padding=1)
    for (stage, width, stride), n in zip(_STAGES, blocks, strict=True):
        for i in range(n):
            s = stride if i == 0 else 1
            p = f"conv_{stage}_{i}"
            y = b.conv(f"{p}_a", x, width, 1)
            y = b.conv(f"{p}_b", y, width, 3, stride=s)
            y = b.conv(f"{p}_c", y, 4 * width, 1)
            if i == 0:
                x = b.conv(f"conv_{stage}_br", x, 4 * width, 1, stride=s)
            x = b.eltwise(f"{p}_res", [y, x])
    x = b.global_pool("pool5", x)
    b.fc("fc", x, 1000)
    return b.build()


def resnet50(batch: int = 1) -> Workload:
    """ResNet-50: 3, 4, 6, 3 bottleneck blocks."""
    return _resnet("resnet50", (3, 4, 6, 3), batch)


def resnet101(batch: int = 1) -> Workload:
    """ResNet-101: 3, 4, 23, 3 bottleneck blocks."""
    return _resnet("resnet101", (3, 4, 23, 3), batch)
