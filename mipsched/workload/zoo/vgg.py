"""VGG-16 and VGG-19 (configurations D and E) of Simonyan & Zisserman (ICLR 2015), Table 1.

224x224x3 input; 3x3 convolutions (stride 1, 'same' padding) in five groups, each followed
by a 2x2/2 max pool. ReLU is fused and not modelled.

- `vgg16`: 13 convolutions and fc 4096, 4096, 1000 (fc6 reads the flattened 7x7x512 map).
- `vgg19`: the SoMa reference's VGG-19, layer for layer: 16 convolutions (`conv1` ..
  `conv16`) and 5 pools (`pool1` .. `pool5`), without the fc layers.
"""

from __future__ import annotations

from mipsched.workload.graph import NetBuilder, Workload

#: (convolutions, channels) of each group of VGG-16 and of VGG-19
_GROUPS_16 = ((2, 64), (2, 128), (3, 256), (3, 512), (3, 512))
_GROUPS_19 = ((2, 64), (2, 128), (4, 256), (4, 512), (4, 512))


def vgg16(batch: int = 1) -> Workload:
    """VGG-16 (config D) on a 224x224x3 image."""
    b = NetBuilder("vgg16", batch)
    x = b.input("input", 3, 224, 224)
    for g, (n, c) in enumerate(_GROUPS_16, start=1):
        for i in range(1, n + 1):
            x = b.conv(f"conv{g}_{i}", x, c, 3)
        x = b.pool(f"pool{g}", x, 2, stride=2)
    x = b.fc("fc6", x, 4096)
    x = b.fc("fc7", x, 4096)
    b.fc("fc8", x, 1000)
    return b.build()


def vgg19(batch: int = 1) -> Workload:
    """The SoMa reference's VGG-19 (config E without fc) on a 224x224x3 image."""
    b = NetBuilder("vgg19", batch)
    x = b.input("input", 3, 224, 224)
    k = 0
    for g, (n, c) in enumerate(_GROUPS_19, start=1):
        for _ in range(n):
            k += 1
            x = b.conv(f"conv{k}", x, c, 3)
        x = b.pool(f"pool{g}", x, 2, stride=2)
    return b.build()
