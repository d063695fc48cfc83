"""`harnessc why` and `why()`: one decision explained, and the nearest calls decided differently.

For a call (given, or recorded in an event log) and the policy that judges it:

1. **The decision**: its effect, the winning rule with `file:line` and reason (or the default,
   or why the call was refused before any rule), the rule's condition broken into its parts
   (`and`/`or`/`not`, comparisons, `has`, provenance, quantified and history terms), each with
   the values it read from the call and whether it held; the other rules that matched and lost
   (a weaker effect, or a later rule of the same effect); and the rules that select the tool but
   did not match, with the first part of their condition that failed and the value it read.
2. **The nearest calls decided differently** (compiler/analysis/nearest.py): for each other
   effect, the fewest values to change — arguments, actor, facts, resource, session state —
   found by z3 and verified by deciding the changed call with the runtime; when that change is
   not to the arguments alone, also the nearest change of the arguments only, or the rules that
   stand in the way of every such change.

`Explanation.describe()` says it in words, `Explanation.to_dict()` as JSON (`"version": 1`).

>>> # from harnessc.compiler.pipeline import check
>>> # spec = check(["examples/remediation/remediation.harness"]).model
>>> # call = {"tool": "production.deploy", "args": {...}, "actor": {...}}
>>> # print(why(spec, call, policy="remediation").describe())
"""

from __future__ import annotations

import contextlib
import difflib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harnessc.runtime import model as m
from harnessc.runtime.judge.conditions import Scope, evaluate, read_path, value_of
from harnessc.runtime.judge.policy import CallContext, Decision, PolicyEngine
from harnessc.runtime.model.canonical import CanonicalError, parse_json
from harnessc.runtime.model.semantics import selects
from harnessc.runtime.session.calls import judge_policies
from harnessc.runtime.session.recorded import policies_in, recorded_decision

from ..analysis.comparison import expires_text, self_approval_text
from ..analysis.concrete import Call, schema_problems
from ..analysis.nearest import (
    EFFECTS,
    Change,
    Counterfactual,
    bucket_rules,
    call_scope,
    has_field,
    nearest,
    tested_field,
)
from ..analysis.text import prelude_text, selector_text, spec_text
from ..testing import call_of

if TYPE_CHECKING:
    from harnessc.runtime.log.store import EventStore

__all__ = [
    "Explanation",
    "Part",
    "RuleCheck",
    "WhyError",
    "call_from_json",
    "judging_policy",
    "why",
    "why_recorded",
]

VERSION = 1
"""The version of `Explanation.to_dict()`'s shape (docs/review.md)."""

_OUTCOME = {"allow": "ALLOWED", "deny": "DENIED", "ask": "held for approval (ASK)"}
_DECIDED = {"allow": "ALLOWED", "deny": "DENIED", "ask": "ASKED (held for approval)"}

_SELF_APPROVAL = {
    True: "allow (the requester may approve their own call)",
    False: "deny (someone other than the requester must approve)",
}
"""How `why` states an ASK's effective `self_approval` (as written, else by the call's
risk)."""


class WhyError(ValueError):
    """The call or the policy cannot be explained: an unknown tool, agent or policy, arguments
    that break the tool's schema. The message says what to fix."""


# ---------------------------------------------------------------------------------------------
# The explanation


@dataclass
class Part:
    """One part of a condition on the call: `kind` is `and`, `or`, `not`, `compare`, `has`,
    `provenance`, `quantified`, `history` or `value`; `values` what it read (None: absent)."""

    text: str
    kind: str
    holds: bool
    values: list[tuple[str, Any]] = field(default_factory=list)
    parts: list[Part] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "kind": self.kind,
            "holds": self.holds,
            "values": [
                {"what": w, "value": _json(v), "present": v is not None} for w, v in self.values
            ],
            "parts": [p.to_dict() for p in self.parts],
        }


@dataclass
class RuleCheck:
    """A rule of the policy that selects the call's tool, and what it made of the call.

    `status`: `won`, `lost` (it matched; `why` says what beat it) or `no-match` (`failed` is the
    first part of its condition that failed, or None when no selector selects this call)."""

    rule: m.Rule
    status: str
    why: str
    condition: Part | None = None
    failed: Part | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule.label,
            "effect": self.rule.effect,
            "origin": _where(self.rule.origin),
            "status": self.status,
            "why": self.why,
            "condition": self.condition.to_dict() if self.condition is not None else None,
            "failed": self.failed.to_dict() if self.failed is not None else None,
        }


@dataclass
class Explanation:
    """Why `policy` decided `call` as `decision`, and the nearest calls decided otherwise."""

    policy: str
    call: CallContext
    decision: Decision
    rules: list[RuleCheck]
    counterfactuals: list[Counterfactual]
    default: str | None = None
    """When the default decided: what it is (`default deny`, `risk table std.risk.defaults`)."""
    notes: list[str] = field(default_factory=list)
    recorded: dict[str, Any] | None = None
    """For a recorded decision: its id, the effect it had and the policy version it was made
    under (`harnessc why --log`)."""

    @property
    def winner(self) -> RuleCheck | None:
        return next((r for r in self.rules if r.status == "won"), None)

    def to_dict(self) -> dict[str, Any]:
        d = self.decision
        return {
            "version": VERSION,
            "policy": self.policy,
            "call": _call_dict(self.call),
            "decision": {
                "effect": d.effect,
                "rule": d.rule,
                "origin": _where(d.origin),
                "reason": d.reason,
                "approvers": [{"kind": a.kind, "value": a.value} for a in d.approvers],
                "expires": expires_text(d.expires_ms) if d.effect == "ask" else None,
                "self_approval": (
                    self_approval_text(d.requester_may_approve) if d.effect == "ask" else None
                ),
                "default": self.default if d.default_used else None,
                "refused": d.rule is None and not d.default_used,
            },
            "rules": [r.to_dict() for r in self.rules],
            "counterfactuals": [
                _counterfactual_dict(self.call.tool_id, c, self.recorded is not None)
                for c in self.counterfactuals
            ],
            "recorded": self.recorded,
            "notes": list(self.notes),
        }

    def describe(self) -> str:
        return "\n".join(_describe(self))


# ---------------------------------------------------------------------------------------------
# Which policy, which call


def judging_policy(
    spec: m.Spec, *, agent: str | None = None, policy: str | None = None
) -> m.Policy:
    """The policy that judges the call: `policy`, `agent`'s, or the only policy of the root
    module."""
    if policy is not None:
        found = spec.policy(policy)
        if found is None:
            raise WhyError(f"unknown policy `{policy}`{_near(policy, spec.policies)}")
        return found
    if agent is not None:
        a = spec.agents.get(agent) or spec.agents.get(spec.qualified(agent))
        if a is None:
            raise WhyError(f"unknown agent `{agent}`{_near(agent, spec.agents)}")
        if a.policy is None:
            raise WhyError(f"agent `{agent}` has no policy")
        found = spec.policy(a.policy)
        assert found is not None, a.policy
        return found
    root = [p for n, p in spec.policies.items() if n.rpartition(".")[0] == spec.root_module]
    if len(root) != 1:
        names = ", ".join(f"`{p.name.rpartition('.')[2]}`" for p in root) or "none"
        raise WhyError(
            f"say which policy judges the call (--policy or --agent); the spec declares {names}"
        )
    return root[0]


def call_from_json(spec: m.Spec, data: Mapping[str, Any]) -> CallContext:
    """A call written as JSON data — `tool`, `args`, `actor`, `facts`, `resource`, `task`, `env`,
    `execution`, and `before`, the session's earlier steps (`{"said": …}`, `{"tool": …,
    "args": …, "result": …}`) — as `harnessc test` builds a test's call (schema defaults filled
    in; a declared connection or runtime set to `true` in `facts` is up; the steps replayed into
    the session's ledger). Raises WhyError for an unknown tool or arguments the tool's schema
    refuses."""
    tool = data.get("tool")
    if not isinstance(tool, str) or tool not in spec.tools:
        raise WhyError(f"unknown tool `{tool}`{_near(str(tool), spec.tools)}")
    parts: dict[str, Any] = {}
    for name in ("args", "actor", "facts", "resource", "task", "env", "execution"):
        value = data.get(name)
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise WhyError(f"`{name}` must be a JSON object, not {json.dumps(value)[:60]}")
        parts[name] = dict(value)
    problems = schema_problems(spec, Call(tool=tool, args=dict(parts.get("args", {}))))
    if problems:
        raise WhyError(f"the arguments do not fit the schema of `{tool}`: " + "; ".join(problems))
    before = data.get("before") or []
    if not isinstance(before, list):
        raise WhyError("`before` must be a JSON list of steps")
    steps = []
    for n, step in enumerate(before, 1):
        try:
            steps.append(m.SessionStep.model_validate(step))
        except ValueError:
            raise WhyError(
                f'step {n} of `before` is not a step: write {{"said": TEXT}} or '
                '{"tool": ID, "args": {…}, "result": …, "ago_ms": N}'
            ) from None
        if steps[-1].tool is not None and steps[-1].tool not in spec.tools:
            raise WhyError(f"step {n} of `before` calls an unknown tool `{steps[-1].tool}`")
    test = m.SpecTest(name="why", tool=tool, before=tuple(steps), **parts)
    return call_of(spec, test)


def _near(name: str, known: Mapping[str, Any]) -> str:
    short = {k.rpartition(".")[2] if "." in k else k: k for k in known}
    found = difflib.get_close_matches(name, [*known, *short], n=1)
    return f"; did you mean `{found[0]}`?" if found else ""


# ---------------------------------------------------------------------------------------------
# The explanation of one decision


def why(
    spec: m.Spec,
    call: CallContext | Mapping[str, Any],
    *,
    agent: str | None = None,
    policy: str | None = None,
    counterfactuals: bool = True,
    engine: PolicyEngine | None = None,
) -> Explanation:
    """Explain how the policy (`policy`, `agent`'s, or the root module's only one) decides
    `call` — a runtime `CallContext`, or JSON data as `call_from_json` reads it — and, unless
    `counterfactuals` is False, find the nearest calls it decides otherwise (needs z3)."""
    ctx = call if isinstance(call, CallContext) else call_from_json(spec, call)
    if ctx.tool_id not in spec.tools:
        raise WhyError(f"unknown tool `{ctx.tool_id}`{_near(ctx.tool_id, spec.tools)}")
    judged = judging_policy(spec, agent=agent, policy=policy)
    engine = engine or PolicyEngine(spec)
    decision = engine.decider(judged.name).decide(ctx)
    scope = call_scope(spec, ctx, engine)
    tool = spec.tools[ctx.tool_id]
    checks = [_check(rule, scope, tool, decision) for rule in bucket_rules(judged, tool)]
    out = Explanation(judged.name, ctx, decision, checks, [], _default_text(spec, judged, decision))
    if decision.rule is None and not decision.default_used:
        out.rules = []  # no rule judged it
        out.notes.append(f"the call was refused before any rule: {decision.reason}")
        return out
    if counterfactuals:
        targets = [e for e in EFFECTS if e != decision.effect]
        out.counterfactuals = nearest(spec, judged, ctx, targets, engine)
    return out


def _check(rule: m.Rule, scope: Scope, tool: m.Tool, decision: Decision) -> RuleCheck:
    selected = [s for s in rule.selectors if selects(s, tool, scope.tool)]
    if not selected:
        chosen = ", ".join(selector_text(s) for s in rule.selectors)
        return RuleCheck(rule, "no-match", f"`{chosen}` does not select this call")
    part = _part(rule.condition, scope) if rule.condition is not None else None
    if part is not None and not part.holds:
        return RuleCheck(rule, "no-match", "its condition does not hold", part, _first_failed(part))
    if rule.label == decision.rule:
        return RuleCheck(rule, "won", _won(rule, decision), part)
    winner = decision.rule or "the decision"
    if rule.effect != decision.effect:
        why_lost = f"a weaker effect: {decision.effect} beats {rule.effect}"
    else:
        why_lost = f"a later rule of the same effect: `{winner}` comes first"
    return RuleCheck(rule, "lost", why_lost, part)


def _won(rule: m.Rule, decision: Decision) -> str:
    others = [label for label in decision.matched if label != rule.label]
    if not others:
        return "it is the only matching rule"
    return f"the first matching rule of the strongest effect ({rule.effect})"


def _first_failed(part: Part) -> Part:
    """The innermost first part that failed: into an `and`, not into an `or` or a `not`."""
    if part.kind == "and":
        for inner in part.parts:
            if not inner.holds:
                return _first_failed(inner)
    return part


def _part(cond: object, scope: Scope) -> Part:
    text = spec_text(cond)
    holds = evaluate(cond, scope)  # type: ignore[arg-type]
    if isinstance(cond, m.And | m.Or):
        kind = "and" if isinstance(cond, m.And) else "or"
        return Part(text, kind, holds, [], [_part(i, scope) for i in cond.items])
    if isinstance(cond, m.Not):
        return Part(text, "not", holds, [], [_part(cond.item, scope)])
    if isinstance(cond, m.Compare):
        kind = "has" if cond.op == "has" else "compare"
        return Part(text, kind, holds, _compare_values(cond, scope))
    if isinstance(cond, m.Provenance):
        return Part(
            text, "provenance", holds, [(spec_text(cond.value), value_of(cond.value, scope))]
        )
    if isinstance(cond, m.Quantified):
        return Part(text, "quantified", holds, [(spec_text(cond.over), value_of(cond.over, scope))])
    if isinstance(cond, m.History):
        return Part(text, "history", holds, [(text, value_of(cond, scope))])
    return Part(text, "value", holds, [(text, value_of(cond, scope))])


def _compare_values(c: m.Compare, scope: Scope) -> list[tuple[str, Any]]:
    if has_field(c):
        path = tested_field(c)
        return [(spec_text(path), read_path(path, scope))]
    out = []
    for side in (c.left, c.right):
        if isinstance(side, m.Literal | m.EnumMember | m.ListValue):
            continue
        out.append((spec_text(side), value_of(side, scope)))
    return out


def _default_text(spec: m.Spec, policy: m.Policy, decision: Decision) -> str | None:
    if not decision.default_used:
        return None
    d = policy.default
    if d is None:
        return "no default: a call no rule matches is denied"
    if d.table is not None:
        return f"default `{d.table}`: the call's risk maps to {decision.effect}"
    return f"default {d.effect}"


# ---------------------------------------------------------------------------------------------
# A recorded decision


def why_recorded(
    spec: m.Spec,
    store: EventStore,
    decision_id: str,
    *,
    agent: str | None = None,
    policy: str | None = None,
    counterfactuals: bool = True,
) -> Explanation:
    """Explain the recorded decision `decision_id` of an event log under `spec`: the call as it
    was decided (its arguments, actor, facts and session as of its position, read by
    `runtime.recorded`), judged by `policy`, `agent`'s policy, or else the policies of its
    session's agent in `spec`. The explanation's `recorded` says what the log holds (the
    effect, rule and policy version), and a note says when the spec given is another version
    or decides the call otherwise."""
    found = recorded_decision(store, decision_id, spec)
    if found is None:
        raise WhyError(f"the log holds no decision `{decision_id}`")
    if found.context is None:
        if found.redacted:
            withheld = ", ".join(f"`{p}`" for p in found.redacted)
            raise WhyError(
                f"decision `{decision_id}` cannot be decided again: the log withholds {withheld}"
            )
        raise WhyError(
            f"decision `{decision_id}` cannot be decided again: {found.missing or 'no call'}"
        )
    notes: list[str] = []
    engine = PolicyEngine(spec)
    if agent is None and policy is None:
        policies = policies_in(spec, found)
        if isinstance(policies, str):
            raise WhyError(
                f"decision `{decision_id}` has no policy in this spec: {policies}; "
                "name one with --policy or --agent"
            )
        judged = judge_policies(engine, policies, found.context, agent=str(found.agent))
        policy = judged[0].policy
        if len(policies) > 1:
            listed = ", ".join(f"`{p}`" for p in policies)
            notes.append(
                f"its session is judged by {listed}; this explains `{policy}`, whose decision "
                "is the session's"
            )
    out = why(
        spec,
        found.context,
        agent=agent,
        policy=policy,
        counterfactuals=counterfactuals,
        engine=engine,
    )
    outcome = found.outcome
    version = spec.content_hash()
    out.recorded = {
        **found.to_dict(),
        "spec_version": version,
        "same_version": outcome.policy_version == version,
    }
    if outcome.policy_version != version:
        notes.append(
            f"the decision was recorded under policy version {outcome.policy_version}; it is "
            f"explained under the spec given, version {version}"
        )
    now = out.decision
    if (now.effect, now.rule) != (outcome.effect, outcome.rule):
        notes.append(
            f"recorded: {outcome.effect} by {outcome.rule or 'the default'}; under this spec: "
            f"{now.effect} by {now.rule or 'the default'}"
        )
    out.notes = notes + out.notes
    return out


# ---------------------------------------------------------------------------------------------
# In words


def _where(origin: m.SourceRef | None) -> str | None:
    return f"{origin.file}:{origin.line}" if origin is not None else None


def _value(value: Any) -> str:
    if value is None:
        return "absent"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and math.isfinite(value):
        return repr(value)
    return json.dumps(_json(value), ensure_ascii=False)


def _json(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_json(v) for v in value]
    return str(value)


def _call_dict(call: CallContext) -> dict[str, Any]:
    return {
        "tool": call.tool_id,
        "args": _json(call.args),
        "actor": _json(call.actor),
        "resource": _json(call.resource),
        "facts": _json(call.facts),
        "task": _json(call.task),
        "env": _json(call.env),
        "execution": _json(call.execution),
        "connected": sorted(call.connected),
        "running": sorted(call.running),
    }


def _rule_name(rule: str | None, origin: m.SourceRef | None) -> str:
    where = _where(origin)
    name = f"rule `{rule}`" if rule else "the policy's default"
    return f"{name}, {where}" if where else name


def _change_text(c: Change) -> str:
    old = _value(c.old) if c.old_present else "absent"
    new = _value(c.new) if c.new_present else "absent"
    if c.new_present and isinstance(c.new, list) and isinstance(c.old, list | None):
        # a list: the items to add and to take out, not the whole list again
        before = list(c.old or [])
        added = [_value(i) for i in c.new if i not in before]
        removed = [_value(i) for i in before if i not in c.new]
        words = []
        if added:
            words.append("had " + " and ".join(added))
        if removed:
            words.append("did not have " + " or ".join(removed))
        if words:
            return f"`{c.what}` " + " and ".join(words)
    return f"`{c.what}` were {new} instead of {old}"


def _changes_text(changes: Sequence[Change]) -> str:
    own = [_change_text(c) for c in changes if not c.implied]
    text = " and ".join(own)
    implied = [c for c in changes if c.implied]
    if implied:
        text += (
            " (so " + ", ".join(_change_text(c).replace(" were ", " is ", 1) for c in implied) + ")"
        )
    return text


def _counterfactual_lines(tool: str, c: Counterfactual, recorded: bool = False) -> list[str]:
    outcome = _OUTCOME[c.target]
    only = " of the arguments" if c.scope == "arguments" else ""
    if c.status == "found":
        assert c.decision is not None
        rule = _rule_name(c.decision.rule, c.decision.origin)
        head = "changing only the arguments: " if c.scope == "arguments" else ""
        lines = [f"{head}`{tool}` would be {outcome} if {_changes_text(c.changes)} ({rule})"]
        what = "recorded" if recorded else "given"
        if c.session_replaced and not c.before:
            lines.append(f"  with no earlier step in the session (in place of the {what} one)")
        elif c.before:
            instead = f" (in place of the {what} one)" if c.session_replaced else ""
            lines.append(f"  with this session before the call{instead}:")
            lines += [f"    {step}" for step in prelude_text(c.before)]
        return lines
    if c.status == "unreachable":
        if c.scope == "any":
            return [f"no call of `{tool}` is {outcome} under this policy, whatever its values"]
        fresh = " (to values new to its session)" if c.fresh_only else ""
        lines = [f"no change{only}{fresh} makes this call {outcome}:"]
        for b, values in c.blockers:
            lines.append(
                f"  rule `{b.label}` ({b.effect}, {_where(b.origin)}) matches every "
                f"such call{_given(values)}"
            )
        if c.missing:
            word = c.target.upper()
            lines.append(f"  no {word} rule can match it{' either' if c.blockers else ''}:")
        for absent, values in c.missing:
            lines.append(f"    `{absent.label}` ({_where(absent.origin)}){_given(values)}")
        if c.deciders:
            lines.append("  every such call is decided by another rule, one of:")
            lines += [f"    `{r.label}` ({r.effect}, {_where(r.origin)})" for r in c.deciders]
        return lines
    if c.status == "undecided":
        changing = " changing only the arguments" if only else ""
        return [f"the solver gave up looking for a call{changing} that is {outcome} ({c.reason})"]
    return [
        f"no verified call{' changing only the arguments' if only else ''} that is {outcome}: "
        "the solver's proposals were decided otherwise "
        f"by the runtime ({c.reason})"
    ]


def _given(values: Sequence[tuple[str, Any]]) -> str:
    if not values:
        return ""
    return " given " + ", ".join(f"{w} = {_value(v)}" for w, v in values)


def _part_lines(part: Part, depth: int) -> list[str]:
    mark = "✓" if part.holds else "✗"
    read = "; ".join(f"{w} = {_value(v)}" for w, v in part.values)
    line = f"{'  ' * depth}{mark} {part.text}" + (f"   [{read}]" if read else "")
    out = [line]
    for inner in part.parts:
        out += _part_lines(inner, depth + 1)
    return out


def _values(part: Part) -> list[tuple[str, Any]]:
    """What a part and the parts inside it read, each value once."""
    found = dict(part.values)
    for inner in part.parts:
        for w, v in _values(inner):
            found.setdefault(w, v)
    return list(found.items())


def _describe(e: Explanation) -> list[str]:
    d = e.decision
    tool = e.call.tool_id
    lines = [f"`{tool}` is {_DECIDED[d.effect]} under policy `{e.policy}`"]
    if e.recorded is not None:
        held, was = e.recorded, e.recorded["outcome"]
        lines.append(
            f"recorded decision {held['decision_id']} (position {held['position']}, "
            f"{held['time']}): {was['effect']} by {was['rule'] or 'the default'}"
        )
    approvers = ", ".join(f"{a.kind} {json.dumps(a.value)}" for a in d.approvers)
    if d.rule is None and not d.default_used:
        lines.append(f"refused before any rule: {d.reason}")
    elif d.rule is None:
        lines.append(f"no rule matched: {e.default} ({_where(d.origin) or 'built in'})")
    else:
        lines.append(f"by {_rule_name(d.rule, d.origin)}")
    if (d.reason and d.rule is not None) or (d.default_used and d.reason):
        lines.append(f"reason: {d.reason}")
    if approvers:
        lines.append(f"approver: {approvers}")
    if d.effect == "ask" and d.expires_ms is not None:
        lines.append(f"expires: {expires_text(d.expires_ms)} (an unanswered request lapses then)")
    if d.effect == "ask":
        lines.append(f"self-approval: {_SELF_APPROVAL[d.requester_may_approve]}")
    winner = e.winner
    if winner is not None:
        lines.append(f"why this rule: {winner.why}")
        if winner.condition is not None:
            lines.append("its condition held:")
            lines += _part_lines(winner.condition, 1)
        else:
            lines.append("it has no condition: it matches every call it selects")
    lost = [r for r in e.rules if r.status == "lost"]
    if lost:
        lines.append("also matched, and lost:")
        lines += [
            f"  `{r.rule.label}` ({r.rule.effect}, {_where(r.rule.origin)}): {r.why}" for r in lost
        ]
    missed = [r for r in e.rules if r.status == "no-match"]
    if missed:
        lines.append("did not match:")
        for r in missed:
            head = f"  `{r.rule.label}` ({r.rule.effect}, {_where(r.rule.origin)}): "
            if r.failed is None:
                lines.append(head + r.why)
                continue
            read = "; ".join(f"{w} = {_value(v)}" for w, v in _values(r.failed))
            lines.append(head + f"`{r.failed.text}` is false" + (f" ({read})" if read else ""))
    if e.counterfactuals:
        lines.append("nearest calls decided differently:")
        for c in e.counterfactuals:
            lines += [
                f"  {line}" for line in _counterfactual_lines(tool, c, e.recorded is not None)
            ]
    lines += [f"note: {n}" for n in e.notes]
    return lines


def _counterfactual_dict(tool: str, c: Counterfactual, recorded: bool) -> dict[str, Any]:
    d = c.decision
    return {
        "target": c.target,
        "scope": c.scope,
        "status": c.status,
        "changes": [dict(x.to_dict(), old=_json(x.old), new=_json(x.new)) for x in c.changes],
        "decision": None
        if d is None
        else {"effect": d.effect, "rule": d.rule, "origin": _where(d.origin), "reason": d.reason},
        "call": _call_dict(c.call) if c.call is not None else None,
        "before": [s.model_dump(mode="json", exclude_defaults=True) for s in c.before],
        "session_replaced": c.session_replaced,
        "fresh_only": c.fresh_only,
        "reason": c.reason or None,
        "blockers": [
            {
                "rule": r.label,
                "effect": r.effect,
                "origin": _where(r.origin),
                "given": _given_dict(v),
            }
            for r, v in c.blockers
        ],
        "deciders": [
            {"rule": r.label, "effect": r.effect, "origin": _where(r.origin)} for r in c.deciders
        ],
        "missing": [
            {
                "rule": r.label,
                "effect": r.effect,
                "origin": _where(r.origin),
                "given": _given_dict(v),
            }
            for r, v in c.missing
        ],
        "text": "\n".join(_counterfactual_lines(tool, c, recorded)),
    }


def _given_dict(values: Sequence[tuple[str, Any]]) -> list[dict[str, Any]]:
    return [{"what": w, "value": _json(v), "present": v is not None} for w, v in values]


# ---------------------------------------------------------------------------------------------
# The command


def run(args: Any) -> int:
    """`harnessc why SPEC …` (compiler/cli.py): 0 explained, 2 a usage error or a spec that does
    not compile (its diagnostics printed as `check` prints them)."""
    import sys

    from harnessc.dsl.render_formats import print_diagnostics

    from ..pipeline import check

    def fail(message: str) -> int:
        sys.stderr.write(f"harnessc: {message}\n")
        return 2

    if args.tool is None and args.log is None:
        return fail("say which call: --tool TOOL --args JSON, or --log URL --decision ID")
    if args.log is not None and args.tool is not None:
        return fail("say which call: --tool for a given call, or --log for a recorded one")
    if args.log is not None and args.decision is None:
        return fail("--log needs --decision ID (a decision's id, dec-…)")
    data: dict[str, Any] = {"tool": args.tool}
    for name in ("args", "actor", "facts", "resource", "task", "env", "before"):
        text = getattr(args, name)
        if text is None:
            continue
        try:
            data[name] = parse_json(text)
        except CanonicalError as error:
            return fail(f"--{name} is not valid JSON: {error.reason}")
    result = check([args.spec])
    if not result.ok or result.model is None:
        print_diagnostics(result.diagnostics)
        return 2
    try:
        if args.log is not None:
            explained = _recorded(result.model, args)
        else:
            explained = why(result.model, data, agent=args.agent, policy=args.policy)
    except WhyError as error:
        return fail(str(error))
    if args.format == "json":
        print(json.dumps(explained.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(explained.describe())
    return 0


def _recorded(spec: m.Spec, args: Any) -> Explanation:
    """`--log URL --decision ID`: the log opened read-only, its chain verified (its key from
    the environment)."""
    from harnessc.runtime.log.chain import StoreError
    from harnessc.runtime.log.cut import archived_note

    from .replay import NoLog, vouched_log

    try:
        store = vouched_log(args.log, archives=getattr(args, "archive", None) or ())
    except NoLog as error:
        raise WhyError(str(error)) from None
    with contextlib.closing(store):
        try:
            return why_recorded(spec, store, args.decision, agent=args.agent, policy=args.policy)
        except StoreError as error:  # a row it cannot read: which one
            raise WhyError(str(error)) from None
        except WhyError as error:
            note = archived_note(store) if "holds no decision" in str(error) else None
            if note is None:
                raise
            # the decision may be among the events the compaction archived
            raise WhyError(f"{error}; {note}: `--archive FILE` reads it too") from None
