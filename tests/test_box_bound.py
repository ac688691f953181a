"""The compute bound's box rule (`least_rate_per_needed`): a layer that must compute only
some positions still pays, per needed position, the least cost any dense tile box can
reach. Checked per layer against the tile cycles of many LFAs, and two deliberately
over-tight variants are shown to be caught by the same check."""

from __future__ import annotations

import random
from collections import defaultdict
from fractions import Fraction

import numpy as np
import pytest

from mipsched.formulations import bounds
from mipsched.formulations.bounds import layer_compute_cycles, least_rate_per_needed
from mipsched.hw import load_hardware
from mipsched.schedule.lowering import Lowerer
from mipsched.schedule.notation import Lfa, ScheduleError
from mipsched.workload.graph import NetBuilder

from strategies import random_lfa


def stage_end(batch: int, size: int = 8, channels: int = 256):
    """ResNet v1's end of a stage with ResNet-50's widths on a size x size plane: the 3x3
    and the 1x1 after it hold large weights and need only the even positions the
    stride-2 conv reads."""
    b = NetBuilder("stage_end", batch)
    x = b.input("x", 4 * channels, size, size)
    y = b.conv("c", b.conv("b", b.conv("a", x, channels, 1), channels, 3), 4 * channels, 1)
    b.conv("sub", b.eltwise("add", [y, x]), 2 * channels, 1, stride=2)
    return b.build()


def lfas(wl, rng: random.Random) -> list[Lfa]:
    """One FLG at every tiling the grid rule accepts, then random LFAs."""
    order = tuple(wl.layers)
    found = [Lfa(order, (), (t,), ()) for t in (1, 2, 3, 4, 8, 9, 16, 32, wl.batch * 16)
             if t % wl.batch == 0 or t % 2 == 1]
    return found + [random_lfa(wl, rng, tilings=(1, 2, 4, 9, 16, 64)) for _ in range(6)]


def layer_cycles(lowerer: Lowerer, lfa: Lfa) -> dict[str, int]:
    """Tile cycles per layer of the LFA's program."""
    out: dict[str, int] = defaultdict(int)
    for tile in lowerer.lower(lfa).tiles:
        out[tile.layer] += tile.compute_cycles
    return out


def violations(wl, hw_name: str, seed: int) -> list[tuple[str, Fraction, int]]:
    """(layer, its bound, its tile cycles) wherever a layer's bound exceeds its cycles."""
    hw = load_hardware(hw_name)
    lowerer = Lowerer(wl, hw)
    bound = layer_compute_cycles(wl, hw)
    found = []
    checked = 0
    for lfa in lfas(wl, random.Random(seed)):
        try:
            cycles = layer_cycles(lowerer, lfa)
        except ScheduleError:  # a tiling the grid rule cannot split: skipped
            continue
        checked += 1
        found += [(n, bound[n], cycles[n]) for n in wl.layers if bound[n] > cycles[n]]
    assert checked >= 4, "too few LFAs lowered to check anything"
    return found


@pytest.mark.parametrize("size", [4, 8])
@pytest.mark.parametrize("batch", [1, 2, 4])
@pytest.mark.parametrize("hw_name", ["edge", "cloud"])
def test_every_layer_bound_is_below_its_tile_cycles(batch: int, hw_name: str,
                                                    size: int) -> None:
    assert violations(stage_end(batch, size), hw_name, batch) == []


def test_the_box_rule_raises_the_bound_of_the_sparse_layers() -> None:
    wl, hw = stage_end(2), load_hardware("edge")
    rates = layer_compute_cycles(wl, hw)
    masks = bounds.needed_masks(wl)
    for name in ("b", "c"):
        per_position = bounds._cycles_per_position(wl, hw, wl.layers[name])
        assert rates[name] > per_position * 2 * int(masks[name].sum())
    assert int(masks["a"].sum()) == 64  # full: unchanged rule


def _per_sample_floor(mask, per_position, floor, batch):
    """Over-tight: as if every tile held one sample (each paying the weight floor)."""
    return least_rate_per_needed(mask, per_position, floor, 1)


def _dense_only(mask, per_position, floor, batch):
    """Over-tight: as if every tile computed whole rows and columns (no sparse boxes)."""
    h, w = mask.shape
    return max(per_position * batch * h * w, floor) / (batch * int(mask.sum()))


@pytest.mark.parametrize(("variant", "size"), [
    (_per_sample_floor, 4),  # small plane: the weight floor decides the best box
    (_dense_only, 8)])  # larger plane: a sparse box beats the dense one
def test_over_tight_variants_are_caught(monkeypatch, variant, size: int) -> None:
    monkeypatch.setattr(bounds, "least_rate_per_needed", variant)
    assert violations(stage_end(2, size), "edge", 2), "the check cannot tell a wrong bound"


def test_window_maxima_by_brute_force() -> None:
    rng = np.random.default_rng(0)
    mask = rng.random((5, 6)) < 0.4
    for h, w, most in bounds._window_maxima(mask):
        assert most == max(int(mask[r:r + h, c:c + w].sum())
                           for r in range(6 - h) for c in range(7 - w))
