"""Event stores: the `EventStore` interface, the embedded SQLite store and an in-memory one.

The SQLite store keeps the whole log in one file in WAL mode. Every commit is one transaction
opened with `BEGIN IMMEDIATE`, which takes SQLite's single write lock before reading the head of
the log, so `position`, `seq` and `prev_hash` are assigned under the lock: many threads or
processes may append to the same file and the log stays one gap-free chain. Appends from the
threads of one process share commits (`GroupCommit`), and `defer` holds events for the next
commit (a call's events before it runs: docs/runtime.md, "What a call writes"). Because writers are
serialised and positions are assigned inside the write transaction, a later commit always has a
higher position than every earlier one, so a reader that resumes with `after=cursor` never misses
an event and never sees one twice.

Durability: `synchronous=FULL` (the default) fsyncs the WAL at every commit, so an event whose
append returned survives a process kill, an OS crash and a power cut. `synchronous=NORMAL` with
WAL survives a process kill (SIGKILL) with the chain intact but may lose the last commits on an
OS crash or power cut; it is offered for throughput where the log can be rebuilt from elsewhere,
never as the default: an acknowledged approval or grant must not disappear.

>>> from harnessc.runtime.log.events import NewEvent
>>> store = SQLiteStore(":memory:")
>>> store.append(NewEvent("s-1", "State", "session.started", {"agent": "planner"})).position
1
>>> store.verify().ok
True
"""

from __future__ import annotations

import atexit
import contextlib
import hmac
import os
import sqlite3
import threading
import urllib.parse
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from os import PathLike
from typing import Any, Protocol, runtime_checkable

from ._announce import Announcing
from ._group_commit import Batch, Expected, GroupCommit, payload_texts
from .chain import (
    Anchor,
    ConcurrencyError,
    NotUtf8,
    StoreError,
    TransitionRefused,
    Verification,
    verify_events,
)
from .events import (
    GENESIS_HASH,
    Clock,
    Event,
    NewEvent,
    event_hash,
    format_time,
    system_clock,
)
from .integrity import LOG_KEY_ENV, LOG_KEY_FILE_ENV, Checkpoint, LogKey

__all__ = [
    "Batch",
    "ConcurrencyError",
    "EventStore",
    "GroupCommit",
    "MemoryStore",
    "Row",
    "SQLiteStore",
    "SeqCache",
    "StoreError",
    "TransitionRefused",
    "Verification",
    "changed_elsewhere",
    "claims_of",
    "defer_events",
    "flush_deferred",
    "held_events",
    "payload_texts",
    "read_committed",
    "select_rows",
    "verify_events",
]

SCHEMA_VERSION = "2"
"""1: the chain; 2: and a `mac` column (NULL without a log key). A version 1 log is upgraded
when opened for writing (the column added, no event rewritten) and read as it is otherwise."""
_READABLE_VERSIONS = ("1", SCHEMA_VERSION)


@runtime_checkable
class EventStore(Protocol):
    """What every store offers; SQLite here, PostgreSQL later, the same contract."""

    def append(self, event: NewEvent, *, expected_seq: int | None = None) -> Event:
        """Append one event in its own transaction. With `expected_seq`, refuse (ConcurrencyError)
        unless the stream's last seq is exactly that (0 for a new stream)."""
        ...

    def append_many(
        self, events: Iterable[NewEvent], *, expect: Mapping[str, int] | None = None
    ) -> list[Event]:
        """Append events in one transaction: all of them or none. With `expect`, refuse
        (ConcurrencyError) unless each stream it names is exactly at that seq: a claim that
        only one writer can make (`expect={"grant:g-1": 0}` spends a grant once)."""
        ...

    def read(
        self, stream: str | None = None, *, after: int = 0, limit: int | None = None
    ) -> list[Event]:
        """Events with `position > after` (of one stream, or all), in position order."""
        ...

    def last(self, prefix: str, type: str) -> Event | None:
        """The newest event of `type` in any stream whose name starts with `prefix` (a run's
        streams, `workflow:<id>/…`), or None."""
        ...

    def read_prefix(self, prefix: str, type: str, *, after: int = 0) -> list[Event]:
        """Events of `type` after `after` in the streams whose names start with `prefix`, in
        position order."""
        ...

    def head(self) -> tuple[int, str]:
        """The last position and its hash (`(0, GENESIS_HASH)` when empty): anchor it elsewhere
        and pass it to `verify` to detect a truncated tail."""
        ...

    def checkpoint(self) -> Checkpoint:
        """The head as a `Checkpoint` to keep elsewhere, tagged when the store has a log key;
        `verify(anchor=checkpoint)` later finds a log that lost events or was rewritten up to
        it."""
        ...

    def verify(self, anchor: Anchor | None = None) -> Verification:
        """Walk the whole chain (against `anchor`, and the MACs with the store's log key) and
        report the first broken link; never raises for a damaged log."""
        ...

    log_key: LogKey | None
    """The key the store signs and checks MACs with, or None (`ChainWatch` checks with it)."""

    def close(self) -> None: ...


class _Numbering:
    """Assigns position, seq, hash (and the MAC, with a key) to new events, given the head of
    the log."""

    def __init__(
        self, clock: Clock, position: int, prev_hash: str, key: LogKey | None = None
    ) -> None:
        self.clock = clock
        self.position = position
        self.prev_hash = prev_hash
        self.key = key
        self._time: str | None = None

    @property
    def time(self) -> str:
        """The time of every event numbered here: they are committed together, so they share
        one (read from the clock and formatted once)."""
        if self._time is None:
            self._time = format_time(self.clock())
        return self._time

    def number(self, event: NewEvent, payload_json: str, seq: int) -> Event:
        self.position += 1
        time = self.time
        h = event_hash(
            position=self.position,
            stream=event.stream,
            seq=seq,
            kind=event.kind,
            type=event.type,
            payload_json=payload_json,
            time=time,
            prev_hash=self.prev_hash,
        )
        stored = Event(
            self.position,
            event.stream,
            seq,
            event.kind,
            event.type,
            payload_json,
            time,
            self.prev_hash,
            h,
            self.key.event_mac(h) if self.key is not None else None,
        )
        self.prev_hash = h
        return stored


class _Unchained(_Numbering):
    """Numbers events by position and stream only, neither timed nor hashed: for a buffer whose
    events a store numbers again when they are committed."""

    def __init__(self, position: int) -> None:
        super().__init__(system_clock, position, "")

    def number(self, event: NewEvent, payload_json: str, seq: int) -> Event:
        self.position += 1
        return Event(
            self.position, event.stream, seq, event.kind, event.type, payload_json, "", "", ""
        )


class SeqCache:
    """Each stream's last seq as this store's own commits left it, to number a commit without
    asking the database for it: valid while the head of the log is still the event the store's
    last commit wrote (an append by anyone else moves the head, and the cache is dropped)."""

    LIMIT = 4096
    """Streams remembered at most (the cache starts again past it)."""

    def __init__(self) -> None:
        self._head: tuple[int, str] | None = None
        self._seqs: dict[str, int] = {}

    def reader(
        self, position: int, head_hash: str, query: Callable[[str], int]
    ) -> Callable[[str], int]:
        """`last_seq` for a commit that found the head at `position` with `head_hash`: from the
        cache when that head is the store's own last one, else from `query`."""
        if self._head != (position, head_hash):
            self._head = None
            self._seqs.clear()
        seqs = self._seqs

        def last_seq(stream: str) -> int:
            found = seqs.get(stream)
            return found if found is not None else query(stream)

        return last_seq

    def own(self, position: int, head_hash: str) -> bool:
        """Whether the head at `position` with `head_hash` is the store's own last commit."""
        return self._head == (position, head_hash)

    def committed(self, out: Sequence[Event]) -> None:
        """Remember what a commit wrote, once it is committed."""
        if not out:
            return
        if len(self._seqs) > self.LIMIT:
            self._seqs.clear()
        for e in out:
            self._seqs[e.stream] = e.seq
        self._head = (out[-1].position, out[-1].hash)


def number_batch(
    events: Sequence[NewEvent],
    payloads: Sequence[str],
    numbering: _Numbering,
    last_seq: Callable[[str], int],
    expected_seq: Expected,
) -> tuple[list[Event], dict[str, int]]:
    """Number a batch appended in one transaction: each stream continues from `last_seq(stream)`
    (asked once per stream). With `expected_seq` an int, every stream must be exactly there;
    a mapping names the streams to check and the seq of each (ConcurrencyError otherwise).
    Returns the events and each stream's new last seq."""
    seqs: dict[str, int] = {}
    out: list[Event] = []
    for event, payload_json in zip(events, payloads, strict=True):
        if event.stream not in seqs:
            seqs[event.stream] = last_seq(event.stream)
            wanted = (
                expected_seq.get(event.stream)
                if isinstance(expected_seq, Mapping)
                else expected_seq
            )
            if wanted is not None and seqs[event.stream] != wanted:
                raise ConcurrencyError(event.stream, wanted, seqs[event.stream])
        seqs[event.stream] += 1
        out.append(numbering.number(event, payload_json, seqs[event.stream]))
    return out, seqs


def defer_events(store: EventStore, events: Sequence[NewEvent]) -> None:
    """Append `events` with the store's next commit (`SQLiteStore.defer`), or at once to a
    store that has no deferred appends."""
    defer = getattr(store, "defer", None)
    if defer is not None:
        defer(events)
    else:
        store.append_many(events)


def changed_elsewhere(store: EventStore) -> bool:
    """Whether another writer (another process, or another store on the same log) may have
    appended since the last time this was asked: cheap, for a check before every decision
    (SQLite: `PRAGMA data_version`; PostgreSQL: the head against the store's own last commit;
    memory: never, nothing outside the process writes there). A store without the method is
    always taken to have changed."""
    changed = getattr(store, "changed_elsewhere", None)
    return True if changed is None else bool(changed())


def flush_deferred(store: EventStore) -> None:
    """Commit what the store defers (a store without deferred appends has nothing waiting)."""
    flush = getattr(store, "flush", None)
    if flush is not None:
        flush()


def held_events(store: EventStore) -> list[NewEvent]:
    """The events `store` defers and has not committed yet, in order (none for a store
    without deferred appends)."""
    held = getattr(store, "held", None)
    return held() if held is not None else []


def read_committed(store: EventStore, stream: str, *, after: int = 0) -> list[Event]:
    """`store.read(stream, after=after)`, leaving the events the store defers uncommitted: for
    a reader that checked (`held_events`) that it needs none of them now. They are committed
    later with positions above every event read here, so a reader that goes on `after` the
    last position it read takes them in order."""
    if getattr(store, "held", None) is not None:
        return store.read(stream, after=after, flush=False)  # type: ignore[call-arg]
    return store.read(stream, after=after)


def flush_at_exit(ref: weakref.ref[Any]) -> None:
    """Commit what a store still defers when the interpreter exits (registered by each
    store that defers appends)."""
    store = ref()
    if store is not None:
        with contextlib.suppress(Exception):
            store.flush()


class Appends(Announcing):
    """`append` and `append_many` over a store's `_append(events, expected)`, with the events
    `announce`d written first (`runtime/log/_announce.py`)."""

    def _append(self, events: Sequence[NewEvent], expected_seq: Expected) -> list[Event]:
        raise NotImplementedError


class GroupCommitted(Appends):
    """The appends of a store that commits through a `GroupCommit` (SQLite, PostgreSQL):
    `_group` commits with the store's `_commit`; `_readonly` refuses every write."""

    _group: GroupCommit
    _readonly: bool

    def held(self) -> list[NewEvent]:
        """The deferred events not committed yet, in order (`defer`)."""
        return self._group.held()

    def _append(self, events: Sequence[NewEvent], expected_seq: Expected) -> list[Event]:
        if not events:
            return []
        if self._readonly:
            raise StoreError("the event store was opened read-only")
        # canonicalized here, outside the write lock: it is the costly part and needs no lock
        return self._group.submit(Batch(events, expected_seq))

    def defer(self, events: Sequence[NewEvent]) -> None:
        """Append events with the next commit instead of one of their own: the next append
        (by any thread), a read, `flush` or `close` commits them, before anything appended
        after them. Until then they are not durable and other processes do not see them."""
        if not events:
            return
        if self._readonly:
            raise StoreError("the event store was opened read-only")
        self.refused()
        batch, _ = self._with_announced(events)
        self._group.defer(Batch(batch, deferred=True))

    def flush(self) -> None:
        """Commit the deferred events now."""
        self._group.flush()


Claim = tuple[str, ...]
"""What an action transition takes once for all writers (`claims_of`): `("runs", action_id)`
and `("call-runs", stream, tool_call_id, input_hash)` for a move to RUNNING, `("leaves",
action_id, state)` for a move out of a state."""

_TRANSITION = "action.transition"
_RUNNING = "RUNNING"


def claims_of(events: Sequence[NewEvent]) -> list[tuple[Claim, NewEvent]]:
    """The claims of the action transitions among `events` that the log grants once: an
    action enters RUNNING once, a call (session, `tool_call_id`, input hash) runs once, and
    an action leaves each state once — its lifecycle has no cycle, so its transitions in the
    log are one chain: a move decided on a state another process has moved on from (an
    AUTHORIZED written after the call SUCCEEDED elsewhere) is refused, and leaving RUNNING
    once means one outcome (or UNKNOWN). Every store refuses a batch that claims what is
    taken (`TransitionRefused`), whatever process wrote the first."""
    out: list[tuple[Claim, NewEvent]] = []
    for e in events:
        if e.type != _TRANSITION:
            continue
        p = e.payload
        if p.get("to") == _RUNNING:
            out.append((("runs", str(p.get("action_id"))), e))
            if p.get("input_hash") is not None:
                call = ("call-runs", e.stream, str(p.get("tool_call_id")), str(p["input_hash"]))
                out.append((call, e))
        if p.get("from") is not None:
            out.append((("leaves", str(p.get("action_id")), str(p["from"])), e))
    return out


def refusal(claim: Claim, event: NewEvent) -> TransitionRefused:
    """The error of a batch whose `claim` (`claims_of`) is taken."""
    p = event.payload
    what = {
        "runs": "it ran (or runs) already",
        "call-runs": f"the call `{p.get('tool_call_id')}` ran (or runs) already in this session",
        "leaves": "its outcome is recorded already"
        if claim[-1] == _RUNNING
        else f"it moved on from {claim[-1]} already",
    }[claim[0]]
    return TransitionRefused(
        event.stream, str(p.get("action_id")), p.get("from"), str(p.get("to")), what
    )


def commit_batches(
    batches: list[Batch],
    numbering: _Numbering,
    last_seq: Callable[[str], int],
    claimed: Callable[[Claim], bool] | None = None,
) -> list[Event]:
    """Number the batches of one transaction after each other: a batch whose expectations
    fail gets its ConcurrencyError and takes no position, and so does one whose action
    transitions claim what the log (`claimed`, asked inside the write transaction) or an
    earlier batch of this commit holds (`TransitionRefused`). Returns every numbered event."""
    seqs: dict[str, int] = {}
    out: list[Event] = []
    taken: set[Claim] = set()

    def current(stream: str) -> int:
        found = seqs.get(stream)
        return found if found is not None else last_seq(stream)

    for b in batches:
        if not b.events:
            continue
        mark = numbering.position, numbering.prev_hash
        while True:
            try:
                b.out, changed = number_batch(b.events, b.payloads, numbering, current, b.expected)
                # the stream expectations first (a spent grant says so), then the claims
                claims = claims_of(b.events) if claimed is not None else []
                for claim, event in claims:
                    if claim in taken or (claimed is not None and claimed(claim)):
                        raise refusal(claim, event)
            except TransitionRefused as error:
                numbering.position, numbering.prev_hash = mark
                b.out = []
                if b.deferred and _without_stale_moves(b, taken, claimed):
                    continue  # numbered again without the moves the log refuses
                b.error = error
                break
            except ConcurrencyError as error:
                numbering.position, numbering.prev_hash = mark
                b.out = []
                b.error = error
                break
            taken.update(c for c, _ in claims)
            seqs.update(changed)
            out.extend(b.out)
            break
    return out


def _without_stale_moves(
    b: Batch, taken: set[Claim], claimed: Callable[[Claim], bool] | None
) -> bool:
    """A deferred batch (a decision and the move it makes, committed with a later append)
    whose move the log refuses, decided on a state another process has moved the action on
    from: the move is left out and the rest (the decision's record) kept, since nobody waits
    to be told; the action's state is the log's, which the next catch-up takes. True when
    something is left to commit."""
    refused = {
        id(event)
        for claim, event in claims_of(b.events)
        if claim in taken or (claimed is not None and claimed(claim))
    }
    if not refused:
        return False
    kept = [(e, t) for e, t in zip(b.events, b.payloads, strict=True) if id(e) not in refused]
    b.events = [e for e, _ in kept]
    b.payloads = [t for _, t in kept]
    return bool(b.events)


Row = tuple[int, str, str, str, str]
"""An event as a reader that folds a large log takes it (`read_rows`): position, stream, type,
payload text and time; no hashes, no `Event`."""


def select_rows(types: Sequence[str], moves: Sequence[str], mark: str) -> tuple[str, list[object]]:
    """The SQL of `read_rows` after `SELECT ` (with `mark` as the parameter marker; the position
    to read after is its first parameter). A move is found in a transition's canonical text
    (`"to":"RUNNING"`), so a reader still checks the parsed payload: the text may hold it
    elsewhere."""
    find = "instr(payload, {0}) > 0" if mark == "?" else "strpos(payload, {0}) > 0"
    keep = " OR ".join(find.format(mark) for _ in moves) or "1 = 1"
    sql = (
        f"position, stream, type, payload, time FROM {{table}} WHERE position > {mark} "
        f"AND type IN ({', '.join([mark] * len(types))}) "
        f"AND (type <> 'action.transition' OR {keep}) ORDER BY position"
    )
    return sql, [*types, *(f'"to":"{m}"' for m in moves)]


def row(e: Event) -> tuple[object, ...]:
    """An event as the values of an INSERT, in the order of the columns."""
    return (
        e.position,
        e.stream,
        e.seq,
        e.kind,
        e.type,
        e.payload_json,
        e.time,
        e.prev_hash,
        e.hash,
        e.mac,
    )


def checkpoint_of(
    position: int, head_hash: str, head_mac: str | None, key: LogKey | None
) -> Checkpoint:
    """The checkpoint of a head: tagged when there is a key and the head's MAC is the key's
    (a tag must never vouch for a head the key did not write), untagged when the head has no
    MAC yet."""
    if key is not None and head_mac is not None:
        check_head_key(head_hash, head_mac, key)
        return Checkpoint.at(position, head_hash, key)
    return Checkpoint.at(position, head_hash, key if position == 0 else None)


def check_head_key(head_hash: str, head_mac: str | None, key: LogKey | None) -> None:
    """Refuse to append where the new events could not be verified with the log's key: to a
    keyed log without the key, or with another key (its last MAC does not match this one)."""
    if head_mac is None:
        return  # an unkeyed log (or none yet): with a key, its MACs start here
    if key is None:
        raise StoreError(
            f"the event log is keyed: appending needs its key ({LOG_KEY_ENV} or {LOG_KEY_FILE_ENV})"
        )
    if not hmac.compare_digest(head_mac, key.event_mac(head_hash)):
        raise StoreError(
            "the event log's last MAC does not match this log key: it was written with another "
            "key, or forged; run `harnessc log verify` with the right key"
        )


# ---------------------------------------------------------------------------------------------
# SQLite

_DDL = """
CREATE TABLE IF NOT EXISTS events (
    position  INTEGER PRIMARY KEY,  -- global, from 1, no gaps
    stream    TEXT    NOT NULL,
    seq       INTEGER NOT NULL,     -- per stream, from 1
    kind      TEXT    NOT NULL,
    type      TEXT    NOT NULL,
    payload   TEXT    NOT NULL,     -- canonical JSON, hashed as stored
    time      TEXT    NOT NULL,
    prev_hash TEXT    NOT NULL,
    hash      TEXT    NOT NULL,
    mac       TEXT,                 -- HMAC of hash under the log key, when there is one
    UNIQUE (stream, seq)
);
CREATE INDEX IF NOT EXISTS events_by_stream ON events (stream, position);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
"""

# The claims of `claims_of`, held by the log itself: a write that bypasses the check of the
# commit still cannot record a second RUNNING. Partial indexes: they hold the RUNNING moves only.
_CLAIM_INDEXES = (
    "CREATE UNIQUE INDEX IF NOT EXISTS action_runs_once ON events "
    "(json_extract(payload, '$.action_id')) WHERE type = 'action.transition' "
    "AND json_extract(payload, '$.to') = 'RUNNING'",
    "CREATE UNIQUE INDEX IF NOT EXISTS call_runs_once ON events "
    "(stream, json_extract(payload, '$.tool_call_id'), json_extract(payload, '$.input_hash')) "
    "WHERE type = 'action.transition' AND json_extract(payload, '$.to') = 'RUNNING'",
    "CREATE UNIQUE INDEX IF NOT EXISTS action_leaves_running_once ON events "
    "(json_extract(payload, '$.action_id')) WHERE type = 'action.transition' "
    "AND json_extract(payload, '$.from') = 'RUNNING'",
    "CREATE UNIQUE INDEX IF NOT EXISTS action_leaves_state_once ON events "
    "(json_extract(payload, '$.action_id'), json_extract(payload, '$.from')) "
    "WHERE type = 'action.transition' AND json_extract(payload, '$.from') IS NOT NULL",
)
_CLAIMED = {
    "runs": "SELECT 1 FROM events WHERE type = 'action.transition' "
    "AND json_extract(payload, '$.to') = 'RUNNING' "
    "AND json_extract(payload, '$.action_id') = ? LIMIT 1",
    "call-runs": "SELECT 1 FROM events WHERE type = 'action.transition' "
    "AND json_extract(payload, '$.to') = 'RUNNING' AND stream = ? "
    "AND json_extract(payload, '$.tool_call_id') = ? "
    "AND json_extract(payload, '$.input_hash') = ? LIMIT 1",
    "leaves": "SELECT 1 FROM events WHERE type = 'action.transition' "
    "AND json_extract(payload, '$.action_id') = ? "
    "AND json_extract(payload, '$.from') = ? LIMIT 1",
}
"""Whether the log holds a claim (`claims_of`): the key of the claim, then its values."""

_COLUMNS = "position, stream, seq, kind, type, payload, time, prev_hash, hash, mac"
_INSERTS = (
    "",
    *(
        f"INSERT INTO events ({_COLUMNS}) VALUES "
        + ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"] * n)
        for n in range(1, 17)
    ),
)
"""The INSERT of n rows at [n] (a commit of up to 16 events is one statement; executemany
steps one per row)."""
# a damaged file can also hold a schema whose text is not UTF-8, which sqlite3 cannot decode
# into its own error message
_READ_ERRORS = (sqlite3.Error, UnicodeDecodeError)


def _special_file(path: str | PathLike[str]) -> bool:
    """Whether `path` names something other than a file or a directory (a named pipe, a
    socket, a device); `os.stat` reads what it is without opening it."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False  # absent, or a name SQLite will refuse itself
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


class SQLiteStore(GroupCommitted):
    """The embedded event store: one SQLite file, WAL mode, one transaction per append.

    Safe to share between threads (a lock serialises this connection) and between processes
    (each opens its own `SQLiteStore` on the same file; SQLite's write lock serialises them).

    >>> from harnessc.runtime.log.events import NewEvent
    >>> store = SQLiteStore(":memory:")
    >>> [e.seq for e in store.append_many([NewEvent("a", "Text", "note")] * 2)]
    [1, 2]
    >>> [e.position for e in store.read(after=1)]
    [2]
    """

    def __init__(
        self,
        path: str | PathLike[str],
        *,
        clock: Clock = system_clock,
        synchronous: str = "FULL",
        busy_timeout_s: float = 30.0,
        key: LogKey | None = None,
        readonly: bool = False,
    ) -> None:
        """`key`: the log key; by default `LogKey.from_env()` (none when the environment sets
        none). `readonly`: open an existing log only to read and verify it, never creating,
        upgrading or writing the file."""
        if synchronous not in ("FULL", "NORMAL"):
            raise StoreError(f"synchronous must be FULL or NORMAL, not `{synchronous}`")
        self._clock = clock
        self.log_key = key if key is not None else LogKey.from_env()
        self._readonly = readonly
        self._columns = _COLUMNS
        self._lock = threading.Lock()
        self._group = GroupCommit(self._commit)
        self._seqs = SeqCache()
        self._claims_indexed = False  # the log holds every claim index (`_CLAIM_INDEXES`)
        atexit.register(flush_at_exit, weakref.ref(self))
        self._conn: sqlite3.Connection | None = None
        if _special_file(path):
            # a named pipe would block the open until some other process writes to it
            raise StoreError(f"cannot open the event store `{path}`: it is not a regular file")
        try:
            if readonly:
                uri = "file:" + urllib.parse.quote(os.fspath(path)) + "?mode=ro"
                self._conn = sqlite3.connect(
                    uri,
                    uri=True,
                    isolation_level=None,
                    timeout=busy_timeout_s,
                    check_same_thread=False,
                )
                self._columns = self._readable(self._conn, path)
            else:
                self._conn = sqlite3.connect(
                    path, isolation_level=None, timeout=busy_timeout_s, check_same_thread=False
                )
                self._prepare(self._conn, synchronous)
            self._data_version = self._conn.execute("PRAGMA data_version").fetchone()[0]
        except _READ_ERRORS as error:
            # a damaged or foreign file: say which, never a raw sqlite error
            self.close()
            raise StoreError(f"cannot open the event store `{path}`: {error}") from None
        except StoreError:
            self.close()
            raise

    def _prepare(self, conn: sqlite3.Connection, synchronous: str) -> None:
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode not in ("wal", "memory"):
            raise StoreError(f"the event store needs WAL mode, but SQLite chose `{mode}`")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        with self._write() as c:
            c.executescript_in_tx(_DDL)
            row = c.conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if row is None:
                c.conn.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
            elif row[0] == "1":
                # ADD COLUMN rewrites no row, so the append-only triggers stay silent
                c.conn.execute("ALTER TABLE events ADD COLUMN mac TEXT")
                c.conn.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (SCHEMA_VERSION,))
            elif row[0] != SCHEMA_VERSION:
                raise StoreError(f"event store format {row[0]} is not supported")
            made = 0
            for index in _CLAIM_INDEXES:
                # a log written before the claims may hold a second RUNNING already: then the
                # index cannot be made, and the commit's own check (`claims_of`) holds alone
                with contextlib.suppress(sqlite3.IntegrityError):
                    c.conn.execute(index)
                    made += 1
            self._claims_indexed = made == len(_CLAIM_INDEXES)

    @staticmethod
    def _readable(conn: sqlite3.Connection, path: object) -> str:
        """The columns to select from an existing log opened read-only."""
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not {"events", "meta"} <= tables:
            raise StoreError(f"`{path}` holds no event log")
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if row is None or row[0] not in _READABLE_VERSIONS:
            raise StoreError(f"event store format {row[0] if row else '?'} is not supported")
        columns = {r[1] for r in conn.execute("PRAGMA table_info(events)")}
        return _COLUMNS if "mac" in columns else _COLUMNS.replace(", mac", ", NULL")

    # -- writing ------------------------------------------------------------------------------

    def _commit(self, batches: list[Batch]) -> None:
        if not any(b.events for b in batches):
            return
        if not self._claims_indexed:
            self._commit_checked(batches, check=True)
            return
        try:  # the claim indexes refuse a taken claim: ask for each only when one did
            self._commit_checked(batches, check=False)
        except sqlite3.IntegrityError:
            for b in batches:
                b.out, b.error = [], None
            self._commit_checked(batches, check=True)

    def _commit_checked(self, batches: list[Batch], *, check: bool) -> None:
        """One write transaction for `batches`; `check`: ask the log for each claim of their
        action transitions (`claims_of`) and refuse the batches whose claim is taken."""
        with self._write() as c:
            conn = c.conn
            head = conn.execute(
                "SELECT position, hash, mac FROM events ORDER BY position DESC LIMIT 1"
            ).fetchone()
            position, head_hash, head_mac = head or (0, GENESIS_HASH, None)
            check_head_key(head_hash, head_mac, self.log_key)
            out = commit_batches(
                batches,
                _Numbering(self._clock, position, head_hash, self.log_key),
                self._seqs.reader(
                    position,
                    head_hash,
                    lambda stream: conn.execute(
                        "SELECT coalesce(max(seq), 0) FROM events WHERE stream = ?", (stream,)
                    ).fetchone()[0],
                ),
                (lambda claim: conn.execute(_CLAIMED[claim[0]], claim[1:]).fetchone() is not None)
                if check
                else None,
            )
            if len(out) < len(_INSERTS):  # one statement for the commit's rows
                conn.execute(_INSERTS[len(out)], [v for e in out for v in row(e)])
            else:
                conn.executemany(_INSERTS[1], [row(e) for e in out])
        self._seqs.committed(out)

    def _write(self) -> _WriteTransaction:
        return _WriteTransaction(self._lock, self._connection())

    def changed_elsewhere(self) -> bool:
        """Whether another connection committed to the file since the last call (or since the
        store was opened): `PRAGMA data_version`, which this connection's own commits leave as
        it is."""
        with self._lock:
            version = self._connection().execute("PRAGMA data_version").fetchone()[0]
        changed = version != self._data_version
        self._data_version = version
        return bool(changed)

    # -- reading ------------------------------------------------------------------------------

    def read(
        self,
        stream: str | None = None,
        *,
        after: int = 0,
        limit: int | None = None,
        flush: bool = True,
    ) -> list[Event]:
        """Events after `after` (of one stream, or all); the deferred events are committed
        first, unless `flush` is False (`read_committed`)."""
        if flush:
            self._group.flush()
        sql = f"SELECT {self._columns} FROM events WHERE position > ?"
        params: list[object] = [after]
        if stream is not None:
            sql += " AND stream = ?"
            params.append(stream)
        sql += " ORDER BY position"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._lock:
            try:
                rows = self._connection().execute(sql, params).fetchall()
            except sqlite3.DatabaseError as error:  # a damaged file: say so, never a raw error
                raise StoreError(
                    f"the event store cannot be read after position {after}: {error}"
                ) from None
        return [Event(*row) for row in rows]

    def scan(
        self, stream: str | None = None, *, after: int = 0, batch: int = 1000
    ) -> Iterator[Event]:
        """All events after `after`, read page by page (for projections and exports)."""
        while True:
            page = self.read(stream, after=after, limit=batch)
            yield from page
            if len(page) < batch:
                return
            after = page[-1].position

    def read_rows(
        self,
        types: Sequence[str],
        *,
        after: int = 0,
        limit: int = 1000,
        moves: Sequence[str] = (),
    ) -> list[Row]:
        """The events of `types` after `after` as `Row`s, in position order, for a reader that
        folds a large log; of the `action.transition` events only those that move to one of
        `moves` (all of them when `moves` is empty)."""
        self._group.flush()
        sql, params = select_rows(types, moves, "?")
        sql = "SELECT " + sql.format(table="events") + f" LIMIT {int(limit)}"
        with self._lock:
            return self._connection().execute(sql, [after, *params]).fetchall()

    def last(self, prefix: str, type: str) -> Event | None:
        self._group.flush()
        # a range over the (stream, position) index: TEXT compares by bytes in SQLite, so the
        # streams starting with `prefix` are exactly those in [prefix, prefix + U+10FFFF)
        with self._lock:
            row = (
                self._connection()
                .execute(
                    f"SELECT {self._columns} FROM events "
                    "WHERE stream >= ? AND stream < ? AND type = ? ORDER BY position DESC LIMIT 1",
                    (prefix, prefix + "\U0010ffff", type),
                )
                .fetchone()
            )
        return Event(*row) if row else None

    def read_prefix(self, prefix: str, type: str, *, after: int = 0) -> list[Event]:
        self._group.flush()
        with self._lock:
            rows = (
                self._connection()
                .execute(
                    f"SELECT {self._columns} FROM events "
                    "WHERE stream >= ? AND stream < ? AND type = ? AND position > ? "
                    "ORDER BY position",
                    (prefix, prefix + "\U0010ffff", type, after),
                )
                .fetchall()
            )
        return [Event(*row) for row in rows]

    def head(self) -> tuple[int, str]:
        position, head_hash, _ = self._head()
        return position, head_hash

    def checkpoint(self) -> Checkpoint:
        return checkpoint_of(*self._head(), self.log_key)

    def _head(self) -> tuple[int, str, str | None]:
        self._group.flush()
        with self._lock:
            try:
                row = (
                    self._connection()
                    .execute(
                        f"SELECT position, hash, {self._columns.rpartition(', ')[2]} FROM events "
                        "ORDER BY position DESC LIMIT 1"
                    )
                    .fetchone()
                )
            except _READ_ERRORS as error:
                raise StoreError(f"the event log cannot be read: {error}") from None
        return (row[0], row[1], row[2]) if row else (0, GENESIS_HASH, None)

    def verify(self, anchor: Anchor | None = None) -> Verification:
        """Walk the whole chain in one read snapshot and report the first broken link; a damaged
        file is reported, not raised."""
        self._group.flush()
        with self._lock:
            conn = self._connection()
            # text that is not UTF-8 comes back as bytes, for verify_events to name its row
            conn.text_factory = _text_or_bytes
            try:
                conn.execute("BEGIN")  # one snapshot: appends by others are not seen
                return verify_events(
                    _rows(conn, f"SELECT {self._columns} FROM events ORDER BY position"),
                    anchor,
                    key=self.log_key,
                )
            except _READ_ERRORS as error:
                return Verification(False, 0, None, f"the log cannot be read: {error}")
            finally:
                conn.text_factory = str
                if conn.in_transaction:
                    conn.execute("ROLLBACK")

    def close(self) -> None:
        if self._conn is not None and not self._readonly:
            self._group.flush()
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError("the event store is closed")
        return self._conn


def _rows(conn: sqlite3.Connection, sql: str) -> Iterator[Event]:
    """The events a query selects; a read that fails part way raises StoreError."""
    try:
        for row in conn.execute(sql):
            yield Event(*row)
    except _READ_ERRORS as error:
        raise StoreError(str(error)) from None


def _text_or_bytes(data: bytes) -> str | bytes:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return NotUtf8(data)


class _WriteTransaction:
    """`BEGIN IMMEDIATE` … `COMMIT`, rolled back on any exception, under the connection lock."""

    def __init__(self, lock: threading.Lock, conn: sqlite3.Connection) -> None:
        self.lock = lock
        self.conn = conn

    def __enter__(self) -> _WriteTransaction:
        self.lock.acquire()
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except BaseException:
            self.lock.release()
            raise
        return self

    def executescript_in_tx(self, script: str) -> None:
        # executescript would COMMIT first; run the statements one by one instead
        for statement in _statements(script):
            self.conn.execute(statement)

    def __exit__(self, exc_type: object, *_: object) -> None:
        try:
            if exc_type is None:
                self.conn.execute("COMMIT")
            elif self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
        finally:
            self.lock.release()


def _statements(script: str) -> list[str]:
    out: list[str] = []
    current = ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            out.append(current.strip())
            current = ""
    return out


# ---------------------------------------------------------------------------------------------
# Memory


class MemoryStore(Appends):
    """The same contract in memory, for tests and short-lived tools; nothing survives the
    process.

    >>> from harnessc.runtime.log.events import NewEvent
    >>> store = MemoryStore()
    >>> store.append(NewEvent("s", "Text", "note")).hash == store.head()[1]
    True
    """

    def __init__(self, *, clock: Clock = system_clock, key: LogKey | None = None) -> None:
        """`key`: a log key, only when given (nothing outside the process can write here)."""
        self._clock = clock
        self.log_key = key
        self._events: list[Event] = []
        self._seqs: dict[str, int] = {}
        self._lock = threading.Lock()
        self._deferred: list[NewEvent] = []
        self._deferred_texts: list[str] = []
        self._claims: set[Claim] = set()  # `claims_of`, as the log holds them

    DEFERRED_MAX = 16
    """Deferred events are numbered together once this many wait (or at the next append or
    read): one time and one lock for all of them. Four calls' worth: the call that numbers them
    pays for all, so a larger batch saves little and makes that call a slow one. Measured on
    normalize + decide alone: at 64 the p99 was 5.5 times the median; at 16 it is about 150 µs
    (the numbering call's tail) over a median of 28; at 12 the same p99; at 8 the median itself
    is a numbering call and nearly doubles."""

    def defer(self, events: Sequence[NewEvent]) -> None:
        """Append events with the next append or read (nothing here is durable, so deferring
        only numbers many events at once)."""
        self.refused()
        if self._announced:
            events, _ = self._with_announced(events)
        texts = payload_texts(events)  # a payload that is not JSON is refused now
        with self._lock:
            self._deferred.extend(events)
            self._deferred_texts.extend(texts)
            if len(self._deferred) >= self.DEFERRED_MAX:
                self._settle()

    def flush(self) -> None:
        with self._lock:
            self._settle()

    def changed_elsewhere(self) -> bool:
        """Never: only this process writes to memory."""
        return False

    def held(self) -> list[NewEvent]:
        """The deferred events not numbered yet, in order."""
        with self._lock:
            return list(self._deferred)

    def _settle(self, numbering: _Numbering | None = None) -> None:
        """Number the deferred events (under the lock)."""
        if not self._deferred:
            return
        if numbering is None:
            numbering = self._numbering()
        if self._events:
            check_head_key(self._events[-1].hash, self._events[-1].mac, self.log_key)
        claims: dict[int, list[Claim]] = {}  # one pass over the events: most claim nothing
        for claim, event in claims_of(self._deferred):
            claims.setdefault(id(event), []).append(claim)
        events, texts = [], []
        for event, text in zip(self._deferred, self._deferred_texts, strict=True):
            mine = claims.get(id(event))
            if mine:
                if any(claim in self._claims for claim in mine):
                    continue  # a move decided on a state the action has moved on from: left out
                self._claims.update(mine)
            events.append(event)
            texts.append(text)
        self._deferred, self._deferred_texts = [], []
        out, seqs = number_batch(events, texts, numbering, lambda s: self._seqs.get(s, 0), None)
        self._events.extend(out)
        self._seqs.update(seqs)

    def _append(self, events: Sequence[NewEvent], expected_seq: Expected) -> list[Event]:
        payloads = payload_texts(events)
        with self._lock:
            numbering = self._numbering()
            self._settle(numbering)
            if self._events:
                check_head_key(self._events[-1].hash, self._events[-1].mac, self.log_key)
            out, seqs = number_batch(
                events, payloads, numbering, lambda s: self._seqs.get(s, 0), expected_seq
            )
            claims = claims_of(events)
            for claim, event in claims:
                if claim in self._claims:
                    raise refusal(claim, event)
            self._events.extend(out)
            self._seqs.update(seqs)
            self._claims.update(claim for claim, _ in claims)
        return out

    def _numbering(self) -> _Numbering:
        head = self._events[-1] if self._events else None
        return _Numbering(
            self._clock,
            head.position if head else 0,
            head.hash if head else GENESIS_HASH,
            self.log_key,
        )

    def read(
        self,
        stream: str | None = None,
        *,
        after: int = 0,
        limit: int | None = None,
        flush: bool = True,
    ) -> list[Event]:
        with self._lock:
            if flush:
                self._settle()
            # INVARIANT: positions are 1..n, so the event after position p is at index p
            found = [e for e in self._events[max(after, 0) :] if stream in (None, e.stream)]
        return found if limit is None else found[:limit]

    def last(self, prefix: str, type: str) -> Event | None:
        with self._lock:
            self._settle()
            for e in reversed(self._events):
                if e.type == type and e.stream.startswith(prefix):
                    return e
        return None

    def read_prefix(self, prefix: str, type: str, *, after: int = 0) -> list[Event]:
        with self._lock:
            self._settle()
            return [
                e
                for e in self._events[max(after, 0) :]
                if e.type == type and e.stream.startswith(prefix)
            ]

    def head(self) -> tuple[int, str]:
        with self._lock:
            self._settle()
            return (
                (self._events[-1].position, self._events[-1].hash)
                if self._events
                else (0, GENESIS_HASH)
            )

    def checkpoint(self) -> Checkpoint:
        with self._lock:
            self._settle()
            head = self._events[-1] if self._events else None
        if head is None:
            return checkpoint_of(0, GENESIS_HASH, None, self.log_key)
        return checkpoint_of(head.position, head.hash, head.mac, self.log_key)

    def verify(self, anchor: Anchor | None = None) -> Verification:
        with self._lock:
            self._settle()
            events = list(self._events)
        return verify_events(events, anchor, key=self.log_key)

    def close(self) -> None:
        self.flush()
