"""One tool of the semantic comparison (compare.py): each side's ways of deciding its calls,
whether both sides' buckets are identical, and the regions z3 finds over one shared symbolic
call (the module docstring of compare.py says what is compared)."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from harnessc.runtime import model as m
from pydantic import BaseModel

from .budget import out_of_time
from .comparison import Outcome, approver_text, expires_text, grant_text, self_approval_text
from .concrete import STRENGTH, Call
from .partition import partition_key, rule_key, selected_as
from .policy import RuleIndex
from .sources import feeds, meanings_digest, session_meanings_differ

__all__ = [
    "NO_RULE",
    "REFUSED_NO_AGENT",
    "REFUSED_NO_POLICY",
    "REFUSED_UNREGISTERED",
    "Found",
    "Side",
    "ToolAnswers",
    "ToolSide",
    "Winner",
    "identical",
    "same_model",
    "solve_tool",
    "tool_side",
]

Key = tuple[str, ...]

REFUSED_UNREGISTERED = "`{tool}` is not a registered tool"
REFUSED_NO_POLICY = "the agent `{agent}` has no policy"
REFUSED_NO_AGENT = "the agent `{agent}` does not exist"


# ---------------------------------------------------------------------------------------------
# One side of a comparison: a spec and the policy that judges (or the refusal of every call)


@dataclass
class Side:
    spec: m.Spec
    policy: m.Policy | None
    refusal: str | None = None
    """Why every call is refused when there is no policy (`REFUSED_NO_POLICY`, …)."""
    index: RuleIndex | None = None
    keys: list[Any] = field(default_factory=list)
    outcomes: dict[tuple[int, str], Outcome] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.policy is not None:
            self.index = RuleIndex(self.policy.rules)
            self.keys = [rule_key(r) for r in self.policy.rules]

    def outcome(self, i: int, risk: str) -> Outcome:
        """The outcome of the policy's rule `i` for a call of this risk (made once: many tools
        share a rule)."""
        found = self.outcomes.get((i, risk))
        if found is None:
            assert self.policy is not None
            rule = self.policy.rules[i]
            found = self.outcomes[i, risk] = _rule_outcome(rule, self.policy.name, risk)
        return found


@dataclass
class Winner:
    """One way a side can decide a call to a tool: rule `position` of its bucket wins, the
    default applies (`risk`: for the call's risk, with a risk table), or the call is refused."""

    name: str
    """`r<position in the bucket>`, `d`, `d:<risk>` or `x` (refused): what the cache keeps."""
    outcome: Outcome
    rule: m.Rule | None = None
    position: int | None = None
    """In the bucket."""
    risk: str | None = None
    """Set when the outcome holds for calls of this risk only (a default by risk table, or an
    ASK whose self-approval is the runtime's default by risk)."""


def _origin(ref: m.SourceRef | None) -> str | None:
    return str(ref) if ref is not None else None


def _options(
    source: m.Rule | m.DefaultDecision | m.RiskEntry, effect: str, risk: str
) -> dict[str, Any]:
    """An ASK's options as the runtime's decision carries them for a call of this risk."""
    if effect != "ask":
        return {"approvers": [], "grant": None, "expires": None}
    return {
        "approvers": [approver_text(a) for a in source.approvers],
        "grant": grant_text(source.grant),
        "expires": expires_text(source.expires_ms),
        "self_approval": self_approval_text(m.requester_may_approve(source.self_approval, risk)),
    }


def _rule_outcome(rule: m.Rule, policy: str, risk: str) -> Outcome:
    return Outcome(
        rule.effect,
        rule.label,
        _origin(rule.origin),
        policy,
        reason=rule.reason,
        **_options(rule, rule.effect, risk),
    )


def _default_outcome(spec: m.Spec, policy: m.Policy, risk: str) -> Outcome:
    """The runtime's default (runtime/judge/policy.py `decide_from`) for a call of this risk."""
    d = policy.default
    if d is None:
        return Outcome("deny", None, _origin(policy.origin), policy.name, reason=NO_RULE)
    if d.table is None:
        effect = d.effect or "deny"
        return Outcome(
            effect,
            None,
            _origin(d.origin),
            policy.name,
            reason=d.reason,
            **_options(d, effect, risk),
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
        **_options(entry, entry.effect, risk),
    )


NO_RULE = "no rule allows this call"


def _risks(tool: m.Tool) -> list[str]:
    """The risks a call to the tool can have: its operations', else its own."""
    if tool.operations:
        return sorted({op.risk for op in tool.operations.values()}, key=m.risk_rank)
    return [tool.risk]


@dataclass
class ToolSide:
    """One side's view of one tool: the ways it can decide a call, and what decides them."""

    side: Side
    tool: m.Tool | None
    rules: list[m.Rule]
    winners: list[Winner]
    indices: list[int] = field(default_factory=list)
    signature: tuple[Any, ...] = ()
    """The bucket without the tool: each rule's key, how its selectors select the tool when
    that follows the call's operation, and every winner's outcome (`Outcome.key`)."""

    @functools.cached_property
    def key(self) -> str:
        """Everything the side's decisions of the tool depend on (partition.py's key, and each
        winner's outcome); equal keys: identical buckets."""
        if self.tool is None or self.side.policy is None:
            return "refused"
        keys = [self.side.keys[i] for i in self.indices]
        described = {
            "bucket": partition_key(self.side.spec, self.tool, self.rules, keys, False),
            "options": [[w.name, list(w.outcome.key())] for w in self.winners],
            # what the session terms read of the rest of the registry (sources.py)
            "session": meanings_digest(self.side.spec, self.rules),
        }
        return json.dumps(described, sort_keys=True)

    def read(self) -> tuple[set[str], set[str]]:
        """The tool's fields (partition.py's `_CALL_FIELDS` …) and the facts its rules read."""
        assert self.tool is not None
        fields = {"input", "operations"}
        if self.tool.operations:
            fields.update(("risk", "effects"))
        facts: set[str] = set()
        for i in self.indices:
            fields.update(self.side.keys[i].tool_fields)
            facts.update(self.side.keys[i].facts)
        return fields, facts


_ORIGIN = re.compile(r',?"origin":(?:null|\{"file":"(?:[^"\\]|\\.)*","line":\d+,"column":\d+\})')
"""A model's `origin` in its JSON (a quote inside a user's text is escaped, so no text looks
like it)."""


def _without_origins(value: Any) -> Any:
    """`m.without_origins` for comparing, quicker: a model's JSON without its origins."""
    if isinstance(value, BaseModel):
        return _ORIGIN.sub("", value.model_dump_json())
    if isinstance(value, dict):
        return {k: _without_origins(v) for k, v in value.items()}
    return value


def same_model(a: Any, b: Any) -> bool:
    """Equal models, wherever they were declared (the quick test first)."""
    return bool(a == b) or _without_origins(a) == _without_origins(b)


def identical(a: ToolSide, b: ToolSide) -> bool:
    """Whether both sides decide every call to the tool alike for the same reasons: their keys
    are equal. Tested part by part, cheapest first, without building the keys."""
    if a.signature != b.signature:
        return False
    if a.tool is None or b.tool is None or a.side.policy is None or b.side.policy is None:
        return a.key == b.key
    if session_meanings_differ(a.side.spec, b.side.spec, [*a.rules, *b.rules]):
        return False  # another tool trusted, labelled or selected differently
    (fields, facts), (other_fields, other_facts) = a.read(), b.read()
    if fields != other_fields or facts != other_facts:
        return False
    if not all(same_model(getattr(a.tool, f), getattr(b.tool, f)) for f in sorted(fields)):
        return False
    old_facts, new_facts = a.side.spec.facts, b.side.spec.facts
    for name in facts:
        if (name in old_facts) != (name in new_facts):
            return False
        if name in old_facts and not same_model(old_facts[name].type, new_facts[name].type):
            return False
        if feeds(a.side.spec, name) != feeds(b.side.spec, name):
            return False  # an `on_success` adds to it on one side only
    return True


def tool_side(side: Side, tool_id: str) -> ToolSide:
    tool = side.spec.tools.get(tool_id)
    policy = side.policy
    if tool is None or policy is None or side.index is None:
        reason = REFUSED_UNREGISTERED.format(tool=tool_id) if tool is None else side.refusal
        name = policy.name if policy is not None else None
        refused = Outcome("deny", None, None, name, reason=reason, refused=True)
        return ToolSide(side, tool, [], [Winner("x", refused)], signature=("refused",))
    indices = side.index.bucket(tool)
    rules = [policy.rules[i] for i in indices]
    risks = _risks(tool)
    winners = []
    for p, i in enumerate(indices):
        by_risk = {risk: side.outcome(i, risk) for risk in risks}
        if len({o.key() for o in by_risk.values()}) == 1:
            winners.append(Winner(f"r{p}", by_risk[risks[0]], policy.rules[i], p))
        else:  # an ASK whose self-approval follows the call's risk
            winners += [
                Winner(f"r{p}:{risk}", o, policy.rules[i], p, risk) for risk, o in by_risk.items()
            ]
    defaults = {risk: _default_outcome(side.spec, policy, risk) for risk in risks}
    if len({o.key() for o in defaults.values()}) == 1:
        winners.append(Winner("d", defaults[risks[0]]))
    else:
        winners += [Winner(f"d:{risk}", o, risk=risk) for risk, o in defaults.items()]
    signature = (
        tuple(
            (side.keys[i].text, json.dumps(selected_as(rule, tool)) if tool.operations else True)
            for i, rule in zip(indices, rules, strict=True)
        ),
        tuple((w.name, w.outcome.key()) for w in winners),
    )
    return ToolSide(side, tool, rules, winners, indices, signature)


# ---------------------------------------------------------------------------------------------
# Solving one tool


@dataclass
class Found:
    """A region as the solver (or the cache) gives it: the two winners' names and a call."""

    old: str
    new: str
    call: Call
    inexact: bool
    old_session: dict[str, Any] = field(default_factory=dict)
    """The session terms whose meaning differs on the old side (sources.py), as the old spec
    reads the witness's session there; `call.session` is the new spec's reading."""


@dataclass
class ToolAnswers:
    found: list[Found] = field(default_factory=list)
    undecided: list[tuple[str | None, str | None, str]] = field(default_factory=list)
    queries: int = 0

    def to_json(self) -> str:
        return json.dumps(
            {
                "found": [
                    [f.old, f.new, asdict(f.call), f.inexact, f.old_session] for f in self.found
                ],
                "undecided": [list(u) for u in self.undecided],
                "queries": self.queries,
            },
            sort_keys=True,
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> ToolAnswers:
        data = json.loads(text)
        return cls(
            [Found(a, b, Call(**c), bool(x), dict(o)) for a, b, c, x, o in data["found"]],
            [(a, b, r) for a, b, r in data["undecided"]],
            int(data["queries"]),
        )

    @property
    def out_of_time(self) -> bool:
        return any(out_of_time(r) for _, _, r in self.undecided)


def solve_tool(old: ToolSide, new: ToolSide, rlimit: int) -> ToolAnswers:
    """Every region of one tool (module docstring), with z3."""
    import z3

    from .examples import forget_examples
    from .smt import Encoder, fresh_context
    from .smt_terms import Registry, conj, disj, negate
    from .solve import Completed, Questions
    from .sources import classes_of

    fresh_context()
    forget_examples()
    primary = new if new.tool is not None else old
    assert primary.tool is not None
    tools = {id(s): s.tool for s in (old, new)}
    limits: list[tuple[Key, list[int]]] = []
    if old.tool is not None and new.tool is not None and old.tool.input != new.tool.input:
        tools[id(old)], tools[id(new)], limits = _aligned(old.tool, new.tool)
    registry: Registry = {}
    enc = Encoder(primary.side.spec, tools[id(primary)], registry)  # type: ignore[arg-type]
    enc.sources = classes_of(old.side.spec, new.side.spec)
    everything = [*old.rules, *new.rules]
    real: set[Any] = set()
    for s in (old, new):
        if s.tool is not None:
            enc.spec, enc.tool = s.side.spec, tools[id(s)]  # type: ignore[assignment]
            enc.prepare(everything)
            real |= enc.real_keys or set()
    enc.real_keys = real
    conditions: dict[int, list[Any]] = {}
    inexact: dict[int, list[bool]] = {}
    for s in (old, new):
        if s.tool is not None:
            # each side's schema adds its own domain to the values both read
            enc._vars.clear()
            enc.spec, enc.tool = s.side.spec, tools[id(s)]  # type: ignore[assignment]
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
                cond = conj(match[p], *beaten)
            elif w.name == "x":
                cond = True
            else:
                cond = conj(*(negate(x) for x in match))
            if w.risk is not None:
                cond = conj(cond, enc.risk_expr() == m.risk_rank(w.risk))
            conds.append(cond)
        conditions[id(s)] = conds
        inexact[id(s)] = [w.position is not None and loose[w.position] for w in s.winners]
    enc.spec, enc.tool = primary.side.spec, tools[id(primary)]  # type: ignore[assignment]
    if old.tool is not None and new.tool is not None and old.tool.input != new.tool.input:
        _both_schemas(enc, ("args",), old.tool.input.fields, new.tool.input.fields)
        for key, allowed in limits:  # an enum's values both schemas accept
            value = enc.path(m.Path(root="args", parts=key[1:])).expr
            enc.domain.append(
                z3.Or(*(value == i for i in allowed)) if allowed else z3.BoolVal(False)
            )
    spec = primary.side.spec
    other = old.side.spec if primary is new else new.side.spec
    if any(name not in spec.facts for name in other.facts):
        # a witness carries the facts either side's rules read
        spec = spec.model_copy(update={"facts": {**other.facts, **spec.facts}})
    q = Questions(spec, enc.tool, enc, registry, rlimit)
    olds, news = conditions[id(old)], conditions[id(new)]
    answers = ToolAnswers()

    def group(side: ToolSide, conds: list[Any]) -> dict[tuple[Any, ...], list[Any]]:
        out: dict[tuple[Any, ...], list[Any]] = {}
        for w, c in zip(side.winners, conds, strict=True):
            out.setdefault(w.outcome.key(), []).append(c)
        return out

    old_groups, new_groups = group(old, olds), group(new, news)
    same = disj(
        *(conj(disj(*old_groups[k]), disj(*new_groups[k])) for k in old_groups if k in new_groups)
    )

    def which(model: Completed, conds: list[Any]) -> int:
        return next(i for i, c in enumerate(conds) if model.holds(c))

    blocked: list[Any] = []
    seen: set[tuple[int, int]] = set()
    while True:
        found = q.check(negate(same), *blocked)
        if found is None:
            break
        if found is False:
            answers.undecided.append((None, None, q.reason or "unknown"))
            break
        completed = q.complete(found)
        a, b = which(completed, olds), which(completed, news)
        if (a, b) in seen:  # cannot happen with an exact encoding; never loop
            break
        seen.add((a, b))
        call, old_session = _witness(q, enc, completed)
        answers.found.append(
            Found(
                old.winners[a].name,
                new.winners[b].name,
                call,
                inexact[id(old)][a] or inexact[id(new)][b],
                old_session,
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
                    call, old_session = _witness(q, enc, q.complete(found))
                    rough = inexact[id(old)][a] or inexact[id(new)][b]
                    answers.found.append(Found(wa.name, wb.name, call, rough, old_session))
    answers.queries = q.queries
    return answers


def _witness(q: Any, enc: Any, model: Any) -> tuple[Call, dict[str, Any]]:
    """The call of a completed model (`solve.Completed`), with where each argument came from
    (`Call.sources`, the classes the model puts it in) and the old side's reading of the terms
    whose meaning differs, all read back as the winner reads them."""
    from .smt_session import SOURCE
    from .solve import z3_value

    call = q.call(model)
    sources: dict[str, list[str]] = {}
    old: dict[str, Any] = {}
    for name in sorted(enc.kept):
        info = enc.registry[name]
        value = z3_value(model.eval(enc.kept[name]))
        if info.role == SOURCE:
            held = sources.setdefault(info.key[0], [])  # none: from nowhere
            if value is True:
                held.append(info.detail)
        else:
            old[info.key[1]] = value
    call.sources = {k: sorted(v) for k, v in sorted(sources.items())}
    _in_facts(enc.sources, call)
    return call, dict(sorted(old.items()))


def _in_facts(classes: Any, call: Call) -> None:
    """Each value the model puts among the session's facts, in the declared fact that can hold
    it (sources.py `FACTS`)."""
    from .concrete import ABSENT, read_value
    from .sources import FACTS, item_of

    if classes is None or classes.fact is None:
        return
    name, many = classes.fact
    for key, where in call.sources.items():
        if FACTS not in where:
            continue
        path, index = item_of(key)
        value = read_value(classes.new, path, call)
        if index is not None:
            value = value[index] if isinstance(value, list) and index < len(value) else ABSENT
        if not isinstance(value, str):
            continue
        if many:
            held = call.facts.get(name)
            call.facts[name] = [*(held if isinstance(held, list) else []), value]
        else:
            call.facts[name] = value


def _aligned(old: m.Tool, new: m.Tool) -> tuple[m.Tool, m.Tool, list[tuple[Key, list[int]]]]:
    """Both tools with each enum argument whose values differ given the same values in the
    same order (the old ones, then the new ones), so that a value is one number on both sides
    of the shared call; and, for each, the numbers of the values both schemas accept. (A tool's
    `op`, whose numbers follow its operations, is left as it is.)"""
    limits: list[tuple[Key, list[int]]] = []

    def retyped(f: m.Field, **update: Any) -> m.Field:
        return f.model_copy(update={"type": f.type.model_copy(update=update)})

    def merge(prefix: Key, a: tuple[m.Field, ...], b: tuple[m.Field, ...]) -> tuple[Any, Any]:
        theirs = {f.name: (j, f) for j, f in enumerate(b)}
        left, right = list(a), list(b)
        for i, f in enumerate(a):
            j, g = theirs.get(f.name, (-1, None))
            if g is None or f.type.name != g.type.name:
                continue
            key = (*prefix, f.name)
            if f.type.name == "object":
                mine, yours = merge(key, f.type.fields, g.type.fields)
                left[i], right[j] = retyped(f, fields=mine), retyped(g, fields=yours)
            elif f.type.name == "enum" and f.type.values != g.type.values:
                if key == ("args", "op") and (old.operations or new.operations):
                    continue
                values = (*f.type.values, *(v for v in g.type.values if v not in f.type.values))
                limits.append(
                    (
                        key,
                        [
                            n
                            for n, v in enumerate(values)
                            if v in f.type.values and v in g.type.values
                        ],
                    )
                )
                left[i], right[j] = retyped(f, values=values), retyped(g, values=values)
        return tuple(left), tuple(right)

    a, b = merge(("args",), old.input.fields, new.input.fields)

    def tool(t: m.Tool, fields: tuple[m.Field, ...]) -> m.Tool:
        return t.model_copy(update={"input": t.input.model_copy(update={"fields": fields})})

    return tool(old, a), tool(new, b), limits


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
