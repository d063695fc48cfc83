"""`harnessc test` with earlier steps: a test's `before` (user messages, earlier calls with
results, `ago`) becomes the session's ledger through the runtime's `prelude_ledger`, and a
failure shows the steps it was given."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from harnessc.compiler import testing
from harnessc.compiler.testing import PRELUDE_MISSING, render_run, run_spec_tests
from harnessc.runtime import model as m
from harnessc.runtime.policy import CallContext

from .session_specs import rule, spec_of

IBAN = "DE89370400440532013000"
BEFORE = (
    m.SessionStep(said="please pay my rent"),
    m.SessionStep(tool="mail.read", args={"id": "m1"}, result={"body": f"pay {IBAN} now"}),
    m.SessionStep(tool="files.delete", args={"path": "a"}, ago_ms=300_000),
)
GIVEN = [
    "given before the call:",
    '  said "please pay my rent"',
    f'  earlier mail.read(id: "m1") returns {{"body": "pay {IBAN} now"}}',
    '  earlier files.delete(path: "a") ago 5m',
]


def spec_with_tests(*tests: m.SpecTest) -> m.Spec:
    spec = spec_of(rule("ok", "allow", "payments.send", m.Literal(value=True, type="bool")))
    return spec.model_copy(update={"tests": {f"s.{t.name}": t for t in tests}})


def a_test(name: str, effect: str, before: tuple[m.SessionStep, ...] = BEFORE) -> m.SpecTest:
    return m.SpecTest(
        name=name,
        policy="s.p",
        tool="payments.send",
        args={"iban": IBAN, "amount": 100},
        before=before,
        expect=m.Expectation(effect=effect),  # type: ignore[arg-type]
    )


def test_without_the_runtime_seam_a_test_with_earlier_steps_fails_saying_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(testing, "prelude_ledger_function", lambda: None)
    spec = spec_with_tests(a_test("with steps", "deny"), a_test("plain", "allow", before=()))
    run = run_spec_tests(spec, file="s.harness")
    assert (run.passed, run.failed) == (1, 1)
    text = render_run([run])
    assert "FAILED s.harness::with steps" in text and "PASSED s.harness::plain" in text
    assert f"s.harness: {PRELUDE_MISSING}" in text
    assert "\n".join(f"  {line}" for line in GIVEN) in text
    data = json.loads(render_run([run], "json"))
    [failed] = [t for t in data["tests"] if t["outcome"] == "failed"]
    assert failed["before"][1] == {
        "tool": "mail.read",
        "args": {"id": "m1"},
        "result": {"body": f"pay {IBAN} now"},
    }


def test_earlier_steps_become_the_ledger_of_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    if "ledger" not in {f.name for f in dataclasses.fields(CallContext)}:
        pytest.skip("CallContext has no `ledger` on this branch yet (the runtime part adds it)")
    given: list[Any] = []

    def fake(spec: m.Spec, steps: Any, now_ms: int) -> str:
        given.append((tuple(steps), now_ms))
        return "the ledger"

    monkeypatch.setattr(testing, "prelude_ledger_function", lambda: fake)
    spec = spec_with_tests(a_test("with steps", "deny"))
    call = testing.call_of(spec, spec.tests["s.with steps"], now_ms=1_000)
    assert call.ledger == "the ledger"  # type: ignore[attr-defined]
    assert given == [(BEFORE, 1_000)]
    run = run_spec_tests(spec, file="s.harness")
    # the policy allows every payment: the test expecting deny fails, showing its steps
    assert run.failed == 1
    assert "\n".join(f"  {line}" for line in GIVEN) in render_run([run])
