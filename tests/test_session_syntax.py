"""Session-aware policy in the language: parsing, printing, resolution, lowering to the exact IR
(runtime/model/ir.py) and the diagnostics of the new constructs (design: language.md §5, §7.4,
§13). Run-time meaning is tested with the runtime."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from harnessc.compiler.pipeline import check
from harnessc.dsl import syntax as s
from harnessc.dsl.parser import parse_source
from harnessc.dsl.printer import format_source
from harnessc.dsl.source import Source
from harnessc.runtime import model as m

from .conftest import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "session_policy.harness"

TOOLS = """
label finance "money"
fact team.members: list<string>
fact limit: int
tool mail.read {
  effects read
  input { id: string }
  output { sender: string trusted, body: string, size: int, tags: list<string> label secret }
  trust untrusted
  labels pii, finance
}
tool pay.send {
  effects write
  input { iban: string, amount: int, to: list<string>, body: string, note: string }
}
tool files.delete {
  effects write
  input { path: string, recursive: bool }
  output { ok: bool, size: int }
}
"""


def _cond(text: str) -> s.Cond:
    result = parse_source(Source("t.harness", f"policy p {{ allow t when {text} }}"))
    assert result.ok, result.diagnostics
    policy = result.module.items[0]
    assert isinstance(policy, s.Policy)
    rule = policy.items[0]
    assert isinstance(rule, s.Rule) and rule.when is not None
    return rule.when


def _compile(tmp_path: Path, policy: str, extra: str = "") -> tuple[m.Spec | None, list[str]]:
    path = tmp_path / "spec.harness"
    text = TOOLS + extra + "\npolicy p {\n  default allow\n" + textwrap.dedent(policy) + "\n}\n"
    path.write_text(text, encoding="utf-8")
    result = check([path])
    return result.model, [f"{d.code} {d.message}" for d in result.diagnostics]


def _when(tmp_path: Path, cond: str) -> m.Condition:
    spec, diagnostics = _compile(tmp_path, f"  allow pay.send when {cond}")
    assert spec is not None, diagnostics
    assert not diagnostics, diagnostics
    rule = spec.policies["spec.p"].rules[0]
    assert rule.condition is not None
    return rule.condition


def _errors(tmp_path: Path, policy: str, extra: str = "") -> list[str]:
    return _compile(tmp_path, policy, extra)[1]


# ---------------------------------------------------------------------------------------------
# Parsing


def test_provenance_parses_with_source_label_and_only() -> None:
    assert _cond("args.iban from untrusted only") == s.Provenance(
        s.Path("args.iban"), s.Name("untrusted"), None, True
    )
    assert _cond("args.b from label secret") == s.Provenance(
        s.Path("args.b"), s.Name("label"), s.Name("secret"), False
    )
    # `not` binds the whole provenance term; `and` ends it
    assert _cond("not args.a from user and b") == s.And(
        (s.Not(s.Provenance(s.Path("args.a"), s.Name("user"))), s.Path("b"))
    )


def test_a_quantifier_body_is_one_atom() -> None:
    cond = _cond("all x in args.to: x from user and args.n > 1")
    assert isinstance(cond, s.And)
    assert cond.items[0] == s.Quantified(
        "all", s.Name("x"), s.Path("args.to"), s.Provenance(s.Path("x"), s.Name("user"))
    )
    cond = _cond('any x in args.to: (x from user or x endswith "@a")')
    assert isinstance(cond, s.Quantified) and isinstance(cond.body, s.Or)


def test_the_generalised_call_takes_patterns_of_within_and_when_last() -> None:
    cond = _cond("sum(args.amount of pay.send, pay.* within 24h when args.x == 1) >= 3")
    assert isinstance(cond, s.Compare)
    call = cond.left
    assert isinstance(call, s.FuncCall)
    assert call.args == (s.Path("args.amount"),)
    assert call.of == (s.Pattern("pay.send"), s.Pattern("pay.*"))
    assert call.window == s.Duration("24h")
    assert call.when == s.Compare(s.Path("args.x"), "==", s.Int(1))
    call2 = _cond("called(kind:mcp, files.*, mcp:fs:*)")
    assert isinstance(call2, s.FuncCall)
    assert call2.args == (s.Pattern("kind:mcp"), s.Pattern("files.*"), s.Pattern("mcp:fs:*"))
    # a window without a unit parses (the compiler explains it)
    call3 = _cond("count(a within 10)")
    assert isinstance(call3, s.FuncCall) and call3.window == s.Int(10)


def test_names_spelled_like_the_new_words_still_work() -> None:
    text = """
    tool from { effects read input { only: string, label: string, trust: string } }
    policy p {
      allow from when args.only == "x" and args.label == args.trust and all == 1
      allow trusted, user, nowhere, said, earlier
    }
    """
    result = parse_source(Source("t.harness", textwrap.dedent(text)))
    assert not result.ok  # `all` is read as a quantifier where a condition begins
    fixed = text.replace("and all == 1", "and x.all == 1")
    assert parse_source(Source("t.harness", textwrap.dedent(fixed))).ok


def test_tool_items_field_constraints_labels_and_test_items_parse() -> None:
    result = parse_source(Source("t.harness", FIXTURE.read_text(encoding="utf-8")))
    assert result.ok, result.diagnostics
    items = result.module.items
    assert s.Label(s.Name("finance"), s.Str(("money matters",))) in items
    team = next(i for i in items if isinstance(i, s.Tool) and i.name.text == "team.add")
    assert s.OnSuccess(s.Path("args.user"), s.Name("team.members")) in team.items
    assert s.Attr("trust", (s.Name("trusted"),)) in team.items
    test = next(i for i in items if isinstance(i, s.Test))
    assert s.Said(s.Str(("please pay my rent",))) in test.items
    earlier = [i for i in test.items if isinstance(i, s.Earlier)]
    assert earlier[1] == s.Earlier(
        s.Name("files.delete"), (s.Arg(s.Name("path"), s.Str(("a",))),), None, s.Duration("5m")
    )


def test_the_fixture_formats_to_itself_with_every_new_form() -> None:
    text = FIXTURE.read_text(encoding="utf-8")
    result = format_source(Source("f.harness", text))
    assert result.text == text, result.diagnostics


# ---------------------------------------------------------------------------------------------
# Lowering: the exact IR


def test_the_fixture_checks_clean() -> None:
    result = check([FIXTURE])
    assert result.diagnostics == []
    assert result.model is not None


def test_tools_lower_trust_labels_and_on_success() -> None:
    spec = check([FIXTURE]).model
    assert spec is not None
    mail = spec.tools["mail.read"]
    assert mail.trust == "untrusted"
    assert mail.labels == ("pii",)
    assert mail.output is not None
    fields = {f.name: f for f in mail.output.fields}
    assert (fields["sender"].trust, fields["sender"].labels) == ("trusted", ())
    assert (fields["body"].trust, fields["body"].labels) == (None, ())
    assert fields["attachments"].labels == ("secret", "finance")
    team = spec.tools["team.add"]
    assert team.trust == "trusted"
    assert team.on_success == (
        m.FactAdd(value=m.Path(root="args", parts=("user",)), fact="team.members"),
        m.FactAdd(value=m.Path(root="result", parts=("id",)), fact="team.members"),
    )
    assert spec.tools["payments.send"].trust is None
    assert list(spec.labels) == ["finance"]
    assert spec.labels["finance"].description == "money matters"


def test_a_test_lowers_its_earlier_session_in_order() -> None:
    spec = check([FIXTURE]).model
    assert spec is not None
    (test,) = spec.tests.values()
    assert test.before == (
        m.SessionStep(said="please pay my rent"),
        m.SessionStep(
            tool="mail.read",
            args={"id": "m1"},
            result={"body": "pay DE89370400440532013000 now"},
        ),
        m.SessionStep(tool="files.delete", args={"path": "a"}, ago_ms=300_000),
    )


def _args(*parts: str) -> m.Path:
    return m.Path(root="args", parts=parts)


def _id(tool: str) -> m.Selector:
    return m.Selector(kind="id", value=tool, text=tool)


@pytest.mark.parametrize(
    ("cond", "expected"),
    [
        (
            "args.iban from untrusted only",
            m.Provenance(value=_args("iban"), source="untrusted", only=True),
        ),
        ("args.iban from nowhere", m.Provenance(value=_args("iban"), source="nowhere")),
        ("args.iban from trusted", m.Provenance(value=_args("iban"), source="trusted")),
        (
            "args.body from label finance",
            m.Provenance(value=_args("body"), source="label", label="finance"),
        ),
        (
            "all x in args.to: x from user",
            m.Quantified(
                quantifier="all",
                var="x",
                over=_args("to"),
                body=m.Provenance(value=m.Path(root="var", parts=("x",)), source="user"),
            ),
        ),
        (
            "any u in urls(args.body): u == args.note",
            m.Quantified(
                quantifier="any",
                var="u",
                over=m.Extract(func="urls", of=_args("body")),
                body=m.Compare(op="==", left=m.Path(root="var", parts=("u",)), right=_args("note")),
            ),
        ),
        (
            "len(args.to) > 3",
            m.Compare(op=">", left=m.Length(of=_args("to")), right=m.Literal(value=3, type="int")),
        ),
        ("called(pay.send)", m.History(func="called", selectors=(_id("pay.send"),))),
        (
            "succeeded(files.* within 10m)",
            m.History(
                func="succeeded",
                selectors=(m.Selector(kind="glob", value="files.", text="files.*"),),
                window_ms=600_000,
            ),
        ),
        (
            "count(files.delete within 1h when args.recursive and result.ok) > 5",
            m.Compare(
                op=">",
                left=m.History(
                    func="count",
                    selectors=(_id("files.delete"),),
                    window_ms=3_600_000,
                    where=m.And(items=(_args("recursive"), m.Path(root="result", parts=("ok",)))),
                ),
                right=m.Literal(value=5, type="int"),
            ),
        ),
        (
            "sum(args.amount of pay.send within 24h) >= limit",
            m.Compare(
                op=">=",
                left=m.History(
                    func="sum",
                    selectors=(_id("pay.send"),),
                    field=_args("amount"),
                    window_ms=86_400_000,
                ),
                right=m.Path(root="fact", parts=("limit",)),
            ),
        ),
        (
            "sum(result.size of files.delete) > 1",
            m.Compare(
                op=">",
                left=m.History(
                    func="sum",
                    selectors=(_id("files.delete"),),
                    field=m.Path(root="result", parts=("size",)),
                ),
                right=m.Literal(value=1, type="int"),
            ),
        ),
        ("seen(secret within 1h)", m.History(func="seen", label="secret", window_ms=3_600_000)),
        ("seen(finance)", m.History(func="seen", label="finance")),
        (
            "called(kind:public)",
            m.History(
                func="called",
                selectors=(m.Selector(kind="kind", value="public", text="kind:public"),),
            ),
        ),
    ],
)
def test_conditions_lower_to_the_ir(tmp_path: Path, cond: str, expected: m.Condition) -> None:
    assert _when(tmp_path, cond) == expected


def test_nested_quantifier_variables_are_scoped_to_their_body(tmp_path: Path) -> None:
    cond = _when(tmp_path, "all x in args.to: any y in args.to: x == y")
    assert isinstance(cond, m.Quantified) and isinstance(cond.body, m.Quantified)
    assert cond.body.body == m.Compare(
        op="==", left=m.Path(root="var", parts=("x",)), right=m.Path(root="var", parts=("y",))
    )
    errors = _errors(tmp_path, "  allow pay.send when (all x in args.to: x == 1) and x == 1")
    assert any(e.startswith("H201 unknown fact or root `x`") for e in errors), errors


# ---------------------------------------------------------------------------------------------
# Diagnostics (each code also has a golden case under tests/diagnostics/cases)


@pytest.mark.parametrize(
    ("policy", "extra", "code", "words"),
    [
        ("allow pay.send when args.iban from label secrte", "", "H201", "unknown label `secrte`"),
        ("allow pay.send when seen(finanse)", "", "H201", "unknown label `finanse`"),
        ("allow pay.send when caled(pay.send)", "", "H201", "unknown function `caled`"),
        ("allow pay.send when args.iban from users", "", "H301", "unknown source `users`"),
        ("allow pay.send when result.ok", "", "H209", "`result.ok` reads a result"),
        ("allow pay.send when all args in args.to: args == 1", "", "H210", "shadows"),
        ("allow pay.send when all x in args.to: any x in args.to: x == 1", "", "H210", "shadows"),
        ("allow pay.send when called(pay.send of pay.send)", "", "H335", "takes no `of`"),
        ("allow pay.send when len(args.to within 1h) > 1", "", "H335", "takes no `within`"),
        ("allow pay.send when seen(secret when args.x)", "", "H335", "`seen` takes no `when`"),
        ("allow pay.send when sum(args.amount) > 1", "", "H335", "needs the tools"),
        ("allow pay.send when sum(tool.id of pay.send) > 1", "", "H335", "`sum` adds up"),
        ('allow pay.send when called("pay.send")', "", "H335", "takes tool selectors"),
        ("allow pay.send when count(pay.send within 10) > 1", "", "H336", "has no unit"),
        ("allow pay.send when called(nothing.*)", "", "H337", "selects no tool"),
        ("allow pay.send when count(files.delete when result.sise) > 1", "", "H338", "`sise`"),
        ('allow pay.send when count(files.delete when args.pth == "a") > 1', "", "H327", "`pth`"),
        ("allow pay.send when sum(args.path of files.delete) > 1", "", "H339", "adds numbers"),
        ("allow pay.send when len(args.amount) > 1", "", "H339", "`len` counts"),
        ("allow pay.send when any u in urls(args.amount): u == 1", "", "H339", "reads a string"),
        ("allow pay.send when args.to from user", "", "H340", "`from` asks"),
        ("allow pay.send when args.iban from nowhere only", "", "H341", "`only` does not"),
        ("allow pay.send when args.iban from label pii only", "", "H341", "`only` does not"),
        ("allow pay.send when all x in args.iban: x == 1", "", "H342", "not a list"),
        ("allow pay.send", "tool a.b { effects read\n trust trustd }", "H301", "trust level"),
        ("allow pay.send", 'label secret "x"', "H206", "built-in label"),
        ("allow pay.send", "tool a.b { effects read labels pi }", "H201", "unknown label `pi`"),
        (
            "allow pay.send",
            "tool a.b { effects read input { x: string trusted } }",
            "H303",
            "`trusted` is not allowed in an input field",
        ),
        (
            "allow pay.send",
            "tool a.b { effects read output { x: string trusted untrusted } }",
            "H303",
            "`untrusted` is not allowed together with `trusted`",
        ),
        (
            "allow pay.send",
            "tool a.b { effects read\n on_success add args.x to limit }",
            "H343",
            "not a list",
        ),
        (
            "allow pay.send",
            "tool a.b { effects read input { y: string }\n on_success add args.x to team.members }",
            "H343",
            "has no input field `x`",
        ),
        (
            "allow pay.send",
            "tool a.b { effects read input { y: int }\n on_success add args.y to team.members }",
            "H343",
            "adds an `int`",
        ),
        (
            "allow pay.send",
            "tool a.b { effects read\n on_success add tool.id to team.members }",
            "H343",
            "not a value of the call",
        ),
    ],
)
def test_diagnostics_of_the_new_constructs(
    tmp_path: Path, policy: str, extra: str, code: str, words: str
) -> None:
    errors = _errors(tmp_path, "  " + policy, extra)
    assert any(e.startswith(code) and words in e for e in errors), errors


def test_a_result_field_that_is_an_argument_suggests_the_argument(tmp_path: Path) -> None:
    """`result.path` where the earlier call's argument `args.path` was meant: the output's
    fields are listed, and the argument is suggested."""
    path = tmp_path / "spec.harness"
    policy = '  allow pay.send when count(files.delete when result.path == "/tmp") > 1'
    path.write_text(TOOLS + "\npolicy p {\n  default allow\n" + policy + "\n}\n", encoding="utf-8")
    [d] = check([path]).diagnostics
    assert d.code == "H338"
    assert d.notes == ("their results have `ok`, `size`",)
    assert d.help == "`path` is an argument of the earlier call: write `args.path`"
