"""`harnessc test`: run a spec's `test` blocks against its compiled policies and explain failures.

Each test builds a frozen call (`call`, `as actor`, `resource`, `facts`, `task`, `env`,
`execution`), judges it with the runtime's decision engine under the test's policy (written,
its agent's, or the only policy of the root module) and compares the decision with `expect`.
A failure lists every rule that matched (label, effect, file:line) and why the winner won.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from harnessc.dsl import syntax as s
from harnessc.dsl.diagnostics import Diagnostic
from harnessc.runtime.model import Approver, Expectation, Rule, SessionStep, Spec, SpecTest

from .analysis.text import prelude_text
from .lower import module_name
from .resolve import Resolution

if TYPE_CHECKING:
    # the runtime's engine and ledger: loaded by the functions that run tests, so that
    # `check` (which runs `check_tests` only) does not load them
    from harnessc.runtime.judge.policy import CallContext, Decider, Decision

__all__ = [
    "TestOutcome",
    "TestRun",
    "call_of",
    "check_tests",
    "policy_of",
    "render_run",
    "rule_names",
    "run_spec_tests",
    "split_facts",
    "step_json",
]


# ---------------------------------------------------------------------------------------------
# Which policy judges a test


def policy_of(spec: Spec, test: SpecTest) -> str | None:
    """The qualified policy a test runs under: its `policy`, its agent's, or the only policy of
    the root module; None when none of these names exactly one."""
    if test.policy is not None:
        return test.policy
    if test.agent is not None:
        agent = spec.agents.get(test.agent) or spec.agents.get(spec.qualified(test.agent))
        return spec.qualified(agent.policy) if agent and agent.policy else None
    root = [name for name in spec.policies if name.rpartition(".")[0] == spec.root_module]
    return root[0] if len(root) == 1 else None


def check_tests(spec: Spec, resolution: Resolution) -> list[Diagnostic]:
    """H601 for a test with an `expect` that judges under no policy. (A test without `expect`
    is incomplete rather than wrong: `harnessc test` reports it as a failure.)"""
    diagnostics: list[Diagnostic] = []
    root_policies = sorted(
        n.rpartition(".")[2] for n in spec.policies if n.rpartition(".")[0] == spec.root_module
    )
    for module in resolution.modules:
        prefix = module_name(module)
        for item in module.syntax.items:
            if not isinstance(item, s.Test):
                continue
            test = spec.tests.get(f"{prefix}.{item.name.value}")
            if test is not None and test.expect is not None and policy_of(spec, test) is None:
                diagnostics.append(_no_policy(test, item, root_policies))
    return diagnostics


def _no_policy(test: SpecTest, item: s.Test, root_policies: list[str]) -> Diagnostic:
    if test.agent is not None:
        return Diagnostic.make(
            "H601",
            f"test `{test.name}` runs under agent `{test.agent.rpartition('.')[2]}`, "
            "which has no policy",
            item.name.span,
            "no policy judges this test's call",
            help="give the agent a `policy`, or name one in the test with `policy NAME`",
        )
    if root_policies:
        listed = ", ".join(f"`{p}`" for p in root_policies)
        help_text = f"add `policy NAME` to the test; this module declares {listed}"
    else:
        help_text = "declare a policy, or name one in the test with `policy NAME`"
    return Diagnostic.make(
        "H601",
        f"test `{test.name}` does not say which policy judges its call",
        item.name.span,
        "no `policy` here, and the module does not declare exactly one",
        help=help_text,
    )


# ---------------------------------------------------------------------------------------------
# Running tests


def split_facts(spec: Spec, test: SpecTest) -> tuple[dict[str, Any], set[str], set[str]]:
    """A test's `facts` split into declared fact values, the connections that are up and the
    runtimes that are running: a declared connection or runtime set to `true` is up
    (`connected(c)`, `running(r)`); lists under `connected`/`running` work too."""
    values: dict[str, Any] = {}
    connected: set[str] = set()
    running: set[str] = set()
    for key, value in (test.facts or {}).items():
        if key in spec.facts:
            values[key] = value
        elif key in spec.connections and key not in spec.runtimes:
            if value is True:
                connected.add(key)
        elif key in spec.runtimes:
            if value is True:
                running.add(key)
        elif key in ("connected", "running") and isinstance(value, list):
            (connected if key == "connected" else running).update(str(v) for v in value)
        else:
            values[key] = value
    return values, connected, running


def call_of(spec: Spec, test: SpecTest, now_ms: int | None = None) -> CallContext:
    """The frozen call a test describes. In `facts`, a declared connection or runtime set to
    `true` is up (`connected(c)`, `running(r)`); lists under `connected`/`running` work too.
    A test's `before` steps (user messages, earlier calls with results, `ago`) make the
    session's ledger, replayed by the runtime (`prelude_ledger`) as of `now_ms`, and add to
    the facts what their `on_success` adds (`facts_after`)."""
    from harnessc.runtime.judge.history import facts_after, prelude_ledger
    from harnessc.runtime.judge.policy import CallContext

    facts, connected, running = split_facts(spec, test)
    execution = dict(test.execution or {})
    tool_call_id = execution.get("tool_call_id")
    extra: dict[str, Any] = {}
    if test.before:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        extra["ledger"] = prelude_ledger(spec, test.before, now, facts)
        facts = facts_after(spec, test.before, facts)  # what `on_success` added
    return CallContext(
        tool_id=test.tool or "",
        args=_with_defaults(spec, test.tool, dict(test.args)),
        actor=dict(test.actor or {}),
        resource=dict(test.resource or {}),
        task=dict(test.task or {}),
        env=dict(test.env or {}),
        facts=facts,
        connected=frozenset(connected),
        running=frozenset(running),
        tool_call_id=tool_call_id if isinstance(tool_call_id, str) else None,
        execution=execution,
        **extra,
    )


def _with_defaults(spec: Spec, tool_id: str | None, args: dict[str, Any]) -> dict[str, Any]:
    """The arguments as the runtime judges them: schema defaults filled in, as normalize does."""
    tool = spec.tools.get(tool_id or "")
    if tool is None:
        return args
    for argument in tool.input.fields:
        if argument.name not in args and argument.default is not None:
            args[argument.name] = argument.default
    return args


@dataclass
class TestOutcome:
    __test__ = False  # not a pytest class

    test: SpecTest
    policy: str
    decision: Decision
    problems: list[str]
    """What differs from `expect` (empty when the test passed)."""
    explanation: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.problems


@dataclass
class TestRun:
    __test__ = False

    file: str
    outcomes: list[TestOutcome] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    selected_none: bool = False
    incomplete: list[SpecTest] = field(default_factory=list)
    """Tests without `expect`: they pin nothing, and count as failures."""

    @property
    def passed(self) -> int:
        return sum(o.passed for o in self.outcomes)

    @property
    def failed(self) -> int:
        return sum(not o.passed for o in self.outcomes) + len(self.incomplete)


def rule_names(rule: Rule) -> set[str]:
    """The ways `expect rule …` may name a rule: its label, the label without the policy, and
    the label with the policy's full name."""
    names = {rule.label}
    _, sep, tail = rule.label.partition(".")
    if sep:
        names.update({tail, f"{rule.policy}.{tail}"})
    elif "#" in rule.label:
        names.add(f"{rule.policy.rpartition('.')[0]}.{rule.label}")
    return names


def _approver_text(a: Approver) -> str:
    return f'approver {a.kind} "{a.value}"'


def expectation_text(e: Expectation) -> str:
    parts: list[str] = [e.effect]
    if e.approver is not None:
        parts.append(_approver_text(e.approver))
    if e.rule is not None:
        parts.append(f"rule {e.rule}")
    if e.reason is not None:
        parts.append(f"reason {json.dumps(e.reason, ensure_ascii=False)}")
    return " ".join(parts)


def compare(expect: Expectation, decision: Decision, decider: Decider) -> list[str]:
    problems: list[str] = []
    if decision.effect != expect.effect:
        problems.append(f"effect: expected {expect.effect}, got {decision.effect}")
    if expect.approver is not None and expect.approver not in decision.approvers:
        got = ", ".join(_approver_text(a) for a in decision.approvers) or "no approver"
        problems.append(f"approver: expected {_approver_text(expect.approver)}, got {got}")
    if expect.rule is not None:
        winner = decider.rule(decision.rule) if decision.rule else None
        if winner is None or expect.rule not in rule_names(winner):
            got = decision.rule or "the default (no rule matched)"
            problems.append(f"rule: expected {expect.rule}, got {got}")
    if expect.reason is not None and expect.reason != decision.reason:
        got = json.dumps(decision.reason, ensure_ascii=False) if decision.reason else "no reason"
        problems.append(
            f"reason: expected {json.dumps(expect.reason, ensure_ascii=False)}, got {got}"
        )
    return problems


def _where(origin: object) -> str:
    return f"{origin.file}:{origin.line}" if origin is not None else "?"  # type: ignore[attr-defined]


def explain(spec: Spec, decider: Decider, decision: Decision) -> list[str]:
    """Every rule that matched, and why the winner won (stronger effect, earlier rule, or
    the default)."""
    lines: list[str] = []
    rules = [decider.rule(label) for label in decision.matched]
    matched = [r for r in rules if r is not None]
    if decision.rule is None and not decision.default_used:
        return [f"the call was refused before any rule: {decision.reason}"]
    if not matched:
        lines.append("no rule matched")
        default = decider.policy.default
        if default is None:
            lines.append(f"no default: denied ({decision.reason})")
        elif default.table is not None:
            tool = spec.tools.get(decision.tool_id)
            lines.append(
                f"default `{default.table}` maps this call's risk to {decision.effect} "
                f"({_where(decision.origin)})"
                + (f"; the tool's risk is {tool.risk}" if tool and not tool.operations else "")
            )
        else:
            lines.append(f"default {decision.effect} ({_where(decision.origin)})")
        return lines
    width = max(len(r.label) for r in matched)
    lines.append("matching rules, in text order:")
    for r in matched:
        mark = "→" if r.label == decision.rule else " "
        lines.append(f"  {mark} {r.label:<{width}}  {r.effect:<5}  {_where(r.origin)}")
    winner = decider.rule(decision.rule or "")
    assert winner is not None
    weaker = [r for r in matched if r.effect != winner.effect]
    same = [r for r in matched if r.effect == winner.effect and r is not winner]
    why: list[str] = []
    if weaker:
        beaten = sorted({r.effect for r in weaker}, key=["allow", "ask", "deny"].index)
        why.append(f"{winner.effect} beats {' and '.join(beaten)}")
    if same:
        why.append(f"it is the first of {len(same) + 1} matching {winner.effect} rules")
    if not why:
        why.append("it is the only matching rule")
    lines.append(f"winner: {winner.label} ({winner.effect}): {'; '.join(why)}")
    return lines


def step_json(step: SessionStep) -> dict[str, Any]:
    """A step of the session before a call, as JSON data (only what it says)."""
    return step.model_dump(mode="json", exclude_defaults=True)


def given_before(test: SpecTest) -> list[str]:
    """What a failure shows of the session before the call: each earlier step, as written."""
    return ["given before the call:", *(f"  {line}" for line in prelude_text(test.before))]


def run_spec_tests(spec: Spec, pattern: str | None = None, file: str = "") -> TestRun:
    """Run the root module's tests (those whose name contains `pattern`, case-insensitively),
    in source order. Expects a spec whose tests passed `check_tests`."""
    from harnessc.runtime.judge.policy import PolicyEngine

    run = TestRun(file)
    engine = PolicyEngine(spec)
    prefix = f"{spec.root_module}."
    tests = [t for key, t in spec.tests.items() if key.startswith(prefix)]
    tests.sort(key=lambda t: (t.origin.line, t.origin.column) if t.origin else (0, 0))
    if pattern is not None:
        selected = [t for t in tests if pattern.casefold() in t.name.casefold()]
        run.selected_none = bool(tests) and not selected
        tests = selected
    for test in tests:
        if test.expect is None:
            run.incomplete.append(test)
            continue
        policy = policy_of(spec, test)
        if policy is None:
            continue  # reported by check_tests (H601)
        decider = engine.decider(policy)
        call = call_of(spec, test)
        decision = decider.decide(call)
        problems = compare(test.expect, decision, decider)
        outcome = TestOutcome(test, decider.name, decision, problems)
        if problems:
            outcome.explanation = explain(spec, decider, decision)
            if test.before:
                outcome.explanation += given_before(test)
        run.outcomes.append(outcome)
    return run


# ---------------------------------------------------------------------------------------------
# Output


def _decision_text(decision: Decision) -> str:
    parts = [decision.effect]
    parts.extend(_approver_text(a) for a in decision.approvers)
    if decision.rule is not None:
        parts.append(f"rule {decision.rule}")
    elif decision.default_used:
        parts.append("by default")
    if decision.reason:
        parts.append(f"reason {json.dumps(decision.reason, ensure_ascii=False)}")
    return " ".join(parts)


def summary_line(runs: Sequence[TestRun]) -> str:
    passed = sum(r.passed for r in runs)
    failed = sum(r.failed for r in runs)
    return f"{passed} passed, {failed} failed"


def render_run(runs: Sequence[TestRun], fmt: str = "plain", colour: bool = False) -> str:
    """The report: one line per test, the failures explained, and the summary line last."""
    if fmt == "json":
        return json.dumps(_json(runs), indent=2, ensure_ascii=False)

    def paint(code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if colour else text

    lines: list[str] = []
    failures: list[tuple[TestRun, TestOutcome]] = []
    for run in runs:
        for o in run.outcomes:
            word = paint("32", "PASSED") if o.passed else paint("31;1", "FAILED")
            lines.append(f"{word} {run.file}::{o.test.name}")
            if not o.passed:
                failures.append((run, o))
        for test in run.incomplete:
            lines.append(f"{paint('31;1', 'FAILED')} {run.file}::{test.name}")
    for run in runs:
        for test in run.incomplete:
            where = f"{test.origin.file}:{test.origin.line}" if test.origin else run.file
            lines.append("")
            lines.append(paint("1", f"___ {test.name} ___"))
            lines.append(
                f"{where}: the test states no expected decision; add `expect allow`, "
                '`expect deny` or `expect ask approver role "…"`'
            )
    for run, o in failures:
        origin = o.test.origin
        where = f"{origin.file}:{origin.line}" if origin else run.file
        lines.append("")
        lines.append(paint("1", f"___ {o.test.name} ___"))
        lines.append(f"{where}: judged by policy `{o.policy}` for `{o.decision.tool_id}`")
        assert o.test.expect is not None
        lines.append(f"- expected: {expectation_text(o.test.expect)}")
        lines.append(f"+ got:      {_decision_text(o.decision)}")
        lines.extend(f"  {p}" for p in o.problems)
        lines.extend(f"  {e}" for e in o.explanation)
    lines.append("")
    lines.append(summary_line(runs))
    return "\n".join(lines).lstrip("\n")


def _json(runs: Sequence[TestRun]) -> dict[str, Any]:
    tests = []
    for run in runs:
        for o in run.outcomes:
            d = o.decision
            tests.append(
                {
                    "file": run.file,
                    "name": o.test.name,
                    "line": o.test.origin.line if o.test.origin else None,
                    "outcome": "passed" if o.passed else "failed",
                    "policy": o.policy,
                    "expected": o.test.expect.model_dump(mode="json") if o.test.expect else None,
                    "got": {
                        "effect": d.effect,
                        "rule": d.rule,
                        "matched": list(d.matched),
                        "reason": d.reason,
                        "approvers": [a.model_dump(mode="json") for a in d.approvers],
                        "default_used": d.default_used,
                    },
                    "problems": o.problems,
                    "explanation": o.explanation,
                    "before": [step_json(step) for step in o.test.before],
                }
            )
        tests.extend(
            {
                "file": run.file,
                "name": t.name,
                "line": t.origin.line if t.origin else None,
                "outcome": "failed",
                "problems": ["the test states no expected decision"],
            }
            for t in run.incomplete
        )
    return {
        "tests": tests,
        "passed": sum(r.passed for r in runs),
        "failed": sum(r.failed for r in runs),
    }


def print_run(runs: Sequence[TestRun], fmt: str, stream: TextIO | None = None) -> None:
    stream = stream or sys.stdout
    colour = fmt == "human" and stream.isatty()
    stream.write(render_run(runs, fmt, colour) + "\n")
