"""`harnessc.runtime.__all__` is the one list of the runtime's public API: the names it loads
(`_WHERE`), the imports type checkers read, the module's own list of names and every
`from harnessc.runtime import …` in docs/, examples/ and the README follow it."""

from __future__ import annotations

import ast
import importlib.util
import re

import harnessc.runtime as runtime

from .conftest import ROOT


def test_each_name_loads_from_the_module_the_loader_names() -> None:
    assert sorted(runtime._WHERE) == sorted(runtime.__all__)
    for name, module in runtime._WHERE.items():
        assert hasattr(importlib.import_module(f"harnessc.runtime.{module}"), name), name


def test_type_checkers_import_each_name_from_its_module() -> None:
    tree = ast.parse((ROOT / "runtime" / "__init__.py").read_text(encoding="utf-8"))
    [block] = [
        n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    ]
    imported = {
        alias.asname or alias.name: node.module
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert imported == runtime._WHERE


def test_the_module_doc_lists_each_name_once() -> None:
    # each entry reads `NAME, NAME: what they are`, entries apart by `; ` or a new `- `
    declared: list[str] = []
    for entry in (runtime.__doc__ or "").split("\n- ")[1:]:
        for part in " ".join(entry.split()).split("; "):
            names, colon, _ = part.partition(": ")
            if colon and re.fullmatch(r"\w+(, \w+)*", names):
                declared += names.split(", ")
    assert sorted(declared) == sorted(runtime.__all__)


def test_docs_and_examples_import_only_public_names() -> None:
    texts = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "examples").rglob("*")]
    wrong = set()
    for path in texts:
        if path.suffix not in {".md", ".py"}:
            continue
        text = path.read_text(encoding="utf-8")
        for group in re.findall(r"from harnessc\.runtime import (\([^)]*\)|[^\n]+)", text):
            for item in re.sub(r"#[^\n]*", "", group).strip("()").split(","):
                name = item.split(" as ")[0].strip()
                if not name or name in runtime.__all__:
                    continue
                if importlib.util.find_spec(f"harnessc.runtime.{name}") is None:
                    wrong.add(f"{path.relative_to(ROOT)}: {name}")
    assert wrong == set()
