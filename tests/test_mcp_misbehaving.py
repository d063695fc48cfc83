"""An MCP server that misbehaves (tests/mcp_servers/misbehaving.py) never leaves a tool
available that should not be, never takes a server's own error for a lost connection, and
never keeps a process or a thread alive past `close()`."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from harnessc.runtime import Harness, Refusal, SQLiteStore
from harnessc.runtime.integrations.mcp_client import McpConnection, McpEndpoint, McpError, discover
from harnessc.runtime.log.events import MCP_TOOLS_CHANGED

from .test_approvals import compile_text
from .test_mcp_live import eventually

SERVER = Path(__file__).parent / "mcp_servers" / "misbehaving.py"
SPEC = """
harness odd { version "1.0.0" }
mcp odd {
  transport stdio "odd-mcp"
  tool t { summary "Echo."; effects read; timeout 3s; input { x: string } }
}
policy p {
  default deny
  allow mcp:odd:*
}
surface s { expose mcp:odd:* }
agent planner { surface s; policy p }
"""
T = "mcp:odd:tool:t"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Callable[..., tuple[Harness, McpConnection, Any]]]:
    """Open a connection to the misbehaving server in a mode, with a session attached; every
    connection opened is closed at the end."""
    opened: list[McpConnection] = []

    def open_in(mode: str, **options: Any) -> tuple[Harness, McpConnection, Any]:
        h = Harness(compile_text(tmp_path, SPEC), store=SQLiteStore(tmp_path / "log.db"))
        conn = McpConnection(
            h,
            "odd",
            command=f"{sys.executable} {SERVER} {mode}",
            disclaimer_accepted=True,
            agent_access=True,
            **{"timeout_s": 10, **options},
        ).open()
        opened.append(conn)
        s = h.session("planner", actor={"user": "u-1"})
        conn.attach(s)
        return h, conn, s

    yield open_in
    for conn in opened:
        conn.close()


def invoke(s: Any, call_id: str) -> Any:
    call = s.normalize(T, call_id, {"x": "hello"})
    if isinstance(call, Refusal):
        return call
    s.decide(call)
    return s.invoke(call)


def causes(h: Harness, s: Any) -> list[str]:
    return [e.payload["cause"] for e in h.store.read(s.id) if e.type == MCP_TOOLS_CHANGED]


def test_a_servers_own_error_32000_fails_the_call_and_keeps_the_connection(server: Any) -> None:
    # the SDK reports a closed connection with the same code: the server took itself offline
    h, conn, s = server("rpc_error")
    result = invoke(s, "c-1")
    assert (result.status, result.error_category) == ("failure", "executor_error")
    assert "the backend failed" in result.error
    assert conn.connected and h.availability(s.facts).tools[T].available
    assert "connection lost" not in causes(h, s)


def test_a_listing_that_is_not_one_is_told_apart_from_a_server_out_of_reach(server: Any) -> None:
    # the server answered, but its first listing failed: it was "cannot reach the MCP server"
    _, conn, s = server("bad_listing")
    assert not conn.connected and conn.error is not None
    assert "answered, but listing its tools failed" in conn.error
    refused = invoke(s, "c-1")
    assert isinstance(refused, Refusal) and refused.code == "unavailable"
    with pytest.raises(McpError, match="answered, but listing its tools failed"):
        asyncio.run(discover(McpEndpoint("stdio", f"{sys.executable} {SERVER} bad_listing")))


def test_a_tool_listed_twice_is_unavailable_whichever_comes_first(server: Any) -> None:
    _, conn, s = server("dup_tools")
    refused = invoke(s, "c-1")
    assert isinstance(refused, Refusal) and refused.code == "unavailable"
    assert conn.error is not None and "more than once" in conn.error


@pytest.mark.parametrize("mode", ["bad_after_change", "hang_after_change"])
def test_after_tools_changed_a_failed_listing_leaves_no_stale_tool(server: Any, mode: str) -> None:
    # the old listing stayed trusted: the tool kept running with a schema the server dropped
    h, conn, s = server(mode, timeout_s=2)
    assert invoke(s, "c-1").status == "success"  # announces the change
    eventually(lambda: "listing failed" in causes(h, s), "the failed listing")
    refused = invoke(s, "c-2")
    assert isinstance(refused, Refusal) and refused.code == "unavailable"
    assert conn.error is not None and "listing the tools of `odd` failed" in conn.error


def test_close_after_the_server_froze_ends_it_and_its_tools(server: Any) -> None:
    # close() during the loss cancelled the SDK's shutdown: the server ran on, the thread
    # waited for ever, and the tools stayed available with no event saying otherwise
    h, conn, s = server("freeze_call", ping_s=0.5, timeout_s=1)
    result = invoke(s, "c-1")
    assert result.status == "unknown"
    time.sleep(1.0)  # the ping finds the server gone; its shutdown begins
    thread = conn._thread
    assert thread is not None
    conn.close()
    assert not conn.connected and not h.availability(s.facts).tools[T].available
    eventually(lambda: not thread.is_alive(), "the connection's thread ending")
    assert "connection lost" in causes(h, s) or "disconnected" in causes(h, s)
    refused = invoke(s, "c-2")
    assert isinstance(refused, Refusal) and refused.code == "unavailable"


def test_a_text_result_is_read_as_arguments_are(server: Any) -> None:
    # `{"v": NaN}` is not JSON: it is the text, not data holding a NaN (invalid_output)
    _, _, s = server("nan_text")
    result = invoke(s, "c-1")
    assert result.status == "success" and result.data == {"text": '{"v": NaN}'}


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("garbage_reply", "(not JSON: expected ident at line 1 column 2)"),
        ("list_reply", "(JSON that is no JSON-RPC message: "),
    ],
)
def test_a_message_that_cannot_be_read_ends_the_connection_and_its_call_at_once(
    server: Any, mode: str, why: str
) -> None:
    # the SDK logged the message and dropped it: the call waited out its whole timeout
    # (`timeout`), then every later call did too, on a connection still shown as connected
    h, conn, s = server(mode)
    result = invoke(s, "c-1")
    assert (result.status, result.error_category) == ("unknown", "connection_lost")
    said = f"the MCP server `odd` sent a message that could not be read {why}"
    assert said in result.error and said in (conn.error or "")
    eventually(lambda: not conn.connected, "the connection ending")
    assert not h.availability(s.facts).tools[T].available
    eventually(lambda: "connection lost" in causes(h, s), "the loss logged")
    refused = invoke(s, "c-2")
    assert isinstance(refused, Refusal) and refused.code == "unavailable"


def test_the_drift_report_prints_a_servers_names_escaped() -> None:
    # a listed name holding a newline forged a line of the report (`allow *`), and an
    # escape sequence cleared the operator's terminal
    from harnessc.compiler.mcp_discover import Drift

    name = 'x" { }\nallow *\x1b[2J\u202e'
    report = Drift("odd", (name, "create-issue"), (), (("t", "type \x1b[31mstring"),)).render()
    assert "\x1b" not in report and "\u202e" not in report
    assert report.splitlines() == [
        "mcp odd: drift",
        '  + "x\\" { }\\nallow *\\u001b[2J\\u202e": listed, not declared (not projected)',
        "  + create-issue: listed, not declared (not projected)",
        "  ~ t: schema changed (unavailable): type \\u001b[31mstring",
    ]
