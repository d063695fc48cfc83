"""The typed model (runtime/model/ir.py) and the lowering stage (compiler/lower/)."""

from __future__ import annotations

import copy
import gc
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from harnessc.compiler.lower import derive_wire_name
from harnessc.compiler.pipeline import check
from harnessc.runtime import model as m
from pydantic import ValidationError

from .conftest import ROOT

EXAMPLE = ROOT / "examples" / "remediation" / "remediation.harness"
STDLIB = sorted((ROOT / "stdlib").glob("*.harness"))
ROOTS = sorted(
    p
    for p in (ROOT / "examples").glob("*/*.harness")
    if re.search(r"^harness ", p.read_text(encoding="utf-8"), re.MULTILINE)
)
"""Every example's root spec (the file with a `harness` header)."""
SCENARIOS = sorted((ROOT / "tests" / "scenarios").glob("*.harness"))


def build(path: Path) -> m.Spec:
    result = check([path])
    assert result.ok, [d.message for d in result.diagnostics]
    assert result.model is not None
    return result.model


def build_text(tmp_path: Path, text: str) -> m.Spec:
    path = tmp_path / "main.harness"
    path.write_text(text, encoding="utf-8")
    return build(path)


def codes_of(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "main.harness"
    path.write_text(text, encoding="utf-8")
    return [d.code for d in check([path]).diagnostics]


@pytest.fixture(scope="module")
def spec() -> m.Spec:
    return build(EXAMPLE)


@pytest.mark.parametrize("path", [EXAMPLE, *STDLIB], ids=lambda p: p.name)
def test_example_and_stdlib_lower_without_errors(path: Path) -> None:
    lowered = build(path)
    assert lowered.tools or lowered.policies


def test_json_round_trip_is_lossless(spec: m.Spec) -> None:
    again = m.Spec.from_json(spec.to_json())
    assert again == spec
    assert again.to_json() == spec.to_json()


def test_content_hash_is_stable_and_follows_rules(tmp_path: Path, spec: m.Spec) -> None:
    assert build(EXAMPLE).content_hash() == spec.content_hash()
    assert re.fullmatch(r"[0-9a-f]{64}", spec.content_hash())
    text = EXAMPLE.read_text(encoding="utf-8")
    changed = text.replace('actor.role in ["engineer", "sre"]', 'actor.role in ["engineer"]')
    assert changed != text
    folder = tmp_path / "remediation"
    folder.mkdir()
    (folder / "scanner.harness").write_text(
        (EXAMPLE.parent / "scanner.harness").read_text(encoding="utf-8"), encoding="utf-8"
    )
    (folder / "remediation.harness").write_text(changed, encoding="utf-8")
    other = build(folder / "remediation.harness")
    assert other.content_hash() != spec.content_hash()


def test_keys_are_qualified(spec: m.Spec) -> None:
    assert spec.root_module == "remediation"
    assert "remediation.main_planner" in spec.surfaces
    assert "std.risk.defaults" in spec.risk_tables
    assert spec.policies["remediation.remediation"].default == m.DefaultDecision(
        table="std.risk.defaults", origin=spec.policies["remediation.remediation"].default.origin
    )
    assert spec.policy("remediation") is spec.policies["remediation.remediation"]
    assert spec.agents["remediation.planner"].delegates == ("remediation.generic",)
    assert list(spec.tools) == sorted(spec.tools)


def test_wire_names_are_derived_and_unique(spec: m.Spec) -> None:
    assert spec.tools["change.create"].wire_name == "change_create"
    assert spec.tools["mcp:scanner:tool:scan"].wire_name == "mcp__scanner__scan"
    assert spec.tools["mcp:scanner:tool:create-issue"].wire_name == "mcp__scanner__create-issue"
    assert spec.tools["ci.run_pipeline"].wire_name == "run_ci"  # `wire_name` overrides
    wires = [t.wire_name for t in spec.tools.values()]
    assert len(wires) == len(set(wires))
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", w) for w in wires)
    assert derive_wire_name("mcp:s:tool:a/b c") == "mcp__s__a_b_c"
    assert len(derive_wire_name("x" * 100)) == 64


def test_json_schema_of_change_create(spec: m.Spec) -> None:
    assert spec.tools["change.create"].input.to_json_schema() == {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "service": {"type": "string", "pattern": "^[a-z0-9-]+$"},
            "patch_ref": {"type": "string"},
            "evidence_refs": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "rollback_plan": {"type": "string"},
            "ticket": {"type": "string"},
        },
        "required": ["service", "patch_ref", "evidence_refs", "rollback_plan"],
        "additionalProperties": False,
    }


def test_json_schema_defaults_secrets_and_nesting(spec: m.Spec) -> None:
    deploy = spec.tools["production.deploy"].input.to_json_schema()
    assert deploy["required"] == ["change_id", "environment"]
    assert deploy["properties"]["canary_percent"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 100,
        "default": 10,
    }
    assert deploy["properties"]["bake_time"]["default"] == "15m"
    accept = spec.tools["finding.accept_risk"].input.to_json_schema()
    assert accept["properties"]["exploit_notes"]["writeOnly"] is True
    output = spec.tools["production.deploy"].output
    assert output is not None
    rollout = output.to_json_schema()["properties"]["rollout"]
    assert rollout["additionalProperties"] is False
    assert rollout["properties"]["state"]["enum"] == ["rolling", "complete", "rolled_back"]


def test_operations_add_the_op_discriminator(tmp_path: Path, spec: m.Spec) -> None:
    deps = spec.tools["deps"]
    assert deps.input.fields[0].type == m.Type(name="enum", values=("inspect", "explain", "bump"))
    assert deps.risk == "high"  # the highest operation risk
    assert deps.effects == ("read", "reversible", "write")  # the union
    assert deps.operations["inspect"].risk == "low"
    browser = build_text(
        tmp_path,
        'tool b {\n  summary "x"\n  operation look { effects read }\n'
        "  operation send { effects external; input { to: string } }\n  input { url: url? }\n}\n",
    ).tools["b"]
    names = [f.name for f in browser.input.fields]
    assert names == ["op", "url", "to"]
    assert browser.input.field("to").optional  # type: ignore[union-attr]
    assert browser.input.to_json_schema()["required"] == ["op"]
    assert browser.operations["send"].risk == "medium"
    assert browser.risk == "medium"


def test_risk_defaults(tmp_path: Path, spec: m.Spec) -> None:
    assert spec.tools["read_list"].risk == "low"  # effects read, no risk written
    assert spec.tools["evidence.attach"].risk == "medium"  # effects write idempotent
    assert spec.tools["mcp:scanner:tool:create-issue"].risk == "medium"
    assert spec.tools["change.create"].risk == "medium"  # declared
    tool = build_text(tmp_path, 'tool t { summary "x"; effects read preview; input {} }').tools
    assert tool["t"].risk == "low"


def test_kinds(spec: m.Spec) -> None:
    kinds = {i: t.kind for i, t in spec.tools.items()}
    assert kinds["read_list"] == "legacy"
    assert spec.tools["read_list"].replaced_by == "read_open"
    assert kinds["evidence.attach"] == "primitive"
    assert kinds["ci.run_pipeline"] == "dynamic"
    assert spec.tools["ci.run_pipeline"].provided_by == "ci_runner"
    assert kinds["mcp:scanner:tool:scan"] == "mcp"
    assert spec.tools["mcp:scanner:tool:scan"].mcp_server == "scanner"
    assert kinds["report.render"] == "private"
    assert spec.tools["report.render"].skill == "remediation.remediation_report"


def test_rules_in_text_order_after_include_expansion(spec: m.Spec) -> None:
    labels = [r.label for r in spec.policies["remediation.remediation"].rules]
    guardrails = [r.label for r in spec.policies["std.risk.guardrails"].rules]
    workspace = [r.label for r in spec.policies["std.workspace.workspace"].rules]
    assert labels[: len(guardrails)] == guardrails
    assert labels[len(guardrails) : len(guardrails) + len(workspace)] == workspace
    own = labels[len(guardrails) + len(workspace) :]
    assert own[0] == "remediation.engineers_create"
    assert own[2] == "remediation#3"  # `allow change.get`, the third rule of the policy
    rule = spec.policies["remediation.remediation"].rules[len(guardrails) + len(workspace)]
    assert rule.policy == "remediation.remediation"
    assert rule.origin is not None and rule.origin.file.endswith("remediation.harness")


def test_unlabeled_rules_are_numbered_in_their_policy(tmp_path: Path) -> None:
    spec = build_text(
        tmp_path,
        'tool a { summary "a"; effects read; input { n: int } }\n'
        "policy q { allow a }\n"
        "policy p {\n  allow a\n  include q\n  x: allow a\n  allow a when args.n > 1\n}\n",
    )
    assert [r.label for r in spec.policies["main.p"].rules] == ["p#1", "q#1", "p.x", "p#3"]


def test_conditions_and_values(spec: m.Spec) -> None:
    rules = {r.label: r for r in spec.policies["remediation.remediation"].rules}
    deps = rules["remediation.deps_bump_in_workspace"].condition
    assert deps == m.And(
        items=(
            m.Compare(
                op="==", left=m.Path(root="args", parts=("op",)), right=m.EnumMember(name="bump")
            ),
            m.Compare(
                op="within",
                left=m.Path(root="args", parts=("manifest",)),
                right=m.Path(root="fact", parts=("workspace.root",)),
            ),
        )
    )
    assert spec.tools["change.create"].requires == m.FactCall(
        func="connected", name="change_platform"
    )
    auditors = rules["remediation.auditors_read_only"]
    assert [s.kind for s in auditors.selectors] == ["glob", "id", "id"]
    profile = spec.policies["remediation.report_profile"].rules
    assert profile[-1].label == "report_profile.report_is_low_risk"
    assert profile[-1].selectors[0] == m.Selector(
        kind="risk", op=">=", value="high", text="risk >= high"
    )
    release = rules["remediation.release_manager"]
    assert release.approvers == (m.Approver(kind="role", value="release-manager"),)
    assert release.grant == m.Grant(scope="once", ttl_ms=15 * 60_000)


def test_surface_and_module_selectors(spec: m.Spec) -> None:
    main = spec.surfaces["remediation.main_planner"]
    assert main.limit == 20
    assert main.rank == m.Rank(recall="embedding", top=60, rerank="hybrid", prefer=("packs",))
    module = main.expose[0]
    assert module.kind == "module" and module.value == "std.workspace"
    assert "read_open" in module.tools and "read_list" not in module.tools
    assert spec.surfaces["remediation.child_tools"].rank == m.Rank()


def test_workflow_steps(spec: m.Spec) -> None:
    steps = {s.name: s for s in spec.workflows["remediation.remediate"].steps}
    assert spec.workflows["remediation.remediate"].agent == "remediation.planner"
    assert steps["change"].depends_on == ("patch", "review", "scan")
    assert steps["review"].options == ("approve", "reject")
    assert steps["review"].default == "reject"
    assert steps["review"].timeout_ms == 7 * 86_400_000
    assert steps["window"].kind == "gate" and steps["window"].after == ("review",)
    assert steps["deploy"].on_failure[0] == m.FailureAction(
        kind="retry", count=2, backoff_ms=30_000
    )
    assert steps["revert"].compensation
    assert steps["patch"].output is not None and steps["patch"].agent == "remediation.generic"


def test_spec_tests(spec: m.Spec) -> None:
    test = spec.tests["remediation.a release manager must approve production deploys"]
    assert test.policy == "remediation.remediation"
    assert test.tool == "production.deploy"
    assert test.args == {"change_id": "chg-1", "environment": "production"}
    assert test.actor == {"user": "u-1842", "role": "engineer", "tenant": "acme"}
    assert test.facts == {"release.freeze": False}
    assert test.expect == m.Expectation(
        effect="ask", approver=m.Approver(kind="role", value="release-manager")
    )


def test_a_spec_with_errors_has_no_model(tmp_path: Path) -> None:
    path = tmp_path / "main.harness"
    path.write_text('tool t { summary "x"; effects raed }', encoding="utf-8")
    result = check([path])
    assert result.model is None
    assert [d.code for d in result.diagnostics] == ["H301"]


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ('tool t { summary "x"; effects read; input { a: string pattern "[" } }', "H306"),
        ('tool t { summary "x"; effects read; input { a: int default 1.5 } }', "H307"),
        ('tool t { summary "x"; effects read; input { a: string max 1 default "ab" } }', "H307"),
        ('tool t { summary "x"; effects read; input { a: int min 1.5 } }', "H305"),
        ('tool t { summary "x"; effects read; input { a: bool pattern "x" } }', "H305"),
        ('tool t { summary "x"; effects read; input { a: string, a: int } }', "H305"),
        ('tool t { dynamic provided_by r; summary "x"; effects read }\nruntime r', "H304"),
        ('tool t { summary "x"; effects read; timeout 0s }', "H308"),
        ('tool t { summary "x"; effects read; version 0 }', "H308"),
        ('tool t { summary "x"; operation a { effects read }; input { op: string } }', "H305"),
        ("surface s { limit 0 }", "H308"),
        ("policy p { allow risk >= hihg }", "H301"),
        ('policy p { deny * when tool.effects has externl { reason "r" } }', "H301"),
        ("policy p { default deny { grant once ttl 1m } }", "H309"),
        ("policy p { default allow; default deny }", "H302"),
        ('mcp s { summary "x" }', "H304"),
        ('workflow w { step d = decide "q" { options a, b; timeout 1d default c } }', "H308"),
        ("workflow w { step g = gate env.x { timeout 1d default a } }", "H303"),
        ('test "t" { expect allow }', "H304"),
    ],
)
def test_validation_codes(tmp_path: Path, text: str, code: str) -> None:
    assert code in codes_of(tmp_path, text)


@pytest.mark.parametrize(
    "text",
    [
        'tool t { summary "x"; effects read; input { a: string pattern "^[a-z--]$" } }',
        'tool t { summary "x"; effects read; input { a: string } }\n'
        'policy p { allow t when args.a matches "[[a]" }',
    ],
    ids=["field", "condition"],
)
def test_a_pattern_python_would_read_differently_later_is_h306(tmp_path: Path, text) -> None:
    # every time, not only the first (re.compile caches a pattern with its warnings silenced);
    # with warnings as errors, as in this suite, the warning itself must never escape
    for _ in range(2):
        path = tmp_path / "main.harness"
        path.write_text(text, encoding="utf-8")
        [d] = check([path]).diagnostics
        assert (d.code, d.message.split(" `")[0]) == ("H306", "ambiguous regular expression")
        assert d.primary is not None and d.primary.message.startswith("possible")


@pytest.mark.parametrize(
    "count", ["4294967295", "9" * 5000], ids=["over-2**32-1", "over-4300-digits"]
)
@pytest.mark.parametrize("where", ["field", "condition"])
def test_a_repeat_count_too_large_for_python_is_h306(tmp_path: Path, count, where) -> None:
    # Python raises OverflowError or ValueError for these, not re.error: they escaped as tracebacks
    pattern = f"^a{{{count}}}$"
    text = (
        f'tool t {{ summary "x"; effects read; input {{ a: string pattern "{pattern}" }} }}'
        if where == "field"
        else 'tool t { summary "x"; effects read; input { a: string } }\n'
        f'policy p {{ allow t when args.a matches "{pattern}" }}'
    )
    path = tmp_path / "main.harness"
    path.write_text(text, encoding="utf-8")
    [d] = check([path]).diagnostics
    assert (d.code, d.message.split(" `")[0]) == ("H306", "invalid regular expression")
    assert d.primary is not None and d.primary.message == "the repetition number is too large"


def test_the_model_carries_origins(spec: m.Spec) -> None:
    origin = spec.tools["change.create"].origin
    assert origin is not None
    assert (origin.line, origin.column) == (34, 6)
    assert str(origin).endswith("remediation.harness:34:6")


def test_every_model_is_built_before_the_runtime_validates() -> None:
    """Importing the model builds no validator (`check` uses none: lowering builds the model
    with `trusted`); loading a spec, from JSON or into a harness, builds them all, so the
    runtime validates from its first call, from any thread, with nothing left to build."""
    code = (
        "import sys\n"
        "import harnessc.runtime.model.ir as m\n"
        "models = [v for v in vars(m).values() if isinstance(v, type)"
        " and issubclass(v, m._Model) and v is not m._Model]\n"
        "def built():\n"
        "    return sum(c.__pydantic_complete__ for c in models)\n"
        "print(len(models), built())\n"
        "from harnessc.compiler.pipeline import check\n"
        "spec = check([sys.argv[1]]).model\n"
        "print(built())\n"
        "if sys.argv[2] == 'json':\n"
        "    m.Spec.from_json(spec.to_json())\n"
        "else:\n"
        "    from harnessc.runtime import Harness\n"
        "    Harness(spec)\n"
        "print(built())\n"
    )
    for load in ("json", "harness"):
        done = subprocess.run(
            [sys.executable, "-c", code, str(EXAMPLE), load],
            capture_output=True,
            text=True,
            check=True,
        )
        count, imported, checked, loaded = done.stdout.split()
        assert int(count) > 40 and imported == "0", done.stdout
        assert int(checked) < int(count), done.stdout  # `check` builds what its analysis reads
        assert loaded == count, done.stdout


def test_a_loaded_spec_is_validated_strictly(spec: m.Spec) -> None:
    """The compiler builds the model unvalidated; whatever loads it back validates every field:
    an unknown field, a wrong type or a missing field is an error, never a silently odd model."""
    data = json.loads(spec.to_json())
    changes: list[Callable[[dict[str, Any]], object]] = [
        lambda tool: tool.update(surprise=True),
        lambda tool: tool.update(risk="severe"),
        lambda tool: tool["origin"].update(line="line 34"),
        lambda tool: tool.pop("wire_name"),
    ]
    for change in changes:
        broken = copy.deepcopy(data)
        change(broken["tools"]["change.create"])
        with pytest.raises(ValidationError):
            m.Spec.from_json(json.dumps(broken))


@pytest.mark.parametrize("path", [*ROOTS, *SCENARIOS, *STDLIB], ids=lambda p: p.name)
def test_the_model_lowering_builds_is_the_validated_model(path: Path) -> None:
    """Lowering builds the model without validation (`trusted`): what it builds must be what
    validation would have built, every value of its field's type (a tuple, not a list)."""
    lowered = build(path)
    again = m.Spec.from_json(lowered.to_json())
    assert again == lowered
    assert again.content_hash() == lowered.content_hash()


def test_the_analysis_names_a_session_term_as_the_runtime_keys_it() -> None:
    """The analysis names a history term by its canonical JSON (a walk of the model) and the
    runtime keys the term's aggregate by pydantic's dump: the two must be the same text."""
    from harnessc.compiler.analysis.concrete import canonical
    from harnessc.runtime.model.session_terms import history_key, session_terms

    terms = [
        term
        for path in SCENARIOS
        for policy in build(path).policies.values()
        for rule in policy.rules
        for term in session_terms(rule.condition)
        if isinstance(term, m.History)
    ]
    assert len(terms) >= 5
    assert all(canonical(term) == history_key(term) for term in terms)


def test_build_reports_a_model_that_does_not_load_back(spec: m.Spec) -> None:
    """Lowering builds unvalidated; `build` loads the model back from its JSON before writing a
    package, and a model that fails to (a bug of ours) is an H901, never a package that cannot
    load: a wrong value, or a value of the wrong type that validation would change."""
    from harnessc.compiler.pipeline import _unloadable

    assert _unloadable(spec) is None
    tool = spec.tools["change.create"]
    wrong_value = m.trusted(m.Tool)(**{**dict(tool), "risk": "severe"})
    wrong_type = m.trusted(m.Tool)(**{**dict(tool), "effects": list(tool.effects)})
    for broken in (wrong_value, wrong_type):
        problem = _unloadable(spec.model_copy(update={"tools": {tool.id: broken}}))
        assert problem is not None and problem.code == "H901", broken


def _less_origins(dumped: Any) -> Any:
    """pydantic's dump less every `origin` that is a model's (None or a file, line and column)."""
    if isinstance(dumped, dict):
        return {
            k: _less_origins(v)
            for k, v in dumped.items()
            if not (k == "origin" and (v is None or set(v) == {"file", "line", "column"}))
        }
    if isinstance(dumped, list):
        return [_less_origins(v) for v in dumped]
    return dumped


@pytest.mark.parametrize("path", [*ROOTS, *SCENARIOS], ids=lambda p: p.name)
def test_without_origins_is_the_json_dump_less_origins(path: Path) -> None:
    """`without_origins` (content hashes, the analysis's keys) walks the model by hand; it must
    give pydantic's JSON dump with every model's `origin` left out, in the same order."""
    spec = build(path)
    walked = json.dumps(m.without_origins(spec))
    assert walked == json.dumps(_less_origins(spec.model_dump(mode="json")))
    assert walked != json.dumps(spec.model_dump(mode="json"))  # it had origins to leave out


def test_a_collection_pause_nests_and_restores_the_collector() -> None:
    """Paused inside, however nested; enabled after only if it was before; objects the
    process froze itself stay frozen."""
    assert gc.isenabled()
    with m.collection_paused():
        with m.collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with m.collection_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
    kept = [object() for _ in range(3)]
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with m.collection_paused():
            pass
        # a thaw would leave none frozen; another thread of the suite may free a frozen
        # object meanwhile, which takes one off the count
        assert frozen - 100 < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()
    assert kept
