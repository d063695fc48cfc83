"""`harnessc diff` from the command line, on real git repositories, and the GitHub Actions
example of docs/review.md (its YAML parses; the command line it runs is one the CLI accepts)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from harnessc.compiler.cli import build_parser, main

from .conftest import ROOT

SPEC = """harness shop { version "1" }
tool refund {
  summary "Refund an order."
  effects external
  risk high
  input { order: string, amount: int }
}
policy main {
  default deny
  ask refund when args.amount > 100 {
    approver role "manager"
    grant once ttl 10m
  }
  allow refund when args.amount <= 100
}
agent clerk { policy main }
"""
WIDER = SPEC.replace("args.amount > 100", "args.amount > 500").replace(
    "args.amount <= 100", "args.amount <= 500"
)
NARROWER = SPEC.replace(
    "allow refund when args.amount <= 100", 'deny refund when args.amount <= 100 { reason "no" }'
)


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=repo,
        capture_output=True,
        check=True,
    )


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository with one commit on `main` holding `shop.harness`; the cwd is its root."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "shop.harness").write_text(SPEC)
    git(root, "add", ".")
    git(root, "commit", "-qm", "one")
    monkeypatch.chdir(root)
    return root


def commit(repo: Path, name: str, text: str, message: str) -> None:
    (repo / name).write_text(text)
    git(repo, "add", ".")
    git(repo, "commit", "-qm", message)


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["diff", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_range_of_commits_that_widens_exits_1_with_the_witness(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git(repo, "checkout", "-q", "-b", "change")
    commit(repo, "shop.harness", WIDER, "raise the limit")
    code, out, _ = run(["main..HEAD", "shop.harness"], capsys)
    assert code == 1
    assert "harnessc diff: main → HEAD" in out
    assert "WIDENED ask→allow" in out
    witness = re.search(r"e\.g\. refund\(order: \"[^\"]*\", amount: (\d+)\)", out)
    assert witness is not None and 100 < int(witness.group(1)) <= 500
    assert "by `main#1` (shop.harness:10)" in out  # the old winning rule
    assert "by `main#2` (shop.harness:14)" in out  # and the new one


def test_fail_on_decides_the_status_of_a_narrowing_change(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "shop.harness").write_text(NARROWER)  # the working tree, against main
    assert run(["main", "shop.harness"], capsys)[0] == 0
    code, out, _ = run(["main", "shop.harness", "--fail-on", "changed"], capsys)
    assert code == 1 and "allow→deny" in out
    assert run(["main", "shop.harness", "--fail-on", "never"], capsys)[0] == 0


def test_nothing_changed_exits_0_under_every_fail_on(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for fail_on in ("widened", "changed", "never"):
        code, out, _ = run(["HEAD", "shop.harness", "--fail-on", fail_on], capsys)
        assert code == 0
    assert "no call is decided differently and nothing else changed" in out


def test_a_spec_added_by_the_change_is_compared_against_an_empty_spec(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    commit(repo, "desk.harness", SPEC.replace("shop", "desk").replace("refund", "rebate"), "add")
    code, out, _ = run(["--format", "json", "HEAD~1..HEAD", "."], capsys)
    report = json.loads(out)
    by_spec = {s["spec"]: s for s in report["specs"]}
    assert by_spec["desk.harness"]["status"] == "added"
    assert by_spec["shop.harness"]["regions"] == []
    added = by_spec["desk.harness"]
    assert {r["change"] for r in added["regions"]} == {"deny→allow", "deny→ask"}
    assert {c["kind"] for c in added["changes"]} == {"tool-added"}
    assert code == 1  # what the new spec allows was refused before


def test_a_side_that_does_not_compile_prints_its_diagnostics_and_exits_2(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "shop.harness").write_text(SPEC.replace("allow refund", "allow refnud"))
    code, out, err = run(["main", "shop.harness"], capsys)
    assert code == 2 and out == ""
    assert err.startswith("harnessc diff: the new side (the working tree) does not compile\n")
    assert "error[H201]" in err and "refnud" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope..HEAD", "shop.harness"], "unknown revision `nope`"),
        (["HEAD", "gone.harness"], "no `gone.harness` at `HEAD` nor in the working tree"),
        (["HEAD"], "name the specs to compare at `HEAD`"),
    ],
)
def test_usage_errors_exit_2_with_a_message(
    repo: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, out, err = run(args, capsys)
    assert code == 2 and out == ""
    assert err == f"harnessc: {message}\n" or message in err


def test_outside_a_repository_a_revision_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run(["main", "spec.harness"], capsys)
    assert code == 2 and "not inside a git repository" in err


def test_out_writes_the_report_to_a_file(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "shop.harness").write_text(WIDER)
    target = tmp_path / "diff.md"
    code, out, _ = run(["--format", "markdown", "-o", str(target), "HEAD", "shop.harness"], capsys)
    assert code == 1 and out == ""
    text = target.read_text(encoding="utf-8")
    assert text.startswith("## harnessc diff: `HEAD` → `the working tree`")
    assert "### Widening: now allowed" in text


# ---------------------------------------------------------------------------------------------
# The GitHub Actions example of docs/review.md


def _workflow() -> dict:
    text = (ROOT / "docs" / "review.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    assert len(blocks) == 1
    return yaml.safe_load(blocks[0])


def test_the_docs_workflow_parses_and_runs_a_command_the_cli_accepts() -> None:
    workflow = _workflow()
    assert "pull_request" in workflow[True]  # YAML 1.1 reads the key `on` as true
    steps = workflow["jobs"]["diff"]["steps"]
    lines = [
        line.strip()
        for step in steps
        for line in str(step.get("run", "")).splitlines()
        if line.strip().startswith("harnessc diff")
    ]
    assert len(lines) == 1
    command = lines[0].replace("${{ github.base_ref }}", "main").replace("$specs", "a.harness")
    argv = shlex.split(command)[1:]
    args = build_parser().parse_args(argv)
    assert args.command == "diff" and args.format == "markdown" and args.out == "policy-diff.md"
    assert args.targets == ["origin/main..HEAD", "a.harness"]
    # the steps after it read the status the command returns: 1 means widened, 3 a region
    # the runtime did not confirm (to review too), 2 an error that fails the job
    conditions = [step.get("if", "") for step in steps]
    assert any(
        "steps.diff.outputs.status == '1'" in c and "steps.diff.outputs.status == '3'" in c
        for c in conditions
    )
    assert any('if [ "$status" -eq 2 ]; then exit 2; fi' in str(s.get("run")) for s in steps)


def test_a_rewrite_that_decides_every_call_as_before_is_a_note_not_a_change(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "shop.harness").write_text(SPEC.replace("args.amount <= 100", "args.amount < 101"))
    code, out, _ = run(["HEAD", "shop.harness", "--fail-on", "changed"], capsys)
    assert code == 0
    assert "note: policy `shop.main` is rewritten and decides every call as before" in out


def test_two_files_of_different_names_pair_their_policies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # without a header a spec's root module is its file's stem: `before` and `after` here
    monkeypatch.chdir(tmp_path)
    headless = SPEC.split("\n", 1)[1]
    (tmp_path / "before.harness").write_text(headless)
    (tmp_path / "after.harness").write_text(WIDER.split("\n", 1)[1])
    code, out, _ = run(["--format", "json", "before.harness", "after.harness"], capsys)
    report = json.loads(out)
    [spec] = report["specs"]
    assert code == 1
    assert [(r["subject"], r["change"]) for r in spec["regions"]] == [
        ("policy after.main", "ask→allow")
    ]
    assert spec["changes"] == [] and spec["policies_added"] == []
    assert report["notes"] == [
        "`after.harness`: the root module is `before` on the old side and `after` on the new "
        "one: its names are paired as the new side's"
    ]


def test_a_witness_reads_the_same_solved_or_from_the_analysis_cache(
    repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("HARNESSC_CACHE_DIR", str(tmp_path / "empty-cache"))
    (repo / "shop.harness").write_text(WIDER)
    solved = run(["HEAD", "shop.harness"], capsys)
    cached = run(["HEAD", "shop.harness"], capsys)
    assert solved == cached
    assert 'e.g. refund(order: "' in solved[1]  # arguments in the schema's order


def test_a_spec_removed_by_the_change_narrows_and_passes(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git(repo, "rm", "-q", "shop.harness")
    git(repo, "commit", "-qm", "remove the shop")
    code, out, _ = run(["--format", "json", "HEAD~1..HEAD", "shop.harness"], capsys)
    [spec] = json.loads(out)["specs"]
    assert spec["status"] == "removed" and code == 0
    assert {r["change"] for r in spec["regions"]} == {"allow→deny", "ask→deny"}
    assert all(r["new"]["refused"] for r in spec["regions"])
    assert [c["kind"] for c in spec["changes"]] == ["tool-removed"]
