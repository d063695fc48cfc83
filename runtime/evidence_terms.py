"""Evidence for a decision that read the session: one sentence per provenance or history term
of the winning rule that held ("`args.iban` appears only in the result of `mail.read`
(untrusted), event #41"). Computed after the (cached) decision, only for such rules."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .conditions import Scope, evaluate, history_value, value_of
from .history import HistoryTerms, history_key
from .model import (
    DURATION_UNITS,
    And,
    Condition,
    History,
    Not,
    Or,
    Path,
    Provenance,
    Quantified,
)
from .provenance import Origin, Source

if TYPE_CHECKING:
    from .policy import CallContext

__all__ = ["describe_history", "session_evidence"]

_MAX_SENTENCES = 8


def session_evidence(
    cond: Condition, call: CallContext, terms: HistoryTerms | None
) -> tuple[str, ...]:
    """The sentences for the session terms of `cond` that held for this call."""
    scope = Scope(
        args=call.args,
        tool={"id": call.tool_id},
        call=call.call,
        ledger=call.ledger,
        terms=terms,
    )
    if terms is not None:
        op = call.args.get("op")
        scope.tool = terms.view(call.tool_id, op if isinstance(op, str) else None)
    out: list[str] = []
    _walk(cond, scope, out)
    return tuple(dict.fromkeys(out))[:_MAX_SENTENCES]


def _walk(node: object, scope: Scope, out: list[str]) -> None:
    if isinstance(node, And | Or):
        for item in node.items:
            _walk(item, scope, out)
    elif isinstance(node, Not):
        _walk(node.item, scope, out)
    elif isinstance(node, Provenance):
        if evaluate(node, scope):
            out.append(_describe_provenance(node, scope))
    elif isinstance(node, Quantified):
        items = value_of(node.over, scope)
        if isinstance(items, list | tuple):
            for item in items:
                inner = replace(scope, vars={**scope.vars, node.var: item})
                _walk(node.body, inner, out)
    elif isinstance(node, History):
        out.append(f"`{describe_history(node)}` is {_shown(history_value(node, scope))}")
    else:
        for name in ("left", "right", "of"):
            child = getattr(node, name, None)
            if isinstance(child, History):
                _walk(child, scope, out)


def _shown(value: Any) -> str:
    if value is True or value is False:
        return "true" if value else "false"
    return str(value)


def _path_text(node: object, scope: Scope) -> str:
    if isinstance(node, Path):
        if node.root == "var" and node.parts:
            value = scope.vars.get(node.parts[0])
            if not node.parts[1:] and isinstance(value, str | int | float):
                return f"{value}"
            return ".".join(node.parts)
        return ".".join((node.root, *node.parts))
    return "the value"


def _describe_provenance(node: Provenance, scope: Scope) -> str:
    what = f"`{_path_text(node.value, scope)}`"
    if node.source == "nowhere":
        return f"{what} appeared in no source"
    index = scope.ledger.index if scope.ledger is not None else None
    origin = index.lookup(value_of(node.value, scope)) if index is not None else None
    if origin is None:
        return f"{what} appeared in no source"
    only = " only" if len(origin.kinds) == 1 else ""
    return f"{what} appears{only} in {_sources(origin)}"


def _sources(origin: Origin) -> str:
    parts: list[str] = []
    for source in origin.sources[:3]:
        parts.append(_source_text(source))
    more = len(origin.sources) - 3
    text = " and ".join(parts)
    return text + (f" (and {more} more)" if more > 0 else "")


def _source_text(source: Source) -> str:
    if source.tool is not None:
        labels = f", labels {', '.join(sorted(source.labels))}" if source.labels else ""
        where = f"the result of `{source.tool}` ({source.kind}{labels})"
    elif source.kind == "user":
        where = "a user message"
    else:
        where = "the facts (trusted)"
    return f"{where}, event #{source.position}"


def _window_text(ms: int) -> str:
    for unit, size in DURATION_UNITS.items():
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def describe_history(node: History) -> str:
    """A history term as written: `count(files.delete within 10m)`."""
    if node.func == "seen":
        inside = node.label or ""
    else:
        inside = ", ".join(s.text or s.value or s.kind for s in node.selectors)
        if node.field is not None:
            inside = ".".join((node.field.root, *node.field.parts)) + " of " + inside
    if node.window_ms is not None:
        inside += f" within {_window_text(node.window_ms)}"
    if node.where is not None:
        inside += " when …"
    return f"{node.func}({inside})"


def term_key(node: History) -> str:
    return history_key(node)
