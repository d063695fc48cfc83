"""The operations console (`harnessc console`): every page and action through Starlette's
TestClient, on a SQLite store that real harness sessions filled, as logged-in operators."""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from harnessc.compiler.console.app import Console, build_app
from harnessc.compiler.console.auth import (
    OperatorsError,
    hash_password,
    load_operators,
    token_hash,
)
from harnessc.runtime import Harness, PendingCall, SQLiteStore
from starlette.testclient import TestClient

from .test_approvals import SHELL, Clock, compile_text

TOKENS = {"alice": "tok-alice", "bob": "tok-bob", "carol": "tok-carol", "dave": "tok-dave"}
ROLES = {
    "alice": ["approver", "ops"],
    "bob": ["approver", "ops"],
    "carol": ["ops"],  # reads, but may not act in the console
    "dave": ["approver"],  # may act in the console, but the policy names role ops
}


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Any]:
    return make_world(tmp_path)


def make_world(tmp_path: Path) -> dict[str, Any]:
    """Two pending requests of an agent's session on a SQLite log, and the console over it."""
    spec = compile_text(tmp_path, SHELL)  # shell.run: ask, approver role ops, a secret token
    db = tmp_path / "h.db"
    agent = Harness(spec, SQLiteStore(db))  # the agents' process
    s = agent.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1")
    requests = []
    for i, args in enumerate(({"cmd": "ls", "token": "hunter2"}, {"cmd": "df"})):
        call = s.normalize("shell.run", f"call-{i}", args)
        assert isinstance(call, PendingCall)
        requests.append(s.request_approval(call).request_id)
    ops = [{"name": n, "roles": ROLES[n], "token_sha256": token_hash(t)} for n, t in TOKENS.items()]
    ops.append({"name": "erin", "roles": ["approver", "ops"], "password_hash": hash_password("pw")})
    (tmp_path / "ops.json").write_text(json.dumps({"operators": ops}), encoding="utf-8")
    console = Console(Harness(spec, SQLiteStore(db)), load_operators(str(tmp_path / "ops.json")))
    app = build_app(console)
    return {
        "app": app,
        "console": console,
        "agent": agent,
        "session": s,
        "requests": requests,
        "tmp": tmp_path,
    }


def login(app: Any, name: str, token: str | None = None) -> tuple[TestClient, str]:
    client = TestClient(app, follow_redirects=False)
    r = client.post("/login", data={"name": name, "password": token or TOKENS[name]})
    assert r.status_code == 303, r.text
    page = client.get("/approvals")
    match = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert match
    return client, match.group(1)


def test_unauthenticated_pages_redirect_to_login_and_the_api_answers_401(world: Any) -> None:
    client = TestClient(world["app"], follow_redirects=False)
    for path in ("/approvals", "/grants", "/sessions", "/log", "/workflows"):
        r = client.get(path)
        assert r.status_code == 303 and r.headers["location"] == "/login", path
    assert client.get("/api/pending").status_code == 401
    rid = world["requests"][0]
    assert client.post(f"/approvals/{rid}/approve").status_code == 401


def test_a_password_logs_in_a_wrong_one_does_not_and_the_cookie_is_strict(world: Any) -> None:
    client = TestClient(world["app"], follow_redirects=False)
    r = client.post("/login", data={"name": "erin", "password": "nope"})
    assert r.status_code == 401 and "unknown name or password" in r.text
    r = client.post("/login", data={"name": "erin", "password": "pw"})
    assert r.status_code == 303
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "secure" not in cookie
    assert client.get("/approvals").status_code == 200


def test_a_change_without_the_csrf_token_is_refused(world: Any) -> None:
    client, csrf = login(world["app"], "alice")
    rid = world["requests"][0]
    assert client.post(f"/approvals/{rid}/approve").status_code == 403
    assert client.post(f"/approvals/{rid}/approve", data={"csrf": "x" + csrf}).status_code == 403
    assert client.post(f"/approvals/{rid}/deny", data={"reason": "no"}).status_code == 403
    assert rid in client.get("/api/pending").json()["pending"]  # nothing changed


def test_the_pending_page_shows_the_frozen_call_with_its_secret_masked(world: Any) -> None:
    client, _ = login(world["app"], "carol")
    page = client.get("/approvals").text
    rid = world["requests"][0]
    view = world["agent"].approvals.get(rid)
    assert rid in page and "shell.run" in page and view.input_hash in page
    assert "hunter2" not in page and "Operators approve each command." in page
    assert "role ops" in page
    line = 1 + next(i for i, text in enumerate(SHELL.splitlines()) if "ops: ask" in text)
    assert re.search(rf"<code>p\.ops</code> at <code>[^<]*g\.harness:{line}</code>", page)
    assert client.get("/api/pending").json() == {"pending": world["requests"]}


def test_an_approval_is_taken_by_the_runtime_as_the_operator(world: Any) -> None:
    client, csrf = login(world["app"], "alice")
    rid = world["requests"][1]
    r = client.post(f"/approvals/{rid}/approve", data={"csrf": csrf})
    assert r.status_code == 200 and "approved" in r.text
    agent = world["agent"]
    agent.catch_up()
    assert agent.projections.approvals[rid].status == "approved"
    assert agent.projections.approvals[rid].by == "alice"
    grants = client.get("/grants").text
    assert "once" in grants and "call-1" in grants and "alice" in grants
    # revoked from the grants page: it never authorises again
    (grant_id,) = re.findall(r'<tr id="(grt-[^"]+)"', grants)
    assert client.post(f"/grants/{grant_id}/revoke", data={"reason": "x"}).status_code == 403
    viewer, viewer_csrf = login(world["app"], "carol")
    r = viewer.post(f"/grants/{grant_id}/revoke", data={"csrf": viewer_csrf})
    assert r.status_code == 403 and "console role `approver`" in r.text
    form = {"csrf": csrf, "reason": "rotated"}
    r = client.post(f"/grants/{grant_id}/revoke", data=form)
    assert r.status_code == 200 and f"`{grant_id}`: revoked by alice" in r.text
    assert grant_id not in client.get("/grants").text
    agent.catch_up()
    assert agent.projections.grants[grant_id].status == "revoked"
    r = client.post(f"/grants/{grant_id}/revoke", data=form)
    assert r.status_code == 409 and "not-active" in r.text
    # answered: a second approval says so
    r = client.post(f"/approvals/{rid}/approve", data={"csrf": csrf})
    assert r.status_code == 409 and "not-pending" in r.text and "already approved" in r.text


def test_an_approval_with_edits_binds_to_the_edited_call_and_supersedes_the_original(
    world: Any,
) -> None:
    client, csrf = login(world["app"], "alice")
    masked, plain = world["requests"]
    page = client.get("/approvals").text
    assert f'action="/approvals/{plain}/edit"' in page
    edit = {"csrf": csrf, "arguments": json.dumps({"cmd": "df -h"}), "reason": "human units"}
    for bad, message in (
        ("{", "not JSON"),
        ("[1]", "must be a JSON object"),
    ):
        r = client.post(f"/approvals/{masked}/edit", data=edit | {"arguments": bad})
        assert r.status_code == 400 and message in r.text
    kept_mask = json.dumps({"cmd": "ls", "token": "[REDACTED]"})
    r = client.post(f"/approvals/{masked}/edit", data=edit | {"arguments": kept_mask})
    assert r.status_code == 409 and "invalid-edit" in r.text and "mask of a secret" in r.text
    r = client.post(f"/approvals/{plain}/edit", data=edit | {"arguments": '{"cmd": 5}'})
    assert r.status_code == 409 and "invalid-edit" in r.text
    r = client.post(f"/approvals/{plain}/edit", data=edit)
    assert r.status_code == 200 and "as the edited call" in r.text, r.text
    agent = world["agent"]
    agent.catch_up()
    assert agent.projections.approvals[plain].status == "superseded"
    (superseded,) = agent.projections.superseded.values()
    assert superseded["by"] == "alice"
    call = world["session"].call("call-1")
    assert call is not None and call.args["cmd"] == "df -h"
    timeline = client.get(f"/sessions/{world['session'].id}").text
    assert "call.superseded" in timeline and "superseded by alice: human units" in timeline
    assert plain not in client.get("/api/pending").json()["pending"]


def test_a_denial_needs_a_reason_and_is_recorded(world: Any) -> None:
    client, csrf = login(world["app"], "bob")
    rid = world["requests"][0]
    r = client.post(f"/approvals/{rid}/deny", data={"csrf": csrf})
    assert r.status_code == 409 and "reason-required" in r.text
    r = client.post(f"/approvals/{rid}/deny", data={"csrf": csrf, "reason": "not now"})
    assert r.status_code == 200 and "denied" in r.text
    assert rid not in client.get("/api/pending").json()["pending"]
    s = world["session"]
    world["agent"].catch_up()
    denials = [e for e in world["agent"].store.read(s.id) if e.type == "task.fact"]
    assert denials[0].payload["value"]["reason"] == "not now"
    assert denials[0].payload["value"]["by"] == "bob"
    assert f"approval {rid} rejected by bob: not now" in client.get(f"/sessions/{s.id}").text


def test_an_operator_without_the_approver_role_is_refused_with_the_reason(world: Any) -> None:
    client, csrf = login(world["app"], "carol")
    rid = world["requests"][0]
    r = client.post(f"/approvals/{rid}/approve", data={"csrf": csrf})
    assert r.status_code == 403 and "`carol` does not hold the console role `approver`" in r.text
    # the console lets dave act, the runtime's approver check refuses him
    client, csrf = login(world["app"], "dave")
    r = client.post(f"/approvals/{rid}/approve", data={"csrf": csrf})
    assert r.status_code == 409 and "not-an-approver" in r.text
    assert rid in client.get("/api/pending").json()["pending"]


def test_two_operators_approving_at_once_exactly_one_wins(world: Any) -> None:
    rid = world["requests"][1]
    clients = [login(world["app"], n) for n in ("alice", "bob")]
    codes: list[int] = []
    barrier = threading.Barrier(2)

    def approve(client: TestClient, csrf: str) -> None:
        barrier.wait()
        codes.append(client.post(f"/approvals/{rid}/approve", data={"csrf": csrf}).status_code)

    threads = [threading.Thread(target=approve, args=pair) for pair in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes) == [200, 409]
    agent = world["agent"]
    agent.catch_up()
    grants = [g for g in agent.projections.grants.values() if g.tool_call_id == "call-1"]
    assert len(grants) == 1


def test_approval_of_an_expired_request_shows_a_clear_message(tmp_path: Path) -> None:
    text = SHELL.replace("    grant once ttl 10m\n", "    grant once ttl 10m\n    expires 15m\n", 1)
    assert text != SHELL
    spec = compile_text(tmp_path, text)
    clock = Clock()
    db = tmp_path / "h.db"
    agent = Harness(spec, SQLiteStore(db), clock=clock)
    s = agent.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1")
    call = s.normalize("shell.run", "call-1", {"cmd": "df"})
    assert isinstance(call, PendingCall)
    rid = s.request_approval(call).request_id
    ops = [{"name": n, "roles": ROLES[n], "token_sha256": token_hash(t)} for n, t in TOKENS.items()]
    (tmp_path / "ops.json").write_text(json.dumps({"operators": ops}), encoding="utf-8")
    console = Console(
        Harness(spec, SQLiteStore(db), clock=clock), load_operators(str(tmp_path / "ops.json"))
    )
    client, csrf = login(build_app(console), "alice")
    clock.now += timedelta(minutes=5)
    page = client.get("/approvals").text
    deadline = (Clock().now + timedelta(minutes=15)).isoformat()
    assert f'data-expires-at="{deadline}"' in page and 'data-expires-in-ms="600000"' in page
    assert f"expires {deadline} (10m left)" in page  # the text without JavaScript
    clock.now += timedelta(minutes=10)
    assert client.get("/api/pending").json() == {"pending": []}
    assert rid not in client.get("/approvals").text
    for action, form in (("approve", {}), ("deny", {"reason": "late"})):
        r = client.post(f"/approvals/{rid}/{action}", data={"csrf": csrf, **form})
        assert r.status_code == 409 and "(expired)" in r.text, r.text
        assert f"the approval request `{rid}` expired at {deadline}" in r.text
    edited = {"csrf": csrf, "arguments": json.dumps({"cmd": "du"})}
    r = client.post(f"/approvals/{rid}/edit", data=edited)
    assert r.status_code == 409 and "(expired)" in r.text
    agent.catch_up()
    assert agent.projections.approvals[rid].status == "expired"
    assert client.get("/static/console.js").text.count("data-expires-at") >= 1


def test_sessions_and_a_paged_timeline(world: Any) -> None:
    client, _ = login(world["app"], "carol")
    sid = world["session"].id
    assert sid in client.get("/sessions").text
    first = client.get(f"/sessions/{sid}").text
    assert "session.started" in first and "approval.requested" in first
    assert "ASK shell.run by p.ops: Operators approve each command. (matching: p.ops)" in first
    assert "shell.run call-0: new → REQUESTED" in first
    assert "hunter2" not in first
    # a page starts after a position: the page after the last event is empty
    events = world["agent"].store.read(sid)
    later = client.get(f"/sessions/{sid}?after={events[-2].position}").text
    assert events[-1].type in later and "session.started" not in later
    assert client.get("/sessions/no-such").status_code == 404


def test_the_log_page_verifies_the_chain(world: Any) -> None:
    client, _ = login(world["app"], "carol")
    page = client.get("/log").text
    assert "The hash chain verifies" in page and "Head checkpoint" in page


def test_new_requests_appear_on_the_polled_list(world: Any) -> None:
    client, _ = login(world["app"], "carol")
    s = world["session"]
    call = s.normalize("shell.run", "call-9", {"cmd": "uptime"})
    new = s.request_approval(call).request_id
    assert new in client.get("/api/pending").json()["pending"]
    part = client.get("/approvals?part=1").text
    assert new in part and "<nav>" not in part
    assert "/static/console.js" in client.get("/approvals").text
    assert "api/pending" in client.get("/static/console.js").text


def test_logout_ends_the_session(world: Any) -> None:
    client, csrf = login(world["app"], "carol")
    assert client.post("/logout", data={"csrf": csrf}).status_code == 303
    assert client.get("/api/pending").status_code == 401


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "is not valid"),
        ('{"operators": []}', "non-empty list"),
        ('{"operators": [{"name": "x"}]}', "needs `password_hash`"),
        ('{"operators": [{"name": "x", "roles": "ops", "token_sha256": "a"}]}', "list of strings"),
    ],
)
def test_a_bad_operators_file_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "ops.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(OperatorsError, match=message):
        load_operators(str(path))


def test_operators_come_from_toml_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ops.toml"
    path.write_text(
        f'[[operators]]\nname = "a"\nroles = ["approver"]\ntoken_sha256 = "{token_hash("t")}"\n',
        encoding="utf-8",
    )
    assert load_operators(str(path))["a"].roles == ("approver",)
    monkeypatch.setenv(
        "HARNESSC_CONSOLE_OPERATORS", '{"operators": [{"name": "b", "token_sha256": "x"}]}'
    )
    assert list(load_operators(None)) == ["b"]
    monkeypatch.delenv("HARNESSC_CONSOLE_OPERATORS")
    with pytest.raises(OperatorsError, match="--operators FILE"):
        load_operators(None)


def test_a_workflow_gate_is_decided_as_the_operator(tmp_path: Path) -> None:
    pytest.importorskip("dbos")
    from .test_workflows_support import Worker, compiled, until

    url = f"sqlite:///{tmp_path / 'harness.db'}"
    worker = Worker(tmp_path, url)
    try:
        worker.create("hold", {"base": 4}, id="console-1")
        ops = [
            {"name": "sec", "roles": ["approver", "security"], "token_sha256": token_hash("t1")},
            {"name": "eng", "roles": ["approver", "engineer"], "token_sha256": token_hash("t2")},
        ]
        (tmp_path / "ops.json").write_text(json.dumps({"operators": ops}), encoding="utf-8")
        spec = compiled()
        console = Console(
            Harness(spec, SQLiteStore(tmp_path / "harness.db")),
            load_operators(str(tmp_path / "ops.json")),
            url,
        )
        app = build_app(console)
        client, csrf = login(app, "eng", "t2")

        def gate_shown() -> str | None:
            text = client.get("/workflows").text
            return text if "Gate approve" in text else None

        page = until(gate_shown, what="the gate on the page")
        assert "console-1" in page and "default stop" in page and "deadline" in page
        assert 'value="go"' in page and 'value="stop"' in page
        form = {"csrf": csrf, "gate": "approve", "option": "go"}
        r = client.post("/workflows/console-1/decide", data=form)
        assert r.status_code == 409 and "not-an-approver" in r.text
        client, csrf = login(app, "sec", "t1")
        r = client.post("/workflows/console-1/decide", data=form | {"csrf": csrf})
        assert r.status_code == 200 and "accepted" in r.text
        until(lambda: "completed" in client.get("/workflows").text, what="the run to complete")
    finally:
        worker.kill()


def test_an_approval_gate_shows_its_call_and_leaves_nothing_pending(tmp_path: Path) -> None:
    pytest.importorskip("dbos")
    from .test_workflows_support import Worker, compiled, until

    url = f"sqlite:///{tmp_path / 'harness.db'}"
    worker = Worker(tmp_path, url)
    try:
        worker.create("ship", {"base": 21}, id="console-ship")
        ops = [{"name": "rm", "roles": ["approver", "release-manager"], "token_sha256": "x"}]
        ops[0]["token_sha256"] = token_hash("t3")
        (tmp_path / "ops.json").write_text(json.dumps({"operators": ops}), encoding="utf-8")
        console = Console(
            Harness(compiled(), SQLiteStore(tmp_path / "harness.db")),
            load_operators(str(tmp_path / "ops.json")),
            url,
        )
        app = build_app(console)
        client, csrf = login(app, "rm", "t3")

        def gate_shown() -> str | None:
            text = client.get("/workflows").text
            return text if "Gate release.approval" in text else None

        page = until(gate_shown, what="the approval gate on the page")
        gate = page[page.index("Gate release.approval") :]
        # the question's names as code, not backticks; the frozen call and its review
        assert "Approve this call of <code>job.ship</code>?" in gate
        assert re.search(r"<dt>Arguments</dt><dd><pre>\{\s*\"n\": 21\s*\}</pre>", gate)
        [request_id] = re.findall(r"<dt>Request</dt><dd><code>(apr-[0-9a-f]+)</code>", gate)
        assert "Against the closest earlier call" in gate
        assert request_id in client.get("/api/pending").json()["pending"]
        # on the queue, the gate's request is decided at the gate, not by its own buttons
        queue_page = client.get("/approvals").text
        mine = queue_page[queue_page.index(f'id="{request_id}"') :]
        assert "decide it at its gate <code>release.approval</code>" in mine
        assert f'action="/approvals/{request_id}/approve"' not in queue_page
        r = client.post(f"/approvals/{request_id}/approve", data={"csrf": csrf})
        assert r.status_code == 409 and "Workflows page" in r.text
        form = {"csrf": csrf, "gate": "release.approval", "option": "approve"}
        r = client.post("/workflows/console-ship/decide", data=form)
        assert r.status_code == 200 and "accepted" in r.text

        def ended() -> bool:  # the worker binds no executor to job.ship: the call fails
            text = client.get("/workflows").text
            return "— completed" in text or "— failed" in text

        until(ended, what="the run to end")
        # the gate's request is closed: nothing of the run is left to approve
        assert client.get("/api/pending").json()["pending"] == []
    finally:
        worker.kill()


def test_the_command_hashes_a_password_and_refuses_without_its_inputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    from harnessc.compiler.cli import main
    from harnessc.compiler.console.auth import verify_password

    monkeypatch.setattr("sys.stdin", io.StringIO("s3cret\n"))
    assert main(["console", "--hash-password"]) == 0
    assert verify_password("s3cret", capsys.readouterr().out.strip())
    assert main(["console", "--log", str(tmp_path / "h.db")]) == 2
    assert "needs --log LOG and --spec SPEC" in capsys.readouterr().err
    monkeypatch.delenv("HARNESSC_CONSOLE_OPERATORS", raising=False)
    assert main(["console", "--log", str(tmp_path / "h.db"), "--spec", "x.harness"]) == 2
    assert "no operators" in capsys.readouterr().err


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def confirm(page: Any, selector: str) -> None:
    """Click a button that acts on its second click: the first arms it (`data-confirm`)."""
    page.click(selector)
    page.click(selector)


@pytest.fixture
def served(world: dict[str, Any]) -> Iterator[str]:
    """The console on a real socket (uvicorn in a thread), for a browser."""
    yield from serve(world["app"])


def serve(app: Any) -> Iterator[str]:
    """Serve `app` on a free local port until the generator is closed; yields its URL."""
    import socket

    import uvicorn

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the console did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:  # also when the generator is closed
        server.should_exit = True
        thread.join(timeout=30)


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on this machine (.ci/run installs it)")
def test_in_a_browser_an_operator_logs_in_sees_a_new_request_appear_and_approves_it_and_an_edit(
    world: dict[str, Any], served: str
) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto(f"{served}/approvals")
            assert page.url.endswith("/login")
            page.fill("input[name=name]", "alice")
            page.fill("input[name=password]", TOKENS["alice"])
            page.click("button:has-text('Log in')")
            page.wait_for_url(f"{served}/approvals")
            for rid in world["requests"]:
                assert page.locator(f"section#{rid}").is_visible()
            # a request asked after the page loaded appears without a reload
            s = world["session"]
            new = s.request_approval(s.normalize("shell.run", "call-7", {"cmd": "w"})).request_id
            page.wait_for_selector(f"section#{new}", timeout=20_000)
            confirm(page, f"section#{new} >> button:has-text('Approve')")
            page.wait_for_selector("text=Done")
            assert f"`{new}`: approved" in page.inner_text("p.message")
            # approve another with an edited argument
            plain = world["requests"][1]
            page.goto(f"{served}/approvals")
            page.click(f"section#{plain} >> summary")
            page.fill(f"section#{plain} >> textarea[name=arguments]", '{"cmd": "df -h"}')
            confirm(page, f"section#{plain} >> button:has-text('Approve edited call')")
            page.wait_for_selector("text=Done")
            assert "as the edited call" in page.inner_text("p.message")
            page.goto(f"{served}/sessions/{s.id}")
            assert "superseded by alice" in page.inner_text("table.timeline")
        finally:
            browser.close()
    world["agent"].catch_up()
    assert world["agent"].projections.approvals[new].by == "alice"
    assert world["session"].call("call-1").args == {"cmd": "df -h"}


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on this machine (.ci/run installs it)")
def test_in_a_browser_a_request_counts_down_to_its_deadline_and_then_is_refused(
    tmp_path: Path,
) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    text = SHELL.replace("    grant once ttl 10m\n", "    grant once ttl 10m\n    expires 1h\n", 1)
    spec = compile_text(tmp_path, text)
    db = tmp_path / "h.db"
    clock = Clock()
    agent = Harness(spec, SQLiteStore(db), clock=clock)
    s = agent.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1")
    call = s.normalize("shell.run", "call-1", {"cmd": "df"})
    assert isinstance(call, PendingCall)
    ops = [{"name": "alice", "roles": ROLES["alice"], "token_sha256": token_hash(TOKENS["alice"])}]
    (tmp_path / "ops.json").write_text(json.dumps({"operators": ops}), encoding="utf-8")
    console = Console(Harness(spec, SQLiteStore(db)), load_operators(str(tmp_path / "ops.json")))
    server = serve(build_app(console))
    url = next(server)
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                page = browser.new_page()
                page.goto(f"{url}/login")
                page.fill("input[name=name]", "alice")
                page.fill("input[name=password]", TOKENS["alice"])
                page.click("button:has-text('Log in')")
                page.wait_for_url(f"{url}/approvals")
                # asked once the browser is up (its start is slow on a busy machine): the agent
                # asked almost an hour ago, 20 seconds are left
                clock.now = datetime.now(UTC) - timedelta(hours=1) + timedelta(seconds=20)
                rid = s.request_approval(call).request_id
                page.goto(f"{url}/approvals")
                expiry = page.locator(f"section#{rid} .expiry")
                assert " left)" in expiry.inner_text()
                assert expiry.get_attribute("data-deadline")  # the script counts it down
                # a form being filled is never replaced by the list's refresh, so the request
                # stays on the page past its deadline, where the script says it expired
                page.locator(f"section#{rid} input[name=reason]").first.focus()
                # (a locator, not a script: the page's CSP refuses scripts built from strings)
                page.locator(f"#{rid} .expiry", has_text="expired").wait_for(timeout=60_000)
                confirm(page, f"section#{rid} >> button:has-text('Approve')")
                page.wait_for_selector("text=Not approved (expired)")
                assert f"`{rid}` expired at" in page.inner_text("p.message")
            finally:
                browser.close()
    finally:
        server.close()
    agent.catch_up()
    assert agent.projections.approvals[rid].status == "expired"


def test_a_session_archived_by_a_compaction_is_said_to_be_archived(tmp_path: Path) -> None:
    from harnessc.runtime.log.cut import compact

    spec = compile_text(tmp_path, SHELL)
    db = tmp_path / "h.db"
    agent = Harness(spec, SQLiteStore(db))
    done = agent.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1")
    done.end()
    agent.store.flush()
    compact(agent.store, before=agent.store.head()[0], archive=tmp_path / "old.jsonl")
    ops = [{"name": n, "roles": ROLES[n], "token_sha256": token_hash(t)} for n, t in TOKENS.items()]
    (tmp_path / "ops.json").write_text(json.dumps({"operators": ops}), encoding="utf-8")
    console = Console(Harness(spec, SQLiteStore(db)), load_operators(str(tmp_path / "ops.json")))
    client, _ = login(build_app(console), "carol")
    page = client.get(f"/sessions/{done.id}")
    assert page.status_code == 404
    assert "Archived or unknown session" in page.text and "old.jsonl" in page.text
