"""The formatter: golden files, the shipped specs, comments, and the canonical style rule by rule.

A golden case is `tests/formatter/NAME.harness` with its output `NAME.expected.harness` beside
it; `pytest --update-goldens` (or HARNESSC_UPDATE_GOLDENS=1) rewrites the outputs. Every case
and every `.harness` file under examples/ and stdlib/ must format to a tree equal to the one it
came from, keep its comments, and format again to the same text.
"""

from __future__ import annotations

import doctest
from collections import Counter
from pathlib import Path

import pytest
from harnessc.compiler import pipeline
from harnessc.dsl import layout, printer
from harnessc.dsl import syntax as s
from harnessc.dsl.parser import parse_source
from harnessc.dsl.printer import FormatResult, comment_texts, format_module, format_source
from harnessc.dsl.source import Source

from .conftest import ROOT, update_goldens

CASES = ROOT / "tests" / "formatter"
EXPECTED = ".expected.harness"


def _cases() -> list[Path]:
    return sorted(p for p in CASES.glob("*.harness") if not p.name.endswith(EXPECTED))


def _specs() -> list[Path]:
    return sorted([*ROOT.glob("examples/**/*.harness"), *ROOT.glob("stdlib/**/*.harness")])


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _fmt(text: str, path: str = "t.harness") -> str:
    result = format_source(Source(path, text))
    assert result.text is not None, result.diagnostics
    return result.text


def _tree(text: str) -> s.Module:
    result = parse_source(Source("t.harness", text))
    assert result.ok, result.diagnostics
    return result.module


# ---------------------------------------------------------------------------------------------
# Golden files and shipped specs


def test_there_are_enough_golden_cases() -> None:
    assert len(_cases()) >= 8


@pytest.mark.parametrize("case", _cases(), ids=lambda p: p.stem)
def test_golden_output(case: Path) -> None:
    expected = case.with_name(case.stem + EXPECTED)
    text = _fmt(case.read_text(encoding="utf-8"), _name(case))
    if update_goldens():
        expected.write_text(text, encoding="utf-8")
    assert expected.exists(), f"no golden {expected.name}; run pytest --update-goldens"
    assert text == expected.read_text(encoding="utf-8")


@pytest.mark.parametrize("case", _cases(), ids=lambda p: p.stem)
def test_golden_output_is_a_fixed_point(case: Path) -> None:
    expected = case.with_name(case.stem + EXPECTED)
    if not expected.exists():
        pytest.skip("no golden yet")
    text = expected.read_text(encoding="utf-8")
    result = format_source(Source(_name(expected), text))
    assert result.text == text
    assert not result.changed


@pytest.mark.parametrize("path", [*_cases(), *_specs()], ids=_name)
def test_formatting_keeps_the_tree_and_every_comment(path: Path) -> None:
    source = Source(_name(path), path.read_text(encoding="utf-8"))
    before = parse_source(source)
    assert before.ok, before.diagnostics
    text = _fmt(source.text, source.path)
    after = parse_source(Source(source.path, text))
    assert after.module == before.module
    assert comment_texts(after.module) == comment_texts(before.module)
    assert Counter(c.text for c in after.module.comments) == Counter(
        c.text.rstrip() for c in before.module.comments
    )


@pytest.mark.parametrize("path", _specs(), ids=_name)
def test_shipped_specs_format_idempotently(path: Path) -> None:
    once = _fmt(path.read_text(encoding="utf-8"), _name(path))
    assert _fmt(once, _name(path)) == once


def test_examples_and_stdlib_are_found() -> None:
    names = {p.name for p in _specs()}
    assert {"remediation.harness", "risk.harness"} <= names


# ---------------------------------------------------------------------------------------------
# format_source: results and refusals


def test_canonical_text_is_unchanged() -> None:
    text = "connection github\n"
    assert format_source(Source("t.harness", text)) == FormatResult(text, False, ())


def test_a_syntax_error_gives_its_diagnostics_and_no_text() -> None:
    result = format_source(Source("t.harness", "tool x {"))
    assert result.text is None
    assert not result.changed
    assert [d.code for d in result.diagnostics] == ["H102"]


def test_a_formatter_that_changes_the_meaning_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def drop_last(module: s.Module) -> str:
        return printer._Printer(s.Module(module.items[:-1], module.comments)).print_module()

    monkeypatch.setattr(printer, "format_module", drop_last)
    result = format_source(Source("a.harness", "connection a\nconnection b\n"))
    assert result.text is None
    [diagnostic] = result.diagnostics
    assert diagnostic.code == "H901"
    assert diagnostic.message == (
        "the formatter changed the meaning of `a.harness`; this is a bug in harnessc"
    )


def test_a_formatter_that_loses_a_comment_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_comments(module: s.Module) -> str:
        return printer._Printer(s.Module(module.items)).print_module()

    monkeypatch.setattr(printer, "format_module", no_comments)
    result = format_source(Source("a.harness", "# keep me\nconnection a\n"))
    assert result.text is None
    assert [d.code for d in result.diagnostics] == ["H901"]
    assert "comments" in result.diagnostics[0].notes[0]


def test_a_formatter_crash_is_an_internal_diagnostic(monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(module: s.Module) -> str:
        raise RuntimeError("boom")

    monkeypatch.setattr(printer, "format_module", crash)
    result = format_source(Source("a.harness", "connection a\n"))
    assert result.text is None
    assert [d.code for d in result.diagnostics] == ["H901"]
    assert result.diagnostics[0].message.startswith("the formatter failed on `a.harness`")


def test_the_docstring_examples_run() -> None:
    failures, tried = doctest.testmod(printer)
    assert tried > 0
    assert failures == 0


# ---------------------------------------------------------------------------------------------
# The canonical style, rule by rule


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("tool t { legacy replaced_by mcp:s:tool:x }", "  legacy replaced_by mcp:s:tool:x\n"),
        ("tool t { legacy }", "  legacy\n"),
        ("tool t { dynamic   provided_by ci }", "  dynamic provided_by ci\n"),
        ("tool t { effects read  write }", "  effects read write\n"),
        ("tool t { packs a,b }", "  packs a, b\n"),
        ("tool t { tags a ,b }", "  tags a, b\n"),
        (
            "surface s { rank { recall embedding top 60; rerank x; prefer y } }",
            "recall embedding top 60",
        ),
        ('mcp m { transport stdio "cmd --json" }', '  transport stdio "cmd --json"\n'),
        ('test "t" { actor { a: 1 } }', "  as actor { a: 1 }\n"),
        ('test "t" { as actor { a: 1 } }', "  as actor { a: 1 }\n"),
        ("policy p { lbl : allow x }", "  lbl: allow x\n"),
        ("fact workspace.root:path", "fact workspace.root: path\n"),
        ('tool "create-issue" {}', 'tool "create-issue" {}\n'),
        ("agent a { delegate b,c; skills d , e }", "  delegate b, c\n  skills d, e\n"),
        ('workflow w { step s = decide "q" { options a,b } }', "{ options a, b }"),
        ("skill k { subagent x { tools a,b } }", "  subagent x { tools a, b }\n"),
        (
            "policy p { allow x, risk>=high, effects has read }",
            "allow x, risk >= high, effects has read",
        ),
        ('import "./x.harness"as x', 'import "./x.harness" as x\n'),
        ("tool t { input { a: list<map<int?>>? } }", "  input { a: list<map<int?>>? }\n"),
    ],
)
def test_each_construct_prints_in_its_canonical_form(text: str, expected: str) -> None:
    formatted = _fmt(text)
    assert expected in formatted
    assert _tree(formatted) == _tree(text)


def test_one_item_per_line_two_space_indentation_no_semicolons() -> None:
    assert _fmt('agent a{persona "p";surface s;policy p;}') == (
        'agent a {\n  persona "p"\n  surface s\n  policy p\n}\n'
    )


def test_blank_lines_between_declarations() -> None:
    text = (
        "import a\nimport b\n\nimport c\nconnection x\n"
        "tool t {}\nagent a {}\nruntime r\nfact f: int\n"
    )
    assert _fmt(text) == (
        "import a\nimport b\n\nimport c\nconnection x\n\ntool t {}\n\nagent a {}\n\n"
        "runtime r\nfact f: int\n"
    )


def test_one_blank_line_is_kept_inside_blocks_and_none_after_a_brace() -> None:
    text = "policy p {\n\n\n  allow a\n\n\n\n  allow b\n  allow c\n}\n"
    assert _fmt(text) == "policy p {\n  allow a\n\n  allow b\n  allow c\n}\n"


def test_strings_use_json_escapes_and_keep_non_ascii() -> None:
    text = 'connection c "tab\\t quote\\" \\u00e9 ✓ \\u0007"'
    assert _fmt(text) == 'connection c "tab\\t quote\\" é ✓ \\u0007"\n'


def test_string_parts_break_one_per_line_only_when_they_do_not_fit() -> None:
    short = 'tool t { summary "a" "b" }'
    assert '  summary "a" "b"\n' in _fmt(short)
    long = 'tool t { summary "' + "x" * 60 + '" "' + "y" * 40 + '" "z" }'
    assert _fmt(long) == (f'tool t {{\n  summary "{"x" * 60}"\n    "{"y" * 40}"\n    "z"\n}}\n')


@pytest.mark.parametrize(
    ("cond", "printed"),
    [
        ("a and b or c", "a and b or c"),
        ("a and (b or c)", "a and (b or c)"),
        ("(a and b) and c", "(a and b) and c"),
        ("a and (b and c)", "a and (b and c)"),
        ("(a or b) or c", "(a or b) or c"),
        ("not (a and b)", "not (a and b)"),
        ("not a == b", "not a == b"),
        ("(not a) and ((b))", "not a and b"),
        ("not not (a or b)", "not not (a or b)"),
        ("((a == 1))", "a == 1"),
    ],
)
def test_conditions_get_minimal_parentheses(cond: str, printed: str) -> None:
    text = f"policy p {{ allow x when {cond} }}"
    formatted = _fmt(text)
    assert f"allow x when {printed}\n" in formatted
    assert _tree(formatted) == _tree(text)


def test_a_tree_that_nests_and_inside_and_keeps_its_parentheses() -> None:
    a, b, c = (s.Path(n) for n in "abc")
    tree = s.Module((s.Tool(s.Name("t"), (s.Requires(s.And((s.And((a, b)), c))),)),))
    assert format_module(tree) == "tool t {\n  requires (a and b) and c\n}\n"


def test_short_option_blocks_go_on_one_line() -> None:
    text = (
        "policy p {\n"
        '  allow a { reason "r" }\n'
        '  ask b { approver role "x"; grant once ttl 1m }\n'
        '  ask c { approver role "x"; grant once ttl 1m; reason "r" }\n'
        "}\n"
        "tool t { operation o { effects read; input { a: int } } }\n"
    )
    assert _fmt(text) == (
        "policy p {\n"
        '  allow a { reason "r" }\n'
        '  ask b { approver role "x"; grant once ttl 1m }\n'
        "  ask c {\n"
        '    approver role "x"\n'
        "    grant once ttl 1m\n"
        '    reason "r"\n'
        "  }\n"
        "}\n"
        "\n"
        "tool t {\n"
        "  operation o {\n"
        "    effects read\n"
        "    input { a: int }\n"
        "  }\n"
        "}\n"
    )


def test_an_option_block_that_does_not_fit_opens() -> None:
    reason = "r" * 80
    formatted = _fmt(f'policy p {{ allow a {{ reason "{reason}" }} }}')
    assert formatted == f'policy p {{\n  allow a {{\n    reason "{reason}"\n  }}\n}}\n'


def test_lines_stay_within_100_columns_where_they_can() -> None:
    for path in _specs():
        for line in _fmt(path.read_text(encoding="utf-8")).splitlines():
            code = line.split("  #")[0] if "#" in line else line
            if '"' not in code:  # a single string literal may be longer than a line
                assert len(code) <= layout.WIDTH, (path.name, line)


def test_long_selector_lists_fill_lines_and_when_moves_down() -> None:
    selectors = ", ".join(f"tool_{i}.action" for i in range(8))
    text = f'policy p {{ deny {selectors} when actor.role == "auditor" and tool.risk >= medium }}'
    assert _fmt(text) == (
        "policy p {\n"
        "  deny tool_0.action, tool_1.action, tool_2.action, tool_3.action, tool_4.action,"
        " tool_5.action,\n"
        "      tool_6.action, tool_7.action\n"
        '      when actor.role == "auditor" and tool.risk >= medium\n'
        "}\n"
    )


def test_a_step_keeps_its_tails_after_broken_call_arguments() -> None:
    args = ", ".join(f"argument_{i}: input.value_{i}" for i in range(4))
    text = f"workflow w {{ step s = call some.tool({args}) after a when b == c {{ timeout 1d }} }}"
    assert _fmt(text) == (
        "workflow w {\n"
        "  step s = call some.tool(\n"
        "    argument_0: input.value_0,\n"
        "    argument_1: input.value_1,\n"
        "    argument_2: input.value_2,\n"
        "    argument_3: input.value_3,\n"
        "  ) after a when b == c { timeout 1d }\n"
        "}\n"
    )


def test_on_failure_chains_print_with_then() -> None:
    chain = 'retry 2 backoff 30s, then compensate r then escalate role "sre"'
    text = f"workflow w {{ step s = gate x {{ on_failure {chain} }} }}"
    printed = chain.replace(", then", " then")
    assert f"  step s = gate x {{ on_failure {printed} }}\n" in _fmt(text)


# ---------------------------------------------------------------------------------------------
# Comments


def test_comments_lead_trail_and_end_blocks() -> None:
    text = (
        "# leads the policy\n"
        "policy p {  # trails the brace\n"
        "  allow a    # trails a\n"
        "  # leads b\n"
        "  allow b\n"
        "  # ends the block\n"
        "}  # trails the policy\n"
        "# ends the file\n"
    )
    assert _fmt(text) == (
        "# leads the policy\n"
        "policy p {  # trails the brace\n"
        "  allow a  # trails a\n"
        "  # leads b\n"
        "  allow b\n"
        "  # ends the block\n"
        "}  # trails the policy\n"
        "# ends the file\n"
    )


def test_a_comment_inside_a_condition_moves_before_its_item() -> None:
    text = "policy p {\n  allow a when x # why x\n    and y\n}\n"
    assert _fmt(text) == "policy p {\n  # why x\n  allow a when x and y\n}\n"


def test_a_comment_after_a_rules_closing_brace_trails_the_rule() -> None:
    # The parser ends a rule's span at its last option, before the `}`.
    options = 'approver role "r"\n    grant once ttl 1m\n    reason "r"'
    text = f"policy p {{\n  ask a {{\n    {options}\n  }} # after the brace\n  allow b\n}}\n"
    assert (
        _fmt(text)
        == f"policy p {{\n  ask a {{\n    {options}\n  }}  # after the brace\n  allow b\n}}\n"
    )
    short = 'policy p {\n  deny a {\n    reason "r"\n  } # after the brace\n  allow b\n}\n'
    assert '  deny a { reason "r" }  # after the brace\n  allow b\n' in _fmt(short)


def test_a_comment_in_an_empty_option_block_stays_inside() -> None:
    text = "policy p {\n  default ask { # nothing yet\n  }\n  allow b {\n  # later\n  }\n}\n"
    assert _fmt(text) == (
        "policy p {\n  default ask {  # nothing yet\n  }\n  allow b {\n    # later\n  }\n}\n"
    )


def test_a_comment_on_the_line_of_an_open_brace_stays_there_and_keeps_silencing_it(
    tmp_path: Path,
) -> None:
    # `# harnessc: ignore[…]` silences its own line: moved into the block, it would silence
    # the first item instead and the finding on the tool's name would come back
    text = (
        "tool a.run { # harnessc: ignore[L014] internal tool\n"
        '  summary "Run the thing."\n  effects read\n}\n'
        "policy p {\n  default deny\n  allow a.run\n}\n"
    )
    formatted = _fmt(text)
    assert formatted.startswith("tool a.run {  # harnessc: ignore[L014] internal tool\n")
    assert _fmt(formatted) == formatted
    for version in (text, formatted):
        path = tmp_path / "a.harness"
        path.write_text(version, encoding="utf-8")
        assert pipeline.lint([path]).diagnostics == []


def test_trailing_comments_of_neighbouring_lines_align() -> None:
    text = (
        "tool t {\n  input {\n    a: int # one\n    long_name: string? # two\n\n"
        "    c: int # three\n  }\n}\n"
    )
    assert _fmt(text) == (
        "tool t {\n"
        "  input {\n"
        "    a: int              # one\n"
        "    long_name: string?  # two\n"
        "\n"
        "    c: int  # three\n"
        "  }\n"
        "}\n"
    )


def test_a_comment_forces_an_option_block_open() -> None:
    text = "tool t { operation o { effects read # why\n risk low } }"
    assert "  operation o {\n    effects read  # why\n    risk low\n  }\n" in _fmt(text)


def test_comment_whitespace_and_crlf_line_ends_are_normalized() -> None:
    text = "# a   \r\nconnection c # b\t\r\n"
    assert _fmt(text) == "# a\nconnection c  # b\n"


def test_a_file_of_comments_only_does_not_parse() -> None:
    result = format_source(Source("t.harness", "# only a comment\n"))
    assert result.text is None
    assert [d.code for d in result.diagnostics] == ["H006"]
