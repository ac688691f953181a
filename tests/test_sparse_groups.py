"""The stage-end groups' excess (formulations/sparse_groups.py).

- The least extents never exceed a lowered tile's rows or columns, in every FLG of many
  LFAs of a two-stage net whose stride-2 readers split planes unevenly; dropping the min
  with the share (a layer read outside its FLG) is caught.
- The envelope is below every box's cycles and never falls as a box grows.
- A group's excess is below what its layers take above their charges in every LFA, and
  over one-FLG LFAs of a tiny stage end case A is that least exactly; an over-tight
  variant is caught.
- run_bound with the groups stays below the brute-force optimum of a stage end.
"""

from __future__ import annotations

import dataclasses
import random
from collections import defaultdict
from fractions import Fraction

import numpy as np
import pytest
from brute import schedule_optimum

from mipsched.cost.tile import tile_cost
from mipsched.formulations import sparse_groups as sg
from mipsched.formulations.bounds import layer_compute_cycles, with_box_rates
from mipsched.formulations.box_rates import least_box_rates
from mipsched.hw import load_hardware
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa, ScheduleError
from mipsched.schedule.tiling import tile_flg
from mipsched.solve.bounds import run_bound
from mipsched.workload.graph import NetBuilder, Workload
from mipsched.workload.layer import Region

from strategies import random_lfa


def two_stages(batch: int, size: int = 12, channels: int = 64) -> Workload:
    """Two ResNet v1 stage ends in a row: each a 1x1, 3x3, 1x1 and residual add read
    only at even positions by a stride-2 1x1 conv and a stride-2 projection."""
    b = NetBuilder("two_stages", batch)
    x = b.input("x", 4 * channels, size, size)
    for stage in (1, 2):
        y = b.conv(f"c{stage}", b.conv(f"b{stage}", b.conv(f"a{stage}", x, channels, 1),
                                       channels, 3), 4 * channels, 1)
        end = b.eltwise(f"end{stage}", [y, x])
        x = b.eltwise(f"next{stage}", [b.conv(f"down{stage}", end, 4 * channels, 1, stride=2),
                                       b.conv(f"proj{stage}", end, 4 * channels, 1, stride=2)])
    return b.build()


def stage_end(batch: int, size: int = 8, channels: int = 64) -> Workload:
    """One stage end: 1x1, 3x3, 1x1, residual add, a stride-2 1x1 reader."""
    b = NetBuilder("stage_end", batch)
    x = b.input("x", 4 * channels, size, size)
    y = b.conv("c", b.conv("b", b.conv("a", x, channels, 1), channels, 3), 4 * channels, 1)
    b.conv("down", b.eltwise("end", [y, x]), 2 * channels, 1, stride=2)
    return b.build()


def _flgs(wl: Workload, rng: random.Random, count: int) -> list[tuple[tuple[str, ...], int]]:
    """(layers, tiling) of the FLGs of one-FLG LFAs at many tilings and random LFAs."""
    order = tuple(wl.layers)
    found = [(order, t) for t in range(1, 4 * wl.batch * 9)]
    for _ in range(count):
        lfa = random_lfa(wl, rng, tilings=tuple(range(1, 40)))
        found += [(lfa.order[a:b], t) for (a, b), t in zip(lfa.flg_bounds(), lfa.tiling,
                                                          strict=True)]
    return found


def _extent_violations(wl: Workload, drop_share: bool) -> int:
    """Tiles of layers whose rows or columns fall below Extents.least's, over the FLGs of
    _flgs; with `drop_share`, every layer of an FLG is taken to have all its consumers
    in it (the over-tight variant)."""
    extents = sg.Extents(wl)
    every = frozenset(wl.layers)
    found = checked = 0
    for layers, tiling in _flgs(wl, random.Random(7), 150):
        try:
            tiles = tile_flg(wl, layers, tiling)
        except ScheduleError:
            continue
        inside = set(layers)
        together = frozenset(
            layers if drop_share else
            [x for x in layers if x not in wl.outputs and wl.consumers(x)
             and all(v in inside for v in wl.consumers(x))])
        grid = tiles.grid
        rows = extents.least(grid.h_parts, 0, every, together)
        cols = extents.least(grid.w_parts, 1, every, together)
        for x in layers:
            for i, region in enumerate(tiles.produced[x]):
                ih, iw = divmod(i % (grid.h_parts * grid.w_parts), grid.w_parts)
                height = 0 if region is None else region.height
                width = 0 if region is None else region.width
                found += height < rows[x][ih] or width < cols[x][iw]
                checked += 1
    assert checked > 20_000
    return found


def test_least_extents_are_below_every_lowered_tile() -> None:
    assert _extent_violations(two_stages(4), drop_share=False) == 0


def test_dropping_the_share_of_layers_read_outside_is_caught() -> None:
    assert _extent_violations(two_stages(4), drop_share=True) > 0


def test_the_envelope_is_below_every_box_and_never_falls() -> None:
    wl, hw = two_stages(2), load_hardware("edge")
    for name, samples in (("b1", 1), ("c1", 2), ("end1", 2), ("down2", 1)):
        env = sg.envelope(wl, hw, name, samples)
        assert env is not None
        layer = wl.layers[name]
        rates = []
        for h in range(1, layer.out.h + 1):
            for w in range(1, layer.out.w + 1):
                cycles = tile_cost(hw, layer, wl.in_shapes(name), Region(0, samples, 0, h, 0, w),
                                   wl.elem_bytes).cycles
                assert env.cycles[h, w] <= cycles
                assert env.cycles[h, w] >= max(env.cycles[h - 1, w], env.cycles[h, w - 1])
                rates.append(Fraction(cycles, samples * h * w))
        assert env.least_rate == min(rates)


def _charges(wl: Workload, hw) -> dict[str, Fraction]:
    closed = layer_compute_cycles(wl, hw)
    return with_box_rates(wl, closed, least_box_rates(wl, hw, closed))


def _group_cycles_above(wl: Workload, hw, group: sg.SparseGroup, lfas: list[Lfa]
                        ) -> list[Fraction]:
    """Per LFA that lowers, the cycles the group's layers take above their charges."""
    charges = _charges(wl, hw)
    lowerer = Lowerer(wl, hw)
    found = []
    for lfa in lfas:
        try:
            tiles = lowerer.lower(lfa).tiles
        except ScheduleError:
            continue
        cycles: dict[str, int] = defaultdict(int)
        for tile in tiles:
            cycles[tile.layer] += tile.compute_cycles
        found.append(sum((cycles[y] - charges[y] for y in group.layers), Fraction(0)))
    return found


@pytest.mark.parametrize(("batch", "hw_name", "size"),
                         [(1, "edge", 12), (4, "edge", 12), (4, "cloud", 16)])
def test_the_group_excess_is_below_every_lfa(batch: int, hw_name: str, size: int) -> None:
    wl, hw = two_stages(batch, size), load_hardware(hw_name)
    rng = random.Random(batch)
    lfas = [random_lfa(wl, rng, tilings=tuple(range(1, 40))) for _ in range(60)]
    lfas += [Lfa(tuple(wl.layers), (), (t,), ()) for t in range(1, 4 * batch * 9)]
    groups = sg.sparse_groups(wl)
    assert [g.sparse for g in groups] == [("b1", "c1", "end1"), ("b2", "c2", "end2")]
    charges = _charges(wl, hw)
    excess = []
    for group in groups:
        least = sg.group_excess(wl, hw, group, charges, sg.Extents(wl))
        above = _group_cycles_above(wl, hw, group, lfas)
        assert len(above) > 50
        assert least is not None and least <= min(above)
        excess.append(least)
    assert max(excess) > 0


@pytest.mark.parametrize("hw_name", ["edge", "cloud"])
def test_case_a_is_the_least_over_one_flg_lfas_of_a_stage_end(hw_name: str) -> None:
    """Every layer of the net is in the group's FLG, so the extents are the tiles' own
    and the grids those of the tiling numbers: case A is the brute-force least."""
    wl, hw = stage_end(4), load_hardware(hw_name)
    group, = sg.sparse_groups(wl)
    charges = _charges(wl, hw)
    envelopes = {(y, s): sg.envelope(wl, hw, y, s) for y in group.layers for s in (1, 2, 4)}
    case_a = sg._case_a(wl, group, charges, envelopes, sg.Extents(wl))
    one_flg = [Lfa(tuple(wl.layers), (), (t,), ()) for t in range(1, 4 * 16 + 1)]
    assert case_a == min(_group_cycles_above(wl, hw, group, one_flg))


def test_an_over_tight_group_excess_is_caught(monkeypatch) -> None:
    """Charging a stage end's tiles their whole share of its plane (as if it computed
    every position, the rows and columns its readers skip included) exceeds the cycles
    of some LFA."""
    wl, hw = two_stages(4), load_hardware("edge")
    honest = sg.Extents.least

    def whole_shares(self, parts, axis, layers, together=frozenset()):
        found = honest(self, parts, axis, layers, together)
        for x in together:
            side = wl.layers[x].out.h if axis == 0 else wl.layers[x].out.w
            found[x] = np.array([(k + 1) * side // parts - k * side // parts
                                 for k in range(parts)])
        return found

    monkeypatch.setattr(sg.Extents, "least", whole_shares)
    rng = random.Random(3)
    lfas = [random_lfa(wl, rng, tilings=tuple(range(1, 40))) for _ in range(60)]
    lfas += [Lfa(tuple(wl.layers), (), (t,), ()) for t in range(1, 4 * 4 * 9)]
    charges = _charges(wl, hw)
    group = sg.sparse_groups(wl)[0]
    excess = sg.group_excess(wl, hw, group, charges, sg.Extents(wl))
    assert excess is not None and excess > min(_group_cycles_above(wl, hw, group, lfas))


def test_run_bound_stays_below_the_brute_force_optimum_of_a_stage_end() -> None:
    wl = stage_end(2, size=4, channels=16)
    hw = load_hardware("edge")
    hw = dataclasses.replace(hw, gbuf=dataclasses.replace(hw.gbuf, capacity_bytes=6_000))
    optimum = schedule_optimum(wl, hw, (1, 2))
    assert optimum is not None
    assert run_bound(wl, hw, None).cycles <= optimum
