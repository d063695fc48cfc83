"""Sessions: one run of an agent, and the path of every call it makes.

`expose` → `normalize` → `decide` → `request_approval` (the harness approves) → `invoke` →
`evidence`. Each step is a method that returns a value with its reasons and appends events to
the session's stream. A planner session may `delegate` one level deep; `skill` opens a session
of a skill, whose private tools run only there, under the parent's policy and the skill's
profile (both must allow: the stricter decision wins).

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

from .approvals import ApprovalGrant, ApprovalRequest, selects
from .availability import Availability, Facts
from .canonical import Execution
from .events import NewEvent, decision, session_ended, session_started
from .evidence import Evidence, build_evidence
from .executors import ExecutorContext, Result, run_async, run_sync, timeout_of
from .exposure import Exposure
from .lifecycle import Action, ActionState
from .model import Agent, Skill, Spec, Surface, Tool
from .normalize import DELEGATE_TASK, PendingCall, Refusal, freeze, thaw
from .policy import CallContext, Decision

if TYPE_CHECKING:
    from .harness import Harness

__all__ = ["PUBLIC_KINDS", "Session", "surface_tools"]

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
    ) -> None:
        self.harness = harness
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
        self._lock = threading.Lock()
        self._surface_version: str | None = None
        self._surface: frozenset[str] = frozenset()
        self._surface_order: tuple[str, ...] = ()

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
            "actor": _jsonable(self.actor),
            "task": _jsonable(self.task),
            "policy_version": self.harness.policy_version,
            "policies": list(self.policies),
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
        trace = exposure.trace.to_dict()
        self._append(
            "Tool",
            "tools.exposed",
            {
                "query": query,
                "tools": list(exposure.tools),
                "rule": exposure.trace.rule,
                "unavailable": dict(exposure.trace.unavailable),
                "packs": list(packs),
                "trace": _jsonable(trace),
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
        spec_tool = self.harness.spec.tools[result.tool_id]
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
            actor=_jsonable(self.actor.get("user")),
        )
        action.transition(_S.VALIDATED)
        self._actions[result.key] = action
        return result

    def _normalize(
        self,
        name: str,
        tool_call_id: str,
        args: Mapping[str, Any] | None,
        execution: Execution | None,
    ) -> PendingCall | Refusal:
        h = self.harness
        if not isinstance(tool_call_id, str) or not tool_call_id:
            return Refusal("invalid-args", "a call needs a non-empty `tool_call_id`", None, name)
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
            what = {
                "primitive": "is internal (primitive) and never on a surface",
            }.get(tool.kind, f"is not on the surface of the agent `{self.agent.name}`")
            return Refusal("not-on-surface", f"`{tool.id}` {what}", None, name, tool_call_id)
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
        """Decide without recording: the strictest decision of the session's policies, and the
        grant that authorises it when it is an ASK (pure; `decide` records it)."""
        h = self.harness
        ctx = self.context(pending)
        best: Decision | None = None
        for name in self.policies:
            d = h.engine.decider(name).decide(ctx)
            if best is None or _STRENGTH[d.effect] > _STRENGTH[best.effect]:
                best = d
        if best is None:
            best = Decision(
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
        grant = None
        if best.effect == "ask":
            grant = h.approvals.find(
                pending,
                rule=best.rule,
                policy=best.policy,
                task_id=self.task_id,
                tool=h.spec.tools.get(pending.tool_id),
                context=ctx,
                facts=self.facts.values,
            )
        return best, grant

    def decide(self, pending: PendingCall) -> Decision:
        """Judge a frozen call under the agent's policy (and a skill's profile) and record a
        `decision` event with a decision id and the spec's content hash as policy version.

        DENY beats ASK beats ALLOW. An ASK whose grant matches (see `approvals`) authorises
        the call; the returned decision stays the policy's own (its `effect` is still `ask`).
        """
        self._own(pending)
        d, grant = self.judge(pending)
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
        self._judged[pending.key] = _Judged(decision_id, d, grant, h.policy_version)
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

    def record_denial(self, pending: PendingCall, by: str | None, reason: str | None) -> None:
        """A person's denial as a task fact (`task.denials`) and a `task.fact` event; the
        action is cancelled."""
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
        action = self._actions.get(pending.key)
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
            or (judged.grant is not None and not judged.grant.active(now))
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

    def _not_run(
        self,
        pending: PendingCall,
        category: str,
        message: str,
        state: str,
        judged: _Judged | None,
    ) -> Result:
        return Result(
            tool_id=pending.tool_id,
            tool_call_id=pending.tool_call_id,
            input_hash=pending.input_hash,
            status="failure",
            data=None,
            observation=message,
            error=message,
            error_category=category,
            retryable=category == "waiting_approval",
            side_effect=False,
            executor=None,
            actor=_user(self.actor),
            started_at=None,
            finished_at=None,
            duration_ms=0.0,
            state=state,
            ran=False,
            decision_id=judged.decision_id if judged is not None else None,
        )

    def _prepare(self, pending: PendingCall) -> tuple[Any, ...] | Result:
        self._own(pending)
        recorded = self._results.get(pending.key)
        if recorded is not None:
            return recorded
        judged, refused = self._authorize(pending)
        if refused is not None:
            return refused
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
        if judged.grant is not None:
            h.approvals.use(judged.grant, self.id, pending.tool_call_id)
        action.transition(_S.RUNNING, executor=bound.name, decision_id=judged.decision_id)
        ctx = ExecutorContext(pending, self.id, self.actor, self.task_id, timeout_of(tool, pending))
        return tool, bound, ctx, judged, action

    def _record(
        self, pending: PendingCall, tool: Tool, judged: _Judged, action: Action, result: Result
    ) -> Result:
        result = replace(
            result,
            decision_id=judged.decision_id,
            grant_id=judged.grant.grant_id if judged.grant is not None else None,
        )
        action.transition(
            result.state,
            result=result.to_dict(tool.output),
            reason=result.error_category,
        )
        self._results[pending.key] = result
        return result

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
            result = run_sync(
                tool, pending, bound, ctx, self.harness.clock, self.harness.outputs.get(tool.id)
            )
            return self._record(pending, tool, judged, action, result)

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
        try:
            result = await run_async(
                tool, pending, bound, ctx, self.harness.clock, self.harness.outputs.get(tool.id)
            )
            result = self._record(pending, tool, judged, action, result)
            future.set_result(result)
            return result
        finally:
            self._inflight.pop(pending.key, None)

    def _key_lock(self, key: str) -> threading.Lock:
        with self._lock:
            lock = self._locks.get(key)
            if lock is None:
                lock = self._locks[key] = threading.Lock()
            return lock

    # -- delegation and skills ------------------------------------------------------------------

    def delegate(self, goal: str, *, agent: str | None = None) -> Session | Refusal:
        """Start a child session of a delegation target (one level deep): only a planner's own
        session may delegate; the child's surface never holds `delegate_task` and the child
        cannot delegate again. Its calls go through policy, approvals and evidence."""
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

    def skill(self, name: str) -> Session | Refusal:
        """Open a session of a skill: its private tools run only there, judged by this
        session's policy AND the skill's profile (the stricter decision wins), with this
        session's actor, task, approvals and evidence."""
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


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)
