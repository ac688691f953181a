"""GoogLeNet (Inception v1) of Szegedy et al. (CVPR 2015), Table 1, as the SoMa reference
builds it, layer for layer.

224x224x3 input; conv1 7x7/2; pool1 3x3/2; conv2_3x3_reduce (1x1, 64) and conv2_3x3 (192);
pool2 3x3/2; nine inception modules with pools 3x3/2 after 3b (pool3) and 4e (pool4); pool5
7x7/7 (average); fc 1000. A module has four branches: 1x1; 1x1 reduce -> 3x3; 1x1 reduce
-> 5x5; pool 3x3/1 -> 1x1 pool projection. There is no concat layer: as in the reference,
every layer after a module reads its four branches directly, concatenated along channels
(1x1, 3x3, 5x5, pool projection). Windows are padded as the reference pads them ('same',
floor(total / 2) in front). ReLU is fused; LRN, dropout and the auxiliary classifiers are
not modelled.
"""

from __future__ import annotations

from mipsched.workload.graph import NetBuilder, Workload
from mipsched.workload.zoo import same

#: module -> (#1x1, #3x3 reduce, #3x3, #5x5 reduce, #5x5, pool proj); None: pool 3x3/2
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


def _inception(b: NetBuilder, name: str, x: list[str],
               widths: tuple[int, int, int, int, int, int]) -> list[str]:
    """One module reading `x` (one tensor or a module's branches); returns its branches."""
    n1, r3, n3, r5, n5, proj = widths
    p = f"inception_{name}"
    b1 = same.conv(b, f"{p}_1x1", x, n1, 1)
    b3 = same.conv(b, f"{p}_3x3", same.conv(b, f"{p}_3x3_reduce", x, r3, 1), n3, 3)
    b5 = same.conv(b, f"{p}_5x5", same.conv(b, f"{p}_5x5_reduce", x, r5, 1), n5, 5)
    bp = same.conv(b, f"{p}_pool_proj", same.pool(b, f"{p}_pool", x, 3, stride=1), proj, 1)
    return [b1, b3, b5, bp]


def googlenet(batch: int = 1) -> Workload:
    """The SoMa reference's GoogLeNet on a 224x224x3 image."""
    b = NetBuilder("googlenet", batch)
    x = b.input("input", 3, 224, 224)
    x = same.conv(b, "conv1", x, 64, 7, stride=2)
    x = same.pool(b, "pool1", x, 3, stride=2)
    x = same.conv(b, "conv2_3x3_reduce", x, 64, 1)
    x = same.conv(b, "conv2_3x3", x, 192, 3)
    branches = [same.pool(b, "pool2", x, 3, stride=2)]
    for name, widths in _MODULES:
        if widths is None:
            branches = [same.pool(b, name, branches, 3, stride=2)]
        else:
            branches = _inception(b, name, branches, widths)
    x = same.pool(b, "pool5", branches, 7, stride=7, kind="avg")
    b.fc("fc", x, 1000)
    return b.build()
