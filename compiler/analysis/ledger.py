"""What every ledger obeys between session terms, as plain relations (no z3).

A check reads a session term (`x from K`, `called(…)`, `count(…)`, `sum(…)`) as a free value of
its type, but not every combination of values is one a session can give. These are the
relations the analysis keeps between the terms of one call, stated once: the SMT encoding
(smt_session.py) turns them into constraints, and the procedure without z3 (cells.py) keeps
only the combinations of representatives that meet them.
"""

from __future__ import annotations

from typing import Any, Literal

from harnessc.runtime import model as m
from harnessc.runtime.model.semantics import ABSENT, selects

__all__ = [
    "Quantifying",
    "Relation",
    "non_negative",
    "provenance_relation",
    "quantified_holds",
    "source_id",
    "wider",
    "window_family",
]

Relation = Literal["implies", "excludes", "at_most"]
"""`a implies b`: a true makes b true; `a excludes b`: a true makes b false; `a at_most b`:
a number at most b."""


Quantifying = Literal["all", "any", "all-any"]
"""What a quantifier over a list says of the list's length (`quantified_holds`)."""


def quantified_holds(relation: Quantifying, held: Any, length: Any) -> bool:
    """Whether a quantifier's value may go with its list's length (ABSENT: the list is absent,
    and the quantifier is false whatever the session holds): `any` holds, and `all` fails,
    only over a list with an item; of `all` and `any` of one body over one list (`held` their
    pair), `all` over a list with an item implies `any`, and over one item they agree."""
    if length is ABSENT:
        return True
    if relation == "any":
        return not held or length >= 1
    if relation == "all":
        return held or length >= 1
    every, some = held
    return not (every and length >= 1 and not some) and (length != 1 or every == some)


def source_id(term: m.Provenance) -> str:
    """A provenance term's source as `provenance_relation` tells sources apart: the kind
    (`user`, `trusted`, `untrusted`, `label`, `nowhere`), or for `from result(…)` the word
    and its history term, since results of different calls are different sources."""
    if term.call is None:
        return term.source
    field = term.field.model_dump_json() if term.field is not None else ""
    return "result " + term.call.model_dump_json() + field


def provenance_relation(a: tuple[str, bool], b: tuple[str, bool]) -> Relation | None:
    """What `held_a` says of `held_b`, for two provenance terms of one value by their
    (`source_id`, only): a value from nowhere has no entry at all; `K only` implies `K`; a
    value from `K only` is from no other kind. A call's result is never a user's message, so
    a value from `result(…) only` is not from the user, and one from `user only` is from no
    result; a result has its tool's trust, so nothing more is said between results and
    `trusted` or `untrusted`."""
    (source_a, only_a), (source_b, only_b) = a, b
    if source_a == "nowhere" and source_b != "nowhere":
        return "excludes"
    if only_a and source_a == source_b and not only_b:
        return "implies"
    result_a, result_b = source_a.startswith("result "), source_b.startswith("result ")
    if only_a and result_a:
        return "excludes" if source_b == "user" else None
    if only_a and source_a == "user" and result_b:
        return "excludes"
    if only_a and source_a != source_b and source_b in m.SOURCE_KINDS:
        return "excludes"
    return None


def wider(a: int | None, b: int | None) -> bool:
    """Whether window `a` holds at least what window `b` does (None: the whole session)."""
    return a is None or (b is not None and a >= b)


def window_family(term: m.History) -> m.History:
    """The term without its window: terms of one family differ only in their window, and a
    wider window holds every entry of a narrower one (`called` within the narrower implies
    within the wider; a `count`, or a `sum` of non-negative amounts, is at most the wider's)."""
    return term.model_copy(update={"window_ms": None})


def non_negative(spec: m.Spec, term: m.History) -> bool:
    """Whether every amount a `sum` adds is non-negative: the field, in each tool the term
    selects in this spec, is a number whose declared `min` is 0 or more."""
    f = term.field
    if f is None or len(f.parts) != 1:
        return False
    for tool in spec.tools.values():
        if not any(selects(s, tool) for s in term.selectors):
            continue
        schema = tool.input if f.root == "args" else tool.output
        found = next((g for g in schema.fields if g.name == f.parts[0]), None) if schema else None
        if found is None:
            continue  # the tool has no such field: it adds nothing
        if found.type.name not in ("int", "float") or found.min is None or found.min < 0:
            return False
    return True
