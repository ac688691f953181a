"""Native crashes in a child process become errors: `run_isolated` returns values and
re-raises exceptions of the child, turns its death (a real SIGSEGV or SIGABRT) into
ChildCrashed, and kills it when the caller is interrupted. Through the CLI, a crash of
onnx while reading a model is one line on stderr with exit code 2."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import time
from pathlib import Path

import onnx
import pytest
from typer.testing import CliRunner

from mipsched.cli import app
from mipsched.errors import InputError
from mipsched.isolate import ChildCrashed, run_isolated

import onnx_models as om

runner = CliRunner()


def segfault(*_, **__) -> None:
    """Reads address 0: a real segmentation fault."""
    ctypes.string_at(0)


def fail(message: str) -> None:
    raise InputError(message)


def sleep_long() -> None:
    time.sleep(60)


def test_value_and_exception_come_back() -> None:
    assert run_isolated(pow, 3, 4) == 81
    assert run_isolated(os.getpid) != os.getpid()
    with pytest.raises(InputError, match="bad layer 'x'"):
        run_isolated(fail, "bad layer 'x'")


@pytest.mark.parametrize(("fn", "name"), [(segfault, "SIGSEGV"), (os.abort, "SIGABRT")])
def test_a_crash_is_an_exception(fn, name: str) -> None:
    with pytest.raises(ChildCrashed, match=f"killed by signal {name}"):
        run_isolated(fn)


def test_an_interrupted_caller_kills_the_child() -> None:
    def timeout(*_) -> None:
        raise TimeoutError

    previous = signal.signal(signal.SIGALRM, timeout)
    signal.alarm(1)
    try:
        with pytest.raises(TimeoutError):
            run_isolated(sleep_long)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert multiprocessing.active_children() == []


def isolated_pid() -> int:
    return run_isolated(os.getpid)


@pytest.mark.skipif(sys.platform != "linux", reason="forks the pool")
def test_a_pool_worker_runs_the_function_itself() -> None:
    """multiprocessing.Pool workers are daemonic and may not have children."""
    with multiprocessing.get_context("fork").Pool(1) as pool:
        worker, pid = pool.apply(os.getpid), pool.apply(isolated_pid)
    assert pid == worker


@pytest.mark.skipif(sys.platform != "linux", reason="the patch reaches a forked child only")
def test_onnx_crash_through_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """onnx's shape inference dies of a segmentation fault (patched in before the fork):
    `import` reports it in one line, exit code 2, and writes nothing."""
    onnx.save(om.residual_block(), tmp_path / "block.onnx")
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", segfault)
    out = tmp_path / "block.yaml"
    result = runner.invoke(app, ["import", str(tmp_path / "block.onnx"), "-o", str(out)])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"mipsched: error: {tmp_path / 'block.onnx'}: the onnx library crashed on this model "
        "(killed by signal SIGSEGV): the file is malformed or triggers an onnx bug; "
        "onnx.checker.check_model may say which"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["block.onnx"]
