"""Tiny networks for exact search and hand-checked tests."""

from __future__ import annotations

from mipsched.workload.graph import NetBuilder, Workload


def chain3(batch: int = 1) -> Workload:
    """Three 3x3 convolutions on a 32x56x56 input (stride 1, 'same' padding)."""
    b = NetBuilder("chain3", batch)
    x = b.input("input", 32, 56, 56)
    for i in range(3):
        x = b.conv(f"conv{i + 1}", x, 32, 3)
    return b.build()


def chain5(batch: int = 1) -> Workload:
    """Five convolutions (3x3, one of stride 2) on a 32x56x56 input."""
    b = NetBuilder("chain5", batch)
    x = b.input("input", 32, 56, 56)
    x = b.conv("conv1", x, 32, 3)
    x = b.conv("conv2", x, 64, 3, stride=2)
    x = b.conv("conv3", x, 64, 3)
    x = b.conv("conv4", x, 64, 1)
    x = b.conv("conv5", x, 64, 3)
    return b.build()


def resblock(batch: int = 1) -> Workload:
    """A ResNet-50 bottleneck block with projection shortcut (conv2_x shapes)."""
    b = NetBuilder("resblock", batch)
    x = b.input("input", 64, 56, 56)
    a = b.conv("conv_a", x, 64, 1)
    a = b.conv("conv_b", a, 64, 3)
    a = b.conv("conv_c", a, 256, 1)
    s = b.conv("shortcut", x, 256, 1)
    b.eltwise("add", [a, s])
    return b.build()


def fsrcnn(batch: int = 1) -> Workload:
    """FSRCNN(d=56, s=12, m=4) of Dong et al. (ECCV 2016) on a 1x64x64 low-res image: the
    8 convolutions up to the upsampling deconvolution (feature extraction 5x5, shrinking
    1x1, four 3x3 mapping layers, expanding 1x1, and the 9x9 reconstruction layer, modelled
    as a 'same' convolution at low resolution)."""
    b = NetBuilder("fsrcnn", batch)
    x = b.input("input", 1, 64, 64)
    x = b.conv("extract", x, 56, 5)
    x = b.conv("shrink", x, 12, 1)
    for i in range(4):
        x = b.conv(f"map{i + 1}", x, 12, 3)
    x = b.conv("expand", x, 56, 1)
    x = b.conv("reconstruct", x, 1, 9)
    return b.build()
