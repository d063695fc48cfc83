"""The help lines of unknown names: "did you mean", among names of the kind a reference wants.

A mixin of the resolver (compiler/resolve.py); suggestions are computed only when an error is
reported.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from harnessc.dsl.diagnostics import Diagnostic
from harnessc.dsl.source import Span
from harnessc.dsl.suggest import did_you_mean, suggest

from .kinds import GLOBAL_KINDS, KIND_WORDS
from .modules import STD_PREFIX, Module, std_module_names

if TYPE_CHECKING:
    from .poison import Poison
    from .resolve import Symbol


def mcp_server_named(text: str) -> str | None:
    """The server an MCP id or pattern names (`scanner` in `mcp:scanner:tool:scan` and in
    `mcp:scanner:*`); None for other names and for a server that is itself a glob."""
    if not text.startswith("mcp:"):
        return None
    server = text[4:].split(":", 1)[0]
    return server if server and "*" not in server else None


def unknown_mcp_server(server: str, span: Span, declared: Iterable[str]) -> Diagnostic:
    """H321, for an MCP pattern or a full MCP tool id alike."""
    return Diagnostic.make(
        "H321",
        f"MCP server `{server}` is not declared in this build",
        span,
        "no such MCP server",
        help=did_you_mean(server, declared)
        or "declare it with `mcp NAME { … }`, or import the module that does",
    )


class NameHelp:
    """The resolver's help lines for H201 and H207."""

    if TYPE_CHECKING:
        # what the help lines read of the resolver
        globals: dict[str, dict[str, Symbol]]
        scoped: dict[str, dict[str, dict[str, Symbol]]]
        poison: Poison

    def kind_help(self, other: Symbol, kinds: tuple[str, ...]) -> str | None:
        if other.kind == "mcp" and "tool" in kinds:
            return f"select the server's tools with `mcp:{other.name}:*`"
        return None

    def unknown_help(self, module: Module, text: str, kinds: tuple[str, ...]) -> str | None:
        global_kinds = [k for k in kinds if k in GLOBAL_KINDS]
        if global_kinds:
            candidates = [name for k in global_kinds for name in self.globals[k]]
            # a declaration with a syntax error still names what it declares
            candidates += [n for k in global_kinds for n in self.poison.names(k)]
            found = did_you_mean(text, candidates)
            return found or self.global_qualified_help(module, text, global_kinds[0])
        (kind,) = kinds  # module-scoped references expect exactly one kind
        if "." in text:
            prefix, last = text.rsplit(".", 1)
            binding = module.bindings.get(prefix)
            if binding is None or binding.target is None:
                return self.unbound_help(module, prefix, text, kind)
            found = suggest(last, self.scoped[binding.target.key][kind])
            return f"did you mean `{prefix}.{found}`?" if found else None
        # a name of an imported module, written without its module
        for binding_name, binding in module.bindings.items():
            target = binding.target
            if target is not None and text in self.scoped[target.key][kind]:
                return f"did you mean `{binding_name}.{text}`?"
        skipped = self.poison.names(kind, module.key)
        return did_you_mean(text, [*self.scoped[module.key][kind], *skipped])

    def unbound_help(self, module: Module, prefix: str, text: str, kind: str) -> str | None:
        known = std_module_names()
        for path in (prefix, STD_PREFIX + prefix):
            if path in known:
                return f"`{path}` is not imported here: add `import {path}`"
        candidates = [
            f"{binding_name}.{name}"
            for binding_name, binding in module.bindings.items()
            if binding.target is not None
            for name in self.scoped[binding.target.key][kind]
        ]
        return did_you_mean(text, candidates)

    def global_qualified_help(self, module: Module, text: str, kind: str) -> str | None:
        """`std.workspace.read_open` for a tool: ids are global, written without the module."""
        if "." not in text:
            return None
        for binding_name in module.bindings:
            if text.startswith(binding_name + "."):
                rest = text[len(binding_name) + 1 :]
                if rest in self.globals[kind]:
                    what = "tool ids" if kind == "tool" else f"{KIND_WORDS[kind]} names"
                    return f"{what} are global: write `{rest}`"
        return None
