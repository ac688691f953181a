"""Strict construction of (nested) frozen dataclasses from plain dicts (YAML / JSON).

Unknown keys are rejected with the list of allowed ones, missing keys and wrong types are
reported with the dotted path of the field (``gbuf.capacity_bytes: must be > 0``).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, TypeVar

from mipsched.errors import InputError

T = TypeVar("T")


class ConfigError(InputError):
    """A configuration value is missing, unknown, of the wrong type or out of range."""


def build(cls: type[T], data: Any, path: str = "") -> T:
    """Builds dataclass `cls` from `data`, validating keys and types recursively.

    Fields may declare `metadata={"min": x}` (inclusive) or `{"gt": x}` bounds."""
    where = path or cls.__name__
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(
            f"{_join(path, unknown[0])}: unknown key (allowed: {', '.join(sorted(fields))})"
        )
    values: dict[str, Any] = {}
    for name, f in fields.items():
        key_path = _join(path, name)
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ConfigError(f"{key_path}: missing required key")
            continue
        value = _coerce(hints[name], data[name], key_path)
        _check_bounds(f, value, key_path)
        values[name] = value
    return cls(**values)


def to_dict(obj: Any) -> Any:
    """Plain-dict form of a (nested) dataclass, the inverse of `build`."""
    return dataclasses.asdict(obj)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _coerce(tp: Any, value: Any, path: str) -> Any:
    if dataclasses.is_dataclass(tp):
        return build(tp, value, path)
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
                return _coerce(opt, value, path)
            except ConfigError as err:
                errors.append(str(err))
        raise ConfigError(errors[0] if errors else f"{path}: invalid value")
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: expected true/false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if (isinstance(value, bool) or not isinstance(value, int | float)
                or not math.isfinite(value)):
            raise ConfigError(f"{path}: expected a finite number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path}: expected a string, got {value!r}")
        return value
    return value


def _check_bounds(f: dataclasses.Field, value: Any, path: str) -> None:
    if value is None:
        return
    if "min" in f.metadata and value < f.metadata["min"]:
        raise ConfigError(f"{path}: must be >= {f.metadata['min']}, got {value}")
    if "gt" in f.metadata and value <= f.metadata["gt"]:
        raise ConfigError(f"{path}: must be > {f.metadata['gt']}, got {value}")
