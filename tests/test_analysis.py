"""Policy analysis: findings with example calls, witnesses that really win, and brute force."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import z3
from harnessc.compiler.analysis.concrete import canonical
from harnessc.compiler.analysis.policy import (
    Call,
    Finding,
    PolicyAnalysis,
    Witness,
    analyse_policies,
)
from harnessc.compiler.analysis.smt import MAX_SEARCH_WIDTH, MAX_SMT_TEXT, search_regex
from harnessc.compiler.pipeline import check
from harnessc.runtime import model as m
from harnessc.runtime.model.semantics import value_matches
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .budget import examples
from .conftest import ROOT

# ---------------------------------------------------------------------------------------------
# A tiny evaluator, written from language.md §6 and §7.5 independently of the analysis


ABSENT = object()
UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def _ms(text: Any) -> Any:
    if isinstance(text, int):
        return text
    parts = re.findall(r"(\d+)(ms|s|m|h|d)", text)
    return sum(int(n) * UNITS[u] for n, u in parts)


def _read(spec: m.Spec, call: Call, path: m.Path) -> Any:
    tool = spec.tools[call.tool]
    op = tool.operations.get(call.args.get("op", ""))
    if path.root == "tool":
        value: Any = {
            "id": tool.id,
            "kind": tool.kind,
            "risk": op.risk if op else tool.risk,
            "effects": list(op.effects if op else tool.effects),
        }
    elif path.root == "args":
        value = dict(call.args)
        for f in tool.input.fields:
            if f.name not in value and f.default is not None:
                value[f.name] = f.default
            if f.type.name == "duration" and f.name in value:
                value[f.name] = _ms(value[f.name])
    elif path.root == "actor":
        value = {**call.actor, "roles": [call.actor.get("role"), *call.actor.get("roles", [])]}
    elif path.root == "fact":
        value = call.facts
        return value.get(path.parts[0], ABSENT) if len(path.parts) == 1 else ABSENT
    else:
        value = {"resource": call.resource, "task": call.task, "env": call.env}[path.root]
    for part in path.parts:
        value = value.get(part, ABSENT) if isinstance(value, dict) else ABSENT
    return value


def _val(spec: m.Spec, call: Call, v: Any) -> Any:
    if isinstance(v, m.History):
        return call.session.get(canonical(v), ABSENT)  # the witness's session state
    if isinstance(v, m.Literal):
        return v.value
    if isinstance(v, m.EnumMember):
        return v.name
    if isinstance(v, m.ListValue):
        return [_val(spec, call, i) for i in v.items]
    if isinstance(v, m.FactCall):
        table = call.connections if v.func == "connected" else call.runtimes
        return table.get(v.name, False)
    return _read(spec, call, v)


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def holds(spec: m.Spec, call: Call, c: Any) -> bool:
    if isinstance(c, m.And):
        return all(holds(spec, call, i) for i in c.items)
    if isinstance(c, m.Or):
        return any(holds(spec, call, i) for i in c.items)
    if isinstance(c, m.Not):
        return not holds(spec, call, c.item)
    if isinstance(c, m.Provenance | m.Quantified):
        return call.session.get(canonical(c)) is True  # the witness's session state
    if not isinstance(c, m.Compare):
        return _val(spec, call, c) is True
    a = _val(spec, call, c.left)
    if c.op == "has":
        word = c.right.name if isinstance(c.right, m.EnumMember) else c.right.value
        return (word in a) if isinstance(a, dict | list) else False
    b = _val(spec, call, c.right)
    if a is ABSENT or b is ABSENT:
        return False
    risk = "risk" in getattr(c.left, "parts", ())
    if risk:
        a, b = m.risk_rank(a), m.risk_rank(b)
    match c.op:
        case "==":
            return _same(a, b)
        case "!=":
            return not _same(a, b)
        case "<":
            return a < b
        case "<=":
            return a <= b
        case ">":
            return a > b
        case ">=":
            return a >= b
        case "in":
            return any(_same(a, i) for i in b)
        case "matches":
            return re.search(b, a) is not None
        case "startswith":
            return a.startswith(b)
        case "endswith":
            return a.endswith(b)
        case "within":
            return a == b or a.startswith(b.rstrip("/") + "/")
    raise AssertionError(c.op)


def matches(spec: m.Spec, rule: m.Rule, call: Call) -> bool:
    tool = spec.tools[call.tool]
    op = tool.operations.get(call.args.get("op", ""))
    risk = m.risk_rank(op.risk if op else tool.risk)
    effects = op.effects if op else tool.effects
    levels = {"<": risk.__lt__, "<=": risk.__le__, ">": risk.__gt__, ">=": risk.__ge__}
    levels |= {"==": risk.__eq__, "!=": risk.__ne__}
    selected = any(
        (s.kind == "id" and s.value == tool.id)
        or (s.kind == "glob" and tool.id.startswith(s.value))
        or s.kind == "all"
        or (s.kind == "module" and tool.id in s.tools)
        or (s.kind == "pack" and s.value in tool.packs)
        or (s.kind == "kind" and s.value == tool.kind)
        or (s.kind == "risk" and levels[s.op or ">="](m.risk_rank(s.value)))
        or (s.kind == "effects" and s.value in effects)
        for s in rule.selectors
    )
    return selected and (rule.condition is None or holds(spec, call, rule.condition))


def winner(spec: m.Spec, policy: m.Policy, call: Call) -> m.Rule | None:
    matched = [r for r in policy.rules if matches(spec, r, call)]
    for effect in ("deny", "ask", "allow"):
        for r in matched:
            if r.effect == effect:
                return r
    return None


def assert_witness_wins(spec: m.Spec, w: Witness) -> None:
    policy = spec.policies[w.policy]
    won = winner(spec, policy, w.call)
    assert (won.label if won else None) == w.decision.rule, w.call
    if won is not None:
        assert won.effect == w.decision.effect
        assert w.decision.approvers == [{"kind": a.kind, "value": a.value} for a in won.approvers]


# ---------------------------------------------------------------------------------------------
# Small specs

TOOLS = """
tool deploy {
  summary "Deploy."
  effects external
  risk high
  input {
    env: enum("staging", "production")
    n: int min 0 max 10
    ticket: string?
  }
}
tool lookup {
  summary "Look something up."
  effects read
  input { q: string }
}
"""


def analyse(tmp_path: Path, policy: str, tools: str = TOOLS) -> tuple[m.Spec, PolicyAnalysis]:
    path = tmp_path / "spec.harness"
    path.write_text(textwrap.dedent(tools) + textwrap.dedent(policy), encoding="utf-8")
    result = check([path])
    assert result.ok, [d.message for d in result.diagnostics]
    assert result.model is not None and result.analysis is not None
    return result.model, result.analysis


def only(analysis: PolicyAnalysis, kind: str) -> Finding:
    found = [f for f in analysis.findings if f.kind == kind]
    assert len(found) == 1, analysis.findings
    return found[0]


def test_a_rule_beaten_by_a_stronger_rule_never_wins(tmp_path: Path) -> None:
    spec, analysis = analyse(
        tmp_path,
        """
        policy p {
          default deny
          big: deny deploy when args.n > 5 { reason "too big" }
          shadowed: allow deploy when args.n >= 7
          allow deploy when args.n < 3
        }
        """,
    )
    finding = only(analysis, "never-wins")
    assert (finding.rule, finding.other_rule) == ("p.shadowed", "p.big")
    assert "`p.shadowed` can never win" in finding.message
    assert finding.origin is not None
    line = Path(finding.origin.file).read_text().splitlines()[finding.origin.line - 1]
    assert line.strip().startswith("shadowed:")
    example = finding.example
    assert example is not None and example.exact
    policy = spec.policies["spec.p"]
    assert matches(spec, policy.rules[1], example.call)
    assert winner(spec, policy, example.call).label == "p.big"
    assert analysis.witness("spec.p", "p.shadowed") is None
    for label in ("p.big", "p#3"):
        assert_witness_wins(spec, analysis.witness("spec.p", label))


@pytest.mark.parametrize("condition", ["args.n == resource.limit", "resource.limit == args.n"])
def test_an_int_argument_equal_to_an_untyped_value_is_analysed(
    tmp_path: Path, condition: str
) -> None:
    """An untyped value compared with an int is read as a number on both sides (z3 gets a real
    and the int made real, in either order), with a witness that wins."""
    spec, analysis = analyse(
        tmp_path,
        f"""
        policy p {{
          default deny
          same: allow deploy when {condition}
          allow deploy when {condition} and args.n > 3
        }}
        """,
    )
    assert_witness_wins(spec, analysis.witness("spec.p", "p.same"))
    finding = only(analysis, "never-wins")
    assert (finding.rule, finding.other_rule) == ("p#2", "p.same")


def test_string_prefixes_and_suffixes_get_exact_witnesses_and_shadowing(tmp_path: Path) -> None:
    spec, analysis = analyse(
        tmp_path,
        """
        policy p {
          default deny
          secrets: deny lookup when args.q endswith ".env" { reason "no secrets" }
          dotted: allow lookup when args.q endswith "prod.env"
          drafts: ask lookup when args.q startswith "draft/" and args.q endswith ".md" {
            approver role "editor"
          }
          allow lookup
        }
        """,
    )
    # every string ending in `prod.env` ends in `.env`: the DENY always beats it
    finding = only(analysis, "never-wins")
    assert (finding.rule, finding.other_rule) == ("p.dotted", "p.secrets")
    for label in ("p.secrets", "p.drafts", "p#4"):
        w = analysis.witness("spec.p", label)
        assert w is not None and w.exact, (label, w)
        assert_witness_wins(spec, w)
    drafts = analysis.witness("spec.p", "p.drafts")
    assert drafts is not None
    assert drafts.call.args["q"].startswith("draft/") and drafts.call.args["q"].endswith(".md")


def test_an_earlier_rule_of_the_same_effect_hides_a_later_one(tmp_path: Path) -> None:
    _, analysis = analyse(
        tmp_path,
        """
        policy p {
          default deny
          wide: allow deploy when args.env == staging or args.n == 0
          narrow: allow deploy when args.env == staging and args.n < 5
        }
        """,
    )
    finding = only(analysis, "never-wins")
    assert (finding.rule, finding.other_rule) == ("p.narrow", "p.wide")
    assert "earlier `allow` rule `p.wide`" in finding.message


def test_a_condition_that_can_never_hold_is_unsatisfiable(tmp_path: Path) -> None:
    _, analysis = analyse(
        tmp_path,
        """
        policy p {
          default deny
          dead: deny deploy when args.n > 5 and args.n < 3 { reason "never" }
          schema: allow deploy when args.n > 10
          allow deploy
        }
        """,
    )
    found = sorted((f.rule, f.example) for f in analysis.findings if f.kind == "unsatisfiable")
    assert found == [("p.dead", None), ("p.schema", None)]
    assert not [f for f in analysis.findings if f.kind == "never-wins"]


def test_two_rules_with_the_same_scope_and_opposite_effects(tmp_path: Path) -> None:
    spec, analysis = analyse(
        tmp_path,
        """
        policy p {
          default deny
          stop: deny deploy when args.env == "production" { reason "no" }
          go: allow deploy when args.env == production
        }
        """,
    )
    finding = only(analysis, "opposite-effects")
    assert (finding.rule, finding.other_rule) == ("p.go", "p.stop")
    assert "`deny` and `allow`" in finding.message
    assert not [f for f in analysis.findings if f.kind == "never-wins"]
    assert finding.example is not None
    assert winner(spec, spec.policies["spec.p"], finding.example.call).label == "p.stop"


def test_allow_except_overlaps_are_not_reported(tmp_path: Path) -> None:
    spec, analysis = analyse(
        tmp_path,
        """
        policy p {
          default deny
          allow deploy, lookup
          ask deploy when args.env == production { approver role "release" }
          deny deploy when args.env == production and args.n > 8 { reason "too big" }
        }
        """,
    )
    assert analysis.findings == []
    witnesses = analysis.witnesses["spec.p"]
    assert sorted(witnesses) == ["p#1", "p#2", "p#3"]
    for w in witnesses.values():
        assert w.exact, w.notes
        assert_witness_wins(spec, w)
    assert witnesses["p#2"].decision.approvers == [{"kind": "role", "value": "release"}]


def test_a_deny_reading_an_optional_argument_fails_open(tmp_path: Path) -> None:
    spec, analysis = analyse(
        tmp_path,
        """
        policy p {
          default allow
          hotfix: ask deploy when args.ticket startswith "HOT-" { approver role "sre" }
          guarded: deny deploy when args has ticket and args.ticket == "" { reason "empty" }
        }
        """,
    )
    finding = only(analysis, "absent-value")
    assert finding.rule == "p.hotfix"
    assert "reads `args.ticket` without a `has` guard" in finding.message
    example = finding.example
    assert example is not None and "ticket" not in example.call.args
    policy = spec.policies["spec.p"]
    assert not matches(spec, policy.rules[0], example.call)
    example.call.args["ticket"] = "HOT-1"
    assert winner(spec, policy, example.call).label == "p.hotfix"


def test_a_wildcard_deny_reading_an_argument_some_tools_lack_fails_open(tmp_path: Path) -> None:
    spec, analysis = analyse(
        tmp_path,
        """
        fact release.freeze: bool
        policy p {
          default deny
          prod: deny * when args.env == production { reason "no production" }
          # fails closed: an unknown freeze state denies
          freeze: deny deploy when not release.freeze == false { reason "frozen" }
          allow *
        }
        """,
    )
    finding = only(analysis, "absent-value")
    assert finding.rule == "p.prod"
    assert finding.example is not None and finding.example.call.tool == "lookup"
    assert winner(spec, spec.policies["spec.p"], finding.example.call).label == "p#3"


def test_default_allow_is_reported_with_a_call_that_falls_to_it(tmp_path: Path) -> None:
    spec, analysis = analyse(
        tmp_path,
        """
        policy p {
          default allow
          deny deploy when args.env == production { reason "no" }
        }
        """,
    )
    finding = only(analysis, "default-allow")
    assert finding.policy == "spec.p" and finding.rule is None
    assert finding.message == "policy `spec.p` allows every call that no rule matches"
    assert finding.example is not None
    assert finding.example.decision.effect == "allow" and finding.example.decision.rule is None
    assert winner(spec, spec.policies["spec.p"], finding.example.call) is None


def test_risk_and_effects_sugar_follow_the_operation(tmp_path: Path) -> None:
    spec, analysis = analyse(
        tmp_path,
        """
        policy p {
          default deny
          high: ask risk >= high { approver role "owner" }
          sending: deny effects has external { reason "nothing leaves" }
          allow browse
        }
        """,
        tools="""
        tool browse {
          summary "Browse."
          operation look { effects read; risk low }
          operation buy { effects write; risk high }
          operation send { effects external; risk medium }
          input { url: url }
        }
        """,
    )
    assert analysis.findings == []
    witnesses = analysis.witnesses["spec.p"]
    assert witnesses["p.high"].call.args["op"] == "buy"
    assert witnesses["p.sending"].call.args["op"] == "send"
    assert witnesses["p#3"].call.args["op"] == "look"
    for w in witnesses.values():
        assert_witness_wins(spec, w)


# ---------------------------------------------------------------------------------------------
# The shipped example


def test_every_rule_of_the_remediation_example_has_a_winning_witness(
    in_root: Path,
) -> None:
    result = check([ROOT / "examples/remediation/remediation.harness"])
    assert result.ok and result.model is not None and result.analysis is not None
    spec, analysis = result.model, result.analysis
    assert analysis.findings == []
    for name, policy in spec.policies.items():
        witnesses = analysis.witnesses[name]
        assert sorted(witnesses) == sorted(r.label for r in policy.rules)
        for w in witnesses.values():
            assert w.exact, (w.rule, w.notes)
            assert_witness_wins(spec, w)
    remote = analysis.witness("remediation.remediation", "remediation.remote_patch")
    assert remote is not None and re.search("^https?://", remote.call.args["patch_ref"])
    freeze = analysis.witness("remediation.remediation", "remediation.freeze")
    assert freeze is not None and "release.freeze" not in freeze.call.facts


def test_a_witness_becomes_a_spec_test() -> None:
    call = Call(tool="deploy", args={"env": "production"}, actor={"role": "engineer"})
    decision = {"effect": "ask", "rule": "p.x", "approvers": [{"kind": "role", "value": "sre"}]}
    from harnessc.compiler.analysis.policy import Decision

    w = Witness("spec.p", "p.x", call, Decision(**decision))
    test = w.to_spec_test("witness of p.x")
    assert test.expect is not None and test.expect.approver == m.Approver(kind="role", value="sre")
    assert w.to_dict()["call"]["args"] == {"env": "production"}


# ---------------------------------------------------------------------------------------------
# Regular expressions: z3's language equals the runtime's match (RE2)


@pytest.mark.parametrize(
    ("pattern", "texts"),
    [
        ("^https?://", ["http://x", "https://", "xhttp://", "ftp://", ""]),
        ("^chg-[0-9]+$", ["chg-1", "chg-12\n", "chg-", "xchg-1", "chg-1x"]),
        ("^(CVE|GHSA)-[A-Za-z0-9-]+$", ["CVE-1", "GHSA-a-b", "CVE-", "cve-1"]),
        (r"\d{2,3}", ["a12", "1", "1234"]),
        ("[^a-c]x", ["ax", "dx", "x"]),
        ("a.b|^c", ["a\nb", "azb", "xc", "cx"]),
        # where RE2 and Python's `re` differ, z3 follows the runtime: ASCII classes (`\s` has
        # no vertical tab), and `$` only at the very end
        (r"^\d+\s\w$", ["12 x", "١٢ x", "12\vx", "12 é", "12 x\n"]),
    ],
)
def test_regex_translation_agrees_with_the_runtime(pattern: str, texts: list[str]) -> None:
    regex = search_regex(pattern)
    assert regex is not None
    for text in texts:
        inside = z3.simplify(z3.InRe(z3.StringVal(text), regex))
        assert z3.is_true(inside) == value_matches(text, pattern), text


def test_regex_outside_the_subset_is_not_translated() -> None:
    assert search_regex(r"(a)\1") is None
    assert search_regex("(?i)abc") is None
    assert search_regex("a(?=b)") is None
    # a bounded repeat past 64 is not unrolled for z3 (checking `^a{1000}$` took minutes)
    assert search_regex("^a{65}$") is None and search_regex("^(ab){2,100}$") is None
    assert search_regex("^[0-9a-f]{64}$") is not None


# ---------------------------------------------------------------------------------------------
# Property: never-wins agrees with brute force over a finite domain

N_VALUES = range(4)
E_VALUES = ("a", "b", "c")


def _args(name: str) -> m.Path:
    return m.Path(root="args", parts=(name,))


atoms = st.one_of(
    st.builds(
        lambda op, k: m.Compare(op=op, left=_args("n"), right=m.Literal(value=k, type="int")),
        st.sampled_from(["==", "!=", "<", "<=", ">", ">="]),
        st.integers(-1, 4),
    ),
    st.builds(
        lambda op, v: m.Compare(op=op, left=_args("e"), right=m.EnumMember(name=v)),
        st.sampled_from(["==", "!="]),
        st.sampled_from(E_VALUES),
    ),
    st.builds(
        lambda vs: m.Compare(
            op="in",
            left=_args("e"),
            right=m.ListValue(items=tuple(m.Literal(value=v, type="string") for v in vs)),
        ),
        st.lists(st.sampled_from(E_VALUES), min_size=1, max_size=2),
    ),
)
conditions = st.recursive(
    atoms,
    lambda inner: st.one_of(
        st.builds(lambda i: m.Not(item=i), inner),
        st.builds(lambda xs: m.And(items=tuple(xs)), st.lists(inner, min_size=2, max_size=2)),
        st.builds(lambda xs: m.Or(items=tuple(xs)), st.lists(inner, min_size=2, max_size=2)),
    ),
    max_leaves=3,
)
rule_parts = st.tuples(st.sampled_from(["allow", "ask", "deny"]), st.none() | conditions)


def _small_spec(parts: list[tuple[str, Any]]) -> m.Spec:
    tool = m.Tool(
        id="t",
        wire_name="t",
        effects=("read",),
        input=m.Schema(
            fields=(
                m.Field(name="n", type=m.Type(name="int"), min=0, max=3),
                m.Field(name="e", type=m.Type(name="enum", values=E_VALUES)),
            )
        ),
    )
    rules = tuple(
        m.Rule(
            label=f"p#{i + 1}",
            policy="s.p",
            effect=effect,
            selectors=(m.Selector(kind="id", value="t", text="t"),),
            condition=cond,
            approvers=(m.Approver(kind="role", value="r"),) if effect == "ask" else (),
        )
        for i, (effect, cond) in enumerate(parts)
    )
    policy = m.Policy(name="s.p", default=m.DefaultDecision(effect="deny"), rules=rules)
    return m.Spec(name="s", root_module="s", tools={"t": tool}, policies={"s.p": policy})


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.lists(rule_parts, min_size=1, max_size=4))
def test_never_wins_agrees_with_brute_force(parts: list[tuple[str, Any]]) -> None:
    spec = _small_spec(parts)
    policy = spec.policies["s.p"]
    calls = [Call(tool="t", args={"n": n, "e": e}) for n in N_VALUES for e in E_VALUES]
    winners = {w.label for c in calls if (w := winner(spec, policy, c)) is not None}
    matched = {r.label for c in calls for r in policy.rules if matches(spec, r, c)}
    analysis = analyse_policies(spec)
    losers = {f.rule for f in analysis.findings if f.kind != "default-allow"}
    assert losers == {r.label for r in policy.rules} - winners
    unsatisfiable = {f.rule for f in analysis.findings if f.kind == "unsatisfiable"}
    assert unsatisfiable == {r.label for r in policy.rules} - matched
    assert set(analysis.witnesses["s.p"]) == winners
    for w in analysis.witnesses["s.p"].values():
        assert w.exact
        assert_witness_wins(spec, w)


# ---------------------------------------------------------------------------------------------
# Scale: a generated spec of N tools with five rules each, plus two wildcard rules
#
#   .venv/bin/python -c "import time; from tests.test_analysis import bench_spec; \
#     from harnessc.compiler.analysis.policy import analyse_policies as a; s = bench_spec(1000); \
#     t = time.perf_counter(); r = a(s); print(time.perf_counter() - t, r.queries)"


def bench_spec(n_tools: int) -> m.Spec:
    def arg(name: str) -> m.Path:
        return m.Path(root="args", parts=(name,))

    def lit(value: Any, type_: str) -> m.Literal:
        return m.Literal(value=value, type=type_)  # type: ignore[arg-type]

    fields = (
        m.Field(name="n", type=m.Type(name="int"), min=0, max=100),
        m.Field(name="env", type=m.Type(name="enum", values=("dev", "staging", "prod"))),
        m.Field(name="ref", type=m.Type(name="string", optional=True)),
    )
    tools: dict[str, m.Tool] = {}
    rules: list[m.Rule] = []
    for k in range(n_tools):
        tool_id = f"svc{k}.op"
        tools[tool_id] = m.Tool(
            id=tool_id,
            wire_name=f"svc{k}_op",
            effects=("write",),
            risk="medium",
            input=m.Schema(fields=fields),
        )
        sel = (m.Selector(kind="id", value=tool_id, text=tool_id),)
        tenant = m.Compare(
            op="==",
            left=m.Path(root="actor", parts=("tenant",)),
            right=m.Path(root="resource", parts=("tenant",)),
        )
        has_tenant = m.Compare(
            op="has", left=m.Path(root="resource"), right=m.EnumMember(name="tenant")
        )
        big = m.Compare(op=">", left=arg("n"), right=lit(90, "int"))
        prod = m.Compare(op="==", left=arg("env"), right=m.EnumMember(name="prod"))
        parts: list[tuple[str, Any]] = [
            ("allow", m.Compare(op="<=", left=arg("n"), right=lit(k % 50, "int"))),
            ("ask", m.Compare(op="==", left=arg("env"), right=lit("prod", "string"))),
            ("deny", m.And(items=(big, prod))),
            ("allow", m.Compare(op="startswith", left=arg("ref"), right=lit("release/", "string"))),
            ("deny", m.And(items=(has_tenant, m.Not(item=tenant)))),
        ]
        for j, (effect, cond) in enumerate(parts):
            rules.append(
                m.Rule(
                    label=f"b.r{k}_{j}",
                    policy="b.b",
                    effect=effect,  # type: ignore[arg-type]
                    selectors=sel,
                    condition=cond,
                    approvers=(m.Approver(kind="role", value="sre"),) if effect == "ask" else (),
                    reason="no" if effect == "deny" else None,
                )
            )
    triage = m.Compare(
        op="==", left=m.Path(root="task", parts=("stage",)), right=lit("triage", "string")
    )
    rules.append(
        m.Rule(
            label="b.triage",
            policy="b.b",
            effect="deny",
            selectors=(m.Selector(kind="all"),),
            condition=triage,
            reason="no",
        )
    )
    rules.append(
        m.Rule(
            label="b.high",
            policy="b.b",
            effect="ask",
            selectors=(m.Selector(kind="risk", op=">=", value="high"),),
            approvers=(m.Approver(kind="role", value="owner"),),
        )
    )
    policy = m.Policy(name="b.b", default=m.DefaultDecision(effect="deny"), rules=tuple(rules))
    return m.Spec(name="b", root_module="b", tools=tools, policies={"b.b": policy})


def test_a_generated_spec_gets_a_witness_for_every_rule_that_can_win() -> None:
    spec = bench_spec(12)
    analysis = analyse_policies(spec)
    witnesses = analysis.witnesses["b.b"]
    # `b.high` selects no tool (none is high risk): no witness, and no finding either
    assert len(witnesses) == 12 * 5 + 1
    assert [(f.kind, f.rule) for f in analysis.findings] == [("absent-value", "b.triage")]
    for w in witnesses.values():
        assert w.exact, w.notes
        assert_witness_wins(spec, w)
    # near-linear: a handful of queries per tool (each tool's partition answers every question
    # about its rules, the wildcards' included, so that the answers can be cached and shared)
    assert analysis.queries <= 12 * 10


def test_two_analyses_in_one_process_find_the_same_witnesses() -> None:
    # z3's models depend on its context's history: each analysis starts a fresh context, so a
    # `build` then `build --check` in one process agree byte for byte
    from harnessc.compiler.analysis.policy import analyse_policies

    result = check([ROOT / "examples" / "remediation" / "remediation.harness"])
    assert result.model is not None

    def witnesses() -> str:
        analysis = analyse_policies(result.model)
        return repr(sorted((p, sorted(w.items())) for p, w in analysis.witnesses.items()))

    first = witnesses()
    z3.solve(z3.Int("unrelated") > 41)  # other solver work in between changes nothing
    assert witnesses() == first == witnesses()


def test_a_float_argument_compares_with_an_int_literal(tmp_path: Path) -> None:
    # once an internal error: the analysis converted the real side to a real again
    _, analysis = analyse(
        tmp_path,
        """
        policy p {
          default deny
          small: allow pay when args.amount <= 100
          big: deny pay when args.amount > 100.5 and args.amount < 50 { reason "never" }
        }
        """,
        tools="""
        tool pay {
          summary "Pay."
          effects external
          input { amount: float }
        }
        """,
    )
    assert [(f.kind, f.rule) for f in analysis.findings] == [("unsatisfiable", "p.big")]


# -- what the encoding leaves to z3 -----------------------------------------------------------


@pytest.mark.parametrize(("size", "exact"), [(MAX_SMT_TEXT, True), (MAX_SMT_TEXT + 1, False)])
def test_a_text_longer_than_z3_is_given_makes_the_rule_inexact(tmp_path, size, exact) -> None:
    # z3 spent seconds a query on a 1,000-character prefix (a fuzz mutant: over 6 s in lint);
    # a longer text leaves the condition free, and the witness is judged again, inexact
    _, analysis = analyse(
        tmp_path,
        f"""
        policy p {{
          default deny
          long: allow lookup when args.q startswith "{"x" * size}"
        }}
        """,
    )
    witness = analysis.witness("spec.p", "p.long")
    assert witness is not None and witness.exact is exact


def test_a_pattern_searched_anywhere_is_encoded_up_to_a_width() -> None:
    # `.*` then a 100-character literal kept z3 busy for 8 s; anchored at the start it is quick
    assert search_regex("#" * MAX_SEARCH_WIDTH) is not None
    assert search_regex("#" * (MAX_SEARCH_WIDTH + 1)) is None
    assert search_regex("x|" + "#" * (MAX_SEARCH_WIDTH + 1)) is None
    assert search_regex("^" + "#" * 100) is not None
    assert search_regex("^" + "#" * MAX_SMT_TEXT) is None
    assert search_regex("a{99999999999}") is None


@pytest.mark.parametrize(
    "condition",
    [
        'resource.k != "a" and not resource.k startswith ""',  # present, and not a text
        "resource.k != 3 and not resource.k > 0 and not resource.k <= 0",  # nor a number
    ],
)
def test_an_untyped_value_of_another_type_than_the_literal_is_unequal(
    tmp_path: Path, condition: str
) -> None:
    """`!=` holds on an untyped value of another type than what it is compared with (present
    and unequal, as at run time): a rule only such a value matches is satisfiable, and its
    witness is denied by the runtime."""
    from harnessc.runtime import Harness, PendingCall

    spec, analysis = analyse(
        tmp_path,
        f"""
        surface s {{ expose deploy, lookup }}
        policy p {{
          default allow
          odd: deny lookup when {condition} {{ reason "a kind of another type" }}
        }}
        agent g {{ surface s; policy p }}
        """,
    )
    assert not [f for f in analysis.findings if f.kind == "unsatisfiable"], analysis.findings
    witness = analysis.witness("spec.p", "p.odd")
    assert witness is not None and witness.exact
    s = Harness(spec).session(
        "g", actor=witness.call.actor, task="t-1", resource=witness.call.resource
    )
    call = s.normalize("lookup", "c-1", witness.call.args)
    assert isinstance(call, PendingCall)
    assert s.decide(call).rule == "p.odd"
