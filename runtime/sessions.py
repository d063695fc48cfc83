"""Sessions: one run of an agent, and the path of every call it makes.

`expose` → `normalize` → `decide` → `request_approval` (the harness approves) → `invoke` →
(`complete` for accepted asynchronous work) → `evidence`. Each step is a method that returns a
value with its reasons and appends events to the session's stream. A session is recorded with
everything needed to judge its calls again (actor, task, facts, resource, env), so a harness in
another process picks it up from the log (`Harness.resume`). A planner session may `delegate`
one level deep; `skill` opens a session of a skill, whose private tools run only there, under
the parent's policy and the skill's profile (both must allow: the stricter decision wins).

>>> # h = Harness(spec); s = h.session(agent="planner", actor={"user": "u-1", "role": "sre"})
>>> # call = s.normalize("change_create", "call-1", {...}); s.decide(call); s.invoke(call)
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .approvals import ApprovalError, ApprovalGrant, ApprovalRequest
from .availability import Availability, Facts, ToolAvailability, unavailable_refusal
from .canonical import Execution, jsonable
from .events import (
    NewEvent,
    Secrets,
    decision,
    format_time,
    session_ended,
    session_started,
)
from .evidence import Evidence, build_evidence
from .executors import (
    ExecutorContext,
    LateHook,
    Result,
    run_async,
    run_sync,
    settle,
    timeout_of,
)
from .exposure import Exposure
from .lifecycle import Action, ActionError, ActionState
from .model import Agent, Skill, Spec, Surface, Tool
from .normalize import (
    DELEGATE_TASK,
    PendingCall,
    Refusal,
    describe_value,
    freeze,
    is_text,
    thaw,
)
from .policy import CallContext, Decision
from .projections import ActionView
from .semantics import selects
from .store import ConcurrencyError

if TYPE_CHECKING:
    from .harness import Harness

__all__ = ["PUBLIC_KINDS", "Session", "facts_record", "surface_tools"]

PUBLIC_KINDS = frozenset({"public", "dynamic", "mcp"})
"""Kinds of tool a surface can hold: legacy, primitive and private tools never."""
_STRENGTH = {"deny": 2, "ask": 1, "allow": 0}
_S = ActionState


def surface_tools(spec: Spec, surface: Surface) -> tuple[str, ...]:
    """The public tools of a surface: selected by `expose`, not by `hide` (hide wins), never a
    legacy, primitive or private tool, never `delegate_task`."""
    out: list[str] = []
    for tool in spec.tools.values():
        if tool.kind not in PUBLIC_KINDS or tool.id == DELEGATE_TASK:
            continue
        if any(selects(s, tool) for s in surface.expose) and not any(
            selects(s, tool) for s in surface.hide
        ):
            out.append(tool.id)
    return tuple(out)


@dataclass
class _Judged:
    decision_id: str
    decision: Decision
    grant: ApprovalGrant | None
    policy_version: str
    grants: tuple[ApprovalGrant, ...] = ()
    """Every grant that authorises the call: one per ASK when several policies ask (a skill
    session), all spent by the call."""


class Session:
    """One session of an agent (or of a skill, or a delegated child). Create it with
    `Harness.session`, `Session.delegate` or `Session.skill`."""

    def __init__(
        self,
        harness: Harness,
        *,
        session_id: str,
        agent: Agent,
        actor: Mapping[str, Any],
        task: Mapping[str, Any],
        facts: Facts,
        resource: Mapping[str, Any],
        env: Mapping[str, Any],
        parent: Session | None = None,
        skill: Skill | None = None,
        goal: str | None = None,
        tools: tuple[str, ...] | None = None,
    ) -> None:
        self.harness = harness
        self._tools = tools
        self.id = session_id
        self.agent = agent
        self.actor: Mapping[str, Any] = MappingProxyType(dict(actor))
        self.task: dict[str, Any] = dict(task)
        self.facts = facts
        self.resource: Mapping[str, Any] = MappingProxyType(dict(resource))
        self.env: Mapping[str, Any] = MappingProxyType(dict(env))
        self.parent = parent
        self.skill_def = skill
        self.goal = goal
        self.depth: int = 0 if parent is None else parent.depth + (0 if skill is not None else 1)
        self.children: list[Session] = []
        policies: list[str] = []
        if parent is not None and skill is not None:
            policies.extend(parent.policies)
        elif agent.policy:
            policies.append(agent.policy)
        if skill is not None and skill.profile:
            policies.append(skill.profile)
        self.policies: tuple[str, ...] = tuple(policies)
        self._actions: dict[str, Action] = {}
        self._pending: dict[str, PendingCall] = {}
        self._judged: dict[str, _Judged] = {}
        self._results: dict[str, Result] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._inflight: dict[str, asyncio.Future[Result]] = {}
        self._running: set[str] = set()
        # every secret value a call of this session carried: the planner may quote one in a
        # later query, and an exposure trace never holds it
        # every secret value the session's calls carried (to scrub exposure queries), kept as a
        # set so that normalizing a call costs only its own values; `Secrets` is built on demand
        self._secret_texts: set[str] = set()
        self._by_action_id: dict[str, str] = {}
        self._lock = threading.Lock()
        self._surface_version: str | None = None
        self._surface: frozenset[str] = frozenset()
        self._surface_order: tuple[str, ...] = ()
        # (facts snapshot, policy version, tool id → availability): replaced, never mutated in
        # place, when the facts or the spec change, so a reader needs no lock
        self._availability: tuple[Facts | None, str, dict[str, ToolAvailability]] = (None, "", {})

    # -- identity -----------------------------------------------------------------------------

    @property
    def task_id(self) -> str | None:
        value = self.task.get("id")
        return value if isinstance(value, str) else None

    @property
    def skill_name(self) -> str | None:
        return self.skill_def.name if self.skill_def is not None else None

    @property
    def can_delegate(self) -> bool:
        """Only a top-level planner session (its agent has `delegate`) may delegate."""
        return self.parent is None and self.skill_def is None and bool(self.agent.delegates)

    @property
    def surface(self) -> tuple[str, ...]:
        """The tool ids this session may call, in registry order: the agent's surface, or a
        skill session's private tools. Never `delegate_task`."""
        self._refresh_surface()
        return self._surface_order

    def _refresh_surface(self) -> None:
        h = self.harness
        if self._surface_version == h.policy_version:
            return
        spec = h.spec
        if self.skill_def is not None:
            names = list(self.skill_def.private_tools)
            for sub in self.skill_def.subagents.values():
                names.extend(sub.tools)
            order = tuple(t for t in dict.fromkeys(names) if t in spec.tools)
        elif self._tools is not None:  # a workflow judged by a policy: the tools it calls
            order = tuple(t for t in self._tools if t in spec.tools)
        elif self.agent.surface and self.agent.surface in spec.surfaces:
            order = h.surface_tools(self.agent.surface)
        else:
            order = ()
        self._surface_order = tuple(t for t in order if t != DELEGATE_TASK)
        self._surface = frozenset(self._surface_order)
        self._surface_version = h.policy_version

    def _append(self, kind: str, type_: str, payload: Mapping[str, Any]) -> None:
        self.harness.store.append(NewEvent(self.id, kind, type_, payload))

    def _start(self) -> None:
        extra: dict[str, Any] = {
            "actor": jsonable(self.actor),
            "task": jsonable(self.task),
            "policy_version": self.harness.policy_version,
            "policies": list(self.policies),
            # what policy reads, so a harness in another process judges this session's calls
            # again exactly as this one would (`Harness.resume`)
            "facts": facts_record(self.facts),
            "resource": jsonable(self.resource),
            "env": jsonable(self.env),
        }
        if self.parent is not None:
            extra["parent"] = self.parent.id
        if self.skill_def is not None:
            extra["skill"] = self.skill_def.name
        if self.goal is not None:
            extra["goal"] = self.goal
        self.harness.store.append(session_started(self.id, agent=self.agent.name, **extra))

    def end(self, outcome: str = "completed") -> None:
        """Record the end of the session."""
        self.harness.store.append(session_ended(self.id, outcome=outcome))

    # -- availability and exposure --------------------------------------------------------------

    def availability(self) -> Availability:
        """Every tool's availability under this session's facts, with reasons."""
        return self.harness.availability(self.facts)

    def tool_availability(self, tool_id: str) -> ToolAvailability:
        """One tool's availability under this session's facts now (computed once per facts
        snapshot and spec; `Harness.resume(session_id, facts=…)` gives new facts)."""
        h = self.harness
        facts, version, known = self._availability
        if facts is not self.facts or version != h.policy_version:
            facts, known = self.facts, {}
            self._availability = (facts, h.policy_version, known)
        found = known.get(tool_id)
        if found is None:
            found = known[tool_id] = h.checker.tool(h.spec.tools[tool_id], facts)
        return found

    def expose(self, query: str, *, packs: tuple[str, ...] | list[str] = ()) -> Exposure:
        """The tools the planner sees this turn: the surface ∩ available, ranked when more than
        the surface's `limit` (language.md §5), with a trace recorded as a `tools.exposed`
        event.

        >>> # s.expose("deploy the change to staging").tools
        """
        h = self.harness
        avail = self.availability()
        surface = None
        if self.skill_def is None and self.agent.surface:
            surface = h.spec.surfaces.get(self.agent.surface)
        exposure = h.exposure_index().expose(
            self.surface, query, available=avail.tools, surface=surface, packs=tuple(packs)
        )
        seen = Secrets.from_texts(self._secret_texts)
        trace = seen.scrub(jsonable(exposure.trace.to_dict()))
        self._append(
            "Tool",
            "tools.exposed",
            {
                "query": seen.text(query),
                "tools": list(exposure.tools),
                "rule": exposure.trace.rule,
                "unavailable": dict(exposure.trace.unavailable),
                "packs": list(packs),
                "trace": trace,
            },
        )
        return exposure

    # -- normalize --------------------------------------------------------------------------

    def normalize(
        self,
        tool: str,
        tool_call_id: str,
        args: Mapping[str, Any] | None = None,
        *,
        execution: Execution | None = None,
    ) -> PendingCall | Refusal:
        """Freeze a planner's call (tool id or wire name, its tool_call_id, arguments and the
        execution parameters) into a `PendingCall`, or refuse it with a structured `Refusal`.

        The call is recorded as an action (REQUESTED → VALIDATED); a refusal as a
        `call.refused` event. Normalizing the same call twice returns the same `PendingCall`.
        """
        result = self._normalize(tool, tool_call_id, args, execution)
        if isinstance(result, Refusal):
            self._append("Error", "call.refused", {**result.to_dict(), "session": self.id})
            return result
        with self._lock:
            known = self._pending.get(result.key)
            if known is not None:
                return known
            self._pending[result.key] = result
            restored = self._actions.get(result.key)
            spec_tool = self.harness.spec.tools[result.tool_id]
            secrets = Secrets.of(spec_tool, result.args)
            self._secret_texts.update(secrets.values)
        if restored is not None:
            # an action restored from the log whose call could not be rebuilt (its secret
            # values are never stored): the same tool, tool_call_id and input hash is that call
            restored.secrets = secrets
            self._attach_requests(result)
            return result
        action = Action.request(
            self.harness.store,
            self.id,
            spec_tool,
            tool_call_id,
            thaw(result.args),
            execution=result.execution,
            digest=result.input_hash,
            agent=self.agent.name,
            skill=self.skill_name,
            actor=jsonable(self.actor.get("user")),
        )
        action.transition(_S.VALIDATED)
        self._actions[result.key] = action
        self._index(action, result.key)
        return result

    def _normalize(
        self,
        name: str,
        tool_call_id: str,
        args: Mapping[str, Any] | None,
        execution: Execution | None,
    ) -> PendingCall | Refusal:
        h = self.harness
        # a refusal is recorded as an event: what the caller wrote goes in only as text
        written = name if isinstance(name, str) else None
        call_id = tool_call_id if isinstance(tool_call_id, str) else None
        if not isinstance(name, str) or not name:
            return Refusal(
                "unknown-tool",
                "a call names its tool with a non-empty string, not "
                + (describe_value(name) if written is None else "an empty one"),
                None,
                written,
                call_id,
            )
        if not isinstance(tool_call_id, str) or not tool_call_id:
            return Refusal(
                "invalid-args",
                "a call needs a non-empty `tool_call_id`, not "
                + (describe_value(tool_call_id) if call_id is None else "an empty one"),
                None,
                written,
            )
        if not is_text(tool_call_id):
            return Refusal(
                "invalid-args",
                "a `tool_call_id` holds a lone surrogate, which is not text",
                None,
                written,
                tool_call_id,
            )
        tool, refusal = h.names.resolve(name)
        if refusal is not None:
            return replace(refusal, tool_call_id=tool_call_id)
        assert tool is not None
        self._refresh_surface()
        if tool.kind == "private" and tool.skill != self.skill_name:
            return Refusal(
                "skill-private",
                f"`{tool.id}` is private to the skill `{tool.skill}` and runs only in a session "
                "of that skill",
                f"Session.skill({tool.skill!r})",
                name,
                tool_call_id,
            )
        if tool.id not in self._surface:
            if tool.kind == "primitive":
                what = "is internal (primitive) and never on a surface"
            elif self.skill_def is not None:
                what = (
                    f"is not on the surface of the skill `{self.skill_def.name}`: a session of "
                    "the skill calls only its private tools and its subagents' tools"
                )
                if self.skill_def.profile:
                    what += f" (profile `{self.skill_def.profile}`)"
            else:
                what = f"is not on the surface of the agent `{self.agent.name}`"
            return Refusal("not-on-surface", f"`{tool.id}` {what}", None, name, tool_call_id)
        # Availability is a layer of its own (language.md §1): a tool the planner can name is
        # not a tool that works now, so a call to an unavailable one never reaches policy.
        available = self.tool_availability(tool.id)
        if not available.available:
            return unavailable_refusal(available, name, tool_call_id)
        return freeze(
            tool,
            h.validators[tool.id],
            tool_call_id,
            args,
            execution,
            name=name,
            actor=self.actor,
            session_id=self.id,
            agent=self.agent.name,
            task_id=self.task_id,
            skill=self.skill_name,
        )

    # -- decide -------------------------------------------------------------------------------

    def context(self, pending: PendingCall) -> CallContext:
        """The call as policy sees it: the session's actor, task, facts, resource and env."""
        execution = pending.execution
        params: dict[str, Any] = {}
        if execution.command is not None:
            params["command"] = execution.command
        if execution.cwd is not None:
            params["cwd"] = execution.cwd
        if execution.env is not None:
            params["env"] = execution.env
        if execution.timeout_ms is not None:
            params["timeout"] = execution.timeout_ms
        if execution.target is not None:
            params["target"] = execution.target
        facts = self.facts
        return CallContext(
            pending.tool_id,
            pending.args,
            self.actor,
            self.resource,
            self.task,
            self.env,
            facts.values,
            facts.connected,
            facts.running,
            pending.tool_call_id,
            params,
        )

    def judge(self, pending: PendingCall) -> tuple[Decision, ApprovalGrant | None]:
        """Decide without recording: the decision of the session's policies, and the grant that
        authorises it when it is an ASK (pure; `decide` records it).

        In a skill session the parent's policy and the skill's profile both judge the call
        (language.md §9): DENY beats ASK beats ALLOW across them. When they agree on the effect,
        the decision names the most specific rule: a rule before a default (a risk table), the
        skill's profile before the parent's policy. When both ASK, each ASK needs its own
        approval: the decision names the first one nobody has approved yet.
        """
        d, grants = self._judge(pending)
        return d, grants[0] if grants else None

    def _judge(self, pending: PendingCall) -> tuple[Decision, tuple[ApprovalGrant, ...]]:
        h = self.harness
        ctx = self.context(pending)
        if len(self.policies) == 1:
            tied = [h.engine.decider(self.policies[0]).decide(ctx)]
        elif not self.policies:
            tied = [
                Decision(
                    "deny",
                    None,
                    (),
                    f"the agent `{self.agent.name}` has no policy",
                    None,
                    (),
                    None,
                    True,
                    None,
                    "",
                    pending.tool_id,
                )
            ]
        else:
            decisions = [h.engine.decider(name).decide(ctx) for name in self.policies]
            strongest = max(_STRENGTH[d.effect] for d in decisions)
            # INVARIANT: most specific first. `self.policies` lists the parent's policy before
            # the skill's profile, so a later policy is the more specific one; a rule that
            # matched is more specific than a default.
            ranked = sorted(
                (
                    (d.default_used, -i, d)
                    for i, d in enumerate(decisions)
                    if _STRENGTH[d.effect] == strongest
                ),
                key=lambda r: (r[0], r[1]),
            )
            tied = [d for _, _, d in ranked]
        best = tied[0]
        if best.effect != "ask":
            return best, ()
        tool = h.spec.tools.get(pending.tool_id)
        grants: list[ApprovalGrant] = []
        for d in tied:
            grant = h.approvals.find(
                pending,
                rule=d.rule,
                policy=d.policy,
                task_id=self.task_id,
                tool=tool,
                context=ctx,
                facts=self.facts.values,
                # several policies ask: each needs an approval of its own rule
                own_rule=len(tied) > 1,
            )
            if grant is None:
                return d, ()
            grants.append(grant)
        return best, tuple(grants)

    def decide(self, pending: PendingCall) -> Decision:
        """Judge a frozen call under the agent's policy (and a skill's profile) and record a
        `decision` event with a decision id and the spec's content hash as policy version.

        DENY beats ASK beats ALLOW. An ASK whose grant matches (see `approvals`) authorises
        the call; the returned decision stays the policy's own (its `effect` is still `ask`).
        """
        self._own(pending)
        d, grants = self._judge(pending)
        grant = grants[0] if grants else None
        h = self.harness
        decision_id = "dec-" + uuid.uuid4().hex[:16]
        h.store.append(
            decision(
                self.id,
                decision_id=decision_id,
                policy_version=h.policy_version,
                tool_id=pending.tool_id,
                tool_call_id=pending.tool_call_id,
                input_hash=pending.input_hash,
                effect=d.effect,
                rule=d.rule,
                reason=d.reason,
                matched=list(d.matched),
                policy=d.policy,
                policies=list(self.policies),
                default_used=d.default_used,
                instead=d.instead,
                approvers=[{"kind": a.kind, "value": a.value} for a in d.approvers],
                grant_id=grant.grant_id if grant is not None else None,
                authorized=d.effect == "allow" or grant is not None,
                agent=self.agent.name,
                skill=self.skill_name,
            )
        )
        self._judged[pending.key] = _Judged(decision_id, d, grant, h.policy_version, grants)
        self._drive(pending, d, grant, decision_id)
        return d

    def _drive(
        self, pending: PendingCall, d: Decision, grant: ApprovalGrant | None, decision_id: str
    ) -> None:
        action = self._actions.get(pending.key)
        if action is None or action.terminal:
            return
        authorized = d.effect == "allow" or (d.effect == "ask" and grant is not None)
        details: dict[str, Any] = {"decision_id": decision_id}
        if grant is not None:
            details["grant_id"] = grant.grant_id
        state = action.state
        if d.effect == "deny":
            if state in (_S.VALIDATED,):
                action.transition(_S.FAILED, reason="denied", **details)
            else:
                action.transition(_S.CANCELLED, reason="denied when judged again", **details)
        elif authorized:
            if state in (_S.VALIDATED, _S.WAITING_APPROVAL):
                action.transition(_S.AUTHORIZED, **details)
        elif state == _S.VALIDATED:
            action.transition(_S.WAITING_APPROVAL, **details)
        elif state == _S.AUTHORIZED:
            action.transition(_S.CANCELLED, reason="no longer authorized", **details)

    def _own(self, pending: PendingCall) -> None:
        if pending.session_id != self.id or pending.key not in self._pending:
            raise ValueError(
                f"the call `{pending.tool_call_id}` was not normalized in session `{self.id}`"
            )

    def action_state(self, pending: PendingCall) -> ActionState | None:
        """The lifecycle state of a normalized call."""
        action = self._actions.get(pending.key)
        return action.state if action is not None else None

    # -- approvals ----------------------------------------------------------------------------

    def request_approval(
        self, pending: PendingCall, decision: Decision | None = None
    ) -> ApprovalRequest:
        """Ask for approval of an ASK decision: what, why, as whom, on what object, the
        expected impact, the arguments (secrets redacted), reversibility and the grant's
        scope. The harness answers it (`Harness.approve` / `Harness.deny`)."""
        self._own(pending)
        judged = self._judged.get(pending.key)
        if decision is None:
            if judged is None:
                self.decide(pending)
                judged = self._judged[pending.key]
            decision = judged.decision
        if decision.effect != "ask":
            raise ValueError(f"only an ASK decision needs approval, not `{decision.effect}`")
        h = self.harness
        return h.approvals.request(
            session_id=self.id,
            pending=pending,
            tool=h.spec.tools[pending.tool_id],
            decision=decision,
            decision_id=judged.decision_id if judged is not None else None,
            actor=self.actor,
            resource=self.resource,
            task_id=self.task_id,
        )

    def record_denial(
        self, pending: PendingCall | ApprovalRequest, by: str | None, reason: str | None
    ) -> None:
        """A person's denial as a task fact (`task.denials`) and a `task.fact` event; the
        action is cancelled. `pending` is the call, or the request that asked for it."""
        entry = {
            "tool_id": pending.tool_id,
            "tool_call_id": pending.tool_call_id,
            "input_hash": pending.input_hash,
            "by": by,
            "reason": reason,
        }
        denials = list(self.task.get("denials") or [])
        denials.append(entry)
        self.task["denials"] = denials
        self._append(
            "State",
            "task.fact",
            {"task_id": self.task_id, "fact": "denied", "value": entry},
        )
        action = self._actions.get(f"{pending.tool_call_id}:{pending.input_hash}")
        if action is not None and not action.terminal:
            action.cancel(reason or "denied by a person")

    # -- invoke -------------------------------------------------------------------------------

    def _authorize(self, pending: PendingCall) -> tuple[_Judged | None, Result | None]:
        """The judgement that authorises the call now, or a result saying why it may not run."""
        action = self._actions[pending.key]
        judged = self._judged.get(pending.key)
        now = self.harness.clock()
        stale = (
            judged is None
            or judged.policy_version != self.harness.policy_version
            or action.state != _S.AUTHORIZED
            or any(not g.active(now) for g in judged.grants)
        )
        if stale and not action.terminal:
            self.decide(pending)
            judged = self._judged[pending.key]
        if action.state == _S.AUTHORIZED:
            return judged, None
        category = {
            _S.WAITING_APPROVAL: "waiting_approval",
            _S.FAILED: "denied",
            _S.CANCELLED: "cancelled",
        }.get(action.state, "not_authorized")
        why = judged.decision.reason if judged is not None else None
        message = f"`{pending.tool_id}` may not run: the call is {action.state.value}"
        if why:
            message += f" ({why})"
        return judged, self._not_run(pending, category, message, action.state.value, judged)

    def _unavailable(self, pending: PendingCall) -> Result | None:
        """A not-run result when the call's tool is unavailable under the facts now, recorded
        as a `call.refused` event; the action keeps its state (it runs once the conditions
        hold) and a grant that authorises it is not spent."""
        available = self.tool_availability(pending.tool_id)
        if available.available:
            return None
        refusal = unavailable_refusal(available, pending.tool_id, pending.tool_call_id)
        action = self._actions[pending.key]
        self._append(
            "Error",
            "call.refused",
            {
                **refusal.to_dict(),
                "session": self.id,
                "action_id": action.action_id,
                "input_hash": pending.input_hash,
                "stage": "invoke",
            },
        )
        message = f"`{pending.tool_id}` may not run: it is unavailable now (" + (
            "; ".join(available.reasons) + ")"
        )
        return self._not_run(
            pending, "unavailable", message, action.state.value, self._judged.get(pending.key)
        )

    def _not_run(
        self,
        pending: PendingCall | Action,
        category: str,
        message: str,
        state: str,
        judged: _Judged | None,
    ) -> Result:
        action = pending if isinstance(pending, Action) else self._actions.get(pending.key)
        return Result(
            tool_id=pending.tool_id,
            tool_call_id=pending.tool_call_id,
            input_hash=pending.input_hash
            if isinstance(pending, PendingCall)
            else self._hash_of(pending),
            status="failure",
            data=None,
            observation=message,
            error=message,
            error_category=category,
            retryable=category in ("waiting_approval", "unavailable"),
            side_effect=False,
            executor=None,
            actor=_user(self.actor),
            started_at=None,
            finished_at=None,
            duration_ms=0.0,
            state=state,
            ran=False,
            decision_id=judged.decision_id if judged is not None else None,
            action_id=action.action_id if action is not None else None,
        )

    def _prepare(self, pending: PendingCall) -> tuple[Any, ...] | Result:
        self._own(pending)
        recorded = self._results.get(pending.key)
        if recorded is not None:
            return recorded
        judged, refused = self._authorize(pending)
        if refused is not None:
            return refused
        # checked again: the facts may have changed since normalize or the approval
        unavailable = self._unavailable(pending)
        if unavailable is not None:
            return unavailable
        assert judged is not None
        h = self.harness
        tool = h.spec.tools[pending.tool_id]
        bound = h.executors.get(tool.id)
        if bound is None:
            return self._not_run(
                pending,
                "no_executor",
                f"no executor is bound to `{tool.id}`",
                _S.AUTHORIZED.value,
                judged,
            )
        action = self._actions[pending.key]
        if judged.grants:
            try:
                h.approvals.use(judged.grants, self.id, pending)
            except ApprovalError as exc:
                # another execution (a thread, or a process sharing the store) spent the once
                # grant first: this one does not run; judged again, the call asks anew
                self._append(
                    "Error",
                    "call.refused",
                    {
                        "code": exc.code,
                        "message": exc.message,
                        "tool": pending.tool_id,
                        "tool_call_id": pending.tool_call_id,
                        "session": self.id,
                        "action_id": action.action_id,
                        "input_hash": pending.input_hash,
                        "stage": "invoke",
                    },
                )
                return self._not_run(
                    pending, "grant_spent", exc.message, action.state.value, judged
                )
        action.transition(_S.RUNNING, executor=bound.name, decision_id=judged.decision_id)
        self._running.add(pending.key)
        ctx = ExecutorContext(
            pending,
            self.id,
            self.actor,
            self.task_id,
            timeout_of(tool, pending),
            action.action_id,
        )
        return tool, bound, ctx, judged, action

    def _record(
        self, pending: PendingCall, tool: Tool, judged: _Judged, action: Action, result: Result
    ) -> Result:
        result = replace(
            result,
            decision_id=judged.decision_id,
            grant_id=judged.grant.grant_id if judged.grant is not None else None,
            action_id=action.action_id,
        )
        try:
            if result.accepted:
                # RUNNING → ACCEPTED (the external system took it) → WAITING_RESULT
                action.transition(_S.ACCEPTED, handle=result.handle)
                action.transition(
                    _S.WAITING_RESULT, result=result.to_dict(tool.output), handle=result.handle
                )
            else:
                action.transition(
                    result.state,
                    result=result.to_dict(tool.output),
                    reason=result.error_category,
                )
            self._results[pending.key] = result
        finally:
            self._running.discard(pending.key)
        return result

    def _late_hook(self, action: Action, settled: threading.Event) -> LateHook:
        """Record that an executor which timed out finished anyway; its return value is
        dropped (the recorded result stays `unknown`)."""

        def report(outcome: str, error: BaseException | None) -> None:
            settled.wait(10)  # after the timeout's own result, so the log reads in order
            payload: dict[str, Any] = {
                "action_id": action.action_id,
                "tool_call_id": action.tool_call_id,
                "tool_id": action.tool_id,
                "outcome": outcome,
                "used": False,
                "note": "the executor finished after its timeout; its return value was not "
                "used and the call's result stays unknown",
            }
            if error is not None:
                payload["error"] = action.secrets.text(f"{type(error).__name__}: {error}")
            self._append("Tool", "action.late_result", payload)

        return report

    def invoke(self, pending: PendingCall) -> Result:
        """Run an authorised call (ALLOW, or ASK with a matching grant) with its executor and
        record the `Result`. Invoking the same pending call again returns the recorded result:
        it never runs twice (the idempotency key is `tool_call_id` + `input_hash`). A call that
        may not run returns a result with `ran=False` and says why."""
        lock = self._key_lock(pending.key)
        with lock:
            prepared = self._prepare(pending)
            if isinstance(prepared, Result):
                return prepared
            tool, bound, ctx, judged, action = prepared
            settled = threading.Event()
            try:
                result = run_sync(
                    tool,
                    pending,
                    bound,
                    ctx,
                    self.harness.clock,
                    self.harness.outputs.get(tool.id),
                    self._late_hook(action, settled),
                )
                return self._record(pending, tool, judged, action, result)
            finally:
                settled.set()

    async def ainvoke(self, pending: PendingCall) -> Result:
        """`invoke` for asyncio: async executors run on the running loop, sync ones in a
        thread; concurrent calls with the same key share one run."""
        inflight = self._inflight.get(pending.key)
        if inflight is not None:
            return await asyncio.shield(inflight)
        prepared = self._prepare(pending)
        if isinstance(prepared, Result):
            return prepared
        tool, bound, ctx, judged, action = prepared
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._inflight[pending.key] = future
        settled = threading.Event()
        try:
            result = await run_async(
                tool,
                pending,
                bound,
                ctx,
                self.harness.clock,
                self.harness.outputs.get(tool.id),
                self._late_hook(action, settled),
            )
            result = self._record(pending, tool, judged, action, result)
            future.set_result(result)
            return result
        finally:
            settled.set()
            self._running.discard(pending.key)
            self._inflight.pop(pending.key, None)

    def _key_lock(self, key: str) -> threading.Lock:
        with self._lock:
            lock = self._locks.get(key)
            if lock is None:
                lock = self._locks[key] = threading.Lock()
            return lock

    # -- asynchronous work: complete and cancel ---------------------------------------------

    def complete(
        self,
        action: str | PendingCall,
        data: Any = None,
        *,
        error: str | BaseException | None = None,
        by: Mapping[str, Any] | str | None = None,
    ) -> Result:
        """Report the result of accepted work (an executor returned `Accepted`): the output
        data (checked against the tool's output schema, like an executor's), an `Outcome`, or
        `error=`. The action moves WAITING_RESULT → SUCCEEDED or FAILED, the `Result` is
        recorded and returned, and `invoke` returns it from now on.

        Raises `ActionError`: `already-finished` when the action has its result (completing
        twice; it is decided on the log, so a completion in another process counts),
        `not-waiting` when it is not waiting for a result, `unknown-action`.

        >>> # accepted = s.invoke(call)           # status "accepted", state WAITING_RESULT
        >>> # s.complete(accepted.action_id, {"deployment_id": "dep-1", ...}, by="ci-webhook")
        """
        key = self._key_of(action)
        who = _who_of(by)
        h = self.harness
        with self._key_lock(key):
            act = self._actions[key]
            tool = h.spec.tools.get(act.tool_id)
            if tool is None:
                raise ActionError(
                    "unknown-action",
                    f"the tool `{act.tool_id}` of `{act.action_id}` is no longer registered",
                    action_id=act.action_id,
                    state=act.state.value,
                )
            while True:
                seq = act.refresh()
                if act.terminal:
                    if act.state == _S.CANCELLED:
                        self._append(
                            "Tool",
                            "action.late_result",
                            {
                                "action_id": act.action_id,
                                "tool_call_id": act.tool_call_id,
                                "tool_id": act.tool_id,
                                "outcome": "failed" if error is not None else "completed",
                                "by": who,
                                "used": False,
                                "note": "the result came after the action was cancelled",
                            },
                        )
                    raise ActionError(
                        "already-finished",
                        f"the action `{act.action_id}` is already {act.state.value}: its result "
                        "was recorded once and is not replaced",
                        action_id=act.action_id,
                        state=act.state.value,
                    )
                if act.state != _S.WAITING_RESULT:
                    raise ActionError(
                        "not-waiting",
                        f"the action `{act.action_id}` is {act.state.value}, not waiting for a "
                        "result: only work an executor accepted is completed",
                        action_id=act.action_id,
                        state=act.state.value,
                    )
                accepted = self._results.get(key) or self._placeholder(act, tool)
                final = settle(
                    tool,
                    self._pending.get(key),
                    accepted,
                    data,
                    error,
                    by=who,
                    finished=h.clock(),
                    output=h.outputs.get(tool.id),
                )
                try:
                    act.transition(
                        final.state,
                        result=final.to_dict(tool.output),
                        reason=final.error_category,
                        completed_by=who,
                        expected_seq=seq,
                    )
                except ConcurrencyError:
                    continue  # another writer moved the stream: read the log again
                self._results[key] = final
                return final

    def cancel(
        self,
        action: str | PendingCall,
        *,
        reason: str = "cancelled",
        by: Mapping[str, Any] | str | None = None,
    ) -> Result:
        """Cancel an action that has not finished: one waiting for approval or authorised
        (it never runs), or accepted work waiting for its result (the harness stops waiting;
        the external system may still do it, so the result is `unknown` with
        `side_effect=True` when the tool has side effects). A pending approval request of the
        call is withdrawn. Raises `ActionError` (`already-finished`, `running` while this
        process runs it, `unknown-action`)."""
        key = self._key_of(action)
        who = _who_of(by)
        h = self.harness
        with self._key_lock(key):
            act = self._actions[key]
            if key in self._running:
                raise ActionError(
                    "running",
                    f"the action `{act.action_id}` is running in this process: its result or "
                    "timeout ends it",
                    action_id=act.action_id,
                    state=act.state.value,
                )
            tool = h.spec.tools.get(act.tool_id)
            while True:
                seq = act.refresh()
                if act.terminal:
                    raise ActionError(
                        "already-finished",
                        f"the action `{act.action_id}` is already {act.state.value}",
                        action_id=act.action_id,
                        state=act.state.value,
                    )
                started = act.state in (_S.RUNNING, _S.ACCEPTED, _S.WAITING_RESULT)
                if started:
                    base = self._results.get(key) or self._placeholder(act, tool)
                    side = base.side_effect or (tool is not None and _has_side_effect(tool))
                    where = f" (`{base.handle}`)" if base.handle else ""
                    text = (
                        f"`{act.tool_id}` was cancelled after it started{where}: its outcome is "
                        "unknown" + ("; a side effect may have happened" if side else "")
                    )
                    result = replace(
                        base,
                        status="unknown",
                        data=None,
                        observation=text,
                        error=reason,
                        error_category="cancelled",
                        retryable=False,
                        side_effect=side,
                        finished_at=_now(h),
                        state=_S.CANCELLED.value,
                        completed_by=who,
                    )
                else:
                    result = self._not_run(
                        act,
                        "cancelled",
                        f"`{act.tool_id}` may not run: the call was cancelled ({reason})",
                        _S.CANCELLED.value,
                        self._judged.get(key),
                    )
                try:
                    act.transition(
                        _S.CANCELLED,
                        reason=reason,
                        by=who,
                        result=result.to_dict(tool.output if tool else None),
                        expected_seq=seq,
                    )
                except ConcurrencyError:
                    continue
                break
            self._results[key] = result
        for req in list(h.approvals.requests.values()):
            if (
                req.session_id == self.id
                and req.status == "pending"
                and f"{req.tool_call_id}:{req.input_hash}" == key
            ):
                h.approvals.resolve(req.request_id, "withdrawn", who, reason=reason)
        return result

    def _placeholder(self, act: Action, tool: Tool | None) -> Result:
        return Result(
            tool_id=act.tool_id,
            tool_call_id=act.tool_call_id,
            input_hash=self._hash_of(act),
            status="unknown",
            data=None,
            observation="",
            error=None,
            error_category=None,
            retryable=False,
            side_effect=tool is not None and _has_side_effect(tool),
            executor=None,
            actor=_user(self.actor),
            started_at=None,
            finished_at=None,
            duration_ms=0.0,
            state=act.state.value,
            action_id=act.action_id,
        )

    # -- the calls of this session ----------------------------------------------------------

    def call(self, tool_call_id: str) -> PendingCall | None:
        """The frozen call with this tool_call_id (the latest, when the model reused the id
        with other arguments), normalized here or restored from the log."""
        found = None
        for pending in list(self._pending.values()):
            if pending.tool_call_id == tool_call_id:
                found = pending
        return found

    def calls(self) -> tuple[PendingCall, ...]:
        """Every frozen call of this session, in the order they were made or restored."""
        return tuple(self._pending.values())

    def action_id(self, pending: PendingCall) -> str | None:
        """The `action_id` of a normalized call (for `Harness.complete` / `cancel`)."""
        action = self._actions.get(pending.key)
        return action.action_id if action is not None else None

    def _key_of(self, action: str | PendingCall) -> str:
        if isinstance(action, PendingCall):
            self._own(action)
            return action.key
        key = self._by_action_id.get(action)
        if key is None:
            raise ActionError(
                "unknown-action", f"no action `{action}` in session `{self.id}`", action_id=action
            )
        return key

    def _index(self, action: Action, key: str) -> None:
        self._by_action_id[action.action_id] = key
        self.harness._action_sessions[action.action_id] = self

    def _hash_of(self, action: Action) -> str:
        for key, known in self._actions.items():
            if known is action:
                return key.split(":", 1)[1]
        return ""

    def _attach_requests(self, pending: PendingCall) -> None:
        approvals = self.harness.approvals
        for req in list(approvals.requests.values()):
            if (
                req.session_id == self.id
                and req.pending is None
                and (req.tool_call_id, req.input_hash) == (pending.tool_call_id, pending.input_hash)
            ):
                approvals.attach(req.request_id, pending)

    # -- restart ----------------------------------------------------------------------------

    def _restore(self, views: list[ActionView]) -> None:
        """Take up this session's actions as the log leaves them (`Harness.resume`): their
        state, their frozen call when it can be rebuilt exactly, their recorded result."""
        h = self.harness
        for view in sorted(views, key=lambda v: v.position):
            tool = h.spec.tools.get(view.tool_id)
            key = f"{view.tool_call_id}:{view.input_hash}"
            action = Action(
                h.store,
                self.id,
                view.tool_call_id,
                view.tool_id,
                ActionState(view.state),
                tool=tool,
                position=view.position,
                action_id=view.action_id,
            )
            self._actions[key] = action
            self._index(action, key)
            if view.result is not None:
                self._results[key] = Result.from_dict(view.result)
            pending = self._rebuild(view, tool) if tool is not None else None
            if pending is not None:
                self._pending[key] = pending
                self._attach_requests(pending)

    def _rebuild(self, view: ActionView, tool: Tool) -> PendingCall | None:
        """The frozen call from its recorded arguments and execution, if and only if they
        give the recorded input hash (not when secret values were redacted, nor when the
        tool's version changed: then it is another call)."""
        if view.args is None or view.tool_version != tool.version or not view.input_hash:
            return None
        recorded = dict(view.execution or {})
        if isinstance(recorded.get("command"), list):
            recorded["command"] = tuple(recorded["command"])
        try:
            execution = Execution(**recorded) if recorded else None
        except TypeError:
            return None
        h = self.harness
        pending = freeze(
            tool,
            h.validators[tool.id],
            view.tool_call_id,
            view.args,
            execution,
            actor=self.actor,
            session_id=self.id,
            agent=self.agent.name,
            task_id=self.task_id,
            skill=self.skill_name,
        )
        if isinstance(pending, PendingCall) and pending.input_hash == view.input_hash:
            return pending
        return None

    # -- delegation and skills ------------------------------------------------------------------

    def delegate(
        self, goal: str, *, agent: str | None = None, session_id: str | None = None
    ) -> Session | Refusal:
        """Start a child session of a delegation target (one level deep): only a planner's own
        session may delegate; the child's surface never holds `delegate_task` and the child
        cannot delegate again. Its calls go through policy, approvals and evidence.
        `session_id` names the child session (a random `ses-…` id otherwise).

        >>> # child = s.delegate("Write and test a patch.", agent="generic", session_id="t7-child")
        """
        h = self.harness
        if self.parent is not None or self.skill_def is not None:
            return self._refuse_delegation(
                "a delegated or skill session cannot delegate again: delegation is one level deep"
            )
        if not self.agent.delegates:
            return self._refuse_delegation(f"the agent `{self.agent.name}` does not delegate")
        if agent is None:
            if len(self.agent.delegates) != 1:
                return self._refuse_delegation(
                    "name the agent to delegate to: one of "
                    + ", ".join(f"`{a}`" for a in self.agent.delegates)
                )
            target = self.agent.delegates[0]
        else:
            target = h.spec.qualified(agent) if agent not in h.spec.agents else agent
        if target not in self.agent.delegates or target not in h.spec.agents:
            return self._refuse_delegation(
                f"the agent `{self.agent.name}` may not delegate to `{agent}`; it delegates to "
                + ", ".join(f"`{a}`" for a in self.agent.delegates)
            )
        child = h._open(
            agent=h.spec.agents[target],
            actor=self.actor,
            task=self.task,
            facts=self.facts,
            resource=self.resource,
            env=self.env,
            parent=self,
            goal=goal,
            session_id=session_id,
        )
        self._append(
            "State",
            "delegation.started",
            {"child": child.id, "agent": target, "goal": goal},
        )
        self.children.append(child)
        return child

    def _refuse_delegation(self, message: str) -> Refusal:
        refusal = Refusal("delegation-refused", message, None, DELEGATE_TASK)
        self._append("Error", "call.refused", {**refusal.to_dict(), "session": self.id})
        return refusal

    def skill(self, name: str, *, session_id: str | None = None) -> Session | Refusal:
        """Open a session of a skill: its private tools run only there, judged by this
        session's policy AND the skill's profile (the stricter decision wins; on a tie the
        skill's own rule is named), with this session's actor, task, approvals and evidence.
        `session_id` names the skill session (a random `ses-…` id otherwise).

        >>> # report = s.skill("report_writer", session_id="t7-report")
        """
        h = self.harness
        skill = h.spec.skills.get(name) or h.spec.skills.get(h.spec.qualified(name))
        if skill is None or (self.agent.skills and skill.name not in self.agent.skills):
            refusal = Refusal(
                "unknown-skill",
                f"the agent `{self.agent.name}` has no skill `{name}`",
                None,
                name,
            )
            self._append("Error", "call.refused", {**refusal.to_dict(), "session": self.id})
            return refusal
        if self.skill_def is not None:
            refusal = Refusal(
                "unknown-skill", "a skill session cannot open another skill", None, name
            )
            self._append("Error", "call.refused", {**refusal.to_dict(), "session": self.id})
            return refusal
        child = h._open(
            agent=self.agent,
            actor=self.actor,
            task=self.task,
            facts=self.facts,
            resource=self.resource,
            env=self.env,
            parent=self,
            skill=skill,
            session_id=session_id,
        )
        self._append("State", "skill.started", {"child": child.id, "skill": skill.name})
        self.children.append(child)
        return child

    # -- evidence -----------------------------------------------------------------------------

    def evidence(self) -> Evidence:
        """What was called, with what input hash, what came back and what it proves — for this
        session and its child and skill sessions, derived from the events."""
        return build_evidence(self.harness.store, self.id, self._descendants())

    def _descendants(self) -> list[str]:
        out: list[str] = []
        for child in self.children:
            out.append(child.id)
            out.extend(child._descendants())
        return out


def _user(actor: Mapping[str, Any]) -> str | None:
    user = actor.get("user")
    return user if isinstance(user, str) else None


def _who_of(by: Mapping[str, Any] | str | None) -> str | None:
    if by is None or isinstance(by, str):
        return by
    user = by.get("user")
    if isinstance(user, str) and user:
        return user
    role = by.get("role")
    return f"role:{role}" if isinstance(role, str) else None


def _has_side_effect(tool: Tool) -> bool:
    return bool(set(tool.effects) - {"read", "preview", "idempotent"})


def _now(h: Harness) -> str:
    return format_time(h.clock())


def facts_record(facts: Facts) -> dict[str, Any]:
    """A facts snapshot as JSON, for the log (`Facts.from_json` reads it back)."""
    return {
        "values": jsonable(facts.values),
        "connected": sorted(facts.connected),
        "running": sorted(facts.running),
        "mcp": {
            name: {
                "enabled": m.enabled,
                "connected": m.connected,
                "transport_valid": m.transport_valid,
                "disclaimer_accepted": m.disclaimer_accepted,
                "agent_access": m.agent_access,
                "discovered": jsonable(m.discovered),
                "registered": sorted(m.registered) if m.registered is not None else None,
            }
            for name, m in sorted(facts.mcp.items())
        },
    }
