"""Differential tests of the meaning, with whole specs and whole sessions.

Each draw is a whole spec as source text (tests/session_specs.py `whole_specs`: provenance
with `only` and labels, history terms with inner conditions, `count`/`sum` windows, quantifiers
over optional lists, `on_success`, trust and labels on tools and fields) and sessions before a
call (what the user said, earlier calls with their results, at chosen times). For each:

- the reference evaluator (`naive_decide`), the compiled decider and the package (its
  `model.json` loaded by a `Harness`, the session run through the runtime's API on an injected
  clock) decide the call alike; some draws go through the real `build` and import the package;
- each history term is what the session's earlier calls make it, counted one call at a time;
- every claim of the analysis (each rule's witness, and each finding that names a call:
  never-wins, opposite-effects, absent-value, default-allow) replays concretely through its
  prelude (`session_prelude`) and gives what is claimed, and no sampled call is won by a rule
  the analysis says never wins or never matches;
- every `diff` region's witness, replayed on both specs, flips as reported, and a sampled call
  that flips outside every reported region fails the test (recall).

`PENDING` gates what known defects still break, each behind one flag, with an `xfail(strict)`
test per flag that shows the disagreement; remove a flag once its fix is in.
Derandomized under the `ci` profile; `HARNESSC_DIFFERENTIAL_EXAMPLES` scales the draws.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from harnessc.compiler import pipeline
from harnessc.compiler.analysis.cache import AnalysisCache
from harnessc.compiler.analysis.compare import (
    compare_specs,
    runtime_call,
    runtime_outcome,
    witness_preludes,
)
from harnessc.compiler.analysis.concrete import Call, canonical, session_terms
from harnessc.compiler.analysis.policy import PolicyAnalysis
from harnessc.compiler.analysis.prelude import session_prelude
from harnessc.compiler.analysis.text import spec_text
from harnessc.runtime import model as m
from harnessc.runtime.judge.conditions import Scope, evaluate, read_path
from harnessc.runtime.judge.history import history_key, prelude_ledger, result_labels
from harnessc.runtime.judge.policy import Decision, PolicyEngine, naive_decide
from harnessc.runtime.log.store import MemoryStore
from harnessc.runtime.model.semantics import selects, tool_view
from harnessc.runtime.session.harness import Harness
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from .budget import examples
from .session_specs import (
    IBANS,
    MUTATIONS,
    DrawnSpec,
    final_calls,
    history_specs,
    mutations,
    session_steps,
    tools_text,
    whole_specs,
)

PENDING: dict[str, str] = {}
"""Known defects: each key leaves a construct out of the draws, or a property unchecked, until
its fix lands (then delete the key and its xfail turns into a pass)."""

_PENDING_CONSTRUCTS = {"history_provenance": "history_provenance", "prelude_facts": "fact_read"}
EXCLUDED = frozenset(c for flag, c in _PENDING_CONSTRUCTS.items() if flag in PENDING)
"""The constructs no spec is drawn with while their defect is pending (`prelude_facts`: a
condition reading the fact that `on_success` adds to)."""

_SCALE = int(os.environ.get("HARNESSC_DIFFERENTIAL_EXAMPLES", "0") or 0)


def budget(n: int) -> int:
    """`n` draws at the standard budget, or `HARNESSC_DIFFERENTIAL_EXAMPLES` when set."""
    return _SCALE if _SCALE > 0 else examples(n)


SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
POLICY = "d.p"
AGENT = "d.a"
FinalCall = tuple[str, dict[str, Any], str]
"""The call decided after a session: tool, arguments, the actor's role (`final_calls`)."""
START = datetime(2026, 5, 9, 7, 0, tzinfo=UTC)
NOW = START + timedelta(hours=3)
NOW_MS = int(NOW.timestamp() * 1000)


# ---------------------------------------------------------------------------------------------
# Compiling a drawn spec, and the three deciders


def compile_spec(text: str, folder: Path) -> pipeline.CheckResult:
    path = folder / "d.harness"
    path.write_text(text, encoding="utf-8")
    result = pipeline.check([path])
    assert result.ok and result.model is not None, [
        (d.code, d.message) for d in result.diagnostics if d.severity == "error"
    ]
    return result


def outcome(decision: Decision) -> tuple[Any, ...]:
    """What makes two decisions the same: the effect, the rule, the approvers."""
    return (decision.effect, decision.rule, tuple((a.kind, a.value) for a in decision.approvers))


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


class Results:
    """The executors of a session's earlier calls: each returns the result its step gives."""

    def __init__(self, harness: Harness) -> None:
        self.next: Any = None
        for tool_id in harness.spec.tools:
            harness.bind(tool_id, self)

    def __call__(self, args: dict[str, Any]) -> Any:
        return self.next


Decided = tuple[Decision, list[m.SessionStep], FinalCall]
"""A decision of the runtime's session, the steps that had happened before it, and the call."""


def run_session(
    harness: Harness, clock: Clock, steps: Sequence[m.SessionStep], call: FinalCall
) -> tuple[Decision, list[m.SessionStep], list[Decided]]:
    """The call decided in a session of the runtime after `steps`, each at its time: the
    decision, the steps that happened (an earlier call runs only when policy allows it), and
    the decisions of the earlier calls."""
    tool_id, args, role = call
    earlier: list[Decided] = []
    results = Results(harness)
    s = harness.session(agent=AGENT, actor={"user": "u1", "role": role})
    done: list[m.SessionStep] = []
    for n, step in enumerate(steps):
        if step.said is not None:
            s.user_said(step.said)
            done.append(step)
            continue
        assert step.tool is not None
        clock.now = NOW - timedelta(milliseconds=step.ago_ms or 0)
        pending = s.normalize(step.tool, f"earlier-{n}", dict(step.args))
        assert not hasattr(pending, "code"), pending
        decided = s.decide(pending)  # type: ignore[arg-type]
        # as of this call's time: the steps before it happened that much earlier than it
        rebased = [
            d.model_copy(update={"ago_ms": (d.ago_ms or 0) - (step.ago_ms or 0)}) if d.tool else d
            for d in done
        ]
        earlier.append((decided, rebased, (step.tool, dict(step.args), role)))
        if decided.effect != "allow":
            continue
        results.next = step.result
        ran = s.invoke(pending)  # type: ignore[arg-type]
        assert ran.ran, ran
        done.append(step)
    clock.now = NOW
    pending = s.normalize(tool_id, "the-call", args)
    assert not hasattr(pending, "code"), pending
    decision, _ = s.judge(pending)  # type: ignore[arg-type]
    return decision, done, earlier


def context(spec: m.Spec, steps: Sequence[m.SessionStep], call: FinalCall) -> Any:
    """The call as the runtime's `CallContext`, its session's ledger made from `steps`."""
    tool_id, args, role = call
    ctx = runtime_call(
        spec, Call(tool=tool_id, args=dict(args), actor={"user": "u1", "role": role}), steps
    )
    ctx.ledger = prelude_ledger(spec, steps, NOW_MS)  # as of the session's clock
    return ctx


def agree(
    spec: m.Spec,
    engine: PolicyEngine,
    package: Harness,
    clock: Clock,
    steps: Sequence[m.SessionStep],
    call: FinalCall,
) -> Decision:
    """The three deciders' one decision of `call` after `steps` (asserted alike, and so is
    each decision of an earlier call in the session)."""
    packaged, done, earlier = run_session(package, clock, steps, call)
    for decided, before, step in [*earlier, (packaged, done, call)]:
        ctx = context(spec, before, step)
        reference = naive_decide(spec, POLICY, ctx)
        compiled = engine.decide(POLICY, ctx)
        assert outcome(compiled) == outcome(reference), (before, step)
        assert outcome(decided) == outcome(reference), (before, step)
    return reference


def model_harness(spec: m.Spec, folder: Path, clock: Clock) -> Harness:
    """The package's harness as its `load` makes it: from the model's JSON file."""
    path = folder / "model.json"
    path.write_text(spec.to_json() + "\n", encoding="utf-8")
    return Harness.from_json(path, store=MemoryStore(clock=clock), clock=clock)


# ---------------------------------------------------------------------------------------------
# The reference, the compiled decider and the package decide alike


def uses_history_numbers(drawn: DrawnSpec) -> bool:
    return bool(drawn.uses & {"count", "sum"})


def drawn(*rules: str, default: str = "allow", **tools: Any) -> DrawnSpec:
    """A spec as `whole_specs` draws it, written by hand (for `@example`)."""
    return DrawnSpec(tools_text(**tools), default, rules, frozenset())


@settings(max_examples=budget(500), **SETTINGS)  # type: ignore[arg-type]
@given(
    drawn=whole_specs(exclude=EXCLUDED),
    sessions=st.lists(st.tuples(session_steps(), final_calls()), min_size=3, max_size=3),
)
# a succeeded call of a tool without output, counted by a term made after it
@example(
    drawn=drawn("  r0: allow files.delete when succeeded(files.delete)"),
    sessions=[
        (
            [m.SessionStep(tool="files.delete", args={"path": "/tmp/a", "recursive": False})],
            ("files.delete", {"path": "/tmp/a", "recursive": False}, "member"),
        )
    ],
)
# `on_success add args.iban to known.ibans`: the earlier payment's IBAN is a trusted fact
@example(
    drawn=drawn("  r0: allow pay.send when all x in args.notify: x from nowhere", on_success=True),
    sessions=[
        (
            [
                m.SessionStep(
                    tool="pay.send", args={"iban": IBANS[1], "amount": 50}, result={"ref": "r1"}
                )
            ],
            ("pay.send", {"iban": IBANS[0], "amount": 50, "notify": [IBANS[1]]}, "member"),
        )
    ],
)
def test_the_reference_the_decider_and_the_package_decide_alike(
    drawn: DrawnSpec, sessions: list[tuple[list[m.SessionStep], FinalCall]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        spec = compile_spec(drawn.text, Path(tmp)).model
        assert spec is not None
        engine = PolicyEngine(spec)
        for steps, call in sessions:
            clock = Clock()
            package = model_harness(spec, Path(tmp), clock)
            event(agree(spec, engine, package, clock, steps, call).effect)


def history_terms(spec: m.Spec) -> list[m.History]:
    """The history terms of the policy's rules (outer terms first, each once)."""
    found: dict[str, m.History] = {}
    for rule in spec.policies[POLICY].rules:
        for f in session_terms(rule.condition) if rule.condition is not None else ():
            if isinstance(f.term, m.History):
                found.setdefault(canonical(f.term), f.term)
    return list(found.values())


def expected_number(spec: m.Spec, term: m.History, steps: Sequence[m.SessionStep]) -> float | None:
    """A history term over the earlier calls of `steps`, counted one call at a time: the
    selected tools' calls in the window, whose `when` holds, each adding 1 or its `sum` field
    (`seen`: the results carrying the label). A `when` reading provenance is read with the
    session's sources as they were at the earlier call and as they are now: where the two
    differ the meaning is not settled here, and None says so."""
    ledger = prelude_ledger(spec, steps, NOW_MS)
    total: float = 0
    for n, step in enumerate(steps):
        if step.tool is None:
            continue
        if term.window_ms is not None and (step.ago_ms or 0) > term.window_ms:
            continue
        tool = spec.tools[step.tool]
        view = tool_view(tool)
        if term.func == "seen":
            total += term.label in result_labels(tool, step.result)
            continue
        if not any(selects(sel, tool, view) for sel in term.selectors):
            continue
        result = step.result if isinstance(step.result, dict) else None
        if term.where is not None:
            then = prelude_ledger(spec, steps[:n], NOW_MS)
            holds = {
                evaluate(term.where, Scope(args=step.args, tool=view, result=result, ledger=at))
                for at in (then, ledger)
            }
            if len(holds) > 1:
                return None
            if holds == {False}:
                continue
        if term.func != "sum":
            total += 1
        elif term.field is not None:
            value = read_path(term.field, Scope(args=step.args, tool=view, result=result))
            total += value if isinstance(value, int | float) and not isinstance(value, bool) else 0
    return total


@settings(max_examples=budget(200), **SETTINGS)  # type: ignore[arg-type]
@given(
    drawn=history_specs(exclude=EXCLUDED),
    sessions=st.lists(session_steps(max_steps=8), min_size=3, max_size=3),
)
def test_each_history_term_is_what_its_earlier_calls_make_it(
    drawn: DrawnSpec, sessions: list[list[m.SessionStep]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        spec = compile_spec(drawn.text, Path(tmp)).model
        assert spec is not None
        terms = history_terms(spec)
        for steps in sessions:
            ledger = prelude_ledger(spec, steps, NOW_MS)
            for term in terms:
                want = expected_number(spec, term, steps)
                if want is None:
                    event("a `when` read with the sources of another time")
                    continue
                got = ledger.number(history_key(term))
                if term.func in ("called", "succeeded", "seen"):
                    assert (got > 0) == (want > 0), (spec_text(term), steps)
                else:
                    assert got == want, (spec_text(term), steps)
                event(f"{term.func}: {'some' if want else 'none'}")


BUILD_EXCLUDED = EXCLUDED | (
    frozenset({"count", "sum"}) if "build_history" in PENDING else frozenset()
)


@contextmanager
def built_package(text: str, folder: Path) -> Iterator[tuple[m.Spec, Any]]:
    """`harnessc build` of the spec into `folder`, and its package imported (under a name of
    its own, so that two builds never share a module)."""
    path = folder / "d.harness"
    path.write_text(text, encoding="utf-8")
    built = pipeline.build([path], folder / "out", embed=False)
    assert built.check.ok and built.check.model is not None, [
        (d.code, d.message) for d in built.check.diagnostics if d.severity == "error"
    ]
    init = folder / "out" / "d" / "__init__.py"
    name = f"differential_build_{abs(hash(str(folder)))}"
    found = importlib.util.spec_from_file_location(name, init)
    assert found is not None and found.loader is not None
    module = importlib.util.module_from_spec(found)
    sys.modules[name] = module
    try:
        found.loader.exec_module(module)
        yield built.check.model, module
    finally:
        del sys.modules[name]


@settings(max_examples=budget(15), **SETTINGS)  # type: ignore[arg-type]
@given(
    drawn=whole_specs(exclude=BUILD_EXCLUDED),
    sessions=st.lists(st.tuples(session_steps(), final_calls()), min_size=3, max_size=3),
)
def test_the_built_package_decides_as_the_reference(
    drawn: DrawnSpec, sessions: list[tuple[list[m.SessionStep], FinalCall]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp, built_package(drawn.text, Path(tmp)) as built:
        spec, package = built
        engine = PolicyEngine(spec)
        for steps, call in sessions:
            clock = Clock()
            harness = package.load(store=MemoryStore(clock=clock), clock=clock)
            event(agree(spec, engine, harness, clock, steps, call).effect)


# ---------------------------------------------------------------------------------------------
# Every claim of the analysis replays through its prelude


def replay(spec: m.Spec, engine: PolicyEngine, call: Call) -> Decision | None:
    """The runtime's decision of a witness call after its prelude; None when no session gives
    its state (the prelude says why, and nothing is claimed of it)."""
    prelude = session_prelude(spec, call)
    if prelude.missing is not None:
        event(f"no prelude: {prelude.missing[:60]}")
        return None
    ctx = runtime_call(spec, call, prelude.steps)
    reference = naive_decide(spec, POLICY, ctx)
    assert outcome(engine.decide(POLICY, ctx)) == outcome(reference), call
    return reference


def alone(spec: m.Spec, label: str) -> m.Spec:
    """The spec with the policy reduced to one rule, to ask whether the rule matches a call."""
    policy = spec.policies[POLICY]
    rules = tuple(r for r in policy.rules if r.label == label)
    default = m.DefaultDecision(effect="ask" if rules[0].effect != "ask" else "deny")
    if default.effect == "ask":
        default = m.DefaultDecision(effect="ask", approvers=(m.Approver(kind="role", value="x"),))
    one = policy.model_copy(update={"rules": rules, "default": default})
    return spec.model_copy(update={"policies": {POLICY: one}})


def check_claims(spec: m.Spec, analysis: PolicyAnalysis) -> dict[str, str]:
    """Replay every witness and every finding's example; the rules claimed never to win or
    never to match, by label and kind."""
    engine = PolicyEngine(spec)
    claims = []
    for label, witness in analysis.witnesses.get(POLICY, {}).items():
        claims.append(("wins", label, witness))
    never: dict[str, str] = {}
    for finding in analysis.findings:
        if finding.kind in ("never-wins", "unsatisfiable") and finding.exact and finding.rule:
            never[finding.rule] = finding.kind
        if finding.example is not None:
            claims.append((finding.kind, finding.rule, finding.example))
    for kind, label, witness in claims:
        if not witness.exact:
            event(f"inexact {kind}")
            # nothing here is approximated: a witness is never re-judged
            rejudged = [n for n in witness.notes if n.startswith("re-judged")]
            assert not rejudged, (kind, label, witness.call, rejudged)
            continue
        actual = replay(spec, engine, witness.call)
        if actual is None:
            continue
        claimed = witness.decision
        assert (actual.effect, actual.rule) == (claimed.effect, claimed.rule), (kind, label)
        if kind in ("never-wins", "opposite-effects") and label is not None:
            # the rule matches the call, and another decides it
            matched = replay(alone(spec, label), PolicyEngine(alone(spec, label)), witness.call)
            assert matched is None or matched.rule == label, (kind, label, witness.call)
        event(f"replayed {kind}")
    return never


@settings(max_examples=budget(300), **SETTINGS)  # type: ignore[arg-type]
@given(
    drawn=whole_specs(exclude=EXCLUDED),
    sessions=st.lists(st.tuples(session_steps(), final_calls()), min_size=3, max_size=3),
)
def test_every_claim_of_the_analysis_replays_through_its_prelude(
    drawn: DrawnSpec, sessions: list[tuple[list[m.SessionStep], FinalCall]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        result = compile_spec(drawn.text, Path(tmp))
        spec, analysis = result.model, result.analysis
        assert spec is not None and analysis is not None
        never = check_claims(spec, analysis)
        engine = PolicyEngine(spec)
        for steps, call in sessions:
            decision = engine.decide(POLICY, context(spec, steps, call))
            assert decision.rule not in never, (never, steps, call)


# ---------------------------------------------------------------------------------------------
# Every region of `diff` flips as reported, and every flip is in a region

_PENDING_CHANGES = {"tools": "diff_trust", "window": "diff_windows"}
DIFF_KINDS = tuple(k for k in MUTATIONS if _PENDING_CHANGES.get(k) not in PENDING)
"""The changes the diff property draws: all, but those a pending defect still misjudges."""
SAMPLED_CALLS = 25
"""Calls sampled on both specs of each drawn change, each after its own session (recall)."""


def key_of(decision: Decision) -> tuple[Any, ...]:
    return runtime_outcome(decision)


DIFF_EXCLUDED = EXCLUDED | ({"fact_read"} if "diff_on_success" in PENDING else frozenset())
"""The constructs the diff property draws no spec with: `diff_on_success` leaves out a
condition reading the fact that `on_success` adds to."""


@settings(max_examples=budget(250), **SETTINGS)  # type: ignore[arg-type]
@given(data=st.data(), old=whole_specs(exclude=DIFF_EXCLUDED))
def test_every_region_of_diff_flips_and_every_flip_is_in_a_region(
    data: st.DataObject, old: DrawnSpec
) -> None:
    kind, new = data.draw(mutations(old, exclude=DIFF_EXCLUDED, kinds=DIFF_KINDS), label="mutation")
    event(kind)
    with tempfile.TemporaryDirectory() as tmp:
        a = compile_spec(old.text, Path(tmp)).model
        b = compile_spec(new.text, Path(tmp)).model
        assert a is not None and b is not None
        comparison = compare_specs(a, b, cache=AnalysisCache(on_disk=False))
        engines = PolicyEngine(a), PolicyEngine(b)
        for region in comparison.regions:
            # each session the witness may be decided after (the new side's reading of its
            # terms; then the old side's, where a label or trust changed), until one flips it
            preludes = [
                p
                for p in witness_preludes(a, b, region.witness, region.old_reading)
                if p.missing is None
            ]
            if not preludes:
                assert not region.verified
                event("region without a prelude")
                continue
            flips, before, after = False, None, None
            for prelude in preludes:
                before, after = (
                    key_of(e.decide(POLICY, runtime_call(s, region.witness, prelude.steps)))
                    for e, s in zip(engines, (a, b), strict=True)
                )
                flips = before != after and (before, after) == (region.old.key(), region.new.key())
                if flips:
                    break
            assert flips == region.verified, (region.change, region.notes, before, after)
            assert flips or not region.exact, (region.change, region.notes, before, after)
            event(f"region {'verified' if flips else 'unverified'}")
        covered = {(r.tool, r.old.rule, r.new.rule) for r in comparison.regions}
        for _ in range(SAMPLED_CALLS):
            steps = data.draw(session_steps(), label="steps")
            call = data.draw(final_calls(), label="call")
            x, y = (
                e.decide(POLICY, context(s, steps, call))
                for e, s in zip(engines, (a, b), strict=True)
            )
            if key_of(x) != key_of(y):
                event("a sampled call flips")
                assert (call[0], x.rule, y.rule) in covered, (steps, call, covered)


# ---------------------------------------------------------------------------------------------
# What each pending defect still gets wrong: each test fails until its fix merges (strict)


def pending(flag: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(flag in PENDING, reason=PENDING.get(flag, ""), strict=True)


@pending("history_provenance")
def test_provenance_inside_a_history_term_is_read_at_run_time(tmp_path: Path) -> None:
    rules = (
        "  r0: allow pay.send when called(mail.read when args.id from user)",
        "  r1: allow mail.read",
    )
    spec = compile_spec(drawn(*rules, default="deny").text, tmp_path).model
    assert spec is not None
    steps = [
        m.SessionStep(said=f"read {IBANS[0]}"),
        m.SessionStep(tool="mail.read", args={"id": IBANS[0]}, result={"body": "hi"}),
    ]
    clock = Clock()
    call: FinalCall = ("pay.send", {"iban": IBANS[1], "amount": 5}, "member")
    decision = agree(
        spec, PolicyEngine(spec), model_harness(spec, tmp_path, clock), clock, steps, call
    )
    assert decision.rule == "p.r0"


@pending("build_history")
def test_a_spec_with_count_builds_and_its_package_decides(tmp_path: Path) -> None:
    rule = '  r0: deny files.delete when count(files.delete) > 1 {\n    reason "No."\n  }'
    with built_package(drawn(rule).text, tmp_path) as (spec, package):
        clock = Clock()
        harness = package.load(store=MemoryStore(clock=clock), clock=clock)
        step = m.SessionStep(tool="files.delete", args={"path": "/a", "recursive": False})
        call: FinalCall = ("files.delete", {"path": "/a", "recursive": False}, "member")
        assert agree(spec, PolicyEngine(spec), harness, clock, [step], call).rule == "p.r0"


@pending("diff_trust")
def test_diff_reports_a_tool_made_trusted_that_allows_a_payment(tmp_path: Path) -> None:
    rule = "  r0: allow pay.send when args.iban from trusted"
    old = compile_spec(drawn(rule, default="deny", crm_trust="untrusted").text, tmp_path).model
    new = compile_spec(drawn(rule, default="deny", crm_trust="trusted").text, tmp_path).model
    assert old is not None and new is not None
    steps = [m.SessionStep(tool="crm.lookup", args={"name": "bob"}, result={"iban": IBANS[0]})]
    call: FinalCall = ("pay.send", {"iban": IBANS[0], "amount": 5}, "member")
    flips = [PolicyEngine(s).decide(POLICY, context(s, steps, call)).effect for s in (old, new)]
    assert flips == ["deny", "allow"]
    comparison = compare_specs(old, new, cache=AnalysisCache(on_disk=False))
    assert [(r.tool, r.change) for r in comparison.regions if r.widened] == [
        ("pay.send", "deny→allow")
    ]


@pending("diff_windows")
def test_diff_reports_no_widening_when_a_deny_counts_over_a_longer_window(tmp_path: Path) -> None:
    def spec(window: str) -> m.Spec:
        term = f"count(files.delete within {window})"
        rule = f'  r0: deny files.delete when {term} > 2 {{\n    reason "No."\n  }}'
        model = compile_spec(drawn(rule).text, tmp_path).model
        assert model is not None
        return model

    # every call the 10m window counts, the 1h window counts too: the deny can only widen
    comparison = compare_specs(spec("10m"), spec("1h"), cache=AnalysisCache(on_disk=False))
    assert [r.change for r in comparison.regions if r.widened] == []


@pending("diff_on_success")
def test_diff_reports_the_on_success_that_fed_a_fact_removed(tmp_path: Path) -> None:
    # without `on_success`, an earlier payment no longer makes its IBAN a known one
    rule = "  r0: allow pay.send when args.iban in known.ibans"
    old = compile_spec(drawn(rule, default="deny", on_success=True).text, tmp_path).model
    new = compile_spec(drawn(rule, default="deny").text, tmp_path).model
    assert old is not None and new is not None
    step = m.SessionStep(tool="pay.send", args={"iban": IBANS[0], "amount": 5}, result={"ref": "r"})
    call: FinalCall = ("pay.send", {"iban": IBANS[0], "amount": 5}, "member")
    flips = [PolicyEngine(s).decide(POLICY, context(s, [step], call)).effect for s in (old, new)]
    assert flips == ["allow", "deny"]
    comparison = compare_specs(old, new, cache=AnalysisCache(on_disk=False))
    assert [r.tool for r in comparison.regions] == ["pay.send"]
    [region] = comparison.regions
    assert (region.old.effect, region.new.effect) == ("allow", "deny")
    # the witness's prelude makes the earlier payment, so the region verifies by replay
    assert region.verified and region.exact, region.notes


def test_diff_reports_the_on_success_that_feeds_a_fact_added(tmp_path: Path) -> None:
    # the other way: adding `on_success` widens, an earlier payment makes a later one allowed
    rule = "  r0: allow pay.send when args.iban in known.ibans"
    old = compile_spec(drawn(rule, default="deny").text, tmp_path).model
    new = compile_spec(drawn(rule, default="deny", on_success=True).text, tmp_path).model
    assert old is not None and new is not None
    comparison = compare_specs(old, new, cache=AnalysisCache(on_disk=False))
    [region] = comparison.regions
    assert (region.tool, region.old.effect, region.new.effect) == ("pay.send", "deny", "allow")
    assert region.verified and region.exact, region.notes
    # the same `on_success` on both sides reads the fact alike: nothing changes
    same = compare_specs(new, new.model_copy(), cache=AnalysisCache(on_disk=False))
    assert same.regions == []


def test_a_session_of_steps_gives_the_facts_that_on_success_added(tmp_path: Path) -> None:
    # the runtime appends the IBAN to `known.ibans` after the payment; a spec test's `before`,
    # a generated case and a witness's prelude build the ledger and leave the facts as given
    rule = '  r0: deny pay.send when args.iban in known.ibans {\n    reason "Paid."\n  }'
    spec = compile_spec(drawn(rule, on_success=True).text, tmp_path).model
    assert spec is not None
    step = m.SessionStep(tool="pay.send", args={"iban": IBANS[0], "amount": 5}, result={"ref": "r"})
    call: FinalCall = ("pay.send", {"iban": IBANS[0], "amount": 5}, "member")
    clock = Clock()
    decision = agree(
        spec, PolicyEngine(spec), model_harness(spec, tmp_path, clock), clock, [step], call
    )
    assert decision.rule == "p.r0"


def test_the_witness_of_a_negated_quantifier_over_an_absent_list_is_exact(tmp_path: Path) -> None:
    # the solver leaves `args.notify` out; the witness must still be decided by the rule
    term = "not (all x in args.notify: not x from trusted)"
    rule = f'  r0: deny pay.send when {term} {{\n    reason "No."\n  }}'
    result = compile_spec(drawn(rule).text, tmp_path)
    assert result.model is not None and result.analysis is not None
    witness = result.analysis.witness(POLICY, "p.r0")
    assert witness is not None and witness.exact, witness
    replayed = replay(result.model, PolicyEngine(result.model), witness.call)
    assert replayed is not None and replayed.rule == "p.r0"


def test_the_example_of_a_rule_that_never_wins_matches_the_rule(tmp_path: Path) -> None:
    # the example leaves the fact out, so the rule does not match its own example
    rules = (
        "  r0: allow pay.send when args.iban in known.ibans and args.iban from user",
        '  r1: deny pay.send {\n    reason "No."\n  }',
    )
    result = compile_spec(drawn(*rules).text, tmp_path)
    assert result.model is not None and result.analysis is not None
    [finding] = [f for f in result.analysis.findings if f.kind == "never-wins"]
    assert finding.example is not None
    one = alone(result.model, "p.r0")
    replayed = replay(one, PolicyEngine(one), finding.example.call)
    assert replayed is not None and replayed.rule == "p.r0"
