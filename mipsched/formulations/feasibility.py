"""Why no schedule fits: a necessary condition checked per layer before any search.

While any tile of a layer runs, the buffer holds at least the layer's whole weights (they
are loaded once per FLG and live over all its tiles), the inputs that tile reads (on chip
or loaded for it) and the tile's output. The smallest tile of any schedule is one sample
and one output pixel (all channels), whose inputs are smallest where padding clips the
window; so weights + that tile's inputs + its output <= capacity is necessary.
"""

from __future__ import annotations

from dataclasses import dataclass

from mipsched.hw.model import Hardware
from mipsched.workload import ops
from mipsched.workload.graph import Workload
from mipsched.workload.layer import Region


@dataclass(frozen=True)
class LayerNeed:
    """The least buffer a layer needs while one of its tiles runs (bytes)."""

    layer: str
    weight_bytes: int
    input_bytes: dict[str, int]
    output_bytes: int

    @property
    def total(self) -> int:
        """Weights + inputs + output (bytes)."""
        return self.weight_bytes + sum(self.input_bytes.values()) + self.output_bytes


def layer_need(workload: Workload, name: str) -> LayerNeed:
    """The least buffer (bytes) layer `name` needs while one of its tiles runs: its
    weights, and the inputs and output of its smallest one-pixel tile."""
    layer = workload.layers[name]
    ins = workload.in_shapes(name)
    eb = workload.elem_bytes
    h, w = layer.out.h, layer.out.w
    corners = {(0, 0), (0, w - 1), (h - 1, 0), (h - 1, w - 1), (h // 2, w // 2)}
    best: dict[str, int] | None = None
    for y, x in corners:
        tile = Region(0, 1, y, y + 1, x, x + 1)
        reads: dict[str, int] = {}
        for k, src in enumerate(layer.inputs):
            elems = ops.input_elems(layer, k, ins, tile)
            if elems is not None:
                reads[src] = reads.get(src, 0) + elems * eb
        if best is None or sum(reads.values()) < sum(best.values()):
            best = reads
    return LayerNeed(name, workload.weight_bytes(name), best or {}, layer.out.c * eb)


def explain_infeasibility(workload: Workload, hw: Hardware) -> str | None:
    """A sentence naming the first layer that cannot fit in any schedule (None: every
    layer passes the necessary condition)."""
    cap = hw.gbuf.capacity_bytes
    for name in workload.layers:
        need = layer_need(workload, name)
        if need.total > cap:
            inputs = ", ".join(f"input '{src}' {b:,} B" for src, b in need.input_bytes.items())
            return (f"layer '{name}' fits in no schedule: while one of its tiles runs the "
                    f"buffer must hold its weights {need.weight_bytes:,} B"
                    + (f", {inputs}" if inputs else "")
                    + f" and the output tile {need.output_bytes:,} B = {need.total:,} B, "
                    f"more than the {cap:,} B buffer (by {need.total - cap:,} B)")
    return None
