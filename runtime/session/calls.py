"""The path of one call through a session, a function a stage: normalize → judge → decide →
authorize → prepare → run → record. Each stage takes the session and what the stage before
it returned: a `Ruling` (what the policies say), a `Judged` (the decision recorded), a
`Prepared` (the call ready to run). `Session` delegates its methods here.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from ..judge.availability import unavailable_refusal
from ..judge.history import fact_changes
from ..judge.normalize import PendingCall, Refusal, describe_value, freeze, is_text, thaw
from ..judge.policy import CallContext, Decider, Decision
from ..log.chain import HistoryMoved, TransitionRefused
from ..log.events import (
    NewEvent,
    PayloadTemplate,
    call_refused,
    decision,
    format_time,
    hole,
    json_value,
    mark_stored,
    system_clock,
)
from ..model.canonical import NO_EXECUTION, CanonicalError, Execution, json_problem, json_string
from ..model.ir import Tool
from ._restore import RAN, adopt, catch_up_session, recorded_decision, take_up_denials
from .approvals import ApprovalError, ApprovalGrant, expiry_text
from .executors import (
    BoundExecutor,
    ExecutorContext,
    LateHook,
    Result,
    run_async,
    run_sync,
    timeout_of,
    unrecordable,
)
from .lifecycle import Action, ActionState, after_decision, random_hex
from .state import Judged

if TYPE_CHECKING:
    from .seams import HarnessSeam, SessionSeam

__all__ = [
    "Deciders",
    "Judged",
    "Prepared",
    "Ruling",
    "ainvoke_call",
    "call_context",
    "decide_call",
    "execution_params",
    "invoke_call",
    "judge_call",
    "judge_policies",
    "normalize_call",
    "not_run",
]

_STRENGTH = {"deny": 2, "ask": 1, "allow": 0}
_S = ActionState


@dataclass(frozen=True)
class Ruling:
    """What the session's policies say of a call, not recorded: the decision, and for an ASK
    every grant that authorises it (none while one of them is missing)."""

    decision: Decision
    grants: tuple[ApprovalGrant, ...] = ()
    context: CallContext | None = None
    """The call as the policies saw it."""

    @property
    def grant(self) -> ApprovalGrant | None:
        """The grant the decision names (the first)."""
        return self.grants[0] if self.grants else None


class Prepared(NamedTuple):
    """A call about to run: authorised, its grants spent, its action RUNNING (a tuple: made on
    every call)."""

    pending: PendingCall
    tool: Tool
    bound: BoundExecutor
    context: ExecutorContext
    judged: Judged
    action: Action


def normalize_call(
    s: SessionSeam,
    name: str,
    tool_call_id: str,
    args: Mapping[str, Any] | None,
    execution: Execution | None,
) -> PendingCall | Refusal:
    h = s.harness
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
    if not tool_call_id.isascii() and not is_text(tool_call_id):
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
    if tool.kind == "private" and tool.skill != s.skill_name:
        return Refusal(
            "skill-private",
            f"`{tool.id}` is private to the skill `{tool.skill}` and runs only in a session "
            "of that skill",
            f"Session.skill({tool.skill!r})",
            name,
            tool_call_id,
        )
    if not s.on_surface(tool.id):
        if tool.kind == "primitive":
            what = "is internal (primitive) and never on a surface"
        elif s.skill_def is not None:
            what = (
                f"is not on the surface of the skill `{s.skill_def.name}`: a session of "
                "the skill calls only its private tools and its subagents' tools"
            )
            if s.skill_def.profile:
                what += f" (profile `{s.skill_def.profile}`)"
        else:
            what = f"is not on the surface of the agent `{s.agent.name}`"
        return Refusal("not-on-surface", f"`{tool.id}` {what}", None, name, tool_call_id)
    # Availability is a layer of its own (language.md §1): a tool the planner can name is
    # not a tool that works now, so a call to an unavailable one never reaches policy.
    available = s.tool_availability(tool.id)
    if not available.available:
        return unavailable_refusal(available, name, tool_call_id)
    return freeze(
        tool,
        h.validators[tool.id],
        tool_call_id,
        args,
        execution,
        name=name,
        actor=s.actor,
        session_id=s.id,
        agent=s.agent.name,
        task_id=s.task_id,
        skill=s.skill_name,
    )


def call_context(s: SessionSeam, pending: PendingCall) -> CallContext:
    """`Session.context`: the call as policy sees it."""
    facts = s.facts
    h = s.harness
    ledger = s.ledger
    if ledger.terms is not h.engine.terms:
        ledger.rebind(h.engine.terms)
    if ledger.terms.read:  # a spec that reads no session state needs no current ledger
        ledger.sync(h.store, clock_ms(h))
    # in field order: built for every decision, and half the cost of a call by keywords
    return CallContext(
        pending.tool_id,  # tool_id
        pending.args,  # args
        s.actor,  # actor
        s.resource,  # resource
        s.task,  # task
        s.env,  # env
        facts.values,  # facts
        facts.connected,  # connected
        facts.running,  # running
        pending.tool_call_id,  # tool_call_id
        execution_params(pending.execution),  # execution
        ledger,  # ledger
    )


_PARAMS = (
    ("command", "command"),
    ("cwd", "cwd"),
    ("env", "env"),
    ("timeout_ms", "timeout"),
    ("target", "target"),
)
"""An execution parameter's name in `Execution` (and in the log's record of it), and in
policy (`call.timeout`)."""


def execution_params(execution: Execution | Mapping[str, Any] | None) -> dict[str, Any]:
    """A call's execution parameters as policy reads them (`call.cwd`, `call.timeout`, …),
    from the frozen call's `Execution` or from the log's record of it (`execution_record`).

    >>> execution_params({"cwd": "/repo", "timeout_ms": 500})
    {'cwd': '/repo', 'timeout': 500}
    """
    params: dict[str, Any] = {}
    if not execution or execution is NO_EXECUTION:
        return params
    if isinstance(execution, Execution):
        for name, as_read in _PARAMS:
            value = getattr(execution, name)
            if value is not None:
                params[as_read] = value
        return params
    for name, as_read in _PARAMS:
        value = execution.get(name)
        if value is not None:
            params[as_read] = tuple(value) if isinstance(value, list) else value
    return params


def clock_ms(h: HarnessSeam) -> int:
    """The harness clock in milliseconds since the epoch (history windows end there): the
    system clock's read without a `datetime`, as every decision with session terms reads it."""
    if h.clock is system_clock:
        return time.time_ns() // 1_000_000
    return int(h.clock().timestamp() * 1000)


def apply_on_success(
    s: SessionSeam, tool: Tool, pending: PendingCall | None, result: Result
) -> None:
    """`on_success`: a successful call adds values to list facts or removes them
    (`fact_changes`), recorded as a `facts.updated` that holds the changes, so that a
    session rebuilt from its log holds the same facts."""
    if not tool.on_success or result.status != "success":
        return
    args = thaw(pending.args) if pending is not None else None
    changes = fact_changes(tool, args or {}, result.data, s.facts.values)
    if changes:
        s.change_facts(changes)


class Deciders(Protocol):
    """What judges a call by policy name: a `PolicyEngine`, or a cache in front of one."""

    def decider(self, policy_name: str) -> Decider: ...


def judge_policies(
    engine: Deciders, policies: Sequence[str], ctx: CallContext, *, agent: str
) -> list[Decision]:
    """The decisions of `policies` on one call that share the strongest effect (DENY beats
    ASK beats ALLOW), most specific first: a rule before a default, a later policy (a skill's
    profile) before an earlier one (the parent's policy). No policy at all denies. The one
    judging function of sessions, replay (`runtime/session/replay.py`) and shadow mode
    (`runtime/session/shadow.py`); raises `UnknownPolicyError` for a policy the engine lacks."""
    if len(policies) == 1:
        return [engine.decider(policies[0]).decide(ctx)]
    if not policies:
        return [
            Decision.denied(f"the agent `{agent}` has no policy", policy="", tool_id=ctx.tool_id)
        ]
    decisions = [engine.decider(name).decide(ctx) for name in policies]
    strongest = max(_STRENGTH[d.effect] for d in decisions)
    # INVARIANT: most specific first. `policies` lists the parent's policy before the
    # skill's profile, so a later policy is the more specific one; a rule that matched is
    # more specific than a default.
    ranked = sorted(
        (
            (d.default_used, -i, d)
            for i, d in enumerate(decisions)
            if _STRENGTH[d.effect] == strongest
        ),
        key=lambda r: (r[0], r[1]),
    )
    return [d for _, _, d in ranked]


def judge_call(s: SessionSeam, pending: PendingCall) -> Ruling:
    """The decision of the session's policies, and the grants that authorise it (pure)."""
    return Ruling(*judgement(s, pending))


def judgement(
    s: SessionSeam, pending: PendingCall
) -> tuple[Decision, tuple[ApprovalGrant, ...], CallContext]:
    """`judge_call`'s ruling as its fields (decision, grants, context), for `decide_call`,
    which needs no `Ruling` object."""
    h = s.harness
    ctx = call_context(s, pending)
    tied = judge_policies(h.engine, s.policies, ctx, agent=s.agent.name)
    best = tied[0]
    if best.effect != "ask":
        return best, (), ctx
    tool = h.spec.tools.get(pending.tool_id)
    grants: list[ApprovalGrant] = []
    for d in tied:
        grant = h.approvals.find(
            pending,
            rule=d.rule,
            policy=d.policy,
            task_id=s.task_id,
            tool=tool,
            context=ctx,
            facts=s.facts.values,
            # several policies ask: each needs an approval of its own rule
            own_rule=len(tied) > 1,
        )
        if grant is None:
            return d, (), ctx
        grants.append(grant)
    return best, tuple(grants), ctx


def decide_call(
    s: SessionSeam, pending: PendingCall, *, commit: bool = True, refuse: bool = False
) -> Decision:
    """`Session.decide`: judge the call and record the decision (`commit=False`: a decision
    that stops the call is held too, for the caller to commit with what it appends next).
    A call that ran (here or in another process: the session catches up first) is not judged
    again: its recorded decision is returned and nothing is recorded. `refuse`: the call's
    session moved under every attempt to settle its decision (`contended`)."""
    s.state.own(pending)
    settle_held(s, pending.key)
    if s.state.fresh is pending:
        s.state.fresh = None  # normalized just now, after a catch-up
    else:
        catch_up_session(s)
    # a spec that reads the session's history writes each authorising decision only on the
    # history it read (`Unmoved`, checked by the commit that writes it: RUNNING's, or its own
    # for a grant): never two processes authorising the call only one may make; judged again
    # on the log as it is when another wrote first
    guarded = s.ledger.terms.read
    for attempt in range(DECISION_ATTEMPTS):
        if s.ran(pending.key):
            action = s.held_action(pending.key)
            assert action is not None  # it ran: the session holds its action
            recorded = recorded_decision(s, pending, action)
            if recorded is not None:
                return recorded
        d, grants, context = judgement(s, pending)
        read = s.ledger.positions() if guarded else None
        if refuse or (attempt == DECISION_ATTEMPTS - 1 and read is not None):
            # every attempt found the session moved under it: refused, never let through
            d, grants = contended(s, pending, d), ()
        try:
            return record_decision(s, pending, d, grants, context, commit=commit, read=read)
        except TransitionRefused:
            # the action moved on in another process (answered, run): judged on its state
            catch_up_session(s, force=True)
        except HistoryMoved:
            s.ledger.restart()  # judged again on the log as it is
            time.sleep(random.uniform(0, 0.002 * (attempt + 1)))  # the others' commits land
    raise AssertionError("unreachable: the last attempt denies, unguarded")


def settle_held(s: SessionSeam, key: str) -> None:
    """Commit the held authorising decision of the call `key`, if any (it is decided again, or
    its grants are spent on their own commit): written if the session has not moved since it
    was judged; otherwise nothing is, and the action takes the log's state again."""
    held = s.state.held_decisions.pop(key, None)
    if held is None:
        return
    store = s.harness.store
    try:
        taken = store.withdraw(held[0])
        if taken:
            mark_stored(taken, store.append_many(taken, unmoved=held[1]))
    except HistoryMoved:
        stale(s, key)


def stale(s: SessionSeam, key: str) -> None:
    """Forget a decision the log refused (`HistoryMoved`): the action as the log has it, and
    no judgement, so that the call is judged again. The ledger had taken the decision's
    AUTHORIZED in hand: it starts again from the log, which holds the other writer's events."""
    s.state.judged.pop(key, None)
    s.ledger.restart()
    action = s.state.actions.get(key)
    if action is not None:
        action.refresh()


DECISION_ATTEMPTS = 16
"""How many times a decision that reads the session's history is judged again when another
process wrote to the session first; the last attempt refuses the call (`contended`)."""


def contended(s: SessionSeam, pending: PendingCall, d: Decision) -> Decision:
    """The refusal of a call whose session moved under every attempt to decide it: the
    decision it would have had cannot be settled, and the call does not run (fail closed)."""
    return Decision.denied(
        f"the session's history changed under this decision {DECISION_ATTEMPTS - 1} times "
        "(other processes decide its calls at the same moment): refused, try again",
        policy=d.policy,
        tool_id=pending.tool_id,
        default_used=False,
    )


def record_decision(
    s: SessionSeam,
    pending: PendingCall,
    d: Decision,
    grants: tuple[ApprovalGrant, ...],
    context: CallContext,
    *,
    commit: bool,
    read: dict[str, int] | None,
) -> Decision:
    """Record the decision `d` (and the move it makes), deferred to the commit that runs the
    call. When it authorises the call and `read` gives the positions of the session's history
    it read, that commit writes it only if nobody wrote to the session since (`HistoryMoved`
    otherwise, and nothing recorded; `prepare` judges again); authorised by a grant, it is
    committed now on that condition."""
    grant = grants[0] if grants else None
    h = s.harness
    decision_id = "dec-" + random_hex()
    authorized = d.effect == "allow" or grant is not None
    grant_id = grant.grant_id if grant is not None else None
    template, fixed = decision_template(s, d, h.policy_version)
    payload = {
        "decision_id": decision_id,
        "policy_version": h.policy_version,
        "tool_id": pending.tool_id,
        "tool_call_id": pending.tool_call_id,
        "input_hash": pending.input_hash,
        **fixed,
        "grant_id": grant_id,
        "authorized": authorized,
    }
    text = template.fill(
        {
            "decision_id": json_string(decision_id),
            "tool_id": json_string(pending.tool_id),
            "tool_call_id": json_string(pending.tool_call_id),
            "input_hash": json_string(pending.input_hash),
            "grant_id": json_value(grant_id),
            "authorized": "true" if authorized else "false",
        }
    )
    events = [NewEvent(s.id, "Tool", "decision", payload, text)]
    shadow = h.shadowing
    if shadow is not None:
        # the candidate's divergence rides the decision's commit (runtime/session/shadow.py)
        diverged = shadow.judge(
            s,
            context,
            d,
            decision_id=decision_id,
            policy_version=h.policy_version,
            input_hash=pending.input_hash,
        )
        if diverged is not None:
            events.append(diverged)
    judged = Judged(decision_id, d, grant, h.policy_version, grants)
    move = drive(s, pending, judged)
    if move is not None:
        events.append(move[2])
    ledger = s.ledger
    if authorized and read is not None and grant is None:
        held = h.store.defer_unmoved(events, read)
        if held is not None:
            s.state.held_decisions[pending.key] = (held, read)
        ledger.hold(events, read)  # counted by the next decision, as any move deferred
        ledger.settle(h.store)
        s.state.judged[pending.key] = judged
        if move is not None:
            move[0].moved(move[1])
        return d
    if authorized and read is not None:
        appended = h.store.append_many(events, unmoved=read)
        s.state.judged[pending.key] = judged
        if move is not None:
            move[0].moved(move[1], appended[-1])
        return d
    # a decision that lets the call run rides the commit that records it RUNNING, before the
    # executor starts; one that stops it (deny, ask without a grant) is committed now, with
    # the move it makes
    h.store.defer(events)
    if ledger.terms.read:  # the ledger takes the move in hand: the next decision reads no log
        ledger.hold(events)
        ledger.settle(h.store)
    s.state.judged[pending.key] = judged
    if move is not None:
        move[0].moved(move[1])
    if not authorized and commit:
        h.store.flush()
    return d


_PER_CALL = ("decision_id", "tool_id", "tool_call_id", "input_hash", "grant_id", "authorized")


def decision_template(
    s: SessionSeam, d: Decision, policy_version: str
) -> tuple[PayloadTemplate, dict[str, Any]]:
    """What a decision event's payload holds that is the same for every call the decision `d`
    decides in this session (the engine returns the same object for every call a rule decides
    alike), and the template of its canonical JSON, kept per decision object: only what
    differs from call to call is written each time."""
    key = id(d)
    found = s.state.templates.get(key)
    if found is None or found[0] is not d or found[1] != policy_version:
        if len(s.state.templates) > 256:
            s.state.templates.clear()
        fixed = decision(
            s.id,
            decision_id="-",
            policy_version=policy_version,
            tool_id="",
            tool_call_id="",
            input_hash="",
            effect=d.effect,
            rule=d.rule,
            reason=d.reason,
            evidence=list(d.evidence),
            matched=list(d.matched),
            policy=d.policy,
            policies=list(s.policies),
            default_used=d.default_used,
            instead=d.instead,
            approvers=[{"kind": a.kind, "value": a.value} for a in d.approvers],
            agent=s.agent.name,
            skill=s.skill_name,
        ).payload
        fixed = {k: v for k, v in fixed.items() if k not in _PER_CALL and k != "policy_version"}
        shape = {"policy_version": policy_version, **fixed}
        found = (
            d,
            policy_version,
            PayloadTemplate({**shape, **{n: hole(n) for n in _PER_CALL}}),
            fixed,
        )
        s.state.templates[key] = found
    return found[2], found[3]


def drive(
    s: SessionSeam, pending: PendingCall, judged: Judged
) -> tuple[Action, ActionState, NewEvent] | None:
    """Where the call's action moves after its decision (`after_decision`): the action, its
    next state and the event that records the move, for the decision's commit (`moved` takes
    the state once it is deferred); None when it stays."""
    action = s.state.actions.get(pending.key)
    if action is None or action.terminal:
        return None
    move = after_decision(action.state, judged.decision.effect, granted=judged.grant is not None)
    if move is None:
        return None
    if judged.grant is None:
        target, event = action.move(move.state, reason=move.reason, decision_id=judged.decision_id)
    else:
        target, event = action.move(
            move.state,
            reason=move.reason,
            decision_id=judged.decision_id,
            grant_id=judged.grant.grant_id,
        )
    return action, target, event


def authorize(s: SessionSeam, pending: PendingCall) -> Judged | Result:
    """The judgement that authorises the call now, or a result saying why it may not run."""
    action = s.state.actions[pending.key]
    superseded = superseded_result(s, pending, action)
    if superseded is not None:
        return superseded
    if action.state in RAN:  # it ran, or runs, in another process: never here
        return ran_elsewhere(s, pending, action, s.judgement_of(pending.key))
    judged = s.state.judged.get(pending.key)
    stale = (
        judged is None
        or judged.policy_version != s.harness.policy_version
        or action.state != _S.AUTHORIZED
        or (bool(judged.grants) and lapsed(judged.grants, s.harness.clock()))
    )
    if stale and not action.terminal:
        decide_call(s, pending)
        judged = s.state.judged.get(pending.key)
    if action.state != _S.AUTHORIZED:
        # it may not run here: perhaps an operator answered or edited it in another process
        known = set(s.harness.approvals.grants)
        s.harness.catch_up()
        take_up_denials(s)
        superseded = superseded_result(s, pending, action)
        if superseded is not None:
            return superseded
        if not action.terminal and known != set(s.harness.approvals.grants):
            decide_call(s, pending)  # judged again with the grants issued elsewhere
            judged = s.state.judged.get(pending.key)
    held = s.held_action(pending.key)  # taken up from the log, perhaps, while judged again
    assert held is not None  # normalized: the session holds its action
    action = held
    if action.state in RAN:  # it ran in another process meanwhile: never here
        return ran_elsewhere(s, pending, action, judged)
    if action.state == _S.AUTHORIZED:
        assert judged is not None  # judged again above when it was missing
        return judged
    expired = expired_result(s, pending, action, judged)
    if expired is not None:
        return expired
    category = {
        _S.WAITING_APPROVAL: "waiting_approval",
        _S.FAILED: "denied",
        _S.CANCELLED: "cancelled",
    }.get(action.state, "not_authorized")
    why = judged.decision.reason if judged is not None else None
    message = f"`{pending.tool_id}` may not run: the call is {action.state.value}"
    if why:
        message += f" ({why})"
    return not_run(s, pending, category, message, action.state.value, judged)


def lapsed(grants: Sequence[ApprovalGrant], now: datetime) -> bool:
    """Whether one of `grants` is no longer active at `now` (spent, revoked or expired)."""
    return any(not g.active(now) for g in grants)


def superseded_result(s: SessionSeam, pending: PendingCall, action: Action) -> Result | None:
    """The not-run result of a call an operator approved with edits (`call.superseded`)."""
    edit = s.harness.projections.superseded.get(f"{s.id}:{pending.key}")
    if edit is None:
        return None
    message = (
        f"`{pending.tool_id}` may not run: the call `{pending.tool_call_id}` was superseded "
        f"by an edit of `{edit['by']}` (input hash {edit['edited_input_hash'][:12]}…): "
        "invoke the edited call, `Session.call(tool_call_id)`"
    )
    return not_run(s, pending, "superseded", message, action.state.value, None)


def expired_result(
    s: SessionSeam, pending: PendingCall, action: Action, judged: Judged | None
) -> Result | None:
    """The not-run result of a call whose approval request expired without an answer (its
    expiry is recorded now when the deadline passed and nothing recorded it yet)."""
    if action.state not in (_S.WAITING_APPROVAL, _S.CANCELLED):
        return None
    h = s.harness
    mine = [
        r
        for r in list(h.approvals.requests.values())
        if (r.session_id, r.tool_call_id, r.input_hash)
        == (s.id, pending.tool_call_id, pending.input_hash)
    ]
    now = h.clock()
    if any(r.expired(now) for r in mine):
        h.expire_approvals([r.request_id for r in mine])
        mine = [h.approvals.get(r.request_id) for r in mine]
    if not mine or any(r.status != "expired" for r in mine):
        return None  # another request of the call waits, or was answered
    req = max(mine, key=lambda r: r.requested_at)
    s.cancel_expired(req)  # recorded elsewhere perhaps: the call ends here too
    message = f"`{pending.tool_id}` may not run: {expiry_text(req)}"
    return not_run(s, pending, "expired", message, action.state.value, judged)


def unavailable(s: SessionSeam, pending: PendingCall) -> Result | None:
    """A not-run result when the call's tool is unavailable under the facts now, recorded
    as a `call.refused` event; the action keeps its state (it runs once the conditions
    hold) and a grant that authorises it is not spent."""
    available = s.tool_availability(pending.tool_id)
    if available.available:
        return None
    refusal = unavailable_refusal(available, pending.tool_id, pending.tool_call_id)
    action = s.state.actions[pending.key]
    s.harness.store.append(
        call_refused(
            s.id,
            {
                **refusal.to_dict(),
                "action_id": action.action_id,
                "input_hash": pending.input_hash,
                "stage": "invoke",
            },
        )
    )
    message = f"`{pending.tool_id}` may not run: it is unavailable now (" + (
        "; ".join(available.reasons) + ")"
    )
    return not_run(
        s, pending, "unavailable", message, action.state.value, s.state.judged.get(pending.key)
    )


def not_run(
    s: SessionSeam,
    pending: PendingCall | Action,
    category: str,
    message: str,
    state: str,
    judged: Judged | None,
) -> Result:
    action = pending if isinstance(pending, Action) else s.state.actions.get(pending.key)
    return Result(
        tool_id=pending.tool_id,
        tool_call_id=pending.tool_call_id,
        input_hash=(
            pending.input_hash if isinstance(pending, PendingCall) else s.state.hash_of(pending)
        ),
        status="failure",
        data=None,
        observation=message,
        error=message,
        error_category=category,
        retryable=category in ("waiting_approval", "unavailable"),
        side_effect=False,
        executor=None,
        actor=user_of(s.actor),
        started_at=None,
        finished_at=None,
        duration_ms=0.0,
        state=state,
        ran=False,
        decision_id=judged.decision_id if judged is not None else None,
        action_id=action.action_id if action is not None else None,
    )


def prepare(s: SessionSeam, pending: PendingCall) -> Prepared | Result:
    """The call authorised, its grants spent and its action RUNNING, ready to run; or the
    result that stands instead (recorded before, or why it may not run). A decision that read
    the session's history rides the RUNNING commit, written only if the session did not move
    since: otherwise the call is judged again on the log as it is now (`DECISION_ATTEMPTS`
    times, then refused)."""
    s.state.own(pending, "invoke")
    for attempt in range(DECISION_ATTEMPTS - 1):
        try:
            return prepare_once(s, pending)
        except HistoryMoved:
            stale(s, pending.key)
            time.sleep(random.uniform(0, 0.002 * (attempt + 1)))  # the others' commits land
    decide_call(s, pending, refuse=True)
    return prepare_once(s, pending)


def prepare_once(s: SessionSeam, pending: PendingCall) -> Prepared | Result:
    """`prepare`, once: `HistoryMoved` when the held decision's session moved."""
    # no catch-up here: deciding caught up, and the log refuses a RUNNING taken elsewhere
    recorded = s.state.results.get(pending.key)
    if recorded is not None:
        return recorded
    judged = authorize(s, pending)
    if isinstance(judged, Result):
        return judged
    # checked again: the facts may have changed since normalize or the approval
    refused = unavailable(s, pending)
    if refused is not None:
        return refused
    h = s.harness
    tool = h.spec.tools[pending.tool_id]
    bound = h.executors.get(tool.id)
    if bound is None:
        return not_run(
            s,
            pending,
            "no_executor",
            f"no executor is bound to `{tool.id}`",
            _S.AUTHORIZED.value,
            judged,
        )
    action = s.state.actions[pending.key]
    timeout = timeout_of(tool, pending)
    lease = lease_until(h.clock(), timeout + h.lease_grace_ms)
    if judged.grants:
        if pending.key in s.state.held_decisions:  # an earlier decision, held: written first
            settle_held(s, pending.key)
            if pending.key not in s.state.judged:
                raise HistoryMoved(s.id, -1)  # refused: judged again
        # the grants are spent and the call recorded RUNNING in one transaction
        target, running = action.move(
            _S.RUNNING,
            executor=bound.name,
            decision_id=judged.decision_id,
            input_hash=pending.input_hash,
            lease_until=lease,
        )
        try:
            appended = h.approvals.use(judged.grants, s.id, pending, also=[running])
        except TransitionRefused:
            return lost_race(s, pending, action, judged)
        except ApprovalError as exc:
            # another execution (a thread, or a process sharing the store) spent the once
            # grant first: this one does not run; judged again, the call asks anew
            s.harness.store.append(
                call_refused(
                    s.id,
                    {
                        "code": exc.code,
                        "message": exc.message,
                        "tool": pending.tool_id,
                        "tool_call_id": pending.tool_call_id,
                        "action_id": action.action_id,
                        "input_hash": pending.input_hash,
                        "stage": "invoke",
                    },
                )
            )
            category = exc.code.replace("-", "_")  # grant_spent, grant_revoked
            return not_run(s, pending, category, exc.message, action.state.value, judged)
        action.moved(target, appended[-1])
    else:
        held = s.state.held_decisions.pop(pending.key, None)
        before, unmoved = [], None
        if held is not None:
            taken = h.store.withdraw(held[0])  # HistoryMoved: refused by an earlier commit
            if taken is not None:
                before, unmoved = taken, held[1]
        target, running = action.move(
            _S.RUNNING,
            executor=bound.name,
            decision_id=judged.decision_id,
            input_hash=pending.input_hash,
            lease_until=lease,
        )
        try:
            # the decision and RUNNING in one commit, on the history the decision read
            appended = h.store.append_many([*before, running], unmoved=unmoved)
        except TransitionRefused:
            return lost_race(s, pending, action, judged)
        # the decision taken back learns what it was committed as, as if it had stayed held
        mark_stored(before, appended[: len(before)])
        action.moved(target, appended[-1])
    s.state.running.add(pending.key)
    context = ExecutorContext(pending, s.id, s.actor, s.task_id, timeout, action.action_id)
    return Prepared(
        pending=pending, tool=tool, bound=bound, context=context, judged=judged, action=action
    )


_LEASES: dict[tuple[int, int], str] = {}
"""`lease_until`'s text by (whole second, lease in ms): formatted once a second."""


def lease_until(now: datetime, lease_ms: int) -> str:
    """The end of the lease of a run that starts at `now` (the process's lease: the executor's
    timeout and the time to record its outcome), rounded up to the next whole second."""
    key = (int(now.timestamp()), lease_ms)
    text = _LEASES.get(key)
    if text is None:
        if len(_LEASES) > 64:
            _LEASES.clear()
        start = datetime.fromtimestamp(key[0] + 1, now.tzinfo)
        text = _LEASES[key] = format_time(start + timedelta(milliseconds=lease_ms))
    return text


def lost_race(s: SessionSeam, pending: PendingCall, action: Action, judged: Judged) -> Result:
    """The outcome of a call whose RUNNING the log refused: it ran, or runs, in another
    process (under this action or another of the same call). Its recorded result when there
    is one; otherwise a not-run result in the state the log gives (RUNNING elsewhere, or
    UNKNOWN). It is never run here."""
    catch_up_session(s, force=True)
    h = s.harness
    views = [
        v
        for v in h.projections.actions_of(s.id)
        if (v.tool_call_id, v.input_hash) == (pending.tool_call_id, pending.input_hash)
        and ActionState(v.state) in RAN | {_S.FAILED, _S.CANCELLED}
        and v.decision_id is not None
    ]
    winner = next((v for v in views if v.action_id == action.action_id), None)
    if winner is None and views:
        winner = max(views, key=lambda v: v.position)
        action = adopt(s, pending.key, winner)
    elif winner is not None:
        action.state = ActionState(winner.state)
    return ran_elsewhere(s, pending, action, judged)


def ran_elsewhere(
    s: SessionSeam, pending: PendingCall, action: Action, judged: Judged | None
) -> Result:
    """The recorded result of a call that ran in another process, or, while none is
    recorded, a not-run result (`ran_elsewhere`) in the state the log gives."""
    recorded = s.recorded_result(pending.key)
    if recorded is not None:
        return recorded
    message = (
        f"`{pending.tool_id}` did not run here: the call `{pending.tool_call_id}` ran, or "
        f"runs, in another process (action `{action.action_id}`, {action.state.value})"
    )
    return not_run(s, pending, "ran_elsewhere", message, action.state.value, judged)


def record(s: SessionSeam, prepared: Prepared, result: Result) -> Result:
    """The result of a call that ran, with its decision, grant and action, recorded as the
    action's next state."""
    pending, tool, judged, action = (
        prepared.pending,
        prepared.tool,
        prepared.judged,
        prepared.action,
    )
    grant_id = judged.grant.grant_id if judged.grant is not None else None
    if (result.decision_id, result.grant_id, result.action_id) != (
        judged.decision_id,
        grant_id,
        action.action_id,
    ):
        result = replace(
            result, decision_id=judged.decision_id, grant_id=grant_id, action_id=action.action_id
        )
    try:
        if result.accepted:
            # RUNNING → ACCEPTED (the external system took it) → WAITING_RESULT
            action.transition(_S.ACCEPTED, handle=result.handle)
            action.transition(
                _S.WAITING_RESULT, result=result.to_dict(tool.output), handle=result.handle
            )
        else:
            result = record_result(action, tool, result)
        s.state.results[pending.key] = result
    except TransitionRefused:
        # its lease ran out before it finished: another process recorded it UNKNOWN, which
        # stands; what it did is kept beside, as a late result
        s.harness.store.append(
            NewEvent(
                s.id,
                "Tool",
                "action.late_result",
                {
                    "action_id": action.action_id,
                    "tool_call_id": action.tool_call_id,
                    "tool_id": action.tool_id,
                    "outcome": result.status,
                    "used": False,
                    "note": "the call finished after its lease ended and was recorded "
                    "UNKNOWN; this outcome was not recorded as its result",
                },
            )
        )
        action.state = _S.UNKNOWN
        return replace(result, state=_S.UNKNOWN.value)
    finally:
        s.state.running.discard(pending.key)
    apply_on_success(s, tool, pending, result)
    return result


def record_result(action: Action, tool: Tool, result: Result, **details: Any) -> Result:
    """Move `action` to `result`'s state with the result recorded (and `details`), and return
    what was recorded: `result`, or the failure it is when its data has no JSON form, which
    only making the event's text finds (`unrecordable`; nothing was appended)."""
    try:
        action.transition(
            result.state,
            result=result.to_dict(tool.output),
            reason=result.error_category,
            **details,
        )
        return result
    except (CanonicalError, RecursionError) as err:
        problem = json_problem(result.data) or str(err)
    result = unrecordable(tool, result, problem)
    action.transition(
        result.state, result=result.to_dict(tool.output), reason=result.error_category, **details
    )
    return result


def ids_of(judged: Judged) -> dict[str, str | None]:
    """The decision and grant ids a call's result carries (`run_sync`, `run_async`)."""
    grant = judged.grant
    return {
        "decision_id": judged.decision_id,
        "grant_id": grant.grant_id if grant is not None else None,
    }


def late_hook(s: SessionSeam, action: Action, settled: threading.Lock) -> LateHook:
    """Record that an executor which timed out finished anyway; its return value is
    dropped (the recorded result stays `unknown`). `settled` is held until the call's own
    result is recorded (a lock rather than an `Event`: made and let go of on every call)."""

    def report(outcome: str, error: BaseException | None) -> None:
        # after the timeout's own result, so the log reads in order
        if settled.acquire(timeout=10):
            settled.release()
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
        s.harness.store.append(NewEvent(s.id, "Tool", "action.late_result", payload))

    return report


def invoke_call(s: SessionSeam, pending: PendingCall) -> Result:
    """`Session.invoke`: run an authorised call once and record its result."""
    lock = s.state.key_lock(pending.key)
    with lock:
        prepared = prepare(s, pending)
        if isinstance(prepared, Result):
            return prepared
        settled = threading.Lock()
        settled.acquire()
        try:
            result = run_sync(
                prepared.tool,
                pending,
                prepared.bound,
                prepared.context,
                s.harness.clock,
                s.harness.outputs.get(prepared.tool.id),
                late_hook(s, prepared.action, settled),
                **ids_of(prepared.judged),
            )
            return record(s, prepared, result)
        finally:
            settled.release()


async def ainvoke_call(s: SessionSeam, pending: PendingCall) -> Result:
    """`Session.ainvoke`: `invoke_call` on the running event loop."""
    inflight = s.state.inflight.get(pending.key)
    if inflight is not None:
        return await asyncio.shield(inflight)
    prepared = prepare(s, pending)
    if isinstance(prepared, Result):
        return prepared
    future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
    s.state.inflight[pending.key] = future
    settled = threading.Lock()
    settled.acquire()
    try:
        result = await run_async(
            prepared.tool,
            pending,
            prepared.bound,
            prepared.context,
            s.harness.clock,
            s.harness.outputs.get(prepared.tool.id),
            late_hook(s, prepared.action, settled),
            **ids_of(prepared.judged),
        )
        result = record(s, prepared, result)
        future.set_result(result)
        return result
    finally:
        settled.release()
        s.state.running.discard(pending.key)
        s.state.inflight.pop(pending.key, None)


def user_of(actor: Mapping[str, Any]) -> str | None:
    user = actor.get("user")
    return user if isinstance(user, str) else None


def who_of(by: Mapping[str, Any] | str | None) -> str | None:
    if by is None or isinstance(by, str):
        return by
    user = by.get("user")
    if isinstance(user, str) and user:
        return user
    role = by.get("role")
    return f"role:{role}" if isinstance(role, str) else None


def has_side_effect(tool: Tool) -> bool:
    return bool(set(tool.effects) - {"read", "preview", "idempotent"})


def now_text(h: HarnessSeam) -> str:
    return format_time(h.clock())
