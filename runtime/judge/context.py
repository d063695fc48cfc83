"""A call as policy sees it (`CallContext`): what the policies, the evidence of session terms and
the availability rules read of one frozen call."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .history import Ledger

__all__ = ["CallContext"]


@dataclass(slots=True)
class CallContext:
    """A frozen call as policy sees it: the tool id, normalized arguments and who, where, when.

    `facts` holds declared facts by name (`workspace.root`); `connected` and `running` the
    connections and runtimes that are up (`connected(c)`, `running(r)`); `execution` the call's
    execution parameters (`call.cwd`, `call.timeout`, …). Treat it as immutable.

    >>> CallContext("read_open", {"path": "/repo/a"}, actor={"role": "engineer"}).call
    {'tool_call_id': None}
    """

    tool_id: str
    args: Mapping[str, Any] = field(default_factory=dict)
    actor: Mapping[str, Any] = field(default_factory=dict)
    resource: Mapping[str, Any] = field(default_factory=dict)
    task: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, Any] = field(default_factory=dict)
    facts: Mapping[str, Any] = field(default_factory=dict)
    connected: frozenset[str] = frozenset()
    running: frozenset[str] = frozenset()
    tool_call_id: str | None = None
    execution: Mapping[str, Any] = field(default_factory=dict)
    ledger: Ledger | None = None
    """The session's provenance index and history (`runtime/judge/history.py`); None: nothing is
    known, so every value is from nowhere and every history term is zero or false."""

    @property
    def call(self) -> dict[str, Any]:
        """`call.*`: the execution parameters plus `tool_call_id`."""
        return {**self.execution, "tool_call_id": self.tool_call_id}
