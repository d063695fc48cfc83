"""Sessions a session opens: a delegated child (one level deep, from a planner) and a session of
a skill (its private tools, under the parent's policy and the skill's profile)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..judge.normalize import Refusal
from ..log.events import NewEvent, call_refused
from ..model.ir import DELEGATE_TASK, Agent, Skill

if TYPE_CHECKING:
    from .seams import SessionSeam

__all__ = ["delegate_to", "open_skill"]


def delegate_to(
    s: SessionSeam, goal: str, *, agent: str | None = None, session_id: str | None = None
) -> SessionSeam | Refusal:
    """`Session.delegate`: a child session of a delegation target."""
    h = s.harness
    if s.parent is not None or s.skill_def is not None:
        return refuse_delegation(
            s, "a delegated or skill session cannot delegate again: delegation is one level deep"
        )
    if not s.agent.delegates:
        return refuse_delegation(s, f"the agent `{s.agent.name}` does not delegate")
    if agent is None:
        if len(s.agent.delegates) != 1:
            return refuse_delegation(
                s,
                "name the agent to delegate to: one of "
                + ", ".join(f"`{a}`" for a in s.agent.delegates),
            )
        target = s.agent.delegates[0]
    else:
        target = h.spec.qualified(agent) if agent not in h.spec.agents else agent
    if target not in s.agent.delegates or target not in h.spec.agents:
        return refuse_delegation(
            s,
            f"the agent `{s.agent.name}` may not delegate to `{agent}`; it delegates to "
            + ", ".join(f"`{a}`" for a in s.agent.delegates),
        )
    child = _child(s, agent=h.spec.agents[target], goal=goal, session_id=session_id)
    s.harness.store.append(
        NewEvent(
            s.id,
            "State",
            "delegation.started",
            {"child": child.id, "agent": target, "goal": goal},
        )
    )
    return child


def refuse_delegation(s: SessionSeam, message: str) -> Refusal:
    refusal = Refusal("delegation-refused", message, None, DELEGATE_TASK)
    s.harness.store.append(call_refused(s.id, refusal.to_dict()))
    return refusal


def open_skill(
    s: SessionSeam, name: str, *, session_id: str | None = None
) -> SessionSeam | Refusal:
    """`Session.skill`: a session of one of the agent's skills."""
    h = s.harness
    skill = h.spec.skills.get(name) or h.spec.skills.get(h.spec.qualified(name))
    if skill is None or (s.agent.skills and skill.name not in s.agent.skills):
        refusal = Refusal(
            "unknown-skill",
            f"the agent `{s.agent.name}` has no skill `{name}`",
            None,
            name,
        )
        s.harness.store.append(call_refused(s.id, refusal.to_dict()))
        return refusal
    if s.skill_def is not None:
        refusal = Refusal("unknown-skill", "a skill session cannot open another skill", None, name)
        s.harness.store.append(call_refused(s.id, refusal.to_dict()))
        return refusal
    child = _child(s, agent=s.agent, skill=skill, session_id=session_id)
    s.harness.store.append(
        NewEvent(s.id, "State", "skill.started", {"child": child.id, "skill": skill.name})
    )
    return child


def _child(
    s: SessionSeam,
    *,
    agent: Agent,
    skill: Skill | None = None,
    goal: str | None = None,
    session_id: str | None = None,
) -> SessionSeam:
    """A session opened by `s`, with its actor, task, facts, resource and env."""
    return s.harness._open_child(s, agent=agent, skill=skill, goal=goal, session_id=session_id)
