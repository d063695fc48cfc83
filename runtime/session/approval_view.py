"""What an operator reads beside a pending call, besides the request itself: the tool's preview
(what the call would do), where each argument's value came from, and how the call differs from
the closest earlier call of the same tool in the session.

Everything here is read from the event log, so a console or a CLI in another process shows what
the agent's process recorded:

- the preview is a `call.previewed` event bound to the call (tool_call_id and input hash),
  recorded by the process that asked (`Harness.preview_with`) before the request;
- an argument's sources come from folding the session family's events with the `Ledger` the
  policy itself reads (one normaliser, `provenance.normalize`), up to the request;
- the earlier calls are the session's REQUESTED transitions (arguments with secrets redacted,
  and for an argument that holds a secret the digest of its value, `secret_digests`), with
  their decisions, approvals and last state.

>>> run_preview(lambda args: {"plan": f"deploy {args['v']}"}, None, {"v": "1.2"})
Preview(value={'plan': 'deploy 1.2'}, error=None)
>>> run_preview(lambda args: 1 / 0, None, {})
Preview(value=None, error='ZeroDivisionError: division by zero')
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..judge.evidence_terms import source_text
from ..judge.history import Ledger, SourcesChain
from ..log.events import REDACTED, Event, NewEvent, Secrets
from ..model.canonical import jsonable, sha256_hex
from ..model.ir import Tool

if TYPE_CHECKING:
    from ..judge.normalize import PendingCall
    from ..log.store import EventStore
    from .seams import HarnessSeam

__all__ = [
    "CALL_PREVIEWED",
    "Preview",
    "approval_view",
    "approval_views",
    "call_previewed",
    "closest_call",
    "record_preview",
    "run_preview",
]

CALL_PREVIEWED = "call.previewed"
"""The event of a call's preview (its payload: tool_id, tool_call_id, input_hash, and `preview`
or `error`)."""

_MAX_PATHS = 50
"""At most this many argument values get their sources listed."""


@dataclass(frozen=True)
class Preview:
    """A previewer's answer on one call: its output as JSON (`value`), or why it failed
    (`error`), both scrubbed of the call's secret values."""

    value: Any
    error: str | None


def run_preview(
    previewer: Callable[[dict[str, Any]], Any],
    tool: Tool | None,
    args: Mapping[str, Any],
    execution: Any = None,
) -> Preview:
    """Run the application's previewer on a call's arguments (a copy): its output made JSON,
    or the exception it raised as `Type: message`, scrubbed of every secret value of the call
    (a previewer may quote an argument), its `env` values among them. Shared by sessions and
    workflows."""
    secrets = Secrets.of(tool, args) if tool is None else Secrets.of_call(tool, args, execution)
    try:
        value = jsonable(previewer(dict(args)))
    except Exception as exc:  # the previewer is the application's code
        return Preview(None, secrets.text(f"{type(exc).__name__}: {exc}"))
    return Preview(secrets.scrub(value), None)


def call_previewed(
    stream: str, *, tool_id: str, tool_call_id: str, input_hash: str, preview: Preview
) -> NewEvent:
    """The preview of one frozen call, bound to it by tool_call_id and input hash."""
    payload: dict[str, Any] = {
        "tool_id": tool_id,
        "tool_call_id": tool_call_id,
        "input_hash": input_hash,
    }
    if preview.error is not None:
        payload["error"] = preview.error
    else:
        payload["preview"] = preview.value
    return NewEvent(stream, "Approval", CALL_PREVIEWED, payload)


def record_preview(store: EventStore, stream: str, pending: PendingCall, preview: Preview) -> None:
    """Append a frozen call's preview to its session's stream (`call.previewed`)."""
    store.append(
        call_previewed(
            stream,
            tool_id=pending.tool_id,
            tool_call_id=pending.tool_call_id,
            input_hash=pending.input_hash,
            preview=preview,
        )
    )


# ---------------------------------------------------------------------------------------------
# Reading it back


def approval_view(h: HarnessSeam, request: Mapping[str, Any]) -> dict[str, Any]:
    """`preview`, `provenance` and `diff` of an approval request (as `ApprovalRequest.to_dict`
    gives it), from the log."""
    return approval_views(h, [request])[0]


def approval_views(h: HarnessSeam, requests: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`approval_view` of many requests at once: each session family's events are read once
    and folded once, in log order, the sources of each request's arguments taken when the
    fold reaches it."""
    out: list[dict[str, Any]] = [{} for _ in requests]
    families: dict[tuple[str, ...], list[int]] = {}
    for n, request in enumerate(requests):
        families.setdefault(tuple(_family(h, request["session_id"])), []).append(n)
    for streams, members in families.items():
        family = _Fold(h, streams)
        asked = {n: _asked_at(h, requests[n]) for n in members}
        for n in sorted(members, key=asked.__getitem__):
            request = requests[n]
            previews, calls = family.session(request["session_id"])
            out[n] = {
                "preview": _preview(previews, request),
                "provenance": family.provenance(request, asked[n]),
                "diff": closest_call(calls, request, asked[n]),
            }
    return out


def _family(h: HarnessSeam, session_id: str) -> list[str]:
    """The streams whose events feed the session's ledger: its family (root and every
    descendant), as the policy that judged the call read them."""
    sessions = h.projections.sessions
    root = session_id
    seen = {root}
    while True:
        view = sessions.get(root)
        parent = view.started.get("parent") if view is not None else None
        if not isinstance(parent, str) or parent in seen:
            break
        root = parent
        seen.add(root)
    family = [root]
    for stream in family:
        family.extend(
            v.session_id
            for v in sessions.values()
            if v.started.get("parent") == stream and v.session_id not in family
        )
    return family


def _asked_at(h: HarnessSeam, request: Mapping[str, Any]) -> int:
    view = h.projections.approvals.get(request["request_id"])
    return view.position if view is not None and view.position else 1 << 62


def _previews(events: Iterable[Event]) -> dict[tuple[str, str], Event]:
    """The last `call.previewed` of each call (tool_call_id, input hash) of a session."""
    return {
        (str(e.payload.get("tool_call_id")), str(e.payload.get("input_hash"))): e
        for e in events
        if e.type == CALL_PREVIEWED
    }


def _preview(previews: dict[tuple[str, str], Event], request: Mapping[str, Any]) -> dict[str, Any]:
    found = previews.get((request["tool_call_id"], request["input_hash"]))
    effects = (request.get("impact") or {}).get("effects") or ()
    shown: dict[str, Any] = {"can_preview": "preview" in effects, "recorded": found is not None}
    if found is not None:
        shown["position"] = found.position
        shown["value"] = found.payload.get("preview")
        shown["error"] = found.payload.get("error")
    return shown


# -- provenance --------------------------------------------------------------------------------


class _Fold:
    """A session family's events, read once, and its `Ledger` fed from them in log order up to
    the request being shown (requests are taken in the order they were asked)."""

    def __init__(self, h: HarnessSeam, streams: tuple[str, ...]) -> None:
        self.streams = {stream: list(h.store.read(stream)) for stream in streams}
        self.events = sorted(
            (e for found in self.streams.values() for e in found), key=lambda e: e.position
        )
        self.ledger = Ledger(h.engine.terms)
        self.ledger.sources = SourcesChain.of(h.store)
        for stream in streams:
            self.ledger.add_stream(stream)
        self.calls: dict[int, str] = {}  # event position → the call whose result it holds
        self.next = 0
        self._sessions: dict[str, tuple[dict[tuple[str, str], Event], list[_Earlier]]] = {}

    def session(self, stream: str) -> tuple[dict[tuple[str, str], Event], list[_Earlier]]:
        """A session's previews and calls, read from its own stream once."""
        found = self._sessions.get(stream)
        if found is None:
            events = self.streams.get(stream, [])
            found = self._sessions[stream] = (_previews(events), _session_calls(events))
        return found

    def provenance(self, request: Mapping[str, Any], asked: int) -> list[dict[str, Any]]:
        """For each argument value (every scalar, by its path), its sources before the request:
        the session family's events folded by the policy's own `Ledger`."""
        events = self.events
        while self.next < len(events) and events[self.next].position < asked:
            e = events[self.next]
            call = e.payload.get("tool_call_id")
            if isinstance(call, str):
                self.calls[e.position] = call
            self.ledger.feed(e)
            self.next += 1
        shown: list[dict[str, Any]] = []
        for path, value in _leaves(request.get("arguments") or {}, ""):
            if len(shown) >= _MAX_PATHS:
                break
            if value == REDACTED:
                shown.append({"arg": path, "secret": True, "value": REDACTED, "sources": []})
                continue
            index = self.ledger.index
            if "." in path or "[" in path:
                origin = index.lookup(value)
            else:  # a top-level argument: the spec's default of it is a source too
                tool = request.get("tool_id")
                origin = index.lookup_arg(tool if isinstance(tool, str) else None, path, value)
            sources = []
            for source in origin.sources if origin is not None else ():
                call = self.calls.get(source.position) if source.tool is not None else None
                sources.append(
                    {
                        "kind": source.kind,
                        "tool": source.tool,
                        "tool_call_id": call,
                        "labels": sorted(source.labels),
                        "position": source.position,
                        "text": source_text(source, call),
                    }
                )
            shown.append({"arg": path, "secret": False, "value": value, "sources": sources})
        return shown


def _leaves(value: Any, path: str) -> Iterable[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for key, inner in value.items():
            yield from _leaves(inner, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for n, inner in enumerate(value):
            yield from _leaves(inner, f"{path}[{n}]")
    elif value is not None and not isinstance(value, bool):
        yield path, value


# -- the closest earlier call --------------------------------------------------------------------


@dataclass
class _Earlier:
    action_id: str
    tool_id: str
    tool_call_id: str
    input_hash: str
    position: int
    args: Mapping[str, Any]
    digests: Mapping[str, str]
    state: str = "REQUESTED"
    effect: str | None = None
    approval: str | None = None


def _session_calls(events: Iterable[Event]) -> list[_Earlier]:
    """Every call of a session (its own stream's events), in the order they were requested,
    with its last state, its last decision's effect and its approval's status."""
    calls: dict[str, _Earlier] = {}
    by_call: dict[tuple[str, str], _Earlier] = {}
    asked_for: dict[str, _Earlier] = {}
    for e in events:
        p = e.payload
        if e.type == "action.transition":
            action = p.get("action_id")
            if p.get("to") == "REQUESTED" and isinstance(action, str):
                call = _Earlier(
                    action,
                    str(p.get("tool_id")),
                    str(p.get("tool_call_id")),
                    str(p.get("input_hash")),
                    e.position,
                    p.get("args") or {},
                    p.get("secret_digests") or {},
                )
                calls[action] = call
                by_call.setdefault((call.tool_call_id, call.input_hash), call)
            elif action in calls and isinstance(p.get("to"), str):
                calls[action].state = p["to"]
        elif e.type == "decision":
            found = by_call.get((str(p.get("tool_call_id")), str(p.get("input_hash"))))
            if found is not None:
                found.effect = p.get("effect")
        elif e.type == "approval.requested":
            found = by_call.get((str(p.get("tool_call_id")), str(p.get("input_hash"))))
            if found is not None:
                found.approval = "pending"
                asked_for[str(p.get("approval_id"))] = found
        elif e.type == "approval.resolved":
            found = asked_for.get(str(p.get("approval_id")))
            if found is not None:
                found.approval = p.get("outcome")
    return list(calls.values())


def closest_call(
    calls: list[_Earlier], request: Mapping[str, Any], asked: int
) -> dict[str, Any] | None:
    """Of a session's calls (`_session_calls`), the earlier call of the request's tool with the
    fewest differing arguments (ties: the most recent), with its outcome and each change
    (`added`, `removed`, `changed`; a secret argument compared by its digest and shown
    masked); None when the session made no earlier call of the tool."""
    tool, key = request["tool_id"], (request["tool_call_id"], request["input_hash"])
    mine = next((c for c in calls if (c.tool_call_id, c.input_hash) == key), None)
    before = min(asked, mine.position) if mine is not None else asked
    now_args = mine.args if mine is not None else request.get("arguments") or {}
    now_digests = mine.digests if mine is not None else {}
    best: tuple[int, int, _Earlier, list[dict[str, Any]]] | None = None
    for call in calls:
        if call.tool_id != tool or call.position >= before:
            continue
        if (call.tool_call_id, call.input_hash) == key:
            continue
        changes = _changes(call.args, call.digests, now_args, now_digests)
        rank = (len(changes), -call.position)
        if best is None or rank < (best[0], best[1]):
            best = (rank[0], rank[1], call, changes)
    if best is None:
        return None
    call, changes = best[2], best[3]
    return {
        "tool_call_id": call.tool_call_id,
        "input_hash": call.input_hash,
        "action_id": call.action_id,
        "position": call.position,
        "outcome": _outcome(call),
        "state": call.state,
        "effect": call.effect,
        "approval": call.approval,
        "differing": len(changes),
        "changes": changes,
    }


def _changes(
    before: Mapping[str, Any],
    before_digests: Mapping[str, str],
    after: Mapping[str, Any],
    after_digests: Mapping[str, str],
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name in dict.fromkeys([*after, *before]):
        secret = name in before_digests or name in after_digests
        change: str | None
        if name not in before:
            change = "added"
        elif name not in after:
            change = "removed"
        elif secret and name in before_digests and name in after_digests:
            change = None if before_digests[name] == after_digests[name] else "changed"
        else:
            change = None if sha256_hex(before[name]) == sha256_hex(after[name]) else "changed"
        if change is None:
            continue
        item: dict[str, Any] = {"arg": name, "change": change, "secret": secret}
        if change != "added":
            item["before"] = REDACTED if secret else before[name]
        if change != "removed":
            item["after"] = REDACTED if secret else after[name]
        out.append(item)
    return out


def _outcome(call: _Earlier) -> str:
    """One word for how an earlier call ended (or where it stands)."""
    if call.state == "SUCCEEDED":
        return "succeeded"
    if call.state == "FAILED":
        return "denied" if call.effect == "deny" else "failed"
    if call.state == "CANCELLED":
        if call.approval == "rejected":
            return "denied"
        return "superseded" if call.approval == "superseded" else "cancelled"
    if call.approval == "approved":
        return "approved"
    if call.approval == "pending":
        return "waiting for approval"
    if call.effect == "allow":
        return "allowed"
    if call.effect == "deny":
        return "denied"
    return "asked" if call.effect == "ask" else call.state.lower()
