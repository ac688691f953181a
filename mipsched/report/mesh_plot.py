"""The picture of a tiled machine's schedule (an RA tree, `mipsched plot ratree.json`):
one panel per segment (a child of the root), the mesh as seen during that segment.

- Each tile is a square at its (x, y) (column left to right, row 0 on top), coloured by
  the layer(s) it runs in the segment (a tile shared by a T Cut's children is striped)
  and labelled with their numbers (the layer's position in the network, from 1; the
  panel's legend names them). Idle tiles are white.
- Each directed link that carries bytes is an arrow beside the link (the two directions
  side by side), its width and colour the bytes it carries in one invocation of the
  segment (one root sub-batch), on one colour scale for the whole figure.
- D marks the DRAM ports.
- Many segments: the longest MAX_PANELS (fewer on a big mesh), in order, with a note.
- Panel title: the segment's layers, its cycles and DRAM bytes per invocation; figure
  title: network, hardware, batch, method, latency, energy, E x D.

`mesh_picture` computes what is drawn (tile -> layers from the S Cuts' allocation, the
segments' link loads from the leaves' records); `save_mesh_plot` draws and writes it.
matplotlib is imported only when drawing.

Units: cycles, bytes, pJ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mipsched.atomic import atomic_path
from mipsched.errors import InputError
from mipsched.hw.tiled import TiledHardware
from mipsched.tiled.evaluate import DEFAULT_STRIDE, Evaluation, evaluate_tree
from mipsched.tiled.leaf import LeafResult
from mipsched.tiled.noc import MINUS_X, MINUS_Y, PLUS_X, PLUS_Y, Link, LinkLoads
from mipsched.tiled.ratree import Cut, Leaf, Node, RaTree, layers_of
from mipsched.tiled.structure import child_spans, core_positions
from mipsched.workload.graph import Workload

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

Tile = tuple[int, int]
MAX_PANELS = 24
"""Segments drawn at most; beyond, the longest ones (by cycles), with a note."""
MAX_TILES_DRAWN = 1152
"""... and at most this many tiles in all (8 panels of a 12 x 12 mesh), to stay legible
and quick to draw."""
_MAX_LEGEND = 6
"""Layers a panel's legend names; more are summarised."""
_SQUARE = 0.62
"""Side of a tile's square, in tile pitches."""
_OFFSET = 0.13
"""Distance of a link's arrow from the line between the two tiles' centres."""


@dataclass(frozen=True)
class SegmentPanel:
    """What one panel shows: a child of the root, for one invocation (one root
    sub-batch). Cycles, pJ and bytes as `evaluate_tree`'s SegmentCost."""

    index: int
    """The segment's position among the root's children (from 0)."""
    layers: tuple[str, ...]
    cycles: int
    energy_pj: float
    dram_bytes: int
    byte_hops: int
    tiles: dict[Tile, tuple[str, ...]]
    """The layers each busy tile runs in this segment, in tree order."""
    links: dict[Link, int]
    """Bytes each directed link (x, y, direction) carries (links with bytes > 0)."""

    @property
    def max_link_bytes(self) -> int:
        """Bytes on the busiest link (0 without traffic)."""
        return max(self.links.values(), default=0)


@dataclass(frozen=True)
class MeshPicture:
    """Everything the mesh picture shows of one RA tree on one tiled machine."""

    network: str
    batch: int
    hardware: str
    method: str
    cols: int
    rows: int
    ports: tuple[Tile, ...]
    latency: int
    """Cycles of the whole tree."""
    energy_pj: float
    root_subbatches: int
    panels: tuple[SegmentPanel, ...]
    numbers: dict[str, int]
    """Each layer's number on the picture: its position in the network, from 1."""

    @property
    def edp(self) -> float:
        """Energy x delay, pJ x cycles."""
        return self.energy_pj * self.latency


def mesh_picture(hw: TiledHardware, workload: Workload, tree: RaTree, method: str = "",
                 evaluation: Evaluation | None = None, stride: int = DEFAULT_STRIDE,
                 min_util: float = 0.75) -> MeshPicture:
    """The picture's data: `evaluation` (default: `evaluate_tree` of `tree`) split into
    its segments, each with the tiles of its layers (the S Cuts' core allocation, as
    `evaluate_tree` makes it) and the bytes on every link (the segment's leaves' records,
    each x the sub-batches of the cuts above it inside the segment). InputError when the
    cost model rejects the tree. The tree must be valid for the workload (`check_tree`)."""
    ev = evaluation or evaluate_tree(hw, workload, tree, stride, min_util)
    if ev is None:
        raise InputError(f"the RA tree of {workload.name} is rejected by SET's cost model "
                         f"on {hw.name} (an S Cut's allocation or a leaf does not fit)")
    root = tree.root
    assert isinstance(root, Cut)
    panels = []
    for k, (child, seg) in enumerate(zip(root.children, ev.segments, strict=True)):
        tiles: dict[Tile, list[str]] = {}
        _place(child, 0, hw.n_tiles, hw, workload, stride, min_util, tiles)
        loads = LinkLoads()
        _add_records(child, ev.leaves, 1, loads)
        panels.append(SegmentPanel(k, tuple(layers_of(child)), seg.cycles, seg.energy_pj,
                                   seg.dram_bytes, seg.byte_hops,
                                   {t: tuple(v) for t, v in sorted(tiles.items())},
                                   dict(loads.links)))
    return MeshPicture(workload.name, workload.batch, hw.name, method, hw.mesh.cols,
                       hw.mesh.rows, tuple((p.x, p.y) for p in hw.dram.ports), ev.latency,
                       ev.energy_pj, root.subbatches, tuple(panels),
                       {name: k + 1 for k, name in enumerate(workload.layers)})


def _place(node: Node, first: int, last: int, hw: TiledHardware, workload: Workload,
           stride: int, min_util: float, into: dict[Tile, list[str]]) -> None:
    """Adds the tiles of every leaf under `node`, which runs on cores [first, last)."""
    if isinstance(node, Leaf):
        for tile in core_positions(first, last, hw.mesh.cols, hw.mesh.rows, stride):
            into.setdefault(tile, []).append(node.layer)
        return
    ranges = child_spans(node, workload, first, last, min_util)
    if ranges is None:
        raise InputError("an S Cut's core allocation fails its utilisation test or its "
                         "ranges exceed its cores")
    for child, (lo, hi) in zip(node.children, ranges, strict=True):
        _place(child, lo, hi, hw, workload, stride, min_util, into)


def _add_records(node: Node, leaves: dict[str, LeafResult], times: int,
                 into: LinkLoads) -> None:
    """Adds every leaf's record x `times` x the sub-batches of the cuts down to it."""
    if isinstance(node, Leaf):
        into += leaves[node.layer].record.scaled(times)
        return
    for child in node.children:
        _add_records(child, leaves, times * node.subbatches, into)


def shown_panels(pic: MeshPicture, max_panels: int | None = None) -> list[SegmentPanel]:
    """The panels drawn: all, or the `max_panels` longest (cycles; ties: earlier), in
    segment order; by default MAX_PANELS, fewer on a mesh of more than
    MAX_TILES_DRAWN / MAX_PANELS tiles."""
    if max_panels is None:
        max_panels = max(1, min(MAX_PANELS, MAX_TILES_DRAWN // (pic.cols * pic.rows)))
    if len(pic.panels) <= max_panels:
        return list(pic.panels)
    longest = sorted(pic.panels, key=lambda p: (-p.cycles, p.index))[:max_panels]
    return sorted(longest, key=lambda p: p.index)


# --- drawing ---------------------------------------------------------------------------------
def save_mesh_plot(path: Path, pic: MeshPicture, max_panels: int | None = None) -> None:
    """Draws `pic` and writes it as PNG or SVG (by suffix), whole or not at all."""
    path = Path(path)
    fig = mesh_figure(pic, max_panels)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=path.suffix.lower().lstrip("."), dpi=120)


def mesh_figure(pic: MeshPicture, max_panels: int | None = None) -> Figure:
    """The figure: a grid of segment panels, one colour bar for the link loads."""
    import matplotlib
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    panels = shown_panels(pic, max_panels)
    ncols = max(1, math.ceil(math.sqrt(len(panels))))
    nrows = max(1, math.ceil(len(panels) / ncols))
    side = min(max(0.55 * max(pic.cols, pic.rows) + 1.2, 3.0), 6.5, 26.0 / ncols)
    fig = Figure(figsize=(ncols * side + 1.2, nrows * (side + 0.9) + 1.0),
                 layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    top = max((p.max_link_bytes for p in panels), default=0)
    norm = Normalize(0, max(top, 1))
    cmap = matplotlib.colormaps["plasma_r"]
    colours = matplotlib.colormaps["tab20"]
    for ax, panel in zip(axes, panels, strict=False):
        _draw_panel(ax, pic, panel, norm, cmap, colours)
    for ax in axes[len(panels):]:
        ax.set_axis_off()
    fig.colorbar(ScalarMappable(norm, cmap), ax=list(axes), shrink=0.6,
                 format=FuncFormatter(lambda v, _pos: _bytes(int(v))),
                 label="bytes on a directed link, one segment invocation")
    fig.suptitle(_title(pic, len(panels)), fontsize=11)
    return fig


def _title(pic: MeshPicture, shown: int) -> str:
    """The figure's title: network, machine, batch, method, the tree's figures."""
    method = f" — {pic.method}" if pic.method else ""
    sub = (f", the root runs them {pic.root_subbatches}× (sub-batches)"
           if pic.root_subbatches > 1 else "")
    more = (f"; showing the {shown} longest of {len(pic.panels)} segments"
            if shown < len(pic.panels) else "")
    return (f"{pic.network} on {pic.hardware} ({pic.cols}×{pic.rows}), batch {pic.batch}"
            f"{method}\nlatency {pic.latency:,} cycles, energy {pic.energy_pj / 1e6:,.1f} µJ,"
            f" E×D {pic.edp:.3g} pJ·cycles; {len(pic.panels)} segments{sub}{more}\n"
            "label = layer number, arrow = bytes on a directed link, D = DRAM port")


def _draw_panel(ax: Axes, pic: MeshPicture, panel: SegmentPanel, norm: Any, cmap: Any,
                colours: Any) -> None:
    """One segment: tiles, DRAM ports, link arrows, title and legend."""
    from matplotlib.patches import Patch

    def colour(name: str) -> Any:
        return colours((pic.numbers[name] - 1) % 20)

    _draw_tiles(ax, pic, panel, colour)
    _draw_ports(ax, pic)
    _draw_links(ax, panel, norm, cmap)
    ax.set_xlim(-1.0, pic.cols)
    ax.set_ylim(pic.rows, -1.0)  # row 0 on top
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(_panel_title(pic, panel), fontsize=8)
    names = list(panel.layers)
    handles = [Patch(facecolor=colour(n), label=f"{pic.numbers[n]} {n}")
               for n in names[:_MAX_LEGEND]]
    if len(names) > _MAX_LEGEND:
        handles.append(Patch(facecolor="white", edgecolor="none",
                             label=f"+ {len(names) - _MAX_LEGEND} more"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncols=2,
              fontsize=6, frameon=False, handlelength=1.0, columnspacing=0.8)


def _square(x0: float, y0: float, w: float, h: float) -> list[tuple[float, float]]:
    return [(x0, y0), (x0 + w, y0), (x0 + w, y0 + h), (x0, y0 + h)]


def _draw_tiles(ax: Axes, pic: MeshPicture, panel: SegmentPanel, colour: Any) -> None:
    """Every tile: stripes in its layers' colours (white when idle), outline, label."""
    from matplotlib.collections import PolyCollection

    half = _SQUARE / 2
    stripes, fills, outlines, edges = [], [], [], []
    for x in range(pic.cols):
        for y in range(pic.rows):
            names = panel.tiles.get((x, y), ())
            width = _SQUARE / max(len(names), 1)
            for k, name in enumerate(names):
                stripes.append(_square(x - half + k * width, y - half, width, _SQUARE))
                fills.append(colour(name))
            outlines.append(_square(x - half, y - half, _SQUARE, _SQUARE))
            edges.append("black" if names else "lightgrey")
            if names:
                ax.text(x, y, _numbers([pic.numbers[n] for n in names]), ha="center",
                        va="center", fontsize=_font(pic), clip_on=True)
    ax.add_collection(PolyCollection(stripes, facecolors=fills, edgecolors="none"))
    ax.add_collection(PolyCollection(outlines, facecolors="none", edgecolors=edges,
                                     linewidths=0.6))


def _font(pic: MeshPicture) -> float:
    """Tile label size, points: smaller on bigger meshes."""
    return 7.0 if max(pic.cols, pic.rows) <= 6 else 4.5


def _numbers(numbers: list[int]) -> str:
    """A tile's label: its layers' numbers, a run of consecutive ones as first–last."""
    if len(numbers) <= 2:
        return ",".join(map(str, numbers))
    if numbers == list(range(numbers[0], numbers[0] + len(numbers))):
        return f"{numbers[0]}–{numbers[-1]}"
    return f"{numbers[0]},…({len(numbers)})"


def _panel_title(pic: MeshPicture, panel: SegmentPanel) -> str:
    """Segment number, its layers (first and last), cycles and DRAM bytes."""
    first, last = panel.layers[0], panel.layers[-1]
    names = first if len(panel.layers) == 1 else f"{first} … {last}"
    if len(names) > 34:
        names = names[:33] + "…"
    count = f" ({len(panel.layers)} layers)" if len(panel.layers) > 1 else ""
    return (f"segment {panel.index}: {names}{count}\n{panel.cycles:,} cycles, DRAM "
            f"{_bytes(panel.dram_bytes)}, busiest link {_bytes(panel.max_link_bytes)}")


def _bytes(n: int) -> str:
    """Bytes with a k / M / G suffix (powers of 1000)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


def _draw_ports(ax: Axes, pic: MeshPicture) -> None:
    """A small dark box labelled D outside the mesh edge beside every DRAM port tile."""
    from matplotlib.patches import Rectangle

    for x, y in pic.ports:
        if x in (0, pic.cols - 1):
            dx, dy = (-0.72 if x == 0 else 0.72), 0.0
        else:
            dx, dy = 0.0, (-0.72 if y == 0 else 0.72)
        cx, cy = x + dx, y + dy
        ax.plot([x + dx * 0.45, cx], [y + dy * 0.45, cy], color="dimgrey", lw=1.5)
        ax.add_patch(Rectangle((cx - 0.14, cy - 0.14), 0.28, 0.28, facecolor="dimgrey",
                               edgecolor="black", lw=0.5))
        ax.text(cx, cy, "D", ha="center", va="center", fontsize=5, color="white")


_DIRECTION = {PLUS_X: (1, 0), MINUS_X: (-1, 0), PLUS_Y: (0, 1), MINUS_Y: (0, -1)}


def _draw_links(ax: Axes, panel: SegmentPanel, norm: Any, cmap: Any) -> None:
    """An arrow per loaded link, beside the line between the two tiles (each direction
    on its own side), width and colour by bytes; the busiest drawn last (on top)."""
    from matplotlib.collections import PolyCollection

    top = max(norm.vmax, 1)
    arrows, fills = [], []
    for (x, y, d), n in sorted(panel.links.items(), key=lambda item: item[1]):
        arrows.append(_arrow(x, y, _DIRECTION[d], 0.012 + 0.045 * n / top))
        fills.append(cmap(norm(n)))
    ax.add_collection(PolyCollection(arrows, facecolors=fills, edgecolors="none"))


def _arrow(x: int, y: int, step: tuple[int, int], half: float) -> list[tuple[float, float]]:
    """The outline of the arrow of the link from tile (x, y) one `step` on: a shaft of
    half-width `half` and a head, offset to the right of the travel direction."""
    dx, dy = step
    px, py = -dy, dx  # the right of the travel direction (rows grow downwards)
    start, end, head = _SQUARE / 2, 1 - _SQUARE / 2, 0.11

    def at(along: float, side: float) -> tuple[float, float]:
        across = _OFFSET + side
        return x + dx * along + px * across, y + dy * along + py * across

    wing = half + 0.035
    return [at(start, -half), at(end - head, -half), at(end - head, -wing), at(end, 0.0),
            at(end - head, wing), at(end - head, half), at(start, half)]
