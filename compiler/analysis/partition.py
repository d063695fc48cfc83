"""A partition of a policy's analysis: one tool's bucket of rules, what decides its answers, and
the answers themselves as plain data (no z3: a run whose partitions are all cached never loads
the solver).

A partition is the rules that can match one tool, in text order, over one symbolic call to it.
Its answers (`Answers`) depend only on what its `partition_key` writes down: each rule's effect
and condition and whether its selectors select the tool (or, for the risk/effects sugar on a
tool with operations, the selectors themselves), the parts of the tool the encoding reads (its
input schema; its operations, risk and effects when it has operations; the fields of its
registry entry a condition reads as `tool.*`, all of them and its id for a history term, which
selects tools), and the facts the conditions read. Rules are named by position in the bucket, never
by label, so two tools whose buckets have the same key — many tools under the same rules, with
the same schema — share one answer; a witness call is re-addressed to each tool (`Call.tool`)
and re-judged for it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from harnessc.runtime import model as m
from harnessc.runtime.model.semantics import selects
from harnessc.runtime.model.session_terms import session_terms

from .budget import out_of_budget, out_of_time
from .concrete import STRENGTH, Call
from .ledger import result_kind

__all__ = [
    "Absent",
    "Answers",
    "Example",
    "RuleKey",
    "Undecided",
    "answers_from_json",
    "answers_to_json",
    "beaten_by",
    "partition_key",
    "rule_key",
    "winner",
]

Key = tuple[str, ...]

# What the encoding reads of a tool (smt.py `Encoder`): its input schema always; the operations
# (and so its risk and effects) when a call's risk and effects follow `args.op`; its identity and
# registry entry only through `tool.*` (the fields read) and the selectors of history terms (all
# of it). Selectors otherwise select it or not, which the key records rule by rule. Never its
# texts, origin or wiring.
_CALL_FIELDS = ("input", "operations")
_OPERATION_FIELDS = ("risk", "effects")
_TOOL_FIELDS = ("id", "kind", "version", "effects", "risk", "packs", "tags")


@dataclass
class Example:
    """A call the solver found, and the position of the rule that wins it (None: the default)."""

    call: Call
    winner: int | None


@dataclass
class Absent:
    """The rule at `position` fires for some value of `key` but not when `key` is absent."""

    position: int
    key: Key
    example: Example


@dataclass
class Undecided:
    """A question the solver gave up on: `what` of the rule at `position` (None: the default).

    `reason` is why (`beyond its budget of …`, budget.py `spent`, or z3's `incomplete …`)."""

    position: int | None
    what: str
    reason: str

    @property
    def out_of_time(self) -> bool:
        """Gave up for the clock: an answer that depends on the machine, never kept."""
        return out_of_time(self.reason)

    @property
    def out_of_budget(self) -> bool:
        """Gave up for lack of resource units (budget.py): the same on every machine."""
        return out_of_budget(self.reason)


@dataclass
class Answers:
    """Everything the analysis asks of one partition, by rule position.

    `wins[p]`: a call rule p wins; else `matches[p]`: a call it matches (it loses there);
    `covers[p]`: for a rule that does not win, the positions of the rules that beat it (stronger
    effect, or the same effect and earlier) and match every call it matches; `equals[p]`: those
    of them with another effect that match exactly the calls it matches. `inexact[p]`: the
    encoding approximated part of rule p, or a question about it was not decided.
    """

    inexact: list[bool]
    wins: list[Example | None]
    matches: list[Example | None]
    covers: dict[int, list[int]] = field(default_factory=dict)
    equals: dict[int, list[int]] = field(default_factory=dict)
    absent: list[Absent] = field(default_factory=list)
    default: Example | None = None
    undecided: list[Undecided] = field(default_factory=list)
    queries: int = 0
    decided: int = 0
    """Questions answered without z3 (cells.py); `queries` counts z3's."""

    @property
    def out_of_time(self) -> bool:
        return any(u.out_of_time for u in self.undecided)


def beaten_by(rules: Sequence[m.Rule], p: int) -> list[int]:
    """The positions of the rules that beat rule p wherever both match (language.md §6): a
    stronger effect, or the same effect earlier."""
    effect = STRENGTH[rules[p].effect]
    return [
        q
        for q in range(len(rules))
        if STRENGTH[rules[q].effect] > effect or (rules[q].effect == rules[p].effect and q < p)
    ]


def winner(rules: Sequence[m.Rule], matched: Sequence[bool]) -> int | None:
    """The position of the rule that decides a call the rules at `matched` match (None: the
    default decides it)."""
    positions = [p for p, yes in enumerate(matched) if yes]
    if not positions:
        return None
    strongest = max(STRENGTH[rules[p].effect] for p in positions)
    return next(p for p in positions if STRENGTH[rules[p].effect] == strongest)


# ---------------------------------------------------------------------------------------------
# What decides a partition's answers


def _nodes(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _nodes(item)
    elif isinstance(value, list):
        for item in value:
            yield from _nodes(item)


@dataclass(frozen=True)
class RuleKey:
    """What a rule contributes to a partition's key, whatever the tool: its effect and
    condition as canonical JSON, the facts the condition reads, and the fields of the tool's
    registry entry it reads (`tool.risk`: `risk`; a history term, whose selectors select
    tools: all of them)."""

    text: str
    facts: tuple[str, ...]
    tool_fields: tuple[str, ...]


def rule_key(rule: m.Rule) -> RuleKey:
    # the condition's JSON, fields in declaration order, by a walk (pydantic's JSON is faster per
    # rule but would first build the models' serializers, a check's largest fixed cost when the
    # answers are cached); a quote inside a string is escaped, so a user's text never looks
    # like these keys
    condition = json.dumps(m.without_origins(rule.condition), separators=(",", ":"))
    facts: set[str] = set()
    fields: set[str] = set()
    if any(f'"{word}"' in condition for word in ('root":"fact', 'root":"tool', 'kind":"history')):
        for node in _nodes(json.loads(condition)):
            kind, root, parts = node.get("kind"), node.get("root"), node.get("parts")
            if kind == "path" and root == "fact" and parts:
                facts.add(parts[0])
            elif kind == "path" and root == "tool":
                fields.add(parts[0] if parts and parts[0] in _TOOL_FIELDS else "*")
            elif kind == "history":
                fields.add("*")
    tool_fields = _TOOL_FIELDS if "*" in fields else tuple(sorted(fields))
    return RuleKey(f"[{json.dumps(rule.effect)},{condition}]", tuple(sorted(facts)), tool_fields)


def selected_as(rule: m.Rule, tool: m.Tool) -> Any:
    """How the rule's selectors select the tool, as the encoding sees it: True or False, or the
    risk/effects selectors that follow the call's operation."""
    symbolic = []
    for sel in rule.selectors:
        if sel.kind in ("risk", "effects") and tool.operations:
            symbolic.append({k: v for k, v in m.without_origins(sel).items() if k != "text"})
        elif selects(sel, tool):
            return True
    return symbolic or False


def partition_key(
    spec: m.Spec,
    tool: m.Tool,
    rules: Sequence[m.Rule],
    keys: Sequence[RuleKey],
    wants_default: bool,
) -> str:
    """Canonical JSON of everything the partition's answers depend on (module docstring)."""
    fields = set(_CALL_FIELDS)
    if tool.operations:
        fields.update(_OPERATION_FIELDS)
    for k in keys:
        fields.update(k.tool_fields)
    described = {name: m.without_origins(getattr(tool, name)) for name in sorted(fields)}
    facts = sorted({name for k in keys for name in k.facts})
    # `from result(…)`: the one kind of the selected tools' results (ledger.py `result_kind`),
    # which relates the term to `from trusted` and `from untrusted`, reads other tools' trust
    results = sorted(
        {
            (term.call.model_dump_json(), result_kind(spec, term.call) or "-")
            for r, k in zip(rules, keys, strict=True)
            if '"source":"result"' in k.text
            for term in session_terms(r.condition)
            if isinstance(term, m.Provenance) and term.call is not None
        }
    )
    return json.dumps(
        {
            "tool": described,
            "rules": [[k.text, selected_as(r, tool)] for r, k in zip(rules, keys, strict=True)],
            "facts": {n: m.without_origins(spec.facts[n].type) for n in facts if n in spec.facts},
            "default": wants_default,
            **({"results": results} if results else {}),
        },
        sort_keys=True,
        separators=(",", ":"),
    )


# ---------------------------------------------------------------------------------------------
# Answers as JSON (the cache's format; a miss goes through it too, so a hit is the same value)


def _example(data: Any) -> Example | None:
    if data is None:
        return None
    return Example(Call(**data["call"]), data["winner"])


def answers_to_json(answers: Answers) -> str:
    return json.dumps(asdict(answers), sort_keys=True, separators=(",", ":"))


def answers_from_json(text: str) -> Answers:
    """The answers written by `answers_to_json`; raises (KeyError, TypeError, ValueError) on
    anything else."""
    data = json.loads(text)
    return Answers(
        inexact=[bool(x) for x in data["inexact"]],
        wins=[_example(x) for x in data["wins"]],
        matches=[_example(x) for x in data["matches"]],
        covers={int(p): list(qs) for p, qs in data["covers"].items()},
        equals={int(p): list(qs) for p, qs in data["equals"].items()},
        absent=[
            Absent(a["position"], tuple(a["key"]), _example(a["example"]))  # type: ignore[arg-type]
            for a in data["absent"]
        ],
        default=_example(data["default"]),
        undecided=[Undecided(u["position"], u["what"], u["reason"]) for u in data["undecided"]],
        queries=int(data["queries"]),
        decided=int(data.get("decided", 0)),
    )
