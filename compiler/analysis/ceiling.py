"""The delegation ceiling: what a delegation target may do stays within what its planner may do.

A planner (an agent with `delegate`, language.md §10) hands work to a child agent, whose
sessions call the tools of the child's surface under the child's own policy. The ceiling holds
when, on every tool of that surface, the child's policy decides no call less strictly than the
planner's policy: no call the planner's policy denies is asked or allowed for the child, and no
call it asks is allowed. It is checked with the semantic comparison (compare.py) of the
planner's policy (old side) and the child's (new side) over the child's surface tools: every
region where the child's decision is weaker (`Region.weaker`) breaks the ceiling, with its
witness call. Which tools the planner itself may call does not enter: delegating hands-on work
to a child with other tools is what delegation is for; its decisions are what the ceiling
bounds. A child with the planner's policy is within it by construction and is not compared.

Skills (§9) need no check: a skill's session is judged by the parent's policies and the skill's
profile together, the strongest effect winning (runtime/session/sessions.py `policies`,
runtime/session/calls.py `judge_call`), so a skill's call is never decided less strictly than its
parent's policy decides it (tests/test_harness.py: a call the profile allows and the parent
denies is denied).

A planner may grant a child more on purpose: the lint that reports a breach (L024) is silenced,
for the child's rule that widens, by `# harnessc: ignore[L024] why` on that rule — the spec then
says, with the reason, what it grants explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass

from harnessc.runtime import model as m
from harnessc.runtime.model.semantics import surface_tools

from .cache import AnalysisCache
from .compare import Region, compare_policies

__all__ = ["Breach", "delegation_ceiling"]


@dataclass
class Breach:
    """A region of calls the child (`region.new`) decides less strictly than its planner
    (`region.old`), on a tool of the child's surface."""

    planner: m.Agent
    child: m.Agent
    region: Region


def delegation_ceiling(spec: m.Spec, cache: AnalysisCache | None = None) -> list[Breach]:
    """Every breach of the ceiling, by planner, child and tool (module docstring)."""
    found: list[Breach] = []
    for planner in sorted(spec.agents.values(), key=lambda a: a.name):
        mine = spec.policy(planner.policy) if planner.policy else None
        for name in planner.delegates:
            child = spec.agents.get(name) or spec.agents.get(spec.qualified(name))
            if child is None or not child.surface or child.surface not in spec.surfaces:
                continue  # a child without a surface calls no tool
            theirs = spec.policy(child.policy) if child.policy else None
            if theirs is None or (mine is not None and mine.name == theirs.name):
                continue  # no policy: every call refused; the same policy: the same decisions
            tools = sorted(surface_tools(spec, spec.surfaces[child.surface]))
            comparison = compare_policies(
                spec,
                mine,
                spec,
                theirs,
                tools=tools,
                subject=f"delegation {planner.name} → {child.name}",
                cache=cache,
            )
            found += [Breach(planner, child, r) for r in comparison.regions if r.weaker]
    return found
