"""Where a sweep's points run: `local` (one child process per point, `jobs` at once) or
`ray` (one Ray task per point on a Ray cluster). Both hand finished points back to the
driver, which alone writes the sweep's directory.

Every point's CP-SAT calls use the grid's `workers` threads, and an executor runs at most
as many points at once as it has cores for them (local: `jobs`; Ray: each task reserves
`workers` CPUs), so points never oversubscribe the cores.

A point whose process dies (a native crash, the memory cap, the kernel's OOM killer) is
recorded as `crashed` with how it died; Ray retries a point whose worker or node was lost
(MAX_RETRIES times) before recording it.
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import os
import signal
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Protocol

from mipsched.errors import InputError
from mipsched.sweep.task import PointResult, PointTask, failed, run_task

#: How often Ray retries a point whose worker process or node was lost.
MAX_RETRIES = 3
_FORK = multiprocessing.get_context("fork")


class Executor(Protocol):
    """Runs point tasks and hands back the finished ones."""

    slots: int
    """How many points it runs at once."""

    def submit(self, task: PointTask) -> None:
        """Starts `task`."""

    def finished(self, timeout: float) -> list[tuple[PointTask, PointResult]]:
        """The tasks that finished since the last call, waiting up to `timeout` seconds
        for one."""

    def running(self) -> int:
        """How many tasks are running."""

    def stop(self) -> None:
        """Stops every running task (their points stay unfinished)."""


@dataclass
class _Child:
    task: PointTask
    process: Any
    reader: Connection


class LocalExecutor:
    """One forked child process per point, at most `jobs` at once."""

    def __init__(self, jobs: int) -> None:
        self.slots = jobs
        self._children: list[_Child] = []

    def submit(self, task: PointTask) -> None:
        """Forks a child that runs the point and sends back its result."""
        reader, writer = _FORK.Pipe(duplex=False)
        process = _FORK.Process(target=_child_main, args=(writer, task), daemon=True)
        process.start()
        writer.close()
        self._children.append(_Child(task, process, reader))

    def finished(self, timeout: float) -> list[tuple[PointTask, PointResult]]:
        """Results of children that ended (a child that died: a `crashed` row)."""
        if not self._children:
            return []
        ready = set(wait([c.reader for c in self._children], timeout))
        done = []
        for child in [c for c in self._children if c.reader in ready]:
            try:
                result = child.reader.recv()
            except (EOFError, OSError):
                child.process.join()
                result = failed(child.task.point, child.task.hw, "crashed",
                                f"the point's process {_death(child.process.exitcode)}")
            child.reader.close()
            child.process.join()
            self._children.remove(child)
            done.append((child.task, result))
        return done

    def running(self) -> int:
        """Children still running."""
        return len(self._children)

    def stop(self) -> None:
        """Kills every child."""
        for child in self._children:
            child.process.kill()
            child.process.join()
            child.reader.close()
        self._children.clear()


def _child_main(writer: Connection, task: PointTask) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    faulthandler.disable()  # a crash is the driver's to record, in one line
    writer.send(run_task(task))
    writer.close()


def _death(exitcode: int | None) -> str:
    """How a child died, e.g. 'was killed by signal SIGKILL (out of memory?)'."""
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name
        hint = " (out of memory?)" if name == "SIGKILL" else ""
        return f"was killed by signal {name}{hint}"
    return f"exited with code {exitcode} without a result"


class RayExecutor:
    """One Ray task per point on the cluster at `address` (None: a local Ray instance
    with this machine's cores). Each task reserves the point's CP-SAT workers as CPUs."""

    def __init__(self, address: str | None, workers: int) -> None:
        try:
            import ray
        except ImportError:
            raise InputError("--executor ray needs Ray: pip install -e '.[ray]'") from None
        self._ray = ray
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.slots = max(1, cpus // workers)
        self._remote = ray.remote(run_task).options(num_cpus=workers, max_retries=MAX_RETRIES)
        self._pending: dict[Any, PointTask] = {}

    def submit(self, task: PointTask) -> None:
        """Queues the point on the cluster."""
        self._pending[self._remote.remote(task)] = task

    def finished(self, timeout: float) -> list[tuple[PointTask, PointResult]]:
        """Results of the tasks that ended (a task Ray gave up on: a `crashed` row)."""
        if not self._pending:
            return []
        ready, _ = self._ray.wait(list(self._pending), num_returns=1, timeout=timeout)
        done = []
        for ref in ready:
            task = self._pending.pop(ref)
            try:
                result = self._ray.get(ref)
            except self._ray.exceptions.RayError as err:
                result = failed(task.point, task.hw, "crashed",
                                f"Ray gave up on the point: {' '.join(str(err).split())[:300]}")
            done.append((task, result))
        return done

    def running(self) -> int:
        """Tasks queued or running on the cluster."""
        return len(self._pending)

    def stop(self) -> None:
        """Cancels every queued or running task."""
        for ref in self._pending:
            self._ray.cancel(ref, force=True)
        self._pending.clear()


def default_jobs(workers: int) -> int:
    """Points at once on this machine: its cores / CP-SAT workers per point."""
    return max(1, (os.cpu_count() or 1) // workers)
