"""Document symbols (the outline), workspace symbols and folding ranges, from a module's syntax
tree."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator

from harnessc.dsl import syntax as s
from harnessc.dsl.source import Span
from lsprotocol import types as lsp

from .positions import Positions

K = lsp.SymbolKind
_KINDS: dict[type, tuple[lsp.SymbolKind, str]] = {
    s.Header: (K.File, "harness"),
    s.Connection: (K.Constant, "connection"),
    s.Runtime: (K.Constant, "runtime"),
    s.Fact: (K.Property, "fact"),
    s.Label: (K.Constant, "label"),
    s.Tool: (K.Function, "tool"),
    s.Extend: (K.Function, "extend"),
    s.Operation: (K.Method, "operation"),
    s.Mcp: (K.Module, "mcp"),
    s.Skill: (K.Namespace, "skill"),
    s.Subagent: (K.Object, "subagent"),
    s.Surface: (K.Interface, "surface"),
    s.Policy: (K.Class, "policy"),
    s.Rule: (K.Method, "rule"),
    s.RiskTable: (K.Enum, "risk"),
    s.Agent: (K.Object, "agent"),
    s.Workflow: (K.Class, "workflow"),
    s.Step: (K.Event, "step"),
    s.Test: (K.Method, "test"),
}


def _name(node: object) -> tuple[str, Span] | None:
    if isinstance(node, s.PrivateTool):
        node = node.tool
    if isinstance(node, s.Rule):
        if node.label is not None:
            return node.label.text, node.label.span
        return f"{node.effect} {' '.join(_selector_text(x) for x in node.selectors)}", node.span
    if isinstance(node, s.Extend):
        first = node.tools[0].span if node.tools else node.span
        return ", ".join(n.text for n in node.tools), first
    name = getattr(node, "name", None)
    if isinstance(name, s.Name):
        return name.text, name.span
    if isinstance(name, s.Str):
        return name.value, name.span
    return None


def _selector_text(selector: object) -> str:
    span = getattr(selector, "span", None)
    return span.text if isinstance(span, Span) else "?"


def _children(node: object) -> Iterable[object]:
    if isinstance(node, s.PrivateTool):
        node = node.tool
    items = getattr(node, "items", None)
    return items if isinstance(items, tuple) else ()


def document_symbols(module: s.Module, positions: Positions) -> list[lsp.DocumentSymbol]:
    return [symbol for item in module.items if (symbol := _symbol(item, positions))]


def _symbol(node: object, positions: Positions) -> lsp.DocumentSymbol | None:
    inner = node.tool if isinstance(node, s.PrivateTool) else node
    kind = _KINDS.get(type(inner))
    named = _name(node)
    if kind is None or named is None:
        return None
    text, name_span = named
    span: Span = node.span  # type: ignore[attr-defined]
    whole = positions.range(span)
    chosen = positions.range(name_span)
    if not (whole.start.line, whole.start.character) <= (chosen.start.line, chosen.start.character):
        chosen = whole  # a selection must lie inside the symbol's range
    children = [c for child in _children(node) if (c := _symbol(child, positions))]
    return lsp.DocumentSymbol(
        name=text or "?",
        kind=kind[0],
        range=whole,
        selection_range=chosen,
        detail=kind[1],
        children=children or None,
    )


def workspace_symbols(
    module: s.Module, uri: str, positions: Positions, query: str
) -> list[lsp.WorkspaceSymbol]:
    """The declarations of a module whose names match `query` (`matches`), at every depth (a
    policy's labelled rules, a tool's operations, a workflow's steps), each with the name of
    what holds it."""
    found: list[lsp.WorkspaceSymbol] = []

    def visit(node: object, container: str | None) -> None:
        inner = node.tool if isinstance(node, s.PrivateTool) else node
        kind = _KINDS.get(type(inner))
        named = _name(node)
        if kind is None or named is None:
            return
        text, name_span = named
        # an unlabelled rule has no name to find it by, and the header is the file
        named_here = kind[1] != "harness" and (
            not isinstance(node, s.Rule) or node.label is not None
        )
        if named_here and matches(query, text):
            found.append(
                lsp.WorkspaceSymbol(
                    name=text,
                    kind=kind[0],
                    location=lsp.Location(uri, positions.range(name_span)),
                    container_name=container,
                )
            )
        for child in _children(node):
            visit(child, text)

    for item in module.items:
        visit(item, None)
    return found


def matches(query: str, name: str) -> bool:
    """Whether `name` matches a workspace-symbol query: the query's characters appear in it in
    order, case aside (`rlprod` finds `release.to_production`), as editors filter symbols."""
    at = 0
    folded = name.casefold()
    for char in query.casefold():
        at = folded.find(char, at) + 1
        if at == 0:
            return False
    return True


def folding_ranges(module: s.Module) -> list[lsp.FoldingRange]:
    """A fold per block of more than one line (declarations, rules, steps, operations) and per
    run of two or more comment lines."""
    found: list[lsp.FoldingRange] = []

    def walk(nodes: Iterable[object]) -> None:
        for node in nodes:
            span = getattr(node, "span", None)
            if isinstance(span, Span) and span.end > span.start and span.end_line > span.line:
                found.append(lsp.FoldingRange(span.line - 1, span.end_line - 1))
            walk(_children(node))

    walk(module.items)
    run: list[int] = []
    for comment in module.comments:
        line = comment.span.line
        if run and line != run[-1] + 1:
            _comment_fold(run, found)
            run = []
        run.append(line)
    _comment_fold(run, found)
    return found


def _comment_fold(lines: list[int], found: list[lsp.FoldingRange]) -> None:
    if len(lines) > 1:
        found.append(
            lsp.FoldingRange(lines[0] - 1, lines[-1] - 1, kind=lsp.FoldingRangeKind.Comment)
        )


def walk(nodes: Iterable[object]) -> Iterator[object]:
    """Every syntax node under `nodes`, each before the nodes inside it."""
    for node in nodes:
        if isinstance(node, tuple):
            yield from walk(node)
        elif dataclasses.is_dataclass(node) and not isinstance(node, type):
            yield node
            yield from walk(
                getattr(node, f.name) for f in dataclasses.fields(node) if f.name != "span"
            )
