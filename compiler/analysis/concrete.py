"""Concrete calls, decisions and witnesses, and a reference evaluator of policies over them.

The analysis proves things symbolically; this module re-judges every witness call the plain way
(language.md §6 and §7.5), so a witness that z3 only approximated is marked inexact instead of
reaching a generated test wrong. Everything here is plain JSON-able data.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TypeAlias

from harnessc.runtime import model as m
from harnessc.runtime.model import trusted
from harnessc.runtime.model.semantics import (
    ABSENT,
    OPERATORS,
    ordering_kind,
    selects,
    value_matches,
)
from pydantic import BaseModel

__all__ = [
    "ABSENT",
    "BUILTINS",
    "Call",
    "Decision",
    "Found",
    "SessionTerm",
    "Witness",
    "canonical",
    "decide",
    "default_decision",
    "format_duration",
    "holds",
    "holds_for",
    "parse_duration",
    "read_value",
    "rule_matches",
    "schema_problems",
    "session_terms",
    "visit_nodes",
]

STRENGTH = {"allow": 0, "ask": 1, "deny": 2}

STRING = trusted(m.Type)(name="string")
PATH = trusted(m.Type)(name="path")
DURATION = trusted(m.Type)(name="duration")
LIST_OF_STRINGS = trusted(m.Type)(name="list", item=STRING)
MAP_OF_STRINGS = trusted(m.Type)(name="map", item=STRING)

# Built-in values with a known type, and whether a call always has them. The actor's identity
# (user, role, roles) is established by the session; everything else may be missing.
BUILTINS: dict[tuple[str, ...], tuple[m.Type, bool]] = {
    ("actor", "user"): (STRING, True),
    ("actor", "role"): (STRING, True),
    ("actor", "roles"): (LIST_OF_STRINGS, True),
    ("actor", "tenant"): (STRING, False),
    ("actor", "agent"): (STRING, False),
    ("actor", "session"): (STRING, False),
    ("task", "id"): (STRING, False),
    ("task", "stage"): (STRING, False),
    ("task", "purpose"): (STRING, False),
    ("call", "tool_call_id"): (STRING, True),
    ("call", "cwd"): (PATH, False),
    ("call", "timeout"): (DURATION, False),
    ("call", "target"): (STRING, False),
    ("call", "provenance"): (STRING, False),
    ("call", "env"): (MAP_OF_STRINGS, False),
}
NO_RULE_REASON = "no rule allows this call"


@dataclass
class Call:
    """One frozen call as a test would write it (`args` as JSON, durations as `"15m"`)."""

    tool: str
    args: dict[str, Any] = field(default_factory=dict)
    actor: dict[str, Any] = field(default_factory=dict)
    resource: dict[str, Any] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    task: dict[str, Any] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    execution: dict[str, Any] = field(default_factory=dict)
    connections: dict[str, bool] = field(default_factory=dict)
    """`connected(c)` by connection; a connection left out is not connected."""
    runtimes: dict[str, bool] = field(default_factory=dict)
    """`running(r)` by runtime; a runtime left out is not running."""
    session: dict[str, Any] = field(default_factory=dict)
    """Session state the decision reads, by the term's canonical form (`smt.canonical`): the
    value of a provenance, quantified or history term, or the items of `urls(…)` & co. A term
    left out has its value in a session with no earlier event (nothing seen, no call made)."""
    sources: dict[str, list[str]] = field(default_factory=dict)
    """Where a value of the call appeared before it, by the value's canonical form (an
    argument): `user`, or `TOOL:FIELD` (a result of that tool holding it in that field), as
    `harnessc diff` relates both specs' provenance (analysis/sources.py); the session prelude
    makes exactly those steps. Empty: the prelude picks sources from `session`."""


@dataclass
class Decision:
    """What the policy decides: the effect, the winning rule's label (None: the default)."""

    effect: str
    rule: str | None = None
    approvers: list[dict[str, str]] = field(default_factory=list)
    reason: str | None = None


@dataclass
class Witness:
    """A call for which `decision` is the policy's answer; `exact` when re-judging agrees."""

    policy: str
    rule: str | None
    call: Call
    decision: Decision
    exact: bool = True
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_spec_test(self, name: str, before: tuple[m.SessionStep, ...] = ()) -> m.SpecTest:
        """The witness as a `test` block of the model (for generated tests); `before` is the
        session before the call that gives its session terms their values (prelude.py)."""
        c = self.call
        approver = None
        if self.decision.approvers:
            first = self.decision.approvers[0]
            approver = m.Approver(kind=first["kind"], value=first["value"])  # type: ignore[arg-type]
        return m.SpecTest(
            name=name,
            policy=self.policy,
            tool=c.tool,
            args=c.args,
            actor=c.actor or None,
            resource=c.resource or None,
            facts=c.facts or None,
            task=c.task or None,
            env=c.env or None,
            execution=c.execution or None,
            before=before,
            expect=m.Expectation(
                effect=self.decision.effect,  # type: ignore[arg-type]
                approver=approver,
                rule=self.decision.rule,
            ),
        )


def canonical(node: m.Condition) -> str:
    """A term's canonical form: its JSON, keys sorted (what names its variable in the analysis
    and its value in a witness's session state; the runtime keys its aggregates the same way)."""
    return json.dumps(m.without_origins(node), sort_keys=True, separators=(",", ":"))


SessionTerm: TypeAlias = m.Provenance | m.Quantified | m.History | m.Extract


@dataclass(frozen=True)
class Found:
    """A session term met walking a condition: negated under `not`; `over` is the list a
    quantifier binds its variable from, when the term reads that variable."""

    term: SessionTerm
    negated: bool = False
    over: m.Value | None = None


def session_terms(node: object, negated: bool = False, bound: Any = None) -> list[Found]:
    """Every provenance, quantified, history and extract term of a condition or value, outer
    terms first (a quantifier's body, a history term's `when` and their operands too)."""
    bound = bound or {}
    out: list[Found] = []
    if isinstance(node, m.Provenance):
        over = None
        if isinstance(node.value, m.Path) and node.value.root == "var":
            over = bound.get(node.value.parts[0])
        out.append(Found(node, negated, over))
        out += session_terms(node.value, negated, bound)
    elif isinstance(node, m.Quantified):
        out.append(Found(node, negated))
        out += session_terms(node.over, negated, bound)
        out += session_terms(node.body, negated, {**bound, node.var: node.over})
    elif isinstance(node, m.History):
        out.append(Found(node, negated))
        if node.where is not None:
            out += session_terms(node.where, False)
    elif isinstance(node, m.Extract):
        out.append(Found(node, negated))
        out += session_terms(node.of, negated, bound)
    elif isinstance(node, m.Length):
        out += session_terms(node.of, negated, bound)
    elif isinstance(node, m.Compare):
        out += session_terms(node.left, negated, bound) + session_terms(node.right, negated, bound)
    elif isinstance(node, m.And | m.Or | m.ListValue):
        for item in node.items:
            out += session_terms(item, negated, bound)
    elif isinstance(node, m.Not):
        out += session_terms(node.item, not negated, bound)
    return out


def parse_duration(text: Any) -> Any:
    """`"1h30m"` → 5400000; an int is already milliseconds; anything else is ABSENT."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    ms = m.parse_duration(text) if isinstance(text, str) else None
    return ABSENT if ms is None else ms


def format_duration(ms: int) -> str:
    """5400000 → `"1h30m"`."""
    if ms <= 0:
        return "0ms"
    out = []
    for unit, size in m.DURATION_UNITS.items():
        n, ms = divmod(ms, size)
        if n:
            out.append(f"{n}{unit}")
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Normalization: what the policy sees of a call


def _normalize(value: Any, type_: m.Type) -> Any:
    if type_.name == "duration":
        return parse_duration(value)
    if type_.name == "path" and isinstance(value, str):
        return posixpath.normpath(value)
    if type_.name == "object" and isinstance(value, dict):
        return _normalize_fields(value, type_.fields)
    if type_.name == "map" and isinstance(value, dict) and type_.item is not None:
        return {k: _normalize(v, type_.item) for k, v in value.items()}
    if type_.name == "list" and isinstance(value, list) and type_.item is not None:
        return [_normalize(v, type_.item) for v in value]
    return value


def _normalize_fields(values: dict[str, Any], fields: tuple[m.Field, ...]) -> dict[str, Any]:
    out = dict(values)
    for f in fields:
        if f.name not in out and f.default is not None:
            out[f.name] = f.default
        if f.name in out:
            out[f.name] = _normalize(out[f.name], f.type)
    return out


@dataclass
class _Context:
    spec: m.Spec
    tool: m.Tool
    call: Call
    args: dict[str, Any]
    bound: dict[str, Any] = field(default_factory=dict)
    """The variables quantifiers bind (`all x in …`)."""
    result: Any = ABSENT
    """The call's result, for a history term's `when` over an earlier call (`result.*`)."""

    @classmethod
    def of(cls, spec: m.Spec, call: Call) -> _Context:
        tool = spec.tools[call.tool]
        return cls(spec, tool, call, _normalize_fields(call.args, tool.input.fields))

    def operation(self) -> m.Operation | None:
        return self.tool.operations.get(str(self.args.get("op", "")))

    def risk(self) -> str:
        op = self.operation()
        return op.risk if op is not None else self.tool.risk

    def effects(self) -> tuple[str, ...]:
        op = self.operation()
        return op.effects if op is not None else self.tool.effects

    def root(self, root: str) -> Any:
        c = self.call
        if root == "args":
            return self.args
        if root == "actor":
            actor = dict(c.actor)
            roles = list(actor.get("roles") or [])
            if "role" in actor and actor["role"] not in roles:
                roles.append(actor["role"])
            actor["roles"] = roles
            return actor
        if root == "tool":
            return {
                "id": self.tool.id,
                "kind": self.tool.kind,
                "version": self.tool.version,
                "risk": self.risk(),
                "effects": list(self.effects()),
                "tags": list(self.tool.tags),
                "packs": list(self.tool.packs),
            }
        return {"resource": c.resource, "task": c.task, "env": c.env, "call": c.execution}.get(
            root, ABSENT
        )

    def read(self, path: m.Path) -> Any:
        if path.root == "var":
            name, *rest = path.parts
            value = self.bound.get(name, ABSENT)
            for part in rest:
                value = value.get(part, ABSENT) if isinstance(value, dict) else ABSENT
            return value
        if path.root == "result":  # the call under decision has none yet
            value = self.result
            for part in path.parts:
                value = value.get(part, ABSENT) if isinstance(value, dict) else ABSENT
            return value
        if path.root == "fact":
            name, *rest = path.parts
            value = self.call.facts.get(name, ABSENT)
            fact = self.spec.facts.get(name)
            if value is not ABSENT and fact is not None:
                value = _normalize(value, fact.type)
            parts: list[str] = rest
        else:
            value = self.root(path.root)
            parts = list(path.parts)
        for part in parts:
            value = value.get(part, ABSENT) if isinstance(value, dict) else ABSENT
        if path.root == "call" and path.parts == ("timeout",):
            value = parse_duration(value) if value is not ABSENT else ABSENT
        return value


# ---------------------------------------------------------------------------------------------
# Conditions


class _Name(str):
    """A bare enum member: equal to the string of its name."""


def _value(node: object, ctx: _Context) -> Any:
    if isinstance(node, m.Literal):
        return node.value
    if isinstance(node, m.EnumMember):
        return _Name(node.name)
    if isinstance(node, m.ListValue):
        return [_value(i, ctx) for i in node.items]
    if isinstance(node, m.FactCall):
        table = ctx.call.connections if node.func == "connected" else ctx.call.runtimes
        return bool(table.get(node.name, False))
    if isinstance(node, m.Path):
        return ctx.read(node)
    if isinstance(node, m.Length):
        of = _value(node.of, ctx)
        return len(of) if isinstance(of, list | dict | str) else ABSENT
    if isinstance(node, m.Extract):
        return ctx.call.session.get(canonical(node), ABSENT)
    if isinstance(node, m.History):
        return _history(node, ctx)
    if isinstance(node, m.Index):
        of, key = _value(node.of, ctx), _value(node.key, ctx)
        if not isinstance(of, dict) or not isinstance(key, str) or key not in of:
            return ABSENT
        return of[key]
    return ABSENT


def _history(node: m.History, ctx: _Context) -> Any:
    """A history term: from the call's session state, else as a session with no earlier event
    sees it (nothing called or seen; `count` and `sum` only this call, when it is selected)."""
    known = ctx.call.session.get(canonical(node), ABSENT)
    if known is not ABSENT:
        return known
    if node.func in ("called", "succeeded", "seen"):
        return False
    view = {"risk": ctx.risk(), "effects": ctx.effects()}
    counts = any(selects(s, ctx.tool, view) for s in node.selectors) and (
        node.where is None or holds(node.where, ctx)
    )
    if node.func == "count":
        return 1 if counts else 0
    amount = _value(node.field, ctx) if counts and node.field is not None else ABSENT
    return amount if _number(amount) else 0


def _provenance(node: m.Provenance, ctx: _Context) -> bool:
    """`value from source`: from the call's session state; else, with no earlier event, a
    present value is from nowhere and from nothing else. An absent value is from nothing."""
    value = _value(node.value, ctx)
    if value is ABSENT:
        return False
    known = ctx.call.session.get(canonical(node), ABSENT)
    if known is not ABSENT:
        return bool(known)
    return node.source == "nowhere"


def _quantified(node: m.Quantified, ctx: _Context) -> bool:
    """`all`/`any x in …`: false over an absent value (as the runtime: it holds for neither),
    else from the call's session state, else item by item."""
    items = _value(node.over, ctx)
    if isinstance(node.over, m.Path) and not isinstance(items, list):
        return False  # the call lacks the list: whatever state the session holds for it
    known = ctx.call.session.get(canonical(node), ABSENT)
    if known is not ABSENT:
        return bool(known)
    if not isinstance(items, list):  # an extraction the session state does not give
        return False
    outer = ctx.bound.get(node.var, ABSENT)
    results = []
    for item in items:
        ctx.bound[node.var] = item
        results.append(holds(node.body, ctx))
    if outer is ABSENT:
        ctx.bound.pop(node.var, None)
    else:
        ctx.bound[node.var] = outer
    return all(results) if node.quantifier == "all" else any(results)


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _compare(c: m.Compare, ctx: _Context) -> bool:
    left, right = _value(c.left, ctx), _value(c.right, ctx)
    operator = OPERATORS[c.op]
    named = isinstance(c.right, m.EnumMember | m.Literal)
    if operator.family == "has" and isinstance(left, dict) and not named:
        return False  # a record's field is named by a literal, never by a value read
    return operator.concrete(left, right, ordering_kind(c.left, c.right))


def holds(cond: object, ctx: _Context) -> bool:
    if isinstance(cond, m.Compare):
        return _compare(cond, ctx)
    if isinstance(cond, m.And):
        return all(holds(i, ctx) for i in cond.items)
    if isinstance(cond, m.Or):
        return any(holds(i, ctx) for i in cond.items)
    if isinstance(cond, m.Not):
        return not holds(cond.item, ctx)
    if isinstance(cond, m.Provenance):
        return _provenance(cond, ctx)
    if isinstance(cond, m.Quantified):
        return _quantified(cond, ctx)
    return _value(cond, ctx) is True


def holds_for(
    spec: m.Spec,
    cond: m.Condition,
    call: Call,
    result: Any = ABSENT,
    bound: dict[str, Any] | None = None,
) -> bool:
    """Whether `cond` holds for a call (and, for an earlier call, its result), with the
    variables a quantifier binds (`bound`: a body judged for one item)."""
    ctx = _Context.of(spec, call)
    ctx.result = result
    ctx.bound.update(bound or {})
    return holds(cond, ctx)


def read_value(spec: m.Spec, value: m.Value, call: Call) -> Any:
    """A value as the policy reads it on `call` (ABSENT when it is not there)."""
    return _value(value, _Context.of(spec, call))


def rule_matches(spec: m.Spec, rule: m.Rule, call: Call) -> bool:
    ctx = _Context.of(spec, call)
    return _matches(rule, ctx)


def _matches(rule: m.Rule, ctx: _Context) -> bool:
    view = {"risk": ctx.risk(), "effects": ctx.effects()}
    if not any(selects(s, ctx.tool, view) for s in rule.selectors):
        return False
    return rule.condition is None or holds(rule.condition, ctx)


def _approvers(items: tuple[m.Approver, ...]) -> list[dict[str, str]]:
    return [{"kind": a.kind, "value": a.value} for a in items]


def default_decision(spec: m.Spec, policy: m.Policy, call: Call) -> Decision:
    d = policy.default
    if d is None:
        return Decision("deny", None, [], NO_RULE_REASON)
    if d.table is not None:
        table = spec.risk_tables.get(d.table)
        entry = table.entries.get(_Context.of(spec, call).risk()) if table else None  # type: ignore[call-overload]
        if entry is None:
            return Decision("deny", None, [], NO_RULE_REASON)
        return Decision(entry.effect, None, _approvers(entry.approvers), entry.reason)
    return Decision(d.effect or "deny", None, _approvers(d.approvers), d.reason)


def decide(spec: m.Spec, policy: m.Policy, call: Call) -> Decision:
    """DENY beats ASK beats ALLOW; the first matching rule of that effect wins (§6)."""
    ctx = _Context.of(spec, call)
    matched = [r for r in policy.rules if _matches(r, ctx)]
    if not matched:
        return default_decision(spec, policy, call)
    strongest = max(STRENGTH[r.effect] for r in matched)
    winner = next(r for r in matched if STRENGTH[r.effect] == strongest)
    return Decision(winner.effect, winner.label, _approvers(winner.approvers), winner.reason)


def schema_problems(spec: m.Spec, call: Call) -> list[str]:
    """Where the call's arguments break the tool's input schema (types, enums, patterns)."""
    tool = spec.tools[call.tool]
    problems: list[str] = []
    _check_fields(call.args, tool.input.fields, "args", problems)
    return problems


def _check_fields(
    values: dict[str, Any], fields: tuple[m.Field, ...], where: str, out: list[str]
) -> None:
    known = {f.name for f in fields}
    out += [f"{where}.{k} is not in the schema" for k in values if k not in known]
    for f in fields:
        if f.name not in values:
            if f.required:
                out.append(f"{where}.{f.name} is missing")
            continue
        _check_value(values[f.name], f, f.type, f"{where}.{f.name}", out)


def _check_value(v: Any, f: m.Field | None, t: m.Type, where: str, out: list[str]) -> None:
    name = t.name
    ok = {
        "string": isinstance(v, str),
        "path": isinstance(v, str),
        "url": isinstance(v, str),
        "duration": parse_duration(v) is not ABSENT,
        "int": isinstance(v, int) and not isinstance(v, bool),
        "float": _number(v),
        "bool": isinstance(v, bool),
        "enum": v in t.values,
        "list": isinstance(v, list),
        "map": isinstance(v, dict),
        "object": isinstance(v, dict),
    }[name]
    if not ok:
        out.append(f"{where} has the wrong type")
        return
    if f is not None:
        size = len(v) if isinstance(v, str | list | dict) and name not in ("int", "float") else v
        if f.min is not None and size < f.min:
            out.append(f"{where} is below its minimum")
        if f.max is not None and size > f.max:
            out.append(f"{where} is above its maximum")
        if f.pattern is not None and isinstance(v, str) and not value_matches(v, f.pattern):
            out.append(f"{where} does not match its pattern")
    if name == "object":
        _check_fields(v, t.fields, where, out)
    elif name in ("list", "map") and t.item is not None:
        items = v if isinstance(v, list) else list(v.values())
        for i in items:
            _check_value(i, None, t.item, where, out)


def visit_nodes(node: object, visit: Callable[[object], bool]) -> None:
    """Every node of a condition or value, outer first; `visit` returns True to skip inside."""
    if isinstance(node, BaseModel):
        if visit(node):
            return
        for name in type(node).model_fields:
            visit_nodes(getattr(node, name), visit)
    elif isinstance(node, tuple | list):
        for item in node:
            visit_nodes(item, visit)
