"""A worker's appender: the events of each workflow step reach the harness's log after DBOS has
checkpointed them, off the step's path, many steps in one commit.

A step does not commit its events itself (`runtime/workflows/steps.py`): it returns them in its
output, which DBOS checkpoints in its own transaction, so they are durable exactly when the step
is. The interpreter hands them here once `run_step` has returned, that is after the checkpoint,
and goes on with the next step while this thread appends them. Every step's events go to a
stream named after the run and the step, appended only while it is new (`append_once`): a step
whose output is handed over again (a run replayed after a crash, a cancelled run repaired from
DBOS's checkpoints) appends nothing twice. Steps are appended in the order they were handed
over, each one only once the ones before it are in the log, so a run's events keep their order
in the chain whoever appends them.

Readers that must see a step wait for it: `flush` (a thread) or `settle` (the interpreter, at a
gate and before a run or a branch ends), which return once everything handed over before them
is committed.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from ..log.events import NewEvent
from ..log.store import ConcurrencyError, EventStore

__all__ = ["StepLog", "append_once"]

_log = logging.getLogger("harnessc.workflows")

Events = Sequence[NewEvent] | Callable[[], Sequence[NewEvent]]
"""A step's events, or what builds them (on the appender's thread, off the step's path)."""
Step = tuple[int, Events]
"""A step handed over: its ticket (1, 2, 3 … in the order of handing over) and its events."""


def append_once(store: EventStore, events: Sequence[NewEvent]) -> bool:
    """Append `events` in one transaction only if every stream they name is new; False when
    one already holds events (this step was appended before)."""
    if not events:
        return True
    try:
        # each stream checked new at its first event, under the store's write lock
        store.append_many(events, expect={e.stream: 0 for e in events})
    except ConcurrencyError:
        return False
    return True


class StepLog:
    """Appends the events of the steps handed to it (`add`) on a thread of its own.

    Each round takes every step waiting (up to the first that shares a stream with an earlier
    one) and appends them in one transaction, each stream expected new; when one of them was
    appended before, the round appends them one at a time, skipping those. A commit that fails
    (the database away) is tried again until it succeeds: the events stay in DBOS's checkpoints
    meanwhile, and a run does not end before its events are in the log. `before_commit` runs
    before each commit (on SQLite: make DBOS's checkpoints durable first, so the log never
    holds a step DBOS could forget in a power loss)."""

    RETRY_S = (0.05, 0.2, 1.0, 2.0)

    def __init__(self, store: EventStore, before_commit: Callable[[], None] | None = None) -> None:
        self._store = store
        self._before = before_commit
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[Step] = []
        self._issued = 0  # the last ticket handed out
        self._done = 0  # every ticket up to this one is in the log
        self._waiters: list[tuple[int, Future[None]]] = []
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="harnessc-step-log", daemon=True)
        self._thread.start()

    def add(self, events: Events) -> int:
        """Hand over one step's events (or a function that builds them); returns its
        ticket."""
        with self._cond:
            self._issued += 1
            if callable(events) or events:
                self._queue.append((self._issued, events))
                self._cond.notify_all()
            else:
                self._advance()
            return self._issued

    def _waiter(self, ticket: int | None) -> Future[None]:
        found: Future[None] = Future()
        with self._cond:
            wanted = self._issued if ticket is None else ticket
            if wanted <= self._done:
                found.set_result(None)
            else:
                self._waiters.append((wanted, found))
        return found

    def flush(self, ticket: int | None = None, timeout_s: float | None = None) -> None:
        """Block until the step of `ticket` (every step handed over so far, by default) and
        every step before it are in the log."""
        self._waiter(ticket).result(timeout_s)

    async def settle(self, ticket: int | None = None) -> None:
        """`flush` for a coroutine: waits without holding a thread."""
        await asyncio.wrap_future(self._waiter(ticket))

    def close(self) -> None:
        """Append what waits (one try), then stop the thread. What could not be appended stays
        in DBOS's checkpoints: the run is replayed at the next launch and appends it then."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout=30)

    # -- the thread ------------------------------------------------------------------------------

    def _run(self) -> None:
        failures = 0
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:
                    break
                pending = list(self._queue)
            try:
                ready = [(t, e() if callable(e) else e) for t, e in pending]
                with self._cond:  # built once: only this thread takes from the queue's head
                    self._queue[: len(ready)] = ready
                taken = _round(ready)
                self._append(taken)
            except Exception as error:  # the database away, the disk full: try again
                with self._cond:
                    if self._closing:
                        self._fail(error)
                        return
                wait = self.RETRY_S[min(failures, len(self.RETRY_S) - 1)]
                failures += 1
                _log.warning(
                    "appending workflow steps to the log failed (%s); again in %ss",
                    error,
                    wait,
                )
                with self._cond:
                    self._cond.wait(wait)
                continue
            failures = 0
            with self._cond:
                del self._queue[: len(taken)]
                self._advance()
        with self._cond:
            self._fail(RuntimeError("the workflow engine closed"))

    def _append(self, taken: list[tuple[int, Sequence[NewEvent]]]) -> None:
        if self._before is not None:
            self._before()
        if len(taken) > 1 and append_once(self._store, [e for _, b in taken for e in b]):
            return
        for _, batch in taken:  # one of them was appended before: one at a time, skipping it
            append_once(self._store, batch)

    def _advance(self) -> None:
        """Every ticket before the first one waiting is in the log (under the lock): wake the
        waiters it satisfies."""
        self._done = self._queue[0][0] - 1 if self._queue else self._issued
        keep = []
        for wanted, waiter in self._waiters:
            if wanted <= self._done:
                waiter.set_result(None)
            else:
                keep.append((wanted, waiter))
        self._waiters = keep

    def _fail(self, error: BaseException) -> None:
        for _, waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(error)
        self._waiters = []


def _round(queue: list[tuple[int, Sequence[NewEvent]]]) -> list[tuple[int, Sequence[NewEvent]]]:
    """The steps at the head of `queue` that one transaction appends: up to the first one that
    names a stream an earlier one names (its expectation would be checked after the earlier
    one's events, and fail)."""
    taken: list[tuple[int, Sequence[NewEvent]]] = []
    seen: set[str] = set()
    for ticket, batch in queue:
        streams = {e.stream for e in batch}
        if taken and streams & seen:
            break
        taken.append((ticket, batch))
        seen |= streams
    return taken
