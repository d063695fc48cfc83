"""The analysis's procedure without z3 (compiler/analysis/cells.py) against z3: on random
policies of simple conditions it gives z3's answers, and every call it gives as a witness is
one the reference evaluator decides as the answer says."""

from __future__ import annotations

import tempfile
from pathlib import Path

from harnessc.compiler.analysis.budget import DEFAULT_RLIMIT
from harnessc.compiler.analysis.cache import AnalysisCache
from harnessc.compiler.analysis.cells import solve_simply
from harnessc.compiler.analysis.concrete import decide, rule_matches
from harnessc.compiler.analysis.partition import Answers
from harnessc.compiler.analysis.policy import PolicyAnalysis, _may_be_absent, _PolicyAnalyser
from harnessc.compiler.analysis.solve import solve_partition
from harnessc.compiler.pipeline import check
from harnessc.runtime import model as m
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from .conftest import ROOT

TOOL = """
tool t {
  summary "A tool."
  effects write
  risk medium
  input {
    s: string?, e: enum("a", "b", "c"), n: int?, b: bool?, p: path
    d: string default "x", k: int default 5, m: int? min 2 max 9, w: int min -3 max 0
  }
}
"""
ATOMS = (
    'args.s == "x"',
    'args.s != "y"',
    'args.s in ["x", "y"]',
    "args has s",
    'args.e == "a"',
    'args.e != "b"',
    'args.e in ["a", "c"]',
    "args.e == a",
    "args.e in [b, c]",
    "args.n > 10",
    "args.n <= 3",
    "args.n == 11",
    "args has n",
    "args.b == true",
    "args.b",
    'args.p within "/repo"',
    'args.p within "/repo/src"',
    'args.d == "x"',
    "args.k < 2",
    'task.stage == "s"',
    "resource.kind == prod",
    "env.region == actor.tenant",
    "tool.effects has write",
    "tool.risk >= high",
    'tool.risk == "medium"',
    'tool.tags has "x"',
    'actor.role == "sre"',
    'actor.role in ["sre", "dev"]',
    'actor.tenant == "t1"',
    "resource.tenant != actor.tenant",
    "resource.tenant == actor.tenant",
    'resource.tenant == "t1"',
    'resource.owner != "me"',
    "resource has tenant",
    "actor has tenant",
    "task has stage",
    'args.z == "x"',
    'args.z != "y"',
    "args.m > 5",
    "args.m <= 2",
    "args.m == 11",
    "args has m",
    "args.w < -1",
    "args.w != 0",
)


def conditions(depth: int = 2) -> st.SearchStrategy[str]:
    atom = st.sampled_from(ATOMS)
    if depth == 0:
        return atom
    inner = conditions(depth - 1)
    return st.one_of(
        atom,
        st.builds(lambda a, b: f"({a} and {b})", inner, inner),
        st.builds(lambda a, b: f"({a} or {b})", inner, inner),
        st.builds(lambda a: f"not ({a})", inner),
    )


RULE = st.tuples(st.sampled_from(("allow", "ask", "deny")), conditions())
POLICIES = st.tuples(st.lists(RULE, min_size=1, max_size=3), st.booleans())


def spec_of(rules: list[tuple[str, str]], default_allow: bool) -> m.Spec:
    lines = [f"  default {'allow' if default_allow else 'deny'}"]
    for n, (effect, condition) in enumerate(rules):
        approver = ' { approver role "owner" }' if effect == "ask" else ""
        lines.append(f"  r{n}: {effect} t when {condition}{approver}")
    text = TOOL + "policy p {\n" + "\n".join(lines) + "\n}\n"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "spec.harness"
        path.write_text(text, encoding="utf-8")
        result = check([path])
    assert result.model is not None, [d.message for d in result.diagnostics]
    return result.model


def both(spec: m.Spec, policy: str | None = None) -> list[Pair]:
    """Each simple partition of the policy (the only one), answered by the procedure and z3."""
    pol = spec.policies[policy or next(iter(spec.policies))]
    analyser = _PolicyAnalyser(spec, pol, PolicyAnalysis(), AnalysisCache())
    wants = pol.default is not None and pol.default.effect == "allow"
    out = []
    for tool in spec.tools.values():
        indices = analyser.index.bucket(tool)
        if not indices:
            continue
        rules = [pol.rules[i] for i in indices]
        absent = [[k for k in analyser.reads[i] if _may_be_absent(tool, k)] for i in indices]
        simple = solve_simply(spec, tool, rules, absent, wants)
        if simple is None:
            continue
        solved = solve_partition(spec, tool, rules, absent, wants, DEFAULT_RLIMIT)
        out.append((tool, rules, simple, solved))
    return out


Pair = tuple[m.Tool, list[m.Rule], Answers, Answers]


def shape(a: Answers) -> object:
    """What the answers say, without the witnesses (which solver found them is free)."""
    return (
        [w is not None for w in a.wins],
        [x is not None for x in a.matches],
        a.covers,
        a.equals,
        sorted((x.position, x.key) for x in a.absent),
        a.default is not None,
    )


def check_witnesses(spec: m.Spec, policy: m.Policy, rules: list[m.Rule], a: Answers) -> None:
    """Each witness is decided as the answer says, by the reference evaluator."""
    bucket = policy.model_copy(update={"rules": tuple(rules)})
    for p, example in enumerate(a.wins):
        if example is not None:
            assert example.winner == p
            assert decide(spec, bucket, example.call).rule == rules[p].label
    for p, example in enumerate(a.matches):
        if example is not None:
            assert rule_matches(spec, rules[p], example.call)
            assert decide(spec, bucket, example.call).rule != rules[p].label
    if a.default is not None:
        assert not any(rule_matches(spec, r, a.default.call) for r in rules)
    for absent in a.absent:
        call, key = absent.example.call, absent.key
        assert not rule_matches(spec, rules[absent.position], call)
        record = getattr(call, {"call": "execution"}.get(key[0], key[0]))
        assert key[-1] not in record


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(POLICIES)
def test_the_procedure_answers_as_z3_does(policy: tuple[list[tuple[str, str]], bool]) -> None:
    rules, default_allow = policy
    spec = spec_of(rules, default_allow)
    found = both(spec)
    # every condition of the strategy is simple; a policy of too many combinations goes to z3
    assume(found)
    _, bucket, simple, solved = found[0]
    assume(not solved.undecided)  # z3 gave up within its budget: nothing to compare
    assert not any(solved.inexact)
    assert shape(simple) == shape(solved)
    check_witnesses(spec, next(iter(spec.policies.values())), bucket, simple)


def test_a_pattern_or_a_prefix_of_a_value_compared_with_another_is_left_to_z3() -> None:
    spec = spec_of([("deny", 'args.s matches "^tmp-"'), ("allow", 'args.s == "x"')], False)
    assert both(spec) == []
    linked = [("deny", 'args.s startswith "a"'), ("allow", "args.s == actor.role")]
    assert both(spec_of(linked, False)) == []


# `startswith` and `endswith` (cells.py `_affixed`): texts over a small alphabet, so that the
# compared texts overlap, share prefixes and suffixes, and hold `/`, `.` and empty segments
AFFIX_TOOL = """
tool t {
  summary "A tool."
  effects write
  risk medium
  input { s: string?, p: path, q: path?, u: url? }
}
"""
AFFIX_TEXT = st.text(alphabet="ab/.", min_size=0, max_size=4)
PATH_TEXT = st.builds(lambda t: "/" + t, st.text(alphabet="ab/", max_size=4)) | AFFIX_TEXT


def affix_atoms() -> st.SearchStrategy[str]:
    return st.one_of(
        st.builds(
            lambda o, t: f'args.s {o} "{t}"',
            st.sampled_from(("startswith", "endswith")),
            AFFIX_TEXT,
        ),
        st.builds(
            lambda o, t: f'args.u {o} "{t}"',
            st.sampled_from(("startswith", "endswith")),
            AFFIX_TEXT,
        ),
        st.builds(
            lambda o, t: f'args.p {o} "{t}"', st.sampled_from(("startswith", "endswith")), PATH_TEXT
        ),
        st.builds(lambda t: f'args.q startswith "{t}"', PATH_TEXT),
        st.builds(lambda t: f'args.s == "{t}"', AFFIX_TEXT),
        st.builds(lambda t: f'args.s in ["{t}", "ab"]', AFFIX_TEXT),
        st.sampled_from(('args.p within "/a"', 'args.q within "/a/b"', "args has q")),
    )


def affix_conditions() -> st.SearchStrategy[str]:
    inner = affix_atoms()
    return st.one_of(
        inner,
        st.builds(lambda a, b: f"({a} and {b})", inner, inner),
        st.builds(lambda a, b: f"({a} or {b})", inner, inner),
        st.builds(lambda a: f"not ({a})", inner),
    )


def affix_spec(rules: list[tuple[str, str]], default_allow: bool) -> m.Spec | None:
    lines = [f"  default {'allow' if default_allow else 'deny'}"]
    for n, (effect, condition) in enumerate(rules):
        approver = ' { approver role "owner" }' if effect == "ask" else ""
        lines.append(f"  r{n}: {effect} t when {condition}{approver}")
    text = AFFIX_TOOL + "policy p {\n" + "\n".join(lines) + "\n}\n"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "spec.harness"
        path.write_text(text, encoding="utf-8")
        return check([path]).model  # None: a text the language refuses (drawn anyway)


AFFIX_POLICIES = st.tuples(
    st.lists(
        st.tuples(st.sampled_from(("allow", "ask", "deny")), affix_conditions()),
        min_size=1,
        max_size=3,
    ),
    st.booleans(),
)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(AFFIX_POLICIES)
def test_prefixes_and_suffixes_are_answered_as_z3_does(
    policy: tuple[list[tuple[str, str]], bool],
) -> None:
    """z3 alone, with no budget, against the procedure, on conditions of `startswith` and
    `endswith` over texts and paths (with `==`, `in`, `within` and `has` beside them)."""
    spec = affix_spec(*policy)
    assume(spec is not None)
    assert spec is not None
    pol = next(iter(spec.policies.values()))
    analyser = _PolicyAnalyser(spec, pol, PolicyAnalysis(), AnalysisCache())
    wants = pol.default is not None and pol.default.effect == "allow"
    tool = spec.tools["t"]
    indices = analyser.index.bucket(tool)
    rules = [pol.rules[i] for i in indices]
    absent = [[k for k in analyser.reads[i] if _may_be_absent(tool, k)] for i in indices]
    simple = solve_simply(spec, tool, rules, absent, wants)
    assume(simple is not None)
    assert simple is not None
    solved = solve_partition(spec, tool, rules, absent, wants, 0)
    assert not solved.undecided and not any(solved.inexact)
    assert shape(simple) == shape(solved)
    check_witnesses(spec, pol, rules, simple)


def test_the_examples_simple_partitions_answer_as_z3_does() -> None:
    """Every simple partition of the repository's examples: z3's answers, witnesses that hold."""
    paths = sorted((ROOT / "examples").glob("**/*.harness"))
    seen = 0
    for path in paths:
        result = check([path])
        spec = result.model
        if spec is None:
            continue
        for name, policy in spec.policies.items():
            for _, rules, simple, solved in both(spec, name):
                if any(solved.inexact) or solved.undecided:
                    continue
                seen += 1
                assert shape(simple) == shape(solved), (path, name)
                check_witnesses(spec, policy, rules, simple)
    assert seen > 0


def test_a_partition_that_would_compare_too_much_is_left_to_z3() -> None:
    """A condition of hundreds of comparisons of one argument, each with its own value, asked
    for every value against every comparison (6 million for 2,500 of them: a `check` of 110 s);
    past `MAX_EVALUATIONS` the partition goes to z3, as one past `MAX_CALLS` always did."""
    from harnessc.compiler.analysis.cells import MAX_EVALUATIONS

    def answered(count: int) -> bool:
        condition = " and ".join(f'args.s != "v{i}"' for i in range(count))
        pairs = both(spec_of([("allow", condition)], False))
        return bool(pairs) and all(shape(simple) == shape(z3) for _, _, simple, z3 in pairs)

    assert MAX_EVALUATIONS < 400 * 400
    assert answered(20)  # simple enough: answered without z3, as z3 answers it
    assert not answered(400)  # left to z3


# Session terms as free values (cells.py `_Reads.describe_term`): provenance of an argument,
# `called`/`succeeded`, `count` and `sum` over windows of one family, `all`/`any` over an
# optional and a required list, beside the argument they are about; the tool `t` counts itself
# (a count of `t` is at least 1), `u`'s amounts are non-negative (a sum of them is at least 0
# and grows with its window), `t`'s are not
SESSION_TOOLS = """
tool t {
  summary "A tool."
  effects write
  risk medium
  input { to: string?, who: string, amount: int?, cc: list<string>?, bcc: list<string> }
}
tool u {
  summary "Another tool."
  effects read
  risk low
  input { n: int? min 0 }
}
"""
SESSION_ATOMS = (
    "args.to from untrusted only",
    "args.to from untrusted",
    "args.to from user",
    "args.to from user only",
    "args.to from nowhere",
    "args.to from trusted",
    "args.who from user",
    'args.to == "x"',
    "args has to",
    "args.amount > 10",
    "count(t within 10m) > 2",
    "count(t) >= 3",
    "count(t within 1h) == 1",
    "count(u within 10m) > 0",
    "count(u) <= 1",
    "sum(args.amount of t within 24h) >= 100",
    "sum(args.amount of t) < 50.5",
    "sum(args.amount of t) == 0",
    "sum(args.n of u within 1h) > 5",
    "sum(args.n of u) <= 5",
    "sum(args.n of u within 1h) >= 2.5",
    "called(u)",
    "called(u within 1h)",
    "succeeded(u within 5m)",
    "called(t within 5m)",
    "all x in args.cc: x from user",
    "any x in args.cc: x from user",
    'any x in args.cc: x endswith "@evil.test"',
    "args has cc",
    "all x in args.bcc: x from untrusted only",
    "any x in args.bcc: x from untrusted only",
)


def session_conditions() -> st.SearchStrategy[str]:
    inner = st.sampled_from(SESSION_ATOMS)
    return st.one_of(
        inner,
        st.builds(lambda a, b: f"({a} and {b})", inner, inner),
        st.builds(lambda a, b: f"({a} or {b})", inner, inner),
        st.builds(lambda a: f"not ({a})", inner),
    )


SESSION_POLICIES = st.tuples(
    st.lists(
        st.tuples(st.sampled_from(("allow", "ask", "deny")), session_conditions()),
        min_size=1,
        max_size=3,
    ),
    st.booleans(),
)


def session_spec(rules: list[tuple[str, str]], default_allow: bool) -> m.Spec:
    lines = [f"  default {'allow' if default_allow else 'deny'}"]
    for n, (effect, condition) in enumerate(rules):
        approver = ' { approver role "owner" }' if effect == "ask" else ""
        lines.append(f"  r{n}: {effect} t when {condition}{approver}")
    text = SESSION_TOOLS + "policy p {\n" + "\n".join(lines) + "\n}\n"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "spec.harness"
        path.write_text(text, encoding="utf-8")
        result = check([path])
    assert result.model is not None, [d.message for d in result.diagnostics]
    return result.model


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(SESSION_POLICIES)
def test_session_terms_are_answered_as_z3_does(
    policy: tuple[list[tuple[str, str]], bool],
) -> None:
    """z3 alone, with no budget, against the procedure, on conditions of provenance, history
    and counting terms (every atom of the strategy is one the procedure answers)."""
    spec = session_spec(*policy)
    pol = next(iter(spec.policies.values()))
    analyser = _PolicyAnalyser(spec, pol, PolicyAnalysis(), AnalysisCache())
    wants = pol.default is not None and pol.default.effect == "allow"
    tool = spec.tools["t"]
    indices = analyser.index.bucket(tool)
    rules = [pol.rules[i] for i in indices]
    absent = [[k for k in analyser.reads[i] if _may_be_absent(tool, k)] for i in indices]
    simple = solve_simply(spec, tool, rules, absent, wants)
    assert simple is not None
    solved = solve_partition(spec, tool, rules, absent, wants, 0)
    assert not solved.undecided and not any(solved.inexact)
    assert shape(simple) == shape(solved)
    check_witnesses(spec, pol, rules, simple)


def test_session_terms_the_procedure_does_not_bind_are_left_to_z3() -> None:
    """What the encoding binds to this call is z3's: a sum of non-negative amounts of this
    tool (at least this call's amount), a count whose `when` reads this call, a quantifier over
    a list with bounds or over an extraction, and `len`."""
    tools = SESSION_TOOLS.replace("n: int? min 0", "n: int? min 0, to: string?").replace(
        "amount: int?", "amount: int?, n: int? min 0, recipients: list<string>? min 2"
    )
    for condition in (
        "sum(args.n of t, u) > 5",
        "count(t when args.amount > 5) > 1",
        "all x in args.recipients: x from user",
        "any u in urls(args.to): u from nowhere",
        "len(args.to) > 3",
    ):
        text = tools + f"policy p {{\n  default deny\n  r0: deny t when {condition}\n}}\n"
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "spec.harness"
            path.write_text(text, encoding="utf-8")
            result = check([path])
        spec = result.model
        assert spec is not None, (condition, [d.message for d in result.diagnostics])
        rules = list(next(iter(spec.policies.values())).rules)
        assert solve_simply(spec, spec.tools["t"], rules, [[]], False) is None, condition
