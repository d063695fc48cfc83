"""Diagnostics as the protocol shows them: code, severity, range, related locations and a link
to the code's explanation (`harnessc:explain/CODE`, the URI SARIF uses)."""

from __future__ import annotations

from harnessc.dsl.diagnostics import Diagnostic, Severity
from harnessc.dsl.render_formats import help_uri
from lsprotocol import types as lsp

from .positions import Positions, path_to_uri
from .workspace import Build

SOURCE = "harnessc"
_SEVERITY = {
    Severity.ERROR: lsp.DiagnosticSeverity.Error,
    Severity.WARNING: lsp.DiagnosticSeverity.Warning,
    Severity.NOTE: lsp.DiagnosticSeverity.Information,
}
_START = lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))


def to_lsp(diagnostic: Diagnostic, build: Build, positions: Positions) -> lsp.Diagnostic:
    """One diagnostic of a build; its notes and help follow the message, as the CLI prints them.

    `data` carries the help line and the primary span's offsets: code actions read the fix
    from there (actions.py)."""
    primary = diagnostic.primary
    message = diagnostic.message
    if primary is not None and primary.message:
        message += f" ({primary.message})"
    lines = [message, *(f"note: {n}" for n in diagnostic.notes)]
    if diagnostic.help:
        lines.append(f"help: {diagnostic.help}")
    related = [
        lsp.DiagnosticRelatedInformation(
            lsp.Location(
                path_to_uri(build.path_of(label.span.source)), positions.range(label.span)
            ),
            label.message or "here",
        )
        for label in diagnostic.labels
        if not label.primary
    ]
    return lsp.Diagnostic(
        range=positions.range(primary.span) if primary is not None else _START,
        message="\n".join(lines),
        severity=_SEVERITY[diagnostic.severity],
        code=diagnostic.code,
        code_description=lsp.CodeDescription(href=help_uri(diagnostic.code)),
        source=SOURCE,
        related_information=related or None,
        data={
            "help": diagnostic.help,
            "start": primary.span.start if primary is not None else None,
            "end": primary.span.end if primary is not None else None,
        },
    )
