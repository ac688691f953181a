"""Loading hardware descriptions: built-in presets by name or YAML files by path."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import yaml

from mipsched import strict
from mipsched.hw.model import Hardware

PRESET_DIR = resources.files("mipsched.hw") / "presets"
#: Names of the built-in presets (files presets/NAME.yaml).
PRESETS: tuple[str, ...] = tuple(
    sorted(p.name.removesuffix(".yaml") for p in PRESET_DIR.iterdir() if p.name.endswith(".yaml"))
)


def load_hardware(name_or_path: str) -> Hardware:
    """A preset name (`edge`, `cloud`) or the path of a hardware YAML file.

    Raises strict.ConfigError naming the file and the bad key."""
    if name_or_path in PRESETS:
        text = (PRESET_DIR / f"{name_or_path}.yaml").read_text()
        source = f"preset '{name_or_path}'"
    else:
        path = Path(name_or_path)
        if not path.is_file():
            raise strict.ConfigError(
                f"unknown hardware '{name_or_path}': not a preset ({', '.join(PRESETS)}) "
                "and not a file"
            )
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as err:
            raise strict.ConfigError(f"{path}: cannot read as text ({err})") from None
        source = str(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or "syntax error"
        raise strict.ConfigError(f"{source}:{line} invalid YAML: {problem}") from None
    try:
        return strict.build(Hardware, data)
    except strict.ConfigError as err:
        raise strict.ConfigError(f"{source}: {err}") from None
