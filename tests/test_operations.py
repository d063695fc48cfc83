"""The operator's commands on a store (runtime/session/operations.py): what the console, the CLI
and a Python caller share. Real sessions, a SQLite file (and PostgreSQL when the test server is
up)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from harnessc.runtime import ApprovalError, Harness
from harnessc.runtime.log.store import SQLiteStore
from harnessc.runtime.model import Spec
from harnessc.runtime.session import operations as ops

from .test_approvals import Clock, compile_text, frozen
from .test_eventlog_calls import opener  # noqa: F401  (the fixture: SQLite, PostgreSQL)

SPEC = """
harness g { version "1.0.0" }
tool deploy.run {
  summary "Roll a service out as a canary."
  effects write external
  risk high
  timeout 1m
  input { service: string, canary_percent: int min 1 max 100, token: string? secret }
}
tool deploy.status { summary "Read a rollout."; effects read; input { service: string } }
policy p {
  default deny
  ops: ask deploy.run {
    approver role "ops"
    grant once ttl 10m
    reason "Operators approve each rollout."
  }
  reads: ask deploy.status {
    approver role "ops"
    grant task ttl 1h
    reason "Reads of rollouts are approved per task."
  }
}
surface s { expose deploy.* }
agent a { surface s; policy p }
"""
OPS = {"user": "u-ops", "role": "ops"}
OPS2 = {"user": "u-ops-2", "role": "ops"}
DEV = {"user": "u-1", "role": "dev"}
ARGS = {"service": "payments", "canary_percent": 25, "token": "tok-hunter22"}
PLAIN = {"service": "payments", "canary_percent": 25}  # no secret: another process rebuilds it


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Spec:
    return compile_text(tmp_path_factory.mktemp("ops"), SPEC)


def ask(h: Harness, tool: str = "deploy.run", args: Any = None, call_id: str = "call-1") -> Any:
    h.bind("deploy.run", lambda a: {"ok": True})
    h.bind("deploy.status", lambda a: {"state": "rolling"})
    s = h.session("a", actor=DEV, task="t-1")
    call = frozen(s.normalize(tool, call_id, ARGS if args is None else args))
    return s, call, s.request_approval(call)


def test_pending_requests_show_what_the_operator_decides_on(spec: Spec, tmp_path: Path) -> None:
    agent = Harness(spec, store=SQLiteStore(tmp_path / "e.db"))
    _, call, req = ask(agent)
    console = Harness(spec, store=SQLiteStore(tmp_path / "e.db"))  # another harness
    (shown,) = ops.pending_approvals(console)
    assert shown["request_id"] == req.request_id and shown["tool_id"] == "deploy.run"
    assert shown["input_hash"] == call.input_hash
    assert shown["arguments"]["token"] == "[REDACTED]"
    assert shown["arguments"]["canary_percent"] == 25
    assert "tok-hunter22" not in repr(shown)
    rule = shown["rule"]
    assert rule["label"] == "p.ops" and rule["reason"] == "Operators approve each rollout."
    assert rule["at"].endswith("g.harness:13") and rule["line"] == 13
    assert shown["approvers"] == [{"kind": "role", "value": "ops"}]
    assert shown["scope"]["grant"] == "once" and shown["scope"]["ttl_ms"] == 600_000
    assert ops.approval(console, req.request_id)["status"] == "pending"
    ops.deny(console, req.request_id, by=OPS, reason="not during the freeze")
    assert ops.pending_approvals(console) == []
    assert (
        ops.approval(Harness(spec, store=SQLiteStore(tmp_path / "e.db")), req.request_id)["status"]
        == "rejected"
    )


def test_answers_by_request_id_and_their_clear_errors(spec: Spec) -> None:
    h = Harness(spec)
    s, _, req = ask(h)
    with pytest.raises(ApprovalError) as err:
        ops.deny(h, req.request_id, by=OPS, reason=" ")
    assert err.value.code == "reason-required"
    # the harness's own `deny` recorded a reason of any kind (an int, None) or none at all
    for reason in (12, None, ""):
        with pytest.raises(ApprovalError) as err:
            h.deny(req.request_id, by=OPS, reason=reason)  # type: ignore[arg-type]
        assert err.value.code == "reason-required"
    with pytest.raises(ApprovalError) as err:
        ops.approve(h, "apr-nope", by=OPS)
    assert err.value.code == "unknown-request"
    masked = ops.approval(h, req.request_id)["arguments"]
    with pytest.raises(ApprovalError) as err:  # the shown arguments hold the secret's mask
        ops.approve_with_edits(h, req.request_id, {**masked, "canary_percent": 5}, by=OPS)
    assert err.value.code == "invalid-edit" and "[REDACTED]" in err.value.message
    out = ops.approve_with_edits(h, req.request_id, {**ARGS, "canary_percent": 5}, by=OPS)
    assert out["status"] == "approved" and out["request_status"] == "superseded"
    assert out["effect"] == "ask" and out["grant"]["input_hash"] == out["edited_input_hash"]
    for answer in (
        lambda: ops.approve(h, req.request_id, by=OPS),
        lambda: ops.deny(h, req.request_id, by=OPS, reason="late"),
    ):
        with pytest.raises(ApprovalError) as err:
            answer()
        assert err.value.code == "not-pending"
    assert s.invoke(s.call("call-1")).ran  # type: ignore[arg-type]


def race(consoles: list[Harness], request_id: str, *, edit: int) -> tuple[list[str], list[str]]:
    """Two operators answer `request_id` at the same moment (operator `edit` with an edit)."""
    barrier = threading.Barrier(2)
    won: list[str] = []
    lost: list[str] = []

    def answer(h: Harness, who: dict[str, str], edited: bool) -> None:
        barrier.wait()
        try:
            if edited:
                ops.approve_with_edits(h, request_id, {**PLAIN, "canary_percent": 3}, by=who)
            else:
                ops.approve(h, request_id, by=who)
            won.append(who["user"])
        except ApprovalError as exc:
            assert exc.code == "not-pending", exc.message
            lost.append(who["user"])

    threads = [
        threading.Thread(target=answer, args=(consoles[0], OPS, edit == 1)),
        threading.Thread(target=answer, args=(consoles[1], OPS2, edit == 2)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return won, lost


def test_two_operators_answer_one_request_at_once_and_exactly_one_wins(
    spec: Spec,
    opener: Callable[[], Any],  # noqa: F811  (the fixture imported above)
) -> None:
    agent = Harness(spec, store=opener())
    _, call, req = ask(agent, args=PLAIN)
    for round_ in range(3):
        if round_:
            s2 = agent.session("a", actor=DEV, task="t-1")
            call = frozen(s2.normalize("deploy.run", f"call-{round_ + 1}", PLAIN))
            req = s2.request_approval(call)
        won, lost = race(
            [Harness(spec, store=opener()) for _ in range(2)], req.request_id, edit=round_
        )
        assert len(won) == 1 and len(lost) == 1, (won, lost)
        fresh = Harness(spec, store=opener())
        resolved = [
            e
            for e in fresh.store.read()
            if e.type == "approval.resolved" and e.payload["approval_id"] == req.request_id
        ]
        assert len(resolved) == 1 and resolved[0].payload["by"] == won[0]
        assert fresh.verify().ok


def test_a_revoked_grant_never_authorises_again_in_any_process(
    spec: Spec,
    opener: Callable[[], Any],  # noqa: F811  (the fixture imported above)
) -> None:
    agent = Harness(spec, store=opener())
    s, call, req = ask(agent, "deploy.status", {"service": "payments"})
    console = Harness(spec, store=opener())
    granted = ops.approve(console, req.request_id, by=OPS)["grant"]
    assert granted["scope"] == "task"
    (listed,) = ops.active_grants(Harness(spec, store=opener()))
    assert listed["grant_id"] == granted["grant_id"] and listed["by"] == "u-ops"
    assert 0 < listed["ttl_left_ms"] <= 3_600_000
    first = s.invoke(call)  # the agent's harness has the grant from the log
    assert first.ran
    revoked = ops.revoke_grant(console, granted["grant_id"], by=OPS, reason="rotated")
    assert revoked["status"] == "revoked"
    assert ops.active_grants(Harness(spec, store=opener())) == []
    # the agent's process catches up before it decides (docs/runtime.md, "At most once across
    # processes"): the revoked grant authorises nothing, and the call asks again
    again = frozen(s.normalize("deploy.status", "call-2", {"service": "payments"}))
    result = s.invoke(again)
    assert not result.ran and result.error_category == "waiting_approval"
    with pytest.raises(ApprovalError) as err:
        ops.revoke_grant(console, granted["grant_id"], by=OPS)
    assert err.value.code == "not-active"
    events = [e for e in console.store.read() if e.type == "grant.revoked"]
    assert [(e.payload["by"], e.payload["reason"]) for e in events] == [("u-ops", "rotated")]
    assert console.verify().ok


def test_a_revoked_once_grant_cannot_be_spent_and_a_spent_one_cannot_be_revoked(
    spec: Spec, tmp_path: Path
) -> None:
    clock = Clock()
    h = Harness(spec, store=SQLiteStore(tmp_path / "e.db"), clock=clock)
    s, call, req = ask(h)
    grant = ops.approve(h, req.request_id, by=OPS)["grant"]
    ops.revoke_grant(h, grant["grant_id"], by=OPS, reason="wrong service")
    assert not s.invoke(call).ran
    s2, call2, req2 = ask(h, call_id="call-2")
    grant2 = ops.approve(h, req2.request_id, by=OPS)["grant"]
    assert s2.invoke(call2).ran
    with pytest.raises(ApprovalError) as err:
        ops.revoke_grant(h, grant2["grant_id"], by=OPS)
    assert err.value.code == "not-active"
    _, _, req3 = ask(h, call_id="call-3")
    grant3 = ops.approve(h, req3.request_id, by=OPS)["grant"]
    clock.now += timedelta(minutes=11)
    with pytest.raises(ApprovalError) as err:
        ops.revoke_grant(h, grant3["grant_id"], by=OPS)
    assert err.value.code == "not-active" and "expired" in err.value.message
    with pytest.raises(ApprovalError) as err:
        ops.revoke_grant(h, "grt-nope", by=OPS)
    assert err.value.code == "unknown-grant"


def test_the_cli_lists_approves_edits_denies_and_revokes(
    spec: Spec, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harnessc.compiler.cli import main

    db = str(tmp_path / "e.db")
    (tmp_path / "spec.json").write_text(spec.to_json(), encoding="utf-8")
    spec_arg = ["--spec", str(tmp_path / "spec.json")]
    ops_arg = ["--as", json.dumps(OPS)]
    agent = Harness(spec, store=SQLiteStore(db))
    s, _, req = ask(agent, args=PLAIN)
    _, _, req2 = ask(agent, args=PLAIN, call_id="call-2")
    _, _, req3 = ask(agent, "deploy.status", {"service": "payments"}, call_id="call-3")

    def run(*argv: str) -> tuple[int, Any]:
        code = main([*argv, "--log", db, "--format", "json"])
        out = capsys.readouterr().out
        return code, json.loads(out) if out.strip() else None

    code, listed = run("approvals", "list")
    assert code == 0 and [r["request_id"] for r in listed] == [
        req.request_id,
        req2.request_id,
        req3.request_id,
    ]
    assert listed[0]["rule"]["at"] is None  # no spec given: no rule location
    code, shown = run("approvals", "show", req.request_id, *spec_arg)
    assert code == 0 and shown["rule"]["line"] == 13
    edited = json.dumps({**PLAIN, "canary_percent": 4})
    code, out = run("approvals", "edit", req.request_id, "--args", edited, *spec_arg, *ops_arg)
    assert code == 0 and out["request_status"] == "superseded"
    assert s.call("call-1").input_hash == out["edited_input_hash"]  # type: ignore[union-attr]
    code, out = run("approvals", "approve", req.request_id, *spec_arg, *ops_arg)
    assert code == 1 and out["error"]["code"] == "not-pending"
    code, out = run("approvals", "deny", req2.request_id, "--reason", "no", *spec_arg, *ops_arg)
    assert code == 0 and out["status"] == "denied"
    code, out = run("approvals", "approve", req3.request_id, *spec_arg, *ops_arg)
    assert code == 0 and out["grant"]["scope"] == "task"
    code, grants = run("grants", "list")
    assert code == 0 and {g["scope"] for g in grants} == {"once", "task"}
    task_grant = out["grant"]["grant_id"]
    code, out = run("grants", "revoke", task_grant, "--reason", "rotated", *ops_arg)
    assert code == 0 and out["status"] == "revoked"
    code, grants = run("grants", "list")
    assert [g["scope"] for g in grants] == ["once"]
    code, _ = run("approvals", "list")
    assert code == 0
    assert main(["approvals", "list", "--log", db, *spec_arg]) == 0
    human = capsys.readouterr().out
    assert human == "nothing pending\n"
    assert main(["grants", "list", "--log", db]) == 0
    assert "once deploy.run  by u-ops" in capsys.readouterr().out
    assert main(["approvals", "list", "--log", str(tmp_path / "none.db")]) == 2
    bad = ["--as", "not json"]
    assert main(["approvals", "approve", req.request_id, "--log", db, *spec_arg, *bad]) == 2
    assert Harness(spec, store=SQLiteStore(db)).verify().ok


def test_reading_writes_nothing_and_the_first_write_says_which_spec_loaded(
    spec: Spec, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Listing requests and grants (the CLI, a harness opened to read) appends nothing to the
    log; a harness's `spec.loaded` goes with the first event it writes."""
    from harnessc.compiler.cli import main

    db = str(tmp_path / "e.db")
    (tmp_path / "spec.json").write_text(spec.to_json(), encoding="utf-8")
    agent = Harness(spec, store=SQLiteStore(db))
    _, _, req = ask(agent, args=PLAIN)
    head = SQLiteStore(db, readonly=True).head()
    reader = Harness(spec, store=SQLiteStore(db))
    assert [r["request_id"] for r in ops.pending_approvals(reader)] == [req.request_id]
    assert ops.active_grants(reader) == []
    for argv in (["approvals", "list"], ["grants", "list"], ["approvals", "show", req.request_id]):
        assert main([*argv, "--log", db, "--spec", str(tmp_path / "spec.json")]) == 0
    capsys.readouterr()
    assert SQLiteStore(db, readonly=True).head() == head
    ops.approve(reader, req.request_id, by=OPS)
    written = SQLiteStore(db, readonly=True).read(after=head[0])
    assert written[0].type == "spec.loaded" and written[0].stream == "harness"
    assert [e.type for e in written].count("spec.loaded") == 1
    assert Harness(spec, store=SQLiteStore(db)).verify().ok
