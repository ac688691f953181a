"""Lower bounds on the latency of every schedule of a workload on a hardware.

`compulsory_bound` holds for all six attributes:

- compute: every tile takes at least (its MACs / MACs per cycle) or (its vector ops /
  vector ops per cycle) cycles, since no mapping uses more than the whole PE array or
  vector unit, and tiling only adds work (halo recompute), never removes it. Tiles run one
  at a time, so latency >= ceil(total MACs / MACs per cycle + total vector ops / vector
  ops per cycle).
- DRAM: every weight is loaded at least once (once per FLG); of every network input, the
  elements some consumer actually reads (a window with stride > kernel skips rows and
  columns, so only the rows and columns touched by a kernel tap count; the largest such
  set over the input's consumers) are loaded at least once; every network output is
  stored at least once. Each transfer takes >= bytes / bandwidth cycles and DRAM serves
  one transfer at a time, so latency >= ceil(compulsory bytes / bytes per cycle).
Latency >= the max of the two. Tests check it against the schedules of every method and
random schedules of random networks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mipsched.hw.model import Hardware
from mipsched.workload.graph import Workload
from mipsched.workload.layer import Layer, Op, Shape


@dataclass(frozen=True)
class LatencyBound:
    """A certified lower bound on latency (cycles) with its components."""

    cycles: int
    components: dict[str, int]
    derivation: str


def compulsory_bound(workload: Workload, hw: Hardware) -> LatencyBound:
    macs = workload.total_macs
    vector_ops = sum(workload.vector_ops(n) for n in workload.layers)
    compute = math.ceil(macs / hw.core_array.macs_per_cycle
                        + vector_ops / hw.vector_unit.ops_per_cycle)
    input_bytes = sum(workload.batch * workload.elem_bytes * max(
        touched_elems(workload.layers[v], k, workload.in_shapes(v))
        for v in workload.consumers(t) for k, src in enumerate(workload.layers[v].inputs)
        if src == t) for t in workload.inputs)
    dram_bytes = (workload.total_weight_bytes + input_bytes
                  + sum(workload.ofmap_bytes(t) for t in workload.outputs))
    dram = math.ceil(dram_bytes / hw.dram.bytes_per_cycle)
    return LatencyBound(
        cycles=max(compute, dram),
        components={"compute_cycles": compute, "compulsory_dram_cycles": dram,
                    "compulsory_dram_bytes": dram_bytes},
        derivation="max(total MACs / peak MACs per cycle + vector ops / vector rate, "
                   "(weights + read part of network inputs + network outputs) bytes / "
                   "DRAM bandwidth)",
    )


def touched_elems(layer: Layer, index: int, in_shapes: tuple[Shape, ...]) -> int:
    """Per-sample elements of input `index` that some kernel tap of `layer` reads."""
    src = in_shapes[index]
    if layer.op not in (Op.CONV, Op.DEPTHWISE_CONV, Op.MAX_POOL, Op.AVG_POOL):
        return src.elems
    rows = _touched(src.h, layer.out.h, layer.kernel[0], layer.stride[0], layer.padding[0],
                    layer.dilation[0])
    cols = _touched(src.w, layer.out.w, layer.kernel[1], layer.stride[1], layer.padding[1],
                    layer.dilation[1])
    return src.c * rows * cols


def _touched(size: int, out: int, kernel: int, stride: int, pad: int, dilation: int) -> int:
    """How many of `size` input rows a sliding window producing `out` rows reads."""
    hit = {o * stride - pad + k * dilation for o in range(out) for k in range(kernel)}
    return sum(1 for x in hit if 0 <= x < size)
