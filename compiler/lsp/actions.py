"""Quick fixes for the diagnostics that carry one: a "did you mean" suggestion (H201, H203,
H207 and the syntax errors' keyword suggestions: the primary span replaced by it), an unclosed
block (H102: its `}` added where the next declaration begins or the file ends, or before the
`}` an inner block took from the block around it), a DENY without
a reason or an ASK without an approver (H330, H329: `reason "…"` or `approver role "…"` added to
the rule, default or risk entry), a tool without a summary or `use_when` (L013, L014: the line
added), an unused import (H205: removed), a module glob of a module not imported (H201: the
`import` added), and a DENY or ASK that reads a
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
_ADD_IMPORT = re.compile(r"^add `(import [^`]+)`$")
REASON = 'reason "…"'
OPTIONS = {"H330": REASON, "H329": 'approver role "…"'}
"""The option each code's fix adds to a rule, a default or a risk entry."""
TOOL_LINES = {"L013": 'summary "…"', "L014": 'use_when "…"'}
"""The line each code's fix adds to a tool."""


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
    option = OPTIONS.get(str(diagnostic.code))
    if option is not None:
        edit = _add_option(source, start, option, positions)
        if edit is not None:
            yield f"add `{option}`", [edit]
    line = TOOL_LINES.get(str(diagnostic.code))
    if line is not None:
        edit = _add_tool_line(source, start, line)
        if edit is not None:
            yield f"add `{line}`", [edit]
    if diagnostic.code == "H205":
        first, last = diagnostic.range.start.line, diagnostic.range.end.line
        whole = lsp.Range(lsp.Position(first, 0), lsp.Position(last + 1, 0))
        yield "remove the import", [lsp.TextEdit(whole, "")]
    wanted = _ADD_IMPORT.match(_help(diagnostic))
    if wanted is not None:
        yield f"add `{wanted.group(1)}`", [_add_import(source, wanted.group(1))]
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
    opened_line = source.line_text(diagnostic.range.start.line + 1)
    close = _indent(opened_line) + "}\n"
    misplaced = next((r for r in related if " closes " in r.message), None)
    if misplaced is not None:
        # the block left open is an inner one, whose `}` went to the block around it: its own
        # `}` goes before that one, at its indentation
        at = lsp.Position(misplaced.location.range.start.line, 0)
        return lsp.TextEdit(lsp.Range(at, at), close)
    where = next((r for r in related if r.message.endswith("here")), None)
    if where is None:
        return None
    if where.message.startswith("the file ends"):
        end = positions.position(source, len(source.text))
        text = close if source.text.endswith("\n") or not source.text else "\n" + close
        return lsp.TextEdit(lsp.Range(end, end), text)
    line = where.location.range.start.line
    at = lsp.Position(line, 0)
    return lsp.TextEdit(lsp.Range(at, at), close + "\n")


def _add_option(
    source: Source, offset: int, option: str, positions: Positions
) -> lsp.TextEdit | None:
    """`option` in the options of the rule, default or risk entry written at `offset`."""
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
                return _option_edit(source, node, option, positions)
    return None


def _option_edit(
    source: Source, node: s.Rule | s.RiskEntry | s.Default, option: str, positions: Positions
) -> lsp.TextEdit:
    indent = _indent(source.line_text(node.span.line))
    if node.options is None:
        at = positions.position(source, node.span.end)
        return lsp.TextEdit(lsp.Range(at, at), f" {{\n{indent}  {option}\n{indent}}}")
    close = node.span.end - 1  # the options' `}`
    if source.line_text(node.span.end_line).strip() == "}":
        at = lsp.Position(node.span.end_line - 1, 0)
        return lsp.TextEdit(lsp.Range(at, at), f"{indent}  {option}\n")
    point = positions.position(source, close)
    return lsp.TextEdit(lsp.Range(point, point), f"; {option} ")


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
    reading: list[s.Compare | s.Path] = [
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


def _add_tool_line(source: Source, offset: int, line: str) -> lsp.TextEdit | None:
    """`line` in the block of the tool named at `offset`: after its summary, else first."""
    parsed = parse_source(source)
    for node in walk(parsed.module.items):
        if not (isinstance(node, s.Tool) and node.name.span.start <= offset <= node.name.span.end):
            continue
        summary = next(
            (i for i in node.items if isinstance(i, s.Attr) and i.key == "summary"), None
        )
        if summary is not None:
            after = summary.span.end_line
            indent = _indent(source.line_text(summary.span.line))
        else:
            brace = source.text.find("{", node.name.span.end)
            after, _ = source.location(brace)
            if brace < 0 or source.text[brace + 1 :].split("\n", 1)[0].split("#", 1)[0].strip():
                return None  # a block on one line: where the new line goes is a choice
            indent = _indent(source.line_text(node.name.span.line)) + "  "
        at = lsp.Position(after, 0)
        return lsp.TextEdit(lsp.Range(at, at), f"{indent}{line}\n")
    return None


def _add_import(source: Source, line: str) -> lsp.TextEdit:
    """`line` after the module's last import, else after its header, else first."""
    parsed = parse_source(source)
    imports = [i for i in parsed.module.items if isinstance(i, s.Import)]
    headers = [i for i in parsed.module.items if isinstance(i, s.Header)]
    if imports:
        after, text = imports[-1].span.end_line, f"{line}\n"
    elif headers:
        after, text = headers[0].span.end_line, f"\n{line}\n"
    else:
        after, text = 0, f"{line}\n\n"
    at = lsp.Position(after, 0)
    return lsp.TextEdit(lsp.Range(at, at), text)
