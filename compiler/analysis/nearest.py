"""The nearest call decided differently: the fewest values of one call to change so that a policy
decides it another way (z3), each answer verified by deciding the changed call with the runtime.

The rules of the policy that can match the call's tool are encoded once over one symbolic call
(solve.py's `Bucket`, the encoding of smt.py), and the policy's decision is written over it: an
effect wins when a rule of that effect matches and no stronger one does, and when no rule
matches the default decides (an effect, or a risk table over the call's risk). Every value the
rules read is a group of z3 variables (its presence, its value, its type tag, a list's members
and length; a session term's value; `connected(c)`), and each group is pinned to what the call
has. The question for an outcome is then: is there a call with that outcome at all (everything
free)? and, if so, what is the smallest number of groups to release (`AtMost`, k = 1, 2, …)? A
model is read back into a call (solve.py's assembler), only the released values are copied into
the original call, and the runtime's `PolicyEngine` decides the result: a counterfactual is
reported as found only when the runtime agrees, and when a changed value moves a session term the
call did not pin (a provenance of a new value), that term is listed among the changes too.

Session terms are uninterpreted, as in the analysis: a change of one is realised as the earlier
steps of a session that give it its value (prelude.py) and replayed by the runtime's ledger.
Every question has the analysis's budget (budget.py); a question z3 gives up on is reported as
such, never as an answer.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

import z3
from harnessc.runtime import model as m
from harnessc.runtime.judge.conditions import Scope, evaluate, read_path, roles_of, value_of
from harnessc.runtime.judge.history import prelude_ledger
from harnessc.runtime.judge.policy import CallContext, Decision, PolicyEngine
from harnessc.runtime.judge.policy import call_scope as runtime_scope
from harnessc.runtime.model.semantics import selects, tool_view, value_in

from .budget import query_rlimit
from .concrete import STRENGTH, Call, visit_nodes
from .prelude import session_prelude
from .smt import fresh_context
from .smt_session import SESSION
from .smt_terms import Key, conj, disj, negate, to_z3
from .solve import Bucket
from .text import spec_text, term_of

__all__ = [
    "EFFECTS",
    "Change",
    "Counterfactual",
    "bucket_rules",
    "call_scope",
    "has_field",
    "nearest",
    "read_values",
    "tested_field",
]

EFFECTS = ("allow", "ask", "deny")
MAX_ATTEMPTS = 3
"""How many different calls z3 may propose for one outcome before the search stops (a proposal
the runtime decides otherwise, where the encoding is inexact, is excluded and the next asked)."""


@dataclass
class Change:
    """One value of the call to change: `what` names it as the spec reads it (`args.environment`,
    `actor.role`, `release.freeze`, `connected(change_platform)`, or a session term's text);
    `kind` is `argument`, `actor`, `fact`, `resource`, `task`, `env`, `call`, `connection`,
    `runtime` or `session`. A value absent before or after has `present` False there."""

    what: str
    kind: str
    old: Any
    new: Any
    old_present: bool = True
    new_present: bool = True
    implied: bool = False
    """A session term that moved because another listed value changed (the provenance of a new
    value): not a change of its own."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "kind": self.kind,
            "old": self.old if self.old_present else None,
            "new": self.new if self.new_present else None,
            "old_present": self.old_present,
            "new_present": self.new_present,
            "implied": self.implied,
        }


@dataclass
class Counterfactual:
    """The nearest call with outcome `target`, or why there is none.

    `status`: `found` (verified by the runtime: `decision` is its decision of `call`),
    `unreachable` (z3 proved no call in `scope` has that outcome), `undecided` (z3 gave up:
    `reason`), `unverified` (z3 proposed calls the runtime decided otherwise; none is reported).
    `scope`: `any` (every value may change) or `arguments` (only the call's arguments).
    `blockers`: for an unreachable outcome, rules that match every call in scope (a stronger
    effect) and `missing` rules of the target's effect that match none, each with the values
    outside the scope that their conditions read.
    """

    target: str
    scope: str
    status: str
    changes: list[Change] = field(default_factory=list)
    call: CallContext | None = None
    decision: Decision | None = None
    before: list[m.SessionStep] = field(default_factory=list)
    reason: str = ""
    fresh_only: bool = False
    """An unreachable outcome of changed arguments was searched among values new to the
    call's session (a value the session already holds has its own provenance)."""
    session_replaced: bool = False
    """The call had a session (a ledger) and `before` replaces it whole."""
    blockers: list[tuple[m.Rule, list[tuple[str, Any]]]] = field(default_factory=list)
    missing: list[tuple[m.Rule, list[tuple[str, Any]]]] = field(default_factory=list)
    deciders: list[m.Rule] = field(default_factory=list)
    """For an unreachable outcome no single rule accounts for: the rules that decide the calls
    in scope instead."""
    queries: int = 0


# ---------------------------------------------------------------------------------------------
# The call as the runtime reads it


def call_scope(spec: m.Spec, call: CallContext, engine: PolicyEngine | None = None) -> Scope:
    """What a condition reads of `call`, its `path` arguments normalized as the runtime does; a
    path that leaves its root (a call the runtime refuses) is read as given."""
    args: Mapping[str, Any] = call.args
    fixer = (engine or PolicyEngine(spec)).fixers.get(call.tool_id)
    if fixer is not None:
        try:
            args = fixer(dict(call.args))
        except Exception:
            args = call.args
    return runtime_scope(spec, spec.tools[call.tool_id], call, args)


def bucket_rules(policy: m.Policy, tool: m.Tool) -> list[m.Rule]:
    """The rules of the policy that can match some call of the tool, in text order."""
    views = [tool_view(tool), *(tool_view(tool, op) for op in tool.operations)]
    return [r for r in policy.rules if any(selects(s, tool, v) for s in r.selectors for v in views)]


def _read(scope: Scope, key: Key) -> Any:
    if key[:2] == ("actor", "roles"):
        return roles_of(scope.actor)
    # a key is a Path's root and parts, as _group_of and the partition make it
    return read_path(m.Path(root=cast("m.PathRoot", key[0]), parts=key[1:]), scope)


def _group_of(role: str, key: Key, detail: Any) -> Key | None:
    """The value a z3 variable belongs to: changed or kept as one."""
    if role == "free":
        return None
    if role == SESSION:
        return (SESSION, key[1])
    if role == "in" and key[0] == "extract":
        return (SESSION, key[1])
    if role == "fn":
        return ("fn", *key)
    return key


# ---------------------------------------------------------------------------------------------
# The search


class _Search:
    def __init__(
        self, spec: m.Spec, policy: m.Policy, call: CallContext, engine: PolicyEngine
    ) -> None:
        self.spec, self.policy, self.call, self.engine = spec, policy, call, engine
        self.tool = spec.tools[call.tool_id]
        self.rules = bucket_rules(policy, self.tool)
        self.scope = call_scope(spec, call, engine)
        fresh_context()
        self.bucket = Bucket(spec, self.tool, self.rules, query_rlimit())
        self.enc = self.bucket.enc
        self.effect_of = {e: self._effect(e) for e in EFFECTS}
        self.groups: dict[Key, list[tuple[Any, Any]]] = {}
        self.original: dict[Key, Any] = {}
        self._pin()
        kept = {g: conj(*(v == o for v, o in pins)) for g, pins in self.groups.items()}
        self.changed = {g: negate(k) for g, k in kept.items()}
        self.follows: list[Any] = []
        """What a session term is when a value it reads changes (`_session_links`)."""
        self._session_links(kept)
        self._readable()

    # --- the decision over the symbolic call --------------------------------------------------

    def _effect(self, effect: str) -> Any:
        match = self.bucket.match
        by = {
            e: disj(*(match[p] for p, r in enumerate(self.rules) if r.effect == e)) for e in EFFECTS
        }
        stronger = [e for e in EFFECTS if STRENGTH[e] > STRENGTH[effect]]
        ruled = conj(by[effect], *(negate(by[e]) for e in stronger))
        nothing = negate(disj(*match))
        return disj(ruled, conj(nothing, self._default_is(effect)))

    def _default_is(self, effect: str) -> Any:
        d = self.policy.default
        if d is None:
            return effect == "deny"
        if d.table is None:
            return (d.effect or "deny") == effect
        table = self.spec.risk_tables.get(d.table)
        levels = [
            level
            for level in m.RISK_LEVELS
            if (table.entries.get(level).effect if table and table.entries.get(level) else "deny")  # type: ignore[call-overload]
            == effect
        ]
        risk = self.enc.risk_expr()
        return disj(*(z3.simplify(risk == m.risk_rank(level)) for level in levels))

    # --- the call's own values ----------------------------------------------------------------

    def _readable(self) -> None:
        """Keep the encoder's wishes for readable values (non-empty text, absolute paths) that
        the call's own values meet: a changed value is readable, a kept one stays as it is."""
        pins = [(v, o) for found in self.groups.values() for v, o in found]
        kept = []
        # a value given rather than taken away: `release.freeze` false, not absent
        present = [
            var == True  # noqa: E712 - a z3 equation
            for name, var in self.enc._vars.items()
            if (info := self.bucket.registry.get(name)) is not None
            and info.role == "has"
            and not info.alt
        ]
        for wish in [*self.enc.nice, *present]:
            held = z3.simplify(z3.substitute(wish, *pins)) if pins else wish
            if not z3.is_false(held):
                kept.append(wish)
        self.enc.nice = kept

    def _pin(self) -> None:
        """Each variable's value on the call, by the value it belongs to."""
        found: list[tuple[Key, Any, Any]] = []
        for name, var in list(self.enc._vars.items()):
            info = self.bucket.registry.get(name)
            if info is None or info.alt:
                continue
            group = _group_of(info.role, info.key, info.detail)
            if group is None:
                continue
            value = self._value_of(info.role, info.key, info.detail, var)
            if value is not None:
                found.append((group, var, value))
        for group, var, value in found:
            self.groups.setdefault(group, []).append((var, value))

    def _value_of(self, role: str, key: Key, detail: Any, var: Any) -> Any:
        if role == SESSION:
            return _z3(var, self._session_value(key[1]))
        if role == "fn":
            func, name = key
            up = self.call.connected if func == "connected" else self.call.running
            return z3.BoolVal(name in up)
        if role == "in" and key[0] == "extract":
            items = value_of(term_of(key[1]), self.scope)
            return z3.BoolVal(isinstance(items, list | tuple) and detail in items)
        value = _read(self.scope, key)
        self.original[key] = value
        if role == "has":
            return z3.BoolVal(value is not None)
        if value is None:
            return None  # absent: only its presence is pinned
        if role == "in":
            return z3.BoolVal(isinstance(value, list | tuple) and detail in value)
        if role == "inv":  # the list holds a value of the call (`args.iban in known.ibans`)
            return z3.BoolVal(value_in(_read(self.scope, detail), value))
        if role == "len":
            return z3.IntVal(len(value)) if isinstance(value, list | tuple | dict | str) else None
        if role == "tag":
            return z3.IntVal(_tag(value))
        if role != "v":
            return None
        if detail == "sym":
            text = value if isinstance(value, str) else f"\x00{value!r}"
            return self.enc.lit(text)
        if detail == "enum":
            type_ = self.enc.info(key)[0]
            values = type_.values if type_ is not None else ()
            return z3.IntVal(values.index(value)) if value in values else None
        return _z3(var, value)

    def _session_value(self, canon: str) -> Any:
        term = term_of(canon)
        if isinstance(term, m.Provenance):
            if value_of(term.value, self.scope) is None:
                # absent: the term is false whatever it holds; held as for a value no
                # source has, so a value the change adds is read as the runtime reads it
                return term.source == "nowhere" and self.call.ledger is None
            return evaluate(term, self.scope)
        if isinstance(term, m.Quantified):
            return evaluate(term, self.scope)
        return value_of(term, self.scope)

    def _session_links(self, kept: dict[Key, Any]) -> None:
        """A session term follows the call's values it reads (a provenance's value, a
        quantifier's list, a `when` over the arguments, a `sum`'s field, a sugar selector's
        operation): it is kept only while they are, and moves with them without counting as
        a change of its own. A provenance term of a changed value reads a value no source
        holds — from nowhere — as the runtime reads a value new to the session."""
        for g in [g for g in self.groups if g[0] == SESSION]:
            term = term_of(g[1])
            reads = self._reads_of(term)
            if not reads:
                continue
            same = conj(*(kept[r] for r in reads))
            self.changed[g] = conj(same, negate(kept[g]))
            if isinstance(term, m.Provenance):
                fresh = term.source == "nowhere"
                self.follows += [
                    z3.Implies(z3.Not(to_z3(same)), v == z3.BoolVal(fresh))
                    for v, _ in self.groups[g]
                ]

    def _reads_of(self, term: m.Condition) -> list[Key]:
        """The groups of the call's own values a session term reads."""
        keys: list[Key] = []
        if isinstance(term, m.History):
            sugar = any(sel.kind in ("risk", "effects") for sel in term.selectors)
            if sugar and self.tool.operations:
                keys.append(("args", "op"))
        for path in _paths(term):
            keys.append((path.root, *path.parts))
        return [
            g
            for g in self.groups
            if g[0] not in (SESSION, "fn")
            and any(g[: len(k)] == k or k[: len(g)] == g for k in keys)
        ]

    # --- questions ----------------------------------------------------------------------------

    def ask(self, *constraints: Any) -> z3.ModelRef | bool | None:
        return self.bucket.check(*self.follows, *constraints, nice=False)

    def pinned(self, free: Iterable[Key]) -> list[Any]:
        free = set(free)
        return [negate(c) for g, c in self.changed.items() if g not in free]

    def moved(self, model: z3.ModelRef) -> list[Key]:
        return [
            g
            for g, c in self.changed.items()
            if z3.is_true(model.eval(to_z3(c), model_completion=True))
        ]

    def search(self, target: str, free: Sequence[Key]) -> Counterfactual:
        scope = "any" if len(free) == len(self.groups) else "arguments"
        out = Counterfactual(target, scope, "unreachable")
        out.fresh_only = self.call.ledger is not None and bool(self.follows)
        goal = self.effect_of[target]
        fixed = self.pinned(free)
        excluded: list[Any] = []
        before = self.bucket.queries
        try:
            found = self.ask(goal, *fixed)
            if found is None:
                return out
            for _attempt in range(MAX_ATTEMPTS):
                if found is False:
                    out.status, out.reason = "undecided", self.bucket.reason or "unknown"
                    return out
                if found is None:
                    out.status = "unverified" if out.reason else "unreachable"
                    return out
                assert isinstance(found, z3.ModelRef)
                model = self._smallest(goal, fixed, excluded, found, free)
                if model is False:
                    out.status, out.reason = "undecided", self.bucket.reason or "unknown"
                    return out
                assert isinstance(model, z3.ModelRef)
                verdict = self.realise(model, target)
                if isinstance(verdict, str):
                    out.reason = verdict
                    excluded.append(self.exclusion(model))
                    found = self.ask(goal, *fixed, *excluded)
                    continue
                out.status = "found"
                out.changes, out.call, out.decision, out.before = verdict
                out.session_replaced = self.call.ledger is not None and any(
                    c.kind == "session" and not c.implied for c in out.changes
                )
                out.reason = ""
                return out
            out.status = "unverified"
            return out
        finally:
            out.queries = self.bucket.queries - before

    def _smallest(
        self,
        goal: Any,
        fixed: list[Any],
        excluded: list[Any],
        found: z3.ModelRef,
        free: Sequence[Key],
    ) -> z3.ModelRef | bool:
        """The model with the fewest moved values: k = 1, 2, … below what `found` moved; the
        last question asked again with the wishes for readable values."""
        best = found
        most = len(self.moved(found))
        flags = [to_z3(self.changed[g]) for g in free if g in self.changed]
        for k in range(1, most):
            smaller = self.ask(goal, *fixed, *excluded, z3.AtMost(*flags, k))
            if smaller is False:
                return False
            if isinstance(smaller, z3.ModelRef):
                best, most = smaller, k
                break
        if flags and self.enc.nice:
            nicer = self.bucket.check(
                *self.follows, goal, *fixed, *excluded, z3.AtMost(*flags, most)
            )
            if isinstance(nicer, z3.ModelRef):
                return nicer
        return best

    def exclusion(self, model: z3.ModelRef) -> Any:
        """Not this proposal again: one of its moved values, or of the conditions z3 could
        only leave free (inexact), takes another value."""
        parts = []
        for g in self.moved(model):
            pins = self.groups[g]
            parts.append(z3.And(*(v == model.eval(v, model_completion=True) for v, _ in pins)))
        for name, var in self.enc._vars.items():
            info = self.bucket.registry.get(name)
            if info is not None and info.role == "free":
                parts.append(var == model.eval(var, model_completion=True))
        return z3.Not(z3.And(*parts)) if parts else z3.BoolVal(False)

    # --- the proposal as a call, decided by the runtime ----------------------------------------

    def realise(
        self, model: z3.ModelRef, target: str
    ) -> str | tuple[list[Change], CallContext, Decision, list[m.SessionStep]]:
        """The call with the model's moved values, decided by the runtime; or why not."""
        moved = self.moved(model)
        proposal = self.bucket.call(model)
        call = _thaw(self.call)
        session: dict[str, Any] = {}
        changes: list[Change] = []
        for g in moved:
            if g[0] == SESSION:
                new = proposal.session.get(g[1])
                session[g[1]] = new
                changes.append(
                    Change(spec_text(term_of(g[1])), "session", self._session_value(g[1]), new)
                )
                continue
            if g[0] == "fn":
                func, name = g[1], g[2]
                up = set(call.connected if func == "connected" else call.running)
                table = proposal.connections if func == "connected" else proposal.runtimes
                now = bool(table.get(name, False))
                changes.append(
                    Change(
                        f"{func}({name})",
                        "connection" if func == "connected" else "runtime",
                        name in up,
                        now,
                    )
                )
                up = up | {name} if now else up - {name}
                if func == "connected":
                    call.connected = frozenset(up)
                else:
                    call.running = frozenset(up)
                continue
            new, present = self._new_value(g, model, proposal)
            old = self.original.get(g)
            if g == ("actor", "roles"):
                old = self.call.actor.get("roles")  # as given: without the role it adds
            if (old is None and not present) or (present and _plain(old) == new):
                continue  # moved in z3's terms only (a role's roles), not in the call
            _put(call, g, new, present)
            changes.append(
                Change(_path_text(g), _KINDS.get(g[0], g[0]), old, new, old is not None, present)
            )
        steps: list[m.SessionStep] = []
        if session:
            prelude = self._prelude(call, session, proposal)
            if isinstance(prelude, str):
                return prelude
            steps = prelude
            call = replace(call, ledger=prelude_ledger(self.spec, steps, int(time.time() * 1000)))
        decision = self.engine.decider(self.policy.name).decide(call)
        if decision.effect != target:
            return (
                f"z3 proposed a call the runtime decides {decision.effect} "
                f"({decision.rule or 'the default'})"
            )
        changes += self._implied(call, moved)
        return changes, call, decision, steps

    def _prelude(
        self, call: CallContext, session: dict[str, Any], proposal: Call
    ) -> list[m.SessionStep] | str:
        """The steps of a session that give the session terms their new values. A recorded
        call's session is rebuilt whole (every term the rules read, at its value), since the
        steps replace its ledger; a call judged outside a session needs only the changed ones."""
        concrete = _concrete(call)
        tries = [session]
        if self.call.ledger is not None:
            every = {g[1]: proposal.session.get(g[1]) for g in self.groups if g[0] == SESSION}
            tries.insert(0, {**every, **session})
        missing = ""
        for state in tries:
            concrete.session = state
            prelude = session_prelude(self.spec, concrete)
            if prelude.missing is None and prelude.args is None:
                return prelude.steps
            missing = prelude.missing or "it would change a text of the call"
        return f"no session can be built for it: {missing}"

    def _new_value(self, g: Key, model: z3.ModelRef, proposal: Call) -> tuple[Any, bool]:
        """A moved value's new value: a list keeps its other items; else the proposal's."""
        old = self.original.get(g)
        members = [
            (info.detail, var)
            for name, var in self.enc._vars.items()
            if (info := self.bucket.registry.get(name)) is not None
            and not info.alt
            and info.key == g
            and info.role in ("in", "len")
        ]
        members += [
            (item, var)
            for name, var in self.enc.variables.items()
            if (info := self.bucket.registry.get(name)) is not None
            and not info.alt
            and info.key == g
            and info.role == "inv"
            and (item := _dig(_records(proposal), info.detail)) is not None
        ]
        if members:
            has = self.enc._vars.get(f"has|{chr(31).join(g)}|None")
            if has is not None and z3.is_false(model.eval(has, model_completion=True)):
                return None, False
            items = list(old) if isinstance(old, list | tuple) else []
            length = None
            for detail, var in members:
                value = model.eval(var, model_completion=True)
                if detail is None:
                    length = value.as_long()
                elif z3.is_true(value) and detail not in items:
                    items.append(detail)
                elif z3.is_false(value) and detail in items:
                    items = [i for i in items if i != detail]
            if g == ("actor", "roles"):
                role = self.scope.actor.get("role")
                items = [i for i in items if i != role]
            n = 0
            while length is not None and len(items) < length:
                n += 1
                filler = f"{g[-1]}-item-{n}"
                if filler not in items:
                    items.append(filler)
            return items, True
        found = _dig(_records(proposal), g)
        return found, found is not None

    def _implied(self, call: CallContext, moved: list[Key]) -> list[Change]:
        """Session terms the change moved without asking (the provenance of a new value)."""
        scope = call_scope(self.spec, call, self.engine)
        out = []
        for g in self.groups:
            if g[0] != SESSION or g in moved:
                continue
            term = term_of(g[1])
            before = _session_now(term, self.scope)
            after = _session_now(term, scope)
            if before != after:
                out.append(Change(spec_text(term), "session", before, after, implied=True))
        return out


def _paths(node: object) -> list[m.Path]:
    """The call's values a session term reads: its paths, but a quantifier's variable, an
    earlier call's result and the tool's own attributes."""
    found: list[m.Path] = []

    def visit(item: object) -> bool:
        if isinstance(item, m.Path) and item.parts and item.root not in ("var", "result", "tool"):
            found.append(item)
        return isinstance(item, m.Path)

    visit_nodes(node, visit)
    return found


def _session_now(term: m.Condition, scope: Scope) -> Any:
    if isinstance(term, m.Provenance | m.Quantified):
        return evaluate(term, scope)
    return value_of(term, scope)


# ---------------------------------------------------------------------------------------------
# Values


def _tag(value: Any) -> int:
    if isinstance(value, str):
        return 0
    if isinstance(value, bool):
        return 2
    if isinstance(value, int | float):
        return 1
    return 3


def _z3(var: Any, value: Any) -> Any:
    """`value` in the sort of `var`, or None when it has no such value."""
    sort = var.sort()
    if sort == z3.BoolSort():
        return z3.BoolVal(value) if isinstance(value, bool) else None
    if isinstance(value, bool):
        return None
    if sort == z3.IntSort():
        if isinstance(value, str):
            value = m.parse_duration(value)
        return z3.IntVal(value) if isinstance(value, int) else None
    if sort == z3.RealSort():
        return z3.RealVal(repr(float(value))) if isinstance(value, int | float) else None
    if sort == z3.StringSort():
        return z3.StringVal(value) if isinstance(value, str) else None
    return None


_KINDS = {
    "args": "argument",
    "actor": "actor",
    "fact": "fact",
    "resource": "resource",
    "task": "task",
    "env": "env",
    "call": "call",
}


def _path_text(key: Key) -> str:
    return ".".join(key[1:]) if key[0] == "fact" else ".".join(key)


def _records(call: Call | CallContext) -> dict[str, Any]:
    """The records of a call (the analysis's or the runtime's) by the root that reads them."""
    return {
        "args": call.args,
        "actor": call.actor,
        "resource": call.resource,
        "task": call.task,
        "env": call.env,
        "call": call.execution,
        "fact": call.facts,
    }


def _dig(roots: Mapping[str, Any], key: Key) -> Any:
    value: Any = roots.get(key[0])
    for part in key[1:]:
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


_RECORDS = ("args", "actor", "resource", "task", "env", "facts", "execution")
"""The records a call holds, by their name in both `CallContext` and the analysis's `Call`."""


def _thaw(call: CallContext) -> CallContext:
    """A copy of the call whose records may be changed (a recorded call's are read-only)."""
    return replace(call, **{name: _plain(getattr(call, name)) for name in _RECORDS})


def _plain(value: Any) -> Any:
    """A deep copy of JSON-like data, read-only mappings and tuples included."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _put(call: CallContext, key: Key, value: Any, present: bool) -> None:
    root, *parts = key
    if root == "call" and parts == ["tool_call_id"]:
        call.tool_call_id = value if present else None
        return
    record: Any = _records(call)[root]
    for part in parts[:-1]:
        inner = record.get(part)
        if not isinstance(inner, dict):
            if not present:
                return
            inner = record[part] = {}
        record = inner
    if present:
        record[parts[-1]] = value
    else:
        record.pop(parts[-1], None)


def _concrete(call: CallContext) -> Call:
    """The runtime's call as the analysis writes one (for prelude.py)."""
    return Call(
        tool=call.tool_id,
        connections={c: True for c in call.connected},
        runtimes={r: True for r in call.running},
        **{name: _plain(getattr(call, name)) for name in _RECORDS},
    )


def has_field(node: object) -> bool:
    """`X has f` for a record X: a test of the field `X.f`."""
    return (
        isinstance(node, m.Compare)
        and node.op == "has"
        and isinstance(node.left, m.Path)
        and isinstance(node.right, m.EnumMember)
        and node.left.root != "tool"
    )


def tested_field(node: m.Compare) -> m.Path:
    """The field `X.f` that `X has f` tests."""
    assert isinstance(node.left, m.Path) and isinstance(node.right, m.EnumMember)
    return m.Path(root=node.left.root, parts=(*node.left.parts, node.right.name))


def read_values(cond: object, scope: Scope) -> list[tuple[str, Any]]:
    """The values a condition reads, outside the arguments, with their values on the call: a
    path (a `has` test by the field it tests), a session term, `connected(c)`."""
    found: dict[str, Any] = {}

    def visit(node: object) -> bool:
        if has_field(node):
            assert isinstance(node, m.Compare)
            node = tested_field(node)
        if isinstance(node, m.Path):
            if node.parts and node.root not in ("tool", "var", "result", "args"):
                found.setdefault(spec_text(node), read_path(node, scope))
            return True
        if isinstance(node, m.FactCall):
            found.setdefault(spec_text(node), value_of(node, scope))
            return True
        if isinstance(node, m.Provenance | m.Quantified | m.History):
            found.setdefault(spec_text(node), _session_now(node, scope))
            return True
        return False

    visit_nodes(cond, visit)
    return list(found.items())


# ---------------------------------------------------------------------------------------------
# The entry point


def nearest(
    spec: m.Spec,
    policy: m.Policy,
    call: CallContext,
    targets: Sequence[str],
    engine: PolicyEngine | None = None,
) -> list[Counterfactual]:
    """For each outcome in `targets`: the nearest call with that outcome, changing any value of
    the call; and when that change is not to the arguments alone, the nearest changing only the
    arguments, or the proof that none exists (with the rules that stand in the way)."""
    engine = engine or PolicyEngine(spec)
    try:
        search = _Search(spec, policy, call, engine)
    except z3.Z3Exception as error:  # an encoding z3 refuses: said, never guessed around
        reason = f"z3 cannot encode the rules of this tool: {error}"
        return [Counterfactual(target, "any", "undecided", reason=reason) for target in targets]
    out: list[Counterfactual] = []
    everything = list(search.groups)
    arguments = [g for g in everything if g[0] == "args"]
    for target in targets:
        found = search.search(target, everything)
        out.append(found)
        if found.status == "found" and all(c.kind == "argument" for c in found.changes):
            continue
        if found.status in ("unreachable", "undecided"):
            continue
        only = search.search(target, arguments)
        if only.status == "found" and len(only.changes) <= len(found.changes):
            only.scope = "any"  # as near, and the caller can make it alone
            out[-1] = only
            continue
        if only.status == "unreachable":
            _blockers(search, only, arguments)
        out.append(only)
    return out


def _blockers(search: _Search, out: Counterfactual, free: Sequence[Key]) -> None:
    """Why no change in scope reaches `out.target`: stronger rules that match every call in
    scope, and rules of the target's effect that match none."""
    fixed = search.pinned(free)
    target = out.target
    for p, rule in enumerate(search.rules):
        stronger = STRENGTH[rule.effect] > STRENGTH[target]
        if not stronger and rule.effect != target:
            continue
        question = negate(search.bucket.match[p]) if stronger else search.bucket.match[p]
        answer = search.ask(question, *fixed)
        out.queries += 1
        if answer is not None:
            continue
        values = read_values(rule.condition, search.scope)
        (out.blockers if stronger else out.missing).append((rule, values))
    if out.blockers or z3.is_false(z3.simplify(to_z3(search._default_is(target)))):
        return  # said by the rules, or the default never gives the target
    for p, rule in enumerate(search.rules):
        if rule.effect == target:
            continue
        answer = search.ask(search.bucket.wins(p), *fixed)
        out.queries += 1
        if isinstance(answer, z3.ModelRef):
            out.deciders.append(rule)
