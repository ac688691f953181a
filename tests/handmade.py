"""Hand-built tile programs for worked examples (no lowering involved)."""

from __future__ import annotations

from mipsched.schedule.tile_program import DramTensor, TensorKind, Tile, TileProgram


def program(tiles: list[tuple[str, int]], tensors: list[dict], capacity: int = 10**9,
            bytes_per_cycle: int = 1, onchip: list[int] | None = None,
            precedence: list[tuple[int, int]] | None = None) -> TileProgram:
    """tiles: (layer, cycles) in order; tensors: dicts with kind 'load' / 'weight' /
    'store', 'layer', 'bytes' and 'use' (first consuming tile; loads) or 'producer'
    (stores); a weight may give 'last'. Access cycles = bytes / bytes_per_cycle."""
    made_tiles = []
    seen: dict[str, int] = {}
    for p, (layer, cycles) in enumerate(tiles):
        idx = seen.get(layer, -1) + 1
        seen[layer] = idx
        made_tiles.append(Tile(p, list(dict.fromkeys(t[0] for t in tiles)).index(layer),
                               layer, idx, cycles, float(cycles)))
    n = len(tiles)
    made = []
    for i, d in enumerate(tensors):
        kind = {"load": TensorKind.LOAD_IFMAP, "weight": TensorKind.LOAD_WEIGHT,
                "store": TensorKind.STORE_OFMAP}[d["kind"]]
        common = dict(id=i, kind=kind, layer_id=0, layer=d["layer"], tile=None,
                      bytes=d["bytes"], access_cycles=-(-d["bytes"] // bytes_per_cycle))
        if kind == TensorKind.STORE_OFMAP:
            made.append(DramTensor(**common, producer=d["producer"], lo=d["producer"] + 1,
                                   hi=n))
        else:
            use = d["use"]
            made.append(DramTensor(**common, first_use=use, last_use=d.get("last", use),
                                   lo=-1, hi=use))
    return TileProgram("handmade", bytes_per_cycle, capacity, 1.0, made_tiles, 0,
                       onchip or [0] * n, made, precedence or [])
