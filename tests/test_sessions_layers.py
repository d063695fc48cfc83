"""Sessions keep the five layers apart: an unavailable tool never runs (refused at normalize and
again before invoke), delegated and skill sessions take deterministic ids, and a skill's
decisions compose its profile with its parent's policy (language.md §1, §9, §10)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harnessc.compiler.pipeline import check
from harnessc.runtime import AvailabilityRefusal, Facts, Harness, McpState, Refusal, SQLiteStore
from harnessc.runtime.model import Spec

from .test_harness import ENGINEER, FACTS, pending

SCAN = "mcp:scanner:tool:scan"
USER = {"user": "u-1842", "role": "user"}


def scanner(spec: Spec, *, agent_access: bool) -> McpState:
    """The scanner's server: everything holds but (perhaps) agent access."""
    return McpState(
        enabled=True,
        connected=True,
        transport_valid=True,
        disclaimer_accepted=True,
        agent_access=agent_access,
        discovered={"scan": spec.tools[SCAN].input.to_json_schema()},
    )


def facts(spec: Spec, *, agent_access: bool, running: tuple[str, ...] = ()) -> Facts:
    return Facts.of(
        FACTS, running=running, mcp={"scanner": scanner(spec, agent_access=agent_access)}
    )


def events(h: Harness, stream: str, type_: str) -> list[dict[str, Any]]:
    return [e.payload for e in h.store.read(stream) if e.type == type_]


@pytest.fixture(scope="module")
def spec() -> Spec:
    from .test_harness import build

    return build()


def session(h: Harness, spec: Spec, *, agent_access: bool, **kw: Any) -> Any:
    return h.session(
        "planner",
        actor=ENGINEER,
        task="task-7",
        facts=facts(spec, agent_access=agent_access, running=kw.pop("running", ())),
        resource={"tenant": "acme"},
        **kw,
    )


# ---------------------------------------------------------------------------------------------
# Availability is a layer of its own


def test_a_call_to_an_unavailable_tool_is_refused_at_normalize_with_its_conditions(
    spec: Spec,
) -> None:
    h = Harness(spec)
    ran: list[Any] = []
    h.bind(SCAN, lambda args: ran.append(args) or {"report": "r"})
    s = session(h, spec, agent_access=False)
    refused = s.normalize(SCAN, "call-1", {"target": "payment-service"})
    assert isinstance(refused, AvailabilityRefusal) and refused.code == "unavailable"
    assert refused.message == (
        "`mcp:scanner:tool:scan` is unavailable now: the user has not switched on agent access "
        "for the MCP server `scanner`"
    )
    assert refused.conditions == (
        (
            "agent access switched on",
            "the user has not switched on agent access for the MCP server `scanner`",
        ),
    )
    recorded = events(h, s.id, "call.refused")
    assert [(e["code"], e["tool_call_id"]) for e in recorded] == [("unavailable", "call-1")]
    assert recorded[0]["conditions"][0]["condition"] == "agent access switched on"
    assert events(h, s.id, "decision") == []  # never reached policy
    assert ran == []


def test_a_dynamic_tool_whose_runtime_is_down_is_refused(spec: Spec) -> None:
    h = Harness(spec)
    s = session(h, spec, agent_access=True)
    refused = s.normalize("run_ci", "call-1", {"ref": "fix/cve"})
    assert isinstance(refused, AvailabilityRefusal) and refused.code == "unavailable"
    assert refused.tool == "run_ci"
    assert [c for c, _ in refused.conditions] == ["running(ci_runner)"]
    up = session(h, spec, agent_access=True, running=("ci_runner",))
    assert (
        pending(up.normalize("run_ci", "call-1", {"ref": "fix/cve"})).tool_id == "ci.run_pipeline"
    )


def test_availability_is_checked_again_before_invoke_and_the_grant_waits(spec: Spec) -> None:
    h = Harness(spec)
    ran: list[Any] = []

    @h.implement(SCAN)
    def scan(args: Any) -> dict[str, Any]:
        ran.append(args)
        return {"report": "evidence/scan.sarif"}

    s = session(h, spec, agent_access=True)
    call = pending(s.normalize(SCAN, "call-1", {"target": "payment-service"}))
    assert s.decide(call).effect == "ask"
    outcome = h.approve(s.request_approval(call).request_id, by=USER)
    assert outcome.grant is not None
    # the user switches agent access off between the approval and the run
    h.resume(s.id, facts=facts(spec, agent_access=False))
    refused = s.invoke(call)
    assert not refused.ran and refused.error_category == "unavailable"
    assert "agent access" in (refused.error or "") and refused.retryable
    assert ran == []
    recorded = events(h, s.id, "call.refused")
    assert [(e["code"], e["stage"]) for e in recorded] == [("unavailable", "invoke")]
    assert recorded[0]["action_id"] == refused.action_id
    assert events(h, s.id, "grant.used") == []  # the once grant is not spent
    # on again: the same approved call runs, once
    h.resume(s.id, facts=facts(spec, agent_access=True))
    result = s.invoke(call)
    assert result.ran and result.ok and ran == [{"target": "payment-service"}]
    assert [e["grant_id"] for e in events(h, s.id, "grant.used")] == [outcome.grant.grant_id]


def test_after_a_restart_the_facts_given_on_resume_decide_availability(
    spec: Spec, tmp_path: Path
) -> None:
    db = tmp_path / "events.db"
    first = Harness(spec, store=SQLiteStore(db))
    s = session(first, spec, agent_access=True, session_id="ses-scan")
    call = pending(s.normalize(SCAN, "call-1", {"target": "payment-service"}))
    first.approve(s.request_approval(call).request_id, by=USER)

    again = Harness(spec, store=SQLiteStore(db))
    again.bind(SCAN, lambda args: {"report": "r"})
    resumed = again.resume("ses-scan", facts=facts(spec, agent_access=False))
    restored = resumed.call("call-1")
    assert restored is not None
    result = resumed.invoke(restored)
    assert not result.ran and result.error_category == "unavailable"


# ---------------------------------------------------------------------------------------------
# Deterministic ids for delegated and skill sessions


def test_delegate_and_skill_take_a_session_id(spec: Spec) -> None:
    h = Harness(spec)
    s = session(h, spec, agent_access=True, session_id="t7-planner")
    child = s.delegate("Write and test a patch.", agent="generic", session_id="t7-generic")
    assert not isinstance(child, Refusal) and child.id == "t7-generic"
    report = s.skill("remediation_report", session_id="t7-report")
    assert not isinstance(report, Refusal) and report.id == "t7-report"
    started = events(h, "t7-report", "session.started")
    assert started[0]["parent"] == "t7-planner" and started[0]["skill"].endswith("report")
    assert [e["child"] for e in events(h, "t7-planner", "delegation.started")] == ["t7-generic"]
    assert h.resume("t7-generic") is child


# ---------------------------------------------------------------------------------------------
# A skill's profile composed with its parent's policy

COMPOSE = """
harness t { version "1.0.0" }
tool pub { summary "p"; effects read; input { x: string } }
risk_table table {
  low allow
  medium allow
  high ask { approver role "owner"; grant once ttl 30m }
  critical deny { reason "never" }
}
policy parent {
  default table
  parent_reads: allow vault.list
  parent_guard: ask vault.send { approver role "release-manager"; grant once ttl 10m; reason "r" }
  parent_no: deny vault.burn { reason "the parent says no" }
}
policy profile {
  default deny
  steps: allow vault.peek, vault.poke
  allow vault.list
  profile_send: ask vault.send {
    approver role "user"; self_approval allow; grant once ttl 10m; reason "s"
  }
  profile_no: deny vault.burn { reason "the profile says no" }
}
skill vault {
  profile profile
  private tool vault.peek { summary "peek"; effects read; input { n: int? } }
  private tool vault.poke { summary "poke"; effects write; risk medium; input { n: int? } }
  private tool vault.list { summary "list"; effects read; input { n: int? } }
  private tool vault.send { summary "send"; effects external; risk high; input { n: int? } }
  private tool vault.burn { summary "burn"; effects write; input { n: int? } }
}
surface s { expose pub }
agent a { surface s; policy parent; skills vault }
"""


@pytest.fixture(scope="module")
def composed(tmp_path_factory: pytest.TempPathFactory) -> Spec:
    folder = tmp_path_factory.mktemp("compose")
    (folder / "t.harness").write_text(COMPOSE, encoding="utf-8")
    result = check([folder / "t.harness"])
    assert result.ok and result.model is not None, [d.message for d in result.diagnostics]
    return result.model


def vault(h: Harness) -> Any:
    s = h.session("a", actor={"user": "u-1", "role": "engineer"}, task="t-1", session_id="ses-a")
    opened = s.skill("vault", session_id="ses-vault")
    assert not isinstance(opened, Refusal)
    return opened


@pytest.mark.parametrize(
    ("tool", "effect", "rule"),
    [
        # the parent's risk table allows, the skill's rule allows: the skill's rule is named
        ("vault.peek", "allow", "profile.steps"),
        ("vault.poke", "allow", "profile.steps"),
        # both have a rule: the skill's profile is the more specific
        ("vault.list", "allow", "profile#2"),
        ("vault.burn", "deny", "profile.profile_no"),
    ],
)
def test_on_a_tie_a_skill_decision_names_the_most_specific_rule(
    composed: Spec, tool: str, effect: str, rule: str
) -> None:
    s = vault(Harness(composed))
    decision = s.decide(pending(s.normalize(tool, "c-1", {})))
    assert (decision.effect, decision.rule, decision.default_used) == (effect, rule, False)


def test_when_parent_and_skill_both_ask_each_needs_its_own_approval(composed: Spec) -> None:
    h = Harness(composed)
    ran: list[Any] = []
    h.bind("vault.send", lambda args: ran.append(args) or {})
    s = vault(h)
    call = pending(s.normalize("vault.send", "c-1", {}))
    first = s.decide(call)
    assert (first.effect, first.rule) == ("ask", "profile.profile_send")  # the skill's first
    h.approve(s.request_approval(call).request_id, by={"user": "u-1", "role": "user"})
    # the user's approval does not answer the parent's ASK: a release manager still must
    second = s.decide(call)
    assert (second.effect, second.rule) == ("ask", "parent.parent_guard")
    waiting = s.invoke(call)
    assert not waiting.ran and waiting.error_category == "waiting_approval" and ran == []
    h.approve(s.request_approval(call).request_id, by={"user": "u-9", "role": "release-manager"})
    result = s.invoke(call)
    assert result.ran and result.ok and len(ran) == 1
    assert len(events(h, "ses-vault", "grant.used")) == 2  # both once grants are spent


def test_not_on_surface_in_a_skill_session_names_the_skill(composed: Spec) -> None:
    s = vault(Harness(composed))
    refused = s.normalize("pub", "c-1", {"x": "y"})
    assert isinstance(refused, Refusal) and refused.code == "not-on-surface"
    assert refused.message.startswith("`pub` is not on the surface of the skill `t.vault`")
    assert "the agent" not in refused.message
