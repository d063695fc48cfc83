"""`harnessc mcp discover`: ask a live MCP server for its tools (the `mcp` extra).

Without a spec it prints a ready `mcp NAME { … }` block: each tool with its summary, its input
(and output) schema in the language's types, conservative effects (`write external`: what a
server says of its tools is a hint, never a fact, language.md §8), and every annotation the
server sent kept as an untrusted hint in a comment, for a person to review. The block goes
through the formatter, so it is canonical and proven to parse; it is then checked, and a tool
whose schema the language cannot say exactly is marked (it would be unavailable as written).

Given a spec, it reports drift instead: tools the server lists that the spec does not declare,
declared tools it no longer lists, and tools whose schema changed, by the comparison the
runtime's availability makes (`availability.schema_drift`). Exit codes: 0 no drift, 1 drift,
2 the server cannot be reached, the spec has errors, or bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessc.dsl.builder import QUOTED_NAME as TOOL_NAME  # what a quoted tool name may hold
from harnessc.dsl.printer import format_source
from harnessc.dsl.render_formats import print_diagnostics
from harnessc.dsl.source import Source
from harnessc.runtime.integrations.mcp_client import (
    DiscoveredTool,
    Discovery,
    McpEndpoint,
    McpError,
    discover,
)
from harnessc.runtime.judge.availability import schema_drift
from harnessc.runtime.model import Spec

__all__ = ["Drift", "drift_of", "mcp_block", "run"]

EXIT_OK, EXIT_DRIFT, EXIT_USAGE = 0, 1, 2
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HINT_ORDER = ("title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


# ---------------------------------------------------------------------------------------------
# JSON Schema → the language's types


def _literal(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _type(schema: Any, output: bool = False) -> str:
    """A property's JSON Schema as a type of the language (constraints aside). What the
    language cannot say becomes the nearest type; the check after printing finds it.

    `output`: a result's, which may say more (language.md §5.5): an object that does not
    forbid other properties is an open record (`...`), alternatives are a union, and a schema
    without a type is `any`. An input's fields each have one listed type."""
    if not isinstance(schema, Mapping):
        return "any" if output else "string"
    any_of = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(any_of, list):
        kinds = [s for s in any_of if not (isinstance(s, Mapping) and s.get("type") == "null")]
        mark = "?" if len(kinds) < len(any_of) else ""
        if not kinds:
            return "string"
        if not output:
            return _type(kinds[0]) + mark
        options = list(dict.fromkeys(_type(k, True).removesuffix("?") for k in kinds))
        if "any" in options:
            return "any" + mark
        return " | ".join(options) + mark
    kind = schema.get("type")
    if isinstance(kind, list):
        rest = [k for k in kind if k != "null"]
        if output and len(rest) > 1:
            return _type({"anyOf": [{**schema, "type": k} for k in kind]}, True)
        return _type({**schema, "type": rest[0] if rest else "string"}, output) + (
            "?" if "null" in kind else ""
        )
    if kind is None and output and not schema.get("enum"):
        if isinstance(schema.get("properties"), Mapping):
            return _type({**schema, "type": "object"}, True)
        return "any"
    if kind == "string":
        if isinstance(schema.get("enum"), list):
            return "enum(" + ", ".join(_literal(str(v)) for v in schema["enum"]) + ")"
        return "url" if schema.get("format") == "uri" else "string"
    if kind == "integer":
        return "int"
    if kind == "number":
        return "float"
    if kind == "boolean":
        return "bool"
    if kind == "array":
        return f"list<{_type(schema.get('items'), output)}>"
    if kind == "object":
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        if isinstance(props, Mapping) and props:
            required = set(schema.get("required") or ())
            fields = [_field(n, p, n in required, output) for n, p in props.items()]
            listed = [f for f in fields if f is not None]
            if output and _open(schema):
                listed.append("...")
            return "{ " + ", ".join(listed) + " }"
        if output and not isinstance(extra, Mapping):
            return "{ ... }" if _open(schema) else "{}"
        return f"map<{_type(extra, output) if isinstance(extra, Mapping) else 'string'}>"
    return "any" if output and kind not in ("string", "null") else "string"


def _open(schema: Mapping[str, Any]) -> bool:
    """Whether an object schema allows properties it does not list (JSON Schema's default)."""
    return schema.get("additionalProperties", True) is not False


_BOUNDS = {
    "minLength": "min",
    "maxLength": "max",
    "minimum": "min",
    "maximum": "max",
    "minItems": "min",
    "maxItems": "max",
    "minProperties": "min",
    "maxProperties": "max",
}


def _field(name: str, schema: Any, required: bool, output: bool = False) -> str | None:
    """A field, or None when the language cannot name it (a field name is a plain word: the
    check after printing then says the tool's schema is not the server's; in an output, the
    record is open and holds it unlisted)."""
    if not _PLAIN.fullmatch(name):
        return None
    ty = _type(schema, output)
    text = name
    has_default = isinstance(schema, Mapping) and "default" in schema
    if not required and not has_default and not ty.endswith("?"):
        ty += "?"
    parts = [f"{text}: {ty}"]
    if isinstance(schema, Mapping):
        for key, word in _BOUNDS.items():
            if isinstance(schema.get(key), int | float) and not isinstance(schema[key], bool):
                parts.append(f"{word} {schema[key]}")
        if isinstance(schema.get("pattern"), str):
            parts.append(f"pattern {_literal(schema['pattern'])}")
        if has_default and schema["default"] is not None:
            parts.append(f"default {_literal(schema['default'])}")
        if schema.get("writeOnly") is True:
            parts.append("secret")
    return " ".join(parts)


def _schema_block(keyword: str, schema: Mapping[str, Any] | None) -> list[str]:
    output = keyword == "output"
    props = (schema or {}).get("properties")
    rest = ["  ..."] if output and _open(schema or {}) else []
    if not isinstance(props, Mapping) or not props:
        return [f"{keyword} {{ ... }}"] if rest else [f"{keyword} {{}}"]
    required = set((schema or {}).get("required") or ())
    fields = [f for n, p in props.items() if (f := _field(n, p, n in required, output)) is not None]
    if not fields and not rest:
        return [f"{keyword} {{}}"]
    return [f"{keyword} {{", *(f"  {f}" for f in fields), *rest, "}"]


# ---------------------------------------------------------------------------------------------
# The block


def _name(text: str) -> str:
    return text if _PLAIN.fullmatch(text) else _literal(text)


def _hints(tool: DiscoveredTool) -> str | None:
    found = dict(tool.annotations)
    if tool.title and "title" not in found:
        found["title"] = tool.title
    if not found:
        return None
    keys = [k for k in _HINT_ORDER if k in found] + sorted(k for k in found if k not in _HINT_ORDER)
    shown = ", ".join(f"{k}={json.dumps(found[k], ensure_ascii=False)}" for k in keys)
    return f"# untrusted hints from the server, not effects: {shown}"


def _summary(tool: DiscoveredTool) -> str:
    text = (tool.description or tool.title or "").strip()
    first = text.split("\n\n", 1)[0].replace("\n", " ").strip()
    return first or f"The MCP tool `{tool.name}` (the server gives no description)."


def _raw_block(name: str, endpoint: McpEndpoint, tools: tuple[DiscoveredTool, ...]) -> str:
    lines = [
        f"mcp {_name(name)} {{",
        "  # discovered; every tool's effects are the worst case (`write external`) until a person",
        "  # who knows the server narrows them: what a server says of its tools is only a hint",
        f"  transport {endpoint.transport} {_literal(endpoint.target)}",
    ]
    for tool in tools:
        lines.append("")
        if not TOOL_NAME.fullmatch(tool.name):
            lines.append(f"  # the server's tool {_literal(tool.name)} cannot be declared:")
            lines.append("  # only letters, digits and `_ - . /` make a tool name")
            continue
        hint = _hints(tool)
        if hint:
            lines.append(f"  {hint}")
        lines.append(f"  tool {_name(tool.name)} {{")
        lines.append(f"    summary {_literal(_summary(tool))}")
        lines.append("    effects write external")
        lines.extend(f"    {line}" for line in _schema_block("input", tool.input_schema))
        if tool.output_schema and isinstance(tool.output_schema.get("properties"), Mapping):
            lines.extend(f"    {line}" for line in _schema_block("output", tool.output_schema))
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _checked(text: str) -> tuple[Spec | None, list[Any]]:
    from .pipeline import check

    with tempfile.TemporaryDirectory(prefix="harnessc-mcp-") as folder:
        path = Path(folder) / "discovered.harness"
        path.write_text(text, encoding="utf-8")
        result = check([path])
        return (result.model if result.ok else None), list(result.diagnostics)


def mcp_block(name: str, endpoint: McpEndpoint, discovery: Discovery) -> str:
    """The canonical `mcp NAME { … }` block of what the server lists. A tool whose schema
    the language cannot say exactly gets a comment saying how it differs (as written, the
    runtime would find it unavailable)."""
    raw = _raw_block(name, endpoint, discovery.tools)
    model, _ = _checked(raw)
    if model is not None:
        notes = {}
        for tool in discovery.tools:
            declared = model.tools.get(f"mcp:{name}:tool:{tool.name}")
            drift = schema_drift(declared, tool.input_schema) if declared is not None else None
            if drift is not None:
                notes[tool.name] = drift
        if notes:
            raw = _raw_block_noted(name, endpoint, discovery.tools, notes)
    formatted = format_source(Source("discovered.harness", raw))
    if formatted.text is None:  # pragma: no cover - a bug in the translation above
        raise McpError("cannot-print", "the discovered block does not parse: " + raw)
    return formatted.text


def _raw_block_noted(
    name: str, endpoint: McpEndpoint, tools: tuple[DiscoveredTool, ...], notes: dict[str, str]
) -> str:
    text = _raw_block(name, endpoint, tools)
    for tool in tools:
        if tool.name in notes:
            opener = f"  tool {_name(tool.name)} {{\n"
            note = (
                "  # harnessc: this input cannot say the server's schema exactly, so as written\n"
                f"  # the tool stays unavailable: {notes[tool.name]}\n"
            )
            text = text.replace(opener, note + opener, 1)
    return text


# ---------------------------------------------------------------------------------------------
# Drift


@dataclass(frozen=True)
class Drift:
    """How a server's tools differ from a spec's `mcp` block."""

    server: str
    added: tuple[str, ...]
    """Listed by the server, not declared (never registered until declared)."""
    removed: tuple[str, ...]
    """Declared, no longer listed (unavailable: not discovered)."""
    changed: tuple[tuple[str, str], ...]
    """Declared and listed with another schema (unavailable), with how it differs."""

    @property
    def drifted(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "drift": self.drifted,
            "added": list(self.added),
            "removed": list(self.removed),
            "changed": [{"tool": t, "difference": d} for t, d in self.changed],
        }

    def render(self) -> str:
        if not self.drifted:
            return f"mcp {self.server}: no drift; every declared tool is listed with its schema\n"
        lines = [f"mcp {self.server}: drift"]
        lines += [f"  + {_shown(t)}: listed, not declared (not projected)" for t in self.added]
        lines += [f"  - {_shown(t)}: declared, not listed (unavailable)" for t in self.removed]
        lines += [
            f"  ~ {_shown(t)}: schema changed (unavailable): {_printable(d)}"
            for t, d in self.changed
        ]
        return "\n".join(lines) + "\n"


def _shown(name: str) -> str:
    """A tool name the server chose, as the report prints it: as it is when it is printable
    ASCII without spaces or quotes, else quoted with every character past ASCII escaped (a
    newline would forge a line of the report, an escape sequence drive the terminal)."""
    plain = name.isascii() and name.isprintable() and " " not in name and '"' not in name
    return name if plain and name else json.dumps(name)


def _printable(text: str) -> str:
    """`text` with each character a terminal would act on (controls, bidirectional marks)
    as its `\\uXXXX` escape."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text)


def drift_of(spec: Spec, server: str, discovery: Discovery) -> Drift:
    """The drift of the declared server `server` against what `discovery` found."""
    declared = {
        tool_id.split(":", 3)[3]: spec.tools[tool_id]
        for tool_id in spec.mcp_servers[server].tools
        if tool_id in spec.tools
    }
    listed = {t.name: t for t in discovery.tools}
    changed = []
    for name in sorted(set(declared) & set(listed)):
        drift = schema_drift(declared[name], listed[name].input_schema)
        if drift is not None:
            changed.append((name, drift))
    return Drift(
        server,
        tuple(sorted(set(listed) - set(declared))),
        tuple(sorted(set(declared) - set(listed))),
        tuple(changed),
    )


# ---------------------------------------------------------------------------------------------
# The command


def _fail(message: str) -> int:
    sys.stderr.write(f"harnessc: {message}\n")
    return EXIT_USAGE


def run(args: argparse.Namespace) -> int:
    """`harnessc mcp discover` (see the module docstring for the exit codes)."""
    if args.stdio is not None:
        endpoint = McpEndpoint("stdio", args.stdio)
    else:
        endpoint = McpEndpoint("http", args.http)
    spec: Spec | None = None
    if args.spec is not None:
        from .pipeline import check

        result = check([args.spec])
        if not result.ok or result.model is None:
            print_diagnostics(list(result.diagnostics))
            return EXIT_USAGE
        spec = result.model
    name = args.name
    if name is not None and not _PLAIN.fullmatch(name):
        return _fail(f"`{name}` is not a server name: letters, digits and `_`, not first a digit")
    if spec is not None and name is None:
        if len(spec.mcp_servers) != 1:
            listed = ", ".join(f"`{n}`" for n in sorted(spec.mcp_servers)) or "none"
            return _fail(f"name the spec's MCP server to compare with --name (declared: {listed})")
        name = next(iter(spec.mcp_servers))
    if spec is not None and name not in spec.mcp_servers:
        return _fail(f"the spec declares no MCP server `{name}`")
    try:
        found = asyncio.run(discover(endpoint, timeout_s=args.timeout, errlog=sys.stderr))
    except McpError as error:
        return _fail(error.message)
    if spec is None:
        if name is None:
            guess = re.sub(r"[^A-Za-z0-9_]+", "_", found.server_name or "").strip("_")
            name = guess if _PLAIN.fullmatch(guess) else "server"
        try:
            block = mcp_block(name, endpoint, found)
        except McpError as error:  # a bug in the translation: said, never a traceback
            return _fail(error.message)
        if args.format == "json":
            print(json.dumps({"server": name, "block": block}, indent=2))
        else:
            sys.stdout.write(block)
        return EXIT_OK
    assert name is not None
    drift = drift_of(spec, name, found)
    if args.format == "json":
        print(json.dumps(drift.to_dict(), indent=2))
    else:
        sys.stdout.write(drift.render())
    return EXIT_DRIFT if drift.drifted else EXIT_OK
