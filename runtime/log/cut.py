"""Compaction: the events before a position moved out of the log into an archive, with the chain
anchored at the cut so that what stays verifies alone, and the archive with it.

`compact(store, before=P, archive=FILE)`:

1. folds the log up to `P` (`Projections`) and chooses the streams that stay *live*: a session
   whose family has a session still open, a session that holds a pending approval or an
   active grant, an approval's claim still pending, a grant still active, the claims of a live
   session's requests and grants (a `once` grant spent stays spent), a workflow run not
   finished. Their events at or before `P` are *carried*: they stay in the log whole, as they
   were written (same position, hash and MAC), so every reader that reads a session's stream
   (the ledger, the facts, the recorded decisions, the projections) reads what it read before.
   So are the streams that a stream that stays, or a step's sources recorded after `P`, refer
   to: a workflow step's sources that refer to an earlier step's (`after`), and so on back
   (`referred_streams`), so that no step in the log refers to one in the archive;
2. writes every other event at or before `P` to `FILE`, one JSON object a line (the events as
   stored: position, stream, seq, kind, type, the payload's canonical text, time, prev_hash,
   hash, mac), after a first line that says what the file is;
3. appends a `log.compacted` event on the `harness` stream: the anchor (`P` and the hash of the
   event at `P`, with the log key its tag), how many events were carried and a digest of their
   hashes, and the archive's name, size, event count and SHA-256. It is chained and MAC'd like
   any other event;
4. removes the archived events from the store.

A log so cut verifies alone (`verify_events(…, cut=find_cut(store))`): the carried events each
by their own hash and MAC and together by the digest, the chain from `P + 1` on from the
anchored hash. With the archives (`verify_across`) the whole chain is walked again from the
first event, and each carried event must be the archive's own at its position: an archive
changed by a byte fails.

>>> from harnessc.runtime.log.events import NewEvent
>>> from harnessc.runtime.log.memory import MemoryStore
>>> import tempfile, os
>>> store = MemoryStore()
>>> _ = store.append_many([NewEvent("s", "Text", "note", {"i": i}) for i in range(5)])
>>> path = os.path.join(tempfile.mkdtemp(), "a.jsonl")
>>> compact(store, before=3, archive=path).archived
3
>>> verify_events(store.read(), cut=find_cut(store)).ok
True
>>> verify_across(store.read(), [read_archive(path)]).ok
True
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from .chain import (
    COMPACTED_TYPE,
    Cut,
    CutError,
    StoreError,
    Verification,
    carried_digest,
    find_cut,
    verify_events,
)
from .events import HARNESS_STREAM, WORKFLOW_SOURCES, Event, NewEvent
from .integrity import Checkpoint, LogKey
from .memory import MemoryStore
from .projections import Projections

__all__ = [
    "ARCHIVE_FORMAT",
    "COMPACTED_TYPE",
    "Archived",
    "Compaction",
    "Cut",
    "CutError",
    "archived_note",
    "compact",
    "find_cut",
    "joined",
    "last_older_than",
    "live_streams",
    "read_archive",
    "referred_streams",
    "verify_across",
]

ARCHIVE_FORMAT = "harnessc-log-archive/1"
"""The first line of an archive file: `{"format": ARCHIVE_FORMAT, "before": P, …}`."""

_FINISHED_RUN = frozenset({"workflow.completed", "workflow.failed", "workflow.cancelled"})


class Archived(LookupError):
    """What a reader needs was moved to an archive by a compaction (`code` is `archived`):
    `what` names it, `cut` is the last position archived, `archive` the file it went to."""

    code = "archived"

    def __init__(self, what: str, cut: Cut) -> None:
        self.what = what
        self.cut = cut
        self.archive = str(cut.archive.get("file") or "")
        super().__init__(
            f"{what} is archived: the log was compacted before position {cut.before + 1}"
            + (f" (archive `{self.archive}`)" if self.archive else "")
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "what": self.what,
            "before": self.cut.before,
            "archive": self.archive or None,
            "message": str(self),
        }


def live_streams(events: Iterable[Event], at: datetime | None = None) -> set[str]:
    """The streams whose events a compaction keeps, folded from `events` (the log up to the
    cut): every session of a family with a session not ended, a session holding a pending
    approval or a grant active at `at`, a pending approval's claim, an active grant's stream,
    and a workflow run's streams until it finished."""
    events = list(events)
    views = Projections.rebuild(events)
    moment = at or datetime.now().astimezone()
    parent = {sid: v.started.get("parent") for sid, v in views.sessions.items()}

    def root(sid: str) -> str:
        seen = set()
        while isinstance(parent.get(sid), str) and sid not in seen:
            seen.add(sid)
            sid = str(parent[sid])
        return sid

    open_roots = {
        root(sid) for sid, v in views.sessions.items() if v.started and v.status != "ended"
    }
    live = {sid for sid in views.sessions if root(sid) in open_roots}
    for approval in views.approvals.values():
        if approval.status == "pending":
            live.add(approval.stream)
            live.add(f"approval:{approval.approval_id}")
    for grant in views.grants.values():
        if grant.active_at(moment):
            live.add(grant.stream)
            live.add(f"grant:{grant.grant_id}")
    runs: dict[str, bool] = {}
    for e in events:
        if e.stream.startswith("workflow:"):
            run = e.stream.split("/", 1)[0]
            runs[run] = runs.get(run, False) or e.type in _FINISHED_RUN
    streams = {e.stream for e in events}
    for run, finished in runs.items():
        if not finished:
            live.update(s for s in streams if s == run or s.startswith(run + "/"))
    # a session's family: every session whose root is live, wherever it was found live
    live |= {sid for sid in views.sessions if root(sid) in live}
    # the claims and answers of a live session's requests and grants stay with it: a `once`
    # grant spent on its own stream must stay spent, an answered request stay answered
    for approval in views.approvals.values():
        if approval.stream in live:
            live.add(f"approval:{approval.approval_id}")
    for grant in views.grants.values():
        if grant.stream in live:
            live.add(f"grant:{grant.grant_id}")
    live.discard(HARNESS_STREAM)
    return live


def referred_streams(kept: set[str], refers: dict[str, str]) -> set[str]:
    """`kept` with every stream one of them refers to, and so on back: a workflow step's
    sources that refer to an earlier step's (`refers`: a stream → the stream its
    `workflow.sources` names as `after`) need that step's to be read whole."""
    out = set(kept)
    for stream in kept:
        at = refers.get(stream)
        while at is not None and at not in out:
            out.add(at)
            at = refers.get(at)
    return out


def _refers(event: Event, refers: dict[str, str]) -> None:
    try:
        after = event.payload.get("after")
    except StoreError:  # unreadable: the chain's verification says so, not the cut
        return
    if isinstance(after, str):
        refers[event.stream] = after


def last_older_than(store: Any, moment: datetime) -> int | None:
    """The position of the last event recorded before `moment` and after the log's last cut
    (what `compact(before=…)` may archive to keep the log to a retention: `harnessc log compact
    --older-than 90d`), or None when there is none. Events are timed in log order."""
    cut = find_cut(store)
    floor = cut.before if cut is not None else 0
    found = None
    for event in store.read(after=floor):
        at = datetime.fromisoformat(event.time.replace("Z", "+00:00"))
        if at >= moment:
            break
        found = event.position
    return found


@dataclass(frozen=True)
class Compaction:
    """What `compact` did: the cut, the events archived and carried, the archive's bytes."""

    cut: Cut
    archived: int
    carried: int
    archive_bytes: int
    streams_carried: int

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.cut.to_payload(),
            "record": self.cut.record,
            "archived": self.archived,
            "carried": self.carried,
            "archive_bytes": self.archive_bytes,
            "streams_carried": self.streams_carried,
        }


def compact(
    store: Any,
    *,
    before: int,
    archive: str | os.PathLike[str],
    at: datetime | None = None,
) -> Compaction:
    """Archive the events at or before `before` to the file `archive` (which must not exist),
    carry the live streams' events, record the cut and remove the archived events from the
    store. `at`: the moment grants are judged active at (by default now)."""
    path = Path(archive)
    if path.exists():
        raise CutError(f"the archive `{path}` exists already: name a new file")
    store.flush()
    head, _ = store.head()
    previous = find_cut(store)
    if not 0 < before <= head:
        raise CutError(f"position {before} is not in the log (its head is at {head})")
    if previous is not None and before <= previous.before:
        raise CutError(f"position {before} is not after the last cut (at {previous.before})")
    upto: list[Event] = []
    later: set[str] = set()  # the steps whose sources were recorded after the cut: they stay
    refers: dict[str, str] = {}
    for e in store.scan():
        if e.position <= before:
            upto.append(e)
        if e.type == WORKFLOW_SOURCES:
            _refers(e, refers)
            if e.position > before:
                later.add(e.stream)
    last = upto[-1]
    if last.position != before:
        raise CutError(f"position {before} was archived already")
    live = live_streams(upto, at)
    live |= referred_streams(live | later, refers) - later
    carried = [e for e in upto if e.stream in live]
    gone = [e for e in upto if e.stream not in live]
    text = _archive_text(gone, before, last.hash)
    data = text.encode("utf-8")
    tmp = path.with_name(path.name + ".partial")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    key: LogKey | None = store.log_key
    cut = Cut(
        before,
        last.hash,
        key.checkpoint_tag(before, last.hash) if key is not None else None,
        len(carried),
        carried_digest(e.hash for e in carried),
        last.time,
        {
            "file": path.name,
            "bytes": len(data),
            "events": len(gone),
            "sha256": hashlib.sha256(data).hexdigest(),
            "first": gone[0].position if gone else None,
        },
    )
    record = store.append(NewEvent(HARNESS_STREAM, "State", COMPACTED_TYPE, cut.to_payload()))
    cut = Cut(**{**cut.__dict__, "record": record.position})
    store.discard([e.position for e in gone])
    return Compaction(cut, len(gone), len(carried), len(data), len(live))


def _archive_text(events: Sequence[Event], before: int, head_hash: str) -> str:
    header = {"format": ARCHIVE_FORMAT, "before": before, "hash": head_hash, "events": len(events)}
    lines = [json.dumps(header, sort_keys=True)]
    for e in events:
        lines.append(
            json.dumps(
                {
                    "position": e.position,
                    "stream": e.stream,
                    "seq": e.seq,
                    "kind": e.kind,
                    "type": e.type,
                    "payload": e.payload_json,
                    "time": e.time,
                    "prev_hash": e.prev_hash,
                    "hash": e.hash,
                    "mac": e.mac,
                },
                ensure_ascii=False,
                sort_keys=True,
            )
        )
    return "\n".join(lines) + "\n"


def read_archive(path: str | os.PathLike[str]) -> list[Event]:
    """The events of an archive file, in its order; CutError for a file that is not one (a
    line that is not an archived event is named by its number)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise CutError(f"cannot read the archive `{path}`: {error}") from None
    lines = text.splitlines()
    try:
        header = json.loads(lines[0]) if lines else None
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("format") != ARCHIVE_FORMAT:
        raise CutError(f"`{path}` is not a harnessc log archive (its first line names none)")
    out = []
    for n, line in enumerate(lines[1:], 2):
        try:
            d = json.loads(line)
            out.append(
                Event(
                    d["position"],
                    d["stream"],
                    d["seq"],
                    d["kind"],
                    d["type"],
                    d["payload"],
                    d["time"],
                    d["prev_hash"],
                    d["hash"],
                    d.get("mac"),
                )
            )
        except (ValueError, KeyError, TypeError):
            raise CutError(f"`{path}` line {n} is not an archived event") from None
    return out


def verify_across(
    events: Iterable[Event],
    archives: Sequence[Sequence[Event]],
    anchor: Checkpoint | None = None,
    *,
    key: LogKey | None = None,
) -> Verification:
    """Walk the whole chain from its first event: the archives' events and the log's, merged
    by position. An event both hold (carried, or archived twice by two cuts) must be the same
    event; a position neither holds is a missing event."""
    by_position: dict[int, Event] = {}
    for archive in archives:
        for e in archive:
            other = by_position.setdefault(e.position, e)
            if other is not e and not _same(other, e):
                return Verification(
                    False,
                    0,
                    e.position,
                    f"two archives hold different events at position {e.position}",
                    anchored=anchor is not None,
                    authenticated=key is not None,
                )
    for e in events:
        archived = by_position.get(e.position)
        if archived is not None and not _same(archived, e):
            return Verification(
                False,
                0,
                e.position,
                f"the event at position {e.position} differs from the archive's: the archive "
                "or the log was rewritten",
                anchored=anchor is not None,
                authenticated=key is not None,
            )
        by_position[e.position] = e
    return verify_events(
        (by_position[p] for p in sorted(by_position)),
        anchor,
        key=key,
    )


def archived_note(store: Any) -> str | None:
    """What a reader of a compacted log, read without its archives, misses: a sentence that
    names the cut and the archive (`… is archived: the log was compacted before position N
    (archive `FILE`)`), or None when the log holds every event."""
    try:
        cut = find_cut(store)
        first = store.read(after=0, limit=1)
    except StoreError:
        return None
    if cut is None or (first and first[0].position == 1):
        return None
    return str(Archived("what was recorded before it", cut))


def joined(
    store: Any, archives: Sequence[str | os.PathLike[str]], *, key: LogKey | None = None
) -> MemoryStore:
    """The whole log as one store in memory: the archives' events and `store`'s, merged by
    position, once they verify as one chain (`verify_across`; CutError otherwise, saying where
    and why). For the readers that need what a compaction archived (`harnessc replay`, `why`
    with `--archive`)."""
    read = [read_archive(path) for path in archives]
    events = store.read()
    found = verify_across(events, read, key=key)
    if not found.ok:
        where = f" at position {found.position}" if found.position is not None else ""
        raise CutError(f"the log and its archives do not verify{where}: {found.reason}")
    by_position = {e.position: e for archive in read for e in archive}
    by_position.update((e.position, e) for e in events)
    return MemoryStore.holding([by_position[p] for p in sorted(by_position)], key=key)


def _same(a: Event, b: Event) -> bool:
    return (
        a.stream,
        a.seq,
        a.kind,
        a.type,
        a.payload_json,
        a.time,
        a.prev_hash,
        a.hash,
    ) == (b.stream, b.seq, b.kind, b.type, b.payload_json, b.time, b.prev_hash, b.hash) and (
        a.mac is None or b.mac is None or hmac.compare_digest(a.mac, b.mac)
    )
