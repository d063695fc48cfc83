"""The governed runtime that generated packages import; it imports no compiler dependency.

The public API is closed: every name in `__all__` below, loaded on first use (so importing one
submodule, as the compiler does for the model, does not load the rest). The path of a call:

    from harnessc.runtime import Facts, Harness, Spec
    h = Harness(Spec.from_json(text))
    s = h.session(agent="planner", actor={"user": "u-1", "role": "engineer"}, task="t-1",
                  facts=Facts.of({"workspace.open": True}, connected={"change_platform"}))
    s.expose(query)  →  s.normalize(tool, tool_call_id, args)  →  s.decide(call)
    →  s.request_approval(call) / h.approve(request_id, by=actor)  →  s.invoke(call)
    →  s.evidence()

See docs/runtime.md for the guide.

- Harness, HarnessError: the facade (runtime/harness.py)
- Session, surface_tools: sessions, delegation and skills (runtime/sessions.py)
- Facts, McpState, Availability, ToolAvailability, AvailabilityChecker: availability
- PendingCall, Refusal, REFUSAL_CODES, Validator, ToolNames, thaw: normalize
- Decision, CallContext, PolicyEngine: compiled decisions (runtime/policy.py)
- ApprovalRequest, ApprovalGrant, ApprovalOutcome, ApprovalError: approvals
- Result, Outcome, ExecutorContext: executors
- Evidence, EvidenceItem: evidence
- Exposure, ExposureTrace: exposure
- Execution, input_hash, canonical_json: canonical identity of a call
- Action, ActionState, IllegalTransitionError: the action lifecycle
- EventStore, SQLiteStore, MemoryStore, Event, Verification, Projections: the event log
- Spec: the compiled model
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "REFUSAL_CODES",
    "Action",
    "ActionState",
    "ApprovalError",
    "ApprovalGrant",
    "ApprovalOutcome",
    "ApprovalRequest",
    "Availability",
    "AvailabilityChecker",
    "CallContext",
    "Decision",
    "Event",
    "EventStore",
    "Evidence",
    "EvidenceItem",
    "Execution",
    "ExecutorContext",
    "Exposure",
    "ExposureTrace",
    "Facts",
    "Harness",
    "HarnessError",
    "IllegalTransitionError",
    "McpState",
    "MemoryStore",
    "Outcome",
    "PendingCall",
    "PolicyEngine",
    "Projections",
    "Refusal",
    "Result",
    "SQLiteStore",
    "Session",
    "Spec",
    "ToolAvailability",
    "ToolNames",
    "Validator",
    "Verification",
    "canonical_json",
    "input_hash",
    "surface_tools",
    "thaw",
]

_WHERE = {
    "REFUSAL_CODES": "normalize",
    "Action": "lifecycle",
    "ActionState": "lifecycle",
    "ApprovalError": "approvals",
    "ApprovalGrant": "approvals",
    "ApprovalOutcome": "approvals",
    "ApprovalRequest": "approvals",
    "Availability": "availability",
    "AvailabilityChecker": "availability",
    "CallContext": "policy",
    "Decision": "policy",
    "Event": "events",
    "EventStore": "store",
    "Evidence": "evidence",
    "EvidenceItem": "evidence",
    "Execution": "canonical",
    "ExecutorContext": "executors",
    "Exposure": "exposure",
    "ExposureTrace": "exposure",
    "Facts": "availability",
    "Harness": "harness",
    "HarnessError": "harness",
    "IllegalTransitionError": "lifecycle",
    "McpState": "availability",
    "MemoryStore": "store",
    "Outcome": "executors",
    "PendingCall": "normalize",
    "PolicyEngine": "policy",
    "Projections": "projections",
    "Refusal": "normalize",
    "Result": "executors",
    "SQLiteStore": "store",
    "Session": "sessions",
    "Spec": "model",
    "ToolAvailability": "availability",
    "ToolNames": "normalize",
    "Validator": "normalize",
    "Verification": "store",
    "canonical_json": "canonical",
    "input_hash": "canonical",
    "surface_tools": "sessions",
    "thaw": "normalize",
}

if TYPE_CHECKING:
    from .approvals import ApprovalError, ApprovalGrant, ApprovalOutcome, ApprovalRequest
    from .availability import Availability, AvailabilityChecker, Facts, McpState, ToolAvailability
    from .canonical import Execution, canonical_json, input_hash
    from .events import Event
    from .evidence import Evidence, EvidenceItem
    from .executors import ExecutorContext, Outcome, Result
    from .exposure import Exposure, ExposureTrace
    from .harness import Harness, HarnessError
    from .lifecycle import Action, ActionState, IllegalTransitionError
    from .model import Spec
    from .normalize import REFUSAL_CODES, PendingCall, Refusal, ToolNames, Validator, thaw
    from .policy import CallContext, Decision, PolicyEngine
    from .projections import Projections
    from .sessions import Session, surface_tools
    from .store import EventStore, MemoryStore, SQLiteStore, Verification


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
