"""The test suite `harnessc build` generates: it passes on both examples, covers what the spec
declares (one witness case per rule that has one, two schema cases per tool, one case per MCP
tool, agent and spec `test` block, one per workflow path, one per availability condition of a
tool), respects the availability layer (a call to an unavailable tool is refused before any
policy sees it), and fails when a rule flips or a tool loses its `requires`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from harnessc.compiler import pipeline
from harnessc.runtime import Spec
from harnessc.runtime.model.semantics import surface_tools

from .conftest import ROOT
from .test_build import HOSTILE

VENV_BIN = Path(sys.executable).parent
EXAMPLES = {
    "remediation": ROOT / "examples" / "remediation" / "remediation.harness",
    "workspace_agent": ROOT / "examples" / "workspace-agent" / "workspace.harness",
}


@dataclass
class SuiteRun:
    returncode: int
    output: str
    cases: dict[str, list[tuple[str, str]]]
    """Test function → (case id, outcome: passed, failed or skipped) per case."""

    def count(self, function: str, outcome: str | None = None) -> int:
        return sum(1 for _, o in self.cases.get(function, []) if outcome in (None, o))

    def failed(self) -> set[str]:
        return {f"{f}[{i}]" for f, cases in self.cases.items() for i, o in cases if o == "failed"}


def build(spec: Path, out: Path) -> Path:
    run = subprocess.run(
        [str(VENV_BIN / "harnessc"), "build", str(spec), "-o", str(out), "--no-embed", "-q"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return out


def run_suite(tests: Path, report: Path) -> SuiteRun:
    """pytest on a generated suite, in a process of its own, warnings as errors."""
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-W",
            "error",
            "-p",
            "no:cacheprovider",
            f"--junitxml={report}",
            str(tests),
        ],
        capture_output=True,
        text=True,
        cwd=tests.parent.parent,
    )
    cases: dict[str, list[tuple[str, str]]] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        function, _, rest = case.get("name", "").partition("[")
        outcome = "passed"
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = "failed"
        elif case.find("skipped") is not None:
            outcome = "skipped"
        cases.setdefault(function, []).append((rest.removesuffix("]"), outcome))
    return SuiteRun(run.returncode, run.stdout + run.stderr, cases)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("built")
    for spec in EXAMPLES.values():
        build(spec, out)
    return {name: out / name for name in EXAMPLES}


@pytest.fixture(scope="module")
def runs(built: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, SuiteRun]:
    reports = tmp_path_factory.mktemp("reports")
    return {
        name: run_suite(package / "tests", reports / f"{name}.xml")
        for name, package in built.items()
    }


# -- the suites pass and cover the spec -------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_generated_suite_of_each_example_passes(name: str, runs: dict[str, SuiteRun]) -> None:
    run = runs[name]
    assert run.returncode == 0, run.output
    assert not run.failed()


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_suite_covers_what_the_spec_declares(name: str, runs: dict[str, SuiteRun]) -> None:
    result = pipeline.check([EXAMPLES[name]])
    spec, analysis = result.model, result.analysis
    assert spec is not None and analysis is not None
    run = runs[name]
    rules = sum(len(p.rules) for p in spec.policies.values())
    witnessed = sum(len(w) for w in analysis.witnesses.values())
    assert run.count("test_each_rule_wins_its_witness_call") == rules
    assert run.count("test_each_rule_wins_its_witness_call", "passed") == witnessed
    own_tests = [k for k in spec.tests if k.startswith(spec.root_module + ".")]
    assert run.count("test_each_test_block_of_the_spec", "passed") == len(own_tests)
    tools = len(spec.tools)
    assert run.count("test_a_valid_input_is_accepted", "passed") == tools
    assert run.count("test_an_invalid_input_is_refused", "passed") == tools
    surfaces = {a.surface for a in spec.agents.values()}
    assert run.count("test_hidden_kinds_are_never_exposed_or_callable", "passed") == len(surfaces)
    assert run.count("test_exposure_within_the_limit_shows_all_without_ranking", "passed") == len(
        surfaces
    )
    mcp = [t for t in spec.tools.values() if t.kind == "mcp"]
    assert run.count("test_an_mcp_tool_is_available_only_while_all_six_conditions_hold") == len(mcp)
    assert run.count("test_delegation_is_one_level_deep", "passed") == len(spec.agents)
    assert run.count("test_an_approval_authorises_only_the_exact_call", "passed") >= 3
    # every public tool on an agent's surface whose `requires` is a single condition is
    # refused `unavailable` when that condition is false
    on_surfaces = {
        t
        for a in spec.agents.values()
        if a.surface
        for t in surface_tools(spec, spec.surfaces[a.surface])
    }
    guarded = [t for t in on_surfaces if spec.tools[t].requires is not None]
    refused = dict(run.cases["test_a_call_to_an_unavailable_tool_is_refused"])
    for tool_id in guarded:
        passed = [i for i, o in refused.items() if i.startswith(f"{tool_id}::") and o == "passed"]
        assert passed, tool_id


def test_each_remediation_workflow_path_is_walked(runs: dict[str, SuiteRun]) -> None:
    paths = dict(runs["remediation"].cases["test_each_workflow_path_runs_to_its_end"])
    assert paths == {
        "remediation.remediate::1:review=approve,window=holds": "passed",
        "remediation.remediate::2:review=approve,window=timeout": "passed",
        "remediation.remediate::3:review=reject": "passed",
    }


def test_the_workflow_cases_run_every_call_through_the_harness(built: dict[str, Path]) -> None:
    cases = json.loads((built["remediation"] / "tests" / "cases.json").read_text("utf-8"))
    first = next(c for c in cases["workflows"] if c["outcome"] == "completed")
    calls = [(s["step"], s["expect"]) for s in first["steps"] if s["kind"] == "call"]
    # the deploy still waits for a release manager: a workflow never bypasses policy
    assert ("deploy", "ask") in calls
    assert [s["step"] for s in first["steps"]] == [
        "scan",
        "patch",
        "review",
        "change",
        "window",
        "deploy",
        "verify",
    ]


def test_a_rule_that_wins_only_while_its_tool_is_unavailable_is_refused_first(
    built: dict[str, Path], runs: dict[str, SuiteRun]
) -> None:
    cases = json.loads((built["remediation"] / "tests" / "cases.json").read_text("utf-8"))
    witnesses = {c["id"]: c for c in cases["witnesses"]}
    # `deny kind:dynamic when not running(ci_runner)`: ci.run_pipeline is provided by ci_runner
    gone = witnesses["remediation.remediation::remediation.runner_gone"]
    assert gone["unavailable"] == {"conditions": ["running(ci_runner)"]}
    assert gone["via"] == "session" and gone["expect"]["effect"] == "deny"
    # every other witness runs with its tool available: change.create needs change_platform
    create = witnesses["remediation.remediation::remediation.engineers_create"]
    assert create["unavailable"] is None
    assert "change_platform" in create["facts"]["connected"]
    outcomes = dict(runs["remediation"].cases["test_each_rule_wins_its_witness_call"])
    assert outcomes["remediation.remediation::remediation.runner_gone"] == "passed"
    # a `test` block judges the policy alone, as `harnessc test` does
    tests = dict(runs["remediation"].cases["test_each_test_block_of_the_spec"])
    assert tests["a pipeline without its runner is refused"] == "passed"
    refused = dict(runs["remediation"].cases["test_a_call_to_an_unavailable_tool_is_refused"])
    assert refused["ci.run_pipeline::running(ci_runner)"] == "passed"
    assert refused["deps::workspace.open == true"] == "passed"


def test_an_approval_is_checked_against_every_change_of_the_call(built: dict[str, Path]) -> None:
    cases = json.loads((built["remediation"] / "tests" / "cases.json").read_text("utf-8"))
    deploy = next(
        c
        for c in cases["exact_invocation"]
        if c["id"] == "remediation.remediation::remediation.release_manager"
    )
    assert deploy["skip"] is None, deploy["skip"]
    changed = {v["what"] for v in deploy["variants"]}
    assert {
        "another tool_call_id",
        "argument `change_id` changed",
        "execution `cwd` changed",
        "execution `env` changed",
        "execution `timeout` changed",
        "execution `target` changed",
    } <= changed


# -- the suite can fail -----------------------------------------------------------------------


def mutated(built: Path, tmp_path: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    """A copy of a built package whose model `change` edits (its policy version updated)."""
    package = tmp_path / built.name
    shutil.copytree(built, package)
    model = package / "model.json"
    data = json.loads(model.read_text("utf-8"))
    change(data)
    spec = Spec.model_validate(data)
    model.write_text(spec.to_json() + "\n", encoding="utf-8")
    init = package / "__init__.py"
    text = re.sub(
        r"POLICY_VERSION = '[0-9a-f]+'",
        f"POLICY_VERSION = {spec.content_hash()!r}",
        init.read_text("utf-8"),
    )
    init.write_text(text, encoding="utf-8")
    return package


def test_a_flipped_rule_makes_the_suite_fail(built: dict[str, Path], tmp_path: Path) -> None:
    def flip(data: dict[str, Any]) -> None:
        rules = data["policies"]["remediation.remediation"]["rules"]
        deploy = next(r for r in rules if r["label"] == "remediation.release_manager")
        deploy["effect"] = "allow"  # production deploys no longer wait for a release manager
        deploy["approvers"], deploy["grant"] = [], None

    package = mutated(built["remediation"], tmp_path, flip)
    run = run_suite(package / "tests", tmp_path / "report.xml")
    assert run.returncode == 1
    failed = run.failed()
    assert (
        "test_each_rule_wins_its_witness_call[remediation.remediation::remediation.release_manager]"
        in failed
    )
    assert (
        "test_each_test_block_of_the_spec[a release manager must approve production deploys]"
        in failed
    )
    assert any(f.startswith("test_each_workflow_path_runs_to_its_end[") for f in failed)
    # everything the flip does not touch still passes
    assert run.count("test_a_valid_input_is_accepted", "failed") == 0
    assert run.count("test_delegation_is_one_level_deep", "failed") == 0


def test_a_dropped_requires_makes_the_suite_fail(built: dict[str, Path], tmp_path: Path) -> None:
    def drop(data: dict[str, Any]) -> None:
        # production deploys no longer need the change platform: "visible" became "may run"
        data["tools"]["production.deploy"]["requires"] = None

    package = mutated(built["remediation"], tmp_path, drop)
    run = run_suite(package / "tests", tmp_path / "report.xml")
    assert run.returncode == 1
    assert run.failed() == {
        "test_a_call_to_an_unavailable_tool_is_refused"
        "[production.deploy::connected(change_platform)]"
    }


# -- the suite is code of its own, never the spec's -------------------------------------------


def test_the_test_modules_are_the_same_for_every_spec(
    built: dict[str, Path], tmp_path: Path
) -> None:
    spec = tmp_path / "hostile.harness"
    spec.write_text(HOSTILE, encoding="utf-8")
    hostile = build(spec, tmp_path / "out") / "hostile"
    modules = sorted(p.name for p in (hostile / "tests").glob("*.py"))
    assert modules == [
        "__init__.py",
        "runner.py",
        "test_policies.py",
        "test_schemas.py",
        "test_surfaces.py",
        "test_workflows.py",
    ]
    for name in modules:
        bodies = {
            (package / "tests" / name).read_text("utf-8").split("\n", 1)[1]
            for package in (*built.values(), hostile)
        }
        assert len(bodies) == 1, name  # spec text reaches the suite only as cases.json data
    run = run_suite(hostile / "tests", tmp_path / "hostile.xml")
    assert run.returncode == 0, run.output
    assert "import os" not in "".join((hostile / "tests" / n).read_text("utf-8") for n in modules)
    cases = json.loads((hostile / "tests" / "cases.json").read_text("utf-8"))
    assert any("'); import os #" in json.dumps(c) for c in cases["witnesses"])


def test_a_rule_without_a_witness_is_listed_as_skipped_with_the_reason(tmp_path: Path) -> None:
    spec = tmp_path / "dead.harness"
    spec.write_text(
        'harness dead { version "1" }\n'
        "connection c\n"
        'tool t { summary "t" effects read input { n: int } requires connected(c) }\n'
        "surface s { expose t }\n"
        "policy p {\n"
        "  default deny\n"
        '  shadowed: deny t when args.n > 3 and args.n < 2 { reason "never" }\n'
        "  first: allow t\n"
        "}\n"
        "agent a { surface s\n policy p }\n",
        encoding="utf-8",
    )
    package = build(spec, tmp_path / "out") / "dead"
    run = run_suite(package / "tests", tmp_path / "dead.xml")
    assert run.returncode == 0, run.output
    witnesses = dict(run.cases["test_each_rule_wins_its_witness_call"])
    assert witnesses == {"dead.p::p.first": "passed", "dead.p::p.shadowed": "skipped"}
    # the skipped rule (first: it has no call at all) does not stop the availability cases
    refused = dict(run.cases["test_a_call_to_an_unavailable_tool_is_refused"])
    assert refused == {"t::connected(c)": "passed"}
    cases = json.loads((package / "tests" / "cases.json").read_text("utf-8"))
    skipped = next(c for c in cases["witnesses"] if c["rule"] == "p.shadowed")
    assert skipped["skip"] == "rule `p.shadowed` matches no call: its condition can never hold"
