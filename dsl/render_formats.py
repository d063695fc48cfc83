"""Machine formats for CI: SARIF 2.1.0 (GitHub code scanning) and GitHub workflow annotations."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path, PurePath

from .codes import lookup
from .diagnostics import Diagnostic, Label, Severity

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
INFORMATION_URI = "https://github.com/harnessc/harnessc"
_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "note"}
_GITHUB_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "notice"}


def help_uri(code: str) -> str:
    """The docs page of a code, relative to the repository root: lint rules have their own."""
    entry = lookup(code)
    folder = "rules" if code.startswith("L") else "diagnostics"
    return f"docs/{folder}/{entry.code}-{entry.slug}.md"


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


def _artifact(path: str) -> dict:
    """A relative path is resolved against the checkout (`%SRCROOT%`); an absolute one is a
    `file:` URI, as SARIF requires."""
    if PurePath(path).is_absolute():
        return {"uri": Path(path).as_uri()}
    return {"uri": PurePath(path).as_posix(), "uriBaseId": "%SRCROOT%"}


def _location(label: Label, index: int | None = None) -> dict:
    location: dict = {
        "physicalLocation": {
            "artifactLocation": _artifact(label.span.source.path),
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


def sarif_log(diagnostics: Sequence[Diagnostic], version: str = "") -> dict:
    """One SARIF run: a rule per code used, a result per diagnostic (sorted input expected)."""
    codes = sorted({d.code for d in diagnostics})
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
    for d in diagnostics:
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
            result["locations"] = [{"physicalLocation": {"artifactLocation": _artifact(d.path)}}]
        results.append(result)
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


def render_sarif(diagnostics: Sequence[Diagnostic]) -> str:
    from harnessc import __version__

    return json.dumps(sarif_log(diagnostics, __version__), indent=2, ensure_ascii=False)


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
