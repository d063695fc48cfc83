"""Every call the analysis shows is decided as it says: a z3 model leaves out the values its
question does not need, and the winner it names and the witness assembled from it read those
values back one way (compiler/analysis/solve.py, `Completed`), so re-judging the witness by the
reference evaluator gives exactly what the finding claims."""

from __future__ import annotations

import tempfile
from pathlib import Path

from harnessc.compiler.analysis.cache import AnalysisCache
from harnessc.compiler.analysis.concrete import decide
from harnessc.compiler.analysis.partition import Answers, Example
from harnessc.compiler.analysis.policy import PolicyAnalysis, _may_be_absent, _PolicyAnalyser
from harnessc.compiler.analysis.solve import solve_partition
from harnessc.compiler.pipeline import check
from harnessc.compiler.testing import render_run, run_spec_tests
from harnessc.runtime import model as m
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from .budget import examples
from .test_analysis_cells import ATOMS

TOOL = """
fact known.names: list<string>

tool t {
  summary "A tool."
  effects write
  input {
    s: string
    n: int?
  }
}
"""

# `actor.role` is read by the rules a question is not about: z3 leaves it out of the model
UNCONSTRAINED = """
policy p {
  default allow
  a: allow t when args.s startswith "a"
  b: deny t when args.s startswith "a" and actor.role != "admin" {
    reason "b"
  }
  c: deny t when args.s startswith "a" and actor.role == "admin" {
    reason "c"
  }
}
"""


def _checked(text: str) -> tuple[m.Spec, PolicyAnalysis]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "spec.harness"
        path.write_text(text, encoding="utf-8")
        result = check([path])
    assert result.model is not None, [d.message for d in result.diagnostics]
    assert result.analysis is not None
    return result.model, result.analysis


def _spec(text: str) -> m.Spec:
    return _checked(text)[0]


def _claimed(rules: list[m.Rule], example: Example) -> str | None:
    return None if example.winner is None else rules[example.winner].label


def _check_claims(spec: m.Spec, policy: m.Policy, rules: list[m.Rule], a: Answers) -> None:
    """Each call of the answers is decided by the reference evaluator as the answer claims."""
    bucket = policy.model_copy(update={"rules": tuple(rules)})
    claims = [
        *(e for e in a.wins if e is not None),
        *(e for e in a.matches if e is not None),
        *(x.example for x in a.absent),
        *([a.default] if a.default is not None else []),
    ]
    for found in claims:
        assert decide(spec, bucket, found.call).rule == _claimed(rules, found), found


def _z3_answers(spec: m.Spec) -> list[tuple[list[m.Rule], Answers]]:
    """Each bucket of the spec's one policy, answered by z3 (whatever the procedure could)."""
    policy = next(iter(spec.policies.values()))
    analyser = _PolicyAnalyser(spec, policy, PolicyAnalysis(), AnalysisCache())
    wants = policy.default is not None and policy.default.effect == "allow"
    out = []
    for tool in spec.tools.values():
        indices = analyser.index.bucket(tool)
        rules = [policy.rules[i] for i in indices]
        absent = [[k for k in analyser.reads[i] if _may_be_absent(tool, k)] for i in indices]
        out.append((rules, solve_partition(spec, tool, rules, absent, wants, 30_000)))
    return out


def _findings_hold(spec: m.Spec, result: PolicyAnalysis) -> None:
    """Every finding's and witness's call, re-judged, is decided as claimed, exactly; and, as
    `test` blocks, the runtime decides them so too."""
    tests = {}
    shown = [f.example for f in result.findings if f.example is not None]
    shown += [w for ws in result.witnesses.values() for w in ws.values()]
    for n, witness in enumerate(shown):
        policy = spec.policies[witness.policy]
        assert witness.exact, witness.notes
        judged = decide(spec, policy, witness.call)
        assert (judged.effect, judged.rule) == (witness.decision.effect, witness.decision.rule)
        test = witness.to_spec_test(f"shown {n}")
        tests[f"{spec.root_module}.shown {n}"] = test
    run = run_spec_tests(spec.model_copy(update={"tests": tests}))
    assert run.failed == 0, render_run([run])


def test_a_value_the_model_leaves_out_is_read_as_the_winner_reads_it() -> None:
    """`actor.role` decides between `b` and `c` on the call `a` matches, and the question
    (a call `a` matches) does not constrain it: the example shows the role the winner read."""
    spec, analysis = _checked(TOOL + UNCONSTRAINED)
    for rules, answers in _z3_answers(spec):
        _check_claims(spec, spec.policies["spec.p"], rules, answers)
    assert analysis.findings
    _findings_hold(spec, analysis)


# `args.s in known.names`: the witness's list holds the value; `r1` needs it to be "x", which
# the list does not hold, so no call matches it
LIST_FACT = """
policy p {
  default allow
  r0: deny t when args.s in known.names and not (known.names has "x") {
    reason "r0"
  }
  r1: deny t when args.s == "x" and args.s in known.names and not (known.names has "x") {
    reason "r1"
  }
}
"""


def test_a_value_in_a_list_fact_is_held_by_the_witness_list() -> None:
    spec, analysis = _checked(TOOL + LIST_FACT)
    for rules, answers in _z3_answers(spec):
        _check_claims(spec, spec.policies["spec.p"], rules, answers)
    witness = analysis.witness("spec.p", "p.r0")
    assert witness is not None and witness.exact
    assert witness.call.args["s"] in witness.call.facts["known.names"]
    assert "x" not in witness.call.facts["known.names"]
    [never] = [f for f in analysis.findings if f.rule == "p.r1" and f.kind == "unsatisfiable"]
    assert never.exact
    _findings_hold(spec, analysis)


Z3_ATOMS = (
    *ATOMS[:4],
    'args.s startswith "a"',
    'args.s endswith "z"',
    "args.n > 10",
    "args has n",
    'actor.role == "admin"',
    'actor.role != "admin"',
    'actor.role in ["sre", "dev"]',
    'resource.tenant == "t1"',
    "resource.tenant != actor.tenant",
    'env.region == "eu"',
    "args.s in known.names",
    'known.names has "x"',
)


def _conditions(depth: int = 1) -> st.SearchStrategy[str]:
    atom = st.sampled_from(Z3_ATOMS)
    if depth == 0:
        return atom
    inner = _conditions(depth - 1)
    return st.one_of(
        atom,
        st.builds(lambda a, b: f"({a} and {b})", inner, inner),
        st.builds(lambda a, b: f"({a} or {b})", inner, inner),
        st.builds(lambda a: f"not ({a})", inner),
    )


def _policy(rules: list[tuple[str, str]], default_allow: bool) -> str:
    lines = [f"  default {'allow' if default_allow else 'deny'}"]
    for n, (effect, condition) in enumerate(rules):
        extra = ' { approver role "owner" }' if effect == "ask" else ""
        extra = ' { reason "no" }' if effect == "deny" else extra
        lines.append(f"  r{n}: {effect} t when {condition}{extra}")
    return "policy p {\n" + "\n".join(lines) + "\n}\n"


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.sampled_from(("allow", "ask", "deny")), _conditions()), min_size=1, max_size=4
    ),
    st.booleans(),
)
@example(
    [
        ("allow", 'args.s startswith "a"'),
        ("deny", '(args.s startswith "a" and actor.role != "admin")'),
        ("deny", '(args.s startswith "a" and actor.role == "admin")'),
    ],
    True,
)
def test_every_call_z3_answers_with_is_decided_as_claimed(
    rules: list[tuple[str, str]], default_allow: bool
) -> None:
    spec, analysis = _checked(TOOL + _policy(rules, default_allow))
    policy = spec.policies["spec.p"]
    for bucket, answers in _z3_answers(spec):
        assume(not answers.undecided)  # z3 gave up in time (a loaded machine)
        if not any(answers.inexact):
            _check_claims(spec, policy, bucket, answers)
    if not any(f.kind == "undecided" for f in analysis.findings):
        _findings_hold(spec, analysis)
