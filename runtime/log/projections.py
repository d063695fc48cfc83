"""Projections: current views (calls, approvals, grants, sessions) folded from the event log.

A projection is never the source of truth: it can be thrown away and rebuilt from the events at
any time, and `catch_up` brings it forward from its last position, so it can be kept in memory
and refreshed cheaply.

>>> from harnessc.runtime.log.events import session_started
>>> from harnessc.runtime.log.store import MemoryStore
>>> store = MemoryStore()
>>> _ = store.append(session_started("s-1", agent="planner"))
>>> Projections.rebuild(store.read()).sessions["s-1"].agent
'planner'
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .chain import ChainWatch
from .events import Event, UnreadableEvent
from .store import EventStore

__all__ = [
    "ActionView",
    "ApprovalView",
    "CallView",
    "GrantView",
    "Projections",
    "SessionView",
]


@dataclass
class CallView:
    """One tool call: its latest lifecycle state and what decided it."""

    tool_call_id: str
    tool_id: str | None
    stream: str
    state: str
    input_hash: str | None = None
    decision_id: str | None = None
    policy_version: str | None = None
    effect: str | None = None
    position: int = 0
    """The position of the last event that changed this view."""
    history: list[tuple[str | None, str, int]] = field(default_factory=list)
    """`(from, to, position)` for every transition, in order."""
    diverged: dict[str, Any] | None = None
    """Shadow mode: the last `decision.diverged` payload of this call (the candidate spec
    decided it otherwise: `kind`, `active`, `candidate`), or None."""


@dataclass
class ActionView:
    """One action, by its `action_id`: enough to pick it up again in another process — the
    frozen call as recorded (arguments with secrets redacted, execution parameters with env
    values redacted), its state, the external handle and the last recorded result."""

    action_id: str
    stream: str
    tool_call_id: str
    tool_id: str
    tool_version: int | None
    input_hash: str | None
    args: dict[str, Any] | None
    execution: dict[str, Any] | None
    state: str
    handle: str | None = None
    result: dict[str, Any] | None = None
    position: int = 0
    decision_id: str | None = None
    """The decision that let it run (from its RUNNING transition), once it ran."""
    lease_until: str | None = None
    """While RUNNING: where the lease of the process that runs it ends (`LEASE_GRACE_MS`)."""


@dataclass
class ApprovalView:
    approval_id: str
    tool_call_id: str | None
    tool_id: str | None
    input_hash: str | None
    approvers: list[Any]
    status: str = "pending"
    """`pending`, `approved`, `rejected`, `expired` or `withdrawn`."""
    by: str | None = None
    stream: str = ""
    position: int = 0
    requested: dict[str, Any] = field(default_factory=dict)
    """The `approval.requested` payload: what, why, as whom, on what, impact, scope."""
    requested_at: str | None = None


@dataclass
class GrantView:
    grant_id: str
    scope: str
    tool_id: str
    tool_call_id: str | None
    input_hash: str | None
    task_id: str | None
    expires_at: str
    status: str = "active"
    """`active`, `used` (a `once` grant after its call) or `revoked`."""
    stream: str = ""
    position: int = 0
    issued: dict[str, Any] = field(default_factory=dict)
    """The `grant.issued` payload (rule, policy, selector and condition of a class grant)."""

    def active_at(self, now: datetime) -> bool:
        """Neither used nor revoked, and not expired at `now` (timezone-aware)."""
        return self.status == "active" and now < datetime.fromisoformat(self.expires_at)


@dataclass
class SessionView:
    session_id: str
    agent: str | None = None
    status: str = "open"
    outcome: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    events: int = 0
    position: int = 0
    started: dict[str, Any] = field(default_factory=dict)
    """The `session.started` payload (actor, task, facts, resource, env, parent, skill), with
    the facts of the last `session.resumed` that replaced them."""
    denials: list[dict[str, Any]] = field(default_factory=list)
    """The task facts `denied` recorded in this session, in order."""


@dataclass
class Projections:
    """All views at once, folded in one pass; `position` is the last event applied."""

    calls: dict[str, CallView] = field(default_factory=dict)
    approvals: dict[str, ApprovalView] = field(default_factory=dict)
    grants: dict[str, GrantView] = field(default_factory=dict)
    sessions: dict[str, SessionView] = field(default_factory=dict)
    actions: dict[str, ActionView] = field(default_factory=dict)
    """By `action_id` (events recorded before action ids existed are only in `calls`)."""
    touched: list[tuple[str, str]] = field(default_factory=list, repr=False, compare=False)
    """Each approval or grant view created or changed, as ("approval" | "grant", id), in
    order: a reader that took over every view once reads only what was touched since
    (`Approvals.restore`)."""
    by_stream: dict[str, list[ActionView]] = field(default_factory=dict, repr=False, compare=False)
    """The same actions by session (`actions_of`): a session catching up reads its own, not
    every action of the log."""
    superseded: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The `call.superseded` payloads by `<session>:<tool_call_id>:<input_hash>` of the
    original call (an operator approved it with edits: it never runs)."""
    position: int = 0

    def actions_of(self, stream: str) -> list[ActionView]:
        """The actions of one session, in the order they were requested."""
        return self.by_stream.get(stream, [])

    @classmethod
    def rebuild(cls, events: Iterable[Event]) -> Projections:
        views = cls()
        for event in events:
            views.apply(event)
        return views

    def catch_up(
        self,
        store: EventStore,
        *,
        batch: int = 1000,
        watch: ChainWatch | None = None,
        unreadable: list[UnreadableEvent] | None = None,
    ) -> int:
        """Apply every event after `position`; returns how many were applied. With `watch`,
        each page is vouched for (`ChainWatch.take`) before any of it is applied. With
        `unreadable` (a forensic reader), an event that cannot be folded is added to it and
        passed over instead of raising."""
        applied = 0
        while True:
            page = store.read(after=self.position, limit=batch)
            if watch is not None:
                watch.take(store, page, self.position)
            for event in page:
                if unreadable is None:
                    self.apply(event)
                    continue
                try:
                    self.apply(event)
                except UnreadableEvent as error:
                    unreadable.append(error)
            applied += len(page)
            if len(page) < batch:
                return applied

    def apply(self, event: Event) -> None:
        if event.position <= self.position:
            return  # already folded: catching up twice is harmless
        self.position = event.position
        session = self.sessions.get(event.stream)
        if session is None:
            session = self.sessions[event.stream] = SessionView(event.stream)
        session.events += 1
        session.position = event.position
        handler = _HANDLERS.get(event.type)
        if handler is not None:
            try:
                handler(self, event, event.payload)
            except (KeyError, TypeError, ValueError, AttributeError) as error:
                # a payload without the fields its type has (written by something else, or
                # changed under the log): say which event, never an internal error
                raise UnreadableEvent.of_shape(event.position, event.type, error) from None

    # -- handlers -----------------------------------------------------------------------------

    def _transition(self, event: Event, p: dict[str, Any]) -> None:
        call_id = p["tool_call_id"]
        call = self.calls.get(call_id)
        if call is None:
            call = self.calls[call_id] = CallView(
                call_id, p.get("tool_id"), event.stream, p["to"], p.get("input_hash")
            )
        call.state = p["to"]
        call.tool_id = call.tool_id or p.get("tool_id")
        call.input_hash = call.input_hash or p.get("input_hash")
        call.position = event.position
        call.history.append((p.get("from"), p["to"], event.position))
        action_id = p.get("action_id")
        if not action_id:
            return
        action = self.actions.get(action_id)
        if action is None:
            action = self.actions[action_id] = ActionView(
                action_id,
                event.stream,
                call_id,
                p["tool_id"],
                p.get("tool_version"),
                p.get("input_hash"),
                p.get("args"),
                p.get("execution"),
                p["to"],
            )
            self.by_stream.setdefault(event.stream, []).append(action)
        action.state = p["to"]
        action.position = event.position
        if p["to"] == "RUNNING":
            action.decision_id = p.get("decision_id")
            action.lease_until = p.get("lease_until")
        if p.get("handle"):
            action.handle = p["handle"]
        if isinstance(p.get("result"), dict):
            action.result = p["result"]

    def _decision(self, event: Event, p: dict[str, Any]) -> None:
        call_id = p["tool_call_id"]
        call = self.calls.get(call_id)
        if call is None:
            call = self.calls[call_id] = CallView(
                call_id, p.get("tool_id"), event.stream, "REQUESTED", p.get("input_hash")
            )
        call.decision_id = p["decision_id"]
        call.policy_version = p["policy_version"]
        call.effect = p.get("effect")
        call.position = event.position

    def _diverged(self, event: Event, p: dict[str, Any]) -> None:
        call = self.calls.get(p["tool_call_id"])
        if call is not None:
            call.diverged = dict(p)
            call.position = event.position

    def _approval_requested(self, event: Event, p: dict[str, Any]) -> None:
        self.approvals[p["approval_id"]] = ApprovalView(
            p["approval_id"],
            p.get("tool_call_id"),
            p.get("tool_id"),
            p.get("input_hash"),
            list(p.get("approvers") or []),
            stream=event.stream,
            position=event.position,
            requested=dict(p),
            requested_at=event.time,
        )
        self.touched.append(("approval", p["approval_id"]))

    def _approval_resolved(self, event: Event, p: dict[str, Any]) -> None:
        approval = self.approvals.get(p["approval_id"])
        if approval is not None and approval.status == "pending":
            approval.status = p["outcome"]
            approval.by = p.get("by")
            approval.position = event.position
            self.touched.append(("approval", approval.approval_id))

    def _grant_issued(self, event: Event, p: dict[str, Any]) -> None:
        self.grants[p["grant_id"]] = GrantView(
            p["grant_id"],
            p["scope"],
            p["tool_id"],
            p.get("tool_call_id"),
            p.get("input_hash"),
            p.get("task_id"),
            p["expires_at"],
            stream=event.stream,
            position=event.position,
            issued=dict(p),
        )
        self.touched.append(("grant", p["grant_id"]))

    def _grant_used(self, event: Event, p: dict[str, Any]) -> None:
        grant = self.grants.get(p["grant_id"])
        # only a `once` grant is spent by its use; task and class grants stay until they expire
        if grant is not None and grant.scope == "once" and grant.status == "active":
            grant.status = "used"
            grant.position = event.position
            self.touched.append(("grant", grant.grant_id))

    def _grant_spent(self, event: Event, p: dict[str, Any]) -> None:
        self._grant_used(event, p)

    def _call_superseded(self, event: Event, p: dict[str, Any]) -> None:
        key = f"{event.stream}:{p['tool_call_id']}:{p['input_hash']}"
        self.superseded[key] = {**p, "session_id": event.stream, "position": event.position}

    def _grant_revoked(self, event: Event, p: dict[str, Any]) -> None:
        grant = self.grants.get(p["grant_id"])
        if grant is not None:
            grant.status = "revoked"
            grant.position = event.position
            self.touched.append(("grant", grant.grant_id))

    def _session_started(self, event: Event, p: dict[str, Any]) -> None:
        session = self.sessions[event.stream]
        session.agent = p.get("agent")
        session.started_at = event.time
        session.started = dict(p)

    def _session_resumed(self, event: Event, p: dict[str, Any]) -> None:
        session = self.sessions[event.stream]
        if "facts" in p:
            session.started = {**session.started, "facts": p["facts"]}

    def _task_fact(self, event: Event, p: dict[str, Any]) -> None:
        if p.get("fact") == "denied" and isinstance(p.get("value"), dict):
            self.sessions[event.stream].denials.append(p["value"])

    def _session_ended(self, event: Event, p: dict[str, Any]) -> None:
        session = self.sessions[event.stream]
        session.status = "ended"
        session.outcome = p.get("outcome")
        session.ended_at = event.time


_HANDLERS = {
    "action.transition": Projections._transition,
    "decision": Projections._decision,
    "decision.diverged": Projections._diverged,
    "approval.requested": Projections._approval_requested,
    "approval.resolved": Projections._approval_resolved,
    "grant.issued": Projections._grant_issued,
    "grant.used": Projections._grant_used,
    "grant.spent": Projections._grant_spent,
    "grant.revoked": Projections._grant_revoked,
    "call.superseded": Projections._call_superseded,
    "session.started": Projections._session_started,
    "session.ended": Projections._session_ended,
    "session.resumed": Projections._session_resumed,
    "task.fact": Projections._task_fact,
}
