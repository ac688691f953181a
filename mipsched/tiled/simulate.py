"""Discrete-event replay of an RA-tree schedule on a tiled machine, the judge of the
analytic model (`mipsched.tiled.evaluate`) as `mipsched.sim.engine` is of the
single-core one. It shares with the model only the leaf results (`search_leaf`), the
core allocation and the rules of `mipsched.tiled.structure`: times come from events on
resources (a heap of timed events), never from the `n x sum` / `(n + S) x max` formulas.
Resources: the cores (one task each at a time), the DRAM channel (hw.dram.bytes_per_cycle)
and every directed link (hw.noc.link_bytes_per_cycle). Units: cycles, bytes, pJ.

- A task is one invocation of a leaf (layer, node path, sub-batch index at every cut
  above it, the samples it processes, its cores [first, last)). It holds its cores for
  max(tile cycles, ceil(its own DRAM bytes / DRAM bandwidth)): the model lets every
  leaf use the whole DRAM bandwidth and charges the shared channel per segment.
- A T Cut runs, for each of its sub-batches in turn, its children one after another
  on its cores; a child starts when the previous child's invocation is over.
- An S Cut runs its children on disjoint core ranges (`structure.child_spans`) as
  SET's synchronous pipeline: slots as long as the longest invocation of a child (each
  child measured by a rehearsal, a replay of one invocation on its own); the child at
  stage s (`stages`) processes sub-batch i in slot i + s. The cut ends with its last
  slot, once every child invocation is over.
- A segment (a child of the root) streams from its start the DRAM bytes of all its
  tasks through the DRAM channel and each link's bytes through that link; it ends when
  its compute and all its streams are done. The root runs its segments one after
  another, once per root sub-batch.

Checks (TiledSimulationError of the `kind` in brackets, naming the node path and layer):
a core never runs two tasks at once ('overlap'); no task starts before the tasks making
its input samples have ended ('order'; `check_tasks`); no pipeline stage outlasts its
slot ('slot'); no stream starts on a busy link or channel, and a segment streams exactly
the DRAM bytes its tasks move ('stream'). A tree the reference rejects (an S Cut's
allocation, a leaf without partition, a core's buffer over capacity by SET's accounting,
docs/set-model.md §3.12) gives None, as `evaluate_tree` does.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from mipsched.hw.tiled import TiledHardware
from mipsched.sim.result import SimulationError
from mipsched.tiled import structure
from mipsched.tiled.leaf import OFM_UBUF_BYTES, LeafResult, cached_leaf, leaf_sources
from mipsched.tiled.noc import Link, LinkLoads
from mipsched.tiled.ratree import Cut, Leaf, Node, RaTree, check_tree, layers_of
from mipsched.workload.graph import Workload

_END, _START = 0, 1  # event priorities at equal times: ends come before starts


class TiledSimulationError(SimulationError):
    """The replay broke a rule: `kind` is 'overlap', 'order', 'slot' or 'stream' (see
    the module docstring); the message names the node path and layer."""


@dataclass(frozen=True)
class TaskRecord:
    """One leaf invocation as it ran. Times in cycles, traffic in bytes, energy in pJ."""

    layer: str
    path: str  # the leaf's node path, `root.0.2`
    subbatch: tuple[int, ...]  # sub-batch index at every cut above the leaf, root first
    samples: tuple[int, int]  # the samples [from, to) of the whole batch it processes
    first: int  # its cores [first, last) (SET's core indices)
    last: int
    start: int
    end: int
    dram_bytes: int
    byte_hops: int
    energy_pj: float  # compute and buffers: cores x tile energy + `ubuf_ext`


@dataclass(frozen=True)
class SegmentRecord:
    """One invocation of a segment (a child of the root). Cycles, bytes, pJ."""

    index: int  # the segment's position under the root
    subbatch: int  # the root's sub-batch it processes
    layers: tuple[str, ...]
    start: int
    compute_end: int
    dram_end: int
    links_end: int
    end: int
    dram_bytes: int
    byte_hops: int
    busiest_link_bytes: int
    transfer_energy_pj: float  # its NoC byte-hops and DRAM bytes, at the per-byte costs


@dataclass
class TiledTrace:
    """A replayed RA tree: latency (cycles), energy (pJ), traffic (bytes), tasks, segments."""

    latency: int
    energy_pj: float
    dram_bytes: int
    byte_hops: int
    tasks: list[TaskRecord] = field(repr=False)
    segments: list[SegmentRecord] = field(repr=False)
    link_bytes: dict[Link, int] = field(repr=False)  # bytes per directed link, whole run
    leaves: dict[str, LeafResult] = field(repr=False)

    def busiest_link(self) -> tuple[Link, int] | None:
        """(link, bytes) of the most loaded link over the run, ties to the smallest
        link; None without NoC traffic."""
        if not self.link_bytes:
            return None
        return min(self.link_bytes.items(), key=lambda item: (-item[1], item[0]))


# --- the static part: leaves, core ranges, buffers, traffic --------------------------------
class _Reject(Exception):
    """The reference rejects the tree."""


@dataclass
class _Plan:
    hw: TiledHardware
    workload: Workload
    tree: RaTree
    stride: int
    min_util: float
    cache: dict
    shortcuts: set[tuple[str, str]]
    stores: set[str]
    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)  # cores per node path
    leaves: dict[str, LeafResult] = field(default_factory=dict)
    traffic: dict[str, LinkLoads] = field(default_factory=dict)  # of a segment's invocation


Usage = tuple[Counter, Counter, Counter]  # bytes per tile: prefetch, weights, working set


def _plan(plan: _Plan, node: Node, path: str, batch: int, first: int, last: int,
          segment: bool) -> Usage:
    """Resolves `node` (leaf searches, S-Cut allocations) depth first, left to right,
    and returns its per-core buffer usage; raises _Reject as the reference would."""
    plan.ranges[path] = (first, last)
    if isinstance(node, Leaf):
        return _plan_leaf(plan, node.layer, batch, first, last, segment)
    n, child_batch = node.subbatches, batch // node.subbatches
    spans = structure.child_spans(node, plan.workload, first, last, plan.min_util)
    if spans is None:
        raise _Reject
    usages = [_plan(plan, c, f"{path}.{k}", child_batch, lo, hi, False)
              for k, (c, (lo, hi)) in enumerate(zip(node.children, spans, strict=True))]
    return _cut_usage(node.kind, usages, n, segment, plan.hw.tile.gbuf.capacity_bytes)


def _plan_leaf(plan: _Plan, name: str, batch: int, first: int, last: int,
               segment: bool) -> Usage:
    layouts = {n: r.layout for n, r in plan.leaves.items()}
    sources = leaf_sources(plan.workload, name, plan.shortcuts, layouts)
    result = cached_leaf(plan.cache, plan.hw, plan.workload, name, batch, plan.tree.batch,
                         first, last, plan.stride, sources, name in plan.stores, segment)
    if result is None:
        raise _Reject
    plan.leaves[name] = result
    ifm, wgt = Counter(), Counter()
    for into, pairs in ((ifm, result.ifm_bytes), (wgt, result.wgt_bytes)):
        for tile, n in pairs:
            into[tile] += n
    buf = Counter({tile: n + OFM_UBUF_BYTES for tile, n in ifm.items()})
    _within(buf + wgt, plan.hw.tile.gbuf.capacity_bytes)
    return ifm, wgt, buf


def _within(usage: Counter, capacity: int) -> Counter:
    if any(n > capacity for n in usage.values()):
        raise _Reject
    return usage


def _cut_usage(kind: str, usages: list[Usage], n: int, segment: bool,
               capacity: int) -> Usage:
    """SET's per-core buffer accounting of a cut (§3.12). S: children side by side,
    ifmaps double-buffered when n > 1. T: the next child's ifmap (in a one-sub-batch
    segment, its weights too) is prefetched while a child runs; with n > 1 the first
    child's for the next sub-batch. Below a segment, all sub-batches' ifmaps are."""
    ifms, wgts, bufs = ([u[k] for u in usages] for k in range(3))
    total_ifm = sum(ifms, Counter())
    prefetch = Counter() if segment else _within(
        Counter({t: v * n for t, v in total_ifm.items()}), capacity)
    if kind == "S":
        buf = sum(bufs, Counter()) + (total_ifm if n > 1 else Counter())
        wgt = sum(wgts, Counter())
    else:
        shift = segment and n == 1
        buf = Counter()
        for k in range(1, len(usages)):
            buf |= ifms[k] + bufs[k - 1] + (wgts[k] + wgts[k - 1] if shift else Counter())
        wrap = ifms[0] if n > 1 else (wgts[-1] if shift else Counter())
        buf |= bufs[-1] + wrap
        wgt = Counter() if shift else sum(wgts, Counter())
    _within(buf + wgt, capacity)
    return prefetch, wgt, buf


def _segment_traffic(plan: _Plan, node: Node, times: int, into: LinkLoads) -> None:
    """Adds the traffic records of `times` invocations of `node` into `into`."""
    if isinstance(node, Leaf):
        into += plan.leaves[node.layer].record.scaled(times)
        return
    for child in node.children:
        _segment_traffic(plan, child, times * node.subbatches, into)


# --- the replay ----------------------------------------------------------------------------
@dataclass(frozen=True)
class _Job:
    """One invocation of a node."""

    node: Node
    path: str
    batch: int
    samples: tuple[int, int]
    subbatch: tuple[int, ...]
    segment: bool = False

    @property
    def cut(self) -> Cut:
        """The node, a cut."""
        assert isinstance(self.node, Cut)
        return self.node


Done = Callable[[int], None]


class _Replay:
    """The event queue and resources of one replay (or rehearsal: it records nothing)."""

    def __init__(self, plan: _Plan, periods: dict[str, int], record: bool) -> None:
        self.plan, self.periods, self.record = plan, periods, record
        self.heap: list[tuple[int, int, int, Callable[[], None]]] = []
        self.seq = 0
        self.holder: dict[int, str] = {}  # the task holding each busy core
        self.free_at: dict[object, int] = {}  # when each link (and 'dram') is free again
        self.tasks: list[TaskRecord] = []
        self.segments: list[SegmentRecord] = []
        self.links: Counter = Counter()

    def at(self, time: int, priority: int, action: Callable[[], None]) -> None:
        """Schedules `action` at cycle `time` (ends, priority _END, before starts)."""
        heapq.heappush(self.heap, (time, priority, self.seq, action))
        self.seq += 1

    def run(self, job: _Job) -> int:
        """Replays `job` from cycle 0; the cycle it ends."""
        finish: list[int] = []
        self.start(job, 0, finish.append)
        while self.heap:
            _, _, _, action = heapq.heappop(self.heap)
            action()
        assert finish, "the replay stalled"
        return finish[0]

    def start(self, job: _Job, time: int, done: Done) -> None:
        """Starts `job` at `time` (an event), calling done(end cycle) when it is over."""
        if job.segment:
            run = self._segment
        elif isinstance(job.node, Leaf):
            run = self._leaf
        else:
            run = self._s_cut if job.node.kind == "S" else self._t_cut
        self.at(time, _START, lambda: run(job, time, done))

    def _child(self, job: _Job, k: int, i: int) -> _Job:
        cut = job.cut
        size = job.batch // cut.subbatches
        lo = job.samples[0] + i * size
        return _Job(cut.children[k], f"{job.path}.{k}", size, (lo, lo + size),
                    job.subbatch + (i,), job.path == "root")

    def _leaf(self, job: _Job, time: int, done: Done) -> None:
        assert isinstance(job.node, Leaf)
        plan, name = self.plan, job.node.layer
        res = plan.leaves[name]
        first, last = plan.ranges[job.path]
        who = f"{job.path} ({name}, sub-batch {job.subbatch})"
        for core in range(first, last):
            if core in self.holder:
                raise TiledSimulationError("overlap", f"{who} needs core {core} at cycle "
                                           f"{time}, but {self.holder[core]} still runs there")
            self.holder[core] = who
        dram = res.record.dram_bytes
        end = time + max(res.tile_cycles, -(-dram // plan.hw.dram.bytes_per_cycle))

        def finish() -> None:
            for core in range(first, last):
                del self.holder[core]
            if self.record:
                self.tasks.append(TaskRecord(
                    name, job.path, job.subbatch, job.samples, first, last, time, end,
                    dram, res.record.byte_hops,
                    res.cores * res.tile_energy_pj + res.ubuf_ext_pj))
            done(end)
        self.at(end, _END, finish)

    def _t_cut(self, job: _Job, time: int, done: Done) -> None:
        cut = job.cut
        steps = [(i, k) for i in range(cut.subbatches) for k in range(len(cut.children))]

        def step(j: int, now: int) -> None:
            if j == len(steps):
                done(now)
                return
            i, k = steps[j]
            self.start(self._child(job, k, i), now, lambda end: step(j + 1, end))
        step(0, time)

    def _s_cut(self, job: _Job, time: int, done: Done) -> None:
        cut = job.cut
        stage = structure.stages(cut, self.plan.workload)
        period = self._period(job)
        slots = cut.subbatches + max(stage)
        running, closed = 0, -1

        def tick(slot: int, now: int) -> None:
            nonlocal running, closed
            if slot == slots:
                closed = now
                if not running:
                    done(closed)
                return
            for k, s in enumerate(stage):
                if 0 <= slot - s < cut.subbatches:
                    child = self._child(job, k, slot - s)
                    running += 1
                    self.start(child, now, lambda end, c=child, t=now + period:
                               ended(c, end, t))
            self.at(now + period, _START, lambda: tick(slot + 1, now + period))

        def ended(child: _Job, end: int, slot_end: int) -> None:
            nonlocal running
            if end > slot_end:
                raise TiledSimulationError(
                    "slot", f"{child.path} (sub-batch {child.subbatch}) ends at cycle "
                    f"{end}, after its pipeline slot of {job.path} ends at {slot_end}")
            running -= 1
            if closed >= 0 and not running:
                done(closed)
        tick(0, time)

    def _period(self, job: _Job) -> int:
        """The slot length of the S Cut `job`: its children's longest invocation, each
        measured by a rehearsal (a replay of one invocation on its own)."""
        if job.path not in self.periods:
            self.periods[job.path] = max(
                _Replay(self.plan, self.periods, False).run(self._child(job, k, 0))
                for k in range(len(job.cut.children)))
        return self.periods[job.path]

    def _segment(self, job: _Job, time: int, done: Done) -> None:
        traffic, hw = self.plan.traffic[job.path], self.plan.hw
        dram, links = traffic.dram_bytes, traffic.links
        streams = [("dram", dram, hw.dram.bytes_per_cycle)]
        streams += [(link, n, hw.noc.link_bytes_per_cycle) for link, n in links.items()]
        ends = {"compute": time, "dram": time, "links": time}
        pending = 1 + sum(1 for _, n, _ in streams if n)
        tasks_before = len(self.tasks)

        def part_done(part: str, end: int) -> None:
            nonlocal pending
            ends[part] = max(ends[part], end)
            pending -= 1
            if pending:
                return
            if self.record:
                self._segment_record(job, time, ends, tasks_before)
            done(max(ends.values()))
        for resource, n, rate in streams:
            if not n:
                continue
            if self.free_at.get(resource, 0) > time:
                raise TiledSimulationError(
                    "stream", f"{job.path}: {resource} is busy until cycle "
                    f"{self.free_at[resource]}, after the segment's start {time}")
            end = time + -(-n // rate)
            self.free_at[resource] = end
            part = "dram" if resource == "dram" else "links"
            self.at(end, _END, lambda p=part, e=end: part_done(p, e))
        self.links.update(links)
        body = _Job(job.node, job.path, job.batch, job.samples, job.subbatch)
        self.start(body, time, lambda end: part_done("compute", end))

    def _segment_record(self, job: _Job, time: int, ends: dict[str, int],
                        tasks_before: int) -> None:
        traffic = self.plan.traffic[job.path]
        dram, hops = traffic.dram_bytes, traffic.byte_hops
        moved = sum(t.dram_bytes for t in self.tasks[tasks_before:])
        if moved != dram:
            raise TiledSimulationError(
                "stream", f"{job.path}: its tasks moved {moved} DRAM bytes, the segment "
                f"streamed {dram}")
        hw = self.plan.hw
        energy = hops * hw.noc.hop_pj_per_byte + dram * hw.dram.energy_pj_per_byte
        self.segments.append(SegmentRecord(
            int(job.path.rsplit(".", 1)[1]), job.subbatch[0], tuple(layers_of(job.node)),
            time, ends["compute"], ends["dram"], ends["links"], max(ends.values()), dram,
            hops, traffic.max_link_bytes(), energy))


# --- public API ----------------------------------------------------------------------------
def simulate_tree(hw: TiledHardware, workload: Workload, tree: RaTree, stride: int = 2,
                  min_util: float = 0.75, cache: dict | None = None) -> TiledTrace | None:
    """Replays `tree` on `hw` event by event (module docstring): latency (cycles),
    energy (pJ: the tasks' compute and buffers + the segments' byte-hops and DRAM
    bytes), DRAM bytes, task and segment records. None when the reference rejects the
    tree (as `evaluate_tree`); TreeError if it is no RA tree of `workload`;
    TiledSimulationError when the replay breaks a rule. `cache` memoises leaf searches
    under `evaluate_tree`'s keys: one dict may serve both (same hardware, workload)."""
    root = tree.root
    if not (isinstance(root, Cut) and root.kind == "T"):
        raise ValueError("the root of an RA tree must be a T Cut")
    check_tree(tree, workload)
    plan = _Plan(hw, workload, tree, stride, min_util, {} if cache is None else cache,
                 structure.via_dram(tree, workload), structure.stores_to_dram(tree, workload))
    plan.ranges["root"] = (0, hw.n_tiles)
    child_batch = tree.batch // root.subbatches
    try:
        for k, child in enumerate(root.children):
            _plan(plan, child, f"root.{k}", child_batch, 0, hw.n_tiles, True)
            _segment_traffic(plan, child, 1, plan.traffic.setdefault(f"root.{k}", LinkLoads()))
    except _Reject:
        return None
    replay = _Replay(plan, {}, True)
    latency = replay.run(_Job(root, "root", tree.batch, (0, tree.batch), ()))
    check_tasks(replay.tasks, workload)
    energy = sum(t.energy_pj for t in replay.tasks)
    energy += sum(s.transfer_energy_pj for s in replay.segments)
    return TiledTrace(latency, energy, sum(t.dram_bytes for t in replay.tasks),
                      sum(t.byte_hops for t in replay.tasks), replay.tasks,
                      replay.segments, dict(replay.links), dict(plan.leaves))


def check_tasks(tasks: Sequence[TaskRecord], workload: Workload) -> None:
    """Raises TiledSimulationError unless no two tasks overlap in time on a core
    ('overlap') and every task starts after the tasks producing its samples of each of
    its input layers have ended, those samples all being produced ('order'). Cycles."""
    by_core: dict[int, list[TaskRecord]] = {}
    by_layer: dict[str, list[TaskRecord]] = {}
    for t in tasks:
        by_layer.setdefault(t.layer, []).append(t)
        for core in range(t.first, t.last):
            by_core.setdefault(core, []).append(t)
    for core, held in by_core.items():
        held.sort(key=lambda t: (t.start, t.end))
        for a, b in zip(held, held[1:], strict=False):
            if a.end > b.start:
                raise TiledSimulationError(
                    "overlap", f"core {core}: {b.path} ({b.layer}, sub-batch "
                    f"{b.subbatch}) starts at cycle {b.start}, while {a.path} ({a.layer}, "
                    f"sub-batch {a.subbatch}) runs until {a.end}")
    for t in tasks:
        for src in dict.fromkeys(workload.layers[t.layer].inputs):
            if src in workload.layers:
                _check_inputs(t, src, by_layer.get(src, []))


def _check_inputs(task: TaskRecord, src: str, producers: list[TaskRecord]) -> None:
    lo, hi = task.samples
    covered = []
    for p in producers:
        if p.samples[0] < hi and lo < p.samples[1]:
            if p.end > task.start:
                raise TiledSimulationError(
                    "order", f"{task.path} ({task.layer}, samples {lo}..{hi - 1}) starts "
                    f"at cycle {task.start}, before {p.path} ({src}, samples "
                    f"{p.samples[0]}..{p.samples[1] - 1}) ends at {p.end}")
            covered.append(p.samples)
    reach = lo
    for a, b in sorted(covered):
        reach = max(reach, b) if a <= reach else reach
    if reach < hi:
        raise TiledSimulationError(
            "order", f"{task.path} ({task.layer}) starts at cycle {task.start}, but no "
            f"task of {src} produced its samples from {reach} on")
