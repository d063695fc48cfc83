"""Evidence: per session, what was called, with what input hash, what came back and what it
proves — derived from the event log alone, linking decision → action → result.

A tool result is evidence, not a verdict: it says what happened to one frozen call, under which
decision (and policy version), approved by whom, and what its output shows. Whether the task is
done is the planner's judgement over this evidence.

>>> from harnessc.runtime.log.store import MemoryStore
>>> build_evidence(MemoryStore(), "s-1").items
()
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..log.events import Event
from ..log.store import EventStore

__all__ = ["Evidence", "EvidenceItem", "build_evidence"]


@dataclass(frozen=True)
class EvidenceItem:
    """One frozen call's evidence; `positions` are the events it was derived from."""

    session_id: str
    tool_id: str | None
    tool_call_id: str
    input_hash: str | None
    state: str | None
    decision_id: str | None = None
    effect: str | None = None
    rule: str | None = None
    policy_version: str | None = None
    approval_id: str | None = None
    approved_by: str | None = None
    grant_id: str | None = None
    status: str | None = None
    data: Any = None
    observation: str | None = None
    side_effect: bool | None = None
    action_id: str | None = None
    handle: str | None = None
    """The external system's id for accepted (asynchronous) work."""
    completed_by: str | None = None
    """Who reported the result of accepted work."""
    late: str | None = None
    """`returned` / `raised` when an executor finished after its timeout, `completed` /
    `failed` when a result came after the action was cancelled: never used as the result."""
    proves: str = ""
    positions: tuple[int, ...] = ()
    session_evidence: tuple[str, ...] = ()
    """What the session showed the decision's rule (provenance, history), when it read it."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Evidence:
    """The evidence of a session (and of its child and skill sessions), in call order."""

    session_id: str
    items: tuple[EvidenceItem, ...] = ()
    sessions: tuple[str, ...] = field(default_factory=tuple)

    def for_call(self, tool_call_id: str) -> tuple[EvidenceItem, ...]:
        return tuple(i for i in self.items if i.tool_call_id == tool_call_id)

    def succeeded(self) -> tuple[EvidenceItem, ...]:
        return tuple(i for i in self.items if i.status in ("success", "partial"))


def build_evidence(store: EventStore, session_id: str, children: Iterable[str] = ()) -> Evidence:
    """Fold the events of a session (and the given child sessions) into evidence."""
    streams = (session_id, *children)
    items: dict[tuple[str, str, str | None], dict[str, Any]] = {}
    approvals: dict[str, dict[str, Any]] = {}
    for stream in streams:
        for event in store.read(stream):
            _apply(items, approvals, event)
    out = tuple(_item(v) for v in items.values())
    return Evidence(session_id, out, tuple(streams))


def _key(event: Event, p: dict[str, Any]) -> tuple[str, str, str | None]:
    return (event.stream, p["tool_call_id"], p.get("input_hash"))


def _find(
    items: dict[tuple[str, str, str | None], dict[str, Any]], stream: str, call_id: str
) -> dict[str, Any] | None:
    # the latest call with this id in this stream (a changed call is a new entry)
    found = None
    for (s, c, _), item in items.items():
        if s == stream and c == call_id:
            found = item
    return found


def _by_action(
    items: dict[tuple[str, str, str | None], dict[str, Any]], action_id: str | None
) -> dict[str, Any] | None:
    if not action_id:
        return None
    for item in items.values():
        if item.get("action_id") == action_id:
            return item
    return None


def _apply(
    items: dict[tuple[str, str, str | None], dict[str, Any]],
    approvals: dict[str, dict[str, Any]],
    event: Event,
) -> None:
    p = event.payload
    t = event.type
    if t == "action.transition":
        if p.get("from") is None:
            items[_key(event, p)] = {
                "session_id": event.stream,
                "tool_id": p.get("tool_id"),
                "tool_call_id": p["tool_call_id"],
                "input_hash": p.get("input_hash"),
                "state": p["to"],
                "action_id": p.get("action_id"),
                "positions": [event.position],
            }
            return
        # by action id when recorded: a reused tool_call_id with other arguments is another
        # call, and the latest one is not necessarily the one moving
        item = _by_action(items, p.get("action_id")) or _find(
            items, event.stream, p["tool_call_id"]
        )
        if item is None:
            return
        item["state"] = p["to"]
        item["positions"].append(event.position)
        result = p.get("result")
        if isinstance(result, dict):
            item.update(
                status=result.get("status"),
                data=result.get("data"),
                observation=result.get("observation"),
                side_effect=result.get("side_effect"),
                completed_by=result.get("completed_by"),
            )
        if p.get("handle"):
            item["handle"] = p["handle"]
        if p.get("grant_id"):
            item["grant_id"] = p["grant_id"]
    elif t == "action.late_result":
        item = _by_action(items, p.get("action_id")) or _find(
            items, event.stream, p.get("tool_call_id") or ""
        )
        if item is not None:
            item["late"] = p.get("outcome")
            item["positions"].append(event.position)
    elif t == "decision":
        item = items.get(_key(event, p)) or _find(items, event.stream, p["tool_call_id"])
        if item is None:
            return
        item.update(
            decision_id=p["decision_id"],
            effect=p.get("effect"),
            rule=p.get("rule"),
            policy_version=p.get("policy_version"),
            session_evidence=tuple(p.get("evidence") or ()),
        )
        item["positions"].append(event.position)
    elif t == "approval.requested":
        approvals[p["approval_id"]] = {
            "tool_call_id": p.get("tool_call_id"),
            "stream": event.stream,
        }
        item = _find(items, event.stream, p.get("tool_call_id") or "")
        if item is not None:
            item["approval_id"] = p["approval_id"]
            item["positions"].append(event.position)
    elif t == "approval.resolved":
        link = approvals.get(p["approval_id"])
        if link is not None:
            item = _find(items, link["stream"], link["tool_call_id"] or "")
            if item is not None and p.get("outcome") == "approved":
                item["approved_by"] = p.get("by")
                item["positions"].append(event.position)
    elif t == "grant.used":
        item = _find(items, event.stream, p.get("tool_call_id") or "")
        if item is not None:
            item["grant_id"] = p["grant_id"]
            item["positions"].append(event.position)


def _proves(v: dict[str, Any]) -> str:
    tool = f"`{v.get('tool_id')}`"
    status = v.get("status")
    why = ""
    if v.get("decision_id"):
        rule = v.get("rule") or "the policy default"
        why = f" under decision {v['decision_id']} ({v.get('effect')}, {rule})"
        if v.get("session_evidence"):
            why += " [" + "; ".join(v["session_evidence"]) + "]"
    if v.get("approved_by"):
        why += f", approved by {v['approved_by']}"
    if status == "success":
        keys = ", ".join(sorted(v["data"])) if isinstance(v.get("data"), dict) else ""
        shown = f" and returned {keys}" if keys else ""
        return f"{tool} ran with input {str(v.get('input_hash'))[:12]}…{why}{shown}"
    if status == "partial":
        return f"{tool} ran{why} and did part of its work; the rest is not proven"
    if status == "accepted":
        handle = f" as `{v['handle']}`" if v.get("handle") else ""
        return f"{tool} was accepted{handle}{why}; its result has not come: it proves nothing yet"
    if status == "unknown":
        side = "a side effect may have happened" if v.get("side_effect") else "nothing changed"
        late = ""
        if v.get("late") in ("returned", "raised"):
            late = f"; it {v['late']} after its timeout, unused"
        elif v.get("late"):
            late = f"; a result ({v['late']}) came after it was cancelled, unused"
        how = "cancelled" if v.get("state") == "CANCELLED" else "started"
        return f"{tool} was {how}{why} but its outcome is unknown; {side}{late}"
    if status == "failure":
        side = "a side effect may have happened" if v.get("side_effect") else "nothing changed"
        return f"{tool} failed{why}: it proves nothing about its goal; {side}"
    state = v.get("state")
    if state == "FAILED" and v.get("effect") == "deny":
        return f"{tool} was denied{why}; it did not run"
    if state == "CANCELLED":
        return f"{tool} was cancelled; it did not run"
    if state == "WAITING_APPROVAL":
        return f"{tool} waits for approval; it has not run"
    return f"{tool} has not run (state {state})"


def _item(v: dict[str, Any]) -> EvidenceItem:
    return EvidenceItem(
        session_id=v["session_id"],
        tool_id=v.get("tool_id"),
        tool_call_id=v["tool_call_id"],
        input_hash=v.get("input_hash"),
        state=v.get("state"),
        decision_id=v.get("decision_id"),
        effect=v.get("effect"),
        rule=v.get("rule"),
        policy_version=v.get("policy_version"),
        approval_id=v.get("approval_id"),
        approved_by=v.get("approved_by"),
        grant_id=v.get("grant_id"),
        status=v.get("status"),
        data=v.get("data"),
        observation=v.get("observation"),
        side_effect=v.get("side_effect"),
        action_id=v.get("action_id"),
        handle=v.get("handle"),
        completed_by=v.get("completed_by"),
        late=v.get("late"),
        proves=_proves(v),
        positions=tuple(v["positions"]),
        session_evidence=tuple(v.get("session_evidence") or ()),
    )
