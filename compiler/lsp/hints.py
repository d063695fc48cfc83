"""Inlay hints where the compiler knows what the text does not show: a rule the policy analysis
found never wins (and what beats it) or never matches, and a duration written in a form other
than its plainest (`90m` is `1h30m`, `7200s` is `2h`)."""

from __future__ import annotations

from collections.abc import Iterator

from harnessc.dsl import syntax as s
from harnessc.dsl.source import Source, Span
from lsprotocol import types as lsp

from ..analysis.concrete import format_duration
from .navigate import model_rules
from .outline import walk
from .positions import Positions
from .workspace import Build

_SAID = {
    "never-wins": "never wins",
    "unsatisfiable": "never matches",
    "undecided": "not decided by the analysis",
}


def hints(
    build: Build, source: Source, start: int, end: int, positions: Positions
) -> list[lsp.InlayHint]:
    """The hints of the part [start, end) of `source`, one of the build's files."""
    module = build.module(build.path_of(source))
    if module is None or module.source is not source:
        return []
    found: list[lsp.InlayHint] = []
    for item in module.syntax.items:
        if item.span.end < start or item.span.start > end:
            continue
        if isinstance(item, s.Policy):
            for rule in item.items:
                if isinstance(rule, s.Rule) and start <= rule.span.end and rule.span.start <= end:
                    found.extend(_rule_hints(build, rule, positions))
        for node in walk([item]):
            if isinstance(node, s.Duration) and start <= node.span.start <= end:
                plain = format_duration(node.ms)
                if plain != node.text:
                    found.append(_after(node.span, f"= {plain}", positions, lsp.InlayHintKind.Type))
    return sorted(found, key=lambda h: (h.position.line, h.position.character))


def _rule_hints(build: Build, rule: s.Rule, positions: Positions) -> Iterator[lsp.InlayHint]:
    found = model_rules(build, rule)
    analysis = build.result.analysis
    if found and analysis is not None:
        labels = {r.label for r in found}
        said: set[str] = set()
        for finding in analysis.findings:
            text = _SAID.get(finding.kind)
            if finding.rule not in labels or text is None:
                continue
            if finding.kind == "never-wins" and finding.other_rule:
                text = f"shadowed by `{finding.other_rule}`"
            if len(found) > 1:
                text += f" under `{finding.policy}`"
            if text not in said:
                said.add(text)
                hint = _after(rule.effect_span, f"{text}", positions, None)
                hint.tooltip = finding.message
                yield hint


def _after(
    span: Span, label: str, positions: Positions, kind: lsp.InlayHintKind | None
) -> lsp.InlayHint:
    position = positions.position(span.source, span.end)
    return lsp.InlayHint(
        position=position, label=label, kind=kind, padding_left=True, padding_right=True
    )
