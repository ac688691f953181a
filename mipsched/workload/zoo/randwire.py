"""RandWire networks, small regime, of Xie et al. (ICCV 2019, "Exploring Randomly Wired
Neural Networks for Image Recognition"), in two variants.

`randwire_small` is the SoMa reference's fixed 85-layer graph, layer for layer (0.928
GMACs). 224x224x3 input; conv2d_1 3x3/2 to 32 and conv2d_2 3x3/2 to 64 channels; three
stages at 28x28 (64 channels), 14x14 (128) and 7x7 (256); a 1x1 conv to 1024 channels
(conv2d_63), no pool and no fc. A node is a 3x3 conv keeping its input's channels and a
1x1 conv to the stage's channels; a node reading several nodes first sums them
(`element_wiseN`, an add); the nodes without predecessors read the stage input with
stride 2. A stage's output is its output nodes summed, or, for a single output node, a
one-input element-wise op (the reference's one-input PTP, modelled as GELU: one vector op
per element). Windows are padded as the reference pads them ('same', floor(total / 2) in
front).

`randwire_ws_small` is a random RandWire-WS graph: Table 1 with WS(K=4, P=0.75), N=32,
C=78. conv1 3x3/2 to C/2; conv2 3x3/2 to C; stages conv3, conv4, conv5 are random graphs
of N nodes with C, 2C, 4C channels at 28x28, 14x14, 7x7; 1x1 conv to 1280; global average
pool; fc 1000. Each stage's graph is `networkx.connected_watts_strogatz_graph(N, K, P)`
with a fixed seed per stage (the same graph on every call), made a DAG by directing every
edge from the lower to the higher node index. A node aggregates its inputs with an add
(the paper's learned positive weights are not modelled; no add for a single input), then
applies ReLU (not modelled) and a separable conv: 3x3 depthwise, then 1x1 conv (batch
norm not modelled). Input nodes (no predecessors) read the stage input with stride 2; the
stage output is the unweighted average of the output nodes (no successors), modelled as
an add.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import count

import networkx as nx

from mipsched.workload.graph import NetBuilder, Workload
from mipsched.workload.layer import Op
from mipsched.workload.zoo import same

#: a node reading the stage input (with stride 2)
STAGE_INPUT: tuple[int, ...] = ()


@dataclass(frozen=True)
class Stage:
    """One stage of the reference's graph. Node n is conv2d_{n-1} (3x3) then conv2d_n
    (1x1); `nodes` maps n to the nodes it sums (by their n), in the reference's order."""

    channels: int
    nodes: Mapping[int, tuple[int, ...]]
    outputs: tuple[int, ...]


_REFERENCE_STAGES = (
    Stage(64, {4: STAGE_INPUT, 6: (4,), 8: STAGE_INPUT, 10: (4, 8), 12: (4, 8),
               14: (4, 10), 16: (6, 10, 12, 14), 18: (10, 14), 20: (8, 10, 16, 18),
               22: (4, 10, 20)},
          outputs=(22,)),
    Stage(128, {24: STAGE_INPUT, 26: STAGE_INPUT, 28: STAGE_INPUT, 30: (24, 26),
                32: (24,), 34: (24, 26, 28), 36: (32, 34), 38: (24, 26, 28, 30, 36),
                40: (30, 36, 38), 42: (30, 32, 34, 40)},
          outputs=(42,)),
    Stage(256, {44: STAGE_INPUT, 46: STAGE_INPUT, 48: (46,), 50: (48,), 52: (44, 50),
                54: (44, 46, 52), 56: (50, 52, 54), 58: (44, 48, 52, 54), 60: (46, 48, 52),
                62: (46, 50, 58)},
          outputs=(56, 60, 62)),
)


def _reference_stage(b: NetBuilder, x: str, stage: Stage, sums: Iterator[str]) -> str:
    """Adds one stage reading `x`; `sums` names its element-wise layers."""
    out: dict[int, str] = {}
    for n, preds in stage.nodes.items():
        if preds == STAGE_INPUT:
            src, stride = x, 2
        elif len(preds) == 1:
            src, stride = out[preds[0]], 1
        else:
            src, stride = b.eltwise(next(sums), [out[m] for m in preds]), 1
        y = same.conv(b, f"conv2d_{n - 1}", src, b.shape(src).c, 3, stride=stride)
        out[n] = same.conv(b, f"conv2d_{n}", y, stage.channels, 1)
    if len(stage.outputs) == 1:
        return b.unary(next(sums), out[stage.outputs[0]], Op.GELU)
    return b.eltwise(next(sums), [out[n] for n in stage.outputs])


def randwire_small(batch: int = 1) -> Workload:
    """The SoMa reference's fixed RandWire graph (85 layers) on a 224x224x3 image."""
    b = NetBuilder("randwire_small", batch)
    x = b.input("input", 3, 224, 224)
    x = same.conv(b, "conv2d_1", x, 32, 3, stride=2)
    x = same.conv(b, "conv2d_2", x, 64, 3, stride=2)
    sums = (f"element_wise{i}" for i in count(1))
    for stage in _REFERENCE_STAGES:
        x = _reference_stage(b, x, stage, sums)
    same.conv(b, "conv2d_63", x, 1024, 1)
    return b.build()


NODES = 32  # N
DEGREE = 4  # K
REWIRE = 0.75  # P
CHANNELS = 78  # C
#: (stage number, channels, graph seed)
_WS_STAGES = ((3, CHANNELS, 3), (4, 2 * CHANNELS, 4), (5, 4 * CHANNELS, 5))


def stage_dag(seed: int) -> nx.DiGraph:
    """The random graph of one stage as a DAG over nodes 0..N-1 (edges low -> high)."""
    g = nx.connected_watts_strogatz_graph(NODES, DEGREE, REWIRE, seed=seed)
    dag = nx.DiGraph()
    dag.add_nodes_from(range(NODES))
    dag.add_edges_from((min(u, v), max(u, v)) for u, v in g.edges)
    return dag


def _ws_stage(b: NetBuilder, stage: int, x: str, channels: int, dag: nx.DiGraph) -> str:
    out: dict[int, str] = {}
    for n in sorted(dag.nodes):
        p = f"s{stage}_n{n}"
        preds = [out[m] for m in sorted(dag.predecessors(n))]
        if not preds:
            src, stride = x, 2
        elif len(preds) == 1:
            src, stride = preds[0], 1
        else:
            src, stride = b.eltwise(f"{p}_agg", preds), 1
        y = b.depthwise(f"{p}_dw", src, 3, stride=stride)
        out[n] = b.conv(f"{p}_pw", y, channels, 1)
    sinks = [out[n] for n in sorted(dag.nodes) if dag.out_degree(n) == 0]
    return sinks[0] if len(sinks) == 1 else b.eltwise(f"s{stage}_out", sinks)


def randwire_ws_small(batch: int = 1) -> Workload:
    """RandWire-WS(4, 0.75), small regime (N=32, C=78), on a 224x224x3 image."""
    b = NetBuilder("randwire_ws_small", batch)
    x = b.input("input", 3, 224, 224)
    x = b.conv("conv1", x, CHANNELS // 2, 3, stride=2)
    x = b.conv("conv2", x, CHANNELS, 3, stride=2)
    for stage, channels, seed in _WS_STAGES:
        x = _ws_stage(b, stage, x, channels, stage_dag(seed))
    x = b.conv("conv_head", x, 1280, 1)
    x = b.global_pool("pool", x)
    b.fc("fc", x, 1000)
    return b.build()
