"""The partitioned analysis: it finds what the analysis done the long way finds (every rule in
every tool's bucket, nothing shared between tools), shares one answer between tools with the
same rules and schema, and reports a question z3 does not answer in time as undecided."""

from __future__ import annotations

from typing import Any

import pytest
from harnessc.compiler.analysis.budget import RLIMIT_VARIABLE
from harnessc.compiler.analysis.cache import AnalysisCache
from harnessc.compiler.analysis.policy import PolicyAnalysis, analyse_policies
from harnessc.runtime import model as m
from harnessc.runtime.model.semantics import selects
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .test_analysis import E_VALUES, assert_witness_wins, conditions

SCHEMA = m.Schema(
    fields=(
        m.Field(name="n", type=m.Type(name="int"), min=0, max=3),
        m.Field(name="e", type=m.Type(name="enum", values=E_VALUES)),
    )
)
OTHER_SCHEMA = m.Schema(
    fields=(
        m.Field(name="n", type=m.Type(name="int", optional=True)),
        m.Field(name="e", type=m.Type(name="enum", values=E_VALUES)),
    )
)
# three tools share a schema and a risk (their buckets differ only by their own rules)
TOOLS = {
    "a.x": m.Tool(id="a.x", wire_name="a_x", effects=("write",), risk="low", input=SCHEMA),
    "a.y": m.Tool(id="a.y", wire_name="a_y", effects=("write",), risk="low", input=SCHEMA),
    "b.z": m.Tool(id="b.z", wire_name="b_z", effects=("write",), risk="low", input=SCHEMA),
    "b.w": m.Tool(id="b.w", wire_name="b_w", effects=("write",), risk="high", input=OTHER_SCHEMA),
}
SELECTORS = (
    m.Selector(kind="id", value="a.x", text="a.x"),
    m.Selector(kind="id", value="b.z", text="b.z"),
    m.Selector(kind="id", value="b.w", text="b.w"),
    m.Selector(kind="glob", value="a.", text="a.*"),
    m.Selector(kind="glob", value="b.", text="b.*"),
    m.Selector(kind="all", text="*"),
    m.Selector(kind="risk", op=">=", value="high", text="risk >= high"),
)

rules = st.tuples(
    st.sampled_from(["allow", "ask", "deny"]),
    st.lists(st.sampled_from(SELECTORS), min_size=1, max_size=2, unique=True),
    st.none() | conditions,
)


def spec_of(parts: list[tuple[str, list[m.Selector], Any]], default: str = "deny") -> m.Spec:
    made = tuple(
        m.Rule(
            label=f"p#{i + 1}",
            policy="s.p",
            effect=effect,  # type: ignore[arg-type]
            selectors=tuple(selectors),
            condition=cond,
            approvers=(m.Approver(kind="role", value="r"),) if effect == "ask" else (),
            reason="no" if effect == "deny" else None,
        )
        for i, (effect, selectors, cond) in enumerate(parts)
    )
    policy = m.Policy(name="s.p", default=m.DefaultDecision(effect=default), rules=made)  # type: ignore[arg-type]
    return m.Spec(name="s", root_module="s", tools=TOOLS, policies={"s.p": policy})


def findings(analysis: PolicyAnalysis) -> list[tuple[Any, ...]]:
    return [(f.kind, f.rule, f.other_rule, f.message, f.exact) for f in analysis.findings]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(rules, min_size=1, max_size=5), st.sampled_from(["deny", "allow"]))
def test_the_partitioned_analysis_finds_what_the_long_way_finds(
    parts: list[tuple[str, list[m.Selector], Any]], default: str
) -> None:
    spec = spec_of(parts, default)
    short = analyse_policies(spec, cache=AnalysisCache(on_disk=False))
    long = analyse_policies(spec, partition=False, cache=AnalysisCache(on_disk=False))
    assert findings(short) == findings(long)
    assert set(short.witnesses["s.p"]) == set(long.witnesses["s.p"])
    labels = {r.label: r for r in spec.policies["s.p"].rules}
    for w in short.witnesses["s.p"].values():
        assert w.exact, w.notes
        assert_witness_wins(spec, w)
        if w.rule is not None:  # re-addressed to a tool its rule selects
            tool = spec.tools[w.call.tool]
            assert any(selects(s, tool) for s in labels[w.rule].selectors)


def test_tools_with_the_same_rules_and_schema_share_one_partition() -> None:
    # a.x, a.y and b.z: the same schema and risk, each with an ALLOW of its own
    selectors = [s for s in SELECTORS if s.kind == "id"] + [
        m.Selector(kind="id", value="a.y", text="a.y")
    ]
    n_small = m.Compare(
        op="<", left=m.Path(root="args", parts=("n",)), right=m.Literal(value=2, type="int")
    )
    parts = [("deny", [SELECTORS[5]], n_small)] + [("allow", [s], None) for s in selectors]
    spec = spec_of(parts)
    analysis = analyse_policies(spec, cache=AnalysisCache(on_disk=False))
    alone = analyse_policies(spec, partition=False, cache=AnalysisCache(on_disk=False))
    assert alone.partitions == 4 and analysis.partitions == 2  # b.w is another shape
    # the questions asked, by z3 or answered without it (compiler/analysis/cells.py)
    assert analysis.queries + analysis.decided < alone.queries + alone.decided
    witnesses = analysis.witnesses["s.p"]
    assert {w.call.tool for label, w in witnesses.items() if label != "p#1"} == set(TOOLS)
    for w in witnesses.values():
        assert w.exact and w.decision.rule == w.rule
        assert_witness_wins(spec, w)
    assert findings(analysis) == findings(alone)


def test_a_question_not_decided_in_time_is_reported_not_guessed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = m.Path(root="args", parts=("s",))
    tool = m.Tool(
        id="mail",
        wire_name="mail",
        effects=("external",),
        input=m.Schema(fields=(m.Field(name="s", type=m.Type(name="string")),)),
    )

    def matches(pattern: str) -> m.Compare:
        return m.Compare(op="matches", left=text, right=m.Literal(value=pattern, type="string"))

    slow = m.And(
        items=(matches("^(re|fw): [a-z ]{10,60}[0-9]{3}$"), m.Not(item=matches("^[a-m]{8,40}x$")))
    )
    rule = m.Rule(
        label="p.slow",
        policy="s.p",
        effect="deny",
        selectors=(m.Selector(kind="id", value="mail", text="mail"),),
        condition=slow,
        reason="no",
    )
    policy = m.Policy(name="s.p", default=m.DefaultDecision(effect="deny"), rules=(rule,))
    spec = m.Spec(name="s", root_module="s", tools={"mail": tool}, policies={"s.p": policy})
    monkeypatch.setenv(RLIMIT_VARIABLE, "5000")  # same on every machine, unlike 1 ms
    rushed = analyse_policies(spec, cache=AnalysisCache(on_disk=False))
    # neither "can win" nor "matches no call": not known
    assert [(f.kind, f.rule, f.exact) for f in rushed.findings] == [("undecided", "p.slow", False)]
    assert "did not decide within its budget whether rule `p.slow` can decide a call" in (
        rushed.findings[0].message
    )
    assert rushed.witnesses["s.p"] == {}
    monkeypatch.delenv(RLIMIT_VARIABLE)
    decided = analyse_policies(spec, cache=AnalysisCache(on_disk=False))
    assert decided.findings == [] and set(decided.witnesses["s.p"]) == {"p.slow"}


@pytest.mark.parametrize(("field", "shared"), [("risk", 2), ("id", 4)])
def test_a_rule_that_reads_the_tool_keeps_apart_tools_that_differ_in_what_it_reads(
    field: str, shared: int
) -> None:
    value = "high" if field == "risk" else "a.x"
    reads = m.Compare(
        op="==",
        left=m.Path(root="tool", parts=(field,)),
        right=m.Literal(value=value, type="string"),
    )
    spec = spec_of([("deny", [SELECTORS[5]], reads), ("allow", [SELECTORS[5]], None)])
    analysis = analyse_policies(spec, cache=AnalysisCache(on_disk=False))
    alone = analyse_policies(spec, partition=False, cache=AnalysisCache(on_disk=False))
    assert analysis.partitions == shared
    assert findings(analysis) == findings(alone)
    for w in analysis.witnesses["s.p"].values():
        assert w.exact, w.notes
        assert_witness_wins(spec, w)
