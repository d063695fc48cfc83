"""The governed runtime's facade: the path of a call on examples/remediation, end to end."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from harnessc.compiler.pipeline import check
from harnessc.runtime import (
    Accepted,
    ActionState,
    Facts,
    Harness,
    HarnessError,
    Outcome,
    PendingCall,
    Refusal,
    SQLiteStore,
)
from harnessc.runtime.log.projections import Projections
from harnessc.runtime.model import Spec
from harnessc.runtime.model.canonical import Execution

from .conftest import ROOT
from .session_specs import DELETE, spec_of

EXAMPLE = ROOT / "examples" / "remediation"
ENGINEER = {"user": "u-1842", "role": "engineer", "tenant": "acme"}
RELEASE_MANAGER = {"user": "u-0042", "role": "release-manager", "tenant": "acme"}
FACTS = Facts.of(
    {"workspace.open": True, "workspace.root": "/repo", "release.freeze": False},
    connected={"change_platform"},
)
CHANGE = {
    "service": "payment-service",
    "patch_ref": "artifacts/remediation.patch",
    "evidence_refs": ["evidence/unit-test.xml"],
    "rollback_plan": "Redeploy release 2026.09.3.",
}
DEPLOY = {"change_id": "chg-241", "environment": "production"}


def build(folder: Path = EXAMPLE) -> Spec:
    result = check([folder / "remediation.harness"])
    assert result.ok, [d.message for d in result.diagnostics]
    assert result.model is not None
    return result.model


def variant(tmp_path: Path, old: str, new: str) -> Spec:
    """The remediation spec with one edit (a copy in tmp_path)."""
    folder = tmp_path / "remediation"
    folder.mkdir(exist_ok=True)
    text = (EXAMPLE / "remediation.harness").read_text(encoding="utf-8")
    assert old in text
    (folder / "remediation.harness").write_text(text.replace(old, new, 1), encoding="utf-8")
    scanner = (EXAMPLE / "scanner.harness").read_text(encoding="utf-8")
    (folder / "scanner.harness").write_text(scanner, encoding="utf-8")
    return build(folder)


@pytest.fixture(scope="module")
def spec() -> Spec:
    return build()


def planner(h: Harness, actor: dict[str, Any] | None = None, **kw: Any) -> Any:
    return h.session(
        "planner",
        actor=actor or ENGINEER,
        task=kw.pop("task", "task-7"),
        facts=kw.pop("facts", FACTS),
        resource=kw.pop("resource", {"tenant": "acme"}),
        **kw,
    )


def pending(result: PendingCall | Refusal) -> PendingCall:
    assert isinstance(result, PendingCall), result
    return result


# ---------------------------------------------------------------------------------------------
# End to end


def test_the_path_of_a_call_end_to_end_is_recorded_and_verifies(spec: Spec, tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "events.db")
    h = Harness(spec, store=store)
    runs: list[dict[str, Any]] = []

    @h.implement("change.create")
    def create(args: dict[str, Any]) -> dict[str, Any]:
        runs.append(args)
        return {"change_id": "chg-241", "state": "pending"}

    @h.implement("production.deploy")
    def deploy(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        assert ctx.actor["user"] == ENGINEER["user"]
        return {
            "deployment_id": "dep-1",
            "dashboard": "https://deploy.example/dep-1",
            "rollout": {"canary_percent": 10, "started_at": "now", "state": "rolling"},
        }

    s = planner(h)
    exposure = s.expose("open a change request for the patch")
    assert "change.create" in exposure.tools
    assert "terminal_session" not in exposure.tools  # hidden on the planner's surface
    assert "ci.run_pipeline" in exposure.trace.unavailable

    call = pending(s.normalize("change_create", "call-1", CHANGE))
    assert call.tool_id == "change.create" and call.tool_version == 3
    decision = s.decide(call)
    assert (decision.effect, decision.rule) == ("allow", "remediation.engineers_create")
    result = s.invoke(call)
    assert result.ok and result.data == {"change_id": "chg-241", "state": "pending"}
    assert result.executor is not None and result.executor.endswith(".create")
    assert result.actor == "u-1842" and result.side_effect is True
    assert s.action_state(call) is ActionState.SUCCEEDED
    assert runs == [CHANGE]

    deploy_call = pending(s.normalize("production.deploy", "call-2", DEPLOY))
    asked = s.decide(deploy_call)
    assert asked.effect == "ask" and asked.rule == "remediation.release_manager"
    not_yet = s.invoke(deploy_call)
    assert not not_yet.ran and not_yet.error_category == "waiting_approval"
    request = s.request_approval(deploy_call)
    outcome = h.approve(request.request_id, by=RELEASE_MANAGER)
    assert outcome.status == "approved" and outcome.grant is not None
    shipped = s.invoke(deploy_call)
    assert shipped.ok and shipped.grant_id == outcome.grant.grant_id

    evidence = s.evidence()
    by_call = {i.tool_call_id: i for i in evidence.items}
    assert by_call["call-1"].status == "success"
    assert by_call["call-1"].input_hash == call.input_hash
    assert by_call["call-1"].decision_id == result.decision_id
    assert "remediation.engineers_create" in by_call["call-1"].proves
    assert by_call["call-2"].approved_by == "u-0042"
    assert by_call["call-2"].grant_id == outcome.grant.grant_id

    events = store.read()
    decisions = [e for e in events if e.type == "decision"]
    assert decisions and all(e.payload["policy_version"] == spec.content_hash() for e in decisions)
    assert len({e.payload["decision_id"] for e in decisions}) == len(decisions)
    views = Projections.rebuild(events)
    assert views.calls["call-1"].state == "SUCCEEDED"
    assert views.grants[outcome.grant.grant_id].status == "used"
    assert h.verify().ok
    store.close()


def test_availability_is_worked_out_once_per_facts_and_new_facts_change_the_exposure(
    spec: Spec,
) -> None:
    h = Harness(spec)
    checks: list[Facts] = []
    check = h.checker.check

    def counted(facts: Any = None, who: Any = None) -> Any:
        checks.append(facts)
        return check(facts, who)

    h.checker.check = counted  # type: ignore[method-assign]
    s = planner(h, facts=Facts.of({"workspace.open": False}, connected={"change_platform"}))
    shut = s.expose("inspect the dependency manifests")
    assert s.expose("bump the vulnerable package").trace.unavailable == shut.trace.unavailable
    assert len(checks) == 1  # the same facts: the same snapshot, not a second check
    reason = shut.trace.unavailable["deps"]
    assert "workspace.open" in reason
    s.update_facts({"workspace.open": True})
    opened = s.expose("inspect the dependency manifests")
    assert len(checks) == 2
    assert "deps" not in opened.trace.unavailable
    assert "deps" in opened.tools and "deps" not in shut.tools


def test_from_json_loads_a_saved_spec(spec: Spec, tmp_path: Path) -> None:
    path = tmp_path / "spec.json"
    path.write_text(spec.to_json(), encoding="utf-8")
    h = Harness.from_json(path)
    assert h.policy_version == spec.content_hash()
    with pytest.raises(HarnessError) as err:
        h.session("nobody")
    assert err.value.code == "unknown-agent"
    with pytest.raises(HarnessError):
        h.implement("no.such.tool")(lambda args: {})


def test_the_policy_version_does_not_depend_on_where_the_spec_was_compiled(
    spec: Spec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    elsewhere = build(EXAMPLE.resolve())
    assert elsewhere.tools["change.create"].origin != spec.tools["change.create"].origin
    assert elsewhere.content_hash() == spec.content_hash()


# ---------------------------------------------------------------------------------------------
# §4.6.3: approving a draft change never authorises its deploy


DRAFT_RULE = """  engineers_create: allow change.create when actor.role in ["engineer", "sre"]
"""
DRAFT_ASK = """  engineers_create: allow change.create when actor.role in ["engineer", "sre"]
  drafts: ask change.create when actor.role == "contractor" {
    approver role "user"
    grant task ttl 2h
    reason "A contractor's change request is confirmed by the user."
  }
"""


@pytest.mark.parametrize("scope", ["task", "once"])
def test_approving_a_draft_change_does_not_authorise_production_deploy(
    tmp_path: Path, scope: str
) -> None:
    spec = variant(tmp_path, DRAFT_RULE, DRAFT_ASK.replace("grant task", f"grant {scope}"))
    h = Harness(spec)
    deploys: list[str] = []
    h.bind("change.create", lambda args: {"change_id": "chg-241", "state": "pending"})
    h.bind("production.deploy", lambda args, ctx: deploys.append(ctx.pending.tool_call_id))
    contractor = {"user": "u-9", "role": "contractor", "roles": ["user"], "tenant": "acme"}
    s = planner(h, contractor, resource={"tenant": "acme", "state": "approved"})

    draft = pending(s.normalize("change.create", "call-1", CHANGE))
    assert s.decide(draft).effect == "ask"
    request = s.request_approval(draft)
    assert request.scope["grant"] == scope
    approved = h.approve(request.request_id, by={"user": "u-9", "role": "user"})
    assert approved.status == "approved"
    assert s.invoke(draft).ok

    deploy = pending(s.normalize("production.deploy", "call-2", DEPLOY))
    decision = s.decide(deploy)
    assert decision.effect == "ask" and decision.rule == "remediation.release_manager"
    refused = s.invoke(deploy)
    assert not refused.ran and refused.error_category == "waiting_approval"
    assert deploys == []

    # the release manager approves this deploy; nothing else rides on it
    grant = h.approve(s.request_approval(deploy).request_id, by=RELEASE_MANAGER).grant
    assert grant is not None and grant.scope == "once"
    second = pending(s.normalize("production.deploy", "call-3", DEPLOY))
    assert s.decide(second).effect == "ask"
    assert not s.invoke(second).ran
    changed = pending(s.normalize("production.deploy", "call-2", {**DEPLOY, "canary_percent": 50}))
    assert changed.input_hash != deploy.input_hash
    assert not s.invoke(changed).ran
    assert s.invoke(deploy).ran
    assert deploys == ["call-2"]
    assert h.verify().ok


def test_an_approval_judges_the_call_again_and_a_new_deny_wins(spec: Spec, tmp_path: Path) -> None:
    h = Harness(spec)
    h.bind("production.deploy", lambda args: {"deployment_id": "d"})
    s = planner(h)
    deploy = pending(s.normalize("production.deploy", "call-2", DEPLOY))
    request = s.request_approval(deploy)
    frozen = variant(
        tmp_path,
        '  allow production.deploy when args.environment == "staging"\n',
        '  allow production.deploy when args.environment == "staging"\n'
        '  incident: deny production.deploy { reason "An incident is open: nothing ships." }\n',
    )
    h.load(frozen)
    assert h.policy_version != spec.content_hash()
    outcome = h.approve(request.request_id, by=RELEASE_MANAGER)
    assert outcome.status == "denied-by-policy" and outcome.grant is None
    assert outcome.decision.rule == "remediation.incident"
    result = s.invoke(deploy)
    assert not result.ran and result.error_category == "cancelled"
    assert h.approvals.get(request.request_id).status == "withdrawn"


# ---------------------------------------------------------------------------------------------
# Executors


def test_invoking_twice_runs_once_and_returns_the_recorded_result(spec: Spec) -> None:
    h = Harness(spec)
    count = []
    h.bind("change.create", lambda args: count.append(1) or {"change_id": "c", "state": "pending"})
    s = planner(h)
    call = pending(s.normalize("change.create", "call-1", CHANGE))
    again = pending(s.normalize("change_create", "call-1", CHANGE))
    assert again is call  # the same frozen call
    first = s.invoke(call)
    assert s.invoke(call) is first and s.invoke(again) is first
    assert count == [1]


def test_concurrent_invocations_of_one_call_run_once(spec: Spec) -> None:
    h = Harness(spec)
    count = []

    def slow(args: dict[str, Any]) -> dict[str, Any]:
        count.append(1)
        time.sleep(0.05)
        return {"change_id": "c", "state": "pending"}

    h.bind("change.create", slow)
    s = planner(h)
    call = pending(s.normalize("change.create", "call-1", CHANGE))
    s.decide(call)
    results: list[Any] = []
    threads = [threading.Thread(target=lambda: results.append(s.invoke(call))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert count == [1] and len({id(r) for r in results}) == 1


def test_an_executor_exception_is_a_failed_result_not_a_traceback(spec: Spec) -> None:
    h = Harness(spec)

    @h.implement("change.create")
    def broken(args: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("platform returned 502")

    s = planner(h)
    call = pending(s.normalize("change.create", "call-1", CHANGE))
    result = s.invoke(call)
    assert result.status == "failure" and result.error_category == "executor_error"
    assert "platform returned 502" in (result.error or "")
    assert result.side_effect is True  # a write may have happened
    assert result.retryable is True  # change.create is idempotent
    assert s.action_state(call) is ActionState.FAILED


def test_the_timeout_is_enforced(spec: Spec) -> None:
    release, finished = threading.Event(), threading.Event()

    def slow(args: dict) -> dict:
        release.wait(30)  # held until the call has returned: only the timeout returns sooner
        finished.set()
        return {"change_id": "c", "state": "pending"}

    h = Harness(spec)
    h.bind("change.create", slow)
    s = planner(h)
    call = pending(s.normalize("change.create", "c-1", CHANGE, execution=Execution(timeout_ms=50)))
    result = s.invoke(call)
    still_running = not finished.is_set()
    release.set()
    assert still_running  # the call returned without waiting for the tool
    assert (result.status, result.error_category) == ("unknown", "timeout")
    assert s.action_state(call) is ActionState.FAILED


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_runs_its_calls(spec: Spec) -> None:
    # the parent's executor threads are not in the child: it must not hand a call to one
    h = Harness(spec)
    h.bind("change.create", lambda args: {"change_id": "c", "state": "pending"})
    s = planner(h)
    assert s.invoke(pending(s.normalize("change.create", "c-1", CHANGE))).ok
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through its exit status
        code = 1
        try:
            call = pending(
                s.normalize("change.create", "c-2", CHANGE, execution=Execution(timeout_ms=5000))
            )
            code = 0 if s.invoke(call).ok else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_output_is_validated_against_the_declared_schema(spec: Spec) -> None:
    h = Harness(spec)
    h.bind("change.create", lambda args: {"change_id": "c", "state": "merged"})
    s = planner(h)
    result = s.invoke(pending(s.normalize("change.create", "c-1", CHANGE)))
    assert result.error_category == "invalid_output"
    assert "`$.state`" in (result.error or "")


def test_data_that_is_not_json_is_a_failed_result_not_a_traceback() -> None:
    # a set, an object, a value that contains itself: the log cannot record them, so the call
    # fails as an invalid output, recorded like any other result (the tool declares no output
    # schema that could refuse them first)
    looped: dict[str, Any] = {"deleted": True}
    looped["self"] = looped
    deep: dict[str, Any] = {}
    inner = deep
    for _ in range(5000):
        inner["next"] = inner = {}
    returns = {
        "c-set": {"deleted": True, "paths": {"a", "b"}},
        "c-object": Outcome("partial", {"deleted": True, "at": object()}),
        "c-loop": looped,
        "c-deep": deep,
    }
    h = Harness(spec_of(default="allow", tools=(DELETE,)))
    h.bind(DELETE.id, lambda args, ctx: returns[ctx.pending.tool_call_id])
    s = h.session("s.a", actor=ENGINEER, task="task-7")
    results = {}
    for call_id in returns:
        call = pending(s.normalize(DELETE.id, call_id, {"path": "/tmp/x"}))
        assert s.decide(call).effect == "allow"
        results[call_id] = s.invoke(call)
        assert s.invoke(call) == results[call_id]  # recorded: asked again, the same result
    for result in results.values():
        assert (result.status, result.state, result.error_category) == (
            "failure",
            "FAILED",
            "invalid_output",
        )
        assert result.ran and result.data is None
        assert "the executor returned data that is not JSON" in (result.error or "")
    assert "type `set` is not JSON at `$.paths`" in (results["c-set"].error or "")
    assert "type `object` is not JSON at `$.at`" in (results["c-object"].error or "")
    assert "contains itself, or nests too deeply" in (results["c-loop"].error or "")
    assert "contains itself, or nests too deeply" in (results["c-deep"].error or "")
    views = Projections.rebuild(h.store.read())
    assert [views.calls[call_id].state for call_id in returns] == ["FAILED"] * 4
    assert h.verify().ok


def test_a_completion_with_data_that_is_not_json_is_a_failed_result() -> None:
    h = Harness(spec_of(default="allow", tools=(DELETE,)))
    h.bind(DELETE.id, lambda args: Accepted(handle="job-1"))
    s = h.session("s.a", actor=ENGINEER, task="task-7")
    call = pending(s.normalize(DELETE.id, "c-1", {"path": "/tmp/x"}))
    accepted = s.invoke(call)
    assert accepted.status == "accepted" and accepted.action_id
    final = h.complete(accepted.action_id, {"paths": {"a"}}, by="cleaner")
    assert (final.status, final.state, final.error_category) == (
        "failure",
        "FAILED",
        "invalid_output",
    )
    assert "type `set` is not JSON at `$.paths`" in (final.error or "")
    assert s.invoke(call) == final
    assert Projections.rebuild(h.store.read()).calls["c-1"].state == "FAILED"
    assert h.verify().ok


def test_an_executor_may_report_a_partial_outcome(spec: Spec) -> None:
    h = Harness(spec)
    h.bind(
        "change.create",
        lambda args: Outcome("partial", {"change_id": "c", "state": "pending"}, "evidence missing"),
    )
    s = planner(h)
    result = s.invoke(pending(s.normalize("change.create", "c-1", CHANGE)))
    assert (result.status, result.observation) == ("partial", "evidence missing")


def test_no_executor_means_nothing_runs(spec: Spec) -> None:
    s = planner(Harness(spec))
    result = s.invoke(pending(s.normalize("change.create", "c-1", CHANGE)))
    assert not result.ran and result.error_category == "no_executor"


def test_a_denied_call_never_runs(spec: Spec) -> None:
    h = Harness(spec)
    ran: list[int] = []
    h.bind("change.create", lambda args: ran.append(1) or {})
    s = planner(h)
    call = pending(
        s.normalize("change.create", "c-1", {**CHANGE, "patch_ref": "https://x.example/p"})
    )
    decision = s.decide(call)
    assert decision.effect == "deny" and decision.instead
    result = s.invoke(call)
    assert not result.ran and result.error_category == "denied" and ran == []


def test_async_executors_run_on_the_loop_with_their_timeout(spec: Spec) -> None:
    h = Harness(spec)
    calls: list[str] = []

    @h.implement("change.create")
    async def create(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        calls.append(ctx.pending.tool_call_id)
        await asyncio.sleep(0.01 if ctx.pending.tool_call_id != "slow" else 1)
        return {"change_id": "chg-1", "state": "pending"}

    s = planner(h)
    fast = pending(s.normalize("change.create", "fast", CHANGE))
    slow = pending(s.normalize("change.create", "slow", CHANGE, execution=Execution(timeout_ms=30)))

    async def main() -> tuple[Any, Any, Any]:
        a, b = await asyncio.gather(s.ainvoke(fast), s.ainvoke(fast))
        c = await s.ainvoke(slow)
        return a, b, c

    a, b, c = asyncio.run(main())
    assert a.ok and a is b and calls.count("fast") == 1
    assert c.error_category == "timeout"
    # a sync invoke of an async executor runs it in its own loop
    other = pending(s.normalize("change.create", "sync", CHANGE))
    assert s.invoke(other).ok


# ---------------------------------------------------------------------------------------------
# Delegation and skills


def test_delegation_is_one_level_deep_and_the_child_never_holds_delegate_task(
    spec: Spec,
) -> None:
    h = Harness(spec)
    s = planner(h)
    child = s.delegate("Write and test a patch for the findings.", agent="generic")
    assert not isinstance(child, Refusal)
    assert "delegate_task" not in child.surface and "terminal_session" in child.surface
    assert child.task_id == s.task_id and child.parent is s
    again = child.delegate("recurse", agent="generic")
    assert isinstance(again, Refusal) and again.code == "delegation-refused"
    refused = child.normalize("delegate_task", "c-1", {"goal": "x"})
    assert isinstance(refused, Refusal) and refused.code == "delegate-task"
    wrong = s.delegate("x", agent="planner")
    assert isinstance(wrong, Refusal) and "generic" in wrong.message
    generic = h.session("generic", actor=ENGINEER, facts=FACTS)
    not_a_planner = generic.delegate("x")
    assert isinstance(not_a_planner, Refusal) and not_a_planner.code == "delegation-refused"
    # the child's calls go through policy and evidence like any other
    write = pending(child.normalize("write_file", "w-1", {"path": "/repo/pom.xml", "content": "x"}))
    assert child.decide(write).effect == "ask"
    assert any(i.tool_call_id == "w-1" for i in s.evidence().items)


SKILL_SPEC = """
harness t { version "1.0.0" }
tool pub { summary "p"; effects read; input { x: string } }
policy parent {
  default allow
  no_guests: deny secret.peek when actor.role == "guest" { reason "no guests" }
}
policy profile {
  default deny
  allow secret.peek, secret.poke
}
skill vault {
  profile profile
  private tool secret.peek { summary "peek"; effects read; input { n: int? } }
  private tool secret.poke { summary "poke"; effects write; input { n: int? } }
  private tool secret.burn { summary "burn"; effects write; input { n: int? } }
  subagent keeper { tools secret.peek }
}
surface s { expose pub }
agent a { surface s; policy parent }
"""


def test_skill_private_tools_run_only_in_a_skill_session_under_both_policies(
    tmp_path: Path,
) -> None:
    (tmp_path / "t.harness").write_text(SKILL_SPEC, encoding="utf-8")
    result = check([tmp_path / "t.harness"])
    assert result.ok and result.model is not None
    h = Harness(result.model)
    for tool in ("secret.peek", "secret.poke", "secret.burn"):
        h.bind(tool, lambda args: {})
    s = h.session("a", actor={"user": "u", "role": "engineer"}, task="t")
    outside = s.normalize("secret.peek", "c-1", {})
    assert isinstance(outside, Refusal) and outside.code == "skill-private"
    assert outside.replacement == "Session.skill('t.vault')"

    vault = s.skill("vault")
    assert not isinstance(vault, Refusal)
    assert set(vault.surface) == {"secret.peek", "secret.poke", "secret.burn"}
    assert vault.decide(pending(vault.normalize("secret.peek", "c-1", {}))).effect == "allow"
    burn = pending(vault.normalize("secret.burn", "c-2", {}))
    decision = vault.decide(burn)  # the parent allows; the profile's default denies
    assert decision.effect == "deny" and decision.policy == "t.profile"
    assert not vault.invoke(burn).ran
    public = vault.normalize("pub", "c-3", {"x": "y"})
    assert isinstance(public, Refusal) and public.code == "not-on-surface"

    guest = h.session("a", actor={"user": "g", "role": "guest"}, task="t")
    guest_vault = guest.skill("t.vault")
    assert not isinstance(guest_vault, Refusal)
    peek = pending(guest_vault.normalize("secret.peek", "c-4", {}))
    decision = guest_vault.decide(peek)  # the profile allows; the parent denies
    assert (decision.effect, decision.rule) == ("deny", "parent.no_guests")
    assert isinstance(s.skill("nope"), Refusal)
    assert any(i.tool_call_id == "c-1" for i in s.evidence().items)


@pytest.mark.parametrize(
    "module",
    [
        "session.harness",
        "judge.availability",
        "judge.normalize",
        "session.approvals",
        "session.executors",
        "session.sessions",
        "session.evidence",
    ],
)
def test_the_runtime_modules_examples_run(module: str) -> None:
    import doctest
    import importlib

    assert doctest.testmod(importlib.import_module(f"harnessc.runtime.{module}")).failed == 0


def test_the_public_api_is_closed_and_loads() -> None:
    import harnessc.runtime as runtime

    assert sorted(runtime.__all__) == sorted(set(runtime.__all__))
    for name in runtime.__all__:
        assert getattr(runtime, name) is not None
    with pytest.raises(AttributeError):
        runtime.not_a_name  # noqa: B018
