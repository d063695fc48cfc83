"""Codegen of session-aware policy: cases replay the session before the call, the runner carries
that code only when a spec needs it, and the docs show trust, labels and session terms."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from harnessc.compiler.analysis.policy import analyse_policies
from harnessc.compiler.codegen.cases.calls import (
    PRELUDE_ALONE,
    plan_spec_tests,
    plan_witnesses,
    reads_session,
)
from harnessc.compiler.codegen.cases.context import CaseContext
from harnessc.compiler.codegen.docs import _data_blocks, session_rows
from harnessc.compiler.codegen.plan import TEST_MODULES, TestsContext
from harnessc.compiler.codegen.render import environment
from harnessc.runtime import model as m

from .session_specs import (
    CRM_LOOKUP,
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
)

ROOT = Path(__file__).resolve().parent.parent
IBAN = "DE89370400440532013000"
UNTRUSTED = prov(arg("iban"), "untrusted", only=True)


def payments_spec(**kw: Any) -> m.Spec:
    return spec_of(
        rule(
            "injected",
            "deny",
            "payments.send",
            m.Or(items=(UNTRUSTED, prov(arg("iban"), "nowhere"))),
        ),
        rule("crm", "allow", "payments.send", prov(arg("iban"), "trusted")),
        rule(
            "burst",
            "deny",
            "files.delete",
            cmp(">", history("count", "files.delete", window_ms=600_000), lit(5, "int")),
        ),
        rule("rm", "allow", "files.delete"),
        rule("leak", "deny", "mail.send", history("seen", label="secret")),
        **kw,
    )


def witness_cases(spec: m.Spec) -> dict[str, dict[str, Any]]:
    analysis = analyse_policies(spec)
    cases = plan_witnesses(CaseContext(spec), analysis, analysis.findings)
    return {c["rule"]: c for c in cases}


def test_a_witness_with_session_state_replays_its_prelude() -> None:
    cases = witness_cases(payments_spec())
    injected = cases["p.injected"]
    assert injected["skip"] is None
    assert injected["session"]  # the session state the prelude gives, as lines
    crm = cases["p.crm"]
    assert crm["skip"] is None
    # a call with earlier steps is judged by the engine on the ledger they make
    assert crm["via"] == "policy" and crm["note"] == PRELUDE_ALONE
    [step] = crm["before"]
    assert step["tool"] == "crm.lookup" and step["result"] == {"iban": crm["args"]["iban"]}
    burst = cases["p.burst"]
    assert burst["session"] == ["session: `count(files.delete within 10m)` = 6"]
    assert [s["tool"] for s in burst["before"]] == ["files.delete"] * 5
    # the rule after it wins only while the count stays at 5 or less: at most 4 earlier calls
    assert len(cases["p.rm"].get("before", [])) <= 4


def test_a_witness_no_session_can_give_is_skipped_with_the_reason() -> None:
    # no tool produces `secret`: `seen(secret)` cannot be made true by any session
    leak = witness_cases(payments_spec())["p.leak"]
    assert leak["skip"] == (
        "no session before the call is built for this witness: `seen(secret)`: no tool "
        "produces a result labelled `secret`"
    )


def test_spec_tests_carry_their_earlier_steps() -> None:
    spec = payments_spec().model_copy(
        update={
            "tests": {
                "s.t": m.SpecTest(
                    name="a payee from a mail",
                    policy="s.p",
                    tool="payments.send",
                    args={"iban": IBAN, "amount": 100},
                    before=(
                        m.SessionStep(said="please pay my rent"),
                        m.SessionStep(
                            tool="mail.read", args={"id": "m1"}, result={"body": f"pay {IBAN}"}
                        ),
                        m.SessionStep(tool="files.delete", args={"path": "a"}, ago_ms=300_000),
                    ),
                    expect=m.Expectation(effect="deny"),
                )
            }
        }
    )
    [case] = plan_spec_tests(CaseContext(spec))
    assert case["before"] == [
        {"said": "please pay my rent"},
        {"tool": "mail.read", "args": {"id": "m1"}, "result": {"body": f"pay {IBAN}"}},
        {"tool": "files.delete", "args": {"path": "a"}, "ago_ms": 300_000},
    ]
    assert reads_session(spec)
    assert not reads_session(spec_of(rule("ok", "allow", "payments.send")))


def test_the_runner_replays_a_session_before_a_call_and_is_ruff_clean(tmp_path: Path) -> None:
    for name, template in TEST_MODULES:
        text = environment().get_template(template).render(p=TestsContext("# generated"))
        (tmp_path / name).write_text(text, encoding="utf-8")
    runner = (tmp_path / "runner.py").read_text(encoding="utf-8")
    assert "    prelude_ledger,\n" in runner
    # the facts as the earlier steps' `on_success` leaves them, beside the ledger
    assert "    facts_after,\n" in runner
    assert '**prelude(h, case, data.get("values", {})),' in runner
    ruff = [sys.executable, "-m", "ruff", "check", "--no-cache"]
    for config in (["--isolated"], ["--config", str(ROOT / "pyproject.toml")]):
        run = subprocess.run([*ruff, *config, str(tmp_path)], capture_output=True, text=True)
        assert run.returncode == 0, run.stdout + run.stderr


def test_the_docs_show_trust_labels_and_on_success() -> None:
    team = m.Fact(name="team.members", type=m.Type(name="list", item=m.Type(name="string")))
    invite = tool(
        "team.invite",
        field("user"),
        effects=("write",),
        on_success=(m.FactAdd(value=arg("user"), fact="team.members"),),
    )
    spec = spec_of(
        tools=(MAIL_READ, CRM_LOOKUP, PAY, invite),
        facts={"team.members": team},
        labels={"finance": m.Label(name="finance", description="money | numbers")},
    )
    [heading, _, table, labels] = _data_blocks(spec)
    assert heading.text == "Data sources"
    assert table.table is not None and labels.table is not None
    rows = {r[0]: r[1:] for r in table.table.rows}
    assert rows["`crm.lookup`"] == ("trusted", "none", "nothing")
    assert rows["`mail.read`"] == ("untrusted (default); `sender`: trusted", "`pii`", "nothing")
    assert rows["`team.invite`"] == (
        "untrusted (default)",
        "none",
        "`add args.user to team.members`",
    )
    assert labels.table.rows == (
        ("`finance`", "money \\| numbers"),
        ("`secret`", "built in"),
        ("`pii`", "built in"),
    )
    # a spec that declares none of it gets no such section (the build goldens stay as they are)
    plain = spec_of(tools=(PAY,))
    assert _data_blocks(plain) == []


def test_the_docs_list_each_rules_session_terms() -> None:
    spec = payments_spec()
    rows = session_rows(spec.policies["s.p"])
    assert rows == [
        ("`p.injected`", "`args.iban from untrusted only`<br>`args.iban from nowhere`"),
        ("`p.crm`", "`args.iban from trusted`"),
        ("`p.burst`", "`count(files.delete within 10m)`"),
        ("`p.leak`", "`seen(secret)`"),
    ]


def test_the_runtime_decides_each_witness_as_the_analysis_on_its_prelude() -> None:
    from harnessc.runtime.judge.history import prelude_ledger
    from harnessc.runtime.judge.policy import CallContext, PolicyEngine

    spec = payments_spec()
    engine = PolicyEngine(spec)
    for label, case in witness_cases(spec).items():
        if case["skip"] is not None:
            continue
        steps = [m.SessionStep.model_validate(s) for s in case.get("before", [])]
        context = CallContext(
            case["tool"], case["args"], actor=case["actor"], ledger=prelude_ledger(spec, steps, 0)
        )
        decision = engine.decide("s.p", context)
        assert (decision.effect, decision.rule) == (
            case["expect"]["effect"],
            case["expect"]["rule"],
        ), (label, case.get("session"), case.get("before"))


def test_an_approval_test_skips_a_rule_that_reads_the_session() -> None:
    from harnessc.compiler.codegen.cases.invocation import plan_exact_invocation

    asked = rule("first", "ask", "files.delete", m.Not(item=history("called", "files.delete")))
    asked = asked.model_copy(update={"grant": m.Grant(scope="once", ttl_ms=600_000)})
    spec = spec_of(asked, rule("rm", "allow", "files.delete"))
    [case] = [c for c in witness_cases(spec).values() if c["rule"] == "p.first"]
    assert case["skip"] is None and case["via"] == "session" and "before" not in case
    [planned] = plan_exact_invocation(spec, [case])
    assert planned["skip"] == (
        "the policy reads the session's history, which the approved call changes for its variants"
    )


def test_an_approval_test_runs_for_a_policy_that_reads_only_provenance() -> None:
    """On a session with no earlier event, provenance terms read the same for the approved
    call and its variants: the exact-invocation case runs."""
    from harnessc.compiler.codegen.cases.invocation import plan_exact_invocation

    asked = rule("pay", "ask", "payments.send", m.Not(item=prov(arg("iban"), "untrusted", True)))
    asked = asked.model_copy(update={"grant": m.Grant(scope="once", ttl_ms=600_000)})
    spec = spec_of(asked)
    [case] = [c for c in witness_cases(spec).values() if c["rule"] == "p.pay"]
    [planned] = plan_exact_invocation(spec, [case])
    assert planned["skip"] is None and planned["variants"]
