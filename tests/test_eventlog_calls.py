"""What a governed call writes: its events ride one commit before the executor starts and one
after it, deferred events are committed before anything appended after them, concurrent
appends share commits (group commit), and a process killed inside the executor leaves the
decision and the RUNNING transition in the log."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harnessc.compiler.pipeline import check
from harnessc.runtime import Harness, PendingCall, SQLiteStore
from harnessc.runtime.log.events import (
    NewEvent,
    PayloadTemplate,
    format_time,
    hole,
    payload_text,
)
from harnessc.runtime.log.store import Batch, ConcurrencyError, GroupCommit, MemoryStore

from .postgres import ADMIN_URL, SKIP_REASON, fresh_database

SPEC = """\
harness calls { version "1.0.0" }
tool change.create {
  summary "Open a change request."
  effects write reversible
  risk medium
  input { service: string, patch: string }
}
tool change.drop {
  summary "Drop a change."
  effects write
  risk medium
  input { service: string }
}
tool vault.put {
  summary "Store a credential."
  effects write
  risk medium
  input { name: string, value: string secret }
}
surface tools { expose change.*, vault.* }
policy calls {
  default deny
  allow change.create, vault.put
}
agent runner { surface tools; policy calls }
"""
ACTOR = {"user": "u-1", "role": "dev"}


@pytest.fixture(scope="module")
def spec_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("spec") / "calls.harness"
    path.write_text(SPEC, encoding="utf-8")
    return path


def model_of(path: Path) -> Any:
    result = check([path])
    assert result.ok and result.model is not None
    return result.model


@pytest.fixture(scope="module")
def spec(spec_file: Path) -> Any:
    return model_of(spec_file)


def commits(store: SQLiteStore) -> list[str]:
    """Every COMMIT the store's connection runs from now on."""
    seen: list[str] = []
    conn = store._connection()
    conn.set_trace_callback(lambda sql: seen.append(sql) if sql == "COMMIT" else None)
    return seen


# one row of an INSERT as traced: position, stream, seq, kind, type, payload, time, prev_hash,
# hash and mac; a text is quoted, its quotes doubled (the type is the fifth value)
_TEXT = r"'(?:[^']|'')*'"
INSERTED_ROW = re.compile(
    rf"\(\d+, {_TEXT}, \d+, {_TEXT}, '([^']+)', {_TEXT}, {_TEXT}, {_TEXT}, {_TEXT}, "
    rf"(?:NULL|{_TEXT})\)(?:, |$)"
)


def transactions(statements: list[str]) -> list[list[str]]:
    """The types of the events each committed transaction among `statements` (traced SQL)
    inserted, in order."""
    out: list[list[str]] = []
    current: list[str] = []
    for sql in statements:
        if sql == "COMMIT":
            out.append(current)
            current = []
        elif sql.startswith("INSERT INTO events ("):
            values = sql.index(") VALUES (") + len(") VALUES ")
            while values < len(sql):  # a commit's rows may be one statement
                m = INSERTED_ROW.match(sql, values)
                assert m is not None, sql[values:]
                current.append(m.group(1))
                values = m.end()
    return out


def on_disk(path: Path) -> list[str]:
    """The event types another connection sees in the file."""
    conn = sqlite3.connect(path)
    try:
        return [r[0] for r in conn.execute("SELECT type FROM events ORDER BY position")]
    finally:
        conn.close()


def test_an_allowed_call_costs_one_commit_before_the_executor_and_one_after(
    spec: Any, tmp_path: Path
) -> None:
    path = tmp_path / "e.db"
    store = SQLiteStore(path)
    h = Harness(spec, store=store)
    seen_at_run: list[list[str]] = []
    h.bind("change.create", lambda args: seen_at_run.append(on_disk(path)) or {})
    s = h.session("runner", actor=ACTOR, task="t-1")
    counted = commits(store)
    before = len(on_disk(path))
    call = s.normalize("change.create", "c-1", {"service": "api", "patch": "p"})
    assert isinstance(call, PendingCall)
    assert s.decide(call).effect == "allow"
    # nothing acted on the call yet: its events wait for the commit that runs it
    assert len(on_disk(path)) == before and counted == []
    result = s.invoke(call)
    assert result.ran and result.ok
    assert len(counted) == 2  # [REQUESTED, VALIDATED, decision, AUTHORIZED, RUNNING], result
    # the executor ran after the decision and RUNNING were on disk
    assert (
        seen_at_run[0][before:]
        == ["action.transition"] * 2 + ["decision"] + ["action.transition"] * 2
    )
    states = [e.payload.get("to") for e in store.read(s.id) if e.type == "action.transition"]
    assert states == ["REQUESTED", "VALIDATED", "AUTHORIZED", "RUNNING", "SUCCEEDED"]
    assert store.verify().ok
    store.close()


# the same policy, and a rule that reads the session's history: every decision brings the
# session's ledger up to date from the log first
COUNTING = SPEC.replace(
    "  allow change.create, vault.put\n",
    "  allow change.create, vault.put\n"
    '  ask change.create when count(change.create within 1h) >= 3 { approver role "ops" }\n',
)


@pytest.fixture(scope="module")
def counting(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("counting") / "calls.harness"
    path.write_text(COUNTING, encoding="utf-8")
    return model_of(path)


def test_a_call_whose_policy_reads_the_session_still_commits_twice(
    counting: Any, tmp_path: Path
) -> None:
    path = tmp_path / "e.db"
    store = SQLiteStore(path)
    h = Harness(counting, store=store)
    h.bind("change.create", lambda args: {})
    s = h.session("runner", actor=ACTOR, task="t-1")
    counted = commits(store)
    for i in range(2):
        call = s.normalize("change.create", f"c-{i}", {"service": "api", "patch": "p"})
        assert isinstance(call, PendingCall)
        assert s.decide(call).effect == "allow"  # the ledger read left the call's events held
        assert s.invoke(call).ok
        assert len(counted) == 2 * (i + 1)
    # the two calls that ran are counted, and the third itself: it asks
    third = s.normalize("change.create", "c-2", {"service": "api", "patch": "p"})
    assert isinstance(third, PendingCall)
    assert s.decide(third).effect == "ask"
    assert store.verify().ok
    store.close()


def test_a_held_authorisation_is_committed_before_the_session_is_read(
    counting: Any, tmp_path: Path
) -> None:
    """A call decided and not yet run is counted by the next decision: what the ledger takes
    from held events (an AUTHORIZED) is committed and read first."""
    store = SQLiteStore(tmp_path / "e.db")
    h = Harness(counting, store=store)
    h.bind("change.create", lambda args: {})
    s = h.session("runner", actor=ACTOR, task="t-1")
    calls = [
        s.normalize("change.create", f"c-{i}", {"service": "api", "patch": "p"}) for i in range(3)
    ]
    assert all(isinstance(c, PendingCall) for c in calls)
    assert [s.decide(c).effect for c in calls] == ["allow", "allow", "ask"]
    other = SQLiteStore(tmp_path / "e.db")  # as another process sees the file
    authorised = [
        e.payload["tool_call_id"] for e in other.read(s.id) if e.payload.get("to") == "AUTHORIZED"
    ]
    assert authorised == ["c-0", "c-1"]
    other.close()
    store.close()


ONCE = SPEC.replace(
    "  allow change.create, vault.put\n",
    "  allow change.create, vault.put\n"
    '  ask change.drop { approver role "ops"; grant once ttl 10m }\n',
)


def test_an_approved_once_call_commits_once_asked_twice_approved_and_twice_run(
    tmp_path: Path,
) -> None:
    spec_path = tmp_path / "once.harness"
    spec_path.write_text(ONCE, encoding="utf-8")
    path = tmp_path / "e.db"
    store = SQLiteStore(path)
    h = Harness(model_of(spec_path), store=store)
    seen_at_run: list[list[str]] = []
    h.bind("change.drop", lambda args: seen_at_run.append(on_disk(path)) or {})
    s = h.session("runner", actor=ACTOR, task="t-1")
    call = s.normalize("change.drop", "c-1", {"service": "api"})
    assert isinstance(call, PendingCall)
    counted = commits(store)
    request = s.request_approval(call)
    # the decision and WAITING_APPROVAL ride the request's commit
    assert len(counted) == 1 and on_disk(path)[-2:] == ["action.transition", "approval.requested"]
    statements: list[str] = []
    store._connection().set_trace_callback(statements.append)
    outcome = h.approve(request.request_id, by={"user": "u-2", "role": "ops"})
    assert outcome.grant is not None
    # the decision judged again, the answer and the grant it issues are one commit: no reader
    # sees the request approved without its grant; the decision the grant makes and
    # AUTHORIZED are the second, before `approve` returns
    assert transactions(statements) == [
        ["decision", "approval.answered", "approval.resolved", "grant.issued"],
        ["decision", "action.transition"],
    ]
    counted = commits(store)  # from here on
    result = s.invoke(call)
    assert result.ran and result.ok and len(counted) == 2
    # the grant was spent and RUNNING on disk, in one commit, before the executor ran
    assert seen_at_run[0][-3:] == ["grant.used", "grant.spent", "action.transition"]
    states = [e.payload.get("to") for e in store.read(s.id) if e.type == "action.transition"]
    assert states == [
        "REQUESTED",
        "VALIDATED",
        "WAITING_APPROVAL",
        "AUTHORIZED",
        "RUNNING",
        "SUCCEEDED",
    ]
    assert s.invoke(call) is result  # invoked again: the recorded result, nothing committed
    assert len(counted) == 2
    assert store.verify().ok
    store.close()


def test_an_edit_commits_the_answer_the_edit_and_the_grant_together(tmp_path: Path) -> None:
    spec_path = tmp_path / "once.harness"
    spec_path.write_text(ONCE, encoding="utf-8")
    store = SQLiteStore(tmp_path / "e.db")
    h = Harness(model_of(spec_path), store=store)
    h.bind("change.drop", lambda args: {"dropped": args["service"]})
    s = h.session("runner", actor=ACTOR, task="t-1")
    call = s.normalize("change.drop", "c-1", {"service": "api"})
    assert isinstance(call, PendingCall)
    request = s.request_approval(call)
    statements: list[str] = []
    store._connection().set_trace_callback(statements.append)
    outcome = h.approve_with_edits(
        request.request_id, {"service": "web"}, by={"user": "u-2", "role": "ops"}
    )
    assert outcome.grant is not None and outcome.call is not None
    # an agent that sees the request answered sees the edit and the edited call's grant too
    answer = next(t for t in transactions(statements) if "approval.answered" in t)
    assert answer[-4:] == [
        "approval.answered",
        "approval.resolved",
        "call.superseded",
        "grant.issued",
    ]
    assert s.invoke(outcome.call).data == {"dropped": "web"}
    assert s.invoke(call).error_category == "superseded"
    assert store.verify().ok
    store.close()


def test_a_denied_call_is_committed_at_once(spec: Any, tmp_path: Path) -> None:
    path = tmp_path / "e.db"
    with SQLiteStore(path) as store:
        h = Harness(spec, store=store)
        s = h.session("runner", actor=ACTOR, task="t-1")
        call = s.normalize("change.drop", "c-1", {"service": "api"})
        assert isinstance(call, PendingCall)
        counted = commits(store)
        assert s.decide(call).effect == "deny"
        assert len(counted) == 1
        assert on_disk(path)[-2:] == ["decision", "action.transition"]


@pytest.fixture(params=["sqlite", "postgres"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Any]]:
    """Opens the same log again and again: a SQLite file, or a fresh PostgreSQL database. Every
    store it opened is kept until the test ends, then closed (a PostgreSQL connection dropped
    unclosed is a ResourceWarning, which the suite turns into an error)."""
    opened: list[Any] = []

    def keeping(make: Callable[[], Any]) -> Callable[[], Any]:
        def open_store() -> Any:
            store = make()
            opened.append(store)
            return store

        return open_store

    def close_all() -> None:
        for store in opened:
            # closed by the test already, or its connection is gone
            with contextlib.suppress(Exception):
                store.close()

    if request.param == "sqlite":
        try:
            yield keeping(lambda: SQLiteStore(tmp_path / "e.db"))
        finally:
            close_all()
        return
    if not ADMIN_URL:
        pytest.skip(SKIP_REASON)
    from harnessc.runtime.log.postgres import PostgresStore

    with fresh_database() as url:
        try:
            yield keeping(lambda: PostgresStore(url))
        finally:
            close_all()


def test_deferred_events_precede_later_appends_and_reads_see_them(
    opener: Callable[[], Any],
) -> None:
    store = opener()
    other = opener()  # another connection, as another process would have
    store.defer([NewEvent("s", "Text", "a"), NewEvent("s", "Text", "b")])
    assert other.read() == []  # not committed yet
    assert [e.type for e in store.read("s")] == ["a", "b"]  # a read commits them first
    store.defer([NewEvent("s", "Text", "c")])
    assert store.append(NewEvent("t", "Text", "d")).position == 4
    store.defer([NewEvent("s", "Text", "e")])
    store.close()  # closing commits what waits
    assert [(e.type, e.seq) for e in other.read()] == [
        ("a", 1),
        ("b", 2),
        ("c", 3),
        ("d", 1),
        ("e", 4),
    ]
    assert other.verify().ok
    other.close()


def test_group_commit_serves_waiting_appends_in_one_commit() -> None:
    """While one commit runs, the appends that arrive wait and are committed together."""
    release = threading.Event()
    entered = threading.Event()
    rounds: list[list[int]] = []

    def commit(batches: list[Batch]) -> None:
        rounds.append([len(b.events) for b in batches])
        if len(rounds) == 1:
            entered.set()
            release.wait(10)
        for b in batches:
            b.out = []

    group = GroupCommit(commit)
    first = threading.Thread(target=group.submit, args=(Batch([NewEvent("a", "Text", "x")]),))
    first.start()
    assert entered.wait(10)
    others = [
        threading.Thread(target=group.submit, args=(Batch([NewEvent("b", "Text", "x")] * k),))
        for k in (1, 2, 3)
    ]
    for t in others:
        t.start()
    while len(group._queue) < 3:  # all three queued behind the running commit
        threading.Event().wait(0.001)
    release.set()
    for t in [first, *others]:
        t.join(10)
    assert rounds[0] == [1]
    assert sorted(rounds[1]) == [1, 2, 3] and len(rounds) == 2


def test_a_failed_expectation_leaves_the_rest_of_its_group_committed(
    opener: Callable[[], Any],
) -> None:
    store = opener()
    store.append(NewEvent("claimed", "Text", "x"))
    release = threading.Event()
    entered = threading.Event()
    commit = store._group._commit

    def slow(batches: list[Batch]) -> None:
        if not entered.is_set():
            entered.set()
            release.wait(10)
        commit(batches)

    store._group._commit = slow
    errors: list[BaseException] = []

    def claim() -> None:
        try:
            store.append_many([NewEvent("claimed", "Text", "again")], expect={"claimed": 0})
        except ConcurrencyError as error:
            errors.append(error)

    first = threading.Thread(target=store.append, args=(NewEvent("a", "Text", "x"),))
    first.start()
    assert entered.wait(10)
    store.defer([NewEvent("d", "Text", "deferred")])
    racing = [
        threading.Thread(target=claim),
        threading.Thread(target=store.append, args=(NewEvent("b", "Text", "x"),)),
    ]
    for t in racing:
        t.start()
    while len(store._group._queue) < 3:
        threading.Event().wait(0.001)
    release.set()
    for t in [first, *racing]:
        t.join(10)
    assert len(errors) == 1 and errors[0].actual == 1
    assert sorted(e.stream for e in store.read()) == ["a", "b", "claimed", "d"]
    assert store.verify().ok
    store.close()


def test_concurrent_sessions_share_commits_and_keep_one_chain(spec: Any, tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "e.db")
    h = Harness(spec, store=store)
    h.bind("change.create", lambda args: {})
    sessions = [h.session("runner", actor=ACTOR, task="t-1") for _ in range(4)]
    counted = commits(store)

    def work(k: int) -> None:
        s = sessions[k]
        for i in range(25):
            call = s.normalize("change.create", f"c-{i}", {"service": "api", "patch": str(i)})
            assert isinstance(call, PendingCall)
            s.decide(call)
            assert s.invoke(call).ok

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(counted) <= 2 * 4 * 25  # never more than two commits a call
    for s in sessions:
        states = [e.payload["to"] for e in store.read(s.id) if e.type == "action.transition"]
        assert states == ["REQUESTED", "VALIDATED", "AUTHORIZED", "RUNNING", "SUCCEEDED"] * 25
    assert store.verify().ok
    store.close()


KILLED = textwrap.dedent(
    """
    import os, signal, sys
    from harnessc.compiler.pipeline import check
    from harnessc.runtime import Harness, SQLiteStore

    result = check([sys.argv[2]])
    h = Harness(result.model, store=SQLiteStore(sys.argv[1]))
    h.bind("change.create", lambda args: os.kill(os.getpid(), signal.SIGKILL))
    s = h.session("runner", actor={"user": "u-1", "role": "dev"}, task="t-1")
    call = s.normalize("change.create", "c-1", {"service": "api", "patch": "p"})
    print(s.decide(call).effect, flush=True)
    s.invoke(call)
    """
)


def test_a_process_killed_in_the_executor_leaves_its_decision_and_running(
    spec_file: Path, tmp_path: Path
) -> None:
    path = tmp_path / "e.db"
    done = subprocess.run(
        [sys.executable, "-c", KILLED, str(path), str(spec_file)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert done.stdout.strip() == "allow"
    with SQLiteStore(path) as store:
        assert store.verify().ok
        events = [e for e in store.read() if e.type in ("decision", "action.transition")]
        assert [e.payload.get("to", e.type) for e in events] == [
            "REQUESTED",
            "VALIDATED",
            "decision",
            "AUTHORIZED",
            "RUNNING",
        ]


def test_the_memory_store_appends_deferred_events_at_once() -> None:
    store = MemoryStore()
    store.defer([NewEvent("s", "Text", "a")])
    assert [e.type for e in store.read()] == ["a"]


def test_payload_text_writes_held_json_in_canonical_place() -> None:
    payload = {"z": [1.0, "é"], "args": hole("args"), "a": None}
    assert payload_text(payload, {"args": '{"k":"v"}'}) == '{"a":null,"args":{"k":"v"},"z":[1,"é"]}'
    template = PayloadTemplate({"b": hole("x"), "a": hole("y"), "c": True})
    assert template.fill({"x": "1", "y": '"t"'}) == '{"a":"t","b":1,"c":true}'


def test_a_recorded_secret_call_never_takes_the_held_arguments(spec: Any) -> None:
    h = Harness(spec, store=MemoryStore())
    s = h.session("runner", actor=ACTOR, task="t-1")
    call = s.normalize("vault.put", "c-1", {"name": "db", "value": "s3cr3t-value-1"})
    assert isinstance(call, PendingCall) and call.args_json is not None
    requested = next(e for e in h.store.read(s.id) if e.payload.get("to") == "REQUESTED")
    assert "s3cr3t-value-1" not in requested.payload_json
    assert requested.payload["args"] == {"name": "db", "value": "[REDACTED]"}
    plain = s.normalize("change.create", "c-2", {"service": "api", "patch": "p"})
    assert isinstance(plain, PendingCall)
    found = next(e for e in h.store.read(s.id) if e.payload.get("tool_call_id") == "c-2")
    assert found.payload["args"] == {"patch": "p", "service": "api"}


def test_format_time_writes_the_rfc3339_form() -> None:
    from datetime import UTC, datetime, timedelta, timezone

    moment = datetime(2026, 5, 9, 7, 35, 25, 12, tzinfo=UTC)
    assert format_time(moment) == "2026-05-09T07:35:25.000012Z"
    east = moment.astimezone(timezone(timedelta(hours=2)))
    assert format_time(east) == "2026-05-09T07:35:25.000012Z"


def test_deferred_events_are_committed_when_the_interpreter_exits(tmp_path: Path) -> None:
    path = tmp_path / "e.db"
    code = (
        "import sys\n"
        "from harnessc.runtime.log.events import NewEvent\n"
        "from harnessc.runtime.log.store import SQLiteStore\n"
        "store = SQLiteStore(sys.argv[1])\n"
        "store.defer([NewEvent('s', 'Text', 'left')])\n"
    )
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, timeout=60)
    assert on_disk(path) == ["left"]


def test_a_payload_text_that_is_not_utf8_is_refused_before_it_is_deferred(tmp_path: Path) -> None:
    from harnessc.runtime.model.canonical import CanonicalError

    with SQLiteStore(tmp_path / "e.db") as store:
        with pytest.raises(CanonicalError):
            store.defer([NewEvent("s", "Text", "bad", {}, '{"a":"\udc80"}')])
        store.append(NewEvent("s", "Text", "good"))
        assert [e.type for e in store.read()] == ["good"]


def test_every_payload_a_call_writes_from_templates_is_canonical(spec: Any) -> None:
    from harnessc.runtime.model.canonical import canonical_json, canonicalize_text

    h = Harness(spec, store=MemoryStore())
    h.bind("change.create", lambda args: {"id": "é\n\u2028", "n": [1, 2.5, None, True]})

    def failing(args: Any) -> Any:
        raise RuntimeError('failed: "é"\\ \U0001f600')

    h.bind("vault.put", failing)  # a failed result: its error and observation are text
    s = h.session("runner", actor={"user": "ü-1\t", "role": "dev"}, task="t-1")
    results = []
    for i, (tool, args) in enumerate(
        [
            ("change.create", {"service": 'a"pi', "patch": "p\u00e9"}),
            ("change.create", {"service": "api", "patch": "p"}),
            ("vault.put", {"name": "db", "value": "s3cr3t-value-2"}),
            ("change.drop", {"service": "api"}),
        ]
    ):
        call = s.normalize(tool, f"c-{i}\u00e9", args)
        assert isinstance(call, PendingCall)
        if s.decide(call).effect == "allow":
            results.append(s.invoke(call))
    events = h.store.read(s.id)
    assert len(events) > 15
    for e in events:
        assert canonicalize_text(e.payload_json) == e.payload_json, e.type
    # a result's transition holds the result as `to_dict` gives it, field by field
    ended = {e.payload["action_id"]: e.payload for e in events if "result" in e.payload}
    assert [r.status for r in results] == ["success", "success", "failure"]
    for r in results:
        assert ended[r.action_id]["result"] == json.loads(canonical_json(r.to_dict()))
    assert h.store.verify().ok
