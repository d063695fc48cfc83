"""Restart recovery: a harness opened on an existing SQLite log (a new process, after a crash)
rebuilds pending approvals, grants, sessions and actions waiting for a result from the events.

Process A is a real subprocess; the test process plays B (and a third process C where two
processes report the same result)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from harnessc.runtime import ActionError, ActionState, ApprovalError, Harness, SQLiteStore
from harnessc.runtime.model import Spec

from .test_harness import DEPLOY, ENGINEER, FACTS, RELEASE_MANAGER, build, pending, variant

STAGING = {"change_id": "chg-241", "environment": "staging"}
DEPLOYED = {
    "deployment_id": "dep-1",
    "dashboard": "https://deploy.example/dep-1",
    "rollout": {"canary_percent": 10, "started_at": "2026-09-17T10:00:00Z", "state": "rolling"},
}
RISK = {
    "finding_id": "CVE-2026-0001",
    "justification": "No fixed version exists yet; the vendor ships one in the next release.",
    "service": "payment-service",
    "environment": "production",
    "exploit_notes": "curl -d @poc.json https://payment-service/internal",
}

# Process A: one harness on the log file; what it did is printed as one JSON line.
PROCESS = r"""
import json, os, sys, time
from harnessc.runtime import Accepted, Facts, Harness, SQLiteStore, Spec

mode, db, spec_path, extra = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
h = Harness(Spec.from_json(open(spec_path, "rb").read()), store=SQLiteStore(db))
facts = Facts.of(
    {"workspace.open": True, "workspace.root": "/repo", "release.freeze": False},
    connected={"change_platform"},
)


def say(**values):
    print(json.dumps(values), flush=True)


if mode == "complete":
    try:
        r = h.complete(extra["action"], extra["data"], by="process-c")
        say(status=r.status)
    except Exception as err:
        say(code=getattr(err, "code", type(err).__name__))
    sys.exit(0)

s = h.session("planner", actor=extra["actor"], task="task-7", facts=facts,
              resource=extra.get("resource", {"tenant": "acme"}))
if mode == "request":
    call = s.normalize(extra["tool"], "call-2", extra["args"])
    request = s.request_approval(call)
    say(session=s.id, request=request.request_id, hash=call.input_hash)
    time.sleep(120)  # killed here
elif mode == "approve-only":
    call = s.normalize("production.deploy", "call-2", extra["args"])
    request = s.request_approval(call)
    outcome = h.approve(request.request_id, by=extra["approver"])
    say(session=s.id, grant=outcome.grant.grant_id, expires=outcome.grant.expires_at.isoformat())
    os._exit(0)  # no clean shutdown
elif mode == "accept":
    h.bind("production.deploy", lambda args, ctx: Accepted(handle="rollout-7"))
    result = s.invoke(s.normalize("production.deploy", "call-1", extra["args"]))
    say(session=s.id, action=result.action_id, status=result.status)
    os._exit(0)
"""


@pytest.fixture(scope="module")
def spec() -> Spec:
    return build()


@pytest.fixture
def files(spec: Spec, tmp_path: Path) -> tuple[Path, Path]:
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(spec.to_json(), encoding="utf-8")
    return tmp_path / "events.db", spec_path


def run(mode: str, files: tuple[Path, Path], **extra: Any) -> dict[str, Any]:
    """Run process A to the end of `mode` and return what it printed."""
    db, spec_path = files
    done = subprocess.run(
        [sys.executable, "-c", PROCESS, mode, str(db), str(spec_path), json.dumps(extra)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    said: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return said


def killed_after_request(files: tuple[Path, Path], **extra: Any) -> dict[str, Any]:
    """Start process A, wait until it recorded an approval request, then SIGKILL it."""
    db, spec_path = files
    a = subprocess.Popen(
        [sys.executable, "-c", PROCESS, "request", str(db), str(spec_path), json.dumps(extra)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert a.stdout is not None
        line = a.stdout.readline()
        assert line, a.stderr.read() if a.stderr else ""
        said: dict[str, Any] = json.loads(line)
    finally:
        os.kill(a.pid, signal.SIGKILL)
        a.wait(timeout=30)
        for stream in (a.stdout, a.stderr):
            if stream is not None:
                stream.close()
    assert a.returncode == -signal.SIGKILL
    return said


def test_an_approval_requested_by_a_killed_process_is_approved_and_runs_in_another(
    spec: Spec, files: tuple[Path, Path]
) -> None:
    said = killed_after_request(files, actor=ENGINEER, tool="production.deploy", args=DEPLOY)

    with SQLiteStore(files[0]) as store:
        assert store.verify().ok
        h = Harness(spec, store=store)
        runs: list[tuple[str, str]] = []

        @h.implement("production.deploy")
        def deploy(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
            runs.append((ctx.pending.tool_call_id, ctx.actor["user"]))
            return DEPLOYED

        request = h.approvals.get(said["request"])
        assert request.status == "pending" and request.tool_call_id == "call-2"
        assert request.approvers[0].value == "release-manager"
        with pytest.raises(ApprovalError) as err:
            h.approve(said["request"], by=ENGINEER)
        assert err.value.code == "not-an-approver"

        outcome = h.approve(said["request"], by=RELEASE_MANAGER)
        assert outcome.status == "approved" and outcome.grant is not None
        assert outcome.grant.input_hash == said["hash"]

        s = h.resume(said["session"])
        assert dict(s.actor) == ENGINEER and s.task_id == "task-7"
        assert s.facts.values == FACTS.values and s.facts.connected == FACTS.connected
        assert s.resource == {"tenant": "acme"}
        call = s.call("call-2")
        assert call is not None and call.input_hash == said["hash"]
        assert s.action_state(call) is ActionState.AUTHORIZED

        # the grant binds the exact triple: another id or other arguments ask again
        other = pending(s.normalize("production.deploy", "call-3", DEPLOY))
        assert not s.invoke(other).ran
        changed = pending(
            s.normalize("production.deploy", "call-2", {**DEPLOY, "canary_percent": 50})
        )
        assert s.invoke(changed).error_category == "waiting_approval"
        result = s.invoke(call)
        assert result.ok and result.grant_id == outcome.grant.grant_id
        assert runs == [("call-2", "u-1842")]
        item = s.evidence().for_call("call-2")[0]
        assert item.approved_by == "u-0042" and item.status == "success"
        assert h.verify().ok


def test_a_policy_change_between_processes_is_applied_when_approved(
    spec: Spec, files: tuple[Path, Path], tmp_path: Path
) -> None:
    said = killed_after_request(files, actor=ENGINEER, tool="production.deploy", args=DEPLOY)
    frozen = variant(
        tmp_path,
        '  allow production.deploy when args.environment == "staging"\n',
        '  allow production.deploy when args.environment == "staging"\n'
        '  incident: deny production.deploy { reason "An incident is open: nothing ships." }\n',
    )
    with SQLiteStore(files[0]) as store:
        h = Harness(frozen, store=store)
        h.bind("production.deploy", lambda args: DEPLOYED)
        outcome = h.approve(said["request"], by=RELEASE_MANAGER)
        assert outcome.status == "denied-by-policy" and outcome.grant is None
        assert outcome.decision.rule == "remediation.incident"
        s = h.resume(said["session"])
        call = s.call("call-2")
        assert call is not None
        refused = s.invoke(call)
        assert not refused.ran and refused.error_category == "cancelled"


def test_a_call_with_secret_values_is_approved_as_recorded_and_runs_with_its_values(
    spec: Spec, files: tuple[Path, Path]
) -> None:
    said = killed_after_request(
        files,
        actor=ENGINEER,
        tool="finding.accept_risk",
        args=RISK,
        resource={"tenant": "acme", "cvss": 5.3},
    )
    with SQLiteStore(files[0]) as store:
        assert RISK["exploit_notes"] not in "".join(e.payload_json for e in store.read())
        h = Harness(spec, store=store)
        seen: list[str] = []
        h.bind(
            "finding.accept_risk",
            lambda args: (
                seen.append(args["exploit_notes"])
                or {"acceptance_id": "acc-1", "expires_at": "2026-10-17"}
            ),
        )
        approver = {"user": "u-0007", "role": "owner"}
        request = h.approvals.get(said["request"])
        # this process never held the secret values: it approves the request as recorded, by
        # an approver of the rule that asked, and the grant holds only under that rule
        outcome = h.approve(said["request"], by=approver)
        assert outcome.status == "approved" and outcome.grant is not None
        assert outcome.grant.rule_bound and outcome.grant.rule == request.rule
        assert outcome.grant.input_hash == said["hash"]

        s = h.resume(said["session"])
        assert s.call("call-2") is None  # the log holds no secret, so not the call either
        wrong = pending(
            s.normalize("finding.accept_risk", "call-2", {**RISK, "exploit_notes": "x"})
        )
        assert wrong.input_hash != said["hash"]
        again = pending(s.normalize("finding.accept_risk", "call-2", RISK))
        assert again.input_hash == said["hash"] == request.input_hash
        assert s.invoke(wrong).error_category != "executor_error" and seen == []
        assert s.invoke(again).ok and seen == [RISK["exploit_notes"]]


@pytest.mark.parametrize("minutes", [-1, 1])
def test_restored_grants_keep_their_ttl(spec: Spec, files: tuple[Path, Path], minutes: int) -> None:
    said = run("approve-only", files, actor=ENGINEER, args=DEPLOY, approver=RELEASE_MANAGER)
    expires = datetime.fromisoformat(said["expires"])
    with SQLiteStore(files[0]) as store:
        h = Harness(spec, store=store, clock=lambda: expires + timedelta(minutes=minutes))
        grant = h.approvals.grants[said["grant"]]
        assert (grant.scope, grant.expires_at) == ("once", expires)
        h.bind("production.deploy", lambda args: DEPLOYED)
        s = h.resume(said["session"])
        call = s.call("call-2")
        assert call is not None
        result = s.invoke(call)
        if minutes < 0:  # a minute before it expires
            assert result.ok and result.grant_id == said["grant"]
        else:  # a minute after: the grant authorises nothing
            assert not result.ran and result.grant_id is None
            assert result.error_category == "cancelled" and "CANCELLED" in (result.error or "")


def test_accepted_work_is_completed_by_another_process_exactly_once(
    spec: Spec, files: tuple[Path, Path]
) -> None:
    said = run("accept", files, actor=ENGINEER, args=STAGING)
    assert said["status"] == "accepted"
    with SQLiteStore(files[0]) as store:
        h = Harness(spec, store=store)
        done = h.complete(said["action"], DEPLOYED, by="deploy-webhook")
        assert done.ok and done.handle == "rollout-7" and done.completed_by == "deploy-webhook"
        assert done.executor is not None and done.actor == "u-1842"
        s = h.resume(said["session"])
        call = s.call("call-1")
        assert call is not None and s.invoke(call) is done  # it never runs again
        assert s.evidence().for_call("call-1")[0].status == "success"

    # a third process reporting the same result is refused: the log decides, not memory
    third = run("complete", files, action=said["action"], data=DEPLOYED)
    assert third == {"code": "already-finished"}
    with SQLiteStore(files[0]) as store:
        succeeded = [
            e
            for e in store.read()
            if e.type == "action.transition" and e.payload["to"] == "SUCCEEDED"
        ]
        assert len(succeeded) == 1 and store.verify().ok


def test_an_unknown_session_or_action_is_a_structured_error(spec: Spec, tmp_path: Path) -> None:
    from harnessc.runtime import HarnessError

    with SQLiteStore(tmp_path / "e.db") as store:
        h = Harness(spec, store=store)
        with pytest.raises(HarnessError) as err:
            h.resume("ses-nope")
        assert err.value.code == "unknown-session"
        with pytest.raises(ActionError) as action_err:
            h.complete("act-nope", {})
        assert action_err.value.code == "unknown-action"


def test_a_session_resumed_in_the_same_harness_is_the_open_one(spec: Spec) -> None:
    h = Harness(spec)
    s = h.session("planner", actor=ENGINEER, task="task-7", facts=FACTS)
    assert h.resume(s.id) is s


def test_a_call_made_after_another_process_resumed_its_session_is_approved_there(
    spec: Spec, files: tuple[Path, Path]
) -> None:
    """An operator's process resumes a session to approve its first call; the agent's next
    call in that session is approved there too (taken up from the log, not `call-not-
    restorable`)."""
    agent = Harness(spec, store=SQLiteStore(files[0]))
    operator = Harness(spec, store=SQLiteStore(files[0]))
    s = agent.session("planner", actor=ENGINEER, task="task-7", facts=FACTS)
    outcomes = []
    for n in (1, 2):
        call = pending(s.normalize("production.deploy", f"call-{n}", DEPLOY))
        request = s.request_approval(call)
        outcome = operator.approve(request.request_id, by=RELEASE_MANAGER)
        assert outcome.status == "approved" and outcome.grant is not None
        assert outcome.grant.tool_call_id == f"call-{n}"
        outcomes.append(outcome)
    agent.catch_up()
    assert [agent.projections.approvals[o.request.request_id].status for o in outcomes] == [
        "approved",
        "approved",
    ]
