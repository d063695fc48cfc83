"""A session taken up from the log (`Harness.resume`): its actions in the state the log leaves
them, each frozen call rebuilt when its recorded arguments give the recorded input hash."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..judge.normalize import PendingCall, freeze
from ..log.projections import ActionView
from ..model.canonical import Execution
from ..model.ir import Tool
from .executors import Result
from .lifecycle import Action, ActionState

if TYPE_CHECKING:
    from .sessions import Session

__all__ = ["rebuild_call", "restore_actions", "take_up_calls", "take_up_edits"]


def restore_actions(s: Session, views: list[ActionView]) -> None:
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
        s._actions[key] = action
        s._index(action, key)
        if view.result is not None:
            s._results[key] = Result.from_dict(view.result)
        pending = rebuild_call(s, view, tool) if tool is not None else None
        if pending is not None:
            s._pending[key] = pending
            s._attach_requests(pending)


def rebuild_call(s: Session, view: ActionView, tool: Tool) -> PendingCall | None:
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


def take_up_edits(s: Session, tool_call_id: str) -> None:
    """Take up the calls an operator approved with edits in another process
    (`call.superseded`): the edited call and the original's state, as the log has them."""
    h = s.harness
    edits = [
        e
        for e in h.projections.superseded.values()
        if e["session_id"] == s.id
        and e["tool_call_id"] == tool_call_id
        and f"{tool_call_id}:{e['edited_input_hash']}" not in s._pending
    ]
    if not edits:
        return
    hashes = {e["edited_input_hash"] for e in edits} | {e["input_hash"] for e in edits}
    restore_actions(
        s,
        [
            v
            for v in h.projections.actions.values()
            if v.stream == s.id and v.tool_call_id == tool_call_id and v.input_hash in hashes
        ],
    )


def take_up_calls(s: Session) -> None:
    """Take up the actions another process recorded in this session after this process
    resumed it (the agent's calls since, asked about in an operator's process): the ones the
    session does not hold yet, as `restore_actions` does."""
    h = s.harness
    restore_actions(
        s,
        [
            v
            for v in h.projections.actions.values()
            if v.stream == s.id and f"{v.tool_call_id}:{v.input_hash}" not in s._actions
        ],
    )
