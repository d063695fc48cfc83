"""Map-valued facts (language.md §5.7): `FACT[KEY]` reads the entry of a map fact under a key,
and `on_success add|remove VALUE to|from FACT[KEY]` changes that entry, a list. One reading of
each: the interpreter and the compiled deciders (`entry_of`), the runtime, a session resumed
from the log, spec tests' earlier calls and the ledger's provenance (`apply_fact_changes`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harnessc.compiler.pipeline import check
from harnessc.compiler.testing import run_spec_tests
from harnessc.dsl.printer import format_source
from harnessc.dsl.source import Source
from harnessc.runtime import Harness, SQLiteStore
from harnessc.runtime.judge.conditions import Scope, evaluate
from harnessc.runtime.judge.history import apply_fact_changes
from harnessc.runtime.model import Spec

from .conftest import ROOT
from .session_specs import governed
from .test_fact_updates import Clock

SPEC = ROOT / "tests" / "matrix" / "map_facts.harness"
DE = "DE89370400440532013000"
GB = "GB33BUKB20201555555555"


@pytest.fixture(scope="module")
def spec() -> Spec:
    result = check([SPEC])
    assert not result.diagnostics, result.diagnostics
    assert result.model is not None
    return result.model


def _harness(spec: Spec, store: Any, clock: Clock) -> Harness:
    h = Harness(spec, store=store, clock=clock)
    for tool in ("payee.add", "payee.remove", "bank.send"):
        h.bind(tool, lambda args: None)
    return h


def test_each_account_has_its_own_payees_and_a_restart_reads_the_same(
    spec: Spec, tmp_path: Path
) -> None:
    db = tmp_path / "log.db"
    clock = Clock()
    s = _harness(spec, SQLiteStore(db), clock).session(
        "payer", actor={"user": "u"}, session_id="s-1", facts={"bank.payees": {"acc2": [GB]}}
    )
    steps = [
        ("bank.send", {"account": "acc1", "iban": DE}),
        ("payee.add", {"account": "acc1", "iban": DE}),
        ("bank.send", {"account": "acc1", "iban": DE}),
        ("bank.send", {"account": "acc2", "iban": DE}),  # a payee of another account
        ("bank.send", {"account": "acc2", "iban": GB}),  # given by the application
        ("payee.remove", {"account": "acc1", "iban": DE}),
    ]
    got = [(d.effect, d.rule) for d in (governed(s, n, t, a)[1] for n, (t, a) in enumerate(steps))]
    assert got == [
        ("ask", "paying.unregistered"),
        ("allow", "paying.manage"),
        ("allow", "paying.registered"),
        ("ask", "paying.unregistered"),
        ("allow", "paying.registered"),
        ("allow", "paying.manage"),
    ]
    assert s.facts.values["bank.payees"] == {"acc2": [GB], "acc1": []}
    pending = s.normalize("bank.send", "c-9", {"account": "acc1", "iban": DE})
    after = s.judge(pending)[0]
    assert (after.effect, after.rule) == ("ask", "paying.unregistered")

    again = _harness(spec, SQLiteStore(db), clock).resume("s-1")
    assert again.facts.values["bank.payees"] == {"acc2": [GB], "acc1": []}
    assert again.judge(again.normalize("bank.send", "c-9", pending.args))[0] == after


def test_the_interpreter_and_the_compiled_decider_agree(spec: Spec) -> None:
    s = _harness(spec, None, Clock()).session(
        "payer", actor={"user": "u"}, facts={"bank.payees": {"acc1": [DE], "acc2": [GB]}}
    )
    rules = spec.policies["map_facts.paying"].rules
    [registered] = [r for r in rules if r.label == "paying.registered"]
    assert registered.condition is not None
    for n, (account, iban) in enumerate(
        [("acc1", DE), ("acc1", GB), ("acc2", GB), ("acc3", DE), ("", DE)]
    ):
        call, decision = governed(s, n, "bank.send", {"account": account, "iban": iban})
        scope = Scope(args=call.args, tool={"id": "bank.send"}, facts=s.facts.values)
        assert evaluate(registered.condition, scope) is (decision.rule == "paying.registered")


def test_the_specs_own_tests_pass(spec: Spec) -> None:
    run = run_spec_tests(spec)
    assert not run.diagnostics and not run.incomplete
    assert [o.passed for o in run.outcomes] == [True] * 3


def test_changes_apply_to_an_entry() -> None:
    facts = {"p": {"a": ["x", "y"]}}
    assert apply_fact_changes(facts, [{"fact": "p", "op": "remove", "values": ["x"], "key": "a"}])
    assert apply_fact_changes(
        facts,
        [
            {"fact": "p", "op": "remove", "values": ["x"], "key": "a"},
            {"fact": "p", "op": "add", "values": ["z"], "key": "b"},
        ],
    ) == {"p": {"a": ["y"], "b": ["z"]}}
    # a key that is not a text changes nothing, and the facts given are left as they were
    assert apply_fact_changes(facts, [{"fact": "p", "op": "add", "values": ["z"], "key": 3}]) == {}
    assert facts == {"p": {"a": ["x", "y"]}}


@pytest.mark.parametrize(
    ("old", "new", "code", "words"),
    [
        (
            "registered: allow bank.send when args.iban in bank.payees[args.account]",
            "registered: allow bank.send when args.iban in bank.list[args.account]",
            "H352",
            "`bank.list[…]` reads an entry of a map",
        ),
        (
            "registered: allow bank.send when args.iban in bank.payees[args.account]",
            "registered: allow bank.send when args.iban in bank.payees[args.amount]",
            "H352",
            "is an `int`, not a text",
        ),
        (
            "on_success add args.iban to bank.payees[args.account]",
            "on_success add args.iban to bank.list[args.account]",
            "H352",
            "names an entry of a map",
        ),
        (
            "on_success add args.iban to bank.payees[args.account]",
            "on_success add args.iban to bank.payees[args.amount]",
            "H352",
            "not a text",
        ),
        (
            "on_success add args.iban to bank.payees[args.account]",
            "on_success add args.iban to bank.payees[bank.list]",
            "H352",
            "is not a value of the call",
        ),
        (
            "on_success add args.iban to bank.payees[args.account]",
            "on_success add args.iban to bank.payees",
            "H343",
            "which is not a list",
        ),
    ],
)
def test_mistakes_get_a_diagnostic(
    tmp_path: Path, old: str, new: str, code: str, words: str
) -> None:
    extra = (
        'fact bank.list: list<string> "A list."\n\ntool payee.add {',
        "    account: string\n    iban: string\n    amount: int?\n  }\n  on_success add",
    )
    text = SPEC.read_text(encoding="utf-8")
    text = text.replace("tool payee.add {", extra[0], 1)
    text = text.replace("    account: string\n    iban: string\n  }\n  on_success add", extra[1], 1)
    text = text.replace(
        'tool bank.send {\n  summary "Send money from one account."\n  use_when "The holder '
        'pays someone."\n  effects write external\n  input {\n    account: string\n    iban: '
        "string\n",
        'tool bank.send {\n  summary "Send money from one account."\n  use_when "The holder '
        'pays someone."\n  effects write external\n  input {\n    account: string\n    iban: '
        "string\n    amount: int?\n",
        1,
    )
    path = tmp_path / "spec.harness"
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    errors = [
        (d.code, d.message, d.help) for d in check([path]).diagnostics if d.severity == "error"
    ]
    assert any(c == code and words in message for c, message, _ in errors), errors
    if code == "H343":
        [(_, _, hint)] = [e for e in errors if e[0] == "H343"]
        assert hint == "name the entry the call's value keys: `to bank.payees[args.KEY]`"


def test_the_formatter_keeps_indexes_and_keys() -> None:
    text = SPEC.read_text(encoding="utf-8")
    assert format_source(Source("m.harness", text)).text == text
    squeezed = text.replace("bank.payees[args.account]", "bank.payees[ args.account ]")
    assert format_source(Source("m.harness", squeezed)).text == text


def test_an_entrys_values_are_trusted_while_they_are_in_it(tmp_path: Path) -> None:
    """A map fact's values are sources (trusted) like a list fact's: a payee added to an
    account's entry is `from trusted`, and once removed it is not (unless another entry still
    holds it)."""
    text = (
        SPEC.read_text(encoding="utf-8")
        .replace(
            "registered: allow bank.send when args.iban in bank.payees[args.account]",
            "registered: allow bank.send when args.iban from trusted",
        )
        .replace(
            "unregistered: ask bank.send when not args.iban in bank.payees[args.account]",
            "unregistered: ask bank.send when not args.iban from trusted",
        )
    )
    path = tmp_path / "trusted.harness"
    path.write_text(text, encoding="utf-8")
    result = check([path])
    assert result.model is not None, result.diagnostics
    s = _harness(result.model, None, Clock()).session(
        "payer", actor={"user": "u"}, facts={"bank.payees": {"acc2": [GB]}}
    )
    got = []
    for n, (tool, args) in enumerate(
        [
            ("payee.add", {"account": "acc1", "iban": DE}),
            ("bank.send", {"account": "acc1", "iban": DE}),
            ("payee.remove", {"account": "acc1", "iban": DE}),
            ("bank.send", {"account": "acc1", "iban": DE}),
            ("payee.remove", {"account": "acc1", "iban": GB}),  # not in acc1: no change
            ("bank.send", {"account": "acc9", "iban": GB}),  # still acc2's
        ]
    ):
        got.append(governed(s, n, tool, args)[1].effect)
    assert got == ["allow", "allow", "allow", "ask", "allow", "allow"]
