"""Operator commands on logs as they are found: one a writer left with transactions still in its
WAL file, rows the chain does not vouch for, a path that is no file. A command that only reads
changes nothing, and every damaged log gets a message and exit code 2, never an internal
error."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from harnessc.compiler.cli import main
from harnessc.runtime import Harness, PendingCall, SQLiteStore

from .test_approvals import SHELL, compile_text


def _digest(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file()
    }


def _asked(tmp_path: Path, store: SQLiteStore) -> str:
    """One session's call asked for approval, in `store`: the request's id."""
    h = Harness(compile_text(tmp_path, SHELL), store=store)
    s = h.session("a", actor={"user": "u-1"}, task="t-1")
    call = s.normalize("shell.run", "c-1", {"cmd": "ls"})
    assert isinstance(call, PendingCall)
    return s.request_approval(call).request_id


@pytest.fixture
def live_copy(tmp_path: Path) -> tuple[Path, str]:
    """A copy of a log taken while its writer was still open: committed transactions sit in
    its `-wal` file, not yet in the database file. Returns the copy and a pending request."""
    writer = SQLiteStore(tmp_path / "live.db")
    request = _asked(tmp_path, writer)
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("live.db", "live.db-wal"):
        shutil.copyfile(tmp_path / name, copy / name)
    writer.close()
    assert (copy / "live.db-wal").stat().st_size > 0
    return copy, request


def test_listing_approvals_and_grants_changes_nothing_of_the_log(
    live_copy: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    # opened read-write, a listing checkpointed the WAL into the database file and removed it
    # (and upgraded a log of an older schema)
    folder, request = live_copy
    before = _digest(folder)
    store = str(folder / "live.db")
    for command in (
        ["approvals", "list", "--log", store],
        ["approvals", "show", request, "--log", store],
        ["grants", "list", "--log", store],
    ):
        assert main(command) == 0, capsys.readouterr().err
    assert request in capsys.readouterr().out
    after = _digest(folder)
    assert {k: v for k, v in after.items() if k != "live.db-shm"} == {
        k: v for k, v in before.items() if k != "live.db-shm"
    }


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_named_pipe_as_the_log_is_refused_at_once(tmp_path: Path) -> None:
    # SQLite's open of a named pipe waited for a writer: `log verify` hung for ever
    import subprocess
    import sys

    pipe = tmp_path / "log.db"
    os.mkfifo(pipe)
    for command, code in ((["log", "verify"], 1), (["approvals", "list"], 2)):
        done = subprocess.run(
            [sys.executable, "-m", "harnessc.compiler", *command, "--log", str(pipe)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == code, done.stderr
        assert "is not a regular file" in done.stdout + done.stderr


def _append_row(db: Path, type_: str, payload: str | bytes) -> int:
    """Append a row as another program would: chained (the hash the chain expects) when its
    payload is text, else with a hash that cannot match."""
    import sqlite3

    from harnessc.runtime.log.events import event_hash

    with sqlite3.connect(db) as conn:
        position, head = conn.execute(
            "SELECT position, hash FROM events ORDER BY position DESC LIMIT 1"
        ).fetchone()
        row = (position + 1, "odd", 1, "State", type_, payload, "2026-01-01T00:00:00Z")
        digest = "f" * 64
        if isinstance(payload, str):
            fields = ("position", "stream", "seq", "kind", "type", "payload_json", "time")
            digest = event_hash(**dict(zip(fields, row, strict=True)), prev_hash=head)
        conn.execute("INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?,?)", (*row, head, digest, None))
    conn.close()
    return int(position) + 1


@pytest.fixture
def logged(tmp_path: Path) -> tuple[Path, Path]:
    """A log of one session with a decision and a pending request, and its spec file."""
    spec_file = tmp_path / "g.harness"
    spec_file.write_text(SHELL, encoding="utf-8")
    store = SQLiteStore(tmp_path / "log.db")
    _asked(tmp_path, store)
    store.close()
    return tmp_path / "log.db", spec_file


@pytest.mark.parametrize(
    ("type_", "payload", "reason"),
    [
        ("decision", "{not json", "its payload is not JSON"),
        ("decision", "[1, 2]", "its payload is not a JSON object"),
        ("decision", "[" * 100_000 + "]" * 100_000, "nests too deeply"),
        ("decision", b"\xff\xfe{}", "its payload is not UTF-8 text"),
        ("decision", '{"effect": "allow"}', "it is not a `decision` record"),
        ("approval.requested", '{"tool_id": 1}', "it is not a `approval.requested` record"),
        ("decision.diverged", '{"tool_call_id": "c", "active": "x"}', "is not"),
    ],
    ids=["not-json", "list", "deep", "not-utf8", "decision-fields", "request-fields", "diverged"],
)
def test_a_row_that_cannot_be_read_is_named_never_an_internal_error(
    logged: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    type_: str,
    payload: str | bytes,
    reason: str,
) -> None:
    # every one of these was H901 ("a bug in harnessc") or a raw Python error text
    db, spec = logged
    position = _append_row(db, type_, payload)
    operators = db.parent / "ops.json"
    operators.write_text(
        '{"operators": [{"name": "carol", "roles": ["ops"], "token_sha256": "' + "0" * 64 + '"}]}',
        encoding="utf-8",
    )
    commands = [
        ["approvals", "list", "--log", str(db)],
        ["grants", "list", "--log", str(db)],
        ["console", "--log", str(db), "--spec", str(spec), "--operators", str(operators)],
    ]
    if type_ == "decision" and reason.startswith("its payload"):
        # (replay reports a decision without its fields as not replayable, and goes on)
        commands.append(["replay", "--log", str(db), "--spec", str(spec)])
    if type_ == "decision.diverged":
        commands = [["log", "divergences", "--log", str(db)]]
    for command in commands:
        code = main(command)
        captured = capsys.readouterr()
        said = captured.err + captured.out
        assert code == 2, (command, said)
        assert "H901" not in said, said
        if isinstance(payload, bytes):
            # a blob where the chain has text: the walk of the chain as the log is opened,
            # before anything of it is read
            assert f"does not verify at position {position}: `payload` is not text" in said
            continue
        assert f"the event at position {position} (`{type_}`) cannot be read" in said, command
        assert reason in said, said


def test_a_lone_surrogate_in_the_log_is_printed_as_its_escape(
    logged: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # `"\ud800"` is valid JSON: printing it failed the whole command (UnicodeEncodeError)
    import json
    import sqlite3

    db, spec = logged
    with sqlite3.connect(db) as conn:
        text = conn.execute("SELECT payload FROM events WHERE type = 'decision'").fetchone()[0]
    conn.close()
    decision = json.loads(text)
    decision.update(tool_call_id="c-2", decision_id="dec-\ud800")
    _append_row(db, "decision", json.dumps(decision))
    assert main(["replay", "--log", str(db), "--spec", str(spec)]) in (0, 1)
    assert "\\ud800" in capsys.readouterr().out


def append_copy(db: Path, type_: str, *, chained: bool) -> int:
    """Append a copy of the first `type_` row at the end, as something other than harnessc
    would: with a hash that does not match (`chained=False`), or with the hash the chain
    expects and no MAC (a forger who knows the chain but not the log key)."""
    import sqlite3

    from harnessc.runtime.log.events import event_hash

    with sqlite3.connect(db) as conn:
        stream, kind, payload = conn.execute(
            "SELECT stream, kind, payload FROM events WHERE type = ? ORDER BY position LIMIT 1",
            (type_,),
        ).fetchone()
        position, head = conn.execute(
            "SELECT position, hash FROM events ORDER BY position DESC LIMIT 1"
        ).fetchone()
        (seq,) = conn.execute("SELECT MAX(seq) FROM events WHERE stream = ?", (stream,)).fetchone()
        row = (position + 1, stream, seq + 1, kind, type_, payload, "2026-01-01T00:00:00Z")
        digest = event_hash(
            position=row[0],
            stream=row[1],
            seq=row[2],
            kind=row[3],
            type=row[4],
            payload_json=row[5],
            time=row[6],
            prev_hash=head,
        )
        conn.execute(
            "INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?,?)",
            (*row, head, digest if chained else "f" * 64, None),
        )
    conn.close()
    return int(position) + 1


def _answered(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path, str]:
    """A log whose one request was approved with the CLI: the log, its spec, the request."""
    spec_file = tmp_path / "g.harness"
    spec_file.write_text(SHELL, encoding="utf-8")
    db = tmp_path / "log.db"
    store = SQLiteStore(db)
    request = _asked(tmp_path, store)
    store.close()
    ops = '{"user": "u-ops", "role": "ops"}'
    approve = ["approvals", "approve", request, "--log", str(db), "--spec", str(spec_file)]
    assert main([*approve, "--as", ops]) == 0, capsys.readouterr().err
    assert main(["approvals", "list", "--log", str(db), "--format", "json"]) == 0
    assert capsys.readouterr().out.strip().endswith("[]")
    return db, spec_file, request


def test_operators_act_only_on_a_log_whose_chain_verifies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a copy of the answered request's row appended at the end, its hash wrong: the listing
    # showed the request pending again, and an operator could approve it a second time
    db, spec, request = _answered(tmp_path, capsys)
    position = append_copy(db, "approval.requested", chained=False)
    before = _digest(tmp_path)
    ops = '{"user": "u-ops", "role": "ops"}'
    for command in (
        ["approvals", "list", "--log", str(db)],
        ["approvals", "show", request, "--log", str(db)],
        ["approvals", "approve", request, "--log", str(db), "--spec", str(spec), "--as", ops],
        ["approvals", "expire", "--log", str(db)],
        ["grants", "list", "--log", str(db)],
    ):
        code = main(command)
        captured = capsys.readouterr()
        assert code == 2, (command, captured.out)
        assert captured.out == ""
        assert (
            f"the event log does not verify at position {position}: hash does not match the "
            "contents" in captured.err
        ), captured.err
    after, empty = _digest(tmp_path), hashlib.sha256(b"").hexdigest()
    assert after["log.db"] == before["log.db"]
    assert after.get("log.db-wal", empty) == empty  # nothing written


def test_with_a_log_key_a_row_chained_without_its_mac_is_not_acted_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # whoever can write the file can also compute the chain's next hash; only the MAC, made
    # with the log key, tells their row from the runtime's
    monkeypatch.setenv("HARNESSC_LOG_KEY", "k" * 40)
    db, _, request = _answered(tmp_path, capsys)
    position = append_copy(db, "approval.requested", chained=True)
    assert main(["approvals", "list", "--log", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"the event log does not verify at position {position}: no MAC" in err, err
    # without the key the forged row is a link like any other: the listing cannot tell
    monkeypatch.delenv("HARNESSC_LOG_KEY")
    assert main(["approvals", "list", "--log", str(db), "--format", "json"]) == 0
    assert request in capsys.readouterr().out


def test_a_review_reads_no_log_whose_chain_does_not_verify(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a copied decision counted twice in the report, a forged one flipped or widened as any
    # other: the review gate (`--fail-on widened`) decided on rows nobody vouched for
    monkeypatch.setenv("HARNESSC_LOG_KEY", "k" * 40)
    db, spec, _ = _answered(tmp_path, capsys)
    replay = ["replay", "--log", str(db), "--spec", str(spec)]
    assert main(replay) == 0
    capsys.readouterr()
    position = append_copy(db, "decision", chained=True)  # the chain's hash, no MAC
    monkeypatch.delenv("HARNESSC_LOG_KEY")
    key = tmp_path / "log.key"
    key.write_text("k" * 40, encoding="utf-8")
    assert main([*replay, "--key-file", str(key)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"the event log does not verify at position {position}: no MAC" in captured.err
    # nor does it read the shadow mode's divergences, or explain a decision, from it (the key
    # from the environment)
    monkeypatch.setenv("HARNESSC_LOG_KEY", "k" * 40)
    import sqlite3

    with sqlite3.connect(db) as conn:
        (text,) = conn.execute("SELECT payload FROM events WHERE type = 'decision'").fetchone()
    conn.close()
    decision = json.loads(text)["decision_id"]
    for command in (
        ["log", "divergences", "--log", str(db)],
        ["why", str(spec), "--log", str(db), "--decision", decision],
    ):
        assert main(command) == 2, command
        assert f"does not verify at position {position}: no MAC" in capsys.readouterr().err


def test_after_a_first_look_a_harness_folds_nothing_the_chain_does_not_vouch_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a command verified the chain when it began, then its own catching up (inside `approve`)
    # folded whatever had been appended since, unwalked
    from harnessc.runtime import UnverifiedLog

    db, _, _ = _answered(tmp_path, capsys)
    h = Harness(compile_text(tmp_path, SHELL), store=SQLiteStore(db))
    h.vouched()
    folded = h.projections.position
    position = append_copy(db, "approval.requested", chained=False)
    with pytest.raises(UnverifiedLog) as err:
        h.catch_up()
    assert err.value.verification.position == position
    assert h.projections.position == folded  # nothing of the page was folded
