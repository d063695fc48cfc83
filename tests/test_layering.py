"""The runtime is embeddable: it imports nothing of the compiler or its dependencies."""

from __future__ import annotations

import ast
import subprocess
import sys

from .conftest import ROOT

FORBIDDEN = ("lark", "jinja2", "networkx", "z3", "harnessc.dsl", "harnessc.compiler")


def test_runtime_source_imports_no_compiler_dependency() -> None:
    for path in sorted((ROOT / "runtime").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative imports stay inside runtime/
                    assert not (node.module or "").startswith(("dsl", "compiler")), path
                    continue
                names = [node.module or ""]
            for name in names:
                assert not name.startswith(FORBIDDEN), f"{path.name} imports {name}"


def test_importing_the_runtime_loads_no_compiler_module() -> None:
    code = (
        "import sys, harnessc.runtime\n"
        f"bad = [m for m in sys.modules if m.startswith({FORBIDDEN!r})]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
