"""Tools as the definitions model APIs and MCP clients take: OpenAI (Chat Completions and the
Responses API, plain or in strict mode), Anthropic Messages and MCP's `tools/list`.

Every export names a tool by its wire name (`Tool.wire_name`, `[A-Za-z0-9_-]{1,64}`), describes
it with `tool_description` and gives the JSON Schema of its input (`input_schema`). The way back
from a model's tool calls is runtime/integrations/adapters.py (`FunctionCalling`).

OpenAI strict mode (`"strict": true`) makes the model's arguments match the schema exactly, but
takes only a subset of JSON Schema. `strict_parameters(tool)` rewrites a tool's input as that
subset requires, and keeps the tool strict only where the rewrite accepts exactly what the tool
accepts:

- every property is required; a field that may be left out (optional, or with a default) is a
  union with null, and null reaches normalize as "absent" (so the default applies);
- every object has `additionalProperties: false`;
- a `url` field is a string with the pattern normalize checks URLs with (strict mode has no
  `format: uri`); `default` and `writeOnly` (a secret) move into the field's description;
- what strict mode cannot express makes the tool non-strict (its plain schema, `"strict":
  false`), with a note per reason: a string's length bounds, an open map (`map<…>`), a pattern
  with a lookaround or a back-reference, more than 10 levels of nested objects, more than 5,000
  properties, 1,000 enum values or 120,000 characters of names and enum values.

MCP's `tools/list` shape (`mcp_tool`) carries `name`, `title` (the tool id), `description`,
`inputSchema`, `outputSchema` when the tool declares an output, and `annotations`: the spec's
effects and risk as MCP's hints (`readOnlyHint`, `destructiveHint`, `idempotentHint`,
`openWorldHint`). They are hints to a client, never what harnessc decides by.

>>> from harnessc.runtime.model import Field, Schema, Tool, Type
>>> tool = Tool(id="change.create", wire_name="change_create", summary="Create a change.",
...     effects=("write",), input=Schema(fields=(
...         Field(name="service", type=Type(name="string")),
...         Field(name="draft", type=Type(name="bool"), default=True))))
>>> strict = openai_tool(tool, strict=True)["function"]
>>> strict["strict"], strict["parameters"]["required"]
(True, ['service', 'draft'])
>>> strict["parameters"]["properties"]["draft"]["type"]
['boolean', 'null']
>>> mcp_tool(tool)["annotations"]
{'readOnlyHint': False, 'destructiveHint': True, 'idempotentHint': False, 'openWorldHint': False}

From the command line, over a built package (or its `model.json`):

    python -m harnessc.runtime.integrations.exports build/remediation --format openai --strict
    python -m harnessc.runtime.integrations.exports build/remediation --format mcp \
        --surface main_planner
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ..model.ir import URL_PATTERN, WIRE_NAME, Schema, Spec, Tool

__all__ = [
    "AdapterError",
    "StrictParameters",
    "anthropic_tool",
    "input_schema",
    "mcp_annotations",
    "mcp_tool",
    "openai_responses_tool",
    "openai_tool",
    "output_schema",
    "strict_parameters",
    "strict_schema",
    "tool_description",
    "wire_name",
]


class AdapterError(ValueError):
    """The tools cannot be offered (a bad or duplicate wire name), or a payload is not a
    provider response of the expected shape."""


# ---------------------------------------------------------------------------------------------
# What every export shares


def tool_description(tool: Tool) -> str:
    """What a model reads about a tool: its summary, then when to use it and what it is not
    for, when the spec says so."""
    parts = [tool.summary or ""]
    if tool.use_when:
        parts.append(f"Use when: {tool.use_when}")
    if tool.not_for:
        parts.append(f"Not for: {tool.not_for}")
    return "\n".join(p for p in parts if p)


def _provider_schema(schema: Schema) -> dict[str, Any]:
    out = schema.to_json_schema()
    out.pop("$schema", None)
    return out


def input_schema(tool: Tool) -> dict[str, Any]:
    """The JSON Schema of a tool's input as providers take it (an object schema, without the
    `$schema` dialect key, which some providers refuse)."""
    return _provider_schema(tool.input)


def output_schema(tool: Tool) -> dict[str, Any] | None:
    """The JSON Schema of a tool's declared output, or None when it declares none."""
    return None if tool.output is None else _provider_schema(tool.output)


def wire_name(tool: Tool) -> str:
    """The name a model calls the tool by; `AdapterError` when it is not `[A-Za-z0-9_-]{1,64}`."""
    if not WIRE_NAME.fullmatch(tool.wire_name):
        raise AdapterError(
            f"the wire name `{tool.wire_name}` of `{tool.id}` is not `[A-Za-z0-9_-]{{1,64}}`"
        )
    return tool.wire_name


def _with_description(out: dict[str, Any], tool: Tool) -> dict[str, Any]:
    description = tool_description(tool)
    if description:
        out["description"] = description
    return out


# ---------------------------------------------------------------------------------------------
# OpenAI strict mode
#
# The rules are OpenAI's "Supported schemas" for Structured Outputs, which strict function
# calling shares; tests/test_exports.py checks every export against them.

_KEPT = frozenset(
    {
        "type", "description", "enum", "const", "anyOf",
        "pattern", "format",  # strings
        "multipleOf", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",  # numbers
        "minItems", "maxItems",  # arrays
    }
)  # fmt: skip
_STRUCTURE = frozenset({"properties", "required", "additionalProperties", "items"})
_ANNOTATIONS = frozenset({"$schema", "$comment", "title", "examples", "deprecated", "readOnly"})
_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_WHY = {
    "minLength": "strict mode has no length bounds on strings",
    "maxLength": "strict mode has no length bounds on strings",
    "minProperties": "strict mode has no bounds on an object's size",
    "maxProperties": "strict mode has no bounds on an object's size",
}
MAX_DEPTH = 10
"""Levels of nested objects strict mode takes, the root object being the first."""
MAX_PROPERTIES = 5_000
MAX_ENUM_VALUES = 1_000
MAX_NAME_CHARS = 120_000
"""Characters of all property names, enum values and const values together."""
LARGE_ENUM = 250
MAX_LARGE_ENUM_CHARS = 15_000
"""Characters of one string enum's values, when it has more than `LARGE_ENUM` of them."""


class StrictParameters(NamedTuple):
    """A tool's parameters for OpenAI: strict-mode ones when `strict`, else the plain schema
    with `notes`, one per reason the tool cannot be strict (`` `args.title`: … ``)."""

    parameters: dict[str, Any]
    strict: bool
    notes: tuple[str, ...]


class _Walk:
    def __init__(self) -> None:
        self.notes: list[str] = []
        self.properties = 0
        self.enum_values = 0
        self.name_chars = 0
        self.depth = 0

    def note(self, path: str, why: str) -> None:
        self.notes.append(f"`{path}`: {why}")


def _regex_problem(pattern: str) -> str | None:
    """Why strict mode rejects a pattern: a lookaround (the API refuses it) or a back-reference
    (not a regular language: constrained decoding cannot follow it)."""
    parser = importlib.import_module("re._parser")  # Python's own parse of the pattern
    try:
        parsed = parser.parse(pattern)
    except re.error as err:  # the compiler checks patterns; a model built by hand may not be
        return f"the pattern `{pattern}` does not compile: {err}"
    found: set[str] = set()

    def walk(items: Iterable[Any]) -> None:
        for op, av in items:
            name = str(op)
            if name in ("ASSERT", "ASSERT_NOT"):
                found.add("a lookaround")
            elif name in ("GROUPREF", "GROUPREF_EXISTS"):
                found.add("a back-reference")
            stack = [av]
            while stack:
                part = stack.pop()
                if isinstance(part, parser.SubPattern):
                    walk(part)
                elif isinstance(part, tuple | list):
                    stack.extend(part)

    walk(parsed)
    if not found:
        return None
    return f"the pattern `{pattern}` uses {' and '.join(sorted(found))}, which strict mode rejects"


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    """`node` or null: a scalar's type becomes `[type, "null"]` (an enum also lists null);
    an object or array becomes `anyOf: [node, {"type": "null"}]`."""
    kind = node.get("type")
    if kind in ("string", "integer", "number", "boolean"):
        out = dict(node, type=[kind, "null"])
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        return out
    description = node.pop("description", None)
    out = {"anyOf": [node, {"type": "null"}]}
    if description is not None:
        out["description"] = description
    return out


def _strict(schema: Mapping[str, Any], path: str, nullable: bool, walk: _Walk) -> dict[str, Any]:
    out: dict[str, Any] = {}
    said: list[str] = []
    for key, value in schema.items():
        if key in _STRUCTURE or key in _ANNOTATIONS:
            continue
        if key == "format" and value == "uri":
            if "pattern" in schema:
                walk.note(path, "a URL with a pattern of its own: strict mode takes one pattern")
            else:  # what normalize checks a URL with: the same values pass
                out["pattern"] = URL_PATTERN
            continue
        if key == "format" and value not in _FORMATS:
            walk.note(path, f"the format `{value}` is not one strict mode supports")
        elif key == "pattern":
            problem = _regex_problem(value)
            if problem is not None:
                walk.note(path, problem)
            out[key] = value
        elif key == "default":
            said.append(f"null for the default, {json.dumps(value, ensure_ascii=False)}")
        elif key == "writeOnly":
            if value:
                said.append("a secret: write-only")
        elif key in _KEPT:
            out[key] = value
            if key == "enum":
                walk.enum_values += len(value)
                chars = sum(len(v) for v in value if isinstance(v, str))
                walk.name_chars += chars
                if len(value) > LARGE_ENUM and chars > MAX_LARGE_ENUM_CHARS:
                    walk.note(
                        path,
                        f"{len(value)} enum values of {chars:,} characters: strict mode takes "
                        f"{MAX_LARGE_ENUM_CHARS:,} characters in an enum of over {LARGE_ENUM}",
                    )
            elif key == "const" and isinstance(value, str):
                walk.name_chars += len(value)
        else:
            why = _WHY.get(key, "strict mode does not support it")
            walk.note(path, f"`{key}` {json.dumps(value)}: {why}")
    kind = schema.get("type")
    if kind == "object":
        _strict_object(schema, path, out, walk)
    elif kind == "array" and isinstance(schema.get("items"), Mapping):
        out["items"] = _strict(schema["items"], f"{path}[]", False, walk)
    if said:
        described = [out["description"], *said] if "description" in out else said
        out["description"] = "; ".join(described)
    return _nullable(out) if nullable else out


def _strict_object(schema: Mapping[str, Any], path: str, out: dict[str, Any], walk: _Walk) -> None:
    extra = schema.get("additionalProperties", True)
    if extra is not False:
        walk.note(path, "an open map (keys the schema does not name): strict mode needs them named")
        if isinstance(extra, Mapping):
            _strict(extra, f"{path}.*", False, walk)
    walk.depth += 1
    depth = walk.depth
    if depth == MAX_DEPTH + 1:
        walk.note(path, f"more than {MAX_DEPTH} levels of nested objects: strict mode's limit")
    properties: Mapping[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", ()))
    walk.properties += len(properties)
    walk.name_chars += sum(len(k) for k in properties)
    out["properties"] = {
        k: _strict(v, f"{path}.{k}", k not in required, walk) for k, v in properties.items()
    }
    out["required"] = list(properties)
    out["additionalProperties"] = False
    walk.depth -= 1


def strict_schema(schema: Mapping[str, Any], path: str = "args") -> StrictParameters:
    """Rewrite an object schema (as `input_schema` gives) for OpenAI strict mode, or say why
    it cannot be (`parameters` is then `schema` as given)."""
    walk = _Walk()
    if schema.get("type") != "object":
        walk.note(path, "strict mode needs an object at the root")
        return StrictParameters(dict(schema), False, tuple(walk.notes))
    rewritten = _strict(schema, path, False, walk)
    if walk.properties > MAX_PROPERTIES:
        walk.note(path, f"{walk.properties:,} properties: strict mode takes {MAX_PROPERTIES:,}")
    if walk.enum_values > MAX_ENUM_VALUES:
        walk.note(path, f"{walk.enum_values:,} enum values: strict mode takes {MAX_ENUM_VALUES:,}")
    if walk.name_chars > MAX_NAME_CHARS:
        walk.note(
            path,
            f"{walk.name_chars:,} characters of property names and enum values: strict mode "
            f"takes {MAX_NAME_CHARS:,}",
        )
    if walk.notes:
        return StrictParameters(dict(schema), False, tuple(walk.notes))
    return StrictParameters(rewritten, True, ())


def strict_parameters(tool: Tool) -> StrictParameters:
    """A tool's input for OpenAI strict mode, or its plain schema and why it cannot be strict."""
    return strict_schema(input_schema(tool))


# ---------------------------------------------------------------------------------------------
# Provider shapes


def _parameters(tool: Tool, strict: bool) -> tuple[dict[str, Any], bool]:
    if not strict:
        return input_schema(tool), False
    rewritten = strict_parameters(tool)
    return rewritten.parameters, rewritten.strict


def openai_tool(tool: Tool, strict: bool = False) -> dict[str, Any]:
    """A chat-completions tool definition: `{"type": "function", "function": {…}}`; with
    `strict`, `function.strict` is true where the tool's schema allows it (strict_parameters)."""
    function = _with_description({"name": wire_name(tool)}, tool)
    function["parameters"], is_strict = _parameters(tool, strict)
    if strict:
        function["strict"] = is_strict
    return {"type": "function", "function": function}


def openai_responses_tool(tool: Tool, strict: bool = False) -> dict[str, Any]:
    """A Responses-API function tool: flat, `strict` always written (the API's default is
    true); with `strict`, true where the tool's schema allows it (strict_parameters)."""
    out = _with_description({"type": "function", "name": wire_name(tool)}, tool)
    out["parameters"], out["strict"] = _parameters(tool, strict)
    return out


def anthropic_tool(tool: Tool) -> dict[str, Any]:
    """An Anthropic Messages tool definition: `{"name", "description", "input_schema"}`."""
    out = _with_description({"name": wire_name(tool)}, tool)
    out["input_schema"] = input_schema(tool)
    return out


def mcp_annotations(tool: Tool) -> dict[str, bool]:
    """MCP's behaviour hints from the tool's effects and risk: read-only when it neither
    writes nor acts outside; destructive unless its effects are reversible, and always at high
    or critical risk; idempotent and open-world as its effects say."""
    effects = set(tool.effects)
    out = {"readOnlyHint": not effects & {"write", "external"}}
    if not out["readOnlyHint"]:  # MCP reads the next two only for a tool that is not read-only
        out["destructiveHint"] = "reversible" not in effects or tool.risk in ("high", "critical")
        out["idempotentHint"] = "idempotent" in effects
    out["openWorldHint"] = "external" in effects
    return out


def mcp_tool(tool: Tool) -> dict[str, Any]:
    """A tool as an MCP server lists it (`tools/list`): name, title (the tool id),
    description, inputSchema, outputSchema when declared, and annotations (hints).

    MCP's structured content is an object: an output written as another type (`output
    list<…>`, a scalar, `any`, a union) is returned as content, and no outputSchema is listed."""
    out: dict[str, Any] = {"name": wire_name(tool), "title": tool.id}
    _with_description(out, tool)
    out["inputSchema"] = input_schema(tool)
    declared = output_schema(tool)
    if declared is not None and tool.output is not None and tool.output.shape is None:
        out["outputSchema"] = declared
    out["annotations"] = mcp_annotations(tool)
    return out


# ---------------------------------------------------------------------------------------------
# The command line: python -m harnessc.runtime.integrations.exports PACKAGE --format …

FORMATS = ("openai", "openai-responses", "anthropic", "mcp")


def export(tools: Sequence[Tool], form: str, strict: bool = False) -> Any:
    """The tools in one format: a list for `tools=`, or for `mcp` a `tools/list` result."""
    if form == "openai":
        return [openai_tool(t, strict) for t in tools]
    if form == "openai-responses":
        return [openai_responses_tool(t, strict) for t in tools]
    if form == "anthropic":
        return [anthropic_tool(t) for t in tools]
    if form == "mcp":
        return {"tools": [mcp_tool(t) for t in tools]}
    raise ValueError(f"unknown format `{form}`: one of {', '.join(FORMATS)}")


def _load(where: Path) -> Spec:
    """The model of a built package: its `model.json`, the package folder, or the folder
    `harnessc build -o` wrote (which holds one package)."""
    path = where
    if where.is_dir():
        found = [where / "model.json"] if (where / "model.json").is_file() else []
        found = found or sorted(where.glob("*/model.json"))
        if len(found) != 1:
            what = "no built package" if not found else "more than one built package"
            raise AdapterError(f"{what} in `{where}`: give the package's folder or model.json")
        path = found[0]
    return Spec.from_json(path.read_bytes())


def _select(spec: Spec, surface: str | None, ids: Sequence[str]) -> list[Tool]:
    if ids:
        unknown = [i for i in ids if i not in spec.tools]
        if unknown:
            raise AdapterError(f"no tool `{unknown[0]}` in the spec")
        return [spec.tools[i] for i in ids]
    if surface is not None:
        from ..model.semantics import surface_tools

        named = [k for k in spec.surfaces if k == surface or k.endswith(f".{surface}")]
        if len(named) != 1:
            known = ", ".join(sorted(spec.surfaces)) or "none"
            raise AdapterError(f"no surface `{surface}` in the spec (surfaces: {known})")
        return [spec.tools[i] for i in surface_tools(spec, spec.surfaces[named[0]])]
    return list(spec.tools.values())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harnessc.runtime.integrations.exports",
        description="Print a built spec's tools as model-API or MCP tool definitions (JSON).",
    )
    parser.add_argument(
        "package", type=Path, help="what `harnessc build -o` wrote, a package in it, or model.json"
    )
    parser.add_argument("--format", choices=FORMATS, default="openai", dest="form")
    parser.add_argument(
        "--strict", action="store_true", help="OpenAI strict mode where each tool allows it"
    )
    parser.add_argument("--surface", help="the public tools of this surface (default: all)")
    parser.add_argument("--tool", action="append", default=[], help="this tool id (repeatable)")
    args = parser.parse_args(argv)
    try:
        spec = _load(args.package)
        tools = _select(spec, args.surface, args.tool)
        out = export(tools, args.form, args.strict)
    except (OSError, ValueError) as err:  # AdapterError and pydantic's errors are ValueErrors
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.strict and args.form.startswith("openai"):
        for tool in tools:
            for note in strict_parameters(tool).notes:
                print(f"not strict: {tool.id}: {note}", file=sys.stderr)
    print(json.dumps(out, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
