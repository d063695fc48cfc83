"""What planning the cases of one spec shares: the spec, each surface's tools, the defaults."""

from __future__ import annotations

from dataclasses import dataclass, field

from harnessc.runtime.model import Spec
from harnessc.runtime.model.semantics import surface_tools

__all__ = ["EXECUTION_KEYS", "MAX_PATHS", "RESOURCE", "CaseContext"]

RESOURCE = {"tenant": "tenant-1"}
EXECUTION_KEYS = {"command", "cwd", "env", "timeout", "target"}
MAX_PATHS = 32
"""Workflow paths planned per workflow; more are left out with a note."""


@dataclass
class CaseContext:
    """What the planners of one spec's cases share, passed to each: the spec, and each
    surface's public tools (computed on first use, kept for this planning only)."""

    spec: Spec
    surfaces: dict[str, frozenset[str]] = field(default_factory=dict)

    def surface(self, name: str | None) -> frozenset[str]:
        """The public tools of the surface `name` (none when there is no such surface)."""
        spec = self.spec
        if name is None or name not in spec.surfaces:
            return frozenset()
        found = self.surfaces.get(name)
        if found is None:
            found = self.surfaces[name] = frozenset(surface_tools(spec, spec.surfaces[name]))
        return found
