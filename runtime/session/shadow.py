"""Shadow mode: a candidate spec judges every decision beside the active one, never enforced.

    h = Harness(active, store=store, shadow=candidate)   # or h.shadow(candidate) later
    ...                                                  # sessions decide as always
    h.shadow(None)                                       # stop
    divergences(store)                                   # what the candidate would change

Each decision a session takes (`Session.decide`, and the judgements of `invoke` and
`Harness.approve`) is also judged under the candidate: the same call context (frozen call,
actor, task, facts, resource, env, the session's ledger) and the candidate's policies for the
session (its agent's policy there; in a skill session the parent's policies and the skill's
profile), through the one judging function sessions use (`judge_policies`). Only the active
decision is enforced and recorded as the `decision` event. When the candidate's effect differs,
a `decision.diverged` event is recorded in the session's stream, in the same commit as the
decision, with the decision id and both outcomes (effect, rule, policy, policy version). A
candidate that fails on a call (an exception, an agent or skill it does not declare) never
touches the active decision: the divergence is recorded with kind `error` and the reason.

Grants are the active spec's: both sides are compared on the policies' own effect (an ASK
that a grant authorises is an ASK on both sides). The session's ledger is kept under the
active spec (a tool's trust and labels as the active spec declares them); the candidate's
history terms are added to it when the shadow is attached.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..judge.policy import CallContext, Decision, PolicyEngine
from ..log.events import (
    DECISION_DIVERGED,
    NewEvent,
    UnreadableEvent,
    decision_diverged,
    read_payload,
)
from ..log.store import EventStore
from ..model.ir import Spec
from .calls import judge_policies
from .recorded import session_agent
from .sessions import session_policies

if TYPE_CHECKING:
    from .seams import HarnessSeam, SessionSeam

__all__ = ["DivergenceReport", "Shadow", "divergences"]


class Shadow:
    """A candidate spec attached to a harness (`Harness.shadow`). `judged`, `diverged` and
    `errors` count the decisions this process judged under it."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.policy_version = spec.content_hash()
        self.engine = PolicyEngine(spec)
        self.judged = 0
        self.diverged = 0
        self.errors = 0
        self._lock = threading.Lock()
        self._policies: dict[tuple[Any, ...], tuple[str, ...] | str] = {}

    def attach(self, h: HarnessSeam) -> None:
        """Make the harness's ledgers keep what the candidate's policies read: its history
        terms join the active catalogue."""
        for node in list(self.engine.terms.nodes.values()):
            h.engine.terms.intern(node)
        if self.engine.terms.read:
            h.engine.terms.read = True

    def policies(self, s: SessionSeam) -> tuple[str, ...] | str:
        """The candidate's policies for the session, or why it has none."""
        lineage: list[tuple[str, str | None]] = []
        at: SessionSeam | None = s
        while at is not None:
            lineage.append((at.agent.name, at.skill_name))
            at = at.parent if at.skill_def is not None else None
        key = tuple(lineage)
        found = self._policies.get(key)
        if found is None:
            found = self._find(lineage[::-1])
            self._policies[key] = found
        return found

    def _find(self, lineage: list[tuple[str, str | None]]) -> tuple[str, ...] | str:
        policies: tuple[str, ...] | None = None
        for agent_name, skill_name in lineage:
            agent = session_agent(self.spec, agent_name)
            if agent is None:
                return f"the candidate does not declare the agent `{agent_name}`"
            skill = self.spec.skills.get(skill_name) if skill_name else None
            if skill_name and skill is None:
                return f"the candidate does not declare the skill `{skill_name}`"
            policies = session_policies(agent, skill, policies)
        return policies or ()

    def judge(
        self,
        s: SessionSeam,
        ctx: CallContext,
        active: Decision,
        *,
        decision_id: str,
        policy_version: str,
        input_hash: str,
    ) -> NewEvent | None:
        """The `decision.diverged` event when the candidate decides the call otherwise (or
        fails on it); None when it agrees. Never raises."""
        try:
            policies = self.policies(s)
            if isinstance(policies, str):
                raise LookupError(policies)
            candidate = judge_policies(self.engine, policies, ctx, agent=s.agent.name)[0]
            error = None
        except Exception as exc:  # the candidate fails: never the active decision's problem
            candidate, error = None, f"{type(exc).__name__}: {exc}"
        with self._lock:
            self.judged += 1
            if candidate is not None and candidate.effect == active.effect:
                return None
            self.diverged += 1
            if error is not None:
                self.errors += 1
        try:
            return decision_diverged(
                s.id,
                decision_id=decision_id,
                tool_id=ctx.tool_id,
                tool_call_id=ctx.tool_call_id or "",
                input_hash=input_hash,
                agent=s.agent.name,
                skill=s.skill_name,
                active=_outcome(active, policy_version),
                candidate=_outcome(candidate, self.policy_version)
                if candidate is not None
                else {"policy_version": self.policy_version, "error": error},
            )
        except Exception:  # an outcome with no JSON form: count it, record nothing
            return None


def _outcome(d: Decision, policy_version: str) -> dict[str, Any]:
    return {
        "effect": d.effect,
        "rule": d.rule,
        "policy": d.policy,
        "policy_version": policy_version,
        "reason": d.reason,
    }


# ---------------------------------------------------------------------------------------------
# The divergences a log holds


@dataclass
class DivergenceGroup:
    count: int = 0
    first: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class DivergenceReport:
    """The `decision.diverged` events of a log, grouped by tool, change kind and rules.
    `to_dict()` is the JSON shape `harnessc log divergences --format json` prints
    (`"version": 1`)."""

    groups: dict[tuple[Any, ...], DivergenceGroup] = field(default_factory=dict)
    total: int = 0

    def to_dict(self) -> dict[str, Any]:
        ordered = sorted(self.groups.items(), key=lambda kv: (-kv[1].count, str(kv[0])))
        return {
            "version": 1,
            "total": self.total,
            "by_kind": _counts((k[1], g.count) for k, g in self.groups.items()),
            "by_tool": _counts((k[0], g.count) for k, g in self.groups.items()),
            "groups": [
                {
                    "tool_id": tool,
                    "kind": kind,
                    "widened": kind in _WIDENED,
                    "active": {"effect": a_effect, "rule": a_rule},
                    "candidate": {
                        "effect": c_effect,
                        "rule": c_rule,
                        "policy_version": version,
                        "error": error,
                    },
                    "count": g.count,
                    "decisions": [{"position": p, "decision_id": i} for p, i in g.first],
                }
                for (
                    tool,
                    kind,
                    a_effect,
                    a_rule,
                    c_effect,
                    c_rule,
                    version,
                    error,
                ), g in ordered
            ],
        }


_WIDENED = ("deny→allow", "ask→allow")


def _counts(pairs: Iterable[tuple[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, n in pairs:
        out[name] = out.get(name, 0) + n
    return dict(sorted(out.items()))


def divergences(store: EventStore, *, first: int = 20, after: int = 0) -> DivergenceReport:
    """Every `decision.diverged` event of the log, grouped and counted (read page by
    page); `first`: how many decision ids each group lists."""
    from .recorded import PAGE, read_rows

    report = DivergenceReport()
    for position, _stream, _type, text, _time in read_rows(
        store, (DECISION_DIVERGED,), after=after, page=PAGE
    ):
        p = read_payload(position, DECISION_DIVERGED, text)
        active, cand = p.get("active") or {}, p.get("candidate") or {}
        if not (isinstance(active, dict) and isinstance(cand, dict)):
            raise UnreadableEvent(
                position, DECISION_DIVERGED, "its `active` or `candidate` is not an object"
            )
        key = (
            p.get("tool_id"),
            p.get("kind"),
            active.get("effect"),
            active.get("rule"),
            cand.get("effect"),
            cand.get("rule"),
            cand.get("policy_version"),
            cand.get("error"),
        )
        group = report.groups.get(key)
        if group is None:
            group = report.groups[key] = DivergenceGroup()
        group.count += 1
        report.total += 1
        if len(group.first) < first:
            group.first.append((position, str(p.get("decision_id"))))
    return report
