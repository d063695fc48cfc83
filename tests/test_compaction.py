"""Compaction: the events before a position archived to a file, the live sessions' events carried
across the cut, the chain anchored at it. After the cut the log verifies alone and, given the
archive, as a whole; a changed archive fails; sessions resume and decide exactly as they would
have on the whole log; what is archived is said so, never a traceback."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from harnessc.runtime import Harness, PendingCall, SQLiteStore
from harnessc.runtime.log.chain import ConcurrencyError, find_cut
from harnessc.runtime.log.cut import CutError, compact, read_archive, verify_across
from harnessc.runtime.log.events import NewEvent
from harnessc.runtime.log.integrity import LogKey
from harnessc.runtime.log.memory import MemoryStore
from harnessc.runtime.model import Spec

from .test_approvals import Clock, compile_text

KEY = LogKey(b"a log key of thirty-two bytes at least")

# A payments desk: deletions counted over the session, payments summed over a day, and an IBAN
# paid only when the user gave it (provenance)
DESK = """
harness desk { version "1.0.0" }
tool files.delete {
  summary "Delete a file."
  effects write
  input { path: path, recursive: bool? }
}
tool payments.send {
  summary "Send a payment."
  effects external
  input { iban: string, amount: int }
}
tool accounts.lookup {
  summary "Look an account up."
  effects read
  input { name: string }
  output { iban: string }
}
surface all_tools { expose files.delete, payments.send, accounts.lookup }
policy desk {
  default allow
  wipe: deny files.delete when count(files.delete) > 3 { reason "too many deletions" }
  daily: deny payments.send when sum(args.amount of payments.send within 24h) > 300 {
    reason "over the daily limit"
  }
  given: deny payments.send when not args.iban from user { reason "an IBAN the user gave" }
}
agent bot { persona "A bot." surface all_tools policy desk }
"""
IBAN = "DE89370400440532013000"
OTHER = "FR7630006000011234567890189"
ACTOR = {"user": "u-1", "role": "agent"}


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Spec:
    return compile_text(tmp_path_factory.mktemp("desk"), DESK)


def bind(h: Harness) -> None:
    h.bind("files.delete", lambda args: {})
    h.bind("payments.send", lambda args: {})
    h.bind("accounts.lookup", lambda args: {"iban": OTHER})


Step = tuple[str, str, dict[str, Any]]
# per session: before the cut, then after it (a `said` step is a user message)
BEFORE: list[Step] = [
    ("a", "said", {"text": f"pay {IBAN} please"}),
    ("a", "files.delete", {"path": "/w/1"}),
    ("a", "files.delete", {"path": "/w/2"}),
    ("a", "payments.send", {"iban": IBAN, "amount": 200}),
    ("a", "accounts.lookup", {"name": "acme"}),
    ("b", "files.delete", {"path": "/w/9"}),
    ("c", "files.delete", {"path": "/w/x"}),
]
AFTER: list[Step] = [
    ("a", "files.delete", {"path": "/w/3"}),
    ("a", "files.delete", {"path": "/w/4"}),  # the fourth: denied by the count before the cut
    ("a", "payments.send", {"iban": IBAN, "amount": 150}),  # 350 in a day: denied
    ("a", "payments.send", {"iban": OTHER, "amount": 10}),  # from the lookup, not the user
    ("a", "payments.send", {"iban": IBAN, "amount": 90}),  # 290: allowed
    ("b", "files.delete", {"path": "/w/10"}),
]


def run(h: Harness, sessions: dict[str, str], steps: list[Step], clock: Clock) -> list[str]:
    """Each call normalized, decided and (when allowed) run; the decisions as `effect:rule`."""
    out = []
    for n, (name, tool, args) in enumerate(steps):
        clock.now += timedelta(minutes=5)
        s = h.sessions.get(sessions[name]) or h.resume(sessions[name])
        if tool == "said":
            s.user_said(args["text"])
            continue
        call = s.normalize(tool, f"{name}-{tool}-{n}-{len(out)}", args)
        assert isinstance(call, PendingCall), call
        decision = s.decide(call)
        out.append(f"{decision.effect}:{decision.rule}")
        if decision.effect == "allow":
            assert s.invoke(call).ran
    return out


def open_sessions(h: Harness) -> dict[str, str]:
    return {name: h.session("bot", actor=ACTOR, task=f"t-{name}").id for name in "abc"}


def scenario(
    desk: Spec, store: Callable[[], Any], tmp_path: Path, *, cut: bool
) -> tuple[list[str], Any]:
    """The steps on one log; with `cut`, the harness closed after BEFORE, the log compacted
    at its head, and a new harness on it takes up the sessions."""
    clock = Clock()
    h = Harness(desk, store=store(), clock=clock)
    bind(h)
    sessions = open_sessions(h)
    decided = run(h, sessions, BEFORE, clock)
    h.sessions[sessions["c"]].end()
    if cut:
        h.store.close()
        log = store()
        compact(log, before=log.head()[0], archive=tmp_path / "archive.jsonl")
        log.close()
        h = Harness(desk, store=store(), clock=clock)
        bind(h)
    decided += run(h, sessions, AFTER, clock)
    return decided, h


@pytest.fixture(params=["sqlite", "postgresql"])
def log_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "log.db")
        return
    pytest.importorskip("psycopg", reason="PostgreSQL needs psycopg")
    from .postgres import ADMIN_URL, SKIP_REASON, fresh_database

    if not ADMIN_URL:
        pytest.skip(SKIP_REASON)
    with fresh_database() as url:
        yield url


def opener(url: str, key: LogKey | None = None) -> Callable[[], Any]:
    from harnessc.runtime.log.open import open_store

    return lambda: open_store(url, key=key)


def test_sessions_decide_after_the_cut_exactly_as_on_the_whole_log(
    desk: Spec, tmp_path: Path, log_url: str
) -> None:
    whole, _ = scenario(desk, MemoryStore, tmp_path / "whole", cut=False)
    (tmp_path / "cut").mkdir()
    after_cut, h = scenario(desk, opener(log_url, KEY), tmp_path / "cut", cut=True)
    assert after_cut == whole
    # the scenario reaches each term: the count, the day's sum, the IBAN's provenance
    assert whole[-6:] == [
        "allow:None",
        "deny:desk.wipe",
        "deny:desk.daily",
        "deny:desk.given",
        "allow:None",
        "allow:None",
    ]
    assert h.verify().ok
    archive = read_archive(tmp_path / "cut" / "archive.jsonl")
    # the ended session's events went to the archive; the open ones stayed
    assert {e.stream for e in archive} >= {"harness"}
    ended = [sid for sid, v in h.projections.sessions.items() if v.status == "ended"]
    assert not ended
    assert verify_across(h.store.read(), [archive], key=KEY).ok
    h.store.close()


def test_a_log_compacted_verifies_alone_and_with_its_archive_and_a_changed_archive_fails(
    tmp_path: Path, log_url: str
) -> None:
    with opener(log_url, KEY)() as store:
        store.append_many([NewEvent("ab"[i % 2], "Text", "note", {"i": i}) for i in range(20)])
        head = store.checkpoint()
        done = compact(store, before=12, archive=tmp_path / "a.jsonl")
        assert (done.archived, done.carried) == (12, 0)
        store.append(NewEvent("a", "Text", "note", {"i": 20}))
        assert [e.position for e in store.read()][:2] == [13, 14]
        assert store.verify().ok
        assert store.verify(anchor=head).ok  # a checkpoint after the cut still holds
        archive = read_archive(tmp_path / "a.jsonl")
        assert [e.position for e in archive] == list(range(1, 13))
        assert verify_across(store.read(), [archive], key=KEY).ok
        # a second cut: both archives together give the whole chain
        compact(store, before=18, archive=tmp_path / "b.jsonl")
        second = read_archive(tmp_path / "b.jsonl")
        assert store.verify().ok
        assert verify_across(store.read(), [archive, second], key=KEY).ok
        missing = verify_across(store.read(), [second], key=KEY)
        assert not missing.ok and "missing" in str(missing.reason)

    text = (tmp_path / "a.jsonl").read_text(encoding="utf-8").splitlines()
    changed = json.loads(text[5])
    changed["payload"] = changed["payload"].replace('"i":4', '"i":40')
    text[5] = json.dumps(changed)
    (tmp_path / "tampered.jsonl").write_text("\n".join(text) + "\n", encoding="utf-8")
    with opener(log_url, KEY)() as store:
        found = verify_across(store.read(), [read_archive(tmp_path / "tampered.jsonl"), second])
        assert not found.ok and found.position == 5


def test_without_the_key_a_forged_cut_fails_and_a_removed_carried_event_is_found(
    desk: Spec, tmp_path: Path
) -> None:
    clock = Clock()
    store = SQLiteStore(tmp_path / "log.db", key=KEY)
    h = Harness(desk, store=store, clock=clock)
    bind(h)
    sessions = open_sessions(h)
    run(h, sessions, BEFORE, clock)
    h.store.flush()
    done = compact(store, before=store.head()[0] - 1, archive=tmp_path / "a.jsonl")
    assert done.carried > 0 and store.verify().ok
    cut = find_cut(store)
    assert cut is not None and cut.tag is not None
    import sqlite3

    conn = sqlite3.connect(tmp_path / "log.db")
    conn.execute("DROP TRIGGER events_no_delete")
    first = conn.execute("SELECT min(position) FROM events").fetchone()[0]
    conn.execute("DELETE FROM events WHERE position = ?", (first,))
    conn.commit()
    conn.close()
    found = SQLiteStore(tmp_path / "log.db", key=KEY, readonly=True).verify()
    assert not found.ok and "carried" in str(found.reason)


def test_compaction_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    store = MemoryStore()
    store.append_many([NewEvent("s", "Text", "note", {"i": i}) for i in range(5)])
    with pytest.raises(CutError, match="not in the log"):
        compact(store, before=9, archive=tmp_path / "a.jsonl")
    compact(store, before=2, archive=tmp_path / "a.jsonl")
    with pytest.raises(CutError, match="exists already"):
        compact(store, before=4, archive=tmp_path / "a.jsonl")
    with pytest.raises(CutError, match="not after the last cut"):
        compact(store, before=2, archive=tmp_path / "b.jsonl")
    (tmp_path / "junk.jsonl").write_text("{}\n", encoding="utf-8")
    with pytest.raises(CutError, match="not a harnessc log archive"):
        read_archive(tmp_path / "junk.jsonl")


def test_the_command_line_compacts_verifies_across_the_cut_and_finds_a_changed_archive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from harnessc.compiler.cli import main

    monkeypatch.delenv("HARNESSC_LOG_KEY", raising=False)
    monkeypatch.delenv("HARNESSC_LOG_KEY_FILE", raising=False)
    key_file = tmp_path / "key"
    key_file.write_bytes(b"a log key of thirty-two bytes at least")
    log = str(tmp_path / "log.db")
    with SQLiteStore(log, key=KEY) as store:
        store.append_many([NewEvent("ab"[i % 2], "Text", "note", {"i": i}) for i in range(30)])
    keyed = ["--log", log, "--key-file", str(key_file)]
    archive = str(tmp_path / "a.jsonl")
    assert main(["log", "compact", *keyed, "--before", "20", "--to", archive]) == 0
    assert "archived 20 events at or before position 20" in capsys.readouterr().out
    assert main(["log", "compact", *keyed, "--before", "25", "--to", archive]) == 2
    assert "exists already" in capsys.readouterr().err
    assert main(["log", "verify", *keyed, "--format", "json"]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert alone["ok"] and alone["authenticated"]
    assert main(["log", "verify", *keyed, "--archive", archive, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["checked"] == 31

    lines = Path(archive).read_text(encoding="utf-8").splitlines()
    event = json.loads(lines[3])
    event["payload"] = event["payload"].replace('"i":2', '"i":3')
    lines[3] = json.dumps(event)
    Path(archive).write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["log", "verify", *keyed, "--archive", archive]) == 1
    assert "not ok at position 3" in capsys.readouterr().out
    assert main(["log", "compact", *keyed, "--before", "x", "--to", archive + "2"]) == 2
    assert "a whole number" in capsys.readouterr().err


def test_a_scheduled_compaction_keeps_a_retention(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--older-than 30d` archives what was recorded longer ago than that, once: run again,
    it has nothing to do; a shorter retention takes the next events."""
    from datetime import UTC, datetime, timedelta

    from harnessc.compiler.cli import main

    monkeypatch.delenv("HARNESSC_LOG_KEY", raising=False)
    monkeypatch.delenv("HARNESSC_LOG_KEY_FILE", raising=False)
    now = datetime.now(UTC)
    moments = iter([now - timedelta(days=100)] * 10 + [now - timedelta(days=10)] * 10 + [now] * 5)
    log = str(tmp_path / "log.db")
    with SQLiteStore(log, clock=lambda: next(moments)) as store:
        for i in range(25):
            store.append(NewEvent("ab"[i % 2], "Text", "note", {"i": i}))
    archive = str(tmp_path / "a.jsonl")
    assert main(["log", "compact", "--log", log, "--older-than", "30d", "--to", archive]) == 0
    assert "archived 10 events at or before position 10" in capsys.readouterr().out
    again = str(tmp_path / "b.jsonl")
    assert main(["log", "compact", "--log", log, "--older-than", "30d", "--to", again]) == 0
    assert "nothing to archive" in capsys.readouterr().out and not Path(again).exists()
    assert main(["log", "compact", "--log", log, "--older-than", "1d", "--to", again]) == 0
    assert "archived 10 events at or before position 20" in capsys.readouterr().out
    assert main(["log", "verify", "--log", log, "--archive", archive, "--archive", again]) == 0
    capsys.readouterr()
    assert main(["log", "compact", "--log", log, "--older-than", "a year", "--to", again]) == 2
    assert "takes a duration" in capsys.readouterr().err


def test_readers_say_what_is_archived_and_read_across_the_cut_given_the_archive(
    desk: Spec, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from harnessc.compiler.cli import main
    from harnessc.runtime import HarnessError

    monkeypatch.delenv("HARNESSC_LOG_KEY", raising=False)
    monkeypatch.delenv("HARNESSC_LOG_KEY_FILE", raising=False)
    log = str(tmp_path / "log.db")
    (tmp_path / "cut").mkdir()
    _, h = scenario(desk, opener(log), tmp_path / "cut", cut=True)
    archive = str(tmp_path / "cut" / "archive.jsonl")
    ended = next(e.stream for e in read_archive(archive) if e.type == "session.ended")
    with pytest.raises(HarnessError) as refused:
        h.resume(ended)
    assert refused.value.code == "archived" and "archive.jsonl" in refused.value.message
    h.store.close()
    spec = tmp_path / "desk.harness"
    spec.write_text(DESK, encoding="utf-8")
    decisions = [e.payload["decision_id"] for e in read_archive(archive) if e.type == "decision"]
    gone = next(
        e.payload["decision_id"]
        for e in read_archive(archive)
        if e.stream == ended and e.type == "decision"
    )

    assert main(["replay", "--log", log, "--spec", str(spec), "--format", "json"]) == 0
    out = capsys.readouterr()
    assert "is archived: the log was compacted before position" in out.err
    alone = json.loads(out.out)["totals"]
    args = ["replay", "--log", log, "--spec", str(spec), "--archive", archive, "--format", "json"]
    assert main(args) == 0
    out = capsys.readouterr()
    across = json.loads(out.out)["totals"]
    assert "archived" not in out.err
    # the archived session's decisions are replayed only across the cut
    assert across["decisions"] == alone["decisions"] + len(decisions)
    assert across["decisions"] == across["unchanged"]  # the same spec decides alike

    assert main(["why", str(spec), "--log", log, "--decision", gone]) == 2
    assert "is archived" in capsys.readouterr().err
    assert main(["why", str(spec), "--log", log, "--decision", gone, "--archive", archive]) == 0
    capsys.readouterr()
    text = Path(archive).read_text(encoding="utf-8")
    assert '\\"/w/x\\"' in text  # the ended session's call, archived
    Path(archive).write_text(text.replace('\\"/w/x\\"', '\\"/w/y\\"'), "utf-8")
    assert main(args) == 2
    assert "do not verify" in capsys.readouterr().err


def test_after_the_cut_a_spent_grant_stays_spent_and_a_pending_request_can_be_answered(
    tmp_path: Path,
) -> None:
    from .test_release import AGENT, DESK, OPS, counting, frozen

    spec = compile_text(tmp_path, DESK)
    db = tmp_path / "log.db"
    h = Harness(spec, store=SQLiteStore(db))
    runs = counting(h)
    s = h.session("lead", actor=AGENT, task="t-1")
    restart = frozen(s.normalize("ops.restart", "c-1", {"service": "api"}))
    assert s.decide(restart).effect == "ask"
    h.approve(s.request_approval(restart).request_id, by=OPS)
    assert s.invoke(restart).ran  # the `once` grant, spent on its own stream
    waiting = frozen(s.normalize("ops.restart", "c-2", {"service": "db"}))
    assert s.decide(waiting).effect == "ask"
    pending = s.request_approval(waiting).request_id
    other = h.session("lead", actor=AGENT, task="t-2")
    other.end()
    h.store.close()

    with SQLiteStore(db) as store:
        done = compact(store, before=store.head()[0], archive=tmp_path / "a.jsonl")
    archived = {e.stream for e in read_archive(tmp_path / "a.jsonl")}
    assert other.id in archived and s.id not in archived
    assert not any(stream.startswith("grant:") for stream in archived)
    assert done.carried > 0

    h = Harness(spec, store=SQLiteStore(db))
    runs = counting(h)
    back = h.resume(s.id)
    again = frozen(back.normalize("ops.restart", "c-3", {"service": "api"}))
    assert back.decide(again).effect == "ask"  # the grant was spent before the cut
    assert h.approve(pending, by=OPS).status == "approved"
    assert h.sessions[s.id].invoke(frozen(h.sessions[s.id].call("c-2"))).ran
    assert runs == ["restart:db"]
    # the claim that spent the first grant is still there: nobody can spend it again
    (spent,) = [g for g in h.projections.grants.values() if g.status == "used"]
    with pytest.raises(ConcurrencyError):
        h.store.append(
            NewEvent(f"grant:{spent.grant_id}", "Approval", "grant.spent", {}), expected_seq=0
        )
    assert h.verify().ok
    h.store.close()


def test_a_memory_log_compacted_under_its_harness_decides_alike(desk: Spec, tmp_path: Path) -> None:
    whole, _ = scenario(desk, MemoryStore, tmp_path, cut=False)
    clock = Clock()
    h = Harness(desk, store=MemoryStore(key=KEY), clock=clock)
    bind(h)
    sessions = open_sessions(h)
    decided = run(h, sessions, BEFORE, clock)
    h.sessions[sessions["c"]].end()
    compact(h.store, before=h.store.head()[0] - 2, archive=tmp_path / "a.jsonl")
    decided += run(h, sessions, AFTER, clock)
    assert decided == whole
    assert h.verify().ok and h.vouched().ok
    assert verify_across(h.store.read(), [read_archive(tmp_path / "a.jsonl")], key=KEY).ok


def test_a_session_ended_and_archived_while_held_in_memory_is_not_resumed(
    desk: Spec, tmp_path: Path
) -> None:
    """A harness that ended a session keeps its object; once a compaction (of this process
    or another) archived the session, resuming it says so instead of answering from an
    object the log no longer backs, and a live session is resumed as before."""
    from harnessc.runtime import HarnessError

    h = Harness(desk, store=SQLiteStore(str(tmp_path / "log.db")), clock=Clock())
    bind(h)
    done = h.session("bot", actor=ACTOR, task="t-done")
    done.user_said("delete /tmp/x")
    live = h.session("bot", actor=ACTOR, task="t-live")
    done.end()
    other = SQLiteStore(str(tmp_path / "log.db"))  # the operator's process
    compact(other, before=other.head()[0], archive=tmp_path / "a.jsonl")
    other.close()
    with pytest.raises(HarnessError) as refused:
        h.resume(done.id)
    assert refused.value.code == "archived" and "a.jsonl" in refused.value.message
    assert done.id not in h.sessions
    assert h.resume(live.id) is live
    h.store.close()


@pytest.mark.parametrize("share", [0.3, 0.7, 1.0])
def test_a_log_compacted_under_a_running_harness_decides_and_reopens_alike(
    desk: Spec, tmp_path: Path, share: float
) -> None:
    """The cut anywhere in the log, while the harness that writes it runs on: the running
    harness decides as on the whole log, and so does one opened on the compacted log."""
    whole, _ = scenario(desk, MemoryStore, tmp_path, cut=False)
    clock = Clock()
    db = tmp_path / "log.db"
    h = Harness(desk, store=SQLiteStore(db), clock=clock)
    bind(h)
    sessions = open_sessions(h)
    decided = run(h, sessions, BEFORE, clock)
    h.sessions[sessions["c"]].end()
    h.store.flush()
    with SQLiteStore(db) as store:
        compact(store, before=max(1, int(store.head()[0] * share)), archive=tmp_path / "a.jsonl")
    decided += run(h, sessions, AFTER, clock)
    assert decided == whole
    h.store.close()
    reopened = Harness(desk, store=SQLiteStore(db), clock=clock)
    assert reopened.verify().ok
    assert set(reopened.projections.sessions) >= {sessions["a"], sessions["b"]}
    assert verify_across(reopened.store.read(), [read_archive(tmp_path / "a.jsonl")]).ok
    reopened.store.close()
