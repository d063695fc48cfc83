"""Event stores: the `EventStore` interface, the embedded SQLite store and an in-memory one.

The SQLite store keeps the whole log in one file in WAL mode. Every append is one transaction
opened with `BEGIN IMMEDIATE`, which takes SQLite's single write lock before reading the head of
the log, so `position`, `seq` and `prev_hash` are assigned under the lock: many threads or
processes may append to the same file and the log stays one gap-free chain. Because writers are
serialised and positions are assigned inside the write transaction, a later commit always has a
higher position than every earlier one, so a reader that resumes with `after=cursor` never misses
an event and never sees one twice.

Durability: `synchronous=FULL` (the default) fsyncs the WAL at every commit, so an event whose
append returned survives a process kill, an OS crash and a power cut. `synchronous=NORMAL` with
WAL survives a process kill (SIGKILL) with the chain intact but may lose the last commits on an
OS crash or power cut; it is offered for throughput where the log can be rebuilt from elsewhere,
never as the default: an acknowledged approval or grant must not disappear.

>>> from harnessc.runtime.events import NewEvent
>>> store = SQLiteStore(":memory:")
>>> store.append(NewEvent("s-1", "State", "session.started", {"agent": "planner"})).position
1
>>> store.verify().ok
True
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from os import PathLike
from typing import Protocol, runtime_checkable

from .canonical import canonical_json
from .events import (
    GENESIS_HASH,
    KINDS,
    Clock,
    Event,
    NewEvent,
    event_hash,
    format_time,
    system_clock,
)

__all__ = [
    "ConcurrencyError",
    "EventStore",
    "MemoryStore",
    "SQLiteStore",
    "StoreError",
    "Verification",
    "verify_events",
]

SCHEMA_VERSION = "1"


class StoreError(RuntimeError):
    """The store cannot do what was asked (closed, a newer file format, …)."""


class ConcurrencyError(StoreError):
    """`expected_seq` did not match: another writer appended to the stream first."""

    def __init__(self, stream: str, expected: int, actual: int) -> None:
        self.stream = stream
        self.expected = expected
        self.actual = actual
        super().__init__(f"stream `{stream}` is at seq {actual}, not {expected}")


@dataclass(frozen=True)
class Verification:
    """The result of walking the chain: ok, or the first broken link (position and reason)."""

    ok: bool
    checked: int
    position: int | None = None
    reason: str | None = None

    def __bool__(self) -> bool:
        return self.ok


@runtime_checkable
class EventStore(Protocol):
    """What every store offers; SQLite here, PostgreSQL later, the same contract."""

    def append(self, event: NewEvent, *, expected_seq: int | None = None) -> Event:
        """Append one event in its own transaction. With `expected_seq`, refuse (ConcurrencyError)
        unless the stream's last seq is exactly that (0 for a new stream)."""
        ...

    def append_many(self, events: Iterable[NewEvent]) -> list[Event]:
        """Append events in one transaction: all of them or none."""
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

    def verify(self, anchor: tuple[int, str] | None = None) -> Verification: ...

    def close(self) -> None: ...


def verify_events(events: Iterable[Event], anchor: tuple[int, str] | None = None) -> Verification:
    """Walk events in position order and report the first broken link.

    Never raises for what a damaged log can hold: a value of the wrong type, text that is not
    JSON, a broken link, or a store that fails while being read (a `StoreError` from the
    iteration) is reported as a failed `Verification`.
    """
    prev_hash = GENESIS_HASH
    expected = 1
    last_seq: dict[str, int] = {}
    checked = 0
    anchor_seen = anchor is None or anchor[0] == 0
    walk = iter(events)
    while True:
        try:
            e = next(walk, None)
        except StoreError as error:
            return Verification(
                False, checked, None, f"the log cannot be read after position {checked}: {error}"
            )
        if e is None:
            break
        malformed = _malformed(e)
        if malformed is not None:
            return Verification(False, checked, expected, malformed)
        if e.position != expected:
            what = "missing" if e.position > expected else "out of order"
            return Verification(
                False, checked, e.position, f"expected position {expected}: events are {what}"
            )
        if e.prev_hash != prev_hash:
            return Verification(
                False,
                checked,
                e.position,
                f"prev_hash does not match the hash of position {e.position - 1}",
            )
        try:
            actual = event_hash(
                position=e.position,
                stream=e.stream,
                seq=e.seq,
                kind=e.kind,
                type=e.type,
                payload_json=e.payload_json,
                time=e.time,
                prev_hash=e.prev_hash,
            )
        except UnicodeEncodeError:  # a lone surrogate: no store returns one, a caller's list may
            return Verification(False, checked, e.position, "the event's text is not UTF-8")
        if actual != e.hash:
            return Verification(False, checked, e.position, "hash does not match the contents")
        seq = last_seq.get(e.stream, 0) + 1
        if e.seq != seq:
            return Verification(
                False, checked, e.position, f"seq {e.seq} in stream `{e.stream}`, expected {seq}"
            )
        if anchor is not None and e.position == anchor[0]:
            if e.hash != anchor[1]:
                return Verification(False, checked, e.position, "hash differs from the anchor")
            anchor_seen = True
        last_seq[e.stream] = seq
        prev_hash = e.hash
        expected += 1
        checked += 1
    if not anchor_seen:
        assert anchor is not None
        return Verification(False, checked, anchor[0], "the log ends before the anchor")
    return Verification(True, checked)


def _malformed(e: Event) -> str | None:
    """Why a stored row cannot be an event (a column of the wrong type, a payload that is not a
    JSON object), or None; a damaged file yields such rows. Whether `hash` is a SHA-256 digest
    needs no check here: it is compared with the one recomputed."""
    for name in ("position", "seq"):
        value = getattr(e, name)
        if type(value) is not int or value < 1:
            return f"`{name}` is not a positive integer"
    for name in ("stream", "kind", "type", "payload_json", "time", "prev_hash", "hash"):
        value = getattr(e, name)
        if type(value) is not str:
            column = "payload" if name == "payload_json" else name
            return (
                f"`{column}` is not UTF-8 text"
                if isinstance(value, _NotUtf8)
                else f"`{column}` is not text"
            )
    if e.kind not in KINDS:
        return f"unknown kind `{e.kind}`"
    try:
        payload = json.loads(e.payload_json)
    except (ValueError, RecursionError):
        return "the payload is not JSON"
    if type(payload) is not dict:
        return "the payload is not a JSON object"
    return None


class _Numbering:
    """Assigns position, seq and hash to new events, given the head of the log."""

    def __init__(self, clock: Clock, position: int, prev_hash: str) -> None:
        self.clock = clock
        self.position = position
        self.prev_hash = prev_hash

    def number(self, event: NewEvent, payload_json: str, seq: int) -> Event:
        self.position += 1
        time = format_time(self.clock())
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


def number_batch(
    events: Sequence[NewEvent],
    payloads: Sequence[str],
    numbering: _Numbering,
    last_seq: Callable[[str], int],
    expected_seq: int | None,
) -> tuple[list[Event], dict[str, int]]:
    """Number a batch appended in one transaction: each stream continues from `last_seq(stream)`
    (asked once per stream), and with `expected_seq` every stream must be exactly there
    (ConcurrencyError otherwise). Returns the events and each stream's new last seq."""
    seqs: dict[str, int] = {}
    out: list[Event] = []
    for event, payload_json in zip(events, payloads, strict=True):
        if event.stream not in seqs:
            seqs[event.stream] = last_seq(event.stream)
            if expected_seq is not None and seqs[event.stream] != expected_seq:
                raise ConcurrencyError(event.stream, expected_seq, seqs[event.stream])
        seqs[event.stream] += 1
        out.append(numbering.number(event, payload_json, seqs[event.stream]))
    return out, seqs


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
    UNIQUE (stream, seq)
);
CREATE INDEX IF NOT EXISTS events_by_stream ON events (stream, position);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
"""

_COLUMNS = "position, stream, seq, kind, type, payload, time, prev_hash, hash"
# a damaged file can also hold a schema whose text is not UTF-8, which sqlite3 cannot decode
# into its own error message
_READ_ERRORS = (sqlite3.Error, UnicodeDecodeError)


class SQLiteStore:
    """The embedded event store: one SQLite file, WAL mode, one transaction per append.

    Safe to share between threads (a lock serialises this connection) and between processes
    (each opens its own `SQLiteStore` on the same file; SQLite's write lock serialises them).

    >>> from harnessc.runtime.events import NewEvent
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
    ) -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise StoreError(f"synchronous must be FULL or NORMAL, not `{synchronous}`")
        self._clock = clock
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        try:
            self._conn = sqlite3.connect(
                path, isolation_level=None, timeout=busy_timeout_s, check_same_thread=False
            )
            self._prepare(self._conn, synchronous)
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
            elif row[0] != SCHEMA_VERSION:
                raise StoreError(f"event store format {row[0]} is not supported")

    # -- writing ------------------------------------------------------------------------------

    def append(self, event: NewEvent, *, expected_seq: int | None = None) -> Event:
        return self._append([event], expected_seq)[0]

    def append_many(self, events: Iterable[NewEvent]) -> list[Event]:
        return self._append(list(events), None)

    def _append(self, events: Sequence[NewEvent], expected_seq: int | None) -> list[Event]:
        if not events:
            return []
        # canonicalize outside the write lock: it is the costly part and needs no lock
        payloads = [canonical_json(e.payload) for e in events]
        with self._write() as c:
            conn = c.conn
            head = conn.execute(
                "SELECT position, hash FROM events ORDER BY position DESC LIMIT 1"
            ).fetchone()
            out, _ = number_batch(
                events,
                payloads,
                _Numbering(self._clock, *(head or (0, GENESIS_HASH))),
                lambda stream: conn.execute(
                    "SELECT coalesce(max(seq), 0) FROM events WHERE stream = ?", (stream,)
                ).fetchone()[0],
                expected_seq,
            )
            conn.executemany(
                f"INSERT INTO events ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [row(e) for e in out],
            )
        return out

    def _write(self) -> _WriteTransaction:
        return _WriteTransaction(self._lock, self._connection())

    # -- reading ------------------------------------------------------------------------------

    def read(
        self, stream: str | None = None, *, after: int = 0, limit: int | None = None
    ) -> list[Event]:
        sql = f"SELECT {_COLUMNS} FROM events WHERE position > ?"
        params: list[object] = [after]
        if stream is not None:
            sql += " AND stream = ?"
            params.append(stream)
        sql += " ORDER BY position"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._lock:
            rows = self._connection().execute(sql, params).fetchall()
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

    def last(self, prefix: str, type: str) -> Event | None:
        # a range over the (stream, position) index: TEXT compares by bytes in SQLite, so the
        # streams starting with `prefix` are exactly those in [prefix, prefix + U+10FFFF)
        with self._lock:
            row = (
                self._connection()
                .execute(
                    f"SELECT {_COLUMNS} FROM events WHERE stream >= ? AND stream < ? AND type = ? "
                    "ORDER BY position DESC LIMIT 1",
                    (prefix, prefix + "\U0010ffff", type),
                )
                .fetchone()
            )
        return Event(*row) if row else None

    def read_prefix(self, prefix: str, type: str, *, after: int = 0) -> list[Event]:
        with self._lock:
            rows = (
                self._connection()
                .execute(
                    f"SELECT {_COLUMNS} FROM events WHERE stream >= ? AND stream < ? AND type = ? "
                    "AND position > ? ORDER BY position",
                    (prefix, prefix + "\U0010ffff", type, after),
                )
                .fetchall()
            )
        return [Event(*row) for row in rows]

    def head(self) -> tuple[int, str]:
        with self._lock:
            row = (
                self._connection()
                .execute("SELECT position, hash FROM events ORDER BY position DESC LIMIT 1")
                .fetchone()
            )
        return (row[0], row[1]) if row else (0, GENESIS_HASH)

    def verify(self, anchor: tuple[int, str] | None = None) -> Verification:
        """Walk the whole chain in one read snapshot and report the first broken link; a damaged
        file is reported, not raised."""
        with self._lock:
            conn = self._connection()
            # text that is not UTF-8 comes back as bytes, for verify_events to name its row
            conn.text_factory = _text_or_bytes
            try:
                conn.execute("BEGIN")  # one snapshot: appends by others are not seen
                return verify_events(
                    _rows(conn, f"SELECT {_COLUMNS} FROM events ORDER BY position"), anchor
                )
            except _READ_ERRORS as error:
                return Verification(False, 0, None, f"the log cannot be read: {error}")
            finally:
                conn.text_factory = str
                if conn.in_transaction:
                    conn.execute("ROLLBACK")

    def close(self) -> None:
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


class _NotUtf8(bytes):
    """Stored text that is not UTF-8 (a blob stays plain bytes)."""


def _text_or_bytes(data: bytes) -> str | bytes:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return _NotUtf8(data)


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


class MemoryStore:
    """The same contract in memory, for tests and short-lived tools; nothing survives the
    process.

    >>> from harnessc.runtime.events import NewEvent
    >>> store = MemoryStore()
    >>> store.append(NewEvent("s", "Text", "note")).hash == store.head()[1]
    True
    """

    def __init__(self, *, clock: Clock = system_clock) -> None:
        self._clock = clock
        self._events: list[Event] = []
        self._seqs: dict[str, int] = {}
        self._lock = threading.Lock()

    def append(self, event: NewEvent, *, expected_seq: int | None = None) -> Event:
        return self._append([event], expected_seq)[0]

    def append_many(self, events: Iterable[NewEvent]) -> list[Event]:
        return self._append(list(events), None)

    def _append(self, events: Sequence[NewEvent], expected_seq: int | None) -> list[Event]:
        payloads = [canonical_json(e.payload) for e in events]
        with self._lock:
            out, seqs = number_batch(
                events, payloads, self._numbering(), lambda s: self._seqs.get(s, 0), expected_seq
            )
            self._events.extend(out)
            self._seqs.update(seqs)
        return out

    def _numbering(self) -> _Numbering:
        head = self._events[-1] if self._events else None
        return _Numbering(
            self._clock, head.position if head else 0, head.hash if head else GENESIS_HASH
        )

    def read(
        self, stream: str | None = None, *, after: int = 0, limit: int | None = None
    ) -> list[Event]:
        with self._lock:
            # INVARIANT: positions are 1..n, so the event after position p is at index p
            found = [e for e in self._events[max(after, 0) :] if stream in (None, e.stream)]
        return found if limit is None else found[:limit]

    def last(self, prefix: str, type: str) -> Event | None:
        with self._lock:
            for e in reversed(self._events):
                if e.type == type and e.stream.startswith(prefix):
                    return e
        return None

    def read_prefix(self, prefix: str, type: str, *, after: int = 0) -> list[Event]:
        with self._lock:
            return [
                e
                for e in self._events[max(after, 0) :]
                if e.type == type and e.stream.startswith(prefix)
            ]

    def head(self) -> tuple[int, str]:
        with self._lock:
            return (
                (self._events[-1].position, self._events[-1].hash)
                if self._events
                else (0, GENESIS_HASH)
            )

    def verify(self, anchor: tuple[int, str] | None = None) -> Verification:
        with self._lock:
            events = list(self._events)
        return verify_events(events, anchor)

    def close(self) -> None:
        pass
