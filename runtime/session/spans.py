"""The OpenTelemetry spans of a call's path: off until `integrations.telemetry.enable()`.

The session's stages call these only while `tracer` is set; setting it is the telemetry
integration's job (runtime/integrations/telemetry.py, the `otel` extra), so the session needs
nothing of OpenTelemetry to run. Once enabled, every `expose`, `normalize`, `decide`, `invoke`
/ `ainvoke` and workflow step is a span (`harnessc.expose`, `harnessc.normalize`,
`harnessc.decide`, `harnessc.invoke`, `harnessc.workflow.step`; a session's calls inside a step
are its children), and an answered approval request is a `harnessc.approval.wait` span from the
moment it was asked to the answer.
Their attributes identify, never reveal: the session, agent, tool id, tool_call_id, input hash,
decision id, effect, rule, policy and policy version, the result's status and error category,
counts. An argument's value, a query's text, an error message, an observation or a result's
data never becomes an attribute or an event: any of them may hold what a `secret` field
protects, or what the user never meant to leave the process.

Off, it costs one attribute read per step: `tracer` is None and the session's methods call
their stage directly (bench/governed.py measures both).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from ..exposure.ranker import Exposure
    from ..judge.normalize import PendingCall, Refusal
    from ..judge.policy import Decision
    from .approvals import ApprovalRequest
    from .executors import Result
    from .seams import SessionSeam

__all__ = [
    "ainvoke",
    "approval_waited",
    "decide",
    "expose",
    "invoke",
    "normalize",
    "tracer",
    "workflow_step",
]

tracer: Any = None
"""The OpenTelemetry tracer spans go to, or None (off: the default)."""

T = TypeVar("T")


# ---------------------------------------------------------------------------------------------
# Attributes: identifiers and outcomes only


def _session(s: SessionSeam) -> dict[str, Any]:
    out: dict[str, Any] = {
        "harnessc.session.id": s.id,
        "harnessc.agent": s.agent.name,
        "harnessc.policy.version": s.harness.policy_version,
    }
    if s.skill_name is not None:
        out["harnessc.skill"] = s.skill_name
    return out


def _call(pending: PendingCall) -> dict[str, Any]:
    return {
        "harnessc.tool.id": pending.tool_id,
        "harnessc.tool_call.id": pending.tool_call_id,
        "harnessc.input_hash": pending.input_hash,
    }


def _decision(d: Decision, decision_id: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "harnessc.decision.effect": d.effect,
        "harnessc.decision.policy": d.policy,
        "harnessc.decision.default_used": bool(d.default_used),
    }
    if decision_id is not None:
        out["harnessc.decision.id"] = decision_id
    if d.rule is not None:
        out["harnessc.decision.rule"] = d.rule
    return out


def _judged(s: SessionSeam, pending: PendingCall) -> dict[str, Any]:
    judged = s.state.judged.get(pending.key)
    if judged is None:
        return {}
    out = _decision(judged.decision, judged.decision_id)
    out["harnessc.policy.version"] = judged.policy_version
    return out


def _failed(span: Any, category: str | None) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_status(Status(StatusCode.ERROR, category or "failure"))


# ---------------------------------------------------------------------------------------------
# The spans (called only while enabled)


def expose(s: SessionSeam, packs: tuple[str, ...], run: Callable[[], Exposure]) -> Exposure:
    with tracer.start_as_current_span("harnessc.expose", attributes=_session(s)) as span:
        exposure = run()
        span.set_attributes(
            {
                "harnessc.expose.tools": len(exposure.tools),
                "harnessc.expose.rule": exposure.trace.rule,
                "harnessc.expose.unavailable": len(exposure.trace.unavailable),
                "harnessc.expose.packs": list(packs),
            }
        )
        return exposure


def normalize(
    s: SessionSeam, tool: Any, tool_call_id: Any, run: Callable[[], PendingCall | Refusal]
) -> PendingCall | Refusal:
    from ..judge.normalize import PendingCall

    attributes = _session(s)
    if isinstance(tool, str):
        attributes["harnessc.tool.requested"] = tool[:200]
    if isinstance(tool_call_id, str):
        attributes["harnessc.tool_call.id"] = tool_call_id[:200]
    with tracer.start_as_current_span("harnessc.normalize", attributes=attributes) as span:
        result = run()
        if isinstance(result, PendingCall):
            span.set_attributes(_call(result))
        else:
            span.set_attribute("harnessc.refusal.code", result.code)
            _failed(span, result.code)
        return result


def decide(s: SessionSeam, pending: PendingCall, run: Callable[[], Decision]) -> Decision:
    with tracer.start_as_current_span(
        "harnessc.decide", attributes={**_session(s), **_call(pending)}
    ) as span:
        decision = run()
        span.set_attributes(_judged(s, pending))
        return decision


def _result(span: Any, result: Result) -> None:
    span.set_attribute("harnessc.result.status", result.status)
    span.set_attribute("harnessc.result.ran", result.ran)
    if result.error_category is not None:
        span.set_attribute("harnessc.result.error_category", result.error_category)
    if result.action_id is not None:
        span.set_attribute("harnessc.action.id", result.action_id)
    if result.decision_id is not None:
        span.set_attribute("harnessc.decision.id", result.decision_id)
    if result.executor is not None:
        span.set_attribute("harnessc.executor", result.executor)
    if result.status not in ("success", "partial", "accepted"):
        _failed(span, result.error_category)


def invoke(s: SessionSeam, pending: PendingCall, run: Callable[[], Result]) -> Result:
    with tracer.start_as_current_span(
        "harnessc.invoke", attributes={**_session(s), **_call(pending)}
    ) as span:
        result = run()
        span.set_attributes(_judged(s, pending))
        _result(span, result)
        return result


async def ainvoke(
    s: SessionSeam, pending: PendingCall, run: Callable[[], Awaitable[Result]]
) -> Result:
    with tracer.start_as_current_span(
        "harnessc.invoke", attributes={**_session(s), **_call(pending), "harnessc.async": True}
    ) as span:
        result = await run()
        span.set_attributes(_judged(s, pending))
        _result(span, result)
        return result


def approval_waited(request: ApprovalRequest, outcome: str, now: datetime) -> None:
    """A span from when `request` was asked to its answer (`outcome`: approved, denied,
    denied-by-policy, expired)."""
    start = request.requested_at
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    attributes: dict[str, Any] = {
        "harnessc.approval.request_id": request.request_id,
        "harnessc.approval.outcome": outcome,
        "harnessc.session.id": request.session_id,
        "harnessc.tool.id": request.tool_id,
        "harnessc.tool_call.id": request.tool_call_id,
        "harnessc.input_hash": request.input_hash,
        "harnessc.decision.effect": "ask",
        "harnessc.decision.policy": request.policy,
    }
    if request.decision_id is not None:
        attributes["harnessc.decision.id"] = request.decision_id
    if request.rule is not None:
        attributes["harnessc.decision.rule"] = request.rule
    span = tracer.start_span("harnessc.approval.wait", attributes=attributes, start_time=_ns(start))
    span.end(end_time=max(_ns(now), _ns(start)))


def _ns(moment: datetime) -> int:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1_000_000_000)


def workflow_step(
    ctx: Mapping[str, Any], step: str, kind: str, run: Callable[[], dict[str, Any]]
) -> dict[str, Any]:
    attributes = {
        "harnessc.workflow.id": str(ctx.get("workflow_id")),
        "harnessc.workflow.name": str(ctx.get("workflow")),
        "harnessc.workflow.step": step,
        "harnessc.workflow.step.kind": kind,
    }
    with tracer.start_as_current_span("harnessc.workflow.step", attributes=attributes) as span:
        outcome = run()
        status = outcome.get("status")
        if isinstance(status, str):
            span.set_attribute("harnessc.workflow.step.status", status)
            if status not in ("succeeded", "ask"):
                _failed(span, str(outcome.get("category") or outcome.get("code") or status))
        return outcome
