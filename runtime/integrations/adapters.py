"""Function-calling adapters: exposed tools as OpenAI and Anthropic tool definitions (OpenAI's
strict mode where a tool's schema allows it) or an MCP `tools/list` result, and a provider's
tool calls read back as `(tool_id, tool_call_id, args)` ready for normalize. The definitions
themselves are built by runtime/integrations/exports.py.

A model sees a tool by its wire name (`Tool.wire_name`, `[A-Za-z0-9_-]{1,64}`) with a
description and a JSON Schema of its input; traces, policies and grants use the tool id. So the
way back maps the wire name to the tool id first, against the tools offered in that turn, and
refuses what cannot be mapped:

- a name that is not one of the offered wire names → `Refusal("unknown-tool")` (a near
  wire name is suggested);
- arguments that are not JSON (OpenAI sends them as a JSON string), hold duplicate keys or
  NaN, or are not a JSON object → `Refusal("invalid-args")`;
- a call without an id → `Refusal("invalid-args")`.

Each refusal carries the name the model wrote and the call id, so the application can answer
that one call and run the others. A payload that is not a provider response at all raises
`AdapterError`. Nothing here validates arguments against the schema or checks the surface:
that is normalize's job, which receives the tool id.

Shapes (payloads may be plain JSON or SDK objects with `model_dump()`):

- OpenAI chat completions: `tools=[{"type": "function", "function": {"name", "description",
  "parameters"}}]`; calls in `choices[i].message.tool_calls[]` as `{"id", "type": "function",
  "function": {"name", "arguments": "<JSON text>"}}`;
- OpenAI Responses API: `tools=[{"type": "function", "name", "description", "parameters",
  "strict"}]`; calls in `output[]` items of `type: "function_call"` with `call_id`,
  `name`, `arguments`;
- Anthropic Messages: `tools=[{"name", "description", "input_schema"}]`; calls in `content[]`
  blocks of `type: "tool_use"` with `id`, `name`, `input` (an object).

In OpenAI strict mode a model sends null for a field it leaves out (strict mode makes every
field required); normalize reads null in an optional or defaulted field as absent, so the calls
read back need no rewriting.

>>> from harnessc.runtime.model import Field, Schema, Tool, Type
>>> tool = Tool(id="change.create", wire_name="change_create", summary="Create a change.",
...     input=Schema(fields=(Field(name="service", type=Type(name="string")),)))
>>> fc = FunctionCalling([tool])
>>> fc.anthropic()[0]["name"]
'change_create'
>>> fc.read_anthropic({"content": [{"type": "tool_use", "id": "toolu_1",
...     "name": "change_create", "input": {"service": "api"}}]})
[ToolCall(tool_id='change.create', tool_call_id='toolu_1', args={'service': 'api'})]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from ..judge.normalize import Refusal, near_name, quoted
from ..model.canonical import CanonicalError, parse_json
from ..model.ir import Tool
from .exports import (
    AdapterError,
    anthropic_tool,
    input_schema,
    mcp_tool,
    openai_responses_tool,
    openai_tool,
    strict_parameters,
    tool_description,
    wire_name,
)

__all__ = [
    "AdapterError",
    "FunctionCalling",
    "ToolCall",
    "anthropic_tool",
    "input_schema",
    "openai_responses_tool",
    "openai_tool",
    "tool_description",
]


class ToolCall(NamedTuple):
    """One tool call read back from a provider, ready for normalize."""

    tool_id: str
    tool_call_id: str
    args: dict[str, Any]


# ---------------------------------------------------------------------------------------------
# The adapter


def _plain(payload: Any) -> Any:
    dump = getattr(payload, "model_dump", None)
    return dump() if callable(dump) else payload


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


class FunctionCalling:
    """The tools offered to a model in one turn, as provider tool definitions, and the way
    back from the model's tool calls to tool ids.

    Build it from the tools of an exposure (`[spec.tools[i] for i in exposure.tools]`); calls
    are mapped against exactly these tools, so a model cannot reach a tool it was not offered
    by naming it.
    """

    def __init__(self, tools: Iterable[Tool]) -> None:
        self.tools: tuple[Tool, ...] = tuple(tools)
        self.by_wire: dict[str, str] = {}
        for tool in self.tools:
            wire = wire_name(tool)
            other = self.by_wire.get(wire)
            if other is not None and other != tool.id:
                raise AdapterError(f"`{other}` and `{tool.id}` share the wire name `{wire}`")
            self.by_wire[wire] = tool.id

    # -- export -------------------------------------------------------------------------------

    def openai(self, strict: bool = False) -> list[dict[str, Any]]:
        """`tools=` for OpenAI chat completions; with `strict`, in strict mode where each
        tool's schema allows it (`strict_notes()` says why a tool is not)."""
        return [openai_tool(t, strict) for t in self.tools]

    def openai_responses(self, strict: bool = False) -> list[dict[str, Any]]:
        """`tools=` for the OpenAI Responses API; `strict` as for `openai`."""
        return [openai_responses_tool(t, strict) for t in self.tools]

    def anthropic(self) -> list[dict[str, Any]]:
        """`tools=` for Anthropic Messages."""
        return [anthropic_tool(t) for t in self.tools]

    def mcp(self) -> dict[str, Any]:
        """The tools as an MCP server's `tools/list` result: `{"tools": [...]}`."""
        return {"tools": [mcp_tool(t) for t in self.tools]}

    def strict_notes(self) -> dict[str, tuple[str, ...]]:
        """Why each tool that cannot be offered in OpenAI strict mode cannot, by tool id."""
        out = {}
        for tool in self.tools:
            notes = strict_parameters(tool).notes
            if notes:
                out[tool.id] = notes
        return out

    # -- read back ----------------------------------------------------------------------------

    def read_openai(self, payload: Any, choice: int = 0) -> list[ToolCall | Refusal]:
        """The tool calls of a chat completion (the whole response, one choice, its message,
        or the `tool_calls` list), in order; `choice` picks among `n > 1` choices."""
        payload = _plain(payload)
        if isinstance(payload, Mapping) and "choices" in payload:
            choices = payload["choices"]
            if not isinstance(choices, list) or not 0 <= choice < len(choices):
                raise AdapterError(f"the completion has no choice {choice}")
            payload = _plain(choices[choice])
        if isinstance(payload, Mapping) and "message" in payload:
            payload = _plain(payload["message"])
        if isinstance(payload, Mapping):
            if "tool_calls" not in payload and "role" not in payload:
                raise AdapterError("not a chat completion, choice, message or tool call list")
            payload = payload.get("tool_calls") or []
        if not isinstance(payload, list):
            raise AdapterError("`tool_calls` is not a list")
        out: list[ToolCall | Refusal] = []
        for item in map(_plain, payload):
            if not isinstance(item, Mapping):
                raise AdapterError("a tool call is not an object")
            function = _plain(item.get("function"))
            call_id = _text(item.get("id"))
            kind = item.get("type", "function")
            if kind != "function" or not isinstance(function, Mapping):
                name = _text(item.get("name")) or str(kind)
                out.append(self._unsupported(name, call_id, kind))
                continue
            out.append(self._read(function.get("name"), call_id, function.get("arguments")))
        return out

    def read_openai_responses(self, payload: Any) -> list[ToolCall | Refusal]:
        """The function calls of a Responses-API response (or its `output` list), in order;
        other output items (messages, reasoning) are skipped."""
        payload = _plain(payload)
        if isinstance(payload, Mapping):
            if "output" not in payload:
                raise AdapterError("not a Responses-API response: it has no `output`")
            payload = payload["output"]
        if not isinstance(payload, list):
            raise AdapterError("`output` is not a list")
        out: list[ToolCall | Refusal] = []
        for item in map(_plain, payload):
            if not isinstance(item, Mapping):
                raise AdapterError("an output item is not an object")
            if item.get("type") != "function_call":
                continue
            call_id = _text(item.get("call_id"))
            out.append(self._read(item.get("name"), call_id, item.get("arguments")))
        return out

    def read_anthropic(self, payload: Any) -> list[ToolCall | Refusal]:
        """The `tool_use` blocks of an Anthropic message (or its `content` list), in order;
        text and thinking blocks are skipped."""
        payload = _plain(payload)
        if isinstance(payload, Mapping):
            if "content" not in payload:
                raise AdapterError("not an Anthropic message: it has no `content`")
            payload = payload["content"]
        if isinstance(payload, str):
            return []  # a text-only message
        if not isinstance(payload, list):
            raise AdapterError("`content` is not a list")
        out: list[ToolCall | Refusal] = []
        for block in map(_plain, payload):
            if not isinstance(block, Mapping):
                raise AdapterError("a content block is not an object")
            if block.get("type") != "tool_use":
                continue
            out.append(self._read(block.get("name"), _text(block.get("id")), block.get("input")))
        return out

    # -- one call -----------------------------------------------------------------------------

    def resolve(self, wire_name: Any) -> str | Refusal:
        """The tool id an offered wire name stands for, or an `unknown-tool` refusal."""
        if isinstance(wire_name, str):
            tool_id = self.by_wire.get(wire_name)
            if tool_id is not None:
                return tool_id
            near = near_name(wire_name, self.by_wire)
            hint = f"; did you mean `{near}`?" if near else ""
            return Refusal(
                "unknown-tool",
                f"`{quoted(wire_name)}` is not one of the tools offered to the model{hint}",
                self.by_wire[near] if near else None,
                wire_name,
            )
        return Refusal("unknown-tool", "the tool call names no tool", None, None)

    def _read(self, name: Any, call_id: str | None, arguments: Any) -> ToolCall | Refusal:
        resolved = self.resolve(name)  # the wire name first: everything after uses the id
        if isinstance(resolved, Refusal):
            return Refusal(
                resolved.code, resolved.message, resolved.replacement, resolved.tool, call_id
            )
        tool_id = resolved
        if call_id is None:
            return Refusal(
                "invalid-args", f"the call to `{tool_id}` has no call id", None, name, None
            )
        if isinstance(arguments, str):
            if not arguments.strip():
                arguments = "{}"  # a call of a tool without parameters may send ""
            try:
                arguments = parse_json(arguments)
            except CanonicalError as err:
                return Refusal(
                    "invalid-args",
                    f"the arguments of the call to `{tool_id}` are not valid JSON: {err.reason}",
                    None,
                    name,
                    call_id,
                    "$",
                    (("$", err.reason),),
                )
        elif arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            reason = "the arguments are not a JSON object"
            return Refusal(
                "invalid-args",
                f"the arguments of the call to `{tool_id}` are not a JSON object",
                None,
                name,
                call_id,
                "$",
                (("$", reason),),
            )
        return ToolCall(tool_id, call_id, dict(arguments))

    @staticmethod
    def _unsupported(name: str, call_id: str | None, kind: Any) -> Refusal:
        return Refusal(
            "unknown-tool",
            f"tool calls of type `{quoted(str(kind))}` are not supported; offer function tools",
            None,
            name,
            call_id,
        )
