"""Every event store implements `EventStore` whole, with the same signatures and the same
behaviour: a caller never asks a store what it can do (no `getattr` probe, no private field)."""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from harnessc.runtime.log.events import NewEvent
from harnessc.runtime.log.memory import MemoryStore
from harnessc.runtime.log.sqlite import SQLiteStore
from harnessc.runtime.log.store import EventStore, StoreError

from .postgres import ADMIN_URL, SKIP_REASON, fresh_database

ROOT = Path(__file__).resolve().parent.parent
MEMBERS = sorted(
    name
    for name in dir(EventStore)
    if not name.startswith("_") and callable(getattr(EventStore, name, None))
)


def _stores() -> list[type]:
    stores: list[type] = [MemoryStore, SQLiteStore]
    try:
        from harnessc.runtime.log.postgres import PostgresStore
    except ImportError:  # psycopg is an extra
        return stores
    return [*stores, PostgresStore]


def test_the_interface_names_every_operation_a_caller_uses() -> None:
    assert set(MEMBERS) >= {
        "append",
        "append_many",
        "announce",
        "changed_elsewhere",
        "checkpoint",
        "close",
        "defer",
        "flush",
        "head",
        "held",
        "last",
        "last_seq",
        "read",
        "read_prefix",
        "read_rows",
        "refuse",
        "same_log",
        "scan",
        "verify",
    }


@pytest.mark.parametrize("store", _stores(), ids=lambda s: s.__name__)
@pytest.mark.parametrize("member", MEMBERS)
def test_each_store_has_each_member_with_its_parameters(store: type, member: str) -> None:
    wanted = inspect.signature(getattr(EventStore, member))
    found = inspect.signature(getattr(store, member))
    shape = [(p.name, p.kind, p.default) for p in wanted.parameters.values()]
    assert [(p.name, p.kind, p.default) for p in found.parameters.values()] == shape


def test_no_runtime_module_probes_a_store_or_reads_its_connection() -> None:
    probes = re.compile(r"getattr\([^,]*store[^,]*,|store\._conn\b|hasattr\([^,]*store")
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "runtime").rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if probes.search(line)
    ]
    assert found == []


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def opened(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[EventStore, str]]:
    """A fresh store of each make, with the URL it is at."""
    if request.param == "memory":
        yield MemoryStore(), "memory://"
        return
    if request.param == "sqlite":
        path = tmp_path / "log.db"
        store = SQLiteStore(path)
        yield store, f"sqlite:///{path}"
        store.close()
        return
    if ADMIN_URL is None:
        pytest.skip(SKIP_REASON)
    from harnessc.runtime.log.postgres import PostgresStore

    with fresh_database() as url:
        store = PostgresStore(url)
        yield store, url
        store.close()


def _note(stream: str, n: int) -> NewEvent:
    return NewEvent(stream, "Text", "note", {"n": n})


def test_deferred_events_are_held_read_past_and_committed_in_order(
    opened: tuple[EventStore, str],
) -> None:
    store, _ = opened
    store.append(_note("s-1", 1))
    store.defer([_note("s-1", 2), _note("s-2", 3)])
    assert [e.payload["n"] for e in store.held()] == [2, 3]
    # a reader that needs none of them reads past them, and they stay held
    assert [e.payload["n"] for e in store.read("s-1", flush=False)] == [1]
    assert [e.payload["n"] for e in store.held()] == [2, 3]
    store.flush()
    assert store.held() == []
    assert [(e.stream, e.seq, e.payload["n"]) for e in store.read()] == [
        ("s-1", 1, 1),
        ("s-1", 2, 2),
        ("s-2", 1, 3),
    ]
    assert store.verify().ok


def test_a_deferred_event_learns_what_it_was_committed_as(
    opened: tuple[EventStore, str],
) -> None:
    """`NewEvent.stored`, `generation` and `last_seq`: what a reader holding deferred events
    knows without reading (a session's ledger, runtime/judge/history.py)."""
    store, _ = opened
    before = store.generation
    first = store.append(_note("s-1", 1))
    assert store.generation != before
    assert store.last_seq("s-1") == 1
    held = [_note("s-1", 2), _note("s-2", 3)]
    store.defer(held)
    mark = store.generation
    assert [e.stored for e in held] == [None, None]
    assert store.last_seq("s-1") == 1  # held: not committed, not counted
    store.flush()
    assert store.generation != mark
    stored = [e.stored for e in held]
    assert stored == store.read(after=first.position)  # the very events a reader finds
    assert [(e.stream, e.seq) for e in stored if e is not None] == [("s-1", 2), ("s-2", 1)]
    assert (store.last_seq("s-1"), store.last_seq("s-2")) == (2, 1)
    mark = store.generation
    store.read()
    assert store.generation == mark  # a read is not a commit


def test_rows_and_scans_select_the_same_events_in_every_store(
    opened: tuple[EventStore, str],
) -> None:
    store, _ = opened
    moves = [
        NewEvent("s-1", "State", "action.transition", {"action_id": "a", "to": to})
        for to in ("REQUESTED", "RUNNING", "SUCCEEDED")
    ]
    store.append_many([_note("s-1", 1), *moves, _note("s-2", 2)])
    rows = store.read_rows(["note", "action.transition"], moves=["RUNNING"])
    assert [(r[0], r[1], r[2]) for r in rows] == [
        (1, "s-1", "note"),
        (3, "s-1", "action.transition"),
        (5, "s-2", "note"),
    ]
    assert [r[0] for r in store.read_rows(["note"], after=1, limit=1)] == [5]
    assert [e.position for e in store.scan(after=2, batch=2)] == [3, 4, 5]
    assert [e.position for e in store.scan("s-2")] == [5]


def test_announced_events_ride_the_next_write_and_a_refusal_stops_every_write(
    opened: tuple[EventStore, str],
) -> None:
    store, _ = opened
    store.announce([_note("h", 0)])
    assert store.read() == []  # announcing writes nothing by itself
    store.append(_note("s-1", 1))
    assert [e.stream for e in store.read()] == ["h", "s-1"]
    store.refuse(StoreError("opened for forensics"))
    with pytest.raises(StoreError, match="forensics"):
        store.append(_note("s-1", 2))
    with pytest.raises(StoreError, match="forensics"):
        store.defer([_note("s-1", 3)])
    assert len(store.read()) == 2


def test_a_store_knows_the_url_it_is_at(opened: tuple[EventStore, str]) -> None:
    store, url = opened
    if url == "memory://":
        assert not store.same_log(url)  # `memory://` opens a new log each time
        return
    assert store.same_log(url)
    if url.startswith("sqlite:///"):
        path = url.removeprefix("sqlite:///")
        # another spelling of the same file is the same log; another file is not
        assert store.same_log(os.path.join(os.path.dirname(path), ".", os.path.basename(path)))
        assert not store.same_log(f"sqlite:///{path}.other")
        assert not store.same_log("postgresql://localhost/harnessc")
    else:
        assert not store.same_log(url.rsplit("/", 1)[0] + "/another_database")
        assert not store.same_log("sqlite:///log.db")


def test_another_writer_is_seen_by_every_store_that_can_have_one(
    opened: tuple[EventStore, str], tmp_path: Path
) -> None:
    store, url = opened
    store.append(_note("s-1", 1))
    assert not store.changed_elsewhere()  # its own commit is not another writer's
    if url == "memory://":
        return  # nothing outside the process writes to memory
    from harnessc.runtime.log.open import open_store

    other = open_store(url)
    other.append(_note("s-2", 2))
    other.close()
    assert store.changed_elsewhere()
    assert not store.changed_elsewhere()
