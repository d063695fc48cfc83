"""Inline suppressions: `# harnessc: ignore[L012]` or `# harnessc: ignore[L012, L013] why`.

The marker may follow other text in the comment (`# reject ends the run; harnessc:
ignore[L101]`).

A suppression silences the listed codes for a finding reported on the comment's own line (a
trailing comment) or, when the comment stands alone on its line, on the next line. Text after
the bracket is the justification; the generated docs of a build list every suppression with it.

`split_findings` sets apart what the lint configuration or a comment silences, for every command
that checks; it lives outside the lint rules' package so that `check` does not load the rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from harnessc.dsl.diagnostics import Diagnostic, Severity, Suppressed, SuppressionKind
from harnessc.dsl.source import Span

from .config import LintConfig
from .resolve import Resolution

_SUPPRESSION = re.compile(
    r"\bharnessc:\s*ignore\[(?P<codes>[^\]]*)\](?P<reason>.*)$", re.IGNORECASE
)


@dataclass(frozen=True)
class Suppression:
    """One `# harnessc: ignore[…]` comment and the source line it applies to."""

    file: str
    line: int
    """The line whose findings it silences (1-based)."""
    codes: tuple[str, ...]
    reason: str
    """The justification: the text after the bracket, or else before the marker."""
    span: Span
    """The comment itself."""


def lint_suppressions(resolution: Resolution) -> list[Suppression]:
    """Every inline suppression of the build's modules, sorted by file and line."""
    found: list[Suppression] = []
    for module in resolution.modules:
        source = module.source
        if source is None:
            continue
        for comment in module.syntax.comments:
            match = _SUPPRESSION.search(comment.text)
            if match is None:
                continue
            codes = tuple(c.strip().upper() for c in match.group("codes").split(",") if c.strip())
            line, column = source.location(comment.span.start)
            alone = not source.line_text(line)[: column - 1].strip()
            reason = match.group("reason").strip().lstrip("—–-:;,. ").strip()
            if not reason:  # the justification may come before the marker instead
                reason = comment.text[: match.start()].lstrip("# ").rstrip("—–-:;,. ")
            found.append(
                Suppression(source.path, line + 1 if alone else line, codes, reason, comment.span)
            )
    return sorted(found, key=lambda sup: (sup.file, sup.line))


def suppression_of(
    diagnostic: Diagnostic, by_line: dict[tuple[str, int], dict[str, Suppression]]
) -> Suppression | None:
    """The comment that silences a warning or note, if one does (errors are never silenced)."""
    primary = diagnostic.primary
    if diagnostic.severity is Severity.ERROR or primary is None:
        return None
    return by_line.get((primary.span.source.path, primary.span.line), {}).get(diagnostic.code)


def suppression_index(
    suppressions: list[Suppression],
) -> dict[tuple[str, int], dict[str, Suppression]]:
    """(file, line) → code → the first comment on that line that silences the code."""
    index: dict[tuple[str, int], dict[str, Suppression]] = {}
    for sup in suppressions:
        codes = index.setdefault((sup.file, sup.line), {})
        for code in sup.codes:
            codes.setdefault(code, sup)
    return index


@dataclass
class Findings:
    kept: list[Diagnostic] = field(default_factory=list)
    suppressed: list[Suppressed] = field(default_factory=list)


def split_findings(
    diagnostics: Iterable[Diagnostic], resolution: Resolution | None, config: LintConfig
) -> Findings:
    """Set apart the warnings and notes that the configuration or an inline comment silences,
    each with how it was silenced; errors are always kept."""
    index = suppression_index(lint_suppressions(resolution)) if resolution is not None else {}
    found = Findings()
    for d in diagnostics:
        if d.severity is Severity.ERROR:
            found.kept.append(d)
        elif not config.enabled(d.code):
            why = f"`{d.code}` is not selected by the lint configuration"
            found.suppressed.append(Suppressed(d, SuppressionKind.EXTERNAL, why))
        elif (comment := suppression_of(d, index)) is not None:
            found.suppressed.append(Suppressed(d, SuppressionKind.IN_SOURCE, comment.reason))
        else:
            found.kept.append(d)
    return found


def filter_findings(
    diagnostics: Iterable[Diagnostic], resolution: Resolution | None, config: LintConfig
) -> list[Diagnostic]:
    """Drop warnings and notes that the configuration or an inline comment silences."""
    return split_findings(diagnostics, resolution, config).kept
