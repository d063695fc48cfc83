"""Events announced to a store: written with the next write through it, never without one.

A harness announces its `spec.loaded` this way (`Harness.load`), so a process that only reads
the log (listing requests and grants, the console's pages) leaves it as it found it, and the
first event the harness writes comes after the spec it was judged under.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ._group_commit import Unmoved
from .events import Event, NewEvent

__all__ = ["Announcing"]


class Announcing:
    """`append` and `append_many` over the store's `_append(events, expected)`, each write
    preceded by the events announced since the last one, in its transaction."""

    _announced: list[NewEvent] | None = None
    _announce_lock = threading.Lock()
    _refused: Exception | None = None

    def refuse(self, error: Exception) -> None:
        """Refuse every write through this store from now on with `error` (a `StoreError`):
        a harness that found the log's chain broken (`UnverifiedLog`), or one opened for
        forensics, never appends to it. What was announced is dropped, never written."""
        with self._announce_lock:
            self._refused, self._announced = error, None

    def refused(self) -> None:
        """Raise the error `refuse` was given, if any."""
        if self._refused is not None:
            raise self._refused.with_traceback(None)

    def _append(self, events: Sequence[NewEvent], expected_seq: Any) -> list[Event]:
        raise NotImplementedError

    def defer(self, events: Sequence[NewEvent]) -> None:
        raise NotImplementedError

    def defer_unmoved(self, events: Sequence[NewEvent], unmoved: Mapping[str, int]) -> object:
        """`defer`, with `append_many`'s `unmoved` checked when a commit writes the events
        (refused then, nothing written, if the streams moved); returns what `withdraw` takes
        back. A store whose deferred events only this process sees defers them as they are
        (and returns None)."""
        self.defer(events)
        return None

    def withdraw(self, held: object) -> list[NewEvent] | None:
        """Take back the events `defer_unmoved` held, to append them with the caller's next
        batch (and its `unmoved`); None when a commit wrote them already. Raises the refusal
        of a commit that found their streams moved (`HistoryMoved`: nothing was written)."""
        return None

    def wait_for_append(self, timeout_s: float) -> bool:
        """Wait until another writer may have appended, at most `timeout_s`: True when told so
        (PostgreSQL's LISTEN/NOTIFY), False when the time ran out; a store that is never told
        just waits (the caller looks at the log again: polling)."""
        time.sleep(max(0.0, timeout_s))
        return False

    def announce(self, events: Sequence[NewEvent]) -> None:
        """Write `events` with the next write through this store (an append or a deferred
        append, by any thread), first and in its transaction; never if nothing is written."""
        with self._announce_lock:
            if self._refused is None:
                self._announced = [*(self._announced or ()), *events]

    def _with_announced(self, events: Sequence[NewEvent]) -> tuple[list[NewEvent], int]:
        """The events to write, the announced ones first, and how many of those there are."""
        if not self._announced:
            return list(events), 0
        with self._announce_lock:
            first, self._announced = self._announced or [], None
        return [*first, *events], len(first)

    def append(self, event: NewEvent, *, expected_seq: int | None = None) -> Event:
        expect = None if expected_seq is None else {event.stream: expected_seq}
        return self.append_many([event], expect=expect)[0]

    def append_many(
        self,
        events: Iterable[NewEvent],
        *,
        expect: Mapping[str, int] | None = None,
        unmoved: Mapping[str, int] | None = None,
    ) -> list[Event]:
        if self._refused is not None:
            self.refused()
        if expect is not None and unmoved is not None:
            raise ValueError("append_many takes `expect` or `unmoved`, not both")
        batch, n = self._with_announced(list(events))
        try:
            return self._append(batch, Unmoved(unmoved) if unmoved is not None else expect)[n:]
        except BaseException:
            if n:  # not written: they go with the next write
                with self._announce_lock:
                    self._announced = [*batch[:n], *(self._announced or ())]
            raise
