"""Built-in networks. `get(name, batch)` builds one; `NETWORKS` lists them all."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from mipsched.workload.graph import Workload, WorkloadError
from mipsched.workload.zoo import (
    googlenet,
    gpt2,
    inception_resnet,
    mobilenet,
    randwire,
    resnet,
    tiny,
    vgg,
)

#: name -> builder(batch) -> Workload
NETWORKS: dict[str, Callable[[int], Workload]] = {
    "chain3": tiny.chain3,
    "chain5": tiny.chain5,
    "resblock": tiny.resblock,
    "fsrcnn": tiny.fsrcnn,
    "resnet50": resnet.resnet50,
    "resnet101": resnet.resnet101,
    "inception_resnet_v1": inception_resnet.inception_resnet_v1,
    "randwire_small": randwire.randwire_small,
    "vgg16": vgg.vgg16,
    "mobilenet_v2": mobilenet.mobilenet_v2,
    "googlenet": googlenet.googlenet,
    "gpt2_small_prefill": gpt2.gpt2_small_prefill,
    "gpt2_small_decode": gpt2.gpt2_small_decode,
    "gpt2_xl_prefill": gpt2.gpt2_xl_prefill,
    "gpt2_xl_decode": gpt2.gpt2_xl_decode,
}


def get(name: str, batch: int = 1, elem_bytes: int = 1) -> Workload:
    """Builds the zoo network `name` for `batch` samples of `elem_bytes`-byte elements
    (1 = INT8)."""
    if name not in NETWORKS:
        known = ", ".join(sorted(NETWORKS))
        raise WorkloadError(f"unknown network '{name}' (known: {known})")
    if batch < 1:
        raise WorkloadError(f"batch must be >= 1, got {batch}")
    workload = NETWORKS[name](batch)
    if elem_bytes != 1:
        workload = dataclasses.replace(workload, elem_bytes=elem_bytes)
    return workload
