"""Conditions and values written back as spec text: for witnesses' session state, findings,
the generated docs and the cases' notes (codegen/spec_text.py adds Markdown on top)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from harnessc.runtime.model import (
    And,
    Compare,
    Condition,
    EnumMember,
    Extract,
    FactCall,
    FactUpdate,
    History,
    Index,
    Length,
    ListValue,
    Literal,
    Not,
    Or,
    Path,
    Provenance,
    Quantified,
    RecordValue,
    Selector,
    SessionStep,
)
from pydantic import TypeAdapter

from .concrete import format_duration

__all__ = [
    "duration_text",
    "prelude_text",
    "selector_text",
    "session_lines",
    "spec_text",
    "term_of",
    "update_text",
    "value_text",
]


def duration_text(ms: int | float) -> str:
    """A duration literal's milliseconds as the spec writes them (`5400000` → `1h30m`)."""
    if not isinstance(ms, int) or ms <= 0:
        return f"{ms}ms"
    return format_duration(ms)


def selector_text(sel: Selector) -> str:
    """A tool selector as written (its `text`), or rebuilt from its parts."""
    if sel.text:
        return sel.text
    if sel.kind == "glob":
        return f"{sel.value}*"
    if sel.kind == "all":
        return "*"
    if sel.kind in ("pack", "kind"):
        return f"{sel.kind}:{sel.value}"
    if sel.kind == "risk":
        return f"risk {sel.op or '=='} {sel.value}"
    if sel.kind == "effects":
        return f"effects has {sel.value}"
    return sel.value


def _history_text(node: History) -> str:
    if node.func == "seen":
        inside = node.label or ""
    else:
        inside = ", ".join(selector_text(s) for s in node.selectors)
        if node.func == "sum" and node.field is not None:
            inside = f"{spec_text(node.field)} of {inside}"
    if node.window_ms is not None:
        inside += f" within {duration_text(node.window_ms)}"
    if node.where is not None:
        inside += f" when {spec_text(node.where)}"
    return f"{node.func}({inside})"


def _provenance_text(node: Provenance) -> str:
    if node.call is not None:
        at = "".join(f".{p}" for p in node.field.parts) if node.field is not None else ""
        source = f"result{at}(" + _history_text(node.call).partition("(")[2]
    elif node.source == "label":
        source = f"label {node.label}"
    else:
        source = node.source
    only = " only" if node.only else ""
    return f"{spec_text(node.value, top=False)} from {source}{only}"


def update_text(update: FactUpdate) -> str:
    """An `on_success` update written back as spec text, after `on_success`.

    >>> update_text(FactUpdate(value=Path(root="result", parts=("people",)), fact="team",
    ...     each="p", item=Path(root="var", parts=("p", "email")), op="remove"))
    'remove each p in result.people: p.email from team'
    """
    when = f"when {spec_text(update.when)} " if update.when is not None else ""
    value = spec_text(update.value)
    if update.each is not None:
        item = f": {spec_text(update.item)}" if update.item is not None else ""
        value = f"each {update.each} in {value}{item}"
    into = "to" if update.op == "add" else "from"
    key = f"[{spec_text(update.key)}]" if update.key is not None else ""
    return f"{when}{update.op} {value} {into} {update.fact}{key}"


def spec_text(node: object, top: bool = True) -> str:
    """A condition or value written back as spec text (for docs and comments)."""
    if isinstance(node, Literal):
        if node.type == "duration":
            return duration_text(node.value)  # type: ignore[arg-type]
        if node.type == "bool":
            return "true" if node.value else "false"
        if node.type == "string":
            return json.dumps(node.value, ensure_ascii=False)
        return repr(node.value)
    if isinstance(node, EnumMember):
        return node.name
    if isinstance(node, Path):
        root = () if node.root in ("fact", "step", "var") else (node.root,)
        return ".".join((*root, *node.parts))
    if isinstance(node, FactCall):
        return f"{node.func}({node.name})"
    if isinstance(node, ListValue):
        return "[" + ", ".join(spec_text(i) for i in node.items) + "]"
    if isinstance(node, RecordValue):
        return "{" + ", ".join(f"{k}: {spec_text(v)}" for k, v in node.fields.items()) + "}"
    if isinstance(node, Length):
        return f"len({spec_text(node.of)})"
    if isinstance(node, Extract):
        return f"{node.func}({spec_text(node.of)})"
    if isinstance(node, History):
        return _history_text(node)
    if isinstance(node, Index):
        return f"{spec_text(node.of)}[{spec_text(node.key)}]"
    if isinstance(node, Provenance):
        return _provenance_text(node)
    if isinstance(node, Quantified):
        text = f"{node.quantifier} {node.var} in {spec_text(node.over)}: "
        return text + spec_text(node.body, top=False)
    if isinstance(node, Compare):
        return f"{spec_text(node.left)} {node.op} {spec_text(node.right)}"
    if isinstance(node, And | Or):
        word = " and " if isinstance(node, And) else " or "
        text = word.join(spec_text(i, top=False) for i in node.items)
        return text if top else f"({text})"
    if isinstance(node, Not):
        return f"not {spec_text(node.item, top=False)}"
    raise TypeError(f"not a condition: {node!r}")


@cache
def _terms() -> TypeAdapter[Condition]:
    # built on first use: building it builds the conditions' validators, which `check` never uses
    return TypeAdapter(Condition)


def term_of(key: str) -> Condition:
    """The session term a canonical form (`concrete.canonical`) stands for."""
    return _terms().validate_json(key)


def value_text(value: Any) -> str:
    """A session state's value as spec text: `true`, `6`, `["a.test"]`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, ensure_ascii=False)


def session_lines(session: Mapping[str, Any]) -> list[str]:
    """A witness's session state, one line per term: "session: `args.iban from user` = true"."""
    return [
        f"session: `{spec_text(term_of(key))}` = {value_text(value)}"
        for key, value in session.items()
    ]


def prelude_text(steps: Iterable[SessionStep]) -> list[str]:
    """The steps as a `test` block writes them (`said "…"`, `earlier t(a: 1) returns {…}`)."""
    out = []
    for step in steps:
        if step.said is not None:
            out.append(f"said {json.dumps(step.said, ensure_ascii=False)}")
            continue
        args = ", ".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in step.args.items())
        text = f"earlier {step.tool}({args})"
        if step.result is not None:
            text += f" returns {json.dumps(step.result, ensure_ascii=False)}"
        if step.ago_ms is not None:
            text += f" ago {duration_text(step.ago_ms)}"
        out.append(text)
    return out
