"""The policy analysis over session terms: provenance, quantified and history terms are
uninterpreted (one variable per canonical term), sound for shadowing; witnesses name them."""

from __future__ import annotations

from harnessc.compiler.analysis.concrete import Call, canonical, decide
from harnessc.compiler.analysis.policy import analyse_policies
from harnessc.compiler.analysis.text import session_lines, spec_text
from harnessc.runtime import model as m

from .session_specs import (
    MAIL_READ,
    PAY,
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


def kinds(spec: m.Spec) -> dict[str | None, str]:
    return {f.rule: f.kind for f in analyse_policies(spec).findings if f.kind != "default-allow"}


def test_shadowing_through_a_provenance_term_is_detected() -> None:
    untrusted = prov(arg("iban"), "untrusted", only=True)
    spec = spec_of(
        rule("refuse", "deny", "payments.send", untrusted),
        rule(
            "ask_big",
            "ask",
            "payments.send",
            m.And(items=(untrusted, cmp(">", arg("amount"), lit(100, "int")))),
        ),
        rule("ok", "allow", "payments.send"),
    )
    found = analyse_policies(spec)
    never = [f for f in found.findings if f.kind == "never-wins"]
    assert [f.rule for f in never] == ["p.ask_big"]
    assert never[0].other_rule == "p.refuse"
    # the witnesses of the winners set the session term as they need it, and re-judge the same
    refuse = found.witness("s.p", "p.refuse")
    ok = found.witness("s.p", "p.ok")
    assert refuse is not None and ok is not None and refuse.exact and ok.exact
    key = canonical(untrusted)
    assert refuse.call.session[key] is True
    assert ok.call.session[key] is False
    assert session_lines(refuse.call.session) == ["session: `args.iban from untrusted only` = true"]


def test_two_different_terms_are_not_conflated() -> None:
    spec = spec_of(
        rule("refuse", "deny", "payments.send", prov(arg("iban"), "untrusted", only=True)),
        rule("by_user", "allow", "payments.send", prov(arg("iban"), "user")),
        rule("by_crm", "allow", "payments.send", prov(arg("iban"), "trusted")),
        rule("memo", "allow", "payments.send", prov(arg("memo"), "user")),
    )
    found = analyse_policies(spec)
    assert kinds(spec) == {}
    for label in ("p.refuse", "p.by_user", "p.by_crm", "p.memo"):
        w = found.witness("s.p", label)
        assert w is not None and w.exact, label


def test_the_same_history_term_is_one_variable() -> None:
    count = history("count", "files.delete", window_ms=600_000)
    both = m.And(items=(cmp(">", count, lit(5, "int")), cmp("<", count, lit(3, "int"))))
    other = history("count", "files.delete", window_ms=60_000)
    spec = spec_of(
        rule("never", "deny", "files.delete", both),
        rule(
            "two",
            "deny",
            "files.delete",
            m.And(items=(cmp(">", count, lit(5, "int")), cmp("<", other, lit(3, "int")))),
        ),
        rule("ok", "allow", "files.delete"),
    )
    assert kinds(spec) == {"p.never": "unsatisfiable"}


def test_counts_and_lengths_are_never_negative_and_sums_are_free() -> None:
    spec = spec_of(
        rule(
            "neg_count",
            "deny",
            "files.delete",
            cmp("<", history("count", "files.delete"), lit(0, "int")),
        ),
        rule("neg_len", "deny", "mail.send", cmp("<", m.Length(of=arg("to")), lit(0, "int"))),
        rule(
            "neg_sum",
            "deny",
            "payments.send",
            cmp("<", history("sum", "payments.send", field=arg("amount")), lit(0, "int")),
        ),
        rule("ok", "allow", "payments.send"),
    )
    assert kinds(spec) == {"p.neg_count": "unsatisfiable", "p.neg_len": "unsatisfiable"}


def test_provenance_terms_of_one_value_obey_the_ledger() -> None:
    iban = arg("iban")
    spec = spec_of(
        # from nowhere and from user at once: impossible
        rule(
            "both",
            "deny",
            "payments.send",
            m.And(items=(prov(iban, "nowhere"), prov(iban, "user"))),
        ),
        # untrusted only, yet from user: impossible
        rule(
            "only",
            "deny",
            "payments.send",
            m.And(items=(prov(iban, "untrusted", only=True), prov(iban, "user"))),
        ),
        # untrusted only, yet not from untrusted: impossible
        rule(
            "implied",
            "deny",
            "payments.send",
            m.And(items=(prov(iban, "untrusted", only=True), m.Not(item=prov(iban, "untrusted")))),
        ),
        # from a label and untrusted only: possible
        rule(
            "label",
            "deny",
            "payments.send",
            m.And(items=(prov(iban, "untrusted", only=True), prov(iban, "label", label="pii"))),
        ),
        rule("ok", "allow", "payments.send"),
    )
    assert kinds(spec) == {
        "p.both": "unsatisfiable",
        "p.only": "unsatisfiable",
        "p.implied": "unsatisfiable",
    }


def test_an_absent_value_is_from_nothing() -> None:
    memo = arg("memo")  # optional
    spec = spec_of(
        rule(
            "nowhere",
            "deny",
            "payments.send",
            m.And(
                items=(
                    prov(memo, "nowhere"),
                    m.Not(item=cmp("has", m.Path(root="args"), m.EnumMember(name="memo"))),
                )
            ),
        ),
        rule("ok", "allow", "payments.send"),
    )
    assert kinds(spec) == {"p.nowhere": "unsatisfiable"}


def test_a_length_witness_has_that_many_items() -> None:
    spec = spec_of(
        rule("many", "deny", "mail.send", cmp(">", m.Length(of=arg("to")), lit(3, "int"))),
        rule("ok", "allow", "mail.send"),
    )
    w = analyse_policies(spec).witness("s.p", "p.many")
    assert w is not None and w.exact
    assert len(w.call.args["to"]) > 3


def test_quantified_and_seen_terms_get_witnesses_naming_them() -> None:
    every = m.Quantified(quantifier="all", var="x", over=arg("to"), body=prov(var("x"), "user"))
    seen = history("seen", label="secret", window_ms=3_600_000)
    spec = spec_of(
        rule("leak", "deny", "mail.send", m.And(items=(seen, m.Not(item=every)))),
        rule("ok", "allow", "mail.send", every),
    )
    found = analyse_policies(spec)
    w = found.witness("s.p", "p.leak")
    assert w is not None and w.exact
    assert session_lines(w.call.session) == [
        "session: `all x in args.to: x from user` = false",
        "session: `seen(secret within 1h)` = true",
    ]
    assert decide(spec, spec.policies["s.p"], w.call).rule == "p.leak"


def test_without_session_state_a_call_is_judged_as_in_an_empty_session() -> None:
    # no earlier event: a present value is from nowhere; count sees only this call
    spec = spec_of(
        rule("made_up", "deny", "payments.send", prov(arg("iban"), "nowhere")),
        rule(
            "burst",
            "deny",
            "files.delete",
            cmp(">=", history("count", "files.delete"), lit(1, "int")),
        ),
        rule("ok", "allow", "mail.send", prov(arg("body"), "user")),
    )
    policy = spec.policies["s.p"]
    assert (
        decide(spec, policy, Call("payments.send", {"iban": "x", "amount": 1})).rule == "p.made_up"
    )
    assert decide(spec, policy, Call("files.delete", {"path": "a"})).rule == "p.burst"
    assert decide(spec, policy, Call("mail.send", {"to": [], "body": "b"})).effect == "deny"


def test_spec_text_prints_every_new_node() -> None:
    assert spec_text(prov(arg("iban"), "untrusted", only=True)) == "args.iban from untrusted only"
    assert spec_text(prov(arg("body"), "label", label="secret")) == "args.body from label secret"
    q = m.Quantified(
        quantifier="any",
        var="u",
        over=m.Extract(func="urls", of=arg("body")),
        body=m.Or(
            items=(
                prov(var("u"), "untrusted", only=True),
                cmp("endswith", var("u"), lit("@evil.test")),
            )
        ),
    )
    assert (
        spec_text(q)
        == 'any u in urls(args.body): (u from untrusted only or u endswith "@evil.test")'
    )
    s = history(
        "sum",
        "payments.send",
        field=arg("amount"),
        window_ms=86_400_000,
        where=cmp("==", m.Path(root="result", parts=("status",)), lit("ok")),
    )
    assert spec_text(cmp(">=", s, lit(30000, "int"))) == (
        'sum(args.amount of payments.send within 1d when result.status == "ok") >= 30000'
    )
    assert spec_text(m.Length(of=arg("to"))) == "len(args.to)"
    assert spec_text(history("called", "payments.send")) == "called(payments.send)"
    assert spec_text(
        m.History(func="succeeded", selectors=(m.Selector(kind="glob", value="files."),))
    ) == ("succeeded(files.*)")
    assert spec_text(history("seen", label="secret")) == "seen(secret)"
    assert spec_text(m.Not(item=prov(arg("x"), "user"))) == "not args.x from user"


def test_a_deny_on_the_length_of_an_optional_list_fails_open() -> None:
    optional = m.Type(name="list", item=m.Type(name="string"), optional=True)
    send = tool("mail.send", field("to", optional), effects=("external",))
    spec = spec_of(
        rule("many", "deny", "mail.send", cmp(">", m.Length(of=arg("to")), lit(3, "int"))),
        rule("ok", "allow", "mail.send"),
        tools=(send,),
    )
    [finding] = [f for f in analyse_policies(spec).findings if f.kind == "absent-value"]
    assert finding.rule == "p.many" and "`args.to`" in finding.message
    assert finding.example is not None and "to" not in finding.example.call.args


def test_count_counts_the_call_being_decided() -> None:
    count = history("count", "files.delete")
    spec = spec_of(
        rule("zero", "deny", "files.delete", cmp("<", count, lit(1, "int"))),
        rule("other_tool", "deny", "payments.send", cmp("==", count, lit(0, "int"))),
        rule("ok", "allow", "files.delete"),
    )
    assert kinds(spec) == {"p.zero": "unsatisfiable"}


def test_the_availability_analysis_keeps_session_state_in_its_witnesses() -> None:
    from harnessc.compiler.analysis.availability import analyse_availability

    open_ = m.Fact(name="payments.open", type=m.Type(name="bool"))
    requires = cmp("==", m.Path(root="fact", parts=("payments.open",)), lit(True, "bool"))
    pay = PAY.model_copy(update={"requires": requires})
    untrusted = prov(arg("iban"), "untrusted", only=True)
    spec = spec_of(
        rule("refuse", "deny", "payments.send", untrusted),
        rule("ok", "allow", "payments.send"),
        tools=(pay, MAIL_READ),
        facts={"payments.open": open_},
    )
    found = analyse_availability(spec)
    assert found is not None
    w = found.witness("s.p", "p.refuse")
    assert w is not None and w.exact
    assert w.call.facts == {"payments.open": True}
    assert w.call.session[canonical(untrusted)] is True
