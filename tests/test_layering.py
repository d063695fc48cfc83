"""Layers: the runtime imports nothing of the compiler, the dsl nothing of the compiler, the
compiler's core only the runtime's model and judge, the runtime's packages one way, and no
module imports itself back (import-linter contracts in pyproject.toml), checked here."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

from .conftest import ROOT

FORBIDDEN = ("lark", "jinja2", "networkx", "z3", "harnessc.dsl", "harnessc.compiler")


def _lint_imports() -> subprocess.CompletedProcess[str]:
    script = ROOT / "scripts" / "package_tree.py"
    command = [sys.executable, str(script), "lint-imports", "--no-logo"]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT)


def test_the_import_contracts_hold() -> None:
    # pyproject.toml's [tool.importlinter]: the runtime imports nothing of the dsl, the compiler
    # or the compiler's libraries; the dsl nothing of the compiler or the runtime; no cycles,
    # type-only imports included. Imports inside functions count (deferred, not absent).
    out = _lint_imports()
    assert out.returncode == 0, out.stdout + out.stderr
    # the contracts read the installed layout: every module of the mapped folders is analysed,
    # not a `harnessc` of one file with every import of a mapped folder unresolved
    [analysed] = re.findall(r"Analyzed (\d+) files", out.stdout)
    sources = [p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py")]
    assert int(analysed) >= len(sources), out.stdout


def test_importing_the_runtime_loads_no_compiler_module() -> None:
    code = (
        "import sys, harnessc.runtime\n"
        f"bad = [m for m in sys.modules if m.startswith({FORBIDDEN!r})]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


# ---------------------------------------------------------------------------------------------
# What a stage reads. Imports inside functions count (they are only deferred, not absent);
# imports under `if TYPE_CHECKING:` do not.

FOLDERS = {"harnessc": "harnessc", "dsl": "harnessc.dsl", "compiler": "harnessc.compiler",
           "runtime": "harnessc.runtime", "stdlib": "harnessc.stdlib"}  # fmt: skip


def _modules() -> dict[str, Path]:
    modules = {}
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = [p for p in path.relative_to(ROOT / folder).with_suffix("").parts]
            modules[".".join([package, *(p for p in parts if p != "__init__")])] = path
    return modules


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The harnessc modules a module imports: `from a import b` reads `a`, and `a.b` if a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".")
                if path.name != "__init__.py":
                    package = package[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, base] if base else package)
            found |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return {target for target in found if target in modules and target != name}


def _under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_codegen_runs_no_analysis() -> None:
    # the analyses are the pipeline's stages (compiler/pipeline.py); codegen only reads them
    modules = _modules()
    runs = ("analyse_policies", "analyse_availability")
    wrong = set()
    for name, path in modules.items():
        if not _under(name, "harnessc.compiler.codegen"):
            continue
        read = _imports(name, path, modules)
        wrong |= {
            f"{name} imports {t}" for t in read if _under(t, "harnessc.compiler.analysis.smt")
        }
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                wrong |= {f"{name} imports z3" for a in node.names if _under(a.name, "z3")}
            elif isinstance(node, ast.ImportFrom):
                if not node.level and _under(node.module or "", "z3"):
                    wrong.add(f"{name} imports z3")
                wrong |= {f"{name} imports {a.name}" for a in node.names if a.name in runs}
    assert wrong == set()
