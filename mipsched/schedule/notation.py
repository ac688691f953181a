"""SoMa's six-attribute notation (paper §IV, DESIGN §3).

LFA (layer-fusion attributes): computing order, FLC set, tiling number per FLG, DRAM cut
set. DLSA (DRAM load/store attributes): DRAM tensor order and the living duration
(Start, End) of every DRAM tensor, in tile positions (-1 = before tile 0).

Cut positions are indices into the computing order: cut k separates order[k-1] from
order[k], so valid cuts lie in 1..len(order)-1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mipsched.errors import InputError
from mipsched.jsonread import JsonObject, as_int


class ScheduleError(InputError):
    """An invalid schedule; the message names the offending layer, tile or tensor."""


@dataclass(frozen=True)
class Lfa:
    """Layer-fusion attributes: which layers run, in what groups, at what granularity."""

    order: tuple[str, ...]
    """Computing order: a topological order of all layers."""
    flc: tuple[int, ...]
    """Fine-grained fusion cuts (sorted positions); they split the order into FLGs."""
    tiling: tuple[int, ...]
    """Tiling number of each FLG (len(flc) + 1 entries)."""
    dram_cuts: tuple[int, ...]
    """DRAM cuts (sorted, a subset of `flc`); they split the order into LGs."""

    def flg_bounds(self) -> list[tuple[int, int]]:
        """[start, stop) positions in the order of each FLG."""
        edges = [0, *self.flc, len(self.order)]
        return list(zip(edges[:-1], edges[1:], strict=True))

    def lg_bounds(self) -> list[tuple[int, int]]:
        """[start, stop) positions in the order of each LG."""
        edges = [0, *self.dram_cuts, len(self.order)]
        return list(zip(edges[:-1], edges[1:], strict=True))

    def to_json(self) -> dict:
        """The LFA as a schedule.json object: order, flc, tiling, dram_cuts."""
        return {"order": list(self.order), "flc": list(self.flc), "tiling": list(self.tiling),
                "dram_cuts": list(self.dram_cuts)}

    @staticmethod
    def from_json(data: Any, path: str = "lfa") -> Lfa:
        """Reads an LFA object; raises ScheduleError naming the bad key under `path`.
        Validity against a workload is checked elsewhere (validity.check_lfa)."""
        obj = JsonObject(data, path)
        order = obj.list("order")
        for k, name in enumerate(order):
            if not isinstance(name, str):
                raise ScheduleError(f"{path}.order[{k}]: expected a layer name, got {name!r}")
        return Lfa(tuple(order), tuple(obj.int_list("flc")), tuple(obj.int_list("tiling")),
                   tuple(obj.int_list("dram_cuts")))

    @staticmethod
    def unfused(order: tuple[str, ...], tiling: int = 1) -> Lfa:
        """Every layer its own FLG and LG (no fusion)."""
        cuts = tuple(range(1, len(order)))
        return Lfa(order, cuts, (tiling,) * len(order), cuts)


@dataclass(frozen=True)
class Dlsa:
    """DRAM load/store attributes for the DRAM tensors of one lowered LFA."""

    order: tuple[int, ...]
    """DRAM tensor ids in the order DRAM serves them."""
    living: tuple[tuple[int, int], ...]
    """(Start, End) of tensor id i, in tile positions; it holds buffer in Start..End-1."""

    def to_json(self) -> dict:
        """The DLSA as a schedule.json object: order, living ([Start, End] in tile
        positions)."""
        return {"order": list(self.order), "living": [list(x) for x in self.living]}

    @staticmethod
    def from_json(data: Any, path: str = "dlsa") -> Dlsa:
        """Reads a DLSA object; raises ScheduleError naming the bad key under `path`.
        Validity against a tile program is checked elsewhere."""
        obj = JsonObject(data, path)
        living = []
        for k, pair in enumerate(obj.list("living")):
            if not isinstance(pair, list) or len(pair) != 2:
                raise ScheduleError(f"{path}.living[{k}]: expected a [Start, End] pair")
            living.append((as_int(pair[0], f"{path}.living[{k}]"),
                           as_int(pair[1], f"{path}.living[{k}]")))
        return Dlsa(tuple(obj.int_list("order")), tuple(living))
