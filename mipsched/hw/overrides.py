"""A hardware with some of its numbers changed: the axes of a sweep (`mipsched sweep`).

Keys are dotted paths of the hardware description (`gbuf.capacity_bytes`,
`dram.bytes_per_cycle`, `core_array.pe_rows`, ...), the same as in a hardware YAML file;
the changed description is validated like a file (same messages).

What depends on a changed number changes with it, as in the SoMa reference
(`main_search.cpp`): the energy per byte of its GBUF (`ul3`) and of the output buffer it
calls `ol2` (mipsched's `core_array.ol1`, "a small part of ul3") is a CACTI value x
1.1^floor(capacity / 2 MiB), so changing `gbuf.capacity_bytes` from c0 to c1 multiplies
`gbuf.read_pj_per_byte`, `gbuf.write_pj_per_byte`, `core_array.ol1.read_pj_per_byte` and
`core_array.ol1.write_pj_per_byte` by 1.1^(floor(c1 / 2 MiB) - floor(c0 / 2 MiB)), unless
the same overrides set them. No other number depends on another.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any

from mipsched import strict
from mipsched.hw.model import Hardware

#: The reference's SRAM energy step: x SRAM_STEP_FACTOR per SRAM_STEP_BYTES of capacity.
SRAM_STEP_BYTES = 2 * 1024 * 1024
SRAM_STEP_FACTOR = 1.1
#: The energies that follow gbuf.capacity_bytes (see the module docstring).
CAPACITY_SCALED = ("gbuf.read_pj_per_byte", "gbuf.write_pj_per_byte",
                   "core_array.ol1.read_pj_per_byte", "core_array.ol1.write_pj_per_byte")


def numeric_keys(cls: type = Hardware, prefix: str = "") -> tuple[str, ...]:
    """Every dotted key of a number in a hardware description (what a sweep may vary)."""
    hints = typing.get_type_hints(cls)
    keys: list[str] = []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            keys += numeric_keys(tp, f"{prefix}{f.name}.")
        elif tp in (int, float):
            keys.append(f"{prefix}{f.name}")
    return tuple(keys)


def capacity_energy_factor(old_bytes: int, new_bytes: int) -> float:
    """How the GBUF (and OL1) energy per byte scales when the GBUF capacity goes from
    `old_bytes` to `new_bytes` (the reference's 1.1 per whole 2 MiB)."""
    steps = new_bytes // SRAM_STEP_BYTES - old_bytes // SRAM_STEP_BYTES
    return math.pow(SRAM_STEP_FACTOR, steps)


def with_overrides(hw: Hardware, overrides: dict[str, Any], name: str | None = None
                   ) -> Hardware:
    """`hw` with the numbers at the dotted keys of `overrides` replaced (and those that
    depend on them scaled, see the module docstring), named `name` (default: `hw.name`
    with the overrides in brackets). Raises strict.ConfigError naming the key for an
    unknown key or a value out of range."""
    data = strict.to_dict(hw)
    known = numeric_keys()
    for key, value in overrides.items():
        if key not in known:
            raise strict.ConfigError(f"{key}: not a number of the hardware description "
                                     f"(one of: {', '.join(known)})", tuple(key.split(".")))
        _set(data, key, value)
    new_capacity = overrides.get("gbuf.capacity_bytes")
    if isinstance(new_capacity, int) and not isinstance(new_capacity, bool):
        factor = capacity_energy_factor(hw.gbuf.capacity_bytes, new_capacity)
        for key in CAPACITY_SCALED:
            if key not in overrides:
                _set(data, key, _get(data, key) * factor)
    data["name"] = name or f"{hw.name}[" + ",".join(
        f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in overrides.items()
    ) + "]"
    return strict.build(Hardware, data)


def value_at(hw: Hardware, key: str) -> Any:
    """The number at dotted `key` of `hw` (e.g. gbuf.capacity_bytes)."""
    return _get(strict.to_dict(hw), key)


def _get(data: dict[str, Any], key: str) -> Any:
    for part in key.split(".")[:-1]:
        data = data[part]
    return data[key.split(".")[-1]]


def _set(data: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    for part in parts[:-1]:
        data = data[part]
    data[parts[-1]] = value
