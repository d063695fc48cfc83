"""Facts for the cases: under which every tool that can be is available, and under which one
item of a tool's availability (language.md §1, §8) is false.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from harnessc.runtime.model import (
    And,
    Compare,
    Condition,
    EnumMember,
    FactCall,
    ListValue,
    Literal,
    Not,
    Or,
    Path,
    Rule,
    Selector,
    Spec,
    Tool,
)
from harnessc.runtime.model.semantics import OPERATORS

from ...analysis.availability import AVAILABLE, availability_condition, availability_parts
from ...analysis.concrete import Call, rule_matches
from ...analysis.policy import PolicyAnalysis, Witness
from ..spec_text import spec_text

__all__ = [
    "available_facts",
    "condition_text",
    "conjuncts",
    "failed_conditions",
    "mcp_name",
    "mcp_of",
    "tool_facts",
    "violating_facts",
]

# ---------------------------------------------------------------------------------------------
# Facts under which every tool that can be is available


def _wanted_facts(cond: Condition, positive: bool, out: dict[str, Any]) -> None:
    if isinstance(cond, And | Or):
        for item in cond.items:
            _wanted_facts(item, positive, out)
    elif isinstance(cond, Not):
        _wanted_facts(cond.item, not positive, out)
    elif isinstance(cond, Path) and cond.root == "fact" and len(cond.parts) == 1:
        out.setdefault(cond.parts[0], positive)
    elif isinstance(cond, Compare) and OPERATORS[cond.op].family == "equality":
        for side, other in ((cond.left, cond.right), (cond.right, cond.left)):
            if (
                isinstance(side, Path)
                and side.root == "fact"
                and len(side.parts) == 1
                and isinstance(other, Literal)
                and (cond.op == "==") == positive
            ):
                out.setdefault(side.parts[0], other.value)


def _mcp_state(spec: Spec, server: str) -> dict[str, Any]:
    declared = spec.mcp_servers[server]
    discovered = {}
    for tool_id in sorted(declared.tools):
        tool = spec.tools.get(tool_id)
        if tool is not None:
            discovered[mcp_name(tool)] = tool.input.to_json_schema()
    return {
        "enabled": True,
        "connected": True,
        "transport_valid": True,
        "disclaimer_accepted": True,
        "agent_access": True,
        "discovered": discovered,
        "registered": None,
    }


def mcp_name(tool: Tool) -> str:
    return tool.id.split(":", 3)[3] if tool.id.count(":") >= 3 else tool.id


def available_facts(spec: Spec) -> dict[str, Any]:
    """Facts (as case data) under which every tool whose `requires` the compiler can satisfy
    is available: every connection up, every runtime running, every MCP server fully set up,
    and the declared facts its conditions compare with a literal."""
    values: dict[str, Any] = {}
    for tool_id in sorted(spec.tools):
        requires = spec.tools[tool_id].requires
        if requires is not None:
            _wanted_facts(requires, True, values)
    return {
        "values": {k: values[k] for k in sorted(values) if k in spec.facts},
        "connected": sorted(spec.connections),
        "running": sorted(spec.runtimes),
        "mcp": {server: _mcp_state(spec, server) for server in sorted(spec.mcp_servers)},
    }


# ---------------------------------------------------------------------------------------------
# Availability of one tool (language.md §1, §8): what a case's facts must make true


def conjuncts(cond: Condition) -> list[Condition]:
    """The items of a condition's `and`s, nested ones flattened, in text order."""
    if isinstance(cond, And):
        return [c for item in cond.items for c in conjuncts(item)]
    return [cond]


def condition_text(cond: Condition) -> str:
    """A condition as the spec writes it, which is how a refusal names a failed condition."""
    return spec_text(cond)


def _facts_call(tool: str, facts: Mapping[str, Any]) -> Call:
    return Call(
        tool=tool,
        facts=dict(facts.get("values", {})),
        connections={c: True for c in facts.get("connected", ())},
        runtimes={r: True for r in facts.get("running", ())},
    )


def fact_holds(spec: Spec, tool: str, cond: Condition, facts: Mapping[str, Any]) -> bool:
    """Whether a condition over facts holds under case facts (the compiler's own evaluator,
    the one that re-judges witnesses, never the runtime's)."""
    rule = Rule(
        label="availability",
        policy="availability",
        effect="allow",
        selectors=(Selector(kind="all", text="*"),),
        condition=cond,
    )
    return rule_matches(spec, rule, _facts_call(tool, facts))


def failed_conditions(spec: Spec, tool: Tool, facts: Mapping[str, Any]) -> list[str]:
    """The conditions an `unavailable` refusal names under these facts (the MCP state aside):
    the provider when it is down, and the first false item of `requires` (nested `and`s
    entered)."""
    failed = []
    for part in availability_parts(spec, tool):
        if fact_holds(spec, tool.id, part, facts):
            continue
        while isinstance(part, And):
            part = next(i for i in part.items if not fact_holds(spec, tool.id, i, facts))
        failed.append(condition_text(part))
    return list(dict.fromkeys(failed))  # one per condition, as the refusal lists them


def mcp_of(spec: Spec, tool_id: str, mcp: Mapping[str, Any]) -> dict[str, Any]:
    """The MCP state a call to `tool_id` needs: its server's, fully set up (else nothing)."""
    tool = spec.tools.get(tool_id)
    server = tool.mcp_server if tool is not None and tool.kind == "mcp" else None
    if server is None or server not in mcp:
        return {}
    return {server: copy.deepcopy(mcp[server])}


def _witness_facts(spec: Spec, witness: Witness, mcp: Mapping[str, Any]) -> dict[str, Any]:
    c = witness.call
    return {
        "values": dict(c.facts),
        "connected": sorted(n for n, up in c.connections.items() if up),
        "running": sorted(n for n, up in c.runtimes.items() if up),
        "mcp": mcp_of(spec, c.tool, mcp),
    }


def tool_facts(
    spec: Spec, tool: Tool, solved: PolicyAnalysis | None, mcp: Mapping[str, Any]
) -> dict[str, Any] | None:
    """Facts under which `tool` is available (every MCP server fully set up), or None when
    the analysis finds none (its `requires` can never hold)."""
    if availability_condition(spec, tool) is None:
        return {"values": {}, "connected": [], "running": [], "mcp": mcp_of(spec, tool.id, mcp)}
    name = AVAILABLE + tool.id
    witness = solved.witness(name, name) if solved is not None else None
    if witness is None:
        return None
    # only the facts are used: a witness whose arguments are approximate still serves
    facts = _witness_facts(spec, witness, mcp)
    return facts if not failed_conditions(spec, tool, facts) else None


def _other_values(spec: Spec, fact: str, current: Any, cond: Condition) -> list[Any]:
    """Values to try for a fact to make a condition false, nearest first."""
    found: list[Any] = []
    declared = spec.facts.get(fact)
    kind = declared.type.name if declared is not None else None
    if kind == "bool" or isinstance(current, bool):
        found.append(not current if isinstance(current, bool) else False)
    literals = []
    stack: list[object] = [cond]
    while stack:
        node = stack.pop()
        if isinstance(node, And | Or):
            stack.extend(node.items)
        elif isinstance(node, Not):
            stack.append(node.item)
        elif isinstance(node, Compare):
            stack.extend((node.left, node.right))
        elif isinstance(node, ListValue):
            stack.extend(node.items)
        elif isinstance(node, Literal | EnumMember):
            literals.append(node.value if isinstance(node, Literal) else node.name)
    for value in literals:
        if isinstance(value, bool):
            found.append(not value)
        elif isinstance(value, int | float):
            found.extend((value + 1, value - 1))
        elif isinstance(value, str):
            found.extend((value + "-other", value))
    if kind == "enum" and declared is not None:
        found.extend(declared.type.values)
    return [v for v in found if v != current]


def _reads(cond: object) -> list[tuple[str, str]]:
    """What a condition over facts reads: `("fact", name)`, `("connected", c)`, `("running", r)`."""
    if isinstance(cond, FactCall):
        return [(cond.func, cond.name)]
    if isinstance(cond, Path):
        return [("fact", cond.parts[0])] if cond.root == "fact" and cond.parts else []
    if isinstance(cond, And | Or | ListValue):
        return [r for i in cond.items for r in _reads(i)]
    if isinstance(cond, Not):
        return _reads(cond.item)
    if isinstance(cond, Compare):
        return _reads(cond.left) + _reads(cond.right)
    return []


def violating_facts(
    spec: Spec, tool: Tool, facts: Mapping[str, Any], target: Condition
) -> dict[str, Any] | None:
    """The facts changed as little as possible so that `target` (one item of the tool's
    availability condition) is false and every other item still holds; None if no such
    change is found."""
    condition = availability_condition(spec, tool)
    assert condition is not None
    # a dynamic tool's provider may be in its `requires` too: the same condition, once
    others = [c for c in conjuncts(condition) if condition_text(c) != condition_text(target)]
    candidates: list[dict[str, Any]] = []
    for what, name in dict.fromkeys(_reads(target)):
        changed = copy.deepcopy(dict(facts))
        if what in ("connected", "running"):
            changed[what] = [n for n in changed.get(what, []) if n != name]
            candidates.append(changed)
            continue
        values = changed.get("values", {})
        absent = {k: v for k, v in values.items() if k != name}
        candidates.append({**changed, "values": absent})
        for value in _other_values(spec, name, values.get(name), target):
            candidates.append({**changed, "values": {**values, name: value}})
    for candidate in candidates:
        if not fact_holds(spec, tool.id, target, candidate) and all(
            fact_holds(spec, tool.id, c, candidate) for c in others
        ):
            return candidate
    return None
