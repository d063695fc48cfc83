"""Diagnostics as data: a code, a message, labelled spans, notes and a help line."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from .codes import lookup
from .source import Span

MAX_SHOWN = 10


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


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.severity is Severity.ERROR for d in diagnostics)


def sort_diagnostics(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    unique: dict[tuple, Diagnostic] = {}
    for d in diagnostics:
        primary = d.primary
        key = (d.code, d.message, d.file, primary.span.start if primary else None)
        unique.setdefault(key, d)
    return sorted(unique.values(), key=Diagnostic.sort_key)


# ---------------------------------------------------------------------------------------------
# Rendering


_COLOURS = {
    "error": "\x1b[1;31m",
    "warning": "\x1b[1;33m",
    "note": "\x1b[1;36m",
    "blue": "\x1b[1;34m",
    "bold": "\x1b[1m",
    "reset": "\x1b[0m",
}


def use_colour(stream) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return bool(getattr(stream, "isatty", lambda: False)())


def render_human(diagnostic: Diagnostic, colour: bool = False) -> str:
    """Render like a compiler: header, location, source line with carets, help."""

    def paint(name: str, text: str) -> str:
        return f"{_COLOURS[name]}{text}{_COLOURS['reset']}" if colour else text

    sev = diagnostic.severity.value
    out = [paint(sev, f"{sev}[{diagnostic.code}]") + paint("bold", f": {diagnostic.message}")]
    main_source = diagnostic.primary.span.source if diagnostic.primary else None
    # Labels in the primary label's file come first, in source order; other files after.
    labels = sorted(
        diagnostic.labels,
        key=lambda label: (label.span.source is not main_source, label.span.start),
    )
    if not labels:
        if diagnostic.path:
            out.append(paint("blue", "  --> ") + diagnostic.path)
    else:
        primary = diagnostic.primary or labels[0]
        lines = [label.span.source.location(label.span.start)[0] for label in labels]
        width = len(str(max(lines)))
        pad = " " * width
        out.append(f"{pad}{paint('blue', '--> ')}{primary.span}")
        out.append(f"{pad} {paint('blue', '|')}")
        previous_source = primary.span.source
        previous_line = None
        for label in labels:
            source = label.span.source
            if source is not previous_source:
                out.append(f"{pad}{paint('blue', '::: ')}{label.span}")
                previous_source = source
                previous_line = None
            line, column = source.location(label.span.start)
            same_line = previous_line == line
            if previous_line is not None and abs(line - previous_line) > 1:
                out.append(paint("blue", "..."))
            previous_line = line
            text = _printable(source.line_text(line))
            end_line, _ = source.location(max(label.span.start, label.span.end - 1))
            if end_line == line:
                length = max(1, label.span.end - label.span.start)
            else:
                length = max(1, len(text) - column + 1)
            length = min(length, max(1, len(text) - column + 1))
            text, column = _window(text, column, length)
            length = min(length, max(1, len(text) - column + 1))
            mark = "^" if label.primary else "-"
            underline = " " * (column - 1) + mark * length
            if label.message:
                underline += " " + label.message
            if not same_line:  # two labels on one line share the printed source line
                gutter = paint("blue", f"{line:>{width}} |")
                out.append(f"{gutter} {text}".rstrip())
            out.append(
                f"{pad} {paint('blue', '|')} " + paint(sev if label.primary else "blue", underline)
            )
        out.append(f"{pad} {paint('blue', '|')}")
    for note in diagnostic.notes:
        out.append(f"{paint('bold', 'note')}: {note}")
    if diagnostic.help:
        out.append(f"{paint('bold', 'help')}: {diagnostic.help}")
    return "\n".join(out)


_WINDOW = 100


def _printable(text: str) -> str:
    """A source line safe to print: tabs as spaces, control characters as U+FFFD."""
    return "".join(" " if ch == "\t" else (ch if ch.isprintable() else "\ufffd") for ch in text)


def _window(text: str, column: int, length: int) -> tuple[str, int]:
    """Cut a very long line to a window around the label; returns the text and new column."""
    if len(text) <= _WINDOW:
        return text, column
    start = max(0, column - 1 - _WINDOW // 3)
    end = start + _WINDOW
    prefix = "…" if start > 0 else ""
    suffix = "…" if end < len(text) else ""
    return prefix + text[start:end] + suffix, column - start + len(prefix)


def diagnostic_to_json(diagnostic: Diagnostic) -> dict:
    def label_json(label: Label) -> dict:
        source = label.span.source
        line, column = source.location(label.span.start)
        end_line, end_column = source.location(label.span.end)
        return {
            "file": source.path,
            "start": {"line": line, "column": column, "offset": label.span.start},
            "end": {"line": end_line, "column": end_column, "offset": label.span.end},
            "text": label.span.text,
            "message": label.message,
            "primary": label.primary,
        }

    return {
        "code": diagnostic.code,
        "slug": diagnostic.slug,
        "severity": diagnostic.severity.value,
        "message": diagnostic.message,
        "file": diagnostic.file,
        "labels": [label_json(label) for label in diagnostic.labels],
        "notes": list(diagnostic.notes),
        "help": diagnostic.help,
    }


def summary_line(diagnostics: Sequence[Diagnostic]) -> str:
    errors = sum(d.severity is Severity.ERROR for d in diagnostics)
    warnings = sum(d.severity is Severity.WARNING for d in diagnostics)
    parts = []
    if errors:
        parts.append(f"{errors} error{'s' if errors != 1 else ''}")
    if warnings:
        parts.append(f"{warnings} warning{'s' if warnings != 1 else ''}")
    notes = sum(d.severity is Severity.NOTE for d in diagnostics)
    if notes:
        parts.append(f"{notes} note{'s' if notes != 1 else ''}")
    return ", ".join(parts)


def render(
    diagnostics: Iterable[Diagnostic],
    fmt: str = "human",
    *,
    colour: bool = False,
    limit: int | None = MAX_SHOWN,
) -> str:
    """Render sorted, de-duplicated diagnostics; human output is capped at ``limit``.

    ``fmt`` is ``human``, ``plain``, ``json``, ``sarif`` (SARIF 2.1.0) or ``github`` (workflow
    annotations); the machine formats are never capped.
    """
    ordered = sort_diagnostics(diagnostics)
    if fmt == "json":
        return json.dumps([diagnostic_to_json(d) for d in ordered], indent=2)
    if fmt in ("sarif", "github"):
        from .render_formats import render_github, render_sarif  # they import this module

        return render_sarif(ordered) if fmt == "sarif" else render_github(ordered)
    shown = ordered if limit is None else ordered[:limit]
    blocks = [render_human(d, colour=colour and fmt == "human") for d in shown]
    hidden = len(ordered) - len(shown)
    if hidden:
        blocks.append(f"... and {hidden} more diagnostic{'s' if hidden != 1 else ''}")
    if ordered:
        blocks.append(summary_line(ordered))
    return "\n\n".join(blocks)


def print_diagnostics(diagnostics: Iterable[Diagnostic], fmt: str = "human", stream=None) -> None:
    stream = stream or sys.stderr
    text = render(diagnostics, fmt, colour=fmt == "human" and use_colour(stream))
    if text:
        stream.write(text + "\n")
