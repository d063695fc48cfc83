"""The AuthZEN 1.0 Access Evaluation API over the same sessions (`POST /access/v1/evaluation`,
`POST /access/v1/evaluations`, discovery at `/.well-known/authzen-configuration`).

An evaluation is a call normalized and decided in a session:

- `subject` (`id`, `properties`): the session's actor, `user` = `id` beside the properties
  (`role`, `roles`, `tenant`); with a bearer token the token's actor, which the subject may
  repeat but not change
- `action.name`: the tool (its wire name or id); `action.properties`: the call's arguments
- `resource` (`type`, `id`, `properties`): the session's resource, `{type, id, …properties}`
- `context.agent`: the agent (needed when the spec declares more than one);
  `context.session_id`: a session the native API opened, whose history and provenance judge
  the call; `context.facts`, `context.task`: a new session's; `context.tool_call_id`: the
  call's id (default: a new one per evaluation)

Without `context.session_id`, evaluations of one agent, subject, resource, facts and task share
one session, opened on first use. `decision` is true only for a call that may run now (ALLOW,
or an ASK a grant covers). An ASK is `false` with `context.outcome` `ask` and the approval
request's id (`context.approval_id`), asked at once; a DENY or a refusal is `false` with the
rule, reason (`reason_user`) or refusal. What AuthZEN cannot say is in docs/serve.md.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..judge.normalize import Refusal
from .errors import ServeError
from .models import FactsIn
from .tokens import Token

Json = dict[str, Any]


class Entity(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str | None = None
    id: str | None = None
    properties: Json = Field(default_factory=dict)


class Action(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    properties: Json = Field(default_factory=dict)


class EvaluationRequest(BaseModel):
    """AuthZEN 1.0 §6.1: one access evaluation."""

    model_config = ConfigDict(extra="allow")
    subject: Entity
    action: Action
    resource: Entity = Field(default_factory=Entity)
    context: Json = Field(default_factory=dict)


class PartialEvaluation(BaseModel):
    model_config = ConfigDict(extra="allow")
    subject: Entity | None = None
    action: Action | None = None
    resource: Entity | None = None
    context: Json | None = None


class Options(BaseModel):
    model_config = ConfigDict(extra="allow")
    evaluations_semantic: Literal["execute_all", "deny_on_first_deny", "permit_on_first_permit"] = (
        "execute_all"
    )


class EvaluationsRequest(BaseModel):
    """AuthZEN 1.0 §7.1: several evaluations; each item overrides the defaults given beside
    `evaluations`."""

    model_config = ConfigDict(extra="allow")
    subject: Entity | None = None
    action: Action | None = None
    resource: Entity | None = None
    context: Json | None = None
    evaluations: list[PartialEvaluation] = Field(default_factory=list)
    options: Options = Field(default_factory=Options)


class EvaluationResponse(BaseModel):
    decision: bool
    context: Json = Field(default_factory=dict)


class EvaluationsResponse(BaseModel):
    evaluations: list[EvaluationResponse]


Parse = Callable[[Request, type[Any]], Awaitable[Any]]


def authzen_routes(service: Any, parse: Parse) -> list[tuple[str, str, Any]]:
    h = service.harness
    shared: dict[str, str] = {}  # a key of agent, actor, resource, facts, task → session id

    def actor(token: Token | None, subject: Entity) -> dict[str, Any]:
        given = (
            {**subject.properties, "user": subject.id} if subject.id else dict(subject.properties)
        )
        if token is None:
            return given
        mine = dict(token.actor)
        if any(mine.get(k) != v for k, v in given.items()):
            raise ServeError(
                "actor-override",
                f"the token `{token.name}` speaks for {json.dumps(mine)}; the subject differs",
            )
        return mine

    def session_for(token: Token | None, req: EvaluationRequest) -> Any:
        ctx = req.context
        who = actor(token, req.subject)
        if ctx.get("session_id") is not None:
            s = service.session(token, str(ctx["session_id"]))
            if dict(s.actor) != who:
                raise ServeError(
                    "actor-override", "the subject is not the actor of `context.session_id`"
                )
            return s
        agent = ctx.get("agent")
        if agent is None:
            if len(h.spec.agents) != 1:
                raise ServeError(
                    "invalid-request", "name the agent: `context.agent` (the spec has several)"
                )
            agent = next(iter(h.spec.agents))
        service.may_open(token, str(agent))
        resource = {
            **({"type": req.resource.type} if req.resource.type is not None else {}),
            **({"id": req.resource.id} if req.resource.id is not None else {}),
            **req.resource.properties,
        }
        facts, task = ctx.get("facts"), ctx.get("task")
        key = json.dumps([agent, who, resource, facts, task], sort_keys=True, default=str)
        known = shared.get(key)
        if known is not None:
            return h.resume(known)
        snapshot = None if facts is None else FactsIn.model_validate(facts).snapshot()
        s = h.session(str(agent), actor=who, task=task, facts=snapshot, resource=resource)
        shared[key] = s.id
        return s

    def evaluate(token: Token | None, req: EvaluationRequest) -> EvaluationResponse:
        s = session_for(token, req)
        call_id = str(req.context.get("tool_call_id") or "authzen-" + secrets.token_hex(8))
        pending = s.normalize(req.action.name, call_id, req.action.properties)
        if isinstance(pending, Refusal):
            return EvaluationResponse(
                decision=False,
                context={
                    "outcome": "refused",
                    "session_id": s.id,
                    "refusal": pending.to_dict(),
                    "reason_user": {"en": pending.message},
                },
            )
        d = s.decide(pending)
        judged = s.judgement_of(pending.key)
        authorized = d.effect == "allow" or (judged is not None and judged.grant is not None)
        ctx: Json = {
            "outcome": d.effect,
            "session_id": s.id,
            "tool_call_id": pending.tool_call_id,
            "decision_id": judged.decision_id if judged is not None else None,
            "policy_version": h.policy_version,
            "rule": d.rule,
        }
        if d.reason:
            ctx["reason_user"] = {"en": d.reason}
        if d.effect == "ask" and not authorized:
            request = s.request_approval(pending)
            ctx["approval_id"] = request.request_id
            ctx["approvers"] = [{"kind": a.kind, "value": a.value} for a in d.approvers]
        return EvaluationResponse(decision=authorized, context=ctx)

    async def evaluation(request: Request) -> Response:
        token = service.principal(request)
        req = await parse(request, EvaluationRequest)
        return JSONResponse(evaluate(token, req).model_dump())

    async def evaluations(request: Request) -> Response:
        token = service.principal(request)
        batch = await parse(request, EvaluationsRequest)
        items = batch.evaluations or [PartialEvaluation()]
        out: list[EvaluationResponse] = []
        semantic = batch.options.evaluations_semantic
        for item in items:
            merged = {
                "subject": item.subject or batch.subject,
                "action": item.action or batch.action,
                "resource": item.resource or batch.resource or Entity(),
                "context": {**(batch.context or {}), **(item.context or {})},
            }
            if merged["subject"] is None or merged["action"] is None:
                raise ServeError("invalid-request", "each evaluation needs a subject and an action")
            result = evaluate(token, EvaluationRequest.model_validate(merged))
            out.append(result)
            if semantic == "deny_on_first_deny" and not result.decision:
                break
            if semantic == "permit_on_first_permit" and result.decision:
                break
        return JSONResponse(EvaluationsResponse(evaluations=out).model_dump())

    async def configuration(request: Request) -> Response:
        base = str(request.base_url).rstrip("/")
        return JSONResponse(
            {
                "policy_decision_point": base,
                "access_evaluation_endpoint": base + "/access/v1/evaluation",
                "access_evaluations_endpoint": base + "/access/v1/evaluations",
            }
        )

    return [
        ("/access/v1/evaluation", "POST", evaluation),
        ("/access/v1/evaluations", "POST", evaluations),
        ("/.well-known/authzen-configuration", "GET", configuration),
    ]
