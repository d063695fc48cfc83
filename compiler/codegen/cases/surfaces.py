"""Schemas, surfaces, MCP, availability and delegation cases."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from harnessc.runtime.judge.availability import AvailabilityChecker, Facts
from harnessc.runtime.model import (
    DELEGATE_TASK,
    Condition,
    Path,
    Spec,
    Tool,
)
from harnessc.runtime.model.semantics import surface_tools

from ...analysis.availability import availability_condition
from ...analysis.concrete import visit_nodes
from ...analysis.examples import NoExampleError
from ...analysis.policy import PolicyAnalysis
from .context import CaseContext
from .facts import (
    condition_text,
    conjuncts,
    failed_conditions,
    mcp_name,
    tool_facts,
    violating_facts,
)
from .values import example_input, schema_errors

__all__ = ["plan_availability", "plan_delegation", "plan_mcp", "plan_schemas", "plan_surfaces"]

# ---------------------------------------------------------------------------------------------
# Schemas


def _unknown_field(tool: Tool) -> str:
    names = {f.name for f in tool.input.fields}
    name, n = "unexpected", 2
    while name in names:
        name, n = f"unexpected_{n}", n + 1
    return name


def _tool_route(cx: CaseContext, tool: Tool) -> dict[str, Any]:
    """How a generated test reaches a tool's normalize: a planner session, a skill session,
    or (for tools no session may call) the runtime's validator of its input schema."""
    spec = cx.spec
    if tool.kind == "private" and tool.skill:
        for name in sorted(spec.agents):
            agent = spec.agents[name]
            if not agent.skills or tool.skill in agent.skills:
                return {"via": "skill", "agent": name, "skill": tool.skill, "note": None}
        return {"via": "validator", "agent": None, "skill": None, "note": "no agent has its skill"}
    if tool.kind in ("legacy", "primitive"):
        note = f"a {tool.kind} tool is never on a surface: its schema is checked directly"
        return {"via": "validator", "agent": None, "skill": None, "note": note}
    for name in sorted(spec.agents):
        surface = spec.surfaces.get(spec.agents[name].surface or "")
        if surface is not None and tool.id in cx.surface(surface.name):
            return {"via": "session", "agent": name, "skill": None, "note": None}
    note = "no agent has it on its surface: its schema is checked directly"
    return {"via": "validator", "agent": None, "skill": None, "note": note}


def plan_schemas(
    cx: CaseContext, solved: PolicyAnalysis | None, mcp: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Per tool, a valid and an invalid input, normalized in a session whose facts make the
    tool available (normalize refuses an unavailable tool before it reads the arguments)."""
    spec = cx.spec
    cases = []
    for tool_id in sorted(spec.tools):
        tool = spec.tools[tool_id]
        if tool.id == DELEGATE_TASK:
            continue
        case: dict[str, Any] = {"id": tool_id, "tool": tool_id, **_tool_route(cx, tool)}
        case["facts"] = None
        if case["via"] != "validator":
            case["facts"] = tool_facts(spec, tool, solved, mcp)
            if case["facts"] is None:
                note = f"{_unheld(tool)}: its schema is checked directly"
                case.update({"via": "validator", "agent": None, "skill": None, "note": note})
        try:
            valid = example_input(tool.input.fields)
            errors = schema_errors(tool.input, valid)
            if errors:
                raise NoExampleError(f"the generated example fails: {errors[0][1]}")
            case["valid"], case["skip_valid"] = valid, None
        except NoExampleError as error:
            case["valid"], case["skip_valid"] = None, f"no valid example: {error}"
        required = [f for f in tool.input.fields if f.required]
        base = case["valid"] if case["valid"] is not None else {}
        if required:
            missing = required[0].name
            invalid = {k: v for k, v in base.items() if k != missing}
            case["invalid"] = invalid
            case["invalid_path"] = f"$.{missing}"
            case["invalid_message"] = f"the required field `{missing}` is missing"
        else:
            extra = _unknown_field(tool)
            case["invalid"] = {**base, extra: "x"}
            case["invalid_path"] = f"$.{extra}"
            case["invalid_message"] = f"unknown field `{extra}`"
        cases.append(case)
    return cases


# ---------------------------------------------------------------------------------------------
# Surfaces, MCP, delegation

_REFUSED = {"legacy": "legacy-tool", "primitive": "not-on-surface", "private": "skill-private"}


def plan_surfaces(spec: Spec, facts: Mapping[str, Any]) -> list[dict[str, Any]]:
    availability = AvailabilityChecker(spec).check(Facts.from_json(facts))
    never = [
        {"tool": t, "code": _REFUSED[spec.tools[t].kind]}
        for t in sorted(spec.tools)
        if spec.tools[t].kind in _REFUSED
    ]
    cases = []
    for name in sorted(spec.surfaces):
        surface = spec.surfaces[name]
        agents = [a for a in sorted(spec.agents) if spec.agents[a].surface == name]
        public = list(surface_tools(spec, surface))
        expected = [t for t in public if availability.available(t)]
        case = {
            "id": name,
            "surface": name,
            "agent": agents[0] if agents else None,
            "facts": facts,
            "limit": surface.limit,
            "public": sorted(public),
            "expected": sorted(expected),
            "unavailable": sorted(t for t in public if t not in expected),
            "ranked": len(expected) > surface.limit,
            "never": never,
            "skip": None if agents else "no agent has this surface, so no session exposes it",
        }
        cases.append(case)
    return cases


_MCP_CONDITIONS = (
    ("server disabled", {"enabled": False}, "enabled and connected"),
    ("server not connected", {"connected": False}, "enabled and connected"),
    ("transport not valid", {"transport_valid": False}, "transport valid"),
    ("disclaimer not accepted", {"disclaimer_accepted": False}, "disclaimer accepted"),
    ("tool not discovered", None, "tool discovered with the declared schema"),
    ("tool discovered with another schema", None, "tool discovered with the declared schema"),
    ("agent access switched off", {"agent_access": False}, "agent access switched on"),
    ("projected implementation unregistered", None, "projected implementation registered"),
)
"""Each way one of the six conditions of language.md §8 fails: what changes in the server's
state, and the condition (as §8 names it) that the `unavailable` refusal must name."""


def plan_mcp(
    cx: CaseContext, facts: Mapping[str, Any], solved: PolicyAnalysis | None = None
) -> list[dict[str, Any]]:
    """Per MCP-projected tool, each of the six conditions of §8 made false in turn: the tool
    is unavailable, not exposed, and a call to it is refused `unavailable` at normalize."""
    spec = cx.spec
    cases = []
    for tool_id in sorted(spec.tools):
        tool = spec.tools[tool_id]
        if tool.kind != "mcp" or not tool.mcp_server or tool.mcp_server not in spec.mcp_servers:
            continue
        server = tool.mcp_server
        name = mcp_name(tool)
        agents = []
        for agent in sorted(spec.agents):
            surface = spec.surfaces.get(spec.agents[agent].surface or "")
            if surface is not None and tool_id in cx.surface(surface.name):
                agents.append(agent)
        base = tool_facts(spec, tool, solved, facts["mcp"]) or facts
        full = base["mcp"][server]
        variants = []
        for what, change, failed in _MCP_CONDITIONS:
            state = copy.deepcopy(full)
            if change is not None:
                state.update(change)
            elif what == "tool not discovered":
                del state["discovered"][name]
            elif what == "tool discovered with another schema":
                schema = state["discovered"][name]
                schema.setdefault("properties", {})["unexpected_argument"] = {"type": "string"}
                schema["required"] = [*schema.get("required", []), "unexpected_argument"]
            else:
                others = [t for t in sorted(spec.mcp_servers[server].tools) if t != tool_id]
                state["registered"] = others
            variants.append({"condition": what, "mcp": state, "failed": failed})
        try:
            args: dict[str, Any] | None = example_input(tool.input.fields)
        except NoExampleError:
            args = None
        cases.append(
            {
                "id": tool_id,
                "tool": tool_id,
                "server": server,
                "agent": agents[0] if agents else None,
                "facts": base,
                "args": args,
                "variants": variants,
            }
        )
    return cases


def _authorised_call(
    spec: Spec, tool: Tool, target: Condition, witnesses: Sequence[Mapping[str, Any]]
) -> dict[str, Any] | None:
    """A witness call to `tool` that a session makes and the policy allows or asks, with the
    facts that then break `target` (None when there is none): authorised under the witness's
    facts, it must still not run once the facts change."""
    for case in witnesses:
        if (
            case.get("skip")  # a skipped witness may have no call at all
            or case["tool"] != tool.id
            or case["via"] != "session"
            or case.get("session")  # the decision reads session state the calls change
            or case["unavailable"] is not None
            or case["expect"]["effect"] not in ("allow", "ask")
        ):
            continue
        changed = violating_facts(spec, tool, case["facts"], target)
        if changed is None:
            continue
        call = {
            k: copy.deepcopy(case[k])
            for k in (
                "id",
                "agent",
                "actor",
                "resource",
                "task",
                "env",
                "facts",
                "tool",
                "args",
                "tool_call_id",
                "execution",
                "expect",
            )
        }
        # a grant for the task (`grant task`) needs a task to bind
        call["task"] = {"id": "task-1", **call["task"]}
        return {**call, "changed": changed}
    return None


def plan_availability(
    cx: CaseContext,
    solved: PolicyAnalysis | None,
    mcp: Mapping[str, Any],
    witnesses: Sequence[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """Per tool with availability conditions (a dynamic tool's provider, `requires`) and per
    item of them (`and`s flattened): facts under which only that item is false, and the call a
    session must refuse `unavailable` at normalize, naming it. Where a witness call of the
    tool is allowed or asked, the same item breaking after the call was authorised must stop
    it before it runs (`invoke`)."""
    spec = cx.spec
    cases = []
    for tool_id in sorted(spec.tools):
        tool = spec.tools[tool_id]
        condition = availability_condition(spec, tool)
        if condition is None or tool.id == DELEGATE_TASK:
            continue
        route = _tool_route(cx, tool)
        base = tool_facts(spec, tool, solved, mcp)
        try:
            args: dict[str, Any] | None = example_input(tool.input.fields)
            skip = None
        except NoExampleError as error:
            args, skip = None, f"no valid example input: {error}"
        if route["via"] == "validator":
            skip = route["note"].split(":")[0] + ": no session can call it"
        elif base is None:
            skip = _unheld(tool)
        items: dict[str, Condition] = {}
        for item in conjuncts(condition):
            items.setdefault(condition_text(item), item)
        for text, target in items.items():
            case: dict[str, Any] = {
                "id": f"{tool_id}::{text}",
                "tool": tool_id,
                **route,
                "args": args,
                "condition": text,
                "facts": None,
                "conditions": [],
                "invoke": None,
                "skip": skip,
            }
            if skip is None:
                assert base is not None
                changed = violating_facts(spec, tool, base, target)
                if changed is None:
                    case["skip"] = f"no facts were found under which only `{text}` is false"
                else:
                    case["facts"] = changed
                    case["conditions"] = failed_conditions(spec, tool, changed)
                    case["invoke"] = _authorised_call(spec, tool, target, witnesses)
            cases.append(case)
    return cases


def plan_delegation(spec: Spec) -> list[dict[str, Any]]:
    return [
        {"id": name, "agent": name, "targets": sorted(spec.agents[name].delegates)}
        for name in sorted(spec.agents)
    ]


_WHO = ("actor", "task", "resource", "env")


def _unheld(tool: Tool) -> str:
    """Why no facts make a tool available for the generated cases: its `requires` never holds,
    or it reads the session's actor, task, resource or environment, which these cases (facts
    only) do not give."""
    roots: list[str] = []

    def visit(node: object) -> bool:
        if isinstance(node, Path) and node.root in _WHO:
            roots.append(node.root)
        return isinstance(node, Path)

    visit_nodes(tool.requires, visit)
    if roots:
        return (
            f"its availability reads the session's `{roots[0]}`, which these cases (facts "
            "only) do not give"
        )
    return "its availability conditions never hold"
