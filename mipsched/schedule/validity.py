"""Validity of the six attributes (DESIGN §3), with errors that name the offender."""

from __future__ import annotations

from mipsched.schedule.notation import Dlsa, Lfa, ScheduleError
from mipsched.schedule.tile_program import DramTensor, TileProgram
from mipsched.workload.graph import Workload


def check_lfa(workload: Workload, lfa: Lfa) -> None:
    """Order is a topological permutation of the layers, FLCs and DRAM cuts are sorted
    positions inside the order, one tiling number >= 1 per FLG, DRAM cuts are FLCs.
    (Whether a tiling number divides the work is checked when the FLG is tiled.)"""
    layers = workload.layers
    seen: set[str] = set()
    for name in lfa.order:
        if name not in layers:
            raise ScheduleError(f"computing order names unknown layer '{name}'")
        if name in seen:
            raise ScheduleError(f"computing order lists layer '{name}' twice")
        seen.add(name)
    missing = [n for n in layers if n not in seen]
    if missing:
        raise ScheduleError(f"computing order misses layer '{missing[0]}'")
    pos = {n: i for i, n in enumerate(lfa.order)}
    for name in lfa.order:
        for src in layers[name].inputs:
            if src in pos and pos[src] > pos[name]:
                raise ScheduleError(f"computing order is not topological: layer '{name}' "
                                    f"comes before its input '{src}'")
    n = len(lfa.order)
    _check_cuts("FLC", lfa.flc, n)
    _check_cuts("DRAM cut", lfa.dram_cuts, n)
    flcs = set(lfa.flc)
    for cut in lfa.dram_cuts:
        if cut not in flcs:
            raise ScheduleError(f"DRAM cut {cut} (before layer '{lfa.order[cut]}') is not in "
                                "the FLC set")
    if len(lfa.tiling) != len(lfa.flc) + 1:
        raise ScheduleError(f"{len(lfa.flc) + 1} FLGs need as many tiling numbers, got "
                            f"{len(lfa.tiling)}")
    for (a, _), t in zip(lfa.flg_bounds(), lfa.tiling, strict=True):
        if t < 1:
            raise ScheduleError(f"FLG starting at layer '{lfa.order[a]}': tiling number "
                                f"must be >= 1, got {t}")


def _check_cuts(what: str, cuts: tuple[int, ...], n: int) -> None:
    for k, cut in enumerate(cuts):
        if not 1 <= cut <= n - 1:
            raise ScheduleError(f"{what} {cut} out of range 1..{n - 1}")
        if k and cut <= cuts[k - 1]:
            raise ScheduleError(f"{what} set must be strictly increasing, got {list(cuts)}")


def check_dlsa_structure(program: TileProgram, dlsa: Dlsa) -> None:
    """Raises ScheduleError naming the tensor whose order entry, Start/End or precedence
    is invalid."""
    m = len(program.tensors)
    if len(dlsa.living) != m:
        raise ScheduleError(f"DLSA has {len(dlsa.living)} living durations for {m} DRAM tensors")
    if sorted(dlsa.order) != list(range(m)):
        missing = sorted(set(range(m)) - set(dlsa.order))
        what = f"tensor {missing[0]} is missing" if missing else "a tensor appears twice"
        raise ScheduleError(f"DLSA order is not a permutation of the {m} DRAM tensors: {what}")
    for t, (s, e) in zip(program.tensors, dlsa.living, strict=True):
        free, fixed = (s, e) if t.is_load else (e, s)
        label = "Start" if t.is_load else "End"
        if fixed != t.fixed:
            other = "End" if t.is_load else "Start"
            raise ScheduleError(f"{describe_tensor(t)}: {other} must be {t.fixed}, got {fixed}")
        if not t.lo <= free <= t.hi:
            raise ScheduleError(f"{describe_tensor(t)}: {label} {free} out of range "
                                f"[{t.lo}, {t.hi}]")
    pos = {tid: k for k, tid in enumerate(dlsa.order)}
    for a, b in program.precedence:
        if pos[a] > pos[b]:
            raise ScheduleError(f"{describe_tensor(program.tensors[b])} is ordered before "
                                f"{describe_tensor(program.tensors[a])}, which stores its data")


def check_buffer(program: TileProgram, dlsa: Dlsa, occupancy: list[int]) -> None:
    """Raises ScheduleError at the first tile whose occupancy exceeds the capacity."""
    message = overflow_message(program, dlsa, occupancy)
    if message is not None:
        raise ScheduleError(message)


def overflow_message(program: TileProgram, dlsa: Dlsa, occupancy: list[int]) -> str | None:
    """Describes the first tile whose occupancy (indexed t + 1) exceeds the capacity: by
    how many bytes, and the live tensors by size. None when everything fits."""
    cap = program.buffer_capacity_bytes
    k = next((k for k, used in enumerate(occupancy) if used > cap), None)
    if k is None:
        return None
    used, t = occupancy[k], k - 1
    live = sorted(((tn.bytes, tn) for tn, (s, e) in zip(program.tensors, dlsa.living,
                                                           strict=True) if s <= t < e),
                  key=lambda x: -x[0])
    onchip = program.onchip_before_first_tile if t < 0 else program.onchip_per_tile[t]
    where = "before the first tile" if t < 0 else (
        f"at tile {t} ({program.tiles[t].layer} #{program.tiles[t].tile})")
    parts = [f"on-chip fmaps {onchip} B"] + [f"{describe_tensor(tn)} {b} B"
                                              for b, tn in live[:5]]
    more = f" and {len(live) - 5} more" if len(live) > 5 else ""
    return (f"buffer overflow {where}: {used} B > capacity {cap} B by {used - cap} B; "
            f"live: {', '.join(parts)}{more}")


def describe_tensor(t: DramTensor) -> str:
    """Human name of a DRAM tensor, e.g. 'tensor 12 (load_ifmap of conv3 tile 1)'."""
    tile = "" if t.tile is None else f" tile {t.tile}"
    return f"tensor {t.id} ({t.kind} of {t.layer}{tile})"
