"""Quick fixes for the diagnostics that carry one: a "did you mean" suggestion (H201, H203,
H207 and the syntax errors' keyword suggestions: the primary span replaced by it), an unclosed
block (H102: its `}` added where the next declaration begins or the file ends) and a DENY without
a reason (H330: a `reason "…"` added to the rule or risk entry), and a DENY or ASK that reads a
value that may be absent (L004: each comparison that reads it guarded with `has`, in
parentheses, which the formatter drops where precedence does not need them)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from harnessc.dsl import syntax as s
from harnessc.dsl.parser import parse_source
from harnessc.dsl.source import Source
from lsprotocol import types as lsp

from ..resolve import BUILTIN_ROOTS
from .convert import SOURCE
from .outline import walk
from .positions import Positions

_DID_YOU_MEAN = re.compile(r"did you mean `([^`]+)`\?")
_UNGUARDED = re.compile(r"reads `([^`]+)` without a `has` guard")
REASON = 'reason "…"'


def fixes(
    uri: str, source: Source, diagnostics: Sequence[lsp.Diagnostic], positions: Positions
) -> list[lsp.CodeAction]:
    found: list[lsp.CodeAction] = []
    for diagnostic in diagnostics:
        if diagnostic.source != SOURCE:
            continue
        for title, edits in _edits(source, diagnostic, positions):
            found.append(
                lsp.CodeAction(
                    title=title,
                    kind=lsp.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    is_preferred=True,
                    edit=lsp.WorkspaceEdit(changes={uri: edits}),
                )
            )
    return found


def _help(diagnostic: lsp.Diagnostic) -> str:
    data = diagnostic.data if isinstance(diagnostic.data, dict) else {}
    return str(data.get("help") or "")


def _edits(
    source: Source, diagnostic: lsp.Diagnostic, positions: Positions
) -> Iterator[tuple[str, list[lsp.TextEdit]]]:
    start = positions.offset(source, diagnostic.range.start)
    end = positions.offset(source, diagnostic.range.end)
    match = _DID_YOU_MEAN.search(_help(diagnostic))
    if match is not None and end > start:
        written = source.text[start:end]
        new = match.group(1)
        if len(written) > 1 and written[0] == written[-1] == '"':
            new = f'"{new}"'
        yield f"replace with `{match.group(1)}`", [lsp.TextEdit(diagnostic.range, new)]
    if diagnostic.code == "H102":
        edit = _close_block(source, diagnostic, positions)
        if edit is not None:
            yield "add the missing `}`", [edit]
    if diagnostic.code == "H330":
        edit = _add_reason(source, start, positions)
        if edit is not None:
            yield f"add `{REASON}`", [edit]
    unguarded = _UNGUARDED.search(diagnostic.message)
    if diagnostic.code == "L004" and unguarded is not None:
        path = unguarded.group(1)
        edits = _guard(source, path, start, end, positions)
        if edits:
            owner, _, field = path.rpartition(".")
            yield f"guard with `{owner} has {field}`", edits


def _indent(text: str) -> str:
    return text[: len(text) - len(text.lstrip())]


def _close_block(
    source: Source, diagnostic: lsp.Diagnostic, positions: Positions
) -> lsp.TextEdit | None:
    related = diagnostic.related_information or []
    if any("closes" in r.message for r in related):
        return None  # a `}` went to the wrong block: where the missing one goes is a choice
    where = next((r for r in related if r.message.endswith("here")), None)
    if where is None:
        return None
    opened_line = source.line_text(diagnostic.range.start.line + 1)
    close = _indent(opened_line) + "}\n"
    if where.message.startswith("the file ends"):
        end = positions.position(source, len(source.text))
        text = close if source.text.endswith("\n") or not source.text else "\n" + close
        return lsp.TextEdit(lsp.Range(end, end), text)
    line = where.location.range.start.line
    at = lsp.Position(line, 0)
    return lsp.TextEdit(lsp.Range(at, at), close + "\n")


def _add_reason(source: Source, offset: int, positions: Positions) -> lsp.TextEdit | None:
    """`reason "…"` in the options of the rule or risk entry written at `offset`."""
    parsed = parse_source(source)
    for item in parsed.module.items:
        if not item.span.start <= offset <= item.span.end:
            continue
        inner: tuple[object, ...] = ()
        if isinstance(item, s.Policy):
            inner = item.items
        elif isinstance(item, s.RiskTable):
            inner = item.entries
        for node in inner:
            if isinstance(node, s.Rule | s.RiskEntry | s.Default) and (
                node.span.start <= offset <= node.span.end
            ):
                return _reason_edit(source, node, positions)
    return None


def _reason_edit(
    source: Source, node: s.Rule | s.RiskEntry | s.Default, positions: Positions
) -> lsp.TextEdit:
    indent = _indent(source.line_text(node.span.line))
    if node.options is None:
        at = positions.position(source, node.span.end)
        return lsp.TextEdit(lsp.Range(at, at), f" {{\n{indent}  {REASON}\n{indent}}}")
    close = node.span.end - 1  # the options' `}`
    if source.line_text(node.span.end_line).strip() == "}":
        at = lsp.Position(node.span.end_line - 1, 0)
        return lsp.TextEdit(lsp.Range(at, at), f"{indent}  {REASON}\n")
    point = positions.position(source, close)
    return lsp.TextEdit(lsp.Range(point, point), f" {REASON} ")


def _guard(
    source: Source, path: str, start: int, end: int, positions: Positions
) -> list[lsp.TextEdit]:
    """`(OWNER has FIELD and …)` around each comparison between `start` and `end` that reads
    `path` (a path of a built-in root: a fact's name is not a path `has` can test)."""
    owner, _, field = path.rpartition(".")
    if not owner or owner.split(".", 1)[0] not in BUILTIN_ROOTS:
        return []
    parsed = parse_source(source)
    inside = [
        node
        for node in walk(parsed.module.items)
        if isinstance(node, s.Compare | s.Path | s.FuncCall | s.Quantified)
        and start <= node.span.start
        and node.span.end <= end
    ]
    reading = [
        node
        for node in inside
        if isinstance(node, s.Compare)
        and node.op != "has"
        and any(isinstance(side, s.Path) and side.text == path for side in (node.left, node.right))
    ]
    if not reading:  # a bare path as a condition (`when args.force`), not an operand
        operands = [n.span for n in inside if not isinstance(n, s.Path)]
        reading = [
            node
            for node in inside
            if isinstance(node, s.Path)
            and node.text == path
            and not any(o.start <= node.span.start and node.span.end <= o.end for o in operands)
        ]
    return [
        lsp.TextEdit(positions.range(node.span), f"({owner} has {field} and {node.span.text})")
        for node in reading
    ]
