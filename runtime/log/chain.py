"""The event log's chain, as every store shares it: the errors a store raises, and the walk that
verifies a log (`verify_events`, `Verification`): each event's hash from its fields and the one
before it, an optional checkpoint, and with the log key every event's MAC.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .events import (
    GENESIS_HASH,
    HARNESS_STREAM,
    KINDS,
    Event,
    StoreError,
    UnreadableEvent,
    event_hash,
)
from .integrity import Checkpoint, LogKey

__all__ = [
    "CHECKPOINT_EVERY",
    "CHECKPOINT_TYPE",
    "COMPACTED_TYPE",
    "Anchor",
    "ChainWatch",
    "ConcurrencyError",
    "Cut",
    "CutError",
    "HistoryMoved",
    "NotUtf8",
    "StoreError",
    "TransitionRefused",
    "UnreadableEvent",
    "UnverifiedLog",
    "Verification",
    "carried_digest",
    "cut_or_failure",
    "find_cut",
    "verify_events",
]


class NotUtf8(bytes):
    """Stored text that is not UTF-8, as a store reads it back (a blob stays plain bytes): the
    walk reports the column, never a decoding error."""


class ConcurrencyError(StoreError):
    """`expected_seq` did not match: another writer appended to the stream first."""

    def __init__(self, stream: str, expected: int, actual: int) -> None:
        self.stream = stream
        self.expected = expected
        self.actual = actual
        super().__init__(f"stream `{stream}` is at seq {actual}, not {expected}")


class HistoryMoved(ConcurrencyError):
    """A decision that read a session's history was refused at commit: another writer appended
    to the session (a call authorised, a result, a message) after the history it read
    (`Unmoved`). Nothing of the batch was appended; the decision is made again on the log as
    it is now. `code` is stable (`history-moved`)."""

    code = "history-moved"

    def __init__(self, stream: str, after: int) -> None:
        StoreError.__init__(
            self, f"stream `{stream}` has events after position {after}: the decision is stale"
        )
        self.stream = stream
        self.expected = after
        self.actual = -1


class TransitionRefused(ConcurrencyError):
    """An action transition the log refuses whoever writes it: a second RUNNING of one action
    (or of one call: session, `tool_call_id` and input hash), or a second move out of RUNNING.
    Nothing of the batch was appended; the action's recorded outcome stands.

    `code` is stable (`transition-refused`); `claim` names what was taken already."""

    code = "transition-refused"

    def __init__(
        self, stream: str, action_id: str, from_state: str | None, to_state: str, claim: str
    ) -> None:
        StoreError.__init__(
            self,
            f"the action `{action_id}` cannot go from {from_state} to {to_state}: {claim}",
        )
        self.stream = stream
        self.expected = -1
        self.actual = -1
        self.action_id = action_id
        self.from_state = from_state
        self.to_state = to_state
        self.claim = claim


@dataclass(frozen=True)
class Verification:
    """The result of walking the chain: ok, or the first broken link (position and reason).

    `position` is None when the log could not be read at all (or past `checked` events).
    `anchored` says a checkpoint was checked, `authenticated` that every MAC was checked with the
    log key; `proves` says in a sentence what an ok result shows, and `notes` what was left
    unchecked (MACs present but no key, a checkpoint's tag without the key).
    """

    ok: bool
    checked: int
    position: int | None = None
    reason: str | None = None
    anchored: bool = False
    authenticated: bool = False
    notes: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.ok

    @property
    def proves(self) -> str | None:
        """What an ok result shows (None when not ok)."""
        if not self.ok:
            return None
        parts = [
            "the events are consistent: no accidental corruption and no edit that breaks the chain"
        ]
        if self.anchored:
            parts.append(
                "no event up to the checkpoint was removed or rewritten (events after it are "
                "covered by the chain alone)"
            )
        if self.authenticated:
            parts.append("no event was written or rewritten by anyone without the log key")
        if not self.anchored:
            parts.append("removing the newest events is found only against a checkpoint")
        if not self.authenticated and not self.anchored:
            parts.append("a log rewritten with recomputed hashes would also pass")
        return "; ".join(parts)

    def describe(self) -> str:
        """The result for a person, one statement a line (as `harnessc log verify` prints it)."""
        if self.ok:
            lines = [f"ok: {self.checked} event{'' if self.checked == 1 else 's'} verified"]
            lines.append(f"proves: {self.proves}")
        else:
            where = f" at position {self.position}" if self.position is not None else ""
            lines = [f"not ok{where}: {self.reason}"]
            lines.append(f"checked: {self.checked} events before it")
        return "\n".join([*lines, *(f"note: {note}" for note in self.notes)])

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checked": self.checked,
            "position": self.position,
            "reason": self.reason,
            "anchored": self.anchored,
            "authenticated": self.authenticated,
            "proves": self.proves,
            "notes": list(self.notes),
        }


CHECKPOINT_TYPE = "log.checkpoint"
"""The type of the checkpoints the runtime keeps in the log itself, on its own `harness` stream:
`{"position": N, "hash": H, "tag": T}`, the hash of the event at N and, with the log key, the
tag of the two (`LogKey.checkpoint_tag`). It is an event after N, so it is chained (and MAC'd)
like any other: a prefix rewritten up to N no longer ends in H, and a checkpoint rewritten
breaks the chain after it (and, with the key, its MAC and tag)."""

COMPACTED_TYPE = "log.compacted"
"""The event that records a compaction's cut, on the `harness` stream (`Cut.to_payload`;
runtime/log/cut.py compacts)."""


class CutError(StoreError):
    """A compaction that cannot be done (a position outside the log, one not after the last
    cut, an archive file that exists already) or an archive that cannot be read."""


@dataclass(frozen=True)
class Cut:
    """A compaction as its `log.compacted` event records it.

    `before`: the last position archived (`P`); `hash`: the hash of the event at `P`; `tag`:
    with the log key, the tag of the two (as a checkpoint's); `carried`: the events at or
    before `P` kept in the log, and `carried_digest` the SHA-256 of their hashes in position
    order; `time`: when the event at `P` was written; `archive`: the file, its bytes, events
    and SHA-256; `record`: the position of the `log.compacted` event itself."""

    before: int
    hash: str
    tag: str | None
    carried: int
    carried_digest: str
    time: str
    archive: dict[str, Any] = field(default_factory=dict)
    record: int = 0

    @property
    def anchor(self) -> Checkpoint:
        return Checkpoint(self.before, self.hash, self.tag)

    @property
    def time_ms(self) -> int | None:
        """`time` in milliseconds since the epoch (None when it does not parse)."""
        try:
            return int(datetime.fromisoformat(self.time.replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            return None

    def to_payload(self) -> dict[str, Any]:
        return {
            "before": self.before,
            "hash": self.hash,
            "tag": self.tag,
            "carried": self.carried,
            "carried_digest": self.carried_digest,
            "time": self.time,
            "archive": dict(self.archive),
        }

    @classmethod
    def of_event(cls, event: Event) -> Cut:
        p = event.payload
        try:
            checkpoint = Checkpoint.of(
                json.dumps({"position": p["before"], "hash": p["hash"], "tag": p.get("tag")})
            )
            carried, digest, time = p["carried"], p["carried_digest"], p["time"]
        except (KeyError, ValueError) as error:
            raise CutError(f"the `{COMPACTED_TYPE}` event at {event.position} is malformed") from (
                error
            )
        if type(carried) is not int or not isinstance(digest, str) or not isinstance(time, str):
            raise CutError(f"the `{COMPACTED_TYPE}` event at {event.position} is malformed")
        archive = p.get("archive") if isinstance(p.get("archive"), dict) else {}
        return cls(
            checkpoint.position,
            checkpoint.hash,
            checkpoint.tag,
            carried,
            digest,
            time,
            dict(archive or {}),
            event.position,
        )


def carried_digest(hashes: Iterable[str]) -> str:
    """The digest of the carried events: SHA-256 over their hashes, one a line."""
    h = hashlib.sha256()
    for one in hashes:
        h.update(one.encode("ascii", "replace") + b"\n")
    return h.hexdigest()


def cut_or_failure(store: Any) -> Cut | Verification | None:
    """The store's last cut for its `verify` (`find_cut`), or a failed `Verification` when its
    `log.compacted` event cannot be read."""
    try:
        return find_cut(store)
    except (StoreError, ValueError) as error:
        return Verification(False, 0, None, f"the log's cut cannot be read: {error}")


def find_cut(store: Any) -> Cut | None:
    """The log's last cut, or None when it was never compacted. A `log.compacted` event that
    does not parse raises CutError: the log cannot be read as a whole without its cut."""
    event = store.last(HARNESS_STREAM, COMPACTED_TYPE)
    if event is None or event.stream != HARNESS_STREAM:
        return None
    return Cut.of_event(event)


CHECKPOINT_EVERY = 1000
"""A harness that opened a log and walked at least this many events past its last checkpoint
records a new one (with its first write)."""

Anchor = Checkpoint | tuple[int, str] | str
"""What `verify(anchor=…)` takes: a `Checkpoint`, its text, or `store.head()`."""


def verify_events(
    events: Iterable[Event],
    anchor: Anchor | None = None,
    *,
    key: LogKey | None = None,
    cut: Cut | None = None,
) -> Verification:
    """Walk events in position order and report the first broken link; with `anchor`, check the
    log against a checkpoint; with `key`, check every event's MAC; with `cut` (a compacted
    log's last `Cut`, `find_cut`), check the events carried across it each alone and all by
    their digest, and the chain after it from the cut's anchored hash.

    Never raises for what a damaged log can hold: a value of the wrong type, text that is not
    JSON, a broken link, or a store that fails while being read (a `StoreError` from the
    iteration) is reported as a failed `Verification`. A bad `anchor` is a CheckpointError.
    """
    walk = _Walk(Checkpoint.of(anchor) if anchor is not None else None, key)
    walk.cut = cut
    return walk.run(iter(events))


class UnverifiedLog(StoreError):
    """The log's chain does not verify (`verification` says where and why): what was read
    from it is not vouched for, so nothing is decided on it. A `Harness` raises it when it
    opens such a log (and its store then refuses every write), the operators' commands when
    they meet one (`ChainWatch.vouch`: `Harness.vouched`, an operator's `Workflows`)."""

    def __init__(self, verification: Verification) -> None:
        self.verification = verification
        where = "" if verification.position is None else f" at position {verification.position}"
        super().__init__(
            f"the event log does not verify{where}: {verification.reason}; its records are not "
            "acted on until it is restored from a copy that verifies (`harnessc log verify` "
            "walks it)"
        )


class ChainWatch:
    """A verification that keeps up with a log as it grows: the first `check` walks the whole
    chain (every link, hash and seq, and every MAC with the log key; not whether a payload
    parses, which its readers find and name), each later one only the events appended since,
    read a page at a time from where the last one stopped. What it vouches for is each event
    as it was read: one changed after it was checked is found by a whole walk
    (`store.verify`, `harnessc log verify`), not here. A break, once found, is the answer for
    good.

    The store is given at each check (anything with `read(after=…, limit=…)` in position
    order and `last`: every `EventStore`), so a watch outlives the connections opened on one
    log. A log compacted while the watch walked it (by another process) is taken across its
    new cut (`_recut`).
    """

    PAGE = 1000

    def __init__(self, key: LogKey | None) -> None:
        # what a payload holds is its readers' to read (they name a row they cannot): the
        # watch checks the chain over the bytes, not whether each payload parses as a JSON
        # object, which `verify` does and which costs more than the rest of the walk
        self._walk = _Walk(None, key, payloads=False)
        self._lock = threading.Lock()
        self.key = key
        self.resumed: Checkpoint | None = None
        """The checkpoint the walk started from (`opened`), or None: from the first event."""
        self.cut: Cut | None = None
        """The log's last cut when the walk began: events at or before it are carried and
        link to nothing."""

    @classmethod
    def whole(cls, store: Any) -> ChainWatch:
        """A watch that walks `store` from its first event: across its last cut when it was
        compacted (the carried events, then the chain on from the anchored hash). A cut that
        cannot be read is the walk's break."""
        watch = cls(store.log_key)
        try:
            watch.cut = watch._walk.cut = find_cut(store)
        except (StoreError, ValueError) as error:
            watch._walk.failed(None, f"the log's cut cannot be read: {error}")
        return watch

    @classmethod
    def opened(cls, store: Any) -> ChainWatch:
        """A watch for a runtime that opens `store`: it starts from the log's last checkpoint
        (`CHECKPOINT_TYPE`) when that one holds (`trusted_checkpoint`), so opening walks only
        the events after it; from the first event otherwise."""
        watch = cls(store.log_key)
        try:
            cut = find_cut(store)
        except (StoreError, ValueError):
            cut = None  # the walk from the first event finds the gap and says so
        found = trusted_checkpoint(store, watch.key)
        if cut is not None and (found is None or found[0].position <= cut.before):
            watch._walk.cut, found = cut, None  # walk the carried events, then on from the cut
        watch.cut = cut
        if found is not None:
            checkpoint, keyed = found
            walk = watch._walk
            walk.checked, walk.prev_hash, walk.resumed = checkpoint.position, checkpoint.hash, True
            if keyed:
                walk.keyed_from = checkpoint.position
            watch.resumed = checkpoint
        return watch

    @property
    def checked(self) -> int:
        """The position up to which the chain was walked and holds."""
        return self._walk.checked

    def head(self) -> Checkpoint | None:
        """A checkpoint of the last event walked (tagged with the key), or None when none was
        walked or the walk found a break."""
        walk = self._walk
        if walk.broken is not None or walk.checked == 0:
            return None
        return Checkpoint.at(walk.checked, walk.prev_hash, self.key)

    def recheck(self, store: Any, streams: Iterable[str]) -> None:
        """Walk again, just before an operator's write, the events of `streams` that the write
        depends on (a request's, its session's), each as it is stored now: its hash from its
        fields, the next event's link to it, with the key its MAC. What this watch walked
        before may have been changed since; raises `UnverifiedLog` at the first that was."""
        self.vouch(store)  # and everything appended since
        key, keyed = self.key, self._walk.keyed_from
        for stream in streams:
            events = store.read(stream)
            for i, e in enumerate(events):
                if e.position > self._walk.checked:
                    break  # appended after the walk: the next vouch walks it
                # the next event of the log is read only when it is not the stream's next
                after = events[i + 1] if i + 1 < len(events) else None
                if after is not None and after.position != e.position + 1:
                    after = None
                carried = self.cut is not None and e.position <= self.cut.before
                broken = _unlinked(e, store, key, keyed, after, chained=not carried)
                if broken is not None:
                    found = Verification(
                        False,
                        self._walk.checked,
                        e.position,
                        broken,
                        anchored=self.resumed is not None,
                        authenticated=key is not None,
                    )
                    with self._lock:
                        self._walk.broken = found
                    raise UnverifiedLog(found)

    def check(self, store: Any) -> Verification:
        """Walk on to the log's head: ok with every event read so far, or the first broken
        link (never raises for a damaged log)."""
        with self._lock:
            if self._walk.feed(self._events(store)) is not None and self._recut(store):
                self._walk.feed(self._events(store))
            return self._walk.result()

    def take(self, store: Any, events: list[Event], after: int) -> None:
        """Vouch for `events`, a page a reader read from `store` after position `after`, before
        it folds them: those past the ones walked already are walked on (what lies between
        first, read here). Raises `UnverifiedLog` at a broken link."""
        with self._lock:
            found = self._take(store, events, after)
            if found is not None and self._recut(store):
                found = self._take(store, events, after)
        if found is not None:
            raise UnverifiedLog(found)

    def _take(self, store: Any, events: list[Event], after: int) -> Verification | None:
        walk = self._walk
        if walk.checked < after:
            walk.feed(self._events(store))
        return walk.feed(iter([e for e in events if e.position > walk.checked]))

    def _recut(self, store: Any) -> bool:
        """After a break: whether the log was compacted past where this walk had got to (by
        another process, while this one ran), so that events it had not walked yet were
        archived. Then the walk starts again from the first event across the new cut (the
        carried events, then the chain from its anchor), and says so by returning True."""
        walk = self._walk
        try:
            cut = find_cut(store)
        except (StoreError, ValueError):
            return False
        if cut is None or cut == self.cut or walk.checked >= cut.record:
            return False
        fresh = _Walk(None, self.key, payloads=False)
        fresh.cut = cut
        self._walk, self.cut, self.resumed = fresh, cut, None
        return True

    def vouch(self, store: Any) -> Verification:
        """`check`, raising `UnverifiedLog` unless the log verifies."""
        found = self.check(store)
        if not found.ok:
            raise UnverifiedLog(found)
        return found

    def _events(self, store: Any) -> Iterator[Event]:
        while True:
            page = store.read(after=self._walk.checked, limit=self.PAGE)
            yield from page
            if len(page) < self.PAGE:
                return


def trusted_checkpoint(store: Any, key: LogKey | None) -> tuple[Checkpoint, bool] | None:
    """The log's last checkpoint (`CHECKPOINT_TYPE`) when it holds, with whether the log was
    keyed at it; None when there is none or it does not hold (a walk then starts from the
    first event, and finds what broke). It holds when its own event is whole (its hash from
    its fields; with the key its MAC and its tag), lies after the event it names, and that
    event is still there with the hash it names (with the key, its MAC too)."""
    try:
        event = store.last(HARNESS_STREAM, CHECKPOINT_TYPE)
        if event is None or event.stream != HARNESS_STREAM or _malformed(event) is not None:
            return None
        payload = json.loads(event.payload_json)
        checkpoint = Checkpoint.of(json.dumps(payload))
        if not 0 < checkpoint.position < event.position or _rehashed(event):
            return None
        if key is not None:
            if event.mac is None or not hmac.compare_digest(event.mac, key.event_mac(event.hash)):
                return None
            tag = key.checkpoint_tag(checkpoint.position, checkpoint.hash)
            if checkpoint.tag is None or not hmac.compare_digest(checkpoint.tag, tag):
                return None
        at = store.read(after=checkpoint.position - 1, limit=1)
    except (StoreError, ValueError):
        return None
    if not at or at[0].position != checkpoint.position or at[0].hash != checkpoint.hash:
        return None
    if _malformed(at[0], False) is not None or _rehashed(at[0]):
        return None
    mac = at[0].mac
    if (
        key is not None
        and mac is not None
        and not hmac.compare_digest(mac, key.event_mac(at[0].hash))
    ):
        return None
    return checkpoint, mac is not None


def _rehashed(e: Event) -> bool:
    """Whether an event's stored hash is not the one its fields give."""
    try:
        return e.hash != _hash_of(e)
    except UnicodeEncodeError:
        return True


def _hash_of(e: Event) -> str:
    """The hash an event's fields give (`event_hash`); UnicodeEncodeError on a lone surrogate."""
    return event_hash(
        position=e.position,
        stream=e.stream,
        seq=e.seq,
        kind=e.kind,
        type=e.type,
        payload_json=e.payload_json,
        time=e.time,
        prev_hash=e.prev_hash,
    )


def _unlinked(
    e: Event,
    store: Any,
    key: LogKey | None,
    keyed_from: int | None,
    after: Event | None,
    *,
    chained: bool = True,
) -> str | None:
    """Why a stored event, walked before, no longer holds where it stands, or None. `after`:
    the event that follows it in the log, when the caller holds it already; `chained`: False
    for an event carried across a cut, which no event after it links to."""
    malformed = _malformed(e, False)
    if malformed is not None:
        return malformed
    if _rehashed(e):
        return "hash does not match the contents"
    if key is not None:
        if e.mac is None:
            if keyed_from is not None and e.position >= keyed_from:
                return f"no MAC, though the events from position {keyed_from} carry one"
        elif not hmac.compare_digest(e.mac, key.event_mac(e.hash)):
            return (
                "the MAC does not match the log key: the event was forged or rewritten, or "
                "the log was written with another key"
            )
    if not chained:
        return None
    following = [after] if after is not None else store.read(after=e.position, limit=1)
    if following and (following[0].position != e.position + 1 or following[0].prev_hash != e.hash):
        return f"the event after position {e.position} does not link to it: it was rewritten"
    return None


class _Walk:
    """One verification: the chain, then the checkpoint, then the MACs. It can go on: `feed`
    takes the events that follow the last ones it took (`ChainWatch`), `result` says what the
    walk so far shows."""

    def __init__(
        self, anchor: Checkpoint | None, key: LogKey | None, *, payloads: bool = True
    ) -> None:
        self.anchor = anchor
        self.key = key
        self.payloads = payloads
        self.checked = 0
        self.notes: list[str] = []
        self.keyed_from: int | None = None  # the first event that carries a MAC
        self.last: Event | None = None
        self.prev_hash = GENESIS_HASH
        self.last_seq: dict[str, int] = {}
        self.broken: Verification | None = None
        self.resumed = False
        """Started from a checkpoint: a stream's first event seen may continue one before it."""
        self.cut: Cut | None = None
        """A compacted log's cut: the events at or before it are carried, checked each alone."""
        self.crossed = False
        self.whole: str | None = GENESIS_HASH
        """While every event before the cut is there and chained (a log joined with its
        archives): the last one's hash; None once one is not."""
        self.carried = 0
        self.archived = 0
        """The events before the cut that the log no longer holds (what `checked` counts
        but was not walked)."""
        self.carried_hashes = hashlib.sha256()

    def failed(self, position: int | None, reason: str) -> Verification:
        self.broken = Verification(
            False,
            self.checked - self.archived,
            position,
            reason,
            anchored=self.anchor is not None,
            authenticated=self.key is not None,
            notes=tuple(self.notes),
        )
        return self.broken

    def run(self, walk: Iterator[Event]) -> Verification:
        anchor = self.anchor
        if anchor is not None and anchor.tag is not None:
            if self.key is None:
                self.notes.append("the checkpoint's tag was not checked: no log key was given")
            elif not hmac.compare_digest(
                anchor.tag, self.key.checkpoint_tag(anchor.position, anchor.hash)
            ):
                return self.failed(
                    anchor.position,
                    "the checkpoint's tag does not match the log key: the checkpoint was "
                    "altered or taken with another key",
                )
        return self.feed(walk) or self.result()

    def feed(self, walk: Iterator[Event]) -> Verification | None:
        """Walk on through `walk`, the events after the last one taken: the first broken link
        (kept: the walk takes nothing more), or None."""
        if self.broken is not None:
            return self.broken
        anchor = self.anchor
        prev_hash, last_seq = self.prev_hash, self.last_seq
        try:
            while True:
                try:
                    e = next(walk, None)
                except StoreError as error:
                    return self.failed(
                        None, f"the log cannot be read after position {self.checked}: {error}"
                    )
                if e is None:
                    return None
                malformed = _malformed(e, self.payloads)
                if malformed is not None:
                    return self.failed(self.checked + 1, malformed)
                cut = self.cut
                if cut is not None and not self.crossed:
                    if e.position <= cut.before:
                        carried = self.carry(e)
                        if carried is not None:
                            return self.failed(e.position, carried)
                        continue
                    crossing = self.cross(cut)
                    if crossing is not None:
                        return self.failed(cut.before, crossing)
                    prev_hash = cut.hash
                if self.resumed and e.stream not in last_seq:
                    last_seq[e.stream] = e.seq - 1  # its events before the checkpoint
                broken = _broken_link(e, self.checked + 1, prev_hash, last_seq)
                if broken is not None:
                    return self.failed(*broken)
                if anchor is not None and e.position == anchor.position and e.hash != anchor.hash:
                    return self.failed(
                        e.position,
                        f"the hash at position {e.position} differs from the checkpoint: the "
                        "log was rewritten at or before it",
                    )
                forged = self.check_mac(e)
                if forged is not None:
                    return self.failed(e.position, forged)
                last_seq[e.stream] = e.seq
                prev_hash = e.hash
                self.checked += 1
                self.last = e
        finally:
            self.prev_hash = prev_hash

    def carry(self, e: Event) -> str | None:
        """Check an event carried across the cut alone: its hash from its fields, its MAC, its
        seq after its stream's last carried one. None when it holds."""
        if _rehashed(e):
            return "hash does not match the contents (an event carried across the cut)"
        forged = self.check_mac(e)
        if forged is not None:
            return forged
        last = self.last_seq.get(e.stream, e.seq - 1)
        if e.seq != last + 1:
            return f"seq {e.seq} in stream `{e.stream}`, expected {last + 1}"
        self.last_seq[e.stream] = e.seq
        chained = self.whole is not None and e.position == self.checked + 1
        self.whole = e.hash if chained and e.prev_hash == self.whole else None
        self.carried += 1
        self.carried_hashes.update(e.hash.encode("ascii", "replace") + b"\n")
        self.checked = e.position
        self.last = e
        return None

    def cross(self, cut: Cut) -> str | None:
        """At the first event after the cut: the carried events are the ones the cut names,
        and with the key its anchor is tagged; the chain goes on from the anchored hash."""
        self.crossed = True
        whole = self.whole == cut.hash and self.checked == cut.before  # every event is there
        if not whole and (
            self.carried != cut.carried or self.carried_hashes.hexdigest() != cut.carried_digest
        ):
            return (
                f"the events carried across the cut at position {cut.before} are not the ones "
                f"it recorded ({self.carried} found, {cut.carried} recorded): events were "
                "removed, added or rewritten"
            )
        if self.key is not None and (
            cut.tag is None
            or not hmac.compare_digest(cut.tag, self.key.checkpoint_tag(cut.before, cut.hash))
        ):
            return "the cut's anchor is not tagged with the log key: the cut was forged"
        anchor = self.anchor
        if anchor is not None and anchor.position <= cut.before:
            if anchor.position == cut.before and anchor.hash != cut.hash:
                return (
                    f"the hash at position {cut.before} differs from the checkpoint: the log "
                    "was rewritten at or before it"
                )
            if anchor.position < cut.before:
                self.notes.append(
                    f"the checkpoint at position {anchor.position} lies before the cut at "
                    f"position {cut.before}: it is checked with the archive "
                    "(`harnessc log verify --archive FILE`)"
                )
        if not whole:
            self.archived = cut.before - self.carried
            self.notes.append(
                f"the log was compacted: the events up to position {cut.before} but the "
                f"{cut.carried} carried across the cut are archived"
                + (f" in `{cut.archive['file']}`" if cut.archive.get("file") else "")
                + "; the chain after the cut is checked from its anchor, and "
                "`harnessc log verify --archive FILE` walks them too"
            )
        self.checked = cut.before
        self.resumed = True
        return None

    def result(self) -> Verification:
        """What the events taken so far show, as a whole log: ok, or why not."""
        if self.broken is not None:
            return self.broken
        if self.cut is not None and not self.crossed:
            return self.failed(
                self.cut.before + 1,
                f"the log ends at or before its cut at position {self.cut.before}: events "
                "were removed",
            )
        anchor = self.anchor
        if anchor is not None and self.checked < anchor.position:
            return self.failed(
                anchor.position,
                f"the log ends at position {self.checked}, before the checkpoint at position "
                f"{anchor.position}: events were removed",
            )
        notes = list(self.notes)
        if self.key is not None and self.last is not None and self.last.mac is None:
            what = "carries no MAC" if self.keyed_from is None else "lost their MACs"
            return Verification(
                False,
                self.checked - self.archived,
                self.last.position if self.keyed_from is None else self.keyed_from,
                f"the log {what}: it was not written with the log key from its last event "
                "back, so nothing in it is authenticated"
                if self.keyed_from is None
                else f"events after position {self.keyed_from} {what}",
                anchored=anchor is not None,
                authenticated=True,
                notes=tuple(notes),
            )
        if self.key is None and self.keyed_from is not None:
            notes.append(
                "the log carries MACs but no log key was given: they were not checked, so a "
                "rewrite by whoever can write the log would pass"
            )
        return Verification(
            True,
            self.checked - self.archived,
            anchored=anchor is not None,
            authenticated=self.key is not None,
            notes=tuple(notes),
        )

    def check_mac(self, e: Event) -> str | None:
        if e.mac is None:
            if self.key is not None and self.keyed_from is not None:
                return f"no MAC, though the events from position {self.keyed_from} carry one"
            return None
        if self.keyed_from is None:
            self.keyed_from = e.position
        if self.key is not None and not hmac.compare_digest(e.mac, self.key.event_mac(e.hash)):
            return (
                "the MAC does not match the log key: the event was forged or rewritten, or "
                "the log was written with another key"
            )
        return None


def _broken_link(
    e: Event, expected: int, prev_hash: str, last_seq: dict[str, int]
) -> tuple[int, str] | None:
    """The position and reason of a well-formed event that does not continue the chain."""
    if e.position != expected:
        what = "missing" if e.position > expected else "out of order"
        return e.position, f"expected position {expected}: events are {what}"
    if e.prev_hash != prev_hash:
        return e.position, f"prev_hash does not match the hash of position {e.position - 1}"
    try:
        actual = _hash_of(e)
    except UnicodeEncodeError:  # a lone surrogate: no store returns one, a caller's list may
        return e.position, "the event's text is not UTF-8"
    if actual != e.hash:
        return e.position, "hash does not match the contents"
    seq = last_seq.get(e.stream, 0) + 1
    if e.seq != seq:
        return e.position, f"seq {e.seq} in stream `{e.stream}`, expected {seq}"
    return None


def _malformed(e: Event, payloads: bool = True) -> str | None:
    """Why a stored row cannot be an event (a column of the wrong type, with `payloads` a
    payload that is not a JSON object), or None; a damaged file yields such rows. Whether
    `hash` is a SHA-256 digest needs no check here: it is compared with the one recomputed."""
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
                if isinstance(value, NotUtf8)
                else f"`{column}` is not text"
            )
    if e.mac is not None and type(e.mac) is not str:
        return "`mac` is not text"
    if e.kind not in KINDS:
        return f"unknown kind `{e.kind}`"
    if not payloads:
        return None
    try:
        payload = json.loads(e.payload_json)
    except (ValueError, RecursionError):
        return "the payload is not JSON"
    if type(payload) is not dict:
        return "the payload is not a JSON object"
    return None
