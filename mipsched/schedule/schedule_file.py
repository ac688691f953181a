"""schedule.json: a complete schedule that `mipsched eval` replays to the same numbers.

Format `mipsched-schedule` version 1: the network (name, source, batch, element size, a
digest of the whole network and the network itself in the YAML workload format, as data),
the full hardware description, the LFA, the DLSA (tensor ids as lowering numbers them,
with their names so a mismatch is caught), the method that made it, and its figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mipsched import strict
from mipsched.atomic import write_json_atomic
from mipsched.hw.model import Hardware
from mipsched.jsonread import JsonObject
from mipsched.schedule.notation import Dlsa, Lfa, ScheduleError
from mipsched.schedule.tile_program import DramTensor
from mipsched.workload import zoo
from mipsched.workload.graph import Workload
from mipsched.workload.resolve import resolve_network
from mipsched.workload.yaml_format import read_workload, workload_dict
from mipsched.yamlsrc import YamlDoc

FORMAT = "mipsched-schedule"
VERSION = 1


@dataclass(frozen=True)
class ScheduleFile:
    """A schedule as read back from disk, with the workload and hardware it is for."""

    workload: Workload
    hw: Hardware
    lfa: Lfa
    dlsa: Dlsa
    tensor_names: tuple[str, ...]
    method: str
    results: dict[str, Any]


def tensor_name(t: DramTensor) -> str:
    """Stable name of a DRAM tensor: kind:layer[:tile]."""
    return f"{t.kind}:{t.layer}" + ("" if t.tile is None else f":{t.tile}")


def save_schedule(path: Path, workload: Workload, hw: Hardware, lfa: Lfa, dlsa: Dlsa,
                  tensors: list[DramTensor], method: str, results: dict[str, Any]) -> None:
    """Writes schedule.json to `path` (whole or not at all): see schedule_json."""
    write_json_atomic(path, schedule_json(workload, hw, lfa, dlsa, tensors, method, results))


def schedule_json(workload: Workload, hw: Hardware, lfa: Lfa, dlsa: Dlsa,
                  tensors: list[DramTensor], method: str, results: dict[str, Any]
                  ) -> dict[str, Any]:
    """The content of schedule.json: the network, the hardware, the LFA, the DLSA with
    its tensors' names, `method` and its `results`."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "network": {"name": workload.name, "source": _source(workload),
                    "batch": workload.batch, "elem_bytes": workload.elem_bytes,
                    "digest": workload.digest(), "workload": workload_dict(workload)},
        "hardware": strict.to_dict(hw),
        "method": method,
        "lfa": lfa.to_json(),
        "dlsa": {**dlsa.to_json(), "tensors": [tensor_name(t) for t in tensors]},
        "results": results,
    }


def _source(workload: Workload) -> str:
    """'zoo' for a built-in network, else 'file' (ONNX or YAML; the schedule embeds every
    network either way, so it replays without the file)."""
    if workload.name in zoo.NETWORKS and zoo.get(
            workload.name, workload.batch, workload.elem_bytes).digest() == workload.digest():
        return "zoo"
    return "file"


def is_schedule(data: Any) -> bool:
    """Whether parsed JSON `data` claims to be a schedule file (its `format`)."""
    return isinstance(data, dict) and data.get("format") == FORMAT


def parse_schedule(data: Any, source: str) -> ScheduleFile:
    """The schedule in parsed JSON `data` from `source` (named in errors); raises an
    InputError naming the bad key, e.g. a ScheduleError when the embedded network does not
    match its digest."""
    if not is_schedule(data):
        raise ScheduleError(f"{source}: not a {FORMAT} file (missing 'format': '{FORMAT}')")
    root = JsonObject(data, "")
    if root.raw("version", None) != VERSION:
        raise ScheduleError(f"{source}: unsupported version {root.raw('version', None)!r}")
    net = root.obj("network")
    batch, elem_bytes = net.int("batch", lo=1), net.int("elem_bytes", lo=1, default=1)
    if net.has("workload"):
        doc = YamlDoc(net.raw("workload"), f"{source}: network.workload", {})
        workload = read_workload(doc, batch, elem_bytes)
    else:  # written before networks were embedded: a zoo network
        workload = resolve_network(net.str("name"), batch, elem_bytes)
    if workload.digest() != net.raw("digest", None):
        raise ScheduleError(f"{source}: network '{workload.name}' (batch {workload.batch}) "
                            "differs from the one this schedule was made for (digest mismatch)")
    hw = strict.build(Hardware, root.raw("hardware"), "hardware")
    dlsa = root.obj("dlsa")
    names = dlsa.list("tensors")
    for k, name in enumerate(names):
        if not isinstance(name, str):
            raise ScheduleError(f"dlsa.tensors[{k}]: expected a tensor name, got {name!r}")
    return ScheduleFile(workload, hw, Lfa.from_json(root.raw("lfa")),
                        Dlsa.from_json(dlsa.data), tuple(names),
                        root.str("method", "unknown"), dict(root.obj("results", {}).data))


def check_tensor_names(expected: tuple[str, ...], tensors: list[DramTensor]) -> None:
    """The DLSA's tensor names must be those the LFA lowers to, in the same order."""
    actual = [tensor_name(t) for t in tensors]
    if list(expected) == actual:
        return
    if len(expected) != len(actual):
        raise ScheduleError(f"DLSA lists {len(expected)} DRAM tensors but the LFA produces "
                            f"{len(actual)}")
    k = next(i for i, (a, b) in enumerate(zip(expected, actual, strict=True)) if a != b)
    raise ScheduleError(f"DLSA tensor {k} is '{expected[k]}' but the LFA produces '{actual[k]}'")
