"""Durable workflows on DBOS with SQLite: steps through the harness, gates, deadlines, the
failure policy, refused decisions, and a worker killed with SIGKILL that resumes without
running a finished step again."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos", reason="durable workflows need dbos (pip install dbos==3.4.0)")

from harnessc.runtime import Harness, SQLiteStore
from harnessc.runtime.log.events import Event
from harnessc.runtime.session import operations
from harnessc.runtime.workflows.manage import WorkflowError, render_run

from .test_workflows_support import (
    ENGINEER,
    RELEASE_MANAGER,
    SECURITY,
    Worker,
    compiled,
    observer,
    until,
)


class Jobs:
    def __init__(self) -> None:
        self.ran: list[int] = []
        self.undone: list[int] = []
        self.shipped: list[int] = []
        self.archived: list[int] = []
        self.watch: str | None = None  # a run whose status `job.run` reads while it runs
        self.seen: list[list[tuple[str, str]]] = []
        # the jobs of a parallel pair, set when each has started
        self.arrived = {31: threading.Event(), 32: threading.Event()}
        self.overlapped: list[int] = []  # the jobs that saw their partner start
        self.hold = threading.Event()  # job 401 runs until it is set


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Harness, Jobs, Path]]:
    """One worker in this process (DBOS allows one per process), on its own SQLite file."""
    tmp = tmp_path_factory.mktemp("workflows")
    url = f"sqlite:///{tmp / 'harness.db'}"
    h = Harness(compiled(), store=SQLiteStore(tmp / "harness.db"))
    jobs = Jobs()

    @h.implement("job.run")
    def run(args: dict[str, Any]) -> dict[str, Any]:
        jobs.ran.append(args["n"])
        if args["n"] in (31, 32):  # a parallel pair: each waits (a while) for the other
            jobs.arrived[args["n"]].set()
            if jobs.arrived[63 - args["n"]].wait(timeout=20):
                jobs.overlapped.append(args["n"])
        if jobs.watch is not None:
            steps = h.workflows.status(jobs.watch)["steps"]
            jobs.seen.append([(s["name"], s["state"]) for s in steps])
        if args["n"] == 13:
            raise RuntimeError("job 13 always fails")
        if args["n"] == 401:
            jobs.hold.wait(timeout=20)
        return {"n": args["n"]}

    @h.implement("job.undo")
    def undo(args: dict[str, Any]) -> dict[str, Any]:
        jobs.undone.append(args["n"])
        return {"n": args["n"]}

    @h.implement("job.archive")
    def archive(args: dict[str, Any]) -> dict[str, Any]:
        jobs.archived.append(args["n"])
        return {"n": args["n"]}

    @h.implement("job.ship")
    def ship(args: dict[str, Any]) -> dict[str, Any]:
        jobs.shipped.append(args["n"])
        return {"n": args["n"]}

    h.workflows.configure(url, poll_s=0.05)
    yield h, jobs, tmp
    h.workflows.close()


def waiting(h: Harness, run: str, gate: str) -> bool:
    return any(g["gate"] == gate for g in h.workflows.status(run)["pending_gates"])


def step_events(h: Harness, run: str) -> Counter[str]:
    """How many `workflow.step` events each stream of the run holds."""
    return Counter(
        e.stream
        for e in h.store.read()
        if e.type == "workflow.step" and e.stream.startswith(f"workflow:{run}/")
    )


# -- in one process ---------------------------------------------------------------------------


def test_calls_run_in_order_through_the_harness(env: tuple[Harness, Jobs, Path]) -> None:
    h, jobs, _ = env
    before = len(jobs.ran)
    run = h.workflows.create("four", {"base": 1}, id="order-1", actor=ENGINEER)
    assert h.workflows.status(run)["status"] in ("created", "running")
    h.workflows.start(run)
    done = h.workflows.wait(run)
    assert done["status"] == "completed"
    assert jobs.ran[before:] == [1, 2, 3, 4]
    assert [(s["name"], s["state"]) for s in done["steps"]] == [
        ("a", "succeeded"),
        ("b", "succeeded"),
        ("c", "succeeded"),
        ("d", "succeeded"),
    ]
    assert done["artifacts"][0] == {"step": "a", "value": {"n": 1}}
    # every call went through policy: a decision event per step, judged as the creator
    decisions = [
        json.loads(e.payload_json)
        for e in h.store.read()
        if e.type == "decision" and e.stream.startswith("workflow:order-1/")
    ]
    assert [d["effect"] for d in decisions] == ["allow"] * 4
    assert step_events(h, run) == Counter(
        {f"workflow:{run}/{s}#1": 1 for s in "abcd"}
        | {f"workflow:{run}/~start": 1, f"workflow:{run}/~end": 1}
    )
    assert h.verify().ok


def test_wait_reads_the_run_when_it_starts_and_when_the_run_has_ended(
    env: tuple[Harness, Jobs, Path],
) -> None:
    # a waiter read the run's whole state every 20 ms, taking the interpreter lock from the
    # run it waited for; now the worker's own runs say when they end, and a process that runs
    # no workflow asks DBOS for the run's status alone until it has finished
    h, jobs, tmp = env
    outside = observer(h.spec, f"sqlite:///{tmp / 'harness.db'}")
    for waiter in (h.workflows, outside.workflows):
        reads: list[str] = []
        real = waiter.status

        def counting(id: str, real: Any = real, reads: list[str] = reads) -> dict[str, Any]:
            reads.append(id)
            return real(id)

        jobs.hold.clear()
        run = h.workflows.create("four", {"base": 401}, actor=ENGINEER, start=True)
        release = threading.Timer(0.6, jobs.hold.set)
        release.start()
        waiter.status = counting  # type: ignore[method-assign]
        try:
            done = waiter.wait(run, timeout_s=60)
        finally:
            del waiter.status
            release.cancel()
            jobs.hold.set()
        assert done["status"] == "completed"
        assert [s["state"] for s in done["steps"]] == ["succeeded"] * 4
        assert 1 <= len(reads) <= 3, len(reads)
    outside.workflows.close()


def test_status_shows_each_call_running_after_the_ones_before_it(
    env: tuple[Harness, Jobs, Path],
) -> None:
    # one status publication per step: a step's end goes out with the next step's start, and
    # an operator watching a call in progress still sees it running
    h, jobs, _ = env
    jobs.watch, jobs.seen = "watch-1", []
    try:
        run = h.workflows.create("four", {"base": 1}, id="watch-1", actor=ENGINEER, start=True)
        assert h.workflows.wait(run)["status"] == "completed"
    finally:
        jobs.watch = None
    done, running, pending = "succeeded", "running", "pending"
    assert jobs.seen == [
        [("a", running), ("b", pending), ("c", pending), ("d", pending)],
        [("a", done), ("b", running), ("c", pending), ("d", pending)],
        [("a", done), ("b", done), ("c", running), ("d", pending)],
        [("a", done), ("b", done), ("c", done), ("d", running)],
    ]


def test_create_is_idempotent_on_the_callers_id(env: tuple[Harness, Jobs, Path]) -> None:
    h, _, _ = env
    first = h.workflows.create("four", {"base": 1}, id="same-1", actor=ENGINEER)
    again = h.workflows.create("four", {"base": 1}, id="same-1", actor=ENGINEER)
    assert first == again == "same-1"
    with pytest.raises(WorkflowError) as err:
        h.workflows.create("review", {"base": 1}, id="same-1", actor=ENGINEER)
    assert err.value.code == "id-conflict"
    with pytest.raises(WorkflowError) as err:
        h.workflows.create("four", {"base": "one"}, actor=ENGINEER)
    assert err.value.code == "invalid-input"
    with pytest.raises(WorkflowError) as err:
        h.workflows.create("nowhere", {}, actor=ENGINEER)
    assert err.value.code == "unknown-workflow-name"
    assert "`ops.four`" in err.value.message
    h.workflows.cancel("same-1")
    assert h.workflows.status("same-1")["status"] == "cancelled"


def test_create_update_decide_and_wait_refuse_what_they_cannot_take(
    env: tuple[Harness, Jobs, Path],
) -> None:
    # `a/x` wrote its steps under `workflow:a/…`, so `status("a")` showed the run `a/x`
    # (another workflow, other steps); `x::y` is how a run's parallel branch is named; an id
    # that is no text failed with AttributeError
    h, _, _ = env
    before = {r["id"] for r in h.workflows.list()}
    for bad in ("id-1/x", "id-1::b", "id-1\nforged  ops.four  completed", "-x", "z" * 129, 12):
        with pytest.raises(WorkflowError) as err:
            h.workflows.create("four", {"base": 1}, id=bad, actor=ENGINEER)  # type: ignore[arg-type]
        assert err.value.code == "invalid-id", bad
    # a fact the spec does not declare (a misspelt one) was recorded and read by no rule
    with pytest.raises(WorkflowError) as err:
        h.workflows.create("four", {"base": 1}, id="facts-1", actor=ENGINEER, facts={"frozen": 1})
    assert err.value.code == "unknown-fact" and "`frozen` is not a declared fact" in str(err.value)
    assert {r["id"] for r in h.workflows.list()} == before  # nothing was created
    fine = "order-7:eu@v2+a_b.c"
    assert h.workflows.create("four", {"base": 1}, id=fine, actor=ENGINEER) == fine
    # arguments of the wrong kind said what failed deep inside (dictionaries, iteration); a
    # NaN timeout was a deadline no clock reaches, and `wait` never returned
    with pytest.raises(TypeError, match="a run's input: a mapping of the workflow's input"):
        h.workflows.create("four", [1], actor=ENGINEER)  # type: ignore[arg-type]
    for actor in ("u-1", None):
        with pytest.raises(TypeError, match="a run's actor: a mapping"):
            h.workflows.create("four", {"base": 1}, actor=actor)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="`update`'s env: a mapping, not a list"):
        h.workflows.update(fine, env=[1])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="`decide` takes `by`, the one who decides, as a mapping"):
        h.workflows.decide(fine, "review", "approve", by="u-7")  # type: ignore[arg-type]
    for timeout in (float("nan"), "5", None):
        with pytest.raises(WorkflowError) as err:
            h.workflows.wait(fine, timeout)  # type: ignore[arg-type]
        assert err.value.code == "invalid-timeout"
    h.workflows.cancel(fine)


def test_a_cancelled_run_waiting_at_a_gate_is_let_go_by_its_worker(
    env: tuple[Harness, Jobs, Path],
) -> None:
    import asyncio

    from dbos._dbos import _get_dbos_instance

    h, _, _ = env
    loop = _get_dbos_instance()._background_event_loop._loop  # white box: the worker's loop

    def live() -> set[asyncio.Task[Any]]:
        return {t for t in asyncio.all_tasks(loop) if not t.done()}

    before = live()
    run = h.workflows.create("hold", {"base": 3}, id="let-go-1", actor=ENGINEER, start=True)
    until(lambda: waiting(h, run, "approve"), what="the gate")
    held = live() - before  # the run's task(s), waiting at the gate
    assert held
    assert h.workflows.cancel(run)["status"] == "cancelled"
    until(lambda: all(t.done() for t in held), what="the worker to let the cancelled run go")
    with pytest.raises(WorkflowError) as err:
        h.workflows.decide(run, "approve", "go", by=SECURITY)
    assert err.value.code == "finished"


def test_refused_decisions_change_nothing(env: tuple[Harness, Jobs, Path]) -> None:
    h, _, _ = env
    run = h.workflows.create("hold", {"base": 5}, id="refuse-1", actor=ENGINEER, start=True)
    until(lambda: waiting(h, run, "approve"), what="the gate to wait")
    before = (h.workflows.status(run), h.store.head())
    refusals = {
        "unknown-option": dict(gate="approve", option="maybe", by=SECURITY),
        "not-an-approver": dict(gate="approve", option="go", by=ENGINEER),
        "unknown-gate": dict(gate="aprove", option="go", by=SECURITY),
        "not-waiting": dict(gate="last.approval", option="approve", by=SECURITY),
    }
    for code, kwargs in refusals.items():
        with pytest.raises(WorkflowError) as err:
            h.workflows.decide(run, **kwargs)
        assert err.value.code == code
    with pytest.raises(WorkflowError) as err:
        h.workflows.decide("nobody", "approve", "go", by=SECURITY)
    assert err.value.code == "unknown-workflow"
    assert (h.workflows.status(run), h.store.head()) == before
    assert err.value.to_dict()["message"] == "no workflow `nobody`"

    accepted = h.workflows.decide(run, "approve", "go", by=SECURITY)
    assert accepted.outcome == "accepted"
    done = h.workflows.wait(run)
    assert done["status"] == "completed"
    assert done["gates"]["approve"]["option"] == "go"
    assert done["gates"]["approve"]["by"] == "u-7"
    with pytest.raises(WorkflowError) as err:
        h.workflows.decide(run, "approve", "stop", by=SECURITY)
    assert err.value.code == "finished"


def test_a_duplicate_decision_is_ignored(env: tuple[Harness, Jobs, Path]) -> None:
    h, jobs, _ = env
    run = h.workflows.create("twice", {"base": 6}, id="dup-1", actor=ENGINEER, start=True)
    until(lambda: waiting(h, run, "one"), what="the first gate")
    assert h.workflows.decide(run, "one", "go", by=SECURITY).outcome == "accepted"
    until(lambda: waiting(h, run, "two"), what="the second gate")
    before = (h.workflows.status(run), h.store.head())
    second = h.workflows.decide(run, "one", "stop", by=SECURITY)
    assert (second.outcome, second.option, second.by) == ("duplicate", "go", "u-7")
    assert (h.workflows.status(run), h.store.head()) == before
    h.workflows.decide(run, "two", "go", by=SECURITY)
    assert h.workflows.wait(run)["status"] == "completed"
    assert jobs.ran.count(77) == 1


def test_a_gate_deadline_takes_the_default(env: tuple[Harness, Jobs, Path]) -> None:
    h, jobs, _ = env
    before = jobs.ran.count(9)
    run = h.workflows.create("review", {"base": 7}, id="deadline-1", actor=ENGINEER, start=True)
    done = h.workflows.wait(run)
    assert done["status"] == "completed"
    assert done["outcome"] == {"step": "approve", "option": "stop"}
    assert done["gates"]["approve"]["by"] == "timeout"
    assert {s["name"]: s["state"] for s in done["steps"]}["last"] == "skipped"
    assert jobs.ran.count(9) == before
    # `harnessc workflow show` says so
    deadline = done["gates"]["approve"]["deadline"]
    shown = render_run("show", done).splitlines()
    assert f"  timed out: approve: nobody decided by {deadline}; the default `stop` was taken" in (
        shown
    )


def test_an_ask_becomes_a_gate_for_the_approver(env: tuple[Harness, Jobs, Path]) -> None:
    h, jobs, _ = env
    run = h.workflows.create("ship", {"base": 8}, id="ask-1", actor=ENGINEER, start=True)
    until(lambda: waiting(h, run, "release.approval"), what="the approval gate")
    gate = h.workflows.status(run)["pending_gates"][0]
    assert gate["by"] == [{"kind": "role", "value": "release-manager"}]
    assert gate["preview"]["arguments"] == {"n": 8}
    # DBOS's own tools see the gate too: an event named after it, set when the run reached it
    published = h.workflows._need_client().get_event(run, "gate:release.approval", 30)
    assert published["status"] == "waiting" and published["preview"] == gate["preview"]
    assert jobs.shipped == []
    with pytest.raises(WorkflowError) as err:
        h.workflows.decide(run, "release.approval", "approve", by=ENGINEER)
    assert err.value.code == "not-an-approver"
    h.workflows.decide(run, "release.approval", "approve", by=RELEASE_MANAGER)
    assert h.workflows.wait(run)["status"] == "completed"
    assert jobs.shipped == [8]
    types = [e.type for e in h.store.read() if e.stream.startswith(f"workflow:{run}/release")]
    assert "approval.requested" in types
    assert "grant.issued" in types


@pytest.mark.parametrize("option", ["approve", "deny"])
def test_a_decided_gate_leaves_no_request_of_its_call_pending(
    env: tuple[Harness, Jobs, Path], option: str
) -> None:
    # the call's first pass opens a request and waits at the gate; whatever the gate decides,
    # that request is closed saying so, and nothing of the run stays on an operator's list
    h, jobs, _ = env
    base = {"approve": 12, "deny": 14}[option]
    run = h.workflows.create(
        "ship", {"base": base}, id=f"gate-{option}", actor=ENGINEER, start=True
    )
    until(lambda: waiting(h, run, "release.approval"), what="the approval gate")

    def asked() -> list[dict[str, Any]]:
        h.catch_up()
        return [
            r
            for r in operations.pending_approvals(h, review=False)
            if r["session_id"].startswith(f"workflow:{run}/")
        ]

    [first] = asked()
    h.workflows.decide(run, "release.approval", option, by=RELEASE_MANAGER)
    assert h.workflows.wait(run)["status"] in ("completed", "failed")
    assert asked() == []
    h.catch_up()
    closed = h.approvals.get(first["request_id"])
    assert closed.status == "withdrawn"
    resolved = [
        json.loads(e.payload_json)
        for e in h.store.read()
        if e.type == "approval.resolved"
        and json.loads(e.payload_json).get("approval_id") == first["request_id"]
    ]
    assert [r["outcome"] for r in resolved] == ["withdrawn"]
    assert f"workflow gate `release.approval` was decided: {option}" in resolved[0]["reason"]
    assert (base in jobs.shipped) == (option == "approve")


def test_the_runs_creator_may_not_approve_its_high_risk_call(
    env: tuple[Harness, Jobs, Path],
) -> None:
    h, jobs, _ = env
    run = h.workflows.create("ship", {"base": 9}, id="sod-1", actor=RELEASE_MANAGER, start=True)
    until(lambda: waiting(h, run, "release.approval"), what="the approval gate")
    # `job.ship` is high risk: separation of duties, by default
    with pytest.raises(WorkflowError) as err:
        h.workflows.decide(run, "release.approval", "approve", by=RELEASE_MANAGER)
    assert err.value.code == "self-approval"
    other = {"user": "u-10", "role": "release-manager"}
    h.workflows.decide(run, "release.approval", "approve", by=other)
    assert h.workflows.wait(run)["status"] == "completed"
    assert 9 in jobs.shipped


def test_failure_policy_retries_compensates_and_escalates(
    env: tuple[Harness, Jobs, Path],
) -> None:
    h, jobs, _ = env
    before = jobs.ran.count(13)
    run = h.workflows.create("flaky", {"base": 4}, id="flaky-1", actor=ENGINEER, start=True)
    until(lambda: waiting(h, run, "risky.escalation"), what="the escalation")
    assert jobs.ran.count(13) - before == 3  # the first attempt and two retries
    assert jobs.undone == [4]  # compensated before escalating
    with pytest.raises(WorkflowError) as err:
        h.workflows.decide(run, "risky.escalation", "abort", by=ENGINEER)
    assert err.value.code == "not-an-approver"
    h.workflows.decide(run, "risky.escalation", "abort", by={"user": "u-3", "role": "sre"})
    done = h.workflows.wait(run)
    assert done["status"] == "failed"
    assert "aborted" in done["error"]
    assert h.verify().ok


def test_parallel_branches_run_at_once_in_child_workflows(
    env: tuple[Harness, Jobs, Path],
) -> None:
    h, jobs, _ = env
    run = h.workflows.create("fan", {"base": 0}, id="fan-1", actor=ENGINEER, start=True)
    done = h.workflows.wait(run)
    assert done["status"] == "completed", done
    # each branch waited for the other to start: they ran at the same time
    assert sorted(jobs.overlapped) == [31, 32]
    assert [(s["name"], s["state"]) for s in done["steps"]] == [
        ("left", "succeeded"),
        ("right", "succeeded"),
        ("join", "succeeded"),
    ]
    assert [a["step"] for a in done["artifacts"]] == ["left", "right", "join"]
    client = h.workflows._need_client()
    children = client.list_workflows(parent_workflow_id=run)
    assert sorted(c.workflow_id for c in children) == ["fan-1::left", "fan-1::right"]
    assert all(c.status == "SUCCESS" for c in children)
    assert "fan-1::left" not in [r["id"] for r in h.workflows.list()]
    with pytest.raises(WorkflowError) as err:
        h.workflows.status("fan-1::left")
    assert (err.value.code, "`fan-1`" in err.value.message) == ("branch", True)
    # the branches record under the run, each step once
    assert step_events(h, run) == Counter(
        {f"workflow:{run}/{s}#1": 1 for s in ("left", "right", "join")}
        | {
            f"workflow:{run}/~start": 1,
            f"workflow:{run}/~branches:left,right": 1,
            f"workflow:{run}/~end": 1,
        }
    )
    assert h.verify().ok


def test_an_ask_in_a_parallel_branch_is_decided_like_any_gate(
    env: tuple[Harness, Jobs, Path],
) -> None:
    h, jobs, _ = env
    run = h.workflows.create("fan_ask", {"base": 0}, id="fan-ask-1", actor=ENGINEER, start=True)

    def gate_open_left_done() -> Any:
        # one reading of the run: the gate, the other branch and the status as of the same
        # moment (a second `status` call could see a gate the first reading had not)
        seen = h.workflows.status(run)
        states = {s["name"]: s["state"] for s in seen["steps"]}
        gate_open = any(g["gate"] == "right.approval" for g in seen["pending_gates"])
        return gate_open and states["left"] == "succeeded" and seen

    seen = until(gate_open_left_done, what="the branch's approval gate, the other branch done")
    assert seen["status"] == "waiting"
    states = {s["name"]: s["state"] for s in seen["steps"]}
    assert states == {"left": "succeeded", "right": "waiting", "join": "pending"}
    gate = seen["pending_gates"][0]
    assert gate["workflow_id"] == "fan-ask-1::right"  # the child workflow waits for it
    with pytest.raises(WorkflowError) as err:
        h.workflows.decide(run, "right.approval", "approve", by=ENGINEER)
    assert err.value.code == "not-an-approver"
    h.workflows.decide(run, "right.approval", "approve", by=RELEASE_MANAGER)
    done = h.workflows.wait(run)
    assert done["status"] == "completed", done
    assert 42 in jobs.shipped and 43 in jobs.ran
    assert done["gates"]["right.approval"]["by"] == "u-9"
    assert h.verify().ok


def test_a_workflow_judged_by_a_policy_alone(env: tuple[Harness, Jobs, Path]) -> None:
    h, jobs, _ = env
    h.workflows.preview_with("job.ship", lambda args: {"would_ship": args["n"]})
    run = h.workflows.create("by_policy", {"base": 51}, id="policy-1", actor=ENGINEER, start=True)
    until(lambda: waiting(h, run, "second.approval"), what="the policy's ASK")
    # preview → approve: the gate shows what the call would do, from the tool's previewer
    gate = h.workflows.status(run)["pending_gates"][0]
    assert gate["preview"]["preview"] == {"would_ship": 51}
    # and bound to the call in the log, as the approval request's preview
    [asked] = [
        r
        for r in operations.pending_approvals(h)
        if r["tool_id"] == "job.ship" and r["session_id"].startswith(f"workflow:{run}/")
    ]
    assert asked["preview"]["value"] == {"would_ship": 51}
    h.workflows.decide(run, "second.approval", "approve", by=RELEASE_MANAGER)
    assert h.workflows.wait(run)["status"] == "completed"
    assert 51 in jobs.ran and 51 in jobs.shipped
    started = [
        json.loads(e.payload_json)
        for e in h.store.read()
        if e.type == "session.started" and e.stream.startswith(f"workflow:{run}/")
    ]
    assert {p["agent"] for p in started} == {"ops.by_policy"}
    decisions = [
        json.loads(e.payload_json)
        for e in h.store.read()
        if e.type == "decision" and e.stream.startswith(f"workflow:{run}/")
    ]
    # job.run allowed by the policy; job.ship asked, then run once approved
    assert decisions[0]["effect"] == "allow"
    assert {d["effect"] for d in decisions[1:]} == {"ask"}


def test_a_failed_verification_takes_the_failure_policy(
    env: tuple[Harness, Jobs, Path],
) -> None:
    """Commit → verify: a call that returned but whose verifier finds no effect is a failed
    step (retried, then compensated), never a success."""
    h, jobs, _ = env
    checks: list[int] = []

    def verify(args: dict[str, Any], output: Any) -> Any:
        if args["n"] not in (61, 62):
            return None
        checks.append(args["n"])
        if args["n"] == 61 or checks.count(62) == 1:
            return "the job is not in the ledger"
        return True

    with pytest.raises(WorkflowError) as err:
        h.workflows.verify_with("job.nowhere", verify)
    assert err.value.code == "unknown-tool"
    h.workflows.verify_with("job.run", verify)
    again = h.workflows.wait(
        h.workflows.create("verified", {"base": 62}, id="verify-1", actor=ENGINEER, start=True)
    )
    assert again["status"] == "completed", again
    assert {s["name"]: s.get("attempts") for s in again["steps"]}["commit"] == 2
    verdicts = [
        json.loads(e.payload_json)
        for e in h.store.read()
        if e.type == "action.verified" and e.stream.startswith("workflow:verify-1/")
    ]
    assert [(v["tool_call_id"], v["ok"]) for v in verdicts] == [
        ("verify-1/commit#1", False),
        ("verify-1/commit#2", True),
    ]
    never = h.workflows.wait(
        h.workflows.create("verified", {"base": 61}, id="verify-2", actor=ENGINEER, start=True)
    )
    assert never["status"] == "failed"
    assert "compensated" in never["error"]
    assert 61 in jobs.undone
    states = {s["name"]: s["state"] for s in never["steps"]}
    assert states == {"commit": "compensated", "undo_commit": "succeeded"}
    assert h.verify().ok


def test_a_secret_never_reaches_the_runs_state_or_the_log(
    env: tuple[Harness, Jobs, Path],
) -> None:
    """A previewer, an executor and a verifier that echo a secret argument: the gate's preview,
    the step's value, the verdict and every event hold `[REDACTED]`, and neither our log nor
    DBOS's step outputs hold the value (the run's input, which DBOS needs to resume it, does)."""
    h, _, tmp = env
    token = "tok-wf-7d1e-staple"
    h.implement("job.login")(lambda args: {"n": args["n"], "note": f"used {args['token']}"})
    h.workflows.preview_with("job.login", lambda args: {"would_use": args["token"]})
    h.workflows.verify_with(
        "job.login", lambda args, out: None if args["n"] == 71 else f"{args['token']} unseen"
    )
    run = h.workflows.create(
        "vaulted", {"base": 71, "token": token}, id="vault-1", actor=ENGINEER, start=True
    )
    until(lambda: waiting(h, run, "login.approval"), what="the vault's ASK")
    gate = h.workflows.status(run)["pending_gates"][0]
    assert gate["preview"]["preview"] == {"would_use": "[REDACTED]"}
    h.workflows.decide(run, "login.approval", "approve", by=RELEASE_MANAGER)
    done = h.workflows.wait(run)
    assert done["status"] == "completed", done
    assert done["artifacts"] == [{"step": "login", "value": {"n": 71, "note": "used [REDACTED]"}}]
    failed = h.workflows.create(
        "vaulted", {"base": 72, "token": token}, id="vault-2", actor=ENGINEER, start=True
    )
    until(lambda: waiting(h, failed, "login.approval"), what="the vault's second ASK")
    h.workflows.decide(failed, "login.approval", "approve", by=RELEASE_MANAGER)
    ended = h.workflows.wait(failed)
    assert ended["status"] == "failed"
    assert "verification failed: [REDACTED] unseen" in ended["error"]
    assert token not in json.dumps([e.payload for e in h.store.read()])
    raw = b"".join(p.read_bytes() for p in tmp.glob("harness.db*") if "dbos" not in p.name)
    assert raw and token.encode() not in raw
    with sqlite3.connect(tmp / "harness.db.dbos") as dbos:
        outputs = dbos.execute("SELECT output, error FROM operation_outputs").fetchall()
    assert outputs and token not in json.dumps(outputs)
    assert h.verify().ok


def test_a_gate_waits_for_new_facts_and_the_steps_after_it_see_them(
    env: tuple[Harness, Jobs, Path],
) -> None:
    from harnessc.runtime import Facts

    h, jobs, _ = env
    # created with the ledger disconnected: `job.archive` (requires connected(ledger)) would be
    # unavailable, and the gate's env condition does not hold yet
    run = h.workflows.create(
        "windowed", {"base": 81}, id="window-1", actor=ENGINEER, env={"open": False}
    )
    h.workflows.start(run)
    until(
        lambda: (
            {s["name"]: s["state"] for s in h.workflows.status(run)["steps"]}["window"] == "waiting"
        ),
        what="the gate to wait",
    )
    h.workflows.update(run, env={"open": True}, facts=Facts.of(connected={"ledger"}))
    done = h.workflows.wait(run)
    assert done["status"] == "completed", done
    assert jobs.archived == [81]
    # the same run without the connection: the call is refused as unavailable, naming why
    run = h.workflows.create(
        "windowed", {"base": 82}, id="window-2", actor=ENGINEER, env={"open": True}, start=True
    )
    failed = h.workflows.wait(run)
    assert failed["status"] == "failed"
    assert "connected(ledger)" in failed["error"]
    assert 82 not in jobs.archived


def test_a_step_returns_its_events_and_the_log_takes_them_once(
    env: tuple[Harness, Jobs, Path],
) -> None:
    """A step appends nothing itself: its events ride in its output, which DBOS checkpoints,
    and reach the log when the output is handed over after the checkpoint. An output handed
    over again (a run replayed from DBOS's checkpoints after a crash) appends nothing twice."""
    from harnessc.runtime.workflows import steps as workflow_steps

    h, jobs, _ = env
    ctx = {"workflow_id": "again-1", "workflow": "ops.four", "agent": "ops.runner"}
    ctx["actor"] = ENGINEER
    state = {"status": "running", "steps": {"a": {"kind": "call", "state": "running"}}}
    args = ("a", "job.run", {"n": 21}, "workflow:again-1/a#1", "again-1/a#1", None)
    args += (lambda outcome: ("workflow.state", {"state": state}),)
    head = h.store.head()
    output = workflow_steps.call_step(ctx, *args)
    assert output["outcome"] == {"status": "succeeded", "value": {"n": 21}}
    assert h.store.head() == head  # nothing in the log before the checkpoint
    assert workflow_steps.log_step(output) == output["outcome"]
    workflow_steps.flush()
    logged = h.store.read("workflow:again-1/a#1")
    assert [e.type for e in logged][-2:] == ["workflow.state", "workflow.step"]
    assert [[e.stream, e.kind, e.type, e.payload_json] for e in logged] == output["events"]
    head = h.store.head()
    # as DBOS replays it: the output read back from its JSON checkpoint
    workflow_steps.log_step(json.loads(json.dumps(output)))
    workflow_steps.log_step(output)
    workflow_steps.flush()
    assert h.store.head() == head
    assert jobs.ran.count(21) == 1
    assert h.store.verify().ok


def test_steps_handed_over_after_some_were_logged_append_the_others_in_order(
    env: tuple[Harness, Jobs, Path],
) -> None:
    """A replayed run hands over its steps again, the ones logged before the crash with the
    ones that were not: those are appended, each once and in the order of the steps."""
    from harnessc.runtime.log.events import NewEvent
    from harnessc.runtime.workflows import steps as workflow_steps
    from harnessc.runtime.workflows.appender import StepLog

    h, _, _ = env
    steps = [
        [
            NewEvent(f"workflow:order-1/s{i}#1", "State", "workflow.step", {"n": i, "k": k})
            for k in (1, 2)
        ]
        for i in range(4)
    ]
    log = StepLog(h.store)
    try:
        log.add(steps[1])
        log.flush()
        head = h.store.head()
        for batch in steps:  # the replay: step 1 is in the log already
            log.add(batch)
        log.flush()
    finally:
        log.close()
    added = h.store.read(after=head[0])
    assert [(e.stream, e.seq) for e in added] == [
        (f"workflow:order-1/s{i}#1", k) for i in (0, 2, 3) for k in (1, 2)
    ]
    assert h.store.verify().ok
    workflow_steps.flush()


def test_the_log_takes_the_steps_it_failed_to_append_when_it_can_again() -> None:
    """A commit of the log that fails (its database away) is tried again: the steps are
    appended once it succeeds, in order, and a reader waiting for them is let go then."""
    from harnessc.runtime.log.events import NewEvent
    from harnessc.runtime.log.store import MemoryStore
    from harnessc.runtime.workflows.appender import StepLog

    class Away(MemoryStore):
        failures = 2

        def _append(self, events: Any, expected_seq: Any) -> Any:
            if self.failures:
                self.failures -= 1
                raise OSError("the database is away")
            return super()._append(events, expected_seq)

    store = Away()
    log = StepLog(store)
    try:
        for i in range(3):
            log.add([NewEvent(f"workflow:away-1/s{i}#1", "State", "workflow.step", {"n": i})])
        log.flush(timeout_s=30)
    finally:
        log.close()
    assert store.failures == 0
    assert [e.stream for e in store.read()] == [f"workflow:away-1/s{i}#1" for i in range(3)]


def test_importing_the_runtime_does_not_load_dbos() -> None:
    import subprocess
    import sys

    code = "import sys, harnessc.runtime; sys.exit('dbos' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


# -- across processes -------------------------------------------------------------------------


def test_sigkill_after_step_two_resumes_without_repeating(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'harness.db'}"
    watch = observer(compiled(), url)
    first = Worker(tmp_path, url, hold=(3,))
    try:
        first.create("four", {"base": 1}, "crash-1")
        until(
            lambda: (
                {s["name"]: s["state"] for s in watch.workflows.status("crash-1")["steps"]}.get("c")
                == "running"
            ),
            what="step 3 to start",
        )
    finally:
        first.kill()
    assert [n for n, _, _ in first.ran()] == [1, 2]
    second, done = resumed(tmp_path, url, watch, "crash-1")
    ran = second.ran()
    assert [n for n, _, _ in ran] == [1, 2, 3, 4]
    assert ran[0][2] == ran[1][2] == first.proc.pid
    assert ran[2][2] == ran[3][2] == second.proc.pid
    assert [s["state"] for s in done["steps"]] == ["succeeded"] * 4
    logged_once(tmp_path, "crash-1")
    watch.workflows.close()


def test_a_run_that_recorded_whole_states_resumes_with_deltas(tmp_path: Path) -> None:
    """A run started by a version whose steps recorded the run's whole state, killed, and
    resumed by this one: DBOS replays the old checkpoints, the later steps record deltas
    against the newest whole state, and `status` reads the run as it ended."""
    url = f"sqlite:///{tmp_path / 'harness.db'}"
    watch = observer(compiled(), url)
    first = Worker(tmp_path, url, hold=(3,), old_shape=True)
    try:
        first.create("four", {"base": 1}, "old-1")
        until(
            lambda: (
                {s["name"]: s["state"] for s in watch.workflows.status("old-1")["steps"]}.get("c")
                == "running"
            ),
            what="step 3 to start",
        )
    finally:
        first.kill()
    _, done = resumed(tmp_path, url, watch, "old-1")
    assert [(s["name"], s["state"]) for s in done["steps"]] == [(n, "succeeded") for n in "abcd"]
    assert [a["step"] for a in done["artifacts"]] == list("abcd")
    events = logged_once(tmp_path, "old-1")
    recorded = [
        (e.stream.split("/", 1)[1], e.type)
        for e in events
        if e.type in ("workflow.state", "workflow.delta")
    ]
    assert recorded == [
        ("~start", "workflow.state"),
        ("a#1", "workflow.state"),
        ("b#1", "workflow.state"),
        ("c#1", "workflow.delta"),
        ("d#1", "workflow.delta"),
        ("~end", "workflow.delta"),
    ]
    watch.workflows.close()


def resumed(tmp_path: Path, url: str, watch: Harness, run: str) -> tuple[Worker, dict[str, Any]]:
    """A second worker (the same executor id) resumes the run until it completes."""
    second = Worker(tmp_path, url)
    try:
        done = until(
            lambda: (s := watch.workflows.status(run))["status"] == "completed" and s,
            what="the resumed run",
        )
    finally:
        second.kill()
    return second, done


def logged_once(tmp_path: Path, run: str) -> list[Event]:
    """The log of a run of `four`, checked: an intact chain, and each step's events once."""
    with SQLiteStore(tmp_path / "harness.db") as store:
        assert store.verify().ok
        events = store.read()
    counted = Counter(e.stream for e in events if e.type in ("workflow.step", "decision"))
    assert counted == Counter({f"workflow:{run}/{s}#1": 2 for s in "abcd"}) + Counter(
        {f"workflow:{run}/~start": 1, f"workflow:{run}/~end": 1}
    )
    return events


def killed_between_checkpoint_and_log(tmp_path: Path, url: str, run: str) -> Worker:
    """A worker killed once DBOS has checkpointed step 3 of a run of `four` and before the log
    took its events (its append never returns in this worker). The run goes on meanwhile:
    step 4's tool is held, so it does not finish."""
    first = Worker(tmp_path, url, hold=(4,), block_log=f"workflow:{run}/c#1")
    try:
        first.create("four", {"base": 1}, run)
        until(lambda: (tmp_path / "ran.log.blocked").exists(), what="step 3's append")
    finally:
        first.kill()
    assert [n for n, _, _ in first.ran()] == [1, 2, 3]
    with SQLiteStore(tmp_path / "harness.db") as store:
        assert not store.read(f"workflow:{run}/c#1")  # checkpointed, not in the log
    return first


def test_sigkill_after_a_checkpoint_before_the_log_appends_it(tmp_path: Path) -> None:
    """The window of a step whose events DBOS has checkpointed and the log has not taken yet:
    the run resumes from DBOS's checkpoint, the step does not run again, and its events reach
    the log once, in the order of the steps."""
    url = f"sqlite:///{tmp_path / 'harness.db'}"
    watch = observer(compiled(), url)
    killed_between_checkpoint_and_log(tmp_path, url, "window-1")
    second, done = resumed(tmp_path, url, watch, "window-1")
    ran = second.ran()
    assert [n for n, _, _ in ran] == [1, 2, 3, 4]  # step 3 did not run again
    assert ran[3][2] == second.proc.pid
    assert [s["state"] for s in done["steps"]] == ["succeeded"] * 4
    events = logged_once(tmp_path, "window-1")
    order = [e.stream for e in events if e.type == "workflow.step"]
    assert order == [
        f"workflow:window-1/{k}" for k in ("~start", "a#1", "b#1", "c#1", "d#1", "~end")
    ]
    watch.workflows.close()


def test_cancelling_a_run_whose_worker_died_in_that_window_logs_its_checkpointed_steps(
    tmp_path: Path,
) -> None:
    """A cancelled run is never replayed: `cancel` appends the steps DBOS checkpointed that
    the dead worker had not appended, once, before the cancellation."""
    url = f"sqlite:///{tmp_path / 'harness.db'}"
    watch = observer(compiled(), url)
    killed_between_checkpoint_and_log(tmp_path, url, "window-2")
    assert watch.workflows.status("window-2")["steps"][2]["state"] != "succeeded"
    shown = watch.workflows.cancel("window-2")
    assert shown["status"] == "cancelled"
    assert [s["state"] for s in shown["steps"]][:3] == ["succeeded"] * 3
    with SQLiteStore(tmp_path / "harness.db") as store:
        assert store.verify().ok
        streams = [e.stream for e in store.read() if e.type == "workflow.step"]
        ended = [e.stream for e in store.read() if e.type == "workflow.cancelled"]
    assert streams == [f"workflow:window-2/{k}" for k in ("~start", "a#1", "b#1", "c#1")]
    assert ended == ["workflow:window-2/~cancel"]
    watch.workflows.cancel("window-2")  # again: nothing more
    with SQLiteStore(tmp_path / "harness.db") as store:
        assert [e.stream for e in store.read() if e.type == "workflow.step"] == streams
    watch.workflows.close()


def harnessc(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    from harnessc.compiler.cli import main

    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_sigkill_inside_a_parallel_branch_resumes_only_the_unfinished_one(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'harness.db'}"
    watch = observer(compiled(), url)
    first = Worker(tmp_path, url, hold=(31,))  # `left` never returns in this worker
    try:
        first.create("fan", {"base": 0}, "fan-kill-1")
        until(
            lambda: (
                {s["name"]: s["state"] for s in watch.workflows.status("fan-kill-1")["steps"]}
                == {"left": "running", "right": "succeeded", "join": "pending"}
            ),
            what="the right branch to finish while the left one runs",
        )
    finally:
        first.kill()
    assert [n for n, _, _ in first.ran()] == [32]
    second = Worker(tmp_path, url)  # the same executor id: it resumes what the first left
    try:
        done = until(
            lambda: (s := watch.workflows.status("fan-kill-1"))["status"] == "completed" and s,
            what="the run to finish",
        )
    finally:
        second.kill()
    # `right` did not run again; `left` (killed while running) and `join` ran once more
    assert sorted(n for n, _, pid in second.ran() if pid == second.proc.pid) == [31, 33]
    assert [a["step"] for a in done["artifacts"]] == ["left", "right", "join"]
    with SQLiteStore(tmp_path / "harness.db") as store:
        assert store.verify().ok
        steps = Counter(
            e.stream
            for e in store.read()
            if e.type == "workflow.step" and e.stream.startswith("workflow:fan-kill-1/")
        )
    assert steps == Counter(
        {f"workflow:fan-kill-1/{s}#1": 1 for s in ("left", "right", "join")}
        | {f"workflow:fan-kill-1/{k}": 1 for k in ("~start", "~branches:left,right", "~end")}
    )
    watch.workflows.close()


def held_at_gate(tmp_path: Path, url: str) -> Harness:
    """The run `gate-1` waiting at its gate `approve`, its worker killed: an observer on it."""
    watch = observer(compiled(), url)
    first = Worker(tmp_path, url)
    try:
        first.create("hold", {"base": 2}, "gate-1")
        until(lambda: waiting(watch, "gate-1", "approve"), what="the gate to wait")
    finally:
        first.kill()
    return watch


def test_a_gate_is_decided_while_no_worker_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'harness.db'}"
    watch = held_at_gate(tmp_path, url)
    # an operator's shell: no spec, no worker, only the store URL
    code, out, err = harnessc(capsys, "workflow", "list", "--log", url)
    assert (code, err) == (0, "")
    assert out.splitlines() == ["gate-1  ops.hold  waiting  waiting: approve"]
    code, out, _ = harnessc(capsys, "workflow", "show", "gate-1", "--log", url)
    assert "  waiting: approve: Go on? [go | stop] by role security, default `stop` at" in out
    code, _, err = harnessc(
        capsys, "workflow", "decide", "gate-1", "approve", "go", "--by", "u-2", "--log", url
    )
    assert (code, err) == (
        1,
        "error[not-an-approver]: `u-2` may not decide the gate `approve`: "
        "it needs role `security`\n",
    )
    code, out, _ = harnessc(
        capsys,
        *("workflow", "decide", "gate-1", "approve", "go", "--by", "u-7", "--role", "security"),
        *("--log", url, "--format", "json"),
    )
    assert code == 0
    assert json.loads(out)["outcome"] == "accepted"
    assert watch.workflows.status("gate-1")["status"] == "waiting"  # nobody runs it yet
    # another approver, another option, before any worker took the first: told which stands
    code, out, _ = harnessc(
        capsys,
        *("workflow", "decide", "gate-1", "approve", "stop", "--by", "u-8", "--role", "security"),
        *("--log", url, "--format", "json"),
    )
    assert code == 0
    assert {k: json.loads(out)[k] for k in ("outcome", "option", "by")} == {
        "outcome": "duplicate",
        "option": "go",
        "by": "u-7",
    }
    second = Worker(tmp_path, url)
    try:
        done = until(
            lambda: (s := watch.workflows.status("gate-1"))["status"] == "completed" and s,
            what="the run to finish",
        )
    finally:
        second.kill()
    assert done["gates"]["approve"]["option"] == "go"
    assert done["gates"]["approve"]["by"] == "u-7"
    assert [n for n, _, _ in second.ran()] == [2, 99]
    code, out, _ = harnessc(capsys, "workflow", "cancel", "gate-1", "--log", url)
    assert (code, out.splitlines()[0]) == (0, "gate-1  ops.hold  completed")
    watch.workflows.close()


def test_an_operator_decides_no_gate_on_a_log_whose_chain_does_not_verify(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a copy of a run's state row appended under the log, its hash wrong: the operator's shell
    # read it like any other, and decided on it
    from .test_operator_logs import append_copy

    url = f"sqlite:///{tmp_path / 'harness.db'}"
    watch = held_at_gate(tmp_path, url)
    position = append_copy(tmp_path / "harness.db", "workflow.delta", chained=False)
    for action in (
        ("list",),
        ("show", "gate-1"),
        ("decide", "gate-1", "approve", "go", "--by", "u-7", "--role", "security"),
        ("cancel", "gate-1"),
    ):
        code, out, err = harnessc(capsys, "workflow", *action, "--log", url)
        assert (code, out) == (2, ""), (action, err)
        assert f"the event log does not verify at position {position}: hash does not" in err
    # nothing was sent to the run: with the copied row taken out again, its gate waits,
    # undecided, and it was not cancelled
    with sqlite3.connect(tmp_path / "harness.db") as conn:
        conn.execute("DROP TRIGGER IF EXISTS events_no_delete")
        conn.execute("DELETE FROM events WHERE position = ?", (position,))
    conn.close()
    assert waiting(watch, "gate-1", "approve")
    assert watch.workflows.status("gate-1")["status"] == "waiting"
    watch.workflows.close()


def test_a_store_that_cannot_be_opened_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for path in (tmp_path / "missing-folder" / "harness.db", tmp_path / "missing.db"):
        url = f"sqlite:///{path}"
        code, out, err = harnessc(capsys, "workflow", "list", "--log", url)
        assert (code, out, err) == (2, "", f"harnessc: no event log at `{url}`\n")
    not_a_log = tmp_path / "notes.db"
    not_a_log.write_text("not a database", encoding="utf-8")
    for action in (("list",), ("show", "run-1"), ("cancel", "run-1")):
        code, out, err = harnessc(capsys, "workflow", *action, "--log", f"sqlite:///{not_a_log}")
        assert (code, out) == (2, "")
        assert (
            err == f"harnessc: cannot open the event store `{not_a_log}`: file is not a database\n"
        )
    # a listing creates nothing: no empty log, no workflow database beside the file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


def test_an_operator_look_at_a_log_no_worker_ran_on_creates_no_workflow_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `workflow list` created DBOS's database beside the log (its tables in a PostgreSQL
    # database) and said "no workflows", even of a copy of a log that records runs
    from harnessc.runtime.log.events import NewEvent

    db = tmp_path / "log.db"
    with SQLiteStore(db) as store:
        store.append(NewEvent("ses-1", "Text", "user.said", {"text": "hello"}))
    for action in (("list",), ("show", "run-1"), ("cancel", "run-1")):
        code, out, err = harnessc(capsys, "workflow", *action, "--log", f"sqlite:///{db}")
        assert (code, out) == (2, ""), err
        assert "holds no workflow state" in err
    # (SQLite's own -wal and -shm files of a reader aside)
    assert not [p.name for p in tmp_path.iterdir() if p.suffix == ".dbos"]
