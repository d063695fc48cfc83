"""Every `harness` block of every Markdown file in the repository is a spec a reader can copy:
it checks without errors and is in canonical form (`harnessc check` and `harnessc fmt --check`).

A block that is not meant to be either says so after the language word of its fence
(CONTRIBUTING.md, "Specs in Markdown"), and the test holds it to that word:

- ```` ```harness partial ```` — a fragment (a rule, a block shown alone): it does not check
  on its own, so it is not checked or formatted, and it must indeed fail to check (otherwise
  drop the word);
- ```` ```harness wrong ```` — a spec with a mistake on purpose: it must fail to check;
- ```` ```harness unformatted ```` — a spec laid out by hand to show something the formatter
  would change (a string split over lines): it must check clean, and the formatter must
  indeed change it.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from harnessc.compiler.pipeline import check
from harnessc.dsl.diagnostics import Severity
from harnessc.dsl.printer import format_source
from harnessc.dsl.render_formats import render
from harnessc.dsl.source import Source

from .conftest import ROOT

MARKERS = {
    "partial": "a fragment that does not check on its own",
    "wrong": "a spec with a mistake on purpose",
    "unformatted": "a spec laid out by hand, not in canonical form",
}

_OPEN_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`]*?)[ \t]*$")


@dataclass(frozen=True)
class SpecBlock:
    line: int  # of the opening fence, 1-based
    markers: tuple[str, ...]  # the words after the language in the fence's info string
    body: str


def spec_blocks(text: str) -> list[SpecBlock]:
    """The `harness` fenced blocks of a Markdown text."""
    return fenced_blocks(text, "harness")


def fenced_blocks(text: str, language: str) -> list[SpecBlock]:
    """The fenced blocks of `language` in a Markdown text. Every fence is tracked, so a fence
    shown inside a longer fence is not a block."""
    blocks: list[SpecBlock] = []
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        m = _OPEN_FENCE.match(lines[i].rstrip("\n"))
        if m is None:
            i += 1
            continue
        fence = m.group("fence")
        closing = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        j = i + 1
        while j < len(lines) and not closing.match(lines[j].rstrip("\n")):
            j += 1
        words = m.group("info").split()
        if words[:1] == [language]:
            blocks.append(SpecBlock(i + 1, tuple(words[1:]), "".join(lines[i + 1 : j])))
        i = j + 1
    return blocks


def markdown_files() -> list[Path]:
    """Every Markdown file the repository tracks (what a checkout has, not a venv's)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--", "*.md"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
        files = [ROOT / name for name in listed.split("\0") if name]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout
        skip = {".venv", "node_modules", "build"}
        files = [p for p in ROOT.rglob("*.md") if not skip & set(p.relative_to(ROOT).parts)]
    return sorted(p for p in files if p.is_file())


def _params() -> list[Any]:
    params = []
    for path in markdown_files():
        rel = path.relative_to(ROOT).as_posix()
        for block in spec_blocks(path.read_text(encoding="utf-8")):
            params.append(pytest.param(rel, block, id=f"{rel}:{block.line}"))
    return params


BLOCKS = _params()


def _errors(body: str, tmp_path: Path, name: str) -> list[Any]:
    path = tmp_path / f"{re.sub(r'[^A-Za-z0-9]+', '_', name).strip('_')}.harness"
    path.write_text(body, encoding="utf-8")
    return [d for d in check([path]).diagnostics if d.severity is Severity.ERROR]


def _formatted(body: str) -> str | None:
    return format_source(Source("block.harness", body)).text


def test_there_are_blocks_in_the_readme_and_the_docs() -> None:
    docs = {doc for doc, _ in (p.values for p in BLOCKS)}
    assert {"README.md", "docs/language.md"} <= docs


@pytest.mark.parametrize(("doc", "block"), BLOCKS)
def test_each_spec_block_checks_and_is_canonical(
    doc: str, block: SpecBlock, tmp_path: Path
) -> None:
    unknown = set(block.markers) - MARKERS.keys()
    assert not unknown, f"{doc}:{block.line}: unknown marker {sorted(unknown)}; use {MARKERS}"
    errors = _errors(block.body, tmp_path, f"{doc}-{block.line}")
    if "partial" in block.markers or "wrong" in block.markers:
        assert errors, f"{doc}:{block.line} checks clean: drop its `partial`/`wrong` marker"
        return
    assert not errors, f"{doc}:{block.line} does not check:\n" + render(errors, "plain")
    formatted = _formatted(block.body)
    assert formatted is not None
    if "unformatted" in block.markers:
        assert formatted != block.body, f"{doc}:{block.line} is canonical: drop `unformatted`"
    else:
        assert formatted == block.body, (
            f"{doc}:{block.line} is not in canonical form; `harnessc fmt` writes:\n{formatted}"
        )


def test_a_block_out_of_canonical_form_is_caught() -> None:
    """The check can fail: the README's old quick-start layout is not canonical."""
    body = 'tool t {\n  summary "t"\n  effects read\n  input { a: string, b: int }\n}\n'
    assert _formatted(body) != body


def test_the_markers_are_read_from_the_fence() -> None:
    text = (
        "```harness\nA\n```\n\n```harness partial\nB\n```\n\n"
        "````text\n```harness\nC\n```\n````\n"  # a fence shown inside a longer one
    )
    assert spec_blocks(text) == [SpecBlock(1, (), "A\n"), SpecBlock(5, ("partial",), "B\n")]
