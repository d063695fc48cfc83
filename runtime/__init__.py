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

- Harness, HarnessError: the facade (runtime/session/harness.py)
- Session: sessions, delegation and skills (runtime/session/sessions.py); surface_tools: the public
  tools of a surface (runtime/model/semantics.py)
- Facts, McpState, Availability, ToolAvailability, AvailabilityChecker, AvailabilityRefusal:
  availability (an `unavailable` refusal lists the failed conditions)
- PendingCall, Refusal, REFUSAL_CODES, Validator, ToolNames, thaw: normalize
- Decision, CallContext, PolicyEngine: compiled decisions (runtime/judge/policy.py)
- Ledger, HistoryTerms: a session's provenance index and history (runtime/judge/history.py);
  prelude_ledger: the ledger of a session's earlier steps (SessionStep) before a call;
  facts_after: the session's facts after those steps (what their `on_success` added)
- ApprovalRequest, ApprovalGrant, ApprovalOutcome, ApprovalError: approvals
- Result, Outcome, Accepted, ExecutorContext: executors (Accepted: asynchronous work)
- open_within, resolve_within, PathEscapeError: an executor's file access confined to a root,
  symbolic links refused or resolved (runtime/session/files.py)
- Evidence, EvidenceItem: evidence
- Exposure, ExposureTrace, load_tool_embeddings, LazyQueryEmbedder: exposure, and the tool
  embeddings a generated package ships (runtime/exposure/ranker.py, runtime/exposure/embedding.py)
- Execution, input_hash, canonical_json: canonical identity of a call
- Action, ActionState, ActionError, IllegalTransitionError: the action lifecycle
- FunctionCalling, ToolCall, AdapterError, openai_tool, openai_responses_tool, anthropic_tool,
  input_schema, tool_description: OpenAI and Anthropic function-calling adapters
- mcp_tool, strict_parameters, StrictParameters: MCP `tools/list` and OpenAI strict-mode
  exports (runtime/integrations/exports.py)
- EventStore, SQLiteStore, MemoryStore, Event, Verification, Projections: the event log;
  UnverifiedLog: what the operators' commands raise on a log whose chain does not verify;
  open_store: opens one by URL (`sqlite:///PATH`, `postgresql://…`, `memory://`)
- Checkpoint, CheckpointError, LogKey, LogKeyError: checkpoints of the log's head and the
  optional log key (runtime/log/integrity.py)
- PostgresStore: the event log on PostgreSQL (runtime/log/postgres.py; needs psycopg)
- Workflows, WorkflowError, GateOutcome: durable workflows (runtime/workflows/manage.py; needs dbos)
- Spec, SessionStep: the compiled model, and a step of a test's session before its call;
  ModelSeal: what a build records of its `model.json`, so a package loads it unvalidated
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._moved import install as _install_moved

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
    "ModelSeal",
    "Outcome",
    "PathEscapeError",
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
    "open_within",
    "openai_responses_tool",
    "openai_tool",
    "prelude_ledger",
    "resolve_within",
    "strict_parameters",
    "surface_tools",
    "thaw",
    "tool_description",
]

_WHERE = {
    "REFUSAL_CODES": "judge.normalize",
    "Accepted": "session.executors",
    "Action": "session.lifecycle",
    "ActionError": "session.lifecycle",
    "ActionState": "session.lifecycle",
    "AdapterError": "integrations.adapters",
    "ApprovalError": "session.approvals",
    "ApprovalGrant": "session.approvals",
    "ApprovalOutcome": "session.approvals",
    "ApprovalRequest": "session.approvals",
    "Availability": "judge.availability",
    "AvailabilityChecker": "judge.availability",
    "AvailabilityRefusal": "judge.availability",
    "CallContext": "judge.policy",
    "Checkpoint": "log.integrity",
    "CheckpointError": "log.integrity",
    "Decision": "judge.policy",
    "Event": "log.events",
    "EventStore": "log.store",
    "Evidence": "session.evidence",
    "EvidenceItem": "session.evidence",
    "Execution": "model.canonical",
    "ExecutorContext": "session.executors",
    "Exposure": "exposure.ranker",
    "ExposureTrace": "exposure.ranker",
    "Facts": "judge.availability",
    "FunctionCalling": "integrations.adapters",
    "GateOutcome": "workflows.manage",
    "Harness": "session.harness",
    "HarnessError": "session.harness",
    "HistoryTerms": "judge.history",
    "IllegalTransitionError": "session.lifecycle",
    "LazyQueryEmbedder": "exposure.embedding",
    "Ledger": "judge.history",
    "LogKey": "log.integrity",
    "LogKeyError": "log.integrity",
    "McpState": "judge.availability",
    "MemoryStore": "log.store",
    "ModelSeal": "model.ir",
    "Outcome": "session.executors",
    "PathEscapeError": "session.files",
    "PendingCall": "judge.normalize",
    "PolicyEngine": "judge.policy",
    "PostgresStore": "log.postgres",
    "Projections": "log.projections",
    "Refusal": "judge.normalize",
    "SessionStep": "model.ir",
    "Result": "session.executors",
    "SQLiteStore": "log.store",
    "Session": "session.sessions",
    "Spec": "model.ir",
    "StrictParameters": "integrations.exports",
    "ToolAvailability": "judge.availability",
    "ToolCall": "integrations.adapters",
    "ToolNames": "judge.normalize",
    "UnverifiedLog": "log.chain",
    "Validator": "judge.normalize",
    "Verification": "log.chain",
    "WorkflowError": "workflows.manage",
    "Workflows": "workflows.manage",
    "anthropic_tool": "integrations.adapters",
    "canonical_json": "model.canonical",
    "facts_after": "judge.history",
    "input_hash": "model.canonical",
    "input_schema": "integrations.adapters",
    "load_tool_embeddings": "exposure.ranker",
    "mcp_tool": "integrations.exports",
    "prelude_ledger": "judge.history",
    "resolve_within": "session.files",
    "strict_parameters": "integrations.exports",
    "open_store": "log.open",
    "open_within": "session.files",
    "openai_responses_tool": "integrations.adapters",
    "openai_tool": "integrations.adapters",
    "surface_tools": "model.semantics",
    "thaw": "judge.normalize",
    "tool_description": "integrations.adapters",
}

if TYPE_CHECKING:
    from .exposure.embedding import LazyQueryEmbedder
    from .exposure.ranker import Exposure, ExposureTrace, load_tool_embeddings
    from .integrations.adapters import (
        AdapterError,
        FunctionCalling,
        ToolCall,
        anthropic_tool,
        input_schema,
        openai_responses_tool,
        openai_tool,
        tool_description,
    )
    from .integrations.exports import StrictParameters, mcp_tool, strict_parameters
    from .judge.availability import (
        Availability,
        AvailabilityChecker,
        AvailabilityRefusal,
        Facts,
        McpState,
        ToolAvailability,
    )
    from .judge.history import HistoryTerms, Ledger, facts_after, prelude_ledger
    from .judge.normalize import REFUSAL_CODES, PendingCall, Refusal, ToolNames, Validator, thaw
    from .judge.policy import CallContext, Decision, PolicyEngine
    from .log.chain import UnverifiedLog, Verification
    from .log.events import Event
    from .log.integrity import Checkpoint, CheckpointError, LogKey, LogKeyError
    from .log.open import open_store
    from .log.postgres import PostgresStore
    from .log.projections import Projections
    from .log.store import EventStore, MemoryStore, SQLiteStore
    from .model.canonical import Execution, canonical_json, input_hash
    from .model.ir import ModelSeal, SessionStep, Spec
    from .model.semantics import surface_tools
    from .session.approvals import ApprovalError, ApprovalGrant, ApprovalOutcome, ApprovalRequest
    from .session.evidence import Evidence, EvidenceItem
    from .session.executors import Accepted, ExecutorContext, Outcome, Result
    from .session.files import PathEscapeError, open_within, resolve_within
    from .session.harness import Harness, HarnessError
    from .session.lifecycle import Action, ActionError, ActionState, IllegalTransitionError
    from .session.sessions import Session
    from .workflows.manage import GateOutcome, WorkflowError, Workflows

_install_moved()


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
