"""The policy analysis over calls to available tools only (language.md §1, §8): what the
generated tests need so that each rule's witness call has its tool available.

Every policy gets, first, a DENY of each tool with availability conditions when they are
false, so a rule wins there only with facts under which its tool is available (a DENY that
comes first beats every rule); and a policy `(available) TOOL` allows the tool exactly when it
is available, whose witness is facts under which it is (z3 solves `requires` with the rest of
the analysis).
"""

from __future__ import annotations

from harnessc.runtime.model import (
    And,
    Condition,
    DefaultDecision,
    FactCall,
    Not,
    Policy,
    Rule,
    Selector,
    Spec,
    Tool,
)

from .policy import PolicyAnalysis, analyse_policies

__all__ = ["AVAILABLE", "analyse_availability", "availability_condition", "availability_parts"]

AVAILABLE = "(available) "
"""The prefix of the policies that solve each tool's availability (never in a package)."""


def availability_parts(spec: Spec, tool: Tool) -> list[Condition]:
    """What a tool's availability asks of the facts: the runtime or connection that provides a
    dynamic tool, then its `requires`. The MCP conditions of §8 are not facts a condition
    reads; every case carries them all true."""
    parts: list[Condition] = []
    provider = tool.provided_by if tool.kind == "dynamic" else None
    if provider in spec.runtimes:
        parts.append(FactCall(func="running", name=provider))  # type: ignore[arg-type]
    elif provider in spec.connections:
        parts.append(FactCall(func="connected", name=provider))  # type: ignore[arg-type]
    if tool.requires is not None:
        parts.append(tool.requires)
    return parts


def availability_condition(spec: Spec, tool: Tool) -> Condition | None:
    """`availability_parts` as one condition (None: nothing is asked of the facts)."""
    parts = availability_parts(spec, tool)
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else And(items=tuple(parts))


def analyse_availability(spec: Spec) -> PolicyAnalysis | None:
    """The policy analysis of `spec` with the availability guards and policies above (its own
    fresh z3 context). None when no tool has availability conditions: the plain analysis is
    that analysis."""
    conditions = {
        tool_id: cond
        for tool_id in sorted(spec.tools)
        if (cond := availability_condition(spec, spec.tools[tool_id])) is not None
    }
    if not conditions:
        return None

    def selector(tool_id: str) -> tuple[Selector, ...]:
        return (Selector(kind="id", value=tool_id, text=tool_id),)

    policies: dict[str, Policy] = {}
    for name in sorted(spec.policies):
        policy = spec.policies[name]
        guards = tuple(
            Rule(
                label=f"{name}{AVAILABLE}{tool_id}",
                policy=name,
                effect="deny",
                selectors=selector(tool_id),
                condition=Not(item=cond),
                reason="unavailable",
            )
            for tool_id, cond in conditions.items()
        )
        policies[name] = policy.model_copy(update={"rules": guards + policy.rules})
    for tool_id, cond in conditions.items():
        name = AVAILABLE + tool_id
        policies[name] = Policy(
            name=name,
            default=DefaultDecision(effect="deny", reason="unavailable"),
            rules=(
                Rule(
                    label=name,
                    policy=name,
                    effect="allow",
                    selectors=selector(tool_id),
                    condition=cond,
                ),
            ),
        )
    return analyse_policies(spec.model_copy(update={"policies": policies}))
