"""Set aside the declarations that have errors, and every declaration that depends on one.

A stage that reports an error about one declaration need not stop the others from being
checked: `set_aside` takes the resolution and the errors so far and returns the resolution of
the declarations without errors, less every declaration that refers to one set aside, directly
or through others (a policy rule naming a tool whose block had a syntax error; an agent whose
policy did not lower). The next stage sees only these, all valid, so it never reports a
mistake again, nor one that is only a consequence of it. What a set-aside declaration would
have declared joins the poisoned names (compiler/poison.py), which checks that look at the
whole build ("this selector selects nothing") read to keep quiet.

A declaration is set aside when an error's primary span lies in it, or when it holds a
reference left unbound because it may name something a skipped declaration would have declared
(`Resolution.unresolved`); in a policy, only the rule that holds the error or the reference is
set aside, and the policy's other rules are checked on. Headers and imports are never set
aside: an import's errors leave the references through it unbound, which sets their
declarations aside instead.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import replace

from harnessc.dsl import syntax as s
from harnessc.dsl.diagnostics import Diagnostic, Severity
from harnessc.dsl.source import Source, Span
from harnessc.runtime.model import Spec

from .lower import lower_program
from .poison import poison_of
from .resolve import Module, Resolution

__all__ = ["lower_sound", "set_aside"]

_KEYWORDS: dict[type, str] = {
    s.Connection: "connection",
    s.Runtime: "runtime",
    s.Fact: "fact",
    s.Label: "label",
    s.Tool: "tool",
    s.Extend: "extend",
    s.Surface: "surface",
    s.Policy: "policy",
    s.RiskTable: "risk_table",
    s.Mcp: "mcp",
    s.Skill: "skill",
    s.Agent: "agent",
    s.Workflow: "workflow",
    s.Test: "test",
}
"""The declarations that may be set aside, by the keyword that starts them."""


class _Owners:
    """The top-level declaration that holds a span, for every module of the build."""

    def __init__(self, modules: Iterable[Module]) -> None:
        self.starts: dict[Source, list[int]] = {}
        self.items: dict[Source, list[object]] = {}
        for module in modules:
            if module.source is None:
                continue
            items: list[object] = [i for i in module.syntax.items if type(i) in _KEYWORDS]
            self.items[module.source] = items
            self.starts[module.source] = [i.span.start for i in items]  # type: ignore[attr-defined]

    def owner(self, span: Span) -> object | None:
        starts = self.starts.get(span.source)
        if not starts:
            return None
        index = bisect_right(starts, span.start) - 1
        if index < 0:
            return None
        item = self.items[span.source][index]
        return item if span.end <= item.span.end else None  # type: ignore[attr-defined]

    def unit(self, span: Span) -> object | None:
        """What is set aside for an error or a reference at `span`: the rule that holds it in
        a policy (the policy's other rules are checked on), else its declaration."""
        item = self.owner(span)
        if isinstance(item, s.Policy):
            for rule in item.items:
                if isinstance(rule, s.Rule) and _within(span, rule.span):
                    return rule
        return item


def set_aside(resolution: Resolution, diagnostics: Iterable[Diagnostic]) -> Resolution:
    """The resolution without the declarations that have errors and those that depend on
    them; `resolution` itself when there is nothing to set aside."""
    errors = [d.primary.span for d in diagnostics if d.severity is Severity.ERROR and d.primary]
    if not errors and not resolution.unresolved and not resolution.poison:
        return resolution
    owners = _Owners(resolution.modules)
    faulty: dict[int, object] = {}
    for span in errors:
        _add(faulty, owners.unit(span))
    for span in resolution.unresolved:
        _add(faulty, owners.unit(span))
    faulty = _with_dependents(resolution, owners, faulty)
    faulty.update(_tests_without_policy(resolution, faulty))
    if not faulty:
        return resolution
    modules = [_without(module, faulty) for module in resolution.modules]
    by_key = {module.key: module for module in modules}
    return replace(
        resolution,
        modules=modules,
        poison=poison_of(
            ((key, module.syntax) for key, module in by_key.items()),
            resolution.poison.incomplete,
        ),
        unresolved=[],
    )


def _within(inner: Span, outer: Span) -> bool:
    return outer.start <= inner.start and inner.end <= outer.end


def _add(faulty: dict[int, object], item: object | None) -> None:
    if item is not None:
        faulty[id(item)] = item


def _with_dependents(
    resolution: Resolution, owners: _Owners, faulty: dict[int, object]
) -> dict[int, object]:
    """`faulty` and every declaration that refers to one of them, directly or through others."""
    if not faulty:
        return faulty
    users: dict[int, list[object]] = {}
    for span, symbol in resolution.references.items():
        user = owners.unit(span)
        target = owners.owner(symbol.span)
        if user is not None and target is not None and user is not target:
            users.setdefault(id(target), []).append(user)
    found = dict(faulty)
    pending = list(faulty.values())
    while pending:
        item = pending.pop()
        for user in users.get(id(item), ()):
            if id(user) not in found:
                found[id(user)] = user
                pending.append(user)
    return found


def _tests_without_policy(resolution: Resolution, faulty: dict[int, object]) -> dict[int, object]:
    """Tests that name no policy judge under the only policy of their module (or of the root
    module): when one of those is set aside or did not parse, which one that is cannot be
    told."""
    unsure = {
        module.key
        for module in resolution.modules
        if resolution.poison.declares(module.key, "policy")
        or any(isinstance(i, s.Policy) and id(i) in faulty for i in module.syntax.items)
    }
    if not unsure:
        return {}
    roots_unsure = any(m.is_root and m.key in unsure for m in resolution.modules)
    found: dict[int, object] = {}
    for module in resolution.modules:
        if not roots_unsure and module.key not in unsure:
            continue
        for item in module.syntax.items:
            if isinstance(item, s.Test) and not any(
                isinstance(a, s.Attr) and a.key == "policy" for a in item.items
            ):
                found[id(item)] = item
    return found


def _without(module: Module, faulty: dict[int, object]) -> Module:
    items = module.syntax.items
    kept = tuple(_rules_kept(i, faulty) for i in items if id(i) not in faulty)
    if len(kept) == len(items) and all(a is b for a, b in zip(kept, items, strict=True)):
        return module
    set_aside = tuple(_declared(i) for i in items if id(i) in faulty)
    syntax = replace(module.syntax, items=kept, broken=module.syntax.broken + set_aside)
    return replace(module, syntax=syntax)


def _rules_kept(item: s.Declaration, faulty: dict[int, object]) -> s.Declaration:
    """A policy without its rules that are set aside; any other declaration as it is."""
    if not isinstance(item, s.Policy) or not any(id(r) in faulty for r in item.items):
        return item
    return replace(item, items=tuple(r for r in item.items if id(r) not in faulty))


def _declared(item: object) -> s.Broken:
    """What a set-aside declaration declares, as a skipped one records it."""
    keyword = _KEYWORDS[type(item)]
    if isinstance(item, s.Extend):
        return s.Broken(keyword, None, span=item.span)  # it declares nothing
    name = item.name  # type: ignore[attr-defined]
    text = name.value if isinstance(name, s.Str) else name.text
    tools: tuple[str, ...] = ()
    if isinstance(item, s.Skill):
        tools = tuple(c.tool.name.text for c in item.items if isinstance(c, s.PrivateTool))
    return s.Broken(keyword, text, tools, span=item.span)  # type: ignore[attr-defined]


def lower_sound(sound: Resolution, diagnostics: list[Diagnostic]) -> tuple[Spec | None, Resolution]:
    """Stage lower on the declarations `sound` holds: those it reports errors about, and what
    depends on them, are set aside and the rest lowered again, until a model is built (or
    nothing more can be set aside). Returns the model and the resolution of what it holds;
    each error is added to `diagnostics` once."""
    reported = {_identity(d) for d in diagnostics}
    while True:
        lowered = lower_program(sound)
        for diagnostic in lowered.diagnostics:
            if _identity(diagnostic) not in reported:
                reported.add(_identity(diagnostic))
                diagnostics.append(diagnostic)
        if lowered.spec is not None:
            return lowered.spec, sound
        narrower = set_aside(sound, lowered.diagnostics)
        if narrower is sound:
            return None, sound
        sound = narrower


def _identity(diagnostic: Diagnostic) -> tuple[object, ...]:
    primary = diagnostic.primary
    return (diagnostic.code, diagnostic.message, primary.span if primary else diagnostic.path)
