"""Group commit: the batches of events that the threads of one process append to a store, and
the queue that commits many of them in one transaction (`GroupCommit`), with the deferred ones
(`defer`: a call's events before it runs) riding the next commit. `SQLiteStore` and
`PostgresStore` commit through it (runtime/log/store.py, runtime/log/postgres.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence

from ..model.canonical import CanonicalError, canonical_json
from .events import Event, NewEvent, mark_stored

__all__ = ["Batch", "Expected", "GroupCommit", "Unmoved", "payload_texts"]


class Unmoved:
    """What a batch expects instead of seqs: no event in each named stream after the given
    position. A decision that read a session's history (counts, sums, provenance) up to
    those positions is committed only if nobody wrote to the session since (`HistoryMoved`
    otherwise), so two processes never both authorise the call that only one may make."""

    __slots__ = ("after",)

    def __init__(self, after: Mapping[str, int]) -> None:
        self.after = dict(after)


Expected = int | Mapping[str, int] | Unmoved | None
"""What a batch expects of its streams: nothing, every stream at one seq, the named streams at
theirs (`number_batch`), or the named streams unmoved after a position (`Unmoved`)."""


def payload_texts(events: Sequence[NewEvent]) -> list[str]:
    """The canonical JSON of each event's payload: the text its builder wrote, or the payload
    canonicalized (the costly part of an append, done before any lock is taken)."""
    out = []
    for e in events:
        text = e.payload_json
        if text is None:
            text = canonical_json(e.payload)
        elif not text.isascii():
            try:  # refused here, before a commit that numbers it could fail on it
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise CanonicalError("a string contains a lone surrogate") from None
        out.append(text)
    return out


class Batch:
    """Events appended together (all or none), with what they expect of their streams; filled
    in by the commit that writes them."""

    __slots__ = ("deferred", "done", "error", "events", "expected", "out", "payloads")

    def __init__(
        self, events: Sequence[NewEvent], expected: Expected = None, *, deferred: bool = False
    ) -> None:
        self.events = events
        self.payloads = payload_texts(events)
        self.expected = expected
        self.deferred = deferred
        self.out: list[Event] = []
        self.error: BaseException | None = None
        self.done = False


class GroupCommit:
    """Commits the batches of many threads in one transaction (group commit).

    A thread that appends queues its batch; the first to find no commit under way becomes the
    leader: it takes every queued batch (its own among them) and commits them in one
    transaction, while the batches of threads arriving meanwhile queue for the next one. So
    under load one fsync serves many appends, and alone an append costs one commit as before.
    Each batch is numbered in queue order; a batch whose expectations fail is left out (its
    thread gets the ConcurrencyError) and the others commit.

    A deferred batch (`defer`) has no thread waiting for it: it rides the next commit, made by
    any append or by `flush`. A failed commit puts deferred batches back at the head of the
    queue, so nothing deferred is dropped.
    """

    def __init__(self, commit: Callable[[list[Batch]], None]) -> None:
        self._commit = commit
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[Batch] = []
        self._busy = False
        self._taken: list[Batch] = []  # the batches of the commit under way
        self._deferred = 0  # deferred batches not yet committed
        self._held: list[NewEvent] = []  # their events, in order (`held`, without a walk)
        self._waiting = 0  # threads waiting for a commit under way (none: nobody to wake)
        self.commits = 0
        """How many commits this queue made (`EventStore.generation`)."""

    @property
    def deferred(self) -> bool:
        """Whether deferred events wait for a commit."""
        return self._deferred > 0

    def defer(self, batch: Batch) -> None:
        with self._cond:
            self._queue.append(batch)
            self._deferred += 1
            self._held.extend(batch.events)

    def withdraw(self, batch: Batch) -> bool:
        """Take a deferred `batch` back from the queue, for its events to be appended with the
        caller's next batch: True when it was still queued; False once a commit took it (it
        waits for that commit: then `batch.error` says whether it was refused)."""
        with self._cond:
            while True:
                for i, queued in enumerate(self._queue):
                    if queued is batch:
                        del self._queue[i]
                        self._deferred -= 1
                        return True
                if batch.done:
                    return False
                self._waiting += 1
                try:
                    self._cond.wait()
                finally:
                    self._waiting -= 1

    def flush(self) -> None:
        """Commit the deferred batches now (and wait for a commit of them under way)."""
        if self._deferred:
            self.submit(Batch(()))

    def held(self) -> list[NewEvent]:
        """The deferred events not committed yet (those of a commit under way too), in order."""
        with self._cond:
            return list(self._held) if self._deferred else []

    def submit(self, batch: Batch) -> list[Event]:
        """Commit `batch` (with whatever else waits) and return its events, numbered."""
        with self._cond:
            self._queue.append(batch)
            while not batch.done and self._busy:
                self._waiting += 1
                try:
                    self._cond.wait()
                finally:
                    self._waiting -= 1
            if not batch.done:
                self._busy = True
                taken, self._queue = self._queue, []
                self._taken = taken
        if not batch.done:
            self._lead(taken)
        if batch.error is not None:
            raise batch.error
        return batch.out

    def _lead(self, taken: list[Batch]) -> None:
        failed: BaseException | None = None
        try:
            self._commit(taken)
        except BaseException as error:
            failed = error
        with self._cond:
            requeued = []
            if failed is None:
                self.commits += 1
            for b in taken:
                if failed is not None:
                    if b.deferred:
                        requeued.append(b)
                        continue
                    b.error = failed
                b.done = True
                if b.deferred:
                    self._deferred -= 1
                    if b.error is None:  # before the events leave `held`
                        mark_stored(b.events, b.out)
            self._queue[:0] = requeued
            self._taken = []
            if self._held:  # what was committed (or left out of it) leaves `held`
                self._held = [e for b in self._queue if b.deferred for e in b.events]
            self._busy = False
            if self._waiting:
                self._cond.notify_all()
