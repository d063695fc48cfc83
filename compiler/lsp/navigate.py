"""Hover, go to definition and find references, from what the resolver bound: every reference's
span names its symbol (`Resolution.references`), every symbol knows where it is declared."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeVar

from harnessc.dsl import syntax as s
from harnessc.dsl.codes import CODES
from harnessc.dsl.source import Source, Span
from harnessc.runtime import model as m
from harnessc.runtime.model.semantics import selects

from ..lower.core import origin
from ..resolve import Symbol
from .workspace import Build

T = TypeVar("T")


@dataclass(frozen=True)
class Found:
    """The symbol under the cursor and the span of the name there."""

    symbol: Symbol
    span: Span


def symbols(build: Build) -> Iterator[Symbol]:
    """Every declared symbol of the build."""
    resolution = build.result.resolution
    if resolution is None:
        return
    for table in resolution.globals.values():
        yield from table.values()
    for kinds in resolution.scoped.values():
        for table in kinds.values():
            yield from table.values()
    for table in resolution.locals.values():
        yield from table.values()


def _inside(span: Span, source: Source, offset: int) -> bool:
    return span.source is source and span.start <= offset <= span.end


def symbol_at(build: Build, source: Source, offset: int) -> Found | None:
    """The declaration or the reference at `offset` of `source` (one of the build's modules)."""
    resolution = build.result.resolution
    if resolution is None:
        return None
    best: Found | None = None
    for span, symbol in resolution.references.items():
        if _inside(span, source, offset) and (
            best is None or span.end - span.start < len(best.span.text)
        ):
            best = Found(symbol, span)
    if best is not None:
        return best
    for symbol in symbols(build):
        if _inside(symbol.span, source, offset):
            return Found(symbol, symbol.span)
    return None


def same(a: Symbol, b: Symbol, a_build: Build, b_build: Build) -> bool:
    """One declaration, seen from two builds (each build has symbols of its own)."""
    return (
        a.kind == b.kind
        and a.name == b.name
        and a.span.start == b.span.start
        and a_build.path_of(a.span.source) == b_build.path_of(b.span.source)
    )


def references(build: Build, symbol: Symbol, origin_build: Build) -> Iterator[Span]:
    """The spans in `build` that name `symbol` (a symbol of `origin_build`)."""
    resolution = build.result.resolution
    if resolution is None:
        return
    for span, other in resolution.references.items():
        if other is symbol or same(other, symbol, build, origin_build):
            yield span


def everywhere(
    builds: list[Build], origin_build: Build, symbol: Symbol
) -> list[tuple[Build, Span]]:
    """The references to `symbol` (a symbol of `origin_build`) in every build: a symbol of an
    imported module is referenced wherever a build imports it. `origin_build`'s come first."""
    found = [(origin_build, span) for span in references(origin_build, symbol, origin_build)]
    for other in builds:
        if other is not origin_build:
            found += [(other, span) for span in references(other, symbol, origin_build)]
    return found


# ---------------------------------------------------------------------------------------------
# Hover

_CODE = re.compile(r"\b[HL]\d{3}\b")


def explain(code: str) -> str | None:
    known = CODES.get(code)
    if known is None:
        return None
    head = f"**{known.code}** `{known.slug}` ({known.severity})"
    return f"{head}\n\n{known.summary}.\n\n{known.explanation}"


def code_at(source: Source, offset: int) -> str | None:
    """A diagnostic code written at `offset` (in a `# harnessc: ignore[…]` comment, say)."""
    line, _ = source.location(offset)
    start = source.line_starts()[line - 1]
    for match in _CODE.finditer(source.line_text(line)):
        if start + match.start() <= offset <= start + match.end():
            return match.group()
    return None


def hover_text(build: Build, source: Source, offset: int) -> str | None:
    """What is at `offset`, then the explanation of each diagnostic reported there."""
    codes = [
        d.code
        for d in build.own()
        if d.primary is not None and _inside(d.primary.span, source, offset)
    ]
    parts = [_hover_subject(build, source, offset), *(explain(c) for c in dict.fromkeys(codes))]
    shown = [part for part in parts if part]
    return "\n\n---\n\n".join(shown) if shown else None


def _hover_subject(build: Build, source: Source, offset: int) -> str | None:
    code = code_at(source, offset)
    if code is not None:
        return explain(code)
    found = symbol_at(build, source, offset)
    if found is not None:
        return describe(build, found)
    glob = _module_glob_at(build, source, offset)
    if glob is not None:
        return glob
    rule, selector = _rule_at(build, source, offset)
    if rule is not None:
        return describe_rule(build, rule, selector)
    noted = _extended_field_at(build, source, offset)
    if noted is not None:
        return noted
    return _surface_pattern_at(build, source, offset)


def describe(build: Build, found: Found) -> str:
    symbol = found.symbol
    node = symbol.node
    where = f"{symbol.module.name}:{symbol.span.line}"
    head = f"**{symbol.kind}** `{symbol.name}`  \n*{where}*"
    if isinstance(node, s.Tool):
        return "\n\n".join([head, *_tool_lines(build, symbol.name, node)])
    if isinstance(node, s.Rule):
        return describe_rule(build, node, None)
    parts = [head]
    items = getattr(node, "items", ())
    text = _attr_text(items, "summary") or _attr_text(items, "persona") or _description(node)
    if text:
        parts.append(text)
    span = getattr(node, "span", None)
    if isinstance(span, Span):  # the declaration's first line: `step go = call deploy(…)`
        parts.append(f"```harness\n{span.source.line_text(span.line).strip()}\n```")
    return "\n\n".join(parts)


def _description(node: object) -> str | None:
    description = getattr(node, "description", None)
    return description.value if isinstance(description, s.Str) else None


def _attr_text(items: object, key: str) -> str | None:
    for item in items if isinstance(items, tuple) else ():
        if isinstance(item, s.Attr) and item.key == key:
            return " ".join(v.value if isinstance(v, s.Str) else v.span.text for v in item.values)  # type: ignore[union-attr]
    return None


def _tool_lines(build: Build, tool_id: str, node: s.Tool) -> list[str]:
    """A tool's summary, effects, risk, trust, labels, input and output: the model's (risk
    defaulted, a tool with operations their union, what an `extend` adds merged in) when the
    build has one, else as written."""
    model = build.result.model
    tool = model.tools.get(tool_id) if model is not None else None
    lines: list[str] = []
    if tool is not None:
        if tool.summary:
            lines.append(tool.summary)
        facts = [f"effects: {' '.join(tool.effects) or 'none'}", f"risk: {tool.risk}"]
        if tool.trust is not None:
            facts.append(f"trust: {tool.trust}")
        if tool.labels:
            facts.append(f"labels: {', '.join(tool.labels)}")
        lines.append(" · ".join(facts))
    else:
        summary = _attr_text(node.items, "summary")
        if summary:
            lines.append(summary)
        effects, risk = _attr_text(node.items, "effects"), _attr_text(node.items, "risk")
        lines.append(f"effects: {effects or 'none'} · risk: {risk or 'default'}")
    for item in node.items:
        if isinstance(item, s.SchemaAttr):
            lines.append(f"```harness\n{_dedent(item.span)}\n```")
    if tool is not None and tool.output is not None and tool.output.type.holds_unlisted():
        lines.append(
            "Unlisted fields (an open record's `...`, an `any`) carry the tool's trust: "
            f"{tool.trust or 'untrusted'}; a field's own trust speaks for listed fields only."
        )
    return lines


def _dedent(span: Span) -> str:
    """A block's text as written, its lines moved left by its first line's indentation."""
    line_text = span.source.line_text(span.line)
    indent = len(line_text) - len(line_text.lstrip())
    lines = [line_text[indent:]] + [
        text[indent:] if text[:indent].isspace() else text.lstrip()
        for text in span.text.splitlines()[1:]
    ]
    return "\n".join(lines)


def _tool_list(text: str, ids: list[str]) -> str:
    shown = ", ".join(f"`{t}`" for t in ids[:20]) or "no tool"
    more = f" and {len(ids) - 20} more" if len(ids) > 20 else ""
    return f"`{text}` selects {len(ids)} tool(s): {shown}{more}"


def _module_glob_at(build: Build, source: Source, offset: int) -> str | None:
    """What a module glob (`lib.*`, `std.workspace.*`) at `offset` selects: the module's tools."""
    resolution = build.result.resolution
    if resolution is None:
        return None
    for span, module in resolution.module_globs.items():
        if _inside(span, source, offset):
            ids = sorted(
                name
                for name, symbol in resolution.globals.get("tool", {}).items()
                if symbol.module is module
            )
            return _tool_list(span.text, ids)
    return None


def _surface_pattern_at(build: Build, source: Source, offset: int) -> str | None:
    """What an `expose` or `hide` pattern at `offset` selects (from the model: a build with
    errors has none)."""
    model = build.result.model
    if model is None:
        return None
    for node in _items_at(build, source, offset, s.Surface):
        surface = next(
            (x for x in model.surfaces.values() if x.origin == origin(node.name.span)), None
        )
        if surface is None:
            continue
        written: dict[type, list[s.Pattern]] = {s.Expose: [], s.Hide: []}
        for item in node.items:
            if isinstance(item, s.Expose | s.Hide):
                written[type(item)].extend(item.patterns)
        for kind, selectors in ((s.Expose, surface.expose), (s.Hide, surface.hide)):
            for pattern, selector in zip(written[kind], selectors, strict=False):
                if _inside(pattern.span, source, offset):
                    ids = sorted(t.id for t in model.tools.values() if selects(selector, t))
                    return _tool_list(pattern.text, ids)
    return None


def _items_at(build: Build, source: Source, offset: int, kind: type[T]) -> Iterator[T]:
    """The declarations of type `kind` around `offset` in `source`."""
    for module in build.result.resolution.modules if build.result.resolution else ():
        if module.source is source:
            for item in module.syntax.items:
                if _inside(item.span, source, offset) and isinstance(item, kind):
                    yield item


def _extended_field_at(build: Build, source: Source, offset: int) -> str | None:
    """A field an `extend` names, as each tool it extends has it after the merge: its type,
    trust, labels and whether it is secret."""
    model = build.result.model
    resolution = build.result.resolution
    if model is None or resolution is None:
        return None
    for item in _items_at(build, source, offset, s.Extend):
        for block in item.items:
            if not isinstance(block, s.SchemaAttr):
                continue
            for f in block.schema.fields:
                if not _inside(f.name.span, source, offset):
                    continue
                lines = []
                for name in item.tools:
                    symbol = resolution.references.get(name.span)
                    tool = model.tools.get(symbol.name) if symbol is not None else None
                    schema = getattr(tool, block.key, None) if tool is not None else None
                    found = _field_of(schema, f.name.text.split("."))
                    if tool is not None and found is not None:
                        lines.append(f"- `{tool.id}`: {_field_facts(found)}")
                head = f"**{block.key} field** `{f.name.text}`"
                return "\n".join([head, "", *lines]) if lines else head
    return None


def _field_of(schema: m.Schema | None, parts: list[str]) -> m.Field | None:
    fields = schema.fields if schema is not None else ()
    found: m.Field | None = None
    for part in parts:
        found = next((f for f in fields if f.name == part), None)
        if found is None:
            return None
        inner = found.type
        while inner.item is not None:
            inner = inner.item
        fields = inner.fields
    return found


def _field_facts(f: m.Field) -> str:
    facts = [f"`{f.type.name}{'?' if f.type.optional else ''}`"]
    if f.trust is not None:
        facts.append(f"trust: {f.trust}")
    if f.labels:
        facts.append(f"labels: {', '.join(f.labels)}")
    if f.secret:
        facts.append("secret")
    return " · ".join(facts)


def _rule_at(build: Build, source: Source, offset: int) -> tuple[s.Rule | None, int | None]:
    """The rule whose effect or selector is at `offset`, and the selector's index."""
    for item in _items_at(build, source, offset, s.Policy):
        for rule in item.items:
            if not isinstance(rule, s.Rule):
                continue
            if _inside(rule.effect_span, source, offset):
                return rule, None
            for index, selector in enumerate(rule.selectors):
                if _inside(selector.span, source, offset):
                    return rule, index
    return None, None


def model_rules(build: Build, rule: s.Rule) -> list[m.Rule]:
    """The model's rules written at `rule` (one per policy that includes it)."""
    model = build.result.model
    if model is None:
        return []
    where = origin(rule.span)
    return [r for p in model.policies.values() for r in p.rules if r.origin == where]


def describe_rule(build: Build, rule: s.Rule, selector: int | None) -> str:
    """A rule's effect, reason and what beats it (the policy analysis's findings), or what one
    of its selectors matches."""
    found = model_rules(build, rule)
    label = found[0].label if found else (rule.label.text if rule.label else rule.effect)
    parts = [f"**rule** `{label}`: **{rule.effect.upper()}**"]
    if found and found[0].reason:
        parts.append(f"reason: {found[0].reason}")
    if selector is not None and found:
        chosen = found[0].selectors[selector]
        model = build.result.model
        assert model is not None
        matched = sorted(t.id for t in model.tools.values() if selects(chosen, t))
        parts.append(_tool_list(chosen.text, matched))
    analysis = build.result.analysis
    if analysis is not None and found:
        labels = {r.label for r in found}
        for finding in analysis.findings:
            if finding.rule in labels:
                parts.append(f"{finding.kind}: {finding.message}")
        for rule_model in found:
            witness = analysis.witness(rule_model.policy, rule_model.label)
            if witness is not None:
                call = json.dumps(witness.call.args, sort_keys=True, default=str)
                parts.append(
                    f"wins under `{rule_model.policy}`, e.g. `{witness.call.tool}({call})`"
                )
    elif not found:
        parts.append("*the policy analysis runs once the spec has no errors*")
    return "\n\n".join(parts)
