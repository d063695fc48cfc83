"""The embedded event store: the whole log in one SQLite file in WAL mode.

Every commit is one transaction opened with `BEGIN IMMEDIATE`, which takes SQLite's single write
lock before reading the head of the log, so `position`, `seq` and `prev_hash` are assigned under
the lock: many threads or processes may append to the same file and the log stays one gap-free
chain. Appends from the threads of one process share commits (`GroupCommit`), and `defer` holds
events for the next commit (a call's events before it runs: docs/runtime.md, "What a call
writes"). Because writers are serialised and positions are assigned inside the write
transaction, a later commit always has a higher position than every earlier one, so a reader
that resumes with `after=cursor` never misses an event and never sees one twice.

Durability: `synchronous=FULL` (the default) fsyncs the WAL at every commit, so an event whose
append returned survives a process kill, an OS crash and a power cut. `synchronous=NORMAL` with
WAL survives a process kill (SIGKILL) with the chain intact but may lose the last commits on an
OS crash or power cut; it is offered for throughput where the log can be rebuilt from elsewhere,
never as the default: an acknowledged approval or grant must not disappear.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Iterator, Sequence
from os import PathLike
from typing import Any

from ._group_commit import Batch
from ._numbering import Numbering, SeqCache, check_head_key, commit_batches
from ._sql import COLUMNS, READABLE_VERSIONS, SCHEMA_VERSION, SqlStore, row
from .chain import Anchor, NotUtf8, StoreError, Verification, cut_or_failure, verify_events
from .events import GENESIS_HASH, Clock, Event, system_clock
from .integrity import LogKey

__all__ = ["SQLiteStore"]

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
"""
_NO_DELETE = """
CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
"""
_DDL += _NO_DELETE

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

_INSERTS = (
    "",
    *(
        f"INSERT INTO events ({COLUMNS}) VALUES "
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


class SQLiteStore(SqlStore[sqlite3.Connection]):
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
        super().__init__(clock=clock, key=key, readonly=readonly)
        self._claims_indexed = False  # the log holds every claim index (`_CLAIM_INDEXES`)
        self._conn = None
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
        if row is None or row[0] not in READABLE_VERSIONS:
            raise StoreError(f"event store format {row[0] if row else '?'} is not supported")
        columns = {r[1] for r in conn.execute("PRAGMA table_info(events)")}
        return COLUMNS if "mac" in columns else COLUMNS.replace(", mac", ", NULL")

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
                Numbering(self._clock, position, head_hash, self.log_key),
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
                lambda stream, after: (
                    conn.execute(
                        "SELECT 1 FROM events WHERE stream = ? AND position > ? LIMIT 1",
                        (stream, after),
                    ).fetchone()
                    is not None
                ),
            )
            if len(out) < len(_INSERTS):  # one statement for the commit's rows
                conn.execute(_INSERTS[len(out)], [v for e in out for v in row(e)])
            else:
                conn.executemany(_INSERTS[1], [row(e) for e in out])
        self._seqs.committed(out)

    def discard(self, positions: Sequence[int]) -> int:
        """Remove the events at `positions` (a compaction archived them: runtime/log/cut.py),
        in one transaction; the append-only trigger is lifted for it alone. Returns how many
        were removed. The head is never removed."""
        if self._readonly:
            raise StoreError("the event store was opened read-only")
        self._group.flush()
        wanted = sorted(set(positions))
        try:
            removed = self._discard(wanted)
        except sqlite3.Error as error:  # a read-only file, a full disk: say so
            raise StoreError(f"cannot remove the archived events: {error}") from None
        self._seqs = SeqCache()
        return removed

    def _discard(self, wanted: list[int]) -> int:
        with self._write() as c:
            conn = c.conn
            head = conn.execute("SELECT max(position) FROM events").fetchone()[0]
            if head is not None and head in wanted:
                raise StoreError("the head of the log is never discarded")
            conn.execute("DROP TRIGGER IF EXISTS events_no_delete")
            removed = 0
            for at in range(0, len(wanted), 500):
                chunk = wanted[at : at + 500]
                marks = ", ".join("?" * len(chunk))
                removed += conn.execute(
                    f"DELETE FROM events WHERE position IN ({marks})", chunk
                ).rowcount
            c.executescript_in_tx(_NO_DELETE)
        return removed

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
            if changed:
                self._elsewhere += 1
                self._seqs.forget()
        return bool(changed)

    def same_log(self, url: str) -> bool:
        """Whether this store is the log at `url` (`sqlite:///PATH` or a plain PATH, as
        `open_store` reads it): the same file, whatever the path's spelling."""
        if "://" in url.removeprefix("sqlite:///"):
            return False
        with self._lock:
            files = [r[2] for r in self._connection().execute("PRAGMA database_list")]
        # the main database comes first; an in-memory one has no file
        wanted = os.path.realpath(url.removeprefix("sqlite:///"))
        return bool(files and files[0]) and os.path.realpath(files[0]) == wanted

    # -- reading ----------------------------------------------------------------------------------

    def _select(self, sql: str, params: Sequence[object], failure: str) -> list[Any]:
        with self._lock:
            try:
                return self._connection().execute(sql, params).fetchall()
            except _READ_ERRORS as error:  # a damaged file: say so, never a raw error
                raise StoreError(f"{failure}: {error}") from None

    def _prefix(self, prefix: str) -> tuple[str, list[object]]:
        # a range over the (stream, position) index: TEXT compares by bytes in SQLite, so the
        # streams starting with `prefix` are exactly those in [prefix, prefix + U+10FFFF)
        return "stream >= ? AND stream < ?", [prefix, prefix + "\U0010ffff"]

    def verify(self, anchor: Anchor | None = None) -> Verification:
        """Walk the whole chain in one read snapshot and report the first broken link; a damaged
        file is reported, not raised."""
        self._group.flush()
        cut = cut_or_failure(self)
        if isinstance(cut, Verification):
            return cut
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
                    cut=cut,
                )
            except _READ_ERRORS as error:
                return Verification(False, 0, None, f"the log cannot be read: {error}")
            finally:
                conn.text_factory = str
                if conn.in_transaction:
                    conn.execute("ROLLBACK")


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
