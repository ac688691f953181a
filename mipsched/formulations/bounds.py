"""Lower bounds on the latency of every schedule of a workload on a hardware.

`compulsory_bound` holds for all six attributes:

- compute: every tile takes at least (its MACs / MACs per cycle) or (its vector ops /
  vector ops per cycle) cycles, since no mapping uses more than the whole PE array or
  vector unit, and tiling only adds work (halo recompute), never removes it. Tiles run one
  at a time, so latency >= ceil(total MACs / MACs per cycle + total vector ops / vector
  ops per cycle).
- DRAM: every weight is loaded at least once (once per FLG), every network input is loaded
  at least once, every network output is stored at least once, each transfer takes
  >= bytes / bandwidth cycles and DRAM serves one transfer at a time, so latency >=
  ceil(compulsory bytes / bytes per cycle).
Latency >= the max of the two. Tests check it against every schedule found.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mipsched.hw.model import Hardware
from mipsched.workload.graph import Workload


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
    dram_bytes = (workload.total_weight_bytes
                  + sum(workload.ofmap_bytes(t) for t in workload.inputs)
                  + sum(workload.ofmap_bytes(t) for t in workload.outputs))
    dram = math.ceil(dram_bytes / hw.dram.bytes_per_cycle)
    return LatencyBound(
        cycles=max(compute, dram),
        components={"compute_cycles": compute, "compulsory_dram_cycles": dram,
                    "compulsory_dram_bytes": dram_bytes},
        derivation="max(total MACs / peak MACs per cycle + vector ops / vector rate, "
                   "(weights + network inputs + network outputs) bytes / DRAM bandwidth)",
    )
