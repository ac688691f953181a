"""`mipsched sweep plot`: a sweep's results as SoMa-Fig.-7-style heatmaps and Pareto
fronts, one file of each per (network, batch).

- `heatmap-NETWORK-bBATCH.png`: latency (cycles) over DRAM bandwidth
  (x, `dram.bytes_per_cycle`, bytes/cycle) × global-buffer capacity (y,
  `gbuf.capacity_bytes`, shown in MiB). Colour = latency / the panel's best (log scale,
  colour bar); each cell says that ratio and its latency, "—" where no run of the cell
  found a schedule; the cells within 1 % of the best are enclosed by a thick red line
  (SoMa's red envelope). A cell pools every row with its bandwidth and capacity (methods,
  seeds, other axes) and shows the least latency; the title says over what. With one of
  the two axes not swept the panel is a 1-D strip.
- `pareto-NETWORK-bBATCH.png`: buffer capacity (MiB) vs latency (cycles) and vs energy
  (µJ), every point with a schedule as a dot (colour = DRAM bandwidth), the Pareto-optimal
  ones (no other point with ≤ buffer and ≤ latency [energy], one of them strictly less)
  ringed and joined by a step line. Each latency dot has a bar down to its certified
  lower bound (`lower_bound_cycles`), each energy dot down to its certified energy bound
  (`lower_bound_energy_pj`, the certificate's; sweeps older than that column have none).

The data part (`load_rows`, `best_cells`, `within_best`, `pareto_mask`) is pure; the
figures are `Figure` objects written through `atomic_path`.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from mipsched.atomic import atomic_path
from mipsched.errors import InputError
from mipsched.report.results import safe_name
from mipsched.sweep.journal import JOURNAL, read_journal

CAPACITY = "gbuf.capacity_bytes"
BANDWIDTH = "dram.bytes_per_cycle"
WITHIN = 0.01
"""The red envelope: latency at most this fraction above the panel's best."""
MIB = float(1 << 20)
FORMATS = ("png", "svg")
#: Columns read as numbers from results.csv (the rest stay text).
NUMERIC = ("batch", "seed", "time_limit", "latency_cycles", "energy_pj", "edp",
           "lower_bound_cycles", "lower_bound_energy_pj", "gap")
#: Run parameters a heatmap cell pools over besides the axes other than the two drawn.
POOLED = ("method", "objective", "seed", "time_limit")

Cell = tuple[float | None, float | None]
"""(DRAM bandwidth in bytes/cycle, buffer capacity in bytes); None: not swept."""


@dataclass(frozen=True)
class Panel:
    """One heatmap: the least latency per cell of one network and batch."""

    network: str
    batch: int
    bandwidths: tuple[float | None, ...]
    """x values, bytes/cycle, ascending; (None,) when the bandwidth is not swept."""
    capacities: tuple[float | None, ...]
    """y values, bytes, ascending; (None,) when the capacity is not swept."""
    latency: dict[Cell, int | None]
    """Least latency (cycles) per cell; None: no run of the cell found a schedule."""
    runs: int
    """The most rows pooled into one cell."""
    pooled: tuple[str, ...]
    """The columns that vary within a cell (the best of them is shown)."""

    @property
    def best(self) -> int | None:
        """The panel's least latency (cycles); None when no cell has a schedule."""
        return min((v for v in self.latency.values() if v is not None), default=None)


def load_rows(directory: Path) -> list[dict[str, Any]]:
    """The rows of the sweep in `directory`: results.csv (numbers parsed; an empty cell
    is None) or, when it is missing, the journal's rows (every point ever finished
    there). InputError when there is neither or no row."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(f"{directory}: no such directory")
    table = directory / "results.csv"
    if table.exists():
        with table.open(newline="") as f:
            rows = [_parsed(row) for row in csv.DictReader(f)]
    elif (directory / JOURNAL).exists():
        rows = list(read_journal(directory).values())
    else:
        raise InputError(f"{directory}: no sweep results (no results.csv or {JOURNAL})")
    if not rows:
        raise InputError(f"{directory}: the sweep has no finished point yet")
    return rows


def _parsed(row: dict[str, str]) -> dict[str, Any]:
    """A results.csv row with its numeric columns (and the axes) as numbers."""
    return {k: _number(v) if k in NUMERIC or "." in k else (v or None)
            for k, v in row.items()}


def _number(text: str | None) -> int | float | str | None:
    """'' -> None, '8' -> 8, '2.5' -> 2.5; anything else stays text."""
    if text is None or text == "":
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _latency(row: dict[str, Any]) -> int | None:
    """The row's latency in cycles; None when the point found no schedule."""
    value = row.get("latency_cycles")
    return int(value) if isinstance(value, int | float) and math.isfinite(value) else None


def best_cells(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, int], Panel]:
    """(network, batch) -> its heatmap panel: every (bandwidth, capacity) that has a row,
    with the least latency of its rows (None when none of them has a schedule)."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((str(row["network"]), int(row["batch"])), []).append(row)
    panels = {}
    for (network, batch), members in groups.items():
        cells: dict[Cell, list[dict[str, Any]]] = {}
        for row in members:
            cells.setdefault((row.get(BANDWIDTH), row.get(CAPACITY)), []).append(row)
        latency = {cell: min((v for r in rs if (v := _latency(r)) is not None),
                             default=None) for cell, rs in cells.items()}
        pooled = tuple(k for k in _pooled_columns(members)
                       if any(len({_key(r, k) for r in rs}) > 1 for rs in cells.values()))
        panels[network, batch] = Panel(
            network, batch, _ascending({b for b, _ in cells}),
            _ascending({c for _, c in cells}), latency,
            max(len(rs) for rs in cells.values()), pooled)
    return panels


def _pooled_columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The run parameters and hardware axes other than the two drawn, plus `hardware`
    (its preset: the part of the name before the axes)."""
    axes = sorted({k for r in rows for k in r if "." in k} - {BANDWIDTH, CAPACITY})
    return [*POOLED, *axes, "hardware"]


def _key(row: dict[str, Any], column: str) -> Any:
    value = row.get(column)
    return str(value).split("[")[0] if column == "hardware" else value


def _ascending(values: set[Any]) -> tuple[Any, ...]:
    """Sorted ascending, None (not swept, or a row without the axis) first."""
    return (*([None] if None in values else []), *sorted(v for v in values if v is not None))


def within_best(latency: dict[Cell, int | None], tolerance: float = WITHIN
                ) -> dict[Cell, bool]:
    """Per cell: whether its latency (cycles) is at most `tolerance` (a fraction: 0.01
    = 1 %) above the least of all cells; False for a cell without a schedule."""
    best = min((v for v in latency.values() if v is not None), default=None)
    return {cell: v is not None and best is not None and v - best <= tolerance * best
            for cell, v in latency.items()}


def pareto_mask(points: Sequence[tuple[float, float]]) -> list[bool]:
    """Per point (x, y), both minimised: whether it is Pareto-optimal — no other point
    has x' ≤ x and y' ≤ y with one of them strictly less. Equal points are all optimal.
    O(n log n)."""
    order = sorted(range(len(points)), key=lambda k: points[k])
    mask = [False] * len(points)
    below = math.inf  # the least y among the points of strictly smaller x
    for _, group in groupby(order, key=lambda k: points[k][0]):
        same = list(group)
        least = points[same[0]][1]  # sorted by (x, y): the group's least y comes first
        if least < below:
            for i in same:
                mask[i] = points[i][1] == least
            below = least
    return mask


def feasible_by_panel(rows: Sequence[dict[str, Any]]
                      ) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """(network, batch) -> its rows that have a schedule and a buffer capacity."""
    out: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for row in rows:
        if _latency(row) is not None and row.get(CAPACITY) is not None:
            out.setdefault((str(row["network"]), int(row["batch"])), []).append(row)
    return out


def heatmap_figure(panel: Panel) -> Figure:
    """The panel's heatmap: latency / best per cell (log colour scale), the cells within
    1 % of the best enclosed in red, "—" where there is no schedule."""
    best = panel.best
    assert best is not None, "a panel without a schedule has no heatmap"
    xs, ys = panel.bandwidths, panel.capacities
    ratio = np.full((len(ys), len(xs)), np.nan)
    for (bw, cap), value in panel.latency.items():
        if value is not None:
            ratio[ys.index(cap), xs.index(bw)] = value / best
    top = max(float(np.nanmax(ratio)), 1.01)
    norm = LogNorm(vmin=1.0, vmax=top)
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="0.88")
    fig = Figure(figsize=(max(4.8, 1.0 * len(xs) + 2.8), max(3.4, 0.62 * len(ys) + 2.2)),
                 layout="constrained")
    ax = fig.subplots()
    image = ax.imshow(np.ma.masked_invalid(ratio), cmap=cmap, norm=norm, origin="lower",
                      aspect="auto")
    _annotate_cells(ax, panel, ratio, norm)
    _draw_envelope(ax, panel)
    bar = fig.colorbar(image, ax=ax, shrink=0.9)
    ticks = np.geomspace(1.0, top, 5)
    bar.set_ticks(ticks, labels=[f"{t:.2f}" for t in ticks])
    bar.minorticks_off()
    bar.set_label("latency / best of panel (log scale)")
    ax.set_xticks(range(len(xs)), ["not swept" if b is None else f"{b:g}" for b in xs])
    ax.set_yticks(range(len(ys)), ["not swept" if c is None else f"{c / MIB:g}" for c in ys])
    ax.set_xlabel("DRAM bandwidth (bytes/cycle)")
    ax.set_ylabel("global buffer (MiB)")
    pooled = (f"\nbest of up to {panel.runs} runs per cell, over "
              f"{', '.join(panel.pooled)}" if panel.pooled else "")
    ax.set_title(f"{panel.network}, batch {panel.batch}: latency / best ({best:,} cycles)"
                 f"\nred: within {WITHIN:.0%} of the best; —: no schedule{pooled}",
                 fontsize=9)
    return fig


def _annotate_cells(ax: Axes, panel: Panel, ratio: np.ndarray, norm: LogNorm) -> None:
    """Each cell's ratio to the best (2 decimals) and its latency (cycles), "—" where
    the cell has no schedule."""
    small = max(ratio.shape) > 8
    for iy, cap in enumerate(panel.capacities):
        for ix, bw in enumerate(panel.bandwidths):
            value = panel.latency.get((bw, cap))
            if value is None:
                text, colour = "—", "black"
            else:
                text = f"{ratio[iy, ix]:.2f}\n{_short(value)}"
                colour = "black" if norm(ratio[iy, ix]) > 0.55 else "white"
            ax.text(ix, iy, text, ha="center", va="center", color=colour,
                    fontsize=6.5 if small else 8.5, linespacing=1.1)


def _draw_envelope(ax: Axes, panel: Panel) -> None:
    """The red line around the cells within 1 % of the best: every side of such a cell
    whose neighbour is not one of them (or is outside the panel)."""
    inside = within_best(panel.latency)
    xs, ys = panel.bandwidths, panel.capacities

    def within(ix: int, iy: int) -> bool:
        ok = 0 <= ix < len(xs) and 0 <= iy < len(ys)
        return ok and inside.get((xs[ix], ys[iy]), False)

    segments = []
    for iy in range(len(ys)):
        for ix in range(len(xs)):
            if not within(ix, iy):
                continue
            x0, x1, y0, y1 = ix - 0.5, ix + 0.5, iy - 0.5, iy + 0.5
            sides = (((ix - 1, iy), [(x0, y0), (x0, y1)]), ((ix + 1, iy), [(x1, y0), (x1, y1)]),
                     ((ix, iy - 1), [(x0, y0), (x1, y0)]), ((ix, iy + 1), [(x0, y1), (x1, y1)]))
            segments += [seg for (nx, ny), seg in sides if not within(nx, ny)]
    ax.add_collection(LineCollection(segments, colors="red", linewidths=3.2,
                                     capstyle="projecting", zorder=3))


def _short(cycles: float) -> str:
    """Cycles with a k / M suffix (3 significant digits)."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(cycles) >= scale:
            return f"{cycles / scale:.3g}{suffix}"
    return f"{cycles:g}"


def pareto_figure(network: str, batch: int, rows: Sequence[dict[str, Any]]) -> Figure:
    """Buffer capacity (MiB) vs latency (cycles) and vs energy (µJ), each with bars down
    to the point's certified lower bound where the row has one; Pareto
    points ringed and joined by a step line; dot colour = DRAM bandwidth (bytes/cycle)."""
    fig = Figure(figsize=(11, 4.4), layout="constrained")
    lat_ax, energy_ax = fig.subplots(1, 2)
    cap = [float(r[CAPACITY]) / MIB for r in rows]
    latency = [float(r["latency_cycles"]) for r in rows]
    bound = [float(b) if isinstance(b := r.get("lower_bound_cycles"), int | float)
             else math.nan for r in rows]
    energy = [float(e) / 1e6 if isinstance(e := r.get("energy_pj"), int | float)
              else math.nan for r in rows]
    energy_bound = [float(b) / 1e6 if isinstance(b := r.get("lower_bound_energy_pj"),
                                                 int | float) else math.nan for r in rows]
    colours, legend = _bandwidth_colours(rows)
    _pareto_axes(lat_ax, cap, latency, colours, bound)
    lat_ax.set_ylabel("latency (cycles)")
    lat_ax.set_title("latency; bar = certified lower bound", fontsize=9)
    _pareto_axes(energy_ax, cap, energy, colours, energy_bound)
    energy_ax.set_ylabel("energy (µJ)")
    energy_ax.set_title("energy; bar = certified lower bound"
                        + ("" if any(map(math.isfinite, energy_bound))
                           else " (none in these rows)"), fontsize=9)
    handles = [energy_ax.scatter([], [], color=c, s=22, label=f"{b:g}")
               for b, c in legend]
    handles.append(energy_ax.scatter([], [], facecolors="none", edgecolors="red", s=80,
                                     label="Pareto-optimal"))
    title = "DRAM B/cycle" if legend else None
    energy_ax.legend(handles=handles, title=title, fontsize=7, title_fontsize=7,
                     loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    fig.suptitle(f"{network}, batch {batch}: {len(rows)} points with a schedule; "
                 "Pareto-optimal (no point with ≤ buffer and ≤ value) joined", fontsize=10)
    return fig


def _bandwidth_colours(rows: Sequence[dict[str, Any]]
                       ) -> tuple[list[Any], list[tuple[float, Any]]]:
    """Per row its dot colour by DRAM bandwidth rank (viridis), and the legend entries
    (bandwidth in bytes/cycle, colour); one grey and no entries when it is not swept."""
    values = sorted({r[BANDWIDTH] for r in rows if r.get(BANDWIDTH) is not None})
    if not values:
        return ["tab:blue"] * len(rows), []
    cmap = matplotlib.colormaps["viridis"]
    colour = {v: cmap(0.85 * k / max(len(values) - 1, 1)) for k, v in enumerate(values)}
    legend = list(colour.items()) if len(values) <= 12 else []
    return [colour.get(r.get(BANDWIDTH), "grey") for r in rows], legend


def _pareto_axes(ax: Axes, xs: list[float], ys: list[float], colours: list[Any],
                 bounds: list[float] | None) -> None:
    """One panel: dots (x in MiB, y in the panel's unit), the Pareto step line and rings,
    and optional bars from each bound up to its dot."""
    keep = [k for k, y in enumerate(ys) if math.isfinite(y)]
    if bounds is not None:
        bars = [k for k in keep if math.isfinite(bounds[k])]
        ax.vlines([xs[k] for k in bars], [bounds[k] for k in bars], [ys[k] for k in bars],
                  colors=[colours[k] for k in bars], linewidth=1.0, alpha=0.7, zorder=1)
        ax.scatter([xs[k] for k in bars], [bounds[k] for k in bars], marker="_", s=60,
                   c=[colours[k] for k in bars], zorder=1)
    ax.scatter([xs[k] for k in keep], [ys[k] for k in keep], c=[colours[k] for k in keep],
               s=22, zorder=2)
    mask = pareto_mask([(xs[k], ys[k]) for k in keep])
    front = sorted((xs[k], ys[k]) for k, m in zip(keep, mask, strict=True) if m)
    if front:  # the least value reachable with at most x buffer, to the right edge
        steps = [*front, (max(xs), front[-1][1])]
        ax.step([p[0] for p in steps], [p[1] for p in steps], where="post", color="red",
                linewidth=1.3, zorder=3)
        ax.scatter([p[0] for p in front], [p[1] for p in front], facecolors="none",
                   edgecolors="red", s=80, linewidths=1.3, zorder=4)
    if xs and max(xs) > 3 * min(xs):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    low = min((v for v in [*ys, *(bounds or [])] if math.isfinite(v) and v > 0), default=0)
    if low and max(ys[k] for k in keep) > 10 * low:
        ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _short(v)))
    ax.set_xlabel("global buffer (MiB)")
    ax.grid(True, alpha=0.3)


@dataclass(frozen=True)
class PlotsWritten:
    """What `write_plots` did: the files it wrote, and why a figure was left out."""

    files: list[Path]
    notes: list[str]


def write_plots(directory: Path, out: Path | None = None, fmt: str = "png") -> PlotsWritten:
    """Draws the sweep in `directory` into `out` (default DIR/plots, created): one
    heatmap and one Pareto figure per (network, batch), each file whole or not at all.
    InputError before anything is written when there is nothing to draw."""
    if fmt not in FORMATS:
        raise InputError(f"--format: '{fmt}' is not one of {', '.join(FORMATS)}")
    directory = Path(directory)
    rows = load_rows(directory)
    if all(_latency(r) is None for r in rows):
        raise InputError(f"{directory}: no point of the sweep has a schedule "
                         f"({len(rows)} finished); nothing to plot")
    if not any(r.get(CAPACITY) is not None or r.get(BANDWIDTH) is not None for r in rows):
        raise InputError(f"{directory}: neither {CAPACITY} nor {BANDWIDTH} is an axis of "
                         "the sweep; nothing to plot")
    panels, fronts = best_cells(rows), feasible_by_panel(rows)
    out = directory / "plots" if out is None else Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    notes: list[str] = []
    for (network, batch), panel in sorted(panels.items()):
        stem = f"{safe_name(network)}-b{batch}.{fmt}"
        if panel.best is None:
            notes.append(f"{network} batch {batch}: no point has a schedule; no figures")
            continue
        written.append(_save(heatmap_figure(panel), out / f"heatmap-{stem}", fmt))
        if (network, batch) in fronts:
            written.append(_save(pareto_figure(network, batch, fronts[network, batch]),
                                 out / f"pareto-{stem}", fmt))
        else:
            notes.append(f"{network} batch {batch}: {CAPACITY} is not an axis; no Pareto "
                         "front")
    return PlotsWritten(written, notes)


def _save(fig: Figure, path: Path, fmt: str) -> Path:
    """Writes `fig` to `path` as `fmt` (png at 150 dpi, or svg) atomically."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=fmt, dpi=150)
    return path
