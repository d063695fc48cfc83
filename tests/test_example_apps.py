"""The example applications: each builds its spec, embeds the generated runtime and plays its
scripted planner to exit 0 with a verified event log (examples/*/app.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HARNESSC = Path(sys.executable).with_name("harnessc")
EXAMPLES = {
    "remediation": ("examples/remediation/remediation.harness", "remediation"),
    "workspace-agent": ("examples/workspace-agent/workspace.harness", "workspace_agent"),
}
# Importing the app in a fresh interpreter tells whether anything of the compiler was loaded.
RUN_AND_AUDIT = """
import runpy, sys
sys.argv = sys.argv[1:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as stop:
    code = stop.code
compiler = sorted(m for m in sys.modules if m.split(".")[0] in ("lark", "jinja2", "networkx")
                  or m.startswith(("harnessc.compiler", "harnessc.dsl")))
print("compiler modules loaded:", compiler)
sys.exit(code)
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both examples built with harnessc into one folder, as a user would."""
    out = tmp_path_factory.mktemp("examples")
    for example, (spec, _) in EXAMPLES.items():
        subprocess.run(
            [str(HARNESSC), "build", spec, "-o", str(out / example), "--no-embed"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
    return out


def run_app(example: str, *args: str) -> subprocess.CompletedProcess[str]:
    app = ROOT / "examples" / example / "app.py"
    return subprocess.run(
        [sys.executable, "-c", RUN_AND_AUDIT, str(app), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_remediation_plays_to_the_end(built: Path) -> None:
    done = run_app("remediation", str(built / "remediation"), "--log", "memory://")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "compiler modules loaded: []" in out
    assert "ALLOW by remediation.engineers_create" in out
    assert "ALLOW by remediation#6" in out  # staging
    # §4.6.3: the draft is approved by the user, the deploy still asks a release manager
    draft, _, after = out.partition("u-3310 (user): “go ahead with the draft”")
    assert "ASK by drafts.draft_change" in draft
    assert "APPROVED by u-3310 (user)" in after
    deploy = after[after.index("deploy chg-242 to production") :]
    assert "ASK by remediation.release_manager" in deploy
    assert "asked of role release-manager" in deploy
    assert "NOT RUN (waiting_approval)" in deploy
    assert "the deploy is NOT authorised by the draft's approval" in deploy
    assert "REFUSED (not-an-approver): `u-3310` is not an approver" in deploy
    assert "APPROVED by u-0042 (release-manager)" in deploy
    # cross-tenant, scanner without agent access, the retired fused tool
    assert "DENY by guardrails.cross_tenant (std/risk.harness:" in out
    assert "instead      Ask an operator of the other tenant." in out
    assert (
        "mcp:scanner:tool:scan: the user has not switched on agent access for the MCP server" in out
    )
    # availability is a layer of its own: refused while agent access is off, asked once it is on
    off, _, on = out.partition("the user switches on agent access for the scanner")
    assert "REFUSED (unavailable): `mcp:scanner:tool:scan` is unavailable now" in off
    assert "failed: agent access switched on" in off
    scan = on[: on.index("## Another tenant")]
    assert "ASK by guardrails.mcp_calls" in scan and "APPROVED by u-1842 (user)" in scan
    assert 'SUCCESS {"report": "evidence/security-scan.sarif"}' in scan
    # the delegated child's id is the script's, not a random one
    assert "→ remediation.generic in session rem-1-generic" in out
    assert (
        "REFUSED (legacy-tool): `change.deploy` is a retired tool; use `production.deploy`" in out
    )
    # an in-memory log has no durable engine: the workflow section says so
    assert "skipped      durable workflows need a sqlite:/// or postgresql:// store" in out
    assert "hash chain verified" in out


def test_workspace_agent_plays_to_the_end(built: Path) -> None:
    done = run_app("workspace-agent", str(built / "workspace-agent"), "--log", "memory://")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "compiler modules loaded: []" in out
    assert "ranked: 30 available > limit 20" in out
    assert "left out" in out
    assert "cut          after #20" in out
    assert "REFUSED (legacy-tool): `read_slice` is a retired tool; use `read_open`" in out
    assert "REFUSED (legacy-tool): `edit_file` is a retired tool; use `write_file`" in out
    assert "ALLOW by mail.cached" in out and "ASK by mail.forced_sync" in out
    assert "ALLOW by github.reads" in out and "ASK by github.remote_writes" in out
    assert "DENIED by u-17 (user): not yet" in out
    assert "ASK by browser.act" in out and "ASK by browser.transfer" in out
    assert "the user has not switched on agent access for the MCP server `figma`" in out
    assert "REFUSED (unavailable): `mcp:figma:tool:get_file` is unavailable now" in out
    assert "REFUSED (delegate-task)" in out
    assert "no delegate_task on it" in out
    assert "REFUSED (skill-private): `report.render` is private" in out
    assert "not asked again: the task grant" in out
    # inside the skill: its own rule is named, its session id is the script's, and a tool off
    # its surface is refused in the skill's words
    assert "in session ws-1-spreadsheet_report" in out
    assert out.count("ALLOW by report_profile.report_steps") == 3
    assert (
        "REFUSED (not-on-surface): `mail.send` is not on the surface of the skill "
        "`reports.spreadsheet_report`" in " ".join(out.split())
    )
    assert "hash chain verified" in out


def logged(out: str) -> int:
    """The number of events the run's last line says it verified."""
    found = re.search(r"event log \(.*\): (\d+) events, hash chain verified", out)
    assert found is not None, out
    return int(found.group(1))


def test_build_then_a_second_run_appends_to_the_sqlite_log(tmp_path: Path) -> None:
    package = tmp_path / "remediation"
    first = run_app("remediation", str(package), "--build")
    assert first.returncode == 0, first.stdout + first.stderr
    assert (tmp_path / "remediation.db").is_file()  # the default store, beside the package
    second = run_app("remediation", str(package))
    assert second.returncode == 0, second.stdout + second.stderr
    assert "run 1 on this log" in first.stdout and "run 2 on this log" in second.stdout
    assert logged(second.stdout) > logged(first.stdout)
    # the remediate workflow ran on the durable engine each time, on the same SQLite file
    for done, run in ((first, "remediate-1"), (second, "remediate-2")):
        durable = done.stdout[done.stdout.index("## The remediate workflow on the durable") :]
        assert f"created      {run}, as u-1842" in durable
        assert "decided      scan.approval: approve by u-1842" in durable
        assert "decided      review: approve by u-0031" in durable
        assert "decided      deploy.approval: approve by u-0042" in durable
        assert "step         deploy   call     succeeded" in durable
        assert "each recorded once" in durable


def test_a_decision_other_than_scripted_exits_1(tmp_path: Path) -> None:
    spec = tmp_path / "spec"
    spec.mkdir()
    for source in (ROOT / "examples" / "remediation").glob("*.harness"):
        (spec / source.name).write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    text = (spec / "remediation.harness").read_text(encoding="utf-8")
    staging = 'allow production.deploy when args.environment == "staging"'
    assert staging in text
    changed = text.replace(staging, staging.replace("staging", "production"))
    (spec / "remediation.harness").write_text(changed, encoding="utf-8")
    out = tmp_path / "out"
    subprocess.run(
        [str(HARNESSC), "build", "remediation.harness", "-o", str(out), "--no-embed"],
        cwd=spec,
        check=True,
        capture_output=True,
    )
    done = run_app("remediation", str(out), "--log", "memory://")
    assert done.returncode == 1
    assert (
        "MISMATCH: turn 7: `production.deploy` was decided ASK (the default), expected ALLOW"
        in done.stderr
    )


def test_a_missing_build_says_how_to_make_one(tmp_path: Path) -> None:
    done = run_app("remediation", str(tmp_path / "nothing"), "--log", "memory://")
    assert done.returncode == 2
    assert "no generated package `remediation`" in done.stderr
    assert "--build" in done.stderr


def test_an_example_app_names_its_log_with_log_and_still_reads_store(tmp_path: Path) -> None:
    """`--log` as harnessc's commands name it; `--store`, its old name, warns and still works."""
    assert "--store" not in run_app("remediation", "--help").stdout
    done = run_app("remediation", str(tmp_path / "nothing"), "--store", "memory://")
    assert done.returncode == 2
    assert "`--store` is deprecated; use `--log`" in done.stderr
    assert "no generated package `remediation`" in done.stderr
