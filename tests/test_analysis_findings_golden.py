"""Golden of the analysis's findings: what `check` finds on every spec of examples/, stdlib/,
tests/scenarios/ and tests/fixtures/ stays as recorded, whichever way a partition is answered
(z3, or exactly without it: compiler/analysis/cells.py).

Recorded for each finding: its kind, policy, rules, message, exactness, line and selector, and
whether it has an example call that re-judging agrees with. The example call itself is the
solver's choice among many (a z3 model is not canonical; an `absent-value` example may be any
call the rule misses with the value absent, decided by any rule), so neither its values nor the
rule that decides it are part of the golden; every example is re-judged by the reference
evaluator when it is made (policy.py `verify`). `HARNESSC_UPDATE_GOLDENS=1` rewrites the
expected files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harnessc.compiler.analysis.budget import RLIMIT_VARIABLE, TIMEOUT_VARIABLE
from harnessc.compiler.pipeline import check

from .conftest import ROOT, update_goldens

GOLDENS = ROOT / "tests" / "analysis_goldens"
FOLDERS = ("examples", "stdlib", "tests/scenarios", "tests/fixtures")


def _specs() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.harness"))


def findings_of(entry: Path) -> list[dict[str, Any]]:
    """The findings of `check` on `entry`, as the golden records them (module docstring)."""
    analysis = check([entry]).analysis
    if analysis is None:
        return []
    out = []
    for f in analysis.findings:
        example = f.example
        out.append(
            {
                "kind": f.kind,
                "policy": f.policy,
                "rule": f.rule,
                "other_rule": f.other_rule,
                "message": f.message,
                "exact": f.exact,
                "selector": f.selector,
                "line": f.origin.line if f.origin is not None else None,
                "example": None if example is None else {"exact": example.exact},
            }
        )
    return out


def golden_name(entry: Path) -> str:
    return str(entry.relative_to(ROOT)).replace("/", "__").removesuffix(".harness") + ".json"


@pytest.mark.parametrize("entry", _specs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_findings_are_as_recorded(
    entry: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # cold: every partition answered now
    found = json.dumps(findings_of(entry), indent=1, sort_keys=True) + "\n"
    expected = GOLDENS / golden_name(entry)
    if update_goldens():
        expected.write_text(found, encoding="utf-8")
    assert found == expected.read_text(encoding="utf-8"), f"findings of {entry} changed"


def test_the_realistic_fixture_finds_the_same_with_no_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 50-tool fixture's findings with no z3 budget (rlimit 0) and no time limit are the
    golden's, which z3 alone answered (before cells.py took `startswith`, every partition of
    it went to z3: 465 queries); today it asks z3 nothing."""
    monkeypatch.setenv(RLIMIT_VARIABLE, "0")
    monkeypatch.setenv(TIMEOUT_VARIABLE, "0")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    entry = ROOT / "tests" / "fixtures" / "realistic_50_tools.harness"
    found = json.dumps(findings_of(entry), indent=1, sort_keys=True) + "\n"
    assert found == (GOLDENS / golden_name(entry)).read_text(encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "again"))  # cold again, to count
    analysis = check([entry]).analysis
    assert analysis is not None and analysis.queries == 0 and analysis.decided > 0


def test_the_session_fixture_finds_what_z3_alone_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session shape at T = 50 (tests/fixtures/session_50_tools.harness: provenance, a
    count and a sum over the mail and billing tools) with no z3 budget: the golden's findings,
    which z3 alone gave (every partition solved by z3, cells.py switched off: 290–370 s of CPU,
    so recorded, not rerun here). Session terms are free values of their type to cells.py, so the
    check asks z3 nothing; each such answer is compared with z3's, partition by partition, in
    tests/test_analysis_cells.py."""
    monkeypatch.setenv(RLIMIT_VARIABLE, "0")
    monkeypatch.setenv(TIMEOUT_VARIABLE, "0")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    entry = ROOT / "tests" / "fixtures" / "session_50_tools.harness"
    found = json.dumps(findings_of(entry), indent=1, sort_keys=True) + "\n"
    assert found == (GOLDENS / golden_name(entry)).read_text(encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "again"))  # cold again, to count
    analysis = check([entry]).analysis
    assert analysis is not None and analysis.queries == 0 and analysis.decided > 0
