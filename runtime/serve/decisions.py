"""Decision logs in the shape OPA's users know, read from the event log.

Each `decision` event the runtime recorded becomes one entry: `decision_id`, `path` (the policy
judged), `input_hash` (the call's canonical hash: the tool, its version, the arguments and the
execution parameters), `input` (who asked for what: session, agent, actor, tool, tool_call_id;
never the arguments, which may hold secrets and are in the log under the hash), `result` (the
effect, rule, reason, whether the call was authorised), `revision` (the policy version: the
spec's content hash) and `timestamp` (when it was recorded). `position` is the event's in the
log: pass the last one as `after` to read on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..log.store import EventStore
from .models import DecisionLogEntry

PAGE = 1000


def decision_entries(
    store: EventStore, *, after: int = 0, scanned: list[int] | None = None
) -> Iterator[DecisionLogEntry]:
    """Every decision recorded after position `after`, oldest first (`scanned[0]`: the last
    position read so far)."""
    actors: dict[str, Any] = {}
    while True:
        events = store.read(after=after, limit=PAGE)
        if not events:
            return
        for event in events:
            after = event.position
            if scanned is not None:
                scanned[0] = after
            if event.type == "session.started":
                actors[event.stream] = event.payload.get("actor")
            if event.type != "decision":
                continue
            p = event.payload
            input_doc: dict[str, Any] = {
                "session_id": event.stream,
                "agent": p.get("agent"),
                "skill": p.get("skill"),
                "tool_id": p.get("tool_id"),
                "tool_call_id": p.get("tool_call_id"),
            }
            if event.stream in actors:
                input_doc["actor"] = actors[event.stream]
            yield DecisionLogEntry(
                decision_id=p["decision_id"],
                path="harnessc/" + str(p.get("policy")),
                input_hash=p.get("input_hash") or "",
                input=input_doc,
                result={
                    "effect": p.get("effect"),
                    "rule": p.get("rule"),
                    "matched": p.get("matched", []),
                    "reason": p.get("reason"),
                    "authorized": p.get("authorized"),
                    "grant_id": p.get("grant_id"),
                },
                revision=p.get("policy_version") or "",
                timestamp=_time(event.time),
                position=event.position,
            )


def decision_log(
    store: EventStore, *, after: int = 0, limit: int = 100
) -> tuple[list[DecisionLogEntry], int]:
    """Up to `limit` decisions after position `after`, and the position to read on from (the
    last decision's when `limit` were found, else the last event's read)."""
    out: list[DecisionLogEntry] = []
    scanned = [after]
    for entry in decision_entries(store, after=after, scanned=scanned):
        out.append(entry)
        if len(out) >= limit:
            return out, entry.position
    return out, scanned[0]


def _time(value: Any) -> str:
    iso = getattr(value, "isoformat", None)
    return iso() if iso is not None else str(value)
