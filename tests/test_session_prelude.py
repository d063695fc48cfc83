"""The session before a witness call: steps that give its session terms their values, or an
honest reason why none can be built."""

from __future__ import annotations

from typing import Any

from harnessc.compiler import pipeline
from harnessc.compiler.analysis.concrete import Call, canonical
from harnessc.compiler.analysis.policy import analyse_policies
from harnessc.compiler.analysis.prelude import session_prelude
from harnessc.compiler.analysis.text import prelude_text
from harnessc.compiler.testing import render_run, run_spec_tests
from harnessc.runtime import model as m

from .conftest import ROOT
from .session_specs import (
    PAY,
    SEND,
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

IBAN = "DE89370400440532013000"
PAYMENT = {"iban": IBAN, "amount": 100}


def call(tool_id: str, args: dict[str, Any], *terms: tuple[m.Condition, Any]) -> Call:
    return Call(tool_id, args, session={canonical(t): v for t, v in terms})


def test_untrusted_only_is_an_earlier_untrusted_result_holding_the_value() -> None:
    spec = spec_of()
    term = prov(arg("iban"), "untrusted", only=True)
    p = session_prelude(spec, call("payments.send", PAYMENT, (term, True)))
    assert p.missing is None
    assert prelude_text(p.steps) == [
        f'earlier mail.read(id: "x") returns {{"sender": "x", "body": "{IBAN}"}}'
    ]
    # the trusted `sender` field is not used: its data is trusted
    assert p.steps[0].result == {"sender": "x", "body": IBAN}


def test_from_user_is_a_message_quoting_the_value_and_a_short_one_is_refused() -> None:
    spec = spec_of()
    term = prov(arg("iban"), "user")
    p = session_prelude(spec, call("payments.send", PAYMENT, (term, True)))
    assert [s.said for s in p.steps] == [IBAN]
    short = session_prelude(spec, call("payments.send", {"iban": "x", "amount": 1}, (term, True)))
    assert short.steps == [] and short.missing is not None
    assert "too short" in short.missing


def test_from_trusted_uses_a_trusted_tool_and_nowhere_needs_no_step() -> None:
    spec = spec_of()
    trusted = prov(arg("iban"), "trusted")
    nowhere = prov(arg("iban"), "nowhere")
    p = session_prelude(spec, call("payments.send", PAYMENT, (trusted, True), (nowhere, False)))
    assert [(s.tool, s.result) for s in p.steps] == [("crm.lookup", {"iban": IBAN})]
    empty = session_prelude(spec, call("payments.send", PAYMENT, (nowhere, True)))
    assert empty.steps == [] and empty.missing is None
    # `not from nowhere` alone: some source, untrusted first
    some = session_prelude(spec, call("payments.send", PAYMENT, (nowhere, False)))
    assert [s.tool for s in some.steps] == ["mail.read"]


def test_a_value_in_the_facts_is_trusted_and_cannot_be_untrusted_only() -> None:
    spec = spec_of()
    c = call("payments.send", PAYMENT, (prov(arg("iban"), "untrusted", only=True), True))
    c.facts = {"payees": [IBAN]}
    p = session_prelude(spec, c)
    assert p.steps == [] and p.missing is not None
    assert "`args.iban from untrusted only` = false" in p.missing


def test_no_tool_of_that_trust_is_said_honestly() -> None:
    spec = spec_of(tools=(PAY, tool("web.fetch", field("url"), output=(field("body"),))))
    p = session_prelude(spec, call("payments.send", PAYMENT, (prov(arg("iban"), "trusted"), True)))
    assert p.missing == f'no trusted tool has a text output field to return "{IBAN}" in'


def test_count_is_that_many_earlier_calls_this_one_included() -> None:
    spec = spec_of()
    count = history("count", "files.delete", window_ms=600_000)
    p = session_prelude(spec, call("files.delete", {"path": "a"}, (count, 6)))
    assert p.missing is None
    assert [s.tool for s in p.steps] == ["files.delete"] * 5
    # a count the call under test already exceeds
    other = session_prelude(spec, call("files.delete", {"path": "a"}, (count, 0)))
    assert other.missing is not None and "below what this call counts" in other.missing


def test_count_with_when_uses_calls_that_meet_it_or_says_none_can() -> None:
    recursive = field("recursive", m.Type(name="bool"))
    rm = tool("files.rm", field("path"), recursive, effects=("write",))
    spec = spec_of(tools=(rm,))
    where = cmp("==", arg("recursive"), lit(True, "bool"))
    count = history("count", "files.rm", where=where)
    p = session_prelude(spec, call("files.rm", {"path": "a", "recursive": False}, (count, 2)))
    # the sample call (recursive: false) does not meet `when`; a call solved from it does
    assert p.missing is None
    assert [s.args["recursive"] for s in p.steps] == [True, True]
    # a `when` no call meets: no prelude, said why
    never = m.And(items=(where, cmp("==", arg("recursive"), lit(False, "bool"))))
    count = history("count", "files.rm", where=never)
    p = session_prelude(spec, call("files.rm", {"path": "a", "recursive": False}, (count, 2)))
    assert p.missing is not None and "meets its `when`" in p.missing


def test_sum_is_made_up_by_one_earlier_call() -> None:
    spec = spec_of()
    total = history("sum", "payments.send", field=arg("amount"), window_ms=86_400_000)
    p = session_prelude(spec, call("payments.send", PAYMENT, (total, 30_000)))
    assert p.missing is None
    assert [(s.tool, s.args["amount"]) for s in p.steps] == [("payments.send", 29_900)]


def test_seen_is_an_earlier_call_of_a_tool_producing_the_label() -> None:
    spec = spec_of()
    p = session_prelude(
        spec, call("mail.send", {"to": [], "body": "b"}, (history("seen", label="pii"), True))
    )
    assert [s.tool for s in p.steps] == ["mail.read"]
    none = session_prelude(
        spec, call("mail.send", {"to": [], "body": "b"}, (history("seen", label="secret"), True))
    )
    assert none.missing == "`seen(secret)`: no tool produces a result labelled `secret`"


def test_called_true_and_seen_false_cannot_share_a_tool() -> None:
    spec = spec_of()
    p = session_prelude(
        spec,
        call(
            "mail.send",
            {"to": [], "body": "b"},
            (history("called", "mail.read"), True),
            (history("seen", label="pii"), False),
        ),
    )
    assert p.missing is not None and "`seen(pii)` = true" in p.missing


def test_quantified_items_each_get_a_source() -> None:
    spec = spec_of()
    every = m.Quantified(quantifier="all", var="x", over=arg("to"), body=prov(var("x"), "user"))
    to = ["alice@example.test", "bob@example.test"]
    p = session_prelude(spec, call("mail.send", {"to": to, "body": "b"}, (every, True)))
    assert [s.said for s in p.steps] == to
    some = m.Quantified(quantifier="any", var="x", over=arg("to"), body=prov(var("x"), "user"))
    q = session_prelude(spec, call("mail.send", {"to": to, "body": "b"}, (some, True)))
    assert [s.said for s in q.steps] == to[:1]


def test_extract_terms_are_not_made_up() -> None:
    spec = spec_of()
    hosts = m.Extract(func="hosts", of=arg("body"))
    p = session_prelude(spec, call("mail.send", {"to": [], "body": "b"}, (hosts, ["evil.test"])))
    assert p.missing is not None and "depends on the text of the call" in p.missing


def test_every_analysis_witness_gets_a_prelude_that_replays_to_its_state() -> None:
    untrusted = prov(arg("iban"), "untrusted", only=True)
    spec = spec_of(
        rule(
            "refuse",
            "deny",
            "payments.send",
            m.And(items=(untrusted, m.Not(item=prov(arg("iban"), "user")))),
        ),
        rule(
            "burst",
            "deny",
            "files.delete",
            cmp(">", history("count", "files.delete", window_ms=600_000), lit(5, "int")),
        ),
        rule("ok", "allow", "payments.send", prov(arg("iban"), "trusted")),
        rule("rm", "allow", "files.delete"),
        rule("send", "allow", "mail.send", m.Not(item=history("seen", label="pii"))),
        tools=(*spec_of().tools.values(), SEND),
    )
    found = analyse_policies(spec)
    for label in ("p.refuse", "p.burst", "p.ok", "p.rm", "p.send"):
        w = found.witness("s.p", label)
        assert w is not None and w.exact, label
        p = session_prelude(spec, w.call)
        assert p.missing is None, (label, p.missing)


def test_a_value_only_provenance_reads_is_one_a_message_can_quote() -> None:
    spec = spec_of(rule("ok", "allow", "payments.send", prov(arg("iban"), "user")))
    w = analyse_policies(spec).witness("s.p", "p.ok")
    assert w is not None and w.exact
    assert w.call.args["iban"] == "iban-sample-1"
    assert [s.said for s in session_prelude(spec, w.call).steps] == ["iban-sample-1"]


def test_an_earlier_call_whose_when_asks_provenance_gets_its_sources_before_it() -> None:
    """`count(files.delete when args.path from user)`: the call under test counts itself when
    its path is the user's (the witness says so, and no prelude is refused for it), and each
    earlier deletion is preceded by the message naming its path; replayed through the
    runtime as a `test`, every witness is decided as it claims."""
    result = pipeline.check([ROOT / "tests" / "fixtures" / "history_provenance.harness"])
    spec, analysis = result.model, result.analysis
    assert spec is not None and analysis is not None
    tests = {}
    for label in ("files.named", "files.bulk"):
        w = analysis.witness("history_provenance.files", label)
        assert w is not None and w.exact, label
        p = session_prelude(spec, w.call)
        assert p.missing is None, (label, p.missing)
        tests[f"history_provenance.{label}"] = w.to_spec_test(label, tuple(p.steps))
    steps = tests["history_provenance.files.bulk"].before
    said = [s.said for s in steps if s.said is not None]
    deleted = [s.args["path"] for s in steps if s.tool == "files.delete"]
    assert len(deleted) == 3 and said == deleted
    for n, step in enumerate(steps):  # each path is said before the call that deletes it
        if step.tool is not None:
            assert steps[n - 1].said == step.args["path"]
    run = run_spec_tests(spec.model_copy(update={"tests": tests}))
    assert (run.passed, run.failed) == (2, 0), render_run([run])
