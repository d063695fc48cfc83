"""Evidence for a decision that read the session: one sentence per provenance or history term
of the winning rule that held ("`args.iban` appears only in the result of `mail.read`
(untrusted), event #41"). Computed after the (cached) decision, only for such rules."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..model.ir import (
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
from .conditions import Scope, dig, history_value, value_of
from .context import CallContext
from .history import HistoryTerms, history_key
from .provenance import Origin, Source, arg_name, provenance_found, provenance_holds

__all__ = ["describe_history", "session_evidence", "source_text"]

_MAX_SENTENCES = 8


def session_evidence(
    cond: Condition, call: CallContext, terms: HistoryTerms | None
) -> tuple[str, ...]:
    """The sentences for the session terms of `cond` that held for this call (a provenance
    term under `not`: when it did not hold, saying where the value does appear)."""
    out: list[str] = []
    _Walk(call, terms, out).walk(cond, False, None)
    return tuple(dict.fromkeys(out))[:_MAX_SENTENCES]


class _Walk:
    __slots__ = ("call", "out", "scope", "terms")

    def __init__(self, call: CallContext, terms: HistoryTerms | None, out: list[str]) -> None:
        self.call, self.terms, self.out = call, terms, out
        self.scope: Scope | None = None

    def base(self) -> Scope:
        """The call as the interpreter reads it, built once, when a term needs it."""
        if self.scope is None:
            call, terms = self.call, self.terms
            op = call.args.get("op")
            view = (
                terms.view(call.tool_id, op if isinstance(op, str) else None)
                if terms is not None
                else {"id": call.tool_id}
            )
            self.scope = Scope(
                args=call.args,
                tool=view,
                call={"tool_call_id": call.tool_call_id},
                ledger=call.ledger,
                terms=terms,
            )
        return self.scope

    def walk(self, node: object, negated: bool, scope: Scope | None) -> None:
        if isinstance(node, Provenance):
            self.provenance(node, negated, scope)
        elif isinstance(node, And | Or):
            for item in node.items:
                self.walk(item, negated, scope)
        elif isinstance(node, Not):
            self.walk(node.item, not negated, scope)
        elif isinstance(node, Quantified):
            outer = scope or self.base()
            items = value_of(node.over, outer)
            if isinstance(items, list | tuple):
                for item in items:
                    inner = replace(outer, vars={**outer.vars, node.var: item})
                    self.walk(node.body, negated, inner)
        elif isinstance(node, History):
            value = history_value(node, scope or self.base())
            self.out.append(f"`{describe_history(node)}` is {_shown(value)}")
        else:
            for name in ("left", "right", "of"):
                child = getattr(node, name, None)
                if isinstance(child, History):
                    self.walk(child, negated, scope)

    def provenance(self, node: Provenance, negated: bool, scope: Scope | None) -> None:
        path = node.value
        if scope is None and isinstance(path, Path) and path.root == "args":
            value = dig(self.call.args, path.parts)  # the common case: no scope to build
        else:
            scope = scope or self.base()
            value = value_of(path, scope)
        ledger = self.call.ledger
        index = ledger.index if ledger is not None else None
        name = arg_name(path)
        arg = None if name is None else (self.call.tool_id, name)
        origin = None
        if index is not None and value is not None:
            origin = provenance_found(index, value, arg)
        if node.call is not None:
            # `from result(sel …)`: which of the value's sources are such results
            key = history_key(node.call)
            field = node.field.parts if node.field is not None else ()
            found = [] if ledger is None else ledger.results_of(key, origin, field, value)
            held = ledger is not None and ledger.from_results(key, origin, node.only, field, value)
            if held == negated or value is None:
                return
            if found and not negated:
                what = f"`{_path_text(path, scope)}`"
                at = "." + ".".join(node.field.parts) if node.field is not None else ""
                self.out.append(
                    f"{what} appears in {_source_list(found)}: `from "
                    f"{describe_history(node.call).replace('succeeded', 'result' + at, 1)}`"
                )
                return
        elif provenance_holds(index, value, node.source, node.label, node.only, arg) == negated:
            return
        if value is None:
            return  # an absent value: nothing to say of where it appeared
        what = f"`{_path_text(path, scope)}`"
        if origin is None:
            self.out.append(f"{what} appeared in no source")
        else:
            only = " only" if len(origin.sources) == 1 else ""
            self.out.append(f"{what} appears{only} in {_sources(origin)}")


def _shown(value: Any) -> str:
    if value is True or value is False:
        return "true" if value else "false"
    return str(value)


def _path_text(node: object, scope: Scope | None) -> str:
    if isinstance(node, Path):
        if node.root == "var" and node.parts and scope is not None:
            value = scope.vars.get(node.parts[0])
            if not node.parts[1:] and isinstance(value, str | int | float):
                return f"{value}"
            return ".".join(node.parts)
        return ".".join((node.root, *node.parts))
    return "the value"


def _sources(origin: Origin) -> str:
    return _source_list(origin.sources)


def _source_list(sources: list[Source]) -> str:
    parts: list[str] = []
    for source in sources[:3]:
        parts.append(source_text(source))
    more = len(sources) - 3
    text = " and ".join(parts)
    return text + (f" (and {more} more)" if more > 0 else "")


def source_text(source: Source, tool_call_id: str | None = None) -> str:
    """One source in words: "the result of `mail.read` (untrusted), call c-4, event #41"
    (the call when known), "a user message, event #3", "the fact `bank.payees` (trusted),
    event #1" (a fact's value; "the facts (trusted)" for one indexed without its fact's name)."""
    if source.default is not None:
        return f"the default of `{source.default}` in the spec (trusted)"
    composed = f"{source.composed} in " if source.composed is not None else ""
    if source.tool is not None:
        labels = f", labels {', '.join(sorted(source.labels))}" if source.labels else ""
        where = f"{composed}the result of `{source.tool}` ({source.kind}{labels})"
        if tool_call_id is not None:
            where += f", call {tool_call_id}"
    elif source.kind == "user":
        where = "a user message"
    elif source.fact is not None:
        where = f"{composed}the fact `{source.fact}` (trusted)"
    else:
        where = f"{composed}the facts (trusted)"
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
