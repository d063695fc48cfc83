"""`harnessc test`: the spec's own tests run against the compiled policy, failures explained."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from harnessc.compiler.cli import main

from .conftest import ROOT

SPEC = """
harness demo { version "1.0.0" }

fact ws.root: path

tool files.read {
  summary "Read a file."
  effects read
  input { path: path }
}

tool deploy {
  summary "Deploy a change."
  effects external
  risk high
  input { environment: enum("staging", "production") }
}

risk_table table {
  low allow
  medium allow
  high ask { approver role "owner"; reason "high risk" }
  critical deny { reason "critical" }
}

policy main {
  default table
  release: ask deploy when args.environment == "production" {
    approver role "release-manager"
    reason "Production deploys need a release manager."
  }
  staging: allow deploy when args.environment == "staging"
  triage: deny * when task has stage and task.stage == "triage" {
    reason "Nothing leaves the workspace during triage."
  }
  frozen: deny deploy when env.freeze == true { reason "frozen" }
  reads: allow files.read when args.path within ws.root
}

agent planner { policy main }
"""


def write(tmp_path: Path, tests: str, spec: str = SPEC) -> Path:
    path = tmp_path / "demo.harness"
    path.write_text(textwrap.dedent(spec) + textwrap.dedent(tests), encoding="utf-8")
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["test", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_remediation_example_passes_its_own_tests(
    in_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "examples/remediation/remediation.harness")
    assert code == 0, out
    lines = out.splitlines()
    assert lines[-1] == "14 passed, 0 failed"
    assert (
        "PASSED examples/remediation/remediation.harness::"
        "a release manager must approve production deploys"
    ) in lines
    assert not any(line.startswith("FAILED") for line in lines)


def test_passing_tests_one_line_each_and_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path,
        """
        test "production asks a release manager" {
          call deploy(environment: "production")
          expect ask approver role "release-manager" rule release
        }
        test "staging runs" {
          agent planner
          call deploy(environment: "staging")
          execution { cwd: "/w", timeout: 15m }
          expect allow rule main.staging
        }
        test "reads inside the workspace run" {
          policy main
          call files.read(path: "/w/a/../b")
          facts { ws.root: "/w" }
          expect allow rule reads
        }
        test "triage is local" {
          call deploy(environment: "staging")
          task { id: "t-7", stage: "triage" }
          expect deny reason "Nothing leaves the workspace during triage."
        }
        """,
    )
    code, out, _ = run(capsys, str(path))
    assert code == 0, out
    lines = out.splitlines()
    assert [line.split("::")[1] for line in lines[:4]] == [
        "production asks a release manager",
        "staging runs",
        "reads inside the workspace run",
        "triage is local",
    ]
    assert all(line.startswith("PASSED ") for line in lines[:4])
    assert lines[-1] == "4 passed, 0 failed"


def test_a_failure_lists_the_matching_rules_and_why_the_winner_won(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path,
        """
        test "staging during triage" {
          call deploy(environment: "staging")
          task { stage: "triage" }
          expect allow rule staging
        }
        """,
    )
    code, out, _ = run(capsys, str(path))
    assert code == 1
    text = out.replace(str(tmp_path), "DIR")
    assert "FAILED DIR/demo.harness::staging during triage" in text
    assert "- expected: allow rule staging" in text
    assert (
        '+ got:      deny rule main.triage reason "Nothing leaves the workspace during triage."'
        in text
    )
    assert "effect: expected allow, got deny" in text
    assert "rule: expected staging, got main.triage" in text
    matching = [line.strip() for line in text.splitlines() if "DIR/demo.harness:" in line]
    lines = textwrap.dedent(SPEC).splitlines()
    staging = 1 + next(i for i, line in enumerate(lines) if line.startswith("  staging:"))
    triage = 1 + next(i for i, line in enumerate(lines) if line.startswith("  triage:"))
    assert matching[-2:] == [
        f"main.staging  allow  DIR/demo.harness:{staging}",
        f"→ main.triage   deny   DIR/demo.harness:{triage}",
    ]
    assert "winner: main.triage (deny): deny beats allow" in text
    assert text.splitlines()[-1] == "0 passed, 1 failed"


def test_a_failure_names_the_earlier_rule_or_the_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path,
        """
        test "frozen during triage" {
          call deploy(environment: "staging")
          task { stage: "triage" }
          env { freeze: true }
          expect deny rule frozen
        }
        test "production without rules" {
          call files.read(path: "/etc/passwd")
          facts { ws.root: "/w" }
          expect deny
        }
        """,
    )
    code, out, _ = run(capsys, str(path))
    assert code == 1
    assert (
        "winner: main.triage (deny): deny beats allow; it is the first of 2 matching deny rules"
        in out
    )
    assert "no rule matched" in out
    assert "default `demo.table` maps this call's risk to allow" in out
    assert out.splitlines()[-1] == "0 passed, 2 failed"


def test_select_by_name_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(
        tmp_path,
        """
        test "production asks" {
          call deploy(environment: "production")
          expect ask
        }
        test "reads outside the workspace fall to the risk table" {
          call files.read(path: "/etc/x")
          facts { ws.root: "/w" }
          expect allow
        }
        """,
    )
    code, out, _ = run(capsys, str(path), "-k", "OUTSIDE", "--format", "json")
    assert code == 0
    report = json.loads(out)
    assert (report["passed"], report["failed"]) == (1, 0)
    (test,) = report["tests"]
    assert test["name"] == "reads outside the workspace fall to the risk table"
    assert test["got"]["default_used"] is True
    code, _, err = run(capsys, str(path), "-k", "nothing-like-this")
    assert code == 1 and "no test matches `nothing-like-this`" in err


def test_a_test_without_a_policy_is_a_spec_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path,
        """
        policy other { default deny }
        test "which policy?" {
          call deploy(environment: "production")
          expect ask
        }
        """,
    )
    code, out, err = run(capsys, str(path), "--format", "plain")
    assert code == 1
    assert "error[H601]: test `which policy?` does not say which policy judges its call" in err
    assert "help: add `policy NAME` to the test; this module declares `main`, `other`" in err
    assert "passed" not in out


def test_usage_and_io_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, str(ROOT / "no-such-file.harness"))
    assert code == 2 and "H001" in err


def test_a_test_without_expect_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(
        tmp_path,
        """
        test "pins nothing" {
          call deploy(environment: "production")
        }
        """,
    )
    code, out, _ = run(capsys, str(path))
    assert code == 1
    assert f"FAILED {path}::pins nothing" in out
    assert "the test states no expected decision" in out
    assert out.splitlines()[-1] == "0 passed, 1 failed"


CONNECTED_SPEC = """\
connection mailbox
runtime calendar_app
tool mail_query {
  summary "Query mail."
  effects read
  input { query: string, force_sync: bool default false }
  requires connected(mailbox)
}
policy p {
  default deny
  cached: allow mail_query when args.force_sync == false and running(calendar_app)
  sync: ask mail_query when args.force_sync { approver role "user" }
}
test "cached mail runs while the app runs" {
  call mail_query(query: "x")
  facts { calendar_app: true, mailbox: true }
  expect allow rule p.cached
}
test "a stopped app denies" {
  call mail_query(query: "x")
  expect deny
}
"""


def test_connections_runtimes_and_defaults_in_spec_tests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`facts { runtime: true }` starts a runtime, and arguments get their schema defaults."""
    path = tmp_path / "connected.harness"
    path.write_text(CONNECTED_SPEC, encoding="utf-8")
    code, out, err = run(capsys, str(path))
    assert code == 0, out + err
    assert out.splitlines()[-1] == "2 passed, 0 failed"


def test_a_test_judges_the_policy_alone_even_for_an_unavailable_tool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a session would refuse these calls `unavailable` before any policy sees them; a `test`
    # block pins the policy's decision (language.md §13), and so does the generated suite
    path = write(
        tmp_path,
        """
        connection platform
        runtime runner
        tool pipeline {
          summary "Run a pipeline."
          effects external
          dynamic provided_by runner
          input { ref: string }
        }
        tool ship {
          summary "Ship a change."
          effects write
          requires connected(platform)
          input { ref: string }
        }
        policy gated {
          default deny
          runner_gone: deny kind:dynamic when not running(runner) { reason "no runner" }
          allow pipeline, ship
        }
        test "a pipeline without its runner is denied" {
          policy gated
          call pipeline(ref: "main")
          expect deny rule runner_gone
        }
        test "shipping is allowed whatever the platform" {
          policy gated
          call ship(ref: "main")
          expect allow
        }
        """,
    )
    code, out, _ = run(capsys, str(path))
    assert code == 0, out
    assert out.splitlines()[-1] == "2 passed, 0 failed"
