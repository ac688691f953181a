"""RandWire-WS, small regime, of Xie et al. (ICCV 2019, "Exploring Randomly Wired Neural
Networks for Image Recognition"), Table 1 with WS(K=4, P=0.75), N=32, C=78.

224x224x3 input; conv1 3x3/2 to C/2; conv2 3x3/2 to C; stages conv3, conv4, conv5 are
random graphs of N nodes with C, 2C, 4C channels at 28x28, 14x14, 7x7; 1x1 conv to 1280;
global average pool; fc 1000.

Each stage's graph is `networkx.connected_watts_strogatz_graph(N, K, P)` with a fixed seed
per stage (the same graph on every call), made a DAG by directing every edge from the
lower to the higher node index. A node aggregates its inputs with an add (the paper's
learned positive weights are not modelled; no add for a single input), then applies ReLU
(not modelled) and a separable conv: 3x3 depthwise, then 1x1 conv (batch norm not
modelled). Input nodes (no predecessors) read the stage input with stride 2; the stage
output is the unweighted average of the output nodes (no successors), modelled as an add.
"""

from __future__ import annotations

import networkx as nx

from mipsched.workload.graph import NetBuilder, Workload

NODES = 32  # N
DEGREE = 4  # K
REWIRE = 0.75  # P
CHANNELS = 78  # C
#: (stage number, channels, graph seed)
_STAGES = ((3, CHANNELS, 3), (4, 2 * CHANNELS, 4), (5, 4 * CHANNELS, 5))


def stage_dag(seed: int) -> nx.DiGraph:
    """The random graph of one stage as a DAG over nodes 0..N-1 (edges low -> high)."""
    g = nx.connected_watts_strogatz_graph(NODES, DEGREE, REWIRE, seed=seed)
    dag = nx.DiGraph()
    dag.add_nodes_from(range(NODES))
    dag.add_edges_from((min(u, v), max(u, v)) for u, v in g.edges)
    return dag


def _stage(b: NetBuilder, stage: int, x: str, channels: int, dag: nx.DiGraph) -> str:
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


def randwire_small(batch: int = 1) -> Workload:
    """RandWire-WS(4, 0.75), small regime (N=32, C=78), on a 224x224x3 image."""
    b = NetBuilder("randwire_small", batch)
    x = b.input("input", 3, 224, 224)
    x = b.conv("conv1", x, CHANNELS // 2, 3, stride=2)
    x = b.conv("conv2", x, CHANNELS, 3, stride=2)
    for stage, channels, seed in _STAGES:
        x = _stage(b, stage, x, channels, stage_dag(seed))
    x = b.conv("conv_head", x, 1280, 1)
    x = b.global_pool("pool", x)
    b.fc("fc", x, 1000)
    return b.build()
