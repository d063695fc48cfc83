"""Conditions written back as spec text, for the generated docs and the cases' notes.

The printer itself is `analysis/text.py` (the analysis names session terms with it too); this
module adds the Markdown of availability conditions in words."""

from __future__ import annotations

from harnessc.runtime.model import And, Condition, FactCall, Not, Or, Path

from ..analysis.text import duration_text, selector_text, spec_text, update_text
from .escape import md_code

__all__ = ["condition_words", "duration_text", "selector_text", "spec_text", "update_text"]


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
