"""Verifying the event log: damage is reported, never raised (byte flips and truncations of a
real SQLite file, rows of the wrong type, text that is not JSON or not UTF-8)."""

from __future__ import annotations

import functools
import json
import random
import re
import sqlite3
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from harnessc.compiler.cli import main
from harnessc.runtime.log.chain import ChainWatch
from harnessc.runtime.log.events import Event, NewEvent, event_hash
from harnessc.runtime.log.integrity import (
    LOG_KEY_ENV,
    LOG_KEY_FILE_ENV,
    Checkpoint,
    CheckpointError,
    LogKey,
    LogKeyError,
)
from harnessc.runtime.log.store import (
    MemoryStore,
    SQLiteStore,
    StoreError,
    Verification,
    verify_events,
)
from harnessc.runtime.model import Spec
from harnessc.runtime.session.harness import Harness
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from .budget import examples

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
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
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


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(st.tuples(*[_ANY] * 10).map(lambda values: Event(*values)), max_size=4),
    st.one_of(
        st.none(),
        st.tuples(st.integers(), st.sampled_from(["", "0" * 64, "a" * 64])),
        st.text(max_size=8).map(lambda t: "harnessc-log:" + t),
    ),
    st.sampled_from([None, LogKey(b"k" * 32)]),
)
def test_verify_events_reports_any_rows_never_raises(
    events: list[Event], anchor: tuple[int, str] | str | None, key: LogKey | None
) -> None:
    try:
        checkpoint = Checkpoint.of(anchor) if anchor is not None else None
    except CheckpointError:  # a bad anchor is the caller's mistake, said before any walk
        with pytest.raises(CheckpointError):
            verify_events(chain(3), anchor)
        return
    v = verify_events([*chain(3), *events], checkpoint, key=key)
    assert isinstance(v, Verification)
    assert v.ok or v.reason


class _Growing:
    """The rows of a log as a store hands them out (`read(after=…, limit=…)`, and `last` for
    the log's cut), made visible a part at a time; counts the rows read."""

    def __init__(self, rows: list[Event]) -> None:
        self.rows, self.visible, self.served = rows, 0, 0

    def last(self, prefix: str, type: str) -> Event | None:
        found = [e for e in self.rows[: self.visible] if e.type == type]
        return found[-1] if found else None

    def read(self, *, after: int = 0, limit: int | None = None) -> list[Event]:
        page = self.rows[after : self.visible][:limit]
        self.served += len(page)
        return page


def _damaged(rows: list[Event], at: int, how: str) -> list[Event]:
    import dataclasses

    e = rows[at]
    changed = {
        "payload": {"payload_json": '{"i":-1}'},
        "hash": {"hash": "f" * 64},
        "mac": {"mac": None},
        "seq": {"seq": e.seq + 1},
    }
    if how == "copy":  # an earlier row again, at the end
        return [*rows, dataclasses.replace(e, position=len(rows) + 1)]
    return [*rows[:at], dataclasses.replace(e, **changed[how]), *rows[at + 1 :]]


@settings(max_examples=examples(200), deadline=None)
@given(
    n=st.integers(min_value=0, max_value=12),
    keyed=st.booleans(),
    damage=st.one_of(
        st.none(),
        st.tuples(
            st.integers(min_value=0), st.sampled_from(["payload", "hash", "mac", "seq", "copy"])
        ),
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=14), max_size=4),
    page=st.integers(min_value=1, max_value=5),
)
def test_a_chain_watch_checks_each_row_once_and_ends_as_a_whole_walk(
    n: int, keyed: bool, damage: tuple[int, str] | None, cuts: list[int], page: int
) -> None:
    key = KEY if keyed else None
    rows = MemoryStore(key=key).append_many([note("ab"[i % 2], i) for i in range(n)])
    if damage is not None and rows:
        rows = _damaged(rows, damage[0] % len(rows), damage[1])
    store = _Growing(rows)
    watch = ChainWatch(key)
    watch.PAGE = page
    seen: list[Verification] = []
    for cut in [*sorted(cuts), len(rows)]:  # the log grows between the checks
        store.visible = max(store.visible, min(cut, len(rows)))
        seen.append(watch.check(store))
    whole = verify_events(rows, key=key)
    assert seen[-1] == whole
    # every row was read once, up to the break (a page may run past it)
    assert store.served <= len(rows)
    assert store.served == len(rows) or not whole.ok
    # a broken link found is the answer from then on (a keyed log whose newest rows carry no
    # MAC yet is not: the next rows may carry theirs)
    transient = ("the log carries", "events after")
    broke = [v for v in seen if not v.ok and not (v.reason or "").startswith(transient)]
    assert all(v == broke[0] for v in broke)
    assert not broke or seen[-1] == broke[0]


# ---------------------------------------------------------------------------------------------
# Checkpoints: what plain verification cannot see

KEY = LogKey(b"a log key of thirty-two bytes at least")
OTHER_KEY = LogKey(b"another key, thirty-two bytes or more")


@pytest.fixture(autouse=True)
def no_key_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LOG_KEY_ENV, raising=False)
    monkeypatch.delenv(LOG_KEY_FILE_ENV, raising=False)


def rewrite(path: Path, *statements: str) -> None:
    raw = sqlite3.connect(path)
    raw.execute("DROP TRIGGER IF EXISTS events_no_update")
    raw.execute("DROP TRIGGER IF EXISTS events_no_delete")
    for statement in statements:
        raw.execute(statement)
    raw.commit()
    raw.close()


def forge(path: Path, position: int, payload: str) -> None:
    """Rewrite the event at `position` and recompute every plain hash after it."""
    rewrite(path, *rehashed(path, position, payload_json=payload))


@pytest.mark.parametrize(
    ("damage", "position", "reason"),
    [
        (
            lambda p: rewrite(p, "DELETE FROM events WHERE position > 7"),
            10,
            "the log ends at position 7, before the checkpoint at position 10: events were removed",
        ),
        (
            lambda p: rewrite(p, "DELETE FROM events"),
            10,
            "the log ends at position 0, before the checkpoint at position 10: events were removed",
        ),
        (
            lambda p: forge(p, 4, '{"i":99}'),
            10,
            "the hash at position 10 differs from the checkpoint: the log was rewritten at or "
            "before it",
        ),
    ],
    ids=["last-rows-deleted", "all-rows-deleted", "rewritten-from-row-4"],
)
def test_what_plain_verify_passes_a_checkpoint_finds(
    ten: Path, damage: object, position: int, reason: str
) -> None:
    with SQLiteStore(ten) as s:
        checkpoint = s.checkpoint()
    assert checkpoint.tag is None and checkpoint.position == 10
    damage(ten)  # type: ignore[operator]
    with SQLiteStore(ten) as s:
        plain = s.verify()
        assert plain.ok and not plain.anchored  # a shorter or rewritten chain is still a chain
        assert "removing the newest events is found only against a checkpoint" in plain.describe()
        for anchor in (checkpoint, checkpoint.to_text(), json.dumps(checkpoint.to_dict())):
            v = s.verify(anchor=Checkpoint.of(anchor) if anchor is checkpoint else anchor)
            assert (v.ok, v.position, v.reason, v.anchored) == (False, position, reason, True)


def test_a_checkpoint_reads_back_from_its_text_and_json() -> None:
    c = Checkpoint.at(12, "ab" * 32, KEY)
    assert c.to_text() == f"harnessc-log:12:{'ab' * 32}:{c.tag}"
    assert Checkpoint.parse(c.to_text()) == Checkpoint.parse(json.dumps(c.to_dict())) == c
    assert Checkpoint.parse(f"  harnessc-log:0:{'0' * 64}\n") == Checkpoint(0, "0" * 64)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "a checkpoint reads `harnessc-log:POSITION:HASH`"),
        ("harnessc-log:x:" + "0" * 64, "position is a whole number"),
        ("harnessc-log:-1:" + "0" * 64, "position is a whole number"),
        ("harnessc-log:3:ABC", "hash is 64 lowercase hex digits"),
        ("harnessc-log:3:" + "0" * 64 + ":zz", "tag is 64 lowercase hex digits"),
        ('{"position": 3}', "hash is 64 lowercase hex digits"),
        ('{"position": 3, "hash": "x", "extra": 1}', "has `position`, `hash` and `tag`"),
        ("{not json", "not valid JSON"),
    ],
)
def test_bad_checkpoint_text_is_refused_clearly(text: str, message: str) -> None:
    with pytest.raises(CheckpointError, match=re.escape(message)):
        Checkpoint.parse(text)


def test_the_harness_hands_out_checkpoints_and_verifies_against_them(tmp_path: Path) -> None:
    spec = Spec(name="demo", root_module="demo")
    with SQLiteStore(tmp_path / "e.db") as store:
        h = Harness(spec, store=store)
        store.append_many([note("a", i) for i in range(3)])
        checkpoint = h.head()
        assert checkpoint.position == store.head()[0] and h.verify(anchor=checkpoint).ok
    rewrite(tmp_path / "e.db", f"DELETE FROM events WHERE position = {checkpoint.position}")
    with SQLiteStore(tmp_path / "e.db") as store:
        v = Harness(spec, store=store).verify(anchor=checkpoint.to_text())
    assert (v.ok, v.position) == (False, checkpoint.position)


# ---------------------------------------------------------------------------------------------
# The log key


@pytest.fixture
def keyed(tmp_path: Path) -> Path:
    path = tmp_path / "keyed.db"
    with SQLiteStore(path, key=KEY) as s:
        events = s.append_many([note("ab"[i % 2], i) for i in range(10)])
    assert all(e.mac == KEY.event_mac(e.hash) for e in events)
    return path


def test_a_rewrite_with_recomputed_hashes_fails_only_with_the_key(keyed: Path) -> None:
    forge(keyed, 4, '{"i":99}')
    with SQLiteStore(keyed, readonly=True) as s:
        plain = s.verify()
    # without the key the chain holds, and the result says the MACs went unchecked
    assert plain.ok and not plain.authenticated
    assert plain.notes == (
        "the log carries MACs but no log key was given: they were not checked, so a rewrite by "
        "whoever can write the log would pass",
    )
    with SQLiteStore(keyed, key=KEY, readonly=True) as s:
        v = s.verify()
    assert (v.ok, v.position, v.checked, v.authenticated) == (False, 4, 3, True)
    assert v.reason is not None and v.reason.startswith("the MAC does not match the log key")


def test_a_rewrite_that_drops_the_macs_fails_with_the_key(keyed: Path) -> None:
    forge(keyed, 1, '{"i":99}')
    rewrite(keyed, "UPDATE events SET mac = NULL")
    with SQLiteStore(keyed, key=KEY, readonly=True) as s:
        v = s.verify()
    assert (v.ok, v.position) == (False, 10)
    assert v.reason is not None and v.reason.startswith("the log carries no MAC")


def test_a_keyed_log_verifies_with_its_key_and_proves_it(keyed: Path) -> None:
    with SQLiteStore(keyed, key=KEY) as s:
        checkpoint = s.checkpoint()
        v = s.verify(anchor=checkpoint)
    assert checkpoint.tag == KEY.checkpoint_tag(10, checkpoint.hash)
    assert (v.ok, v.anchored, v.authenticated, v.notes) == (True, True, True, ())
    assert v.proves is not None and "without the log key" in v.proves
    with SQLiteStore(keyed, key=OTHER_KEY, readonly=True) as s:
        other = s.verify(anchor=checkpoint)
    assert (other.ok, other.position) == (False, 10)
    assert other.reason is not None and "the checkpoint's tag does not match" in other.reason
    with SQLiteStore(keyed, readonly=True) as s:
        unkeyed = s.verify(anchor=checkpoint)
    assert unkeyed.ok and "the checkpoint's tag was not checked: no log key was given" in (
        unkeyed.notes
    )


def test_a_keyed_log_refuses_appends_it_could_not_verify(keyed: Path) -> None:
    with SQLiteStore(keyed) as s, pytest.raises(StoreError, match="the event log is keyed"):
        s.append(note("a", 1))
    with SQLiteStore(keyed, key=OTHER_KEY) as s:
        with pytest.raises(StoreError, match="does not match this log key"):
            s.append(note("a", 1))
        with pytest.raises(StoreError, match="does not match this log key"):
            s.checkpoint()  # a tag never vouches for a head the key did not write
    with SQLiteStore(keyed, key=KEY) as s:
        assert s.append(note("a", 1)).position == 11 and s.verify().ok


def test_the_key_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert LogKey.from_env() is None
    key_file = tmp_path / "log.key"
    key_file.write_bytes(b"a log key of thirty-two bytes at least\n")
    monkeypatch.setenv(LOG_KEY_FILE_ENV, str(key_file))
    with SQLiteStore(tmp_path / "e.db") as s:
        assert s.append(note("a", 1)).mac == KEY.event_mac(s.head()[1])
    monkeypatch.setenv(LOG_KEY_ENV, "short")
    with pytest.raises(LogKeyError, match="not both"):
        LogKey.from_env()
    monkeypatch.delenv(LOG_KEY_FILE_ENV)
    with pytest.raises(LogKeyError, match="at least 32 bytes"):
        SQLiteStore(tmp_path / "e.db")
    assert "thirty" not in repr(KEY)


def test_a_version_1_log_is_read_as_it_is_and_upgraded_for_writing(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    raw = sqlite3.connect(path)
    raw.executescript(V1_DDL)
    prev = "0" * 64
    for i in range(1, 4):
        fields = {
            "position": i,
            "stream": "a",
            "seq": i,
            "kind": "Text",
            "type": "note",
            "payload_json": f'{{"i":{i}}}',
            "time": "2026-05-09T12:00:00.000000Z",
            "prev_hash": prev,
        }
        h = event_hash(**fields)  # type: ignore[arg-type]
        raw.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", (*fields.values(), h))
        prev = h
    raw.commit()
    raw.close()
    with SQLiteStore(path, readonly=True) as s:  # verify never upgrades the file
        assert s.verify().checked == 3 and s.read()[0].mac is None
    assert sqlite3.connect(path).execute("SELECT value FROM meta").fetchone() == ("1",)
    with SQLiteStore(path, key=KEY) as s:  # keyed from here on; the chain covers the rest
        assert s.append(note("a", 4)).mac is not None
        v = s.verify(anchor=s.checkpoint())
        assert (v.ok, v.checked, v.authenticated) == (True, 4, True)
    assert sqlite3.connect(path).execute("SELECT value FROM meta").fetchone() == ("2",)


V1_DDL = """
CREATE TABLE events (
    position INTEGER PRIMARY KEY, stream TEXT NOT NULL, seq INTEGER NOT NULL,
    kind TEXT NOT NULL, type TEXT NOT NULL, payload TEXT NOT NULL, time TEXT NOT NULL,
    prev_hash TEXT NOT NULL, hash TEXT NOT NULL, UNIQUE (stream, seq)
);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES ('schema', '1');
"""


def test_a_readonly_store_creates_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="cannot open the event store"):
        SQLiteStore(tmp_path / "missing.db", readonly=True)
    assert not (tmp_path / "missing.db").exists()
    sqlite3.connect(tmp_path / "other.db").execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(StoreError, match="holds no event log"):
        SQLiteStore(tmp_path / "other.db", readonly=True)
    SQLiteStore(tmp_path / "e.db").close()
    with (
        SQLiteStore(tmp_path / "e.db", readonly=True) as s,
        pytest.raises(StoreError, match="read-only"),
    ):
        s.append(note("a", 1))


# ---------------------------------------------------------------------------------------------
# harnessc log


def test_log_head_prints_a_checkpoint_that_log_verify_checks(
    keyed: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    key_file = tmp_path / "log.key"
    key_file.write_bytes(b"a log key of thirty-two bytes at least")
    assert main(["log", "head", "--log", str(keyed), "--key-file", str(key_file)]) == 0
    text = capsys.readouterr().out.strip()
    assert Checkpoint.parse(text).tag is not None
    assert main(["log", "head", "--log", f"sqlite:///{keyed}", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["checkpoint"] == text.rpartition(":")[0]
    args = ["log", "verify", "--log", str(keyed), "--anchor", text]
    assert main([*args, "--key-file", str(key_file)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ok: 10 events verified\nproves: ") and "note:" not in out
    assert main(args) == 0  # without the key: ok, and it says what went unchecked
    assert "note: the log carries MACs but no log key was given" in capsys.readouterr().out
    forge(keyed, 10, '{"i":99}')
    assert main([*args, "--key-file", str(key_file), "--format", "json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert (result["ok"], result["position"], result["authenticated"]) == (False, 10, True)


def test_log_commands_report_bad_input_without_a_traceback(
    ten: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = [
        (["verify", "--log", str(tmp_path / "none.db")], 2, "no event log at"),
        (["head", "--log", str(tmp_path / "none.db")], 2, "no event log at"),
        (["verify", "--log", str(ten), "--anchor", "12:abc"], 2, "a checkpoint reads"),
        (["verify", "--log", str(ten), "--key-file", str(tmp_path)], 2, "cannot read the log"),
        (["head", "--log", "mysql://db/x"], 2, "no event store for `mysql://db/x`"),
    ]
    for args, code, message in cases:
        assert main(["log", *args]) == code, args
        assert message in capsys.readouterr().err
    (tmp_path / "junk.db").write_bytes(real_log()[:5000])
    assert main(["log", "verify", "--log", str(tmp_path / "junk.db")]) == 1
    assert capsys.readouterr().out.startswith("not ok: cannot open the event store")
    assert main(["log", "head", "--log", str(tmp_path / "junk.db")]) == 2
    assert "Traceback" not in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists()
