"""The grid file of `mipsched sweep`: which networks, batches, hardware numbers, methods,
objective, seeds and time per point to run, validated like every other input (one-line
errors naming the file, the line and the key).

Keys (docs/sweep.md): `networks` (zoo names, ONNX or YAML files; one or a list),
`batches` (one, a list or a range), `hardware` (a preset or a file), `axes` (dotted
hardware key -> a list or a range of values), `method` / `methods`, `objective`,
`seed` / `seeds`, `time_limit` (seconds per point), `workers` (CP-SAT threads per point)
and `memory_gib` (per point). A range is `{from, to, factor}` (geometric) or `{from, to,
step}` (arithmetic), both ends included when the steps reach them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mipsched.core import OBJECTIVES
from mipsched.errors import InputError
from mipsched.hw.load import load_hardware
from mipsched.hw.model import Hardware
from mipsched.hw.overrides import numeric_keys, value_at, with_overrides
from mipsched.solve import METHODS
from mipsched.workload.graph import Workload
from mipsched.yamlsrc import Key, YamlDoc, parse_yaml

#: The most points one grid may describe (a typo in a range should not queue millions).
MAX_POINTS = 100_000
#: The most values one range may expand to.
MAX_RANGE_VALUES = 1_000
KEYS = ("networks", "batches", "hardware", "axes", "method", "methods", "objective",
        "seed", "seeds", "time_limit", "workers", "memory_gib")
NetworkLoader = Callable[[str, int], Workload]
"""(network spec, batch) -> the workload (resolve_network with the sweep's options)."""


class GridError(InputError):
    """A grid file that cannot be run."""


@dataclass(frozen=True)
class Grid:
    """A validated sweep grid. Units: seconds, GiB."""

    networks: tuple[str, ...]
    """As written, files made absolute (relative to the grid file when they exist there)."""
    batches: tuple[int, ...]
    hardware: str
    axes: tuple[tuple[str, tuple[int | float, ...]], ...]
    """(dotted hardware key, its values) in the file's order."""
    methods: tuple[str, ...]
    objective: str
    seeds: tuple[int, ...]
    time_limit: float
    workers: int
    memory_gib: float | None
    text: str
    """The grid file as written (kept in the sweep's directory)."""

    @property
    def axis_keys(self) -> tuple[str, ...]:
        """The hardware keys the grid varies."""
        return tuple(k for k, _ in self.axes)


def read_grid(path: Path) -> Grid:
    """The grid in file `path`; GridError (or another InputError) naming line and key."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise GridError(f"{path}: cannot read ({err})") from None
    return parse_grid(text, str(path), path.parent)


def parse_grid(text: str, source: str, base: Path) -> Grid:
    """The grid in YAML `text` (named `source`; relative files resolved against `base`,
    then the working directory)."""
    doc = parse_yaml(text, source)
    data = doc.data
    if not isinstance(data, dict):
        raise GridError(f"{source}: a grid is a mapping of keys ({', '.join(KEYS)})")
    for key in data:
        if key not in KEYS:
            raise GridError(f"{doc.where((key,))}: unknown key '{key}' (known: "
                            f"{', '.join(KEYS)})")
    for a, b in (("method", "methods"), ("seed", "seeds")):
        if a in data and b in data:
            raise GridError(f"{doc.where((b,))}: give '{a}' or '{b}', not both")
    reader = _Reader(doc)
    hardware = _file_or_name(reader.require("hardware", str), base)
    try:
        load_hardware(hardware)
    except InputError as err:
        raise GridError(f"{doc.where(('hardware',))}: hardware: {err}") from None
    return Grid(
        networks=tuple(_file_or_name(n, base) for n in reader.strings("networks")),
        batches=tuple(int(b) for b in reader.numbers(("batches",), int, lo=1)),
        hardware=hardware,
        axes=_axes(reader, load_hardware(hardware)),
        methods=_methods(reader),
        objective=reader.choice("objective", tuple(OBJECTIVES), "edp"),
        seeds=tuple(int(s) for s in reader.numbers(("seeds" if "seeds" in data else "seed",),
                                                   int, lo=0, default=[0])),
        time_limit=reader.positive("time_limit", 60.0),
        workers=int(reader.positive("workers", 1, integer=True)),
        memory_gib=reader.positive("memory_gib", None),
        text=text,
    )


def _methods(reader: _Reader) -> tuple[str, ...]:
    key = "methods" if "methods" in reader.doc.data else "method"
    names = reader.strings(key, default=["auto"])
    for k, name in enumerate(names):
        if name not in METHODS:
            raise GridError(f"{reader.doc.where((key, k))}: {key}: unknown method '{name}' "
                            f"(available: {', '.join(METHODS)})")
    return tuple(names)


def _axes(reader: _Reader, hw: Hardware) -> tuple[tuple[str, tuple[int | float, ...]], ...]:
    axes = reader.doc.data.get("axes", {}) or {}
    if not isinstance(axes, dict):
        raise GridError(f"{reader.doc.where(('axes',))}: axes: a mapping of hardware keys "
                        "to values, e.g. gbuf.capacity_bytes: [4194304, 8388608]")
    known = numeric_keys()
    out = []
    for key in axes:
        if key not in known:
            raise GridError(f"{reader.doc.where(('axes', key))}: axes: '{key}' is not a "
                            f"number of the hardware description (one of: "
                            f"{', '.join(known)})")
        kind = type(value_at(hw, key))
        values = reader.numbers(("axes", key), kind, lo=None)
        for k, value in enumerate(values):
            try:
                with_overrides(hw, {key: value})
            except InputError as err:
                raise GridError(f"{reader.doc.where(('axes', key, k))}: axes.{err}") from None
        out.append((key, tuple(values)))
    return tuple(out)


def _file_or_name(spec: str, base: Path) -> str:
    """A file path relative to the grid's folder when the file is there, else `spec`."""
    beside = base / spec
    return str(beside.resolve()) if ("/" in spec or "." in spec) and beside.is_file() else spec


@dataclass(frozen=True)
class _Reader:
    """Typed access to the grid's keys with messages naming line and key."""

    doc: YamlDoc

    def fail(self, path: tuple[Key, ...], message: str) -> GridError:
        """An error at `path` of the grid."""
        dotted = ".".join(str(p) for p in path if isinstance(p, str))
        return GridError(f"{self.doc.where(path)}: {dotted}: {message}")

    def require(self, key: str, kind: type) -> Any:
        """The value of a required key of type `kind`."""
        if key not in self.doc.data:
            raise GridError(f"{self.doc.source}: missing key '{key}'")
        value = self.doc.data[key]
        if not isinstance(value, kind):
            raise self.fail((key,), f"expected a {kind.__name__}, got {value!r}")
        return value

    def strings(self, key: str, default: list[str] | None = None) -> list[str]:
        """One string or a non-empty list of strings."""
        value = self.doc.data.get(key, default)
        if value is None:
            raise GridError(f"{self.doc.source}: missing key '{key}'")
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, list) or not values:
            raise self.fail((key,), f"expected a name or a non-empty list, got {value!r}")
        for k, v in enumerate(values):
            if not isinstance(v, str) or not v:
                raise self.fail((key, k), f"expected a name, got {v!r}")
        return values

    def choice(self, key: str, choices: tuple[str, ...], default: str) -> str:
        """One of `choices`."""
        value = self.doc.data.get(key, default)
        if value not in choices:
            raise self.fail((key,), f"expected one of {', '.join(choices)}, got {value!r}")
        return value

    def positive(self, key: str, default: Any, integer: bool = False) -> Any:
        """A number > 0 (an integer with `integer`), or `default` when absent."""
        value = self.doc.data.get(key, default)
        if value is None:
            return None
        ok = isinstance(value, int) if integer else isinstance(value, int | float)
        if isinstance(value, bool) or not ok or value <= 0:
            kind = "an integer" if integer else "a number"
            raise self.fail((key,), f"expected {kind} > 0, got {value!r}")
        return value

    def numbers(self, path: tuple[Key, ...], kind: type, lo: int | None,
                default: list[Any] | None = None) -> list[int | float]:
        """One number, a non-empty list of them, or a range, each of `kind` and >= lo."""
        value = self._at(path, default)
        if isinstance(value, dict):
            values = _expand_range(self, path, value, kind)
        else:
            values = value if isinstance(value, list) else [value]
        if not values:
            raise self.fail(path, "expected at least one value")
        for k, v in enumerate(values):
            where = path + (k,) if isinstance(value, list) else path
            if isinstance(v, bool) or not isinstance(v, int | float) or \
                    (kind is int and not float(v).is_integer()):
                raise self.fail(where, f"expected {'an integer' if kind is int else 'a number'}"
                                       f", got {v!r}")
            if lo is not None and v < lo:
                raise self.fail(where, f"must be >= {lo}, got {v!r}")
        return [kind(v) for v in values]

    def _at(self, path: tuple[Key, ...], default: Any) -> Any:
        data: Any = self.doc.data
        for part in path:
            if not isinstance(data, dict) or part not in data:
                if default is None:
                    raise GridError(f"{self.doc.where(path[:-1])}: missing key "
                                    f"'{'.'.join(str(p) for p in path)}'")
                return default
            data = data[part]
        return data


def _expand_range(reader: _Reader, path: tuple[Key, ...], spec: dict[str, Any],
                  kind: type) -> list[int | float]:
    """{from, to, factor} or {from, to, step} as the list of its values."""
    keys = set(spec)
    if keys not in ({"from", "to", "factor"}, {"from", "to", "step"}):
        raise reader.fail(path, f"a range is {{from, to, factor}} or {{from, to, step}}, "
                                f"got keys {sorted(keys)}")
    for k in keys:
        v = spec[k]
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise reader.fail(path + (k,), f"{k}: expected a number, got {v!r}")
    start, stop = spec["from"], spec["to"]
    if stop < start:
        raise reader.fail(path + ("to",), f"to ({stop}) is below from ({start})")
    geometric = "factor" in spec
    step = spec["factor"] if geometric else spec["step"]
    if step <= (1 if geometric else 0):
        name = "factor" if geometric else "step"
        raise reader.fail(path + (name,), f"{name} must be > {1 if geometric else 0}")
    values: list[int | float] = []
    x = start
    while x <= stop * (1 + 1e-12):
        values.append(kind(round(x)) if kind is int else x)
        if len(values) > MAX_RANGE_VALUES:
            raise reader.fail(path, f"the range has more than {MAX_RANGE_VALUES} values")
        x = x * step if geometric else x + step
    return values


def network_workloads(grid: Grid, load: NetworkLoader) -> dict[tuple[str, int], Workload]:
    """Every (network, batch) of the grid built; an InputError names the network."""
    out = {}
    for name in grid.networks:
        for batch in grid.batches:
            try:
                out[name, batch] = load(name, batch)
            except InputError as err:
                raise GridError(f"networks: '{name}' (batch {batch}): {err}") from None
    return out
