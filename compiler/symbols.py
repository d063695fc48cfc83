"""What name resolution binds and where it reads: a declared name (`Symbol`) and the scope a
condition or value is read in (`Scope`). The resolver (compiler/resolve.py) and its mixins
(resolve_help, resolve_session) share them from here, below all three."""

from __future__ import annotations

from dataclasses import dataclass, field

from harnessc.dsl import syntax as s
from harnessc.dsl.source import Span

from .modules import Module

__all__ = ["Scope", "Symbol", "tool_kind"]


@dataclass(frozen=True, eq=False, slots=True)
class Symbol:
    """A declared name: its kind, the node that declares it and the module it lives in."""

    kind: str
    """One of GLOBAL_KINDS, MODULE_KINDS or LOCAL_KINDS."""
    name: str
    """The name as referenced: a tool id (`mcp:scanner:tool:scan` for a projected tool), a
    fact path, or the declared name."""
    node: object
    """The declaring syntax node (`Tool`, `Fact`, `Policy`, `Step`, …)."""
    module: Module
    span: Span
    """The span of the name in its declaration."""
    parent: object | None = None
    """The `Mcp` or `Skill` a projected or private tool belongs to; the `Workflow`, `Tool`,
    `Skill` or `Policy` of a local name."""

    @property
    def tool_kind(self) -> str | None:
        """For tools: `mcp`, `private`, `legacy`, `primitive`, `dynamic` or `public`."""
        if self.kind != "tool":
            return None
        return tool_kind(self.node, self.parent)  # type: ignore[arg-type]


def tool_kind(tool: s.Tool, parent: object | None) -> str:
    """What kind of tool a declaration is: by where it is declared (an MCP server's, a skill's
    private one), then by its `legacy`, `primitive` or `dynamic` attribute; else public."""
    if isinstance(parent, s.Mcp):
        return "mcp"
    if isinstance(parent, s.Skill):
        return "private"
    for item in tool.items:
        if isinstance(item, s.Attr) and item.key in ("legacy", "primitive", "dynamic"):
            return item.key
    return "public"


@dataclass
class Scope:
    """Where a condition or value is read: its module, and the workflow's steps if any."""

    module: Module
    steps: dict[str, Symbol] | None = None
    workflow: s.Workflow | None = None
    vars: dict[str, Symbol] = field(default_factory=dict)
    """Quantifier variables bound here (`all x in …: <here>`)."""
    result: bool = False
    """Whether `result.*` may be read: inside a history term and in `on_success`."""
    ended: dict[str, tuple[s.Quantified, str]] = field(default_factory=dict)
    """Quantifiers whose body ended before here, in the same `and`/`or` (`all x in l: a and
    <here>`), by variable, with the word that ended them: `x` here is a mistake to explain."""
