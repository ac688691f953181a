"""The least cycles per needed output position that any tile of a layer takes, read from
the cost model itself by trying the tile boxes.

A tile's cost depends only on its layer and its extents (b samples x h rows x w columns,
all channels; `cost.tile`), and every tile of a layer is such a box. A box of b x h x w
holds at most b x m(h, w) of the positions every schedule computes (`needed.py`), m(h, w)
being the most needed positions in any h x w window of the plane (all of h x w when the
layer must compute every position). The needed positions are covered by the layer's
tiles, so its tiles together take at least (least over all boxes of tile cycles /
(b x m(h, w))) x (needed positions) cycles, whichever boxes a schedule uses.

The closed form in `bounds` charges the fastest unrolling without its ceilings; the cost
model keeps, per box, the mapping of least energy x time, which can be slower: GPT-2 XL's
per-head key projection on cloud at batch 1 never runs below 7 cycles per position (the
closed form says 6.25), worth 2.5 % of that network's compute. Where a layer must compute
only some positions (ResNet's last 3x3 of a stage, read by a stride-2 1x1 conv), the
sparse boxes the closed form allows are slower still: on cloud at batch 16, ResNet-50's
conv_2_2_b takes at least 28,224 cycles against the closed form's 12,936.

Every box costs at least the closed-form tile floor of its n = b h w positions
(`bounds.TileFloor`), so the boxes are tried in increasing order of floor / (b x m(h, w))
and the search stops at the first box whose floor per needed position reaches the best
rate found: no later box can beat it. A box also costs at least its least compute over
the unrollings, ceilings included (`core_array.compute_floor`, about 20 us), so a box
whose compute floor reaches the best rate is passed over without the cost model's
mapping search (about 0.3 ms). Layers are tried largest compute first until a deadline,
and whatever is found by then is proven.
"""

from __future__ import annotations

import time
from fractions import Fraction

import numpy as np

from mipsched.cost.core_array import NoMappingError, compute_floor, conv_shape
from mipsched.cost.tile import tile_cost
from mipsched.formulations.bounds import TileFloor, tile_floor, window_maxima
from mipsched.formulations.needed import needed_masks
from mipsched.hw.model import Hardware
from mipsched.workload.graph import Workload
from mipsched.workload.layer import MAC_OPS, Region

MAX_BOXES = 200_000
"""Most boxes (batch x rows x columns) a layer may have to be ordered: ResNet's 56 x 56
planes at batch 16 have 50,176."""
#: Look-ups between two checks of the deadline.
CHECK_EVERY = 32
#: Relative margin below which a box's floating-point floor is not trusted to exceed the
#: best rate (the stop test), so rounding never skips a box that could beat it.
MARGIN = 1e-9


def least_box_rates(workload: Workload, hw: Hardware, closed_form: dict[str, Fraction],
                    deadline: float | None = None) -> dict[str, Fraction]:
    """Per PE-array layer with at most MAX_BOXES boxes, the least tile cycles per needed
    position over all its boxes, where that beats its `closed_form` cycles
    (bounds.layer_compute_cycles) / its needed positions. Layers are tried largest
    `closed_form` first until `deadline` (time.perf_counter()); a layer cut short by it
    is left out."""
    masks = needed_masks(workload)
    found: dict[str, Fraction] = {}
    for name in sorted(closed_form, key=lambda n: -closed_form[n]):
        layer = workload.layers[name]
        mask = masks[name]
        if (layer.op not in MAC_OPS or not mask.any()
                or workload.batch * mask.size > MAX_BOXES):
            continue
        enough = closed_form[name] / (workload.batch * int(mask.sum()))
        rate = _least_rate(workload, hw, name, mask, enough, deadline)
        if rate is not None:
            found[name] = rate
        if deadline is not None and time.perf_counter() >= deadline:
            break
    return found


def _least_rate(workload: Workload, hw: Hardware, name: str, mask: np.ndarray,
                enough: Fraction, deadline: float | None) -> Fraction | None:
    """Least tile cycles per needed position of layer `name` (needed positions: `mask`,
    every sample alike) over every box, if above `enough` (cycles per needed position);
    None when a box reaches `enough` (the box of least floor, tried first, usually
    does), the deadline passes first or no box maps onto the PE array."""
    layer = workload.layers[name]
    ins = workload.in_shapes(name)
    boxes = _boxes_by_floor(tile_floor(workload, hw, layer), mask, workload.batch)
    best: Fraction | None = None
    for tried, (floor, b, h, w, most) in enumerate(boxes):
        if best is not None and floor > float(best) * (1 + MARGIN):
            break
        if deadline is not None and tried % CHECK_EVERY == 0 \
                and time.perf_counter() >= deadline:
            return None
        if best is not None and Fraction(compute_floor(
                hw, conv_shape(layer, ins, b, h, w), workload.elem_bytes), b * most) >= best:
            continue
        try:
            cycles = tile_cost(hw, layer, ins, Region(0, b, 0, h, 0, w),
                               workload.elem_bytes).cycles
        except NoMappingError:
            continue
        rate = Fraction(cycles, b * most)
        if rate <= enough:
            return None
        if best is None or rate < best:
            best = rate
    return best


def _boxes_by_floor(floor: TileFloor, mask: np.ndarray, batch: int
                    ) -> list[tuple[float, int, int, int, int]]:
    """(floor cycles per needed position, b, h, w, m(h, w)) of every box holding a needed
    position, least floor first (floating point: for ordering and stopping only)."""
    windows = np.array(window_maxima(mask), dtype=np.int64).reshape(-1, 3)
    samples = np.arange(1, batch + 1, dtype=np.int64)
    b = np.repeat(samples, len(windows))
    h, w, most = (np.tile(windows[:, k], batch) for k in range(3))
    n = (b * h * w).astype(np.float64)
    per_needed = np.maximum(float(floor.per_position) * n,
                            float(floor.reads) * n + float(floor.weights)) / (b * most)
    order = np.argsort(per_needed, kind="stable")
    return [(float(per_needed[i]), int(b[i]), int(h[i]), int(w[i]), int(most[i]))
            for i in order]
