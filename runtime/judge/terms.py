"""The history terms of a spec (`count`, `sum`, `called`, `succeeded`, `seen`), each once, and
which of them a tool's calls feed: what the ledger (runtime/judge/history.py) keeps and the
conditions (runtime/judge/conditions.py) evaluate."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from ..model.ir import History, Spec, Tool
from ..model.semantics import selects, tool_view
from ..model.session_terms import history_key, reads_result, session_terms
from .provenance import Source, spec_defaults

__all__ = ["HistoryTerms"]


class HistoryTerms:
    """The distinct `History` nodes of a spec (every policy's rules, tools' `requires`, workflow
    conditions), each keyed by its canonical JSON, and which of them a tool's calls feed."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.nodes: dict[str, History] = {}
        self._settle_on_result: dict[str, bool] = {}
        self._selected: dict[tuple[Any, ...], bool] = {}
        self._by_tool: dict[str, list[str]] = {}
        self._views: dict[tuple[str, str | None], dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._defaults: dict[tuple[str, str], tuple[str, Source]] | None = None
        self.read = False
        """Whether anything of the spec reads session state (a provenance, quantified, extract
        or history term): when nothing does, sessions need not keep their ledger current."""
        for policy in spec.policies.values():
            for rule in policy.rules:
                self._collect(rule.condition)
                if rule.grant is not None:
                    self._collect(rule.grant.condition)
        for tool in spec.tools.values():
            self._collect(tool.requires)
        for workflow in spec.workflows.values():
            for step in workflow.steps:
                self._collect(step.condition)
                self._collect(step.when)

    @property
    def defaults(self) -> dict[tuple[str, str], tuple[str, Source]]:
        """The spec's defaults as sources (`provenance.spec_defaults`), made once per spec and
        shared by every session's index."""
        found = self._defaults
        if found is None:
            found = self._defaults = spec_defaults(self.spec)
        return found

    @property
    def defaulted(self) -> frozenset[str]:
        """The names of the arguments some tool gives a default (the compiled deciders look
        a default up only for those)."""
        return frozenset(name for _, name in self.defaults)

    def _collect(self, cond: object) -> None:
        for term in session_terms(cond):
            self.read = True
            if isinstance(term, History):
                self.intern(term)

    def intern(self, node: History) -> str:
        """The key of a history term, adding it to the catalogue when new."""
        key = history_key(node)
        if key not in self.nodes:
            self.read = True
            with self._lock:
                self.nodes[key] = node
                self._settle_on_result[key] = node.func == "succeeded" or (
                    reads_result(node.where) or reads_result(node.field)
                )
                self._by_tool.clear()
        return key

    def settles_on_result(self, key: str) -> bool:
        """Whether an earlier call enters the term when its result arrives (`succeeded`, or a
        `when`/`sum` field reading `result.*`) rather than when it is authorised."""
        return self._settle_on_result[key]

    def feeding(self, tool_id: str) -> list[str]:
        """The call terms (not `seen`) whose selectors may select a call of this tool."""
        found = self._by_tool.get(tool_id)
        if found is None:
            tool = self.spec.tools.get(tool_id)
            found = []
            if tool is not None:
                for key, node in list(self.nodes.items()):
                    if node.func != "seen" and _may_select(node, tool):
                        found.append(key)
            self._by_tool[tool_id] = found
        return found

    def view(self, tool_id: str, op: str | None = None) -> dict[str, Any]:
        """A call's tool view (`tool.*`), computed once per tool and operation."""
        found = self._views.get((tool_id, op))
        if found is None:
            tool = self.spec.tools.get(tool_id)
            if tool is None:
                return {"id": tool_id}
            found = tool_view(tool, op if op in tool.operations else None)
            self._views[tool_id, op] = found
        return found

    def tools_fed(self, key: str) -> list[str]:
        """The tools whose calls may feed a call term."""
        return [tool_id for tool_id in self.spec.tools if key in self.feeding(tool_id)]

    def selects(self, key: str, view: Mapping[str, Any]) -> bool:
        """Whether the term's selectors select a call with this tool view (`tool.*`)."""
        tool_id = view.get("id")
        cache = (key, tool_id, view.get("risk"), view.get("effects"))
        found = self._selected.get(cache)
        if found is None:
            tool = self.spec.tools.get(tool_id) if isinstance(tool_id, str) else None
            node = self.nodes[key]
            found = tool is not None and any(selects(s, tool, view) for s in node.selectors)
            if len(self._selected) < 65536:
                self._selected[cache] = found
        return found


def _may_select(node: History, tool: Tool) -> bool:
    views = [tool_view(tool), *(tool_view(tool, op) for op in tool.operations)]
    return any(selects(s, tool, v) for s in node.selectors for v in views)
