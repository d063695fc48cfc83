"""Availability: each unavailable tool says which condition failed, in words; MCP's six
conditions; exposure takes only available tools and traces why the others are not."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from harnessc.compiler.pipeline import check
from harnessc.runtime import Facts, Harness, McpState
from harnessc.runtime.judge.availability import MCP_CONDITIONS
from harnessc.runtime.model import Spec

from .conftest import ROOT


@pytest.fixture(scope="module")
def spec() -> Spec:
    result = check([ROOT / "examples" / "remediation" / "remediation.harness"])
    assert result.ok and result.model is not None
    return result.model


def scanner_ready(spec: Spec) -> McpState:
    discovered = {
        "scan": {**spec.tools["mcp:scanner:tool:scan"].input.to_json_schema(), "title": "Scan"},
        "create-issue": spec.tools["mcp:scanner:tool:create-issue"].input.to_json_schema(),
    }
    return McpState(
        enabled=True,
        connected=True,
        transport_valid=True,
        disclaimer_accepted=True,
        agent_access=True,
        discovered=discovered,
    )


def test_requires_failures_name_the_condition_and_what_was_read(spec: Spec) -> None:
    h = Harness(spec)
    none = h.availability(Facts())
    assert none.tools["read_open"].reason == (
        "`workspace.open == true` is false: `workspace.open` was not supplied"
    )
    assert none.tools["change.create"].reason == (
        "`connected(change_platform)` is false: the connection `change_platform` is not connected"
    )
    # a dynamic tool whose `requires` repeats its provider: one reason for the one condition
    assert none.tools["ci.run_pipeline"].failed == (
        ("running(ci_runner)", "the runtime `ci_runner` that provides it is not running"),
    )
    assert none.tools["change.create"].conditions == ("connected(change_platform)",)
    closed = h.availability({"workspace.open": False})
    assert (
        closed.tools["deps"].reason
        == "`workspace.open == true` is false: `workspace.open` is false"
    )
    ready = h.availability(
        Facts.of({"workspace.open": True}, connected={"change_platform"}, running={"ci_runner"})
    )
    assert ready.available("read_open") and ready.available("change.create")
    assert ready.available("ci.run_pipeline")
    assert not ready.available("mcp:scanner:tool:scan")


def test_an_mcp_tool_with_all_six_conditions_is_available(spec: Spec) -> None:
    result = Harness(spec).availability(Facts.of(mcp={"scanner": scanner_ready(spec)}))
    assert result.available("mcp:scanner:tool:scan")
    assert result.available("mcp:scanner:tool:create-issue")


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"enabled": False}, "the MCP server `scanner` is not enabled"),
        ({"connected": False}, "the MCP server `scanner` is not connected"),
        (
            {"transport_valid": False},
            "the transport `stdio` of the MCP server `scanner` is not valid",
        ),
        (
            {"disclaimer_accepted": False},
            "the user has not accepted the disclaimer of the MCP server `scanner`",
        ),
        ({"discovered": {}}, "the MCP server `scanner` did not discover the tool `scan`"),
        (
            {"agent_access": False},
            "the user has not switched on agent access for the MCP server `scanner`",
        ),
        (
            {"registered": frozenset({"mcp:scanner:tool:create-issue"})},
            "the projected implementation of `mcp:scanner:tool:scan` is no longer registered",
        ),
    ],
)
def test_each_of_the_six_mcp_conditions_gives_its_reason(
    spec: Spec, change: dict[str, Any], reason: str
) -> None:
    state = dataclasses.replace(scanner_ready(spec), **change)
    result = Harness(spec).availability(Facts.of(mcp={"scanner": state}))
    entry = result.tools["mcp:scanner:tool:scan"]
    assert entry.reasons == (reason,)
    assert len(entry.conditions) == 1 and entry.conditions[0] in MCP_CONDITIONS


def test_a_discovered_schema_that_differs_makes_the_tool_unavailable(spec: Spec) -> None:
    ready = scanner_ready(spec)
    changed = {
        "type": "object",
        "properties": {"target": {"type": "string"}, "deep": {"type": "boolean"}},
        "required": ["target"],
    }
    state = dataclasses.replace(ready, discovered={**ready.discovered, "scan": changed})
    result = Harness(spec).availability(Facts.of(mcp={"scanner": state}))
    assert result.tools["mcp:scanner:tool:scan"].reason == (
        "the discovered schema of `scan` differs from the declared one: extra `deep`"
    )
    assert result.available("mcp:scanner:tool:create-issue")
    missing = Harness(spec).availability(Facts())
    assert missing.tools["mcp:scanner:tool:scan"].reason == (
        "the MCP server `scanner` is not configured (no state was given for it)"
    )


def test_exposure_is_surface_and_available_and_traced(spec: Spec) -> None:
    h = Harness(spec)
    facts = Facts.of({"workspace.open": True}, mcp={"scanner": scanner_ready(spec)})
    s = h.session("planner", actor={"user": "u", "role": "engineer"}, facts=facts)
    exposure = s.expose("scan payment-service for vulnerabilities", packs=["release"])
    assert exposure.trace.rule == "all"  # at most `limit` public and available: nothing ranked
    assert "mcp:scanner:tool:scan" in exposure.tools and "read_open" in exposure.tools
    assert "terminal_session" not in exposure.tools  # hide wins over expose
    assert "read_list" not in exposure.tools and "evidence.attach" not in exposure.tools
    assert exposure.trace.unavailable["change.create"].startswith("`connected(change_platform)`")
    events = [e for e in h.store.read(s.id) if e.type == "tools.exposed"]
    assert events[0].payload["tools"] == list(exposure.tools)
    assert events[0].payload["packs"] == ["release"]


def test_a_large_surface_is_ranked_to_its_limit(spec: Spec) -> None:
    h = Harness(spec)
    facts = Facts.of(
        {"workspace.open": True},
        connected={"change_platform"},
        running={"ci_runner"},
        mcp={"scanner": scanner_ready(spec)},
    )
    child = h.session("generic", actor={"user": "u"}, facts=facts)
    assert len(child.surface) <= 12
    small = spec.surfaces["remediation.main_planner"].model_copy(update={"limit": 3})
    h.load(spec.model_copy(update={"surfaces": {**spec.surfaces, small.name: small}}))
    s = h.session("planner", actor={"user": "u"}, facts=facts)
    exposure = s.expose("deploy the change to production")
    assert exposure.trace.rule == "ranked" and len(exposure.tools) == 3
    assert "production.deploy" in exposure.tools


WHO_SPEC = """
harness who { version "1.0.0" }
fact region.open: map<bool> "Whether each region is open for deploys."
tool deploy {
  summary "Deploy a service."
  use_when "A service is ready."
  effects write
  input { service: string }
  requires region.open[env.region] and actor.role == "sre"
}
surface s { expose deploy }
policy p { default allow }
agent a { surface s; policy p }
"""


def test_requires_reads_the_sessions_actor_and_environment(tmp_path: Any) -> None:
    """`requires` may read `actor`, `task`, `resource` and `env` beside the facts (the
    validator says so): availability is judged for the session, not for nobody. Before, these
    were empty when availability was judged, so such a tool was never available."""
    path = tmp_path / "who.harness"
    path.write_text(WHO_SPEC, encoding="utf-8")
    result = check([path])
    assert result.ok and result.model is not None, result.diagnostics
    h = Harness(result.model)
    h.bind("deploy", lambda args: None)
    facts = {"region.open": {"eu": True, "us": False}}
    cases = [
        ({"role": "sre"}, {"region": "eu"}, True, ""),
        ({"role": "sre"}, {"region": "us"}, False, "`region.open[env.region]` is false"),
        ({"role": "sre"}, {"region": "ap"}, False, "`region.open[env.region]` has no entry"),
        ({"role": "dev"}, {"region": "eu"}, False, '`actor.role` is "dev"'),
    ]
    for actor, env, available, reason in cases:
        s = h.session("a", actor={"user": "u", **actor}, facts=facts, env=env)
        assert s.availability().available("deploy") is available, (actor, env)
        call = s.normalize("deploy", "c-1", {"service": "api"})
        assert (type(call).__name__ == "PendingCall") is available
        if not available:
            assert reason in call.message, call.message  # type: ignore[union-attr]
            assert list(s.expose("deploy").tools) == []
        else:
            assert list(s.expose("deploy").tools) == ["deploy"]
