"""ResNet-50 / ResNet-101 of He et al. (CVPR 2016) with bottleneck blocks, in two variants.

Both: 224x224x3 input; conv1 7x7/2; max pool 3x3/2; four stages of bottleneck blocks (1x1,
3x3, 1x1 to 4x width) with a 1x1 projection shortcut on the first block of each stage; a
7x7 average pool; fc 1000. ReLU and batch norm are fused and not modelled. Layer names
are the SoMa reference's (`conv_2_0_a`, `conv_2_br`, `conv_2_0_res`, ...).

- `resnet50`, `resnet101`: the SoMa reference's ResNet v1, layer for layer. The stride 2
  of a stage sits in its first 1x1 conv (`conv_X_0_a`) and in the shortcut (`conv_X_br`);
  windows are padded as the reference pads them ('same', floor(total / 2) in front); the
  residual add reads its inputs in the reference's order (by layer id); pool5 is a 7x7/7
  window pool.
- `resnet50_v1_5`, `resnet101_v1_5`: torchvision-style (v1.5): the stride sits in the 3x3
  conv (`conv_X_0_b`), conv1 and pool1 pad symmetrically, pool5 is a global pool.
"""

from __future__ import annotations

from collections.abc import Sequence

from mipsched.workload.graph import NetBuilder, Workload
from mipsched.workload.zoo import same

#: (stage number, bottleneck width, stride of the first block) of conv2_x .. conv5_x
_STAGES = ((2, 64, 1), (3, 128, 2), (4, 256, 2), (5, 512, 2))
_RESNET50 = (3, 4, 6, 3)
_RESNET101 = (3, 4, 23, 3)


def _resnet_v1(name: str, blocks: Sequence[int], batch: int) -> Workload:
    """The SoMa reference's ResNet v1."""
    b = NetBuilder(name, batch)
    x = b.input("input", 3, 224, 224)
    x = same.conv(b, "conv1", x, 64, 7, stride=2)
    x = same.pool(b, "pool1", x, 3, stride=2)
    for (stage, width, stride), n in zip(_STAGES, blocks, strict=True):
        for i in range(n):
            s = stride if i == 0 else 1
            p = f"conv_{stage}_{i}"
            y = same.conv(b, f"{p}_a", x, width, 1, stride=s)
            y = same.conv(b, f"{p}_b", y, width, 3)
            y = same.conv(b, f"{p}_c", y, 4 * width, 1)
            if i == 0:
                x = same.conv(b, f"conv_{stage}_br", x, 4 * width, 1, stride=s)
                x = b.eltwise(f"{p}_res", [y, x])  # conv_X_0_c was added before conv_X_br
            else:
                x = b.eltwise(f"{p}_res", [x, y])
    x = same.pool(b, "pool5", x, 7, stride=7, kind="avg")
    b.fc("fc", x, 1000)
    return b.build()


def _resnet_v1_5(name: str, blocks: Sequence[int], batch: int) -> Workload:
    """The torchvision-style ResNet v1.5."""
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
    """The SoMa reference's ResNet-50 (v1): 3, 4, 6, 3 bottleneck blocks."""
    return _resnet_v1("resnet50", _RESNET50, batch)


def resnet101(batch: int = 1) -> Workload:
    """The SoMa reference's ResNet-101 (v1): 3, 4, 23, 3 bottleneck blocks."""
    return _resnet_v1("resnet101", _RESNET101, batch)


def resnet50_v1_5(batch: int = 1) -> Workload:
    """Torchvision-style ResNet-50 (v1.5): 3, 4, 6, 3 bottleneck blocks."""
    return _resnet_v1_5("resnet50_v1_5", _RESNET50, batch)


def resnet101_v1_5(batch: int = 1) -> Workload:
    """Torchvision-style ResNet-101 (v1.5): 3, 4, 23, 3 bottleneck blocks."""
    return _resnet_v1_5("resnet101_v1_5", _RESNET101, batch)
