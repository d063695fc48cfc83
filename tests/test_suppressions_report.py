"""Silenced findings in the reports: SARIF lists them with `suppressions` (inline comment:
`inSource`, lint configuration: `external`); the other formats leave them out, and `-q` prints
nothing when silenced findings are all there is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harnessc.compiler.cli import main
from harnessc.compiler.config import LintConfig
from harnessc.compiler.lints import split_findings
from harnessc.compiler.pipeline import check, lint
from harnessc.dsl.diagnostics import SuppressionKind

from .test_lint import RULES

ALLOW_ALL = '  allow * when actor.role == "engineer"\n'
SILENCED = RULES["L012"].bad.replace(
    ALLOW_ALL,
    '  allow * when actor.role == "engineer"  # harnessc: ignore[L012] every tool is read-only\n',
)
SUPPRESSION_KEYS = {"kind", "status", "justification", "location", "guid", "properties"}


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "silenced.harness").write_text(SILENCED, encoding="utf-8")
    (tmp_path / "clean.harness").write_text(RULES["L012"].good, encoding="utf-8")
    (tmp_path / "warned.harness").write_text(RULES["L012"].bad, encoding="utf-8")
    return tmp_path


def sarif(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["lint", "--format", "sarif", *args]) == 0
    log = json.loads(capsys.readouterr().out)
    assert log["version"] == "2.1.0" and "sarif-2.1.0" in log["$schema"]
    [run] = log["runs"]
    rules = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    for result in run["results"]:
        assert rules[result["ruleIndex"]] == result["ruleId"]
        assert result["level"] in ("error", "warning", "note")
        for suppression in result.get("suppressions", []):
            assert set(suppression) <= SUPPRESSION_KEYS
            assert suppression["kind"] in ("inSource", "external")
            assert isinstance(suppression.get("justification", ""), str)
    return run


def test_an_inline_suppression_is_an_in_source_suppression_in_sarif(here: Path, capsys) -> None:
    run = sarif(capsys, "silenced.harness")
    [result] = run["results"]
    assert result["ruleId"] == "L012" and result["level"] == "warning"
    assert result["suppressions"] == [
        {"kind": "inSource", "justification": "every tool is read-only"}
    ]
    region = result["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (22, 9)
    # a finding nobody silenced has no `suppressions`
    [warned] = sarif(capsys, "warned.harness")["results"]
    assert "suppressions" not in warned


def test_a_configuration_ignore_is_an_external_suppression(here: Path) -> None:
    # a rule the configuration turns off is not run; a warning a stage reported is set apart
    result = lint(["warned.harness"])
    [warning] = result.diagnostics
    found = split_findings([warning], result.resolution, LintConfig(ignore=("L012",)))
    assert found.kept == []
    [silenced] = found.suppressed
    assert silenced.kind is SuppressionKind.EXTERNAL and silenced.diagnostic is warning
    assert "`L012`" in silenced.justification


def test_the_other_formats_leave_silenced_findings_out(here: Path, capsys) -> None:
    for command in ("check", "lint"):
        assert main([command, "--format", "json", "silenced.harness"]) == 0
        assert json.loads(capsys.readouterr().out) == []
        assert main([command, "--format", "github", "silenced.harness"]) == 0
        assert capsys.readouterr().out == ""
    checked = check(["silenced.harness"])
    assert checked.diagnostics == [] and checked.suppressed == []  # check runs no lint rule
    [silenced] = lint(["silenced.harness"]).suppressed
    assert silenced.kind is SuppressionKind.IN_SOURCE


@pytest.mark.parametrize("command", ["check", "lint"])
@pytest.mark.parametrize("fmt", [[], ["--format", "human"], ["--format", "plain"]])
@pytest.mark.parametrize("name", ["clean.harness", "silenced.harness"])
def test_quiet_prints_nothing_when_nothing_is_reported(
    here: Path, capsys, command: str, fmt: list[str], name: str
) -> None:
    assert main([command, "-q", *fmt, name]) == 0
    assert capsys.readouterr() == ("", "")
    assert main([command, "-q", *fmt, "clean.harness", "silenced.harness"]) == 0
    assert capsys.readouterr() == ("", "")
    if command == "lint":
        assert main([command, "--strict", "-q", *fmt, name]) == 0
        assert capsys.readouterr() == ("", "")
