"""The event store's interface, `EventStore`, which the memory (runtime/log/memory.py), SQLite
(runtime/log/sqlite.py) and PostgreSQL (runtime/log/postgres.py) stores implement whole: a
caller never asks a store what it can do.

What every store shares lives beside them: numbering and claims (`_numbering`), the group
commit (`_group_commit`), announced events (`_announce`), and the SQL stores' common code
(`_sql`). This module also names the stores and what they raise, as `harnessc.runtime.log.store`
always has.

>>> from harnessc.runtime.log.events import NewEvent
>>> store = SQLiteStore(":memory:")
>>> store.append(NewEvent("s-1", "State", "session.started", {"agent": "planner"})).position
1
>>> store.verify().ok
True
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Protocol, runtime_checkable

from ._group_commit import Batch, GroupCommit, payload_texts
from ._numbering import claims_of
from ._sql import SCHEMA_VERSION, Row
from .chain import (
    Anchor,
    ConcurrencyError,
    StoreError,
    TransitionRefused,
    Verification,
    verify_events,
)
from .events import Event, NewEvent
from .integrity import Checkpoint, LogKey
from .memory import MemoryStore
from .sqlite import SQLiteStore

__all__ = [
    "SCHEMA_VERSION",
    "Batch",
    "ConcurrencyError",
    "EventStore",
    "GroupCommit",
    "MemoryStore",
    "Row",
    "SQLiteStore",
    "StoreError",
    "TransitionRefused",
    "Verification",
    "claims_of",
    "payload_texts",
    "verify_events",
]


@runtime_checkable
class EventStore(Protocol):
    """What every store offers, whole: memory, SQLite and PostgreSQL keep the same contract.

    Writes: `append` and `append_many` commit at once; `defer` holds events for the store's next
    commit (a call's events before it runs), `flush` commits them, `held` lists them (each
    learns what it was committed as, `NewEvent.stored`), `generation` changes with every
    commit; `announce`
    writes events with the next write, never without one; `refuse` stops every later write.
    Reads: `read` and `scan` (events), `read_rows` (rows, for a reader folding a large log),
    `last` and `read_prefix` (by stream prefix), `head`, `checkpoint` and `verify` (the chain).
    Elsewhere: `changed_elsewhere` (whether another writer appended), `same_log` (whether this
    store is the log at a URL)."""

    def append(self, event: NewEvent, *, expected_seq: int | None = None) -> Event:
        """Append one event in its own transaction. With `expected_seq`, refuse (ConcurrencyError)
        unless the stream's last seq is exactly that (0 for a new stream)."""
        ...

    def append_many(
        self,
        events: Iterable[NewEvent],
        *,
        expect: Mapping[str, int] | None = None,
        unmoved: Mapping[str, int] | None = None,
    ) -> list[Event]:
        """Append events in one transaction: all of them or none. With `expect`, refuse
        (ConcurrencyError) unless each stream it names is exactly at that seq: a claim that
        only one writer can make (`expect={"grant:g-1": 0}` spends a grant once). With
        `unmoved`, refuse (`HistoryMoved`) if a stream it names has an event after the
        position given, in the log or in a batch committed with this one (a decision that
        read a session's history up to there)."""
        ...

    def defer(self, events: Sequence[NewEvent]) -> None:
        """Append `events` with the store's next commit (the next append by any thread, a read,
        `flush` or `close`), before anything appended after them; until then they are neither
        durable nor seen by other processes. A store with nothing to batch numbers them then."""
        ...

    def defer_unmoved(self, events: Sequence[NewEvent], unmoved: Mapping[str, int]) -> object:
        """`defer`, with `append_many`'s `unmoved` checked when a commit writes the events
        (refused then, nothing written, if a stream moved); returns what `withdraw` takes
        back (None where only this process sees the deferred events: memory)."""
        ...

    def withdraw(self, held: object) -> list[NewEvent] | None:
        """Take back the events `defer_unmoved` held, to append them with the caller's next
        batch (and its `unmoved`: one commit for both); None when a commit wrote them already.
        Raises the refusal of a commit that found their streams moved (`HistoryMoved`)."""
        ...

    def flush(self) -> None:
        """Commit the deferred events now."""
        ...

    def held(self) -> list[NewEvent]:
        """The deferred events not committed yet, in order."""
        ...

    @property
    def generation(self) -> int:
        """A number that changes whenever this store commits (any thread of this process) and
        whenever `changed_elsewhere` finds that another writer did: a reader that remembers it
        has nothing new to read while it stays the same, as far as this process knows (another
        process's appends count from the moment `changed_elsewhere` notices them)."""
        ...

    def last_seq(self, stream: str) -> int | None:
        """The seq of `stream`'s last event as far as this store knows without reading (0 for
        a stream with none), or None when it cannot tell: a SQL store knows the streams its
        own commits wrote to, until `changed_elsewhere` or a commit finds another writer's."""
        ...

    def announce(self, events: Sequence[NewEvent]) -> None:
        """Write `events` with the next write through this store, first and in its transaction;
        never if nothing is written (a harness's `spec.loaded`: a reader writes nothing)."""
        ...

    def refuse(self, error: Exception) -> None:
        """Refuse every later write through this store with `error` (a log whose chain is
        broken is never appended to); what was announced is dropped."""
        ...

    def read(
        self,
        stream: str | None = None,
        *,
        after: int = 0,
        limit: int | None = None,
        flush: bool = True,
    ) -> list[Event]:
        """Events with `position > after` (of one stream, or all), in position order. The
        deferred events are committed first, unless `flush` is False: for a reader that checked
        (`held`) that it needs none of them now. They are committed later with positions above
        every event read here, so a reader that goes on `after` the last position it read takes
        them in order."""
        ...

    def scan(
        self, stream: str | None = None, *, after: int = 0, batch: int = 1000
    ) -> Iterator[Event]:
        """All events after `after`, read `batch` at a time (for projections and exports)."""
        ...

    def read_rows(
        self,
        types: Sequence[str],
        *,
        after: int = 0,
        limit: int = 1000,
        moves: Sequence[str] = (),
    ) -> list[Row]:
        """At most `limit` events of `types` after `after` as `Row`s, in position order; of the
        `action.transition` events only those that move to one of `moves` (all of them when
        `moves` is empty). The selection may keep a transition that only mentions a move: a
        reader checks the parsed payload."""
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

    def discard(self, positions: Sequence[int]) -> int:
        """Remove the events at `positions`, which a compaction archived and anchored
        (runtime/log/cut.py: never called otherwise), in one transaction; returns how many
        were removed. The head is never removed; a read-only store refuses."""
        ...

    def changed_elsewhere(self) -> bool:
        """Whether another writer (another process, or another store on the same log) may have
        appended since the last time this was asked: cheap, for a check before every decision
        (SQLite: `PRAGMA data_version`; PostgreSQL: the head against the store's own last
        commit; memory: never, nothing outside the process writes there)."""
        ...

    def same_log(self, url: str) -> bool:
        """Whether this store is the event log at `url` (as `open_store` reads it)."""
        ...

    def wait_for_append(self, timeout_s: float) -> bool:
        """Wait until another writer may have appended, at most `timeout_s`: True when the
        store was told (PostgreSQL: a NOTIFY every commit sends; the first call only starts
        listening and returns at once, so the caller looks at the log before it waits), False
        when the time ran out (SQLite, memory: they are never told, so this is a poll)."""
        ...

    def close(self) -> None:
        """Commit what is deferred and release the store; it takes no call after this."""
        ...
