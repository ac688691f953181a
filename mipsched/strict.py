"""Strict construction of (nested) frozen dataclasses from plain dicts (YAML / JSON).

Unknown keys are rejected with the list of allowed ones, missing keys and wrong types are
reported with the dotted path of the field (``gbuf.capacity_bytes: must be > 0``). Fields
declare their unit and bounds with `spec` (``field(metadata=spec("bytes", gt=0))``); a
value written with a unit (``"8 MiB"``) is rejected with the field's unit and, where the
conversion is unambiguous, the plain number to write instead.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import types
import typing
from typing import Any, TypeVar

from mipsched.errors import InputError, show

T = TypeVar("T")

#: Multipliers of the unit suffixes that a value of a field in this unit may carry.
_SCALES: dict[str, dict[str, float]] = {
    "bytes": {"b": 1, "kb": 1e3, "kib": 2**10, "mb": 1e6, "mib": 2**20, "gb": 1e9,
              "gib": 2**30},
    "Hz": {"hz": 1, "khz": 1e3, "mhz": 1e6, "ghz": 1e9},
}
_WITH_UNIT = re.compile(r"\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z/]+)\s*")


class ConfigError(InputError):
    """A configuration value is missing, unknown, of the wrong type or out of range.

    `keys` is the path of the offending key below the mapping given to `build` (for a
    missing key: the path of that key), so a caller can point at its line."""

    def __init__(self, message: str, keys: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.keys = keys


def spec(unit: str, *, gt: float | None = None, ge: float | None = None,
         le: float | None = None) -> dict[str, Any]:
    """Field metadata: the unit of the value (``"bytes"``), an exclusive (`gt`) or
    inclusive (`ge`) lower bound and an inclusive upper bound (`le`)."""
    bounds = {"gt": gt, "min": ge, "max": le}
    return {"unit": unit, **{k: v for k, v in bounds.items() if v is not None}}


def build(cls: type[T], data: Any, path: str = "") -> T:
    """Builds dataclass `cls` from `data`, validating keys and types recursively; `path`
    prefixes the key paths in messages."""
    return _build(cls, data, path, ())


def to_dict(obj: Any) -> Any:
    """Plain-dict form of a (nested) dataclass, the inverse of `build`."""
    return dataclasses.asdict(obj)


def _build(cls: type[T], data: Any, path: str, keys: tuple[str | int, ...]) -> T:
    where = path or cls.__name__
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {show(data)}", keys)
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = [k for k in data if k not in fields]
    if unknown:
        key = str(unknown[0])
        raise ConfigError(f"{_join(path, key)}: unknown key (allowed: "
                          f"{', '.join(sorted(fields))})", (*keys, key))
    values: dict[str, Any] = {}
    for name, f in fields.items():
        key_path, key_keys = _join(path, name), (*keys, name)
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ConfigError(f"{key_path}: missing required key", key_keys)
            continue
        value = _coerce(hints[name], data[name], key_path, key_keys, f.metadata.get("unit"))
        _check_bounds(f, value, key_path, key_keys)
        values[name] = value
    return cls(**values)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _coerce(tp: Any, value: Any, path: str, keys: tuple[str | int, ...], unit: str | None) -> Any:
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, path, keys)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return None
        errors = []
        for opt in options:
            if opt is type(None):
                continue
            try:
                return _coerce(opt, value, path, keys, unit)
            except ConfigError as err:
                errors.append(err)
        raise errors[0] if errors else ConfigError(f"{path}: invalid value", keys)
    if origin is tuple and typing.get_args(tp)[1:] == (Ellipsis,):
        if not isinstance(value, list):
            raise ConfigError(f"{path}: expected a list, got {show(value)}", keys)
        item = typing.get_args(tp)[0]
        return tuple(_coerce(item, v, f"{path}[{i}]", (*keys, i), unit)
                     for i, v in enumerate(value))
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: expected true/false, got {show(value)}", keys)
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(_wrong_number(path, value, unit, "an integer"), keys)
        return value
    if tp is float:
        if (isinstance(value, bool) or not isinstance(value, int | float)
                or not abs(value) <= sys.float_info.max):  # inf, nan, ints too large
            raise ConfigError(_wrong_number(path, value, unit, "a finite number"), keys)
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path}: expected a string, got {show(value)}", keys)
        return value
    return value


def _wrong_number(path: str, value: Any, unit: str | None, kind: str) -> str:
    """The message for a value that is not the number a field wants, naming the unit and,
    when it can, the number to write instead."""
    in_unit = f" (unit: {unit})" if unit else ""
    hint = ""
    if isinstance(value, str) and unit:
        hint = " (the key fixes the unit: write a plain number"
        match = _WITH_UNIT.fullmatch(value)
        scale = _SCALES.get(unit, {}).get(match.group(2).lower()) if match else None
        if match is not None and scale is not None:
            number = float(match.group(1)) * scale
            hint += f", e.g. {_plain(number, kind)}"
        hint += ")"
    elif isinstance(value, float) and kind == "an integer" and value.is_integer():
        hint = f" (write {int(value)})"
    return f"{path}: expected {kind}{in_unit}, got {show(value)}{hint}"


def _plain(number: float, kind: str) -> str:
    return str(round(number)) if kind == "an integer" or number.is_integer() else repr(number)


def _check_bounds(f: dataclasses.Field, value: Any, path: str, keys: tuple[str | int, ...]) -> None:
    if value is None:
        return
    unit = f" {f.metadata['unit']}" if "unit" in f.metadata else ""
    if "min" in f.metadata and value < f.metadata["min"]:
        raise ConfigError(f"{path}: must be >= {f.metadata['min']}{unit}, got {show(value)}",
                          keys)
    if "gt" in f.metadata and value <= f.metadata["gt"]:
        raise ConfigError(f"{path}: must be > {f.metadata['gt']}{unit}, got {show(value)}",
                          keys)
    if "max" in f.metadata and value > f.metadata["max"]:
        raise ConfigError(f"{path}: must be <= {f.metadata['max']}{unit}, got {show(value)}",
                          keys)
