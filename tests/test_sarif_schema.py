"""`--format sarif` is valid SARIF 2.1.0, and its links lead somewhere.

The schema (tests/sarif/sarif-2.1.0-rtm.5.json, the OASIS 2.1.0 schema) is vendored from the
npm package @microsoft/jest-sarif 1.0.0-beta.0, so the tests need no network.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from harnessc.compiler.cli import main

from .conftest import ROOT

jsonschema = pytest.importorskip("jsonschema")

SCHEMA = json.loads((Path(__file__).parent / "sarif" / "sarif-2.1.0-rtm.5.json").read_text())
CASES = ROOT / "tests" / "diagnostics" / "cases"

LINTED = """\
policy release {
  default deny
  allow *
  # harnessc: ignore[L012] the reason
  allow *
}
"""


def _sarif(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    main([*argv, "--format", "sarif"])
    return json.loads(capsys.readouterr().out)


def _validate(log: dict) -> None:
    validator = jsonschema.Draft4Validator(SCHEMA)
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.path))
    assert [f"{list(e.path)}: {e.message}" for e in errors] == []


def _cases() -> list[Path]:
    return sorted(CASES.glob("*.harness"))


def test_the_output_of_every_diagnostic_case_is_valid_sarif(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every code's golden case, checked in one run: errors, related locations, file-level
    diagnostics, all in one SARIF log."""
    log = _sarif(capsys, "check", *map(str, _cases()))
    _validate(log)
    (run,) = log["runs"]
    assert len(run["tool"]["driver"]["rules"]) > 40
    assert any("relatedLocations" in result for result in run["results"])


def test_lint_output_with_suppressions_is_valid_sarif(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "release.harness"
    spec.write_text(LINTED, encoding="utf-8")
    log = _sarif(capsys, "lint", str(spec))
    _validate(log)
    (run,) = log["runs"]
    assert any("suppressions" in result for result in run["results"])


def test_a_schema_violation_is_caught() -> None:
    """The validation can fail: a result without its message is not SARIF."""
    log = {
        "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "harnessc"}}, "results": [{"ruleId": "H201"}]}],
    }
    with pytest.raises(AssertionError, match="message"):
        _validate(log)


def test_every_link_is_an_absolute_uri_that_harnessc_explain_opens(
    capsys: pytest.CaptureFixture[str],
) -> None:
    log = _sarif(capsys, "check", *map(str, _cases()))
    driver = log["runs"][0]["tool"]["driver"]
    assert urlsplit(driver["informationUri"]).scheme == "harnessc"
    for rule in driver["rules"]:
        uri = rule["helpUri"]
        assert urlsplit(uri).scheme == "harnessc", uri
        assert main(["explain", uri]) == 0
        shown = capsys.readouterr().out
        assert shown.startswith(f"{rule['id']} {rule['name']} ")
        assert rule["help"]["text"] in shown


def test_harnessc_diff_sarif_is_valid_sarif() -> None:
    """The review report's SARIF (tests/review/release.sarif, the golden that
    tests/test_diff_golden.py keeps equal to what `harnessc diff --format sarif` prints)."""
    log = json.loads((ROOT / "tests" / "review" / "release.sarif").read_text(encoding="utf-8"))
    _validate(log)
    (run,) = log["runs"]
    assert run["results"], "the golden diff reports regions"
