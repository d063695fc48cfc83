"""The lint framework: rule metadata, the registry, and the context every rule reads."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields, is_dataclass
from typing import TypeVar

from harnessc.dsl import syntax as s
from harnessc.dsl.codes import CODES, Code, lookup
from harnessc.dsl.diagnostics import Diagnostic
from harnessc.dsl.source import Span
from harnessc.runtime import model as m
from harnessc.runtime.model.semantics import selected_ids

from ..analysis.policy import PolicyAnalysis
from ..resolve import Module, Resolution

LintCheck = Callable[["LintContext"], Iterable[Diagnostic]]
T = TypeVar("T")


@dataclass(frozen=True)
class LintRule:
    """One lint rule: its code, its examples and its check. The code's slug, severity, summary
    and explanation live in dsl/codes.py's registry with every other code, so `explain`,
    `--select`/`--ignore`, suppressions and every output format know each code a rule can
    print without loading the rules.

    `bad` and `good` are complete `.harness` modules: the rule fires on `bad` and not on `good`
    (a test runs both, and the rule's docs page shows them).
    """

    code: str
    bad: str
    good: str
    check: LintCheck

    @property
    def registry_code(self) -> Code:
        return lookup(self.code)

    @property
    def name(self) -> str:
        return self.registry_code.slug

    @property
    def severity(self) -> str:
        return self.registry_code.severity

    @property
    def summary(self) -> str:
        return self.registry_code.summary

    @property
    def explanation(self) -> str:
        return self.registry_code.explanation


RULES: dict[str, LintRule] = {}
"""Every lint rule by code, in registration order (sorted by code where it matters)."""


def lint_rule(code: str, *, bad: str, good: str) -> Callable[[LintCheck], LintCheck]:
    """Register a check as lint rule `code`, a code dsl/codes.py's registry already holds."""
    if not (code.startswith("L") and code[1:].isdigit() and len(code) == 4):
        raise ValueError(f"lint codes look like `L012`, not `{code}`")
    if code not in CODES:
        raise ValueError(f"lint code {code} is not in dsl/codes.py's registry")
    if CODES[code].severity not in ("warning", "note"):
        raise ValueError(f"a lint is a warning or a note, not `{CODES[code].severity}`")

    def decorate(check: LintCheck) -> LintCheck:
        rule = LintRule(code, bad, good, check)
        if code in RULES and RULES[code] != rule:
            raise ValueError(f"lint rule {code} is registered twice")
        RULES[code] = rule
        return check

    return decorate


# ---------------------------------------------------------------------------------------------
# The context


def _children(node: object) -> Iterator[object]:
    for f in fields(node):  # type: ignore[arg-type]
        if not f.compare:
            continue
        value = getattr(node, f.name)
        if isinstance(value, tuple):
            yield from (v for v in value if is_dataclass(v))
        elif is_dataclass(value):
            yield value


@dataclass
class LintContext:
    """What a rule reads: the typed model, names (for spans) and the policy analysis."""

    spec: m.Spec
    resolution: Resolution
    analysis: PolicyAnalysis | None = None
    _nodes: dict[tuple[str, int], list[object]] = field(default_factory=dict, repr=False)
    _named: dict[tuple[str, int], list[object]] = field(default_factory=dict, repr=False)
    _indexed: bool = field(default=False, repr=False)

    # -- modules and spans ---------------------------------------------------------------------

    @functools.cached_property
    def modules_by_path(self) -> dict[str, Module]:
        return {mod.source.path: mod for mod in self.resolution.modules if mod.source is not None}

    def module_of(self, span: Span | None) -> Module | None:
        return self.modules_by_path.get(span.source.path) if span is not None else None

    def is_std(self, span: Span | None) -> bool:
        module = self.module_of(span)
        return module is not None and module.is_std

    def offset(self, origin: m.SourceRef | None) -> tuple[str, int] | None:
        if origin is None:
            return None
        module = self.modules_by_path.get(origin.file)
        if module is None or module.source is None:
            return None
        starts = module.source.line_starts()
        if not 1 <= origin.line <= len(starts):
            return None
        return origin.file, starts[origin.line - 1] + origin.column - 1

    def _index(self) -> None:
        stack: list[object] = [mod.syntax for mod in self.resolution.modules]
        while stack:
            node = stack.pop()
            span = getattr(node, "span", None)
            if isinstance(span, Span):
                self._nodes.setdefault((span.source.path, span.start), []).append(node)
            name = getattr(node, "name", None)
            if isinstance(name, s.Name | s.Str):
                # a declaration's origin is its name: index the declaration under it too
                key = (name.span.source.path, name.span.start)
                self._named.setdefault(key, []).append(node)
            stack.extend(_children(node))
        self._indexed = True

    def node_at(self, origin: m.SourceRef | None, kind: type[T]) -> T | None:
        """The syntax node of type `kind` that starts, or whose name starts, at `origin`."""
        where = self.offset(origin)
        if where is None:
            return None
        if not self._indexed:
            self._index()
        for node in (*self._nodes.get(where, ()), *self._named.get(where, ())):
            if isinstance(node, kind):
                return node
        return None

    def span(self, origin: m.SourceRef | None) -> Span | None:
        """A span for `origin`: the largest node starting there."""
        where = self.offset(origin)
        if where is None:
            return None
        if not self._indexed:
            self._index()
        nodes = self._nodes.get(where, ())
        spans = [n.span for n in nodes if isinstance(getattr(n, "span", None), Span)]  # type: ignore[attr-defined]
        return max(spans, key=lambda sp: sp.end) if spans else None

    # -- declarations --------------------------------------------------------------------------

    def tool_span(self, tool_id: str) -> Span | None:
        symbol = self.resolution.tool(tool_id)
        return symbol.span if symbol is not None else None

    def rules(self) -> Iterator[tuple[m.Rule, s.Rule | None]]:
        """Every rule once (an included policy's rules appear in each includer), with its node."""
        seen: set[tuple[str, str]] = set()
        for policy in self.spec.policies.values():
            for rule in policy.rules:
                key = (rule.policy, rule.label)
                if key in seen:
                    continue
                seen.add(key)
                yield rule, self.node_at(rule.origin, s.Rule)

    def rule_by_label(self, label: str | None, policy: str | None = None) -> m.Rule | None:
        if not label:
            return None
        candidates = [self.spec.policies[policy]] if policy in self.spec.policies else []
        candidates += list(self.spec.policies.values())
        for pol in candidates:
            for rule in pol.rules:
                if label in (rule.label, f"{rule.policy}.{rule.label.partition('.')[2]}"):
                    return rule
        return None

    @functools.cached_property
    def tool_ids(self) -> list[str]:
        """Every tool's id, sorted."""
        return sorted(self.spec.tools)

    def selected_tools(self, selector: m.Selector) -> list[m.Tool]:
        """The tools a policy selector names (any kind of tool; sorted by id)."""
        found = selected_ids([selector], self.spec.tools, self.tool_ids)
        return [self.spec.tools[i] for i in sorted(found)]


"""Tools a planner can be shown (patterns on a surface select only these)."""


def rule_head(node: s.Rule) -> Span:
    """A rule from its label (or effect) to its last selector: what a rule lint underlines."""
    end = max(sel.span.end for sel in node.selectors) if node.selectors else node.effect_span.end
    return Span(node.span.source, node.span.start, end)


def selector_nodes(node: s.Rule | None) -> tuple[object, ...]:
    return node.selectors if node is not None else ()


def rule_name(rule: m.Rule) -> str:
    """How messages name a rule: its label, or `policy#N`."""
    return rule.label
