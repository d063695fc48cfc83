"""Accepted work of a session: completing it with its result, and cancelling an action that
has not finished. `Session.complete` and `Session.cancel` delegate here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..judge.normalize import PendingCall
from ..log.events import NewEvent
from ..log.store import ConcurrencyError
from ..model.ir import Tool
from .calls import (
    apply_on_success,
    has_side_effect,
    not_run,
    now_text,
    record_result,
    user_of,
    who_of,
)
from .executors import Result, settle
from .lifecycle import Action, ActionError, ActionState

if TYPE_CHECKING:
    from .seams import SessionSeam

__all__ = ["cancel_action", "complete_action"]

_S = ActionState


def complete_action(
    s: SessionSeam,
    action: str | PendingCall,
    data: Any = None,
    *,
    error: str | BaseException | None = None,
    by: Mapping[str, Any] | str | None = None,
) -> Result:
    """`Session.complete`: record the result of accepted work."""
    key = s.state.key_of(action)
    who = who_of(by)
    h = s.harness
    with s.state.key_lock(key):
        act = s.state.actions[key]
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
                    s.harness.store.append(
                        NewEvent(
                            s.id,
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
            accepted = s.state.results.get(key) or placeholder(s, act, tool)
            final = settle(
                tool,
                s.state.pending.get(key),
                accepted,
                data,
                error,
                by=who,
                finished=h.clock(),
                output=h.outputs.get(tool.id),
            )
            try:
                final = record_result(act, tool, final, completed_by=who, expected_seq=seq)
            except ConcurrencyError:
                continue  # another writer moved the stream: read the log again
            s.state.results[key] = final
            apply_on_success(s, tool, s.state.pending.get(key), final)
            return final


def cancel_action(
    s: SessionSeam,
    action: str | PendingCall,
    *,
    reason: str = "cancelled",
    by: Mapping[str, Any] | str | None = None,
) -> Result:
    """`Session.cancel`: cancel an action that has not finished."""
    key = s.state.key_of(action)
    who = who_of(by)
    h = s.harness
    with s.state.key_lock(key):
        act = s.state.actions[key]
        if key in s.state.running:
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
                base = s.state.results.get(key) or placeholder(s, act, tool)
                side = base.side_effect or (tool is not None and has_side_effect(tool))
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
                    finished_at=now_text(h),
                    state=_S.CANCELLED.value,
                    completed_by=who,
                )
            else:
                result = not_run(
                    s,
                    act,
                    "cancelled",
                    f"`{act.tool_id}` may not run: the call was cancelled ({reason})",
                    _S.CANCELLED.value,
                    s.state.judged.get(key),
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
        s.state.results[key] = result
    for req in list(h.approvals.requests.values()):
        if (
            req.session_id == s.id
            and req.status == "pending"
            and f"{req.tool_call_id}:{req.input_hash}" == key
        ):
            h.approvals.resolve(req.request_id, "withdrawn", who, reason=reason)
    return result


def placeholder(s: SessionSeam, act: Action, tool: Tool | None) -> Result:
    return Result(
        tool_id=act.tool_id,
        tool_call_id=act.tool_call_id,
        input_hash=s.state.hash_of(act),
        status="unknown",
        data=None,
        observation="",
        error=None,
        error_category=None,
        retryable=False,
        side_effect=tool is not None and has_side_effect(tool),
        executor=None,
        actor=user_of(s.actor),
        started_at=None,
        finished_at=None,
        duration_ms=0.0,
        state=act.state.value,
        action_id=act.action_id,
    )
