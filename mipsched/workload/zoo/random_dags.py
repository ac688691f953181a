"""Small random DAG workloads for property tests: deterministic for a seed, always valid.

One network input (4..32 channels, 4x4..16x16); each step adds one layer reading earlier
tensors (mostly one of the three newest, so graphs are both deep and branchy): a 1x1 or
3x3 conv (4..32 channels, occasionally 3x3/2 while the map stays >= 4x4), a max or avg
pool (3x3/1 'same', or 2x2/2 on an even map >= 8x8), an add of two same-shaped tensors, or
a channel concat of two tensors of equal H x W (at most 64 channels). An add or concat
with no fitting partner becomes a conv keeping the channel count (so later adds find
partners). With `subsample`, an add on a map of at least 4 x 4 is followed half of the
time by a 1x1 stride-2 conv reading it (ResNet v1's downsampling: the add's producers
need only every other row and column). Every sink is a network output.
"""

from __future__ import annotations

import random

from mipsched.workload.graph import NetBuilder, Workload

MAX_CONCAT_CHANNELS = 64


def random_dag(seed: int, n_layers: int = 6, batch: int = 1,
               subsample: bool = False) -> Workload:
    """A random valid workload of about `n_layers` layers (>= 1; with `subsample` a
    strided conv may come on top of an add), the same for the same arguments."""
    if n_layers < 1:
        raise ValueError(f"n_layers must be >= 1, got {n_layers}")
    rng = random.Random(seed)
    b = NetBuilder(f"random_dag_{seed}", batch)
    size = rng.randint(4, 16)
    tensors = [b.input("input", rng.randint(4, 32), size, size)]
    for i in range(n_layers):
        src = rng.choice(tensors[-3:] if rng.random() < 0.7 else tensors)
        kind = rng.choices(("conv", "pool", "add", "concat"), weights=(4, 2, 2, 2))[0]
        tensors.append(_layer(b, rng, kind, i, src, tensors))
        added = b.shape(tensors[-1])
        if (subsample and tensors[-1].startswith("add") and added.h >= 4
                and rng.random() < 0.5):
            tensors.append(b.conv(f"sub{i}", tensors[-1], added.c, 1, stride=2))
    return b.build()


def _layer(b: NetBuilder, rng: random.Random, kind: str, i: int, src: str,
           tensors: list[str]) -> str:
    """Adds one layer of `kind` reading `src` (and a partner from `tensors`)."""
    shape = b.shape(src)
    if kind == "add":
        partners = [t for t in tensors if t != src and b.shape(t) == shape]
        if partners:
            return b.eltwise(f"add{i}", [src, rng.choice(partners)])
    elif kind == "concat":
        partners = [t for t in tensors if t != src and b.shape(t)[1:] == shape[1:]
                    and b.shape(t).c + shape.c <= MAX_CONCAT_CHANNELS]
        if partners:
            return b.concat(f"cat{i}", [src, rng.choice(partners)])
    elif kind == "pool":
        pool_kind = rng.choice(("max", "avg"))
        if shape.h % 2 == 0 and shape.h >= 8 and rng.random() < 0.3:
            return b.pool(f"pool{i}", src, 2, stride=2, kind=pool_kind)
        return b.pool(f"pool{i}", src, 3, stride=1, padding=1, kind=pool_kind)
    kernel = rng.choice((1, 3))
    stride = 2 if kernel == 3 and shape.h >= 8 and rng.random() < 0.2 else 1
    channels = shape.c if kind != "conv" else rng.randint(4, 32)
    return b.conv(f"conv{i}", src, channels, kernel, stride=stride)
