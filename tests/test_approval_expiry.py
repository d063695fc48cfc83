"""Approval requests that expire: an ASK's `expires D` bounds how long its request waits for an
answer. The language (syntax, diagnostics, formatter), the deadline recorded with the request
(the same in every process, across restarts), answers after it refused with `expired`, the
expiry recorded exactly once even against a concurrent answer, and the agent's refusal."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from harnessc.compiler.pipeline import check
from harnessc.dsl.parser import parse_source
from harnessc.dsl.printer import format_source
from harnessc.dsl.source import Source
from harnessc.runtime import ApprovalError, Harness
from harnessc.runtime.model import Spec
from harnessc.runtime.session import operations as ops

from .test_approvals import Clock, compile_text, frozen
from .test_eventlog_calls import opener  # noqa: F401  (the fixture: SQLite, PostgreSQL)
from .test_operations import DEV, OPS

SPEC = """
harness g { version "1.0.0" }
tool deploy.run {
  summary "Roll a service out."
  effects write external
  risk high
  input { service: string }
}
tool deploy.status { summary "Read a rollout."; effects read; input { service: string } }
risk_table t {
  low ask { approver role "ops"; expires 5m }
  medium deny { reason "r" }
  high deny { reason "r" }
  critical deny { reason "r" }
}
policy p {
  default t
  rollout: ask deploy.run {
    approver role "ops"
    grant once ttl 10m
    expires 30m
    reason "Operators approve each rollout."
  }
}
surface s { expose deploy.* }
agent a { surface s; policy p }
"""
ARGS = {"service": "payments"}


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Spec:
    return compile_text(tmp_path_factory.mktemp("expiry"), SPEC)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def agent(spec: Spec, opener: Callable[[], Any], clock: Clock) -> Harness:  # noqa: F811
    """The agents' harness on the store (SQLite, or PostgreSQL when the test server is up)."""
    return Harness(spec, store=opener(), clock=clock)


def ask(h: Harness, call_id: str = "call-1", tool: str = "deploy.run") -> Any:
    h.bind("deploy.run", lambda a: {"ok": True})
    h.bind("deploy.status", lambda a: {"state": "rolling"})
    s = h.session("a", actor=DEV, task="t-1")
    call = frozen(s.normalize(tool, call_id, ARGS))
    return s, call, s.request_approval(call)


# -- the language -----------------------------------------------------------------------------


def codes(tmp_path: Path, text: str) -> list[tuple[str, str]]:
    path = tmp_path / "x.harness"
    path.write_text(text, encoding="utf-8")
    return [(d.code, d.message) for d in check([path]).diagnostics if d.severity == "error"]


def test_expires_is_an_ask_option_of_rules_risk_tables_and_defaults(spec: Spec) -> None:
    (rule,) = spec.policies["g.p"].rules
    assert rule.expires_ms == 30 * 60_000 and rule.grant is not None
    assert rule.grant.ttl_ms == 10 * 60_000  # the grant's ttl is another duration
    assert spec.risk_tables["g.t"].entries["low"].expires_ms == 5 * 60_000  # type: ignore[index]


def test_a_default_ask_expires_and_an_ask_without_expires_waits(tmp_path: Path) -> None:
    text = SPEC.replace("default t", 'default ask { approver role "ops"; expires 2h }')
    text = text.replace("    expires 30m\n", "")
    spec = compile_text(tmp_path, text)
    policy = spec.policies["g.p"]
    assert policy.default is not None and policy.default.expires_ms == 2 * 3_600_000
    assert policy.rules[0].expires_ms is None


@pytest.mark.parametrize(
    ("change", "code", "words"),
    [
        ("expires 30m", "expires 30", "H111"),
        ("rollout: ask deploy.run", "rollout: deny deploy.run", "H309"),
        ("expires 30m", "expires 0s", "H308"),
    ],
    ids=["no-unit", "not-an-ask", "zero"],
)
def test_expires_mistakes_are_diagnosed(tmp_path: Path, change: str, code: str, words: str) -> None:
    text = SPEC.replace(change, code)
    if words == "H309":
        text = text.replace('    approver role "ops"\n    grant once ttl 10m\n', "", 1)
    found = codes(tmp_path, text)
    assert [c for c, _ in found] == [words], found
    message = found[0][1]
    assert {
        "H111": "a duration is written without spaces",
        "H309": "`expires` on a `deny` rule",
        "H308": "an ASK's `expires` must be longer than zero",
    }[words] == message


def test_expires_survives_the_formatter() -> None:
    text = 'policy p { ask t { approver role "ops"; expires 1h30m; grant once ttl 5m } }\n'
    formatted = format_source(Source("x.harness", text)).text
    assert formatted is not None and "    expires 1h30m\n" in formatted
    again = format_source(Source("x.harness", formatted))
    assert again.text == formatted and not again.changed
    assert parse_source(Source("x.harness", formatted)).ok


# -- the runtime ------------------------------------------------------------------------------


def test_the_deadline_is_recorded_and_seen_the_same_after_a_restart(
    spec: Spec,
    opener: Callable[[], Any],  # noqa: F811  (the fixture imported above)
    clock: Clock,
    agent: Harness,
) -> None:
    _, _, req = ask(agent)
    assert req.expires_at == clock.now + timedelta(minutes=30)
    clock.now += timedelta(minutes=10)  # the second process starts later: the deadline stays
    console = Harness(spec, store=opener(), clock=clock)
    (shown,) = ops.pending_approvals(console)
    assert shown["expires_at"] == req.expires_at.isoformat()
    assert shown["expires_in_ms"] == 20 * 60_000
    assert datetime.fromisoformat(shown["expires_at"]) == req.expires_at


def test_an_ask_without_expires_waits_until_answered(spec: Spec, tmp_path: Path) -> None:
    clock = Clock()
    text = SPEC.replace("    expires 30m\n", "")
    h = Harness(compile_text(tmp_path, text), clock=clock)
    _, _, req = ask(h)
    clock.now += timedelta(days=400)
    (shown,) = ops.pending_approvals(h)
    assert shown["expires_at"] is None and shown["expires_in_ms"] is None
    assert ops.approve(h, req.request_id, by=OPS)["status"] == "approved"


@pytest.mark.parametrize("answer", ["approve", "deny", "approve_with_edits"])
def test_an_answer_after_the_deadline_is_refused_and_the_expiry_recorded_once(
    spec: Spec, tmp_path: Path, answer: str
) -> None:
    clock = Clock()
    h = Harness(spec, clock=clock)
    s, call, req = ask(h)
    clock.now += timedelta(minutes=30)  # the deadline itself: too late
    assert ops.pending_approvals(h) == []  # not pending, and nothing recorded by the read
    assert ops.approval(h, req.request_id)["status"] == "expired"
    assert not [e for e in h.store.read() if e.type == "approval.resolved"]
    commands = {
        "approve": lambda: ops.approve(h, req.request_id, by=OPS),
        "deny": lambda: ops.deny(h, req.request_id, by=OPS, reason="no"),
        "approve_with_edits": lambda: ops.approve_with_edits(
            h, req.request_id, {"service": "billing"}, by=OPS
        ),
    }
    for _ in range(2):  # the second answer is refused the same way: nothing more is recorded
        with pytest.raises(ApprovalError) as err:
            commands[answer]()
        assert err.value.code == "expired"
        assert f"`{req.request_id}` expired at {req.expires_at.isoformat()}" in err.value.message
    resolved = [e.payload for e in h.store.read() if e.type == "approval.resolved"]
    assert [(p["outcome"], p["by"]) for p in resolved] == [("expired", None)]
    result = s.invoke(call)  # the agent's call: a structured refusal, never run
    assert not result.ran and result.error_category == "expired"
    assert "expired" in (result.error or "") and req.request_id in (result.error or "")
    state = s.action_state(call)
    assert state is not None and state.value == "CANCELLED"


def test_an_answer_just_before_the_deadline_wins(spec: Spec) -> None:
    clock = Clock()
    h = Harness(spec, clock=clock)
    s, call, req = ask(h)
    clock.now += timedelta(minutes=30) - timedelta(milliseconds=1)
    assert ops.pending_approvals(h)[0]["expires_in_ms"] == 1
    assert ops.approve(h, req.request_id, by=OPS)["status"] == "approved"
    clock.now += timedelta(minutes=1)
    assert h.expire_approvals() == []  # answered: nothing expires
    assert s.invoke(call).ran


def test_the_agent_invoking_its_call_records_the_expiry_and_gets_a_refusal(
    spec: Spec,
    opener: Callable[[], Any],  # noqa: F811  (the fixture imported above)
    clock: Clock,
    agent: Harness,
) -> None:
    s, call, req = ask(agent)
    waiting = s.invoke(call)
    assert not waiting.ran and waiting.error_category == "waiting_approval"
    clock.now += timedelta(hours=1)
    refused = s.invoke(call)
    assert not refused.ran and refused.error_category == "expired"
    assert not refused.retryable
    console = Harness(spec, store=opener(), clock=clock)  # another process, after a restart
    with pytest.raises(ApprovalError) as err:
        ops.approve(console, req.request_id, by=OPS)
    assert err.value.code == "expired"
    state = s.action_state(call)
    assert state is not None and state.value == "CANCELLED"
    outcomes = [e.payload["outcome"] for e in console.store.read() if e.type == "approval.resolved"]
    assert outcomes == ["expired"]


def test_an_expiry_recorded_by_another_process_reaches_the_agent(
    spec: Spec,
    opener: Callable[[], Any],  # noqa: F811  (the fixture imported above)
    clock: Clock,
    agent: Harness,
) -> None:
    s, call, req = ask(agent)
    clock.now += timedelta(minutes=45)
    console = Harness(spec, store=opener(), clock=clock)
    with pytest.raises(ApprovalError) as err:  # a late denial records the expiry
        ops.deny(console, req.request_id, by=OPS, reason="too late anyway")
    assert err.value.code == "expired"
    refused = s.invoke(call)  # the agent's process has not caught up: invoking does
    assert not refused.ran and refused.error_category == "expired"
    state = s.action_state(call)
    assert state is not None and state.value == "CANCELLED"
    events = [e.type for e in Harness(spec, store=opener()).store.read()]
    assert events.count("approval.resolved") == 1 and "task.fact" not in events  # no denial


def test_a_sweep_records_each_expiry_once_across_processes(
    spec: Spec,
    opener: Callable[[], Any],  # noqa: F811  (the fixture imported above)
    clock: Clock,
    agent: Harness,
) -> None:
    ask(agent, "call-1")
    _, _, read = ask(agent, "call-2", tool="deploy.status")  # the risk table's ASK: 5m
    clock.now += timedelta(minutes=6)
    consoles = [Harness(spec, store=opener(), clock=clock) for _ in range(2)]
    swept = ops.expire_approvals(consoles[0])
    assert [r["request_id"] for r in swept] == [read.request_id]
    assert swept[0]["status"] == "expired"
    assert ops.expire_approvals(consoles[1]) == []  # already recorded by the first
    assert [r["tool_id"] for r in ops.pending_approvals(consoles[1])] == ["deploy.run"]


def answer_and_sweep(operator: Harness, sweeper: Harness, request_id: str) -> dict[str, Any]:
    """`operator` approves `request_id` while `sweeper` records expiries, at the same moment."""
    barrier = threading.Barrier(2)
    results: dict[str, Any] = {}

    def approve() -> None:
        barrier.wait()
        try:
            results["approve"] = ops.approve(operator, request_id, by=OPS)["status"]
        except ApprovalError as exc:
            results["approve"] = exc.code

    def sweep() -> None:
        barrier.wait()
        results["sweep"] = [r.request_id for r in sweeper.expire_approvals()]

    threads = [threading.Thread(target=approve), threading.Thread(target=sweep)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_an_expiry_and_a_concurrent_answer_never_both_win(
    spec: Spec,
    opener: Callable[[], Any],  # noqa: F811  (the fixture imported above)
) -> None:
    """The operator's clock says the deadline has not passed, the sweeper's that it has: the
    claim on the request's stream lets exactly one of them resolve it."""
    early, late = Clock(), Clock()
    late.now = early.now + timedelta(minutes=31)
    agent = Harness(spec, store=opener(), clock=early)
    for round_ in range(3):
        _, _, req = ask(agent, f"call-{round_}")
        operator = Harness(spec, store=opener(), clock=early)
        sweeper = Harness(spec, store=opener(), clock=late)
        results = answer_and_sweep(operator, sweeper, req.request_id)
        fresh = Harness(spec, store=opener(), clock=early)
        outcomes = [
            e.payload["outcome"]
            for e in fresh.store.read()
            if e.type == "approval.resolved" and e.payload["approval_id"] == req.request_id
        ]
        assert len(outcomes) == 1, (outcomes, results)
        if outcomes == ["approved"]:
            assert results == {"approve": "approved", "sweep": []}
        else:
            assert outcomes == ["expired"]
            assert results["sweep"] == [req.request_id]
            assert results["approve"] in ("not-pending", "expired")
        assert fresh.verify().ok


# -- the CLI ----------------------------------------------------------------------------------


def test_the_cli_lists_the_deadline_and_refuses_an_expired_request_with_its_code(
    spec: Spec, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harnessc.compiler.cli import main
    from harnessc.runtime.log.store import SQLiteStore

    db = str(tmp_path / "e.db")
    spec_file = tmp_path / "g.harness"
    spec_file.write_text(SPEC, encoding="utf-8")
    old = Clock()  # asked long ago: the CLI's clock (the system's) is past the deadline
    _, _, stale = ask(Harness(spec, store=SQLiteStore(db), clock=old), "call-1")
    now = Clock()
    now.now = datetime.now(UTC)
    _, _, live = ask(Harness(spec, store=SQLiteStore(db), clock=now), "call-2")
    assert main(["approvals", "list", "--log", db]) == 0
    listed = capsys.readouterr().out
    assert stale.request_id not in listed and live.request_id in listed
    assert f"expires {live.expires_at.isoformat()} (" in listed and " left)" in listed
    assert main(["approvals", "show", stale.request_id, "--log", db]) == 0
    shown = capsys.readouterr().out
    assert f"expiry: expired at {stale.expires_at.isoformat()}" in shown
    args = ["--log", db, "--spec", str(spec_file), "--as", '{"user": "u-ops", "role": "ops"}']
    assert main(["approvals", "approve", stale.request_id, *args]) == 1
    refused = capsys.readouterr().err
    assert refused.startswith(f"error[expired]: the approval request `{stale.request_id}` expired")
    assert main(["approvals", "expire", "--log", db]) == 0
    assert capsys.readouterr().out == "nothing expired\n"  # the refused answer recorded it
