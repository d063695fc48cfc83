"""Rename every name of the examples that a rename may change, apply its edits and check again:
the diagnostics are those of the unrenamed example, so every reference followed the name (a
reference missed would be unknown, a text edited wrongly would not parse)."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("pygls")

from harnessc.compiler.lsp import navigate, rename
from harnessc.compiler.lsp.workspace import Build, Workspace
from harnessc.compiler.testing import rule_names

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = [
    ROOT / "examples" / "remediation" / "remediation.harness",
    ROOT / "examples" / "workspace-agent" / "workspace.harness",
]
NEW = "zz_renamed"


def checked(path: str, texts: dict[str, str]) -> Build:
    specs = Workspace()
    for file, text in texts.items():
        specs.open(file, 1, text)
    if path not in texts:
        specs.open(path, 1, Path(path).read_text(encoding="utf-8"))
    build = specs.check(path)
    assert build is not None
    return build


def codes(build: Build) -> Counter[str]:
    return Counter(d.code for d in build.result.diagnostics)


def after(edits: list[rename.Edit]) -> dict[str, str]:
    """Each edited file's text with its edits applied."""
    texts: dict[str, str] = {}
    for path in {e.path for e in edits}:
        mine = sorted((e for e in edits if e.path == path), key=lambda e: -e.span.start)
        text = mine[0].span.source.text
        for e in mine:
            text = text[: e.span.start] + e.text + text[e.span.end :]
        texts[path] = text
    return texts


def unmatched(build: Build) -> list[str]:
    """The `expect … rule NAME` of the build's tests that name no rule of its model."""
    model = build.result.model
    assert model is not None
    names = {n for p in model.policies.values() for r in p.rules for n in rule_names(r)}
    return sorted(
        t.expect.rule
        for t in model.tests.values()
        if t.expect is not None and t.expect.rule is not None and t.expect.rule not in names
    )


def test_renaming_a_rule_renames_what_tests_expect_of_it() -> None:
    path = os.path.realpath(EXAMPLES[0])
    build = checked(path, {})
    rule = next(
        s for s in navigate.symbols(build) if s.kind == "rule" and s.name == "untrusted_patch"
    )
    edits = rename.edits(
        [build], build, rename.target_at(build, rule.span.source, rule.span.start), "tainted_patch"
    )
    text = after(edits)[path]
    assert "expect deny rule tainted_patch" in text and "untrusted_patch" not in text


def targets(build: Build) -> list[rename.Target]:
    """Every name of the build's own files that a rename may change, and every import alias."""
    found: list[rename.Target] = []
    for symbol in navigate.symbols(build):
        if symbol.module.is_std:
            continue
        try:
            found.append(rename.target_at(build, symbol.span.source, symbol.span.start))
        except rename.Refused:
            continue
    resolution = build.result.resolution
    assert resolution is not None
    for module in resolution.modules:
        for binding in module.imports:
            alias = binding.node.alias
            if alias is not None and module.source is not None:
                found.append(rename.target_at(build, module.source, alias.span.start))
    return found


def test_every_rename_of_an_example_keeps_its_meaning() -> None:
    kinds: set[str] = set()
    for example in EXAMPLES:
        path = os.path.realpath(example)
        build = checked(path, {})
        before = codes(build)
        for target in targets(build):
            kind = target.symbol.kind if target.symbol is not None else "import"
            # a tool keeps its prefix: what a glob (`change.*`) selects, it selects still
            new = f"{target.name}_{NEW}" if kind == "tool" else NEW
            edits = rename.edits([build], build, target, new)
            again = checked(path, after(edits))
            kinds.add(kind)
            assert codes(again) == before, f"renaming {kind} `{target.name}` in {example.name}"
            assert unmatched(again) == unmatched(build), f"`expect rule` after `{target.name}`"
            found = [s for s in navigate.symbols(again) if s.name == new]
            if target.symbol is not None:
                assert [s.kind for s in found] == [kind]
    assert {"tool", "fact", "policy", "surface", "step", "agent", "import"} <= kinds


def test_kinds_a_rename_does_not_follow_are_refused_with_the_reason() -> None:
    path = os.path.realpath(EXAMPLES[0])
    build = checked(path, {})
    refused: dict[str, str] = {}
    for symbol in navigate.symbols(build):
        if not symbol.module.is_std:
            try:
                rename.target_at(build, symbol.span.source, symbol.span.start)
            except rename.Refused as why:
                refused.setdefault(symbol.kind, str(why))
    assert "part of the id of each of its tools" in refused["mcp"]
    assert "`op` argument" in refused["operation"]
    assert "named by its MCP server's tool" in refused["tool"]


def test_a_rename_that_would_change_what_a_glob_selects_is_refused() -> None:
    path = os.path.realpath(EXAMPLES[0])
    build = checked(path, {})
    tool = next(s for s in navigate.symbols(build) if s.name == "change.get")
    target = rename.target_at(build, tool.span.source, tool.span.start)
    with pytest.raises(rename.Refused, match=r"`change\.\*` selects `change\.get` and would not"):
        rename.edits([build], build, target, "fetch_change")
    deploy = next(s for s in navigate.symbols(build) if s.name == "production.deploy")
    other = rename.target_at(build, deploy.span.source, deploy.span.start)
    with pytest.raises(rename.Refused, match=r"does not select `production\.deploy` and would"):
        rename.edits([build], build, other, "change.ship")  # `deny change.*` would take it
    assert rename.edits([build], build, target, "change.fetch")


def test_python_bindings_of_a_tool_id(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(
        "@h.implement('deploy')\n"
        "def run(args): ...\n"
        "h.bind('deploy', run)\n"
        "h.preview_with('deploy', show)\n"
        "h.bind('deploy2', run)\n"
        "print('deploy')\n",
        encoding="utf-8",
    )
    (tmp_path / "broken.py").write_text("h.bind('deploy', run\n", encoding="utf-8")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "lib.py").write_text("h.bind('deploy', run)\n", encoding="utf-8")
    found = rename.ExecutorIndex().bindings([str(tmp_path)], "deploy")
    assert [(Path(b.path).name, b.line, b.call) for b in found] == [
        ("app.py", 1, "implement"),
        ("app.py", 3, "bind"),
        ("app.py", 4, "preview_with"),
    ]
