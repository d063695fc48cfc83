"""Semantic tokens: colours that follow meaning. Words are typed as the parser types them (a
keyword only where the grammar takes one) and names as the resolver bound them (a tool, a fact,
a data label, a rule, a policy…); strings, numbers, durations, operators and comments by their
token. The legend's custom types name what the language means; each has a standard type it
falls back to (`FALLBACK`), which editors that know only the standard types colour."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from harnessc.dsl import syntax as s
from harnessc.dsl.builder import engine
from harnessc.dsl.lexer import Tok
from harnessc.dsl.parser import source_tokens
from harnessc.dsl.source import Source, Span
from harnessc.runtime.model import BUILTIN_LABELS, HISTORY_FUNCS
from lsprotocol import types as lsp

from ..kinds import BUILTIN_ROOTS
from .outline import walk
from .positions import Positions, line_starts
from .rename import name_part
from .workspace import Build

FALLBACK = {
    "tool": "function",
    "fact": "variable",
    "label": "enumMember",
    "sessionTerm": "macro",
    "rule": "decorator",
    "policy": "class",
    "surface": "interface",
    "step": "variable",
    "duration": "number",
}
"""Each custom token type, and the standard type it is a kind of (VS Code's `superType`)."""
TYPES = [
    *FALLBACK,
    "keyword",
    "string",
    "number",
    "operator",
    "comment",
    "namespace",
    "class",
    "function",
    "method",
    "variable",
    "property",
    "type",
]
"""The legend's token types, by index."""
MODIFIERS = ["declaration", "defaultLibrary"]
_INDEX = {name: index for index, name in enumerate(TYPES)}
_DECLARATION, _LIBRARY = 1, 2

_KIND_TYPE = {
    "tool": "tool",
    "fact": "fact",
    "label": "label",
    "rule": "rule",
    "policy": "policy",
    "surface": "surface",
    "step": "step",
    "mcp": "namespace",
    "connection": "class",
    "runtime": "class",
    "risk_table": "class",
    "agent": "class",
    "workflow": "class",
    "skill": "class",
    "subagent": "class",
    "test": "class",
    "operation": "method",
    "var": "variable",
}
_OPERATORS = {"==", "!=", "<=", ">=", "<", ">"}
_LITERAL = {"STRING": "string", "INT": "number", "FLOAT": "number", "DURATION": "duration"}


@dataclass(frozen=True)
class Piece:
    start: int
    end: int
    type: str
    modifiers: int = 0


def pieces(build: Build | None, source: Source) -> list[Piece]:
    """The coloured pieces of `source`, in order, none overlapping: its tokens, each name
    split where the resolver bound a part of it (`lib` and `release` in `lib.release`)."""
    named = _named(build, source) if build is not None else {}
    keywords = set(engine().keyword_types.values())
    operators = {
        t.name for t in engine().punct_terms if getattr(t.pattern, "value", None) in _OPERATORS
    }
    found: list[Piece] = []
    for token in source_tokens(source):
        kind = token.type
        if kind == "COMMENT":
            found.append(Piece(token.start_pos, token.end_pos, "comment"))
        elif kind in keywords:
            found.append(Piece(token.start_pos, token.end_pos, "keyword"))
        elif kind in operators:
            found.append(Piece(token.start_pos, token.end_pos, "operator"))
        elif kind == "STRING" and token.start_pos not in named:
            found.append(Piece(token.start_pos, token.end_pos, "string"))
        elif kind in _LITERAL and kind != "STRING":
            found.append(Piece(token.start_pos, token.end_pos, _LITERAL[kind]))
        else:
            found.extend(_name_pieces(token, named))
    return found


def _name_pieces(token: Tok, named: dict[int, Piece]) -> Iterator[Piece]:
    """A name token's pieces: what the resolver bound in it, then the rest of a dotted path as
    properties (`environment` in `args.environment`); a key (`timeout:`) is a property. A
    name nothing bound is left to the editor's grammar."""
    text, base = str(token), token.start_pos
    pos = base
    covered = token.type == "KEY"
    while pos < token.end_pos:
        piece = named.get(pos)
        if piece is not None and piece.end <= token.end_pos:
            yield piece
            covered = True
            pos = piece.end
            continue
        if not covered:
            return
        if text[pos - base] == ".":
            pos += 1
            continue
        dot = text.find(".", pos - base)
        end = token.end_pos if dot < 0 else base + dot
        yield Piece(pos, end, "property")
        pos = end


def _named(build: Build, source: Source) -> dict[int, Piece]:
    """The pieces the build knows the meaning of in `source`, by start offset."""
    resolution = build.result.resolution
    if resolution is None:
        return {}
    named: dict[int, Piece] = {}

    def add(span: Span, type_: str, modifiers: int = 0) -> None:
        if span.source is source and span.end > span.start:
            named.setdefault(span.start, Piece(span.start, span.end, type_, modifiers))

    module = next((m for m in resolution.modules if m.source is source), None)
    if module is None:
        return {}
    for span, symbol in resolution.references.items():
        if span.source is not source:
            continue
        library = _LIBRARY if symbol.module.is_std else 0
        part = name_part(span, symbol)
        if part is None:
            continue
        if part.start > span.start:  # `lib.release`: the import's name, then the name
            add(Span(source, span.start, part.start - 1), "namespace")
        add(part, _KIND_TYPE.get(symbol.kind, "variable"), library)
    for span in resolution.module_globs:
        if span.source is source:
            head = span.text.rsplit(".", 1)[0]
            add(Span(source, span.start, span.start + len(head)), "namespace")
    for kinds in (resolution.globals, *resolution.scoped.values()):
        for table in kinds.values():
            for symbol in table.values():
                if symbol.module is module:
                    add(symbol.span, _KIND_TYPE.get(symbol.kind, "variable"), _DECLARATION)
    for table in resolution.locals.values():
        for symbol in table.values():
            if symbol.module is module:
                add(symbol.span, _KIND_TYPE.get(symbol.kind, "variable"), _DECLARATION)
    for binding in module.imports:
        if binding.node.alias is not None:
            add(binding.node.alias.span, "namespace", _DECLARATION)
    for node in walk(module.syntax.items):
        _syntax_piece(node, add)
    return named


def _syntax_piece(node: object, add: Callable[[Span, str, int], None]) -> None:
    """What the syntax tree alone says a name is: a session term (`count(`), a function, a
    built-in root (`args`), a built-in label (`secret`), a type in a schema."""
    if isinstance(node, s.FuncCall):
        name = node.name
        if name.text in HISTORY_FUNCS:
            add(name.span, "sessionTerm", _LIBRARY)
        else:
            add(name.span, "function", _LIBRARY)
    elif isinstance(node, s.Path):
        first = node.parts[0]
        if first in BUILTIN_ROOTS or first in ("result", "input"):
            start = node.span.start
            add(Span(node.span.source, start, start + len(first)), "variable", _LIBRARY)
    elif isinstance(node, s.Provenance) and node.label is not None:
        if node.label.text in BUILTIN_LABELS:
            add(node.label.span, "label", _LIBRARY)
    elif isinstance(node, s.Constraint) and isinstance(node.value, s.Name):
        if node.kind == "label" and node.value.text in BUILTIN_LABELS:
            add(node.value.span, "label", _LIBRARY)
    elif isinstance(node, s.TypeRef) and node.span.text.startswith(node.name):
        start = node.span.start
        add(Span(node.span.source, start, start + len(node.name)), "type", _LIBRARY)


def encode(found: list[Piece], source: Source, positions: Positions) -> list[int]:
    """The protocol's relative encoding: per piece, its line and start relative to the
    previous piece's, its length, type and modifiers, in the client's position units."""
    data: list[int] = []
    starts = line_starts(source.text)
    last_line = last_start = 0
    line = 0
    for piece in found:
        while line + 1 < len(starts) and starts[line + 1] <= piece.start:
            line += 1
        start = positions.units(source.text[starts[line] : piece.start])
        length = positions.units(source.text[piece.start : piece.end])
        delta_line = line - last_line
        delta_start = start - last_start if delta_line == 0 else start
        data += [delta_line, delta_start, length, _INDEX[piece.type], piece.modifiers]
        last_line, last_start = line, start
    return data


def delta(previous: list[int], current: list[int]) -> list[lsp.SemanticTokensEdit]:
    """One edit turning `previous` into `current`: what lies between their common start and
    their common end (linear in their length); none when they are the same."""
    if previous == current:
        return []
    head = 0
    for a, b in zip(previous, current, strict=False):
        if a != b:
            break
        head += 1
    tail = 0
    limit = min(len(previous), len(current)) - head
    for a, b in zip(reversed(previous), reversed(current), strict=False):
        if tail >= limit or a != b:
            break
        tail += 1
    return [
        lsp.SemanticTokensEdit(
            start=head,
            delete_count=len(previous) - head - tail,
            data=current[head : len(current) - tail],
        )
    ]


_results = itertools.count(1)


def result_id() -> str:
    return str(next(_results))
