"""The action lifecycle: the states a tool call moves through, the transitions allowed between
them, and an `Action` that records every transition as an event.

    REQUESTED → VALIDATED → AUTHORIZED | WAITING_APPROVAL
    WAITING_APPROVAL → AUTHORIZED → RUNNING → SUCCEEDED | FAILED
    RUNNING → ACCEPTED → WAITING_RESULT → SUCCEEDED | FAILED      (asynchronous work)
    RUNNING → UNKNOWN      (its process died: the lease ran out with no outcome recorded)
    any state that is not terminal → CANCELLED

Invalid input fails at REQUESTED → FAILED; a DENY fails at VALIDATED → FAILED (reason `denied`);
an approval that is rejected, expires or is withdrawn ends WAITING_APPROVAL → CANCELLED. A call
never runs without passing AUTHORIZED. ACCEPTED and WAITING_RESULT are for asynchronous work: an
external system took the request (ACCEPTED, with its handle) and the result will come later
(WAITING_RESULT), reported with `Harness.complete` or withdrawn with `Harness.cancel`.

Every action has an `action_id` (`act-…`), recorded in each of its events, that names it across
sessions and processes.

>>> from harnessc.runtime.model import Tool
>>> from harnessc.runtime.log.store import MemoryStore
>>> store = MemoryStore()
>>> a = Action.request(store, "s-1", Tool(id="fs.read", wire_name="fs_read"), "call-1", {"p": 1})
>>> for state in ("VALIDATED", "AUTHORIZED", "RUNNING", "SUCCEEDED"):
...     _ = a.transition(state)
>>> a.state, a.terminal
(<ActionState.SUCCEEDED: 'SUCCEEDED'>, True)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..log.events import (
    NO_SECRETS,
    REDACTED,
    Event,
    NewEvent,
    PayloadTemplate,
    Secrets,
    has_secrets,
    hole,
    json_value,
    redact,
    redact_args,
    secret_digests,
)
from ..log.store import EventStore, TransitionRefused
from ..model.canonical import NO_EXECUTION, Execution, input_hash, json_string
from ..model.ir import Tool

__all__ = [
    "LEASE_GRACE_MS",
    "TERMINAL",
    "TRANSITIONS",
    "Action",
    "ActionError",
    "ActionState",
    "IllegalTransitionError",
    "Move",
    "after_decision",
    "can_transition",
    "check_transition",
]


class ActionState(StrEnum):
    REQUESTED = "REQUESTED"
    VALIDATED = "VALIDATED"
    AUTHORIZED = "AUTHORIZED"
    WAITING_APPROVAL = "WAITING_APPROVAL"
    RUNNING = "RUNNING"
    ACCEPTED = "ACCEPTED"
    WAITING_RESULT = "WAITING_RESULT"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    UNKNOWN = "UNKNOWN"
    """It ran, or began to, in a process that stopped before recording the outcome (its lease
    ran out): it may or may not have happened, and it is never run again automatically."""


_S = ActionState
TERMINAL: frozenset[ActionState] = frozenset({_S.SUCCEEDED, _S.FAILED, _S.CANCELLED, _S.UNKNOWN})

LEASE_GRACE_MS = 30_000
"""How long past its executor's timeout a RUNNING action's lease lasts: the time its process
has to record the outcome. The RUNNING transition records where the lease ends
(`lease_until`: its time + the call's enforced timeout + this grace); past it, with no
outcome recorded, the process that ran it is taken for dead and the action is UNKNOWN."""

# INVARIANT: every non-terminal state may go to CANCELLED; terminal states go nowhere; RUNNING is
# reachable only through AUTHORIZED.
TRANSITIONS: Mapping[ActionState, frozenset[ActionState]] = {
    _S.REQUESTED: frozenset({_S.VALIDATED, _S.FAILED, _S.CANCELLED}),
    _S.VALIDATED: frozenset({_S.AUTHORIZED, _S.WAITING_APPROVAL, _S.FAILED, _S.CANCELLED}),
    _S.WAITING_APPROVAL: frozenset({_S.AUTHORIZED, _S.CANCELLED}),
    _S.AUTHORIZED: frozenset({_S.RUNNING, _S.CANCELLED}),
    _S.RUNNING: frozenset({_S.SUCCEEDED, _S.FAILED, _S.ACCEPTED, _S.CANCELLED, _S.UNKNOWN}),
    _S.ACCEPTED: frozenset({_S.WAITING_RESULT, _S.FAILED, _S.CANCELLED}),
    _S.WAITING_RESULT: frozenset({_S.SUCCEEDED, _S.FAILED, _S.CANCELLED}),
    _S.SUCCEEDED: frozenset(),
    _S.FAILED: frozenset(),
    _S.CANCELLED: frozenset(),
    _S.UNKNOWN: frozenset(),
}


class IllegalTransitionError(Exception):
    """A transition the lifecycle does not allow; nothing was recorded.

    `code` is stable (`illegal-transition`) for programs; `from_state`, `to_state` and `allowed`
    say what was attempted and what would have been legal.
    """

    code = "illegal-transition"

    def __init__(self, tool_call_id: str, from_state: ActionState, to_state: ActionState) -> None:
        self.tool_call_id = tool_call_id
        self.from_state = from_state
        self.to_state = to_state
        self.allowed: tuple[ActionState, ...] = tuple(
            sorted(TRANSITIONS[from_state], key=list(ActionState).index)
        )
        after = (
            f"one of {', '.join(s.value for s in self.allowed)}"
            if self.allowed
            else "nothing: it is terminal"
        )
        super().__init__(
            f"call `{tool_call_id}` cannot go from {from_state.value} to {to_state.value}; "
            f"from {from_state.value} it may go to {after}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "tool_call_id": self.tool_call_id,
            "from": self.from_state.value,
            "to": self.to_state.value,
            "allowed": [s.value for s in self.allowed],
        }


class ActionError(Exception):
    """A request about an action that cannot be served; nothing was recorded.

    `code` is stable: `unknown-action` (no such action id), `already-finished` (the action is
    terminal: completing or cancelling twice), `not-waiting` (only an action waiting for its
    result can be completed), `running` (it runs in this process now: wait for its result).
    `state` is the action's state when there is one.
    """

    def __init__(
        self, code: str, message: str, *, action_id: str | None = None, state: str | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.action_id = action_id
        self.state = state

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": self.message,
            "action_id": self.action_id,
            "state": self.state,
        }


def execution_record(execution: Execution | Mapping[str, Any]) -> dict[str, Any]:
    """The execution parameters as recorded: the ones given, env values redacted (a variable
    may hold a credential), a command list as a list."""
    if execution is NO_EXECUTION:
        return {}  # most calls: no parameter given
    params = execution.as_dict() if isinstance(execution, Execution) else dict(execution)
    out: dict[str, Any] = {}
    for name, value in params.items():
        if value is None:
            continue
        if name == "env" and isinstance(value, Mapping):
            value = {k: REDACTED for k in sorted(value)}
        elif isinstance(value, tuple):
            value = list(value)
        out[name] = value
    return out


def new_action_id() -> str:
    return "act-" + random_hex()


_RANDOM: list[str] = []
"""Random 64-bit ids as hex, read from the operating system 64 at a time (one system call for
64 ids instead of one each); a forked child starts with none, so it never repeats its parent's."""
if hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
    os.register_at_fork(after_in_child=_RANDOM.clear)


def random_hex() -> str:
    """16 hex digits from `os.urandom`: the random part of an action's or a decision's id.

    >>> len(random_hex()), random_hex() != random_hex()
    (16, True)
    """
    try:
        return _RANDOM.pop()  # atomic: two threads never take the same one
    except IndexError:
        block = os.urandom(512).hex()
        _RANDOM.extend([block[i : i + 16] for i in range(0, 1024, 16)])
        return _RANDOM.pop()


def can_transition(from_state: ActionState | str, to_state: ActionState | str) -> bool:
    """Whether the lifecycle allows `from_state` → `to_state`.

    >>> can_transition("WAITING_APPROVAL", "RUNNING")
    False
    """
    return ActionState(to_state) in TRANSITIONS[ActionState(from_state)]


def check_transition(
    tool_call_id: str, from_state: ActionState | str, to_state: ActionState | str
) -> None:
    """Raise `IllegalTransitionError` unless the transition is allowed."""
    a, b = ActionState(from_state), ActionState(to_state)
    if b not in TRANSITIONS[a]:
        raise IllegalTransitionError(tool_call_id, a, b)


@dataclass(frozen=True)
class Move:
    """The transition a decision asks of an action: to `state`, with `reason` when it ends
    the action."""

    state: ActionState
    reason: str | None = None


def after_decision(state: ActionState, effect: str, *, granted: bool) -> Move | None:
    """Where a decision (its `effect`, and for an ASK whether a grant authorises the call)
    takes an action in `state`; None when the action stays where it is. A DENY fails a call
    just validated and cancels one judged again; an authorised call (ALLOW, or ASK with a
    grant) becomes AUTHORIZED; an ASK without a grant waits for approval, and takes back an
    authorisation it no longer has.

    >>> after_decision(ActionState.VALIDATED, "ask", granted=False)
    Move(state=<ActionState.WAITING_APPROVAL: 'WAITING_APPROVAL'>, reason=None)
    >>> after_decision(ActionState.AUTHORIZED, "ask", granted=False).reason
    'no longer authorized'
    """
    if effect == "deny":
        if state in (_S.VALIDATED,):
            return _DENIED
        return _DENIED_AGAIN
    if effect == "allow" or (effect == "ask" and granted):
        if state in (_S.VALIDATED, _S.WAITING_APPROVAL):
            return _AUTHORIZE
        return None
    if state == _S.VALIDATED:
        return _WAIT
    if state == _S.AUTHORIZED:
        return _UNAUTHORIZE
    return None


# the moves `after_decision` makes, built once (a `Move` is immutable)
_DENIED = Move(_S.FAILED, reason="denied")
_DENIED_AGAIN = Move(_S.CANCELLED, reason="denied when judged again")
_AUTHORIZE = Move(_S.AUTHORIZED)
_WAIT = Move(_S.WAITING_APPROVAL)
_UNAUTHORIZE = Move(_S.CANCELLED, reason="no longer authorized")


def _flat_text(payload: Mapping[str, Any], written: dict[str, str] | None = None) -> str | None:
    """The canonical JSON of a transition's payload whose values are all strings or null (most
    moves: ids, states, a decision id, an executor's name), but for a `result` object (a
    `Result.to_dict()`) whose fields are each written on their own, filled into a template per
    tool, move and set of keys; None for any other payload, which the store writes. `written`
    gives the JSON text of values written already (an action's ids, written once per action)."""
    values: dict[str, str] = {} if written is None else written.copy()
    fields: tuple[str, ...] = ()
    for key, value in payload.items():
        if key in values:
            continue
        if type(value) is str:
            values[key] = json_string(value)
        elif value is None:
            values[key] = "null"
        elif key == "result" and type(value) is dict and not fields:
            fields = tuple(value)
            for name, item in value.items():
                # most of a result's fields are text or null: written here, without a call
                values["result." + name] = (
                    json_string(item)
                    if type(item) is str
                    else "null"
                    if item is None
                    else json_value(item)
                )
        else:
            return None
    shape = ("transition", payload["tool_id"], payload["from"], payload["to"], *payload, fields)
    template = _TRANSITIONS.get(shape)
    if template is None:
        if not all(key.isidentifier() for key in (*payload, *fields)):
            return None
        if len(_TRANSITIONS) > 4096:
            _TRANSITIONS.clear()
        shaped = {k: v if k in _FIXED else hole(k) for k, v in payload.items()}
        if fields:
            shaped["result"] = {name: hole("result." + name) for name in fields}
        template = _TRANSITIONS[shape] = PayloadTemplate(shaped)
    return template.fill(values)


_REQUESTS: dict[tuple[Any, ...], PayloadTemplate] = {}
"""A REQUESTED event's template per tool and set of details (`Action.request`)."""

_TRANSITIONS: dict[tuple[str | None, ...], PayloadTemplate] = {}
"""A template per tool, move and set of keys (`_flat_text`)."""
_FIXED = frozenset({"tool_id", "from", "to"})
_REQUESTED = ActionState.REQUESTED._value_


class Action:
    """One tool call's lifecycle, recorded in an event store as `action.transition` events.

    Every transition is checked first and appended second, so the log never holds an illegal
    move. One owner drives an action at a time (the runtime that holds the call); `load` picks it
    up again from the log after a restart.

    `secrets` are the call's secret values (`Secrets`), known to the action that recorded the
    request (the log never holds them, so an action loaded from it knows none until its call is
    normalized again); the recorded arguments, a result and a reason are scrubbed of them.
    """

    def __init__(
        self,
        store: EventStore,
        stream: str,
        tool_call_id: str,
        tool_id: str,
        state: ActionState,
        *,
        tool: Tool | None = None,
        position: int = 0,
        action_id: str | None = None,
    ) -> None:
        self.store = store
        self.stream = stream
        self.tool_call_id = tool_call_id
        self.tool_id = tool_id
        self.state = state
        self.tool = tool
        self.position = position
        self.action_id = action_id or new_action_id()
        self.secrets: Secrets = NO_SECRETS

    _ids: dict[str, str] | None = None
    """The JSON text of `action_id` and `tool_call_id`, written once for every move
    (`_flat_text`); None until then."""

    @classmethod
    def request(
        cls,
        store: EventStore,
        stream: str,
        tool: Tool,
        tool_call_id: str,
        args: Mapping[str, Any],
        *,
        execution: Execution | Mapping[str, Any] | None = None,
        digest: str | None = None,
        defer: bool = False,
        args_json: str | None = None,
        then: ActionState | None = None,
        hold: Callable[[Sequence[NewEvent]], None] | None = None,
        **details: Any,
    ) -> Action:
        """Record a new call as REQUESTED. The event carries the input hash (computed over the
        real arguments unless `digest` is given) and the arguments with secret fields redacted.
        `defer`: append it with the store's next commit (`EventStore.defer`). `args_json`:
        the canonical JSON of `args`, written as it is when the tool has no secret field.
        `then`: the move that follows at once (VALIDATED), appended with the request. `hold`:
        given the deferred events (a session's ledger takes them in hand, `Ledger.hold`)."""
        digest = digest or input_hash(tool.id, tool.version, args, execution)
        action = cls(store, stream, tool_call_id, tool.id, ActionState.REQUESTED, tool=tool)
        secret = has_secrets(tool)
        # the env values are withheld like secret values: from the arguments, a result, a reason
        env = execution.env if isinstance(execution, Execution) else None
        plain = args_json is not None and not secret and not env
        if not plain:
            action.secrets = Secrets.of_call(tool, args, execution)
        if execution is not None:
            details.setdefault("execution", execution_record(execution))
        payload = {
            "action_id": action.action_id,
            "tool_call_id": tool_call_id,
            "tool_id": tool.id,
            "tool_version": tool.version,
            "input_hash": digest,
            # a secret value given again in a field that is not secret is scrubbed too
            "args": args if plain else action.secrets.scrub(redact_args(tool, args)),
            "from": None,
            "to": _REQUESTED,
            **details,
        }
        if secret:
            # an argument holding a secret: its digest, so a later call is compared with it
            # (an operator's diff) without the value in the log
            digests = secret_digests(tool, args)
            if digests:
                payload["secret_digests"] = digests
        text = None
        if plain and args_json is not None:
            # the same for every call of the tool but for the ids, the hash, the arguments and
            # the details' values: a template per tool and set of details
            shape = ("requested", tool.id, tool.version, *details)
            template = _REQUESTS.get(shape)
            if template is None and all(k.isidentifier() for k in details):
                if len(_REQUESTS) > 4096:
                    _REQUESTS.clear()
                varying = ("action_id", "tool_call_id", "input_hash", "args", *details)
                template = _REQUESTS[shape] = PayloadTemplate(
                    {**payload, **{name: hole(name) for name in varying}}
                )
            if template is not None:
                values = {name: json_value(value) for name, value in details.items()}
                values.update(action.ids_text())  # written once: the moves that follow use it
                values["input_hash"] = json_string(digest)
                values["args"] = args_json
                text = template.fill(values)
        events = [NewEvent(stream, "Tool", "action.transition", payload, text)]
        target = None
        if then is not None:
            target, moved = action.move(then)
            events.append(moved)
        if defer:
            store.defer(events)
            if hold is not None:
                hold(events)
            action.moved(target)
        else:
            action.moved(target, store.append_many(events)[-1])
        return action

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    def transition(
        self,
        to: ActionState | str,
        *,
        reason: str | None = None,
        expected_seq: int | None = None,
        defer: bool = False,
        **details: Any,
    ) -> Event | None:
        """Move to `to` and append the event; an illegal move raises and records nothing.
        `defer`: append it with the store's next commit (`EventStore.defer`) and return
        None, for a move nothing acts on before that commit.

        `details` go into the event (a decision id, an approval id, an external job id); a
        `result`'s data is redacted with the tool's output schema, and the result, the handle
        and the reason are scrubbed of the call's secret values. `expected_seq` makes the
        append conditional on the stream's last sequence number (`store.ConcurrencyError`
        otherwise), for a move decided on a state read from the log.
        """
        target, new = self.move(to, reason=reason, **details)
        if defer and expected_seq is None:
            self.store.defer([new])
            self.state = target
            return None
        event = self.store.append(new, expected_seq=expected_seq)
        self.moved(target, event)
        return event

    def move(
        self, to: ActionState | str, *, reason: str | None = None, **details: Any
    ) -> tuple[ActionState, NewEvent]:
        """The state `to` and the event that records the move there, checked (an illegal move
        raises) but neither appended nor applied: `transition` does both; a caller that
        appends the event with others applies it with `moved` once it is in the log."""
        target = to if type(to) is ActionState else ActionState(to)
        if target not in TRANSITIONS[self.state]:
            raise IllegalTransitionError(self.tool_call_id, self.state, target)
        result = details.get("result") if details else None
        if result is not None and isinstance(result, Mapping) and self.tool is not None:
            if "status" in result and "data" in result:  # a `Result.to_dict()`: its data
                data = result["data"]
                plain = type(result) is dict and type(data) is dict
                if data is not None and not (plain and self.tool.output is None):
                    # (plain data under no output schema has nothing to redact: taken as it is)
                    details["result"] = {**result, "data": redact(self.tool.output, data)}
            else:  # the output itself
                details["result"] = redact(self.tool.output, result)
        if self.secrets is not NO_SECRETS and self.secrets:
            # the free text of a transition: what the executor or the caller wrote
            for key in ("result", "handle"):
                if key in details:
                    details[key] = self.secrets.scrub(details[key])
            if reason is not None:
                reason = self.secrets.text(reason)
        payload: dict[str, Any] = {
            "action_id": self.action_id,
            "tool_call_id": self.tool_call_id,
            "tool_id": self.tool_id,
            # `_value_`, the member's own attribute: `.value` goes through enum's descriptor
            "from": self.state._value_,
            "to": target._value_,
            **details,
        }
        if reason is not None:
            payload["reason"] = reason
        return target, NewEvent(
            self.stream, "Tool", "action.transition", payload, _flat_text(payload, self.ids_text())
        )

    def ids_text(self) -> dict[str, str]:
        """The JSON text of the action's ids, written once for all its events."""
        ids = self._ids
        if ids is None:
            both = type(self.action_id) is str and type(self.tool_call_id) is str
            ids = self._ids = (
                {
                    "action_id": json_string(self.action_id),
                    "tool_call_id": json_string(self.tool_call_id),
                }
                if both
                else {}  # not text: `_flat_text` leaves such a payload to the store
            )
        return ids

    def moved(self, target: ActionState | None, event: Event | None = None) -> None:
        """Take the state of a move whose event (`move`) is in the log, or deferred (no
        `event`); None keeps the state."""
        if target is not None:
            self.state = target
        if event is not None:
            self.position = event.position

    def cancel(self, reason: str) -> Event | None:
        """Cancel the action; None when another process moved it on first (it ran, or was
        answered there): the log's state stands and is taken here."""
        try:
            event = self.transition(ActionState.CANCELLED, reason=reason)
        except TransitionRefused:
            self.refresh()
            return None
        assert event is not None  # appended, never deferred
        return event

    @classmethod
    def load(
        cls, store: EventStore, stream: str, tool_call_id: str, *, tool: Tool | None = None
    ) -> Action | None:
        """The action as its stream's events leave it, or None if it was never requested."""
        action: Action | None = None
        for event in store.read(stream):
            if event.type != "action.transition":
                continue
            p = event.payload
            if p.get("tool_call_id") != tool_call_id:
                continue
            if action is None:
                action = cls(
                    store,
                    stream,
                    tool_call_id,
                    p["tool_id"],
                    ActionState(p["to"]),
                    tool=tool,
                    action_id=p.get("action_id"),
                )
            action.state = ActionState(p["to"])
            action.position = event.position
        return action

    def refresh(self) -> int:
        """Bring `state` up to date with the log (another process may have moved the action)
        and return the stream's last sequence number, for a conditional `transition`."""
        seq = 0
        for event in self.store.read(self.stream):
            seq = event.seq
            p = event.payload
            if event.type == "action.transition" and p.get("action_id") == self.action_id:
                self.state = ActionState(p["to"])
                self.position = event.position
        return seq
