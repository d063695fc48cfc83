"""Stage validate: the cross-layer errors of language.md §12 over the typed model."""

from __future__ import annotations

from harnessc.dsl.diagnostics import Diagnostic
from harnessc.runtime.model import Spec

from .resolve import Resolution


def validate_spec(spec: Spec, resolution: Resolution) -> list[Diagnostic]:
    """Errors across layers: surfaces, availability, conditions, policies, delegation, skills."""
    return []
