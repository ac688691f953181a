"""`mipsched compare --hw TILED`'s tables: compare.csv and compare.md with every column,
and the terminal table (units: cycles, pJ, pJ x cycles, bytes, byte-hops, seconds)."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from rich import box
from rich.table import Table

from mipsched.report.compare import markdown_table, or_dash
from mipsched.solve.tiled_compare import TiledCompareRow

COLUMNS = tuple(f.name for f in fields(TiledCompareRow) if f.name != "tree")
"""The columns of compare.csv and of the JSON rows (every field but the tree)."""


def row_dict(row: TiledCompareRow) -> dict[str, Any]:
    """Every column of a row (cycles, pJ, pJ x cycles, bytes, seconds)."""
    return {name: getattr(row, name) for name in COLUMNS}


def compare_csv(rows: list[TiledCompareRow]) -> str:
    """Every column of every row as CSV."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(COLUMNS), lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow(row_dict(r))
    return out.getvalue()


MARKDOWN_COLUMNS = (("network", "network"), ("batch", "batch"), ("method", "method"),
                    ("status", "status"), ("latency_cycles", "latency (cycles)"),
                    ("energy_pj", "energy (pJ)"), ("edp", "EDP"),
                    ("dram_bytes", "DRAM bytes"), ("noc_byte_hops", "NoC byte-hops"),
                    ("n_segments", "segments"), ("runtime_s", "runtime (s)"),
                    ("speedup", "speedup"), ("energy_ratio", "energy ratio"),
                    ("edp_ratio", "EDP ratio"), ("lower_bound_cycles", "bound (cycles)"),
                    ("gap", "gap to bound"), ("edp_lower_bound", "EDP bound"),
                    ("edp_gap", "EDP gap"))


def compare_markdown(rows: list[TiledCompareRow]) -> str:
    """The rows as a markdown table (every column but the seed, rounds and reason)."""
    return markdown_table(rows, MARKDOWN_COLUMNS)


TERMINAL_COLUMNS: tuple[tuple[str, Callable[[TiledCompareRow], str], bool], ...] = (
    ("network", lambda r: r.network, True),
    ("method", lambda r: r.method, True),
    ("status", lambda r: r.status, True),
    ("latency", lambda r: or_dash(r.latency_cycles, "{:,}".format), True),
    ("energy", lambda r: or_dash(r.energy_pj, lambda pj: f"{pj / 1e6:,.1f}"), True),
    ("E×D", lambda r: or_dash(r.edp, "{:.3g}".format), True),
    ("E×D×", lambda r: or_dash(r.edp_ratio, "{:.2f}".format), True),
    ("gap", lambda r: or_dash(r.gap, "{:.1%}".format), True),
    ("segs", lambda r: or_dash(r.n_segments, str), False),
    ("s", lambda r: f"{r.runtime_s:.1f}", False),
    ("speedup", lambda r: or_dash(r.speedup, "{:.2f}×".format), False),
    ("energy×", lambda r: or_dash(r.energy_ratio, "{:.2f}".format), False),
    ("bound", lambda r: or_dash(r.lower_bound_cycles, "{:,}".format), False),
    ("E×D gap", lambda r: or_dash(r.edp_gap, "{:.1%}".format), False),
)
"""Title, cell and whether it is shown without --wide (the rest: --wide, compare.md)."""


def compare_tiled_table(rows: list[TiledCompareRow], title: str, wide: bool) -> Table:
    """The rows as a terminal table in the single-core compare's style: latency
    (cycles), energy (µJ), E x D (pJ x cycles), its ratio to the baseline and the gap
    to the latency bound; with `wide` also segments, seconds, speedup, energy ratio,
    the bound (cycles) and the E x D gap."""
    columns = [c for c in TERMINAL_COLUMNS if wide or c[2]]
    more = "" if wide else "; more columns: --wide, compare.md"
    table = Table(title=f"{title} (latency in cycles, energy in µJ, E×D in pJ × cycles"
                        f"{more})", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                  padding=(0, 1, 0, 0))
    for name, _, _ in columns:
        text = name in ("network", "method", "status")
        table.add_column(name, justify="left" if text else "right",
                         overflow="fold", no_wrap=not text)
    for r in rows:
        table.add_row(*(cell(r) for _, cell, _ in columns))
    return table
