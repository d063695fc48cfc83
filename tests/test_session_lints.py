"""L020–L023 over models built directly (the surface syntax is parsed on the dsl branch)."""

from __future__ import annotations

from harnessc.compiler.lints import RULES, LintContext
from harnessc.compiler.resolve import Resolution
from harnessc.dsl.diagnostics import Diagnostic
from harnessc.runtime import model as m

from .session_specs import (
    MAIL_READ,
    PAY,
    TOOLS,
    arg,
    cmp,
    field,
    history,
    lit,
    prov,
    rule,
    spec_of,
    tool,
    var,
)


def lint(code: str, spec: m.Spec) -> list[Diagnostic]:
    return list(RULES[code].check(LintContext(spec, Resolution())))


def test_l020_a_label_no_tool_produces() -> None:
    spec = spec_of(
        rule("leak", "deny", "payments.send", history("seen", label="secret", window_ms=3_600_000)),
        rule("pii", "deny", "payments.send", history("seen", label="pii")),
        rule("from_secret", "deny", "mail.send", prov(arg("body"), "label", label="secret")),
    )
    found = lint("L020", spec)
    assert [d.message for d in found] == [
        "`seen(secret within 1h)` in `p.leak` never holds: no tool's result carries the label "
        "`secret`",
        "`args.body from label secret` in `p.from_secret` never holds: no tool's result carries "
        "the label `secret`",
    ]
    assert found[0].help is not None and "labels secret" in found[0].help
    # a nested output field labelled `secret` produces it
    nested = m.Field(
        name="meta",
        type=m.Type(name="object", fields=(field("token", labels=("secret",)),)),
    )
    vault = tool("vault.read", field("key"), output=(nested,))
    assert lint("L020", spec_of(*spec.policies["s.p"].rules, tools=(*TOOLS, vault))) == []


def test_l021_from_trusted_with_nothing_trusted() -> None:
    untrusted_only = (PAY, tool("crm.lookup", field("name"), output=(field("iban"),)))
    trusted_rule = rule("crm", "allow", "payments.send", prov(arg("iban"), "trusted"))
    [d] = lint("L021", spec_of(trusted_rule, tools=untrusted_only))
    assert d.message == (
        "`args.iban from trusted` in `p.crm`: no tool of this spec is trusted and no fact is "
        "declared"
    )
    # a trusted tool, a trusted output field, or a fact: no finding
    assert lint("L021", spec_of(trusted_rule)) == []
    assert lint("L021", spec_of(trusted_rule, tools=(PAY, MAIL_READ))) == []
    fact = m.Fact(name="payees", type=m.Type(name="list", item=m.Type(name="string")))
    assert lint("L021", spec_of(trusted_rule, tools=untrusted_only, facts={"payees": fact})) == []


def test_l022_untrusted_only_without_nowhere() -> None:
    untrusted = prov(arg("iban"), "untrusted", only=True)
    [d] = lint("L022", spec_of(rule("injected", "deny", "payments.send", untrusted)))
    assert d.message == (
        "`p.injected` refuses `args.iban` from untrusted data only; a made-up `args.iban` "
        "appeared nowhere and passes"
    )
    assert d.help == "add `or args.iban from nowhere`"
    covered = m.Or(items=(untrusted, prov(arg("iban"), "nowhere")))
    assert lint("L022", spec_of(rule("injected", "deny", "payments.send", covered))) == []
    # another rule of the policy may cover it; an ALLOW of `from nowhere` does not
    elsewhere = rule("made_up", "ask", "payments.send", prov(arg("iban"), "nowhere"))
    assert lint("L022", spec_of(rule("i", "deny", "payments.send", untrusted), elsewhere)) == []
    allow = rule("made_up", "allow", "payments.send", prov(arg("iban"), "nowhere"))
    assert len(lint("L022", spec_of(rule("i", "deny", "payments.send", untrusted), allow))) == 1
    # a negated test and an ALLOW are not refusals
    negated = rule("n", "deny", "payments.send", m.Not(item=untrusted))
    assert lint("L022", spec_of(negated, rule("a", "allow", "payments.send", untrusted))) == []


def test_l022_follows_a_quantifier_to_its_list() -> None:
    def each(source: str, only: bool = False) -> m.Quantified:
        body = prov(var("x"), source, only=only)
        return m.Quantified(quantifier="any", var="x", over=arg("to"), body=body)

    refuse = rule("to", "deny", "mail.send", each("untrusted", only=True))
    [d] = lint("L022", spec_of(refuse))
    assert d.help == "add `or x from nowhere`"
    assert (
        lint("L022", spec_of(refuse, rule("made_up", "deny", "mail.send", each("nowhere")))) == []
    )


def test_l023_history_of_tools_nobody_calls() -> None:
    spec = spec_of(
        rule("after", "deny", "payments.send", history("called", "files.delete")),
        rule(
            "burst",
            "deny",
            "payments.send",
            cmp(">", history("count", "nothing.here"), lit(1, "int")),
        ),
        rule("ok", "deny", "payments.send", history("called", "mail.read")),
    )
    hidden = m.Surface(
        name="s.all",
        expose=(m.Selector(kind="glob", value="mail.", text="mail.*"),),
    )
    spec = spec.model_copy(update={"surfaces": {"s.all": hidden}})
    found = lint("L023", spec)
    assert [d.message for d in found] == [
        "`called(files.delete)` in `p.after` counts calls of `files.delete`, which no agent, "
        "skill or workflow can call",
        "`count(nothing.here)` in `p.burst` selects no tool (`nothing.here`)",
    ]
    # with no agent and no workflow, who calls what is not known here: only the empty selection
    alone = spec_of(*spec.policies["s.p"].rules, agent=False)
    assert [d.message.split(" in ")[0] for d in lint("L023", alone)] == ["`count(nothing.here)`"]


def test_an_analysis_finding_names_the_session_state_of_its_example() -> None:
    from harnessc.compiler.analysis.policy import analyse_policies

    untrusted = prov(arg("iban"), "untrusted", only=True)
    big = cmp(">", arg("amount"), lit(100, "int"))
    spec = spec_of(
        rule("refuse", "deny", "payments.send", untrusted),
        rule("ask_big", "ask", "payments.send", m.And(items=(untrusted, big))),
        rule("ok", "allow", "payments.send"),
    )
    context = LintContext(spec, Resolution(), analyse_policies(spec))
    [d] = RULES["L001"].check(context)
    assert "with session: `args.iban from untrusted only` = true" in d.notes


def test_a_trusted_field_inside_a_list_of_records_is_a_trusted_source() -> None:
    """`people: list<{ email: string trusted }>` makes the tool a trusted source: no L021."""
    from harnessc.compiler.lints.session import _trusts

    person = m.Type(name="object", fields=(field("email", trust="trusted"),))
    people = field("people", m.Type(name="list", item=person))
    directory = tool("dir.find", field("name"), output=(people,))
    assert _trusts(directory)
    assert not _trusts(tool("dir.plain", field("name"), output=(field("email"),)))
