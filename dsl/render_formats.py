"""Rendering diagnostics: human (colour on a tty), plain, JSON, SARIF 2.1.0, GitHub annotations."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePath

from .codes import lookup
from .diagnostics import Diagnostic, Label, Severity, Suppressed, sort_diagnostics

MAX_SHOWN = 10


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
    suppressed: Sequence[Suppressed] = (),
) -> str:
    """Render sorted, de-duplicated diagnostics; human output is capped at ``limit``.

    ``fmt`` is ``human``, ``plain``, ``json``, ``sarif`` (SARIF 2.1.0) or ``github`` (workflow
    annotations); the machine formats are never capped. Only SARIF shows the ``suppressed``
    findings, each marked with its suppression; the other formats leave them out.
    """
    ordered = sort_diagnostics(diagnostics)
    if fmt == "json":
        return json.dumps([diagnostic_to_json(d) for d in ordered], indent=2)
    if fmt in ("sarif", "github"):
        return render_sarif(ordered, suppressed) if fmt == "sarif" else render_github(ordered)
    shown = ordered if limit is None else ordered[:limit]
    blocks = [render_human(d, colour=colour and fmt == "human") for d in shown]
    hidden = len(ordered) - len(shown)
    if hidden:
        blocks.append(f"... and {hidden} more diagnostic{'s' if hidden != 1 else ''}")
    if ordered:
        blocks.append(summary_line(ordered))
    return "\n\n".join(blocks)


def print_diagnostics(
    diagnostics: Iterable[Diagnostic],
    fmt: str = "human",
    stream=None,
    suppressed: Sequence[Suppressed] = (),
) -> None:
    stream = stream or sys.stderr
    colour = fmt == "human" and use_colour(stream)
    text = render(diagnostics, fmt, colour=colour, suppressed=suppressed)
    if text:
        stream.write(text + "\n")


# ---------------------------------------------------------------------------------------------
# Machine formats for CI: SARIF 2.1.0 (GitHub code scanning) and GitHub workflow annotations

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
EXPLAIN_URI = "harnessc:explain"
"""harnessc's installed documentation of its codes, as URIs: `harnessc:explain/CODE` is what
`harnessc explain CODE` prints (which also accepts the URI), and `harnessc:explain` the set of
them. harnessc has no public home page to point SARIF at; these resolve wherever it is installed."""
INFORMATION_URI = EXPLAIN_URI
_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "note"}
_GITHUB_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "notice"}


def help_uri(code: str) -> str:
    """The URI of a code's explanation: `harnessc:explain/H201` (`harnessc explain H201`)."""
    return f"{EXPLAIN_URI}/{lookup(code).code}"


def _region(label: Label) -> dict:
    source = label.span.source
    line, column = source.location(label.span.start)
    end_line, end_column = source.location(max(label.span.end, label.span.start))
    return {
        "startLine": line,
        "startColumn": column,
        "endLine": end_line,
        "endColumn": end_column,
    }


def artifact_location(path: str) -> dict:
    """A relative path is resolved against the checkout (`%SRCROOT%`); an absolute one is a
    `file:` URI, as SARIF requires."""
    if PurePath(path).is_absolute():
        return {"uri": Path(path).as_uri()}
    return {"uri": PurePath(path).as_posix(), "uriBaseId": "%SRCROOT%"}


def _location(label: Label, index: int | None = None) -> dict:
    location: dict = {
        "physicalLocation": {
            "artifactLocation": artifact_location(label.span.source.path),
            "region": _region(label),
        }
    }
    if index is not None:
        location["id"] = index
        if label.message:
            location["message"] = {"text": label.message}
    return location


def _full_text(diagnostic: Diagnostic) -> str:
    lines = [diagnostic.message]
    lines += [f"note: {note}" for note in diagnostic.notes]
    if diagnostic.help:
        lines.append(f"help: {diagnostic.help}")
    return "\n".join(lines)


def _suppression(suppressed: Suppressed) -> dict:
    entry: dict = {"kind": suppressed.kind.value}
    if suppressed.justification:
        entry["justification"] = suppressed.justification
    return entry


def sarif_log(
    diagnostics: Sequence[Diagnostic], version: str = "", suppressed: Sequence[Suppressed] = ()
) -> dict:
    """One SARIF run: a rule per code used, a result per diagnostic, and one per suppressed
    finding with its `suppressions` (§3.27.23), all sorted by file and position."""
    entries: list[tuple[Diagnostic, Suppressed | None]] = [(d, None) for d in diagnostics]
    entries += [(s.diagnostic, s) for s in suppressed]
    entries.sort(key=lambda entry: entry[0].sort_key())
    codes = sorted({d.code for d, _ in entries})
    rules = []
    for code in codes:
        entry = lookup(code)
        rules.append(
            {
                "id": entry.code,
                "name": entry.slug,
                "shortDescription": {"text": entry.summary},
                "fullDescription": {"text": entry.explanation},
                "helpUri": help_uri(code),
                "help": {"text": entry.explanation},
                "defaultConfiguration": {"level": _SARIF_LEVEL[Severity(entry.severity)]},
            }
        )
    results = []
    for d, silenced in entries:
        result: dict = {
            "ruleId": d.code,
            "ruleIndex": codes.index(d.code),
            "level": _SARIF_LEVEL[d.severity],
            "message": {"text": _full_text(d)},
        }
        primary = d.primary
        if primary is not None:
            result["locations"] = [_location(primary)]
            related = [label for label in d.labels if not label.primary]
            if related:
                result["relatedLocations"] = [
                    _location(label, i) for i, label in enumerate(related, 1)
                ]
        elif d.path:
            result["locations"] = [
                {"physicalLocation": {"artifactLocation": artifact_location(d.path)}}
            ]
        if silenced is not None:
            result["suppressions"] = [_suppression(silenced)]
        results.append(result)
    return sarif_envelope(rules, results, version)


def sarif_envelope(rules: list[dict], results: list[dict], version: str = "") -> dict:
    """A SARIF 2.1.0 log of one run of harnessc: its `rules` (reportingDescriptors) and
    `results`, paths relative to the checkout (`%SRCROOT%`)."""
    driver: dict = {"name": "harnessc", "informationUri": INFORMATION_URI, "rules": rules}
    if version:
        driver["version"] = version
        driver["semanticVersion"] = version
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {"driver": driver},
                "columnKind": "unicodeCodePoints",
                "originalUriBaseIds": {"%SRCROOT%": {"uri": "./"}},
                "results": results,
            }
        ],
    }


def render_sarif(diagnostics: Sequence[Diagnostic], suppressed: Sequence[Suppressed] = ()) -> str:
    from harnessc import __version__

    log = sarif_log(diagnostics, __version__, suppressed)
    return json.dumps(log, indent=2, ensure_ascii=False)


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotation(diagnostic: Diagnostic) -> str:
    """`::warning file=F,line=L,col=C,endLine=L2,endColumn=C2,title=CODE::message`.

    `endColumn` is the column of the span's last character (GitHub counts it inclusively).
    """
    command = _GITHUB_COMMAND[diagnostic.severity]
    props: list[str] = []
    primary = diagnostic.primary
    if primary is not None:
        source = primary.span.source
        line, column = source.location(primary.span.start)
        last = max(primary.span.start, primary.span.end - 1)
        end_line, end_column = source.location(last)
        props += [
            f"file={_escape_property(source.path)}",
            f"line={line}",
            f"col={column}",
            f"endLine={end_line}",
            f"endColumn={end_column}",
        ]
    elif diagnostic.path:
        props.append(f"file={_escape_property(diagnostic.path)}")
    props.append(f"title={_escape_property(diagnostic.code)}")
    return f"::{command} {','.join(props)}::{_escape_data(_full_text(diagnostic))}"


def render_github(diagnostics: Sequence[Diagnostic]) -> str:
    return "\n".join(github_annotation(d) for d in diagnostics)
