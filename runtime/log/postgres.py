"""The event store on PostgreSQL: the same contract as `SQLiteStore`, for many processes or
machines sharing one harness (needs `psycopg`, in the `workflows` extra).

The log is one table, `harnessc.events`. Every append is one transaction that first takes a
transaction-scoped advisory lock, so positions, per-stream `seq` and `prev_hash` are assigned
by one writer at a time: the log stays one gap-free hash chain, and a later commit always has a
higher position than every earlier one (a reader resuming with `after=cursor` misses nothing).
Triggers refuse UPDATE and DELETE. `verify` walks the chain in one REPEATABLE READ snapshot.

    store = PostgresStore("postgresql://harness@localhost/harness")
    store.append(NewEvent("s-1", "State", "session.started", {"agent": "planner"}))
"""

from __future__ import annotations

import atexit
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import Any, cast

import psycopg

from .events import GENESIS_HASH, Clock, Event, system_clock
from .integrity import Checkpoint, LogKey
from .store import (
    _READABLE_VERSIONS,
    SCHEMA_VERSION,
    Anchor,
    Batch,
    GroupCommit,
    GroupCommitted,
    Row,
    SeqCache,
    StoreError,
    Verification,
    _Numbering,
    check_head_key,
    checkpoint_of,
    commit_batches,
    flush_at_exit,
    row,
    select_rows,
    verify_events,
)

__all__ = ["PostgresStore"]

_LOCK_KEY = 0x6861726E65737363  # "harnessc": the advisory lock every writer of the log takes

_DDL = """
CREATE SCHEMA IF NOT EXISTS harnessc;
CREATE TABLE IF NOT EXISTS harnessc.events (
    position  BIGINT PRIMARY KEY,  -- global, from 1, no gaps
    stream    TEXT   NOT NULL,
    seq       BIGINT NOT NULL,     -- per stream, from 1
    kind      TEXT   NOT NULL,
    type      TEXT   NOT NULL,
    payload   TEXT   NOT NULL,     -- canonical JSON, hashed as stored
    time      TEXT   NOT NULL,
    prev_hash TEXT   NOT NULL,
    hash      TEXT   NOT NULL,
    mac       TEXT,                -- HMAC of hash under the log key, when there is one
    UNIQUE (stream, seq)
);
ALTER TABLE harnessc.events ADD COLUMN IF NOT EXISTS mac TEXT;
CREATE INDEX IF NOT EXISTS events_by_stream ON harnessc.events (stream, position);
CREATE INDEX IF NOT EXISTS events_by_stream_prefix ON harnessc.events (stream text_pattern_ops);
CREATE TABLE IF NOT EXISTS harnessc.meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE OR REPLACE FUNCTION harnessc.append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'events are append-only'; END $$;
CREATE OR REPLACE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON harnessc.events
FOR EACH ROW EXECUTE FUNCTION harnessc.append_only();
"""

# The claims of `claims_of` held by the log itself (as in SQLite): partial unique indexes over
# the RUNNING moves only.
_CLAIM_INDEXES = (
    "CREATE UNIQUE INDEX IF NOT EXISTS action_runs_once ON harnessc.events "
    "(((payload::jsonb) ->> 'action_id')) WHERE type = 'action.transition' "
    "AND (payload::jsonb) ->> 'to' = 'RUNNING'",
    "CREATE UNIQUE INDEX IF NOT EXISTS call_runs_once ON harnessc.events "
    "(stream, ((payload::jsonb) ->> 'tool_call_id'), ((payload::jsonb) ->> 'input_hash')) "
    "WHERE type = 'action.transition' AND (payload::jsonb) ->> 'to' = 'RUNNING'",
    "CREATE UNIQUE INDEX IF NOT EXISTS action_leaves_running_once ON harnessc.events "
    "(((payload::jsonb) ->> 'action_id')) WHERE type = 'action.transition' "
    "AND (payload::jsonb) ->> 'from' = 'RUNNING'",
    "CREATE UNIQUE INDEX IF NOT EXISTS action_leaves_state_once ON harnessc.events "
    "(((payload::jsonb) ->> 'action_id'), ((payload::jsonb) ->> 'from')) "
    "WHERE type = 'action.transition' AND (payload::jsonb) ->> 'from' IS NOT NULL",
)
_CLAIMED = {
    "runs": "SELECT 1 FROM harnessc.events WHERE type = 'action.transition' "
    "AND (payload::jsonb) ->> 'to' = 'RUNNING' "
    "AND (payload::jsonb) ->> 'action_id' = %s LIMIT 1",
    "call-runs": "SELECT 1 FROM harnessc.events WHERE type = 'action.transition' "
    "AND (payload::jsonb) ->> 'to' = 'RUNNING' AND stream = %s "
    "AND (payload::jsonb) ->> 'tool_call_id' = %s "
    "AND (payload::jsonb) ->> 'input_hash' = %s LIMIT 1",
    "leaves": "SELECT 1 FROM harnessc.events WHERE type = 'action.transition' "
    "AND (payload::jsonb) ->> 'action_id' = %s "
    "AND (payload::jsonb) ->> 'from' = %s LIMIT 1",
}

_COLUMNS = "position, stream, seq, kind, type, payload, time, prev_hash, hash, mac"


class PostgresStore(GroupCommitted):
    """The event store on PostgreSQL; safe to share between threads (one connection behind a
    lock) and between processes and machines (the advisory lock serialises writers)."""

    def __init__(
        self,
        url: str,
        *,
        clock: Clock = system_clock,
        key: LogKey | None = None,
        readonly: bool = False,
    ) -> None:
        """`key` and `readonly` as for `SQLiteStore`: the log key (by default from the
        environment), and an existing log opened only to read and verify it."""
        self._clock = clock
        self.log_key = key if key is not None else LogKey.from_env()
        self._readonly = readonly
        self._columns = _COLUMNS
        self._lock = threading.Lock()
        self._group = GroupCommit(self._commit)
        self._seqs = SeqCache()
        self._seen: tuple[int, str] | None = None  # the head `changed_elsewhere` saw last
        atexit.register(flush_at_exit, weakref.ref(self))
        try:
            self._conn: psycopg.Connection[Any] | None = psycopg.connect(url, autocommit=False)
        except psycopg.Error as error:
            raise StoreError(f"cannot open the event store: {error}") from None
        with self._lock, self._connection().transaction():
            conn = self._connection()
            if readonly:
                self._columns = _readable(conn)
                return
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            for statement in _statements(_DDL):
                conn.execute(statement)
            row = conn.execute("SELECT value FROM harnessc.meta WHERE key = 'schema'").fetchone()
            if row is None:
                conn.execute("INSERT INTO harnessc.meta VALUES ('schema', %s)", (SCHEMA_VERSION,))
            elif row[0] == "1":  # the DDL added the `mac` column; no event was rewritten
                conn.execute(
                    "UPDATE harnessc.meta SET value = %s WHERE key = 'schema'", (SCHEMA_VERSION,)
                )
            elif row[0] != SCHEMA_VERSION:
                raise StoreError(f"event store format {row[0]} is not supported")
            for index in _CLAIM_INDEXES:
                # a log written before the claims may hold a second RUNNING already: then the
                # index cannot be made, and the commit's own check (`claims_of`) holds alone
                try:
                    with conn.transaction():  # a savepoint: a failed index leaves the rest
                        conn.execute(index)
                except psycopg.errors.UniqueViolation:
                    pass

    # -- writing ------------------------------------------------------------------------------

    def _commit(self, batches: list[Batch]) -> None:
        if not any(b.events for b in batches):
            return
        with self._lock, self._connection().transaction():
            conn = self._connection()
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            head = conn.execute(
                "SELECT position, hash, mac FROM harnessc.events ORDER BY position DESC LIMIT 1"
            ).fetchone()
            position, head_hash, head_mac = head or (0, GENESIS_HASH, None)
            check_head_key(head_hash, head_mac, self.log_key)
            out = commit_batches(
                batches,
                _Numbering(self._clock, int(position), head_hash, self.log_key),
                self._seqs.reader(
                    int(position),
                    head_hash,
                    # an aggregate with no GROUP BY returns exactly one row, never None
                    lambda stream: int(
                        cast(
                            "tuple[Any, ...]",
                            conn.execute(
                                "SELECT coalesce(max(seq), 0) FROM harnessc.events "
                                "WHERE stream = %s",
                                (stream,),
                            ).fetchone(),
                        )[0]
                    ),
                ),
                lambda claim: conn.execute(_CLAIMED[claim[0]], claim[1:]).fetchone() is not None,
            )
            if out:
                with conn.cursor() as cur:
                    cur.executemany(
                        f"INSERT INTO harnessc.events ({_COLUMNS}) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                        [row(e) for e in out],
                    )
        self._seqs.committed(out)

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
        first, unless `flush` is False (`read_committed` in runtime/log/store.py)."""
        if flush:
            self._group.flush()
        sql = f"SELECT {self._columns} FROM harnessc.events WHERE position > %s"
        params: list[object] = [after]
        if stream is not None:
            sql += " AND stream = %s"
            params.append(stream)
        sql += " ORDER BY position"
        if limit is not None:
            sql += " LIMIT %s"
            params.append(limit)
        with self._lock, self._connection().transaction():
            rows = self._connection().execute(sql, params).fetchall()
        return [Event(*row) for row in rows]

    def scan(
        self, stream: str | None = None, *, after: int = 0, batch: int = 1000
    ) -> Iterator[Event]:
        """All events after `after`, read page by page."""
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
        """As `SQLiteStore.read_rows`."""
        self._group.flush()
        sql, params = select_rows(types, moves, "%s")
        sql = "SELECT " + sql.format(table="harnessc.events") + f" LIMIT {int(limit)}"
        with self._lock, self._connection().transaction():
            return self._connection().execute(sql, [after, *params]).fetchall()

    def last(self, prefix: str, type: str) -> Event | None:
        # LIKE with a left-anchored pattern uses the text_pattern_ops index whatever the
        # database's collation; `\`, `%` and `_` in the prefix are escaped
        pattern = _prefix_pattern(prefix)
        self._group.flush()
        with self._lock, self._connection().transaction():
            row = (
                self._connection()
                .execute(
                    f"SELECT {self._columns} FROM harnessc.events WHERE stream LIKE %s "
                    "AND type = %s ORDER BY position DESC LIMIT 1",
                    (pattern, type),
                )
                .fetchone()
            )
        return Event(*row) if row else None

    def read_prefix(self, prefix: str, type: str, *, after: int = 0) -> list[Event]:
        self._group.flush()
        with self._lock, self._connection().transaction():
            rows = (
                self._connection()
                .execute(
                    f"SELECT {self._columns} FROM harnessc.events WHERE stream LIKE %s "
                    "AND type = %s AND position > %s ORDER BY position",
                    (_prefix_pattern(prefix), type, after),
                )
                .fetchall()
            )
        return [Event(*row) for row in rows]

    def head(self) -> tuple[int, str]:
        position, head_hash, _ = self._head()
        return position, head_hash

    def checkpoint(self) -> Checkpoint:
        return checkpoint_of(*self._head(), self.log_key)

    def changed_elsewhere(self) -> bool:
        """Whether the head of the log moved since the last call, other than by this store's
        own last commit (one query)."""
        with self._lock, self._connection().transaction():
            row = (
                self._connection()
                .execute(
                    "SELECT position, hash FROM harnessc.events ORDER BY position DESC LIMIT 1"
                )
                .fetchone()
            )
        position, head_hash = (int(row[0]), str(row[1])) if row else (0, GENESIS_HASH)
        head = (position, head_hash)
        changed = head != self._seen and not self._seqs.own(position, head_hash)
        self._seen = head
        return changed

    def _head(self) -> tuple[int, str, str | None]:
        mac = self._columns.rpartition(", ")[2]
        self._group.flush()
        with self._lock, self._connection().transaction():
            row = (
                self._connection()
                .execute(
                    f"SELECT position, hash, {mac} FROM harnessc.events "
                    "ORDER BY position DESC LIMIT 1"
                )
                .fetchone()
            )
        return (int(row[0]), str(row[1]), row[2]) if row else (0, GENESIS_HASH, None)

    def verify(self, anchor: Anchor | None = None) -> Verification:
        """Walk the whole chain in one snapshot and report the first broken link."""
        self._group.flush()
        with self._lock:
            conn = self._connection()
            try:
                with conn.transaction():
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    return verify_events(
                        _rows(
                            conn, f"SELECT {self._columns} FROM harnessc.events ORDER BY position"
                        ),
                        anchor,
                        key=self.log_key,
                    )
            except psycopg.Error as error:
                return Verification(False, 0, None, f"the log cannot be read: {error}")

    def close(self) -> None:
        if self._conn is not None and not self._readonly:
            self._group.flush()
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None:
            raise StoreError("the event store is closed")
        return self._conn


def _readable(conn: psycopg.Connection[Any]) -> str:
    """The columns to select from an existing log opened read-only."""
    found = conn.execute(
        "SELECT to_regclass('harnessc.events') IS NOT NULL, "
        "to_regclass('harnessc.meta') IS NOT NULL"
    ).fetchone()
    if found is None or not all(found):
        raise StoreError("the database holds no event log")
    row = conn.execute("SELECT value FROM harnessc.meta WHERE key = 'schema'").fetchone()
    if row is None or row[0] not in _READABLE_VERSIONS:
        raise StoreError(f"event store format {row[0] if row else '?'} is not supported")
    has_mac = conn.execute(
        "SELECT count(*) FROM information_schema.columns "
        "WHERE table_schema = 'harnessc' AND table_name = 'events' AND column_name = 'mac'"
    ).fetchone()
    return _COLUMNS if has_mac and has_mac[0] else _COLUMNS.replace(", mac", ", NULL")


def _rows(conn: psycopg.Connection[Any], sql: str) -> Iterator[Event]:
    """The events a query selects; a read that fails part way raises StoreError."""
    try:
        for row in conn.execute(sql):
            yield Event(*row)
    except psycopg.Error as error:
        raise StoreError(str(error)) from None


def _prefix_pattern(prefix: str) -> str:
    """A LIKE pattern matching the names that start with `prefix` (`\\`, `%`, `_` escaped)."""
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _statements(script: str) -> list[str]:
    # `$$ … $$` bodies hold semicolons: split only outside them
    out: list[str] = []
    current = ""
    quoted = False
    for part in script.split("$$"):
        if quoted:
            current += "$$" + part + "$$"
        else:
            pieces = part.split(";")
            current += pieces[0]
            for piece in pieces[1:]:
                if current.strip():
                    out.append(current.strip())
                current = piece
        quoted = not quoted
    if current.strip():
        out.append(current.strip())
    return out
