"""The event store in memory: the same contract as the others, for tests and short-lived tools;
nothing survives the process."""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from typing import Any

from ._announce import Announcing
from ._group_commit import Expected, Unmoved, payload_texts
from ._numbering import (
    Claim,
    Numbering,
    Unchained,
    check_head_key,
    checkpoint_of,
    claims_of,
    number_batch,
    refusal,
    unmoved_failure,
)
from ._sql import Row, selects_row
from .chain import Anchor, StoreError, Verification, cut_or_failure, verify_events
from .events import GENESIS_HASH, Clock, Event, NewEvent, mark_stored, system_clock
from .integrity import Checkpoint, LogKey

__all__ = ["Buffer", "MemoryStore"]


class MemoryStore(Announcing):
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
        self._gaps = False  # a compaction removed events: positions are no longer indexes
        self.generation = 0
        """Changes with each commit (`EventStore.generation`)."""

    @classmethod
    def holding(cls, events: Sequence[Event], *, key: LogKey | None = None) -> MemoryStore:
        """A store over events recorded elsewhere, as they were stored (positions 1 to n, in
        order): a compacted log joined with its archives (`runtime/log/cut.py`, `joined`),
        for the readers that read a whole log."""
        store = cls(key=key)
        positions = [e.position for e in events]
        if positions != list(range(1, len(positions) + 1)):
            raise StoreError("a store holds the positions 1 to n, in order")
        store._events = list(events)
        for e in events:
            store._seqs[e.stream] = e.seq
        return store

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

    def same_log(self, url: str) -> bool:
        """Never: a log in memory is at no URL (not even `memory://`, which opens a new one)."""
        return False

    def changed_elsewhere(self) -> bool:
        """Never: only this process writes to memory."""
        return False

    def _moved(self, stream: str, after: int) -> bool:
        """Whether `stream` has an event after position `after` (newest first: a decision
        reads the recent past)."""
        for e in reversed(self._events):
            if e.position <= after:
                return False
            if e.stream == stream:
                return True
        return False

    def last_seq(self, stream: str) -> int | None:
        """`stream`'s last seq (0 for none): everything committed here is known here."""
        with self._lock:
            return self._seqs.get(stream, 0)

    def held(self) -> list[NewEvent]:
        """The deferred events not numbered yet, in order."""
        with self._lock:
            return list(self._deferred)

    def _settle(self, numbering: Numbering | None = None) -> None:
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
        mark_stored(events, out)
        self.generation += 1

    def _append(self, events: Sequence[NewEvent], expected_seq: Expected) -> list[Event]:
        payloads = payload_texts(events)
        with self._lock:
            if isinstance(expected_seq, Unmoved):
                # before the deferred events are numbered: they are this process's own
                stale = unmoved_failure(expected_seq, set(), self._moved)
                if stale is not None:
                    raise stale
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
            self.generation += 1
        return out

    def _numbering(self) -> Numbering:
        head = self._events[-1] if self._events else None
        return Numbering(
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
            # (until a compaction removed some: then they are searched)
            found = [e for e in self._events[self._index(after) :] if stream in (None, e.stream)]
        return found if limit is None else found[:limit]

    def scan(
        self, stream: str | None = None, *, after: int = 0, batch: int = 1000
    ) -> Iterator[Event]:
        """All events after `after` (`batch` is for the stores that read page by page)."""
        yield from self.read(stream, after=after)

    def read_rows(
        self,
        types: Sequence[str],
        *,
        after: int = 0,
        limit: int = 1000,
        moves: Sequence[str] = (),
    ) -> list[Row]:
        """As `SQLiteStore.read_rows`."""
        keep = selects_row(types, moves)
        out: list[Row] = []
        for e in self.read(after=after):
            if keep(e):
                out.append((e.position, e.stream, e.type, e.payload_json, e.time))
                if len(out) == limit:
                    break
        return out

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
                for e in self._events[self._index(after) :]
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

    def _index(self, after: int) -> int:
        """The index of the first event after position `after`."""
        if not self._gaps:
            return max(after, 0)
        return bisect_right(self._events, after, key=lambda e: e.position)

    def discard(self, positions: Sequence[int]) -> int:
        """As `SQLiteStore.discard`."""
        gone = set(positions)
        with self._lock:
            self._settle()
            if self._events and self._events[-1].position in gone:
                raise StoreError("the head of the log is never discarded")
            kept = [e for e in self._events if e.position not in gone]
            removed = len(self._events) - len(kept)
            self._events = kept
            self._gaps = self._gaps or removed > 0
        return removed

    def verify(self, anchor: Anchor | None = None) -> Verification:
        cut = cut_or_failure(self)
        if isinstance(cut, Verification):
            return cut
        with self._lock:
            self._settle()
            events = list(self._events)
        return verify_events(events, anchor, key=self.log_key, cut=cut)

    def close(self) -> None:
        self.flush()


class Buffer(MemoryStore):
    """Events held until they are appended elsewhere (a workflow step's, until the step
    returns them): readable as a store (numbered per stream, payloads canonical) but not
    chained, neither timed nor hashed, because the log they go to numbers and hashes them then;
    `appended` keeps each event with its canonical payload, in the order written, to be
    appended as it is."""

    def __init__(self, clock: Clock = system_clock) -> None:
        super().__init__(clock=clock)
        self.appended: list[tuple[str, str, str, Any, str]] = []

    def _numbering(self) -> Numbering:
        return Unchained(len(self._events))

    def _append(self, events: Sequence[NewEvent], expected_seq: Expected) -> list[Event]:
        out = super()._append(events, expected_seq)
        self.appended.extend(
            (e.stream, e.kind, e.type, e.payload, o.payload_json)
            for e, o in zip(events, out, strict=True)
        )
        return out

    def defer(self, events: Sequence[NewEvent]) -> None:
        # the whole buffer is one output already: nothing to defer, and `appended` must
        # keep every event in the order it was written
        self._append(events, None)
