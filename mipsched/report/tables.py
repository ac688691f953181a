"""The terminal tables of `solve`, `eval`, `simulate`, `bound`, `zoo` and `hw` (rich):
what a person reads; the machine reads the --json result objects instead."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Group
from rich.table import Table

from mipsched.hw.model import Hardware
from mipsched.hw.tiled import TiledHardware
from mipsched.schedule.tile_program import TileProgram
from mipsched.sim import SimResult
from mipsched.solve import BoundReport
from mipsched.solve.gap_split import GapSplit

#: Units of the bounds that are not in cycles.
BOUND_UNITS = {"energy": "pJ", "lfa_energy": "pJ", "edp": "pJ x cycles"}


def figures_table(title: str, rows: dict[str, Any]) -> Table:
    """A result object as a two-column table: each figure and its value."""
    table = Table(title=title, show_header=False)
    table.add_column("figure", style="bold")
    table.add_column("value", justify="right")
    for key, value in rows.items():
        if isinstance(value, bool):
            text = str(value).lower()  # as in the JSON, not as the integer it also is
        elif isinstance(value, float):
            text = f"{value:.4g}" if abs(value) < 1e6 else f"{value:.6e}"
        elif isinstance(value, int):
            text = f"{value:,}"
        else:
            text = str(value)
        table.add_row(key, text)
    return table


def solve_summary(rows: dict[str, Any], split: GapSplit | None, hardware: str,
                  method: str) -> Group:
    """`solve`'s result object (outcome_json) as a table, then where the latency lies
    above the compute bound."""
    title = f"{rows['network']} on {hardware}, batch {rows['batch']} — {method}"
    return Group(figures_table(title, rows), *([gap_split_table(split)] if split else []))


def gap_split_table(split: GapSplit) -> Table:
    """A GapSplit as a table: the compute above the bound's charges, by layer, then the
    stalls, by wait (cycles)."""
    above = split.latency_cycles - split.compute_bound_cycles
    table = Table(title=f"where the {above:,} cycles above the compute bound "
                        f"({split.compute_bound_cycles:,}) go", show_header=False)
    for col in ("where", "cycles", "detail"):
        table.add_column(col, justify="right" if col == "cycles" else "left")
    if split.proven_cycles:
        table.add_row(f"proven by {split.binding}", f"{split.proven_cycles:,}",
                      f"left on the table: {split.latency_cycles - split.bound_cycles:,}")
    table.add_row("computing above charge", f"{split.compute_above_cycles:,}",
                  "per layer: computed - least needed")
    for x in split.layers:
        table.add_row(f"  {x.layer}", f"{x.excess:,}",
                      f"{x.computed:,} - {float(x.charged):,.0f}")
    table.add_row("stalled on DRAM", f"{split.stall_cycles:,}", "no tile computing")
    for w in split.waits:
        table.add_row(f"  {w.layer} tile {w.tile}", f"{w.cycles:,}", w.transfer)
    if split.tail_cycles:
        table.add_row("  after the last tile", f"{split.tail_cycles:,}", "the last stores")
    return table


def bounds_table(title: str, report: BoundReport) -> Table:
    """Every bound of `mipsched bound` with its value, unit and derivation, the binding
    one marked, and the ones skipped with why."""
    table = Table(title=title)
    for col in ("bound", "value", "unit", "derivation"):
        table.add_column(col, justify="right" if col == "value" else "left")
    for b in (*report.latency.bounds, report.energy, report.edp):
        mark = " (binds)" if b.name == report.latency.binding else ""
        value = f"{b.value:,.0f}" if b.value < 1e15 else f"{b.value:.4g}"
        table.add_row(b.name + mark, value, BOUND_UNITS.get(b.name, "cycles"), b.derivation)
    for name, why in report.skipped.items():
        table.add_row(name, "—", "", f"not computed: {why}")
    return table


def energy_table(sim: SimResult) -> Table:
    """The simulated energy by component (pJ) and each one's share."""
    energy = Table(title="energy by component")
    energy.add_column("component")
    energy.add_column("pJ", justify="right")
    energy.add_column("share", justify="right")
    for name, pj in sim.energy_by_component.items():
        energy.add_row(name, f"{pj:.6e}", f"{pj / sim.energy_pj:.1%}")
    return energy


def stalls_table(sim: SimResult, program: TileProgram, count: int = 10) -> Table | None:
    """The `count` longest stalls (cycles) and what each tile waited for; None when no
    tile stalled."""
    worst = sorted(sim.stalls, key=lambda t: -t.stall)[:count]
    if not worst:
        return None
    stalls = Table(title=f"longest stalls ({len(sim.stalls)} tiles stalled)")
    for col in ("tile", "layer", "stall (cycles)", "waiting for"):
        stalls.add_column(col)
    for t in worst:
        stalls.add_row(str(t.pos), f"{t.layer} #{t.tile}", f"{t.stall:,}",
                       _waited(program, t.waited_for))
    return stalls


def _waited(program: TileProgram, tensor: int | None) -> str:
    """The DRAM tensor a tile waited for, as kind, layer and tile."""
    if tensor is None:
        return ""
    t = program.tensors[tensor]
    return f"{t.kind} {t.layer}" + ("" if t.tile is None else f" #{t.tile}")


def zoo_table(rows: list[dict[str, Any]], batch: int) -> Table:
    """`mipsched zoo`: each network's layers, GMACs, weights (MB) and source."""
    table = Table(title=f"mipsched zoo (batch {batch})")
    for col in ("network", "layers", "GMACs", "weights (MB)", "source"):
        table.add_column(col, justify="left" if col in ("network", "source") else "right")
    for r in rows:
        table.add_row(r["name"], str(r["layers"]), f"{r['total_macs'] / 1e9:.3f}",
                      f"{r['weight_bytes'] / 1e6:.2f}", r["source"])
    return table


def tiled_presets_table(presets: list[TiledHardware]) -> Table:
    """`mipsched hw`: each tiled preset's mesh, MACs per tile, TOPS, buffer per tile
    (MiB), NoC link and DRAM bytes per cycle and DRAM ports."""
    table = Table(title="tiled multi-core presets (SET)")
    for col in ("preset", "mesh", "MACs/tile", "TOPS", "buffer/tile (MiB)",
                "NoC link (B/cycle)", "DRAM (B/cycle)", "DRAM ports"):
        table.add_column(col, justify="left" if col == "preset" else "right")
    for h in presets:
        table.add_row(h.name, f"{h.mesh.cols} x {h.mesh.rows}",
                      f"{h.tile.core_array.macs_per_cycle:,}",
                      f"{h.peak_ops_per_cycle * h.frequency_hz / 1e12:.0f}",
                      f"{h.tile.gbuf.capacity_bytes / 2**20:g}",
                      str(h.noc.link_bytes_per_cycle), str(h.dram.bytes_per_cycle),
                      str(len(h.dram.ports)))
    return table


def presets_table(presets: list[Hardware]) -> Table:
    """`mipsched hw`: each preset's MACs per cycle, TOPS, buffer (MiB), DRAM bytes per
    cycle and vector ops per cycle."""
    table = Table(title="mipsched hardware presets")
    for col in ("preset", "MACs/cycle", "TOPS", "GBUF (MiB)", "DRAM (B/cycle)",
                "vector ops/cycle"):
        table.add_column(col, justify="left" if col == "preset" else "right")
    for h in presets:
        table.add_row(h.name, f"{h.core_array.macs_per_cycle:,}",
                      f"{h.peak_ops_per_cycle * h.frequency_hz / 1e12:.0f}",
                      f"{h.gbuf.capacity_bytes / 2**20:.0f}",
                      str(h.dram.bytes_per_cycle), str(h.vector_unit.ops_per_cycle))
    return table


def tiled_segments_table(rows: list[dict[str, Any]], title: str, count: int = 10) -> Table:
    """The `count` longest segments of a replayed RA tree (rows of
    `mipsched.report.tiled_trace.segment_rows`), longest first: index, layers, cycles,
    DRAM bytes, busiest link's bytes (per invocation) and what bounds each."""
    table = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for col in ("segment", "layers", "cycles", "DRAM bytes", "busiest link B", "bound"):
        table.add_column(col, justify="left" if col in ("layers", "bound") else "right",
                         overflow="fold", no_wrap=col != "layers")
    for r in sorted(rows, key=lambda r: (-r["cycles"], r["index"]))[:count]:
        layers = r["first_layer"] if r["n_layers"] == 1 else (
            f"{r['first_layer']}..{r['last_layer']} ({r['n_layers']})")
        table.add_row(str(r["index"]), layers, f"{r['cycles']:,}", f"{r['dram_bytes']:,}",
                      f"{r['busiest_link_bytes']:,}", r["bound"])
    return table
