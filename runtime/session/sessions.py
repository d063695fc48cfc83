"""Sessions: one run of an agent, and the path of every call it makes.

`expose` → `normalize` → `decide` → `request_approval` (the harness approves) → `invoke` →
(`complete` for accepted asynchronous work) → `evidence`. Each step is a method that returns a
value with its reasons and appends events to the session's stream. A session is recorded with
everything needed to judge its calls again (actor, task, facts, resource, env), so a harness in
another process picks it up from the log (`Harness.resume`). A planner session may `delegate`
one level deep; `skill` opens a session of a skill, whose private tools run only there, under
the parent's policy and the skill's profile (both must allow: the stricter decision wins).

`Session` holds a session's state and delegates: the stages of a call are
`runtime/session/calls.py`, completing and cancelling accepted work
`runtime/session/_completion.py`, delegation and skills `runtime/session/_delegation.py`, taking a
session up from the log `runtime/session/_restore.py`.

>>> # h = Harness(spec); s = h.session(agent="planner", actor={"user": "u-1", "role": "sre"})
>>> # call = s.normalize("change_create", "call-1", {...}); s.decide(call); s.invoke(call)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from ..exposure.ranker import QUERY_CAP, Exposure
from ..judge.availability import Availability, Facts, ToolAvailability, Who
from ..judge.history import FACTS_UPDATED, USER_SAID, Ledger, apply_fact_changes
from ..judge.normalize import (
    DELEGATE_TASK,
    PendingCall,
    Refusal,
    Validator,
    secret_call_id,
    thaw,
)
from ..judge.policy import CallContext, Decision
from ..log.events import (
    MCP_TOOLS_CHANGED,
    NewEvent,
    Secrets,
    call_refused,
    session_ended,
    session_started,
    short_text,
)
from ..model.canonical import Execution, jsonable
from ..model.ir import Agent, Fact, Field, Schema, Skill
from . import spans
from ._completion import cancel_action, complete_action
from ._delegation import delegate_to, open_skill
from ._restore import RAN, attach_requests, catch_up_session, take_up_edits
from .approvals import ApprovalGrant, ApprovalRequest
from .calls import (
    ainvoke_call,
    call_context,
    decide_call,
    invoke_call,
    judge_call,
    normalize_call,
)
from .evidence import Evidence, build_evidence
from .executors import (
    Result,
)
from .lifecycle import Action, ActionState
from .state import Judged, SessionState, not_pending

if TYPE_CHECKING:
    from .seams import HarnessSeam, SessionSeam

__all__ = [
    "FACT_EVENTS",
    "Session",
    "facts_record",
    "fold_facts",
    "replay_facts",
    "session_policies",
    "with_values",
]

_S = ActionState
_T = TypeVar("_T")


class Session:
    """One session of an agent (or of a skill, or a delegated child). Create it with
    `Harness.session`, `Session.delegate` or `Session.skill`."""

    def __init__(
        self,
        harness: HarnessSeam,
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
        # what policy reads is what the log records (`jsonable`: a UUID or bytes as its text,
        # a tuple as a list), so a decision here, in a harness that resumes the session and
        # in a replay of the log read the same values
        self.actor: Mapping[str, Any] = MappingProxyType(jsonable(dict(actor)))
        self.task: dict[str, Any] = jsonable(dict(task))
        self.facts = as_recorded(facts)
        self.resource: Mapping[str, Any] = MappingProxyType(jsonable(dict(resource)))
        self.env: Mapping[str, Any] = MappingProxyType(jsonable(dict(env)))
        self.parent = parent
        self.ledger: Ledger = parent.ledger if parent is not None else Ledger(harness.engine.terms)
        """Provenance and history, shared by the session family (a root and its children),
        read from the family's events before each decision."""
        self.ledger.add_stream(session_id)
        self.skill_def = skill
        self.goal = goal
        self.depth: int = 0 if parent is None else parent.depth + (0 if skill is not None else 1)
        self.children: list[Session] = []
        self.policies: tuple[str, ...] = session_policies(
            agent, skill, parent.policies if parent is not None else None
        )
        self.state = SessionState(session_id, touched=harness.clock())
        """What the session changes as its calls go through it (runtime/session/state.py)."""

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
        return self.state.surface_order

    def on_surface(self, tool_id: str) -> bool:
        """Whether `tool_id` is on the session's surface (`surface`), in constant time."""
        self._refresh_surface()
        return tool_id in self.state.surface

    def _refresh_surface(self) -> None:
        h = self.harness
        if self.state.surface_version == h.policy_version:
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
        self.state.surface_order = tuple(t for t in order if t != DELEGATE_TASK)
        self.state.surface = frozenset(self.state.surface_order)
        self.state.surface_version = h.policy_version

    def _append(self, kind: str, type_: str, payload: Mapping[str, Any]) -> None:
        self.harness.store.append(NewEvent(self.id, kind, type_, payload))

    def user_said(self, text: str, *, values: Any = None) -> None:
        """Record a user message (a `user.said` event holding the text whole, so a harness
        that resumes the session indexes it again): its values are from `user` (its tokens,
        and the spans of its words: docs/runtime.md, "Session-aware policy"). `values`: what
        the application extracted from it (names, amounts, dates: a JSON value), each scalar
        `from user` as a whole."""
        self.state.touched = self.harness.clock()
        if not isinstance(text, str):
            raise TypeError("a user message is a text")
        payload: dict[str, Any] = {"text": text}
        if values is not None:
            payload["values"] = jsonable(values)
        self._append("Text", USER_SAID, payload)

    def update_facts(self, values: Mapping[str, Any]) -> None:
        """Change declared facts by name (a `facts.updated` event, replayed on resume): the
        next decision and availability see them, and their values are from `trusted`. A name
        the spec does not declare is refused (`ValueError`, nothing recorded): a misspelt fact
        would otherwise leave the one meant as it was, and policy judging by it."""
        self.state.touched = self.harness.clock()
        if not isinstance(values, Mapping):
            raise TypeError("facts are given as a mapping of declared fact names to values")
        check_facts(values, self.harness.spec.facts)
        record = jsonable(dict(values))
        event = self.harness.store.append(
            NewEvent(self.id, "State", FACTS_UPDATED, {"values": record})
        )
        self.state.own_facts.add(event.position)
        self.facts = with_values(self.facts, record)

    def change_facts(self, changes: list[dict[str, Any]]) -> None:
        """Record what a call's `on_success` changed (`fact_changes`: values added to a list
        fact, or removed from it) as a `facts.updated` event holding the changes, not the
        facts whole, so that a fact grown one value at a time writes each value once."""
        self.state.touched = self.harness.clock()
        record = jsonable(changes)
        event = self.harness.store.append(
            NewEvent(self.id, "State", FACTS_UPDATED, {"changes": record})
        )
        self.state.own_facts.add(event.position)
        self.facts = with_values(self.facts, apply_fact_changes(self.facts.values, record))

    def refresh_facts(self) -> None:
        """Take up the facts as the log leaves them when another process changed them (an
        `on_success` or `update_facts` of a worker holding this session too): folded again
        from the session's stream, in log order, when a facts event this process did not
        append is past the last look (`SessionState.facts_at`). The session's catch-up calls it
        before each decision when another writer appended."""
        state = self.state
        found = self.harness.store.read(self.id, after=state.facts_at, flush=False)
        if not found:
            return
        foreign = any(e.type in FACT_EVENTS and e.position not in state.own_facts for e in found)
        state.facts_at = found[-1].position
        state.own_facts = {p for p in state.own_facts if p > state.facts_at}
        if not foreign:
            return
        events = self.harness.store.read(self.id, flush=False)
        started = next((e for e in events if e.type == "session.started"), None)
        snapshot = started.payload.get("facts") if started is not None else None
        self.facts = replay_facts(Facts.from_json(snapshot), events)

    def end(self, outcome: str = "completed") -> None:
        """Record the end of the session."""
        self.harness.store.append(session_ended(self.id, outcome=outcome))
        self.state.ended = True
        if self.parent is None and self.harness.release_after_s is not None:
            self.harness.release(self.id)  # a closed session needs no memory: it resumes

    # -- availability and exposure --------------------------------------------------------------

    def availability(self) -> Availability:
        """Every tool's availability under this session's facts, with reasons (computed once
        per facts snapshot and spec, like `tool_availability`)."""
        h = self.harness
        facts, version, found = self.state.snapshot
        if found is None or facts is not self.facts or version != h.policy_version:
            facts, version = self.facts, h.policy_version
            found = h.availability(facts, self._who())
            self.state.snapshot = (facts, version, found)
        return found

    def tool_availability(self, tool_id: str) -> ToolAvailability:
        """One tool's availability under this session's facts now (computed once per facts
        snapshot and spec; `Harness.resume(session_id, facts=…)` gives new facts)."""
        h = self.harness
        facts, version, known = self.state.availability
        if facts is not self.facts or version != h.policy_version:
            facts, known = self.facts, {}
            self.state.availability = (facts, h.policy_version, known)
        found = known.get(tool_id)
        if found is None:
            ctx = h.checker.context(facts, self._who())
            found = known[tool_id] = h.checker.tool(h.spec.tools[tool_id], facts, ctx)
        return found

    def _who(self) -> Who:
        """Whom this session's availability is judged for: its actor, task, resource and
        environment (a `requires` may read them beside the facts)."""
        return Who(self.actor, self.task, self.resource, self.env)

    def expose(self, query: str, *, packs: tuple[str, ...] | list[str] = ()) -> Exposure:
        """The tools the planner sees this turn: the surface ∩ available, ranked when more than
        the surface's `limit` (language.md §5), with a trace recorded as a `tools.exposed`
        event.

        >>> # s.expose("deploy the change to staging").tools
        """
        if not isinstance(query, str):
            raise TypeError(f"`expose` takes the request's text, not a {type(query).__name__}")
        if spans.tracer is not None:
            return spans.expose(self, tuple(packs), lambda: self._expose(query, packs))
        return self._expose(query, packs)

    def _expose(self, query: str, packs: tuple[str, ...] | list[str]) -> Exposure:
        h = self.harness
        avail = self.availability()
        surface = None
        if self.skill_def is None and self.agent.surface:
            surface = h.spec.surfaces.get(self.agent.surface)
        exposure = h.exposure_index().expose(
            self.surface, query, available=avail, surface=surface, packs=tuple(packs)
        )
        seen = Secrets.from_texts(self.state.secret_texts)
        trace = seen.scrub(exposure.trace.to_dict())  # plain JSON data already
        # the log keeps what ranking read, cut after the secrets are withheld: a secret across
        # the cut is never half kept
        logged = seen.text(query)[:QUERY_CAP]
        trace["query"] = logged
        self._append(
            "Tool",
            "tools.exposed",
            {
                "query": logged,
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
        self.state.touched = self.harness.clock()
        if spans.tracer is not None:
            return spans.normalize(
                self,
                tool,
                tool_call_id,
                lambda: self._normalize(tool, tool_call_id, args, execution),
            )
        return self._normalize(tool, tool_call_id, args, execution)

    def _normalize(
        self,
        tool: str,
        tool_call_id: str,
        args: Mapping[str, Any] | None,
        execution: Execution | None,
    ) -> PendingCall | Refusal:
        result = normalize_call(self, tool, tool_call_id, args, execution)
        if isinstance(result, Refusal):
            self.harness.store.append(call_refused(self.id, result.to_dict()))
            return result
        spec_tool = self.harness.spec.tools[result.tool_id]
        secrets = Secrets.of_call(spec_tool, result.args, result.execution)
        if secrets:
            refused = secret_call_id(result, secrets)
            if refused is not None:
                self.harness.store.append(call_refused(self.id, refused.to_dict()))
                return refused
        if result.key not in self.state.pending:
            catch_up_session(self)  # the call may be recorded already, by another process
        with self.state.lock:
            known = self.state.pending.get(result.key)
            if known is not None:
                return known
            self.state.pending[result.key] = result
            restored = self.state.actions.get(result.key)
            if secrets:
                self.state.secret_texts.update(secrets.values)
        if restored is not None:
            # an action restored from the log whose call could not be rebuilt (its secret
            # values are never stored): the same tool, tool_call_id and input hash is that call
            restored.secrets = secrets
            attach_requests(self, result)
            return result
        action = Action.request(
            self.harness.store,
            self.id,
            spec_tool,
            tool_call_id,
            # the frozen arguments serve as they are when their canonical JSON is known
            result.args if result.args_json is not None else thaw(result.args),
            execution=result.execution,
            digest=result.input_hash,
            args_json=result.args_json,
            agent=self.agent.name,
            skill=self.skill_name,
            actor=user if type(user := self.actor.get("user")) is str else jsonable(user),
            # nothing acts on a call before its decision: both ride the commit that records
            # it running (or the decision's own, when it stops the call)
            defer=True,
            then=_S.VALIDATED,
            # a policy that reads the session takes the call in hand, uncommitted
            hold=self.ledger.hold if self.ledger.terms.read else None,
        )
        self._hold(result.key, action)
        self.state.fresh = result
        return result

    # -- decide -------------------------------------------------------------------------------

    def context(self, pending: PendingCall) -> CallContext:
        """The call as policy sees it: the session's actor, task, facts, resource and env."""
        return call_context(self, pending)

    def judge(self, pending: PendingCall) -> tuple[Decision, ApprovalGrant | None]:
        """Decide without recording: the decision of the session's policies, and the grant that
        authorises it when it is an ASK (pure; `decide` records it).

        In a skill session the parent's policy and the skill's profile both judge the call
        (language.md §9): DENY beats ASK beats ALLOW across them. When they agree on the effect,
        the decision names the most specific rule: a rule before a default (a risk table), the
        skill's profile before the parent's policy. When both ASK, each ASK needs its own
        approval: the decision names the first one nobody has approved yet.
        """
        ruling = judge_call(self, pending)
        return ruling.decision, ruling.grant

    def decide(self, pending: PendingCall) -> Decision:
        """Judge a frozen call under the agent's policy (and a skill's profile) and record a
        `decision` event with a decision id and the spec's content hash as policy version.

        DENY beats ASK beats ALLOW. An ASK whose grant matches (see `approvals`) authorises
        the call; the returned decision stays the policy's own (its `effect` is still `ask`).
        A decision that authorises the call is committed with the call's RUNNING transition,
        before its executor starts (or with any earlier append or read, or `store.flush()`);
        one that stops it is committed before `decide` returns.
        """
        if spans.tracer is None:  # one call fewer on the way of every decision
            return decide_call(self, pending)
        return decide_session(self, pending, commit=True)

    def action_state(self, pending: PendingCall) -> ActionState | None:
        """The lifecycle state of a normalized call."""
        action = self.state.actions.get(pending.key)
        return action.state if action is not None else None

    # -- approvals ----------------------------------------------------------------------------

    def request_approval(
        self, pending: PendingCall, decision: Decision | None = None
    ) -> ApprovalRequest:
        """Ask for approval of an ASK decision: what, why, as whom, on what object, the
        expected impact, the arguments (secrets redacted), reversibility and the grant's
        scope. The harness answers it (`Harness.approve` / `Harness.deny`). Asked again about
        the same call while that request waits, it returns the same request."""
        self.state.own(pending, "request_approval")
        h = self.harness
        catch_up_session(self)
        action = self.state.actions.get(pending.key)
        if action is not None and self.ran(pending.key):
            return self._asked_before(pending, action)
        judged = self.state.judged.get(pending.key)
        try:
            if decision is None:
                if judged is None:
                    # the decision is committed with the request, in one transaction
                    decide_session(self, pending, commit=False)
                    judged = self.state.judged.get(pending.key)
                    if judged is None:  # it ran in another process meanwhile
                        assert action is not None
                        return self._asked_before(pending, action)
                decision = judged.decision
            if decision.effect != "ask":
                raise ValueError(f"only an ASK decision needs approval, not `{decision.effect}`")
            known = h.approvals.asked(self.id, pending, decision.rule, decision.policy)
            if known is not None:
                return known  # asked already and still waiting: one request per call and rule
            h._record_preview(self.id, pending)  # what the call would do, shown with the request
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
        finally:
            h.store.flush()  # committed already, unless the request was refused

    # -- what the log records of a call (runtime/session/_restore.py) ------------------------

    def held_action(self, key: str) -> Action | None:
        """The action this session holds for a call (`PendingCall.key`)."""
        return self.state.actions.get(key)

    def recorded_result(self, key: str) -> Result | None:
        """The result recorded for a call, here or taken up from the log."""
        return self.state.results.get(key)

    def judgement_of(self, key: str) -> Judged | None:
        """The decision this session recorded for a call, if it decided it."""
        return self.state.judged.get(key)

    def ran(self, key: str) -> bool:
        """Whether the call ran (or runs), here or in another process, as far as this session
        knows: its action is past RUNNING or its result is recorded."""
        action = self.state.actions.get(key)
        return action is not None and (action.state in RAN or key in self.state.results)

    def runs_here(self, key: str) -> bool:
        """Whether this process runs the call now."""
        return key in self.state.running

    def take_up(self, key: str, action: Action, result: Result | None = None) -> None:
        """Hold `action` as the call's own, with its recorded result (taken up from the log)."""
        self._hold(key, action)
        if result is not None:
            self.state.results[key] = result

    def take_result(self, key: str, result: Result) -> None:
        """The call's result as the log records it, unless one is held already."""
        self.state.results.setdefault(key, result)

    def _asked_before(self, pending: PendingCall, action: Action) -> ApprovalRequest:
        """A call that ran needs no approval: the last request that asked about it (answered,
        in any process), never a new one."""
        asked = [
            r
            for r in list(self.harness.approvals.requests.values())
            if (r.session_id, r.tool_call_id, r.input_hash)
            == (self.id, pending.tool_call_id, pending.input_hash)
        ]
        if not asked:
            raise ValueError(
                f"the call `{pending.tool_call_id}` ran already ({action.state.value}): it "
                "needs no approval"
            )
        return max(asked, key=lambda r: r.requested_at)

    def record_denial(
        self,
        pending: PendingCall | ApprovalRequest,
        by: str | None,
        reason: str | None,
        *,
        answer: Callable[[Sequence[NewEvent]], _T] | None = None,
    ) -> _T | None:
        """A person's denial as a task fact (`task.denials`) and a `task.fact` event; the
        action is cancelled. `pending` is the call, or the request that asked for it.
        `answer` appends the events with the request's answer (`Harness.deny`), so that no
        reader, in any process, sees the request denied and its call still waiting; what it
        returns is returned."""
        entry = {
            "tool_id": pending.tool_id,
            "tool_call_id": pending.tool_call_id,
            "input_hash": pending.input_hash,
            "by": by,
            "reason": reason,
        }
        events = [
            NewEvent(
                self.id,
                "State",
                "task.fact",
                {"task_id": self.task_id, "fact": "denied", "value": entry},
            )
        ]
        action = self.state.actions.get(f"{pending.tool_call_id}:{pending.input_hash}")
        target = None
        if action is not None and not action.terminal:
            target, cancelled = action.move(
                ActionState.CANCELLED, reason=reason or "denied by a person"
            )
            events.append(cancelled)
        answered = None
        if answer is None:
            self.harness.store.append_many(events)
        else:
            answered = answer(events)
        self.task["denials"] = [*(self.task.get("denials") or []), entry]
        if action is not None:
            action.moved(target)
        return answered

    def cancel_expired(self, request: ApprovalRequest) -> None:
        """Cancel the call of a request that expired without an answer (its action ends
        `cancelled`; invoking it returns a not-run result with `error_category` `expired`)."""
        action = self.state.actions.get(f"{request.tool_call_id}:{request.input_hash}")
        if action is not None and not action.terminal:
            action.cancel(f"the approval request `{request.request_id}` expired")

    # -- invoke -------------------------------------------------------------------------------

    def invoke(self, pending: PendingCall) -> Result:
        """Run an authorised call (ALLOW, or ASK with a matching grant) with its executor and
        record the `Result`. Invoking the same pending call again returns the recorded result:
        it never runs twice (the idempotency key is `tool_call_id` + `input_hash`). A call that
        may not run returns a result with `ran=False` and says why."""
        self.state.touched = self.harness.clock()
        if not isinstance(pending, PendingCall):
            raise not_pending("invoke", pending)
        if spans.tracer is not None:
            return spans.invoke(self, pending, lambda: invoke_call(self, pending))
        return invoke_call(self, pending)

    async def ainvoke(self, pending: PendingCall) -> Result:
        """`invoke` for asyncio: async executors run on the running loop, sync ones in a
        thread; concurrent calls with the same key share one run."""
        self.state.touched = self.harness.clock()
        if not isinstance(pending, PendingCall):
            raise not_pending("ainvoke", pending)
        if spans.tracer is not None:
            return await spans.ainvoke(self, pending, lambda: ainvoke_call(self, pending))
        return await ainvoke_call(self, pending)

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
        return complete_action(self, action, data, error=error, by=by)

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
        return cancel_action(self, action, reason=reason, by=by)

    # -- the calls of this session ----------------------------------------------------------

    def call(self, tool_call_id: str) -> PendingCall | None:
        """The frozen call with this tool_call_id (the latest, when the model reused the id
        with other arguments), normalized here or restored from the log. A call an operator
        approved with edits is replaced by the edited one (`Harness.approve_with_edits`)."""
        self.harness.catch_up()  # an operator may have edited it, in any process
        take_up_edits(self, tool_call_id)
        found = None
        superseded = self.harness.projections.superseded
        for pending in list(self.state.pending.values()):
            if (
                pending.tool_call_id == tool_call_id
                and f"{self.id}:{pending.key}" not in superseded
            ):
                found = pending
        return found

    def calls(self) -> tuple[PendingCall, ...]:
        """Every frozen call of this session, in the order they were made or restored."""
        return tuple(self.state.pending.values())

    def action_id(self, pending: PendingCall) -> str | None:
        """The `action_id` of a normalized call (for `Harness.complete` / `cancel`)."""
        action = self.state.actions.get(pending.key)
        return action.action_id if action is not None else None

    def _hold(self, key: str, action: Action) -> None:
        self.state.hold(key, action)
        self.harness._held_by(action.action_id, self)  # `Harness.complete` finds it

    # -- restart ----------------------------------------------------------------------------

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
        return _opened(delegate_to(self, goal, agent=agent, session_id=session_id))

    def skill(self, name: str, *, session_id: str | None = None) -> Session | Refusal:
        """Open a session of a skill: its private tools run only there, judged by this
        session's policy AND the skill's profile (the stricter decision wins; on a tie the
        skill's own rule is named), with this session's actor, task, approvals and evidence.
        `session_id` names the skill session (a random `ses-…` id otherwise).

        >>> # report = s.skill("report_writer", session_id="t7-report")
        """
        return _opened(open_skill(self, name, session_id=session_id))

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


def _opened(found: SessionSeam | Refusal) -> Session | Refusal:
    """A child session `Harness` opened (always a `Session`: the seam names it by its
    Protocol), or the refusal."""
    assert isinstance(found, Session | Refusal), found
    return found


def start_session(s: Session, *, fresh: bool = False) -> None:
    """Record the session's start; `fresh`: only on a stream nothing was written to yet
    (`ConcurrencyError` otherwise: an id its caller chose may be taken)."""
    extra: dict[str, Any] = {
        "actor": jsonable(s.actor),
        "task": jsonable(s.task),
        "policy_version": s.harness.policy_version,
        "policies": list(s.policies),
        # what policy reads, so a harness in another process judges this session's calls
        # again exactly as this one would (`Harness.resume`)
        "facts": facts_record(s.facts),
        "resource": jsonable(s.resource),
        "env": jsonable(s.env),
    }
    if s.parent is not None:
        extra["parent"] = s.parent.id
    if s.skill_def is not None:
        extra["skill"] = s.skill_def.name
    if s.goal is not None:
        extra["goal"] = s.goal
    started = s.harness.store.append(
        session_started(s.id, agent=s.agent.name, **extra),
        expected_seq=0 if fresh else None,
    )
    s.state.facts_at = started.position


def decide_session(s: Session, pending: PendingCall, *, commit: bool) -> Decision:
    """`Session.decide`, traced when tracing is on; `commit=False` leaves a decision that stops
    the call held too, for a caller that commits it with what it appends next
    (`request_approval`, `Harness.approve`)."""
    if spans.tracer is not None:
        return spans.decide(s, pending, lambda: decide_call(s, pending, commit=commit))
    return decide_call(s, pending, commit=commit)


FACTS_KINDS = "a `Facts` or a mapping of declared fact names to values"
"""What a session's or a run's facts are given as."""


def need_kind(
    owner: str, what: str, value: Any, allowed: Any, kinds: str, *, required: bool = False
) -> None:
    """Raise `TypeError` unless `value` (None aside, unless `required`) is of the `allowed`
    types: `owner`'s `what` takes `kinds`, said so instead of what failing on it deeper down
    would say."""
    if value is None and not required:
        return
    if not isinstance(value, allowed):
        shown = "None" if value is None else f"a {type(value).__name__}"
        raise TypeError(f"{owner}'s {what}: {kinds}, not {shown}")


def check_facts(values: Mapping[Any, Any], declared: Mapping[str, Fact]) -> None:
    """Raise `ValueError` unless each of `values` is of a fact the spec declares, of its type
    as the log records it (None: absent, as a fact left out). A misspelt fact leaves the one
    meant as it was, or absent; a value of another type (`"yes"` for a `bool`) compares
    unequal to every value of the type, so a rule that tests it for `true` reads it as
    false."""
    unknown = [k for k in values if not isinstance(k, str) or k not in declared]
    if unknown:
        raise ValueError(not_declared(unknown[0], declared))
    for name, value in values.items():
        # as the log records it, which is what policy reads (a `Path` as its text)
        errors = _fact_check(declared[name]).errors({name: jsonable(value)})
        if errors:
            path, message = errors[0]
            where = "" if path == f"$.{name}" else f" (at `{path}`)"
            raise ValueError(f"the fact `{name}` is not of its declared type: {message}{where}")


_FACT_CHECKS: dict[int, tuple[Fact, Validator]] = {}
"""Each declared fact's check, by the fact (a spec's `Fact`, kept alive beside it)."""


def _fact_check(fact: Fact) -> Validator:
    """A declared fact's type as a one-field schema check (None allowed: absent), built once
    per fact rather than at every session opened or fact updated."""
    known = _FACT_CHECKS.get(id(fact))
    if known is not None and known[0] is fact:
        return known[1]
    field = Field(name=fact.name, type=fact.type.model_copy(update={"optional": True}))
    check = Validator(Schema(fields=(field,)))
    if len(_FACT_CHECKS) >= 1024:  # specs loaded again and again: keep the newest
        _FACT_CHECKS.clear()
    _FACT_CHECKS[id(fact)] = (fact, check)
    return check


def not_declared(name: Any, declared: Mapping[str, Any]) -> str:
    """Why `name` is not a fact to give a session, with the closest declared name."""
    import difflib

    if not isinstance(name, str):
        return f"a fact is named by text, not by a {type(name).__name__}"
    close = difflib.get_close_matches(name, list(declared), n=1)
    hint = f"; did you mean `{close[0]}`?" if close else ""
    known = ", ".join(f"`{n}`" for n in sorted(declared)) or "none"
    return f"`{short_text(name, 80)}` is not a declared fact (declared: {known}){hint}"


def with_values(facts: Facts, values: Mapping[str, Any]) -> Facts:
    """A facts snapshot with some declared facts changed."""
    return Facts({**facts.values, **values}, facts.connected, facts.running, facts.mcp)


def session_policies(
    agent: Agent, skill: Skill | None, parent_policies: tuple[str, ...] | None
) -> tuple[str, ...]:
    """The policies that judge a session's calls: its agent's policy; in a skill session the
    parent session's policies, then the skill's profile (the most specific last)."""
    policies: list[str] = []
    if parent_policies is not None and skill is not None:
        policies.extend(parent_policies)
    elif agent.policy:
        policies.append(agent.policy)
    if skill is not None and skill.profile:
        policies.append(skill.profile)
    return tuple(policies)


def replay_facts(facts: Facts, events: list[Any]) -> Facts:
    """The facts a session's log leaves: its snapshot, then each `facts.updated` in order
    (a `session.resumed` with facts replaces the snapshot)."""
    for event in events:
        facts = fold_facts(facts, event.type, event.payload)
    return facts


FACT_EVENTS = frozenset({FACTS_UPDATED, "session.resumed", MCP_TOOLS_CHANGED})
"""The events of a session's stream that change its facts (`fold_facts`)."""


def fold_facts(facts: Facts, type_: str, payload: Mapping[str, Any]) -> Facts:
    """The facts after one event of the session's stream: a `facts.updated` changes some
    values, a `session.resumed` with facts replaces the snapshot, an `mcp.tools_changed`
    replaces that server's state (runtime/integrations/mcp_client.py), any other leaves them."""
    if type_ == FACTS_UPDATED:
        values = payload.get("values")
        if isinstance(values, Mapping):
            return with_values(facts, values)
        changes = payload.get("changes")
        if isinstance(changes, list):  # what an `on_success` changed (`Session.change_facts`)
            return with_values(facts, apply_fact_changes(facts.values, changes))
    elif type_ == "session.resumed" and isinstance(payload.get("facts"), Mapping):
        return Facts.from_json(payload["facts"])
    elif type_ == MCP_TOOLS_CHANGED and isinstance(payload.get("state"), Mapping):
        server = payload["server"]
        state = Facts.from_json({"mcp": {server: payload["state"]}}).mcp[server]
        return Facts(facts.values, facts.connected, facts.running, {**facts.mcp, server: state})
    return facts


def as_recorded(facts: Facts) -> Facts:
    """`facts` with their values as the log records them (`facts_record`)."""
    values = jsonable(facts.values)
    if values == facts.values and all(type(v) is type(values[k]) for k, v in facts.values.items()):
        return facts
    return Facts(values, facts.connected, facts.running, facts.mcp)


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
