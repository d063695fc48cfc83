"""`harnessc gateway` driven by the MCP TypeScript SDK's client (`@modelcontextprotocol/sdk`,
pinned in tests/node_mcp/package-lock.json and installed by `scripts/setup.sh test` with
`npm ci`), over stdio and streamable HTTP: what a client in another language sees is what the
Python SDK's client sees. In CI (`CI` set) a missing Node or SDK is a failure, not a skip."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from harnessc.runtime import Harness

from .gateway_support import ISSUE, OPS, SCAN, TICKET
from .test_gateway import (
    DEV,
    HIGH,
    gateway_argv,
    http_gateway,  # noqa: F401 - a fixture
    ledger_of,
    operator,
    world,  # noqa: F401 - a fixture
)

NODE_DIR = Path(__file__).parent / "node_mcp"
SDK = NODE_DIR / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"


def node() -> str:
    found = shutil.which("node")
    missing = (
        "Node.js is not installed (apt-get install nodejs npm)"
        if found is None
        else None
        if SDK.exists()
        else "the TypeScript SDK is not installed (scripts/setup.sh test runs npm ci)"
    )
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    assert found is not None
    return found


def run_node(args: list[str], calls: list[dict[str, Any]]) -> dict[str, Any]:
    done = subprocess.run(
        [node(), str(NODE_DIR / "client.mjs"), *args],
        input=json.dumps(calls),
        capture_output=True,
        text=True,
        timeout=180,
        cwd=NODE_DIR,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def approve_first_request(where: dict[str, Path], approved: list[str]) -> threading.Thread:
    """Approve the first request that waits, as an operator would, in another thread."""

    def go() -> None:
        h: Harness = operator(where)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            h.catch_up()
            waiting = [r for r in h.approvals.requests.values() if r.status == "pending"]
            if waiting:
                h.approve(waiting[0].request_id, by=OPS)
                approved.append(waiting[0].request_id)
                return
            time.sleep(0.1)

    thread = threading.Thread(target=go)
    thread.start()
    return thread


def test_the_typescript_client_over_stdio(world: dict[str, Path]) -> None:  # noqa: F811
    argv = gateway_argv(world["spec"], world["log"], "--client", json.dumps(DEV))
    argv += ["--ask-wait", "4", "--progress-every", "0.5"]
    calls = [
        {"name": SCAN, "arguments": {"target": "billing"}},
        {"name": ISSUE, "arguments": {"title": "SECRET token"}},
        {"name": "mcp__tracker__close_ticket", "arguments": {"ticket": "T-1"}},
        {"name": TICKET, "arguments": HIGH},  # approved while it waits: runs
        {"name": TICKET, "arguments": HIGH},  # the same call again: a new call, pending
        {"name": "mcp__scanner__rotate", "arguments": {}},  # the scanner's tools change
        {"wait": "tools/list_changed"},
    ]
    approved: list[str] = []
    answering = approve_first_request(world, approved)
    try:
        out = run_node(["stdio", sys.executable, json.dumps(argv)], calls)
    finally:
        answering.join()
    assert sorted(out["tools"]) == sorted(
        [ISSUE, "mcp__scanner__rotate", SCAN, TICKET, "harnessc_search_tools"]
    )
    scan, secret, hidden, asked, again, rotated = out["calls"]
    assert not scan["isError"] and scan["structuredContent"]["report"].startswith("no findings")
    assert secret["isError"] and secret["structuredContent"]["harnessc"]["rule"] == "desk.secret"
    assert hidden["isError"] and hidden["structuredContent"]["harnessc"]["code"] == "unknown-tool"
    assert approved and not asked["isError"] and asked["structuredContent"]["severity"] == "high"
    assert asked["progress"] and approved[0] in asked["progress"][0]["message"]
    pending = again["structuredContent"]["harnessc"]
    assert again["isError"] and pending["status"] == "pending"
    assert pending["request_id"] != approved[0]
    assert len(again["progress"]) >= 4  # every half second of the four it waited
    assert ledger_of(world["ledger"]) == [{"tool": "open_ticket", "args": HIGH}]
    # the gateway told the client its list changed: `create-issue` went upstream
    assert not rotated["isError"] and out["listChanged"] >= 1
    assert ISSUE in out["tools"] and ISSUE not in out["relisted"]


def test_the_typescript_client_over_http(
    http_gateway: tuple[str, dict[str, Path]],  # noqa: F811
) -> None:
    url, world_ = http_gateway
    out = run_node(
        ["http", url, "tok-1"],
        [{"name": SCAN, "arguments": {"target": "ledger"}}, {"name": TICKET, "arguments": HIGH}],
    )
    assert SCAN in out["tools"] and "mcp__tracker__close_ticket" not in out["tools"]
    scan, asked = out["calls"]
    assert not scan["isError"]
    assert asked["isError"] and asked["structuredContent"]["harnessc"]["status"] == "pending"
    assert asked["progress"]
    rid = asked["structuredContent"]["harnessc"]["request_id"]
    operator(world_).approve(rid, by=OPS)
    again = run_node(["http", url, "tok-1"], [{"name": TICKET, "arguments": HIGH}])
    assert not again["calls"][0]["isError"], again
    assert ledger_of(world_["ledger"]) == [{"tool": "open_ticket", "args": HIGH}]
