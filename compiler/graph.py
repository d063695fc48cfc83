"""Stage graph: workflow DAG checks with networkx (cycles, reachability, bindings)."""

from __future__ import annotations

from harnessc.dsl.diagnostics import Diagnostic
from harnessc.runtime.model import Spec

from .resolve import Resolution


def check_workflows(spec: Spec, resolution: Resolution) -> list[Diagnostic]:
    """Errors and notes about every workflow's step graph."""
    return []
