"""Turning a NET argument into a workload: a zoo name (ONNX and YAML files come later)."""

from __future__ import annotations

from mipsched.workload import zoo
from mipsched.workload.graph import Workload, WorkloadError


def resolve_network(spec: str, batch: int = 1, elem_bytes: int = 1) -> Workload:
    """The workload named by `spec` for `batch` samples of `elem_bytes`-byte elements;
    WorkloadError when unknown."""
    if spec in zoo.NETWORKS:
        return zoo.get(spec, batch, elem_bytes)
    raise WorkloadError(f"unknown network '{spec}': not in the zoo "
                        f"({', '.join(sorted(zoo.NETWORKS))}); see `mipsched zoo`")
