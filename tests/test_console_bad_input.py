"""The operations console on bad and odd input: every case answers with a page or a status the
docs name (400, 401, 403, 404, 409), never an internal error, and changes nothing it should
not (the request stays pending, no log appears where none was)."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from harnessc.compiler.cli import main
from harnessc.compiler.console.app import Console, build_app
from harnessc.runtime import Harness, PendingCall, SQLiteStore

from . import test_console
from .test_approvals import SHELL
from .test_console import login

world = test_console.world  # the fixture: a store with two pending requests, a console on it


def pending(client: Any) -> list[str]:
    found: list[str] = client.get("/api/pending").json()["pending"]
    return found


def test_a_csrf_token_of_any_text_is_compared_and_a_wrong_one_refused(world: Any) -> None:
    # a non-ASCII token made the constant-time comparison of `str`s raise (500)
    client, csrf = login(world["app"], "alice")
    rid = world["requests"][1]
    assert client.post(f"/approvals/{rid}/approve", data={"csrf": "é"}).status_code == 403
    headers = {"x-csrf-token": "é".encode()}
    assert client.post(f"/approvals/{rid}/approve", headers=headers).status_code == 403
    assert client.post("/logout", data={"csrf": "é" + csrf}).status_code == 403
    assert rid in pending(client)  # nothing changed, still logged in
    anonymous = login(world["app"], "bob")[0]
    anonymous.cookies.clear()
    assert anonymous.post("/logout", data={"csrf": csrf}).status_code == 401


def test_a_timeline_page_after_any_position_is_a_page(world: Any) -> None:
    client, _ = login(world["app"], "carol")
    sid = world["session"].id
    for after in ("abc", "-5", str(2**63 - 1), str(2**63), "9" * 30):
        r = client.get(f"/sessions/{sid}?after={after}")
        assert r.status_code == 200, (after, r.status_code)


@pytest.mark.parametrize(
    ("arguments", "status", "message"),
    [
        ("[" * 100_000 + "]" * 100_000, 400, "nest too deeply"),
        ('{"cmd": "x", "n": ' + "9" * 5000 + "}", 400, "not JSON"),
        # within what JSON parses, deeper than the interpreter's recursion: normalize refuses
        ('{"cmd": ' + "[" * 600 + "]" * 600 + "}", 409, "invalid-edit"),
    ],
)
def test_edited_arguments_json_cannot_read_are_refused(
    world: Any, arguments: str, status: int, message: str
) -> None:
    client, csrf = login(world["app"], "alice")
    rid = world["requests"][1]
    r = client.post(f"/approvals/{rid}/edit", data={"csrf": csrf, "arguments": arguments})
    assert (r.status_code, message in r.text) == (status, True), r.text[-300:]
    assert rid in pending(client)


def test_a_file_part_is_not_read_as_a_reason(world: Any) -> None:
    # it was recorded as the Python text of Starlette's UploadFile
    client, csrf = login(world["app"], "alice")
    rid = world["requests"][1]
    part = {"reason": ("why.txt", b"the real reason", "text/plain")}
    r = client.post(f"/approvals/{rid}/deny", data={"csrf": csrf}, files=part)
    assert r.status_code == 400 and "file part" in r.text
    assert rid in pending(client)


@pytest.mark.parametrize("sid", ["team-a/run-1", "run?1", "run#1", "run 1 é"])
def test_a_session_whose_id_holds_url_syntax_is_linked_and_shown(tmp_path: Path, sid: str) -> None:
    from .test_approvals import compile_text

    spec = compile_text(tmp_path, SHELL)
    db = tmp_path / "h.db"
    agent = Harness(spec, SQLiteStore(db))
    s = agent.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1", session_id=sid)
    call = s.normalize("shell.run", "call-0", {"cmd": "df"})
    assert isinstance(call, PendingCall)
    s.request_approval(call)
    from harnessc.compiler.console.auth import load_operators

    ops = load_operators(str(_carol(tmp_path)))
    app = build_app(Console(Harness(spec, SQLiteStore(db)), ops))
    client, _ = login(app, "carol", "tok-carol")
    for listing in ("/sessions", "/approvals"):
        # only sessions are listed: not the log's own stream (`harness`), nor a claim's
        [link] = re.findall(r'href="(/sessions/[^"]+)"', client.get(listing).text)
        page = client.get(link)
        assert page.status_code == 200 and "shell.run call-0" in page.text


def _carol(folder: Path) -> Path:
    """An operators file of one reader, `carol` (token `tok-carol`)."""
    from harnessc.compiler.console.auth import token_hash

    carol = {"name": "carol", "roles": ["ops"], "token_sha256": token_hash("tok-carol")}
    path = folder / "ops.json"
    path.write_text(json.dumps({"operators": [carol]}), encoding="utf-8")
    return path


def test_the_console_on_a_path_that_is_no_log_says_so_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "g.harness"
    spec.write_text(SHELL, encoding="utf-8")
    ops = _carol(tmp_path)
    other = tmp_path / "app.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE accounts (id INTEGER)")
    conn.close()
    typo = tmp_path / "typo.db"
    common = ["--spec", str(spec), "--operators", str(ops)]
    assert main(["console", "--log", str(typo), *common]) == 2
    assert f"no event log at `{typo}`" in capsys.readouterr().err
    assert not list(tmp_path.glob("typo.db*"))
    for command in (
        ["console", "--log", str(other), *common],
        ["approvals", "list", "--log", str(other)],
    ):
        assert main(command) == 2
        assert "holds no event log" in capsys.readouterr().err
    with sqlite3.connect(other) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    conn.close()
    assert tables == ["accounts"]  # no log added to another application's database


def test_a_plain_path_store_reaches_the_workflow_engine(world: Any) -> None:
    pytest.importorskip("dbos")
    db = world["tmp"] / "h.db"
    agent: Harness = world["agent"]
    console = Console(Harness(agent.spec, SQLiteStore(db)), {}, str(db))
    assert console.store_url == f"sqlite:///{db}"


@pytest.mark.parametrize(
    ("payload", "failing"),
    [("not json", ("/approvals", "/sessions/")), ('{"effect": "allow"}', ("/approvals",))],
)
def test_a_page_that_meets_a_row_the_chain_does_not_vouch_for_says_so(
    world: Any, payload: str, failing: tuple[str, ...]
) -> None:
    # a row changed under the log (bad JSON, or a decision without its fields): the pages
    # that read it answered a bare 500
    from starlette.testclient import TestClient

    sid = world["session"].id
    with sqlite3.connect(world["tmp"] / "h.db") as conn:
        position, head = conn.execute(
            "SELECT position, hash FROM events ORDER BY position DESC LIMIT 1"
        ).fetchone()
        seq = conn.execute("SELECT max(seq) FROM events WHERE stream = ?", (sid,)).fetchone()[0]
        row = (position + 1, sid, seq + 1, "State", "decision", payload, "2026-01-01T00:00:00Z")
        conn.execute(
            "INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?,?)", (*row, head, "f" * 64, None)
        )
    conn.close()
    client = TestClient(world["app"], raise_server_exceptions=False, follow_redirects=False)
    assert client.post("/login", data={"name": "carol", "password": "tok-carol"}).status_code == 303
    for page in failing:
        r = client.get(page + sid if page.endswith("/") else page)
        assert r.status_code == 500 and "The event log does not verify" in r.text, page
        assert f"at position {position + 1}" in r.text


def test_a_page_showing_a_lone_surrogate_from_the_log_shows_its_escape(world: Any) -> None:
    # `"\ud800"` is valid JSON, so a log may hold it: the page failed to encode (a bare 500)
    from harnessc.runtime.log.events import NewEvent

    s = world["session"]
    store = s.harness.store
    [decided] = [e for e in store.read(s.id) if e.type == "decision"][:1]
    keep = ("policy_version", "decision_id")
    payload = {
        k: "a\ud800b" if isinstance(v, str) and k not in keep else v
        for k, v in decided.payload.items()
    }
    payload["decision_id"] = "dec-9"
    text = json.dumps(payload, sort_keys=True)  # escaped, as another writer would chain it
    store.append(NewEvent(s.id, "State", "decision", payload, text))
    client, _ = login(world["app"], "carol")
    r = client.get(f"/sessions/{s.id}")
    assert r.status_code == 200 and "a\\ud800b" in r.text


def test_a_page_that_meets_a_chained_row_it_cannot_read_names_it(world: Any) -> None:
    # a row the chain vouches for (another program wrote it) that is no record: a bare 500
    from harnessc.runtime.log.events import NewEvent

    s = world["session"]
    store = s.harness.store
    store.append(NewEvent(s.id, "State", "approval.requested", {}, "{}"))
    position = store.read()[-1].position
    from starlette.testclient import TestClient

    client = TestClient(world["app"], raise_server_exceptions=False, follow_redirects=False)
    assert client.post("/login", data={"name": "carol", "password": "tok-carol"}).status_code == 303
    r = client.get("/approvals")
    assert r.status_code == 500 and "cannot read" in r.text
    assert f"the event at position {position} (`approval.requested`) cannot be read" in r.text


def test_after_a_row_is_copied_under_the_log_no_answer_or_listing_is_given(world: Any) -> None:
    # an answered request's row copied at the end, its hash wrong: the page listed the request
    # as pending again; the console had verified the log only when a page failed
    from .test_operator_logs import append_copy

    client, csrf = login(world["app"], "alice")
    first, second = world["requests"]
    assert client.post(f"/approvals/{first}/approve", data={"csrf": csrf}).status_code == 200
    assert pending(client) == [second]
    position = append_copy(world["tmp"] / "h.db", "approval.requested", chained=False)
    with sqlite3.connect(world["tmp"] / "h.db") as conn:
        rows = conn.execute("SELECT count(*) FROM events").fetchone()
    conn.close()
    from starlette.testclient import TestClient

    shown = TestClient(world["app"], raise_server_exceptions=False, follow_redirects=False)
    shown.cookies = client.cookies
    for method, path in (
        ("GET", "/approvals"),
        ("GET", "/api/pending"),
        ("GET", "/grants"),
        ("POST", f"/approvals/{second}/approve"),
        ("POST", f"/approvals/{second}/deny"),
    ):
        r = shown.request(method, path, data={"csrf": csrf, "reason": "no"})
        assert r.status_code == 500, (path, r.status_code)
        assert "The event log does not verify" in r.text, path
        assert f"at position {position}: hash does not match the contents" in r.text, path
    with sqlite3.connect(world["tmp"] / "h.db") as conn:
        assert conn.execute("SELECT count(*) FROM events").fetchone() == rows  # nothing written
    conn.close()
