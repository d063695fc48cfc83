"""A live MCP connection against real servers written with the SDK (tests/mcp_servers/): the
state availability reads comes from the server, a changed tool list changes availability while
the session runs, a drifted schema makes a tool unavailable, and an allowed call runs through
the SDK with its timeout and comes back untrusted."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from harnessc.runtime import Harness, PendingCall
from harnessc.runtime.integrations.mcp_client import McpConnection, McpEndpoint, McpError, discover
from harnessc.runtime.log.events import MCP_TOOLS_CHANGED
from harnessc.runtime.model import Spec

from .test_approvals import compile_text

SERVER = Path(__file__).parent / "mcp_servers" / "scanner.py"
STDIO = f"{sys.executable} {SERVER}"

SPEC = """
harness live { version "1.0.0" }

mcp scanner {
  transport stdio "sec-scan-mcp --json"
  tool scan {
    summary "Scan a repository for known vulnerabilities."
    effects read
    timeout 20s
    trust trusted  # the spec's word; an external server's result stays untrusted
    input { target: string }
    output { report: string }
  }
  tool "create-issue" {
    summary "File a finding as an issue."
    effects external
    input { title: string }
  }
  tool audit {
    summary "Audit a repository."
    effects read
    input { repo: string, strict: bool default false }
  }
  tool slow { summary "Sleep, then answer."; effects read; timeout 1s; input { seconds: float } }
  tool broken { summary "Fail."; effects read; input { reason: string } }
  tool rotate { summary "Change the tool list."; effects write; input {} }
  tool crash { summary "Stop the server."; effects write; input {} }
}

tool mail.send { summary "Send a mail."; effects external; input { to: string } }

policy p {
  default deny
  allow mcp:scanner:*
  outside: deny mail.send when args.to from untrusted only {
    reason "The address appeared only in content written outside the team."
  }
  allow mail.send
}

surface s { expose mcp:scanner:*, mail.send }
agent planner { surface s; policy p }
"""

SCAN = "mcp:scanner:tool:scan"
ISSUE = "mcp:scanner:tool:create-issue"
AUDIT = "mcp:scanner:tool:audit"


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Spec:
    return compile_text(tmp_path_factory.mktemp("live"), SPEC)


def connect(h: Harness, **options: object) -> McpConnection:
    options.setdefault("command", STDIO)
    return McpConnection(
        h, "scanner", disclaimer_accepted=True, agent_access=True, timeout_s=30, **options
    ).open()  # type: ignore[arg-type]


def frozen(result: object) -> PendingCall:
    assert isinstance(result, PendingCall), result
    return result


def eventually(check_: Callable[[], bool], what: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not check_():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {seconds} s")
        time.sleep(0.05)


def run(h: Harness, s: object, tool: str, call_id: str, args: dict[str, object]) -> object:
    call = frozen(s.normalize(tool, call_id, args))  # type: ignore[attr-defined]
    s.decide(call)  # type: ignore[attr-defined]
    return s.invoke(call)  # type: ignore[attr-defined]


def test_a_live_stdio_server_feeds_availability_and_runs_allowed_calls(spec: Spec) -> None:
    h = Harness(spec)
    with connect(h) as conn:
        assert conn.error is None
        state = conn.state
        assert state.connected and state.transport_valid
        assert set(state.discovered) >= {"scan", "create-issue", "slow", "rotate"}
        # annotations are kept as the server's hints, never as effects
        assert conn.tools["scan"].annotations["readOnlyHint"] is True
        s = h.session("planner", actor={"user": "u-1"})
        conn.attach(s)
        assert s.tool_availability(SCAN).available
        # `audit` is declared but the server does not list it (yet)
        assert "did not discover the tool `audit`" in (s.tool_availability(AUDIT).reason or "")
        result = run(h, s, SCAN, "call-1", {"target": "billing"})
        assert result.ok and result.ran, result  # type: ignore[attr-defined]
        assert result.data == {  # type: ignore[attr-defined]
            "report": "no findings in billing; contact owner@vendor.example"
        }
        assert result.executor == "mcp:scanner:scan"  # type: ignore[attr-defined]
        # the result is untrusted (whatever the spec says): an address only the scanner's
        # report named is refused
        decision = s.decide(
            frozen(s.normalize("mail.send", "call-2", {"to": "owner@vendor.example"}))
        )
        assert (decision.effect, decision.rule) == ("deny", "p.outside")
        assert s.ledger.index.kinds_of("owner@vendor.example") == frozenset({"untrusted"})
        allowed = s.decide(frozen(s.normalize("mail.send", "call-3", {"to": "me@corp.example"})))
        assert allowed.effect == "allow"
    # closed: the server's tools are unavailable, and the session was told
    assert not conn.state.connected
    assert "is not connected" in (s.tool_availability(SCAN).reason or "")
    causes = [e.payload["cause"] for e in h.store.read(s.id) if e.type == MCP_TOOLS_CHANGED]
    assert causes == ["attached", "disconnected"]
    evidence = s.evidence()  # the session's record reads as any other's
    assert [i.tool_id for i in evidence.succeeded()] == [SCAN]
    assert h.verify().ok


def test_a_changed_tool_list_changes_availability_while_the_session_runs(spec: Spec) -> None:
    h = Harness(spec)
    with connect(h) as conn:
        s = h.session("planner", actor={"user": "u-1"})
        conn.attach(s)
        assert s.tool_availability(ISSUE).available
        issue = frozen(s.normalize(ISSUE, "call-1", {"title": "CVE-1"}))
        assert s.decide(issue).effect == "allow"
        assert run(h, s, "mcp:scanner:tool:rotate", "call-2", {}).ok  # type: ignore[attr-defined]
        eventually(lambda: not s.tool_availability(ISSUE).available, "create-issue going away")
        assert s.tool_availability(AUDIT).available  # `audit` came, with the declared schema
        assert "did not discover the tool `create-issue`" in (
            s.tool_availability(ISSUE).reason or ""
        )
        # the call judged before the change does not run now; it says why
        late = s.invoke(issue)
        assert (late.ran, late.error_category) == (False, "unavailable")
        changes = [e.payload for e in h.store.read(s.id) if e.type == MCP_TOOLS_CHANGED]
        listed = [c for c in changes if c["cause"] == "notifications/tools/list_changed"]
        assert listed and listed[0]["removed"] == ["create-issue"]
        assert listed[0]["added"] == ["audit"]
        assert ISSUE in listed[0]["unavailable"]
        # the log is the truth: a harness that resumes the session reads the server's state
        other = Harness(spec, store=h.store)
        resumed = other.resume(s.id)
        assert "create-issue" not in resumed.facts.mcp["scanner"].discovered
        assert "audit" in resumed.facts.mcp["scanner"].discovered


def test_a_server_whose_schema_drifted_leaves_the_tool_unavailable(spec: Spec) -> None:
    h = Harness(spec)
    with connect(h, command=f"{STDIO} --drift") as conn:
        s = h.session("planner", actor={"user": "u-1"})
        conn.attach(s)
        reason = s.tool_availability(SCAN).reason or ""
        assert "the discovered schema of `scan` differs from the declared one: extra `depth`" in (
            reason
        )
        refused = s.normalize(SCAN, "call-1", {"target": "billing"})
        assert not isinstance(refused, PendingCall) and refused.code == "unavailable"
        assert s.tool_availability(ISSUE).available  # the others are unaffected


def test_calls_keep_their_timeout_and_a_tool_error_is_a_failure(spec: Spec) -> None:
    h = Harness(spec)
    with connect(h) as conn:
        s = h.session("planner", actor={"user": "u-1"})
        conn.attach(s)
        slow = run(h, s, "mcp:scanner:tool:slow", "call-1", {"seconds": 5})
        assert (slow.status, slow.error_category) == ("unknown", "timeout")  # type: ignore[attr-defined]
        broken = run(h, s, "mcp:scanner:tool:broken", "call-2", {"reason": "disk full"})
        assert broken.status == "failure"  # type: ignore[attr-defined]
        assert broken.error_category == "mcp_tool_error"  # type: ignore[attr-defined]
        assert "disk full" in broken.error  # type: ignore[attr-defined]


def test_a_server_that_goes_away_is_no_longer_connected(spec: Spec) -> None:
    h = Harness(spec)
    conn = connect(h, ping_s=0.2)
    s = h.session("planner", actor={"user": "u-1"})
    conn.attach(s)
    gone = run(h, s, "mcp:scanner:tool:crash", "call-1", {})
    assert (gone.status, gone.error_category) == ("unknown", "connection_lost")  # type: ignore[attr-defined]
    eventually(lambda: not conn.state.connected, "the connection noticing")
    assert "stopped answering" in (conn.error or "")
    assert "the MCP server `scanner` is not connected" in s.tool_availability(SCAN).reasons
    causes = [e.payload["cause"] for e in h.store.read(s.id) if e.type == MCP_TOOLS_CHANGED]
    assert causes[-1] == "connection lost"
    conn.open()  # reconnecting starts the server again
    assert conn.state.connected and conn.error is None
    assert s.tool_availability(SCAN).available
    conn.close()


class SlowToWindDown(McpConnection):
    """A connection whose loop, once lost, takes a second more to end (as a busy machine's
    does): the loss is visible before the old connection has wound down."""

    def _update(self, cause: str, **changes: object) -> object:
        if cause == "connection lost" and self._lost:
            if getattr(self, "_seen_loss", False):  # the loop's own last update, after `_gone`'s
                time.sleep(1.0)
            self._seen_loss = True
        return super()._update(cause, **changes)  # type: ignore[arg-type]


def test_reopening_a_lost_connection_waits_for_the_old_one_and_returns_connected(
    spec: Spec,
) -> None:
    h = Harness(spec)
    conn = SlowToWindDown(
        h,
        "scanner",
        command=STDIO,
        disclaimer_accepted=True,
        agent_access=True,
        timeout_s=30,
        ping_s=0.2,
    ).open()
    s = h.session("planner", actor={"user": "u-1"})
    conn.attach(s)
    gone = run(h, s, "mcp:scanner:tool:crash", "call-1", {})
    assert (gone.status, gone.error_category) == ("unknown", "connection_lost")  # type: ignore[attr-defined]
    eventually(lambda: not conn.state.connected, "the connection noticing")
    conn.open()  # the old loop is still winding down: open waits for it, then reconnects
    assert conn.state.connected and conn.error is None, (conn.state, conn.error)
    assert s.tool_availability(SCAN).available
    conn.close()
    assert not conn.state.connected


def test_consent_and_a_server_that_cannot_be_reached_are_reasons(spec: Spec) -> None:
    h = Harness(spec)
    down = McpConnection(h, "scanner", command="harnessc-no-such-mcp-server").open()
    assert down.error is not None and "cannot reach" in down.error
    s = h.session("planner", actor={"user": "u-1"})
    down.attach(s)
    reasons = s.tool_availability(SCAN).reasons
    assert "the MCP server `scanner` is not connected" in reasons
    assert "the user has not switched on agent access for the MCP server `scanner`" in reasons
    down.close()
    with connect(h) as conn:
        s2 = h.session("planner", actor={"user": "u-1"})
        conn.attach(s2)
        assert s2.tool_availability(SCAN).available
        conn.consent(agent_access=False)
        assert not s2.tool_availability(SCAN).available
    with pytest.raises(McpError) as err:
        McpConnection(h, "nope")
    assert err.value.code == "unknown-server"


def test_ainvoke_runs_an_mcp_call_on_the_callers_loop(spec: Spec) -> None:
    h = Harness(spec)

    async def go() -> object:
        async with McpConnection(
            h, "scanner", command=STDIO, disclaimer_accepted=True, agent_access=True
        ) as conn:
            s = h.session("planner", actor={"user": "u-1"})
            conn.attach(s)
            call = frozen(s.normalize(SCAN, "call-1", {"target": "ledger"}))
            s.decide(call)
            return await s.ainvoke(call)

    result = asyncio.run(go())
    assert result.ok and result.data["report"].startswith("no findings in ledger")  # type: ignore[attr-defined]


# -- streamable HTTP ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the HTTP MCP server did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_streamable_http_server_is_discovered_called_and_followed(
    spec: Spec, http_server: str
) -> None:
    found = asyncio.run(discover(McpEndpoint("http", http_server), timeout_s=30))
    assert found.server_name == "scanner"
    assert {t.name for t in found.tools} >= {"scan", "create-issue"}
    h = Harness(spec)
    with connect(h, url=http_server, command=None) as conn:
        assert conn.error is None, conn.error
        s = h.session("planner", actor={"user": "u-1"})
        conn.attach(s)
        result = run(h, s, SCAN, "call-1", {"target": "web"})
        assert result.ok, result  # type: ignore[attr-defined]
        assert run(h, s, "mcp:scanner:tool:rotate", "call-2", {}).ok  # type: ignore[attr-defined]
        eventually(lambda: s.tool_availability(AUDIT).available, "audit appearing")
        assert not s.tool_availability(ISSUE).available


# -- harnessc mcp discover ------------------------------------------------------------------------


def discover_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    from harnessc.compiler.cli import main

    code = main(["mcp", "discover", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_discover_prints_a_canonical_block_that_shows_no_drift_against_itself(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from harnessc.dsl.printer import format_source
    from harnessc.dsl.source import Source

    code, block, _ = discover_cli(capsys, "--stdio", STDIO, "--name", "scanner")
    assert code == 0
    formatted = format_source(Source("b.harness", block))
    assert formatted.text == block  # canonical: the formatter leaves it as it is
    assert f'transport stdio "{STDIO}"' in block
    # every annotation is a hint in a comment; the effects are the worst case, not the hint
    assert '# untrusted hints from the server, not effects: title="Scan a repository", ' in block
    assert "readOnlyHint=true" in block
    assert 'tool "create-issue" {' in block and "effects write external" in block
    spec = tmp_path / "scanner.harness"
    spec.write_text(block, encoding="utf-8")
    code, report, _ = discover_cli(capsys, "--stdio", STDIO, str(spec))
    assert (code, report) == (
        0,
        "mcp scanner: no drift; every declared tool is listed with its schema\n",
    )
    # the same block, compiled, makes every tool available against the live server
    h = Harness(_compiled(tmp_path, block))
    with connect(h) as conn:
        assert all(
            h.availability(conn.facts()).available(t) for t in h.spec.mcp_servers["scanner"].tools
        )


def _compiled(tmp_path: Path, text: str) -> Spec:
    folder = tmp_path / "compiled"
    folder.mkdir()
    return compile_text(folder, text)


def test_discover_reports_drift_with_the_runtimes_comparison_and_exit_codes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    spec = tmp_path / "live.harness"
    spec.write_text(SPEC, encoding="utf-8")
    code, report, _ = discover_cli(capsys, "--stdio", f"{STDIO} --drift", str(spec))
    assert code == 1
    assert report.splitlines() == [
        "mcp scanner: drift",
        "  - audit: declared, not listed (unavailable)",
        "  ~ scan: schema changed (unavailable): extra `depth`",
    ]
    code, out, _ = discover_cli(capsys, "--stdio", STDIO, "--format", "json", str(spec))
    assert code == 1
    assert json.loads(out) == {
        "server": "scanner",
        "drift": True,
        "added": [],
        "removed": ["audit"],
        "changed": [],
    }
    code, out, err = discover_cli(capsys, "--stdio", "harnessc-no-such-mcp-server")
    assert (code, out) == (2, "")
    assert "cannot reach the MCP server at stdio `harnessc-no-such-mcp-server`" in err
    code, _, err = discover_cli(capsys, "--http", "ftp://example.invalid/mcp")
    assert code == 2 and "is not an http(s) URL" in err


def test_schemas_translate_to_the_languages_types_and_inexact_ones_are_marked() -> None:
    from harnessc.compiler.mcp_discover import mcp_block
    from harnessc.runtime.integrations.mcp_client import DiscoveredTool, Discovery

    exact = {
        "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 1, "title": "Title"},
            "level": {"type": "string", "enum": ["low", "high"]},
            "tags": {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
            "limit": {"type": "integer", "default": 10},
            "home": {"type": "string", "format": "uri"},
            "labels": {"type": "object", "additionalProperties": {"type": "boolean"}},
        },
        "required": ["title", "level", "tags"],
    }
    loose = {
        "type": "object",
        "properties": {
            "x": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "x-y": {"type": "string"},  # no field of the language has this name
        },
    }
    found = Discovery(
        "s",
        None,
        None,
        (
            DiscoveredTool("file.issue", exact, "Files an issue.\n\nMore text."),
            DiscoveredTool("loose", loose, None),
            DiscoveredTool("has spaces", exact, None),
        ),
    )
    block = mcp_block("s", McpEndpoint("http", "https://mcp.example/mcp"), found)
    assert "title: string min 1" in block
    assert 'level: enum("low", "high")' in block
    assert "tags: list<int> max 3" in block
    assert "limit: int default 10" in block
    assert "home: url?" in block and "labels: map<bool>?" in block
    assert 'tool "file.issue" {' in block and 'summary "Files an issue."' in block
    before_loose = block.split("tool loose {")[0].split('tool "file.issue"')[1]
    assert "cannot say the server's schema exactly" in before_loose
    assert "unavailable: extra `x-y`; changed `x`" in before_loose
    assert "cannot say" not in block.split('tool "file.issue"')[0]
    assert '# the server\'s tool "has spaces" cannot be declared:' in block
    assert '\n  tool "has spaces"' not in block
    assert all(len(line) <= 100 for line in block.splitlines())
