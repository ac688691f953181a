"""needed.read_mask on windows (convs, pools) against the definition, tap by tap."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mipsched.formulations.needed import read_mask
from mipsched.workload.layer import Layer, Op, Shape


def _taps_read(layer: Layer, src: Shape, out: np.ndarray) -> np.ndarray:
    """The definition: every tap (ki, kj) of every needed output position (r, c) reads
    input (r*sh - top + ki*dh, c*sw - left + kj*dw) where that lies in the plane."""
    reads = np.zeros((src.h, src.w), dtype=bool)
    (sh, sw), (dh, dw), (top, left) = layer.stride, layer.dilation, layer.padding
    for r, c in zip(*np.nonzero(out), strict=True):
        for ki in range(layer.kernel[0]):
            for kj in range(layer.kernel[1]):
                y, x = r * sh - top + ki * dh, c * sw - left + kj * dw
                if 0 <= y < src.h and 0 <= x < src.w:
                    reads[y, x] = True
    return reads


@st.composite
def _windows(draw: st.DrawFn) -> tuple[Layer, Shape, np.ndarray]:
    """A conv or pool window (kernel 1-7, stride 1-3, dilation 1-2, padding 0 to the
    kernel's reach), its input plane and a random mask of needed output positions."""
    kh, kw = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    top, left = draw(st.integers(0, (kh - 1) * dh)), draw(st.integers(0, (kw - 1) * dw))
    h_in, w_in = draw(st.integers(1, 20)), draw(st.integers(1, 20))
    out_h = (h_in + 2 * top - (kh - 1) * dh - 1) // sh + 1
    out_w = (w_in + 2 * left - (kw - 1) * dw - 1) // sw + 1
    out_h, out_w = max(out_h, 1), max(out_w, 1)
    op = draw(st.sampled_from([Op.CONV, Op.MAX_POOL]))
    layer = Layer("w", op, ("x",), Shape(4, out_h, out_w), kernel=(kh, kw),
                  stride=(sh, sw), padding=(top, left), dilation=(dh, dw))
    bits = draw(st.lists(st.booleans(), min_size=out_h * out_w, max_size=out_h * out_w))
    return layer, Shape(4, h_in, w_in), np.array(bits, dtype=bool).reshape(out_h, out_w)


@settings(max_examples=300, deadline=None)
@given(_windows())
def test_window_reads_are_the_taps_of_the_needed_positions(case) -> None:
    layer, src, out = case
    assert np.array_equal(read_mask(layer, 0, [src], out), _taps_read(layer, src, out))


def test_stride_two_one_by_one_reads_the_even_positions() -> None:
    """ResNet v1's conv_3_0_a: a 1x1 stride-2 conv needs only the even rows and columns
    of the 56 x 56 plane before it."""
    layer = Layer("conv_3_0_a", Op.CONV, ("x",), Shape(128, 28, 28), stride=(2, 2))
    reads = read_mask(layer, 0, [Shape(256, 56, 56)], np.ones((28, 28), dtype=bool))
    assert reads.sum() == 28 * 28
    assert reads[::2, ::2].all() and not reads[1::2].any() and not reads[:, 1::2].any()
