"""The delegation ceiling (compiler/analysis/ceiling.py, lint L024): a delegation target may
not decide calls of its surface's tools less strictly than its planner's policy."""

from __future__ import annotations

import textwrap
from pathlib import Path

from harnessc.compiler.analysis.cache import AnalysisCache
from harnessc.compiler.analysis.ceiling import delegation_ceiling
from harnessc.compiler.analysis.compare import runtime_call
from harnessc.compiler.pipeline import check, lint
from harnessc.runtime.judge.policy import PolicyEngine

from .conftest import ROOT

SPEC = """
tool deploy {
  summary "Deploy."
  use_when "Shipping."
  effects external
  risk medium
  input {
    service: string
    environment: enum("staging", "production")
  }
}
tool notes.read {
  summary "Read notes."
  use_when "Reading."
  effects read
  input { path: path }
}
surface all_tools {
  expose deploy, notes.read
}
surface reading {
  expose notes.read
}
policy release {
  default deny
  ask deploy when args.environment == "production" { approver role "release-manager" }
  allow deploy when args.environment == "staging"
  allow notes.read when args.path within "/notes"
}
policy child {
  default deny
  CHILD_RULES
}
agent planner {
  surface all_tools
  policy release
  delegate worker
}
agent worker {
  surface SURFACE
  policy child
}
"""


def spec_of(tmp_path: Path, rules: str, surface: str = "all_tools") -> Path:
    path = tmp_path / "spec.harness"
    text = SPEC.replace("CHILD_RULES", rules).replace("SURFACE", surface)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def breaches(path: Path) -> list[tuple[str, str, str | None]]:
    result = check([path])
    assert result.ok and result.model is not None, [d.message for d in result.diagnostics]
    spec = result.model
    found = delegation_ceiling(spec, cache=AnalysisCache(on_disk=False))
    engine = PolicyEngine(spec)
    for b in found:
        # the witness, decided by the runtime: the child's decision is weaker than the planner's
        call = runtime_call(spec, b.region.witness)
        planner = engine.decide("release", call)
        child = engine.decide("child", call)
        order = {"allow": 0, "ask": 1, "deny": 2}
        assert order[child.effect] < order[planner.effect]
        assert b.region.verified
    return sorted((b.region.tool, b.region.change, b.region.new.rule) for b in found)


def test_a_child_within_its_planner_has_no_breach(tmp_path: Path) -> None:
    rules = (
        'allow deploy when args.environment == "staging"\n'
        '  allow notes.read when args.path within "/notes/a"'
    )
    assert breaches(spec_of(tmp_path, rules)) == []


def test_a_child_allowing_what_the_planner_asks_about(tmp_path: Path) -> None:
    assert breaches(spec_of(tmp_path, "allow deploy")) == [("deploy", "ask→allow", "child#1")]


def test_a_child_asked_where_the_planner_is_denied(tmp_path: Path) -> None:
    rules = 'ask notes.read { approver role "owner" }'
    assert breaches(spec_of(tmp_path, rules)) == [("notes.read", "deny→ask", "child#1")]


def test_only_the_childs_surface_is_bounded(tmp_path: Path) -> None:
    # `deploy` is allowed by the child's policy, but the child cannot call it: not on its surface
    path = spec_of(
        tmp_path, 'allow deploy\n  allow notes.read when args.path within "/notes"', "reading"
    )
    assert breaches(path) == []


def test_the_lint_reports_each_widening_rule_once_and_a_comment_grants_it(tmp_path: Path) -> None:
    rules = "allow deploy\n  allow notes.read  # harnessc: ignore[L024] the worker reads every note"
    result = lint([spec_of(tmp_path, rules)])
    found = [d for d in result.diagnostics if d.code == "L024"]
    assert len(found) == 1
    assert "rule `child#1`" in found[0].message
    assert any("the call `deploy(" in n for n in found[0].notes)
    assert [s.diagnostic.code for s in result.suppressed] == ["L024"]


def test_the_same_policy_is_within_the_ceiling_by_construction(tmp_path: Path) -> None:
    result = check([ROOT / "examples/remediation/remediation.harness"])
    assert result.model is not None
    planner = result.model.agents["remediation.planner"]
    assert planner.delegates and all(
        result.model.agents[c].policy == planner.policy for c in planner.delegates
    )
    assert delegation_ceiling(result.model) == []
