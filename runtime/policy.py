"""The policy decision engine: a spec's policies compiled into deciders, and a naive reference.

At load time every policy is compiled once: its rules are bucketed by tool id (exact ids,
globs, module globs, `pack:`, `kind:` and the `risk`/`effects` sugar are expanded against the
registry, so each tool id owns its ordered list of candidate rules) and its conditions become
Python functions (`conditions.compile_conditions`). Deciding a call then looks up the tool's
candidates, runs their conditions, and picks the decision (language.md §6):

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

from bisect import bisect_left
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .conditions import (
    Scope,
    compile_conditions,
    evaluate,
    normalize_path,
    value_order,
)
from .model import (
    Approver,
    DefaultDecision,
    Grant,
    Policy,
    Rule,
    Selector,
    SourceRef,
    Spec,
    Tool,
    Type,
)

__all__ = [
    "NO_RULE_REASON",
    "CallContext",
    "Decider",
    "Decision",
    "PolicyEngine",
    "UnknownPolicyError",
    "naive_decide",
]

NO_RULE_REASON = "no rule allows this call"
_STRENGTH = {"deny": 2, "ask": 1, "allow": 0}
_EMPTY: Mapping[str, Any] = {}
_CACHE_LIMIT = 4096


class UnknownPolicyError(KeyError):
    """`PolicyEngine.decider` was asked for a policy the spec does not declare."""


@dataclass(slots=True)
class CallContext:
    """A frozen call as policy sees it: the tool id, normalized arguments and who, where, when.

    `facts` holds declared facts by name (`workspace.root`); `connected` and `running` the
    connections and runtimes that are up (`connected(c)`, `running(r)`); `execution` the call's
    execution parameters (`call.cwd`, `call.timeout`, …). Treat it as immutable.

    >>> CallContext("read_open", {"path": "/repo/a"}, actor={"role": "engineer"}).call
    {'tool_call_id': None}
    """

    tool_id: str
    args: Mapping[str, Any] = field(default_factory=dict)
    actor: Mapping[str, Any] = field(default_factory=dict)
    resource: Mapping[str, Any] = field(default_factory=dict)
    task: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, Any] = field(default_factory=dict)
    facts: Mapping[str, Any] = field(default_factory=dict)
    connected: frozenset[str] = frozenset()
    running: frozenset[str] = frozenset()
    tool_call_id: str | None = None
    execution: Mapping[str, Any] = field(default_factory=dict)

    @property
    def call(self) -> dict[str, Any]:
        """`call.*`: the execution parameters plus `tool_call_id`."""
        return {**self.execution, "tool_call_id": self.tool_call_id}


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


# ---------------------------------------------------------------------------------------------
# The registry side: tool views, selectors, path arguments


def tool_view(tool: Tool, op: str | None = None) -> dict[str, Any]:
    """`tool.*` for a call: its operation's risk and effects when `op` names one."""
    operation = tool.operations.get(op) if op is not None else None
    return {
        "id": tool.id,
        "kind": tool.kind,
        "version": tool.version,
        "risk": operation.risk if operation else tool.risk,
        "effects": tuple(sorted(operation.effects)) if operation else tool.effects,
        "tags": tool.tags,
        "packs": tool.packs,
    }


def _views(tool: Tool) -> list[dict[str, Any]]:
    """Every view a call of this tool can have: the tool's own, and one per operation."""
    return [tool_view(tool), *(tool_view(tool, op) for op in tool.operations)]


def selector_matches(selector: Selector, tool: Tool, view: Mapping[str, Any]) -> bool:
    """Whether a selector selects this call's tool (`view`: the call's `tool.*`)."""
    kind = selector.kind
    if kind == "all":
        return True
    if kind == "id":
        return tool.id == selector.value
    if kind == "glob":
        return tool.id.startswith(selector.value)
    if kind == "module":
        return tool.id in selector.tools
    if kind == "pack":
        return selector.value in tool.packs
    if kind == "kind":
        return tool.kind == selector.value
    if kind == "risk":
        return _risk_selector(selector.op or ">=", selector.value)(view)
    if kind == "effects":
        return selector.value in view["effects"]
    return False


def _risk_selector(op: str, level: str) -> Callable[[Mapping[str, Any]], bool]:
    if op == "==":
        return lambda t: t["risk"] == level
    if op == "!=":
        return lambda t: t["risk"] != level
    return lambda t: value_order(op, t["risk"], level, "risk")


def _dynamic_selector(selector: Selector) -> Callable[[Mapping[str, Any]], bool]:
    if selector.kind == "risk":
        return _risk_selector(selector.op or ">=", selector.value)
    value = selector.value
    return lambda t: value in t["effects"]


def _static_match(selector: Selector, tool: Tool) -> bool | Callable[[Mapping[str, Any]], bool]:
    """True or False when the answer is the same for every call of the tool, else a test of
    the call's tool view (`risk`/`effects` sugar on a tool whose operations differ)."""
    if selector.kind in ("risk", "effects"):
        answers = {selector_matches(selector, tool, view) for view in _views(tool)}
        if len(answers) == 1:
            return answers.pop()
        return _dynamic_selector(selector)
    return selector_matches(selector, tool, _EMPTY)


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
    return Decision("deny", None, (), reason, None, (), None, False, None, policy, tool_id)


def _escape_reason(error: _Escape) -> str:
    return f"the path `{error.value}` in `{error.where}` leaves its root"


# ---------------------------------------------------------------------------------------------
# Deciders


class _ToolPlan:
    """One tool's share of a compiled policy."""

    __slots__ = ("base", "cache", "checks", "fix", "indexes", "ops", "view")

    def __init__(
        self,
        indexes: tuple[int, ...],
        base: int,
        checks: tuple[tuple[int, Callable[..., bool]], ...],
        view: dict[str, Any],
        ops: dict[str, dict[str, Any]] | None,
        fix: PathFix | None,
    ) -> None:
        self.indexes = indexes  # candidate position → rule index, in text order
        self.base = base  # the bits of candidates that always match
        self.checks = checks
        self.view = view
        self.ops = ops
        self.fix = fix
        self.cache: dict[int | str, Decision] = {}


class Decider:
    """A compiled policy: `decide(call)` judges one frozen call.

    >>> # see the module docstring for a complete example
    """

    def __init__(self, engine: PolicyEngine, policy: Policy) -> None:
        self.policy = policy
        self.name = policy.name
        self.rules: tuple[Rule, ...] = policy.rules
        self._spec = engine.spec
        self._default = policy.default
        conditions = {
            str(i): rule.condition
            for i, rule in enumerate(self.rules)
            if rule.condition is not None
        }
        compiled = compile_conditions(conditions, engine.path_facts)
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
        self._plans: dict[str, _ToolPlan] = {
            tool_id: self._plan(tool_id, slot, compiled, engine) for tool_id, slot in slots.items()
        }

    def _plan(
        self,
        tool_id: str,
        slot: Mapping[int, Any],
        compiled: Mapping[str, Callable[..., bool]],
        engine: PolicyEngine,
    ) -> _ToolPlan:
        indexes: list[int] = []
        base = 0
        checks: list[tuple[int, Callable[..., bool]]] = []
        # INVARIANT: candidates keep text order, so bit positions follow the rules' order
        for i in sorted(slot):
            answer = slot[i]
            bit = 1 << len(indexes)
            indexes.append(i)
            cond = compiled.get(str(i))
            if answer is True and cond is None:
                base |= bit
            elif answer is True:
                checks.append((bit, cond))  # type: ignore[arg-type]
            else:
                checks.append((bit, _selected_and(_any_of(answer), cond)))
        tool = engine.spec.tools[tool_id]
        ops = {name: tool_view(tool, name) for name in tool.operations} or None
        return _ToolPlan(
            tuple(indexes),
            base,
            tuple(checks),
            engine.views[tool_id],
            ops,
            engine.fixers.get(tool_id),
        )

    def decide(self, call: CallContext) -> Decision:
        """Judge a call: the strongest matching effect, its first rule, or the default."""
        plan = self._plans.get(call.tool_id)
        if plan is None:
            return _refused(self.name, call.tool_id, f"`{call.tool_id}` is not a registered tool")
        args = call.args
        if plan.fix is not None:
            try:
                args = plan.fix(args)
            except _Escape as error:
                return _refused(self.name, call.tool_id, _escape_reason(error))
        view = plan.view
        if plan.ops is not None:
            op = args.get("op")
            if type(op) is str:
                view = plan.ops.get(op, view)
        facts = call.facts
        mask = plan.base
        for bit, check in plan.checks:
            if check(call, args, view, facts):
                mask |= bit
        key: int | str = mask or view["risk"]
        decision = plan.cache.get(key)
        if decision is None:
            decision = self._build(plan, mask, view, call.tool_id)
            if len(plan.cache) < _CACHE_LIMIT:
                plan.cache[key] = decision
        return decision

    def _build(self, plan: _ToolPlan, mask: int, view: Mapping[str, Any], tool_id: str) -> Decision:
        matched = [self.rules[i] for pos, i in enumerate(plan.indexes) if mask >> pos & 1]
        return decide_from(self.name, self._spec, self._default, matched, view["risk"], tool_id)

    def rule(self, label: str) -> Rule | None:
        """The first rule with this label (`remediation.freeze`, `remediation#3`)."""
        return next((r for r in self.rules if r.label == label), None)


def _any_of(
    tests: list[Callable[[Mapping[str, Any]], bool]],
) -> Callable[[Mapping[str, Any]], bool]:
    if len(tests) == 1:
        return tests[0]
    return lambda t: any(test(t) for test in tests)


def _selected_and(
    selected: Callable[[Mapping[str, Any]], bool], cond: Callable[..., bool] | None
) -> Callable[..., bool]:
    if cond is None:
        return lambda x, a, t, f: selected(t)
    return lambda x, a, t, f: selected(t) and cond(x, a, t, f)


def decide_from(
    policy: str,
    spec: Spec,
    default: DefaultDecision | None,
    matched: list[Rule],
    risk: str,
    tool_id: str,
) -> Decision:
    """The decision given the matching rules in text order (shared by both deciders)."""
    labels = tuple(r.label for r in matched)
    if matched:
        strongest = max(_STRENGTH[r.effect] for r in matched)
        win = next(r for r in matched if _STRENGTH[r.effect] == strongest)
        return Decision(
            win.effect,
            win.label,
            labels,
            win.reason,
            win.instead,
            win.approvers,
            win.grant,
            False,
            win.origin,
            policy,
            tool_id,
        )
    if default is None:
        return Decision(
            "deny", None, (), NO_RULE_REASON, None, (), None, True, None, policy, tool_id
        )
    if default.table is None:
        return Decision(
            default.effect or "deny",
            None,
            (),
            default.reason,
            default.instead,
            default.approvers,
            default.grant,
            True,
            default.origin,
            policy,
            tool_id,
        )
    table = spec.risk_tables.get(default.table)
    entry = table.entries.get(risk) if table is not None else None  # type: ignore[call-overload]
    if entry is None:
        reason = f"the risk table `{default.table}` has no entry for risk `{risk}`"
        return Decision("deny", None, (), reason, None, (), None, True, None, policy, tool_id)
    return Decision(
        entry.effect,
        None,
        (),
        entry.reason,
        entry.instead,
        entry.approvers,
        entry.grant,
        True,
        entry.origin or default.origin,
        policy,
        tool_id,
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
        self._deciders: dict[str, Decider] = {}
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
        if kind == "id":
            found = [(value, True)] if value in tools else []
        elif kind == "glob":
            start = bisect_left(self._ids, value)
            found = []
            for tool_id in self._ids[start:]:
                if not tool_id.startswith(value):
                    break
                found.append((tool_id, True))
        elif kind == "all":
            found = [(tool_id, True) for tool_id in self._ids]
        elif kind == "module":
            found = [(tool_id, True) for tool_id in selector.tools if tool_id in tools]
        elif kind == "pack":
            found = [(t.id, True) for t in tools.values() if value in t.packs]
        elif kind == "kind":
            found = [(t.id, True) for t in tools.values() if t.kind == value]
        else:
            found = []
            for tool in tools.values():
                answer = _static_match(selector, tool)
                if answer is not False:
                    found.append((tool.id, answer))
        self._selected[key] = found
        return found

    def decider(self, policy_name: str) -> Decider:
        """The compiled policy, by qualified name or a root-module name (`remediation`)."""
        policy = self.spec.policy(policy_name)
        if policy is None:
            raise UnknownPolicyError(policy_name)
        decider = self._deciders.get(policy.name)
        if decider is None:
            decider = self._deciders[policy.name] = Decider(self, policy)
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
    op = args.get("op")
    view = tool_view(tool, op if isinstance(op, str) and op in tool.operations else None)
    scope = Scope(
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
    )
    matched = [
        rule
        for rule in policy.rules
        if any(selector_matches(s, tool, view) for s in rule.selectors)
        and (rule.condition is None or evaluate(rule.condition, scope))
    ]
    return decide_from(policy.name, spec, policy.default, matched, view["risk"], tool.id)
