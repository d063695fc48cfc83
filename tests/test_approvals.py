"""Approvals and grants: an approval authorises exactly what it names, for its ttl, and no more."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from harnessc.compiler.pipeline import check
from harnessc.runtime import ApprovalError, Facts, Harness, PendingCall, Refusal, SQLiteStore
from harnessc.runtime.model import Spec
from harnessc.runtime.model.canonical import Execution
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .budget import examples
from .conftest import ROOT

SHELL = """
harness g { version "1.0.0" }
tool shell.run {
  summary "Run a command."
  effects write external
  risk high
  timeout 1m
  input { cmd: string, n: int?, token: string? secret }
}
tool shell.peek { summary "Read a file."; effects read; input { cmd: string, n: int? } }
policy p {
  default deny
  ops: ask shell.run, shell.peek {
    approver role "ops"
    grant once ttl 10m
    reason "Operators approve each command."
  }
}
surface s { expose shell.* }
agent a { surface s; policy p }
"""
OPS = {"user": "u-ops", "role": "ops"}
BASE_ARGS = {"cmd": "ls", "n": 1}
BASE_EXEC = Execution(cwd="/repo", env={"A": "1"}, timeout_ms=1000, target="host-1")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 5, 9, 7, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def compile_text(tmp_path: Path, text: str) -> Spec:
    path = tmp_path / "g.harness"
    path.write_text(text, encoding="utf-8")
    result = check([path])
    assert result.ok and result.model is not None, [d.message for d in result.diagnostics]
    return result.model


@pytest.fixture(scope="module")
def shell_spec(tmp_path_factory: pytest.TempPathFactory) -> Spec:
    return compile_text(tmp_path_factory.mktemp("shell"), SHELL)


@pytest.fixture(scope="module")
def remediation() -> Spec:
    result = check([ROOT / "examples" / "remediation" / "remediation.harness"])
    assert result.ok and result.model is not None
    return result.model


def frozen(result: PendingCall | Refusal) -> PendingCall:
    assert isinstance(result, PendingCall), result
    return result


def approved_base(spec: Spec) -> tuple[Harness, Any, PendingCall]:
    h = Harness(spec)
    s = h.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1")
    base = frozen(s.normalize("shell.run", "call-1", BASE_ARGS, execution=BASE_EXEC))
    request = s.request_approval(base)
    outcome = h.approve(request.request_id, by=OPS)
    assert outcome.grant is not None and outcome.grant.scope == "once"
    return h, s, base


# execution parameters a harness accepts: no NUL byte, no `..` (see test_bad_input.py for those)
PLAIN = st.characters(blacklist_characters="\x00.", blacklist_categories=("Cs",))
VARIANTS = st.one_of(
    st.tuples(st.just("tool_id"), st.just("shell.peek")),
    st.tuples(st.just("tool_call_id"), st.text(min_size=1, max_size=8)),
    st.tuples(st.just("cmd"), st.text(max_size=8)),
    st.tuples(st.just("n"), st.integers(-5, 5)),
    st.tuples(st.just("cwd"), st.text(PLAIN, min_size=1, max_size=8)),
    st.tuples(st.just("env"), st.dictionaries(st.sampled_from("ABC"), st.text(PLAIN, max_size=3))),
    st.tuples(st.just("timeout_ms"), st.integers(1, 10_000)),
    st.tuples(st.just("target"), st.text(PLAIN, min_size=1, max_size=8)),
)


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(change=VARIANTS)
def test_a_once_grant_never_matches_when_any_part_differs(
    shell_spec: Spec, change: tuple[str, Any]
) -> None:
    _, s, base = approved_base(shell_spec)
    part, value = change
    tool, call_id, args = "shell.run", "call-1", dict(BASE_ARGS)
    execution = dict(cwd="/repo", env={"A": "1"}, timeout_ms=1000, target="host-1")
    if part == "tool_id":
        tool = value
    elif part == "tool_call_id":
        call_id = value
    elif part in args:
        args[part] = value
    else:
        execution[part] = value
    call = frozen(s.normalize(tool, call_id, args, execution=Execution(**execution)))
    same = (call.tool_id, call.tool_call_id, call.input_hash) == (
        base.tool_id,
        base.tool_call_id,
        base.input_hash,
    )
    decision, grant = s.judge(call)
    assert decision.effect == "ask"
    assert (grant is not None) == same
    if not same:
        assert not s.invoke(call).ran
    # the approved call itself is still authorised
    assert s.judge(base)[1] is not None


def test_a_once_grant_is_spent_by_its_call(shell_spec: Spec) -> None:
    h, s, base = approved_base(shell_spec)
    h.bind("shell.run", lambda args: {})
    assert s.invoke(base).ok
    grant = next(iter(h.approvals.grants.values()))
    assert h.approvals.grants[grant.grant_id].status == "used"
    other = Harness(shell_spec)  # a grant belongs to its harness's store, never to another
    t = other.session("a", actor={"user": "u-1"}, task="t-1")
    again = frozen(t.normalize("shell.run", "call-1", BASE_ARGS, execution=BASE_EXEC))
    assert t.judge(again)[1] is None


def test_a_grant_expires_with_its_ttl(shell_spec: Spec) -> None:
    clock = Clock()
    h = Harness(shell_spec, clock=clock)
    h.bind("shell.run", lambda args: {})
    s = h.session("a", actor={"user": "u-1"}, task="t-1")
    call = frozen(s.normalize("shell.run", "call-1", BASE_ARGS))
    h.approve(s.request_approval(call).request_id, by=OPS)
    assert s.judge(call)[1] is not None
    clock.now += timedelta(minutes=10)
    assert s.judge(call)[1] is None
    result = s.invoke(call)
    assert not result.ran and result.error_category == "cancelled"


def test_only_a_named_approver_may_approve(shell_spec: Spec) -> None:
    h = Harness(shell_spec)
    s = h.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1")
    call = frozen(s.normalize("shell.run", "call-1", BASE_ARGS))
    request = s.request_approval(call)
    with pytest.raises(ApprovalError) as err:
        h.approve(request.request_id, by={"user": "u-1", "role": "dev"})
    assert err.value.code == "not-an-approver"
    outcome = h.approve(request.request_id, by={"user": "u-2", "role": "dev", "roles": ["ops"]})
    assert outcome.status == "approved"
    with pytest.raises(ApprovalError) as err:
        h.approve(request.request_id, by=OPS)
    assert err.value.code == "not-pending"
    with pytest.raises(ApprovalError) as err:
        h.approve("apr-missing", by=OPS)
    assert err.value.code == "unknown-request"


def test_a_denial_is_a_task_fact_and_cancels_the_call(shell_spec: Spec) -> None:
    h = Harness(shell_spec)
    ran: list[int] = []
    h.bind("shell.run", lambda args: ran.append(1) or {})
    s = h.session("a", actor={"user": "u-1"}, task="t-1")
    call = frozen(s.normalize("shell.run", "call-1", BASE_ARGS))
    request = s.request_approval(call)
    outcome = h.deny(request.request_id, by=OPS, reason="not during the incident")
    assert outcome.status == "denied"
    assert s.task["denials"] == [
        {
            "tool_id": "shell.run",
            "tool_call_id": "call-1",
            "input_hash": call.input_hash,
            "by": "u-ops",
            "reason": "not during the incident",
        }
    ]
    facts = [e for e in h.store.read(s.id) if e.type == "task.fact"]
    assert facts[0].payload["fact"] == "denied" and facts[0].payload["task_id"] == "t-1"
    assert not s.invoke(call).ran and ran == []


def test_the_request_says_what_why_as_whom_on_what_impact_and_scope(remediation: Spec) -> None:
    h = Harness(remediation)
    facts = Facts.of({}, connected={"change_platform"})
    s = h.session(
        "planner",
        actor={"user": "u-1842", "role": "engineer", "tenant": "acme"},
        task="t-1",
        facts=facts,
        resource={"tenant": "acme", "cvss": 5.3},
    )
    call = frozen(
        s.normalize(
            "finding.accept_risk",
            "call-1",
            {
                "finding_id": "CVE-2026-1",
                "justification": "No fixed release exists yet; the endpoint is disabled for now.",
                "service": "payment-service",
                "environment": "production",
                "exploit_notes": "curl -X POST /pwn",
            },
            execution=Execution(target="payment-service", env={"TOKEN": "hunter2"}),
        )
    )
    decision = s.decide(call)
    assert (decision.effect, decision.rule) == ("ask", "remediation.waiver_by_owner")
    req = s.request_approval(call)
    assert req.what.startswith("`finding.accept_risk`(")
    assert req.why == "A risk acceptance is signed by the service owner."
    assert req.as_whom == {"user": "u-1842", "role": "engineer", "tenant": "acme"}
    assert req.on_what == {"resource": {"tenant": "acme", "cvss": 5.3}, "target": "payment-service"}
    assert req.impact == {"effects": ["reversible", "write"], "risk": "high"}
    assert req.arguments["exploit_notes"] == "[REDACTED]"
    assert req.execution["env"] == {"TOKEN": "[REDACTED]"}
    assert req.reversibility == "reversible"
    assert req.scope["grant"] == "once" and req.scope["ttl_ms"] == 86_400_000
    assert [(a.kind, a.value) for a in req.approvers] == [("user", "u-0007")]
    log = "".join(e.payload_json for e in h.store.read())
    assert "curl -X POST" not in log and "hunter2" not in log
    assert h.approve(req.request_id, by={"user": "u-0007"}).status == "approved"


def test_a_task_grant_covers_the_same_tool_in_the_same_task_only(remediation: Spec) -> None:
    h = Harness(remediation)
    facts = Facts.of({"workspace.open": True, "workspace.root": "/repo"})
    actor = {"user": "u-1", "role": "engineer", "roles": ["user"], "tenant": "acme"}
    parent = h.session("planner", actor=actor, task="t-1", facts=facts)
    s = parent.delegate("patch it", agent="generic")
    first = frozen(s.normalize("write_file", "w-1", {"path": "/repo/a", "content": "x"}))
    grant = h.approve(s.request_approval(first).request_id, by=actor).grant
    assert grant is not None and grant.scope == "task" and grant.task_id == "t-1"
    second = frozen(s.normalize("write_file", "w-2", {"path": "/repo/b", "content": "y"}))
    assert s.judge(second)[1] == grant
    shell = frozen(s.normalize("terminal_session", "t-1", {"command": "ls"}))
    assert s.judge(shell)[0].effect == "ask" and s.judge(shell)[1] is None
    other_task = h.session("generic", actor=actor, task="t-2", facts=facts)
    elsewhere = frozen(
        other_task.normalize("write_file", "w-3", {"path": "/repo/a", "content": "x"})
    )
    assert other_task.judge(elsewhere)[1] is None


def test_a_class_grant_covers_its_class_inside_the_rule_scope(remediation: Spec) -> None:
    h = Harness(remediation)
    facts = Facts.of({}, running={"ci_runner"})
    s = h.session("planner", actor={"user": "u-1", "role": "engineer"}, task="t", facts=facts)
    first = frozen(s.normalize("run_ci", "r-1", {"ref": "release/1.2"}))
    assert s.decide(first).rule == "remediation.ci_release"
    sre = {"user": "u-5", "role": "sre"}
    grant = h.approve(s.request_approval(first).request_id, by=sre).grant
    assert grant is not None and grant.scope == "class"
    assert grant.to_dict()["condition"] == 'args.ref startswith "release/"'
    same_class = frozen(s.normalize("run_ci", "r-2", {"ref": "release/1.3"}))
    assert s.judge(same_class)[1] == grant
    long_run = frozen(s.normalize("run_ci", "r-3", {"ref": "main", "max_minutes": 90}))
    decision, found = s.judge(long_run)
    assert decision.rule == "remediation.ci_release" and found is None


def test_no_reader_sees_a_denied_request_whose_call_still_waits(
    shell_spec: Spec, tmp_path: Path
) -> None:
    """An operator's process denies a request: the answer, the denial and the cancelled call
    reach the log together, so an agent polling it (another process) that sees the request
    denied finds its call cancelled, never still waiting for a person."""
    with SQLiteStore(tmp_path / "e.db") as agent_store:
        agent = Harness(shell_spec, store=agent_store)
        s = agent.session("a", actor={"user": "u-1"}, task="t-1")
        call = frozen(s.normalize("shell.run", "call-1", BASE_ARGS))
        request = s.request_approval(call)
        seen: list[tuple[str | None, str | None]] = []

        def as_a_reader_sees_it() -> None:
            answer = state = None
            with SQLiteStore(tmp_path / "e.db") as reader:
                for e in reader.read():
                    if e.type == "approval.resolved":
                        answer = e.payload["outcome"]
                    elif e.type == "action.transition" and e.payload["tool_call_id"] == "call-1":
                        state = e.payload["to"]
            seen.append((answer, state))

        with SQLiteStore(tmp_path / "e.db") as operator_store:
            for name in ("append", "append_many"):
                write = getattr(operator_store, name)

                def observed(*args: Any, _write: Any = write, **kwargs: Any) -> Any:
                    done = _write(*args, **kwargs)
                    as_a_reader_sees_it()
                    return done

                setattr(operator_store, name, observed)
            operator = Harness(shell_spec, store=operator_store)
            operator.deny(request.request_id, by=OPS, reason="not during the incident")
        assert seen and seen[-1] == ("rejected", "CANCELLED"), seen
        assert all(state == "CANCELLED" for answer, state in seen if answer == "rejected"), seen
        result = s.invoke(call)
        assert not result.ran and result.error_category == "cancelled", result.error
        assert s.task["denials"][0]["reason"] == "not during the incident"


def test_an_approver_without_the_secret_values_approves_the_request_as_recorded(
    shell_spec: Spec, tmp_path: Path
) -> None:
    """The operator's process (another harness on the same log) cannot rebuild a call whose
    secret values are never stored: it approves the request as recorded, under the rule that
    asked, and the agent's process runs the call with its values."""
    with SQLiteStore(tmp_path / "e.db") as agent_store:
        agent = Harness(shell_spec, store=agent_store)
        seen: list[str] = []
        agent.bind("shell.run", lambda args: seen.append(args["token"]) or {})
        s = agent.session("a", actor={"user": "u-1", "role": "ops"}, task="t-1")
        call = frozen(s.normalize("shell.run", "call-1", {"cmd": "ls", "token": "s3cr3t"}))
        request = s.request_approval(call)
        with SQLiteStore(tmp_path / "e.db") as operator_store:
            operator = Harness(shell_spec, store=operator_store)
            assert operator.approvals.get(request.request_id).pending is None
            # risk high: the requester is no approver of their own call, as under a judgement
            with pytest.raises(ApprovalError) as err:
                operator.approve(request.request_id, by={"user": "u-1", "role": "ops"})
            assert err.value.code == "self-approval"
            outcome = operator.approve(request.request_id, by=OPS)
        grant = outcome.grant
        assert outcome.status == "approved" and grant is not None and grant.rule_bound
        assert (grant.rule, grant.input_hash) == (request.rule, call.input_hash)
        assert agent.approvals.grants.get(grant.grant_id) is None  # not seen here yet
        result = s.invoke(call)  # judged again here, with the values: the grant authorises it
        assert result.ran and result.ok and seen == ["s3cr3t"]
        held = agent.approvals.grants[grant.grant_id]
        assert held.rule_bound and held.status == "used"
        # bound to the rule that asked: the same call asked by another rule is not authorised
        live = replace(held, status="active")
        now = agent.clock()
        asked = dict(rule=request.rule, policy=grant.policy, task_id="t-1", now=now)
        assert live.matches(call, **asked)
        assert not live.matches(call, **{**asked, "rule": "other"})


def test_asking_again_about_a_call_returns_its_waiting_request(
    shell_spec: Spec, tmp_path: Path
) -> None:
    # each ask made another request: the second stayed pending after the first was approved
    # and the call ran, for an operator to approve a call that had run already
    from harnessc.runtime.session.operations import pending_approvals

    store = SQLiteStore(tmp_path / "log.db")
    h = Harness(shell_spec, store=store)
    s = h.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1")
    base = frozen(s.normalize("shell.run", "call-1", BASE_ARGS, execution=BASE_EXEC))
    first = s.request_approval(base)
    assert s.request_approval(base).request_id == first.request_id
    assert s.request_approval(base, s.decide(base)).request_id == first.request_id
    other = frozen(s.normalize("shell.run", "call-2", BASE_ARGS, execution=BASE_EXEC))
    second = s.request_approval(other)
    assert second.request_id != first.request_id
    assert len(pending_approvals(h)) == 2
    # another process on the same log, the session resumed: the request is the recorded one
    again = Harness(shell_spec, store=SQLiteStore(tmp_path / "log.db"))
    t = again.resume(s.id)
    asked = t.request_approval(
        frozen(t.normalize("shell.run", "call-1", BASE_ARGS, execution=BASE_EXEC))
    )
    assert asked.request_id == first.request_id and asked.pending is not None
    again.approve(first.request_id, by=OPS)
    again.bind("shell.run", lambda args: {})
    assert t.invoke(asked.pending).ok
    assert [r["request_id"] for r in pending_approvals(again)] == [second.request_id]
    kinds = [e.type for e in again.store.read() if e.type == "approval.requested"]
    assert len(kinds) == 2
