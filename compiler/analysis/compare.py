"""The semantic comparison of two policies: the regions of calls they decide differently.

Two policies (usually the same policy in two versions of a spec) are compared tool by tool
over ONE symbolic call: both policies' rules that can match the tool are encoded over the same
variables (smt.py), each rule's "R wins" exactly as language.md §6 says (it matches, no
stronger rule matches, no earlier rule of its effect matches), and the default as "no rule
matches" (for a risk table on a tool with operations, one default per risk level of the
call's operation). A *region* is a pair (old winner, new winner) whose outcomes differ — the
effect, or for an ASK the approvers or the grant as written — and that some call reaches.
The regions of a tool are found by asking z3 for a call whose outcomes differ, then again with
each region found so far excluded, until there is none (one question per region, plus one).
Each region carries a concrete witness read from the model, re-judged by concrete.py
(`exact`), and decided by the runtime's `PolicyEngine` under both specs (`verified`: the
decision really flips).

What is compared, and what it means:

- A tool whose bucket is identical on both sides — the same rules select it with the same
  effects, conditions and options, the same schema and registry fields the rules read, the
  same default outcome (partition.py's keys) — is skipped without z3 (`tools_skipped`).
  Other tools' answers are cached by a hash of both sides' keys (cache.py), so comparing the
  same pair again solves nothing.
- A tool only in the old spec: its calls are refused by the new runtime as unregistered (a
  deny with no rule); a tool only in the new spec: its calls were refused before. Both are
  compared like any other tool, against that refusal (`tools_added`, `tools_removed`).
- A tool whose input schema changed: the shared call is one both schemas accept (both
  domains hold); calls only one schema accepts are refused by validation on the other side,
  which is a change of the registry, not of policy (`schema_changed` names such tools).
- `compare_specs` compares every policy the two specs both declare, by qualified name
  (subject `policy NAME`). Then each agent (subject `agent NAME`) whose policy changed name —
  added, removed, switched to another policy, or given or losing one — is compared as the
  runtime judges its calls: under its policy, or refused ("the agent has no policy") without
  one, and refused as an agent that does not exist on the side that lacks it. An agent whose
  policy keeps its name is covered by that policy's comparison. So every decision an agent
  can take is covered once. A policy only one side declares and no agent uses decides no
  agent's calls; it is listed (`policies_added`, `policies_removed`), not compared.

A question z3 does not answer within its budget (budget.py) is reported in `undecided`, with
its tool, never taken as "no change".
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from harnessc.runtime import model as m

from .budget import query_rlimit, query_timeout_ms
from .cache import AnalysisCache
from .concrete import STRENGTH, Call, decide, schema_problems
from .partition import partition_key, rule_key
from .policy import _Index
from .text import duration_text, selector_text, spec_text, term_of

__all__ = [
    "Comparison",
    "Outcome",
    "Region",
    "UndecidedRegion",
    "call_text",
    "call_to_dict",
    "compare_policies",
    "compare_specs",
    "runtime_call",
    "runtime_outcome",
]

REFUSED_UNREGISTERED = "`{tool}` is not a registered tool"
REFUSED_NO_POLICY = "the agent `{agent}` has no policy"
REFUSED_NO_AGENT = "the agent `{agent}` does not exist"


# ---------------------------------------------------------------------------------------------
# The data a report is made of


def approver_text(approver: m.Approver) -> str:
    """An approver as written: `role "owner"`, `user "ana"`."""
    return f"{approver.kind} {json.dumps(approver.value, ensure_ascii=False)}"


def grant_text(grant: m.Grant | None) -> str | None:
    """A grant as written: `once ttl 15m`, `class deploy.* when … ttl 1h`; None: none written
    (the runtime's default grant, this exact call for ten minutes)."""
    if grant is None:
        return None
    scope = grant.scope
    if grant.scope == "class":
        scope = "class" + (f" {selector_text(grant.selector)}" if grant.selector else "")
        if grant.condition is not None:
            scope += f" when {spec_text(grant.condition)}"
    return f"{scope} ttl {duration_text(grant.ttl_ms)}"


@dataclass
class Outcome:
    """What one policy decides for the calls of a region.

    `rule` is the winning rule's label (None: the policy's default, or a refusal before any
    rule); `origin` is `file:line:col` of that rule, of the default (or risk-table entry) that
    applied, or of the policy when it writes no default (None for a refusal). `approvers` and
    `grant` are as written (for an ASK; empty and None otherwise), `reason` the decision's.
    `refused` is set when no policy judged the call (an unregistered tool, an agent without a
    policy or that does not exist).
    """

    effect: str
    rule: str | None
    origin: str | None
    policy: str | None = None
    approvers: list[str] = field(default_factory=list)
    grant: str | None = None
    reason: str | None = None
    refused: bool = False

    def key(self) -> tuple[Any, ...]:
        """What makes two outcomes the same decision: the effect, and for an ASK its
        approvers and grant."""
        if self.effect == "ask":
            return (self.effect, tuple(self.approvers), self.grant)
        return (self.effect,)

    @property
    def label(self) -> str:
        """The rule's label, or how the decision was made without one."""
        if self.rule is not None:
            return self.rule
        return "refused" if self.refused else "default"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def call_to_dict(call: Call) -> dict[str, Any]:
    """A witness call as JSON: only what it sets (`tool`, `args`, `actor`, … `session`)."""
    data = asdict(call)
    return {k: v for k, v in data.items() if k == "tool" or v}


def call_text(call: Call) -> str:
    """A witness call as one line: `deploy(env: "prod") as {"role": "sre"} with facts …`."""
    args = ", ".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in call.args.items())
    text = f"{call.tool}({args})"
    for what, value in (
        ("as", call.actor),
        ("resource", call.resource),
        ("facts", call.facts),
        ("task", call.task),
        ("env", call.env),
        ("call", call.execution),
        ("connected", {k: v for k, v in call.connections.items() if v}),
        ("running", {k: v for k, v in call.runtimes.items() if v}),
    ):
        if value:
            text += f" {what} {json.dumps(value, ensure_ascii=False, sort_keys=True)}"
    if call.session:
        terms = "; ".join(
            f"{spec_text(term_of(k))} = {json.dumps(v)}" for k, v in call.session.items()
        )
        text += f" session {{{terms}}}"
    return text


@dataclass
class Region:
    """A set of calls to one tool that the old side decides `old` and the new side `new`.

    `subject` says what was compared: `policy NAME` or `agent NAME`. `witness` is a concrete
    call of the region (its session state, when the rules read the session, in
    `witness.session`). `verified`: the runtime decided the witness under both specs and the
    decisions really differ as `change` says; `exact`: the encoding was exact and re-judging
    the witness agreed with the solver (`notes` say what did not).
    """

    tool: str
    subject: str
    old_policy: str | None
    new_policy: str | None
    old: Outcome
    new: Outcome
    witness: Call
    verified: bool = False
    exact: bool = True
    notes: list[str] = field(default_factory=list)

    @property
    def change(self) -> str:
        """`allow→ask`, …; for the same effect, `ask→ask (approver)` or `ask→ask (grant)`."""
        a, b = self.old, self.new
        if a.effect != b.effect:
            return f"{a.effect}→{b.effect}"
        if a.approvers != b.approvers:
            return f"{a.effect}→{b.effect} (approver)"
        return f"{a.effect}→{b.effect} (grant)"

    @property
    def widened(self) -> bool:
        """A call that was denied or asked is now allowed."""
        return self.old.effect in ("deny", "ask") and self.new.effect == "allow"

    @property
    def weaker(self) -> bool:
        """The new decision is less strict (deny→ask, deny→allow, ask→allow): `widened`, or a
        denied call that may now run once approved."""
        return STRENGTH[self.new.effect] < STRENGTH[self.old.effect]

    @property
    def narrowed(self) -> bool:
        """The new decision is stronger (allow→ask, allow→deny, ask→deny)."""
        return STRENGTH[self.new.effect] > STRENGTH[self.old.effect]

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "subject": self.subject,
            "old_policy": self.old_policy,
            "new_policy": self.new_policy,
            "change": self.change,
            "widened": self.widened,
            "old": self.old.to_dict(),
            "new": self.new.to_dict(),
            "witness": call_to_dict(self.witness),
            "witness_text": call_text(self.witness),
            "verified": self.verified,
            "exact": self.exact,
            "notes": list(self.notes),
        }


@dataclass
class UndecidedRegion:
    """A question about a tool z3 did not answer within its budget: whether the calls the old
    side decides by `old_rule` and the new by `new_rule` exist (None, None: whether any call
    of the tool changes at all). `reason` is z3's (`timeout`, …)."""

    tool: str
    subject: str
    old_rule: str | None
    new_rule: str | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Comparison:
    """Every region of calls decided differently, and what was (not) compared.

    `tools_compared`: tools solved or read from the cache; `tools_skipped`: tools whose
    buckets are identical on both sides (no region, no z3); `tools_added`/`tools_removed`:
    tools only one spec registers; `schema_changed`: tools compared over calls both input
    schemas accept; `subjects`: what was compared (`policy NAME`, `agent NAME`).
    """

    regions: list[Region] = field(default_factory=list)
    undecided: list[UndecidedRegion] = field(default_factory=list)
    subjects: list[str] = field(default_factory=list)
    tools_compared: list[str] = field(default_factory=list)
    tools_skipped: list[str] = field(default_factory=list)
    tools_added: list[str] = field(default_factory=list)
    tools_removed: list[str] = field(default_factory=list)
    schema_changed: list[str] = field(default_factory=list)
    policies_added: list[str] = field(default_factory=list)
    policies_removed: list[str] = field(default_factory=list)
    queries: int = 0
    """SMT queries asked (the comparison's work, independent of the machine's load)."""
    cache_hits: int = 0
    seconds: float = 0.0
    """Wall time of the comparison (solving and verifying; not compiling the specs)."""

    @property
    def widened(self) -> bool:
        return any(r.widened for r in self.regions)

    @property
    def changed(self) -> bool:
        return bool(self.regions)

    def by_change(self) -> dict[str, list[Region]]:
        """Regions by `change` (`allow→ask`, …), in order of first appearance."""
        out: dict[str, list[Region]] = {}
        for r in self.regions:
            out.setdefault(r.change, []).append(r)
        return out

    def by_tool(self) -> dict[str, list[Region]]:
        out: dict[str, list[Region]] = {}
        for r in self.regions:
            out.setdefault(r.tool, []).append(r)
        return out

    def counts(self) -> dict[str, int]:
        return {k: len(v) for k, v in self.by_change().items()}

    def to_dict(self) -> dict[str, Any]:
        """A stable JSON shape (`"version": 1`)."""
        return {
            "version": 1,
            "widened": self.widened,
            "changed": self.changed,
            "counts": {
                "by_change": self.counts(),
                "by_tool": {k: len(v) for k, v in self.by_tool().items()},
            },
            "regions": [r.to_dict() for r in self.regions],
            "undecided": [u.to_dict() for u in self.undecided],
            "subjects": list(self.subjects),
            "tools_compared": list(self.tools_compared),
            "tools_skipped": list(self.tools_skipped),
            "tools_added": list(self.tools_added),
            "tools_removed": list(self.tools_removed),
            "schema_changed": list(self.schema_changed),
            "policies_added": list(self.policies_added),
            "policies_removed": list(self.policies_removed),
            "queries": self.queries,
            "cache_hits": self.cache_hits,
        }


# ---------------------------------------------------------------------------------------------
# One side of a comparison: a spec and the policy that judges (or the refusal of every call)


@dataclass
class _Side:
    spec: m.Spec
    policy: m.Policy | None
    refusal: str | None = None
    """Why every call is refused when there is no policy (`REFUSED_NO_POLICY`, …)."""
    index: _Index | None = None
    keys: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.policy is not None:
            self.index = _Index(self.policy.rules)
            self.keys = [rule_key(r) for r in self.policy.rules]


@dataclass
class _Winner:
    """One way a side can decide a call to a tool: rule `position` of its bucket wins, the
    default applies (`risk`: for the call's risk, with a risk table), or the call is refused."""

    name: str
    """`r<position in the policy>`, `d`, `d:<risk>` or `x` (refused): stable, for the cache."""
    outcome: Outcome
    rule: m.Rule | None = None
    position: int | None = None
    """In the bucket."""
    risk: str | None = None


def _origin(ref: m.SourceRef | None) -> str | None:
    return str(ref) if ref is not None else None


def _options(source: m.Rule | m.DefaultDecision | m.RiskEntry, effect: str) -> dict[str, Any]:
    if effect != "ask":
        return {"approvers": [], "grant": None}
    return {
        "approvers": [approver_text(a) for a in source.approvers],
        "grant": grant_text(source.grant),
    }


def _rule_outcome(rule: m.Rule, policy: str) -> Outcome:
    return Outcome(
        rule.effect,
        rule.label,
        _origin(rule.origin),
        policy,
        reason=rule.reason,
        **_options(rule, rule.effect),
    )


def _default_outcome(spec: m.Spec, policy: m.Policy, risk: str) -> Outcome:
    """The runtime's default (runtime/policy.py `decide_from`) for a call of this risk."""
    d = policy.default
    if d is None:
        return Outcome("deny", None, _origin(policy.origin), policy.name, reason=_NO_RULE)
    if d.table is None:
        effect = d.effect or "deny"
        return Outcome(
            effect, None, _origin(d.origin), policy.name, reason=d.reason, **_options(d, effect)
        )
    table = spec.risk_tables.get(d.table)
    entry = table.entries.get(risk) if table is not None else None  # type: ignore[call-overload]
    if entry is None:
        reason = f"the risk table `{d.table}` has no entry for risk `{risk}`"
        return Outcome("deny", None, _origin(d.origin), policy.name, reason=reason)
    return Outcome(
        entry.effect,
        None,
        _origin(entry.origin or d.origin),
        policy.name,
        reason=entry.reason,
        **_options(entry, entry.effect),
    )


_NO_RULE = "no rule allows this call"


def _risks(tool: m.Tool) -> list[str]:
    """The risks a call to the tool can have: its operations', else its own."""
    if tool.operations:
        return sorted({op.risk for op in tool.operations.values()}, key=m.risk_rank)
    return [tool.risk]


@dataclass
class _ToolSide:
    """One side's view of one tool: the ways it can decide a call, and what decides them."""

    side: _Side
    tool: m.Tool | None
    rules: list[m.Rule]
    winners: list[_Winner]
    key: str
    """Everything the side's decisions of the tool depend on (partition.py's key, the rules'
    options, the default's outcomes by risk); equal keys: identical buckets."""


def _tool_side(side: _Side, tool_id: str) -> _ToolSide:
    tool = side.spec.tools.get(tool_id)
    policy = side.policy
    if tool is None or policy is None or side.index is None:
        reason = REFUSED_UNREGISTERED.format(tool=tool_id) if tool is None else side.refusal
        name = policy.name if policy is not None else None
        refused = Outcome("deny", None, None, name, reason=reason, refused=True)
        return _ToolSide(side, tool, [], [_Winner("x", refused)], "refused")
    indices = side.index.bucket(tool)
    rules = [policy.rules[i] for i in indices]
    winners = [
        _Winner(f"r{p}", _rule_outcome(rule, policy.name), rule, p) for p, rule in enumerate(rules)
    ]
    risks = _risks(tool)
    defaults = {risk: _default_outcome(side.spec, policy, risk) for risk in risks}
    if len({o.key() for o in defaults.values()}) == 1:
        winners.append(_Winner("d", defaults[risks[0]]))
    else:
        winners += [_Winner(f"d:{risk}", o, risk=risk) for risk, o in defaults.items()]
    keys = [side.keys[i] for i in indices]
    described = {
        "bucket": partition_key(side.spec, tool, rules, keys, False),
        "options": [_Winner_key(w) for w in winners],
    }
    return _ToolSide(side, tool, rules, winners, json.dumps(described, sort_keys=True))


def _Winner_key(w: _Winner) -> list[Any]:
    return [w.name, list(w.outcome.key())]


# ---------------------------------------------------------------------------------------------
# Solving one tool


@dataclass
class _Found:
    """A region as the solver (or the cache) gives it: the two winners' names and a call."""

    old: str
    new: str
    call: Call
    inexact: bool


@dataclass
class _ToolAnswers:
    found: list[_Found] = field(default_factory=list)
    undecided: list[tuple[str | None, str | None, str]] = field(default_factory=list)
    queries: int = 0

    def to_json(self) -> str:
        return json.dumps(
            {
                "found": [[f.old, f.new, asdict(f.call), f.inexact] for f in self.found],
                "undecided": [list(u) for u in self.undecided],
                "queries": self.queries,
            },
            sort_keys=True,
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> _ToolAnswers:
        data = json.loads(text)
        return cls(
            [_Found(a, b, Call(**c), bool(x)) for a, b, c, x in data["found"]],
            [(a, b, r) for a, b, r in data["undecided"]],
            int(data["queries"]),
        )

    @property
    def out_of_time(self) -> bool:
        return any(r in ("timeout", "canceled") or "resource" in r for _, _, r in self.undecided)


def _solve_tool(old: _ToolSide, new: _ToolSide, timeout_ms: int, rlimit: int) -> _ToolAnswers:
    """Every region of one tool (module docstring), with z3."""
    import z3

    from .examples import forget_examples
    from .smt import Encoder, fresh_context
    from .smt_terms import Registry, conj, disj, negate, to_z3
    from .solve import Questions

    fresh_context()
    forget_examples()
    primary = new if new.tool is not None else old
    assert primary.tool is not None
    registry: Registry = {}
    enc = Encoder(primary.side.spec, primary.tool, registry)
    everything = [*old.rules, *new.rules]
    real: set[Any] = set()
    sides = [s for s in (old, new) if s.tool is not None]
    for s in sides:
        enc.spec, enc.tool = s.side.spec, s.tool  # type: ignore[assignment]
        enc.prepare(everything)
        real |= enc.real_keys or set()
    enc.real_keys = real
    conditions: dict[int, list[Any]] = {}
    inexact: dict[int, list[bool]] = {}
    for s in (old, new):
        if s.tool is not None:
            # each side's schema adds its own domain to the values both read
            enc._vars.clear()
            enc.spec, enc.tool = s.side.spec, s.tool
        match, loose = [], []
        for rule in s.rules:
            before = len(enc.inexact)
            match.append(enc.rule_match(rule))
            loose.append(len(enc.inexact) > before)
        conds: list[Any] = []
        for w in s.winners:
            if w.position is not None:
                p = w.position
                beaten = [
                    negate(match[q])
                    for q, other in enumerate(s.rules)
                    if STRENGTH[other.effect] > STRENGTH[s.rules[p].effect]
                    or (other.effect == s.rules[p].effect and q < p)
                ]
                conds.append(conj(match[p], *beaten))
            elif w.name == "x":
                conds.append(True)
            else:
                nothing = conj(*(negate(x) for x in match))
                if w.risk is not None:
                    nothing = conj(nothing, enc.risk_expr() == m.risk_rank(w.risk))
                conds.append(nothing)
        conditions[id(s)] = conds
        inexact[id(s)] = [*loose, *([False] * (len(s.winners) - len(loose)))]
    enc.spec, enc.tool = primary.side.spec, primary.tool
    if old.tool is not None and new.tool is not None and old.tool.input != new.tool.input:
        _both_schemas(enc, ("args",), old.tool.input.fields, new.tool.input.fields)
    spec = primary.side.spec
    other = old.side.spec if primary is new else new.side.spec
    if any(name not in spec.facts for name in other.facts):
        # a witness carries the facts either side's rules read
        spec = spec.model_copy(update={"facts": {**other.facts, **spec.facts}})
    q = Questions(spec, primary.tool, enc, registry, timeout_ms, rlimit)
    olds, news = conditions[id(old)], conditions[id(new)]
    answers = _ToolAnswers()

    def group(side: _ToolSide, conds: list[Any]) -> dict[tuple[Any, ...], list[Any]]:
        out: dict[tuple[Any, ...], list[Any]] = {}
        for w, c in zip(side.winners, conds, strict=True):
            out.setdefault(w.outcome.key(), []).append(c)
        return out

    old_groups, new_groups = group(old, olds), group(new, news)
    same = disj(
        *(conj(disj(*old_groups[k]), disj(*new_groups[k])) for k in old_groups if k in new_groups)
    )

    def which(model: Any, conds: list[Any]) -> int:
        return next(
            i
            for i, c in enumerate(conds)
            if z3.is_true(model.eval(to_z3(c), model_completion=True))
        )

    blocked: list[Any] = []
    seen: set[tuple[int, int]] = set()
    while True:
        found = q.check(negate(same), *blocked)
        if found is None:
            break
        if found is False:
            answers.undecided.append((None, None, q.reason or "unknown"))
            break
        a, b = which(found, olds), which(found, news)
        if (a, b) in seen:  # cannot happen with an exact encoding; never loop
            break
        seen.add((a, b))
        answers.found.append(
            _Found(
                old.winners[a].name,
                new.winners[b].name,
                q.call(found),
                inexact[id(old)][a] or inexact[id(new)][b],
            )
        )
        blocked.append(negate(conj(olds[a], news[b])))
    if answers.undecided:
        # one question per remaining pair, each within the budget
        answers.undecided.clear()
        for a, wa in enumerate(old.winners):
            for b, wb in enumerate(new.winners):
                if (a, b) in seen or wa.outcome.key() == wb.outcome.key():
                    continue
                found = q.check(olds[a], news[b])
                if found is False:
                    answers.undecided.append((wa.name, wb.name, q.reason or "unknown"))
                elif found is not None:
                    seen.add((a, b))
                    call = q.call(found)
                    rough = inexact[id(old)][a] or inexact[id(new)][b]
                    answers.found.append(_Found(wa.name, wb.name, call, rough))
    answers.queries = q.queries
    return answers


def _both_schemas(
    enc: Any, prefix: tuple[str, ...], old: Sequence[m.Field], new: Sequence[m.Field]
) -> None:
    """Only calls both input schemas accept: a field one schema lacks, or types differently,
    is absent (no call at all when a schema requires it)."""
    import z3

    before = {f.name: f for f in old}
    after = {f.name: f for f in new}
    for name in sorted(set(before) | set(after)):
        a, b = before.get(name), after.get(name)
        key = (*prefix, name)
        if a is not None and b is not None and a.type.name == b.type.name:
            if a.type.name == "object":
                _both_schemas(enc, key, a.type.fields, b.type.fields)
            continue
        if any(f is not None and not f.type.optional and f.default is None for f in (a, b)):
            enc.domain.append(z3.BoolVal(False))  # required on one side only: no such call
            return
        enc.domain.append(z3.Not(enc.presence(key)))


# ---------------------------------------------------------------------------------------------
# Witnesses: re-judged the plain way, then decided by the runtime under both specs


def runtime_outcome(decision: Any) -> tuple[Any, ...]:
    """A runtime `Decision` as an `Outcome.key`: what makes two decisions the same."""
    if decision.effect != "ask":
        return (decision.effect,)
    return (
        decision.effect,
        tuple(approver_text(a) for a in decision.approvers),
        grant_text(decision.grant),
    )


class _Runtime:
    """The runtime's engines of both specs, made on first use, and calls judged by them."""

    def __init__(self) -> None:
        self.engines: dict[int, Any] = {}

    def engine(self, spec: m.Spec) -> Any:
        from harnessc.runtime.policy import PolicyEngine

        found = self.engines.get(id(spec))
        if found is None:
            found = self.engines[id(spec)] = (spec, PolicyEngine(spec))
        return found[1]

    def decide(self, side: _Side, call: Call, steps: Sequence[m.SessionStep]) -> Any:
        """The runtime's decision of the call on this side (a refusal without a policy)."""
        from harnessc.runtime.policy import Decision

        if side.policy is None:
            return Decision.denied(side.refusal or _NO_RULE, policy="", tool_id=call.tool)
        return self.engine(side.spec).decide(side.policy.name, runtime_call(side.spec, call, steps))


def runtime_call(spec: m.Spec, call: Call, steps: Sequence[m.SessionStep] = ()) -> Any:
    """The witness as the runtime's `CallContext` (schema defaults filled in as normalize
    does; `steps`, the session before it, replayed into a ledger)."""
    from harnessc.runtime.history import prelude_ledger
    from harnessc.runtime.policy import CallContext

    args = dict(call.args)
    tool = spec.tools.get(call.tool)
    if tool is not None:
        for f in tool.input.fields:
            if f.name not in args and f.default is not None:
                args[f.name] = f.default
    execution = dict(call.execution)
    tool_call_id = execution.get("tool_call_id")
    extra: dict[str, Any] = {}
    if steps:
        extra["ledger"] = prelude_ledger(spec, steps, int(time.time() * 1000))
    return CallContext(
        tool_id=call.tool,
        args=args,
        actor=dict(call.actor),
        resource=dict(call.resource),
        task=dict(call.task),
        env=dict(call.env),
        facts=dict(call.facts),
        connected=frozenset(k for k, v in call.connections.items() if v),
        running=frozenset(k for k, v in call.runtimes.items() if v),
        tool_call_id=tool_call_id if isinstance(tool_call_id, str) else None,
        execution=execution,
        **extra,
    )


def _copy(call: Call) -> Call:
    return Call(**json.loads(json.dumps(asdict(call))))


class _Comparer:
    def __init__(self, cache: AnalysisCache | None, verify: bool) -> None:
        self.cache = cache if cache is not None else AnalysisCache()
        self.verify = verify
        self.runtime = _Runtime()
        self.timeout_ms = query_timeout_ms()
        self.rlimit = query_rlimit()

    def compare(
        self, out: Comparison, subject: str, old: _Side, new: _Side, tool_ids: Iterable[str]
    ) -> None:
        out.subjects.append(subject)
        for tool_id in tool_ids:
            a, b = _tool_side(old, tool_id), _tool_side(new, tool_id)
            if a.tool is None and b.tool is None:
                continue
            if a.tool is None and tool_id not in out.tools_added:
                out.tools_added.append(tool_id)
            if b.tool is None and tool_id not in out.tools_removed:
                out.tools_removed.append(tool_id)
            if a.key == b.key:
                if tool_id not in out.tools_skipped:
                    out.tools_skipped.append(tool_id)
                continue
            if tool_id not in out.tools_compared:
                out.tools_compared.append(tool_id)
            if (
                a.tool is not None
                and b.tool is not None
                and m.without_origins(a.tool.input) != m.without_origins(b.tool.input)
                and tool_id not in out.schema_changed
            ):
                out.schema_changed.append(tool_id)
            answers = self.answers(out, a, b)
            names_a = {w.name: w for w in a.winners}
            names_b = {w.name: w for w in b.winners}
            for found in answers.found:
                out.regions.append(
                    self.region(
                        subject, tool_id, a, b, names_a[found.old], names_b[found.new], found
                    )
                )
            for ua, ub, reason in answers.undecided:
                out.undecided.append(
                    UndecidedRegion(
                        tool_id,
                        subject,
                        names_a[ua].outcome.label if ua is not None else None,
                        names_b[ub].outcome.label if ub is not None else None,
                        reason,
                    )
                )

    def answers(self, out: Comparison, a: _ToolSide, b: _ToolSide) -> _ToolAnswers:
        key = f"compare\n{a.key}\n{b.key}"
        text = self.cache.read(key)
        if text is not None:
            try:
                found = _ToolAnswers.from_json(text)
                out.cache_hits += 1
                return found
            except (ValueError, KeyError, TypeError):
                pass
        solved = _solve_tool(a, b, self.timeout_ms, self.rlimit)
        out.queries += solved.queries
        self.cache.write(key, solved.to_json(), keep=not solved.out_of_time)
        return solved

    def region(
        self,
        subject: str,
        tool_id: str,
        a: _ToolSide,
        b: _ToolSide,
        wa: _Winner,
        wb: _Winner,
        found: _Found,
    ) -> Region:
        call = _copy(found.call)
        call.tool = tool_id
        region = Region(
            tool_id,
            subject,
            a.side.policy.name if a.side.policy is not None else None,
            b.side.policy.name if b.side.policy is not None else None,
            wa.outcome,
            wb.outcome,
            call,
            exact=not found.inexact,
        )
        for which, side, w in (("old", a, wa), ("new", b, wb)):
            self.rejudge(region, which, side, w)
        if self.verify:
            self.run(region, a, b)
        return region

    @staticmethod
    def rejudge(region: Region, which: str, side: _ToolSide, w: _Winner) -> None:
        """The witness judged the plain way (concrete.py) on one side: its winner must be the
        region's; a call that breaks the side's schema is noted."""
        policy = side.side.policy
        if side.tool is None or policy is None:
            return
        bucket = policy.model_copy(update={"rules": tuple(side.rules)})
        actual = decide(side.side.spec, bucket, region.witness)
        if actual.rule != w.outcome.rule or actual.effect != w.outcome.effect:
            region.exact = False
            region.notes.append(
                f"re-judged, the {which} side decides the call `{actual.effect}` by "
                f"`{actual.rule or 'the default'}`"
            )
        problems = schema_problems(side.side.spec, region.witness)
        if problems:
            region.exact = False
            region.notes += [f"{which} schema: {p}" for p in problems]

    def run(self, region: Region, a: _ToolSide, b: _ToolSide) -> None:
        """Decide the witness with the runtime under both specs (`verified`)."""
        steps: list[m.SessionStep] = []
        if region.witness.session:
            from .prelude import session_prelude

            spec = (b if b.tool is not None else a).side.spec
            prelude = session_prelude(spec, region.witness)
            if prelude.missing is not None:
                region.notes.append(f"not run: no session gives its state ({prelude.missing})")
                return
            steps = prelude.steps
        old = runtime_outcome(self.runtime.decide(a.side, region.witness, steps))
        new = runtime_outcome(self.runtime.decide(b.side, region.witness, steps))
        region.verified = old != new and old == region.old.key() and new == region.new.key()
        if not region.verified:
            region.notes.append(
                f"the runtime decides it {_key_text(old)} under the old spec and "
                f"{_key_text(new)} under the new one"
            )


_runtime_outcome = runtime_outcome  # the name harnessc diff's first version imports


def _key_text(key: tuple[Any, ...]) -> str:
    if len(key) == 1:
        return str(key[0])
    return f"{key[0]} ({', '.join(key[1]) or 'no approver'}; grant {key[2] or 'default'})"


# ---------------------------------------------------------------------------------------------
# The entry points


def _policy(spec: m.Spec, policy: m.Policy | str | None) -> m.Policy | None:
    if policy is None or isinstance(policy, m.Policy):
        return policy
    found = spec.policy(policy)
    if found is None:
        raise KeyError(f"the spec declares no policy `{policy}`")
    return found


def compare_policies(
    old_spec: m.Spec,
    old_policy: m.Policy | str | None,
    new_spec: m.Spec,
    new_policy: m.Policy | str | None,
    tools: Iterable[str] | None = None,
    *,
    subject: str | None = None,
    cache: AnalysisCache | None = None,
    verify: bool = True,
) -> Comparison:
    """The regions of calls that `old_policy` under `old_spec` and `new_policy` under
    `new_spec` decide differently (module docstring).

    A policy is a `Policy` or a name; None means no policy judges: every call is refused
    ("no rule allows this call"). `tools`: the tool ids to compare (default: every tool
    either spec registers). `verify=False` skips deciding witnesses with the runtime.
    """
    started = time.perf_counter()
    a, b = _policy(old_spec, old_policy), _policy(new_spec, new_policy)
    if subject is None:
        names = {p.name for p in (a, b) if p is not None}
        subject = "policy " + " → ".join(sorted(names)) if names else "no policy"
    out = Comparison()
    ids = sorted(set(old_spec.tools) | set(new_spec.tools)) if tools is None else list(tools)
    comparer = _Comparer(cache, verify)
    comparer.compare(
        out,
        subject,
        _Side(old_spec, a, None if a is not None else _NO_RULE),
        _Side(new_spec, b, None if b is not None else _NO_RULE),
        ids,
    )
    out.seconds = time.perf_counter() - started
    return out


def _agent_side(spec: m.Spec, name: str) -> _Side:
    agent = spec.agents.get(name)
    if agent is None:
        return _Side(spec, None, REFUSED_NO_AGENT.format(agent=name))
    if not agent.policy:
        return _Side(spec, None, REFUSED_NO_POLICY.format(agent=name))
    return _Side(spec, spec.policy(agent.policy), REFUSED_NO_POLICY.format(agent=name))


def compare_specs(
    old_spec: m.Spec,
    new_spec: m.Spec,
    *,
    cache: AnalysisCache | None = None,
    verify: bool = True,
) -> Comparison:
    """Every policy both specs declare, and every agent whose policy changed (module
    docstring): the regions of calls decided differently, over every tool either registers."""
    started = time.perf_counter()
    out = Comparison()
    comparer = _Comparer(cache, verify)
    ids = sorted(set(old_spec.tools) | set(new_spec.tools))
    for name in sorted(set(old_spec.policies) & set(new_spec.policies)):
        comparer.compare(
            out,
            f"policy {name}",
            _Side(old_spec, old_spec.policies[name]),
            _Side(new_spec, new_spec.policies[name]),
            ids,
        )
    out.policies_added = sorted(set(new_spec.policies) - set(old_spec.policies))
    out.policies_removed = sorted(set(old_spec.policies) - set(new_spec.policies))
    for name in sorted(set(old_spec.agents) | set(new_spec.agents)):
        a, b = _agent_side(old_spec, name), _agent_side(new_spec, name)
        same_policy = (
            a.policy is not None and b.policy is not None and a.policy.name == b.policy.name
        )
        if same_policy or (a.policy is None and b.policy is None and a.refusal == b.refusal):
            continue  # covered by the policy's comparison, or refused alike
        comparer.compare(out, f"agent {name}", a, b, ids)
    out.seconds = time.perf_counter() - started
    return out
