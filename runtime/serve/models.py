"""The wire models of `harnessc serve`: what each endpoint reads and answers.

Requests are pydantic models (unknown fields refused). Answers reuse the runtime's own types
where they are plain data (`Decision`, `Refusal`, `EvidenceItem`: their JSON Schema comes from
the dataclasses through pydantic's `TypeAdapter`), and mirror a runtime value's `to_dict()`
where it has one (`Result`, `ApprovalRequest`). The OpenAPI document (`openapi.py`) is made
from these, so it cannot drift from what the server sends.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from ..judge.availability import Facts
from ..judge.normalize import Refusal
from ..judge.policy import Decision
from ..session.evidence import EvidenceItem

Json = dict[str, Any]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- requests ---------------------------------------------------------------------------------


class FactsIn(_In):
    """A facts snapshot, as the log records one (`Facts.from_json`): declared facts by name,
    the connections and runtimes that are up, and each MCP server's state (`McpState`'s
    fields; a flag left out is false)."""

    values: Json = Field(default_factory=dict)
    connected: list[str] = Field(default_factory=list)
    running: list[str] = Field(default_factory=list)
    mcp: dict[str, Json] = Field(default_factory=dict)

    def snapshot(self) -> Facts:
        return Facts.from_json(self.model_dump())


class OpenSession(_In):
    """`POST /v1/sessions`: a new session of an agent. With a bearer token the actor is the
    token's: a body `actor` that differs from it is refused (`actor-override`)."""

    agent: str
    actor: Json | None = None
    task: str | Json | None = None
    facts: FactsIn | None = None
    resource: Json | None = None
    env: Json | None = None
    session_id: str | None = None
    said: list[str] = Field(default_factory=list)


class ResumeSession(_In):
    """`POST /v1/sessions/{session_id}/resume`: the session rebuilt from the log, with new
    facts when given."""

    facts: FactsIn | None = None


class ExposeRequest(_In):
    query: str
    packs: list[str] = Field(default_factory=list)


class ExecutionIn(_In):
    """The execution parameters of a call (`Execution`), checked by the runtime."""

    command: str | list[str] | None = None
    cwd: str | None = None
    env: dict[str, str] | None = None
    timeout_ms: int | None = None
    target: str | None = None


class CallRequest(_In):
    """`POST /v1/sessions/{session_id}/calls`: normalize the call, then decide it."""

    tool: str = Field(description="the tool's wire name, as the model called it, or its id")
    tool_call_id: str
    args: Json = Field(default_factory=dict)
    execution: ExecutionIn | None = None
    request_approval: bool = Field(
        default=False, description="on an ASK, ask for approval at once (answer's `approval`)"
    )


class ResultIn(_In):
    """`POST /v1/actions/{action_id}/result`: the outcome of a call the client ran itself
    (its invoke answered `accepted`): the tool's output, or an error."""

    data: Any = None
    error: str | None = None


class AnswerIn(_In):
    """`POST /v1/approvals/{request_id}/approve` or `/deny`. With bearer tokens the approver is
    the token's actor; without, `by` names them."""

    by: Json | None = None
    reason: str | None = None


# -- answers ----------------------------------------------------------------------------------


class SessionOut(_Out):
    session_id: str
    agent: str
    actor: Json
    task_id: str | None
    surface: list[str]
    policy_version: str


class ExposureOut(_Out):
    tools: list[str]
    rule: str
    trace: Json


class CallOut(_Out):
    """The call as the runtime froze it."""

    tool_id: str
    tool_call_id: str
    input_hash: str
    args: Json
    action_id: str | None


class ApprovalOut(_Out):
    """An approval request (`ApprovalRequest.to_dict()`)."""

    model_config = ConfigDict(extra="allow")
    request_id: str
    session_id: str
    decision_id: str | None
    tool_id: str
    tool_call_id: str
    status: str
    rule: str | None
    why: str
    expires_at: str | None


class DecideOut(_Out):
    """Normalize + decide: `outcome` is `refused` (with `refusal`) or the decision's effect
    (`allow`, `ask`, `deny`, with `decision`, `decision_id` and `policy_version`)."""

    outcome: Literal["refused", "allow", "ask", "deny"]
    refusal: Refusal | None = None
    call: CallOut | None = None
    decision: Decision | None = None
    decision_id: str | None = None
    policy_version: str | None = None
    authorized: bool = False
    approval: ApprovalOut | None = None


class ResultOut(_Out):
    """The result of a call (`Result.to_dict()`); `status` `accepted` with an `action_id`:
    the client runs the tool and posts its outcome to `/v1/actions/{action_id}/result`."""

    model_config = ConfigDict(extra="allow")
    tool_id: str
    tool_call_id: str
    status: str
    data: Any = None
    error: str | None = None
    ran: bool
    action_id: str | None = None
    decision_id: str | None = None


class AnswerOut(_Out):
    status: str
    request: ApprovalOut
    grant_id: str | None = None
    reason: str | None = None


class EvidenceOut(_Out):
    session_id: str
    sessions: list[str]
    items: list[EvidenceItem]


class DecisionLogEntry(_Out):
    """One decision as OPA's decision logs show one."""

    decision_id: str
    path: str = Field(description="the policy judged, as `harnessc/<policy>`")
    input_hash: str
    input: Json = Field(description="the call judged: session, agent, tool, tool_call_id")
    result: Json = Field(description="effect, rule, reason, authorized")
    revision: str = Field(description="the policy version (the spec's content hash)")
    timestamp: str
    position: int


class DecisionLogOut(_Out):
    decisions: list[DecisionLogEntry]
    next_after: int


class ErrorOut(_Out):
    """Every error: a stable `code` and a sentence; `errors` for a malformed body."""

    error: str
    message: str
    errors: list[Json] = Field(default_factory=list)


DECISION = TypeAdapter(Decision)
REFUSAL = TypeAdapter(Refusal)
EVIDENCE_ITEM = TypeAdapter(EvidenceItem)
