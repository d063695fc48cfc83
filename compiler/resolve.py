"""Resolve modules, imports and names (placeholder until the resolver lands)."""

from __future__ import annotations

from dataclasses import dataclass, field

from harnessc.dsl.diagnostics import Diagnostic


@dataclass
class Resolution:
    diagnostics: list[Diagnostic] = field(default_factory=list)


def resolve_program(roots, load_file) -> Resolution:
    return Resolution()
