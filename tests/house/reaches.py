"""Private-name reaches across modules, read from the source with ast.

A module may use its own `_private` names and its own classes' `_fields`; it reaches across when
it imports a `_name` from another harnessc module, or reads or writes `x._name` where no class or
function of its own defines `_name` (so `x` is another module's object). Not reaches: names of
the form `__dunder__` and enum's `_sunder_`, namedtuple's public `_replace`/`_asdict`/`_fields`/
`_make`, and a package's own `_module` imported by a module of that package (the `_` says "not
for other packages").
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

FOLDERS = {"dsl": "harnessc.dsl", "compiler": "harnessc.compiler", "runtime": "harnessc.runtime"}
PUBLIC_BY_CONVENTION = {"_replace", "_asdict", "_fields", "_make", "_field_defaults"}


def _private(name: str) -> bool:
    return (
        name.startswith("_")
        and not name.endswith("_")  # `__dunder__`, and enum's `_sunder_` (`_value_`)
        and name not in PUBLIC_BY_CONVENTION
    )


def _modules(root: Path) -> dict[str, Path]:
    modules = {}
    for folder, package in FOLDERS.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = [p for p in path.relative_to(root / folder).with_suffix("").parts]
            modules[".".join([package, *(p for p in parts if p != "__init__")])] = path
    return modules


def _own_names(tree: ast.Module) -> set[str]:
    """Every name this module defines: functions, classes, assigned names and `self.x = …`."""
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            own.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                own.add(node.attr)
        elif isinstance(node, ast.alias):
            own.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.arg):
            own.add(node.arg)
    return own


def reaches(root: Path) -> Counter[str]:
    """Each reach as `path: imports NAME from MODULE` or `path: reaches .NAME`, counted.
    Reaches into a third-party object (`os._exit`) count too: they are as brittle."""
    modules = _modules(root)
    found: Counter[str] = Counter()
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        shown = path.relative_to(root).as_posix()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        imported_private: set[str] = set()
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, base] if base else parts)
            if not base.startswith("harnessc."):
                continue
            for alias in node.names:
                if not _private(alias.name):
                    continue
                imported_private.add(alias.asname or alias.name)
                if f"{base}.{alias.name}" in modules and base == package:
                    continue  # a private module of the importer's own package
                found[f"{shown}: imports {alias.name} from {base}"] += 1
        own = _own_names(tree) - imported_private
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            if node.attr not in own:
                found[f"{shown}: reaches .{node.attr}"] += 1
    return found
