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

import threading
from collections.abc import Iterator, Sequence
from typing import Any, cast

import psycopg

from ._group_commit import Batch
from ._numbering import Numbering, SeqCache, check_head_key, commit_batches
from ._sql import COLUMNS, READABLE_VERSIONS, SCHEMA_VERSION, SqlStore, row
from .chain import Anchor, StoreError, Verification, cut_or_failure, verify_events
from .events import GENESIS_HASH, Clock, Event, system_clock
from .integrity import LogKey

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

CHANNEL = "harnessc_events"
"""The channel every commit notifies (its last position as payload), for `wait_for_append`."""

_MOVED = "SELECT 1 FROM harnessc.events WHERE stream = %s AND position > %s LIMIT 1"
"""Whether a stream has an event after a position (`Unmoved`): one probe of `events_by_stream`."""


class PostgresStore(SqlStore[psycopg.Connection[Any]]):
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
        super().__init__(clock=clock, key=key, readonly=readonly)
        self._seen: tuple[int, str] | None = None  # the head `changed_elsewhere` saw last
        self._url = url
        self._listener: psycopg.Connection[Any] | None = None  # LISTEN, for `wait_for_append`
        self._listening = threading.Lock()
        self._conn = None
        try:
            self._conn = psycopg.connect(url, autocommit=False)
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
                Numbering(self._clock, int(position), head_hash, self.log_key),
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
                lambda stream, after: conn.execute(_MOVED, (stream, after)).fetchone() is not None,
            )
            if out:
                with conn.cursor() as cur:
                    cur.executemany(
                        f"INSERT INTO harnessc.events ({COLUMNS}) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                        [row(e) for e in out],
                    )
                # delivered to every listener when (and only if) the transaction commits
                conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, str(out[-1].position)))
        self._seqs.committed(out)

    def discard(self, positions: Sequence[int]) -> int:
        """Remove the events at `positions` (a compaction archived them: runtime/log/cut.py),
        in one transaction that holds the writers' lock; the append-only trigger is lifted for
        it alone. Returns how many were removed. The head is never removed."""
        if self._readonly:
            raise StoreError("the event store was opened read-only")
        self._group.flush()
        wanted = sorted(set(positions))
        try:
            with self._lock, self._connection().transaction():
                conn = self._connection()
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
                head = conn.execute("SELECT max(position) FROM harnessc.events").fetchone()
                if head is not None and head[0] is not None and int(head[0]) in wanted:
                    raise StoreError("the head of the log is never discarded")
                conn.execute("ALTER TABLE harnessc.events DISABLE TRIGGER events_append_only")
                removed = 0
                for at in range(0, len(wanted), 5000):
                    cur = conn.execute(
                        "DELETE FROM harnessc.events WHERE position = ANY(%s)",
                        (wanted[at : at + 5000],),
                    )
                    removed += cur.rowcount
                conn.execute("ALTER TABLE harnessc.events ENABLE TRIGGER events_append_only")
        except psycopg.Error as error:  # not the table's owner, the server gone: say so
            raise StoreError(f"cannot remove the archived events: {error}") from None
        self._seqs = SeqCache()
        return removed

    # -- reading ------------------------------------------------------------------------------

    _MARK = "%s"
    _TABLE = "harnessc.events"

    def _select(self, sql: str, params: Sequence[object], failure: str) -> list[Any]:
        with self._lock, self._connection().transaction():
            return self._connection().execute(sql, params).fetchall()

    def _prefix(self, prefix: str) -> tuple[str, list[object]]:
        # LIKE with a left-anchored pattern uses the text_pattern_ops index whatever the
        # database's collation; `\`, `%` and `_` in the prefix are escaped
        return "stream LIKE %s", [_prefix_pattern(prefix)]

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
        if changed:
            self._elsewhere += 1
            self._seqs.forget()
        return changed

    def wait_for_append(self, timeout_s: float) -> bool:
        """Wait for a commit by anyone (a NOTIFY on `CHANNEL`), at most `timeout_s`. The first
        call opens a listening connection and returns True at once: from then on no commit
        is missed (notifications queue on that connection), so the caller looks at the log
        and waits again. A notification of this store's own commit wakes it too."""
        with self._listening:
            if self._listener is None:
                try:
                    self._listener = psycopg.connect(self._url, autocommit=True)
                    self._listener.execute(f"LISTEN {CHANNEL}")
                except psycopg.Error as error:
                    raise StoreError(f"cannot listen to the event store: {error}") from None
                return True
            listener = self._listener
            try:
                return any(True for _ in listener.notifies(timeout=timeout_s, stop_after=1))
            except psycopg.Error as error:
                self._listener = None  # a new connection at the next call
                raise StoreError(f"lost the event store's notifications: {error}") from None

    def close(self) -> None:
        with self._listening:
            if self._listener is not None:
                self._listener.close()
                self._listener = None
        super().close()

    def same_log(self, url: str) -> bool:
        """Whether this store is the log at `url` (`postgresql://…`): the same database, on
        the same port when the URL names one."""
        if not url.startswith(("postgresql://", "postgres://")):
            return False
        from psycopg.conninfo import conninfo_to_dict

        info = self._connection().info
        wanted = conninfo_to_dict(url.replace("postgres://", "postgresql://", 1))
        return info.dbname == wanted.get("dbname") and (
            "port" not in wanted or str(info.port) == str(wanted["port"])
        )

    def verify(self, anchor: Anchor | None = None) -> Verification:
        """Walk the whole chain in one snapshot and report the first broken link."""
        self._group.flush()
        cut = cut_or_failure(self)
        if isinstance(cut, Verification):
            return cut
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
                        cut=cut,
                    )
            except psycopg.Error as error:
                return Verification(False, 0, None, f"the log cannot be read: {error}")


def _readable(conn: psycopg.Connection[Any]) -> str:
    """The columns to select from an existing log opened read-only."""
    found = conn.execute(
        "SELECT to_regclass('harnessc.events') IS NOT NULL, "
        "to_regclass('harnessc.meta') IS NOT NULL"
    ).fetchone()
    if found is None or not all(found):
        raise StoreError("the database holds no event log")
    row = conn.execute("SELECT value FROM harnessc.meta WHERE key = 'schema'").fetchone()
    if row is None or row[0] not in READABLE_VERSIONS:
        raise StoreError(f"event store format {row[0] if row else '?'} is not supported")
    has_mac = conn.execute(
        "SELECT count(*) FROM information_schema.columns "
        "WHERE table_schema = 'harnessc' AND table_name = 'events' AND column_name = 'mac'"
    ).fetchone()
    return COLUMNS if has_mac and has_mac[0] else COLUMNS.replace(", mac", ", NULL")


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
