"""`harnessc gateway` end to end: the real command, started as an MCP server, in front of two
upstream MCP servers written with the SDK (tests/mcp_servers/scanner.py and tracker.py), driven
by the Python SDK's client over stdio and streamable HTTP. What a client may see and call is
the spec's; ALLOW reaches the upstream, DENY never does, an ASK waits for a person (answered in
the console), and the approval covers the exact call once, across a restart of the gateway."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from harnessc.compiler.gateway_cli import token_digest
from harnessc.compiler.pipeline import check
from harnessc.runtime import Harness
from harnessc.runtime.integrations.gateway import SEARCH_TOOL, session_id_of
from harnessc.runtime.log.store import SQLiteStore
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from .gateway_support import CLOSE, ISSUE, OPS, SCAN, TICKET, write_spec

HIGH = {"title": "db down", "severity": "high"}
ROOT = Path(__file__).resolve().parent.parent
DEV = {"user": "u-1", "role": "dev"}


def gateway_argv(spec: Path, log: Path, *extra: str) -> list[str]:
    return [
        "-m",
        "harnessc.compiler",
        "gateway",
        str(spec),
        "--log",
        str(log),
        *extra,
    ]


@asynccontextmanager
async def stdio_gateway(
    spec: Path, log: Path, *extra: str, client: dict[str, Any] | None = None
) -> AsyncIterator[Any]:
    argv = gateway_argv(spec, log, "--client", json.dumps(client or DEV), *extra)
    params = StdioServerParameters(command=sys.executable, args=argv, cwd=str(ROOT))
    async with Client(stdio_client(params), read_timeout_seconds=60) as c:
        yield c


def ledger_of(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def harnessc_of(ticket: Any) -> dict[str, Any]:
    assert ticket.structured_content is not None, ticket
    return ticket.structured_content["harnessc"]  # type: ignore[no-any-return]


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    ledger = tmp_path / "tracker.jsonl"
    return {
        "spec": write_spec(tmp_path, ledger=ledger),
        "log": tmp_path / "gateway.db",
        "ledger": ledger,
        "tmp": tmp_path,
    }


def operator(world: dict[str, Path]) -> Harness:
    """Another process on the gateway's log, as `harnessc approvals` or the console opens it."""
    result = check([world["spec"]])
    assert result.ok and result.model is not None
    return Harness(result.model, SQLiteStore(world["log"]))


def test_a_client_sees_and_runs_only_what_the_spec_allows(world: dict[str, Path]) -> None:
    async def go() -> None:
        async with stdio_gateway(world["spec"], world["log"], "--ask-wait", "0") as c:
            names = sorted(t.name for t in (await c.list_tools()).tools)
            # on the surface and available; never the declared-but-hidden `close_ticket`, nor
            # what the upstream servers offer beyond the spec (`drop_project`, `slow`, `crash`)
            assert names == sorted([ISSUE, "mcp__scanner__rotate", SCAN, TICKET, SEARCH_TOOL])
            allowed = await c.call_tool(SCAN, {"target": "billing"})
            assert not allowed.is_error
            assert allowed.structured_content == {
                "report": "no findings in billing; contact owner@vendor.example"
            }
            low = await c.call_tool(TICKET, {"title": "typo", "severity": "low"})
            assert not low.is_error and low.structured_content["ticket"] == "T-4"
            denied = await c.call_tool(ISSUE, {"title": "SECRET key in repo"})
            assert denied.is_error
            assert harnessc_of(denied) == {
                "decision": "deny",
                "rule": "desk.secret",
                "reason": "Findings marked SECRET are never filed in the public tracker.",
            }
            for name, args in ((CLOSE, {"ticket": "T-1"}), ("drop_project", {"name": "x"})):
                hidden = await c.call_tool(name, args)
                assert hidden.is_error and harnessc_of(hidden)["code"] == "unknown-tool"
                assert harnessc_of(hidden)["reason"] == f"no tool `{name}` is offered here"
            bad = await c.call_tool(TICKET, {"title": "x"})
            assert bad.is_error and harnessc_of(bad)["code"] == "invalid-args"

    asyncio.run(go())
    # only the allowed ticket reached the tracker
    assert ledger_of(world["ledger"]) == [
        {"tool": "open_ticket", "args": {"title": "typo", "severity": "low"}}
    ]
    h = operator(world)
    sid = session_id_of("gw.assistant", DEV)
    s = h.resume(sid)
    evidence = s.evidence()
    assert [i.tool_id for i in evidence.succeeded()] == [
        "mcp:scanner:tool:scan",
        "mcp:tracker:tool:open_ticket",
    ]
    decisions = [e.payload["effect"] for e in h.store.read(sid) if e.type == "decision"]
    assert decisions == ["allow", "allow", "deny"]
    assert h.verify().ok


def test_an_ask_waits_with_progress_then_the_exact_call_runs_once(
    world: dict[str, Path],
) -> None:
    async def go() -> None:
        async with stdio_gateway(
            world["spec"], world["log"], "--ask-wait", "1.5", "--progress-every", "0.3"
        ) as c:
            seen: list[tuple[float, float | None, str | None]] = []

            async def progress(done: float, total: float | None, message: str | None) -> None:
                seen.append((done, total, message))

            asked = await c.call_tool(TICKET, HIGH, progress_callback=progress)
            assert asked.is_error
            pending = harnessc_of(asked)
            assert (pending["decision"], pending["status"]) == ("ask", "pending")
            rid = pending["request_id"]
            assert pending["rule"] == "desk.high" and pending["expires_at"]
            assert pending["tool"] == "mcp:tracker:tool:open_ticket"
            assert pending["policy_version"] == operator(world).policy_version
            assert len(pending["input_hash"]) == 64
            assert len(seen) >= 3, seen
            assert all(total == 1.5 and rid in (m or "") for _, total, m in seen)
            assert [d for d, _, _ in seen] == sorted(d for d, _, _ in seen)
            # asking again before anyone answered is the same request, not a second one
            again = await c.call_tool(TICKET, HIGH)
            assert harnessc_of(again)["request_id"] == rid
            assert ledger_of(world["ledger"]) == []

            # an operator approves (another process on the same log)
            h = operator(world)
            outcome = h.approve(rid, by=OPS)
            assert outcome.status == "approved" and outcome.grant is not None
            assert outcome.grant.scope == "once" and outcome.grant.input_hash

            # another argument does not ride the approval: a new request
            other = await c.call_tool(TICKET, {"title": "db down!", "severity": "high"})
            assert harnessc_of(other)["status"] == "pending"
            assert harnessc_of(other)["request_id"] != rid
            # the exact call runs, once
            ran = await c.call_tool(TICKET, HIGH)
            assert not ran.is_error and ran.structured_content["severity"] == "high"
            assert ledger_of(world["ledger"]) == [{"tool": "open_ticket", "args": HIGH}]
            # and sent once more, it is a new call that asks again
            later = await c.call_tool(TICKET, HIGH)
            assert harnessc_of(later)["status"] == "pending"
            assert harnessc_of(later)["request_id"] not in (rid, harnessc_of(other)["request_id"])

    asyncio.run(go())
    assert len(ledger_of(world["ledger"])) == 1


def test_an_approval_given_while_the_call_waits_runs_it_in_the_same_call(
    world: dict[str, Path],
) -> None:
    approved: list[str] = []

    def approve_when_asked() -> None:
        h = operator(world)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            h.catch_up()
            waiting = [r for r in h.approvals.requests.values() if r.status == "pending"]
            if waiting:
                h.approve(waiting[0].request_id, by=OPS)
                approved.append(waiting[0].request_id)
                return
            time.sleep(0.1)

    async def go() -> Any:
        async with stdio_gateway(world["spec"], world["log"], "--ask-wait", "30") as c:
            await c.list_tools()
            answering = threading.Thread(target=approve_when_asked)
            answering.start()
            try:
                return await c.call_tool(TICKET, HIGH)
            finally:
                answering.join()

    result = asyncio.run(go())
    assert approved and not result.is_error, result
    assert result.structured_content["title"] == "db down"
    assert ledger_of(world["ledger"]) == [{"tool": "open_ticket", "args": HIGH}]


def test_a_denial_is_the_answer_to_the_exact_call(world: dict[str, Path]) -> None:
    async def go() -> None:
        async with stdio_gateway(world["spec"], world["log"], "--ask-wait", "0") as c:
            rid = harnessc_of(await c.call_tool(TICKET, HIGH))["request_id"]
            operator(world).deny(rid, by=OPS, reason="not at 3 am")
            denied = await c.call_tool(TICKET, HIGH)
            assert denied.is_error
            shown = harnessc_of(denied)
            assert (shown["decision"], shown["request_id"]) == ("deny", rid)
            assert "not at 3 am" in shown["reason"]

    asyncio.run(go())
    assert ledger_of(world["ledger"]) == []


def test_an_approval_survives_a_restart_of_the_gateway(world: dict[str, Path]) -> None:
    async def ask() -> str:
        async with stdio_gateway(world["spec"], world["log"], "--ask-wait", "0") as c:
            return str(harnessc_of(await c.call_tool(TICKET, HIGH))["request_id"])

    rid = asyncio.run(ask())  # the gateway stops with its client
    assert operator(world).approve(rid, by=OPS).status == "approved"

    async def retry() -> tuple[Any, Any]:
        async with stdio_gateway(world["spec"], world["log"], "--ask-wait", "0") as c:
            changed = await c.call_tool(TICKET, {**HIGH, "title": "db down again"})
            return changed, await c.call_tool(TICKET, HIGH)

    changed, ran = asyncio.run(retry())
    assert harnessc_of(changed)["status"] == "pending"
    assert not ran.is_error and ran.structured_content["title"] == "db down"
    assert ledger_of(world["ledger"]) == [{"tool": "open_ticket", "args": HIGH}]
    # another client identity does not ride the approval either
    other = {"user": "u-2", "role": "dev"}

    async def elsewhere() -> Any:
        async with stdio_gateway(world["spec"], world["log"], "--ask-wait", "0", client=other) as c:
            return await c.call_tool(TICKET, HIGH)

    assert harnessc_of(asyncio.run(elsewhere()))["status"] == "pending"
    assert len(ledger_of(world["ledger"])) == 1


def test_the_console_answers_the_gateways_ask_and_shows_its_session(
    world: dict[str, Path],
) -> None:
    from harnessc.compiler.console.app import Console, build_app
    from harnessc.compiler.console.auth import load_operators, token_hash
    from starlette.testclient import TestClient

    ops = world["tmp"] / "ops.json"
    ops.write_text(
        json.dumps(
            {
                "operators": [
                    {"name": "u-ops", "roles": ["approver", "ops"], "token_sha256": token_hash("t")}
                ]
            }
        ),
        encoding="utf-8",
    )

    async def go() -> None:
        async with stdio_gateway(world["spec"], world["log"], "--ask-wait", "0") as c:
            rid = harnessc_of(await c.call_tool(TICKET, HIGH))["request_id"]
            console = Console(operator(world), load_operators(str(ops)))
            browser = TestClient(build_app(console), follow_redirects=False)
            assert (
                browser.post("/login", data={"name": "u-ops", "password": "t"}).status_code == 303
            )
            page = browser.get("/approvals").text
            assert rid in page and "mcp:tracker:tool:open_ticket" in page
            csrf = re.search(r'name="csrf" value="([^"]+)"', page)
            assert csrf is not None
            answer = browser.post(f"/approvals/{rid}/approve", data={"csrf": csrf.group(1)})
            assert answer.status_code == 200 and "approved" in answer.text
            ran = await c.call_tool(TICKET, HIGH)
            assert not ran.is_error, ran
            sid = session_id_of("gw.assistant", DEV)
            assert sid in browser.get("/sessions").text
            timeline = browser.get(f"/sessions/{sid}").text
            assert "mcp:tracker:tool:open_ticket" in timeline and rid in timeline

    asyncio.run(go())
    assert ledger_of(world["ledger"]) == [{"tool": "open_ticket", "args": HIGH}]


def test_an_upstream_that_is_down_or_drifted_fails_closed(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, tracker="harnessc-no-such-mcp-server")
    drifted = spec.read_text(encoding="utf-8").replace("scanner.py", "scanner.py --drift")
    spec.write_text(drifted, encoding="utf-8")

    async def go() -> None:
        async with stdio_gateway(spec, tmp_path / "g.db", "--ask-wait", "0") as c:
            names = {t.name for t in (await c.list_tools()).tools}
            # the tracker is down: none of its tools; `scan` drifted: not it either
            assert names == {ISSUE, "mcp__scanner__rotate", SEARCH_TOOL}
            for name, args in (
                (TICKET, {"title": "x", "severity": "low"}),
                (SCAN, {"target": "a"}),
            ):
                refused = await c.call_tool(name, args)
                assert refused.is_error and harnessc_of(refused)["code"] == "unavailable", refused
            search = await c.call_tool(SEARCH_TOOL, {"query": "open a ticket in the tracker"})
            assert TICKET not in search.content[0].text  # type: ignore[union-attr]

    asyncio.run(go())


def test_an_upstream_list_change_is_followed_and_told(world: dict[str, Path]) -> None:
    told = asyncio.Event()

    async def on_message(message: Any) -> None:  # the handshake era's notification
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            told.set()

    async def listen(c: Any) -> None:  # the 2026-07-28 era's subscriptions/listen
        async with c.listen(tools_list_changed=True) as subscription:
            async for _ in subscription:
                told.set()

    async def go() -> None:
        argv = gateway_argv(world["spec"], world["log"], "--client", json.dumps(DEV))
        params = StdioServerParameters(command=sys.executable, args=argv, cwd=str(ROOT))
        async with Client(
            stdio_client(params), read_timeout_seconds=60, message_handler=on_message
        ) as c:
            from mcp_types.version import MODERN_PROTOCOL_VERSIONS

            listener = None
            if c.protocol_version in MODERN_PROTOCOL_VERSIONS:
                listener = asyncio.create_task(listen(c))
                await asyncio.sleep(0.5)  # the subscription is acknowledged
            assert ISSUE in {t.name for t in (await c.list_tools()).tools}
            assert not told.is_set()
            assert not (await c.call_tool("mcp__scanner__rotate", {})).is_error
            await asyncio.wait_for(told.wait(), 20)
            assert ISSUE not in {t.name for t in (await c.list_tools()).tools}
            gone = await c.call_tool(ISSUE, {"title": "CVE-1"})
            assert gone.is_error and harnessc_of(gone)["code"] == "unavailable"
            if listener is not None:
                listener.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await listener

    asyncio.run(go())
    h = operator(world)
    changes = [
        e.payload
        for e in h.store.read(session_id_of("gw.assistant", DEV))
        if e.type == "mcp.tools_changed"
    ]
    assert any("create-issue" in c["removed"] for c in changes)


SEARCH_SPEC = """
harness search { version "1.0.0" }
mcp tracker {
  transport stdio "{tracker}"
  tool open_ticket {
    summary "Open a ticket in the tracker."
    effects write
    input { title: string, severity: string }
  }
  tool close_ticket {
    summary "Close a ticket in the tracker."
    effects write
    input { ticket: string }
  }
  tool drop_project {
    summary "Delete a whole tracker project and its tickets."
    effects write
    input { name: string }
  }
}
mcp scanner {
  transport stdio "{scanner}"
  tool scan {
    summary "Scan the tracker's repository."
    effects read
    input { target: string, depth: int }
  }
  tool "create-issue" {
    summary "File a ticket in the tracker as an issue."
    effects write
    input { title: string }
  }
}
tool local.tickets { summary "List tracker tickets kept locally."; effects read; input {} }
policy p { default deny; allow mcp:* }
surface s {
  expose mcp:tracker:tool:open_ticket, mcp:scanner:*, local.tickets
  limit 2
}
agent a { surface s; policy p }
"""


def test_search_names_only_tools_the_client_may_see(tmp_path: Path) -> None:
    py = sys.executable
    here = Path(__file__).parent / "mcp_servers"
    text = SEARCH_SPEC.replace("{tracker}", f"{py} {here / 'tracker.py'}").replace(
        "{scanner}", f"{py} {here / 'scanner.py'}"
    )
    spec = tmp_path / "search.harness"
    spec.write_text(text, encoding="utf-8")
    queries = [
        "close the ticket",
        "delete the tracker project",
        "scan the repository",
        "tickets kept locally",
        "open a ticket",
        "tracker",
    ]

    async def go() -> tuple[set[str], list[list[str]]]:
        async with stdio_gateway(spec, tmp_path / "s.db") as c:
            listed = {t.name for t in (await c.list_tools()).tools} - {SEARCH_TOOL}
            found = []
            for q in queries:
                answer = await c.call_tool(SEARCH_TOOL, {"query": q})
                assert not answer.is_error
                found.append([t["name"] for t in answer.structured_content["tools"]])
            return listed, found

    listed, found = asyncio.run(go())
    # close_ticket and drop_project are declared but off the surface, `scan`'s schema drifted
    # from the declaration (the server takes no `depth`), local.tickets has no upstream
    assert listed == {TICKET, ISSUE}
    leaked = [n for names in found for n in names if n not in listed]
    assert leaked == []
    assert any(names for names in found)  # the search answers, within what is listed
    assert all(len(names) <= 2 for names in found)  # the surface's limit


# -- streamable HTTP ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def http_gateway(world: dict[str, Path]) -> Iterator[tuple[str, dict[str, Path]]]:
    clients = world["tmp"] / "clients.json"
    clients.write_text(
        json.dumps(
            {
                token_digest("tok-1"): {"user": "u-1", "role": "dev"},
                token_digest("tok-2"): {"user": "u-2", "role": "dev"},
            }
        ),
        encoding="utf-8",
    )
    port = free_port()
    argv = gateway_argv(world["spec"], world["log"], "--transport", "http", "--port", str(port))
    argv += ["--clients", str(clients), "--ask-wait", "0.5", "--progress-every", "0.1"]
    errors = world["tmp"] / "gateway.err"
    with errors.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, *argv], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err
        )
        try:
            wait_for_port(port, proc, errors)
            yield f"http://127.0.0.1:{port}/mcp", world
        finally:
            proc.terminate()
            proc.wait(20)


def wait_for_port(
    port: int, proc: subprocess.Popen[bytes], errors: Path, seconds: float = 60
) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                said = errors.read_text(encoding="utf-8", errors="replace")
                raise RuntimeError(f"the gateway did not start: {said}") from None
            time.sleep(0.1)


@asynccontextmanager
async def http_client(url: str, token: str) -> AsyncIterator[Any]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        create_mcp_http_client(headers=headers) as hc,
        Client(streamable_http_client(url, http_client=hc), read_timeout_seconds=60) as c,
    ):
        yield c


def status_of(url: str, token: str | None) -> int:
    """The HTTP status of an `initialize` sent with this token (none: no header)."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "0"},
        },
    }
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        error.close()
        return int(error.code)


def test_over_http_each_client_is_known_by_its_token(
    http_gateway: tuple[str, dict[str, Path]],
) -> None:
    url, world = http_gateway
    assert status_of(url, None) == 401
    assert status_of(url, "tok-unknown") == 401
    assert status_of(url, "tok-1") == 200

    async def go() -> None:
        async with http_client(url, "tok-1") as c:
            assert SCAN in {t.name for t in (await c.list_tools()).tools}
            assert not (await c.call_tool(SCAN, {"target": "billing"})).is_error
            seen: list[float] = []

            async def progress(done: float, total: float | None, message: str | None) -> None:
                seen.append(done)

            asked = await c.call_tool(TICKET, HIGH, progress_callback=progress)
            assert harnessc_of(asked)["status"] == "pending" and seen
            rid = harnessc_of(asked)["request_id"]
        operator(world).approve(rid, by=OPS)
        async with http_client(url, "tok-2") as c:  # not the client that asked
            assert harnessc_of(await c.call_tool(TICKET, HIGH))["status"] == "pending"
        async with http_client(url, "tok-1") as c:  # the one that asked, on a new connection
            ran = await c.call_tool(TICKET, HIGH)
            assert not ran.is_error, ran

    asyncio.run(go())
    assert ledger_of(world["ledger"]) == [{"tool": "open_ticket", "args": HIGH}]
    h = operator(world)
    h.catch_up()
    started = {sid for sid, v in h.projections.sessions.items() if v.started_at is not None}
    assert {session_id_of("gw.assistant", {"user": u}) for u in ("u-1", "u-2")} <= started


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harnessc.compiler", "gateway", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_bad_arguments_are_said_not_served(world: dict[str, Path], tmp_path: Path) -> None:
    spec = str(world["spec"])
    cases: list[tuple[tuple[str, ...], Callable[[str], bool]]] = [
        ((spec, "--transport", "http"), lambda e: "needs --clients FILE" in e),
        ((spec, "--client", "not json"), lambda e: "--client is not JSON" in e),
        ((spec, "--client", '{"role": "x"}'), lambda e: "needs" in e or "`user`" in e),
        ((spec, "--agent", "nobody"), lambda e: "declares no agent `nobody`" in e),
    ]
    bad = tmp_path / "clients.json"
    bad.write_text('{"plain-token": {"user": "u"}}', encoding="utf-8")
    cases.append(
        ((spec, "--transport", "http", "--clients", str(bad)), lambda e: "sha256:HEX" in e)
    )
    nolog = tmp_path / "not-a-log.db"
    nolog.write_text("hello", encoding="utf-8")
    cases.append(((spec, "--log", str(nolog)), lambda e: "harnessc:" in e))
    for args, said in cases:
        done = run_cli(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert said(done.stderr) and "Traceback" not in done.stderr, (args, done.stderr)


def test_a_request_past_its_expiry_is_not_the_calls_any_more(world: dict[str, Path]) -> None:
    """In process, on a clock the test moves: the same call sent after its request expired
    asks anew, and the old request is recorded expired (it can no longer be approved)."""
    from harnessc.runtime.integrations.gateway import Gateway
    from harnessc.runtime.integrations.mcp_client import McpConnection

    from .test_approvals import Clock

    result = check([world["spec"]])
    assert result.ok and result.model is not None
    clock = Clock()
    h = Harness(result.model, SQLiteStore(world["log"]), clock=clock)
    conns = {
        name: McpConnection(h, name, disclaimer_accepted=True, agent_access=True).open()
        for name in result.model.mcp_servers
    }
    try:
        gateway = Gateway(h, "assistant", conns, ask_wait_s=0)
        s = gateway.session(DEV)
        first = asyncio.run(gateway.call(s, TICKET, HIGH))
        rid = first.structured["harnessc"]["request_id"]  # type: ignore[index]
        again = asyncio.run(gateway.call(s, TICKET, HIGH))
        assert again.structured["harnessc"]["request_id"] == rid  # type: ignore[index]
        clock.now += timedelta(hours=2)  # past `expires 1h`
        later = asyncio.run(gateway.call(s, TICKET, HIGH))
        assert later.outcome == "pending"
        assert later.structured["harnessc"]["request_id"] != rid  # type: ignore[index]
        h.expire_approvals()
        assert h.approvals.get(rid).status == "expired"
    finally:
        for conn in conns.values():
            conn.close()
    assert ledger_of(world["ledger"]) == []


def test_the_same_call_sent_twice_at_once_opens_one_request(world: dict[str, Path]) -> None:
    """Two identical ASK calls from one client at the same moment: one request, and both
    answers name it (the second is judged after the first, and finds its request)."""
    from harnessc.runtime.integrations.gateway import Gateway
    from harnessc.runtime.integrations.mcp_client import McpConnection

    result = check([world["spec"]])
    assert result.ok and result.model is not None
    h = Harness(result.model, SQLiteStore(world["log"]))
    conns = {
        name: McpConnection(h, name, disclaimer_accepted=True, agent_access=True).open()
        for name in result.model.mcp_servers
    }
    try:
        gateway = Gateway(h, "assistant", conns, ask_wait_s=0)
        s = gateway.session(DEV)

        async def twice() -> list[Any]:
            return list(await asyncio.gather(*(gateway.call(s, TICKET, HIGH) for _ in "ab")))

        answers = asyncio.run(twice())
        assert [a.outcome for a in answers] == ["pending", "pending"]
        ids = {a.structured["harnessc"]["request_id"] for a in answers}  # type: ignore[index]
        asked = [r for r in h.approvals.requests.values() if r.session_id == s.id]
        assert len(ids) == 1 and [r.request_id for r in asked] == list(ids)
        assert not gateway._same  # nothing left behind once both are answered
    finally:
        for conn in conns.values():
            conn.close()
    assert ledger_of(world["ledger"]) == []
