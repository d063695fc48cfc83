"""Diagnostics as data: a code, a message, labelled spans, notes and a help line."""

from __future__ import annotations

import errno
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from .codes import lookup
from .source import Span


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


@dataclass(frozen=True, slots=True)
class Label:
    span: Span
    message: str = ""
    primary: bool = True


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One finding about a spec.

    >>> from harnessc.dsl.source import Source, Span
    >>> src = Source("a.harness", "tool x {")
    >>> d = Diagnostic.error("H102", "expected `}`", Span(src, 8, 8))
    >>> d.slug
    'unclosed-block'
    """

    code: str
    message: str
    severity: Severity
    labels: tuple[Label, ...] = ()
    notes: tuple[str, ...] = ()
    help: str | None = None
    # A diagnostic about a file as a whole (missing, unreadable) has a path and no span.
    path: str | None = field(default=None)

    @property
    def slug(self) -> str:
        return lookup(self.code).slug

    @property
    def primary(self) -> Label | None:
        for label in self.labels:
            if label.primary:
                return label
        return None

    @property
    def file(self) -> str | None:
        primary = self.primary
        return primary.span.source.path if primary else self.path

    def sort_key(self) -> tuple[str, int, str]:
        primary = self.primary
        return (self.file or "", primary.span.start if primary else -1, self.code)

    @classmethod
    def make(
        cls,
        code: str,
        message: str,
        span: Span | None,
        label: str = "",
        *,
        secondary: Sequence[tuple[Span, str]] = (),
        notes: Sequence[str] = (),
        help: str | None = None,
        path: str | None = None,
        severity: Severity | None = None,
    ) -> Diagnostic:
        labels: list[Label] = []
        if span is not None:
            labels.append(Label(span, label, True))
        labels.extend(Label(s, m, False) for s, m in secondary)
        sev = severity or Severity(lookup(code).severity)
        return cls(code, message, sev, tuple(labels), tuple(notes), help, path)

    error = make


class Reporter:
    """What a checking stage shares: the diagnostics it has found, and `report` to add one
    (the arguments of `Diagnostic.make`)."""

    diagnostics: list[Diagnostic]

    def report(
        self,
        code: str,
        message: str,
        span: Span | None,
        label: str = "",
        *,
        secondary: Sequence[tuple[Span, str]] = (),
        notes: Sequence[str] = (),
        help: str | None = None,
    ) -> None:
        self.diagnostics.append(
            Diagnostic.make(code, message, span, label, secondary=secondary, notes=notes, help=help)
        )


class SuppressionKind(StrEnum):
    """How a finding was silenced, in SARIF's words (2.1.0 §3.35.2)."""

    IN_SOURCE = "inSource"
    """a `# harnessc: ignore[…]` comment in the spec"""
    EXTERNAL = "external"
    """the lint configuration (`[tool.harnessc]`, `--select`, `--ignore`)"""


@dataclass(frozen=True, slots=True)
class Suppressed:
    """A warning or note an ignore silenced: commands leave it out; SARIF lists it, marked
    suppressed, so code scanning shows it as such."""

    diagnostic: Diagnostic
    kind: SuppressionKind
    justification: str = ""


CLIP = 80
"""The most characters of source text (a name, a path, an expression) a message quotes."""


def clipped(text: str) -> str:
    """`text` short enough to quote in a message: its two ends around `…`, when it is longer
    than `CLIP` (the caret under the source line shows the whole of it).

    >>> clipped("x" * 100) == "x" * 40 + "…" + "x" * 40
    True
    """
    return text if len(text) <= CLIP else f"{text[: CLIP // 2]}…{text[-CLIP // 2 :]}"


def os_reason(error: OSError) -> str:
    """The operating system's reason for `error`, as a message says it."""
    if error.errno == errno.ENAMETOOLONG:
        return "the path is longer than the file system allows"
    return (error.strerror or type(error).__name__).lower()


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.severity is Severity.ERROR for d in diagnostics)


def sort_diagnostics(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    unique: dict[tuple, Diagnostic] = {}
    for d in diagnostics:
        primary = d.primary
        key = (d.code, d.message, d.file, primary.span.start if primary else None)
        unique.setdefault(key, d)
    return sorted(unique.values(), key=Diagnostic.sort_key)
