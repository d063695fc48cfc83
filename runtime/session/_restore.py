"""A session taken up from the log (`Harness.resume`): its actions in the state the log leaves
them, each frozen call rebuilt when its recorded arguments give the recorded input hash."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..judge.normalize import PendingCall, freeze
from ..judge.policy import Decision
from ..log.chain import TransitionRefused
from ..log.projections import ActionView
from ..model.canonical import Execution
from ..model.ir import Approver, Tool
from .executors import Result
from .lifecycle import Action, ActionState

if TYPE_CHECKING:
    from .seams import SessionSeam

__all__ = [
    "RAN",
    "adopt",
    "catch_up_session",
    "rebuild_call",
    "recorded_decision",
    "restore_actions",
    "settle_actions",
    "take_up_calls",
    "take_up_denials",
    "take_up_edits",
]

_S = ActionState
RAN = frozenset({_S.RUNNING, _S.ACCEPTED, _S.WAITING_RESULT, _S.SUCCEEDED, _S.UNKNOWN})
"""The states of an action that ran (or began to): its call is decided and never runs again
(FAILED and CANCELLED ran when a result is recorded)."""


def restore_actions(s: SessionSeam, views: list[ActionView]) -> None:
    """Take up this session's actions as the log leaves them (`Harness.resume`): their
    state, their frozen call when it can be rebuilt exactly, their recorded result."""
    h = s.harness
    for view in sorted(views, key=lambda v: v.position):
        tool = h.spec.tools.get(view.tool_id)
        key = f"{view.tool_call_id}:{view.input_hash}"
        action = Action(
            h.store,
            s.id,
            view.tool_call_id,
            view.tool_id,
            ActionState(view.state),
            tool=tool,
            position=view.position,
            action_id=view.action_id,
        )
        s.take_up(key, action, Result.from_dict(view.result) if view.result is not None else None)
        if view.state == _S.RUNNING:
            s.state.running_elsewhere.add(key)  # its lease is checked at each catch-up
        pending = rebuild_call(s, view, tool) if tool is not None else None
        if pending is not None:
            s.state.pending[key] = pending
            attach_requests(s, pending)


def attach_requests(s: SessionSeam, pending: PendingCall) -> None:
    """Attach `pending` to this session's approval requests that ask about it and were
    restored from the log without their call."""
    approvals = s.harness.approvals
    for req in list(approvals.requests.values()):
        if (
            req.session_id == s.id
            and req.pending is None
            and (req.tool_call_id, req.input_hash) == (pending.tool_call_id, pending.input_hash)
        ):
            approvals.attach(req.request_id, pending)


def rebuild_call(s: SessionSeam, view: ActionView, tool: Tool) -> PendingCall | None:
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
    h = s.harness
    pending = freeze(
        tool,
        h.validators[tool.id],
        view.tool_call_id,
        view.args,
        execution,
        actor=s.actor,
        session_id=s.id,
        agent=s.agent.name,
        task_id=s.task_id,
        skill=s.skill_name,
    )
    if isinstance(pending, PendingCall) and pending.input_hash == view.input_hash:
        return pending
    return None


def take_up_edits(s: SessionSeam, tool_call_id: str) -> None:
    """Take up the calls an operator approved with edits in another process
    (`call.superseded`): the edited call and the original's state, as the log has them."""
    h = s.harness
    edits = [
        e
        for e in h.projections.superseded.values()
        if e["session_id"] == s.id
        and e["tool_call_id"] == tool_call_id
        and f"{tool_call_id}:{e['edited_input_hash']}" not in s.state.pending
    ]
    if not edits:
        return
    hashes = {e["edited_input_hash"] for e in edits} | {e["input_hash"] for e in edits}
    restore_actions(
        s,
        [
            v
            for v in h.projections.actions_of(s.id)
            if v.tool_call_id == tool_call_id and v.input_hash in hashes
        ],
    )


def take_up_calls(s: SessionSeam) -> None:
    """Take up the actions another process recorded in this session after this process
    resumed it (the agent's calls since, asked about in an operator's process): the ones the
    session does not hold yet, as `restore_actions` does."""
    h = s.harness
    restore_actions(
        s,
        [
            v
            for v in h.projections.actions_of(s.id)
            if f"{v.tool_call_id}:{v.input_hash}" not in s.state.actions
        ],
    )


def take_up_denials(s: SessionSeam) -> None:
    """The denials recorded in this session, in any process (`task.denials`): a person's
    denial in an operator's process is the agent's task fact too."""
    view = s.harness.projections.sessions.get(s.id)
    if view is not None and len(view.denials) > len(s.task.get("denials") or ()):
        s.task["denials"] = list(view.denials)


def catch_up_session(s: SessionSeam, *, force: bool = False) -> None:
    """Before a call is decided: the session's stream as other processes left it
    (docs/runtime.md, "At most once across processes"). When another writer appended since
    the last look (`changed_elsewhere`; `force`: whatever it says), the log is folded, the
    actions recorded elsewhere are taken up and those held here take their recorded state,
    result, and UNKNOWN past a dead process's lease, and the facts another process changed
    are taken up (`Session.refresh_facts`)."""
    h = s.harness
    changed = force or h.store.changed_elsewhere()
    if changed:
        h.catch_up()
        take_up_calls(s)
        take_up_denials(s)
        s.refresh_facts()
    if changed or s.state.running_elsewhere:  # a lease may have ended since the last look
        settle_actions(s)


def settle_actions(s: SessionSeam) -> None:
    """The actions this session holds, as the log leaves them: their state and result (moved
    by another process), a winner taken in (another action of the same call ran), and a
    RUNNING action whose lease ran out recorded UNKNOWN. An action running in this process is
    left alone."""
    h = s.harness
    now = h.clock()
    for view in list(h.projections.actions_of(s.id)):
        key = f"{view.tool_call_id}:{view.input_hash}"
        if s.runs_here(key):
            continue
        held = s.held_action(key)
        if held is not None and held.action_id != view.action_id:
            if ActionState(view.state) in RAN and held.state not in RAN:
                adopt(s, key, view)
            continue
        if held is None:
            continue
        if view.state == _S.RUNNING:
            if expired(view, now):
                mark_unknown(s, held, view)
                s.state.running_elsewhere.discard(key)
                continue
            s.state.running_elsewhere.add(key)
        else:
            s.state.running_elsewhere.discard(key)
        if held.state != view.state:
            held.state = ActionState(view.state)
            held.position = view.position
        if view.result is not None:
            s.take_result(key, Result.from_dict(view.result))


def expired(view: ActionView, now: datetime) -> bool:
    """Whether the lease of a RUNNING action ended before `now` (a RUNNING transition with
    no lease, written before leases, is never taken for dead)."""
    return view.lease_until is not None and datetime.fromisoformat(view.lease_until) <= now


def mark_unknown(s: SessionSeam, action: Action, view: ActionView) -> None:
    """Record a RUNNING action whose lease ended UNKNOWN; if another process recorded its
    outcome first, take that."""
    action.state = _S.RUNNING
    try:
        action.transition(
            _S.UNKNOWN,
            reason="lost: the process running it stopped before recording the outcome "
            f"(its lease ended at {view.lease_until})",
        )
    except TransitionRefused:
        catch_up_session(s, force=True)


def adopt(s: SessionSeam, key: str, view: ActionView) -> Action:
    """Take the action `view` (the one of this call that ran) as the call's own here: another
    process ran the call under its own action id."""
    h = s.harness
    action = Action(
        h.store,
        s.id,
        view.tool_call_id,
        view.tool_id,
        ActionState(view.state),
        tool=h.spec.tools.get(view.tool_id),
        position=view.position,
        action_id=view.action_id,
    )
    held = s.held_action(key)
    if held is not None and not held.terminal and held.state not in RAN:
        held.cancel(f"the call ran as `{view.action_id}`")
    s.take_up(key, action, Result.from_dict(view.result) if view.result is not None else None)
    return action


def recorded_decision(s: SessionSeam, pending: PendingCall, action: Action) -> Decision | None:
    """The decision that let a call that ran run, as recorded (in any process), or None when
    the log holds none."""
    judged = s.judgement_of(pending.key)
    if judged is not None:
        return judged.decision
    view = s.harness.projections.actions.get(action.action_id)
    wanted = view.decision_id if view is not None else None
    found: dict[str, Any] | None = None
    for event in s.harness.store.read(s.id, flush=False):
        if event.type != "decision":
            continue
        p = event.payload
        if p.get("decision_id") == wanted or (
            wanted is None
            and (p.get("tool_call_id"), p.get("input_hash"))
            == (pending.tool_call_id, pending.input_hash)
        ):
            found = p
    if found is None:
        return None
    return Decision(
        effect=found["effect"],
        rule=found.get("rule"),
        matched=tuple(found.get("matched") or ()),
        reason=found.get("reason"),
        instead=found.get("instead"),
        approvers=tuple(Approver(kind=a["kind"], value=a["value"]) for a in found["approvers"])
        if found.get("approvers")
        else (),
        grant=None,
        default_used=bool(found.get("default_used")),
        origin=None,
        policy=found.get("policy") or "",
        tool_id=found["tool_id"],
        evidence=tuple(found.get("evidence") or ()),
    )
