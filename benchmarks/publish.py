"""Shared tail of every benchmark: print the markdown table and write it to a file."""

from __future__ import annotations

from pathlib import Path


def publish(lines: list[str], out: Path) -> None:
    text = "\n".join(lines) + "\n"
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
