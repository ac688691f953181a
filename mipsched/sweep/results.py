"""A sweep's tables: results.csv and results.parquet (one row per finished point, every
figure of `solve --json` plus the point's parameters, bound and gap), and the summary of
`mipsched sweep status`."""

from __future__ import annotations

import csv
import io
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from mipsched.atomic import atomic_path, write_text_atomic

#: Columns first in the tables, in this order; every other key follows, sorted.
LEADING = ("network", "batch", "method", "objective", "seed", "time_limit", "hardware")
RESULT_COLUMNS = ("latency_cycles", "energy_pj", "edp", "lower_bound_cycles", "gap",
                  "status", "reason")


def columns(rows: list[dict[str, Any]]) -> list[str]:
    """The tables' columns: parameters, axes (the dotted hardware keys), the main
    figures, then the rest sorted."""
    seen = {k for row in rows for k in row}
    axes = sorted(k for k in seen if "." in k)
    first = [k for k in (*LEADING, *axes, *RESULT_COLUMNS) if k in seen]
    return first + sorted(seen - set(first))


def write_results(out: Path, rows: list[dict[str, Any]]) -> None:
    """Writes results.csv and results.parquet in `out` (whole or not at all)."""
    cols = columns(rows)
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=cols, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(row.get(k)) for k in cols})
    write_text_atomic(out / "results.csv", text.getvalue())
    table = pa.Table.from_pylist([{k: _plain(row.get(k)) for k in cols} for row in rows],
                                 schema=_schema(rows, cols))
    with atomic_path(out / "results.parquet") as tmp:
        pq.write_table(table, tmp)


def _cell(value: Any) -> Any:
    return "" if value is None else value


def _plain(value: Any) -> Any:
    """Nested values (dicts, lists) as text; the rest as is."""
    return str(value) if isinstance(value, dict | list) else value


def _schema(rows: list[dict[str, Any]], cols: list[str]) -> pa.Schema:
    """One Arrow type per column: bool, int64, float64 (ints mixed with floats) or string."""
    fields = []
    for k in cols:
        kinds = {type(row[k]) for row in rows if row.get(k) is not None}
        if kinds == {bool}:
            tp = pa.bool_()
        elif kinds and kinds <= {int}:
            tp = pa.int64()
        elif kinds and kinds <= {int, float}:
            tp = pa.float64()
        else:
            tp = pa.string()
        fields.append(pa.field(k, tp))
    return pa.schema(fields)


@dataclass(frozen=True)
class SweepStatus:
    """A sweep directory summarised: points finished / in the grid, by status, the
    solve seconds spent and the best latency per network and batch."""

    total: int
    done: int
    by_status: dict[str, int]
    solve_seconds: float
    best: dict[tuple[str, int], tuple[int, float | None, str]]
    """(network, batch) -> (least latency in cycles, its certified gap, its point dir)."""


def summarise(rows: list[dict[str, Any]], total: int) -> SweepStatus:
    """The status of a sweep of `total` points whose journal holds `rows`."""
    best: dict[tuple[str, int], tuple[int, float | None, str]] = {}
    for row in rows:
        latency = row.get("latency_cycles")
        key = (row["network"], row["batch"])
        if latency is not None and (key not in best or latency < best[key][0]):
            best[key] = (latency, row.get("gap"), row.get("dir", ""))
    return SweepStatus(total, len(rows), dict(Counter(r.get("status", "?") for r in rows)),
                       sum(r.get("wall_seconds") or 0.0 for r in rows), best)
