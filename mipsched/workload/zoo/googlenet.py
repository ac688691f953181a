"""GoogLeNet (Inception v1) of Szegedy et al. (CVPR 2015), Table 1.

224x224x3 input; conv 7x7/2; max pool 3x3/2; conv 1x1 (3x3 reduce, 64) and conv 3x3 (192);
max pool 3x3/2; nine inception modules with max pools 3x3/2 after 3b and 4e; avg pool 7x7;
fc 1000. Each module concatenates four branches: 1x1; 1x1 reduce -> 3x3; 1x1 reduce -> 5x5;
max pool 3x3/1 -> 1x1 pool projection. Max pools pad 1 so the map sizes match the table.
ReLU is fused; LRN, dropout and the auxiliary classifiers are not modelled.
"""

from __future__ import annotations

from mipsched.workload.graph import NetBuilder, Workload

#: module -> (#1x1, #3x3 reduce, #3x3, #5x5 reduce, #5x5, pool proj); None: max pool 3x3/2
_MODULES: tuple[tuple[str, tuple[int, int, int, int, int, int] | None], ...] = (
    ("3a", (64, 96, 128, 16, 32, 32)),
    ("3b", (128, 128, 192, 32, 96, 64)),
    ("pool3", None),
    ("4a", (192, 96, 208, 16, 48, 64)),
    ("4b", (160, 112, 224, 24, 64, 64)),
    ("4c", (128, 128, 256, 24, 64, 64)),
    ("4d", (112, 144, 288, 32, 64, 64)),
    ("4e", (256, 160, 320, 32, 128, 128)),
    ("pool4", None),
    ("5a", (256, 160, 320, 32, 128, 128)),
    ("5b", (384, 192, 384, 48, 128, 128)),
)


def _inception(b: NetBuilder, name: str, x: str,
               widths: tuple[int, int, int, int, int, int]) -> str:
    n1, r3, n3, r5, n5, proj = widths
    p = f"inc{name}"
    b1 = b.conv(f"{p}_1x1", x, n1, 1)
    b3 = b.conv(f"{p}_3x3", b.conv(f"{p}_3x3_reduce", x, r3, 1), n3, 3)
    b5 = b.conv(f"{p}_5x5", b.conv(f"{p}_5x5_reduce", x, r5, 1), n5, 5)
    bp = b.conv(f"{p}_pool_proj", b.pool(f"{p}_pool", x, 3, stride=1, padding=1), proj, 1)
    return b.concat(p, [b1, b3, b5, bp])


def googlenet(batch: int = 1) -> Workload:
    """GoogLeNet (Table 1) on a 224x224x3 image."""
    b = NetBuilder("googlenet", batch)
    x = b.input("input", 3, 224, 224)
    x = b.conv("conv1", x, 64, 7, stride=2)
    x = b.pool("pool1", x, 3, stride=2, padding=1)
    x = b.conv("conv2_reduce", x, 64, 1)
    x = b.conv("conv2", x, 192, 3)
    x = b.pool("pool2", x, 3, stride=2, padding=1)
    for name, widths in _MODULES:
        if widths is None:
            x = b.pool(name, x, 3, stride=2, padding=1)
        else:
            x = _inception(b, name, x, widths)
    x = b.pool("pool5", x, 7, stride=1, kind="avg")
    b.fc("fc", x, 1000)
    return b.build()
