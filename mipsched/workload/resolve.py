"""Turning a NET argument into a workload: a zoo name, an ONNX model (`.onnx`) or a YAML
workload (`.yaml` / `.yml`)."""

from __future__ import annotations

from pathlib import Path

from mipsched.workload import zoo
from mipsched.workload.graph import Workload, WorkloadError
from mipsched.workload.yaml_format import load_workload


def resolve_network(spec: str, batch: int = 1, elem_bytes: int = 1, *,
                    unknown_as_eltwise: bool = False) -> Workload:
    """The workload named by `spec` for `batch` samples of `elem_bytes`-byte elements;
    WorkloadError when unknown. `unknown_as_eltwise` applies to ONNX models (see
    onnx_import.load_onnx)."""
    suffix = Path(spec).suffix.lower()
    if suffix == ".onnx":
        from mipsched.workload.onnx_import import load_onnx  # onnx: only for a model

        return load_onnx(Path(spec), batch, elem_bytes, unknown_as_eltwise)
    if suffix in (".yaml", ".yml"):
        return load_workload(Path(spec), batch, elem_bytes)
    if spec in zoo.NETWORKS:
        return zoo.get(spec, batch, elem_bytes)
    raise WorkloadError(f"unknown network '{spec}': not in the zoo "
                        f"({', '.join(sorted(zoo.NETWORKS))}; see `mipsched zoo`) and not "
                        "an .onnx or .yaml file")
