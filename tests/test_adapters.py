"""Function-calling adapters: tool definitions a provider accepts, and recorded tool-call
payloads read back into `(tool_id, tool_call_id, args)` for normalize — wire names mapped to
tool ids first, everything else refused call by call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harnessc.compiler.pipeline import check
from harnessc.runtime.integrations.adapters import AdapterError, FunctionCalling, ToolCall
from harnessc.runtime.judge.normalize import PendingCall, Refusal, Validator, freeze
from harnessc.runtime.model import Spec, Tool

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "adapters"
OFFERED = ("change.create", "change.get", "production.deploy", "ci.run_pipeline")


@pytest.fixture(scope="module")
def spec() -> Spec:
    result = check([ROOT / "examples" / "remediation" / "remediation.harness"])
    assert result.ok and result.model is not None
    return result.model


@pytest.fixture(scope="module")
def fc(spec: Spec) -> FunctionCalling:
    return FunctionCalling(spec.tools[i] for i in OFFERED)


def payload(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text("utf-8"))


def refusal(item: ToolCall | Refusal) -> Refusal:
    assert isinstance(item, Refusal), item
    return item


# ---------------------------------------------------------------------------------------------
# Export


def test_openai_chat_tools_use_wire_names_and_the_input_schema(fc: FunctionCalling) -> None:
    tools = fc.openai()
    assert [t["type"] for t in tools] == ["function"] * 4
    names = [t["function"]["name"] for t in tools]
    # the dynamic CI tool keeps its old wire name; traces and grants use its id
    assert names == ["change_create", "change_get", "production_deploy", "run_ci"]
    deploy = tools[2]["function"]
    assert deploy["description"].startswith("Deploy a change request to staging or production")
    assert "Use when: The change request exists" in deploy["description"]
    assert "Not for: Creating or editing a change" in deploy["description"]
    params = deploy["parameters"]
    assert "$schema" not in params
    assert params["type"] == "object" and params["additionalProperties"] is False
    assert params["required"] == ["change_id", "environment"]
    assert params["properties"]["environment"] == {
        "type": "string",
        "enum": ["staging", "production"],
    }
    assert params["properties"]["canary_percent"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 100,
        "default": 10,
    }
    json.dumps(tools)  # plain JSON, ready for the request body


def test_responses_and_anthropic_tools_carry_the_same_schema(fc: FunctionCalling) -> None:
    chat = fc.openai()
    responses = fc.openai_responses()
    anthropic = fc.anthropic()
    for c, r, a in zip(chat, responses, anthropic, strict=True):
        fn = c["function"]
        assert r == {
            "type": "function",
            "name": fn["name"],
            "description": fn["description"],
            "parameters": fn["parameters"],
            "strict": False,
        }
        assert a == {
            "name": fn["name"],
            "description": fn["description"],
            "input_schema": fn["parameters"],
        }


def test_secret_fields_are_write_only_in_the_schema(spec: Spec) -> None:
    tool = FunctionCalling([spec.tools["finding.accept_risk"]]).anthropic()[0]
    assert tool["input_schema"]["properties"]["exploit_notes"]["writeOnly"] is True


def test_tools_that_cannot_be_offered_are_refused_at_export() -> None:
    a = Tool(id="a.create", wire_name="create")
    b = Tool(id="b.create", wire_name="create")
    with pytest.raises(AdapterError, match=r"`a\.create` and `b\.create` share the wire name"):
        FunctionCalling([a, b])
    with pytest.raises(AdapterError, match=r"is not `\[A-Za-z0-9_-\]"):
        FunctionCalling([Tool(id="x", wire_name="x.y")])


# ---------------------------------------------------------------------------------------------
# Read back


def test_openai_tool_calls_map_wire_names_to_tool_ids(fc: FunctionCalling) -> None:
    calls = fc.read_openai(payload("openai_chat_tool_calls.json"))
    assert calls == [
        ToolCall(
            "change.create",
            "call_12345xyz",
            {
                "service": "payment-service",
                "patch_ref": "artifacts/remediation.patch",
                "evidence_refs": ["reports/tests.xml", "reports/scan.sarif"],
                "rollback_plan": "revert the patch commit",
            },
        ),
        ToolCall("ci.run_pipeline", "call_67890abc", {"ref": "fix/CVE-2024-1234", "suite": "full"}),
    ]
    tool_id, tool_call_id, args = calls[1]  # unpacks as the triple normalize takes
    assert (tool_id, tool_call_id, args["suite"]) == ("ci.run_pipeline", "call_67890abc", "full")


def test_the_message_or_the_tool_call_list_reads_the_same(fc: FunctionCalling) -> None:
    whole = payload("openai_chat_tool_calls.json")
    message = whole["choices"][0]["message"]
    expected = fc.read_openai(whole)
    assert fc.read_openai(whole["choices"][0]) == expected
    assert fc.read_openai(message) == expected
    assert fc.read_openai(message["tool_calls"]) == expected
    assert fc.read_openai({"role": "assistant", "content": "done", "tool_calls": None}) == []


def test_bad_calls_are_refused_one_by_one(fc: FunctionCalling) -> None:
    got = fc.read_openai(payload("openai_chat_bad_calls.json"))
    assert len(got) == 6
    unknown, truncated, dup, array, by_id, ok = got

    r = refusal(unknown)
    assert (r.code, r.tool, r.tool_call_id) == ("unknown-tool", "change_creat", "call_unknown01")
    assert r.message == (
        "`change_creat` is not one of the tools offered to the model; did you mean `change_create`?"
    )
    assert r.replacement == "change.create"

    r = refusal(truncated)
    assert (r.code, r.tool, r.tool_call_id, r.path) == (
        "invalid-args",
        "production_deploy",
        "call_truncated02",
        "$",
    )
    assert r.message.startswith(
        "the arguments of the call to `production.deploy` are not valid JSON: not JSON"
    )

    # duplicate keys are ambiguous (which environment?): refused, never last-one-wins
    r = refusal(dup)
    assert r.code == "invalid-args"
    assert "duplicate key `environment`" in r.message

    r = refusal(array)
    assert r.message == "the arguments of the call to `change.get` are not a JSON object"

    # a tool id is not a wire name: the model must use the name it was offered
    r = refusal(by_id)
    assert (r.code, r.replacement) == ("unknown-tool", "production.deploy")
    assert "did you mean `production_deploy`?" in r.message

    assert ok == ToolCall("change.get", "call_ok06", {"change_id": "chg-1"})


def test_responses_api_function_calls_use_call_id(fc: FunctionCalling) -> None:
    got = fc.read_openai_responses(payload("openai_responses_function_calls.json"))
    assert got == [
        ToolCall(
            "production.deploy",
            "call_w8Bv3mWQpXn1tR9cZ4eYs0Ku",
            {"change_id": "chg-4711", "environment": "production", "canary_percent": 5},
        )
    ]


def test_anthropic_tool_use_blocks(fc: FunctionCalling) -> None:
    got = fc.read_anthropic(payload("anthropic_tool_use.json"))
    assert got[:2] == [
        ToolCall("change.get", "toolu_01A09q90qw90lq917835lq9", {"change_id": "chg-4711"}),
        ToolCall(
            "production.deploy",
            "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            {"change_id": "chg-4711", "environment": "staging"},
        ),
    ]
    r = refusal(got[2])
    assert (r.code, r.tool, r.tool_call_id, r.replacement) == (
        "unknown-tool",
        "delete_everything",
        "toolu_01Xk2bq9n3VhPz7LmQe4Rs8T",
        None,
    )
    assert r.message == "`delete_everything` is not one of the tools offered to the model"


def test_a_registered_tool_that_was_not_offered_cannot_be_reached(spec: Spec) -> None:
    # change.revert is registered, but only change.get was offered in this turn
    fc = FunctionCalling([spec.tools["change.get"]])
    block = {"type": "tool_use", "id": "toolu_1", "name": "change_revert", "input": {}}
    assert refusal(fc.read_anthropic({"content": [block]})[0]).code == "unknown-tool"


def test_a_call_without_an_id_is_refused(fc: FunctionCalling) -> None:
    call = {"type": "function", "function": {"name": "change_get", "arguments": "{}"}}
    r = refusal(fc.read_openai([call])[0])
    assert (r.code, r.message) == ("invalid-args", "the call to `change.get` has no call id")


def test_sdk_objects_are_read_through_model_dump(fc: FunctionCalling) -> None:
    class Message:  # what the provider SDKs return: pydantic models
        def __init__(self, data: dict[str, Any]) -> None:
            self.data = data

        def model_dump(self) -> dict[str, Any]:
            return self.data

    message = Message(payload("anthropic_tool_use.json"))
    assert fc.read_anthropic(message) == fc.read_anthropic(payload("anthropic_tool_use.json"))


@pytest.mark.parametrize(
    ("reader", "value"),
    [
        ("read_openai", {"object": "chat.completion"}),
        ("read_openai", {"choices": []}),
        ("read_openai_responses", {"id": "resp_1"}),
        ("read_anthropic", {"type": "message"}),
        ("read_anthropic", {"content": [1]}),
    ],
)
def test_a_payload_of_the_wrong_shape_is_an_error(
    fc: FunctionCalling, reader: str, value: Any
) -> None:
    with pytest.raises(AdapterError):
        getattr(fc, reader)(value)


def test_read_calls_go_straight_into_normalize(spec: Spec, fc: FunctionCalling) -> None:
    for item in fc.read_openai_responses(payload("openai_responses_function_calls.json")):
        assert isinstance(item, ToolCall)
        tool = spec.tools[item.tool_id]
        pending = freeze(tool, Validator(tool.input), item.tool_call_id, item.args)
        assert isinstance(pending, PendingCall)
        assert pending.tool_id == "production.deploy"
        assert pending.args["canary_percent"] == 5
        assert pending.args["max_error_rate"] == 0.01  # defaults applied by normalize


def test_the_module_example_runs() -> None:
    import doctest

    from harnessc.runtime.integrations import adapters

    assert doctest.testmod(adapters).failed == 0


def test_a_strict_mode_call_with_nulls_normalizes_as_one_leaving_them_out(
    spec: Spec, fc: FunctionCalling
) -> None:
    # in strict mode every field is required: the model sends null for the ones it leaves out
    strict = {t["name"]: t for t in fc.openai_responses(strict=True)}["production_deploy"]
    assert strict["strict"] is True
    assert strict["parameters"]["required"] == list(strict["parameters"]["properties"])
    sent = {"change_id": "chg-9", "environment": "staging", "canary_percent": None}
    sent |= {"max_error_rate": None, "bake_time": None}
    response = {
        "output": [
            {"type": "function_call", "call_id": "call_s1", "name": "production_deploy",
             "arguments": json.dumps(sent)},
        ]
    }  # fmt: skip
    (item,) = fc.read_openai_responses(response)
    assert isinstance(item, ToolCall)
    tool = spec.tools[item.tool_id]
    validator = Validator(tool.input)
    with_nulls = freeze(tool, validator, item.tool_call_id, item.args)
    left_out = freeze(tool, validator, "call_s2", {"change_id": "chg-9", "environment": "staging"})
    assert isinstance(with_nulls, PendingCall) and isinstance(left_out, PendingCall)
    assert with_nulls.args == left_out.args
    assert with_nulls.args["canary_percent"] == 10  # the default, as if it were left out
