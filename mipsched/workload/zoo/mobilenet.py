"""MobileNetV2 (width 1.0) of Sandler et al. (CVPR 2018), Table 2.

224x224x3 input; conv 3x3/2 to 32; inverted residual bottlenecks from the (t, c, n, s)
table: 1x1 expansion to t x in channels (omitted when t = 1, as in the reference
implementation), 3x3 depthwise with stride s on the first block of a group, linear 1x1
projection to c, and a residual add when stride is 1 and in == out channels; 1x1 conv to
1280; global average pool; fc 1000 (the final 1x1 conv on a 1x1 map). ReLU6 and batch
norm are fused and not modelled.
"""

from __future__ import annotations

from mipsched.workload.graph import NetBuilder, Workload

#: (expansion t, out channels c, repeats n, first stride s)
_BOTTLENECKS = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


def mobilenet_v2(batch: int = 1) -> Workload:
    """MobileNetV2, width 1.0, on a 224x224x3 image."""
    b = NetBuilder("mobilenet_v2", batch)
    x = b.input("input", 3, 224, 224)
    x = b.conv("conv1", x, 32, 3, stride=2)
    k = 0
    for t, c, n, s in _BOTTLENECKS:
        for i in range(n):
            k += 1
            stride = s if i == 0 else 1
            cin = b.shape(x).c
            y = b.conv(f"b{k}_expand", x, t * cin, 1) if t != 1 else x
            y = b.depthwise(f"b{k}_dw", y, 3, stride=stride)
            y = b.conv(f"b{k}_project", y, c, 1)
            x = b.eltwise(f"b{k}_res", [y, x]) if stride == 1 and cin == c else y
    x = b.conv("conv_last", x, 1280, 1)
    x = b.global_pool("pool", x)
    b.fc("fc", x, 1000)
    return b.build()
