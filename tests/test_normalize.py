"""Normalize: canonical, registered, on-surface tool ids, schema validation, frozen calls."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any

import pytest
from harnessc.compiler.pipeline import check
from harnessc.runtime import Facts, Harness, McpState, PendingCall, Refusal, Validator
from harnessc.runtime.judge.normalize import REFUSAL_CODES, freeze, thaw
from harnessc.runtime.model import Field, Schema, Spec, Tool, Type
from harnessc.runtime.model.canonical import Execution, input_hash
from hypothesis import given, settings
from hypothesis import strategies as st

from .budget import examples
from .conftest import ROOT

ENGINEER = {"user": "u-1842", "role": "engineer", "tenant": "acme"}


@pytest.fixture(scope="module")
def spec() -> Spec:
    result = check([ROOT / "examples" / "remediation" / "remediation.harness"])
    assert result.ok and result.model is not None
    return result.model


def available(spec: Spec) -> Facts:
    """Facts under which every tool of the example is available: normalize's own checks are
    what these tests exercise (the availability layer has tests of its own)."""
    scanner = McpState(
        enabled=True,
        connected=True,
        transport_valid=True,
        disclaimer_accepted=True,
        agent_access=True,
        discovered={"scan": spec.tools["mcp:scanner:tool:scan"].input.to_json_schema()},
    )
    return Facts.of(
        {"workspace.open": True, "workspace.root": "/repo"},
        connected={"change_platform"},
        running={"ci_runner"},
        mcp={"scanner": scanner},
    )


@pytest.fixture
def session(spec: Spec) -> Any:
    h = Harness(spec, aliases={"create_change_request": "change.create"})
    return h.session("planner", actor=ENGINEER, task="t-1", facts=available(spec))


def refused(result: PendingCall | Refusal, code: str) -> Refusal:
    assert isinstance(result, Refusal), result
    assert result.code == code, result
    assert result.code in REFUSAL_CODES
    assert not result.message.endswith(".") and not result.message[0].isupper()
    return result


# ---------------------------------------------------------------------------------------------
# Names


def test_a_wire_name_maps_back_to_the_tool_id(session: Any) -> None:
    call = session.normalize("run_ci", "c-1", {"ref": "fix/cve"})
    assert isinstance(call, PendingCall) and call.tool_id == "ci.run_pipeline"
    assert call.wire_name == "run_ci"
    mcp = session.normalize("mcp__scanner__scan", "c-2", {"target": "payment-service"})
    assert isinstance(mcp, PendingCall) and mcp.tool_id == "mcp:scanner:tool:scan"


def test_unknown_tools_are_refused_with_a_near_match_only(session: Any) -> None:
    near = refused(session.normalize("change.craete", "c", {}), "unknown-tool")
    assert near.message == "unknown tool `change.craete`; did you mean `change.create`?"
    far = refused(session.normalize("format_disk", "c", {}), "unknown-tool")
    assert far.message == "unknown tool `format_disk`" and far.replacement is None


def test_legacy_ids_are_refused_with_their_replacement(session: Any) -> None:
    r = refused(session.normalize("change.deploy", "c", {}), "legacy-tool")
    assert r.replacement == "production.deploy"
    r = refused(session.normalize("read_list", "c", {"path": "/repo"}), "legacy-tool")
    assert (r.replacement, r.message) == (
        "read_open",
        "`read_list` is a retired tool; use `read_open`",
    )
    refused(session.normalize("change_deploy", "c", {}), "legacy-tool")  # by wire name too


def test_old_aliases_are_refused_never_rerouted(session: Any) -> None:
    r = refused(session.normalize("create_change_request", "c", {}), "old-alias")
    assert r.replacement == "change.create"
    r = refused(session.normalize("Change-Create", "c", {}), "old-alias")
    assert r.replacement == "change.create"
    # the derived wire name of a tool whose wire name was overridden is an old alias
    r = refused(session.normalize("ci_run_pipeline", "c", {}), "old-alias")
    assert r.replacement == "ci.run_pipeline"


@pytest.mark.parametrize(
    "name", ["scanner.scan", "scanner:scan", "mcp:scanner:scan", "scan", "mcp.scanner.scan"]
)
def test_mcp_tools_are_reached_only_by_their_canonical_id(session: Any, name: str) -> None:
    r = refused(session.normalize(name, "c", {"target": "x"}), "mcp-id")
    assert r.replacement == "mcp:scanner:tool:scan"


def test_delegate_task_is_not_a_tool(session: Any) -> None:
    r = refused(session.normalize("delegate_task", "c", {"goal": "x"}), "delegate-task")
    assert r.replacement == "Session.delegate(goal, agent=...)"


def test_skill_private_primitive_and_hidden_tools_are_refused(session: Any) -> None:
    r = refused(session.normalize("sarif.summarize", "c", {"report": "/r"}), "skill-private")
    assert "remediation.remediation_report" in r.message
    r = refused(session.normalize("evidence.attach", "c", {}), "not-on-surface")
    assert r.message == "`evidence.attach` is internal (primitive) and never on a surface"
    r = refused(session.normalize("terminal_session", "c", {"command": "ls"}), "not-on-surface")
    assert "remediation.planner" in r.message  # hidden on the planner's surface


def test_a_refusal_is_recorded(session: Any) -> None:
    session.normalize("change.deploy", "c-9", {})
    events = [e for e in session.harness.store.read(session.id) if e.type == "call.refused"]
    assert events[-1].kind == "Error"
    assert events[-1].payload["code"] == "legacy-tool"
    assert events[-1].payload["tool_call_id"] == "c-9"


# ---------------------------------------------------------------------------------------------
# Arguments


def test_defaults_are_applied_and_covered_by_the_input_hash(session: Any) -> None:
    call = session.normalize(
        "production.deploy", "c", {"change_id": "chg-1", "environment": "staging"}
    )
    assert isinstance(call, PendingCall)
    assert thaw(call.args) == {
        "change_id": "chg-1",
        "environment": "staging",
        "canary_percent": 10,
        "max_error_rate": 0.01,
        "bake_time": "15m",
    }
    assert call.input_hash == input_hash("production.deploy", 2, thaw(call.args), Execution())
    explicit = session.normalize("production.deploy", "c", {**thaw(call.args)})
    assert explicit.input_hash == call.input_hash


@pytest.mark.parametrize(
    ("args", "path", "message"),
    [
        ({"change_id": 7}, "$.change_id", "expected a string, got a number"),
        ({"change_id": "CHG"}, "$.change_id", "`CHG` does not match the pattern `^chg-[0-9]+$`"),
        (
            {"environment": "prod"},
            "$.environment",
            "expected one of `staging`, `production`, got `prod`",
        ),
        ({"canary_percent": 0}, "$.canary_percent", "a value of at least 1 is required, got 0"),
        ({"canary_percent": 101}, "$.canary_percent", "a value of at most 100 is allowed, got 101"),
        ({"canary_percent": True}, "$.canary_percent", "expected an integer, got a boolean"),
        ({"canary_percent": 2.5}, "$.canary_percent", "expected an integer, got a number"),
        ({"bake_time": "soon"}, "$.bake_time", "`soon` is not a duration such as `30s` or `1h30m`"),
        ({"force": True}, "$.force", "unknown field `force`"),
        ({"change_id": None}, "$.change_id", "the required field `change_id` is missing"),
    ],
)
def test_schema_violations_are_refused_with_their_json_path(
    session: Any, args: dict[str, Any], path: str, message: str
) -> None:
    base = {"change_id": "chg-1", "environment": "staging"}
    r = refused(session.normalize("production.deploy", "c", {**base, **args}), "invalid-args")
    assert r.path == path
    assert (path, message) in r.errors
    assert r.message.startswith(f"invalid arguments for `production.deploy`: {message} at `{path}`")


def test_every_violation_is_listed(session: Any) -> None:
    r = refused(
        session.normalize("change.create", "c", {"evidence_refs": [], "x": 1}), "invalid-args"
    )
    assert [p for p, _ in r.errors] == [
        "$.service",
        "$.patch_ref",
        "$.evidence_refs",
        "$.rollback_plan",
        "$.x",
    ]
    assert "(and 4 more)" in r.message


def test_paths_are_normalized_and_may_not_leave_their_root(session: Any) -> None:
    call = session.normalize("read_open", "c", {"path": "/repo/./src/../pom.xml"})
    assert isinstance(call, PendingCall) and call.args["path"] == "/repo/pom.xml"
    r = refused(session.normalize("read_open", "c", {"path": "/repo/../../etc"}), "invalid-args")
    assert r.errors == (("$.path", "the path `/repo/../../etc` leaves its root"),)


def test_nested_schemas_are_validated_with_paths() -> None:
    item = Type(
        name="object",
        fields=(
            Field(name="action", type=Type(name="enum", values=("create", "delete"))),
            Field(name="path", type=Type(name="path")),
            Field(name="note", type=Type(name="string", optional=True)),
        ),
    )
    schema = Schema(
        fields=(
            Field(name="ops", type=Type(name="list", item=item), min=1),
            Field(name="labels", type=Type(name="map", item=Type(name="int")), default={}),
        )
    )
    v = Validator(schema)
    assert v.validate({"ops": [{"action": "create", "path": "a/./b", "note": None}]}) == {
        "ops": [{"action": "create", "path": "a/b"}],
        "labels": {},
    }
    assert v.errors(
        {"ops": [{"action": "move", "path": "x", "extra": 1}], "labels": {"a": "1"}}
    ) == [
        ("$.ops[0].action", "expected one of `create`, `delete`, got `move`"),
        ("$.ops[0].extra", "unknown field `extra`"),
        ("$.labels.a", "expected an integer, got a string"),
    ]
    assert v.errors("nope") == [("$", "expected an object, got a string")]


def test_a_pending_call_is_immutable(session: Any) -> None:
    call = session.normalize(
        "change.create",
        "c-1",
        {
            "service": "payment-service",
            "patch_ref": "p",
            "evidence_refs": ["e"],
            "rollback_plan": "r",
        },
    )
    assert isinstance(call, PendingCall)
    with pytest.raises(TypeError):
        call.args["service"] = "other"  # type: ignore[index]
    assert isinstance(call.args["evidence_refs"], tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.tool_id = "production.deploy"  # type: ignore[misc]
    assert (call.actor["user"], call.agent, call.task_id) == (
        "u-1842",
        "remediation.planner",
        "t-1",
    )


def test_execution_parameters_change_the_input_hash(session: Any) -> None:
    args = {"command": "make test"}
    child = session.delegate("run tests", agent="generic")
    base = child.normalize("terminal_session", "c", args, execution=Execution(cwd="/repo"))
    other = child.normalize("terminal_session", "c", args, execution=Execution(cwd="/tmp"))
    assert isinstance(base, PendingCall) and isinstance(other, PendingCall)
    assert base.input_hash != other.input_hash
    bad = child.normalize("terminal_session", "c", args, execution=Execution(timeout_ms=2**60))
    refused(bad, "invalid-execution")


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)


# ---------------------------------------------------------------------------------------------
# The common path and the general path agree

FLAT = Schema(
    fields=(
        Field(name="path", type=Type(name="path"), max=12),
        Field(name="env", type=Type(name="enum", values=("staging", "production"))),
        Field(name="n", type=Type(name="int", optional=True), min=0, max=9),
        Field(name="dry", type=Type(name="bool"), default=True),
        Field(name="id", type=Type(name="string", optional=True), pattern="^[a-z]+$", min=2),
        Field(name="url", type=Type(name="url", optional=True)),
        Field(name="wait", type=Type(name="duration", optional=True)),
        Field(name="tag", type=Type(name="string"), default="é\n"),
    )
)
FLAT_TOOL = Tool(
    id="fs.write", wire_name="fs_write", summary="Write.", effects=("write",), input=FLAT
)

flat_values = st.fixed_dictionaries(
    {
        "path": st.sampled_from(["/repo/a", "/repo/./b/../c", "a//b/", "/repo/../..", "x" * 13]),
        "env": st.sampled_from(["staging", "production", "production", "prod"]),
    },
    optional={
        "n": st.integers(-1, 10) | st.sampled_from([3.0, 2.5, True, None]),
        "dry": st.booleans() | st.sampled_from([0, None]),
        "id": st.sampled_from(["ab", "abc", "a", "Ab", None, 7]),
        "url": st.sampled_from(["https://x.org/a", "not a url"]),
        "wait": st.sampled_from(["30s", "1h30m", "soon"]),
        "tag": st.text(max_size=3),
        "extra": st.integers(),
    },
)


@settings(max_examples=examples(400), deadline=None)
@given(args=flat_values, cwd=st.none() | st.sampled_from(["/repo", "/tmp"]))
def test_a_read_only_mapping_freezes_to_the_same_call_or_refusal(
    args: dict[str, Any], cwd: str | None
) -> None:
    # a dict takes the one-pass path of flat schemas, a read-only mapping the general one
    validator = Validator(FLAT)
    execution = Execution(cwd=cwd, timeout_ms=1000)
    fast = freeze(FLAT_TOOL, validator, "c1", args, execution)
    general = freeze(FLAT_TOOL, validator, "c1", MappingProxyType(args), execution)
    assert fast == general
    if isinstance(fast, PendingCall):
        assert list(fast.args) == list(general.args)  # the schema's order, not sorted
        plain = thaw(fast.args)
        assert fast.input_hash == input_hash("fs.write", FLAT_TOOL.version, plain, execution)
    else:
        assert list(fast.errors) == validator.errors(args)


@pytest.mark.parametrize(
    "name", ['a"b', "x = 1\nimport os", "é", "__class__", "a b"], ids=lambda n: repr(n)
)
def test_field_names_and_patterns_never_become_code(name: str) -> None:
    schema = Schema(
        fields=(
            Field(name=name, type=Type(name="string"), pattern='^"\\); import os #$', default="x"),
            Field(name="k", type=Type(name="string", optional=True), pattern="'''"),
        )
    )
    tool = Tool(id="t.x", wire_name="t_x", summary="T.", effects=("read",), input=schema)
    call = freeze(tool, Validator(schema), "c1", {name: '"); import os #', "k": "'''"})
    assert isinstance(call, PendingCall), call
    assert call.input_hash == input_hash("t.x", 1, thaw(call.args), Execution())
    refusal = freeze(tool, Validator(schema), "c1", {name: "other"})
    assert isinstance(refusal, Refusal) and refusal.path == f"$.{name}"


def test_a_lone_surrogate_is_refused_as_before() -> None:
    call = freeze(
        FLAT_TOOL, Validator(FLAT), "c1", {"path": "/a", "env": "staging", "tag": "\ud800"}
    )
    assert isinstance(call, Refusal)
    assert call.code == "invalid-execution"
    assert call.message == (
        "the call to `fs.write` has no canonical form: a string contains a lone surrogate"
    )
