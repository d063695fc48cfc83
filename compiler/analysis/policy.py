"""Exact policy analysis over the typed model: which rules can win, with a witness call each.

For every policy, the rules are bucketed by tool: a tool's bucket holds the rules whose
selectors can match it (ids, globs, modules, packs, kinds, and the risk/effects sugar), in text
order, so the cost grows with tools × rules per tool rather than rules². In one bucket the
decision of language.md §6 is encoded exactly (smt.py): rule R wins a call when it matches,
no stronger rule matches, and no earlier rule of its effect matches. z3 then answers:

- a witness per rule that can win: a concrete call (re-judged by concrete.py) and its decision;
- `never-wins`: a rule that matches some call but always loses (naming the rule that beats it
  when a single one does), with an example call;
- `unsatisfiable`: a rule that matches no call at all;
- `opposite-effects`: two rules that match exactly the same calls with different effects;
- `absent-value`: a DENY or ASK reading a value that may be absent, without a `has` guard,
  that would fire if the value were there (it fails open), with the call where it does not;
- `default-allow`: a policy whose `default` is `allow`, with a call that falls to it.

"Allow, except …" overlaps are the normal shape of a policy and are not reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import z3
from harnessc.runtime import model as m
from harnessc.runtime.semantics import selects

from .concrete import (
    STRENGTH,
    Call,
    Decision,
    Witness,
    decide,
    default_decision,
    format_duration,
    schema_problems,
)
from .examples import NoExampleError, forget_examples, string_example
from .smt import BUILTINS, Encoder, fresh_context
from .smt_session import SESSION
from .smt_terms import Key, Registry, conj, negate, to_z3
from .text import term_of

__all__ = [
    "FINDING_KINDS",
    "Call",
    "Decision",
    "Finding",
    "PolicyAnalysis",
    "Witness",
    "analyse_policies",
    "analyse_policy",
    "sample_value",
]

FINDING_KINDS = (
    "never-wins",
    "unsatisfiable",
    "opposite-effects",
    "absent-value",
    "default-allow",
)
TIMEOUT_MS = 10_000


@dataclass
class Finding:
    """One thing lint reports (L001 never-wins … L005 default-allow).

    `rule` and `other_rule` are rule labels as decisions show them (`remediation.freeze`);
    `origin` is where `rule` (or the policy's default) is written. `exact` is False when the
    claim rests on a part of a condition z3 could only approximate.
    """

    kind: str
    policy: str
    rule: str | None
    other_rule: str | None
    message: str
    example: Witness | None
    origin: m.SourceRef | None
    exact: bool = True


@dataclass
class PolicyAnalysis:
    """What the analysis found: findings for lints, and a witness call per rule that can fire.

    `witnesses[policy][rule_label]` — one policy may include another's rules, so the same label
    can have a witness under several policies.
    """

    findings: list[Finding] = field(default_factory=list)
    witnesses: dict[str, dict[str, Witness]] = field(default_factory=dict)
    queries: int = 0

    def witness(self, policy: str, rule: str) -> Witness | None:
        return self.witnesses.get(policy, {}).get(rule)


def analyse_policies(spec: m.Spec) -> PolicyAnalysis:
    """Stage analyse: every policy of the spec, in name order."""
    fresh_context()
    forget_examples()
    analysis = PolicyAnalysis()
    for name in sorted(spec.policies):
        analyse_policy(spec, spec.policies[name], analysis)
    return analysis


def analyse_policy(
    spec: m.Spec, policy: m.Policy, analysis: PolicyAnalysis | None = None
) -> PolicyAnalysis:
    analysis = analysis if analysis is not None else PolicyAnalysis()
    _PolicyAnalyser(spec, policy, analysis).run()
    return analysis


# ---------------------------------------------------------------------------------------------
# Which rules can match which tools


def _static_selects(sel: m.Selector, tool: m.Tool) -> bool:
    """Whether the selector can match some call to the tool (sugar: for some operation)."""
    views = [{"risk": op.risk, "effects": op.effects} for op in tool.operations.values()]
    if not views:
        return selects(sel, tool)
    return any(selects(sel, tool, view) for view in views)


class _Index:
    """Rules by the tools they can match, without testing every rule against every tool."""

    def __init__(self, rules: tuple[m.Rule, ...]) -> None:
        self.rules = rules
        self.by_id: dict[str, set[int]] = {}
        self.by_pack: dict[str, set[int]] = {}
        self.by_kind: dict[str, set[int]] = {}
        self.scan: list[tuple[int, m.Selector]] = []
        for i, rule in enumerate(rules):
            for sel in rule.selectors:
                if sel.kind == "id":
                    self.by_id.setdefault(sel.value, set()).add(i)
                elif sel.kind == "module":
                    for tool_id in sel.tools:
                        self.by_id.setdefault(tool_id, set()).add(i)
                elif sel.kind == "pack":
                    self.by_pack.setdefault(sel.value, set()).add(i)
                elif sel.kind == "kind":
                    self.by_kind.setdefault(sel.value, set()).add(i)
                else:
                    self.scan.append((i, sel))

    def bucket(self, tool: m.Tool) -> list[int]:
        found = set(self.by_id.get(tool.id, ()))
        for pack in tool.packs:
            found |= self.by_pack.get(pack, set())
        found |= self.by_kind.get(tool.kind, set())
        found |= {i for i, sel in self.scan if i not in found and _static_selects(sel, tool)}
        return sorted(found)


# ---------------------------------------------------------------------------------------------
# Reading a call back out of a model


def _key_text(key: Key) -> str:
    return ".".join(key[1:]) if key[0] == "fact" else ".".join(key)


def _z3_value(value: Any) -> Any:
    if z3.is_true(value):
        return True
    if z3.is_false(value):
        return False
    if z3.is_int_value(value):
        return value.as_long()
    if z3.is_rational_value(value):
        fraction = value.as_fraction()
        return int(fraction) if fraction.denominator == 1 else float(fraction)
    if z3.is_string_value(value):
        return value.as_string()
    return None


def _sample_string(f: m.Field | None) -> str:
    low = int(f.min) if f is not None and f.min is not None else 0
    high = int(f.max) if f is not None and f.max is not None else None
    pattern = f.pattern if f is not None else None
    return _sample_pattern(pattern, low, high)


def _sample_pattern(pattern: str | None, low: int, high: int | None) -> str:
    fallback = "x" * max(low, 1) if high is None or high >= 1 else ""
    if pattern is None:
        return fallback
    try:
        return string_example(pattern, low, high)
    except NoExampleError:
        return fallback


def sample_value(f: m.Field | None, t: m.Type) -> Any:
    """A value of the type that satisfies the field's constraints, for what no rule reads."""
    name = t.name
    if f is not None and f.default is not None:
        return f.default
    if name in ("string", "url"):
        if name == "url" and (f is None or f.pattern is None):
            return "https://example.com/"
        return _sample_string(f)
    if name == "path":
        return "/workspace/file.txt" if f is None or f.pattern is None else _sample_string(f)
    if name == "duration":
        return "1m"
    if name in ("int", "float"):
        low = f.min if f is not None and f.min is not None else 0
        high = f.max if f is not None and f.max is not None else None
        value = max(low, 0) if high is None or high >= 0 else high
        return int(value) if name == "int" else float(value)
    if name == "bool":
        return False
    if name == "enum":
        return t.values[0] if t.values else ""
    if name == "list":
        count = int(f.min) if f is not None and f.min is not None else 0
        assert t.item is not None
        return [sample_value(None, t.item) for _ in range(count)]
    if name == "map":
        return {}
    return {g.name: sample_value(g, g.type) for g in t.fields if g.required}


@dataclass
class _Reading:
    """The call a model describes, before it is assembled into records."""

    present: dict[Key, bool] = field(default_factory=dict)
    values: dict[Key, dict[str, Any]] = field(default_factory=dict)
    tags: dict[Key, int] = field(default_factory=dict)
    members: dict[Key, dict[Any, bool]] = field(default_factory=dict)
    funcs: dict[tuple[str, str], bool] = field(default_factory=dict)
    lengths: dict[Key, int] = field(default_factory=dict)
    session: dict[str, Any] = field(default_factory=dict)
    """Session state by the term's canonical form (smt_session.SESSION): a boolean, a number,
    or the items of an `urls`/`hosts`/`emails` term."""


def _read_model(model: z3.ModelRef, registry: Registry) -> _Reading:
    out = _Reading()
    for decl in model.decls():
        info = registry.get(decl.name())
        if info is None or info.alt:
            continue
        value = _z3_value(model[decl])
        if info.role == SESSION:
            out.session[info.key[1]] = value
        elif info.role == "in" and info.key[0] == "extract":
            if value:
                out.session.setdefault(info.key[1], []).append(info.detail)
        elif info.role == "len":
            out.lengths[info.key] = int(value)
        elif info.role == "has":
            out.present[info.key] = bool(value)
        elif info.role == "v":
            out.values.setdefault(info.key, {})[info.detail] = value
        elif info.role == "tag":
            out.tags[info.key] = value
        elif info.role == "in":
            out.members.setdefault(info.key, {})[info.detail] = bool(value)
        elif info.role == "fn":
            out.funcs[(info.key[0], info.key[1])] = bool(value)
    return out


def _texts_for(reading: _Reading, texts: dict[int, str]) -> None:
    """Strings encoded by number become texts: a known one, or a fresh one for each other
    number (distinct numbers, distinct texts, none equal to a known one)."""
    fresh: dict[int, str] = {}
    known = set(texts.values())
    for key in sorted(reading.values):
        raw = reading.values[key]
        if "sym" not in raw or raw["sym"] is None:
            continue
        n = raw.pop("sym")
        if n in texts:
            raw["str"] = texts[n]
            continue
        if n not in fresh:
            count = 1
            while (text := f"{key[-1]}-{count}") in known:
                count += 1
            known.add(text)
            fresh[n] = text
        raw["str"] = fresh[n]


def _quoted(session: dict[str, Any]) -> set[Key]:
    """The call's values whose provenance the session state is about (`args.iban from …`)."""
    out: set[Key] = set()
    for key in session:
        term = term_of(key)
        if isinstance(term, m.Provenance) and isinstance(term.value, m.Path):
            out.add((term.value.root, *term.value.parts))
    return out


class _Assembler:
    """Turns a model's reading into a `Call` to one tool."""

    def __init__(self, spec: m.Spec, tool: m.Tool, reading: _Reading, absent: set[Key]) -> None:
        self.spec, self.tool, self.r, self.absent = spec, tool, reading, absent
        self.quoted = _quoted(reading.session)

    def quotable(self, key: Key, f: m.Field | None, name: str) -> Any:
        """For a value only provenance reads, one a session can quote (an id-like text, a
        number of four digits), or None: a short sample (`x`, `0`) is found in no message."""
        if key not in self.quoted or f is None or f.default is not None:
            return None
        if f.pattern is not None or f.min is not None or f.max is not None:
            return None
        return {"string": f"{key[-1]}-sample-1", "int": 1234}.get(name)

    def is_present(self, key: Key, always: bool) -> bool:
        if key in self.absent:
            return False
        return always or self.r.present.get(key, False)

    def typed(self, key: Key, f: m.Field | None, t: m.Type) -> Any:
        name = t.name
        raw = self.r.values.get(key, {})
        if name == "enum" and "enum" in raw and raw["enum"] is not None:
            return t.values[raw["enum"]] if 0 <= raw["enum"] < len(t.values) else t.values[0]
        if name in ("string", "url", "path") and raw.get("str") is not None:
            return raw["str"]
        if not raw and (quoted := self.quotable(key, f, name)) is not None:
            return quoted
        if name == "int" and raw.get("int") is not None:
            return raw["int"]
        if name == "duration" and raw.get("int") is not None:
            return format_duration(int(raw["int"]))
        if name == "float" and raw.get("real") is not None:
            return float(raw["real"])
        if name == "bool" and raw.get("bool") is not None:
            return raw["bool"]
        if name == "list":
            return self.list_value(key, f, t)
        if name == "object":
            return self.fields(key, t.fields)
        if name == "map":
            return self.untyped_children(key, t.item)
        return sample_value(f, t)

    def list_value(self, key: Key, f: m.Field | None, t: m.Type) -> list[Any]:
        members = self.r.members.get(key, {})
        items: list[Any] = [w for w, yes in members.items() if yes]
        if key == ("actor", "roles"):
            role = self.actor_role()
            items = [role, *[i for i in items if i != role]]
        count = int(f.min) if f is not None and f.min is not None else 0
        count = max(count, self.r.lengths.get(key, 0))
        n = 0
        while len(items) < count:
            n += 1
            # named after its list, so two lists' items are different values (provenance
            # reads each value, and one list's item must not answer for another's)
            filler = f"{key[-1]}-item-{n}"
            if filler not in members:
                items.append(filler)
        return items

    def actor_role(self) -> str:
        return str(self.r.values.get(("actor", "role"), {}).get("str") or "member")

    def fields(self, prefix: Key, fields: tuple[m.Field, ...]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields:
            key = (*prefix, f.name)
            always = not f.type.optional or f.default is not None
            read = self.is_read(key)
            if f.required or (always and read):
                if key not in self.absent:
                    out[f.name] = self.typed(key, f, f.type)
            elif not always and self.is_present(key, False):
                out[f.name] = self.typed(key, f, f.type)
        return out

    def is_read(self, key: Key) -> bool:
        r = self.r
        return (
            key in r.values
            or key in r.members
            or key in r.lengths
            or any(k[: len(key)] == key for k in r.present)
        )

    def untyped(self, key: Key) -> Any:
        raw = self.r.values.get(key, {})
        tag = self.r.tags.get(key)
        sort = ("str", "real", "bool", "other")[tag] if tag is not None and 0 <= tag < 4 else None
        if sort is None:
            sort = next((s for s in ("str", "real", "bool") if raw.get(s) is not None), "str")
        if sort == "other":
            members = self.r.members.get(key, {})
            return [w for w, yes in members.items() if yes]
        value = raw.get(sort)
        if value is None:
            return {"str": "x", "real": 0, "bool": False}[sort]
        return value

    def untyped_children(self, prefix: Key, item: m.Type | None) -> dict[str, Any]:
        """The present values under `prefix`, as nested records."""
        out: dict[str, Any] = {}
        keys = {
            k for k in (*self.r.present, *self.r.values, *self.r.members) if len(k) > len(prefix)
        }
        for key in sorted(k for k in keys if k[: len(prefix)] == prefix):
            if not self.is_present(key, False) and key not in self.r.values:
                continue
            if key in self.absent or self.r.present.get(key) is False:
                continue
            if key not in self.r.present and not self.typed_builtin(key):
                continue
            where = out
            for part in key[len(prefix) : -1]:
                nested = where.setdefault(part, {})
                if not isinstance(nested, dict):
                    break
                where = nested
            else:
                where[key[-1]] = self.value_at(key, item if len(key) == len(prefix) + 1 else None)
        return out

    def typed_builtin(self, key: Key) -> bool:
        known = BUILTINS.get(key[:2])
        return known is not None and known[1]

    def value_at(self, key: Key, item: m.Type | None) -> Any:
        known = BUILTINS.get(key[:2]) if len(key) == 2 else None
        if known is not None:
            return self.typed(key, None, known[0])
        if item is not None:
            return self.typed(key, None, item)
        return self.untyped(key)

    def call(self) -> Call:
        actor = self.untyped_children(("actor",), None)
        actor["user"] = self.r.values.get(("actor", "user"), {}).get("str") or "u-1"
        actor["role"] = self.actor_role()
        if ("actor", "roles") in self.r.members:
            actor["roles"] = self.list_value(("actor", "roles"), None, m.Type(name="list"))
        facts: dict[str, Any] = {}
        for name, fact in self.spec.facts.items():
            key = ("fact", name)
            if not self.is_present(key, False):
                continue
            if fact.type.name in ("object", "map"):
                facts[name] = self.untyped_children(key, fact.type.item)
            else:
                facts[name] = self.typed(key, None, fact.type)
        connections = {n: v for (f, n), v in self.r.funcs.items() if f == "connected"}
        runtimes = {n: v for (f, n), v in self.r.funcs.items() if f == "running"}
        return Call(
            tool=self.tool.id,
            args=self.fields(("args",), self.tool.input.fields),
            actor=actor,
            resource=self.untyped_children(("resource",), None),
            facts=facts,
            task=self.untyped_children(("task",), None),
            env=self.untyped_children(("env",), None),
            execution=self.untyped_children(("call",), None),
            connections=connections,
            runtimes=runtimes,
            session=dict(sorted(self.r.session.items())),
        )


# ---------------------------------------------------------------------------------------------
# One tool's bucket


class _Bucket:
    """The rules that can match one tool, encoded over one symbolic call, and a solver."""

    def __init__(self, az: _PolicyAnalyser, tool: m.Tool, indices: list[int]) -> None:
        self.az = az
        self.tool = tool
        self.indices = indices
        self.enc = Encoder(az.spec, tool, az.registry)
        self.enc.prepare(az.rules[i] for i in indices)
        self.match: dict[int, Any] = {}
        self.inexact: dict[int, bool] = {}
        for i in indices:
            before = len(self.enc.inexact)
            self.match[i] = self.enc.rule_match(az.rules[i])
            self.inexact[i] = len(self.enc.inexact) > before
        self.solver = z3.SimpleSolver()
        self.solver.set("timeout", TIMEOUT_MS)
        self.solver.add(*self.enc.domain)
        self.added = len(self.enc.domain)

    def beaten_by(self, i: int) -> list[int]:
        rules = self.az.rules
        effect = STRENGTH[rules[i].effect]
        return [
            j
            for j in self.indices
            if STRENGTH[rules[j].effect] > effect or (rules[j].effect == rules[i].effect and j < i)
        ]

    def wins(self, i: int) -> Any:
        return conj(self.match[i], *(negate(self.match[j]) for j in self.beaten_by(i)))

    def check(self, *constraints: Any, nice: bool = True) -> z3.ModelRef | bool | None:
        """A model, None when unsatisfiable, or False when z3 gave up.

        With `nice`, the encoder's preferences are tried first, for readable witnesses.
        """
        self.az.analysis.queries += 1
        extra = self.enc.domain[self.added :]
        self.solver.push()
        self.solver.add(*extra, *(to_z3(c) for c in constraints))
        result = z3.unknown
        if nice and self.enc.nice:
            self.solver.push()
            self.solver.add(*self.enc.nice)
            result = self.solver.check()
            model = self.solver.model() if result == z3.sat else None
            self.solver.pop()
        if result != z3.sat:
            self.az.analysis.queries += 1 if nice and self.enc.nice else 0
            result = self.solver.check()
            model = self.solver.model() if result == z3.sat else None
        self.solver.pop()
        if result == z3.unknown:
            return False
        return model

    def winner(self, model: z3.ModelRef) -> int | None:
        """The rule that wins the model's call, by the same meaning as the encoding."""
        rules = self.az.rules
        matched = [
            i
            for i in self.indices
            if z3.is_true(model.eval(to_z3(self.match[i]), model_completion=True))
        ]
        if not matched:
            return None
        strongest = max(STRENGTH[rules[i].effect] for i in matched)
        return next(i for i in matched if STRENGTH[rules[i].effect] == strongest)

    def call(self, model: z3.ModelRef, absent: Iterable[Key] = ()) -> Call:
        reading = _read_model(model, self.az.registry)
        _texts_for(reading, self.enc.texts())
        for name, var in self.enc.session_vars():
            key = self.az.registry[name].key[1]
            if key not in reading.session:  # a term no constraint of the query mentions
                reading.session[key] = _z3_value(model.eval(var, model_completion=True))
        return _Assembler(self.az.spec, self.tool, reading, set(absent)).call()


# ---------------------------------------------------------------------------------------------
# One policy


def _paths(cond: object) -> Iterator[m.Path]:
    if isinstance(cond, m.Path):
        yield cond
    elif isinstance(cond, m.Compare):
        yield from _paths(cond.left)
        yield from _paths(cond.right)
    elif isinstance(cond, m.And | m.Or):
        for item in cond.items:
            yield from _paths(item)
    elif isinstance(cond, m.Not):
        yield from _paths(cond.item)
    elif isinstance(cond, m.ListValue):
        for item in cond.items:
            yield from _paths(item)
    elif isinstance(cond, m.Length):
        yield from _paths(cond.of)  # absent with its value (session terms read no call value)


def _guarded(cond: object) -> set[Key]:
    """Values whose presence the condition tests with `has`."""
    out: set[Key] = set()
    if isinstance(cond, m.Compare):
        if (
            cond.op == "has"
            and isinstance(cond.left, m.Path)
            and isinstance(cond.right, m.EnumMember)
        ):
            out.add((*_key(cond.left), cond.right.name))
    elif isinstance(cond, m.And | m.Or):
        for item in cond.items:
            out |= _guarded(item)
    elif isinstance(cond, m.Not):
        out |= _guarded(cond.item)
    return out


def _key(path: m.Path) -> Key:
    return (path.root, *path.parts)


def _reads(rule: m.Rule) -> list[Key]:
    """Values the rule's condition reads that a call may lack, without a `has` guard."""
    if rule.condition is None:
        return []
    guarded = _guarded(rule.condition)
    found: list[Key] = []
    for path in _paths(rule.condition):
        key = _key(path)
        if path.root in ("tool", "input", "step") or not path.parts or key in found:
            continue
        if any(key[:n] in guarded for n in range(2, len(key) + 1)):
            continue
        known = BUILTINS.get(key[:2])
        if known is not None and known[1] and len(key) == 2:
            continue
        found.append(key)
    return found


def _may_be_absent(tool: m.Tool, key: Key) -> bool:
    if key[0] != "args":
        return True
    fields = tool.input.fields
    for part in key[1:]:
        f = next((g for g in fields if g.name == part), None)
        if f is None:
            return True
        if f.type.optional and f.default is None:
            return True
        fields = f.type.fields
    return False


class _PolicyAnalyser:
    def __init__(self, spec: m.Spec, policy: m.Policy, analysis: PolicyAnalysis) -> None:
        self.spec = spec
        self.policy = policy
        self.analysis = analysis
        self.rules = policy.rules
        self.registry: Registry = {}
        self.index = _Index(self.rules)
        self.scope: dict[int, list[str]] = {i: [] for i in range(len(self.rules))}
        self.witnesses: dict[str, Witness] = analysis.witnesses.setdefault(policy.name, {})
        self.won: set[int] = set()
        self.matchable: dict[int, tuple[str, Witness]] = {}
        self.inexact: set[int] = set()
        self.absent_done: set[tuple[int, Key]] = set()
        self.reads = {i: _reads(r) for i, r in enumerate(self.rules)}
        self.default_example: Witness | None = None

    # =========================================================================================

    def run(self) -> None:
        tools = [self.spec.tools[t] for t in sorted(self.spec.tools)]
        wants_default = self.policy.default is not None and self.policy.default.effect == "allow"
        for tool in tools:
            indices = self.index.bucket(tool)
            for i in indices:
                self.scope[i].append(tool.id)
            checks = self.absent_checks(tool, indices)
            open_rules = [i for i in indices if i not in self.won]
            needs_default = wants_default and self.default_example is None
            if not (open_rules or checks or needs_default):
                continue
            bucket = _Bucket(self, tool, indices)
            self.inexact |= {i for i, yes in bucket.inexact.items() if yes}
            for i in open_rules:
                self.try_win(bucket, i)
            for i, key in checks:
                self.check_absent(bucket, i, key)
            if needs_default:
                self.find_default(bucket)
        self.report_losers()
        if wants_default:
            self.report_default_allow()

    def witness_for(
        self, bucket: _Bucket, model: z3.ModelRef, absent: Iterable[Key] = ()
    ) -> Witness:
        call = bucket.call(model, absent)
        winner = bucket.winner(model)
        if winner is None:
            decision = default_decision(self.spec, self.policy, call)
        else:
            rule = self.rules[winner]
            decision = Decision(
                rule.effect,
                rule.label,
                [{"kind": a.kind, "value": a.value} for a in rule.approvers],
                rule.reason,
            )
        witness = Witness(self.policy.name, decision.rule, call, decision)
        self.verify(witness, bucket.indices)
        return witness

    def verify(self, witness: Witness, indices: list[int]) -> None:
        """Re-judge the call the plain way; a disagreement makes the witness inexact.

        Only the bucket's rules can match a call to its tool, so only they are re-judged.
        """
        rules = tuple(self.rules[i] for i in indices)
        actual = decide(self.spec, self.policy.model_copy(update={"rules": rules}), witness.call)
        if actual != witness.decision:
            witness.exact = False
            witness.notes.append(
                f"re-judged, the call is decided `{actual.effect}` by "
                f"`{actual.rule or 'the default'}`"
            )
        problems = schema_problems(self.spec, witness.call)
        if problems:
            witness.exact = False
            witness.notes.extend(problems)

    def try_win(self, bucket: _Bucket, i: int) -> None:
        model = bucket.check(bucket.wins(i))
        if isinstance(model, z3.ModelRef):
            self.won.add(i)
            self.witnesses[self.rules[i].label] = self.witness_for(bucket, model)
            return
        if model is False:
            self.inexact.add(i)
        if i in self.matchable:
            return
        found = bucket.check(bucket.match[i])
        if isinstance(found, z3.ModelRef):
            self.matchable[i] = (bucket.tool.id, self.witness_for(bucket, found))
        elif found is False:
            self.inexact.add(i)

    # --- absent values ------------------------------------------------------------------------

    def absent_checks(self, tool: m.Tool, indices: list[int]) -> list[tuple[int, Key]]:
        return [
            (i, key)
            for i in indices
            if self.rules[i].effect in ("deny", "ask")
            for key in self.reads[i]
            if (i, key) not in self.absent_done and _may_be_absent(tool, key)
        ]

    def check_absent(self, bucket: _Bucket, i: int, key: Key) -> None:
        """Does the rule fire for some value of `key`, but not when `key` is absent?"""
        enc, rule = bucket.enc, self.rules[i]
        enc.override = {key: False}
        when_absent = enc.rule_match(rule)
        enc.override = {key: True}
        when_present = enc.rule_match(rule)
        enc.override = {}
        # usually unsatisfiable: look for a readable example only once one exists
        if not isinstance(bucket.check(negate(when_absent), when_present, nice=False), z3.ModelRef):
            return
        model = bucket.check(negate(when_absent), when_present)
        if not isinstance(model, z3.ModelRef):
            return
        self.absent_done.add((i, key))
        example = self.witness_for(bucket, model, absent=[key])
        what = _key_text(key)
        effect = rule.effect
        self.add(
            "absent-value",
            rule,
            None,
            f"`{rule.label}` reads `{what}` without a `has` guard, so the {effect} does not "
            f"apply when `{what}` is absent",
            example,
            exact=i not in self.inexact and example.exact,
        )

    # --- default allow ------------------------------------------------------------------------

    def find_default(self, bucket: _Bucket) -> None:
        model = bucket.check(*(negate(bucket.match[i]) for i in bucket.indices))
        if isinstance(model, z3.ModelRef):
            self.default_example = self.witness_for(bucket, model)

    def report_default_allow(self) -> None:
        default = self.policy.default
        self.analysis.findings.append(
            Finding(
                "default-allow",
                self.policy.name,
                None,
                None,
                f"policy `{self.policy.name}` allows every call that no rule matches",
                self.default_example,
                default.origin if default is not None else self.policy.origin,
            )
        )

    # --- rules that never win -------------------------------------------------------------------

    def report_losers(self) -> None:
        for i, rule in enumerate(self.rules):
            if i in self.won or not self.scope[i]:
                continue
            exact = i not in self.inexact
            if i not in self.matchable:
                self.add(
                    "unsatisfiable",
                    rule,
                    None,
                    f"rule `{rule.label}` matches no call: its condition can never hold",
                    None,
                    exact=exact,
                )
                continue
            _, example = self.matchable[i]
            twin = self.same_calls(i)
            if twin is not None:
                other = self.rules[twin]
                self.add(
                    "opposite-effects",
                    rule,
                    other,
                    f"rules `{other.label}` and `{rule.label}` match the same calls with "
                    f"opposite effects (`{other.effect}` and `{rule.effect}`)",
                    example,
                    exact=exact and twin not in self.inexact,
                )
                continue
            beater = self.single_beater(i)
            if beater is not None:
                other = self.rules[beater]
                why = (
                    f"the earlier `{other.effect}` rule `{other.label}`"
                    if other.effect == rule.effect
                    else f"the `{other.effect}` rule `{other.label}`"
                )
                message = f"rule `{rule.label}` can never win: {why} matches every call it matches"
            else:
                message = (
                    f"rule `{rule.label}` can never win: stronger or earlier rules decide every "
                    "call it matches"
                )
            self.add(
                "never-wins",
                rule,
                self.rules[beater] if beater is not None else None,
                message,
                example,
                exact=exact,
            )

    def buckets(self, i: int) -> Iterator[_Bucket]:
        for tool_id in self.scope[i]:
            tool = self.spec.tools[tool_id]
            yield _Bucket(self, tool, self.index.bucket(tool))

    def candidates(self, i: int) -> list[int]:
        effect = STRENGTH[self.rules[i].effect]
        mine = set(self.scope[i])
        return [
            j
            for j, other in enumerate(self.rules)
            if j != i
            and (
                STRENGTH[other.effect] > effect or (other.effect == self.rules[i].effect and j < i)
            )
            and mine <= set(self.scope[j])
        ]

    def single_beater(self, i: int) -> int | None:
        """A rule that by itself beats `i` on every call `i` matches."""
        left = self.candidates(i)
        for bucket in self.buckets(i):
            left = [
                j
                for j in left
                if bucket.check(bucket.match[i], negate(bucket.match[j]), nice=False) is None
            ]
            if not left:
                return None
        return left[0] if left else None

    def same_calls(self, i: int) -> int | None:
        """A rule with another effect that matches exactly the calls `i` matches."""
        mine = set(self.scope[i])
        left = [
            j
            for j in self.candidates(i)
            if self.rules[j].effect != self.rules[i].effect and set(self.scope[j]) == mine
        ]
        for bucket in self.buckets(i) if left else ():
            a = bucket.match[i]
            left = [
                j
                for j in left
                if bucket.check(z3.Xor(to_z3(a), to_z3(bucket.match[j])), nice=False) is None
            ]
            if not left:
                return None
        return left[0] if left else None

    def add(
        self,
        kind: str,
        rule: m.Rule,
        other: m.Rule | None,
        message: str,
        example: Witness | None,
        exact: bool = True,
    ) -> None:
        self.analysis.findings.append(
            Finding(
                kind,
                self.policy.name,
                rule.label,
                other.label if other is not None else None,
                message,
                example,
                rule.origin,
                exact,
            )
        )
