"""Typed, path-naming access to parsed JSON objects (schedule and tile-program files).

Every accessor checks the type (an integer is not a bool, a number is finite) and range,
and names the offending key by its path, e.g. ``dram_tensors[3].bytes: must be >= 0``.
"""

from __future__ import annotations

import math
from typing import Any

from mipsched.errors import InputError, show

_MISSING: Any = object()


class JsonObject:
    """A JSON object read at `path` (e.g. ``tiles[4]``)."""

    def __init__(self, data: Any, path: str) -> None:
        if not isinstance(data, dict):
            raise InputError(f"{path}: expected an object, got {_kind(data)}")
        self.data = data
        self.path = path

    def has(self, key: str) -> bool:
        """Whether the object has `key`."""
        return key in self.data

    def at(self, key: str) -> str:
        """The path of `key` for messages (``dram_tensors[3].bytes``)."""
        return f"{self.path}.{key}" if self.path else key

    def raw(self, key: str, default: Any = _MISSING) -> Any:
        """The value of `key` unchecked; `default` when it is missing, else an
        InputError."""
        if key not in self.data:
            if default is _MISSING:
                raise InputError(f"{self.at(key)}: missing key")
            return default
        return self.data[key]

    def int(self, key: str, lo: int | None = None, default: Any = _MISSING) -> int:
        """The value of `key` as an integer (not a bool), at least `lo`."""
        return as_int(self.raw(key, default), self.at(key), lo)

    def opt_int(self, key: str, lo: int | None = None) -> int | None:
        """The value of `key` as an integer at least `lo`, or None when it is missing
        or null."""
        value = self.raw(key, None)
        return None if value is None else as_int(value, self.at(key), lo)

    def num(self, key: str, lo: float | None = None, default: Any = _MISSING) -> float:
        """The value of `key` as a finite number (float), at least `lo`."""
        value = self.raw(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(
                value):
            raise InputError(f"{self.at(key)}: expected a finite number, got {show(value)}")
        if lo is not None and value < lo:
            raise InputError(f"{self.at(key)}: must be >= {lo}, got {value}")
        return float(value)

    def str(self, key: str, default: Any = _MISSING) -> str:
        """The value of `key` as a string."""
        value = self.raw(key, default)
        if not isinstance(value, str):
            raise InputError(f"{self.at(key)}: expected a string, got {_kind(value)}")
        return value

    def obj(self, key: str, default: Any = _MISSING) -> JsonObject:
        """The value of `key` as a JsonObject (its path extended by `key`)."""
        return JsonObject(self.raw(key, default), self.at(key))

    def list(self, key: str, default: Any = _MISSING) -> list:
        """The value of `key` as a list (items unchecked)."""
        value = self.raw(key, default)
        if not isinstance(value, list):
            raise InputError(f"{self.at(key)}: expected a list, got {_kind(value)}")
        return value

    def int_list(self, key: str, lo: int | None = None, length: int | None = None) -> list[int]:
        """The value of `key` as a list of integers, each at least `lo`, of `length`
        items when given."""
        values = self.list(key)
        if length is not None and len(values) != length:
            raise InputError(f"{self.at(key)}: expected {length} integers, got {len(values)}")
        return [as_int(v, f"{self.at(key)}[{k}]", lo) for k, v in enumerate(values)]


def as_int(value: Any, path: str, lo: int | None = None) -> int:
    """`value` as an int (never a bool, a float or a string), at least `lo`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{path}: expected an integer, got {show(value)}")
    if lo is not None and value < lo:
        raise InputError(f"{path}: must be >= {lo}, got {value}")
    return value


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string"}.get(type(value),
                                                                     show(value))
