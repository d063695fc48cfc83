"""The OpenAPI 3.1 document of `harnessc serve`, made from the wire models (models.py, and the
runtime types they hold) by pydantic: what `/openapi.json` serves and the TypeScript client is
written against."""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from . import authzen as z
from . import models as m

REF = "#/components/schemas/{model}"

_S = "/v1/sessions/{session_id}"
_C = _S + "/calls/{tool_call_id}"
# path, method, operation id, summary, request model, answer model, status
OPERATIONS: tuple[tuple[str, str, str, str, type[BaseModel] | None, type[BaseModel], int], ...] = (
    (
        "/v1/sessions",
        "post",
        "openSession",
        "Open a session of an agent",
        m.OpenSession,
        m.SessionOut,
        201,
    ),
    (
        _S + "/resume",
        "post",
        "resumeSession",
        "Resume a session from the log (new facts)",
        m.ResumeSession,
        m.SessionOut,
        200,
    ),
    (
        _S + "/expose",
        "post",
        "expose",
        "The tools exposed this turn (top-k for a query)",
        m.ExposeRequest,
        m.ExposureOut,
        200,
    ),
    (
        _S + "/calls",
        "post",
        "decide",
        "Normalize a call and decide it",
        m.CallRequest,
        m.DecideOut,
        200,
    ),
    (
        _C + "/approval",
        "post",
        "requestApproval",
        "Ask for approval of an ASK",
        None,
        m.ApprovalOut,
        201,
    ),
    (
        _C + "/invoke",
        "post",
        "invoke",
        "Run an authorised call (bound executor, or accepted for the client to run)",
        None,
        m.ResultOut,
        200,
    ),
    (
        _C + "/result",
        "post",
        "recordResult",
        "Record the result of a call the client ran",
        m.ResultIn,
        m.ResultOut,
        200,
    ),
    (
        _S + "/evidence",
        "get",
        "evidence",
        "The evidence of the session's calls",
        None,
        m.EvidenceOut,
        200,
    ),
    (_S + "/end", "post", "endSession", "End the session", None, m.SessionOut, 200),
    (
        "/v1/approvals/{request_id}",
        "get",
        "getApproval",
        "An approval request (`?wait=S`: until answered, at most 30 s)",
        None,
        m.ApprovalOut,
        200,
    ),
    (
        "/v1/approvals/{request_id}/approve",
        "post",
        "approve",
        "Approve a request",
        m.AnswerIn,
        m.AnswerOut,
        200,
    ),
    (
        "/v1/approvals/{request_id}/deny",
        "post",
        "deny",
        "Deny a request",
        m.AnswerIn,
        m.AnswerOut,
        200,
    ),
    (
        "/v1/decisions",
        "get",
        "decisionLog",
        "Decision logs (OPA's shape), `?after=&limit=`",
        None,
        m.DecisionLogOut,
        200,
    ),
    (
        "/access/v1/evaluation",
        "post",
        "authzenEvaluation",
        "AuthZEN 1.0 access evaluation",
        z.EvaluationRequest,
        z.EvaluationResponse,
        200,
    ),
    (
        "/access/v1/evaluations",
        "post",
        "authzenEvaluations",
        "AuthZEN 1.0 access evaluations",
        z.EvaluationsRequest,
        z.EvaluationsResponse,
        200,
    ),
)


@cache
def _schemas() -> dict[str, Any]:
    models: set[type[BaseModel]] = {m.ErrorOut}
    for *_, request, response, _status in OPERATIONS:
        models.add(response)
        if request is not None:
            models.add(request)
    ordered = sorted(models, key=lambda t: t.__name__)
    _, top = models_json_schema([(t, "validation") for t in ordered], ref_template=REF)
    return dict(top.get("$defs", {}))


def document(title: str, *, secured: bool) -> dict[str, Any]:
    """The OpenAPI document of a server of the spec `title` (`secured`: bearer tokens)."""
    paths: dict[str, Any] = {}
    error = {
        "description": "an error: a stable code and a sentence",
        "content": {"application/json": {"schema": {"$ref": REF.format(model="ErrorOut")}}},
    }
    for path, method, op_id, summary, request, response, status in OPERATIONS:
        params = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in ("session_id", "tool_call_id", "request_id")
            if "{" + name + "}" in path
        ]
        op: dict[str, Any] = {
            "operationId": op_id,
            "summary": summary,
            "responses": {
                str(status): {
                    "description": summary,
                    "content": {
                        "application/json": {
                            "schema": {"$ref": REF.format(model=response.__name__)}
                        }
                    },
                },
                "default": error,
            },
        }
        if params:
            op["parameters"] = params
        if request is not None:
            op["requestBody"] = {
                "required": True,
                "content": {
                    "application/json": {"schema": {"$ref": REF.format(model=request.__name__)}}
                },
            }
        paths.setdefault(path, {})[method] = op
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": f"harnessc serve: {title}", "version": "1"},
        "paths": paths,
        "components": {"schemas": _schemas()},
    }
    if secured:
        doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        doc["security"] = [{"bearer": []}]
    return doc
