"""The event log: numbering, the hash chain and its verification, cursors, durability across a
killed process, concurrent writers, secret redaction and the projections folded from events."""

from __future__ import annotations

import doctest
import importlib
import json
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from harnessc.compiler.pipeline import check
from harnessc.runtime.log.events import (
    GENESIS_HASH,
    REDACTED,
    EventError,
    NewEvent,
    PayloadTemplate,
    approval_requested,
    approval_resolved,
    decision,
    event_hash,
    grant_issued,
    grant_revoked,
    grant_used,
    hole,
    json_value,
    redact,
    redact_args,
    session_ended,
    session_started,
)
from harnessc.runtime.log.projections import Projections
from harnessc.runtime.log.store import (
    ConcurrencyError,
    EventStore,
    MemoryStore,
    SQLiteStore,
    StoreError,
)
from harnessc.runtime.model import Spec, Tool
from harnessc.runtime.model.canonical import CanonicalError, canonical_json, sha256_hex
from harnessc.runtime.session.lifecycle import Action

T0 = datetime(2026, 5, 9, 12, 0, tzinfo=UTC)


class FakeClock:
    """One millisecond per reading, from T0."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventStore]:
    s: EventStore
    if request.param == "sqlite":
        s = SQLiteStore(tmp_path / "events.db", clock=FakeClock())
    else:
        s = MemoryStore(clock=FakeClock())
    yield s
    s.close()


def note(stream: str, i: int = 0) -> NewEvent:
    return NewEvent(stream, "Text", "note", {"i": i})


# ---------------------------------------------------------------------------------------------
# Numbering and the chain


def test_events_are_numbered_per_stream_and_globally(store: EventStore) -> None:
    events = [store.append(note("a")), store.append(note("b")), *store.append_many([note("a")])]
    assert [(e.stream, e.seq, e.position) for e in events] == [
        ("a", 1, 1),
        ("b", 1, 2),
        ("a", 2, 3),
    ]
    assert isinstance(store, EventStore)


def test_one_chain_covers_the_whole_log(store: EventStore) -> None:
    events = store.append_many([note("a", 1), note("b", 2), note("a", 3)])
    assert events[0].prev_hash == GENESIS_HASH
    assert [e.prev_hash for e in events[1:]] == [e.hash for e in events[:-1]]
    for e in events:
        # the hash is SHA-256 of the canonical JSON of the event without its hash
        assert e.hash == sha256_hex(e.body())
    assert store.head() == (3, events[-1].hash)


def test_last_finds_the_newest_event_of_a_type_under_a_stream_prefix(store: EventStore) -> None:
    store.append_many(
        [
            NewEvent("workflow:a/s1#1", "State", "workflow.step", {"n": 1}),
            NewEvent("workflow:a/s1#1", "Text", "note", {"n": 2}),
            NewEvent("workflow:ab/s1#1", "State", "workflow.step", {"n": 3}),
            NewEvent("workflow:a/s2#1", "State", "workflow.step", {"n": 4}),
            NewEvent("workflow:a/s2#1", "Text", "note", {"n": 5}),
            NewEvent("workflow:a", "State", "workflow.step", {"n": 6}),
            NewEvent("workflow:a0/x", "State", "workflow.step", {"n": 7}),
        ]
    )
    found = store.last("workflow:a/", "workflow.step")
    assert found is not None and json.loads(found.payload_json) == {"n": 4}
    assert store.last("workflow:a/", "workflow.gate") is None
    assert store.last("workflow:b/", "workflow.step") is None
    found = store.last("workflow:ab/", "workflow.step")
    assert found is not None and found.position == 3


def test_events_record_the_injected_clock(store: EventStore) -> None:
    assert store.append(note("a")).time == "2026-05-09T12:00:00.001000Z"


def test_the_payload_is_stored_canonically(store: EventStore) -> None:
    e = store.append(NewEvent("a", "Usage", "tokens", {"b": 2.0, "a": [1.5, -0.0]}))
    assert e.payload_json == '{"a":[1.5,0],"b":2}'
    assert store.read()[0].payload == {"a": [1.5, 0], "b": 2}


def test_a_batch_is_all_or_nothing(store: EventStore) -> None:
    store.append(note("a"))
    with pytest.raises(CanonicalError, match="not a JSON number"):
        store.append_many([note("a"), NewEvent("a", "Text", "note", {"x": float("nan")})])
    assert [e.position for e in store.read()] == [1]
    assert store.append(note("a")).seq == 2


def test_expected_seq_refuses_a_stale_writer(store: EventStore) -> None:
    store.append(note("a"), expected_seq=0)
    store.append(note("a"), expected_seq=1)
    with pytest.raises(ConcurrencyError, match="stream `a` is at seq 2, not 1"):
        store.append(note("a"), expected_seq=1)
    assert store.head()[0] == 2


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: NewEvent("s", "Chat", "x"), "unknown event kind `Chat`"),
        (lambda: NewEvent("", "Text", "x"), "non-empty stream"),
        (lambda: NewEvent("s", "Text", "x", [1]), "must be a JSON object"),  # type: ignore[arg-type]
        (lambda: NewEvent("s", "Tool", "decision", {"policy_version": "0" * 64}), "decision_id"),
        (
            lambda: NewEvent("s", "Tool", "decision", {"decision_id": "d", "policy_version": "v1"}),
            "content hash",
        ),
    ],
)
def test_malformed_events_are_refused(make: object, message: str) -> None:
    with pytest.raises(EventError, match=message):
        make()  # type: ignore[operator]


def test_a_decision_names_its_decision_and_policy_version(store: EventStore) -> None:
    spec = Spec(name="demo", root_module="demo")
    e = store.append(
        decision(
            "s-1",
            decision_id="dec-1",
            policy_version=spec.content_hash(),
            tool_id="fs.read",
            tool_call_id="call-1",
            input_hash="ab" * 32,
            effect="allow",
            rule="demo.reads",
        )
    )
    assert (e.kind, e.type) == ("Tool", "decision")
    assert e.payload["decision_id"] == "dec-1"
    assert e.payload["policy_version"] == spec.content_hash()


def test_a_good_policy_version_does_not_let_a_bad_one_through() -> None:
    good = Spec(name="demo", root_module="demo").content_hash()
    for version in (good, good.upper(), good[:-1], None):
        make = lambda version=version: decision(  # noqa: E731
            "s-1",
            decision_id="dec-1",
            policy_version=version,  # type: ignore[arg-type]
            tool_id="fs.read",
            tool_call_id="call-1",
            input_hash="ab" * 32,
            effect="allow",
        )
        if version == good:
            assert make().payload["policy_version"] == good
        else:
            with pytest.raises(EventError, match="policy_version"):
                make()


@pytest.mark.parametrize("holes", [0, 1, 2, 5])
def test_a_filled_template_is_the_canonical_json_of_the_payload(holes: int) -> None:
    # the fixed text holds `%` and braces, which the filling must leave as they are
    payload: dict[str, object] = {"z": "100% {x}", "a": ["%s", {"k": "%%"}], "n": 1.5}
    values = {f"h{i}": [f"v%{i}", {"%": None}] if i % 2 else f"x%s{i}" for i in range(holes)}
    shape = {**payload, **{name: hole(name) for name in values}}
    text = PayloadTemplate(shape).fill({k: json_value(v) for k, v in values.items()})
    assert text == canonical_json({**payload, **values})


def test_a_naive_clock_is_refused(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "e.db", clock=lambda: datetime(2026, 1, 1))
    with pytest.raises(EventError, match="without a timezone"):
        s.append(note("a"))
    assert s.head() == (0, GENESIS_HASH)
    s.close()


# ---------------------------------------------------------------------------------------------
# Reading with a cursor


def test_reading_resumes_from_a_cursor_without_gaps_or_duplicates(store: EventStore) -> None:
    for i in range(23):
        store.append(note("ab"[i % 2], i))
    seen: list[int] = []
    cursor = 0
    while page := store.read(after=cursor, limit=5):
        seen += [e.position for e in page]
        cursor = page[-1].position
    assert seen == list(range(1, 24))
    mine = store.read("b", after=4, limit=3)
    assert [(e.position, e.seq) for e in mine] == [(6, 3), (8, 4), (10, 5)]


def test_a_reader_polling_while_a_writer_appends_sees_each_event_once(tmp_path: Path) -> None:
    path = tmp_path / "e.db"
    writer = SQLiteStore(path, synchronous="NORMAL")  # about cursors, not durability
    reader = SQLiteStore(path)
    done = threading.Event()

    def write() -> None:
        for i in range(200):
            if i % 4 == 0:
                writer.append_many([note("w", i)] * 3)
            else:
                writer.append(note("w", i))
        done.set()

    thread = threading.Thread(target=write)
    thread.start()
    seen: list[int] = []
    cursor = 0
    while not done.is_set() or cursor < writer.head()[0]:
        for e in reader.read(after=cursor, limit=7):
            seen.append(e.position)
            cursor = e.position
    thread.join()
    assert seen == list(range(1, writer.head()[0] + 1))
    writer.close()
    reader.close()


# ---------------------------------------------------------------------------------------------
# Verification and tampering


def tampered(path: Path, *statements: str) -> SQLiteStore:
    raw = sqlite3.connect(path)
    raw.execute("DROP TRIGGER events_no_update")
    raw.execute("DROP TRIGGER events_no_delete")
    for statement in statements:
        raw.execute(statement)
    raw.commit()
    raw.close()
    return SQLiteStore(path)


@pytest.fixture
def ten(tmp_path: Path) -> Path:
    path = tmp_path / "e.db"
    with SQLiteStore(path) as s:
        s.append_many([note("ab"[i % 2], i) for i in range(10)])
        assert s.verify().ok
        assert s.verify().checked == 10
    return path


def test_the_log_is_append_only(ten: Path) -> None:
    raw = sqlite3.connect(ten)
    for statement in ("UPDATE events SET payload = '{}' WHERE position = 3", "DELETE FROM events"):
        with pytest.raises(sqlite3.IntegrityError, match="events are append-only"):
            raw.execute(statement)
    raw.close()


def test_an_edited_payload_is_found(ten: Path) -> None:
    s = tampered(ten, """UPDATE events SET payload = '{"i":99}' WHERE position = 4""")
    v = s.verify()
    assert (v.ok, v.position, v.reason, v.checked) == (
        False,
        4,
        "hash does not match the contents",
        3,
    )
    s.close()


def test_an_edit_with_a_recomputed_hash_breaks_the_next_link(ten: Path) -> None:
    with SQLiteStore(ten) as s:
        e = s.read(after=3, limit=1)[0]
    forged = sha256_hex({**e.body(), "payload": {"i": 99}})
    s = tampered(
        ten, f"""UPDATE events SET payload = '{{"i":99}}', hash = '{forged}' WHERE position = 4"""
    )
    v = s.verify()
    assert (v.position, v.reason) == (5, "prev_hash does not match the hash of position 4")
    s.close()


def test_a_removed_event_is_found(ten: Path) -> None:
    s = tampered(ten, "DELETE FROM events WHERE position = 6")
    v = s.verify()
    assert (v.position, v.reason) == (7, "expected position 6: events are missing")
    s.close()


def test_a_rechained_log_with_a_seq_gap_is_found(ten: Path) -> None:
    # an attacker who rewrites every later hash still cannot hide a broken stream sequence
    with SQLiteStore(ten) as s:
        events = s.read()
    statements = ["UPDATE events SET seq = 9 WHERE position = 2"]
    prev = events[0].hash
    for e in events[1:]:
        seq = 9 if e.position == 2 else e.seq
        h = event_hash(
            position=e.position,
            stream=e.stream,
            seq=seq,
            kind=e.kind,
            type=e.type,
            payload_json=e.payload_json,
            time=e.time,
            prev_hash=prev,
        )
        statements.append(
            f"UPDATE events SET prev_hash = '{prev}', hash = '{h}' WHERE position = {e.position}"
        )
        prev = h
    s = tampered(ten, *statements)
    v = s.verify()
    assert (v.position, v.reason) == (2, "seq 9 in stream `b`, expected 1")
    s.close()


def test_a_truncated_tail_is_found_against_an_anchor(ten: Path) -> None:
    with SQLiteStore(ten) as s:
        anchor = s.head()
    s = tampered(ten, "DELETE FROM events WHERE position >= 9")
    assert s.verify().ok  # a shorter chain is still a chain …
    v = s.verify(anchor)  # … which only an anchor kept elsewhere can tell
    assert (v.ok, v.position, v.reason) == (
        False,
        10,
        "the log ends at position 8, before the checkpoint at position 10: events were removed",
    )
    s.close()


def test_a_reopened_store_continues_the_chain(ten: Path) -> None:
    with SQLiteStore(ten) as s:
        e = s.append(note("a"))
        assert (e.position, e.seq) == (11, 6)
        assert s.verify().ok


def test_store_settings(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="FULL or NORMAL"):
        SQLiteStore(tmp_path / "e.db", synchronous="OFF")
    s = SQLiteStore(tmp_path / "e.db")
    s.close()
    with pytest.raises(StoreError, match="closed"):
        s.read()
    raw = sqlite3.connect(tmp_path / "e.db")
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    raw.close()


# ---------------------------------------------------------------------------------------------
# Crash safety and concurrent writers

CHILD = textwrap.dedent(
    """
    import sys
    from harnessc.runtime.log.events import NewEvent
    from harnessc.runtime.log.store import SQLiteStore

    store = SQLiteStore(sys.argv[1])
    name = sys.argv[2]
    count = int(sys.argv[3])
    i = 0
    while count < 0 or i < count:
        i += 1
        if i % 3 == 0:
            batch = [NewEvent(f"{name}-{i % 4}", "Progress", "tick", {"i": i, "j": j})
                     for j in range(5)]
            position = store.append_many(batch)[-1].position
        else:
            position = store.append(NewEvent("shared", "Progress", "tick", {"i": i})).position
        print(position, flush=True)
    """
)


def spawn(path: Path, name: str, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), name, str(count)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.2])
def test_a_killed_writer_loses_nothing_it_reported(tmp_path: Path, delay: float) -> None:
    path = tmp_path / "e.db"
    SQLiteStore(path).close()  # created before the child starts, so only appends race the kill
    child = spawn(path, "child", -1)
    assert child.stdout is not None
    first = child.stdout.readline()  # the child is up and appending
    assert first.strip().isdigit(), child.stderr.read() if child.stderr else ""
    time.sleep(delay)
    child.send_signal(signal.SIGKILL)
    rest, _ = child.communicate(timeout=10)
    assert child.returncode == -signal.SIGKILL
    # only whole lines: the child printed them after `append` returned
    reported = [int(line) for line in (first + rest).splitlines(keepends=True) if line[-1] == "\n"]
    with SQLiteStore(path) as s:
        v = s.verify()
        assert v.ok, v
        positions = {e.position for e in s.read()}
        assert set(reported) <= positions
        assert s.head()[0] >= max(reported)
        # a batch is all or nothing, even when the kill lands inside it
        batches: dict[int, set[int]] = {}
        for e in s.read():
            if e.stream != "shared":
                batches.setdefault(e.payload["i"], set()).add(e.payload["j"])
        assert all(js == set(range(5)) for js in batches.values())


def test_processes_appending_to_one_file_keep_one_chain(tmp_path: Path) -> None:
    path = tmp_path / "e.db"  # the children race to create it, too
    children = [spawn(path, f"p{n}", 15) for n in range(3)]
    outputs = [c.communicate(timeout=30) for c in children]
    assert [c.returncode for c in children] == [0, 0, 0], [err for _, err in outputs]
    with SQLiteStore(path) as s:
        assert s.verify().ok
        events = s.read()
    # each child: 10 single appends and 5 batches of 5
    assert len(events) == 3 * (10 + 5 * 5)
    shared = [e.seq for e in events if e.stream == "shared"]
    assert shared == list(range(1, 31))
    reported = sorted(int(line) for out, _ in outputs for line in out.split())
    assert len(set(reported)) == len(reported) == 45  # no two commits share a position


def test_two_stores_on_one_file_continue_each_others_streams(tmp_path: Path) -> None:
    # a store numbers its own streams from what it committed last: only while nobody else
    # appended since
    a, b = SQLiteStore(tmp_path / "e.db"), SQLiteStore(tmp_path / "e.db")
    a.append(note("s", 0))
    a.append(note("s", 1))
    b.append(note("s", 2))
    assert a.append(note("s", 3)).seq == 4
    with pytest.raises(ConcurrencyError):
        a.append(note("s", 4), expected_seq=3)  # refused, and nothing written
    b.append_many([note("s", 5), note("t", 6)])
    assert [e.seq for e in a.append_many([note("s", 7), note("t", 8)])] == [6, 2]
    assert a.append(note("s", 9), expected_seq=6).seq == 7
    assert [e.seq for e in b.read("s")] == list(range(1, 8))
    assert b.verify().ok
    a.close()
    b.close()


def test_threads_sharing_one_store_keep_one_chain(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "e.db")

    def work(n: int) -> None:
        for i in range(25):
            s.append(note(f"t{n}", i))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert s.verify().ok
    assert s.head()[0] == 100
    s.close()


# ---------------------------------------------------------------------------------------------
# Redaction

SECRETS = """\
harness demo { version "1.0.0" }

tool vault.put {
  summary "Store a credential."
  effects write
  input {
    name: string
    token: string secret
    owner: { email: string, password: string secret }
    keys: list<{ id: string, value: string secret }>
    extra: map<{ pin: string secret }>?
    notes: list<string>? secret
  }
  output { receipt: string, echo: string secret }
}
"""


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Tool:
    path = tmp_path_factory.mktemp("spec") / "main.harness"
    path.write_text(SECRETS, encoding="utf-8")
    result = check([path])
    assert result.ok and result.model is not None
    return result.model.tools["vault.put"]


ARGS = {
    "name": "ci",
    "token": "tok-123",
    "owner": {"email": "a@b.c", "password": "pw"},
    "keys": [{"id": "k1", "value": "v1"}, {"id": "k2", "value": "v2"}],
    "extra": {"x": {"pin": "0000"}},
    "notes": ["n1"],
}


def test_secret_values_are_redacted_at_every_depth(vault: Tool) -> None:
    assert redact_args(vault, ARGS) == {
        "name": "ci",
        "token": REDACTED,
        "owner": {"email": "a@b.c", "password": REDACTED},
        "keys": [{"id": "k1", "value": REDACTED}, {"id": "k2", "value": REDACTED}],
        "extra": {"x": {"pin": REDACTED}},
        "notes": REDACTED,
    }
    assert ARGS["token"] == "tok-123"  # the caller's arguments are not touched
    assert redact(vault.input, {"name": "ci"}) == {"name": "ci"}  # absent stays absent


def test_no_secret_reaches_the_log(vault: Tool, tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "e.db") as s:
        a = Action.request(s, "s-1", vault, "call-1", ARGS)
        for state in ("VALIDATED", "AUTHORIZED", "RUNNING"):
            a.transition(state)
        a.transition("SUCCEEDED", result={"receipt": "r-1", "echo": "tok-123"})
        text = "".join(e.payload_json for e in s.read())
        requested = s.read()[0].payload
    for secret in ("tok-123", "pw", "v1", "v2", "0000", "n1"):
        assert secret not in text
    assert "r-1" in text
    # the input hash is over the real arguments: a grant still binds the exact call
    from harnessc.runtime.model.canonical import input_hash

    assert requested["input_hash"] == input_hash("vault.put", 1, ARGS)


# ---------------------------------------------------------------------------------------------
# Projections


def fill(store: EventStore, vault: Tool) -> None:
    store.append(session_started("s-1", agent="planner"))
    a = Action.request(store, "s-1", vault, "call-1", ARGS)
    a.transition("VALIDATED")
    store.append(
        decision(
            "s-1",
            decision_id="d-1",
            policy_version="f" * 64,
            tool_id="vault.put",
            tool_call_id="call-1",
            input_hash="a" * 64,
            effect="ask",
        )
    )
    a.transition("WAITING_APPROVAL", approval_id="ap-1")
    store.append(
        approval_requested(
            "s-1",
            approval_id="ap-1",
            tool_id="vault.put",
            tool_call_id="call-1",
            input_hash="a" * 64,
            approvers=[{"kind": "role", "value": "owner"}],
            decision_id="d-1",
        )
    )
    store.append(approval_resolved("s-1", approval_id="ap-1", outcome="approved", by="u-7"))
    store.append(
        grant_issued(
            "s-1",
            grant_id="g-1",
            scope="once",
            tool_id="vault.put",
            tool_call_id="call-1",
            input_hash="a" * 64,
            expires_at=T0 + timedelta(minutes=30),
            approval_id="ap-1",
        )
    )
    store.append(
        grant_issued(
            "s-1",
            grant_id="g-2",
            scope="task",
            tool_id="vault.put",
            task_id="t-1",
            expires_at=T0 + timedelta(hours=1),
        )
    )
    a.transition("AUTHORIZED")
    store.append(grant_used("s-1", grant_id="g-1", tool_call_id="call-1"))
    store.append(grant_used("s-1", grant_id="g-2", tool_call_id="call-1"))
    a.transition("RUNNING")
    b = Action.request(store, "s-2", vault, "call-2", ARGS)
    b.cancel("user stopped the task")
    store.append(grant_revoked("s-1", grant_id="g-2"))
    store.append(session_ended("s-1", outcome="completed"))


def test_projections_fold_the_log(vault: Tool) -> None:
    store = MemoryStore(clock=FakeClock())
    fill(store, vault)
    views = Projections.rebuild(store.read())
    call = views.calls["call-1"]
    assert (call.state, call.decision_id, call.policy_version, call.effect) == (
        "RUNNING",
        "d-1",
        "f" * 64,
        "ask",
    )
    assert [(f, t) for f, t, _ in call.history] == [
        (None, "REQUESTED"),
        ("REQUESTED", "VALIDATED"),
        ("VALIDATED", "WAITING_APPROVAL"),
        ("WAITING_APPROVAL", "AUTHORIZED"),
        ("AUTHORIZED", "RUNNING"),
    ]
    assert views.calls["call-2"].state == "CANCELLED"
    assert (views.approvals["ap-1"].status, views.approvals["ap-1"].by) == ("approved", "u-7")
    assert views.grants["g-1"].status == "used"  # a once grant is spent by its call
    assert views.grants["g-2"].status == "revoked"
    assert not views.grants["g-1"].active_at(T0 + timedelta(minutes=10))
    s1 = views.sessions["s-1"]
    assert (s1.agent, s1.status, s1.outcome) == ("planner", "ended", "completed")
    assert s1.started_at is not None and s1.ended_at is not None and s1.started_at < s1.ended_at
    assert views.sessions["s-2"].status == "open"
    assert views.position == store.head()[0]


def test_a_task_grant_expires(vault: Tool) -> None:
    store = MemoryStore()
    store.append(
        grant_issued("s", grant_id="g", scope="task", tool_id="t", task_id="x", expires_at=T0)
    )
    grant = Projections.rebuild(store.read()).grants["g"]
    assert grant.expires_at == "2026-05-09T12:00:00.000000Z"
    assert grant.active_at(T0 - timedelta(seconds=1))
    assert not grant.active_at(T0)
    with pytest.raises(EventError, match="binds a tool_call_id and an input_hash"):
        grant_issued("s", grant_id="g", scope="once", tool_id="t", expires_at=T0)


def test_catching_up_equals_rebuilding(vault: Tool, tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "e.db", clock=FakeClock()) as s:
        views = Projections()
        s.append(session_started("s-0", agent="x"))
        assert views.catch_up(s, batch=2) == 1
        fill(s, vault)
        assert views.catch_up(s, batch=2) == s.head()[0] - 1
        assert views.catch_up(s) == 0
        assert views == Projections.rebuild(s.read())


@pytest.mark.parametrize("module", ["log.events", "log.store", "log.projections", "log.integrity"])
def test_module_examples_run(module: str) -> None:
    assert doctest.testmod(importlib.import_module(f"harnessc.runtime.{module}")).failed == 0
