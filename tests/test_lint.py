"""`harnessc lint`: each rule fires on its bad example and not on its good one, with the message
and underline a user sees; suppressions, configuration, the CI formats, exit status, and the
shipped specs are lint-clean."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from harnessc.compiler.analysis.budget import RLIMIT_VARIABLE
from harnessc.compiler.analysis.policy import PolicyAnalysis, analyse_policies
from harnessc.compiler.cli import main
from harnessc.compiler.config import ConfigError, LintConfig, load_config
from harnessc.compiler.lints import RULES, LintContext, lint_suppressions
from harnessc.compiler.pipeline import check, lint
from harnessc.dsl.codes import CODES
from harnessc.dsl.diagnostics import Diagnostic
from harnessc.dsl.render_formats import render

ROOT = Path(__file__).resolve().parent.parent
ANALYSIS_RULES = {"L001", "L002", "L003", "L004", "L005"}
"""Their examples use the syntax of session-aware policy (tests/test_session_lints.py checks
them on models built directly)."""
KINDS = {
    "L001": "never-wins",
    "L002": "unsatisfiable",
    "L003": "opposite-effects",
    "L004": "absent-value",
    "L005": "default-allow",
}


CASE_ENVIRONMENT = {"L006": {RLIMIT_VARIABLE: "5000"}}
"""What a rule's examples run under (tests/test_diagnostics_golden.py too): L006's, a budget of
5,000 of z3's resource units per question, which the bad example's patterns exceed and the good
example's plain text tests do not; unlike a time budget it runs out at the same point on every
machine and under any load."""


def write(tmp_path: Path, text: str, name: str = "spec.harness") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def lint_text(tmp_path: Path, text: str, config: LintConfig | None = None) -> list[Diagnostic]:
    result = lint([write(tmp_path, text)], config)
    assert result.ok, render(result.diagnostics, "plain")
    return result.diagnostics


def only(diagnostics: list[Diagnostic], code: str) -> list[Diagnostic]:
    return [d for d in diagnostics if d.code == code]


def underlined(d: Diagnostic) -> str:
    assert d.primary is not None
    return d.primary.span.text


# ---------------------------------------------------------------------------------------------
# Every rule: registry, docs examples


def test_every_rule_is_registered_as_a_code() -> None:
    assert set(RULES) >= {f"L0{n:02d}" for n in (1, 2, 3, 4, 5, *range(10, 19))}
    for code, rule in RULES.items():
        assert CODES[code].slug == rule.name
        assert CODES[code].severity in ("warning", "note")
        assert rule.summary == rule.summary.lower()[:1] + rule.summary[1:]
        assert not rule.summary.endswith(".")


@pytest.mark.parametrize("code", sorted(RULES))
def test_rule_fires_on_bad_and_not_on_good(
    code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rule = RULES[code]
    for name, value in CASE_ENVIRONMENT.get(code, {}).items():
        monkeypatch.setenv(name, value)
        # answers decided under another budget would be read back from the cache
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    if code in ANALYSIS_RULES:
        bad = check([write(tmp_path, rule.bad)])
        assert bad.ok and bad.model is not None
        found = analyse_policies(bad.model).findings
        if not any(getattr(f, "kind", None) == KINDS[code] for f in found):
            pytest.skip("the policy analysis does not report this kind yet")
    assert only(lint_text(tmp_path, rule.bad), code), f"{code} does not fire on its bad example"
    good = lint_text(tmp_path, rule.good)
    assert not only(good, code), render(good, "plain")


BEATEN = """
tool deploy {
  summary "Deploy."
  use_when "Shipping."
  effects external
  risk high
  input { env: enum("staging", "production") }
}

policy p {
  default deny
RULES}
"""
STAGING = 'ok_staging: allow deploy when args.env == "staging" and actor.role == "dev"'


@pytest.mark.parametrize(
    ("rules", "help"),
    [
        (
            [STAGING, 'no_deploys: deny deploy when actor.role != "admin" { reason "No." }'],
            "a `deny` rule beats an `allow` rule wherever both match, in any order: remove this "
            "rule, or narrow `p.no_deploys` to leave out the calls this rule is for",
        ),
        (
            ['devs: allow deploy when actor.role == "dev"', STAGING],
            "remove the rule, or move it before the rule that beats it",
        ),
    ],
)
def test_l001_help_says_moving_helps_only_against_the_same_effect(
    tmp_path: Path, rules: list[str], help: str
) -> None:
    """A DENY beats an ALLOW whatever the order, so "move it before" would mislead; against an
    earlier rule of the same effect, moving it is the fix."""
    text = BEATEN.replace("RULES", "".join(f"  {rule}\n" for rule in rules))
    [d] = only(lint_text(tmp_path, text), "L001")
    assert d.help == help


# ---------------------------------------------------------------------------------------------
# L010–L018: what the user sees


def test_l010_ask_on_read_only(tmp_path: Path) -> None:
    [d] = only(lint_text(tmp_path, RULES["L010"].bad), "L010")
    assert d.message == (
        "`review.reports` asks for approval of every call of the read-only tool `read_report`"
    )
    assert underlined(d) == "read_report"
    assert d.primary.span.line == 24  # type: ignore[union-attr]


def test_l010_leaves_conditional_asks_alone(tmp_path: Path) -> None:
    text = RULES["L010"].bad.replace(
        "ask read_report {", 'ask read_report when args.path == "/x" {'
    )
    assert not only(lint_text(tmp_path, text), "L010")


def test_l011_high_risk_allowed_unconditionally(tmp_path: Path) -> None:
    [d] = only(lint_text(tmp_path, RULES["L011"].bad), "L011")
    assert d.message == (
        "`release#1` allows every call of the high-risk tool `deploy` without a condition"
    )
    assert underlined(d) == "deploy"
    assert [(lab.span.text, lab.message) for lab in d.labels if not lab.primary] == [
        ("deploy", "declared high risk")
    ]


def test_l011_counts_tools_behind_a_selector(tmp_path: Path) -> None:
    text = RULES["L011"].bad.replace("allow deploy", "allow risk >= high")
    [d] = only(lint_text(tmp_path, text), "L011")
    assert underlined(d) == "risk >= high"


def test_l012_wildcard_allow(tmp_path: Path) -> None:
    [d] = only(lint_text(tmp_path, RULES["L012"].bad), "L012")
    assert d.message == "`release#1` allows `*`, which also matches every tool added later"
    assert underlined(d) == "*"
    assert d.primary.message == "matches 2 tools today"  # type: ignore[union-attr]


def test_l012_wildcard_deny_is_fine(tmp_path: Path) -> None:
    text = RULES["L012"].bad.replace(
        'allow * when actor.role == "engineer"',
        'deny * when actor.role == "intern" { reason "no" }',
    )
    assert not only(lint_text(tmp_path, text), "L012")


def test_l013_and_l014_missing_descriptions(tmp_path: Path) -> None:
    [d] = only(lint_text(tmp_path, RULES["L013"].bad), "L013")
    assert d.message == "tool `read_report` has no `summary`"
    assert underlined(d) == "read_report"
    [n] = only(lint_text(tmp_path, RULES["L014"].bad), "L014")
    assert n.message == "tool `read_report` has no `use_when`"
    assert n.severity.value == "note"


def test_l014_skips_tools_no_planner_sees(tmp_path: Path) -> None:
    text = RULES["L014"].bad.replace("effects read", "primitive\n  effects read")
    assert not only(lint_text(tmp_path, text), "L014")


def test_l015_and_l016_unused(tmp_path: Path) -> None:
    [d] = only(lint_text(tmp_path, RULES["L015"].bad), "L015")
    assert d.message == "connection `github` is never used"
    assert underlined(d) == "github"
    [f] = only(lint_text(tmp_path, RULES["L016"].bad), "L016")
    assert f.message == "fact `workspace.open` is never read"
    assert underlined(f) == "workspace.open"


def test_l015_reports_unused_runtimes(tmp_path: Path) -> None:
    text = 'runtime ci "the CI runner"\n' + RULES["L015"].good
    [d] = only(lint_text(tmp_path, text), "L015")
    assert d.message == "runtime `ci` is never used"


def test_l017_surface_over_limit_without_rank(tmp_path: Path) -> None:
    [d] = only(lint_text(tmp_path, RULES["L017"].bad), "L017")
    assert d.message == (
        "surface `reports` can show 3 public tools, more than its `limit 2`, and has no "
        "`rank` block"
    )
    assert underlined(d) == "reports"
    hidden = RULES["L017"].bad.replace("limit 2", "hide report.r3\n  limit 2")
    assert not only(lint_text(tmp_path, hidden), "L017")


def test_l018_near_duplicate_description(tmp_path: Path) -> None:
    [d] = only(lint_text(tmp_path, RULES["L018"].bad), "L018")
    assert d.message == "tools `read_report` and `open_report` have nearly the same description"
    assert underlined(d) == "open_report"
    assert d.primary.message == (  # type: ignore[union-attr]
        "83% of the words of its summary and use_when are shared"
    )


# ---------------------------------------------------------------------------------------------
# L001–L005: adapters over the analysis's findings


def _context(tmp_path: Path, text: str, findings: list[object]) -> LintContext:
    result = check([write(tmp_path, text)])
    assert result.ok and result.model is not None and result.resolution is not None
    return LintContext(result.model, result.resolution, PolicyAnalysis(findings=findings))


def _finding(kind: str, rule, other=None, example=None, message="m") -> SimpleNamespace:
    return SimpleNamespace(
        kind=kind,
        policy=rule.policy if rule is not None else None,
        rule=rule.label if rule is not None else None,
        other_rule=other.label if other is not None else None,
        message=message,
        example=example,
        origin=rule.origin if rule is not None else None,
    )


def test_l001_names_the_winning_rule_and_the_example(tmp_path: Path) -> None:
    ctx = _context(tmp_path, RULES["L001"].bad, [])
    first, second = ctx.spec.policies["spec.release"].rules
    finding = _finding(
        "never-wins",
        second,
        first,
        {"tool": "deploy", "args": {"environment": "staging", "service": "web"}},
        "rule `release.web_staging` never decides a call",
    )
    ctx.analysis = PolicyAnalysis(findings=[finding])
    [d] = RULES["L001"].check(ctx)
    assert d.code == "L001" and d.message == "rule `release.web_staging` never decides a call"
    assert underlined(d) == "web_staging: allow deploy"
    assert [lab.span.text for lab in d.labels if not lab.primary] == ["any_staging: allow deploy"]
    assert d.notes == ('for example, the call `deploy(environment: "staging", service: "web")`',)


def test_l002_and_l004_underline_the_condition(tmp_path: Path) -> None:
    ctx = _context(tmp_path, RULES["L004"].bad, [])
    [rule] = ctx.spec.policies["spec.release"].rules
    ctx.analysis = PolicyAnalysis(findings=[_finding("absent-value", rule, example="deploy()")])
    [d] = RULES["L004"].check(ctx)
    assert underlined(d) == "resource.tenant != actor.tenant"
    assert d.notes == ("for example, the call `deploy()`",)


def test_l005_underlines_the_default(tmp_path: Path) -> None:
    ctx = _context(tmp_path, RULES["L005"].bad, [])
    policy = ctx.spec.policies["spec.release"]
    assert policy.default is not None
    finding = SimpleNamespace(
        kind="default-allow",
        policy=policy.name,
        rule=None,
        other_rule=None,
        message="policy `release` allows every call no rule matches",
        example=None,
        origin=policy.default.origin,
    )
    ctx.analysis = PolicyAnalysis(findings=[finding])
    [d] = RULES["L005"].check(ctx)
    assert underlined(d) == "default allow"
    assert d.notes == ()


# ---------------------------------------------------------------------------------------------
# Suppressions


def test_trailing_suppression_on_the_reported_line(tmp_path: Path) -> None:
    text = RULES["L012"].bad.replace(
        'allow * when actor.role == "engineer"',
        'allow * when actor.role == "engineer"  # harnessc: ignore[L012] reviewed',
    )
    assert not only(lint_text(tmp_path, text), "L012")


def test_suppression_alone_on_the_line_above(tmp_path: Path) -> None:
    text = RULES["L012"].bad.replace(
        "  allow *", "  # harnessc: ignore[L013, L012] every tool only reads\n  allow *"
    )
    assert not only(lint_text(tmp_path, text), "L012")
    result = check([write(tmp_path, text)])
    assert result.resolution is not None
    [sup] = lint_suppressions(result.resolution)
    assert (sup.line, sup.codes, sup.reason) == (23, ("L013", "L012"), "every tool only reads")


def test_suppression_of_another_code_or_line_does_not_apply(tmp_path: Path) -> None:
    other_code = RULES["L012"].bad.replace("  allow *", "  # harnessc: ignore[L011]\n  allow *")
    assert only(lint_text(tmp_path, other_code), "L012")
    trailing_above = RULES["L012"].bad.replace(
        "  default deny", "  default deny  # harnessc: ignore[L012]"
    )
    assert only(lint_text(tmp_path, trailing_above), "L012")


# ---------------------------------------------------------------------------------------------
# Configuration


def test_select_and_ignore_by_code_and_prefix() -> None:
    config = LintConfig(select=("L",), ignore=("L01",))
    assert config.enabled("L001") and not config.enabled("L012")
    config = LintConfig(select=("L", "L012"), ignore=("L01",))
    assert config.enabled("L012") and not config.enabled("L013")
    assert not LintConfig(select=("L012",), ignore=("L012",)).enabled("L012")
    assert not LintConfig(select=("L",)).enabled("H205")


def test_pyproject_config_is_read_from_the_nearest_file(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.harnessc]\nignore = ["l013"]\n', encoding="utf-8"
    )
    (tmp_path / "specs").mkdir()
    spec = write(tmp_path / "specs", RULES["L013"].bad)
    config = load_config([spec])
    assert config.ignore == ("L013",) and config.path == tmp_path / "pyproject.toml"
    assert not only(lint([spec], config).diagnostics, "L013")
    assert only(lint([spec]).diagnostics, "L013")


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('selct = ["L"]', "unknown key `selct` in `[tool.harnessc]`; did you mean `select`?"),
        ('select = "L"', "`select` in `[tool.harnessc]` must be a list of strings"),
        ('ignore = ["L999"]', "`L999` matches no diagnostic code"),
    ],
)
def test_bad_config_is_a_usage_error(
    tmp_path: Path, table: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "pyproject.toml").write_text(f"[tool.harnessc]\n{table}\n", encoding="utf-8")
    spec = write(tmp_path, RULES["L013"].good)
    with pytest.raises(ConfigError, match=r"matches|unknown key|must be"):
        load_config([spec])
    assert main(["lint", str(spec)]) == 2
    assert message in capsys.readouterr().err


def test_command_line_select_and_ignore(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    spec = write(tmp_path, RULES["L013"].bad)
    assert main(["lint", "--format", "json", "--ignore", "L013", str(spec)]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["lint", "--format", "json", "--select", "L014", str(spec)]) == 0
    assert json.loads(capsys.readouterr().out) == []


# ---------------------------------------------------------------------------------------------
# The command: exit status and formats


def test_warnings_fail_only_with_strict(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    spec = write(tmp_path, RULES["L012"].bad)
    assert main(["lint", str(spec)]) == 0
    assert "warning[L012]" in capsys.readouterr().err
    assert main(["lint", "--strict", str(spec)]) == 1
    notes_only = write(tmp_path, RULES["L014"].bad, "notes.harness")
    assert main(["lint", "--strict", str(notes_only)]) == 0
    broken = write(tmp_path, "tool x {", "broken.harness")
    assert main(["lint", str(broken)]) == 1
    clean = write(tmp_path, RULES["L012"].good, "clean.harness")
    capsys.readouterr()
    assert main(["lint", str(clean)]) == 0
    assert capsys.readouterr().err == "linted 1 file: no findings\n"


def test_sarif_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write(tmp_path, RULES["L011"].bad)
    assert main(["lint", "--format", "sarif", str(spec)]) == 0
    log = json.loads(capsys.readouterr().out)
    assert log["version"] == "2.1.0" and "sarif-2.1.0" in log["$schema"]
    [run] = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "harnessc"
    [rule] = driver["rules"]
    assert rule["id"] == "L011" and rule["name"] == "high-risk-allowed-unconditionally"
    assert rule["helpUri"] == "harnessc:explain/L011"
    assert rule["defaultConfiguration"] == {"level": "warning"}
    [result] = run["results"]
    assert result["ruleId"] == "L011" and result["ruleIndex"] == 0
    assert result["level"] == "warning"
    assert result["message"]["text"].startswith("`release#1` allows every call")
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == spec.as_uri()
    assert location["region"] == {"startLine": 22, "startColumn": 9, "endLine": 22, "endColumn": 15}
    [related] = result["relatedLocations"]
    assert related["message"] == {"text": "declared high risk"}


def test_sarif_paths_are_relative_to_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, RULES["L012"].bad)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--format", "sarif", "spec.harness"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"][0]["results"] == []
    assert main(["lint", "--format", "sarif", "spec.harness"]) == 0
    [result] = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    artifact = result["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact == {"uri": "spec.harness", "uriBaseId": "%SRCROOT%"}


def test_github_annotations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, RULES["L012"].bad)
    write(tmp_path, "tool x {", "broken.harness")
    monkeypatch.chdir(tmp_path)
    assert main(["lint", "--format", "github", "spec.harness"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "::warning file=spec.harness,line=22,col=9,endLine=22,endColumn=9,title=L012::"
        "`release#1` allows `*`, which also matches every tool added later"
        "%0Ahelp: name the tools this rule is meant for"
    ]
    assert main(["check", "--format", "github", "broken.harness"]) == 1
    [line] = capsys.readouterr().out.splitlines()
    assert line.startswith("::error file=broken.harness,line=1,col=")
    assert ",title=H102::" in line


def test_explain_knows_lint_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "L012"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("L012 wildcard-allow (warning)\n")
    assert "every tool that is added later" in out
    assert main(["explain", "wildcard-allow"]) == 0


# ---------------------------------------------------------------------------------------------
# The shipped specs


SHIPPED = sorted(
    [
        ROOT / "examples" / "remediation" / "remediation.harness",
        *(ROOT / "stdlib").glob("*.harness"),
    ]
)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_specs_have_no_lint_findings(path: Path) -> None:
    result = lint([path])
    assert result.diagnostics == [], render(result.diagnostics, "plain")


def test_findings_in_std_modules_are_not_reported(tmp_path: Path) -> None:
    text = "import std.github\n\n" + RULES["L012"].good.replace(
        "allow read_report", "allow github.search_code, read_report"
    )
    assert lint_text(tmp_path, text) == []


def test_near_duplicate_pairs_agree_with_all_pairs() -> None:
    import itertools
    import random

    from harnessc.compiler.lints.descriptions import jaccard, similar_pairs

    rng = random.Random(7)
    vocabulary = [f"w{i}" for i in range(30)]
    sets = [frozenset(rng.sample(vocabulary, rng.randint(4, 10))) for _ in range(150)]
    sets += [frozenset(list(s)[:-1]) for s in sets[:20]]  # near copies
    brute = [
        (i, j, jaccard(a, b))
        for (i, a), (j, b) in itertools.combinations(enumerate(sets), 2)
        if jaccard(a, b) >= 0.8
    ]
    assert list(similar_pairs(sets, 0.8)) == brute
    assert brute  # the near copies are found
