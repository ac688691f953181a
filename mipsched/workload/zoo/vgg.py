"""VGG-16 (configuration D) of Simonyan & Zisserman (ICLR 2015), Table 1.

224x224x3 input; 13 3x3 convolutions (stride 1, 'same' padding) in five groups, each
followed by a 2x2/2 max pool; fc 4096, 4096, 1000 (fc6 reads the flattened 7x7x512 map).
ReLU is fused and not modelled.
"""

from __future__ import annotations

from mipsched.workload.graph import NetBuilder, Workload

#: (convolutions, channels) of each group
_GROUPS = ((2, 64), (2, 128), (3, 256), (3, 512), (3, 512))


def vgg16(batch: int = 1) -> Workload:
    """VGG-16 (config D) on a 224x224x3 image."""
    b = NetBuilder("vgg16", batch)
    x = b.input("input", 3, 224, 224)
    for g, (n, c) in enumerate(_GROUPS, start=1):
        for i in range(1, n + 1):
            x = b.conv(f"conv{g}_{i}", x, c, 3)
        x = b.pool(f"pool{g}", x, 2, stride=2)
    x = b.fc("fc6", x, 4096)
    x = b.fc("fc7", x, 4096)
    b.fc("fc8", x, 1000)
    return b.build()
