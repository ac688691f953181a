"""Built-in networks. `get(name, batch)` builds one; `NETWORKS` lists them all;
`describe(name)` says where a network comes from.

The names SoMa uses are the SoMa reference implementation's networks, layer for layer
(docs/reference-nets.md); variants that differ from it carry names that say so.
`transformer` and `transformer_cell` are the SET reference's (docs/set-model.md §3.13),
whose GoogLeNet and Inception-ResNet-v1 are SoMa's `googlenet` and `inception_resnet_v1`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from mipsched.workload.graph import Workload, WorkloadError, WorkTooLargeError
from mipsched.workload.zoo import (
    googlenet,
    gpt2,
    inception_resnet,
    mobilenet,
    randwire,
    resnet,
    tiny,
    transformer,
    vgg,
)

Builder = Callable[[int], Workload]


@dataclass(frozen=True)
class ZooEntry:
    """One built-in network: its builder (batch -> Workload) and a one-line provenance."""

    build: Builder
    provenance: str


_SOMA = "SoMa reference network"
_SET = "SET reference network"
ENTRIES: dict[str, ZooEntry] = {
    "chain3": ZooEntry(tiny.chain3, "tiny test network (three 3x3 convs)"),
    "chain5": ZooEntry(tiny.chain5, "tiny test network (five convs, one of stride 2)"),
    "resblock": ZooEntry(tiny.resblock, "tiny test network (one ResNet-50 bottleneck)"),
    "fsrcnn": ZooEntry(tiny.fsrcnn, "tiny test network (FSRCNN, Dong et al. 2016)"),
    "resnet50": ZooEntry(resnet.resnet50, f"{_SOMA} (ResNet-50 v1)"),
    "resnet101": ZooEntry(resnet.resnet101, f"{_SOMA} (ResNet-101 v1)"),
    "inception_resnet_v1": ZooEntry(inception_resnet.inception_resnet_v1,
                                    f"{_SOMA} (Inception-ResNet-v1)"),
    "randwire_small": ZooEntry(randwire.randwire_small,
                               f"{_SOMA} (its fixed 85-layer RandWire, small regime)"),
    "googlenet": ZooEntry(googlenet.googlenet, f"{_SOMA} (GoogLeNet, implicit concat)"),
    "vgg19": ZooEntry(vgg.vgg19, f"{_SOMA} (VGG-19 without fc)"),
    "gpt2_small_prefill": ZooEntry(gpt2.gpt2_small_prefill,
                                   f"{_SOMA} (GPT-2 small block, prefill of 512 tokens)"),
    "gpt2_small_prefill_s1024": ZooEntry(
        gpt2.gpt2_small_prefill_s1024, f"{_SOMA} (GPT-2 small block, prefill of 1024 tokens)"),
    "gpt2_small_decode": ZooEntry(gpt2.gpt2_small_decode,
                                  f"{_SOMA} (GPT-2 small block, decoding token 513)"),
    "gpt2_xl_prefill": ZooEntry(gpt2.gpt2_xl_prefill,
                                f"{_SOMA} (GPT-2 XL block, prefill of 1024 tokens)"),
    "gpt2_xl_decode": ZooEntry(gpt2.gpt2_xl_decode,
                               f"{_SOMA} (GPT-2 XL block, decoding token 1025)"),
    "resnet50_v1_5": ZooEntry(resnet.resnet50_v1_5, "torchvision-style (ResNet-50 v1.5)"),
    "resnet101_v1_5": ZooEntry(resnet.resnet101_v1_5, "torchvision-style (ResNet-101 v1.5)"),
    "randwire_ws_small": ZooEntry(randwire.randwire_ws_small,
                                  "RandWire-WS(4, 0.75) small regime, random graph "
                                  "(Xie et al. 2019)"),
    "vgg16": ZooEntry(vgg.vgg16, "VGG-16 with fc (Simonyan & Zisserman 2015)"),
    "mobilenet_v2": ZooEntry(mobilenet.mobilenet_v2, "MobileNetV2 1.0 (Sandler et al. 2018)"),
    "transformer": ZooEntry(transformer.transformer,
                            f"{_SET} (Transformer: 6 encoders + 6 decoders, 512 tokens)"),
    "transformer_cell": ZooEntry(transformer.transformer_cell,
                                 f"{_SET} (Transformer cell: 1 encoder + 1 decoder)"),
}

#: name -> builder(batch) -> Workload
NETWORKS: dict[str, Builder] = {name: entry.build for name, entry in ENTRIES.items()}


def _entry(name: str) -> ZooEntry:
    if name not in ENTRIES:
        known = ", ".join(sorted(ENTRIES))
        raise WorkloadError(f"unknown network '{name}' (known: {known})")
    return ENTRIES[name]


def describe(name: str) -> str:
    """One line on where the zoo network `name` comes from (e.g. "SoMa reference network
    (ResNet-50 v1)", "torchvision-style (ResNet-50 v1.5)")."""
    return _entry(name).provenance


def get(name: str, batch: int = 1, elem_bytes: int = 1) -> Workload:
    """Builds the zoo network `name` for `batch` samples of `elem_bytes`-byte elements
    (1 = INT8); WorkTooLargeError, naming the network and the layer, past a cap on the
    work (graph.MAX_POSITIONS: a batch of more than 334 for VGG)."""
    build = _entry(name).build
    if batch < 1:
        raise WorkloadError(f"batch must be >= 1, got {batch}")
    try:
        workload = build(batch)
    except WorkTooLargeError as err:
        raise WorkTooLargeError(f"network '{name}': {err}", err.tensor) from None
    if elem_bytes != 1:
        workload = dataclasses.replace(workload, elem_bytes=elem_bytes)
    return workload
