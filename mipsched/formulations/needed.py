"""What every schedule must compute and load: needed output positions of each layer and
needed elements of each network input, propagated back from the network outputs.

A network output is computed whole. Any other layer must compute at least the positions
(sample, row, column; all channels) its consumers read *to compute what they must
compute* — not what they would read for their whole output: a stride-2 1x1 conv reads
rows 0, 2, ..., so the element-wise layer before it, and that layer's producers, need
only those rows (SoMa reference: ResNet v1's `conv_2_2_*` compute 55 x 55 of 56 x 56
when fused with `conv_3_0_a`, and one-row tiles would compute only the even rows).

Why this holds for every schedule: a tile computes an output region only after every
input position it reads has been computed (by a tile of its FLG or an earlier stored or
held share), and tiles never compute less than their region; so by induction from the
outputs, every position in these sets is computed at least once, whatever the tiling.

Masks are per sample (all samples alike): a boolean (H, W) array per layer; a network
input's needed elements are counted over (C, H, W), because a transpose reading it may
need only some channels at a position.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from mipsched.workload.graph import Workload
from mipsched.workload.layer import Layer, Op, Shape

_WINDOWS = (Op.CONV, Op.DEPTHWISE_CONV, Op.MAX_POOL, Op.AVG_POOL)


@dataclass(frozen=True)
class Needed:
    """Per-sample needed positions of every layer and needed elements of every input."""

    positions: dict[str, int]
    """Layer -> output positions (rows x columns) per sample that every schedule computes."""
    input_elems: dict[str, int]
    """Network input -> elements (C x H x W) per sample that every schedule loads."""


#: One read of a network input: (input, reading layer, index of the input in its inputs).
#: mipsched loads a network input separately for each such read (placement.make_segment:
#: every layer loads the part of it its tiles read), so each read is a DRAM load.
InputRead = tuple[str, str, int]


def needed(workload: Workload, whole: frozenset[str] | None = None) -> Needed:
    """Needed positions and input elements, by back-propagation from the layers computed
    whole: `whole` (default: the network outputs). With `whole` = {j}: what computing
    all of j needs."""
    whole = frozenset(workload.outputs) if whole is None else whole
    masks = _back_propagate(workload, _whole(workload, whole))
    elements: dict[str, np.ndarray] = {
        t: np.zeros((s.c, s.h, s.w), dtype=bool) for t, s in workload.inputs.items()}
    for (tensor, _, _), mask in _input_reads(workload, masks).items():
        elements[tensor] |= mask
    return Needed({n: int(m.sum()) for n, m in masks.items()},
                  {t: int(m.sum()) for t, m in elements.items()})


def read_unit(read: InputRead) -> str:
    """The load unit's name of a read of a network input: 'input -> layer[index]'."""
    tensor, reader, index = read
    return f"{tensor} -> {reader}[{index}]"


def needed_masks(workload: Workload) -> dict[str, np.ndarray]:
    """Per layer, the (H, W) mask (every sample alike) of the output positions every
    schedule computes: back-propagated from the network outputs, as in `needed`."""
    return _back_propagate(workload, _whole(workload, workload.outputs))


def read_needs(workload: Workload) -> dict[InputRead, np.ndarray]:
    """Per read of a network input, the (C, H, W) mask of the elements that read must
    load in every schedule."""
    return _input_reads(workload, _back_propagate(workload,
                                                  _whole(workload, workload.outputs)))


def position_read_needs(workload: Workload, layer: str, row: int, col: int
                        ) -> dict[InputRead, np.ndarray]:
    """Per read of a network input, the (C, H, W) mask of the elements computing output
    position (row, col) of `layer` (every sample alike) loads through it, directly or
    through other layers."""
    seed = np.zeros((workload.layers[layer].out.h, workload.layers[layer].out.w), dtype=bool)
    seed[row, col] = True
    return _input_reads(workload, _back_propagate(workload, {layer: seed}))


def _whole(workload: Workload, layers: Iterable[str]) -> dict[str, np.ndarray]:
    """All-true (H, W) masks of `layers`."""
    return {n: np.ones((workload.layers[n].out.h, workload.layers[n].out.w), dtype=bool)
            for n in layers}


def _back_propagate(workload: Workload, seeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per layer, the (H, W) mask of the output positions computing the `seeds`
    positions needs (the seeds included); layers that feed no seed get empty masks."""
    masks: dict[str, np.ndarray] = {}
    for name in reversed(workload.layers):
        layer = workload.layers[name]
        mask = seeds[name].copy() if name in seeds else np.zeros(
            (layer.out.h, layer.out.w), dtype=bool)
        for v, k in _readers(workload, name):
            mask |= read_mask(workload.layers[v], k, workload.in_shapes(v), masks[v])
        masks[name] = mask
    return masks


def _input_reads(workload: Workload, masks: dict[str, np.ndarray]
                 ) -> dict[InputRead, np.ndarray]:
    """Per read of a network input, the (C, H, W) mask of the elements the layers'
    `masks` read through it."""
    reads = {}
    for tensor, shape in workload.inputs.items():
        for v, k in _readers(workload, tensor):
            reader = workload.layers[v]
            if reader.op == Op.TRANSPOSE:
                mask = transposed_input(reader, shape, masks[v])
            else:
                positions = read_mask(reader, k, workload.in_shapes(v), masks[v])
                mask = np.broadcast_to(positions, (shape.c, shape.h, shape.w))
            reads[(tensor, v, k)] = mask
    return reads


def _readers(workload: Workload, tensor: str) -> list[tuple[str, int]]:
    """(consumer, input index) of every read of `tensor`."""
    return [(v, k) for v in workload.consumers(tensor)
            for k, src in enumerate(workload.layers[v].inputs) if src == tensor]


def read_mask(layer: Layer, index: int, ins: Sequence[Shape], out: np.ndarray
              ) -> np.ndarray:
    """(H, W) mask of the positions of input `index` that computing the output positions
    in `out` reads (all channels of each position, except through a transpose, where a
    position counts when any of its channels is read)."""
    src = ins[index]
    op = layer.op
    if not out.any():
        return np.zeros((src.h, src.w), dtype=bool)
    if op in _WINDOWS:
        return _window_reads(layer, src, out)
    if op in (Op.FC, Op.GLOBAL_POOL) or (op == Op.MATMUL_ACT and index == 1):
        return np.ones((src.h, src.w), dtype=bool)
    if op == Op.TRANSPOSE:
        return transposed_input(layer, src, out).any(axis=0)
    if op == Op.CONCAT and layer.axis == "h":
        offset = sum(s.h for s in ins[:index])
        return out[offset:offset + src.h].copy()
    return out.copy()


def _window_reads(layer: Layer, src: Shape, out: np.ndarray) -> np.ndarray:
    """Input positions that some kernel tap of a needed output position reads.

    The taps of output position (r, c) read rows r*sh - top + ki*dh and columns
    c*sw - left + kj*dw: the product of a row set and a column set, so the reads are the
    needed positions spread onto the stride grid, dilated by the kernel's row offsets and
    then by its column offsets (kh + kw array passes, not kh x kw scatters), cut to the
    input plane."""
    (sh, sw), (dh, dw) = layer.stride, layer.dilation
    (kh, kw), (top, left) = layer.kernel, layer.padding
    span_h, span_w = (out.shape[0] - 1) * sh + 1, (out.shape[1] - 1) * sw + 1
    spread = np.zeros((span_h, span_w), dtype=bool)
    spread[::sh, ::sw] = out
    tall = np.zeros((span_h + (kh - 1) * dh, span_w), dtype=bool)
    for ki in range(kh):
        tall[ki * dh:ki * dh + span_h] |= spread
    wide = np.zeros((tall.shape[0], span_w + (kw - 1) * dw), dtype=bool)
    for kj in range(kw):
        wide[:, kj * dw:kj * dw + span_w] |= tall
    inside = wide[top:top + src.h, left:left + src.w]  # pads are never negative
    reads = np.zeros((src.h, src.w), dtype=bool)
    reads[:inside.shape[0], :inside.shape[1]] = inside
    return reads


def transposed_input(layer: Layer, src: Shape, out: np.ndarray) -> np.ndarray:
    """(C, H, W) mask of the input elements a transpose reads to produce every channel of
    the output positions in `out` (output axis d is input axis perm[d])."""
    out3 = np.broadcast_to(out, (layer.out.c, *out.shape))
    back = tuple(layer.perm.index(a) for a in range(3))
    mask = np.ascontiguousarray(np.transpose(out3, back))
    assert mask.shape == (src.c, src.h, src.w)
    return mask
