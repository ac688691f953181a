"""The least cycles per output position that any tile of a layer takes, read from the cost
model itself by trying every tile box.

A tile's cost depends only on its layer and its extents (b samples x h rows x w columns,
all channels; `cost.tile`), and every tile of a layer is such a box. So if every output
position of the layer is needed (every schedule computes all of them, `needed.py`), its
tiles together take at least (least over all boxes of tile cycles / (b h w)) x (batch x
H x W) cycles, whichever boxes a schedule uses. The closed form in `bounds` charges the
fastest unrolling; the cost model keeps, per box, the mapping of least energy x time, which
can be slower: GPT-2 XL's per-head key projection on cloud at batch 1 never runs below 7
cycles per position (the closed form says 6.25), worth 2.5 % of that network's compute.

Trying every box is exact but takes B x H x W cost look-ups per layer (about 0.1 ms each),
so layers with more than MAX_BOXES boxes are left to the closed form, and the layers are
tried largest compute first until a deadline: whatever is found by then is proven.
"""

from __future__ import annotations

import time
from fractions import Fraction

from mipsched.cost.core_array import NoMappingError
from mipsched.cost.tile import tile_cost
from mipsched.formulations.needed import needed_masks
from mipsched.hw.model import Hardware
from mipsched.workload.graph import Workload
from mipsched.workload.layer import MAC_OPS, Region

MAX_BOXES = 20_000
"""Most boxes (batch x rows x columns) a layer may have to be tried: about 2 s."""


def least_box_rates(workload: Workload, hw: Hardware, closed_form: dict[str, Fraction],
                    deadline: float | None = None) -> dict[str, Fraction]:
    """Per PE-array layer whose every output position is needed and which has at most
    MAX_BOXES boxes, the least tile cycles per position over all its boxes, where that
    beats its `closed_form` cycles (bounds.layer_compute_cycles) / its positions. Layers
    are tried largest `closed_form` first until `deadline` (time.perf_counter()); a
    layer cut short by it is left out."""
    masks = needed_masks(workload)
    found: dict[str, Fraction] = {}
    for name in sorted(closed_form, key=lambda n: -closed_form[n]):
        layer = workload.layers[name]
        positions = workload.batch * layer.out.h * layer.out.w
        if layer.op not in MAC_OPS or positions > MAX_BOXES or not masks[name].all():
            continue
        rate = _least_rate(workload, hw, name, closed_form[name] / positions, deadline)
        if rate is not None:
            found[name] = rate
        if deadline is not None and time.perf_counter() >= deadline:
            break
    return found


def _least_rate(workload: Workload, hw: Hardware, name: str, enough: Fraction,
                deadline: float | None) -> Fraction | None:
    """Least tile cycles per position of layer `name` over every box, if above `enough`
    (cycles per position); None when a box reaches `enough` (larger boxes are tried
    first: they usually do, after one look-up), the deadline passes first or no box
    maps onto the PE array."""
    layer = workload.layers[name]
    ins = workload.in_shapes(name)
    best: Fraction | None = None
    for b in range(workload.batch, 0, -1):
        if deadline is not None and time.perf_counter() >= deadline:
            return None
        for h in range(layer.out.h, 0, -1):
            for w in range(layer.out.w, 0, -1):
                try:
                    cycles = tile_cost(hw, layer, ins, Region(0, b, 0, h, 0, w),
                                       workload.elem_bytes).cycles
                except NoMappingError:
                    continue
                rate = Fraction(cycles, b * h * w)
                if rate <= enough:
                    return None
                if best is None or rate < best:
                    best = rate
    return best
