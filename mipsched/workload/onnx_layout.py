"""How the axes of an ONNX tensor lay out the elements of a mipsched tensor.

The IR stores a feature map per sample as (C, H, W); ONNX tensors are N-dimensional and
layout ops (Reshape, Transpose, Flatten, Squeeze, Unsqueeze) rearrange them without moving
data in the model. A `View` follows such rearrangements: each ONNX axis is a sequence of
*atoms* (label, size), where the label says which IR dimension the atom's elements run
along: ``n`` batch, ``c`` channels / features, ``g`` the outer (head) part of a split
channel axis, ``h`` height / tokens, ``w`` width. Atoms of size 1 are dropped, so an axis
of size 1 has no atoms. A reshape that cuts or merges axes along atom boundaries (or cuts
one atom in two) has a view; any other has none, and the importer reports it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mipsched.workload.layer import Shape

Atom = tuple[str, int]
Axis = tuple[Atom, ...]
CHANNEL = frozenset("cg")
SPATIAL = frozenset("hw")
BATCH = frozenset("n")
LEAD = frozenset("ng")
#: The natural layout of an ONNX tensor of each rank: the label of each axis (batch,
#: channels / features, height / tokens, width). Network inputs are read this way, and
#: mipsched writes every tensor this way.
LAYOUTS = {4: "nchw", 3: "nhc", 2: "nc"}
#: The labels of the IR axes 0 (C), 1 (H) and 2 (W), as in Layer.perm.
IR_AXES = "chw"


def axis_of(label: str, size: int) -> Axis:
    """The axis made of one atom (no atom when `size` is 1)."""
    return ((label, size),) if size > 1 else ()


def _normal(axis: Axis) -> Axis:
    """Merges neighbouring atoms that read as one: equal labels, or a head part followed
    by its channels (g, c) -> c."""
    out: list[Atom] = []
    for label, size in axis:
        if size == 1:
            continue
        if out and (out[-1][0] == label or (out[-1][0], label) == ("g", "c")):
            out[-1] = (label, out[-1][1] * size)
        else:
            out.append((label, size))
    return tuple(out)


@dataclass(frozen=True)
class View:
    """The ONNX axes of IR tensor `tensor` (a network input or a layer)."""

    tensor: str
    axes: tuple[Axis, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "axes", tuple(_normal(a) for a in self.axes))

    @property
    def dims(self) -> tuple[int, ...]:
        """The ONNX shape, batch included."""
        return tuple(math.prod(size for _, size in axis) for axis in self.axes)

    def labels(self, axis: int) -> set[str]:
        """The labels of the atoms of ONNX axis `axis` (empty for a size-1 axis)."""
        return {label for label, _ in self.axes[axis]}

    def size(self, labels: frozenset[str], axes: slice = slice(None)) -> int:
        """Product of the atoms with one of `labels` on the axes `axes`."""
        return math.prod(size for axis in self.axes[axes] for label, size in axis
                         if label in labels)

    def ir_shape(self) -> Shape:
        """The per-sample IR shape (C, H, W) of the viewed tensor."""
        return Shape(self.size(CHANNEL), self.size(frozenset("h")), self.size(frozenset("w")))

    def fits(self, *roles: frozenset[str]) -> bool:
        """Whether the view has one axis per role, each axis holding only atoms whose
        labels the role allows."""
        return len(roles) == len(self.axes) and all(
            self.labels(k) <= role for k, role in enumerate(roles))

    def permute(self, perm: list[int]) -> View:
        """The view after a Transpose by `perm` (ONNX axis j is axis perm[j])."""
        return View(self.tensor, tuple(self.axes[p] for p in perm))

    def reshape(self, dims: tuple[int, ...]) -> View | None:
        """The view after a reshape to `dims` (row-major), None when the reshape does not
        cut along atoms."""
        queue = [atom for axis in self.axes for atom in axis]
        axes: list[Axis] = []
        for dim in dims:
            need, axis = dim, []
            while need > 1:
                if not queue:
                    return None
                label, size = queue[0]
                if need % size == 0:
                    axis.append(queue.pop(0))
                    need //= size
                elif size % need == 0:  # cut the atom: its outer part lands here
                    axis.append(("g" if label == "c" else label, need))
                    queue[0] = (label, size // need)
                    need = 1
                else:
                    return None
            axes.append(tuple(axis))
        return None if queue else View(self.tensor, tuple(axes))

    def renamed(self, tensor: str) -> View:
        """The same layout for another IR tensor (a layer's output)."""
        return View(tensor, self.axes)
