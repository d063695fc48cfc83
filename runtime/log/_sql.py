"""What the SQLite and the PostgreSQL stores share: one table of events, written through a group
commit (`GroupCommit`) with deferred appends, and read with the same queries; each backend
gives its connection, its parameter marker, its locking and its reading of a stream prefix.

The schema's columns and versions are here too: both backends keep the same table.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Generic, Protocol, Self, TypeVar

from ._announce import Announcing
from ._group_commit import Batch, Expected, GroupCommit, Unmoved
from ._numbering import SeqCache, checkpoint_of
from .chain import StoreError
from .events import GENESIS_HASH, Clock, Event, NewEvent
from .integrity import Checkpoint, LogKey

__all__ = [
    "COLUMNS",
    "READABLE_VERSIONS",
    "SCHEMA_VERSION",
    "Row",
    "SqlStore",
    "row",
    "select_rows",
    "selects_row",
]

SCHEMA_VERSION = "2"
"""1: the chain; 2: and a `mac` column (NULL without a log key). A version 1 log is upgraded
when opened for writing (the column added, no event rewritten) and read as it is otherwise."""
READABLE_VERSIONS = ("1", SCHEMA_VERSION)

COLUMNS = "position, stream, seq, kind, type, payload, time, prev_hash, hash, mac"
"""The columns of the events table, in the order of `Event`'s fields."""

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


def selects_row(types: Sequence[str], moves: Sequence[str]) -> Callable[[Event], bool]:
    """`select_rows`'s selection as a test of one event, for a store that reads its events in
    process (`MemoryStore.read_rows`): the same types, the same text test for the moves."""
    wanted = frozenset(types)
    marks = [f'"to":"{m}"' for m in moves]

    def keep(e: Event) -> bool:
        if e.type not in wanted:
            return False
        return e.type != "action.transition" or not marks or any(m in e.payload_json for m in marks)

    return keep


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


def flush_at_exit(ref: weakref.ref[Any]) -> None:
    """Commit what a store still defers when the interpreter exits (registered by each
    store that defers appends)."""
    store = ref()
    if store is not None:
        with contextlib.suppress(Exception):
            store.flush()


class _Connection(Protocol):
    def close(self) -> None: ...


Conn = TypeVar("Conn", bound=_Connection)
"""The backend's connection (`sqlite3.Connection`, `psycopg.Connection`)."""


class SqlStore(Announcing, Generic[Conn]):
    """An event store on one SQL table, committed through a `GroupCommit`: the backend's
    `_commit(batches)` writes the batches of one transaction, `_select(sql, params, failure)`
    runs a query under the store's lock and says `failure` when the log cannot be read, and
    `_MARK`, `_TABLE` and `_prefix` give its SQL. `_readonly` refuses every write."""

    _MARK = "?"
    """The parameter marker of the backend's driver."""
    _TABLE = "events"
    """The events table, as queries name it."""

    log_key: LogKey | None
    _conn: Conn | None

    def __init__(self, *, clock: Clock, key: LogKey | None, readonly: bool) -> None:
        self._clock = clock
        self.log_key = key if key is not None else LogKey.from_env()
        self._readonly = readonly
        self._columns = COLUMNS
        self._lock = threading.Lock()
        self._group = GroupCommit(self._commit)
        self._seqs = SeqCache()
        self._elsewhere = 0  # how many times `changed_elsewhere` found another writer's commit
        atexit.register(flush_at_exit, weakref.ref(self))

    # -- what a backend gives ---------------------------------------------------------------------

    def _commit(self, batches: list[Batch]) -> None:
        raise NotImplementedError

    def _select(self, sql: str, params: Sequence[object], failure: str) -> list[Any]:
        """The rows `sql` selects, read under the store's lock; a log that cannot be read
        raises StoreError (`failure`: what to say) where the backend can tell so."""
        raise NotImplementedError

    def _prefix(self, prefix: str) -> tuple[str, list[object]]:
        """The condition (and its parameters) that selects the streams whose names start with
        `prefix`, over the backend's index on (stream, position)."""
        raise NotImplementedError

    # -- writing ----------------------------------------------------------------------------------

    def held(self) -> list[NewEvent]:
        """The deferred events not committed yet, in order (`defer`)."""
        return self._group.held()

    def last_seq(self, stream: str) -> int | None:
        """`stream`'s last seq from this store's own commits, or None when it cannot tell
        without reading (`EventStore.last_seq`)."""
        return self._seqs.known(stream)

    @property
    def generation(self) -> int:
        """Changes with each commit of this store and each time `changed_elsewhere` finds
        another writer's (`EventStore.generation`)."""
        return self._group.commits + self._elsewhere

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

    def defer_unmoved(self, events: Sequence[NewEvent], unmoved: Mapping[str, int]) -> object:
        if self._readonly:
            raise StoreError("the event store was opened read-only")
        self.refused()
        if self._announced:
            # written first, on their own (once a harness): a batch that may be refused and
            # taken back must not carry them
            self.append_many([])
        batch = Batch(list(events), Unmoved(unmoved), deferred=True)
        self._group.defer(batch)
        return batch

    def withdraw(self, held: object) -> list[NewEvent] | None:
        if not isinstance(held, Batch):
            return None
        if self._group.withdraw(held):
            return list(held.events)
        if held.error is not None:
            raise held.error
        return None

    def flush(self) -> None:
        """Commit the deferred events now."""
        self._group.flush()

    # -- reading ----------------------------------------------------------------------------------

    def read(
        self,
        stream: str | None = None,
        *,
        after: int = 0,
        limit: int | None = None,
        flush: bool = True,
    ) -> list[Event]:
        """Events after `after` (of one stream, or all); the deferred events are committed
        first, unless `flush` is False (`EventStore.read`)."""
        if flush:
            self._group.flush()
        mark = self._MARK
        sql = f"SELECT {self._columns} FROM {self._TABLE} WHERE position > {mark}"
        params: list[object] = [after]
        if stream is not None:
            sql += f" AND stream = {mark}"
            params.append(stream)
        sql += " ORDER BY position"
        if limit is not None:
            sql += f" LIMIT {mark}"
            params.append(limit)
        failure = f"the event store cannot be read after position {after}"
        return [Event(*r) for r in self._select(sql, params, failure)]

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
        sql, params = select_rows(types, moves, self._MARK)
        sql = "SELECT " + sql.format(table=self._TABLE) + f" LIMIT {int(limit)}"
        return self._select(sql, [after, *params], "the event log cannot be read")

    def last(self, prefix: str, type: str) -> Event | None:
        self._group.flush()
        where, params = self._prefix(prefix)
        found = self._select(
            f"SELECT {self._columns} FROM {self._TABLE} WHERE {where} AND type = {self._MARK} "
            "ORDER BY position DESC LIMIT 1",
            [*params, type],
            "the event log cannot be read",
        )
        return Event(*found[0]) if found else None

    def read_prefix(self, prefix: str, type: str, *, after: int = 0) -> list[Event]:
        self._group.flush()
        where, params = self._prefix(prefix)
        mark = self._MARK
        found = self._select(
            f"SELECT {self._columns} FROM {self._TABLE} WHERE {where} AND type = {mark} "
            f"AND position > {mark} ORDER BY position",
            [*params, type, after],
            "the event log cannot be read",
        )
        return [Event(*r) for r in found]

    def head(self) -> tuple[int, str]:
        position, head_hash, _ = self._head()
        return position, head_hash

    def checkpoint(self) -> Checkpoint:
        return checkpoint_of(*self._head(), self.log_key)

    def _head(self) -> tuple[int, str, str | None]:
        """The last position, its hash and its MAC (or the genesis of an empty log)."""
        self._group.flush()
        mac = self._columns.rpartition(", ")[2]
        found = self._select(
            f"SELECT position, hash, {mac} FROM {self._TABLE} ORDER BY position DESC LIMIT 1",
            [],
            "the event log cannot be read",
        )
        if not found:
            return 0, GENESIS_HASH, None
        position, head_hash, head_mac = found[0]
        return int(position), str(head_hash), head_mac

    # -- closing ----------------------------------------------------------------------------------

    def close(self) -> None:
        if self._conn is not None and not self._readonly:
            self._group.flush()
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connection(self) -> Conn:
        if self._conn is None:
            raise StoreError("the event store is closed")
        return self._conn
