"""Every file mipsched writes appears whole or not at all: a write that fails or is
interrupted half-way leaves neither a partial file nor a temporary one, and keeps the
previous version of the file."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

import mipsched
from mipsched import atomic
from mipsched.atomic import write_json_atomic, write_text_atomic
from mipsched.cli import app

runner = CliRunner()
PACKAGE = Path(mipsched.__file__).parent


def fail_half_way(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    """Makes every atomic write put half its bytes on disk, then raise `error`."""
    def half(self: Path, data: bytes) -> int:
        with open(self, "wb") as f:
            f.write(data[: len(data) // 2])
        raise error

    monkeypatch.setattr(Path, "write_bytes", half)


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"),
                                   KeyboardInterrupt()])
def test_failed_write_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     error: BaseException) -> None:
    fail_half_way(monkeypatch, error)
    with pytest.raises(type(error)):
        write_json_atomic(tmp_path / "schedule.json", {"latency_cycles": list(range(1000))})
    assert list(tmp_path.iterdir()) == []


def test_failed_write_keeps_the_previous_file(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "certificate.json"
    write_text_atomic(target, "old")
    fail_half_way(monkeypatch, OSError(28, "No space left on device"))
    with pytest.raises(OSError):
        write_text_atomic(target, "new" * 1000)
    assert target.read_text() == "old"
    assert list(tmp_path.iterdir()) == [target]


@pytest.mark.parametrize(("where", "why"), [("missing/net.yaml", "No such file or directory"),
                                          ("a_directory.yaml", "Is a directory")])
def test_unwritable_target_is_named_in_one_line(tmp_path: Path, where: str, why: str) -> None:
    """A target in a missing folder, or one that is a directory: the message names the
    target (not the temporary file) and nothing is left behind."""
    (tmp_path / "a_directory.yaml").mkdir()
    target = tmp_path / where
    result = runner.invoke(app, ["import", "chain3", "-o", str(target)])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"mipsched: error: {target}: {why}"]
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a_directory.yaml"]


def test_written_files_have_ordinary_permissions(tmp_path: Path) -> None:
    write_text_atomic(tmp_path / "a.json", "{}")
    (tmp_path / "b.json").write_text("{}")
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == stat.S_IMODE(
        (tmp_path / "b.json").stat().st_mode)


def test_plot_that_fails_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                        ) -> None:
    out = tmp_path / "run"
    assert runner.invoke(app, ["solve", "chain3", "--method", "baseline", "--out",
                               str(out)]).exit_code == 0
    from matplotlib.figure import Figure

    def broken(self, fname, **kw) -> None:
        Path(fname).write_bytes(b"\x89PNG half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", broken)
    result = runner.invoke(app, ["plot", str(out / "schedule.json"), "-o",
                                 str(tmp_path / "fig.png")])
    assert result.exit_code == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_interrupted_solve_leaves_whole_files_only(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the certificate is being renamed into place: schedule.json and
    program.json are complete, certificate.json does not exist, no temporary file."""
    replace = os.replace

    def interrupted(src, dst) -> None:
        if Path(dst).name == "certificate.json":
            raise KeyboardInterrupt
        replace(src, dst)

    monkeypatch.setattr(atomic.os, "replace", interrupted)
    result = runner.invoke(app, ["solve", "chain3", "--method", "baseline", "--out",
                                 str(tmp_path)])
    assert result.exit_code == 130  # Ctrl-C
    assert sorted(p.name for p in tmp_path.iterdir()) == ["program.json", "schedule.json"]
    for name in ("program.json", "schedule.json"):
        json.loads((tmp_path / name).read_text())


def test_the_package_writes_files_only_through_atomic() -> None:
    """An audit that stays true: no module but mipsched/atomic.py opens a file for
    writing, and matplotlib only ever saves to the temporary path atomic_path gives."""
    direct = re.compile(r"\.write_(text|bytes)\(|open\([^)]*['\"][wax]b?\+?['\"]")
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "atomic.py":
            continue
        for k, line in enumerate(path.read_text().splitlines(), start=1):
            if direct.search(line) or ("savefig(" in line and "savefig(tmp" not in line):
                offenders.append(f"{path.relative_to(PACKAGE)}:{k}: {line.strip()}")
    assert offenders == []
