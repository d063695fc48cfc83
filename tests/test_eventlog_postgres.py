"""The event log's verification contract on PostgreSQL: damage reported, checkpoints, the log
key, format 1 logs, and `harnessc log` on a `postgresql://` store.

Set HARNESSC_TEST_POSTGRES_URL to a server's URL (`.ci/run` starts one on loopback); each test
creates and drops its own database there."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

psycopg = pytest.importorskip("psycopg", reason="PostgreSQL needs psycopg")

from harnessc.compiler.cli import main  # noqa: E402
from harnessc.runtime.log.events import NewEvent, event_hash  # noqa: E402
from harnessc.runtime.log.integrity import LOG_KEY_ENV, LOG_KEY_FILE_ENV, LogKey  # noqa: E402
from harnessc.runtime.log.postgres import PostgresStore  # noqa: E402
from harnessc.runtime.log.store import StoreError  # noqa: E402

from .postgres import ADMIN_URL, SKIP_REASON, fresh_database  # noqa: E402

pytestmark = pytest.mark.skipif(not ADMIN_URL, reason=SKIP_REASON)
KEY = LogKey(b"a log key of thirty-two bytes at least")


@pytest.fixture(autouse=True)
def no_key_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LOG_KEY_ENV, raising=False)
    monkeypatch.delenv(LOG_KEY_FILE_ENV, raising=False)


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh database on the test server, dropped afterwards."""
    with fresh_database() as url:
        yield url


def fill(url: str, key: LogKey | None = None) -> None:
    with PostgresStore(url, key=key) as store:
        store.append_many([NewEvent("ab"[i % 2], "Text", "note", {"i": i}) for i in range(10)])


def tamper(url: str, *statements: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE harnessc.events DISABLE TRIGGER events_append_only")
        for statement in statements:
            conn.execute(statement)


def forge(url: str, position: int, payload: str) -> None:
    """Rewrite the event at `position` and recompute every plain hash after it."""
    with PostgresStore(url, readonly=True) as store:
        events = store.read()
    prev = events[position - 2].hash if position > 1 else "0" * 64
    statements = []
    for e in events[position - 1 :]:
        text = payload if e.position == position else e.payload_json
        h = event_hash(
            position=e.position,
            stream=e.stream,
            seq=e.seq,
            kind=e.kind,
            type=e.type,
            payload_json=text,
            time=e.time,
            prev_hash=prev,
        )
        statements.append(
            f"UPDATE harnessc.events SET payload = '{text}', prev_hash = '{prev}', hash = '{h}' "
            f"WHERE position = {e.position}"
        )
        prev = h
    tamper(url, *statements)


def test_damaged_rows_are_reported_never_raised(pg_url: str) -> None:
    fill(pg_url)
    forge(pg_url, 4, "[1,2]")
    with PostgresStore(pg_url) as store:
        v = store.verify()
    assert (v.ok, v.position, v.reason, v.checked) == (
        False,
        4,
        "the payload is not a JSON object",
        3,
    )


def test_a_checkpoint_finds_removed_and_rewritten_events(pg_url: str) -> None:
    fill(pg_url)
    with PostgresStore(pg_url) as store:
        checkpoint = store.checkpoint()
    tamper(pg_url, "DELETE FROM harnessc.events WHERE position > 8")
    with PostgresStore(pg_url) as store:
        assert store.verify().ok
        v = store.verify(anchor=checkpoint.to_text())
    assert (v.ok, v.position) == (False, 10)
    assert v.reason is not None and v.reason.startswith("the log ends at position 8")


def test_the_log_key_finds_a_rewrite_and_guards_appends(pg_url: str) -> None:
    fill(pg_url, KEY)
    forge(pg_url, 3, '{"i":99}')
    with PostgresStore(pg_url, readonly=True) as store:
        plain = store.verify()
    assert plain.ok and not plain.authenticated and plain.notes
    with PostgresStore(pg_url, key=KEY, readonly=True) as store:
        v = store.verify()
    assert (v.ok, v.position, v.authenticated) == (False, 3, True)
    with (
        PostgresStore(pg_url) as store,
        pytest.raises(StoreError, match="the event log is keyed"),
    ):
        store.append(NewEvent("a", "Text", "note"))


def test_a_format_1_log_is_read_as_it_is_and_upgraded_for_writing(pg_url: str) -> None:
    fill(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:  # what format 1 wrote
        conn.execute("ALTER TABLE harnessc.events DROP COLUMN mac")
        conn.execute("UPDATE harnessc.meta SET value = '1' WHERE key = 'schema'")
    with PostgresStore(pg_url, readonly=True) as store:
        assert store.verify().checked == 10 and store.read()[0].mac is None
    with PostgresStore(pg_url, key=KEY) as store:
        assert store.append(NewEvent("a", "Text", "note")).mac is not None
        v = store.verify(anchor=store.checkpoint())
    assert (v.ok, v.checked, v.authenticated) == (True, 11, True)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT value FROM harnessc.meta").fetchone() == ("2",)


def test_harnessc_log_on_postgresql(pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    fill(pg_url)
    assert main(["log", "head", "--log", pg_url]) == 0
    checkpoint = capsys.readouterr().out.strip()
    tamper(pg_url, "DELETE FROM harnessc.events WHERE position = 10")
    assert main(["log", "verify", "--log", pg_url, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"]
    assert main(["log", "verify", "--log", pg_url, "--anchor", checkpoint]) == 1
    assert capsys.readouterr().out.startswith("not ok at position 10: the log ends at position 9")
    base, _, _ = pg_url.rpartition("/")
    assert main(["log", "verify", "--log", f"{base}/no_such_database"]) == 2
    assert "cannot open the event store" in capsys.readouterr().err


def test_two_stores_continue_each_others_streams(pg_url: str) -> None:
    # a store numbers its own streams from what it committed last: only while nobody else
    # appended since
    with PostgresStore(pg_url) as a, PostgresStore(pg_url) as b:
        a.append(NewEvent("s", "Text", "note", {"i": 0}))
        b.append(NewEvent("s", "Text", "note", {"i": 1}))
        assert a.append(NewEvent("s", "Text", "note", {"i": 2})).seq == 3
        assert a.append(NewEvent("s", "Text", "note", {"i": 3})).seq == 4
        assert [e.seq for e in b.read("s")] == [1, 2, 3, 4]
        assert b.verify().ok
