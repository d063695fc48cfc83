"""The runtime opens only a log whose chain verifies, from its last checkpoint, and writes
nothing to one that does not: the tamper suite (a row changed, deleted or inserted; with a log
key, a rewrite with another key, the MACs stripped, a forged approval rehashed) run against
the runtime at open and before an operator's write, and against every reader of the log
(`harnessc log verify`, `replay`, `why`, `approvals`, the console), on SQLite, in memory and
(with HARNESSC_TEST_POSTGRES_URL) on PostgreSQL."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from harnessc.compiler.cli import main
from harnessc.runtime import Harness, PendingCall, SQLiteStore
from harnessc.runtime.log._sql import row as as_row
from harnessc.runtime.log.chain import (
    CHECKPOINT_EVERY,
    CHECKPOINT_TYPE,
    UnverifiedLog,
    verify_events,
)
from harnessc.runtime.log.events import Event, NewEvent, StoreError, event_hash
from harnessc.runtime.log.integrity import LOG_KEY_ENV, LOG_KEY_FILE_ENV, LogKey
from harnessc.runtime.log.store import MemoryStore
from harnessc.runtime.model import Spec
from harnessc.runtime.session import operations

from .postgres import ADMIN_URL, SKIP_REASON
from .test_approvals import SHELL, compile_text

KEY = LogKey(b"k" * 40)
OTHER_KEY = LogKey(b"o" * 40)
OPS = {"user": "u-ops", "role": "ops"}


@pytest.fixture(autouse=True)
def no_key_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LOG_KEY_ENV, raising=False)
    monkeypatch.delenv(LOG_KEY_FILE_ENV, raising=False)


# ---------------------------------------------------------------------------------------------
# logs: one pending request, and the same log with it approved


def rehash(events: list[Event], key: LogKey | None, start: int = 0) -> list[Event]:
    """`events` chained again from index `start` on, as a forger recomputes them (with
    `key`'s MACs, or none)."""
    out = list(events[:start])
    prev = out[-1].hash if out else "0" * 64
    for e in events[start:]:
        moved = dataclasses.replace(e, position=len(out) + 1, prev_hash=prev)
        h = event_hash(
            position=moved.position,
            stream=moved.stream,
            seq=moved.seq,
            kind=moved.kind,
            type=moved.type,
            payload_json=moved.payload_json,
            time=moved.time,
            prev_hash=prev,
        )
        mac = key.event_mac(h) if key is not None else None
        out.append(dataclasses.replace(moved, hash=h, mac=mac))
        prev = h
    return out


def logs(tmp_path: Path, key: LogKey | None) -> tuple[Spec, list[Event], list[Event], str]:
    """A spec, a log with one call waiting for approval, the same log with the request
    approved (by a harness that held the key), and the request's id."""
    spec = compile_text(tmp_path, SHELL)
    store = MemoryStore(key=key)
    h = Harness(spec, store=store)
    s = h.session("a", actor={"user": "u-1"}, task="t-1")
    call = s.normalize("shell.run", "c-1", {"cmd": "ls"})
    assert isinstance(call, PendingCall)
    request = s.request_approval(call).request_id
    pending = store.read()
    approved_store = holding("memory", pending, key, tmp_path)
    operations.approve(Harness(spec, store=approved_store), request, by=OPS)
    return spec, pending, approved_store.read(), request


# ---------------------------------------------------------------------------------------------
# the damage


def changed(events: list[Event], key: LogKey | None) -> list[Event]:
    i = _in_session(events)
    return [*events[:i], dataclasses.replace(events[i], payload_json='{"x":1}'), *events[i + 1 :]]


def deleted(events: list[Event], key: LogKey | None) -> list[Event]:
    i = _in_session(events)
    return [*events[:i], *events[i + 1 :]]


def inserted(events: list[Event], key: LogKey | None) -> list[Event]:
    """A row of its own chained in after a session's event, as a forger without the key would
    (its hash right, no MAC): the rows after it keep their positions' hashes."""
    i = _in_session(events)
    row = dataclasses.replace(events[i], stream="ses-injected", seq=1, mac=None)
    later = [dataclasses.replace(e, position=e.position + 1) for e in events[i:]]
    return [*events[:i], *rehash([*events[:i], row], None, i)[i:], *later]


def other_key(events: list[Event], key: LogKey | None) -> list[Event]:
    return rehash(events, OTHER_KEY)


def stripped(events: list[Event], key: LogKey | None) -> list[Event]:
    return [dataclasses.replace(e, mac=None) for e in events]


DAMAGE: dict[str, Callable[[list[Event], LogKey | None], list[Event]]] = {
    "row-changed": changed,
    "row-deleted": deleted,
    "row-inserted": inserted,
    "rewritten-with-another-key": other_key,
    "macs-stripped": stripped,
}


def _in_session(events: list[Event]) -> int:
    """The index of a session's event after another of its own (not the first or last)."""
    for i in range(1, len(events) - 1):
        if events[i].stream == events[i - 1].stream and events[i].stream.startswith("ses-"):
            return i
    raise AssertionError("no session event to damage")


def forged_approval(approved: list[Event], pending: list[Event]) -> list[Event]:
    """The approval's events after the pending log, chained by a forger without the key: the
    plain hashes recomputed, no MACs."""
    return rehash([*pending, *approved[len(pending) :]], None, len(pending))


# ---------------------------------------------------------------------------------------------
# the stores


STORES = [
    "sqlite",
    "memory",
    pytest.param("postgres", marks=pytest.mark.skipif(not ADMIN_URL, reason=SKIP_REASON)),
]
_DATABASES: list[object] = []
_OPENED: list[object] = []


def holding(kind: str, events: list[Event], key: LogKey | None, tmp_path: Path) -> object:
    """A store of `kind` that holds exactly `events` (as a damaged copy would), with `key`."""
    if kind == "memory":
        store = MemoryStore(key=key)
        store._events = list(events)
        for e in events:
            store._seqs[e.stream] = max(store._seqs.get(e.stream, 0), e.seq)
        return store
    rows = [as_row(e) for e in events]
    if kind == "sqlite":
        path = tmp_path / f"log-{len(list(tmp_path.iterdir()))}.db"
        SQLiteStore(path).close()
        with sqlite3.connect(path) as conn:
            conn.executemany("INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
        conn.close()
        opened = SQLiteStore(path, key=key)
        opened.where = path  # type: ignore[attr-defined]
        _OPENED.append(opened)
        return opened
    import psycopg
    from harnessc.runtime.log.postgres import PostgresStore

    from .postgres import fresh_database

    database = fresh_database()
    url = database.__enter__()
    _DATABASES.append(database)
    PostgresStore(url).close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE harnessc.events DISABLE TRIGGER events_append_only")
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO harnessc.events VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)", rows
            )
    opened_pg = PostgresStore(url, key=key)
    opened_pg.where = url  # type: ignore[attr-defined]
    _OPENED.append(opened_pg)
    return opened_pg


@pytest.fixture(autouse=True)
def drop_databases() -> Iterator[None]:
    yield
    while _OPENED:
        with contextlib.suppress(StoreError):
            _OPENED.pop().close()  # type: ignore[attr-defined]
    while _DATABASES:
        _DATABASES.pop().__exit__(None, None, None)  # type: ignore[attr-defined]


def cases(keyed: bool) -> list[str]:
    return [*DAMAGE, "forged-approval"] if keyed else ["row-changed", "row-deleted", "row-inserted"]


def damaged(
    case: str, pending: list[Event], approved: list[Event], key: LogKey | None
) -> list[Event]:
    if case == "forged-approval":
        return forged_approval(approved, pending)
    return DAMAGE[case](pending, key)


# ---------------------------------------------------------------------------------------------
# the runtime at open, and before an append


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.parametrize("keyed", [False, True], ids=["no-key", "key"])
def test_the_runtime_opens_no_damaged_log_and_appends_nothing_to_it(
    tmp_path: Path, kind: str, keyed: bool
) -> None:
    key = KEY if keyed else None
    spec, pending, approved, _ = logs(tmp_path, key)
    for case in cases(keyed):
        events = damaged(case, pending, approved, key)
        whole = verify_events(events, key=key)
        assert not whole.ok, case
        store = holding(kind, events, key, tmp_path)
        with pytest.raises(UnverifiedLog, match=f"at position {whole.position}:") as error:
            Harness(spec, store=store)  # type: ignore[arg-type]
        assert error.value.verification.position == whole.position, case
        assert f"at position {whole.position}" in str(error.value), case
        with pytest.raises(UnverifiedLog):  # the store it opened writes nothing from then on
            store.append(NewEvent("ses-x", "Text", "note", {}))  # type: ignore[attr-defined]
        assert [e.hash for e in store.read()] == [e.hash for e in events]  # type: ignore[attr-defined]
        # forensics: it reads what it can, says where the chain broke, and writes nothing
        forensic = Harness(spec, store=holding(kind, events, key, tmp_path), forensic=True)  # type: ignore[arg-type]
        assert forensic.broken is not None and forensic.broken.position == whole.position
        assert forensic.verify().position == whole.position
        with pytest.raises(StoreError, match=r"forensics|does not verify"):
            forensic.store.append(NewEvent("ses-x", "Text", "note", {}))


def test_without_a_key_a_forged_approval_rehashed_passes_every_walk(tmp_path: Path) -> None:
    # what the documentation says: without a key, whoever can write the log can rewrite it
    spec, pending, approved, _ = logs(tmp_path, None)
    forged = forged_approval(approved, pending)
    assert verify_events(forged).ok
    Harness(spec, store=holding("sqlite", forged, None, tmp_path))  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.parametrize("keyed", [False, True], ids=["no-key", "key"])
def test_an_operator_write_walks_again_what_it_depends_on(
    tmp_path: Path, kind: str, keyed: bool
) -> None:
    # the console ran, a row under it was changed, and an Approve still succeeded
    key = KEY if keyed else None
    spec, pending, approved, request = logs(tmp_path, key)
    for case in cases(keyed):
        store = holding(kind, pending, key, tmp_path)
        h = Harness(spec, store=store)  # type: ignore[arg-type]
        operations.pending_approvals(h)  # the console's page: the chain walked
        events = damaged(case, pending, approved, key)
        _replace(kind, store, events)
        with pytest.raises(UnverifiedLog):
            operations.approve(h, request, by=OPS)
        with pytest.raises(UnverifiedLog):
            store.append(NewEvent("ses-x", "Text", "note", {}))  # type: ignore[attr-defined]


def _replace(kind: str, store: object, events: list[Event]) -> None:
    """Put `events` in place of what `store` holds, under it."""
    if kind == "memory":
        store._events[:] = events  # type: ignore[attr-defined]
        return
    rows = [as_row(e) for e in events]
    if kind == "sqlite":
        path = store.where  # type: ignore[attr-defined]
        with sqlite3.connect(path) as conn:
            conn.execute("DROP TRIGGER IF EXISTS events_no_delete")
            conn.execute("DELETE FROM events")
            conn.executemany("INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
        conn.close()
        return
    import psycopg

    with psycopg.connect(store.where, autocommit=True) as conn:  # type: ignore[attr-defined]
        conn.execute("ALTER TABLE harnessc.events DISABLE TRIGGER events_append_only")
        conn.execute("DELETE FROM harnessc.events")
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO harnessc.events VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)", rows
            )


# ---------------------------------------------------------------------------------------------
# every reader of the log


@pytest.mark.parametrize("keyed", [False, True], ids=["no-key", "key"])
def test_every_reader_catches_every_case(
    tmp_path: Path, keyed: bool, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    key = KEY if keyed else None
    _, pending, approved, _ = logs(tmp_path, key)
    spec_file = tmp_path / "g.harness"
    spec_file.write_text(SHELL, encoding="utf-8")
    operators = tmp_path / "ops.json"
    operators.write_text(
        '{"operators": [{"name": "c", "roles": ["ops"], "token_sha256": "' + "0" * 64 + '"}]}',
        encoding="utf-8",
    )
    if keyed:
        monkeypatch.setenv(LOG_KEY_ENV, "k" * 40)
    decision = next(
        json.loads(e.payload_json)["decision_id"] for e in pending if e.type == "decision"
    )
    for case in cases(keyed):
        events = damaged(case, pending, approved, key)
        whole = verify_events(events, key=key)
        db = holding("sqlite", events, key, tmp_path).where  # type: ignore[attr-defined]
        for command in (
            ["log", "verify", "--log", str(db)],
            ["replay", "--log", str(db), "--spec", str(spec_file)],
            ["why", str(spec_file), "--log", str(db), "--decision", decision],
            ["approvals", "list", "--log", str(db)],
            ["console", "--log", str(db), "--spec", str(spec_file), "--operators", str(operators)],
        ):
            code = main(command)
            said = "".join(capsys.readouterr())
            assert code != 0, (case, command, said)
            assert f"position {whole.position}" in said, (case, command, said)


# ---------------------------------------------------------------------------------------------
# the checkpoint


@pytest.mark.parametrize("keyed", [False, True], ids=["no-key", "key"])
def test_opening_walks_from_the_last_checkpoint_which_is_chained_too(
    tmp_path: Path, keyed: bool
) -> None:
    key = KEY if keyed else None
    spec = Spec(name="demo", root_module="demo")
    path = tmp_path / "log.db"
    with SQLiteStore(path, key=key) as store:
        store.append_many(
            [NewEvent("s", "Text", "note", {"i": i}) for i in range(CHECKPOINT_EVERY + 5)]
        )
        h = Harness(spec, store=store)
        assert h._watch is not None and h._watch.resumed is None  # no checkpoint yet: all
        store.append(NewEvent("s", "Text", "note", {}))  # with it, the checkpoint
        (mark,) = store.read_prefix("harness", CHECKPOINT_TYPE)
        assert json.loads(mark.payload_json)["position"] == CHECKPOINT_EVERY + 5
        assert (json.loads(mark.payload_json)["tag"] is not None) == keyed
    with SQLiteStore(path, key=key) as store:
        h = Harness(spec, store=store)
        assert h._watch is not None and h._watch.resumed is not None
        assert h._watch.resumed.position == CHECKPOINT_EVERY + 5
        assert store.verify().ok
    # a changed checkpoint is not trusted: the walk starts from the first event, and the
    # checkpoint's own link breaks
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute(
            "UPDATE events SET payload = ? WHERE position = ?",
            (json.dumps({"position": 3, "hash": "0" * 64, "tag": None}), mark.position),
        )
    conn.close()
    with SQLiteStore(path, key=key) as store, pytest.raises(UnverifiedLog) as error:
        Harness(spec, store=store)
    assert error.value.verification.position == mark.position


def test_a_row_changed_before_the_checkpoint_is_found_by_a_whole_walk_not_at_open(
    tmp_path: Path,
) -> None:
    # the promise as documented: opening walks what follows the checkpoint
    spec = Spec(name="demo", root_module="demo")
    path = tmp_path / "log.db"
    with SQLiteStore(path) as store:
        store.append_many(
            [NewEvent("s", "Text", "note", {"i": i}) for i in range(CHECKPOINT_EVERY + 5)]
        )
        Harness(spec, store=store)
        store.append(NewEvent("s", "Text", "note", {}))
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute("UPDATE events SET payload = '{\"i\":-1}' WHERE position = 10")
    conn.close()
    with SQLiteStore(path) as store:
        Harness(spec, store=store)
        assert store.verify().position == 10
    assert main(["log", "verify", "--log", str(path)]) != 0


def test_a_forensic_harness_reports_a_row_that_is_not_json_and_never_raises(
    tmp_path: Path,
) -> None:
    spec, pending, _, _ = logs(tmp_path, None)
    i = next(i for i, e in enumerate(pending) if e.type == "decision")
    events = rehash(
        [*pending[:i], dataclasses.replace(pending[i], payload_json="not json"), *pending[i + 1 :]],
        None,
        i,
    )
    with pytest.raises(StoreError, match=f"position {i + 1}"):
        Harness(spec, store=holding("sqlite", events, None, tmp_path))  # type: ignore[arg-type]
    h = Harness(spec, store=holding("sqlite", events, None, tmp_path), forensic=True)  # type: ignore[arg-type]
    assert [e.position for e in h.unreadable] == [i + 1]  # type: ignore[attr-defined]
    found = h.verify()
    assert (found.ok, found.position, found.reason) == (False, i + 1, "the payload is not JSON")


def test_a_keyed_harness_opens_a_log_written_without_the_key_once_it_is_keyed(
    tmp_path: Path,
) -> None:
    # a log with no MAC at all cannot be told from one whose MACs were stripped: the runtime
    # with the key opens it once an event written with the key follows it
    spec = Spec(name="demo", root_module="demo")
    path = tmp_path / "log.db"
    with SQLiteStore(path) as store:
        store.append_many([NewEvent("s", "Text", "note", {"i": i}) for i in range(3)])
    with SQLiteStore(path, key=KEY) as store, pytest.raises(UnverifiedLog, match="no MAC"):
        Harness(spec, store=store)
    with SQLiteStore(path, key=KEY) as store:
        store.append(NewEvent("harness", "State", "log.keyed", {}))
    with SQLiteStore(path, key=KEY) as store:
        Harness(spec, store=store)
        assert store.verify().ok
