"""Tool exports checked against what each provider documents: OpenAI strict mode (Chat
Completions and Responses), OpenAI's plain function tools and MCP's `tools/list`, over every
tool of both examples and over drawn schemas.

The checkers below are written from the providers' documents, independently of
runtime/integrations/exports.py: a rule the export gets wrong fails here rather than at the
provider.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from harnessc.compiler.pipeline import check
from harnessc.runtime.integrations import exports
from harnessc.runtime.integrations.adapters import FunctionCalling
from harnessc.runtime.integrations.exports import (
    mcp_annotations,
    mcp_tool,
    openai_responses_tool,
    openai_tool,
    strict_parameters,
)
from harnessc.runtime.judge.normalize import Validator
from harnessc.runtime.model import URL_PATTERN, Field, Schema, Spec, Tool, Type
from harnessc.runtime.model.semantics import surface_tools
from hypothesis import given, settings
from hypothesis import strategies as st

from .budget import examples
from .conftest import ROOT

SPECS = ("examples/remediation/remediation.harness", "examples/workspace-agent/workspace.harness")


@functools.cache
def _model(path: str) -> Spec:
    result = check([ROOT / path])
    assert result.ok and result.model is not None
    return result.model


@pytest.fixture(scope="module", params=SPECS, ids=["remediation", "workspace-agent"])
def spec(request: pytest.FixtureRequest) -> Spec:
    return _model(request.param)


@pytest.fixture(scope="module")
def remediation() -> Spec:
    return _model(SPECS[0])


# ---------------------------------------------------------------------------------------------
# OpenAI's documented rules
#
# OpenAI, "Structured Outputs", section "Supported schemas" (strict function calling, `"strict":
# true`, takes the same subset):
# - supported types: string, number, boolean, integer, object, array, enum, anyOf; a field that
#   may be left out is emulated as a union with null;
# - supported properties: strings `pattern`, `format` (date-time, time, date, duration, email,
#   hostname, ipv4, ipv6, uuid); numbers `multipleOf`, `maximum`, `exclusiveMaximum`,
#   `minimum`, `exclusiveMinimum`; arrays `minItems`, `maxItems`;
# - the root must be an object, not `anyOf`;
# - all fields must be required;
# - `additionalProperties: false` must always be set in objects;
# - up to 5,000 object properties in all, up to 10 levels of nesting;
# - up to 120,000 characters of property names, definition names, enum values and const values;
# - up to 1,000 enum values in all; a string enum of over 250 values has at most 15,000
#   characters of values;
# - not supported: allOf, not, dependentRequired, dependentSchemas, if, then, else.
# A `pattern` with a lookaround is refused by the API ("Invalid JSON schema: regex lookaround is
# not supported"), and a back-reference is not a regular language (constrained decoding cannot
# follow it).
#
# A function's name: "a-z, A-Z, 0-9, or contain underscores and dashes, with a maximum length
# of 64" (Chat Completions `function.name`, Responses `name`).

OPENAI_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
OPENAI_TYPES = {"string", "number", "boolean", "integer", "object", "array", "null"}
OPENAI_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6"}
OPENAI_FORMATS.add("uuid")
ANY_TYPE = {"type", "description", "title", "enum", "const", "anyOf"}
BY_TYPE = {
    "string": {"pattern", "format"},
    "number": {"multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum"},
    "integer": {"multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum"},
    "array": {"items", "minItems", "maxItems"},
    "object": {"properties", "required", "additionalProperties"},
    "null": set(),
    "boolean": set(),
}


def openai_strict_problems(schema: Mapping[str, Any]) -> list[str]:
    """Every way `schema` breaks OpenAI's strict-mode rules (empty: it is accepted)."""
    problems: list[str] = []
    totals = {"properties": 0, "enum": 0, "chars": 0}
    if schema.get("type") != "object" or "anyOf" in schema:
        problems.append("$: the root must be an object, not anyOf")

    def walk(node: Mapping[str, Any], path: str, depth: int) -> None:
        if "anyOf" in node:
            for i, branch in enumerate(node["anyOf"]):
                walk(branch, f"{path}|{i}", depth)
            extra = set(node) - {"anyOf", "description", "title"}
            if extra:
                problems.append(f"{path}: beside anyOf: {sorted(extra)}")
            return
        kinds = node.get("type")
        kinds = kinds if isinstance(kinds, list) else [kinds]
        if not kinds or any(k not in OPENAI_TYPES for k in kinds):
            problems.append(f"{path}: type {kinds}")
            return
        if kinds == ["null"] and path != "$" and "|" not in path:
            problems.append(f"{path}: null alone")
        allowed = set(ANY_TYPE).union(*(BY_TYPE[k] for k in kinds))
        for key in sorted(set(node) - allowed):
            problems.append(f"{path}: `{key}` is not supported for {kinds}")
        if "format" in node and node["format"] not in OPENAI_FORMATS:
            problems.append(f"{path}: format {node['format']}")
        if "pattern" in node:
            try:
                re.compile(node["pattern"])
            except re.error:
                problems.append(f"{path}: pattern does not compile")
            if re.search(r"\(\?<?[=!]", node["pattern"]) or re.search(r"\\[1-9]", node["pattern"]):
                problems.append(f"{path}: lookaround or back-reference")
        if "enum" in node:
            totals["enum"] += len(node["enum"])
            texts = [v for v in node["enum"] if isinstance(v, str)]
            totals["chars"] += sum(map(len, texts))
            if len(texts) > 250 and sum(map(len, texts)) > 15_000:
                problems.append(f"{path}: a large enum over 15,000 characters")
            for value in node["enum"]:
                if value is None and "null" not in kinds:
                    problems.append(f"{path}: null in the enum of a non-null type")
        if "object" in kinds:
            if depth + 1 > 10:
                problems.append(f"{path}: more than 10 levels of nesting")
            if node.get("additionalProperties") is not False:
                problems.append(f"{path}: additionalProperties must be false")
            properties = node.get("properties", {})
            if sorted(node.get("required", [])) != sorted(properties):
                problems.append(f"{path}: every property must be required")
            totals["properties"] += len(properties)
            totals["chars"] += sum(map(len, properties))
            for name, sub in properties.items():
                walk(sub, f"{path}.{name}", depth + 1)
        if "array" in kinds and "items" in node:
            walk(node["items"], f"{path}[]", depth)

    walk(schema, "$", 0)
    if totals["properties"] > 5_000:
        problems.append("more than 5,000 properties")
    if totals["enum"] > 1_000:
        problems.append("more than 1,000 enum values")
    if totals["chars"] > 120_000:
        problems.append("more than 120,000 characters of names and enum values")
    return problems


def check_chat_tool(tool: Mapping[str, Any], strict: bool) -> None:
    """Chat Completions: `{"type": "function", "function": {"name", "description"?,
    "parameters", "strict"?}}`; the parameters obey strict mode when `function.strict`."""
    assert set(tool) == {"type", "function"} and tool["type"] == "function"
    function = tool["function"]
    assert set(function) <= {"name", "description", "parameters", "strict"}
    assert OPENAI_NAME.fullmatch(function["name"])
    assert function["parameters"]["type"] == "object"
    assert ("strict" in function) == strict
    if function.get("strict"):
        assert openai_strict_problems(function["parameters"]) == []


def check_responses_tool(tool: Mapping[str, Any]) -> None:
    """Responses API: flat `{"type": "function", "name", "description"?, "parameters",
    "strict"}`; `strict` defaults to true there, so it is always written."""
    assert set(tool) <= {"type", "name", "description", "parameters", "strict"}
    assert tool["type"] == "function" and OPENAI_NAME.fullmatch(tool["name"])
    assert isinstance(tool["strict"], bool)
    if tool["strict"]:
        assert openai_strict_problems(tool["parameters"]) == []


# ---------------------------------------------------------------------------------------------
# MCP's documented shape
#
# MCP specification 2025-11-25, schema.json, `Tool`: `name` (string, required), `title`,
# `description`, `inputSchema` (required: `type: "object"`, `properties`, `required`),
# `outputSchema` (the same, for `structuredContent`), `annotations` (`ToolAnnotations`: `title`
# and the booleans `readOnlyHint`, `destructiveHint`, `idempotentHint`, `openWorldHint`),
# `icons`, `execution`, `_meta`. Tool names SHOULD be 1 to 128 characters of A-Z, a-z, 0-9,
# `_`, `-` and `.` ("Tool names").

MCP_TOOL_KEYS = {"name", "title", "description", "inputSchema", "outputSchema", "annotations"}
MCP_TOOL_KEYS |= {"icons", "execution", "_meta"}
MCP_HINTS = {"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}
MCP_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")


def check_mcp_tool(tool: Mapping[str, Any]) -> None:
    assert set(tool) <= MCP_TOOL_KEYS
    assert isinstance(tool["name"], str) and MCP_NAME.fullmatch(tool["name"])
    for key in ("title", "description"):
        assert isinstance(tool.get(key, ""), str)
    for key in ("inputSchema", "outputSchema"):
        if key in tool or key == "inputSchema":
            schema = tool[key]
            assert schema["type"] == "object"
            assert isinstance(schema.get("properties", {}), dict)
            assert all(isinstance(n, str) for n in schema.get("required", []))
    annotations = tool.get("annotations", {})
    assert set(annotations) <= MCP_HINTS | {"title"}
    assert all(isinstance(annotations[k], bool) for k in MCP_HINTS & set(annotations))


# ---------------------------------------------------------------------------------------------
# Every tool of both examples


def test_every_example_tool_exports_as_openai_strict_or_says_why(spec: Spec) -> None:
    tools = list(spec.tools.values())
    strict = 0
    for tool, chat, flat in zip(
        tools,
        FunctionCalling(tools).openai(strict=True),
        FunctionCalling(tools).openai_responses(strict=True),
        strict=True,
    ):
        check_chat_tool(chat, strict=True)
        check_responses_tool(flat)
        rewritten = strict_parameters(tool)
        assert chat["function"]["strict"] is flat["strict"] is rewritten.strict
        assert chat["function"]["parameters"] == flat["parameters"] == rewritten.parameters
        if rewritten.strict:
            strict += 1
            assert rewritten.notes == ()
        else:  # what is sent is the plain schema, and each note names a field and a reason
            assert rewritten.parameters == exports.input_schema(tool)
            assert rewritten.notes and all(n.startswith("`args") for n in rewritten.notes)
            assert openai_strict_problems(exports.input_schema(tool)) != []
    assert strict >= len(tools) // 2  # most tools of the examples can be strict


def test_plain_openai_exports_keep_their_shape(spec: Spec) -> None:
    fc = FunctionCalling(spec.tools.values())
    for chat in fc.openai():
        check_chat_tool(chat, strict=False)
    for flat in fc.openai_responses():
        check_responses_tool(flat)
        assert flat["strict"] is False


def test_every_example_tool_exports_as_an_mcp_tool(spec: Spec) -> None:
    listed = FunctionCalling(spec.tools.values()).mcp()
    assert set(listed) == {"tools"}
    for tool, item in zip(spec.tools.values(), listed["tools"], strict=True):
        check_mcp_tool(item)
        assert item["title"] == tool.id
        assert ("outputSchema" in item) == (tool.output is not None)
    json.dumps(listed)


def test_mcp_exports_validate_against_the_sdk_models(spec: Spec) -> None:
    types = pytest.importorskip("mcp.types", reason="the MCP SDK is the `mcp` extra")
    wire = pytest.importorskip("mcp_types._v2025_11_25", reason="the SDK's 2025-11-25 models")
    listed = FunctionCalling(spec.tools.values()).mcp()
    wire.ListToolsResult.model_validate(listed)  # inputSchema/outputSchema: type "object"
    for item in listed["tools"]:
        parsed = types.Tool.model_validate(item)
        # nothing the SDK does not know is dropped on the way in
        assert parsed.model_dump(by_alias=True, exclude_none=True, mode="json") == item


def test_exported_schemas_are_json_schema(spec: Spec) -> None:
    jsonschema = pytest.importorskip("jsonschema", reason="comes with the `mcp` extra")
    for tool in spec.tools.values():
        jsonschema.Draft202012Validator.check_schema(strict_parameters(tool).parameters)
        for key in ("inputSchema", "outputSchema"):
            if key in (item := mcp_tool(tool)):
                jsonschema.Draft202012Validator.check_schema(item[key])


def test_the_deploy_tool_is_rewritten_as_strict_mode_requires(remediation: Spec) -> None:
    tool = remediation.tools["production.deploy"]
    params = openai_tool(tool, strict=True)["function"]["parameters"]
    assert params["required"] == list(params["properties"])
    # required in the spec: unchanged; defaulted: nullable, the default said in words
    assert params["properties"]["environment"] == {
        "type": "string",
        "enum": ["staging", "production"],
    }
    assert params["properties"]["canary_percent"] == {
        "type": ["integer", "null"],
        "minimum": 1,
        "maximum": 100,
        "description": "null for the default, 10",
    }
    # null reaches normalize as absent: the default applies
    args = {"change_id": "chg-1", "environment": "staging", "canary_percent": None}
    args |= {"max_error_rate": None, "bake_time": None}
    assert Validator(tool.input).validate(args)["canary_percent"] == 10


def test_a_tool_that_cannot_be_strict_says_which_field_and_why(remediation: Spec) -> None:
    tools = remediation.tools
    fc = FunctionCalling([tools["ci.run_pipeline"], tools["finding.accept_risk"]])
    assert fc.strict_notes() == {
        "ci.run_pipeline": (
            "`args.variables`: an open map (keys the schema does not name): strict mode needs "
            "them named",
        ),
        "finding.accept_risk": (
            "`args.justification`: `minLength` 40: strict mode has no length bounds on strings",
        ),
    }
    assert [t["strict"] for t in fc.openai_responses(strict=True)] == [False, False]


# ---------------------------------------------------------------------------------------------
# Drawn schemas


def _scalar(name: str) -> st.SearchStrategy[Type]:
    return st.builds(Type, name=st.just(name), optional=st.booleans())


@functools.cache  # one strategy per depth: building strategies anew on each draw costs more
def _types(depth: int) -> st.SearchStrategy[Type]:
    scalars = st.one_of(
        *(_scalar(n) for n in ("string", "path", "url", "duration", "int", "float", "bool")),
        st.builds(
            Type,
            name=st.just("enum"),
            values=st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, unique=True).map(
                tuple
            ),
            optional=st.booleans(),
        ),
    )
    if depth == 0:
        return scalars
    inner = _types(depth - 1)
    return st.one_of(
        scalars,
        st.builds(Type, name=st.sampled_from(["list", "map"]), item=inner, optional=st.booleans()),
        st.builds(Type, name=st.just("object"), fields=_fields(depth - 1), optional=st.booleans()),
    )


PATTERNS = [None, "^[a-z]+$", "[0-9]", "(?!admin)^[a-z]+$", r"^(a)\1$", "^x(?<=x)"]


@st.composite
def _field(draw: st.DrawFn, name: str, depth: int) -> Field:
    kind = draw(_types(depth))
    # as the compiler allows them (compiler/lower/schemas.py): bounds on numbers, texts other
    # than durations, lists and maps; patterns on texts other than durations
    bounded = kind.name not in ("bool", "enum", "object", "duration")
    bounds = draw(st.sampled_from([(None, None), (1, None), (None, 5), (0, 9)])) if bounded else ()
    text = kind.name in ("string", "path", "url")
    default = None
    if kind.name in ("int", "float") and draw(st.booleans()):
        default = 3
    elif kind.name == "bool" and draw(st.booleans()):
        default = True
    elif kind.name == "enum" and draw(st.booleans()):
        default = kind.values[0]
    return Field(
        name=name,
        type=kind,
        min=bounds[0] if bounds else None,
        max=bounds[1] if bounds else None,
        pattern=draw(st.sampled_from(PATTERNS)) if text else None,
        default=default,
        secret=kind.name == "string" and draw(st.booleans()),
    )


@functools.cache
def _fields(depth: int) -> st.SearchStrategy[tuple[Field, ...]]:
    names = st.lists(st.sampled_from(["id", "name", "env", "when", "n", "tags", "x"]), unique=True)
    return names.flatmap(lambda ns: st.tuples(*(_field(n, depth) for n in ns)))


schemas = _fields(2).map(lambda fs: Schema(fields=fs))


def _drawn_tool(schema: Schema) -> Tool:
    return Tool(id="drawn.tool", wire_name="drawn_tool", summary="A drawn tool.", input=schema)


def _nulls(fields: tuple[Field, ...]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Arguments leaving out every field that may be left out, twice: as strict mode sends
    them (null) and as they are without strict mode (absent); objects are filled alike."""
    sent: dict[str, Any] = {}
    absent: dict[str, Any] = {}
    for f in fields:
        if not f.required:
            sent[f.name] = None
        elif f.type.name == "object":
            inner = next(_nulls(f.type.fields))
            sent[f.name], absent[f.name] = inner
    yield sent, absent


def _nullable_in(node: Mapping[str, Any]) -> bool:
    kinds = node.get("type")
    return (isinstance(kinds, list) and "null" in kinds) or {"type": "null"} in node.get(
        "anyOf", []
    )


def _same_nullability(fields: tuple[Field, ...], params: Mapping[str, Any]) -> None:
    for f in fields:
        node = params["properties"][f.name]
        assert _nullable_in(node) == (not f.required), f.name
        if f.type.name == "object":
            _same_nullability(f.type.fields, node["anyOf"][0] if "anyOf" in node else node)


@settings(max_examples=examples(200))
@given(schemas)
def test_a_drawn_schema_is_strict_and_accepted_or_plain_and_explained(schema: Schema) -> None:
    tool = _drawn_tool(schema)
    chat = openai_tool(tool, strict=True)
    flat = openai_responses_tool(tool, strict=True)
    check_chat_tool(chat, strict=True)
    check_responses_tool(flat)
    rewritten = strict_parameters(tool)
    if rewritten.strict:
        assert openai_strict_problems(rewritten.parameters) == []
        _same_nullability(schema.fields, rewritten.parameters)
        # what strict mode sends for a field left out (null) normalizes as leaving it out
        sent, absent = next(_nulls(schema.fields))
        validator = Validator(schema)
        assert validator.run(sent) == validator.run(absent)
    else:
        assert rewritten.notes
        assert rewritten.parameters == exports.input_schema(tool)
        assert openai_strict_problems(rewritten.parameters) != []


@settings(max_examples=examples(50))
@given(schemas)
def test_a_drawn_schema_exports_as_an_mcp_tool(schema: Schema) -> None:
    item = mcp_tool(_drawn_tool(schema))
    check_mcp_tool(item)
    assert item["inputSchema"] == exports.input_schema(_drawn_tool(schema))


# ---------------------------------------------------------------------------------------------
# What strict mode cannot take, one case each


def _one(name: str, kind: Type, **constraints: Any) -> Tool:
    return _drawn_tool(Schema(fields=(Field(name=name, type=kind, **constraints),)))


def _wide(names: Iterable[str]) -> Tool:
    return _drawn_tool(Schema(fields=tuple(Field(name=n, type=Type(name="int")) for n in names)))


def _nested(levels: int) -> Type:
    kind = Type(name="string")
    for _ in range(levels):
        kind = Type(name="object", fields=(Field(name="inner", type=kind),))
    return kind


@pytest.mark.parametrize(
    ("tool", "note"),
    [
        (_one("title", Type(name="string"), max=80), "`args.title`: `maxLength` 80: strict mode"),
        (_one("env", Type(name="map", item=Type(name="string"))), "`args.env`: an open map"),
        (
            _one("ref", Type(name="string"), pattern="^(?!main$)"),
            "`args.ref`: the pattern `^(?!main$)` uses a lookaround",
        ),
        (
            _one("pair", Type(name="string"), pattern=r"^(.)\1$"),
            r"`args.pair`: the pattern `^(.)\1$` uses a back-reference",
        ),
        (
            _one("link", Type(name="url"), pattern="^https:"),
            "`args.link`: a URL with a pattern of its own",
        ),
        # the root is the first level: 10 nested objects below it make 11
        (_one("deep", _nested(10)), "more than 10 levels of nested objects"),
        (_wide(f"f{i}" for i in range(5001)), "5,001 properties: strict mode takes 5,000"),
        (
            _one("pick", Type(name="enum", values=tuple(f"v{i}" for i in range(1001)))),
            "1,001 enum values: strict mode takes 1,000",
        ),
        (
            _one("pick", Type(name="enum", values=tuple(f"{i:060d}" for i in range(251)))),
            "251 enum values of 15,060 characters",
        ),
        (
            _wide(f"{i:031d}" for i in range(3900)),
            "120,900 characters of property names and enum values",
        ),
    ],
    ids=[
        *("length", "map", "lookaround", "backref", "url-pattern", "depth", "properties"),
        *("enum-values", "large-enum", "characters"),
    ],
)
def test_what_strict_mode_cannot_take_is_sent_plain_with_a_note(tool: Tool, note: str) -> None:
    rewritten = strict_parameters(tool)
    assert not rewritten.strict
    assert any(note in n for n in rewritten.notes), rewritten.notes
    assert openai_tool(tool, strict=True)["function"]["strict"] is False
    assert openai_strict_problems(exports.input_schema(tool)) != []


def test_at_the_limits_a_tool_is_still_strict() -> None:
    for tool in (
        _one("deep", _nested(9)),
        _one("pick", Type(name="enum", values=tuple(f"v{i}" for i in range(1000)))),
        _one("pick", Type(name="enum", values=tuple(f"{i:059d}" for i in range(251)))),
    ):
        rewritten = strict_parameters(tool)
        assert rewritten.strict, rewritten.notes
        assert openai_strict_problems(rewritten.parameters) == []


def test_a_url_is_strict_with_the_pattern_normalize_checks() -> None:
    tool = _one("link", Type(name="url", optional=True))
    link = strict_parameters(tool).parameters["properties"]["link"]
    assert link == {"type": ["string", "null"], "pattern": URL_PATTERN}
    validator = Validator(tool.input)
    for text in ("https://example.com/a", "mailto:a@b", "no scheme", "http://a b"):
        assert (re.search(URL_PATTERN, text) is not None) == (not validator.errors({"link": text}))


def test_optional_objects_lists_and_enums_are_unions_with_null() -> None:
    schema = Schema(
        fields=(
            Field(name="mode", type=Type(name="enum", values=("a", "b"), optional=True)),
            Field(name="tags", type=Type(name="list", item=Type(name="string"), optional=True)),
            Field(name="who", type=Type(name="object", optional=True, fields=(
                Field(name="id", type=Type(name="string")),
                Field(name="note", type=Type(name="string"), secret=True, default="-"),
            ))),
        )
    )  # fmt: skip
    params = strict_parameters(_drawn_tool(schema)).parameters
    assert params["properties"]["mode"] == {"type": ["string", "null"], "enum": ["a", "b", None]}
    assert params["properties"]["tags"] == {
        "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]
    }
    who = params["properties"]["who"]["anyOf"][0]
    assert who["required"] == ["id", "note"] and who["additionalProperties"] is False
    assert who["properties"]["note"] == {
        "type": ["string", "null"],
        "description": 'null for the default, "-"; a secret: write-only',
    }
    assert openai_strict_problems(params) == []


# ---------------------------------------------------------------------------------------------
# MCP annotations


@pytest.mark.parametrize(
    ("effects", "risk", "hints"),
    [
        (("read",), "low", {"readOnlyHint": True, "openWorldHint": False}),
        (("preview", "read"), "low", {"readOnlyHint": True, "openWorldHint": False}),
        (
            ("reversible", "write"),
            "medium",
            {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False,
             "openWorldHint": False},
        ),
        (
            ("idempotent", "reversible", "write"),
            "high",  # reversible, but high risk: a client should treat it as destructive
            {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True,
             "openWorldHint": False},
        ),
        (
            ("external",),
            "high",
            {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False,
             "openWorldHint": True},
        ),
    ],
)  # fmt: skip
def test_mcp_hints_follow_effects_and_risk(
    effects: tuple[Any, ...], risk: Any, hints: dict[str, bool]
) -> None:
    tool = Tool(id="t.x", wire_name="t_x", effects=effects, risk=risk)
    assert mcp_annotations(tool) == hints
    assert mcp_tool(tool)["annotations"] == hints


def test_an_mcp_tool_carries_its_declared_output(spec: Spec) -> None:
    tool = next(t for t in spec.tools.values() if t.output is not None)
    item = mcp_tool(tool)
    assert item["outputSchema"] == exports.output_schema(tool)
    assert "$schema" not in item["outputSchema"]


# ---------------------------------------------------------------------------------------------
# The command line


@pytest.fixture(scope="module")
def model_json(tmp_path_factory: pytest.TempPathFactory, remediation: Spec) -> Path:
    """What `harnessc build -o OUT` writes, as the command reads it: OUT/PACKAGE/model.json."""
    out = tmp_path_factory.mktemp("build")
    (out / "remediation").mkdir()
    (out / "remediation" / "model.json").write_text(remediation.to_json(), encoding="utf-8")
    return out


def test_the_command_prints_a_surface_in_strict_mode_and_says_what_is_not_strict(
    model_json: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = Spec.from_json((model_json / "remediation" / "model.json").read_bytes())
    assert exports.main([str(model_json), "--surface", "main_planner", "--strict"]) == 0
    out, err = capsys.readouterr()
    tools = json.loads(out)
    surface = spec.surfaces["remediation.main_planner"]
    assert [t["function"]["name"] for t in tools] == [
        spec.tools[i].wire_name for i in surface_tools(spec, surface)
    ]
    for line in err.splitlines():
        assert line.startswith("not strict: ")
    not_strict = {t["function"]["name"] for t in tools if not t["function"]["strict"]}
    assert {spec.tools[line.split(": ")[1]].wire_name for line in err.splitlines()} == not_strict


def test_the_command_prints_an_mcp_tools_list_result(
    model_json: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = model_json / "remediation" / "model.json"
    assert exports.main([str(model), "--format", "mcp", "--tool", "change.get"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [t["title"] for t in listed["tools"]] == ["change.get"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--surface", "nowhere"], "error: no surface `nowhere` in the spec (surfaces: "),
        (["--tool", "no.such"], "error: no tool `no.such` in the spec"),
    ],
)
def test_the_command_refuses_what_the_spec_does_not_hold(
    model_json: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert exports.main([str(model_json), *argv]) == 2
    assert capsys.readouterr().err.startswith(message)


def test_the_command_refuses_a_folder_without_a_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert exports.main([str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_the_module_example_runs() -> None:
    import doctest

    assert doctest.testmod(exports).failed == 0
