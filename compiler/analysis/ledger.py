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
    "result_kind",
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


def source_id(term: m.Provenance, spec: m.Spec | None = None) -> str:
    """A provenance term's source as `provenance_relation` tells sources apart: the kind
    (`user`, `trusted`, `untrusted`, `label`, `nowhere`), or for `from result(…)` the word,
    the one kind every such result's values have in `spec` (`result_kind`; `-` when they
    may have either) and its history term and field, since results of different calls are
    different sources."""
    if term.call is None:
        return term.source
    kind = (result_kind(spec, term.call) if spec is not None else None) or "-"
    field = term.field.model_dump_json() if term.field is not None else ""
    return f"result {kind} " + term.call.model_dump_json() + field


def result_kind(spec: m.Spec, call: m.History) -> str | None:
    """The one kind of source (`trusted` or `untrusted`) of every value a result of the calls
    `call` selects puts in the index: each selected tool's `trust` (an MCP server's results
    are untrusted), no field of its output declaring another, at any depth. None when the
    kinds differ (or nothing is selected)."""
    kinds: set[str] = set()
    for tool in spec.tools.values():
        if not any(selects(s, tool) for s in call.selectors):
            continue
        if tool.kind == "mcp":
            kinds.add("untrusted")
            continue
        kinds.add(tool.trust or "untrusted")
        output = tool.output
        if output is None:
            continue
        stack: list[m.Type] = [f.type for f in output.fields]
        kinds.update(f.trust for f in output.fields if f.trust is not None)
        if output.shape is not None:
            stack.append(output.shape)
        while stack:
            t = stack.pop()
            kinds.update(f.trust for f in t.fields if f.trust is not None)
            stack += [f.type for f in t.fields] + list(t.options)
            if t.item is not None:
                stack.append(t.item)
    return next(iter(kinds)) if len(kinds) == 1 else None


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
    kind_a, kind_b = _result_kind_of(source_a), _result_kind_of(source_b)
    if kind_a is not None:
        # a result of the calls: of its one kind when known (`-`: either), never the user's;
        # every source such a result (`only`): from that kind only
        if source_b == kind_a and (only_a or not only_b):
            return "implies"
        if only_a and source_b in m.SOURCE_KINDS and (source_b == "user" or kind_a != "-"):
            return "excludes"
        return None
    if only_a and kind_b is not None and (source_a == "user" or kind_b not in ("-", source_a)):
        return "excludes"  # from K only: no source of another kind, and a user's is no result
    if only_a and source_a != source_b and source_b in m.SOURCE_KINDS:
        return "excludes"
    return None


def _result_kind_of(source: str) -> str | None:
    """The kind part of a `source_id` of `from result(…)` (`trusted`, `untrusted` or `-`);
    None for any other source."""
    if not source.startswith("result "):
        return None
    return source.split(" ", 2)[1]


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
