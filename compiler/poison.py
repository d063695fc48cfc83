"""The names declarations that did not parse would have declared: never reported as unknown.

After a syntax error the parser skips the broken declaration and records what it can tell of
it (`syntax.Broken`: its keyword, its name, the tools written inside an `mcp` or `skill`
block). A reference to such a name is neither resolved nor reported: the syntax error already
explains it, and the declaration that holds the reference is set aside with it
(compiler/quarantine.py), which adds what it sets aside here too. A skipped declaration whose
kind or name is unknown covers every name it could have declared.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from harnessc.dsl import syntax as s

ANY = "*"
"""In a set of names: any name of that kind."""


@dataclass
class Poison:
    """What every module's skipped declarations would have declared, by the keyword of each
    (`tool`, `policy`, …): a build-wide kind is read across modules, a module-scoped one in
    its module. A tool or fact name covers its dotted extensions too (`orders` covers
    `orders.lookup`), an MCP server the tools under it (`mcp:scanner:tool:scan`)."""

    by_module: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    """module key → keyword → names (or ANY)."""
    by_kind: dict[str, set[str]] = field(default_factory=dict)
    """keyword → names (or ANY), over every module."""
    everything: set[str] = field(default_factory=set)
    """Keys of modules with a skipped declaration of unknown kind (or an import): any name, of
    any kind, reached from them may be missing."""
    skipped_in: set[str] = field(default_factory=set)
    """Keys of the modules that skipped a declaration."""
    incomplete: bool = False
    """A module failed to load (an unknown import, an unreadable file): any build-wide name
    may be missing."""

    def __bool__(self) -> bool:
        return bool(self.skipped_in) or self.incomplete

    def covers_global(self, kind: str, name: str) -> bool:
        """Whether a skipped declaration anywhere may have declared a build-wide name (a
        module that failed to load is not counted: see `incomplete`)."""
        if self.everything:
            return True
        if kind == "tool" and name.startswith("mcp:") and self.covers_global("mcp", name[4:]):
            return True
        names = self.by_kind.get(kind, set())
        if kind == "mcp":
            name = name.split(":", 1)[0]
        if ANY in names or name in names:
            return True
        return kind in ("tool", "fact") and any(name.startswith(n + ".") for n in names)

    def covers_scoped(self, module_key: str, kind: str, name: str) -> bool:
        """Whether a skipped declaration of the module may have declared a name of its own."""
        if module_key in self.everything:
            return True
        names = self.by_module.get(module_key, {}).get(kind, set())
        return ANY in names or name in names

    def declares(self, module_key: str, kind: str) -> bool:
        """Whether a skipped declaration of the module may be of this kind."""
        return module_key in self.everything or bool(self.by_module.get(module_key, {}).get(kind))

    def names(self, kind: str, module_key: str | None = None) -> list[str]:
        """The names skipped declarations of this kind declare (in `module_key`, or anywhere),
        sorted: what a "did you mean" may suggest."""
        found = self.by_kind if module_key is None else self.by_module.get(module_key, {})
        return sorted(n for n in found.get(kind, ()) if n != ANY)

    def covers_module(self, module_key: str) -> bool:
        """Whether the module skipped a declaration (which may have used its imports)."""
        return module_key in self.skipped_in

    def may_select(self, text: str, module_key: str | None = None) -> bool:
        """Whether a tool selector (`orders.*`, `pack:NAME`, `mcp:scanner:*`, a tool id) may
        select a tool a skipped declaration would have declared; `module_key`: the module a
        module glob (`scanner.*`) selects the tools of."""
        if self.everything or self.incomplete:
            return True
        if module_key is not None:
            return module_key in self.skipped_in
        tools = self.by_kind.get("tool", set())
        servers = self.by_kind.get("mcp", set())
        if not tools and not servers:
            return False
        if "*" not in text and not text.startswith(("pack:", "kind:")):
            return self.covers_global("tool", text)
        if ANY in tools or ANY in servers or text == "*" or text.startswith(("pack:", "kind:")):
            return True
        prefix = text.split("*", 1)[0]
        if prefix.startswith("mcp:"):
            ids = [f"mcp:{server}:" for server in servers]
            return any(i.startswith(prefix) or prefix.startswith(i) for i in ids)
        return any(t.startswith(prefix) or prefix.startswith(t + ".") for t in tools)


def poison_of(modules: Iterable[tuple[str, s.Module]], incomplete: bool = False) -> Poison:
    """The poison of every module's skipped declarations, given as (module key, syntax);
    `incomplete`: a module failed to load."""
    poison = Poison(incomplete=incomplete)
    for key, syntax in modules:
        for broken in syntax.broken:
            _add(poison, key, broken)
    return poison


def _add(poison: Poison, key: str, broken: s.Broken) -> None:
    poison.skipped_in.add(key)
    kind = broken.kind
    if kind == "extend":
        return  # it declares nothing: the tools it extends are declared elsewhere
    if kind is None or kind == "import":
        poison.everything.add(key)
        return
    declared = [(kind, broken.name or ANY)]
    if kind == "skill":
        declared += [("tool", tool) for tool in broken.tools]  # a skill's private tools
    for keyword, name in declared:
        poison.by_module.setdefault(key, {}).setdefault(keyword, set()).add(name)
        poison.by_kind.setdefault(keyword, set()).add(name)
