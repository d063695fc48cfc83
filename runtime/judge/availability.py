"""Availability: does a registered tool really work for this user, now (language.md §1, §8)?

Every tool's `requires` is compiled once (`conditions.compile_conditions`) and evaluated
against a `Facts` snapshot the application supplies. An unavailable tool carries its reason in
words: which sub-condition failed and what was read (`connected(change_platform)` is false: the
connection is not connected). MCP-projected tools also need the six conditions of §8, which the
application reports per server as an `McpState`; a dynamic tool needs the runtime or connection
that provides it.

>>> from harnessc.runtime.model import Spec, Tool, FactCall
>>> spec = Spec(name="s", root_module="s", tools={"t": Tool(id="t", wire_name="t",
...     requires=FactCall(func="connected", name="github"))})
>>> AvailabilityChecker(spec).check(Facts()).tools["t"].reason
'`connected(github)` is false: the connection `github` is not connected'
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..model.ir import (
    And,
    Compare,
    Condition,
    EnumMember,
    FactCall,
    Index,
    Length,
    ListValue,
    Literal,
    Not,
    Or,
    Path,
    RecordValue,
    Spec,
    Tool,
)
from .conditions import Scope, compile_conditions, evaluate, read_path, value_of
from .history import reads_session
from .normalize import Refusal

__all__ = [
    "MCP_CONDITIONS",
    "Availability",
    "AvailabilityChecker",
    "AvailabilityRefusal",
    "Facts",
    "McpState",
    "ToolAvailability",
    "Who",
    "condition_text",
    "explain_failure",
    "failed_condition",
    "schema_drift",
    "unavailable_refusal",
]

MCP_CONDITIONS: tuple[str, ...] = (
    "enabled and connected",
    "transport valid",
    "disclaimer accepted",
    "tool discovered with the declared schema",
    "agent access switched on",
    "projected implementation registered",
)
"""The six conditions of language.md §8 under which an MCP-projected tool is available."""


@dataclass(frozen=True)
class McpState:
    """What the application knows about one MCP server (language.md §8).

    `discovered` maps a discovered tool name to its input JSON Schema (as the server reported
    it); `registered` names the projected tool ids whose implementation is still registered
    (None: all declared ones).
    """

    enabled: bool = False
    connected: bool = False
    transport_valid: bool = False
    disclaimer_accepted: bool = False
    agent_access: bool = False
    discovered: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    registered: frozenset[str] | None = None


@dataclass(frozen=True)
class Facts:
    """A snapshot of the runtime facts: declared facts by name (`workspace.root`), the
    connections and runtimes that are up, and the state of every MCP server."""

    values: Mapping[str, Any] = field(default_factory=dict)
    connected: frozenset[str] = frozenset()
    running: frozenset[str] = frozenset()
    mcp: Mapping[str, McpState] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        values: Mapping[str, Any] | Facts | None = None,
        *,
        connected: Iterable[str] = (),
        running: Iterable[str] = (),
        mcp: Mapping[str, McpState] | None = None,
    ) -> Facts:
        """A snapshot from plain data; a `Facts` is returned as is (extra sets are merged)."""
        if isinstance(values, Facts):
            if not (connected or running or mcp):
                return values
            return cls(
                values.values,
                values.connected | frozenset(connected),
                values.running | frozenset(running),
                {**values.mcp, **(mcp or {})},
            )
        return cls(dict(values or {}), frozenset(connected), frozenset(running), dict(mcp or {}))

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Facts:
        """A snapshot from JSON (the log's record of one, a test case's facts): `values`,
        `connected`, `running` and, by server, `mcp` (a flag left out is false).

        >>> Facts.from_json({"values": {"x": 1}, "mcp": {"s": {"enabled": True}}}).mcp["s"].enabled
        True
        """
        if not data:
            return cls()
        mcp = {
            name: McpState(
                enabled=bool(m.get("enabled")),
                connected=bool(m.get("connected")),
                transport_valid=bool(m.get("transport_valid")),
                disclaimer_accepted=bool(m.get("disclaimer_accepted")),
                agent_access=bool(m.get("agent_access")),
                discovered=m.get("discovered") or {},
                registered=frozenset(m["registered"]) if m.get("registered") is not None else None,
            )
            for name, m in (data.get("mcp") or {}).items()
        }
        return cls.of(
            data.get("values") or {},
            connected=data.get("connected") or (),
            running=data.get("running") or (),
            mcp=mcp,
        )


@dataclass(frozen=True, slots=True)
class ToolAvailability:
    """One tool's availability and, when unavailable, every reason (the first is `reason`).

    `conditions[i]` is the condition that `reasons[i]` explains, as the spec or language.md §8
    names it (`connected(change_platform)`, `agent access switched on`).
    """

    tool: str
    available: bool
    reasons: tuple[str, ...] = ()
    conditions: tuple[str, ...] = ()

    @property
    def reason(self) -> str | None:
        return self.reasons[0] if self.reasons else None

    @property
    def failed(self) -> tuple[tuple[str, str], ...]:
        """`(condition, reason)` for every failed condition."""
        return tuple(zip(self.conditions, self.reasons, strict=False))


@dataclass(frozen=True, slots=True)
class AvailabilityRefusal(Refusal):
    """The refusal of a call to a tool that is unavailable under the session's facts (code
    `unavailable`): `conditions` lists every failed condition with its reason, as
    `(condition, reason)`. Availability is a layer of its own: a tool the planner could name is
    not a tool that may run.

    >>> r = AvailabilityRefusal("unavailable", "`t` is unavailable", conditions=(("c", "r"),))
    >>> r.to_dict()["conditions"]
    [{'condition': 'c', 'reason': 'r'}]
    """

    conditions: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = Refusal.to_dict(self)
        out["conditions"] = [{"condition": c, "reason": r} for c, r in self.conditions]
        return out


def unavailable_refusal(
    entry: ToolAvailability, name: str | None = None, tool_call_id: str | None = None
) -> AvailabilityRefusal:
    """The `unavailable` refusal of a call to the unavailable tool `entry` describes."""
    return AvailabilityRefusal(
        "unavailable",
        f"`{entry.tool}` is unavailable now: " + "; ".join(entry.reasons),
        None,
        name if name is not None else entry.tool,
        tool_call_id,
        conditions=entry.failed,
    )


@dataclass(frozen=True)
class Availability:
    """Availability of every registered tool under one facts snapshot."""

    tools: Mapping[str, ToolAvailability]

    def available(self, tool_id: str) -> bool:
        entry = self.tools.get(tool_id)
        return entry is not None and entry.available

    def unavailable(self) -> dict[str, str]:
        """Tool id → its first reason, for every unavailable tool."""
        return {k: v.reasons[0] for k, v in self.tools.items() if not v.available}


class AvailabilityChecker:
    """Every tool's `requires` compiled once; `check(facts)` evaluates them all."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.path_facts = frozenset(n for n, f in spec.facts.items() if f.type.name == "path")
        # a `requires` that reads the session (provenance, history) cannot be judged here:
        # availability is per facts snapshot, with no session; such a tool is refused, saying so
        self._session_bound = {
            t.id
            for t in spec.tools.values()
            if t.requires is not None and reads_session(t.requires)
        }
        conditions = {
            t.id: t.requires
            for t in spec.tools.values()
            if t.requires is not None and t.id not in self._session_bound
        }
        self._compiled = compile_conditions(conditions, self.path_facts)
        self._declared_schemas = {
            t.id: _schema_shape(t.input.to_json_schema())
            for t in spec.tools.values()
            if t.kind == "mcp"
        }

    def check(
        self, facts: Facts | Mapping[str, Any] | None = None, who: Who | None = None
    ) -> Availability:
        """Every tool's availability under `facts`, for the session `who` describes (its
        actor, task, resource and environment, which a `requires` may read; none: empty)."""
        facts = Facts.of(facts)
        ctx = _Ctx(facts, who)
        out: dict[str, ToolAvailability] = {}
        for tool in self.spec.tools.values():
            out[tool.id] = self.tool(tool, facts, ctx)
        return Availability(out)

    @staticmethod
    def context(facts: Facts, who: Who | None = None) -> Any:
        """What a tool's compiled `requires` reads (`tool`'s `ctx`): the facts' connections
        and runtimes, and `who`'s actor, task, resource and environment."""
        return _Ctx(facts, who)

    def tool(self, tool: Tool, facts: Facts, ctx: Any = None) -> ToolAvailability:
        """One tool's availability under `facts`, with every failed condition and its reason."""
        failed: list[tuple[str, str]] = []
        if tool.kind == "mcp":
            failed.extend(self._mcp_reasons(tool, facts))
        if tool.kind == "dynamic" and tool.provided_by:
            provider = tool.provided_by
            if provider in self.spec.runtimes and provider not in facts.running:
                failed.append(
                    (
                        f"running({provider})",
                        f"the runtime `{provider}` that provides it is not running",
                    )
                )
            elif provider in self.spec.connections and provider not in facts.connected:
                failed.append(
                    (
                        f"connected({provider})",
                        f"the connection `{provider}` that provides it is not connected",
                    )
                )
        if tool.id in self._session_bound:
            failed.append(
                (
                    "requires",
                    "its `requires` reads the session (a `from` or history term), which "
                    "availability cannot judge: write that condition in a policy rule",
                )
            )
        fn = self._compiled.get(tool.id)
        if ctx is None:
            ctx = _Ctx(facts)
        if fn is not None and not fn(ctx, {}, {}, facts.values):
            assert tool.requires is not None
            scope = self._scope(facts, ctx)
            failed.append(
                (
                    condition_text(failed_condition(tool.requires, scope)),
                    explain_failure(tool.requires, scope),
                )
            )
        if not failed:
            return ToolAvailability(tool.id, True)
        # one reason per condition: a dynamic tool's provider may also be in its `requires`
        unique: dict[str, str] = {}
        for condition, reason in failed:
            unique.setdefault(condition, reason)
        return ToolAvailability(tool.id, False, tuple(unique.values()), tuple(unique))

    def _scope(self, facts: Facts, ctx: Any) -> Scope:
        return Scope(
            actor=getattr(ctx, "actor", None) or {},
            resource=getattr(ctx, "resource", None) or {},
            task=getattr(ctx, "task", None) or {},
            env=getattr(ctx, "env", None) or {},
            facts=facts.values,
            connected=facts.connected,
            running=facts.running,
            path_facts=self.path_facts,
        )

    def _mcp_reasons(self, tool: Tool, facts: Facts) -> list[tuple[str, str]]:
        server = tool.mcp_server or tool.id.split(":")[1]
        (enabled, transport, disclaimer, discovery, access, registered) = MCP_CONDITIONS
        state = facts.mcp.get(server)
        if state is None:
            return [
                (
                    enabled,
                    f"the MCP server `{server}` is not configured (no state was given for it)",
                )
            ]
        name = tool.id.split(":", 3)[3] if tool.id.count(":") >= 3 else tool.id
        reasons: list[tuple[str, str]] = []
        if not state.enabled:
            reasons.append((enabled, f"the MCP server `{server}` is not enabled"))
        elif not state.connected:
            reasons.append((enabled, f"the MCP server `{server}` is not connected"))
        declared = self.spec.mcp_servers.get(server)
        if not state.transport_valid:
            shown = f" `{declared.transport}`" if declared is not None else ""
            reasons.append(
                (transport, f"the transport{shown} of the MCP server `{server}` is not valid")
            )
        if not state.disclaimer_accepted:
            reasons.append(
                (
                    disclaimer,
                    f"the user has not accepted the disclaimer of the MCP server `{server}`",
                )
            )
        discovered = state.discovered.get(name)
        if discovered is None:
            reasons.append(
                (discovery, f"the MCP server `{server}` did not discover the tool `{name}`")
            )
        elif (drift := _drift(self._declared_schemas.get(tool.id), discovered)) is not None:
            reasons.append(
                (
                    discovery,
                    f"the discovered schema of `{name}` differs from the declared one: {drift}",
                )
            )
        if not state.agent_access:
            reasons.append(
                (
                    access,
                    f"the user has not switched on agent access for the MCP server `{server}`",
                )
            )
        if state.registered is not None and tool.id not in state.registered:
            reasons.append(
                (
                    registered,
                    f"the projected implementation of `{tool.id}` is no longer registered",
                )
            )
        return reasons


class _Ctx:
    """The call-shaped object compiled conditions read (`x`); availability has no call."""

    __slots__ = (
        "actor",
        "call",
        "connected",
        "env",
        "ledger",
        "resource",
        "running",
        "task",
        "tool_call_id",
    )

    def __init__(self, facts: Facts, who: Who | None = None) -> None:
        self.ledger = None  # availability reads no session state (`_session_bound`)
        self.tool_call_id = None
        self.actor: Mapping[str, Any] = who.actor if who is not None else {}
        self.resource: Mapping[str, Any] = who.resource if who is not None else {}
        self.task: Mapping[str, Any] = who.task if who is not None else {}
        self.env: Mapping[str, Any] = who.env if who is not None else {}
        self.call: Mapping[str, Any] = {}
        self.connected = facts.connected
        self.running = facts.running


@dataclass(frozen=True)
class Who:
    """Whom availability is judged for: a session's actor, task, resource and environment,
    which a `requires` may read beside the facts ("does it work for this user, now?")."""

    actor: Mapping[str, Any]
    task: Mapping[str, Any]
    resource: Mapping[str, Any]
    env: Mapping[str, Any]


# ---------------------------------------------------------------------------------------------
# Schemas as discovered

# Annotations change nothing a call may send; `additionalProperties` is left out too, because
# MCP servers rarely declare it and normalize refuses unknown fields whatever the server says.
_IGNORED_SCHEMA_KEYS = frozenset(
    {"$schema", "$id", "title", "description", "examples", "$comment", "additionalProperties"}
)


# keywords whose value maps names (a property called `title`) to schemas
_NAMED_SCHEMAS = frozenset({"properties", "patternProperties", "$defs", "definitions"})


def _schema_shape(schema: Any) -> Any:
    """A JSON Schema without annotations and with `required` as a sorted list: two schemas with
    the same shape accept the same arguments.

    >>> _schema_shape({"properties": {"title": {"type": "string", "title": "Title"}}})
    {'properties': {'title': {'type': 'string'}}}
    """
    if isinstance(schema, Mapping):
        out: dict[str, Any] = {}
        for k, v in schema.items():
            if k in _IGNORED_SCHEMA_KEYS:
                continue
            if k in _NAMED_SCHEMAS and isinstance(v, Mapping):
                out[k] = {name: _schema_shape(item) for name, item in v.items()}
            elif k == "required" and isinstance(v, list):
                out[k] = sorted(v)
            else:
                out[k] = _schema_shape(v)
        if out.get("required") == []:
            del out["required"]
        return out
    if isinstance(schema, list):
        return [_schema_shape(v) for v in schema]
    return schema


def schema_drift(declared: Tool, discovered: Mapping[str, Any]) -> str | None:
    """How the input schema an MCP server reports for a tool differs from the tool's declared
    input, in words, or None when they accept the same arguments (annotations such as `title`
    and `description`, and `additionalProperties`, aside). The one comparison behind §8's
    "tool discovered with the declared schema": availability and `harnessc mcp discover`
    both ask it.

    >>> from harnessc.runtime.model import Tool
    >>> schema_drift(Tool(id="mcp:s:tool:t", wire_name="t"), {"type": "object",
    ...     "properties": {"q": {"type": "string"}}})
    'extra `q`'
    """
    return _drift(_schema_shape(declared.input.to_json_schema()), discovered)


def _drift(declared_shape: Any, discovered: Any) -> str | None:
    found = _schema_shape(discovered)
    if found == declared_shape:
        return None
    return _schema_difference(declared_shape, found)


def _schema_difference(declared: Any, found: Any) -> str:
    if not isinstance(declared, dict) or not isinstance(found, dict):
        return "it is not an object schema"
    a, b = declared.get("properties", {}), found.get("properties", {})
    missing = sorted(set(a) - set(b))
    extra = sorted(set(b) - set(a))
    changed = sorted(k for k in set(a) & set(b) if a[k] != b[k])
    parts = []
    if missing:
        parts.append("missing " + ", ".join(f"`{k}`" for k in missing))
    if extra:
        parts.append("extra " + ", ".join(f"`{k}`" for k in extra))
    if changed:
        parts.append("changed " + ", ".join(f"`{k}`" for k in changed))
    if not parts:
        parts.append("required fields or constraints differ")
    return "; ".join(parts)


# ---------------------------------------------------------------------------------------------
# Conditions in words


def condition_text(cond: Any) -> str:
    """A condition or value as a spec would write it (`workspace.open == true`)."""
    if isinstance(cond, And):
        return " and ".join(_wrapped(i) for i in cond.items)
    if isinstance(cond, Or):
        return " or ".join(_wrapped(i) for i in cond.items)
    if isinstance(cond, Not):
        return f"not {_wrapped(cond.item)}"
    if isinstance(cond, Compare):
        return f"{condition_text(cond.left)} {cond.op} {condition_text(cond.right)}"
    if isinstance(cond, Path):
        if cond.root == "fact":
            return ".".join(cond.parts)
        return ".".join((cond.root, *cond.parts))
    if isinstance(cond, Literal):
        return json.dumps(cond.value) if cond.type != "duration" else f"{cond.value}ms"
    if isinstance(cond, EnumMember):
        return cond.name
    if isinstance(cond, FactCall):
        return f"{cond.func}({cond.name})"
    if isinstance(cond, ListValue):
        return "[" + ", ".join(condition_text(i) for i in cond.items) + "]"
    if isinstance(cond, RecordValue):
        return "{" + ", ".join(f"{k}: {condition_text(v)}" for k, v in cond.fields.items()) + "}"
    if isinstance(cond, Index):
        return f"{condition_text(cond.of)}[{condition_text(cond.key)}]"
    if isinstance(cond, Length):
        return f"len({condition_text(cond.of)})"
    return str(cond)


def _wrapped(cond: Any) -> str:
    text = condition_text(cond)
    return f"({text})" if isinstance(cond, And | Or) else text


def _read(node: Any, scope: Scope) -> str | None:
    """What a path (or a map's entry) read, in words, or None for a constant."""
    if isinstance(node, Index):
        key = _read(node.key, scope)
        entry = value_of(node, scope)
        said = f"`{condition_text(node)}` " + (
            "has no entry" if entry is None else f"is {json.dumps(entry, default=str)}"
        )
        return f"{key}, {said}" if key else said
    if not isinstance(node, Path):
        return None
    value = read_path(node, scope)
    name = condition_text(node)
    if value is None:
        return f"`{name}` was not supplied"
    return f"`{name}` is {json.dumps(value, default=str)}"


def failed_condition(cond: Condition, scope: Scope) -> Condition:
    """The sub-condition of a false condition that `explain_failure` explains: the first
    false item of an `and`, else the condition itself.

    >>> from harnessc.runtime.model import And, FactCall
    >>> c = And(items=(FactCall(func="connected", name="a"), FactCall(func="running", name="b")))
    >>> condition_text(failed_condition(c, Scope(connected=frozenset({"a"}))))
    'running(b)'
    """
    if isinstance(cond, And):
        for item in cond.items:
            if not evaluate(item, scope):
                return failed_condition(item, scope)
    return cond


def explain_failure(cond: Condition, scope: Scope) -> str:
    """Which sub-condition of a false condition failed, and what it read, in one sentence.

    >>> from harnessc.runtime.model import Compare, Path, Literal
    >>> c = Compare(op="==", left=Path(root="fact", parts=("workspace.open",)),
    ...     right=Literal(value=True, type="bool"))
    >>> explain_failure(c, Scope())
    '`workspace.open == true` is false: `workspace.open` was not supplied'
    """
    if isinstance(cond, And):
        for item in cond.items:
            if not evaluate(item, scope):
                return explain_failure(item, scope)
    if isinstance(cond, Or):
        return "none of these holds: " + "; ".join(explain_failure(i, scope) for i in cond.items)
    if isinstance(cond, Not):
        return f"`{condition_text(cond)}` is false: `{condition_text(cond.item)}` holds"
    if isinstance(cond, FactCall):
        what = "connection" if cond.func == "connected" else "runtime"
        state = "connected" if cond.func == "connected" else "running"
        return f"`{condition_text(cond)}` is false: the {what} `{cond.name}` is not {state}"
    text = f"`{condition_text(cond)}` is false"
    if isinstance(cond, Compare):
        reads = [r for r in (_read(cond.left, scope), _read(cond.right, scope)) if r]
        if reads:
            return f"{text}: {', '.join(reads)}"
    elif isinstance(cond, Path | Index):
        read = _read(cond, scope)
        if read:
            return f"{text}: {read}"
    return text
