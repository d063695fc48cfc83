"""Verifying the event log: damage is reported, never raised (byte flips and truncations of a
real SQLite file, rows of the wrong type, text that is not JSON or not UTF-8)."""

from __future__ import annotations

import functools
import random
import sqlite3
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from harnessc.runtime.events import Event, NewEvent, event_hash
from harnessc.runtime.store import (
    MemoryStore,
    SQLiteStore,
    StoreError,
    Verification,
    verify_events,
)
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

T0 = datetime(2026, 5, 9, 12, 0, tzinfo=UTC)


def note(stream: str, i: int) -> NewEvent:
    return NewEvent(stream, "Text", "note", {"i": i, "text": "x" * (i % 50)})


@functools.cache
def real_log() -> bytes:
    """A real log file of several pages (closing the store checkpoints the WAL into it)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "events.db"
        with SQLiteStore(path, clock=lambda: T0) as store:  # the same bytes on every run
            store.append_many([note(f"s-{i % 3}", i) for i in range(80)])
            assert store.verify().checked == 80
        assert not Path(f"{path}-wal").exists()
        return path.read_bytes()


def verify_file(path: Path, data: bytes) -> Verification | StoreError:
    """Write `data` as the log file and verify it: a Verification, or the StoreError that
    opening it gave. Anything else raised fails the test."""
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.write_bytes(data)
    try:
        store = SQLiteStore(path)
    except StoreError as error:
        return error
    with store:
        result = store.verify()
    assert isinstance(result, Verification)
    assert result.ok or result.reason
    return result


def flipped(data: bytes, offset: int, mask: int = 0x5A) -> bytes:
    damaged = bytearray(data)
    damaged[offset] ^= mask
    return bytes(damaged)


def test_byte_flips_anywhere_are_reported_never_raised(tmp_path: Path) -> None:
    offsets = random.Random(5266).sample(range(len(real_log())), 400)
    results = [verify_file(tmp_path / "e.db", flipped(real_log(), o)) for o in offsets]
    # the sample reaches every kind of outcome: unopenable, damaged rows, and unused bytes
    assert any(isinstance(r, StoreError) for r in results)
    assert any(isinstance(r, Verification) and not r.ok for r in results)
    assert any(isinstance(r, Verification) and r.ok for r in results)


def test_a_flipped_byte_in_an_event_names_its_position(tmp_path: Path) -> None:
    offset = real_log().index(b'{"i":41,')
    result = verify_file(tmp_path / "e.db", flipped(real_log(), offset + 5, 0x01))  # 41 -> 51
    assert isinstance(result, Verification)
    assert (result.ok, result.position, result.reason, result.checked) == (
        False,
        42,
        "hash does not match the contents",
        41,
    )


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(offset=st.integers(min_value=0), mask=st.integers(min_value=1, max_value=255))
@example(offset=3282, mask=128)  # a schema that is not UTF-8: sqlite3 cannot decode its error
def test_any_byte_flip_is_reported_never_raised(tmp_path: Path, offset: int, mask: int) -> None:
    verify_file(tmp_path / "e.db", flipped(real_log(), offset % len(real_log()), mask))


def test_a_truncated_file_is_reported_never_raised(tmp_path: Path) -> None:
    page = 4096
    lengths = sorted(
        {*range(0, len(real_log()), 509), *(n * page + d for n in range(8) for d in (-1, 0, 1))}
    )
    results = [verify_file(tmp_path / "e.db", real_log()[: max(n, 0)]) for n in lengths]
    assert any(isinstance(r, StoreError) for r in results)
    broken = [r for r in results if isinstance(r, Verification) and not r.ok]
    assert broken and all(r.reason for r in broken)


def test_opening_a_file_that_is_not_a_log_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database, only words " * 200)
    with pytest.raises(StoreError, match=r"cannot open the event store `.*notes.txt`: "):
        SQLiteStore(path)


# ---------------------------------------------------------------------------------------------
# Rows a damaged file can hold


@pytest.fixture
def ten(tmp_path: Path) -> Path:
    path = tmp_path / "e.db"
    with SQLiteStore(path) as s:
        s.append_many([note("ab"[i % 2], i) for i in range(10)])
    return path


def damaged(path: Path, *statements: str) -> Verification:
    raw = sqlite3.connect(path)
    raw.execute("DROP TRIGGER events_no_update")
    for statement in statements:
        raw.execute(statement)
    raw.commit()
    raw.close()
    with SQLiteStore(path) as s:
        return s.verify()


def rehashed(path: Path, position: int, **changes: object) -> list[str]:
    """Statements that change one event and recompute its hash and every later link, as a
    forger who can write the file would."""
    with SQLiteStore(path) as s:
        events = s.read()
    statements = []
    prev = events[position - 2].hash if position > 1 else "0" * 64
    for e in events[position - 1 :]:
        fields = {
            "position": e.position,
            "stream": e.stream,
            "seq": e.seq,
            "kind": e.kind,
            "type": e.type,
            "payload_json": e.payload_json,
            "time": e.time,
            "prev_hash": prev,
        }
        if e.position == position:
            fields.update(changes)
        h = event_hash(**fields)  # type: ignore[arg-type]
        payload = str(fields["payload_json"]).replace("'", "''")
        statements.append(
            f"UPDATE events SET payload = '{payload}', prev_hash = '{prev}', hash = '{h}' "
            f"WHERE position = {e.position}"
        )
        prev = h
    return statements


@pytest.mark.parametrize(
    ("statement", "reason"),
    [
        ("UPDATE events SET seq = 'seven' WHERE position = 4", "`seq` is not a positive integer"),
        ("UPDATE events SET seq = 2.5 WHERE position = 4", "`seq` is not a positive integer"),
        ("UPDATE events SET stream = X'6162' WHERE position = 4", "`stream` is not text"),
        ("UPDATE events SET payload = X'7b7d' WHERE position = 4", "`payload` is not text"),
        ("UPDATE events SET hash = X'00ff' WHERE position = 4", "`hash` is not text"),
        (
            "UPDATE events SET stream = CAST(X'61ff' AS TEXT) WHERE position = 4",
            "`stream` is not UTF-8 text",
        ),
    ],
)
def test_a_row_of_the_wrong_type_is_named(ten: Path, statement: str, reason: str) -> None:
    v = damaged(ten, statement)
    assert (v.ok, v.position, v.reason, v.checked) == (False, 4, reason, 3)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [("{not json", "the payload is not JSON"), ("[1,2]", "the payload is not a JSON object")],
)
def test_a_payload_that_is_not_a_json_object_is_named(ten: Path, payload: str, reason: str) -> None:
    # rehashed, so only the payload check can find it
    v = damaged(ten, *rehashed(ten, 6, payload_json=payload))
    assert (v.ok, v.position, v.reason) == (False, 6, reason)


def chain(n: int) -> list[Event]:
    return MemoryStore().append_many([note("a", i) for i in range(n)])


def test_a_read_that_fails_part_way_is_reported() -> None:
    def rows() -> Iterator[Event]:
        yield from chain(2)
        raise StoreError("database disk image is malformed")

    v = verify_events(rows())
    assert (v.ok, v.position, v.checked) == (False, None, 2)
    assert v.reason == "the log cannot be read after position 2: database disk image is malformed"


# any value in any column: what a damaged store could hand back
_ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(),
    st.binary(max_size=8),
    st.sampled_from(["Text", "0" * 64, "{}", '{"i":1}', "a"]),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(*[_ANY] * 9).map(lambda values: Event(*values)),
        max_size=4,
    ),
    st.one_of(st.none(), st.tuples(st.integers(), st.text(max_size=3))),
)
def test_verify_events_reports_any_rows_never_raises(
    events: list[Event], anchor: tuple[int, str] | None
) -> None:
    v = verify_events([*chain(3), *events], anchor)
    assert isinstance(v, Verification)
    assert v.ok or v.reason
