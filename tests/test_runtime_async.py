"""Asynchronous actions (an executor accepts the work, the result comes later) and executors
that outlive their timeout, on examples/remediation."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from harnessc.runtime import (
    Accepted,
    ActionError,
    ActionState,
    Harness,
    Outcome,
    SQLiteStore,
)
from harnessc.runtime.model import Spec
from harnessc.runtime.model.canonical import Execution

from .test_harness import CHANGE, RELEASE_MANAGER, build, pending, planner

STAGING = {"change_id": "chg-241", "environment": "staging"}
DEPLOYED = {
    "deployment_id": "dep-1",
    "dashboard": "https://deploy.example/dep-1",
    "rollout": {"canary_percent": 10, "started_at": "2026-09-17T10:00:00Z", "state": "rolling"},
}


@pytest.fixture(scope="module")
def spec() -> Spec:
    return build()


def accepting(h: Harness, handles: list[str] | None = None) -> None:
    """production.deploy hands the rollout to the platform and returns at once."""

    @h.implement("production.deploy")
    def deploy(args: dict[str, Any], ctx: Any) -> Accepted:
        if handles is not None:
            handles.append(ctx.action_id)
        return Accepted(handle=f"rollout-{ctx.pending.tool_call_id}")


def transitions(h: Harness, call_id: str) -> list[str]:
    return [
        e.payload["to"]
        for e in h.store.read()
        if e.type == "action.transition" and e.payload["tool_call_id"] == call_id
    ]


def test_accepted_work_waits_for_its_result_and_complete_records_it(spec: Spec) -> None:
    h = Harness(spec)
    seen: list[str] = []
    accepting(h, seen)
    s = planner(h)
    call = pending(s.normalize("production.deploy", "call-1", STAGING))

    accepted = s.invoke(call)
    assert accepted.accepted and accepted.status == "accepted" and accepted.ran
    assert accepted.state == "WAITING_RESULT" and accepted.handle == "rollout-call-1"
    assert accepted.action_id == seen[0] == s.action_id(call)
    assert "rollout-call-1" in accepted.observation
    assert s.action_state(call) is ActionState.WAITING_RESULT
    assert s.invoke(call) is accepted  # it never runs twice
    item = s.evidence().for_call("call-1")[0]
    assert item.status == "accepted" and item.handle == "rollout-call-1"
    assert "proves nothing yet" in item.proves

    done = h.complete(accepted.action_id, DEPLOYED, by="deploy-webhook")
    assert done.ok and done.state == "SUCCEEDED" and done.completed_by == "deploy-webhook"
    assert done.data == DEPLOYED and done.handle == "rollout-call-1"
    assert done.started_at == accepted.started_at and done.executor == accepted.executor
    assert s.action_state(call) is ActionState.SUCCEEDED
    assert s.invoke(call) is done
    assert transitions(h, "call-1") == [
        "REQUESTED",
        "VALIDATED",
        "AUTHORIZED",
        "RUNNING",
        "ACCEPTED",
        "WAITING_RESULT",
        "SUCCEEDED",
    ]
    item = s.evidence().for_call("call-1")[0]
    assert (item.status, item.data, item.completed_by) == ("success", DEPLOYED, "deploy-webhook")
    assert item.proves.endswith("returned dashboard, deployment_id, rollout")
    assert h.verify().ok


def test_completing_twice_is_refused_with_a_structured_error(spec: Spec) -> None:
    h = Harness(spec)
    accepting(h)
    s = planner(h)
    call = pending(s.normalize("production.deploy", "call-1", STAGING))
    action_id = s.invoke(call).action_id
    assert action_id is not None
    first = h.complete(action_id, DEPLOYED, by="webhook")
    with pytest.raises(ActionError) as err:
        h.complete(action_id, {**DEPLOYED, "deployment_id": "dep-2"}, by="webhook-retry")
    assert err.value.to_dict() == {
        "code": "already-finished",
        "message": err.value.message,
        "action_id": action_id,
        "state": "SUCCEEDED",
    }
    assert "already SUCCEEDED" in err.value.message
    assert s.invoke(call) is first  # the first result stands
    assert sum(1 for to in transitions(h, "call-1") if to == "SUCCEEDED") == 1


def test_concurrent_completions_record_one_result(spec: Spec) -> None:
    h = Harness(spec)
    accepting(h)
    s = planner(h)
    action_id = s.invoke(pending(s.normalize("production.deploy", "c-1", STAGING))).action_id
    assert action_id is not None
    outcomes: list[str] = []

    def report(n: int) -> None:
        try:
            h.complete(action_id, {**DEPLOYED, "deployment_id": f"dep-{n}"}, by=f"w-{n}")
            outcomes.append("recorded")
        except ActionError as err:
            outcomes.append(err.code)

    threads = [threading.Thread(target=report, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["already-finished"] * 5 + ["recorded"]


def test_only_accepted_work_can_be_completed(spec: Spec) -> None:
    h = Harness(spec)
    h.bind("change.create", lambda args: {"change_id": "chg-1", "state": "pending"})
    accepting(h)
    s = planner(h)
    created = pending(s.normalize("change.create", "c-1", CHANGE))
    ran = s.invoke(created)
    assert ran.ok and ran.action_id is not None
    with pytest.raises(ActionError) as err:
        h.complete(ran.action_id, {"change_id": "chg-2", "state": "pending"})
    assert err.value.code == "already-finished"

    waiting = pending(
        s.normalize("production.deploy", "c-2", {**STAGING, "environment": "production"})
    )
    assert s.decide(waiting).effect == "ask"
    waiting_id = s.action_id(waiting)
    assert waiting_id is not None
    with pytest.raises(ActionError) as err:
        h.complete(waiting_id, DEPLOYED)
    assert (err.value.code, err.value.state) == ("not-waiting", "WAITING_APPROVAL")
    with pytest.raises(ActionError) as err:
        h.complete("act-nope", DEPLOYED)
    assert err.value.code == "unknown-action"


def test_a_completion_is_checked_like_an_executors_output(spec: Spec) -> None:
    h = Harness(spec)
    accepting(h)
    s = planner(h)
    bad = s.invoke(pending(s.normalize("production.deploy", "c-1", STAGING)))
    broken = s.invoke(pending(s.normalize("production.deploy", "c-2", STAGING)))
    partial = s.invoke(pending(s.normalize("production.deploy", "c-3", STAGING)))
    assert bad.action_id and broken.action_id and partial.action_id

    wrong = h.complete(bad.action_id, {**DEPLOYED, "rollout": {"state": "exploded"}})
    assert (wrong.status, wrong.state, wrong.error_category) == (
        "failure",
        "FAILED",
        "invalid_output",
    )
    assert "`$.rollout" in (wrong.error or "")

    failed = h.complete(broken.action_id, error="rollout aborted: error rate 7%", by="platform")
    assert (failed.status, failed.error_category) == ("failure", "external_error")
    assert failed.side_effect is True and failed.retryable is True  # deploy is idempotent
    assert failed.error == "rollout aborted: error rate 7%"

    half = h.complete(partial.action_id, Outcome("partial", DEPLOYED, "canary only"))
    assert (half.status, half.state, half.observation) == ("partial", "SUCCEEDED", "canary only")


def test_cancelling_accepted_work_leaves_an_unknown_outcome_and_refuses_a_late_result(
    spec: Spec,
) -> None:
    h = Harness(spec)
    accepting(h)
    s = planner(h)
    call = pending(s.normalize("production.deploy", "c-1", STAGING))
    action_id = s.invoke(call).action_id
    assert action_id is not None
    cancelled = h.cancel(action_id, reason="the user stopped the task", by={"user": "u-1842"})
    assert (cancelled.status, cancelled.state, cancelled.error_category) == (
        "unknown",
        "CANCELLED",
        "cancelled",
    )
    assert cancelled.side_effect is True and cancelled.completed_by == "u-1842"
    assert "a side effect may have happened" in cancelled.observation
    assert s.action_state(call) is ActionState.CANCELLED
    with pytest.raises(ActionError) as err:
        h.complete(action_id, DEPLOYED, by="webhook")
    assert (err.value.code, err.value.state) == ("already-finished", "CANCELLED")
    with pytest.raises(ActionError) as err:
        h.cancel(action_id)
    assert err.value.code == "already-finished"
    item = s.evidence().for_call("c-1")[0]
    assert item.state == "CANCELLED" and item.late == "completed"
    assert "came after it was cancelled" in item.proves


def test_cancelling_a_call_waiting_for_approval_withdraws_the_request(spec: Spec) -> None:
    h = Harness(spec)
    ran: list[int] = []
    h.bind("production.deploy", lambda args: ran.append(1) or DEPLOYED)
    s = planner(h)
    call = pending(
        s.normalize("production.deploy", "c-1", {**STAGING, "environment": "production"})
    )
    request = s.request_approval(call)
    action_id = s.action_id(call)
    assert action_id is not None
    result = h.cancel(action_id, reason="superseded")
    assert not result.ran and result.error_category == "cancelled" and result.side_effect is False
    assert h.approvals.get(request.request_id).status == "withdrawn"
    assert not s.invoke(call).ran and ran == []


def test_an_async_executor_may_accept_work_too(spec: Spec) -> None:
    h = Harness(spec)

    @h.implement("production.deploy")
    async def deploy(args: dict[str, Any], ctx: Any) -> Accepted:
        await asyncio.sleep(0)
        return Accepted(handle="job-9", observation="queued as job-9")

    s = planner(h)
    call = pending(s.normalize("production.deploy", "c-1", STAGING))
    accepted = asyncio.run(s.ainvoke(call))
    assert accepted.accepted and accepted.observation == "queued as job-9"
    assert accepted.action_id is not None
    assert h.complete(accepted.action_id, DEPLOYED).ok


def test_approved_work_that_is_accepted_is_completed_with_its_grant(spec: Spec) -> None:
    h = Harness(spec)
    accepting(h)
    s = planner(h)
    call = pending(
        s.normalize("production.deploy", "c-1", {**STAGING, "environment": "production"})
    )
    grant = h.approve(s.request_approval(call).request_id, by=RELEASE_MANAGER).grant
    assert grant is not None
    accepted = s.invoke(call)
    assert accepted.accepted and accepted.grant_id == grant.grant_id
    assert accepted.action_id is not None
    done = h.complete(accepted.action_id, DEPLOYED)
    assert done.ok and done.grant_id == grant.grant_id


# ---------------------------------------------------------------------------------------------
# A sync executor past its timeout


def wait_for_event(h: Harness, type_: str) -> Any:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = [e for e in h.store.read() if e.type == type_]
        if found:
            return found[0]
        time.sleep(0.01)
    raise AssertionError(f"no `{type_}` event")


def test_a_timed_out_executor_that_returns_later_is_not_recorded_as_success(
    spec: Spec, tmp_path: Any
) -> None:
    h = Harness(spec, store=SQLiteStore(tmp_path / "e.db"))
    release = threading.Event()

    @h.implement("change.create")
    def slow(args: dict[str, Any]) -> dict[str, Any]:
        release.wait(10)
        return {"change_id": "chg-late", "state": "pending"}

    s = planner(h)
    call = pending(s.normalize("change.create", "c-1", CHANGE, execution=Execution(timeout_ms=30)))
    result = s.invoke(call)
    assert (result.status, result.error_category) == ("unknown", "timeout")
    assert result.side_effect is True  # the change may be created after all
    assert s.action_state(call) is ActionState.FAILED
    release.set()
    late = wait_for_event(h, "action.late_result")
    assert late.payload["outcome"] == "returned" and late.payload["used"] is False
    assert late.payload["action_id"] == result.action_id
    assert s.invoke(call) is result  # the late return changed nothing
    assert [e.payload["to"] for e in h.store.read() if e.type == "action.transition"][
        -1
    ] == "FAILED"
    assert "chg-late" not in "".join(e.payload_json for e in h.store.read())
    item = s.evidence().for_call("c-1")[0]
    assert (item.status, item.side_effect, item.late) == ("unknown", True, "returned")
    assert "returned after its timeout, unused" in item.proves
    assert h.verify().ok


def test_a_timed_out_sync_executor_under_ainvoke_is_treated_the_same(spec: Spec) -> None:
    h = Harness(spec)
    release = threading.Event()

    @h.implement("change.create")
    def slow(args: dict[str, Any]) -> dict[str, Any]:
        release.wait(10)
        raise RuntimeError("too late anyway")

    s = planner(h)
    call = pending(s.normalize("change.create", "c-1", CHANGE, execution=Execution(timeout_ms=30)))
    result = asyncio.run(s.ainvoke(call))
    assert (result.status, result.side_effect) == ("unknown", True)
    release.set()
    late = wait_for_event(h, "action.late_result")
    assert late.payload["outcome"] == "raised" and "too late anyway" in late.payload["error"]
    assert s.action_state(call) is ActionState.FAILED
