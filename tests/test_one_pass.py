"""One run reports every independent mistake, each once, and nothing that only follows from one.

A stage that finds a declaration wrong sets it aside, with what depends on it, and the later
stages check the rest (compiler/quarantine.py); a declaration skipped after a syntax error
still declares its name (compiler/poison.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from harnessc.compiler.pipeline import CheckResult, check, lint
from harnessc.dsl.parser import parse_source
from harnessc.dsl.source import Source
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import ROOT

FIVE = ROOT / "tests" / "diagnostics" / "combined" / "five-independent-mistakes.harness"
CASES = ROOT / "tests" / "diagnostics" / "cases"

# (code, the text its primary label underlines) of each mistake in FIVE
FIVE_MISTAKES = [
    ("H301", "hihg"),  # a misspelt risk level in one tool
    ("H301", "reversable"),  # a misspelt effect in another
    ("H301", "strng"),  # a misspelt type in a field
    ("H107", "="),  # `=` in a rule's condition: a syntax error
    ("H201", "orders.cancle"),  # an unknown tool in a workflow step
]


def spec(tmp_path: Path, text: str, name: str = "spec.harness") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def found(paths: list[Path]) -> list[tuple[str, str]]:
    """(code, underlined text) of every diagnostic, in the order reported to the user."""
    result = check(list(paths))
    return sorted(
        (d.code, d.primary.span.text if d.primary else "")
        for d in result.diagnostics
        if d.severity == "error"
    )


# ---------------------------------------------------------------------------------------------
# Five mistakes in one spec


def test_check_command_reports_five_unrelated_mistakes_in_one_run(in_root: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "harnessc.compiler", "check", "--format", "json", str(FIVE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 1, run.stderr
    reported = json.loads(run.stdout)
    pairs = [(d["code"], next(lb["text"] for lb in d["labels"] if lb["primary"])) for d in reported]
    assert sorted(pairs) == sorted(FIVE_MISTAKES)
    assert [d["labels"][0]["start"]["line"] for d in reported] == [9, 16, 25, 42, 60]


def test_pipeline_reports_each_of_the_five_once_and_builds_nothing() -> None:
    result = check([FIVE])
    assert found([FIVE]) == sorted(FIVE_MISTAKES)
    assert not result.ok
    # the analysis, the lints and the build need the whole program valid: they never see a part
    assert result.model is None and result.analysis is None
    assert [d.code for d in lint([FIVE]).diagnostics] == [d.code for d in result.diagnostics]


def test_fixing_one_mistake_leaves_the_other_four(tmp_path: Path) -> None:
    text = FIVE.read_text(encoding="utf-8")
    fixed = spec(tmp_path, text.replace("risk hihg", "risk high"))
    assert found([fixed]) == sorted(m for m in FIVE_MISTAKES if m != ("H301", "hihg"))
    fixed = spec(tmp_path, text.replace('args.region = "eu"', 'args.region == "eu"'))
    assert found([fixed]) == sorted(m for m in FIVE_MISTAKES if m != ("H107", "="))


def test_fixing_all_five_gives_a_clean_spec(tmp_path: Path) -> None:
    text = FIVE.read_text(encoding="utf-8")
    for wrong, right in [
        ("risk hihg", "risk high"),
        ("reversable", "reversible"),
        ("text: strng", "text: string"),
        ('args.region = "eu"', 'args.region == "eu"'),
        ("orders.cancle", "orders.cancel"),
    ]:
        text = text.replace(wrong, right)
    result = check([spec(tmp_path, text)])
    assert result.ok, [d.message for d in result.diagnostics]
    assert result.model is not None and result.analysis is not None


# ---------------------------------------------------------------------------------------------
# What a declaration with a syntax error still declares


@pytest.mark.parametrize(
    ("text", "skipped"),
    [
        ('tool orders.lookup { summary "x" = }\n', [("tool", "orders.lookup", ())]),
        ('tool "orders lookup" { = }\n', [("tool", "orders lookup", ())]),
        ("policy support {\n  allow t when args.a = 1\n}\n", [("policy", "support", ())]),
        ('test "refund needs a lead" { call t(x = 1) }\n', [("test", "refund needs a lead", ())]),
        ("fact team.size: = \n", [("fact", "team.size", ())]),
        ("workflow ship {\n  step a = call t(\n", [("workflow", "ship", ())]),
        (
            'mcp scanner {\n  tool scan { = }\n  tool "fix it" { }\n}\n',
            [("mcp", "scanner", ("scan", "fix it"))],
        ),
        ("skill writer {\n  private tool render { = }\n}\n", [("skill", "writer", ("render",))]),
        ('tol orders.lookup { summary "x" }\n', [("tool", "orders.lookup", ())]),
        ("policy { allow t }\n", [("policy", None, ())]),
        ("frobnicate everything { }\n", [(None, None, ())]),
        ('}\ntool t { summary "x"; effects read }\n', []),
    ],
)
def test_the_parser_records_what_a_skipped_declaration_would_declare(
    text: str, skipped: list[tuple[str | None, str | None, tuple[str, ...]]]
) -> None:
    parsed = parse_source(Source("spec.harness", text))
    assert not parsed.ok
    assert [(b.kind, b.name, b.tools) for b in parsed.module.broken] == skipped


def test_a_skipped_declaration_spans_up_to_the_next_one() -> None:
    text = 'tool a { = }\n\ntool b { summary "B."; effects read }\n'
    parsed = parse_source(Source("spec.harness", text))
    (skipped,) = parsed.module.broken
    assert skipped.span.text == "tool a { = }"
    assert [item.name.text for item in parsed.module.items] == ["b"]  # type: ignore[union-attr]


TOOL = 'tool orders.lookup {{ summary "Look an order up."; effects read; {body} }}\n'


def test_a_tool_whose_body_is_broken_still_declares_its_id(tmp_path: Path) -> None:
    path = spec(
        tmp_path,
        TOOL.format(body="risk = high")
        + "policy p { default deny\n  allow orders.lookup\n  allow orders.lokup }\n"
        + "surface s { expose orders.* }\n",
    )
    # the reference to the broken tool, and the glob over it, are not reported; the misspelt
    # name next to them is
    assert found([path]) == [("H101", "="), ("H201", "orders.lokup")]


def test_a_misspelt_keyword_still_declares_the_name_after_it(tmp_path: Path) -> None:
    path = spec(
        tmp_path,
        'tol orders.lookup { summary "Look an order up."; effects read }\n'
        "policy p { default deny\n  allow orders.lookup }\n"
        "agent a { policy q }\n",
    )
    # `tol` is taken for `tool`, so `orders.lookup` is known to be declared by it
    assert found([path]) == [("H106", "tol"), ("H201", "q")]


def test_names_of_a_broken_policy_and_workflow_are_not_reported_unknown(tmp_path: Path) -> None:
    path = spec(
        tmp_path,
        'tool t { summary "T."; effects read }\n'
        "policy support { default deny\n  allow t when args.a = 1 }\n"
        "workflow flow { step a = call t( }\n"
        "agent helper { policy support }\n"
        'test "helper may call t" { agent helper\n  call t()\n  expect allow }\n'
        'test "runs under support" { call t()\n  expect allow }\n'
        "agent other { policy suport }\n",
    )
    codes = found([path])
    assert [c for c, _ in codes] == ["H101", "H107", "H201"]
    assert ("H201", "suport") in codes
    # the broken policy still names itself: the misspelling of it gets a suggestion
    (unknown,) = [d for d in check([path]).diagnostics if d.code == "H201"]
    assert unknown.help == "did you mean `support`?"


def test_a_rule_naming_a_broken_tool_is_skipped_and_the_other_rules_are_checked(
    tmp_path: Path,
) -> None:
    path = spec(
        tmp_path,
        'tool a { summary "A."; effects read; input { n: int } }\n'
        'tool b { summary "B."; effects read; risk hihg; input { x: int } }\n'
        "policy p {\n  default deny\n"
        "  allow b when args.x == 1\n"  # b is set aside: so is this rule, silently
        "  allow a when args.m == 2\n"  # a mistake of its own (validate)
        '  ask a when actor.role == "x"\n'  # another (validate)
        "}\n"
        "agent helper { policy p }\n",  # the policy stays: its agent is checked too
    )
    assert found([path]) == [("H301", "hihg"), ("H327", "args.m"), ("H329", "ask a")]


def test_an_imported_module_with_a_syntax_error_hides_only_its_broken_names(
    tmp_path: Path,
) -> None:
    spec(
        tmp_path,
        'tool lib.good { summary "Good."; effects read }\n'
        'tool lib.bad { summary "Bad."; effects read; risk = low }\n',
        "lib.harness",
    )
    main = spec(
        tmp_path,
        'import "./lib.harness"\n'
        "policy p { default deny\n  allow lib.good, lib.bad\n  allow lib.gud }\n",
    )
    codes = found([main])
    assert ("H201", "lib.gud") in codes and ("H101", "=") in codes
    assert not any(text == "lib.bad" for _, text in codes)
    assert len(codes) == 2


def test_an_unknown_import_hides_what_it_might_select(tmp_path: Path) -> None:
    path = spec(
        tmp_path,
        'import "./nosuch.harness"\n'
        'tool t { summary "T."; effects read; risk hihg }\n'
        'tool v { summary "V."; effects read }\n'
        "surface s { expose nosuch.*, mcp:scanner:*, v }\n"
        "policy p { default deny\n  allow v when called(other.*) }\n",
    )
    # the tools the missing module would declare may match the globs: only the import, and
    # the mistake independent of it, are reported
    assert found([path]) == [("H203", '"./nosuch.harness"'), ("H301", "hihg")]


def test_file_too_deeply_nested_hides_every_name_it_might_declare(tmp_path: Path) -> None:
    deep = "policy p { allow t when " + "(" * 70 + "true" + ")" * 70 + " }\n"
    path = spec(tmp_path, deep + "agent a { policy anything }\n")
    assert [c for c, _ in found([path])] == ["H108"]


# ---------------------------------------------------------------------------------------------
# Independence: mistakes in different declarations are reported as they are alone

# Golden cases with one kind of mistake each, no two declaring the same name.
POOL = [
    "H107-assignment-in-condition",  # parse: a syntax error in a policy
    "H209-result-out-of-scope",  # resolve
    "H210-shadowed-variable",  # resolve
    "H305-invalid-schema",  # lower
    "H343-bad-on-success",  # lower
    "H325-incompatible-types",  # validate
    "H330-deny-without-reason",  # validate
    "H331-delegation-too-deep",  # validate, across three agents
    "H339-function-argument-type",  # validate
    "H323-call-in-availability",  # validate
    "H401-step-cycle",  # graph
]


Finding = tuple[str, str, str]
"""A diagnostic as it reads wherever its text lands: code, message, underlined text."""


def findings(result: CheckResult) -> Counter[Finding]:
    return Counter(
        (d.code, d.message, d.primary.span.text if d.primary else "") for d in result.diagnostics
    )


def alone(name: str) -> Counter[Finding]:
    return findings(check([CASES / f"{name}.harness"]))


@pytest.fixture(scope="module")
def by_case() -> dict[str, Counter[Finding]]:
    return {name: alone(name) for name in POOL}


def combined(tmp_path: Path, names: list[str]) -> Counter[Finding]:
    text = "\n".join((CASES / f"{n}.harness").read_text(encoding="utf-8") for n in names)
    return findings(check([spec(tmp_path, text, "combined.harness")]))


def test_the_pool_declares_no_name_twice(tmp_path: Path) -> None:
    assert not any(code == "H202" for code, _, _ in combined(tmp_path, POOL))


def test_the_whole_pool_reports_the_union_of_its_cases(tmp_path: Path, by_case) -> None:
    expected = sum((by_case[n] for n in POOL), Counter())
    assert combined(tmp_path, POOL) == expected


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.sampled_from(POOL), min_size=2, max_size=5, unique=True))
def test_any_few_cases_together_report_the_union_of_their_diagnostics(
    tmp_path: Path, by_case, names: list[str]
) -> None:
    expected = sum((by_case[n] for n in names), Counter())
    assert combined(tmp_path, names) == expected
