"""The sweep's journal: one JSON line per finished point, appended and flushed to disk
when the point's files are written, never rewritten. A point interrupted mid-run has no
line, so a resumed sweep runs it again; a torn last line (the machine died while writing
it) is ignored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mipsched.atomic import append_line

JOURNAL = "journal.jsonl"


def read_journal(directory: Path) -> dict[str, dict[str, Any]]:
    """Point key -> its row, for every complete line of `directory`'s journal (the last
    line for a key wins)."""
    path = directory / JOURNAL
    rows: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return rows
    with path.open() as f:
        for line in f:
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line torn by a crash while it was written
            if isinstance(entry, dict) and isinstance(entry.get("point"), str):
                rows[entry["point"]] = entry
    return rows


def append_journal(directory: Path, row: dict[str, Any]) -> None:
    """Appends `row` (with its `point` key) as one line and syncs it to disk."""
    append_line(directory / JOURNAL, json.dumps(row, sort_keys=True, default=str))
