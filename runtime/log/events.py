"""Events, the runtime's source of truth: their shape, their hash chain, the event vocabulary and
the redaction of secret arguments before anything is stored.

An event is appended to a stream (a session id, a workflow run) and gets three numbers from the
store: `seq` (1, 2, 3 … within its stream), `position` (1, 2, 3 … across the whole log) and a
`hash`: SHA-256 over the canonical JSON of the event without its hash, whose `prev_hash` is the
hash of the event at `position - 1` (64 zeros for the first). One chain covers the whole log, so
removing, reordering or editing any event breaks every later link.

>>> e = NewEvent("session-1", "State", "session.started", {"agent": "planner"})
>>> e.kind, e.type
('State', 'session.started')
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from ..model.canonical import CanonicalError, canonical_json, json_string, sha256_hex
from ..model.ir import Schema, Tool, Type

__all__ = [
    "DECISION_DIVERGED",
    "GENESIS_HASH",
    "HARNESS_STREAM",
    "KINDS",
    "MCP_TOOLS_CHANGED",
    "NO_SECRETS",
    "REDACTED",
    "SHORT_SECRET",
    "Clock",
    "Event",
    "EventError",
    "NewEvent",
    "PayloadTemplate",
    "Secrets",
    "StoreError",
    "UnreadableEvent",
    "approval_requested",
    "approval_resolved",
    "call_superseded",
    "decision",
    "decision_diverged",
    "event_hash",
    "format_time",
    "grant_issued",
    "grant_revoked",
    "grant_spent",
    "grant_used",
    "has_secrets",
    "hole",
    "json_value",
    "mark_stored",
    "mcp_tools_changed",
    "payload_text",
    "read_payload",
    "redact",
    "redact_args",
    "secret_digests",
    "session_ended",
    "session_started",
    "short_text",
    "system_clock",
]

KINDS: tuple[str, ...] = (
    "Text",
    "Progress",
    "Tool",
    "State",
    "Approval",
    "Artifact",
    "Error",
    "Usage",
)
GENESIS_HASH = "0" * 64
HARNESS_STREAM = "harness"
WORKFLOW_SOURCES = "workflow.sources"
"""A workflow step's sources, recorded once in its session: the run's `input` (of kind
`user`) and the `results` of the call steps before it (each of its tool's trust and labels),
or only what changed since an earlier step's, whose stream it names (`after`)."""
"""The stream of the harness's own events (a spec loaded, the log's checkpoints)."""
REDACTED = "[REDACTED]"

Clock = Callable[[], datetime]
"""Returns the current time, timezone-aware; injected so tests and replays are deterministic."""


def system_clock() -> datetime:
    return datetime.now(UTC)


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC with microseconds: `2026-05-09T07:35:25.000000Z`.

    >>> format_time(datetime(2026, 5, 9, 7, 35, 25, tzinfo=UTC))
    '2026-05-09T07:35:25.000000Z'
    """
    if moment.tzinfo is None:
        raise EventError("the clock returned a time without a timezone")
    if moment.tzinfo is not UTC:
        moment = moment.astimezone(UTC)
    # isoformat is C code and writes the same digits as the strftime pattern
    # `%Y-%m-%dT%H:%M:%S.%fZ` (whose `%Y` would not pad a year before 1000), then `+00:00`
    return moment.isoformat(timespec="microseconds")[:-6] + "Z"


class StoreError(RuntimeError):
    """The store cannot do what was asked (closed, a newer file format, a row it cannot
    read, …)."""


class UnreadableEvent(StoreError):
    """A stored event this version cannot read: a payload that is not a JSON object, or not
    the record its type names. The log was written by something else or changed under it;
    `harnessc log verify` says whether the chain vouches for the row."""

    def __init__(self, position: int, type: str, reason: str) -> None:
        self.position = position
        self.type = type
        super().__init__(
            f"the event at position {position} (`{short_text(type, 80)}`) cannot be read: {reason}"
        )

    @classmethod
    def of_shape(cls, position: int, type: str, error: Exception) -> UnreadableEvent:
        """A payload without the fields its type has: what reading it raised, as the reason."""
        return cls(
            position, type, f"it is not a `{type}` record ({error.__class__.__name__}: {error})"
        )


def read_payload(position: int, type: str, text: Any) -> dict[str, Any]:
    """A stored event's payload text as data: `UnreadableEvent` when it is not UTF-8 text
    holding a JSON object (what every reader of the log takes it to be)."""
    if not isinstance(text, str):
        raise UnreadableEvent(position, type, "its payload is not UTF-8 text")
    try:
        value = json.loads(text)
    except ValueError as error:
        raise UnreadableEvent(position, type, f"its payload is not JSON ({error})") from None
    except RecursionError:
        raise UnreadableEvent(position, type, "its payload nests too deeply") from None
    if value.__class__ is not dict:
        raise UnreadableEvent(position, type, "its payload is not a JSON object")
    return value


def short_text(value: Any, limit: int) -> str:
    """`value` (its `repr` unless a string) cut to `limit` characters, the last one `…`."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class EventError(ValueError):
    """An event that cannot be appended (unknown kind, missing decision id, …)."""


_SHA256_HEX = frozenset("0123456789abcdef")


def _is_sha256(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and set(value) <= _SHA256_HEX


_CHECKED_VERSIONS: set[object] = set()
"""Policy versions of decision events already found to be SHA-256 digests."""

_CHECKED_NAMES: set[tuple[str, str, str]] = set()
"""Streams, kinds and types already checked: a session writes the same few over and over."""


def _check_names(stream: object, kind: object, type_: object) -> None:
    if not isinstance(stream, str) or not stream:
        raise EventError("an event needs a non-empty stream")
    if kind not in KINDS:
        raise EventError(f"unknown event kind `{kind}`; expected one of {', '.join(KINDS)}")
    if not isinstance(type_, str) or not type_:
        raise EventError("an event needs a non-empty type")
    try:
        canonical_json([stream, type_])
    except CanonicalError as err:
        raise EventError(f"an event's stream or type is not JSON text: {err}") from None
    if len(_CHECKED_NAMES) > 4096:
        _CHECKED_NAMES.clear()
    _CHECKED_NAMES.add((stream, kind, type_))


@dataclass(frozen=True)
class NewEvent:
    """An event before the store numbers it. `payload` is a JSON object.

    A `decision` event must carry `decision_id` and `policy_version` (the spec's content hash),
    so every decision names the policy that made it.
    """

    stream: str
    kind: str
    type: str
    payload: Mapping[str, Any] = field(default_factory=dict)
    payload_json: str | None = field(default=None, compare=False, repr=False)
    """The canonical JSON of `payload` when the code that built the event wrote it already
    (from parts whose canonical form it holds, such as a call's normalized arguments); the
    store writes and hashes it instead of canonicalizing `payload` again."""
    stored: Event | None = field(default=None, init=False, compare=False, repr=False)
    """The event as committed, for a deferred one (`EventStore.defer`): set by the store that
    commits it (`mark_stored`), None until then and for ever when the commit left it out. A
    reader holding the deferred event learns its position and time without reading the log."""

    def __init__(
        self,
        stream: str,
        kind: str,
        type: str,
        payload: Mapping[str, Any] | None = None,
        payload_json: str | None = None,
    ) -> None:
        # written here rather than generated: a frozen dataclass's own __init__ sets each field
        # through object.__setattr__, which is most of the cost of an event built per call
        if payload is None:
            payload = {}
        if not (
            stream.__class__ is str
            and kind.__class__ is str
            and type.__class__ is str
            and (stream, kind, type) in _CHECKED_NAMES
        ):
            _check_names(stream, kind, type)
        if payload.__class__ is not dict and not isinstance(payload, Mapping):
            raise EventError("an event payload must be a JSON object")
        if type == "decision":
            if not payload.get("decision_id"):
                raise EventError("a decision event needs a `decision_id`")
            version = payload.get("policy_version")
            if version not in _CHECKED_VERSIONS:
                if not (
                    isinstance(version, str) and len(version) == 64 and set(version) <= _SHA256_HEX
                ):
                    raise EventError(
                        "a decision event needs the spec's content hash as `policy_version`"
                    )
                if len(_CHECKED_VERSIONS) > 64:
                    _CHECKED_VERSIONS.clear()
                _CHECKED_VERSIONS.add(version)
        fields = self.__dict__
        fields["stream"] = stream
        fields["kind"] = kind
        fields["type"] = type
        fields["payload"] = payload
        fields["payload_json"] = payload_json
        fields["stored"] = None


@dataclass(frozen=True)
class Event:
    """A stored event. `payload_json` is the canonical JSON the hash covers; `payload` parses it."""

    position: int
    stream: str
    seq: int
    kind: str
    type: str
    payload_json: str
    time: str
    prev_hash: str
    hash: str
    mac: str | None = None
    """HMAC-SHA256 of `hash` under the log key (runtime/log/integrity.py), when the log has one;
    outside the hash, which stays checkable without the key."""

    def __init__(
        self,
        position: int,
        stream: str,
        seq: int,
        kind: str,
        type: str,
        payload_json: str,
        time: str,
        prev_hash: str,
        hash: str,
        mac: str | None = None,
    ) -> None:
        # as NewEvent's: one dictionary update instead of a setattr per field
        self.__dict__.update(
            position=position,
            stream=stream,
            seq=seq,
            kind=kind,
            type=type,
            payload_json=payload_json,
            time=time,
            prev_hash=prev_hash,
            hash=hash,
            mac=mac,
        )

    @cached_property
    def payload(self) -> dict[str, Any]:
        """The payload as data; `UnreadableEvent` when the stored text is not a JSON object
        (a row written by something else, or changed under the log)."""
        return read_payload(self.position, self.type, self.payload_json)

    def body(self) -> dict[str, Any]:
        """The event without its hash: what the hash is computed over."""
        return {
            "position": self.position,
            "stream": self.stream,
            "seq": self.seq,
            "kind": self.kind,
            "type": self.type,
            "payload": self.payload,
            "time": self.time,
            "prev_hash": self.prev_hash,
        }

    def to_dict(self) -> dict[str, Any]:
        return {**self.body(), "hash": self.hash}


def mark_stored(committed: Sequence[NewEvent], stored: Sequence[Event]) -> None:
    """Note on each deferred event the event a commit wrote for it (`NewEvent.stored`), in
    order; called by the store once the commit holds, before the events leave `held`."""
    for new, event in zip(committed, stored, strict=True):
        new.__dict__["stored"] = event


def event_hash(
    *,
    position: int,
    stream: str,
    seq: int,
    kind: str,
    type: str,
    payload_json: str,
    time: str,
    prev_hash: str,
) -> str:
    """SHA-256 over the canonical JSON of the event without its hash.

    The text is assembled around the stored payload text (keys in canonical order), so a
    verifier hashes exactly the bytes on disk; for a canonical payload it equals
    `sha256_hex(event.body())`.
    """
    text = (
        f'{{"kind":{json_string(kind)},"payload":{payload_json},"position":{position},'
        f'"prev_hash":{json_string(prev_hash)},"seq":{seq},"stream":{json_string(stream)},'
        f'"time":{json_string(time)},"type":{json_string(type)}}}'
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------------------------
# Payload text from parts held already

_HOLE = "\x00hole-" + os.urandom(12).hex() + "-"
"""A prefix no payload value holds (a NUL and a random tag, new in every process), marking
where `payload_text` puts a value's JSON text."""


def hole(name: str) -> str:
    """The placeholder of `name` in a payload given to `payload_text` or `PayloadTemplate`."""
    return _HOLE + name


def payload_text(payload: Mapping[str, Any], raw: Mapping[str, str]) -> str:
    """The canonical JSON of `payload` in which each value named in `raw` is `hole(name)` and
    is written as the JSON text `raw` gives (canonical already, such as a call's normalized
    arguments), so it is not walked and written again.

    >>> payload_text({"a": 1, "args": hole("args")}, {"args": '{"x":2}'})
    '{"a":1,"args":{"x":2}}'
    """
    return PayloadTemplate(payload).fill(raw)


class PayloadTemplate:
    """A payload's canonical JSON with holes (`hole(name)` as values) to fill with JSON text:
    for an event whose payload is the same call after call but for a few values, written once
    and filled each time.

    >>> t = PayloadTemplate({"effect": "allow", "decision_id": hole("id")})
    >>> t.fill({"id": json_string("dec-1")})
    '{"decision_id":"dec-1","effect":"allow"}'
    """

    __slots__ = ("_format", "_values")

    def __init__(self, payload: Mapping[str, Any]) -> None:
        text = canonical_json(payload)
        # split the text at each hole's JSON string: the holes' names sit between the parts
        marker = json_string(_HOLE)[:-1]  # the opening quote and the prefix
        parts: list[str] = []
        names: list[str] = []
        rest = text
        while True:
            at = rest.find(marker)
            if at < 0:
                parts.append(rest)
                break
            end = rest.index('"', at + len(marker))
            parts.append(rest[:at])
            names.append(rest[at + len(marker) : end])
            rest = rest[end + 1 :]
        # filled with one `%` of the values in the holes' order, taken by one itemgetter
        self._format = "%s".join(part.replace("%", "%%") for part in parts)
        self._values: Callable[[Mapping[str, str]], tuple[str, ...]]
        if len(names) > 1:
            self._values = operator.itemgetter(*names)
        else:  # itemgetter of one name gives the value, not a tuple

            def values_of(values: Mapping[str, str]) -> tuple[str, ...]:
                return tuple(values[name] for name in names)

            self._values = values_of

    def fill(self, values: Mapping[str, str]) -> str:
        """The text with each hole replaced by the JSON text `values` gives for its name."""
        return self._format % self._values(values)


def json_value(value: Any) -> str:
    """The canonical JSON text of a value (a string, boolean or null written directly)."""
    if type(value) is str:
        return json_string(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is dict and not value:
        return "{}"
    if type(value) is float and math.isfinite(value):
        # a float whose shortest form is positional and not integral is written as it is
        # (`canonical_json` writes the others: `1.0` as `1`, `1e+20` without the exponent)
        text = repr(value)
        if "e" not in text and not text.endswith(".0"):
            return text
    return canonical_json(value)


# ---------------------------------------------------------------------------------------------
# Secret redaction


def redact(schema: Schema | None, args: Any) -> Any:
    """A copy of `args` with every value of a `secret` field replaced by `"[REDACTED]"`.

    Nested objects, lists of objects and maps of objects are walked; a secret field is redacted
    whole whatever its type. Keys the schema does not declare are kept (validation refuses them
    before a call gets this far).

    >>> from harnessc.runtime.model import Field, Type
    >>> s = Schema(fields=(Field(name="token", type=Type(name="string"), secret=True),))
    >>> redact(s, {"token": "hunter2", "user": "ana"})
    {'token': '[REDACTED]', 'user': 'ana'}
    """
    if schema is not None and schema.shape is not None:
        # an output written as a type (`output list<{ token: string secret }>`)
        return _redact_value(schema.shape, args)
    if not isinstance(args, Mapping):
        return args
    if schema is None:
        return dict(args)
    return _redact_fields(schema.fields, args)


_SECRET_TOOLS: dict[int, tuple[Tool, bool]] = {}


def has_secrets(tool: Tool) -> bool:
    """Whether an input field of the tool or of one of its operations is `secret`, at any
    depth (remembered per tool: a tool is immutable)."""
    known = _SECRET_TOOLS.get(id(tool))
    if known is not None and known[0] is tool:
        return known[1]
    schemas = [tool.input, *(op.input for op in tool.operations.values())]
    found = any(s is not None and _any_secret(s.fields) for s in schemas)
    if len(_SECRET_TOOLS) > 4096:
        _SECRET_TOOLS.clear()
    _SECRET_TOOLS[id(tool)] = (tool, found)
    return found


def _any_secret(fields: tuple[Any, ...]) -> bool:
    for f in fields:
        if f.secret:
            return True
        t = f.type
        while t is not None:
            if t.fields and _any_secret(t.fields):
                return True
            t = t.item
    return False


def redact_args(tool: Tool, args: Mapping[str, Any]) -> dict[str, Any]:
    """`redact` with the tool's input schema (which includes its operations' fields)."""
    out: dict[str, Any] = redact(tool.input, args)  # an input is a record: so is its copy
    for operation in tool.operations.values():
        if operation.input is not None:
            out = redact(operation.input, out)
    return out


def secret_digests(tool: Tool, args: Mapping[str, Any]) -> dict[str, str]:
    """For each argument that holds a secret value (a `secret` field, or one inside it), the
    SHA-256 of the tool id, the argument's name and its value: two calls' secret arguments are
    compared by it without the value being stored. (It tells no more than the call's input
    hash, which covers the same values.)"""
    redacted = redact_args(tool, args)
    return {
        name: sha256_hex({"tool": tool.id, "arg": name, "value": value})
        for name, value in args.items()
        if redacted.get(name) != value
    }


def _redact_fields(fields: tuple[Any, ...], value: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(value)
    for f in fields:
        if f.name not in out:
            continue
        out[f.name] = REDACTED if f.secret else _redact_value(f.type, out[f.name])
    return out


def _redact_value(type_: Type, value: Any) -> Any:
    if type_.name == "object" and isinstance(value, Mapping):
        return _redact_fields(type_.fields, value)
    if type_.name == "list" and type_.item is not None and isinstance(value, list | tuple):
        return [_redact_value(type_.item, item) for item in value]
    if type_.name == "map" and type_.item is not None and isinstance(value, Mapping):
        return {k: _redact_value(type_.item, v) for k, v in value.items()}
    if type_.name == "union":
        # whichever alternative the value is, the secret fields of each are withheld
        for option in type_.options:
            value = _redact_value(option, value)
    return value


SHORT_SECRET = 8
"""A secret value shorter than this many characters is never replaced inside a text: the text
is withheld whole (`"[REDACTED]"`), since the gaps a replacement leaves in `"pin 0042 ok"`
would tell a reader the value."""


@dataclass(frozen=True)
class Secrets:
    """The secret values of one call (or of every call of a session), to scrub from free text
    that reaches a record: an executor's error or observation, its output data, a preview, a
    verifier's verdict, a late result, a refusal quoting an argument.

    Every value of a `secret` input field is taken (a secret object or list: each of its
    leaves); a string with the forms it takes once quoted (its `repr`, its JSON escape), a
    number as `str()` writes it. Empty strings, booleans and nulls are not values to hide.
    `scrub` replaces every occurrence of every value with `"[REDACTED]"`; a text holding a
    value shorter than `SHORT_SECRET` characters, or still holding one after the replacement
    (two values overlapping), is withheld whole.

    >>> from harnessc.runtime.model import Field, Type
    >>> s = Schema(fields=(Field(name="token", type=Type(name="string"), secret=True),))
    >>> secrets = Secrets.of(s, {"token": "hunter2-hunter2"})
    >>> secrets.scrub({"error": "no user for hunter2-hunter2", "n": 3})
    {'error': 'no user for [REDACTED]', 'n': 3}
    """

    values: tuple[str, ...] = ()
    """Longest first, so a value inside another is replaced as part of the longer one."""

    @classmethod
    def of(cls, schema: Schema | Tool | None, args: Any) -> Secrets:
        """The secret values in `args` under a schema, or under a tool's input schema and its
        operations' (any argument that is not a mapping holds none)."""
        if schema is None or not isinstance(args, Mapping):
            return NO_SECRETS
        found: list[Any] = []
        if isinstance(schema, Tool):
            schemas = [schema.input, *(op.input for op in schema.operations.values())]
        else:
            schemas = [schema]
        for s in schemas:
            if s is not None:
                _secret_fields(s.fields, args, found)
        return cls.from_values(found) if found else NO_SECRETS

    @classmethod
    def of_call(cls, tool: Tool, args: Any, execution: Any = None) -> Secrets:
        """The secret values of one call: its secret arguments' (`of`) and the values of its
        `env` execution parameter (a variable may hold a credential, and the log withholds
        them too) of at least `SHORT_SECRET` characters: a shorter one (`DEBUG=1`) would
        withhold whole every text that holds its characters."""
        env = getattr(execution, "env", None)
        plain = (
            [v for v in env.values() if isinstance(v, str) and len(v) >= SHORT_SECRET]
            if isinstance(env, Mapping)
            else None
        )
        if not plain:
            return cls.of(tool, args) if has_secrets(tool) else NO_SECRETS
        found: list[Any] = list(plain)
        if isinstance(args, Mapping) and has_secrets(tool):
            for s in (tool.input, *(op.input for op in tool.operations.values())):
                if s is not None:
                    _secret_fields(s.fields, args, found)
        return cls.from_values(found)

    @classmethod
    def from_values(cls, values: Any) -> Secrets:
        """The secrets for the given values (strings, numbers, or lists and objects of them)."""
        texts: set[str] = set()
        _forms(values, texts)
        return cls.from_texts(texts)

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> Secrets:
        """The secrets for texts already in every form to hide (another `Secrets`' values)."""
        ordered = tuple(sorted(set(texts), key=lambda t: (-len(t), t)))
        return cls(ordered) if ordered else NO_SECRETS

    def __bool__(self) -> bool:
        return bool(self.values)

    def __repr__(self) -> str:
        # a repr lands in logs and tracebacks: it counts the values, never shows them
        return f"Secrets({len(self.values)} values)"

    def text(self, value: str) -> str:
        """`value` with every secret value replaced, or withheld whole (see the class)."""
        if not self.values:
            return value
        out = value
        for secret in self.values:
            if secret in out:
                if len(secret) < SHORT_SECRET:
                    return REDACTED
                out = out.replace(secret, REDACTED)
        # a replacement may join two halves of another value around it
        if out is not value and any(secret in out for secret in self.values):
            return REDACTED
        return out

    def scrub(self, value: Any) -> Any:
        """A JSON-like value with every string (mapping keys too) scrubbed as `text`; a number
        whose `str()` holds a secret value becomes `"[REDACTED]"`."""
        if not self.values:
            return value
        return self._scrub(value)

    def _scrub(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, int | float):
            return value if self.text(str(value)) == str(value) else REDACTED
        if isinstance(value, Mapping):
            out: dict[Any, Any] = {}
            for k, v in value.items():
                key = self.text(k) if isinstance(k, str) else k
                out.setdefault(key, self._scrub(v))
            return out
        if isinstance(value, list | tuple):
            return [self._scrub(v) for v in value]
        return value


NO_SECRETS = Secrets()


def _secret_fields(fields: tuple[Any, ...], value: Mapping[str, Any], found: list[Any]) -> None:
    for f in fields:
        if f.name not in value:
            continue
        if f.secret:
            found.append(value[f.name])
        else:
            _secret_values(f.type, value[f.name], found)


def _secret_values(type_: Type, value: Any, found: list[Any]) -> None:
    if type_.name == "object" and isinstance(value, Mapping):
        _secret_fields(type_.fields, value, found)
    elif type_.name == "list" and type_.item is not None and isinstance(value, list | tuple):
        for item in value:
            _secret_values(type_.item, item, found)
    elif type_.name == "map" and type_.item is not None and isinstance(value, Mapping):
        for item in value.values():
            _secret_values(type_.item, item, found)


def _forms(value: Any, out: set[str]) -> None:
    """The texts a secret value takes: itself, quoted by `repr` and escaped by JSON. A walk
    with its own stack that visits each container once: the value may be an agent's refused
    argument, nested past the interpreter's recursion or holding itself."""
    todo = [value]
    seen: set[int] = set()
    while todo:
        item = todo.pop()
        if isinstance(item, str):
            if item:
                out.add(item)
                out.add(repr(item)[1:-1])
                out.add(json.dumps(item)[1:-1])
                out.add(json.dumps(item, ensure_ascii=False)[1:-1])
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int) or (isinstance(item, float) and math.isfinite(item)):
            try:
                text = str(item)
            except ValueError:  # more digits than Python writes: no text can hold it
                continue
            out.add(text)
            out.add(json.dumps(item))
        elif isinstance(item, Mapping | list | tuple) and id(item) not in seen:
            seen.add(id(item))
            todo.extend(item.values() if isinstance(item, Mapping) else item)


# ---------------------------------------------------------------------------------------------
# The event vocabulary the projections fold (runtime/log/projections.py). Every helper returns a
# NewEvent; `extra` keys are kept in the payload for traces.


def decision(
    stream: str,
    *,
    decision_id: str,
    policy_version: str,
    tool_id: str,
    tool_call_id: str,
    input_hash: str,
    effect: str,
    rule: str | None = None,
    reason: str | None = None,
    **extra: Any,
) -> NewEvent:
    """A policy decision on one frozen call; `policy_version` is `Spec.content_hash()`."""
    payload = {
        "decision_id": decision_id,
        "policy_version": policy_version,
        "tool_id": tool_id,
        "tool_call_id": tool_call_id,
        "input_hash": input_hash,
        "effect": effect,
        "rule": rule,
        "reason": reason,
        **extra,
    }
    return NewEvent(stream, "Tool", "decision", payload)


def approval_requested(
    stream: str,
    *,
    approval_id: str,
    tool_id: str,
    tool_call_id: str,
    input_hash: str,
    approvers: list[dict[str, str]],
    decision_id: str | None = None,
    **extra: Any,
) -> NewEvent:
    payload = {
        "approval_id": approval_id,
        "tool_id": tool_id,
        "tool_call_id": tool_call_id,
        "input_hash": input_hash,
        "approvers": approvers,
        "decision_id": decision_id,
        **extra,
    }
    return NewEvent(stream, "Approval", "approval.requested", payload)


def approval_resolved(
    stream: str, *, approval_id: str, outcome: str, by: str | None = None, **extra: Any
) -> NewEvent:
    """`outcome`: `approved`, `rejected`, `expired`, `withdrawn` or `superseded` (approved
    with edits: see `call_superseded`)."""
    if outcome not in ("approved", "rejected", "expired", "withdrawn", "superseded"):
        raise EventError(f"unknown approval outcome `{outcome}`")
    payload = {"approval_id": approval_id, "outcome": outcome, "by": by, **extra}
    return NewEvent(stream, "Approval", "approval.resolved", payload)


def grant_issued(
    stream: str,
    *,
    grant_id: str,
    scope: str,
    tool_id: str,
    expires_at: datetime,
    tool_call_id: str | None = None,
    input_hash: str | None = None,
    task_id: str | None = None,
    approval_id: str | None = None,
    **extra: Any,
) -> NewEvent:
    """A grant until `expires_at`: `once` binds tool id + tool_call_id + input_hash, `task` a
    task id, `class` the rule's own scope."""
    if scope not in ("once", "task", "class"):
        raise EventError(f"unknown grant scope `{scope}`")
    if scope == "once" and not (tool_call_id and input_hash):
        raise EventError("a `once` grant binds a tool_call_id and an input_hash")
    payload = {
        "grant_id": grant_id,
        "scope": scope,
        "tool_id": tool_id,
        "tool_call_id": tool_call_id,
        "input_hash": input_hash,
        "task_id": task_id,
        "expires_at": format_time(expires_at),
        "approval_id": approval_id,
        **extra,
    }
    return NewEvent(stream, "Approval", "grant.issued", payload)


def grant_used(stream: str, *, grant_id: str, tool_call_id: str) -> NewEvent:
    return NewEvent(
        stream, "Approval", "grant.used", {"grant_id": grant_id, "tool_call_id": tool_call_id}
    )


def grant_spent(grant_id: str, *, session: str, tool_call_id: str, input_hash: str) -> NewEvent:
    """The claim that spends a `once` grant, on the grant's own stream `grant:<id>`: appended
    only while that stream is empty (`append_many(expect=…)`), so one execution in total,
    whichever process or session tries."""
    return NewEvent(
        spent_stream(grant_id),
        "Approval",
        "grant.spent",
        {
            "grant_id": grant_id,
            "session": session,
            "tool_call_id": tool_call_id,
            "input_hash": input_hash,
        },
    )


def spent_stream(grant_id: str) -> str:
    return f"grant:{grant_id}"


RUNTIME_STREAMS = ("approval:", "grant:", "workflow:")
"""The prefixes of the streams the runtime keeps of its own (an answer's claim `approval:<id>`,
a grant's `grant:<id>`, a workflow run's `workflow:<run>/…`, beside the log's own `harness`):
no session an application opens takes such a name (`Harness.session`)."""


def grant_revoked(
    stream: str, *, grant_id: str, reason: str | None = None, **extra: Any
) -> NewEvent:
    """A grant revoked (`Approvals.revoke`: on the grant's own stream `grant:<id>`, with `by`
    and its `session`): it never authorises again."""
    return NewEvent(
        stream, "Approval", "grant.revoked", {"grant_id": grant_id, "reason": reason, **extra}
    )


def call_superseded(
    stream: str,
    *,
    approval_id: str,
    tool_id: str,
    tool_call_id: str,
    input_hash: str,
    edited_input_hash: str,
    by: str,
    reason: str | None,
    effect: str,
) -> NewEvent:
    """An operator approved a call with edited arguments (`Harness.approve_with_edits`): the
    call `input_hash` is superseded by the call `edited_input_hash` (same tool and
    tool_call_id), which was decided afresh (`effect`); the original never runs."""
    return NewEvent(
        stream,
        "Approval",
        "call.superseded",
        {
            "approval_id": approval_id,
            "tool_id": tool_id,
            "tool_call_id": tool_call_id,
            "input_hash": input_hash,
            "edited_input_hash": edited_input_hash,
            "by": by,
            "reason": reason,
            "effect": effect,
        },
    )


def call_refused(stream: str, refusal: Mapping[str, Any]) -> NewEvent:
    """A call refused before it became an action (`Refusal.to_dict()`), in its session's
    stream."""
    return NewEvent(stream, "Error", "call.refused", {**refusal, "session": stream})


def session_started(stream: str, *, agent: str, **extra: Any) -> NewEvent:
    return NewEvent(stream, "State", "session.started", {"agent": agent, **extra})


def session_ended(stream: str, *, outcome: str, **extra: Any) -> NewEvent:
    return NewEvent(stream, "State", "session.ended", {"outcome": outcome, **extra})


# -- MCP: a live server's tool list (runtime/integrations/mcp_client.py) ---------------------------

MCP_TOOLS_CHANGED = "mcp.tools_changed"
"""What a live MCP server reports changed: tools added, removed or with another schema, the
server's state after it (`facts_record`'s form, replayed when a session resumes) and the
availability of each declared tool of the server."""


def mcp_tools_changed(
    stream: str,
    *,
    server: str,
    cause: str,
    added: list[str],
    removed: list[str],
    changed: list[str],
    state: Mapping[str, Any],
    unavailable: Mapping[str, str],
) -> NewEvent:
    return NewEvent(
        stream,
        "State",
        MCP_TOOLS_CHANGED,
        {
            "server": server,
            "cause": cause,
            "added": added,
            "removed": removed,
            "changed": changed,
            "state": dict(state),
            "unavailable": dict(unavailable),
        },
    )


DECISION_DIVERGED = "decision.diverged"
"""Shadow mode (`runtime/session/shadow.py`): a candidate spec decided a call otherwise than the
active one (or failed on it); recorded in the session's stream, in the commit of the decision."""


def decision_diverged(
    stream: str,
    *,
    decision_id: str,
    tool_id: str,
    tool_call_id: str,
    input_hash: str,
    active: Mapping[str, Any],
    candidate: Mapping[str, Any],
    **extra: Any,
) -> NewEvent:
    """The candidate's outcome beside the active decision `decision_id`: `active` and
    `candidate` hold effect, rule, policy and policy version (the candidate's `error` instead
    when it failed); `kind` is `old→new` (`allow→ask`) or `error`."""
    effect = candidate.get("effect")
    kind = f"{active.get('effect')}→{effect}" if effect is not None else "error"
    payload = {
        "decision_id": decision_id,
        "tool_id": tool_id,
        "tool_call_id": tool_call_id,
        "input_hash": input_hash,
        "kind": kind,
        "active": dict(active),
        "candidate": dict(candidate),
        **extra,
    }
    return NewEvent(stream, "Tool", DECISION_DIVERGED, payload)
