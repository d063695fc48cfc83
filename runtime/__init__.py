"""The governed runtime that generated packages import; it imports no compiler dependency.

The public API is closed: every name in `__all__` below, loaded on first use (so importing one
submodule, as the compiler does for the model, does not load the rest). `__all__` is the one
list: `_WHERE`, the imports for type checkers and the list below follow it (checked by
tests/test_public_api.py). The path of a call:

    from harnessc.runtime import Facts, Harness, Spec
    h = Harness(Spec.from_json(text))
    s = h.session(agent="planner", actor={"user": "u-1", "role": "engineer"}, task="t-1",
                  facts=Facts.of({"workspace.open": True}, connected={"change_platform"}))
    s.expose(query)  →  s.normalize(tool, tool_call_id, args)  →  s.decide(call)
    →  s.request_approval(call) / h.approve(request_id, by=actor)  →  s.invoke(call)
    →  s.evidence()

See docs/runtime.md for the guide.

- Harness, HarnessError: the facade (runtime/harness.py)
- Session: sessions, delegation and skills (runtime/sessions.py); surface_tools: the public
  tools of a surface (runtime/semantics.py)
- Facts, McpState, Availability, ToolAvailability, AvailabilityChecker, AvailabilityRefusal:
  availability (an `unavailable` refusal lists the failed conditions)
- PendingCall, Refusal, REFUSAL_CODES, Validator, ToolNames, thaw: normalize
- Decision, CallContext, PolicyEngine: compiled decisions (runtime/policy.py)
- Ledger, HistoryTerms: a session's provenance index and history (runtime/history.py);
  prelude_ledger: the ledger of a session's earlier steps (SessionStep) before a call;
  facts_after: the session's facts after those steps (what their `on_success` added)
- ApprovalRequest, ApprovalGrant, ApprovalOutcome, ApprovalError: approvals
- Result, Outcome, Accepted, ExecutorContext: executors (Accepted: asynchronous work)
- Evidence, EvidenceItem: evidence
- Exposure, ExposureTrace, load_tool_embeddings, LazyQueryEmbedder: exposure, and the tool
  embeddings a generated package ships (runtime/exposure.py, runtime/embedding.py)
- Execution, input_hash, canonical_json: canonical identity of a call
- Action, ActionState, ActionError, IllegalTransitionError: the action lifecycle
- FunctionCalling, ToolCall, AdapterError, openai_tool, openai_responses_tool, anthropic_tool,
  input_schema, tool_description: OpenAI and Anthropic function-calling adapters
- mcp_tool, strict_parameters, StrictParameters: MCP `tools/list` and OpenAI strict-mode
  exports (runtime/exports.py)
- EventStore, SQLiteStore, MemoryStore, Event, Verification, Projections: the event log;
  UnverifiedLog: what the operators' commands raise on a log whose chain does not verify;
  open_store: opens one by URL (`sqlite:///PATH`, `postgresql://…`, `memory://`)
- Checkpoint, CheckpointError, LogKey, LogKeyError: checkpoints of the log's head and the
  optional log key (runtime/integrity.py)
- PostgresStore: the event log on PostgreSQL (runtime/pgstore.py; needs psycopg)
- Workflows, WorkflowError, GateOutcome: durable workflows (runtime/workflows.py; needs dbos)
- Spec, SessionStep: the compiled model, and a step of a test's session before its call
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "REFUSAL_CODES",
    "Accepted",
    "Action",
    "ActionError",
    "ActionState",
    "AdapterError",
    "ApprovalError",
    "ApprovalGrant",
    "ApprovalOutcome",
    "ApprovalRequest",
    "Availability",
    "AvailabilityChecker",
    "AvailabilityRefusal",
    "CallContext",
    "Checkpoint",
    "CheckpointError",
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
    "FunctionCalling",
    "GateOutcome",
    "Harness",
    "HarnessError",
    "HistoryTerms",
    "IllegalTransitionError",
    "LazyQueryEmbedder",
    "Ledger",
    "LogKey",
    "LogKeyError",
    "McpState",
    "MemoryStore",
    "Outcome",
    "PendingCall",
    "PolicyEngine",
    "PostgresStore",
    "Projections",
    "Refusal",
    "Result",
    "SQLiteStore",
    "Session",
    "SessionStep",
    "Spec",
    "StrictParameters",
    "ToolAvailability",
    "ToolCall",
    "ToolNames",
    "UnverifiedLog",
    "Validator",
    "Verification",
    "WorkflowError",
    "Workflows",
    "anthropic_tool",
    "canonical_json",
    "facts_after",
    "input_hash",
    "input_schema",
    "load_tool_embeddings",
    "mcp_tool",
    "open_store",
    "openai_responses_tool",
    "openai_tool",
    "prelude_ledger",
    "strict_parameters",
    "surface_tools",
    "thaw",
    "tool_description",
]

_WHERE = {
    "REFUSAL_CODES": "normalize",
    "Accepted": "executors",
    "Action": "lifecycle",
    "ActionError": "lifecycle",
    "ActionState": "lifecycle",
    "AdapterError": "adapters",
    "ApprovalError": "approvals",
    "ApprovalGrant": "approvals",
    "ApprovalOutcome": "approvals",
    "ApprovalRequest": "approvals",
    "Availability": "availability",
    "AvailabilityChecker": "availability",
    "AvailabilityRefusal": "availability",
    "CallContext": "policy",
    "Checkpoint": "integrity",
    "CheckpointError": "integrity",
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
    "FunctionCalling": "adapters",
    "GateOutcome": "workflows",
    "Harness": "harness",
    "HarnessError": "harness",
    "HistoryTerms": "history",
    "IllegalTransitionError": "lifecycle",
    "LazyQueryEmbedder": "embedding",
    "Ledger": "history",
    "LogKey": "integrity",
    "LogKeyError": "integrity",
    "McpState": "availability",
    "MemoryStore": "store",
    "Outcome": "executors",
    "PendingCall": "normalize",
    "PolicyEngine": "policy",
    "PostgresStore": "pgstore",
    "Projections": "projections",
    "Refusal": "normalize",
    "SessionStep": "model",
    "Result": "executors",
    "SQLiteStore": "store",
    "Session": "sessions",
    "Spec": "model",
    "StrictParameters": "exports",
    "ToolAvailability": "availability",
    "ToolCall": "adapters",
    "ToolNames": "normalize",
    "UnverifiedLog": "chain",
    "Validator": "normalize",
    "Verification": "chain",
    "WorkflowError": "workflows",
    "Workflows": "workflows",
    "anthropic_tool": "adapters",
    "canonical_json": "canonical",
    "facts_after": "history",
    "input_hash": "canonical",
    "input_schema": "adapters",
    "load_tool_embeddings": "exposure",
    "mcp_tool": "exports",
    "prelude_ledger": "history",
    "strict_parameters": "exports",
    "open_store": "stores",
    "openai_responses_tool": "adapters",
    "openai_tool": "adapters",
    "surface_tools": "semantics",
    "thaw": "normalize",
    "tool_description": "adapters",
}

if TYPE_CHECKING:
    from .adapters import (
        AdapterError,
        FunctionCalling,
        ToolCall,
        anthropic_tool,
        input_schema,
        openai_responses_tool,
        openai_tool,
        tool_description,
    )
    from .approvals import ApprovalError, ApprovalGrant, ApprovalOutcome, ApprovalRequest
    from .availability import (
        Availability,
        AvailabilityChecker,
        AvailabilityRefusal,
        Facts,
        McpState,
        ToolAvailability,
    )
    from .canonical import Execution, canonical_json, input_hash
    from .chain import UnverifiedLog, Verification
    from .embedding import LazyQueryEmbedder
    from .events import Event
    from .evidence import Evidence, EvidenceItem
    from .executors import Accepted, ExecutorContext, Outcome, Result
    from .exports import StrictParameters, mcp_tool, strict_parameters
    from .exposure import Exposure, ExposureTrace, load_tool_embeddings
    from .harness import Harness, HarnessError
    from .history import HistoryTerms, Ledger, facts_after, prelude_ledger
    from .integrity import Checkpoint, CheckpointError, LogKey, LogKeyError
    from .lifecycle import Action, ActionError, ActionState, IllegalTransitionError
    from .model import SessionStep, Spec
    from .normalize import REFUSAL_CODES, PendingCall, Refusal, ToolNames, Validator, thaw
    from .pgstore import PostgresStore
    from .policy import CallContext, Decision, PolicyEngine
    from .projections import Projections
    from .semantics import surface_tools
    from .sessions import Session
    from .store import EventStore, MemoryStore, SQLiteStore
    from .stores import open_store
    from .workflows import GateOutcome, WorkflowError, Workflows


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
