"""The policy decision engine: a spec's policies compiled into deciders, and a naive reference.

A policy is compiled on first use: its rules are bucketed by tool id (exact ids, globs,
module globs, `pack:`, `kind:` and the `risk`/`effects` sugar are expanded against the
registry, so each tool id owns its ordered list of candidate rules), and each tool gets one
generated Python function, compiled on the tool's first decision, that normalizes the call's
paths and tests its candidates' conditions inline (see `Decider`). Deciding a call is one dict
lookup and one call of that
function, whose matches pick a cached decision (language.md §6):

- DENY beats ASK beats ALLOW; the winning rule is the first matching rule of the strongest
  effect in text order (includes expanded in place); its options are the decision's;
- when no rule matches, the policy's `default` applies: an effect, or a risk table entry for the
  call's risk (its operation's, when the tool has operations and `args.op` names one); a policy
  without a default denies with "no rule allows this call";
- `path` arguments are normalized first; one whose `..` leaves its root is refused (DENY).

>>> from harnessc.runtime.model import Policy, Rule, Selector, Spec, Tool
>>> spec = Spec(name="s", root_module="s",
...     tools={"t": Tool(id="t", wire_name="t")},
...     policies={"s.p": Policy(name="s.p", rules=(Rule(label="p.r", policy="s.p",
...         effect="allow", selectors=(Selector(kind="id", value="t"),)),))})
>>> PolicyEngine(spec).decider("p").decide(CallContext("t")).effect
'allow'
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from itertools import takewhile
from types import CodeType, FunctionType
from typing import Any

from ..model.ir import (
    Approver,
    DefaultDecision,
    Grant,
    Policy,
    RiskEntry,
    Rule,
    Selector,
    SourceRef,
    Spec,
    Tool,
    Type,
    collection_paused,
    requester_may_approve,
)
from ..model.semantics import normalize_path, selects, tool_view
from .conditions import Emitter, Scope, evaluate, helpers
from .context import CallContext
from .evidence_terms import session_evidence
from .history import HistoryTerms, reads_session

__all__ = [
    "NO_RULE_REASON",
    "CallContext",
    "Decider",
    "Decision",
    "PolicyEngine",
    "UnknownPolicyError",
    "call_scope",
    "naive_decide",
    "tool_view",
]

NO_RULE_REASON = "no rule allows this call"
_STRENGTH = {"deny": 2, "ask": 1, "allow": 0}
_CACHE_LIMIT = 4096


class UnknownPolicyError(KeyError):
    """`PolicyEngine.decider` was asked for a policy the spec does not declare."""


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of one call under one policy.

    `rule` is the winning rule's label (None when the default applied or the call was
    refused), `matched` every matching rule's label in text order, `origin` the winning rule's
    (or the default's) source line.
    """

    effect: str
    rule: str | None
    matched: tuple[str, ...]
    reason: str | None
    instead: str | None
    approvers: tuple[Approver, ...]
    grant: Grant | None
    default_used: bool
    origin: SourceRef | None
    policy: str
    tool_id: str
    requester_may_approve: bool = True
    """For an ASK: whether the actor who asked may approve the call themselves (the ASK's
    `self_approval`, else only below risk `high`)."""
    evidence: tuple[str, ...] = ()
    """When the winning rule reads the session (provenance, history): one sentence per such
    term that held, e.g. "`args.iban` appears only in the result of `mail.read` (untrusted),
    event #41"."""
    expires_ms: int | None = None
    """For an ASK: how long its request waits for an answer (`expires`); None: until
    answered."""

    @classmethod
    def denied(
        cls, reason: str, *, policy: str, tool_id: str, default_used: bool = True
    ) -> Decision:
        """A DENY no rule made: no rule matched and nothing else applies, or nothing could
        judge the call (`default_used=False`: the call was refused before any rule)."""
        return cls(
            effect="deny",
            rule=None,
            matched=(),
            reason=reason,
            instead=None,
            approvers=(),
            grant=None,
            default_used=default_used,
            origin=None,
            policy=policy,
            tool_id=tool_id,
        )


# ---------------------------------------------------------------------------------------------
# The registry side: tool views, selectors, path arguments


def _views(tool: Tool) -> list[dict[str, Any]]:
    """Every view a call of this tool can have: the tool's own, and one per operation."""
    return [tool_view(tool), *(tool_view(tool, op) for op in tool.operations)]


def _static_match(selector: Selector, tool: Tool) -> bool | Callable[[Mapping[str, Any]], bool]:
    """True or False when the answer is the same for every call of the tool, else a test of
    the call's tool view (`risk`/`effects` sugar on a tool whose operations differ)."""
    if selector.kind in ("risk", "effects"):
        answers = {selects(selector, tool, view) for view in _views(tool)}
        if len(answers) == 1:
            return answers.pop()
        return partial(selects, selector, tool)
    return selects(selector, tool)


PathFix = Callable[[Any], Any]


class _Escape(Exception):
    def __init__(self, where: str, value: object) -> None:
        super().__init__(where)
        self.where, self.value = where, value


def _path_fixer(type_: Type, where: str) -> PathFix | None:
    """A function normalizing the `path` values inside a value of this type, or None when the
    type holds no path. It raises `_Escape` for a path that leaves its root."""
    if type_.name == "path":

        def fix_path(value: Any) -> Any:
            if type(value) is not str:
                return value
            fixed = normalize_path(value)
            if fixed is None:
                raise _Escape(where, value)
            return fixed

        return fix_path
    if type_.name in ("list", "map") and type_.item is not None:
        inner = _path_fixer(type_.item, where + ("[]" if type_.name == "list" else ".*"))
        if inner is None:
            return None
        if type_.name == "list":
            return lambda v: [inner(i) for i in v] if isinstance(v, list | tuple) else v
        return lambda v: {k: inner(i) for k, i in v.items()} if isinstance(v, Mapping) else v
    if type_.name == "object":
        return _fields_fixer(type_.fields, where + ".")
    return None


def _fields_fixer(fields: tuple[Any, ...], prefix: str) -> PathFix | None:
    fixers = {
        f.name: fx for f in fields if (fx := _path_fixer(f.type, prefix + f.name)) is not None
    }
    if not fixers:
        return None

    def fix_record(value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value
        out: dict[str, Any] | None = None
        for name, fx in fixers.items():
            old = value.get(name)
            if old is not None:
                new = fx(old)
                if new is not old and new != old:
                    if out is None:
                        out = dict(value)
                    out[name] = new
        return value if out is None else out

    return fix_record


def _refused(policy: str, tool_id: str, reason: str) -> Decision:
    """A call refused before any rule judged it (an unknown tool, a path that escapes)."""
    return Decision.denied(reason, policy=policy, tool_id=tool_id, default_used=False)


def _escape_reason(error: _Escape) -> str:
    return f"the path `{error.value}` in `{error.where}` leaves its root"


# ---------------------------------------------------------------------------------------------
# Deciders


class Decider:
    """A compiled policy: `decide(call)` judges one frozen call.

    Every tool gets one generated Python function, compiled with `compile()` on the tool's
    first decision (tools whose code reads the same share one code object), that normalizes
    the call's `path` arguments, picks the call's tool view (its operation's, when `args.op`
    names one), and runs the conditions of the tool's candidate rules inline, in text order, as
    plain Python expressions over locals. Every
    candidate is tested because a decision names every matching rule; the set of matches (a
    bit mask) then selects a cached `Decision`. Spec text never enters the generated source:
    keys, literals and regular expressions are bound to generated names (`_k3`) in the
    functions' namespace, and a tool's own data (its id, views, decision cache) to default
    arguments (`_T`, `_V`, `_C`).

    >>> # see the module docstring for a complete example
    """

    def __init__(self, engine: PolicyEngine, policy: Policy) -> None:
        self.policy = policy
        self.name = policy.name
        self.rules: tuple[Rule, ...] = policy.rules
        self._spec = engine.spec
        self._default = policy.default
        # rule index → True (selected for every call) or the tests of its dynamic selectors,
        # per tool; built from each selector's tools, so the cost follows what is selected
        slots: dict[str, dict[int, Any]] = {tool_id: {} for tool_id in engine.spec.tools}
        for i, rule in enumerate(self.rules):
            for selector in rule.selectors:
                for tool_id, answer in engine.selected(selector):
                    slot = slots[tool_id]
                    known = slot.get(i)
                    if known is True:
                        continue
                    if answer is True:
                        slot[i] = True
                    else:
                        slot.setdefault(i, []).append(answer)
        self._sources: dict[str, str] = {}
        self._constants: dict[str, Any] = {}
        self._terms = engine.terms
        # rules whose conditions read the session: their decisions carry evidence
        self._session_rules: dict[str, Rule] = {
            r.label: r for r in self.rules if r.condition is not None and reads_session(r.condition)
        }
        self._fns: dict[str, Callable[[CallContext], Decision]] = {}
        self._compile = _generator(self, engine, slots)
        self._order = tuple(slots)  # the registry's order, in which `compile_all` compiles
        self._compiling = threading.Lock()

    def decide(self, call: CallContext) -> Decision:
        """Judge a call: the strongest matching effect, its first rule, or the default. When
        the winning rule reads the session, the decision carries its `evidence`."""
        fn = self._fns.get(call.tool_id)
        if fn is None:
            fn = self.compiled(call.tool_id)
            if fn is None:
                reason = f"`{call.tool_id}` is not a registered tool"
                return _refused(self.name, call.tool_id, reason)
        decision = fn(call)
        if decision.rule is not None and decision.rule in self._session_rules:
            return with_evidence(decision, self._session_rules[decision.rule], call, self._terms)
        return decision

    def compiled(self, tool_id: str) -> Callable[[CallContext], Decision] | None:
        """The function deciding calls of `tool_id`, compiled now if no call of it was decided
        yet; None for a tool the spec does not register. A tool's function is compiled on its
        first decision, so loading a spec of thousands of tools compiles none of them."""
        fn = self._fns.get(tool_id)
        if fn is not None:
            return fn
        with self._compiling:  # the emitter's names and the namespace are shared
            fn = self._fns.get(tool_id)
            if fn is None and tool_id in self._spec.tools:
                fn = self._fns[tool_id] = self._compile(tool_id)
            return fn

    def compile_all(self) -> None:
        """Compile every tool's function not compiled yet, in the registry's order (a decider
        that decided nothing yet names its constants as an eager compilation would)."""
        for tool_id in self._order:
            if tool_id not in self._fns:
                self.compiled(tool_id)

    def source(self, tool_id: str) -> str:
        """The Python source this policy compiled for calls of `tool_id`: the function that
        decides them, exactly as `compile()` read it (its `_k…` names are `constants`).
        Compiles every tool's function first (`compile_all`): asked before any decision, the
        names are numbered in the registry's order, as the build's docs show them; after
        decisions, in the order of the tools' first calls.

        >>> # print(PolicyEngine(spec).decider("remediation").source("read_open"))
        """
        self.compile_all()
        found = self._sources.get(tool_id)
        if found is None:
            raise KeyError(f"`{tool_id}` is not a registered tool")
        return found

    @property
    def constants(self) -> Mapping[str, Any]:
        """The names the compiled source reads its keys, literals and patterns from (`_k3`).
        Compiles every tool's function first (`compile_all`)."""
        self.compile_all()
        return self._constants

    def _miss(
        self,
        indexes: tuple[int, ...],
        cache: dict[Any, Decision],
        tool_id: str,
        by_risk: bool,
        mask: int,
        view: Mapping[str, Any],
    ) -> Decision:
        """Build (and cache) the decision for one set of matching candidates. The key is the
        mask, or the risk when no rule matched; for a tool whose operations differ in risk,
        both (a decision says whether the requester may approve, which follows the risk)."""
        matched = [self.rules[i] for pos, i in enumerate(indexes) if mask >> pos & 1]
        decision = decide_from(self.name, self._spec, self._default, matched, view["risk"], tool_id)
        if len(cache) < _CACHE_LIMIT:
            cache[(mask, view["risk"]) if by_risk and mask else mask or view["risk"]] = decision
        return decision

    def rule(self, label: str) -> Rule | None:
        """The first rule with this label (`remediation.freeze`, `remediation#3`)."""
        return next((r for r in self.rules if r.label == label), None)


def _generator(
    decider: Decider, engine: PolicyEngine, slots: Mapping[str, Mapping[int, Any]]
) -> Callable[[str], Callable[[CallContext], Decision]]:
    """A function compiling one tool's `fn(call) -> Decision`; every tool's shares the
    generated namespace. The caller serialises calls (the emitter's state is shared)."""
    emitter = Emitter(engine.path_facts, engine.terms)
    k = emitter.const
    # each condition is emitted once and pasted into the functions of the tools it may judge
    # (per set of the tool's `path` arguments, which are normalized before conditions run)
    conditions = {i: r.condition for i, r in enumerate(decider.rules) if r.condition is not None}
    emitted: dict[tuple[int, frozenset[str]], tuple[str, bool]] = {}

    def expr(i: int, normal: frozenset[str]) -> tuple[str, bool]:
        found = emitted.get((i, normal))
        if found is None:
            emitter.reads_facts = False
            emitter.temps = 0  # a temporary lives inside one comparison: names can repeat
            emitter.normal_args = normal
            found = emitted[i, normal] = (emitter.cond(conditions[i]), emitter.reads_facts)
        return found

    name, spec = decider.name, engine.spec

    def escaped(tool_id: str, where: str, value: object) -> Decision:
        return _refused(name, tool_id, _escape_reason(_Escape(where, value)))

    def escaped_nested(tool_id: str, error: _Escape) -> Decision:
        return _refused(name, tool_id, _escape_reason(error))

    # the functions of tools whose code reads the same (most of them, in large registries)
    # share one compiled code object; what differs per tool is bound as default arguments
    codes: dict[str, CodeType] = {}
    texts: dict[str, str] = {}  # one copy of each source, however many tools share it
    namespace: dict[str, Any] = {
        "__builtins__": {},  # no builtins beyond the names the code uses
        "str": str,
        "bool": bool,
        "dict": dict,
        "_Escape": _Escape,
        **helpers(engine.terms),
    }
    decider._constants = emitter.consts

    def compile_tool(tool_id: str) -> Callable[[CallContext], Decision]:
        slot = slots[tool_id]
        tool = spec.tools[tool_id]
        indexes = tuple(sorted(slot))  # INVARIANT: text order, so bits follow the rules' order
        cache: dict[Any, Decision] = {}
        normal = frozenset(f.name for f in tool.input.fields if f.type.name == "path")
        exprs = {i: expr(i, normal) for i in indexes if i in conditions}
        body = ["a = x.args"]
        # `path` arguments first: normalized, or the call is refused when one leaves its root
        fixers: list[PathFix] = []
        for fld in tool.input.fields:
            key, where = k(fld.name), k("args." + fld.name)
            if fld.type.name == "path":
                body += [
                    f"v = a.get({key})",
                    "if v.__class__ is str:",
                    "    w = _norm(v)",
                    "    if w is None:",
                    f"        return _esc(_T, {where}, v)",
                    "    if w is not v and w != v:",
                    "        a = dict(a)",
                    f"        a[{key}] = w",
                ]
                continue
            fixer = _path_fixer(fld.type, "args." + fld.name)
            if fixer is not None:
                body += [
                    f"v = a.get({key})",
                    "if v is not None:",
                    "    try:",
                    f"        w = _F[{len(fixers)}](v)",
                    "    except _Escape as error:",
                    "        return _escn(_T, error)",
                    "    if w is not v and w != v:",
                    "        a = dict(a)",
                    f"        a[{key}] = w",
                ]
                fixers.append(fixer)
        # the call's tool view, and per view the candidates selected with no condition to run
        # (`base`) and those whose dynamic selectors select this view (`live`)
        views: dict[str | None, dict[str, Any]] = {None: engine.views[tool_id]}
        views.update({op: tool_view(tool, op) for op in tool.operations})
        per_view: dict[str | None, tuple[dict[str, Any], int, int, Any]] = {}
        for op, view in views.items():
            base = live = 0
            for pos, i in enumerate(indexes):
                answer = slot[i]
                if answer is not True and not any(test(view) for test in answer):
                    continue
                if i in exprs:
                    live |= 1 << pos
                else:
                    base |= 1 << pos
            per_view[op] = (view, base, live, view["risk"])
        first = per_view[None]
        # operations of different risk: a decision follows the risk too (`Decider._miss`)
        by_risk = len({v[3] for v in per_view.values()}) > 1
        miss = partial(decider._miss, indexes, cache, tool_id, by_risk)
        ops = {op: v for op, v in per_view.items() if op is not None}
        if ops:
            body += [
                f"o = a.get({k('op')})",
                "t, m, s, r = _O.get(o, _V) if o.__class__ is str else _V",
            ]
        else:
            body.append("t, m, s, r = _V")
        if any(exprs[i][1] for i in indexes if i in exprs):
            body.append("f = x.facts")
        for pos, i in enumerate(indexes):
            if i not in exprs:
                continue
            bit = 1 << pos
            if all(v[2] & bit for v in per_view.values()):
                body.append(f"if {exprs[i][0]}:")
            else:
                body.append(f"if s & {bit} and {exprs[i][0]}:")
            body.append(f"    m |= {bit}")
        body += [
            "d = _C.get((m, r) if m else r)" if by_risk else "d = _C.get(m or r)",
            "return _M(m, t) if d is None else d",
        ]
        source = (
            "def _d(x, _T=None, _M=None, _C=None, _V=None, _O=None, _F=None, _esc=None, "
            "_escn=None):\n    " + "\n    ".join(body) + "\n"
        )
        source = decider._sources[tool_id] = texts.setdefault(source, source)
        code = codes.get(source)
        if code is None:
            scratch: dict[str, Any] = {"__builtins__": {}}
            exec(compile(source, "<harness policy>", "exec"), scratch)
            code = codes[source] = scratch["_d"].__code__
        namespace.update(emitter.consts)  # before the function's first call reads them
        defaults = (tool_id, miss, cache, first, ops, tuple(fixers), escaped, escaped_nested)
        return FunctionType(code, namespace, "decide_tool", (None, *defaults)[1:])

    return compile_tool


def decide_from(
    policy: str,
    spec: Spec,
    default: DefaultDecision | None,
    matched: list[Rule],
    risk: str,
    tool_id: str,
) -> Decision:
    """The decision given the matching rules in text order (shared by both deciders)."""
    if matched:
        strongest = max(_STRENGTH[r.effect] for r in matched)
        win = next(r for r in matched if _STRENGTH[r.effect] == strongest)
        labels = tuple(r.label for r in matched)
        return _decision(win, win.effect, win.label, labels, win.origin, policy, tool_id, risk)
    if default is None:
        return Decision.denied(NO_RULE_REASON, policy=policy, tool_id=tool_id)
    if default.table is None:
        effect = default.effect or "deny"
        return _decision(default, effect, None, (), default.origin, policy, tool_id, risk)
    table = spec.risk_tables.get(default.table)
    entry = table.entries.get(risk) if table is not None else None  # type: ignore[call-overload]
    if entry is None:
        reason = f"the risk table `{default.table}` has no entry for risk `{risk}`"
        return Decision.denied(reason, policy=policy, tool_id=tool_id)
    origin = entry.origin or default.origin
    return _decision(entry, entry.effect, None, (), origin, policy, tool_id, risk)


def _decision(
    source: Rule | DefaultDecision | RiskEntry,
    effect: str,
    rule: str | None,
    matched: tuple[str, ...],
    origin: SourceRef | None,
    policy: str,
    tool_id: str,
    risk: str,
) -> Decision:
    """The decision a rule, a default or a risk-table entry makes: its options are the
    decision's (a default or an entry is `default_used`)."""
    return Decision(
        effect=effect,
        rule=rule,
        matched=matched,
        reason=source.reason,
        instead=source.instead,
        approvers=source.approvers,
        grant=source.grant,
        default_used=not isinstance(source, Rule),
        origin=origin,
        policy=policy,
        tool_id=tool_id,
        requester_may_approve=requester_may_approve(source.self_approval, risk),
        expires_ms=source.expires_ms,
    )


class PolicyEngine:
    """Every policy of a spec, compiled on first use; the runtime's decision engine.

    >>> # engine = PolicyEngine(spec); engine.decider("remediation").decide(CallContext(...))
    """

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.views = {tool.id: tool_view(tool) for tool in spec.tools.values()}
        self.fixers: dict[str, PathFix] = {}
        for tool in spec.tools.values():
            fixer = _fields_fixer(tool.input.fields, "args.")
            if fixer is not None:
                self.fixers[tool.id] = fixer
        self.path_facts = frozenset(n for n, f in spec.facts.items() if f.type.name == "path")
        self.terms = HistoryTerms(spec)
        """The spec's history terms; a session's `Ledger` is built over them."""
        self._deciders: dict[str, Decider] = {}
        self._named: dict[str, Decider] = {}
        """Each decider by every name it was asked for (qualified or a root-module name)."""
        self._ids = sorted(spec.tools)
        self._selected: dict[tuple[Any, ...], list[tuple[str, Any]]] = {}

    def selected(self, selector: Selector) -> list[tuple[str, Any]]:
        """The tools a selector selects: `(tool id, True)`, or `(tool id, test of the call's
        tool view)` for `risk`/`effects` sugar on a tool whose operations differ."""
        key = (selector.kind, selector.value, selector.op, selector.tools)
        found = self._selected.get(key)
        if found is not None:
            return found
        kind, value = selector.kind, selector.value
        tools = self.spec.tools
        # the index of ids only narrows the candidates: the selector itself decides
        candidates: Iterable[str]
        if kind == "id":
            candidates = [value] if value in tools else []
        elif kind == "glob":
            start = bisect_left(self._ids, value)
            candidates = takewhile(lambda tool_id: tool_id.startswith(value), self._ids[start:])
        elif kind == "module":
            candidates = [tool_id for tool_id in selector.tools if tool_id in tools]
        else:
            candidates = self._ids if kind == "all" else tools
        found = []
        for tool_id in candidates:
            answer = _static_match(selector, tools[tool_id])
            if answer is not False:
                found.append((tool_id, answer))
        self._selected[key] = found
        return found

    def decider(self, policy_name: str) -> Decider:
        """The compiled policy, by qualified name or a root-module name (`remediation`)."""
        decider = self._named.get(policy_name)  # asked for every decision: the name, once
        if decider is not None:
            return decider
        policy = self.spec.policy(policy_name)
        if policy is None:
            raise UnknownPolicyError(policy_name)
        decider = self._deciders.get(policy.name)
        if decider is None:
            with collection_paused():  # a rule's slots per tool: thousands of small objects
                decider = self._deciders[policy.name] = Decider(self, policy)
        self._named[policy_name] = decider
        return decider

    def decide(self, policy_name: str, call: CallContext) -> Decision:
        return self.decider(policy_name).decide(call)


# ---------------------------------------------------------------------------------------------
# The reference: no buckets, no compilation, the IR walked for every call


def naive_decide(spec: Spec, policy_name: str, call: CallContext) -> Decision:
    """Decide by walking every rule of the policy and interpreting its condition: slow and
    obviously faithful to language.md §6, the yardstick for `Decider.decide`."""
    policy = spec.policy(policy_name)
    if policy is None:
        raise UnknownPolicyError(policy_name)
    tool = spec.tools.get(call.tool_id)
    if tool is None:
        return _refused(policy.name, call.tool_id, f"`{call.tool_id}` is not a registered tool")
    args = dict(call.args)
    for fld in tool.input.fields:
        fixer = _path_fixer(fld.type, "args." + fld.name)
        if fixer is not None and args.get(fld.name) is not None:
            try:
                args[fld.name] = fixer(args[fld.name])
            except _Escape as error:
                return _refused(policy.name, call.tool_id, _escape_reason(error))
    scope = call_scope(spec, tool, call, args)
    view = scope.tool
    matched = [
        rule
        for rule in policy.rules
        if any(selects(s, tool, view) for s in rule.selectors)
        and (rule.condition is None or evaluate(rule.condition, scope))
    ]
    decision = decide_from(policy.name, spec, policy.default, matched, view["risk"], tool.id)
    win = next((r for r in matched if r.label == decision.rule), None)
    if win is not None and win.condition is not None and reads_session(win.condition):
        return with_evidence(decision, win, call, scope.terms)
    return decision


def call_scope(spec: Spec, tool: Tool, call: CallContext, args: Mapping[str, Any]) -> Scope:
    """What a condition reads of a call whose (normalized) arguments are `args`: its parts, its
    tool view (its operation's, when `args.op` names one), the session's ledger."""
    op = args.get("op")
    view = tool_view(tool, op if isinstance(op, str) and op in tool.operations else None)
    return Scope(
        args=args,
        actor=call.actor,
        resource=call.resource,
        task=call.task,
        env=call.env,
        tool=view,
        call=call.call,
        facts=call.facts,
        connected=call.connected,
        running=call.running,
        path_facts=frozenset(n for n, f in spec.facts.items() if f.type.name == "path"),
        ledger=call.ledger,
        terms=call.ledger.terms if call.ledger is not None else HistoryTerms(spec),
    )


def with_evidence(
    decision: Decision, rule: Rule, call: CallContext, terms: HistoryTerms | None
) -> Decision:
    """The decision with one sentence per session term of its rule that held."""
    if call.ledger is None or rule.condition is None:
        return decision
    found = session_evidence(rule.condition, call, terms)
    if not found:
        return decision
    d = decision
    return Decision(
        d.effect,
        d.rule,
        d.matched,
        d.reason,
        d.instead,
        d.approvers,
        d.grant,
        d.default_used,
        d.origin,
        d.policy,
        d.tool_id,
        d.requester_may_approve,
        found,
        d.expires_ms,
    )
