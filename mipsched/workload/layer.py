"""Value types of the workload IR: operators, shapes, regions and layers.

Every feature map is stored per sample as (channels, height, width); the batch size is a
property of the whole workload. Transformer activations use C = features, H = tokens, W = 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple


class Op(StrEnum):
    """Operator of a layer. MAC ops run on the PE array, the others on the vector unit."""

    CONV = "conv"  # grouped convolution (groups, stride, padding, dilation)
    DEPTHWISE_CONV = "depthwise_conv"  # conv with groups == in channels == out channels
    FC = "fc"  # fully connected over the whole (C, H, W) input of a sample
    MATMUL = "matmul"  # activation (tokens x C) times a weight matrix (C x K)
    MATMUL_ACT = "matmul_act"  # two activations, per head: QK^T or scores . V
    MAX_POOL = "max_pool"
    AVG_POOL = "avg_pool"
    GLOBAL_POOL = "global_pool"  # average over the whole H x W plane
    ADD = "add"  # element-wise sum of all inputs
    MUL = "mul"  # element-wise product of all inputs
    SOFTMAX = "softmax"  # over the channel axis (keys, for attention scores)
    LAYERNORM = "layernorm"  # over the channel axis (features)
    GELU = "gelu"  # element-wise activation
    CONCAT = "concat"  # along `axis` ("c" or "h"); a layout change, or a copy (`copy`)
    TRANSPOSE = "transpose"  # permutes the (C, H, W) axes (`perm`); moves every element


#: Operators executed on the PE array (MACs); every other op runs on the vector unit.
MAC_OPS = frozenset({Op.CONV, Op.DEPTHWISE_CONV, Op.FC, Op.MATMUL, Op.MATMUL_ACT})
#: Operators that own a weight tensor loaded from DRAM.
WEIGHTED_OPS = frozenset({Op.CONV, Op.DEPTHWISE_CONV, Op.FC, Op.MATMUL})
#: Operators that read several inputs as one, concatenated along channels in input order
#: (the SoMa reference's implicit concat: GoogLeNet's modules read their branches directly,
#: no concat layer in between).
CONCAT_READERS = frozenset({Op.CONV, Op.MAX_POOL, Op.AVG_POOL, Op.GLOBAL_POOL, Op.FC,
                            Op.MATMUL})


class Shape(NamedTuple):
    """Per-sample feature-map shape: channels, height, width (elements)."""

    c: int
    h: int
    w: int

    @property
    def elems(self) -> int:
        """Elements per sample: C x H x W."""
        return self.c * self.h * self.w


class Region(NamedTuple):
    """Half-open box of a feature map over batch, height and width (all channels)."""

    b0: int
    b1: int
    h0: int
    h1: int
    w0: int
    w1: int

    @property
    def batch(self) -> int:
        """Samples in the region."""
        return self.b1 - self.b0

    @property
    def height(self) -> int:
        """Rows in the region."""
        return self.h1 - self.h0

    @property
    def width(self) -> int:
        """Columns in the region."""
        return self.w1 - self.w0

    def elems(self, channels: int) -> int:
        """Elements of the region with `channels` channels."""
        return channels * self.batch * self.height * self.width

    def hull(self, other: Region) -> Region:
        """Smallest region containing both."""
        return Region(
            min(self.b0, other.b0),
            max(self.b1, other.b1),
            min(self.h0, other.h0),
            max(self.h1, other.h1),
            min(self.w0, other.w0),
            max(self.w1, other.w1),
        )


def full_region(batch: int, shape: Shape) -> Region:
    """The region covering a whole feature map of `batch` samples."""
    return Region(0, batch, 0, shape.h, 0, shape.w)


@dataclass(frozen=True)
class Layer:
    """One node of the workload DAG.

    `inputs` names producing layers or network inputs, in operand order (for MATMUL_ACT:
    left operand, then right operand; for CONCAT: concatenation order; for the ops of
    CONCAT_READERS, several inputs are read concatenated along channels; for ADD / MUL,
    inputs of one shape are the operands, else the inputs read concatenated along
    channels are cut into operands of `out.c` channels). `out` is the
    per-sample output shape. `padding` holds the leading pads (top, left), `padding_end`
    the trailing ones (bottom, right); they differ where a window does not fit the input
    evenly (the SoMa reference pads floor(total / 2) in front). For MATMUL_ACT, `groups`
    is the number of attention heads and `transpose_rhs` says whether the right operand is
    used transposed (QK^T) or in weight layout ([heads x out per head, reduction]: P.V, or
    the reference's pre-transposed K). For TRANSPOSE, output axis d is input axis
    `perm[d]` (0 = C, 1 = H, 2 = W). A CONCAT with `copy` moves its data on the vector
    unit (one op per output element); without it the concat is a free layout change.
    """

    name: str
    op: Op
    inputs: tuple[str, ...]
    out: Shape
    kernel: tuple[int, int] = (1, 1)
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int] = (0, 0)
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1
    axis: str = "c"
    transpose_rhs: bool = False
    padding_end: tuple[int, int] | None = None
    """Bottom and right pads; None (normalised to `padding`) means symmetric."""
    perm: tuple[int, int, int] = (0, 1, 2)
    copy: bool = False

    def __post_init__(self) -> None:
        if self.padding_end is None:
            object.__setattr__(self, "padding_end", self.padding)

    @property
    def has_weights(self) -> bool:
        """Whether the op has weights (conv, depthwise conv, fc, matmul)."""
        return self.op in WEIGHTED_OPS

    def pads(self, axis: int) -> tuple[int, int]:
        """(leading, trailing) padding along axis 0 (height) or 1 (width)."""
        assert self.padding_end is not None
        return self.padding[axis], self.padding_end[axis]
