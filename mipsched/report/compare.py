"""`mipsched compare`'s tables: CSV and markdown with every column (the files it
writes), and the terminal table, which fits 80 columns unless asked for `wide`."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

from rich import box
from rich.table import Table

from mipsched.atomic import write_text_atomic
from mipsched.solve.compare import CompareRow


def to_csv(rows: list[CompareRow]) -> str:
    """Every column of every row as CSV (units: cycles, pJ, bytes, seconds)."""
    out = io.StringIO()
    fields = list(CompareRow.__dataclass_fields__)
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow(asdict(r))
    return out.getvalue()


def _fmt(value, digits: int = 3) -> str:
    """A markdown cell: numbers to `digits` significant digits, None as a dash."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1e5 else f"{value:.3e}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


MARKDOWN_COLUMNS = (("network", "network"), ("method", "method"), ("status", "status"),
                    ("latency_cycles", "latency (cycles)"), ("energy_pj", "energy (pJ)"),
                    ("edp", "EDP"), ("utilization", "util"), ("mac_utilization", "MAC util"),
                    ("avg_buffer_bytes", "avg buffer (B)"), ("dram_bytes", "DRAM bytes"),
                    ("n_lg", "#LG"), ("n_flg", "#FLG"), ("n_tiles", "tiles"),
                    ("ideal_cycles", "ideal (cycles)"), ("runtime_s", "runtime (s)"),
                    ("speedup", "speedup"), ("energy_ratio", "energy ratio"),
                    ("edp_ratio", "EDP ratio"), ("lower_bound_cycles", "bound (cycles)"),
                    ("gap", "gap to bound"))


def to_markdown(rows: list[CompareRow]) -> str:
    """Every column but the reason of every row as a markdown table."""
    return markdown_table(rows, MARKDOWN_COLUMNS)


def markdown_table(rows: Sequence[object], columns: Sequence[tuple[str, str]]) -> str:
    """`rows` as a markdown table: one column per (attribute, title) of `columns`, cells
    by `_fmt`."""
    head = "| " + " | ".join(title for _, title in columns) + " |"
    rule = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(_fmt(getattr(r, key)) for key, _ in columns) + " |"
            for r in rows]
    return "\n".join([head, rule, *body]) + "\n"


def write_compare(out: Path, rows: list[CompareRow]) -> None:
    """Writes compare.csv and compare.md (every column) into `out` (atomically)."""
    write_text_atomic(out / "compare.csv", to_csv(rows))
    write_text_atomic(out / "compare.md", to_markdown(rows))


def or_dash(value, text: Callable[[object], str]) -> str:
    """`text(value)`, or a dash for None."""
    return "—" if value is None else text(value)


#: The terminal table's columns: title, cell of a row, and whether it fits at 80
#: columns (the rest are shown with --wide). Units in the table's title.
TERMINAL_COLUMNS: tuple[tuple[str, Callable[[CompareRow], str], bool], ...] = (
    ("network", lambda r: r.network, True),
    ("method", lambda r: r.method, True),
    ("status", lambda r: r.status, True),
    ("latency", lambda r: or_dash(r.latency_cycles, "{:,}".format), True),
    ("energy", lambda r: or_dash(r.energy_pj, lambda pj: f"{pj / 1e6:,.1f}"), True),
    ("E×D", lambda r: or_dash(r.edp, "{:.3g}".format), True),
    ("util", lambda r: f"{r.utilization:.1%}" if r.utilization else "—", False),
    ("LG/FLG", lambda r: "—" if r.latency_cycles is None else f"{r.n_lg}/{r.n_flg}", False),
    ("tiles", lambda r: or_dash(r.n_tiles, "{:,}".format), False),
    ("s", lambda r: f"{r.runtime_s:.1f}", False),
    ("speedup", lambda r: or_dash(r.speedup, "{:.2f}×".format), False),
    ("energy×", lambda r: or_dash(r.energy_ratio, "{:.2f}".format), False),
    ("bound", lambda r: or_dash(r.lower_bound_cycles, "{:,}".format), False),
    ("gap", lambda r: or_dash(r.gap, "{:.1%}".format), True),
)
_TEXT_COLUMNS = {"network": 7, "method": 6, "status": len("infeasible")}
"""The columns of text, which fold when the table is too wide, and their least widths."""
_GUTTER = 2
"""Spaces between two columns: a cell's right padding and the (blank) rule."""


def compare_table(rows: list[CompareRow], title: str, wide: bool = False,
                  width: int = 80) -> Table:
    """The rows as a terminal table of at most `width` columns: network, method, status,
    latency (cycles), energy (µJ), E x D (pJ x cycles) and gap; with `wide` also
    utilisation, groups, tiles, runtime (s), the ratios and the bound (cycles), which
    do not fit 80 columns. Long names fold; no header or number is cut."""
    columns = [c for c in TERMINAL_COLUMNS if wide or c[2]]
    cells = [[cell(r) for _, cell, _ in columns] for r in rows]
    widths = _fitted([max([len(name), *(len(row[i]) for row in cells)])
                      for i, (name, _, _) in enumerate(columns)],
                     [_TEXT_COLUMNS.get(name) for name, _, _ in columns], width)
    units = (f"latency{' and bound' if wide else ''} in cycles, energy in µJ, "
             "E×D in pJ × cycles")
    more = "" if wide else "; more columns: --wide, compare.md"
    table = Table(title=f"{title} ({units}{more})", box=box.SIMPLE_HEAD, show_edge=False,
                  pad_edge=False, padding=(0, 1, 0, 0))
    for (name, _, _), w in zip(columns, widths, strict=True):
        text = name in _TEXT_COLUMNS
        table.add_column(name, justify="left" if text else "right", width=w,
                         overflow="fold", no_wrap=not text)
    for row in cells:
        table.add_row(*row)
    return table


def _fitted(natural: list[int], least: list[int | None], width: int) -> list[int]:
    """Column widths within `width` (gutters included): the widest of the columns that
    may fold (`least` not None) narrowed one character at a time, none below its least
    width; the natural widths when they fit."""
    widths = list(natural)
    excess = sum(widths) + _GUTTER * (len(widths) - 1) - width
    while excess > 0:
        foldable = [i for i, low in enumerate(least) if low is not None and widths[i] > low]
        if not foldable:
            break
        widest = max(foldable, key=lambda i: widths[i])
        widths[widest] -= 1
        excess -= 1
    return widths
