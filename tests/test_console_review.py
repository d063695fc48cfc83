"""The console's approvals page shows, beside each pending call, the tool's preview above the
Approve button, each argument's sources and the diff against the closest earlier call, read by
the console's own harness from the store the agents' process wrote."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from harnessc.compiler.console.app import Console, build_app
from harnessc.compiler.console.auth import load_operators, token_hash
from harnessc.runtime import Harness, SQLiteStore

from .test_approval_view import OPS, SECRET, SPEC, ask, call, plan
from .test_approvals import compile_text
from .test_console import login


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Any]:
    spec = compile_text(tmp_path, SPEC)
    db = tmp_path / "h.db"
    agent = Harness(spec, SQLiteStore(db))
    agent.preview_with("prod.deploy", plan)
    agent.bind("ticket.read", lambda args: {"host": "web-7.example.test"})
    agent.bind("prod.deploy", lambda args: {"ok": True})
    s = agent.session(
        "a", actor={"user": "u-1", "role": "dev"}, task="t-1", said="ship release-2041 please"
    )
    assert s.invoke(call(s, "ticket.read", "t-1", {"id": "TCK-1"})).ok
    first = ask(s, "prod.deploy", "c-1", {"host": "web-7.example.test", "version": "release-2040"})
    agent.approve(first, by=OPS)
    assert s.invoke(s.call("c-1")).ok  # type: ignore[arg-type]
    deploy = ask(
        s,
        "prod.deploy",
        "c-2",
        {"host": "web-7.example.test", "version": "release-2041", "canary": 5, "token": SECRET},
    )
    restart = ask(s, "prod.restart", "r-1", {"host": "web-7.example.test"})
    ops = [{"name": "alice", "roles": ["approver", "ops"], "token_sha256": token_hash("tok-alice")}]
    (tmp_path / "ops.json").write_text(json.dumps({"operators": ops}), encoding="utf-8")
    console = Console(Harness(spec, SQLiteStore(db)), load_operators(str(tmp_path / "ops.json")))
    return {"app": build_app(console), "deploy": deploy, "restart": restart, "agent": agent}


def section(page: str, request_id: str) -> str:
    start = page.index(f'<section class="approval" id="{request_id}"')
    return html.unescape(page[start : page.index("</section>", start)])


def test_the_page_shows_the_preview_above_the_approve_button(world: dict[str, Any]) -> None:
    client, _ = login(world["app"], "alice")
    shown = section(client.get("/approvals").text, world["deploy"])
    assert "Preview" in shown
    assert '"rollout": "release-2041 to web-7.example.test"' in shown
    assert shown.index('"rollout"') < shown.index(">Approve</button>")
    restart = section(client.get("/approvals").text, world["restart"])
    assert "Preview" not in restart and "preview</code> effect" not in restart


def test_a_tool_that_can_preview_but_recorded_none_says_so(
    world: dict[str, Any], tmp_path: Path
) -> None:
    agent = world["agent"]
    agent._previewers.clear()  # the application gives no previewer any more
    s = agent.sessions[agent.approvals.get(world["deploy"]).session_id]
    rid = ask(s, "prod.deploy", "c-3", {"host": "web-9", "version": "release-2042"})
    client, _ = login(world["app"], "alice")
    shown = section(client.get("/approvals").text, rid)
    assert "declares the <code>preview</code> effect, but no preview was recorded" in shown


def test_the_page_shows_each_arguments_sources_with_the_secret_masked(
    world: dict[str, Any],
) -> None:
    client, _ = login(world["app"], "alice")
    page = client.get("/approvals").text
    assert SECRET not in page
    shown = section(page, world["deploy"])
    assert "the result of <code>ticket.read</code> (untrusted), call t-1" in shown
    assert "a user message, event #" in shown  # release-2041 was said by the user
    assert "<code>token</code></td>\n<td><em>secret (masked)</em>" in shown
    assert "<em>no source</em>" in shown  # canary: 5 appears nowhere


def test_the_page_shows_the_diff_against_the_closest_earlier_call(
    world: dict[str, Any],
) -> None:
    client, _ = login(world["app"], "alice")
    page = client.get("/approvals").text
    shown = section(page, world["deploy"])
    assert "call <code>c-1</code> (succeeded)" in shown
    assert '<tr class="changed"><td><code>version</code></td>' in shown
    assert '"release-2040"' in shown and '"release-2041"' in shown
    assert '<tr class="added"><td><code>canary</code></td>' in shown
    assert "<code>token</code> <em>(secret, compared by digest)</em>" in shown
    assert "No earlier call of this tool in the session." in section(page, world["restart"])
