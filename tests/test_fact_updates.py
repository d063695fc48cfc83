"""Facts that shrink and conditional updates (`on_success remove`, `when`, `each`): through
the runtime, a restart from the log, and the spec tests of the payee lifecycle scenario
(tests/fixtures/payee_lifecycle.harness)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path as FilePath
from typing import Any

import pytest
from harnessc.compiler import pipeline
from harnessc.compiler.testing import render_run, run_spec_tests
from harnessc.runtime.judge.history import Ledger, facts_after, facts_changed
from harnessc.runtime.log.store import SQLiteStore
from harnessc.runtime.model import SessionStep, Spec
from harnessc.runtime.session.harness import Harness

from .conftest import ROOT

SPEC = ROOT / "tests" / "fixtures" / "payee_lifecycle.harness"
RENT = "DE89370400440532013000"
SHADY = "FR7630006000011234567890189"  # the bank cannot verify its owner


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture(scope="module")
def spec() -> Spec:
    result = pipeline.check([SPEC])
    assert not result.diagnostics, result.diagnostics
    assert result.model is not None
    return result.model


def _harness(spec: Spec, store: Any, clock: Clock) -> Harness:
    h = Harness(spec, store=store, clock=clock)
    h.bind("payee.add", lambda a: {"iban": a["iban"], "verified": a["iban"] != SHADY})
    h.bind("payee.remove", lambda a: None)
    h.bind("payments.send", lambda a: None)
    h.bind(
        "calendar.meeting",
        lambda a: {
            "title": "Budget",
            "participants": [
                {"email": "dora@example.com", "name": "Dora"},
                {"email": "li@example.com", "name": "Li"},
            ],
            "declined": ["li@example.com"] if a["id"] == "m2" else [],
        },
    )
    h.bind("mail.send", lambda a: None)
    return h


def _run(s: Any, tool: str, call_id: str, args: dict[str, Any]) -> Any:
    pending = s.normalize(tool, call_id, args)
    decision = s.decide(pending)
    if decision.effect == "allow":
        s.invoke(pending)
    return decision


def test_a_removed_payee_is_no_longer_trusted_and_a_restart_decides_the_same(
    spec: Spec, tmp_path: FilePath
) -> None:
    db = tmp_path / "log.db"
    clock = Clock()
    s = _harness(spec, SQLiteStore(db), clock).session(
        "banker", actor={"user": "u"}, said=[f"register {RENT} for the rent"], session_id="s-1"
    )
    assert _run(s, "payee.add", "c1", {"iban": RENT, "name": "Rent"}).effect == "allow"
    assert s.facts.values["bank.payees"] == [RENT]
    paid = _run(s, "payments.send", "c2", {"iban": RENT, "amount": 950.0})
    assert (paid.effect, paid.rule) == ("allow", "assistant.registered")
    assert any("the fact `bank.payees` (trusted)" in e for e in paid.evidence)

    assert _run(s, "payee.remove", "c3", {"iban": RENT}).effect == "allow"
    assert s.facts.values["bank.payees"] == []
    pending = s.normalize("payments.send", "c4", {"iban": RENT, "amount": 950.0})
    after = s.judge(pending)[0]
    # no longer a registered payee: the user named it, so the account holder is asked
    assert (after.effect, after.rule) == ("ask", "assistant.new_payee")
    assert not any("bank.payees" in e for e in after.evidence)
    assert s.ledger.index.lookup(RENT).kinds == frozenset({"user", "untrusted"})

    # a restart rebuilds the facts and the ledger from the log: the same facts, the same decision
    again = _harness(spec, SQLiteStore(db), clock).resume("s-1")
    assert again.facts.values["bank.payees"] == []
    rebuilt = again.judge(again.call("c4") or again.normalize("payments.send", "c4", pending.args))
    assert rebuilt[0] == after
    assert again.ledger.index.lookup(RENT).kinds == frozenset({"user", "untrusted"})


def test_only_a_verified_payee_is_registered(spec: Spec) -> None:
    s = _harness(spec, None, Clock()).session(
        "banker", actor={"user": "u"}, said=[f"register {RENT} and {SHADY}"]
    )
    _run(s, "payee.add", "c1", {"iban": SHADY, "name": "Unknown"})
    assert s.facts.values.get("bank.payees") is None  # `when result.verified` did not hold
    unverified = _run(s, "payments.send", "c2", {"iban": SHADY, "amount": 10.0})
    assert (unverified.effect, unverified.rule) == ("ask", "assistant.new_payee")
    _run(s, "payee.add", "c3", {"iban": RENT, "name": "Rent"})
    assert s.facts.values["bank.payees"] == [RENT]
    assert _run(s, "payments.send", "c4", {"iban": RENT, "amount": 10.0}).effect == "allow"


def test_each_participant_may_receive_the_notes_and_one_who_declined_may_not(spec: Spec) -> None:
    s = _harness(spec, None, Clock()).session("banker", actor={"user": "u"})
    _run(s, "calendar.meeting", "c1", {"id": "m1"})
    assert s.facts.values["meeting.attendees"] == ["dora@example.com", "li@example.com"]
    both = ["dora@example.com", "li@example.com"]
    assert _run(s, "mail.send", "c2", {"to": both, "body": "notes"}).effect == "allow"
    _run(s, "calendar.meeting", "c3", {"id": "m2"})  # Li declined the second meeting
    assert s.facts.values["meeting.attendees"] == ["dora@example.com", "dora@example.com"]
    assert _run(s, "mail.send", "c4", {"to": both, "body": "notes"}).effect == "deny"
    assert _run(s, "mail.send", "c5", {"to": both[:1], "body": "notes"}).effect == "allow"


def test_a_spec_tests_earlier_calls_apply_removes_and_conditions_as_the_runtime(
    spec: Spec,
) -> None:
    steps = [
        SessionStep(tool="payee.add", args={"iban": RENT}, result={"iban": RENT, "verified": True}),
        SessionStep(
            tool="payee.add", args={"iban": SHADY}, result={"iban": SHADY, "verified": False}
        ),
        SessionStep(tool="payee.remove", args={"iban": RENT}),
    ]
    assert facts_after(spec, steps[:2], {}) == {"bank.payees": [RENT]}
    assert facts_after(spec, steps, {"bank.payees": ["X", RENT]}) == {"bank.payees": ["X"]}
    ledger = Ledger.from_steps(Harness(spec).engine.terms, steps, now_ms=10**12)
    assert ledger.index.lookup(RENT).kinds == frozenset({"untrusted"})
    # the index as it was before the removal still had it as a fact
    from harnessc.runtime.judge.provenance import IndexBefore

    assert "trusted" in IndexBefore(ledger.index, 3).lookup(RENT).kinds
    # a removal of a value the fact does not hold changes nothing
    remove = spec.tools["payee.remove"]
    assert facts_changed(remove, {"iban": SHADY}, None, {"bank.payees": [RENT]}) == {}


def test_the_spec_tests_of_the_scenario_pass(spec: Spec) -> None:
    run = run_spec_tests(spec, file=SPEC.name)
    assert (run.passed, run.failed) == (6, 0), render_run([run])


def test_renaming_an_each_variable_renames_what_reads_it() -> None:
    pytest.importorskip("pygls")
    from harnessc.compiler.lsp import rename
    from harnessc.compiler.lsp.workspace import Workspace

    text = SPEC.read_text(encoding="utf-8")
    path = str(SPEC)
    specs = Workspace()
    specs.open(path, 1, text)
    build = specs.check(path)
    assert build is not None
    resolution = build.result.resolution
    assert resolution is not None
    source = next(m.source for m in resolution.modules if m.source and m.source.text == text)
    target = rename.target_at(build, source, text.index("p.email"))
    edits = rename.edits([build], build, target, "person")
    renamed = text
    for edit in sorted(edits, key=lambda e: -e.span.start):
        renamed = renamed[: edit.span.start] + edit.text + renamed[edit.span.end :]
    assert "add each person in result.participants: person.email to" in renamed
    specs.open(path, 2, renamed)
    again = specs.check(path)
    assert again is not None
    assert not [d.code for d in again.result.diagnostics if d.code.startswith("H")]


def _payee(n: int) -> str:
    return f"DE{n:020d}"


def test_a_fact_grown_one_value_at_a_time_writes_each_value_once(
    spec: Spec, tmp_path: FilePath
) -> None:
    """Each `on_success` records what it changed, not the fact whole: the bytes of the facts'
    events grow with the values added, not with the fact's size (the whole list recorded at
    every add wrote 12.5 kB per add at 1,000 payees)."""
    db = tmp_path / "log.db"
    clock = Clock()
    store = SQLiteStore(db)
    ibans = [_payee(n) for n in range(300)]
    s = _harness(spec, store, clock).session(
        "banker", actor={"user": "u"}, said=["register " + " ".join(ibans)], session_id="s-1"
    )
    sizes = []
    for n, iban in enumerate(ibans):
        before = sum(len(e.payload_json or "") for e in store.read() if e.type == "facts.updated")
        assert _run(s, "payee.add", f"a{n}", {"iban": iban, "name": f"p{n}"}).effect == "allow"
        after = sum(len(e.payload_json or "") for e in store.read() if e.type == "facts.updated")
        sizes.append(after - before)
    assert s.facts.values["bank.payees"] == ibans
    assert max(sizes) == min(sizes), (sizes[0], sizes[-1])  # constant per add

    # removals and adds mixed: the live session, a resumed one and a replayed decision agree
    for n in range(0, 300, 7):
        _run(s, "payee.remove", f"r{n}", {"iban": ibans[n]})
    _run(s, "payee.add", "again", {"iban": ibans[0], "name": "back"})
    kept = [i for n, i in enumerate(ibans) if n % 7] + [ibans[0]]
    assert s.facts.values["bank.payees"] == kept
    s.ledger.sync(store)  # the events since the last decision, as the next decision takes them
    live = {i: s.ledger.index.lookup(i) for i in (ibans[0], ibans[7], ibans[8])}
    assert "trusted" in live[ibans[0]].kinds and "trusted" in live[ibans[8]].kinds
    assert "trusted" not in live[ibans[7]].kinds
    reopened = SQLiteStore(db)
    again = _harness(spec, reopened, clock).resume("s-1")
    assert again.facts.values["bank.payees"] == kept
    again.ledger.sync(reopened)
    for iban, found in live.items():
        assert again.ledger.index.lookup(iban).kinds == found.kinds, iban
    for n in (7, 8):
        pending = s.normalize("payments.send", f"p{n}", {"iban": ibans[n], "amount": 5.0})
        assert (
            again.judge(again.normalize("payments.send", f"p{n}", pending.args))[0]
            == (s.judge(pending)[0])
        )


def test_a_payee_removed_by_another_worker_is_not_paid_by_this_one(
    spec: Spec, tmp_path: FilePath
) -> None:
    """Two harnesses on one log hold the same session (workers): what one's `on_success`
    changes, the other takes up before its next decision. A payee removed on one worker is
    no longer registered on the other; one each added on both is registered on both, once."""
    db = tmp_path / "log.db"
    clock = Clock()
    other = "DE02120300000000202051"
    a = _harness(spec, SQLiteStore(db), clock).session(
        "banker", actor={"user": "u"}, said=[f"register {RENT} and {other}"], session_id="s-1"
    )
    b = _harness(spec, SQLiteStore(db), clock).resume("s-1")
    assert _run(a, "payee.add", "c1", {"iban": RENT, "name": "Rent"}).effect == "allow"
    assert _run(b, "payee.add", "c2", {"iban": other, "name": "Other"}).effect == "allow"
    paid = _run(a, "payments.send", "c3", {"iban": other, "amount": 5.0})
    assert (paid.effect, paid.rule) == ("allow", "assistant.registered")
    assert a.facts.values["bank.payees"] == [RENT, other]

    assert _run(b, "payee.remove", "c4", {"iban": RENT}).effect == "allow"
    after = _run(a, "payments.send", "c5", {"iban": RENT, "amount": 950.0})
    assert (after.effect, after.rule) == ("ask", "assistant.new_payee")
    assert a.facts.values["bank.payees"] == b.facts.values["bank.payees"] == [other]
