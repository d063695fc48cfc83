"""Semantic tokens over every spec of the repository, whole and cut short at a spread of places
(half typed): pieces in order, none overlapping, none across a line, each a token's part; a
keyword only where the parser reads one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("pygls")

from harnessc.compiler.lsp import tokens
from harnessc.compiler.lsp.positions import Positions
from harnessc.compiler.lsp.workspace import Workspace
from harnessc.dsl.source import Source

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted(
    p
    for p in ROOT.rglob("*.harness")
    if ".venv" not in p.parts and "build" not in p.parts and p.stat().st_size < 200_000
)


def well_formed(found: list[tokens.Piece], text: str) -> None:
    end = 0
    for piece in found:
        assert piece.start >= end and piece.end > piece.start, piece
        assert "\n" not in text[piece.start : piece.end], piece
        assert piece.type in tokens.TYPES
        end = piece.end


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: str(p.relative_to(ROOT)))
def test_tokens_of_every_spec_whole_and_half_typed(spec: Path) -> None:
    text = spec.read_text(encoding="utf-8", errors="replace")
    path = str(spec.resolve())
    specs = Workspace()
    cuts = sorted({len(text), *range(0, len(text), max(1, len(text) // 5))})
    for version, cut in enumerate(cuts):
        written = text[:cut]
        specs.open(path, version, written)
        build = specs.check(path)
        assert build is not None
        module = build.module(path)
        source = module.source if module is not None and module.source is not None else None
        source = source or Source(path, written)
        found = tokens.pieces(build, source)
        well_formed(found, source.text)
        assert len(tokens.encode(found, source, Positions())) == 5 * len(found)


def test_a_word_is_a_keyword_only_where_the_grammar_reads_one() -> None:
    text = 'tool t {\n  summary "s"\n  use_when "u"\n  input { default: string }\n}\n'
    found = tokens.pieces(None, Source("t.harness", text))
    kinds = {text[p.start : p.end]: p.type for p in found}
    assert kinds["tool"] == "keyword" and kinds["default"] == "property"


def test_after_a_syntax_error_the_next_declaration_is_coloured() -> None:
    text = "tool t {\n  summary \n\npolicy p {\n  default deny\n}\n"
    found = tokens.pieces(None, Source("t.harness", text))
    words = [(text[p.start : p.end], p.type) for p in found]
    assert ("policy", "keyword") in words and ("deny", "keyword") in words


def test_a_delta_applied_gives_the_new_tokens() -> None:
    previous = [0, 1, 2, 3, 0, 1, 0, 4, 5, 0, 2, 2, 1, 0, 0]
    current = [0, 1, 2, 3, 0, 0, 9, 9, 9, 9, 1, 0, 4, 5, 0, 2, 2, 1, 0, 0]
    (edit,) = tokens.delta(previous, current)
    patched = list(previous)
    patched[edit.start : edit.start + edit.delete_count] = edit.data or []
    assert patched == current and edit.delete_count <= 2
    assert tokens.delta(current, current) == []


def test_the_vscode_extension_declares_each_custom_type_and_its_standard_type() -> None:
    manifest = json.loads((ROOT / "editors" / "vscode" / "package.json").read_text("utf-8"))
    declared = {t["id"]: t["superType"] for t in manifest["contributes"]["semanticTokenTypes"]}
    assert declared == tokens.FALLBACK
