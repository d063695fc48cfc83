"""The grammar, the fast LALR engine and the syntax tree."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest
from harnessc.dsl import syntax as s
from harnessc.dsl.builder import build_lark, debug_tokens, engine
from harnessc.dsl.parser import parse_source
from harnessc.dsl.source import Source
from harnessc.runtime import model as m
from hypothesis import given
from hypothesis import strategies as st
from lark.exceptions import UnexpectedInput

from . import strategies
from .conftest import ROOT, update_goldens

SPECS = sorted([*ROOT.glob("examples/**/*.harness"), *ROOT.glob("stdlib/*.harness")])


def parse(text: str, path: str = "t.harness") -> s.Module:
    result = parse_source(Source(path, text))
    assert result.diagnostics == (), [d.message for d in result.diagnostics]
    return result.module


def test_grammar_is_conflict_free_in_strict_mode() -> None:
    # strict=True turns shift/reduce conflicts and same-priority regex collisions into errors.
    build_lark(strict=True)


@pytest.mark.parametrize("path", SPECS, ids=lambda p: str(p.relative_to(ROOT)))
def test_shipped_specs_parse_cleanly(path: Path) -> None:
    module = parse(path.read_text(encoding="utf-8"), str(path))
    assert module.items


@pytest.mark.parametrize("path", SPECS, ids=lambda p: str(p.relative_to(ROOT)))
def test_fast_engine_lexes_like_lark(path: Path) -> None:
    """The engine's contextual lexer makes exactly the token choices Lark's own would."""
    text = path.read_text(encoding="utf-8")
    ours = [(t.type, str(t)) for t in debug_tokens(Source(str(path), text)) if t.type != "COMMENT"]
    lark = build_lark()
    theirs = []
    parser = lark.parse_interactive(text)
    for token in parser.iter_parse():
        theirs.append((token.type, str(token)))
    assert ours == theirs


def test_every_construct_builds_its_node() -> None:
    module = parse(
        """
harness demo { version "1.0.0" summary "A demo." }
import std.risk
import "./other.harness" as other
connection github "GitHub account"
runtime calendar_app
fact workspace.root: path "the workspace root"
tool change.create {
  version 3
  effects write reversible idempotent
  risk medium
  timeout 1h30m
  packs change_management, release
  input { service: string pattern "^[a-z]+$", refs: list<string> min 1, note: string? }
  requires connected(github) and workspace.root startswith "/"
  operation draft { effects read; risk low }
}
tool legacy_tool { legacy replaced_by change.create }
tool dyn { dynamic provided_by calendar_app }
surface main { expose std.risk.*, change.create, mcp:scanner:*, pack:release, kind:mcp
  hide legacy_tool limit 20 rank { recall embedding top 60; rerank hybrid; prefer packs } }
policy p {
  default std.risk.defaults
  include std.risk.guardrails
  label_one: allow change.create, change.* when actor.role in ["engineer", "sre"]
  deny risk >= high { reason "no" instead "ask an operator" }
  ask effects has external { approver user "u-1"; grant class change.* when args.x == 1 ttl 10m }
}
risk_table table { low allow; high ask { approver role "owner"; grant once ttl 30m } }
mcp scanner { transport stdio "scan --json" tool "create-issue" { effects external } }
skill writer { profile p private tool render { effects write } subagent f { tools render } }
agent planner { persona "Engineer." surface main policy p delegate generic }
workflow w {
  agent planner
  input { service: string }
  step a = call change.create(service: input.service, refs: [input.service])
  step b = decide "Ship?" after a {
    options approve, reject; by role "security"; timeout 7d default reject
  }
  step c = gate env.window after b { timeout 1d }
  step d = delegate generic "Write a patch." { context a.change_id; output { patch: string } }
  step e = call change.create(service: "x") when b == approve {
    on_failure retry 2 backoff 30s, then compensate f then escalate role "sre"
  }
  step f = call change.create(service: "y") compensation
}
test "a test" {
  policy p
  call change.create(service: "x")
  as actor { role: "engineer", tenant: "acme" }
  resource { tenant: "acme" }
  facts { workspace.root: "/repo" }
  expect ask approver role "release-manager"
}
"""
    )
    kinds = [type(item).__name__ for item in module.items]
    assert kinds == [
        "Header", "Import", "Import", "Connection", "Runtime", "Fact", "Tool", "Tool", "Tool",
        "Surface", "Policy", "RiskTable", "Mcp", "Skill", "Agent", "Workflow", "Test",
    ]  # fmt: skip
    policy = module.items[10]
    assert isinstance(policy, s.Policy)
    rule = policy.items[2]
    assert isinstance(rule, s.Rule)
    assert rule.label == s.Name("label_one")
    assert rule.selectors == (s.Pattern("change.create"), s.Pattern("change.*"))
    assert rule.when == s.Compare(
        s.Path("actor.role"), "in", s.ListLit((s.Str(("engineer",)), s.Str(("sre",))))
    )
    assert isinstance(policy.items[3].selectors[0], s.RiskSelector)
    workflow = module.items[15]
    assert isinstance(workflow, s.Workflow)
    step_e = workflow.items[6]
    assert isinstance(step_e, s.Step)
    on_failure = step_e.options[0]  # type: ignore[index]
    assert [a.kind for a in on_failure.actions] == ["retry", "compensate", "escalate"]
    assert module.items[12].items[1].quoted  # type: ignore[union-attr]


def test_keys_may_be_keywords_and_keywords_stay_names_elsewhere() -> None:
    module = parse("tool t { input { pattern: string, default: int default 3, min: int min 1 } }")
    tool = module.items[0]
    schema = tool.items[0].schema  # type: ignore[union-attr]
    assert [f.name.text for f in schema.fields] == ["pattern", "default", "min"]
    assert schema.fields[1].constraints == (s.Constraint("default", s.Int(3)),)
    # `risk` is a keyword inside a tool, but an ordinary name inside a condition.
    module = parse("policy p { default deny allow t when args.risk == risk }")
    rule = module.items[0].items[1]  # type: ignore[union-attr]
    assert rule.when == s.Compare(s.Path("args.risk"), "==", s.Path("risk"))


def test_an_operator_after_an_operand_and_a_name_at_the_start_of_one() -> None:
    module = parse('policy p { allow t when args.file endswith ".py" and args.x == endswith }')
    rule = module.items[0].items[0]  # type: ignore[union-attr]
    assert rule.when == s.And(
        (
            s.Compare(s.Path("args.file"), "endswith", s.Str((".py",))),
            s.Compare(s.Path("args.x"), "==", s.Path("endswith")),
        )
    )


def test_spans_underline_what_the_user_wrote() -> None:
    text = 'policy p {\n  allow change.create when actor.role == "sre"\n}\n'
    module = parse(text)
    rule = module.items[0].items[0]  # type: ignore[union-attr]
    assert rule.selectors[0].span.text == "change.create"
    assert rule.when.span.text == 'actor.role == "sre"'
    assert (rule.span.line, rule.span.column) == (2, 3)
    assert module.items[0].span.text == text.rstrip("\n")


def test_spans_never_take_part_in_equality() -> None:
    a = parse("connection github")
    b = parse("\n\n   connection    github  # linked\n")
    assert a == b
    assert a.items[0].span != b.items[0].span


def test_adjacent_strings_join_and_keep_their_parts() -> None:
    module = parse('tool t { summary "first " "second" }')
    summary = module.items[0].items[0].values[0]  # type: ignore[union-attr]
    assert summary.value == "first second"
    assert summary.parts == ("first ", "second")


def test_durations_have_values() -> None:
    module = parse("tool t { timeout 1h30m }")
    duration = module.items[0].items[0].values[0]  # type: ignore[union-attr]
    assert duration.ms == 90 * 60 * 1000


_UNITS = sorted(set(s.DURATION_UNITS) | set(m.DURATION_UNITS))


@given(st.lists(st.tuples(st.integers(0, 10**9), st.sampled_from(_UNITS)), min_size=1, max_size=5))
def test_the_dsl_and_the_runtime_read_a_duration_alike(parts: list[tuple[int, str]]) -> None:
    # the dsl keeps its own copy of the units (it may not import the runtime): never apart
    assert list(s.DURATION_UNITS.items()) == list(m.DURATION_UNITS.items())
    text = "".join(f"{n}{unit}" for n, unit in parts)
    assert re.fullmatch(m.DURATION_PATTERN, text)
    assert s.DURATION_PART.findall(text) == m.DURATION_PART.findall(text)
    assert s.duration_ms(text) == m.parse_duration(text)


@given(strategies.durations)
def test_a_parsed_duration_is_worth_what_the_runtime_reads(duration: s.Duration) -> None:
    parsed = parse(f"tool t {{ timeout {duration.text} }}").items[0].items[0].values[0]  # type: ignore[union-attr]
    assert parsed.ms == m.parse_duration(duration.text)


def test_comments_are_kept_with_their_spans() -> None:
    module = parse("# head\ntool t { # inside\n}\n# tail\n")
    assert [c.text for c in module.comments] == ["# head", "# inside", "# tail"]
    assert module.comments[1].span.line == 2


def test_reserved_words_per_parser_state_are_as_recorded() -> None:
    """Where a name may stand, which keywords would be read as keywords instead.

    The table is recorded in tests/syntax/reserved_words.txt and summarised in
    docs/language.md; a grammar change that reserves a word somewhere new shows up here.
    """
    e = engine()
    name_like = {"NAME", "DOTTED"}
    by_keyword: dict[str, set[str]] = {}
    for accepts in e.state_accepts.values():
        if not accepts & name_like:
            continue
        reserved = {k for k, t in e.keyword_types.items() if t in accepts}
        context = ",".join(sorted(t for t in accepts if t in ("NAME", "DOTTED", "KEY")))
        for keyword in reserved:
            by_keyword.setdefault(keyword, set()).add(context)
    lines = [f"{k}: {len(v)} state kind(s)" for k, v in sorted(by_keyword.items())]
    golden = ROOT / "tests" / "syntax" / "reserved_words.txt"
    text = "\n".join(lines) + "\n"
    if update_goldens():
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8")
    # Words the language reserves everywhere a value may stand.
    for word in ("true", "false", "not"):
        assert word in by_keyword


def test_lark_itself_rejects_what_the_engine_rejects() -> None:
    lark = build_lark()
    with pytest.raises(UnexpectedInput):
        lark.parse("tool t { risk }")
    assert parse_source(Source("t", "tool t { risk }")).diagnostics


BIG = "9" * 5000


@pytest.mark.parametrize(
    ("text", "underlined", "message"),
    [
        ("tool t { version 9223372036854775808 }", "9223372036854775808", "integer"),
        (f"tool t {{ input {{ a: int min {BIG} }} }}", BIG, "integer"),
        (f"policy p {{ allow t when args.a < -{BIG} }}", f"-{BIG}", "integer"),
        ("policy p { allow t when args.f < 1.0e999 }", "1.0e999", "number"),
        (f"tool t {{ input {{ f: float max {BIG}.0 }} }}", f"{BIG}.0", "number"),
        ("tool t { timeout 106751991168d }", "106751991168d", "duration"),
        (f"tool t {{ timeout {BIG}h1m }}", f"{BIG}h1m", "duration"),
    ],
    ids=["int64", "int-huge", "int-negative", "float-exponent", "float-digits", "days", "hours"],
)
def test_numbers_out_of_range_are_h111(text: str, underlined: str, message: str) -> None:
    result = parse_source(Source("t.harness", text))
    [d] = result.diagnostics
    assert d.code == "H111"
    assert d.message.startswith(f"the {message} `") and d.message.endswith("` is too large")
    assert len(d.message) < 80
    assert d.primary is not None and d.primary.span.text == underlined


def test_the_largest_numbers_are_accepted() -> None:
    text = (
        "tool t { version 9223372036854775807; timeout 106751991167d\n"
        "  input { f: float max 1.7e308, a: int min -9223372036854775807 } }"
    )
    assert parse_source(Source("t.harness", text)).diagnostics == ()


def test_a_lone_surrogate_escape_is_h105() -> None:
    # valid JSON, but no character: the build could not write it as UTF-8
    result = parse_source(Source("t.harness", 'connection c "a\\ud800b"'))
    [d] = result.diagnostics
    assert d.code == "H105" and d.primary is not None
    assert d.primary.span.text == '"a\\ud800b"'
    assert parse_source(Source("t.harness", 'connection c "\\ud83d\\ude00"')).diagnostics == ()


def _is_string_literal(text: str) -> bool:
    """A string literal by its definition: quotes around characters other than a quote, a
    backslash or a line break, and backslash escapes of any character but `\\n`."""
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        return False
    i, end = 1, len(text) - 1
    while i < end:
        if text[i] == "\\":
            if i + 1 >= len(text) or text[i + 1] == "\n":
                return False
            i += 2
        elif text[i] in '"\n\r':
            return False
        else:
            i += 1
    return i == end


@functools.cache
def _string_terminal() -> re.Pattern[str]:
    (terminal,) = [t for t in build_lark().terminals if t.name == "STRING"]
    return re.compile(terminal.pattern.to_regexp())


@given(st.text(alphabet='a"\\\n\ré ', max_size=12))
def test_the_string_terminal_is_the_string_literal_and_nothing_else(body: str) -> None:
    # written as a loop of runs (`[^"\\]*(?:\\.[^"\\]*)*`), not of single characters: Python's
    # `re` then lexes a long string many times faster, with the same meaning
    pattern = _string_terminal()  # built once: a Lark build per example was most of its time
    for text in (body, f'"{body}"'):
        assert (pattern.fullmatch(text) is not None) == _is_string_literal(text), repr(text)


@pytest.mark.parametrize(
    ("text", "message", "underlined_line"),
    [
        # the tool's `}` went to the schema: the schema's brace is the one left open
        ("tool t {\n  effects read\n  input {\n    a: string\n}\n", "`input` schema", 3),
        ("tool t {\n  input {\n    a: string\n}\n\ntool u {\n}\n", "`input` schema", 2),
        # the schema is closed where its indentation says: the tool is the block left open
        ("tool t {\n  effects read\n  input {\n    a: string\n  }\n", "tool `t`", 1),
        # a one-line schema closed on its line is not taken for the tool's end
        ("tool t {\n  input { a: string }\n\ntool u {\n}\n", "tool `t`", 1),
    ],
)
def test_an_unclosed_block_is_the_one_its_indentation_leaves_open(
    text: str, message: str, underlined_line: int
) -> None:
    result = parse_source(Source("t.harness", text))
    (error,) = [d for d in result.diagnostics if d.code == "H102"]
    assert error.message == f"{message} is never closed"
    assert error.primary is not None
    assert error.primary.span.text == "{"
    assert error.primary.span.line == underlined_line


def test_nodes_compare_hash_and_show_their_fields_never_their_span() -> None:
    """Syntax nodes share one equality, hash and repr (`syntax.Node`): over their fields, as
    `dataclass` generates them, leaving out spans (and a module's comments); and frozen."""
    text = 'tool a.b {\n  summary "d"\n  effects read\n}\n'
    one = parse(text)
    other = parse("# a comment\n\n" + text.replace("  ", "    "))
    assert one == other and hash(one) == hash(other)
    assert one.items[0].span != other.items[0].span and one.comments != other.comments
    assert one != parse(text.replace('"d"', '"e"'))
    name = s.Name("x")
    assert name == s.Name("x", span=one.items[0].span) and name != s.Pattern("x")
    assert {name, s.Name("x")} == {name} and (name == "x") is False
    assert repr(name) == "Name(text='x')"
    assert repr(s.Module(())) == "Module(items=(), comments=(), broken=(), sizes=(0, 0))"
    with pytest.raises(AttributeError):
        name.text = "y"  # type: ignore[misc]
