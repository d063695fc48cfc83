"""Signature help: the form of the function or quantifier being typed, and which part of it the
cursor is in (docs/language.md, "Conditions": history terms, length and extraction, facts'
connections and runtimes, quantifiers)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from lsprotocol import types as lsp

from ..resolve_session import FACT_FUNCTIONS, FUNCTIONS

__all__ = ["FORMS", "Form", "signature_at"]


@dataclass(frozen=True)
class Form:
    """How a function (or a quantifier) is written: its parts in order, the words that open each
    part after the first, and what it means."""

    label: str
    parts: tuple[str, ...]
    opens: tuple[str, ...]
    """The word that begins each part after the first (`of`, `within`, `when`)."""
    doc: str


_HISTORY_PARTS = ("SELECTOR, …", "within DURATION", "when CONDITION")
FORMS: dict[str, Form] = {
    "called": Form(
        "called(SELECTOR, … within DURATION when CONDITION)",
        _HISTORY_PARTS,
        ("within", "when"),
        "True when an earlier call of a selected tool was authorized to run (whatever its "
        "outcome). `within` bounds the look-back; `when` reads the earlier call.",
    ),
    "succeeded": Form(
        "succeeded(SELECTOR, … within DURATION when CONDITION)",
        _HISTORY_PARTS,
        ("within", "when"),
        "True when an earlier call of a selected tool completed with success.",
    ),
    "count": Form(
        "count(SELECTOR, … within DURATION when CONDITION)",
        _HISTORY_PARTS,
        ("within", "when"),
        "The number of calls of selected tools authorized and not failed or cancelled, this "
        "call included when it is selected and meets `when`.",
    ),
    "sum": Form(
        "sum(FIELD of SELECTOR, … within DURATION when CONDITION)",
        ("FIELD", "of SELECTOR, …", "within DURATION", "when CONDITION"),
        ("of", "within", "when"),
        "The sum of the number FIELD (`args.KEY` or `result.KEY`) over the calls `count` "
        "counts, this call's included; a missing or non-number value adds nothing.",
    ),
    "result": Form(
        "result[.FIELD](SELECTOR, … within DURATION when CONDITION)",
        _HISTORY_PARTS,
        ("within", "when"),
        "After `from`: the results of the earlier calls `succeeded` with these parts counts "
        "(at FIELD of them): `args.iban from result(files.read when args.name from user)`.",
    ),
    "seen": Form(
        "seen(LABEL within DURATION)",
        ("LABEL", "within DURATION"),
        ("within",),
        "True when a result carrying the data label LABEL was produced.",
    ),
    "len": Form(
        "len(VALUE)",
        ("VALUE",),
        (),
        "The number of items of a list, entries of a map or characters of a string (absent "
        "otherwise).",
    ),
    "urls": Form("urls(TEXT)", ("TEXT",), (), "The URLs inside a text, normalized."),
    "hosts": Form("hosts(TEXT)", ("TEXT",), (), "The host names inside a text, normalized."),
    "emails": Form("emails(TEXT)", ("TEXT",), (), "The e-mail addresses inside a text."),
    "ibans": Form(
        "ibans(TEXT)",
        ("TEXT",),
        (),
        "The IBAN-like account numbers inside a text, without their spaces.",
    ),
    "params": Form(
        "params(URL_OR_TEXT)",
        ("URL_OR_TEXT",),
        (),
        "The query parameter values a URL carries (of every URL inside a text), decoded.",
    ),
    "segments": Form(
        "segments(URL_OR_TEXT)",
        ("URL_OR_TEXT",),
        (),
        "The path segments after the host a URL carries (of every URL inside a text), decoded.",
    ),
    **{
        name: Form(
            f"{name}({kind.upper()})",
            (kind.upper(),),
            (),
            f"True when the {kind} is up (from the session's facts).",
        )
        for name, kind in FACT_FUNCTIONS.items()
    },
    "all": Form(
        "all VARIABLE in LIST: CONDITION",
        ("VARIABLE", "in LIST", ": CONDITION"),
        ("in", ":"),
        "True when CONDITION holds for every item of LIST (an absent list: false). The body is "
        "one atom: it ends at `and`/`or` unless parenthesised.",
    ),
    "any": Form(
        "any VARIABLE in LIST: CONDITION",
        ("VARIABLE", "in LIST", ": CONDITION"),
        ("in", ":"),
        "True when CONDITION holds for some item of LIST. The body is one atom: it ends at "
        "`and`/`or` unless parenthesised.",
    ),
}
assert set(FUNCTIONS) <= set(FORMS), "every function of the language has its form"

_CALL = re.compile(
    r"\b("
    + "|".join(sorted((*FUNCTIONS, "result"), key=len, reverse=True))
    + r")(?:\.[A-Za-z_][\w.]*)?\s*\($"  # `result.sender(`: the field is part of the name
)
_QUANTIFIER = re.compile(r"\b(all|any)\s+(?:[A-Za-z_]\w*)?(?:\s+in\b[^:]*)?(?::[^\n]*)?$")
_REACH = 2000
"""How far back (in characters) the opening of a call is looked for."""


def signature_at(text: str, offset: int) -> lsp.SignatureHelp | None:
    """The form being typed at `offset`, with its active part; None outside any."""
    start = max(0, offset - _REACH)
    before = text[start:offset]
    depth = 0
    for i in range(len(before) - 1, -1, -1):
        char = before[i]
        if char == ")":
            depth += 1
        elif char == "(":
            if depth == 0:
                found = _CALL.search(before, 0, i + 1)
                if found is not None:
                    return _help(FORMS[found.group(1)], before[i + 1 :])
                break  # a parenthesised condition or a call not of the language: look no further
            depth -= 1
        elif char in "{}" and depth == 0:
            break  # a block's edge: conditions hold no braces
    line = before[before.rfind("\n") + 1 :]
    quantifier = _QUANTIFIER.search(line)
    if quantifier is not None and not re.search(r":\s*\S", line[quantifier.start() :]):
        return _help(FORMS[quantifier.group(1)], line[quantifier.end(1) :])
    return None


def _help(form: Form, typed: str) -> lsp.SignatureHelp:
    active = 0
    for n, word in enumerate(form.opens, start=1):
        pattern = re.escape(word) if not word[0].isalpha() else rf"\b{word}\b"
        if re.search(pattern, typed):
            active = n
    signature = lsp.SignatureInformation(
        label=form.label,
        documentation=lsp.MarkupContent(lsp.MarkupKind.Markdown, form.doc),
        parameters=[lsp.ParameterInformation(label=part) for part in form.parts],
        active_parameter=active,
    )
    return lsp.SignatureHelp(signatures=[signature], active_signature=0, active_parameter=active)
