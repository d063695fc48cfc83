"""What a commit does to the events it writes, for every store: number them (position, seq, hash
and MAC after the head of the log), take the claims of their action transitions once
(`claims_of`), and refuse a batch whose expectations or claims fail (`commit_batches`).
The memory, SQLite and PostgreSQL stores commit through these, so a log is numbered and
refused the same way whatever keeps it."""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping, Sequence

from ._group_commit import Batch, Expected, Unmoved
from .chain import ConcurrencyError, HistoryMoved, StoreError, TransitionRefused
from .events import Clock, Event, NewEvent, event_hash, format_time, system_clock
from .integrity import LOG_KEY_ENV, LOG_KEY_FILE_ENV, Checkpoint, LogKey

__all__ = [
    "Claim",
    "Numbering",
    "SeqCache",
    "Unchained",
    "check_head_key",
    "checkpoint_of",
    "claims_of",
    "commit_batches",
    "number_batch",
    "refusal",
    "unmoved_failure",
]


class Numbering:
    """Assigns position, seq, hash (and the MAC, with a key) to new events, given the head of
    the log."""

    def __init__(
        self, clock: Clock, position: int, prev_hash: str, key: LogKey | None = None
    ) -> None:
        self.clock = clock
        self.position = position
        self.prev_hash = prev_hash
        self.key = key
        self._time: str | None = None

    @property
    def time(self) -> str:
        """The time of every event numbered here: they are committed together, so they share
        one (read from the clock and formatted once)."""
        if self._time is None:
            self._time = format_time(self.clock())
        return self._time

    def number(self, event: NewEvent, payload_json: str, seq: int) -> Event:
        self.position += 1
        time = self.time
        h = event_hash(
            position=self.position,
            stream=event.stream,
            seq=seq,
            kind=event.kind,
            type=event.type,
            payload_json=payload_json,
            time=time,
            prev_hash=self.prev_hash,
        )
        stored = Event(
            self.position,
            event.stream,
            seq,
            event.kind,
            event.type,
            payload_json,
            time,
            self.prev_hash,
            h,
            self.key.event_mac(h) if self.key is not None else None,
        )
        self.prev_hash = h
        return stored


class Unchained(Numbering):
    """Numbers events by position and stream only, neither timed nor hashed: for a buffer whose
    events a store numbers again when they are committed."""

    def __init__(self, position: int) -> None:
        super().__init__(system_clock, position, "")

    def number(self, event: NewEvent, payload_json: str, seq: int) -> Event:
        self.position += 1
        return Event(
            self.position, event.stream, seq, event.kind, event.type, payload_json, "", "", ""
        )


class SeqCache:
    """Each stream's last seq as this store's own commits left it, to number a commit without
    asking the database for it: valid while the head of the log is still the event the store's
    last commit wrote (an append by anyone else moves the head, and the cache is dropped)."""

    LIMIT = 4096
    """Streams remembered at most (the cache starts again past it)."""

    def __init__(self) -> None:
        self._head: tuple[int, str] | None = None
        self._seqs: dict[str, int] = {}

    def reader(
        self, position: int, head_hash: str, query: Callable[[str], int]
    ) -> Callable[[str], int]:
        """`last_seq` for a commit that found the head at `position` with `head_hash`: from the
        cache when that head is the store's own last one, else from `query`."""
        if self._head != (position, head_hash):
            self._head = None
            self._seqs.clear()
        seqs = self._seqs

        def last_seq(stream: str) -> int:
            found = seqs.get(stream)
            return found if found is not None else query(stream)

        return last_seq

    def known(self, stream: str) -> int | None:
        """`stream`'s last seq as the store's own commits left it, or None when no commit
        since the cache last started again wrote to it."""
        return self._seqs.get(stream)

    def forget(self) -> None:
        """Start again (another writer committed: `changed_elsewhere` found it)."""
        self._head = None
        self._seqs.clear()

    def own(self, position: int, head_hash: str) -> bool:
        """Whether the head at `position` with `head_hash` is the store's own last commit."""
        return self._head == (position, head_hash)

    def committed(self, out: Sequence[Event]) -> None:
        """Remember what a commit wrote, once it is committed."""
        if not out:
            return
        if len(self._seqs) > self.LIMIT:
            self._seqs.clear()
        for e in out:
            self._seqs[e.stream] = e.seq
        self._head = (out[-1].position, out[-1].hash)


def number_batch(
    events: Sequence[NewEvent],
    payloads: Sequence[str],
    numbering: Numbering,
    last_seq: Callable[[str], int],
    expected_seq: Expected,
) -> tuple[list[Event], dict[str, int]]:
    """Number a batch appended in one transaction: each stream continues from `last_seq(stream)`
    (asked once per stream). With `expected_seq` an int, every stream must be exactly there;
    a mapping names the streams to check and the seq of each (ConcurrencyError otherwise).
    Returns the events and each stream's new last seq (`Unmoved` is checked by the caller,
    against the log)."""
    if isinstance(expected_seq, Unmoved):
        expected_seq = None
    seqs: dict[str, int] = {}
    out: list[Event] = []
    for event, payload_json in zip(events, payloads, strict=True):
        if event.stream not in seqs:
            seqs[event.stream] = last_seq(event.stream)
            wanted = (
                expected_seq.get(event.stream)
                if isinstance(expected_seq, Mapping)
                else expected_seq
            )
            if wanted is not None and seqs[event.stream] != wanted:
                raise ConcurrencyError(event.stream, wanted, seqs[event.stream])
        seqs[event.stream] += 1
        out.append(numbering.number(event, payload_json, seqs[event.stream]))
    return out, seqs


Claim = tuple[str, ...]
"""What an action transition takes once for all writers (`claims_of`): `("runs", action_id)`
and `("call-runs", stream, tool_call_id, input_hash)` for a move to RUNNING, `("leaves",
action_id, state)` for a move out of a state."""

_TRANSITION = "action.transition"
_RUNNING = "RUNNING"


def claims_of(events: Sequence[NewEvent]) -> list[tuple[Claim, NewEvent]]:
    """The claims of the action transitions among `events` that the log grants once: an
    action enters RUNNING once, a call (session, `tool_call_id`, input hash) runs once, and
    an action leaves each state once — its lifecycle has no cycle, so its transitions in the
    log are one chain: a move decided on a state another process has moved on from (an
    AUTHORIZED written after the call SUCCEEDED elsewhere) is refused, and leaving RUNNING
    once means one outcome (or UNKNOWN). Every store refuses a batch that claims what is
    taken (`TransitionRefused`), whatever process wrote the first."""
    out: list[tuple[Claim, NewEvent]] = []
    for e in events:
        if e.type != _TRANSITION:
            continue
        p = e.payload
        if p.get("to") == _RUNNING:
            out.append((("runs", str(p.get("action_id"))), e))
            if p.get("input_hash") is not None:
                call = ("call-runs", e.stream, str(p.get("tool_call_id")), str(p["input_hash"]))
                out.append((call, e))
        if p.get("from") is not None:
            out.append((("leaves", str(p.get("action_id")), str(p["from"])), e))
    return out


def refusal(claim: Claim, event: NewEvent) -> TransitionRefused:
    """The error of a batch whose `claim` (`claims_of`) is taken."""
    p = event.payload
    what = {
        "runs": "it ran (or runs) already",
        "call-runs": f"the call `{p.get('tool_call_id')}` ran (or runs) already in this session",
        "leaves": "its outcome is recorded already"
        if claim[-1] == _RUNNING
        else f"it moved on from {claim[-1]} already",
    }[claim[0]]
    return TransitionRefused(
        event.stream, str(p.get("action_id")), p.get("from"), str(p.get("to")), what
    )


def commit_batches(
    batches: list[Batch],
    numbering: Numbering,
    last_seq: Callable[[str], int],
    claimed: Callable[[Claim], bool] | None = None,
    moved: Callable[[str, int], bool] | None = None,
) -> list[Event]:
    """Number the batches of one transaction after each other: a batch whose expectations
    fail gets its ConcurrencyError and takes no position, and so does one whose action
    transitions claim what the log (`claimed`, asked inside the write transaction) or an
    earlier batch of this commit holds (`TransitionRefused`), and one that expects streams
    `Unmoved` when the log (`moved(stream, position)`: an event of the stream after the
    position, asked inside the write transaction) or an earlier batch of this commit that
    someone waits for wrote to one of them (`HistoryMoved`; the deferred batches are this
    process's own events of the call, which the decision did not need). Returns every
    numbered event."""
    seqs: dict[str, int] = {}
    out: list[Event] = []
    taken: set[Claim] = set()
    written: set[str] = set()  # the streams of the batches of this commit someone waits for

    def current(stream: str) -> int:
        found = seqs.get(stream)
        return found if found is not None else last_seq(stream)

    for b in batches:
        if not b.events:
            continue
        mark = numbering.position, numbering.prev_hash
        while True:
            try:
                if isinstance(b.expected, Unmoved):
                    stale = unmoved_failure(b.expected, written, moved)
                    if stale is not None:
                        raise stale
                b.out, changed = number_batch(b.events, b.payloads, numbering, current, b.expected)
                # the stream expectations first (a spent grant says so), then the claims
                claims = claims_of(b.events) if claimed is not None else []
                for claim, event in claims:
                    if claim in taken or (claimed is not None and claimed(claim)):
                        raise refusal(claim, event)
            except TransitionRefused as error:
                numbering.position, numbering.prev_hash = mark
                b.out = []
                if b.deferred and _without_stale_moves(b, taken, claimed):
                    continue  # numbered again without the moves the log refuses
                b.error = error
                break
            except ConcurrencyError as error:
                numbering.position, numbering.prev_hash = mark
                b.out = []
                b.error = error
                break
            taken.update(c for c, _ in claims)
            if not b.deferred:
                written.update(changed)
            seqs.update(changed)
            out.extend(b.out)
            break
    return out


def unmoved_failure(
    unmoved: Unmoved, written: set[str], moved: Callable[[str, int], bool] | None
) -> HistoryMoved | None:
    """The refusal of a batch expecting `unmoved` streams when one of them has moved: written
    by an earlier batch of the commit (`written`) or, in the log, after its position."""
    for stream, after in unmoved.after.items():
        if stream in written or (moved is not None and moved(stream, after)):
            return HistoryMoved(stream, after)
    return None


def _without_stale_moves(
    b: Batch, taken: set[Claim], claimed: Callable[[Claim], bool] | None
) -> bool:
    """A deferred batch (a decision and the move it makes, committed with a later append)
    whose move the log refuses, decided on a state another process has moved the action on
    from: the move is left out and the rest (the decision's record) kept, since nobody waits
    to be told; the action's state is the log's, which the next catch-up takes. True when
    something is left to commit."""
    refused = {
        id(event)
        for claim, event in claims_of(b.events)
        if claim in taken or (claimed is not None and claimed(claim))
    }
    if not refused:
        return False
    kept = [(e, t) for e, t in zip(b.events, b.payloads, strict=True) if id(e) not in refused]
    b.events = [e for e, _ in kept]
    b.payloads = [t for _, t in kept]
    return bool(b.events)


def checkpoint_of(
    position: int, head_hash: str, head_mac: str | None, key: LogKey | None
) -> Checkpoint:
    """The checkpoint of a head: tagged when there is a key and the head's MAC is the key's
    (a tag must never vouch for a head the key did not write), untagged when the head has no
    MAC yet."""
    if key is not None and head_mac is not None:
        check_head_key(head_hash, head_mac, key)
        return Checkpoint.at(position, head_hash, key)
    return Checkpoint.at(position, head_hash, key if position == 0 else None)


def check_head_key(head_hash: str, head_mac: str | None, key: LogKey | None) -> None:
    """Refuse to append where the new events could not be verified with the log's key: to a
    keyed log without the key, or with another key (its last MAC does not match this one)."""
    if head_mac is None:
        return  # an unkeyed log (or none yet): with a key, its MACs start here
    if key is None:
        raise StoreError(
            f"the event log is keyed: appending needs its key ({LOG_KEY_ENV} or {LOG_KEY_FILE_ENV})"
        )
    if not hmac.compare_digest(head_mac, key.event_mac(head_hash)):
        raise StoreError(
            "the event log's last MAC does not match this log key: it was written with another "
            "key, or forged; run `harnessc log verify` with the right key"
        )
