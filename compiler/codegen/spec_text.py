"""Conditions written back as spec text, for the generated docs and the cases' notes."""

from __future__ import annotations

import json

from harnessc.runtime.model import (
    And,
    Compare,
    Condition,
    EnumMember,
    FactCall,
    ListValue,
    Literal,
    Not,
    Or,
    Path,
    RecordValue,
)

from ..analysis.concrete import format_duration
from .escape import md_code

__all__ = ["condition_words", "duration_text", "spec_text"]


def duration_text(ms: int | float) -> str:
    """A duration literal's milliseconds as the spec writes them (`5400000` → `1h30m`)."""
    if not isinstance(ms, int) or ms <= 0:
        return f"{ms}ms"
    return format_duration(ms)


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
        root = () if node.root in ("fact", "step") else (node.root,)
        return ".".join((*root, *node.parts))
    if isinstance(node, FactCall):
        return f"{node.func}({node.name})"
    if isinstance(node, ListValue):
        return "[" + ", ".join(spec_text(i) for i in node.items) + "]"
    if isinstance(node, RecordValue):
        return "{" + ", ".join(f"{k}: {spec_text(v)}" for k, v in node.fields.items()) + "}"
    if isinstance(node, Compare):
        return f"{spec_text(node.left)} {node.op} {spec_text(node.right)}"
    if isinstance(node, And | Or):
        word = " and " if isinstance(node, And) else " or "
        text = word.join(spec_text(i, top=False) for i in node.items)
        return text if top else f"({text})"
    if isinstance(node, Not):
        return f"not {spec_text(node.item, top=False)}"
    raise TypeError(f"not a condition: {node!r}")


def condition_words(node: Condition, top: bool = True) -> str:
    """An availability condition in words, as Markdown (pieces of spec text as code)."""
    if isinstance(node, FactCall):
        verb = "is connected" if node.func == "connected" else "is running"
        return f"{md_code(node.name)} {verb}"
    if isinstance(node, And | Or):
        word = " and " if isinstance(node, And) else " or "
        text = word.join(condition_words(i, top=False) for i in node.items)
        return text if top else f"({text})"
    if isinstance(node, Not):
        return f"not {condition_words(node.item, top=False)}"
    if isinstance(node, Path):
        return f"{md_code(spec_text(node))} is true"
    return md_code(spec_text(node))
