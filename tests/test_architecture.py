"""docs/architecture.md as tests: imports flow strictly downward through the layers, and
no module or function outgrows what one reader holds in mind."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mipsched"

#: The layers from the bottom up (docs/architecture.md); a module may import only from
#: its own layer or those below it. Keys: module paths relative to mipsched/, a folder
#: standing for everything in it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__init__", "errors", "atomic", "strict", "jsonread", "yamlsrc", "isolate", "clock"),
    ("workload",),
    ("hw",),
    ("cost",),
    ("schedule",),
    ("evaluate", "sim", "dlsa_starts"),
    ("core",),
    ("formulations",),
    ("heuristics",),
    ("tiled",),
    ("solve",),
    ("report",),
    ("explore",),
    ("sweep",),
    ("cli", "cli_common", "cli_sweep", "cli_explore", "cli_tiled"),
)

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60


def _layer(module: str) -> int:
    """The layer of `module` (dotted, without the leading 'mipsched.')."""
    head = module.split(".")[0] if module else "__init__"
    for rank, names in enumerate(LAYERS):
        if head in names:
            return rank
    raise AssertionError(f"module '{module}' is in no layer: add it to LAYERS and "
                         "docs/architecture.md")


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imports(path: Path) -> set[str]:
    """The mipsched modules `path` imports, without the leading 'mipsched.'."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {n.removeprefix("mipsched").removeprefix(".") for n in names
            if n == "mipsched" or n.startswith("mipsched.")}


def test_every_import_flows_downward() -> None:
    upward = [f"{module} (layer {_layer(module)}) imports {target} (layer {_layer(target)})"
              for module, path in sorted(_modules().items())
              for target in sorted(_imports(path)) if _layer(target) > _layer(module)]
    assert upward == []


def test_the_layer_check_sees_an_upward_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from mipsched.solve import solve\nimport mipsched.cli\n")
    assert _imports(module) == {"solve", "cli"}
    assert _layer("solve") > _layer("formulations.lfa")


def test_no_module_is_too_long() -> None:
    long = {name: n for name, path in _modules().items()
            if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_no_function_is_too_long() -> None:
    long = []
    for name, path in sorted(_modules().items()):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{name}.{node.name}: {lines} lines")
    assert long == []


def _undocumented(node: ast.AST, prefix: str) -> list[str]:
    """Public functions and methods below `node` without a docstring, dotted names."""
    found = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.ClassDef):
            found += _undocumented(child, f"{prefix}{child.name}.")
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) and \
                not child.name.startswith("_") and ast.get_docstring(child) is None:
            found.append(f"{prefix}{child.name}")
    return found


def test_every_public_function_has_a_docstring() -> None:
    missing = [f"{name}.{function}" for name, path in sorted(_modules().items())
               for function in _undocumented(ast.parse(path.read_text()), "")]
    assert missing == []
