"""Atomic file output: every file mipsched writes appears whole or not at all.

The content goes to a temporary file in the target's directory, is flushed to disk, and is
renamed over the target (`os.replace`, atomic on POSIX and Windows); on any failure the
temporary file is removed and the target is left as it was. The one exception is an
append-only log (`append_line`): each line is appended and synced, and a line torn by a
crash is closed before the next.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yields a temporary path beside `path` to write to; on normal exit it replaces
    `path`, on an exception it is deleted. For writers that want a file name
    (e.g. matplotlib's savefig)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))  # honours umask
    except OSError as err:
        raise _about(err, path) from None
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        try:
            os.replace(tmp, path)
        except OSError as err:
            raise _about(err, path) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _about(err: OSError, path: Path) -> OSError:
    """`err` naming the file the caller asked for, not the temporary one."""
    return OSError(err.errno, err.strerror, str(path))


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Writes `data` to `path` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(path: Path, text: str) -> None:
    """Writes `text` (UTF-8) to `path` atomically."""
    write_bytes_atomic(path, text.encode())


def write_json_atomic(path: Path, data: Any) -> None:
    """Writes `data` as indented JSON to `path` atomically."""
    write_text_atomic(path, json.dumps(data, indent=1))


def append_line(path: Path, line: str) -> None:
    """Appends `line` and a newline to `path` (created if missing) and syncs it to disk:
    the one append-only writer (a sweep's journal). A last line left without its
    newline by a crash is closed first, so the new line stays whole."""
    path = Path(path)
    torn = path.exists() and path.stat().st_size > 0 and _last_byte(path) != b"\n"
    with open(path, "a") as f:
        f.write(("\n" if torn else "") + line + "\n")
        f.flush()
        os.fsync(f.fileno())


def _last_byte(path: Path) -> bytes:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1)
