"""The help lines of unknown names: "did you mean", among names of the kind a reference wants.

A mixin of the resolver (compiler/resolve.py); suggestions are computed only when an error is
reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from harnessc.dsl import syntax as s
from harnessc.dsl.diagnostics import Diagnostic
from harnessc.dsl.source import Span
from harnessc.dsl.suggest import did_you_mean, suggest

from .kinds import BUILTIN_ROOTS, GLOBAL_KINDS, KIND_WORDS
from .modules import STD_PREFIX, Module, std_module_names

if TYPE_CHECKING:
    from .poison import Poison
    from .symbols import Symbol


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
    """The resolver's help lines for H201, H207 and H209."""

    if TYPE_CHECKING:
        # what the help lines read of the resolver
        fact_depth: int
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

    def result_help(self, text: str) -> str:
        """H209's help: `args.NAME` when a tool takes an argument NAME (a rule's `result.path`
        meant as the call's `args.path`), and where `result.*` is read."""
        name = text.partition(".")[2].partition(".")[0]
        where = (
            "`result.*` is read inside a history term (`count(t when result.ok)`, "
            "`sum(result.amount of t)`) and in `on_success`; a rule judges a call before it runs"
        )
        takes = sorted(
            symbol.name
            for symbol in self.globals["tool"].values()
            if isinstance(symbol.node, s.Tool)
            and any(
                isinstance(item, s.SchemaAttr)
                and item.key == "input"
                and any(f.name.text == name for f in item.schema.fields)
                for item in symbol.node.items
            )
        )
        if not takes:
            return where
        which = f"`{takes[0]}`" + (f" and {len(takes) - 1} more" if len(takes) > 1 else "")
        rest = text.partition(".")[2]
        return f"did you mean `args.{rest}`, the call's argument (of {which})? {where}"

    def path_help(
        self,
        parts: list[str],
        vars: Mapping[str, Symbol],
        steps: Mapping[str, Symbol] | None,
    ) -> str | None:
        """H201's help for an unknown path: a quantifier's variable, a root, a step or a
        fact it may have meant."""
        # inside a quantifier's body, an unknown word is most likely its variable mistyped
        if vars:
            near = suggest(parts[0], vars)
            if near is None and len(vars) == 1 and suggest(parts[0], BUILTIN_ROOTS) is None:
                near = next(iter(vars))
            if near is not None:
                node = vars[near].node
                bound = (
                    f"`{node.quantifier} {near} in …`"
                    if isinstance(node, s.Quantified)
                    else "its quantifier"
                )
                return f"did you mean `{'.'.join([near, *parts[1:]])}`, the item bound by {bound}?"
        firsts = list(BUILTIN_ROOTS)
        if steps is not None:
            firsts += ["input", *steps]
        best: tuple[int, str] | None = None
        found = suggest(parts[0], firsts)
        if found is not None:
            best = (0, ".".join([found, *parts[1:]]))
        for count in range(min(len(parts), self.fact_depth), 0, -1):
            written = ".".join(parts[:count])
            if count == 1 and "." not in written and best is not None:
                break
            fact = suggest(written, self.globals["fact"])
            if fact is not None:
                candidate = ".".join([fact, *parts[count:]])
                if best is None or count > 1:
                    best = (count, candidate)
                break
        return f"did you mean `{best[1]}`?" if best else None
