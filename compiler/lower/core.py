"""The core of lowering: the stage's value, reporting, and reading attribute values."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path as FilePath
from typing import Any, TypeVar

from harnessc.dsl import syntax as s
from harnessc.dsl.diagnostics import Diagnostic, Reporter
from harnessc.dsl.source import Span
from harnessc.dsl.suggest import did_you_mean
from harnessc.runtime import model as m
from harnessc.runtime.model import trusted

from ..modules import head_span
from ..resolve import Module, Resolution, Symbol

T = TypeVar("T")


@dataclass
class Lowered:
    """The stage's value: the model (None when an error was reported) and the diagnostics."""

    spec: m.Spec | None
    diagnostics: list[Diagnostic] = field(default_factory=list)


def module_name(module: Module) -> str:
    """`std.risk` for a standard module, the header's name for a root, the file stem otherwise."""
    if module.module_path is not None:
        return module.module_path
    if module.is_root:
        for item in module.syntax.items:
            if isinstance(item, s.Header):
                return item.name.text
    return FilePath(module.name).stem


def origin(span: Span) -> m.SourceRef:
    line, column = span.source.location(span.start)
    return trusted(m.SourceRef)(file=span.source.path, line=line, column=column)


def article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


class LowererBase(Reporter):
    """The state of one lowering run and the helpers every declaration kind reads."""

    def __init__(self, resolution: Resolution) -> None:
        self.res = resolution
        self.diagnostics: list[Diagnostic] = []
        self.names = {mod.key: module_name(mod) for mod in resolution.modules}
        roots = [mod for mod in resolution.modules if mod.is_root]
        self.root = next(
            (r for r in roots if any(isinstance(i, s.Header) for i in r.syntax.items)),
            roots[0] if roots else None,
        )
        self.tools: dict[str, m.Tool] = {}
        self.tool_spans: dict[str, Span] = {}
        self.exposable: dict[str, list[str]] = {mod.key: [] for mod in resolution.modules}
        # per policy: its own default and items (rules, or the qualified name of an include)
        self.policy_parts: dict[str, tuple[s.Policy, m.Policy, list[m.Rule | tuple[str, Span]]]]
        self.policy_parts = {}
        self.cycles: set[frozenset[str]] = set()

    def word(self, name: s.Name, vocabulary: Sequence[str], what: str) -> str | None:
        """A word of a closed vocabulary, or None after reporting H301."""
        if name.text in vocabulary:
            return name.text
        self.report(
            "H301",
            f"unknown {what} `{name.text}`",
            name.span,
            f"not {article(what)} {what}",
            notes=[f"the {what}s are {', '.join(f'`{w}`' for w in vocabulary)}"],
            help=did_you_mean(name.text, vocabulary),
        )
        return None

    def unique_attrs(
        self, items: Iterable[object], allowed: Iterable[str], where: str
    ) -> dict[str, s.Attr]:
        """The block's attributes by key; reports duplicates (H302) and disallowed keys (H303)."""
        allowed = frozenset(allowed)
        seen: dict[str, s.Attr] = {}
        for item in items:
            if not isinstance(item, s.Attr):
                continue
            if item.key not in allowed:
                self.not_allowed(item.key, item.span, where)
                continue
            self.once(seen, item.key, item, item.span)
        return seen

    def once(self, seen: dict[str, Any], key: str, node: Any, span: Span) -> bool:
        first = seen.get(key)
        if first is None:
            seen[key] = node
            return True
        self.report(
            "H302",
            f"`{key}` is given twice",
            span,
            "given again here",
            secondary=[(first.span, "first given here")],
            help=f"keep one `{key}`",
        )
        return False

    def not_allowed(self, key: str, span: Span, where: str, help: str | None = None) -> None:
        self.report(
            "H303",
            f"`{key}` is not allowed in {where}",
            span,
            "not allowed here",
            help=help or f"remove `{key}`",
        )

    def missing(self, what: str, node: object, where: str, help: str | None = None) -> None:
        self.report(
            "H304",
            f"{where} has no {what}",
            head_span(node),
            f"no {what}",
            help=help,
        )

    def positive_ms(self, duration: s.Duration, what: str) -> int:
        ms = duration.ms
        if ms <= 0:
            self.report(
                "H308",
                f"{what} must be longer than zero",
                duration.span,
                "zero",
                help=f"give {what} a positive duration, such as `10m`",
            )
        return ms

    def at_least_one(self, value: s.Int, what: str) -> int:
        if value.value < 1:
            self.report(
                "H308",
                f"{what} must be at least 1",
                value.span,
                f"{value.value}",
                help=f"give {what} a value of 1 or more",
            )
        return value.value

    # =========================================================================================
    # Attribute values

    @staticmethod
    def text(attr: s.Attr | None) -> str | None:
        if attr is None:
            return None
        for value in attr.values:
            if isinstance(value, s.Str):
                return value.value
        return None

    @staticmethod
    def name_values(attr: s.Attr | None) -> list[s.Name]:
        if attr is None:
            return []
        return [v for v in attr.values if isinstance(v, s.Name)]

    def qualified(self, symbol: Symbol) -> str:
        return f"{self.names[symbol.module.key]}.{symbol.name}"

    def ref(self, name: s.Name, module: Module) -> str:
        """A resolved reference as the model keys it: qualified for module-scoped kinds."""
        symbol = self.res.references.get(name.span)
        if symbol is None:
            return name.text
        if symbol.kind in ("surface", "policy", "risk_table", "agent", "workflow", "skill"):
            return self.qualified(symbol)
        return symbol.name

    current: Module
