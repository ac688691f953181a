"""The picture of a schedule (SoMa Fig. 4/8): DRAM and COMPUTE rows on one time axis,
the buffer occupancy below with the capacity line.

Colour = layer; hatched red on the COMPUTE row = stall; dotted stores on the DRAM row;
dotted vertical lines = FLG boundaries, solid = LG (DRAM-cut) boundaries; T=k above the
COMPUTE row = tiling number of the FLG starting there.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

from mipsched.atomic import atomic_path
from mipsched.schedule.tile_program import TileProgram
from mipsched.sim.result import SimResult

MIB = float(1 << 20)
_COMPUTE_Y, _DRAM_Y, _ROW = 0.0, 1.0, 0.8
_MAX_LEGEND_LAYERS = 16
_MAX_TILING_LABELS = 40


def schedule_figure(program: TileProgram, sim: SimResult, title: str = "") -> Figure:
    """The figure; its buffer curve is the line labelled 'buffer' (MiB)."""
    fig = Figure(figsize=(14, 6.5), layout="constrained")
    gantt, buf = fig.subplots(2, 1, sharex=True, height_ratios=[1.0, 1.0])
    layers = list(dict.fromkeys(t.layer for t in program.tiles))
    cmap = matplotlib.colormaps["tab20"]
    colour = {name: cmap(k % 20) for k, name in enumerate(layers)}
    _draw_rows(gantt, program, sim, colour)
    groups = _mark_groups(program, sim, gantt, buf)
    _draw_buffer(buf, sim)
    stall_share = sim.stall_cycles / sim.latency_cycles if sim.latency_cycles else 0.0
    gantt.set_title(
        f"{title or program.name}: {sim.latency_cycles:,} cycles, "
        f"{sim.energy_pj / 1e6:,.1f} µJ, stalls {stall_share:.0%}, "
        f"{len(program.tiles)} tiles, {len(program.tensors)} DRAM tensors"
        + (f", {groups}" if groups else ""), fontsize=10)
    handles = [Patch(facecolor="none", edgecolor="red", hatch="////", label="stall"),
               Patch(facecolor="lightgrey", hatch="..", edgecolor="black", label="store")]
    if len(layers) <= _MAX_LEGEND_LAYERS:
        handles += [Patch(facecolor=colour[n], label=n) for n in layers]
    else:
        handles.append(Patch(facecolor="white", edgecolor="none",
                             label=f"colour = layer ({len(layers)} layers)"))
    gantt.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7,
                 frameon=False)
    return fig


def _draw_rows(gantt: Axes, program: TileProgram, sim: SimResult,
               colour: dict[str, Any]) -> None:
    """The COMPUTE row (tiles by layer colour, stalls hatched red) and the DRAM row
    (loads, stores dotted), in cycles."""
    many = len(program.tiles) > 150
    edge = dict(edgecolor="none") if many else dict(edgecolor="white", linewidth=0.5)
    spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for t in sim.tiles:
        spans[t.layer].append((t.start, max(t.end - t.start, 0)))
    for name, bars in spans.items():
        gantt.broken_barh(bars, (_COMPUTE_Y + 0.1, _ROW), facecolors=colour[name], **edge)
    stalls = [(t.start - t.stall, t.stall) for t in sim.stalls]
    if stalls:
        gantt.broken_barh(stalls, (_COMPUTE_Y + 0.1, _ROW), facecolors="none",
                          edgecolor="red", hatch="////", linewidth=0.0)
    loads: dict[str, list[tuple[int, int]]] = defaultdict(list)
    stores: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for x in sim.transfers:
        (stores if x.kind == "store_ofmap" else loads)[x.layer].append(
            (x.start, x.end - x.start))
    for name, bars in loads.items():
        gantt.broken_barh(bars, (_DRAM_Y + 0.1, _ROW), facecolors=colour.get(name, "grey"),
                          **edge)
    for name, bars in stores.items():
        gantt.broken_barh(bars, (_DRAM_Y + 0.1, _ROW), facecolors=colour.get(name, "grey"),
                          hatch="..", edgecolor="black", linewidth=0.0)
    gantt.set_yticks([_COMPUTE_Y + 0.5, _DRAM_Y + 0.5], ["COMPUTE", "DRAM"])
    gantt.set_ylim(-0.05, 2.5)


def _draw_buffer(buf: Axes, sim: SimResult) -> None:
    """The buffer occupancy (MiB) over time with the capacity line and the peak."""
    times = [s.time for s in sim.buffer] + [sim.latency_cycles]
    level = [s.bytes / MIB for s in sim.buffer]
    level.append(level[-1])
    buf.step(times, level, where="post", color="tab:blue", linewidth=1.2, label="buffer")
    buf.fill_between(times, level, step="post", color="tab:blue", alpha=0.25)
    cap = sim.capacity_bytes / MIB
    buf.axhline(cap, color="red", linestyle="--", linewidth=1.2,
                label=f"capacity {cap:.1f} MiB")
    peak_at = max(range(len(sim.buffer)), key=lambda k: sim.buffer[k].bytes)
    buf.annotate(f"peak {sim.peak_buffer_bytes / MIB:.2f} MiB",
                 (sim.buffer[peak_at].time, sim.peak_buffer_bytes / MIB),
                 xytext=(0, 6), textcoords="offset points", fontsize=8, ha="left")
    peak = sim.peak_buffer_bytes / MIB
    if cap > 3 * peak > 0:  # keep the curve readable; say where the capacity is
        buf.set_ylim(0, peak * 1.35)
        buf.text(0.99, 0.97, f"capacity {cap:.1f} MiB is above this scale", ha="right",
                 va="top", transform=buf.transAxes, fontsize=8, color="red")
    else:
        buf.set_ylim(0, max(cap, peak) * 1.12)
    buf.set_ylabel("buffer (MiB)")
    buf.set_xlabel("time (cycles)")
    buf.set_xlim(0, max(sim.latency_cycles, 1))
    buf.xaxis.set_major_formatter(FuncFormatter(_cycles))
    buf.legend(loc="upper left", fontsize=8)


def _mark_groups(program: TileProgram, sim: SimResult, gantt: Axes, buf: Axes) -> str:
    """Vertical lines at FLG (dotted) and LG (solid) starts, tiling numbers above the
    rows; with many groups the lines stay faint and on the Gantt rows only. Returns a
    note for the title."""
    starts: list[tuple[int, bool, int]] = []  # (time, new LG, tiling number)
    tiles = program.tiles
    for p, t in enumerate(tiles):
        if t.flg is None:
            return ""
        if p == 0 or t.flg != tiles[p - 1].flg:
            count = sum(1 for u in tiles if u.flg == t.flg and u.layer == t.layer)
            starts.append((sim.tiles[p].start - sim.tiles[p].stall,
                           p > 0 and t.lg != tiles[p - 1].lg, count))
    crowded = len(starts) > _MAX_TILING_LABELS
    for time, new_lg, _ in starts[1:]:
        for ax in (gantt,) if crowded else (gantt, buf):
            ax.axvline(time, color="black" if new_lg else "grey",
                       linestyle="-" if new_lg else ":", linewidth=0.5 if crowded else 0.9,
                       alpha=0.35 if crowded else 0.9)
    if crowded:
        return f"{len(starts)} FLGs"
    for k, (time, _, count) in enumerate(starts):  # two staggered rows of labels
        gantt.text(time, 2.02 + 0.2 * (k % 2), f" T={count}", fontsize=7, va="bottom",
                   ha="left")
    return f"{len(starts)} FLGs"


def _cycles(value: float, _pos: int) -> str:
    """A time-axis tick label: cycles with k / M suffixes."""
    if abs(value) >= 1e6:
        return f"{value / 1e6:g}M"
    if abs(value) >= 1e3:
        return f"{value / 1e3:g}k"
    return f"{value:g}"


def save_plot(path: Path, program: TileProgram, sim: SimResult, title: str = "") -> None:
    """Writes the figure as PNG or SVG (by suffix) without leaving a partial file."""
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    fig = schedule_figure(program, sim, title)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=fmt, dpi=150)
