"""The runtime's module paths from before its subpackages: each still imports, with a warning.

In 0.1.0 the runtime was one flat folder; code (and generated packages) written for it imports
`harnessc.runtime.sessions` and the like. Those paths stay for one release: importing one gives
the module at its new path (the same object, so a patch through either name reaches both) and a
DeprecationWarning naming the new path. `harnessc.runtime` installs the finder when imported.

Two old modules share their name with a package now (`exposure`, `workflows`): their names
read through the package (`moved_names`), with the same warning.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import warnings
from collections.abc import Callable
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

__all__ = ["MOVED", "install", "moved_names"]

# old module (under harnessc.runtime) → its path under harnessc.runtime now; `exposure` and
# `workflows` are packages now, whose `__getattr__` gives the old module's names (`moved_names`)
MOVED: dict[str, str] = {
    "adapters": "integrations.adapters",
    "announce": "log._announce",
    "approval_view": "session.approval_view",
    "approvals": "session.approvals",
    "availability": "judge.availability",
    "calls": "session.calls",
    "canonical": "model.canonical",
    "chain": "log.chain",
    "completion": "session._completion",
    "conditions": "judge.conditions",
    "delegation": "session._delegation",
    "durable": "workflows.durable",
    "embedding": "exposure.embedding",
    "events": "log.events",
    "evidence": "session.evidence",
    "evidence_terms": "judge.evidence_terms",
    "executors": "session.executors",
    "exports": "integrations.exports",
    "exposure_data": "model.exposure",
    "group_commit": "log._group_commit",
    "harness": "session.harness",
    "history": "judge.history",
    "integrity": "log.integrity",
    "interpreter": "workflows.interpreter",
    "lexical": "exposure.lexical",
    "lifecycle": "session.lifecycle",
    "mcp_client": "integrations.mcp_client",
    "normalize": "judge.normalize",
    "operations": "session.operations",
    "pgstore": "log.postgres",
    "policy": "judge.policy",
    "projections": "log.projections",
    "provenance": "judge.provenance",
    "recorded": "session.recorded",
    "replay": "session.replay",
    "restore": "session._restore",
    "semantics": "model.semantics",
    "session_terms": "model.session_terms",
    "sessions": "session.sessions",
    "shadow": "session.shadow",
    "store": "log.store",
    "stores": "log.open",
    "telemetry": "integrations.telemetry",
    "workflow_log": "workflows.appender",
    "workflow_plan": "workflows.plan",
    "workflow_steps": "workflows.steps",
}
_PREFIX = "harnessc.runtime."


class _MovedFinder(MetaPathFinder, Loader):
    """Finds an old path only after the real finders failed, and loads the module it moved to."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if not fullname.startswith(_PREFIX) or fullname[len(_PREFIX) :] not in MOVED:
            return None
        return ModuleSpec(fullname, self)

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        return importlib.import_module(_new_path(spec.name))

    def exec_module(self, module: ModuleType) -> None:
        """The module was executed when imported at its new path."""

    def get_code(self, fullname: str) -> Any:
        """`python -m` at an old path (runpy runs the code, it does not import the module)."""
        new = _new_path(fullname)
        return compile(f"import runpy\nrunpy.run_module({new!r}, run_name='__main__')", new, "exec")


def _new_path(old: str) -> str:
    new = _PREFIX + MOVED[old[len(_PREFIX) :]]
    warnings.warn(
        f"{old} has moved to {new}; import it from there (or from harnessc.runtime)."
        " The old path will be removed in the next release.",
        DeprecationWarning,
        stacklevel=3,
    )
    return new


def install() -> None:
    """Put the finder last on sys.meta_path (once), after the finders of real files."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedFinder())


def moved_names(package: str, module: str) -> Callable[[str], Any]:
    """A package's `__getattr__` for the names of the module it replaced, now `package.module`."""

    def __getattr__(name: str) -> Any:
        target = importlib.import_module(f"{package}.{module}")
        if name.startswith("__") or importlib.util.find_spec(f"{package}.{name}") is not None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if not hasattr(target, name):
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        warnings.warn(
            f"{package}.{name} has moved to {package}.{module}.{name}; import it from there (or"
            " from harnessc.runtime). The old path will be removed in the next release.",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(target, name)

    return __getattr__
