"""Approvals and grants: what a person is asked, and exactly what their answer authorises.

An `ApprovalRequest` says what (tool and summary), why (the rule's reason), as whom (the actor),
on what object (resource and target), the expected impact (effects and risk), the arguments
(secrets redacted), reversibility and the scope of the grant that an approval would issue. An
approval issues an `ApprovalGrant` with a ttl, bound to the request it answers:

- `once` matches only the call that was asked about: the same session (for a workflow, the
  run's step), tool id, tool_call_id and input hash. It authorises one execution in total: the
  call that runs first spends it in the same transaction that records the use (a `grant.spent`
  claim on the grant's own stream, which only one writer can append), so two sessions, two
  threads or two processes sharing the store never both run on it. Call ids are not secrets, so
  another session that presents the same tool, call id and arguments is not covered.
- `task` matches calls of the same tool, asked by the same rule of the same policy, in any
  session whose task id is the grant's: the sessions of that task (a planner and the sessions it
  delegates to, whatever their actor) share it, and no session of another task does.
- `class` matches the calls the grant's selector and condition describe, asked by the same rule
  of the same policy, in any session of the harness (any actor, any task) until it expires: it
  is the standing approval of a class of calls, so write its condition narrowly.

A grant turns the winning ASK into ALLOW and never overrides a DENY: `ApprovalGrant.matches`
is only consulted for a call whose decision is ASK. Since the input hash covers the arguments
and every execution parameter (command, cwd, env, timeout, target), a `once` grant never
authorises another tool, other arguments, another tool_call_id or a changed execution.

A grant issued without judging the call again (`rule_bound`: the approver's process never held
the call's secret values, so it approved the request as recorded, under the rule that asked)
authorises the call only while that same rule of that same policy is the winning ASK, even at
scope `once`.

>>> from datetime import UTC, datetime, timedelta
>>> now = datetime(2026, 1, 1, tzinfo=UTC)
>>> g = ApprovalGrant("g-1", "once", "t", now + timedelta(minutes=5), tool_call_id="c-1",
...     input_hash="h", session_id="s-1")
>>> g.matches_exact("s-1", "t", "c-1", "h", now), g.matches_exact("s-2", "t", "c-1", "h", now)
(True, False)
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from ..judge.availability import condition_text
from ..judge.conditions import compile_conditions, roles_of
from ..judge.normalize import PendingCall, thaw
from ..judge.policy import tool_view
from ..log.events import (
    REDACTED,
    Clock,
    Event,
    NewEvent,
    Secrets,
    StoreError,
    approval_requested,
    approval_resolved,
    grant_issued,
    grant_revoked,
    grant_spent,
    grant_used,
    redact_args,
    short_text,
    spent_stream,
)
from ..log.store import ConcurrencyError, EventStore, TransitionRefused
from ..model.canonical import jsonable
from ..model.ir import Approver, Condition, Grant, Selector, Tool
from ..model.semantics import selects, value_eq

__all__ = [
    "DEFAULT_GRANT",
    "ApprovalError",
    "ApprovalGrant",
    "ApprovalOutcome",
    "ApprovalRequest",
    "Approvals",
    "expired_error",
    "expiry_text",
    "is_approver",
    "is_requester",
]

DEFAULT_GRANT = Grant(scope="once", ttl_ms=10 * 60_000)
"""The grant of an ASK that names none: this exact call, for ten minutes."""


class ApprovalError(Exception):
    """An approval that cannot be given or used: `code` is `unknown-request`, `not-pending`,
    `expired` (the request waited past its `expires` deadline), `not-an-approver`,
    `self-approval` (the requester may not approve their own call) or `grant-spent` (a `once`
    grant already authorised an execution)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def is_approver(approvers: tuple[Approver, ...], by: Mapping[str, Any]) -> bool:
    """Whether `by` (an actor: user, role, roles) is one of `approvers`: a role in its roles,
    or its user.

    >>> is_approver((Approver(kind="role", value="sre"),), {"role": "engineer", "roles": ["sre"]})
    True
    """
    roles = roles_of(by) or []
    for approver in approvers:
        if approver.kind == "role" and any(value_eq(approver.value, r) for r in roles):
            return True
        if approver.kind == "user" and value_eq(approver.value, by.get("user")):
            return True
    return False


def is_requester(requester: Mapping[str, Any], by: Mapping[str, Any]) -> bool:
    """Whether `by` may be the person who asked (`requester`), for separation of duties: the
    same `user`, or an approver without a `user`, whose difference cannot be shown.

    >>> is_requester({"user": "u-1"}, {"user": "u-1", "roles": ["ops"]})
    True
    >>> is_requester({"user": "u-1"}, {"user": "u-2"})
    False
    >>> is_requester({"user": "u-1"}, {"role": "ops"})
    True
    """
    approver = by.get("user")
    if not isinstance(approver, str) or not approver:
        return True
    return requester.get("user") == approver


def _view(tool: Tool, args: Mapping[str, Any] | None) -> dict[str, Any]:
    """`tool.*` of a pending call: its operation's when `args.op` names one."""
    op = (args or {}).get("op")
    return tool_view(tool, op if isinstance(op, str) else None)


@dataclass(frozen=True)
class ApprovalRequest:
    """What a person is asked to approve. `arguments` has secret fields redacted; `pending`
    is the frozen call itself (kept in memory, never shown). `expires_at` is the deadline for
    an answer (the request time plus the ASK's `expires`; None: it waits until answered)."""

    request_id: str
    session_id: str
    decision_id: str | None
    tool_id: str
    tool_call_id: str
    input_hash: str
    what: str
    why: str
    rule: str | None
    policy: str
    as_whom: Mapping[str, Any]
    on_what: Mapping[str, Any]
    impact: Mapping[str, Any]
    arguments: Mapping[str, Any]
    execution: Mapping[str, Any]
    reversibility: str
    scope: Mapping[str, Any]
    approvers: tuple[Approver, ...]
    requested_at: datetime
    task_id: str | None = None
    pending: PendingCall | None = field(default=None, repr=False, compare=False)
    status: str = "pending"
    expires_at: datetime | None = None
    grant: Grant | None = field(default=None, repr=False)
    """The grant the ASK declares, as the request recorded it (None in a log written before
    requests recorded it)."""

    def expired(self, now: datetime) -> bool:
        """Whether the request is pending past its deadline (a pure function of the clock:
        nothing is recorded; `Approvals.expire` records it)."""
        return self.status == "pending" and self.expires_at is not None and now >= self.expires_at

    def expires_in_ms(self, now: datetime) -> int | None:
        """Milliseconds left to answer (0 once past the deadline); None: it never expires."""
        if self.expires_at is None:
            return None
        return max(0, (self.expires_at - now) // timedelta(milliseconds=1))

    def to_dict(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "session_id": self.session_id,
            "decision_id": self.decision_id,
            "tool_id": self.tool_id,
            "tool_call_id": self.tool_call_id,
            "input_hash": self.input_hash,
            "what": self.what,
            "why": self.why,
            "rule": self.rule,
            "policy": self.policy,
            "as_whom": dict(self.as_whom),
            "on_what": dict(self.on_what),
            "impact": dict(self.impact),
            "arguments": dict(self.arguments),
            "execution": dict(self.execution),
            "reversibility": self.reversibility,
            "scope": dict(self.scope),
            "approvers": [{"kind": a.kind, "value": a.value} for a in self.approvers],
            "task_id": self.task_id,
            "status": self.status,
            "expires_at": self.expires_at.isoformat() if self.expires_at is not None else None,
        }


@dataclass(frozen=True)
class ApprovalGrant:
    """A grant issued by an approval, valid until `expires_at` (see the module docstring for
    what each scope matches)."""

    grant_id: str
    scope: str
    tool_id: str
    expires_at: datetime
    tool_call_id: str | None = None
    input_hash: str | None = None
    task_id: str | None = None
    rule: str | None = None
    policy: str | None = None
    selector: Selector | None = None
    condition: Condition | None = None
    approval_id: str | None = None
    by: str | None = None
    status: str = "active"
    check: Callable[..., bool] | None = field(default=None, repr=False, compare=False)
    session_id: str | None = None
    """The session (or workflow step) whose request the grant answers."""
    rule_bound: bool = False
    """Issued for the request as recorded, without judging the call again: it authorises the
    call only while the rule that asked (`rule`, `policy`) is the winning ASK."""

    def active(self, now: datetime) -> bool:
        return self.status == "active" and now < self.expires_at

    def matches_exact(
        self, session_id: str | None, tool_id: str, tool_call_id: str, digest: str, now: datetime
    ) -> bool:
        """A `once` grant's test: the call asked about (session, tool id, tool_call_id, input
        hash all equal), unexpired and unspent."""
        return (
            self.scope == "once"
            and self.active(now)
            and self.session_id == session_id
            and self.tool_id == tool_id
            and self.tool_call_id == tool_call_id
            and self.input_hash == digest
        )

    def matches(
        self,
        pending: PendingCall,
        *,
        rule: str | None,
        policy: str,
        task_id: str | None,
        now: datetime,
        tool: Tool | None = None,
        context: Any = None,
        facts: Mapping[str, Any] | None = None,
    ) -> bool:
        """Whether this grant authorises `pending`, whose decision is an ASK by `rule`."""
        if not self.active(now):
            return False
        if self.rule_bound and (self.rule != rule or self.policy != policy):
            return False  # approved as recorded: only under the rule that asked
        if self.scope == "once":
            return self.matches_exact(
                pending.session_id, pending.tool_id, pending.tool_call_id, pending.input_hash, now
            )
        if self.rule != rule or self.policy != policy:
            return False  # a grant stays inside the scope of the rule that asked
        if self.scope == "task":
            return (
                task_id is not None and self.task_id == task_id and self.tool_id == pending.tool_id
            )
        # class: the selector, then the condition, inside the rule's scope
        if tool is None:
            return False
        view = _view(tool, pending.args)
        if self.selector is not None and not selects(self.selector, tool, view):
            return False
        if self.check is not None:
            return bool(self.check(context, pending.args, view, facts or {}))
        return True

    def to_dict(self) -> dict[str, Any]:
        return {
            "grant_id": self.grant_id,
            "scope": self.scope,
            "tool_id": self.tool_id,
            "tool_call_id": self.tool_call_id,
            "input_hash": self.input_hash,
            "task_id": self.task_id,
            "rule": self.rule,
            "policy": self.policy,
            "selector": self.selector.text if self.selector else None,
            "condition": condition_text(self.condition) if self.condition else None,
            "expires_at": self.expires_at.isoformat(),
            "approval_id": self.approval_id,
            "by": self.by,
            "status": self.status,
            "session_id": self.session_id,
            "rule_bound": self.rule_bound,
        }


@dataclass(frozen=True)
class ApprovalOutcome:
    """The answer to `Harness.approve` / `Harness.deny`.

    `status`: `approved` (a grant was issued, or the call needs none any more), `denied` (the
    person said no), or `denied-by-policy` (the call was judged again and is now denied: no
    grant). `decision` is the re-judgement.
    """

    request: ApprovalRequest
    status: str
    grant: ApprovalGrant | None = None
    decision: Any = None
    reason: str | None = None
    call: PendingCall | None = None
    """`approve_with_edits`: the edited call that replaces the original (the agent invokes
    it; `Session.call(tool_call_id)` returns it too)."""


def answered_stream(request_id: str) -> str:
    """The stream of an approval request's single answer claim (`approval.answered`)."""
    return f"approval:{request_id}"


def _reversibility(tool: Tool, view: Mapping[str, Any]) -> str:
    effects = set(view["effects"])
    if effects <= {"read", "preview", "idempotent"}:
        return "read-only: nothing to reverse"
    if "reversible" in effects:
        return "reversible"
    return "irreversible: it cannot be undone by the harness"


class Approvals:
    """The approval requests and grants of one harness, every change recorded as events.

    Requests and grants live in memory for matching and in the store, which is the truth:
    `restore` rebuilds them from `projections.Projections` (the same events folded), so a
    harness in a new process answers the requests and honours the grants of an earlier one.
    """

    def __init__(self, store: EventStore, clock: Clock) -> None:
        self.store = store
        self.clock = clock
        self.requests: dict[str, ApprovalRequest] = {}
        self.grants: dict[str, ApprovalGrant] = {}
        self._asked: dict[tuple[Any, ...], str] = {}
        """The newest request for each (session, tool_call_id, input hash, rule, policy)."""
        self._by_call: dict[tuple[str, str, str], list[str]] = {}
        """Every request about each exact call, (session, tool, input hash), oldest first."""
        self._lock = threading.Lock()
        self._restored: tuple[Any, int] | None = None
        """`restore`'s last source and how far it read the source's `touched`."""

    # -- requests -----------------------------------------------------------------------------

    def asked(
        self, session_id: str, pending: PendingCall, rule: str | None, policy: str
    ) -> ApprovalRequest | None:
        """The request still waiting for an answer that asks about this exact call for this
        rule, if there is one: asking again returns it instead of a second request, which
        would stay pending after the first was answered and the call ran. A restored request
        gets the call (`attach`)."""
        key = (session_id, pending.tool_call_id, pending.input_hash, rule, policy)
        with self._lock:
            found = self.requests.get(self._asked.get(key, ""))
            if found is None or found.status != "pending" or found.expired(self.clock()):
                return None
            if found.pending is None:
                found = replace(found, pending=pending)
                self.requests[found.request_id] = found
            return found

    def request(
        self,
        *,
        session_id: str,
        pending: PendingCall,
        tool: Tool,
        decision: Any,
        decision_id: str | None,
        actor: Mapping[str, Any],
        resource: Mapping[str, Any],
        task_id: str | None,
    ) -> ApprovalRequest:
        """Persist a request for an ASK decision and return it; the one still pending for this
        call and rule when there is one (`asked`)."""
        known = self.asked(session_id, pending, decision.rule, decision.policy)
        if known is not None:
            return known
        view = _view(tool, pending.args)
        grant = decision.grant or DEFAULT_GRANT
        scope: dict[str, Any] = {
            "grant": grant.scope,
            "ttl_ms": grant.ttl_ms,
            "requester_may_approve": decision.requester_may_approve,
        }
        if grant.scope == "once":
            scope["covers"] = (
                "this exact call, once: this session, tool id, tool_call_id and input hash"
            )
        elif grant.scope == "task":
            scope["covers"] = (
                f"calls of `{tool.id}` asked by this rule in any session of task `{task_id}`"
            )
        else:
            what = grant.selector.text if grant.selector else tool.id
            cond = f" when {condition_text(grant.condition)}" if grant.condition else ""
            scope["covers"] = f"calls of `{what}`{cond} asked by this rule, in any session"
        requested_at = self.clock()
        expires_ms = getattr(decision, "expires_ms", None)
        expires_at = requested_at + timedelta(milliseconds=expires_ms) if expires_ms else None
        execution = {
            k: v for k, v in pending.execution.as_dict().items() if v is not None and k != "env"
        }
        if pending.execution.env is not None:
            execution["env"] = {k: REDACTED for k in sorted(pending.execution.env)}
        # a secret value repeated in a field that is not secret is scrubbed too
        args = Secrets.of_call(tool, pending.args, pending.execution).scrub(
            redact_args(tool, thaw(pending.args))
        )
        shown = ", ".join(f"{k}={short_text(v, 60)}" for k, v in args.items())
        req = ApprovalRequest(
            request_id="apr-" + uuid.uuid4().hex[:16],
            session_id=session_id,
            decision_id=decision_id,
            tool_id=tool.id,
            tool_call_id=pending.tool_call_id,
            input_hash=pending.input_hash,
            what=f"`{tool.id}`({shown})" + (f": {tool.summary}" if tool.summary else ""),
            why=decision.reason or "the policy asks for approval of this call",
            rule=decision.rule,
            policy=decision.policy,
            as_whom={k: actor[k] for k in ("user", "role", "roles", "tenant") if k in actor},
            on_what={"resource": dict(resource), "target": pending.execution.target},
            impact={"effects": list(view["effects"]), "risk": view["risk"]},
            arguments=args,
            execution=execution,
            reversibility=_reversibility(tool, view),
            scope=scope,
            approvers=tuple(decision.approvers),
            requested_at=requested_at,
            task_id=task_id,
            pending=pending,
            expires_at=expires_at,
            grant=grant,
        )
        # the deadline is recorded, not recomputed: every process folding the log sees it
        deadline = {} if expires_at is None else {"expires_at": expires_at.isoformat()}
        self.store.append(
            approval_requested(
                session_id,
                approval_id=req.request_id,
                tool_id=req.tool_id,
                tool_call_id=req.tool_call_id,
                input_hash=req.input_hash,
                approvers=[{"kind": a.kind, "value": a.value} for a in req.approvers],
                decision_id=decision_id,
                what=req.what,
                why=req.why,
                rule=req.rule,
                policy=req.policy,
                as_whom=jsonable(req.as_whom),
                on_what=jsonable(req.on_what),
                impact=req.impact,
                arguments=jsonable(args),
                execution=jsonable(execution),
                reversibility=req.reversibility,
                scope=scope,
                task_id=task_id,
                # the grant as declared: an approver without the call's secret values issues
                # it from the request (`rule_bound`)
                grant=grant.model_dump(mode="json", exclude_none=True),
                **deadline,
            )
        )
        with self._lock:
            self.requests[req.request_id] = req
            self._asked[_asked_key(req)] = req.request_id
            self._index(req)
        return req

    def _index(self, req: ApprovalRequest) -> None:
        self._by_call.setdefault((req.session_id, req.tool_id, req.input_hash), []).append(
            req.request_id
        )

    def about(self, session_id: str, tool_id: str, input_hash: str) -> list[ApprovalRequest]:
        """Every request, as it stands now, about one exact call of a session (any tool call
        id, rule or policy version), oldest first: what an MCP gateway matches a call sent
        again against, without walking every request the log holds."""
        with self._lock:
            ids = self._by_call.get((session_id, tool_id, input_hash), ())
            return [self.requests[i] for i in ids if i in self.requests]

    def get(self, request_id: str) -> ApprovalRequest:
        req = self.requests.get(request_id)
        if req is None:
            raise ApprovalError("unknown-request", f"no approval request `{request_id}`")
        return req

    def resolve(
        self,
        request_id: str,
        outcome: str,
        by: str | None,
        *,
        with_events: Sequence[NewEvent] = (),
        **extra: Any,
    ) -> ApprovalRequest:
        """Mark a pending request resolved (`approved`, `rejected`, `expired`, `withdrawn`,
        `superseded`). The answer is claimed on the request's own stream (`approval:<id>`),
        appended only while that stream is empty: when two operators (threads, processes on
        one store) answer at once, exactly one wins; the other gets `not-pending`. An answer
        after the request's deadline records its expiry instead and raises `expired`.
        `with_events` (the grant the answer issues, an edit's `call.superseded`) are appended
        in the answer's own transaction: committed only with it, so no reader sees the answer
        without them."""
        req = self.get(request_id)
        claim = NewEvent(
            answered_stream(request_id),
            "Approval",
            "approval.answered",
            {"approval_id": request_id, "outcome": outcome, "by": by},
        )
        resolved = approval_resolved(
            req.session_id, approval_id=request_id, outcome=outcome, by=by, **extra
        )
        if outcome != "expired" and self.get(request_id).expired(self.clock()):
            self.expire(request_id)  # too late to answer: the expiry is recorded instead
            raise expired_error(self.get(request_id))
        with self._lock:
            req = self.get(request_id)
            if req.status != "pending":
                raise ApprovalError(
                    "not-pending", f"the approval request `{request_id}` is already {req.status}"
                )
            answered = replace(req, status=outcome)
            self.requests[request_id] = answered
        try:
            self.store.append_many([claim, resolved, *with_events], expect={claim.stream: 0})
        except ConcurrencyError:
            with self._lock:
                self.requests[request_id] = replace(req, status="answered")
            raise ApprovalError(
                "not-pending",
                f"the approval request `{request_id}` was already answered by someone else",
            ) from None
        except BaseException:
            with self._lock:
                self.requests[request_id] = req
            raise
        return answered

    def expire(self, request_id: str) -> ApprovalRequest | None:
        """Record that a pending request passed its deadline: resolved `expired` through the
        same claim as an answer (`approval:<id>`), so an expiry and an answer never both win,
        in any process. Returns the expired request when this call recorded it; None when the
        request is not past its deadline or was answered (or expired) first."""
        req = self.get(request_id)
        if not req.expired(self.clock()):
            return None
        assert req.expires_at is not None
        try:
            return self.resolve(
                request_id, "expired", None, reason=expiry_text(req), expires_at=_iso(req)
            )
        except ApprovalError:
            return None  # answered first, here or elsewhere: that answer stands

    def sweep(self) -> list[ApprovalRequest]:
        """Record the expiry of every pending request past its deadline (`expire`); the ones
        this call recorded."""
        now = self.clock()
        due = [r.request_id for r in list(self.requests.values()) if r.expired(now)]
        return [r for r in map(self.expire, due) if r is not None]

    # -- grants -------------------------------------------------------------------------------

    def grant_for(
        self,
        req: ApprovalRequest,
        call: PendingCall | ApprovalRequest,
        declared: Grant | None,
        *,
        rule: str | None,
        policy: str,
        by: str | None,
        task_id: str | None,
        path_facts: frozenset[str] = frozenset(),
        rule_bound: bool = False,
    ) -> tuple[ApprovalGrant, NewEvent]:
        """The grant an approval of `req` gives for `call` (its tool id, tool_call_id and
        input hash), as `declared` by the ASK of `rule` in `policy`, and its `grant.issued`
        event: recorded by the caller with the answer (`resolve`'s `with_events`), then held
        here by `adopt` once that commit succeeded."""
        spec = declared or DEFAULT_GRANT
        expires = self.clock() + timedelta(milliseconds=spec.ttl_ms)
        check = None
        if spec.scope == "class" and spec.condition is not None:
            check = compile_conditions({"c": spec.condition}, path_facts)["c"]
        grant = ApprovalGrant(
            grant_id="grt-" + uuid.uuid4().hex[:16],
            scope=spec.scope,
            tool_id=call.tool_id,
            expires_at=expires,
            tool_call_id=call.tool_call_id if spec.scope == "once" else None,
            input_hash=call.input_hash if spec.scope == "once" else None,
            task_id=task_id if spec.scope == "task" else None,
            rule=rule,
            policy=policy,
            selector=spec.selector if spec.scope == "class" else None,
            condition=spec.condition if spec.scope == "class" else None,
            approval_id=req.request_id,
            by=by,
            check=check,
            session_id=req.session_id,
            rule_bound=rule_bound,
        )
        bound = {"bound": "rule"} if rule_bound else {}
        event = grant_issued(
            req.session_id,
            grant_id=grant.grant_id,
            scope=grant.scope,
            tool_id=grant.tool_id,
            expires_at=expires,
            tool_call_id=grant.tool_call_id,
            input_hash=grant.input_hash,
            task_id=grant.task_id,
            approval_id=req.request_id,
            rule=grant.rule,
            policy=grant.policy,
            by=by,
            selector=grant.selector.text if grant.selector else None,
            condition=condition_text(grant.condition) if grant.condition else None,
            # the grant as declared, so another process rebuilds exactly what it matches
            grant=spec.model_dump(mode="json", exclude_none=True),
            **bound,
        )
        return grant, event

    def adopt(self, grant: ApprovalGrant) -> None:
        """Hold a grant whose `grant.issued` was committed (`grant_for`)."""
        with self._lock:
            self.grants[grant.grant_id] = grant

    def find(
        self,
        pending: PendingCall,
        *,
        rule: str | None,
        policy: str,
        task_id: str | None,
        tool: Tool | None,
        context: Any = None,
        facts: Mapping[str, Any] | None = None,
        own_rule: bool = False,
    ) -> ApprovalGrant | None:
        """The first active grant that authorises `pending` (whose decision is an ASK by
        `rule`). With `own_rule`, only a grant issued for that rule counts, even a `once` grant
        (when several policies ask about one call, each ASK needs its own approval)."""
        now = self.clock()
        for grant in list(self.grants.values()):
            if own_rule and (grant.rule, grant.policy) != (rule, policy):
                continue
            if grant.matches(
                pending,
                rule=rule,
                policy=policy,
                task_id=task_id,
                now=now,
                tool=tool,
                context=context,
                facts=facts,
            ):
                return grant
        return None

    # -- restart ------------------------------------------------------------------------------

    def restore(self, views: Any, path_facts: frozenset[str] = frozenset()) -> None:
        """Bring requests and grants up to date with folded events (`Projections`): add the
        ones this process has not seen, and take over statuses changed elsewhere (a request
        answered, a grant spent or revoked). A restored request has no `pending` call until
        its session is resumed (`attach`)."""
        with self._lock:
            touched = getattr(views, "touched", None)
            if touched is None or self._restored is None or self._restored[0] is not views:
                approvals, grants = list(views.approvals.values()), list(views.grants.values())
            else:  # only what changed since the last restore from these views
                since = touched[self._restored[1] :]
                approvals = [views.approvals[i] for kind, i in since if kind == "approval"]
                grants = [views.grants[i] for kind, i in since if kind == "grant"]
            mark = len(touched) if touched is not None else 0
            for view in approvals:
                known = self.requests.get(view.approval_id)
                if known is None:
                    known = self.requests[view.approval_id] = _read(_request_of, view)
                    self._index(known)
                    if known.status == "pending":
                        self._asked[_asked_key(known)] = known.request_id
                elif known.status == "pending" and view.status != "pending":
                    self.requests[view.approval_id] = replace(known, status=view.status)
            for view in grants:
                grant = self.grants.get(view.grant_id)
                if grant is None:
                    self.grants[view.grant_id] = _read(_grant_of, view, path_facts)
                elif grant.status == "active" and view.status != "active":
                    self.grants[view.grant_id] = replace(grant, status=view.status)
            if touched is not None:
                self._restored = (views, mark)

    def attach(self, request_id: str, pending: PendingCall) -> ApprovalRequest:
        """Give a restored request its frozen call (same tool, tool_call_id and input hash)."""
        with self._lock:
            req = self.get(request_id)
            if (req.tool_id, req.tool_call_id, req.input_hash) != (
                pending.tool_id,
                pending.tool_call_id,
                pending.input_hash,
            ):
                raise ValueError(f"`{pending.tool_call_id}` is not the call of `{request_id}`")
            req = replace(req, pending=pending)
            self.requests[request_id] = req
            return req

    def use(
        self,
        grants: tuple[ApprovalGrant, ...],
        stream: str,
        pending: PendingCall,
        also: Sequence[NewEvent] = (),
    ) -> list[Event]:
        """Record that `grants` authorise `pending` now, in one transaction (with the events
        `also`, after them: the call's RUNNING transition); each `once` grant is spent by a
        `grant.spent` claim that only the first execution can append. Raises
        `ApprovalError("grant-spent")` and records nothing when another execution (another
        thread, session or process) spent one of them first, or when one was revoked
        (`grant-revoked`). Returns the events appended."""
        revoked = self._revoked(grants)
        if revoked is not None:
            raise ApprovalError(
                "grant-revoked",
                f"the grant `{revoked.grant_id}` was revoked: it authorises nothing",
            )
        events = [
            grant_used(stream, grant_id=g.grant_id, tool_call_id=pending.tool_call_id)
            for g in grants
        ]
        claims = [g for g in grants if g.scope == "once"]
        events += [
            grant_spent(
                g.grant_id,
                session=stream,
                tool_call_id=pending.tool_call_id,
                input_hash=pending.input_hash,
            )
            for g in claims
        ]
        claimed = {spent_stream(g.grant_id): g.grant_id for g in claims}
        try:
            appended = self.store.append_many([*events, *also], expect=dict.fromkeys(claimed, 0))
        except TransitionRefused:
            raise  # the call ran elsewhere: no grant was spent here (the caller says so)
        except ConcurrencyError as exc:
            spent = claimed[exc.stream]
            self.spend(spent)
            raise ApprovalError(
                "grant-spent",
                f"the once grant `{spent}` already authorised an execution of "
                f"`{pending.tool_call_id}`, or was revoked",
            ) from None
        for g in claims:
            self.spend(g.grant_id)
        return appended

    def revoke(self, grant_id: str, *, by: str, reason: str | None = None) -> ApprovalGrant:
        """Revoke an active grant: a `grant.revoked` event on the grant's own stream
        (`grant:<id>`), appended only while that stream is empty, so a `once` grant is either
        spent or revoked, never both, in any process. `use` reads that stream before a task or
        class grant authorises an execution: a revoked grant never authorises again. Raises
        `ApprovalError` `unknown-grant`, or `not-active` (spent, revoked or expired)."""
        grant = self.grants.get(grant_id)
        if grant is None:
            raise ApprovalError("unknown-grant", f"no grant `{grant_id}`")
        if not grant.active(self.clock()):
            state = grant.status if grant.status != "active" else "expired"
            raise ApprovalError("not-active", f"the grant `{grant_id}` is already {state}")
        event = grant_revoked(
            spent_stream(grant_id),
            grant_id=grant_id,
            reason=reason,
            by=by,
            session=grant.session_id,
            tool_id=grant.tool_id,
        )
        try:
            self.store.append_many([event], expect={event.stream: 0})
        except ConcurrencyError:
            self.spend(grant_id)
            raise ApprovalError(
                "not-active", f"the grant `{grant_id}` was already spent or revoked"
            ) from None
        with self._lock:
            revoked = self.grants[grant_id] = replace(grant, status="revoked")
        return revoked

    def _revoked(self, grants: tuple[ApprovalGrant, ...]) -> ApprovalGrant | None:
        """The first task or class grant revoked in the log (perhaps by another process)."""
        for g in grants:
            if g.scope != "once" and any(
                e.type == "grant.revoked" for e in self.store.read(spent_stream(g.grant_id))
            ):
                with self._lock:
                    self.grants[g.grant_id] = replace(g, status="revoked")
                return g
        return None

    def spend(self, grant_id: str) -> None:
        """Mark a grant spent in memory (the log already says so)."""
        with self._lock:
            grant = self.grants.get(grant_id)
            if grant is not None and grant.scope == "once":
                self.grants[grant_id] = replace(grant, status="used")


def expiry_text(req: ApprovalRequest) -> str:
    """Why an expired request can no longer be answered, in one sentence."""
    return (
        f"the approval request `{req.request_id}` expired at {_iso(req)} without an answer: "
        "the call does not run; ask again with a new call"
    )


def expired_error(req: ApprovalRequest) -> ApprovalError:
    """The refusal of an answer to `req` after its deadline (code `expired`)."""
    return ApprovalError("expired", expiry_text(req))


def _iso(req: ApprovalRequest) -> str | None:
    return req.expires_at.isoformat() if req.expires_at is not None else None


def _asked_key(req: ApprovalRequest) -> tuple[Any, ...]:
    return (req.session_id, req.tool_call_id, req.input_hash, req.rule, req.policy)


def _request_of(view: Any) -> ApprovalRequest:
    p = view.requested
    return ApprovalRequest(
        request_id=view.approval_id,
        session_id=view.stream,
        decision_id=p.get("decision_id"),
        tool_id=view.tool_id or "",
        tool_call_id=view.tool_call_id or "",
        input_hash=view.input_hash or "",
        what=p.get("what") or "",
        why=p.get("why") or "",
        rule=p.get("rule"),
        policy=p.get("policy") or "",
        as_whom=p.get("as_whom") or {},
        on_what=p.get("on_what") or {},
        impact=p.get("impact") or {},
        arguments=p.get("arguments") or {},
        execution=p.get("execution") or {},
        reversibility=p.get("reversibility") or "",
        scope=p.get("scope") or {},
        approvers=tuple(Approver(kind=a["kind"], value=a["value"]) for a in view.approvers),
        requested_at=_parse_time(view.requested_at),
        task_id=p.get("task_id"),
        status=view.status,
        expires_at=_parse_time(p["expires_at"]) if p.get("expires_at") else None,
        grant=Grant.model_validate(p["grant"]) if isinstance(p.get("grant"), dict) else None,
    )


def _grant_of(view: Any, path_facts: frozenset[str]) -> ApprovalGrant:
    p = view.issued
    declared = p.get("grant")
    spec = Grant.model_validate(declared) if isinstance(declared, dict) else None
    status = view.status
    if view.scope == "class" and spec is None:
        status = "revoked"  # recorded without its declaration: what it matches is unknown
    selector = spec.selector if spec is not None and view.scope == "class" else None
    condition = spec.condition if spec is not None and view.scope == "class" else None
    check = None
    if condition is not None:
        check = compile_conditions({"c": condition}, path_facts)["c"]
    return ApprovalGrant(
        grant_id=view.grant_id,
        scope=view.scope,
        tool_id=view.tool_id,
        expires_at=_parse_time(view.expires_at),
        tool_call_id=view.tool_call_id,
        input_hash=view.input_hash,
        task_id=view.task_id,
        rule=p.get("rule"),
        policy=p.get("policy"),
        selector=selector,
        condition=condition,
        approval_id=p.get("approval_id"),
        by=p.get("by"),
        status=status,
        check=check,
        session_id=view.stream,
        rule_bound=p.get("bound") == "rule",
    )


def _read(build: Callable[..., Any], view: Any, *args: Any) -> Any:
    """A request or grant from its folded events; `StoreError` when they are not the records
    their types name (a time that is not a time, a field of the wrong kind)."""
    try:
        return build(view, *args)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        name = getattr(view, "approval_id", None) or getattr(view, "grant_id", "?")
        what = "approval request" if hasattr(view, "approval_id") else "grant"
        raise StoreError(f"the {what} `{name}` in the log cannot be read: {error}") from None


def _parse_time(text: str | None) -> datetime:
    if not text:
        return datetime.min.replace(tzinfo=UTC)
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
