"""Running native code that may crash on bad input in a child process.

Some libraries (onnx's C++ shape inference) can die with a segmentation fault or an abort
on malformed input, which no `try` can catch. `run_isolated` runs a function in a child
process (forked on Linux: a few milliseconds) and hands back its result or re-raises its
exception; if the child dies instead, it raises `ChildCrashed`, so the caller can report a
one-line error.
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import signal
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, TypeVar

T = TypeVar("T")
#: Fork where it is safe and cheap; elsewhere the child starts a fresh interpreter.
_CONTEXT = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")


class ChildCrashed(Exception):
    """The child process died without a result (a signal, or an exit without one)."""


def run_isolated(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` computed in a child process: its value, or the exception it raised
    (which must be picklable, as must `fn`, `args` and the value). Raises ChildCrashed if
    the child dies; an interrupted caller (Ctrl-C, a timeout) kills the child. In a
    daemonic process (a multiprocessing.Pool worker), which may not have children,
    `fn` runs in the process itself."""
    if multiprocessing.current_process().daemon:
        return fn(*args)
    receiver, sender = _CONTEXT.Pipe(duplex=False)
    child = _CONTEXT.Process(target=_child, args=(sender, fn, args), daemon=True)
    child.start()
    sender.close()
    try:
        try:
            ok, value = receiver.recv()
        except EOFError:
            child.join()
            raise ChildCrashed(_death(child.exitcode)) from None
        child.join()
    finally:
        receiver.close()
        if child.is_alive():
            child.kill()
            child.join()
    if ok:
        return value
    raise value


def _child(sender: Connection, fn: Callable[..., Any], args: tuple) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    faulthandler.disable()  # a crash is the parent's to report, in one line
    try:
        result = (True, fn(*args))
    except BaseException as err:  # handed to the parent, which re-raises it
        result = (False, err)
    try:
        sender.send(result)
    except Exception as err:  # pickling failed, so nothing was sent yet
        sender.send((False, TypeError(f"{fn.__name__}: result cannot be sent to the "
                                      f"parent process ({err})")))
    sender.close()


def _death(exitcode: int | None) -> str:
    """How the child died, e.g. ``killed by signal SIGSEGV``."""
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by signal {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with code {exitcode} without a result"
