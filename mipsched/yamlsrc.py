"""YAML text -> plain data plus the line of every key and list item, so that an error about
a value can point at the line it came from.

Parsing is PyYAML's safe loader with YAML 1.2 numbers (``1e9`` is a float, not a string).
Every failure of the text itself (syntax, duplicate keys, nesting too deep) is an
InputError naming the source and the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from mipsched.errors import InputError

Key = str | int
"""One step of a path into the data: a mapping key or a list index."""


class YamlError(InputError):
    """YAML text that cannot be read (syntax, duplicate key, too deep)."""


class _Loader(yaml.SafeLoader):
    """The safe loader, with YAML 1.2's float syntax (exponent without a dot)."""


class Dumper(yaml.SafeDumper):
    """The safe dumper, quoting the strings that `_Loader` would read as floats."""


for _cls in (_Loader, Dumper):
    _cls.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:\d[\d_]*\.?\d*|\.\d+)[eE][-+]?\d+$"),
        list("-+0123456789."),
    )


@dataclass(frozen=True)
class YamlDoc:
    """A parsed YAML document and the 1-based line of each key / item path (empty for
    data that did not come from YAML text, e.g. a workload embedded in a JSON file)."""

    data: Any
    source: str
    lines: dict[tuple[Key, ...], int]

    def line(self, path: tuple[Key, ...]) -> int | None:
        """Line of `path`, or of its longest prefix that has one (a missing key is
        reported at the mapping that lacks it); None when no line is known."""
        for end in range(len(path), -1, -1):
            if path[:end] in self.lines:
                return self.lines[path[:end]]
        return None

    def where(self, path: tuple[Key, ...]) -> str:
        """``source, line N`` for `path` (just the source when no line is known), the
        prefix of error messages."""
        line = self.line(path)
        return self.source if line is None else f"{self.source}, line {line}"


def parse_yaml(text: str, source: str) -> YamlDoc:
    """Parses `text` (named `source` in messages); YamlError on anything unreadable."""
    try:
        loader = _Loader(text)  # rejects unprintable characters already
        try:
            node = loader.get_single_node()
            data = None if node is None else loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = f", line {mark.line + 1}" if mark is not None else ""
        raise YamlError(f"{source}{line}: invalid YAML: "
                        f"{err.problem or err.context or 'syntax error'}") from None
    except yaml.YAMLError as err:
        raise YamlError(f"{source}: invalid YAML: {' '.join(str(err).split())}") from None
    except RecursionError:
        raise YamlError(f"{source}: YAML nested too deeply") from None
    except (ValueError, OverflowError) as err:  # e.g. a date like 2024-13-45
        raise YamlError(f"{source}: invalid YAML value: {err}") from None
    return YamlDoc(data, source, {(): 1} if node is None else _lines(node, source))


def _lines(root: yaml.Node, source: str) -> dict[tuple[Key, ...], int]:
    """Line of every mapping key and list item; each node is visited once, so aliases
    that share a subtree many times cost nothing."""
    lines: dict[tuple[Key, ...], int] = {(): root.start_mark.line + 1}
    seen: set[int] = set()
    stack: list[tuple[tuple[Key, ...], yaml.Node]] = [((), root)]
    while stack:
        path, node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[str, int] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue
                key, line = key_node.value, key_node.start_mark.line + 1
                if key in first and key != "<<":
                    raise YamlError(f"{source}, line {line}: duplicate key '{key}' "
                                    f"(first at line {first[key]})")
                first[key] = line
                lines[(*path, key)] = line
                stack.append(((*path, key), value_node))
        elif isinstance(node, yaml.SequenceNode):
            for k, item in enumerate(node.value):
                lines[(*path, k)] = item.start_mark.line + 1
                stack.append(((*path, k), item))
    return lines
