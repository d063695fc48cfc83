"""The semantic comparison of two policies (compiler/analysis/compare.py): each kind of change,
its witness decided by the runtime under both specs, and what is compared or skipped."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from harnessc.compiler.analysis.cache import AnalysisCache
from harnessc.compiler.analysis.compare import (
    Comparison,
    Region,
    compare_policies,
    compare_specs,
    runtime_call,
)
from harnessc.compiler.analysis.prelude import session_prelude
from harnessc.compiler.pipeline import check
from harnessc.runtime import model as m
from harnessc.runtime.judge.policy import PolicyEngine

from .conftest import ROOT

TOOLS = """
tool deploy {
  summary "Deploy."
  effects write
  risk high
  input {
    env: enum("staging", "production")
    n: int
    ticket: string?
  }
}
tool read {
  summary "Read."
  effects read
  input { path: path }
}
"""


BROWSE = """
tool browse {
  summary "Browse."
  operation look { effects read; risk low }
  operation buy { effects write; risk high }
  input { url: url }
}
"""


def spec_of(tmp_path: Path, name: str, text: str, tools: str = TOOLS) -> m.Spec:
    folder = tmp_path / name
    folder.mkdir()
    path = folder / "spec.harness"
    lines = (textwrap.dedent(tools) + textwrap.dedent(text)).splitlines(keepends=True)
    imports = [line for line in lines if line.startswith("import ")]
    body = [line for line in lines if not line.startswith("import ")]
    path.write_text("".join(imports + body), encoding="utf-8")
    result = check([path])
    assert result.ok, [d.message for d in result.diagnostics]
    assert result.model is not None
    return result.model


def diff(
    tmp_path: Path, old: str, new: str, tools: str = TOOLS, new_tools: str | None = None
) -> Comparison:
    a = spec_of(tmp_path, "old", old, tools)
    b = spec_of(tmp_path, "new", new, tools if new_tools is None else new_tools)
    comparison = compare_specs(a, b, cache=AnalysisCache(on_disk=False))
    for region in comparison.regions:
        assert_flips(a, b, region)
    assert comparison.undecided == []
    return comparison


def assert_flips(old: m.Spec, new: m.Spec, region: Region) -> None:
    """The witness, decided by the runtime under both specs, is decided as the region says."""
    assert region.verified, region.notes
    assert region.exact, region.notes
    sides = ((old, region.old_policy, region.old), (new, region.new_policy, region.new))
    for spec, side, outcome in sides:
        if side is None or outcome.refused:
            continue
        prelude = session_prelude(spec, region.witness)
        assert prelude.missing is None
        call = runtime_call(spec, region.witness, prelude.steps)
        decision = PolicyEngine(spec).decide(side, call)
        assert decision.effect == outcome.effect
        assert decision.rule == outcome.rule


def changes(comparison: Comparison) -> list[tuple[str, str, str | None, str | None]]:
    return sorted((r.tool, r.change, r.old.rule, r.new.rule) for r in comparison.regions)


BASE = """
policy p {
  default deny
  reads: allow read when args.path within "/repo"
  prod: ask deploy when args.env == "production" { approver role "owner"; grant once ttl 15m }
  staging: allow deploy when args.env == "staging"
}
"""


def test_the_same_spec_has_no_region_and_solves_nothing(tmp_path: Path) -> None:
    c = diff(tmp_path, BASE, BASE)
    assert c.regions == [] and not c.widened and not c.changed
    assert c.queries == 0
    assert sorted(c.tools_skipped) == ["deploy", "read"] and c.tools_compared == []


def test_a_rule_moved_below_others_with_the_same_meaning_is_skipped_by_its_tool(
    tmp_path: Path,
) -> None:
    # reordering rules of different tools changes no bucket: nothing is solved
    moved = """
    policy p {
      default deny
      prod: ask deploy when args.env == "production" { approver role "owner"; grant once ttl 15m }
      staging: allow deploy when args.env == "staging"
      reads: allow read when args.path within "/repo"
    }
    """
    c = diff(tmp_path, BASE, moved)
    assert c.regions == [] and c.queries == 0


def test_allow_to_ask_is_a_narrowing_with_the_new_rule_and_its_line(tmp_path: Path) -> None:
    new = BASE.replace(
        'staging: allow deploy when args.env == "staging"',
        'staging: ask deploy when args.env == "staging" { approver role "owner" }',
    )
    c = diff(tmp_path, BASE, new)
    [region] = c.regions
    assert region.change == "allow→ask" and not region.widened and region.narrowed
    assert (region.old.rule, region.new.rule) == ("p.staging", "p.staging")
    assert region.witness.args["env"] == "staging"
    assert region.new.origin is not None and region.new.origin.endswith("spec.harness:22:3")
    assert region.new.approvers == ['role "owner"']
    assert c.counts() == {"allow→ask": 1} and not c.widened


def test_ask_to_deny(tmp_path: Path) -> None:
    new = BASE.replace("prod: ask deploy", "prod: deny deploy").replace(
        '{ approver role "owner"; grant once ttl 15m }', '{ reason "frozen" }'
    )
    c = diff(tmp_path, BASE, new)
    assert changes(c) == [("deploy", "ask→deny", "p.prod", "p.prod")]
    assert c.regions[0].new.reason == "frozen"


def test_deny_to_allow_is_a_widening(tmp_path: Path) -> None:
    new = BASE.replace('within "/repo"', 'within "/"')
    c = diff(tmp_path, BASE, new)
    assert changes(c) == [("read", "deny→allow", None, "p.reads")]
    [region] = c.regions
    assert region.widened and c.widened
    assert not region.witness.args["path"].startswith("/repo")
    assert region.old.origin is not None  # the default's line


def test_a_narrowed_condition_is_one_region_to_the_default(tmp_path: Path) -> None:
    new = BASE.replace('within "/repo"', 'within "/repo/src"')
    c = diff(tmp_path, BASE, new)
    assert changes(c) == [("read", "allow→deny", "p.reads", None)]
    path = c.regions[0].witness.args["path"]
    assert path.startswith("/repo") and not path.startswith("/repo/src")


def test_an_approver_changed_with_the_same_effect_is_a_change(tmp_path: Path) -> None:
    new = BASE.replace('approver role "owner"', 'approver role "release-manager"')
    c = diff(tmp_path, BASE, new)
    [region] = c.regions
    assert region.change == "ask→ask (approver)" and not region.widened
    assert region.old.approvers == ['role "owner"']
    assert region.new.approvers == ['role "release-manager"']


def test_a_grant_scope_changed_is_a_change(tmp_path: Path) -> None:
    new = BASE.replace("grant once ttl 15m", "grant task ttl 1h")
    c = diff(tmp_path, BASE, new)
    [region] = c.regions
    assert region.change == "ask→ask (grant)"
    assert (region.old.grant, region.new.grant) == ("once ttl 15m", "task ttl 1h")


def test_a_rule_added_and_a_rule_removed(tmp_path: Path) -> None:
    added = BASE.replace(
        "  staging:", '  big: deny deploy when args.n > 100 { reason "too many" }\n  staging:'
    )
    c = diff(tmp_path, BASE, added)
    assert changes(c) == [
        ("deploy", "allow→deny", "p.staging", "p.big"),
        ("deploy", "ask→deny", "p.prod", "p.big"),
    ]
    assert all(r.witness.args["n"] > 100 for r in c.regions)
    (tmp_path / "again").mkdir()
    removed = diff(tmp_path / "again", added, BASE)
    assert changes(removed) == [
        ("deploy", "deny→allow", "p.big", "p.staging"),
        ("deploy", "deny→ask", "p.big", "p.prod"),
    ]
    assert removed.widened


def test_reordering_rules_of_one_effect_changes_only_who_wins(tmp_path: Path) -> None:
    old = """
    policy p {
      default deny
      first: ask deploy when args.n > 10 { approver role "a" }
      second: ask deploy when args.n > 5 { approver role "b" }
    }
    """
    new = """
    policy p {
      default deny
      second: ask deploy when args.n > 5 { approver role "b" }
      first: ask deploy when args.n > 10 { approver role "a" }
    }
    """
    c = diff(tmp_path, old, new)
    [region] = c.regions
    assert (region.old.rule, region.new.rule) == ("p.first", "p.second")
    assert region.change == "ask→ask (approver)" and region.witness.args["n"] > 10


def test_a_widened_condition(tmp_path: Path) -> None:
    new = BASE.replace('within "/repo"', 'within "/repo" or actor.role == "sre"')
    c = diff(tmp_path, BASE, new)
    assert changes(c) == [("read", "deny→allow", None, "p.reads")]
    witness = c.regions[0].witness
    assert witness.actor["role"] == "sre" and not witness.args["path"].startswith("/repo")


def test_the_default_changed(tmp_path: Path) -> None:
    new = BASE.replace("default deny", 'default ask { approver role "owner" }')
    c = diff(tmp_path, BASE, new)
    # every call of deploy has env staging or production: only read falls to the default
    assert changes(c) == [("read", "deny→ask", None, None)]
    assert all(r.new.approvers == ['role "owner"'] for r in c.regions)


def test_session_terms_are_compared_and_their_witness_replayed(tmp_path: Path) -> None:
    tools = (
        TOOLS
        + """
    tool mail.read {
      summary "Read mail."
      effects read
      input { folder: string }
      output { body: string }
    }
    tool pay {
      summary "Pay."
      effects write
      input { iban: string }
    }
    """
    )
    old = """
    policy p {
      default allow
      payee: deny pay when args.iban from untrusted only { reason "made up by a message" }
    }
    """
    new = old.replace("from untrusted only", "from untrusted")
    c = diff(tmp_path, old, new, tools)
    [region] = c.regions
    assert region.change == "allow→deny" and region.tool == "pay"
    assert region.witness.session  # the state the decision reads


def test_the_risk_sugar_follows_the_operation(tmp_path: Path) -> None:
    tools = BROWSE
    old = """
    policy p {
      default allow
      high: ask risk >= high { approver role "owner" }
    }
    """
    new = old.replace("risk >= high", "risk >= low")
    c = diff(tmp_path, old, new, tools)
    [region] = c.regions
    assert region.change == "allow→ask" and region.witness.args["op"] == "look"


def test_a_risk_table_default_is_compared_per_operation(tmp_path: Path) -> None:
    tools = BROWSE
    old = """
    import std.risk
    policy p {
      default std.risk.defaults
    }
    """
    new = """
    import std.risk
    policy p {
      default std.risk.defaults
      allow browse
    }
    """
    c = diff(tmp_path, old, new, tools)
    [region] = c.regions
    assert region.change == "ask→allow" and region.witness.args["op"] == "buy"
    assert region.old.approvers == ['role "owner"']


def test_a_tool_removed_is_refused_and_a_tool_added_was(tmp_path: Path) -> None:
    extra = """
    tool ops.wipe {
      summary "Wipe."
      effects write
      input { path: path }
    }
    """
    policy = BASE.replace("  reads:", "  allow ops.*\n  reads:")
    c = diff(tmp_path, policy, policy, TOOLS + extra, TOOLS)
    assert c.tools_removed == ["ops.wipe"]
    [region] = c.regions
    assert region.change == "allow→deny" and region.new.refused
    assert region.new.reason == "`ops.wipe` is not a registered tool"
    back = tmp_path / "back"
    back.mkdir()
    c = diff(back, policy, policy, TOOLS, TOOLS + extra)
    assert c.tools_added == ["ops.wipe"] and [r.change for r in c.regions] == ["deny→allow"]
    assert c.widened


def test_an_agent_switching_policy_is_compared_as_the_agent(tmp_path: Path) -> None:
    policies = (
        BASE
        + """
    policy strict {
      default deny
      reads: allow read when args.path within "/repo"
    }
    """
    )
    old = policies + "agent worker { policy p }\n"
    new = policies + "agent worker { policy strict }\n"
    c = diff(tmp_path, old, new)
    assert "agent spec.worker" in c.subjects
    assert {r.subject for r in c.regions} == {"agent spec.worker"}
    assert {(r.old_policy, r.new_policy) for r in c.regions} == {("spec.p", "spec.strict")}
    assert sorted(r.change for r in c.regions) == ["allow→deny", "ask→deny"]


def test_an_agent_added_was_refused_everything(tmp_path: Path) -> None:
    new = BASE + "agent worker { policy p }\n"
    c = diff(tmp_path, BASE, new)
    assert all(r.subject == "agent spec.worker" and r.old.refused for r in c.regions)
    assert sorted(r.change for r in c.regions) == ["deny→allow", "deny→allow", "deny→ask"]
    assert c.regions[0].old.reason == "the agent `spec.worker` does not exist"


def test_a_policy_only_one_side_declares_is_listed(tmp_path: Path) -> None:
    c = diff(tmp_path, BASE, BASE + "policy extra {\n  default allow\n}\n")
    assert c.policies_added == ["spec.extra"] and c.regions == []


def test_compare_policies_restricted_to_tools_and_answers_cached(tmp_path: Path) -> None:
    a = spec_of(tmp_path, "old", BASE)
    b = spec_of(
        tmp_path,
        "new",
        BASE.replace('within "/repo"', 'within "/"').replace(
            'approver role "owner"', 'approver role "x"'
        ),
    )
    cache = AnalysisCache(on_disk=False)
    c = compare_policies(a, "p", b, "p", tools=["read"], cache=cache)
    assert [r.tool for r in c.regions] == ["read"] and c.queries > 0
    again = compare_policies(a, "p", b, "p", tools=["read"], cache=cache)
    assert again.queries == 0 and again.cache_hits == 1
    assert [r.to_dict() for r in again.regions] == [r.to_dict() for r in c.regions]


def test_the_json_shape(tmp_path: Path) -> None:
    c = diff(tmp_path, BASE, BASE.replace('within "/repo"', 'within "/"'))
    data = json.loads(json.dumps(c.to_dict()))
    assert data["version"] == 1 and data["widened"] is True
    [region] = data["regions"]
    assert region["change"] == "deny→allow" and region["witness"]["tool"] == "read"
    assert region["witness_text"].startswith("read(path: ")
    assert data["counts"] == {"by_change": {"deny→allow": 1}, "by_tool": {"read": 1}}


def test_an_unknown_policy_name_is_a_clear_error(tmp_path: Path) -> None:
    a = spec_of(tmp_path, "old", BASE)
    with pytest.raises(KeyError, match="no policy `nope`"):
        compare_policies(a, "nope", a, "p")


def test_a_tool_whose_schema_changed_is_compared_over_calls_both_accept(tmp_path: Path) -> None:
    new_tools = TOOLS.replace("    ticket: string?\n", "    ticket: string?\n    force: bool?\n")
    forced = '  forced: deny deploy when args has force { reason "no forcing" }\n'
    new = BASE.replace("  reads:", forced + "  reads:")
    c = diff(tmp_path, BASE, new, TOOLS, new_tools)
    assert c.schema_changed == ["deploy"]
    # a call with `force` exists only under the new schema: no region can be witnessed by
    # it under the old one, so the new DENY shows no change of decision on shared calls
    assert c.regions == []
    assert "deploy" in c.tools_compared


def test_a_question_not_decided_in_time_is_reported_with_its_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = spec_of(tmp_path, "old", BASE)
    b = spec_of(tmp_path, "new", BASE.replace('within "/repo"', 'within "/"'))
    monkeypatch.setenv("HARNESSC_QUERY_RLIMIT", "1")  # z3 gives up on every question
    c = compare_specs(a, b, cache=AnalysisCache(on_disk=False))
    assert c.regions == []
    assert c.undecided and {u.tool for u in c.undecided} == {"read"}
    assert c.to_dict()["undecided"][0]["reason"]


def test_a_fact_only_the_old_spec_declares_is_in_the_witness(tmp_path: Path) -> None:
    old = "fact release.freeze: bool\n" + BASE.replace(
        "  staging:",
        '  frozen: deny deploy when release.freeze == true { reason "freeze" }\n  staging:',
    )
    c = diff(tmp_path, old, BASE)
    assert changes(c) == [
        ("deploy", "deny→allow", "p.frozen", "p.staging"),
        ("deploy", "deny→ask", "p.frozen", "p.prod"),
    ]
    assert all(r.witness.facts == {"release.freeze": True} for r in c.regions)


WARM_DIFF = """
import sys
from harnessc.compiler.analysis.compare import compare_specs
from harnessc.compiler.pipeline import check
old, new = (check([path]).model for path in sys.argv[1:3])
c = compare_specs(old, new)
verified = all(r.verified for r in c.regions)
print(len(c.regions), c.queries, c.cache_hits, verified, "z3" in sys.modules)
"""


def test_a_second_comparison_of_the_same_pair_does_not_load_z3(tmp_path: Path) -> None:
    paths = []
    for name, text in (("old", BASE), ("new", BASE.replace('within "/repo"', 'within "/"'))):
        (tmp_path / name).mkdir()
        paths.append(tmp_path / name / "spec.harness")
        paths[-1].write_text(TOOLS + textwrap.dedent(text), encoding="utf-8")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache-home")}
    env.pop("HARNESSC_CACHE_DIR", None)

    def run() -> list[str]:
        command = [sys.executable, "-c", WARM_DIFF, *map(str, paths)]
        done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    regions, queries, hits, verified, z3 = run()
    assert (regions, hits, verified, z3) == ("1", "0", "True", "True") and int(queries) > 0
    assert run() == ["1", "0", "1", "True", "False"]


def test_an_enum_with_a_value_added_compares_the_values_both_accept(tmp_path: Path) -> None:
    # `staging` is the first value of the old enum and the second of the new one: the shared
    # call must read it as the same value on both sides
    new_tools = TOOLS.replace(
        'enum("staging", "production")', 'enum("canary", "staging", "production")'
    )
    new = BASE.replace(
        'staging: allow deploy when args.env == "staging"',
        'staging: allow deploy when args.env == "staging" or args.env == "canary"\n'
        '  big: deny deploy when args.env == "production" and args.n > 10 { reason "big" }',
    )
    c = diff(tmp_path, BASE, new, TOOLS, new_tools)
    assert changes(c) == [("deploy", "ask→deny", "p.prod", "p.big")] and c.schema_changed
    assert c.regions[0].witness.args["env"] == "production"


def test_the_remediation_example_with_a_deny_narrowed(tmp_path: Path) -> None:
    sides = []
    for name in ("old", "new"):
        folder = tmp_path / name
        shutil.copytree(ROOT / "examples/remediation", folder)
        sides.append(folder / "remediation.harness")
    text = sides[1].read_text(encoding="utf-8")
    narrowed = 'args.change_id from untrusted only and args.environment == "production" {'
    sides[1].write_text(
        text.replace("args.change_id from untrusted only {", narrowed), encoding="utf-8"
    )
    old, new = (check([path]).model for path in sides)
    assert old is not None and new is not None
    c = compare_specs(old, new, cache=AnalysisCache(on_disk=False))
    assert "policy remediation.remediation" in c.subjects and c.undecided == []
    [region] = c.regions
    assert (region.tool, region.change) == ("production.deploy", "deny→allow")
    assert region.old.rule == "remediation.untrusted_change"
    assert region.witness.args["environment"] == "staging"
    assert region.witness.session  # the change id came from an untrusted source only
    assert region.verified and region.exact and region.widened
    # every tool no changed rule selects is skipped without z3
    assert set(c.tools_compared) == {"production.deploy"}


def test_a_question_given_up_on_within_its_budget_is_kept_under_that_budget_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A comparison z3 gives up on within a budget of resource units reads back the same
    undecided regions without asking again; under another budget it is asked, and decided."""
    from harnessc.compiler.analysis.budget import RLIMIT_VARIABLE

    a = spec_of(tmp_path, "old", BASE)
    b = spec_of(tmp_path, "new", BASE.replace('within "/repo"', 'within "/"'))
    cache = AnalysisCache(on_disk=False)
    monkeypatch.setenv(RLIMIT_VARIABLE, "1")  # same on every machine, unlike 1 ms
    rushed = compare_specs(a, b, cache=cache)
    assert rushed.regions == [] and rushed.undecided and rushed.queries > 0
    again = compare_specs(a, b, cache=cache)
    assert again.queries == 0 and again.cache_hits == 1
    assert [u.to_dict() for u in again.undecided] == [u.to_dict() for u in rushed.undecided]
    monkeypatch.delenv(RLIMIT_VARIABLE)
    decided = compare_specs(a, b, cache=cache)
    assert decided.cache_hits == 0 and decided.undecided == [] and len(decided.regions) == 1
