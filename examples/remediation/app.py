"""The remediation agent, embedded: a scripted planner played through the generated runtime.

    python examples/remediation/app.py --build     # build build/remediation, then run
    python examples/remediation/app.py             # run an existing build
    python examples/remediation/app.py OUT --log sqlite:///events.db
    python examples/remediation/app.py --console   # a person answers in the operations console

It imports the package `harnessc build examples/remediation/remediation.harness -o
build/remediation` wrote (never the compiler), binds deterministic fake executors, and plays the
calls a model might make: the `remediate` workflow step by step as planner calls, the security
scanner refused without agent access and asked once it is on, a cross-tenant deploy, and the
§4.6.3 regression of reference article 002 — the user's "go ahead with the draft" approves the
draft change request and nothing else: the production deploy that follows still asks a release
manager. Then the same `remediate` workflow runs on the durable engine (DBOS, the `workflows`
extra) on the same store: people decide its gates as they open. Exit status 0 only when every
turn behaved as scripted, the workflow completed, and the event log verifies.

With `--console` the operations console (`harnessc console`, the `console` extra) serves the
same store, and wherever the script would approve, the run waits for a person to decide in it
(approve, approve with edits, deny; the workflow's gates on its Workflows page).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harnessc.runtime import Execution, Facts, Harness, McpState
from operator_console import Console, ConsoleError, ConsolePerson, add_options, wait_for_gates
from scripted_planner import Script, ScriptError, approve, main

ENGINEER = {"user": "u-1842", "role": "engineer", "tenant": "acme"}
ANALYST = {"user": "u-3310", "role": "security", "tenant": "acme"}
RELEASE_MANAGER = {"user": "u-0042", "role": "release-manager"}
SECURITY_REVIEWER = {"user": "u-0031", "role": "security"}
# `--console` without `--operators`: a one-time operator holding the console's `approver` and
# every approver role the script asks (the deploys, the security review, the user's go-ahead)
OPERATOR = ("release-manager", ("approver", "release-manager", "security", "user"))


# A patch reference that only the scanner's report names (content from outside the team).
VENDOR_PATCH = "artifacts/vendor-hotfix.patch"


def as_user(actor: Mapping[str, Any]) -> dict[str, Any]:
    """The person at the keyboard answering as the `user` approver role."""
    return {"user": actor["user"], "role": "user"}


# ---------------------------------------------------------------------------------------------
# Fake executors: deterministic, schema-valid, no network


class ChangePlatform:
    """An in-memory change-management platform."""

    def __init__(self) -> None:
        self.changes: dict[str, dict[str, Any]] = {}
        self.deployments = 0

    def bind(self, h: Harness) -> None:
        h.bind("change.create", self.create)
        h.bind("change.get", self.get)
        h.bind("production.deploy", self.deploy)
        h.bind("change.revert", self.revert)
        # `production.deploy` declares `preview`: an approver sees the rollout plan first
        h.preview_with("production.deploy", self.plan)

    def create(self, args: Mapping[str, Any]) -> dict[str, Any]:
        change_id = f"chg-{241 + len(self.changes)}"
        self.changes[change_id] = {
            "state": "pending",
            "version": 1,
            "evidence_refs": list(args["evidence_refs"]),
        }
        return {"change_id": change_id, "state": "pending"}

    def get(self, args: Mapping[str, Any]) -> dict[str, Any]:
        change = self.changes[args["change_id"]]
        return {"change_id": args["change_id"], **change}

    def plan(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """What a deploy would do, changing nothing: the dry run an approver reads."""
        change = self.changes.get(args["change_id"])
        return {
            "change_id": args["change_id"],
            "environment": args["environment"],
            "current_state": change["state"] if change is not None else "unknown change",
            "rollout": f"{args['canary_percent']}% canary, bake {args['bake_time']}, rolled "
            f"back above {args['max_error_rate']:.0%} errors",
        }

    def deploy(self, args: Mapping[str, Any]) -> dict[str, Any]:
        self.deployments += 1
        change = self.changes[args["change_id"]]
        if args["environment"] == "production":
            change["state"] = "deployed"
        deployment = f"dep-{self.deployments:03d}"
        return {
            "deployment_id": deployment,
            "dashboard": f"https://deploy.acme.example/{args['environment']}/{deployment}",
            "rollout": {
                "canary_percent": args["canary_percent"],
                "started_at": "2026-09-14T10:00:00Z",
                "state": "rolling",
            },
        }

    def revert(self, args: Mapping[str, Any]) -> dict[str, Any]:
        self.changes[args["change_id"]]["state"] = "reverted"
        return {"change_id": args["change_id"], "state": "reverted"}


def bind_workspace(h: Harness) -> None:
    """The scanner, the workspace tools and the CI runner."""

    @h.implement("mcp:scanner:tool:scan")
    def scan(args: Mapping[str, Any]) -> dict[str, Any]:
        if args["target"] == "billing-service":  # a report that carries an instruction
            return {"report": f'evidence/billing-scan.sarif; suggested fix: "{VENDOR_PATCH}"'}
        return {"report": "evidence/security-scan.sarif"}

    @h.implement("deps")
    def deps(args: Mapping[str, Any]) -> dict[str, Any]:
        if args["op"] == "bump":
            report = f"{args['package']} pinned to {args['to_version']} in {args['manifest']}"
            return {"report": report, "changed": True}
        return {
            "report": "jackson-databind 2.13.1 (CVE-2026-31337, fixed in 2.17.2) via "
            "spring-boot-starter-web",
            "changed": False,
        }

    @h.implement("terminal_session")
    def terminal(args: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "exit_code": 0,
            "stdout": "Tests run: 412, Failures: 0",
            "stderr": "",
            "session_id": "term-1",
        }

    @h.implement("ci.run_pipeline")
    def pipeline(args: Mapping[str, Any]) -> dict[str, Any]:
        return {"run_id": "ci-5150", "passed": True, "report": "https://ci.acme.example/runs/5150"}


def scanner_state(h: Harness, *, agent_access: bool) -> McpState:
    """What the application knows about the scanner's MCP server: it reports the schemas the
    server discovered (here, exactly the declared ones)."""
    discovered = {
        tool.id.rsplit(":", 1)[1]: tool.input.to_json_schema()
        for tool in h.spec.tools.values()
        if tool.kind == "mcp" and tool.mcp_server == "scanner"
    }
    return McpState(
        enabled=True,
        connected=True,
        transport_valid=True,
        disclaimer_accepted=True,
        agent_access=agent_access,
        discovered=discovered,
    )


def facts(h: Harness, *, agent_access: bool = True) -> Facts:
    return Facts.of(
        {"workspace.open": True, "workspace.root": "/repo", "release.freeze": False},
        connected={"change_platform"},
        running={"ci_runner"},
        mcp={"scanner": scanner_state(h, agent_access=agent_access)},
    )


# ---------------------------------------------------------------------------------------------
# The script


def play(h: Harness, args: argparse.Namespace, store: str) -> int:
    if not args.console:
        return play_script(h, args, store, None)
    if not args.store_url.startswith(("sqlite:///", "postgresql://")):
        print("error: --console needs a sqlite:/// or postgresql:// store", file=sys.stderr)
        return 2
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    # Ctrl-C and a `kill` end the run, whatever the app inherited: a process started in the
    # background by a shell (`app.py … &`, a CI script) inherits SIGINT ignored
    signal.signal(signal.SIGINT, stop_waiting)
    signal.signal(signal.SIGTERM, stop_waiting)
    console = Console(
        args.store_url,
        args.package_dir / "remediation" / "model.json",
        host=args.host,
        port=args.port,
        operators=args.operators,
        operator=OPERATOR,
    )
    try:
        console.start()
        return play_script(h, args, store, console)
    except ConsoleError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        if console.stop():
            print(f"console      stopped ({console.url})")


def stop_waiting(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def play_script(h: Harness, args: argparse.Namespace, store: str, console: Console | None) -> int:
    platform = ChangePlatform()
    platform.bind(h)
    bind_workspace(h)
    script = Script(h, prefix="rem")
    if console is not None:
        script.person = ConsolePerson(h, console, script.line)
    script.title(
        "remediation: a scripted planner through the generated runtime",
        [
            f"spec {h.spec.name} {h.spec.version}, policy version {h.policy_version[:16]}…",
            f"events: {store}; run {script.run} on this log",
        ]
        + (
            [f"a person answers every approval in the console at {console.url}/"]
            if console is not None
            else []
        ),
    )
    planner = h.session(
        "planner",
        actor=ENGINEER,
        task={"id": f"task-{script.run}-7", "stage": "fix", "purpose": "CVE-2026-31337"},
        facts=facts(h),
        resource={"tenant": "acme"},
        env={"maintenance_window": True},
        session_id=script.session_id("planner"),
    )
    sessions = [planner]

    script.section(
        "The remediate workflow, step by step as planner calls",
        "The planner makes each step's call itself, and every call is judged under the "
        "planner's policy (the durable engine runs the same workflow at the end). Engineer "
        "u-1842 (tenant acme) fixes payment-service.",
    )
    script.show_exposure(planner, "scan payment-service and ship a fix for its findings")
    script.turn(
        planner,
        "step scan: scan payment-service for known vulnerabilities",
        "mcp:scanner:tool:scan",
        {"target": "payment-service"},
        expect="ask",
        rule="guardrails.mcp_calls",
        answer=approve(as_user(ENGINEER), says="yes, scan it"),
    )

    child = script.delegate(
        planner,
        "step patch: delegate to the Generic SubAgent",
        "Write and test a patch.",
        "generic",
    )
    sessions.append(child)
    script.turn(
        child,
        "child: which manifest pins the vulnerable jackson-databind?",
        "deps",
        {"op": "inspect", "manifest": "/repo/pom.xml"},
        expect="allow",
    )
    script.turn(
        child,
        "child: bump jackson-databind to the fixed 2.17.2",
        "deps",
        {
            "op": "bump",
            "manifest": "/repo/pom.xml",
            "package": "jackson-databind",
            "to_version": "2.17.2",
        },
        expect="allow",
        rule="remediation.deps_bump_in_workspace",
    )
    script.turn(
        child,
        "child: run the unit tests in the workspace",
        "terminal_session",
        {"command": "mvn -q test"},
        execution=Execution(cwd="/repo"),
        expect="ask",
        rule="workspace.terminal",
        answer=approve(as_user(ENGINEER)),
    )
    script.turn(
        child,
        "child: run CI on the fix branch (by the tool's old wire name, run_ci)",
        "run_ci",
        {"ref": "fix/cve-2026-31337"},
        expect="allow",
        rule="remediation.ci_quick",
    )
    script.refuse_delegation(child, "child: tries to delegate in turn", "Review the patch.")
    script.line("child", "reports back: patch artifacts/remediation.patch, rollback plan")
    patch = {"patch": "artifacts/remediation.patch", "rollback": "Redeploy release 2026.09.3."}

    script.out("")
    script.out("[·] step review: decide “Ship this patch?” by role security")
    script.line(
        "answer",
        f"approve, by {SECURITY_REVIEWER['user']} (security) — a workflow decision: the "
        "planner's application records it here; the durable run below waits for it",
    )
    change = script.turn(
        planner,
        "step change: open the change request",
        "change.create",
        {
            "service": "payment-service",
            "patch_ref": patch["patch"],
            "evidence_refs": ["evidence/security-scan.sarif", "evidence/unit-test.xml"],
            "rollback_plan": patch["rollback"],
        },
        expect="allow",
        rule="remediation.engineers_create",
    )
    assert change.result is not None and change.result.data is not None
    change_id = change.result.data["change_id"]
    script.out("")
    script.out("[·] step window: gate env.maintenance_window")
    script.line("gate", "open: the application supplies env.maintenance_window = true")
    script.turn(
        planner,
        f"staging first: deploy {change_id} to staging",
        "production.deploy",
        {"change_id": change_id, "environment": "staging"},
        expect="allow",
    )
    script.turn(
        planner,
        f"step deploy: deploy {change_id} to production",
        "production.deploy",
        {"change_id": change_id, "environment": "production"},
        expect="ask",
        rule="remediation.release_manager",
        answer=approve(RELEASE_MANAGER, says=f"ship {change_id}"),
    )
    script.turn(
        planner,
        "step verify: read the change back from the platform",
        "change.get",
        {"change_id": change_id},
        expect="allow",
    )
    script.out("")
    script.out("[·] step revert (the compensation) does not run: the deploy succeeded")

    script.section(
        "Session-aware policy: a patch named by content from outside",
        "The scanner is an external MCP server: its results are untrusted unless the spec says "
        "otherwise. Its report on billing-service names a ready-made patch. A change request "
        "for a patch that appeared only there is refused (`untrusted_patch`), and the decision "
        "says where the reference came from; the change platform, declared `trust trusted`, "
        "is why the change ids above were never in doubt.",
    )
    script.turn(
        planner,
        "scan billing-service",
        "mcp:scanner:tool:scan",
        {"target": "billing-service"},
        expect="ask",
        rule="guardrails.mcp_calls",
        answer=approve(as_user(ENGINEER), says="yes, scan it"),
    )
    script.turn(
        planner,
        "the report suggests a patch: open a change request for it",
        "change.create",
        {
            "service": "billing-service",
            "patch_ref": VENDOR_PATCH,
            "evidence_refs": ["evidence/billing-scan.sarif"],
            "rollback_plan": "Redeploy the previous release.",
        },
        expect="deny",
        rule="remediation.untrusted_patch",
    )

    script.section(
        "The security scanner: connected, but without agent access",
        "Same engineer, a new session in which the user has not switched on agent access for "
        "the scanner's MCP server: its tools are unavailable, so they are never exposed, and a "
        "call that names one anyway is refused before any policy or approval sees it. Once the "
        "user switches agent access on, the same scan is an ordinary MCP call: it asks the user.",
    )
    no_access = h.session(
        "planner",
        actor=ENGINEER,
        task=f"task-{script.run}-7",
        facts=facts(h, agent_access=False),
        resource={"tenant": "acme"},
        session_id=script.session_id("no-scanner-access"),
    )
    sessions.append(no_access)
    exposure = script.show_exposure(no_access, "scan payment-service for vulnerabilities")
    script.check(
        "mcp:scanner:tool:scan" not in exposure.tools
        and "agent access" in exposure.trace.unavailable.get("mcp:scanner:tool:scan", ""),
        "the scanner was exposed without agent access",
    )
    script.turn(
        no_access,
        "a replayed plan scans payment-service anyway",
        "mcp:scanner:tool:scan",
        {"target": "payment-service"},
        expect="refused:unavailable",
        expose=False,
    )
    script.out("")
    script.out("[·] the user switches on agent access for the scanner")
    h.resume(no_access.id, facts=facts(h, agent_access=True))
    script.line("facts", "agent_access=true for the MCP server `scanner` (recorded on resume)")
    script.turn(
        no_access,
        "scan payment-service now that agent access is on",
        "mcp:scanner:tool:scan",
        {"target": "payment-service"},
        expect="ask",
        rule="guardrails.mcp_calls",
        answer=approve(as_user(ENGINEER), says="yes, scan it"),
    )

    script.section(
        "Another tenant's service",
        "An acme engineer's planner is pointed at a globex deployment: the guardrail denies "
        "it whatever the tool and environment, and says what to do instead.",
    )
    cross = h.session(
        "planner",
        actor=ENGINEER,
        task=f"task-{script.run}-7",
        facts=facts(h),
        resource={"tenant": "globex"},
        session_id=script.session_id("cross-tenant"),
    )
    sessions.append(cross)
    script.turn(
        cross,
        "deploy chg-9001 of globex to staging",
        "production.deploy",
        {"change_id": "chg-9001", "environment": "staging"},
        expect="deny",
        rule="guardrails.cross_tenant",
    )

    script.section(
        "§4.6.3 replayed: “go ahead with the draft” is not a deploy approval",
        "Security analyst u-3310 asks the agent to fix the finding. Their draft change request "
        "waits for their go-ahead (rule drafts.draft_change); the grant it gets is bound to that "
        "one change.create call. The deploy that follows is a different tool, call and input "
        "hash: it still asks a release manager, and the analyst cannot approve it.",
    )
    analyst = h.session(
        "planner",
        actor=ANALYST,
        task=f"task-{script.run}-8",
        facts=facts(h),
        resource={"tenant": "acme"},
        session_id=script.session_id("analyst"),
    )
    sessions.append(analyst)
    draft = script.turn(
        analyst,
        "draft the change request for the patch",
        "change.create",
        {
            "service": "payment-service",
            "patch_ref": patch["patch"],
            "evidence_refs": ["evidence/security-scan.sarif", "evidence/unit-test.xml"],
            "rollback_plan": patch["rollback"],
        },
        expect="ask",
        rule="drafts.draft_change",
        answer=approve(as_user(ANALYST), says="go ahead with the draft"),
    )
    if console is not None and not (draft.result is not None and draft.result.ran):
        script.line("skipped", "the draft was not approved: no deploy follows it")
        run_durably(h, script, args.store_url, console)
        return script.finish(sessions, store)
    assert draft.result is not None and draft.result.data is not None
    assert draft.outcome is not None and draft.outcome.grant is not None
    draft_grant = draft.outcome.grant
    draft_change = draft.result.data["change_id"]
    deploy = script.turn(
        analyst,
        f"the user said go ahead: deploy {draft_change} to production",
        "production.deploy",
        {"change_id": draft_change, "environment": "production"},
        expect="ask",
        rule="remediation.release_manager",
    )
    assert deploy.pending is not None
    _, grant = analyst.judge(deploy.pending)
    script.check(grant is None, "the draft's approval authorised the production deploy")
    script.line(
        "regression",
        f"the draft's grant {draft_grant.grant_id} covers ({draft_grant.tool_id}, "
        f"{draft_grant.tool_call_id}, {(draft_grant.input_hash or '')[:12]}…); this call is "
        f"({deploy.pending.tool_id}, {deploy.pending.tool_call_id}, "
        f"{deploy.pending.input_hash[:12]}…): no grant matches, the deploy is NOT authorised "
        "by the draft's approval",
    )
    script.try_answer(deploy, approve(as_user(ANALYST), says="I already said go ahead"))
    script.answer(deploy, approve(RELEASE_MANAGER, says=f"ship {draft_change}"))
    script.turn(
        analyst,
        "the old fused tool that once turned a draft into a deploy",
        "change.deploy",
        {"service": "payment-service", "patch_ref": patch["patch"]},
        expect="refused:legacy-tool",
        replacement="production.deploy",
    )
    run_durably(h, script, args.store_url, console)
    return script.finish(sessions, store)


# ---------------------------------------------------------------------------------------------
# The same workflow, durable


PATCH = {"patch": "artifacts/remediation.patch", "rollback": "Redeploy release 2026.09.3."}
DECIDERS = {
    "scan.approval": ("approve", as_user(ENGINEER)),
    "review": ("approve", SECURITY_REVIEWER),
    "deploy.approval": ("approve", RELEASE_MANAGER),
}


def patch_runner(child: Any, goal: str, context: list[Any]) -> dict[str, Any]:
    """The application's agent loop for the `patch` step: the Generic SubAgent's calls, each
    through the child session (normalize, decide, invoke), then its declared output."""
    calls = [
        ("deps", {"op": "inspect", "manifest": "/repo/pom.xml"}),
        (
            "deps",
            {
                "op": "bump",
                "manifest": "/repo/pom.xml",
                "package": "jackson-databind",
                "to_version": "2.17.2",
            },
        ),
    ]
    for n, (tool, args) in enumerate(calls, 1):
        pending = child.normalize(tool, f"{child.id}/call-{n}", args)
        decision = child.decide(pending)
        if decision.effect != "allow":
            raise RuntimeError(f"{tool}: {decision.effect}, the patch needs a person")
        result = child.invoke(pending)
        if not result.ok:
            raise RuntimeError(f"{tool}: {result.error}")
    return dict(PATCH)


def run_durably(h: Harness, script: Any, url: str, console: Console | None = None) -> None:
    script.section(
        "The remediate workflow on the durable engine",
        "DBOS runs the workflow from its compiled IR on the same store; each call goes through "
        "the harness as the creator. The run waits at each gate (an ASK, the security review) "
        "until the person in its `by` decides it; "
        + (
            "here a person decides each in the console's Workflows page."
            if console is not None
            else "here they decide as the gates open."
        ),
    )
    if not url.startswith(("sqlite:///", "postgresql://")):
        script.line("skipped", "durable workflows need a sqlite:/// or postgresql:// store")
        return
    try:
        import dbos  # noqa: F401
    except ImportError:
        script.line("skipped", "the `workflows` extra (dbos) is not installed")
        return
    wf = h.workflows.configure(url, executor_id="remediation-app", poll_s=0.05)
    try:
        wf.delegate_with(patch_runner)
        run = wf.create(
            "remediate",
            {"service": "payment-service"},
            id=f"remediate-{script.run}",
            actor=ENGINEER,
            facts=facts(h),
            env={"maintenance_window": True},
            resource={"tenant": "acme"},
            start=True,
        )
        script.line("created", f"{run}, as {ENGINEER['user']} (engineer, acme)")
        if console is not None:
            status = wait_for_gates(wf, run, console, script.line)
        else:
            status = decide_as_scripted(wf, run, script)
        for step in status["steps"]:
            script.line("step", f"{step['name']:<8} {step['kind']:<8} {step['state']}")
        # a person may reject the review (the run ends early, on purpose) or deny an ASK
        script.check(
            status["status"] == "completed" or console is not None,
            f"the durable run ended {status['status']}: {status['error']}",
        )
        recorded = Counter(
            e.stream
            for e in h.store.read()
            if e.type == "workflow.step" and e.stream.startswith(f"workflow:{run}/")
        )
        script.check(
            set(recorded.values()) == {1}, f"a step of {run} was recorded twice: {recorded}"
        )
        script.line(
            status["status"],
            f"{len(status['artifacts'])} artifacts; {len(recorded)} steps, gates and marks, "
            "each recorded once",
        )
    finally:
        wf.close()


def decide_as_scripted(wf: Any, run: str, script: Any) -> dict[str, Any]:
    """Decide each gate as it opens, as the scripted people would; the run's last status."""
    deadline = time.monotonic() + 120
    decided: set[str] = set()
    status: dict[str, Any] = wf.status(run)
    while status["status"] not in ("completed", "failed", "cancelled"):
        for gate in status["pending_gates"]:
            if gate["gate"] in decided:
                continue
            option, by = DECIDERS[gate["gate"]]
            wanted = " or ".join(f"{b['kind']} {b['value']}" for b in gate["by"])
            script.line("waiting", f"{gate['gate']}: {gate['question']} (by {wanted})")
            outcome = wf.decide(run, gate["gate"], option, by=by)
            decided.add(gate["gate"])
            script.line("decided", f"{gate['gate']}: {outcome.option} by {outcome.by}")
        if time.monotonic() > deadline:
            raise ScriptError(f"the durable run {run} did not finish")
        time.sleep(0.05)
        status = wf.status(run)
    return status


if __name__ == "__main__":
    sys.exit(
        main(
            example="remediation",
            spec="examples/remediation/remediation.harness",
            package="remediation",
            play=play,
            description=__doc__ or "",
            options=add_options,
        )
    )
