"""Loading hardware descriptions: built-in presets by name or YAML files by path.

Every error names the file, the line and the dotted key (``my.yaml, line 14:
gbuf.capacity_bytes: must be > 0 bytes, got 0``)."""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from mipsched import strict
from mipsched.hw.model import Hardware
from mipsched.yamlsrc import parse_yaml

PRESET_DIR = resources.files("mipsched.hw") / "presets"
#: Names of the built-in presets (files presets/NAME.yaml).
PRESETS: tuple[str, ...] = tuple(
    sorted(p.name.removesuffix(".yaml") for p in PRESET_DIR.iterdir() if p.name.endswith(".yaml"))
)


def hardware_text(name_or_path: str) -> tuple[str, str]:
    """The YAML text of a preset (`edge`, `cloud`) or of a hardware file, and the name of
    its source for messages; ConfigError if it is neither."""
    return hardware_source(name_or_path, PRESET_DIR, PRESETS)


def hardware_source(name_or_path: str, preset_dir: Traversable, presets: tuple[str, ...]
                    ) -> tuple[str, str]:
    """The YAML text of one of `presets` (files NAME.yaml in `preset_dir`) or of a file,
    and the name of its source for messages; ConfigError if it is neither."""
    if name_or_path in presets:
        return (preset_dir / f"{name_or_path}.yaml").read_text(), f"preset '{name_or_path}'"
    path = Path(name_or_path)
    if not path.is_file():
        raise strict.ConfigError(
            f"unknown hardware '{name_or_path}': not a preset ({', '.join(presets)}) "
            "and not a file"
        )
    try:
        return path.read_text(), str(path)
    except (OSError, UnicodeDecodeError) as err:
        raise strict.ConfigError(f"{path}: cannot read as text ({err})") from None


def load_hardware(name_or_path: str) -> Hardware:
    """A preset name (`edge`, `cloud`) or the path of a hardware YAML file.

    Raises an InputError naming the file, the line and the bad key."""
    text, source = hardware_text(name_or_path)
    doc = parse_yaml(text, source)
    try:
        return strict.build(Hardware, doc.data)
    except strict.ConfigError as err:
        raise strict.ConfigError(f"{doc.where(err.keys)}: {err}", err.keys) from None
