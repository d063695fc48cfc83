"""The HTTP application of `harnessc serve`: the runtime's `Harness` and `Session` over JSON.

Every endpoint is a call of the same runtime an application embeds (`Session.normalize`,
`decide`, `request_approval`, `ainvoke`, `complete`, `evidence`; `Harness.session`, `resume`,
`approve`, `deny`), so a decision over HTTP is the decision in process, with the same refusals,
events and limits. Errors are `ErrorOut` JSON with a stable code, never a traceback; a body
larger than `MAX_BODY` is refused before it is read whole.

With a `Tokens` file every request but discovery carries `Authorization: Bearer …`; the token's
actor is the session's actor (a body that names another is refused, `actor-override`) and the
approver of an answer. Without one the server is open and must listen on loopback only (the CLI
refuses otherwise).

Requests run on the event loop's thread one at a time (the harness is not shared with other
threads), except an executor, which `Session.ainvoke` runs on the loop (async) or in a thread.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp

from ..judge.normalize import MAX_ARGS_BYTES, PendingCall, Refusal, thaw
from ..model.canonical import Execution
from ..session.approvals import ApprovalError, ApprovalRequest, is_approver
from ..session.executors import Accepted, ExecutorContext
from ..session.harness import Harness, HarnessError
from ..session.lifecycle import ActionError
from ..session.sessions import Session
from . import models as m
from .errors import ServeError, error_response
from .tokens import Token, Tokens

MAX_BODY = 4 * MAX_ARGS_BYTES + 65_536
"""The largest request body read (4 MiB and 64 KiB): the runtime's 1 MiB of argument text,
written as JSON with room for escapes. Past it: 413 `body-too-large`, before the rest is read.
The runtime's own limits (`args-too-large`) then hold as in process."""
MAX_WAIT_S = 30.0
"""The longest an approval's `?wait=` holds a request open."""

_log = logging.getLogger("harnessc.serve")
Handler = Callable[[Request], Awaitable[Response]]
_M = TypeVar("_M", bound=BaseModel)


class Service:
    """The state the endpoints share: the harness, the tokens (None: an open server), and the
    executor that stands in for a tool the server has none bound for (`client_executor`)."""

    def __init__(self, harness: Harness, tokens: Tokens | None = None) -> None:
        self.harness = harness
        self.tokens = tokens
        # a tool without an executor bound here is run by the client: its invoke answers
        # `accepted`, and the client posts the outcome (`Session.complete`)
        for tool_id in harness.spec.tools:
            if tool_id not in harness.executors:
                harness.bind(tool_id, client_executor)

    # -- who asks ---------------------------------------------------------------------------

    def principal(self, request: Request) -> Token | None:
        """The token of the request (None on an open server); 401 without a live one."""
        if self.tokens is None:
            return None
        header = request.headers.get("authorization", "")
        scheme, _, text = header.partition(" ")
        if scheme.lower() != "bearer" or not text.strip():
            raise ServeError("unauthenticated", "send `Authorization: Bearer <token>`")
        token = self.tokens.verify(text.strip())
        if token is None:
            raise ServeError("unauthenticated", "the token is unknown or revoked")
        return token

    def actor_of(self, token: Token | None, given: Mapping[str, Any] | None) -> Mapping[str, Any]:
        """The actor a request acts as: the token's, which a body may repeat but never change;
        on an open server the body's (`{}` when none)."""
        if token is None:
            return dict(given) if given is not None else {}
        if given is not None and dict(given) != dict(token.actor):
            raise ServeError(
                "actor-override",
                f"the token `{token.name}` speaks for {json.dumps(dict(token.actor))}; "
                "a request cannot act as anyone else",
            )
        return dict(token.actor)

    def may_open(self, token: Token | None, agent: str) -> None:
        """Refuse a token limited to other agents (`agent` by its name or qualified name)."""
        if token is None or not token.agents:
            return
        q = self.harness.spec.qualified
        if q(agent) not in {q(a) for a in token.agents}:
            raise ServeError(
                "agent-not-allowed", f"the token `{token.name}` may not open `{agent}`"
            )

    def session(self, token: Token | None, session_id: str) -> Session:
        """A session the caller may use: open here or rebuilt from the log, of the token's
        actor."""
        s = self.harness.resume(session_id)
        if token is not None and dict(s.actor) != dict(token.actor):
            raise ServeError(
                "not-your-session", f"the session `{session_id}` is not the token's actor's"
            )
        return s


def client_executor(args: Mapping[str, Any], ctx: ExecutorContext) -> Accepted:
    """A tool the client runs: the call is authorised and recorded as running, and the
    result comes from the client (`POST …/calls/{tool_call_id}/result`)."""
    return Accepted(
        handle=f"client:{ctx.action_id}",
        observation="authorised; the client runs the tool and reports its result",
    )


# -- reading a request ------------------------------------------------------------------------


async def read_body(request: Request) -> Any:
    """The JSON body, read no further than `MAX_BODY` bytes."""
    kind = request.headers.get("content-type", "application/json").split(";")[0].strip()
    if kind not in ("application/json", ""):
        raise ServeError("unsupported-media-type", f"send JSON (`application/json`), not `{kind}`")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY:
        raise ServeError("body-too-large", f"the body is over {MAX_BODY:,} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise ServeError("body-too-large", f"the body is over {MAX_BODY:,} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except RecursionError:
        raise ServeError("invalid-json", "the body nests too deeply to read") from None
    except ValueError as error:
        raise ServeError("invalid-json", f"the body is not JSON: {error}") from None


async def parse(request: Request, model: type[_M]) -> _M:
    body = await read_body(request)
    try:
        return model.model_validate(body)
    except ValidationError as error:
        errors = [
            {
                "path": "$"
                + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e["loc"]),
                "message": e["msg"],
            }
            for e in error.errors(include_input=False, include_url=False)[:100]
        ]
        raise ServeError(
            "invalid-request", f"the body is not a `{model.__name__}`", errors
        ) from None


def answer(model: BaseModel, status: int = 200) -> Response:
    return Response(model.model_dump_json(), status_code=status, media_type="application/json")


# -- the endpoints ----------------------------------------------------------------------------


def session_out(s: Session) -> m.SessionOut:
    return m.SessionOut(
        session_id=s.id,
        agent=s.agent.name,
        actor=dict(s.actor),
        task_id=s.task_id,
        surface=list(s.surface),
        policy_version=s.harness.policy_version,
    )


def approval_out(req: ApprovalRequest) -> m.ApprovalOut:
    return m.ApprovalOut.model_validate(_jsonable(req.to_dict()))


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def call_out(s: Session, pending: PendingCall) -> m.CallOut:
    return m.CallOut(
        tool_id=pending.tool_id,
        tool_call_id=pending.tool_call_id,
        input_hash=pending.input_hash,
        args=thaw(pending.args),
        action_id=s.action_id(pending),
    )


def _call(s: Session, tool_call_id: str) -> PendingCall:
    pending = s.call(tool_call_id)
    if pending is None:
        raise ServeError("unknown-call", f"the session has no call `{tool_call_id}`")
    return pending


def build_routes(service: Service) -> list[BaseRoute]:
    h = service.harness

    async def open_session(request: Request) -> Response:
        token = service.principal(request)
        body = await parse(request, m.OpenSession)
        service.may_open(token, body.agent)
        s = h.session(
            body.agent,
            actor=service.actor_of(token, body.actor),
            task=body.task,
            facts=body.facts.snapshot() if body.facts is not None else None,
            resource=body.resource,
            env=body.env,
            session_id=body.session_id,
            said=body.said,
        )
        return answer(session_out(s), 201)

    async def resume(request: Request) -> Response:
        token = service.principal(request)
        body = await parse(request, m.ResumeSession)
        s = service.session(token, request.path_params["session_id"])
        if body.facts is not None:
            s = h.resume(s.id, facts=body.facts.snapshot())
        return answer(session_out(s))

    async def expose(request: Request) -> Response:
        token = service.principal(request)
        body = await parse(request, m.ExposeRequest)
        s = service.session(token, request.path_params["session_id"])
        e = s.expose(body.query, packs=body.packs)
        return answer(
            m.ExposureOut(tools=list(e.tools), rule=e.trace.rule, trace=e.trace.to_dict())
        )

    async def call(request: Request) -> Response:
        token = service.principal(request)
        body = await parse(request, m.CallRequest)
        s = service.session(token, request.path_params["session_id"])
        execution = None
        if body.execution is not None:
            execution = Execution(**body.execution.model_dump(exclude_none=True))
        pending = s.normalize(body.tool, body.tool_call_id, body.args, execution=execution)
        if isinstance(pending, Refusal):
            return answer(m.DecideOut(outcome="refused", refusal=pending))
        decision = s.decide(pending)
        judged = s.judgement_of(pending.key)
        authorized = decision.effect == "allow" or (judged is not None and judged.grant is not None)
        approval = None
        if body.request_approval and decision.effect == "ask" and not authorized:
            approval = approval_out(s.request_approval(pending))
        return answer(
            m.DecideOut(
                outcome=decision.effect,  # type: ignore[arg-type]
                call=call_out(s, pending),
                decision=decision,
                decision_id=judged.decision_id if judged is not None else None,
                policy_version=judged.policy_version if judged is not None else h.policy_version,
                authorized=authorized,
                approval=approval,
            )
        )

    async def request_approval(request: Request) -> Response:
        token = service.principal(request)
        s = service.session(token, request.path_params["session_id"])
        pending = _call(s, request.path_params["tool_call_id"])
        try:
            req = s.request_approval(pending)
        except ValueError as error:  # not an ASK
            raise ServeError("not-an-ask", str(error)) from None
        return answer(approval_out(req), 201)

    async def invoke(request: Request) -> Response:
        token = service.principal(request)
        s = service.session(token, request.path_params["session_id"])
        pending = _call(s, request.path_params["tool_call_id"])
        result = await s.ainvoke(pending)
        return answer(m.ResultOut.model_validate(_jsonable(result.to_dict())))

    async def record_result(request: Request) -> Response:
        token = service.principal(request)
        body = await parse(request, m.ResultIn)
        s = service.session(token, request.path_params["session_id"])
        pending = _call(s, request.path_params["tool_call_id"])
        who = dict(token.actor) if token is not None else dict(s.actor)
        result = s.complete(pending, body.data, error=body.error, by=who)
        return answer(m.ResultOut.model_validate(_jsonable(result.to_dict())))

    async def evidence(request: Request) -> Response:
        token = service.principal(request)
        s = service.session(token, request.path_params["session_id"])
        ev = s.evidence()
        return answer(
            m.EvidenceOut(
                session_id=ev.session_id, sessions=list(ev.sessions), items=list(ev.items)
            )
        )

    async def end(request: Request) -> Response:
        token = service.principal(request)
        s = service.session(token, request.path_params["session_id"])
        s.end(request.query_params.get("outcome", "completed"))
        return answer(session_out(s))

    async def get_approval(request: Request) -> Response:
        token = service.principal(request)
        rid = request.path_params["request_id"]
        wait = _wait(request)
        if token is not None:
            h.catch_up()
            asked = h.approvals.get(rid)
            # the requester's session's actor, or an approver the request names
            mine = {
                k: token.actor[k] for k in ("user", "role", "roles", "tenant") if k in token.actor
            }
            if dict(asked.as_whom) != mine and not is_approver(asked.approvers, token.actor):
                raise ServeError(
                    "forbidden", f"the token `{token.name}` neither asked nor may answer `{rid}`"
                )
        deadline = asyncio.get_running_loop().time() + wait
        while True:
            h.catch_up()
            req = h.approvals.get(rid)
            if req.status != "pending" or asyncio.get_running_loop().time() >= deadline:
                return answer(approval_out(req))
            await asyncio.sleep(0.05)

    async def approve(request: Request) -> Response:
        return await _answer(request, approving=True)

    async def deny(request: Request) -> Response:
        return await _answer(request, approving=False)

    async def _answer(request: Request, *, approving: bool) -> Response:
        token = service.principal(request)
        body = await parse(request, m.AnswerIn)
        if token is None and body.by is None:
            raise ServeError("invalid-request", "name the approver: `by` (user, role, roles)")
        by = service.actor_of(token, body.by)
        rid = request.path_params["request_id"]
        h.catch_up()
        if approving:
            outcome = h.approve(rid, by=by)
        else:
            outcome = h.deny(rid, by=by, reason=body.reason or "denied")
        return answer(
            m.AnswerOut(
                status=outcome.status,
                request=approval_out(outcome.request),
                grant_id=outcome.grant.grant_id if outcome.grant is not None else None,
                reason=outcome.reason,
            )
        )

    async def decisions(request: Request) -> Response:
        from .decisions import decision_log

        service.principal(request)
        after = _int(request, "after", 0)
        limit = min(max(_int(request, "limit", 100), 1), 1000)
        entries, last = decision_log(h.store, after=after, limit=limit)
        return answer(m.DecisionLogOut(decisions=entries, next_after=last))

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "policy_version": h.policy_version})

    async def openapi(request: Request) -> Response:
        from .openapi import document

        return JSONResponse(document(h.spec.name, secured=service.tokens is not None))

    def guarded(fn: Handler) -> Handler:
        async def run(request: Request) -> Response:
            try:
                return await fn(request)
            except ServeError as error:
                return error_response(error.code, error.message, error.errors)
            except (HarnessError, ApprovalError, ActionError) as error:
                return error_response(error.code, str(error))
            except (TypeError, ValueError) as error:  # an argument of the wrong kind
                return error_response("invalid-request", str(error))
            except Exception:  # a bug: logged with its id, never shown
                rid = secrets.token_hex(8)
                _log.exception("request %s failed", rid)
                return error_response("internal", f"internal error (request {rid})")

        return run

    sid = "/v1/sessions/{session_id}"
    call_path = sid + "/calls/{tool_call_id}"
    table: list[tuple[str, str, Handler]] = [
        ("/v1/health", "GET", health),
        ("/openapi.json", "GET", openapi),
        ("/v1/sessions", "POST", open_session),
        (sid + "/resume", "POST", resume),
        (sid + "/expose", "POST", expose),
        (sid + "/calls", "POST", call),
        (call_path + "/approval", "POST", request_approval),
        (call_path + "/invoke", "POST", invoke),
        (call_path + "/result", "POST", record_result),
        (sid + "/evidence", "GET", evidence),
        (sid + "/end", "POST", end),
        ("/v1/approvals/{request_id}", "GET", get_approval),
        ("/v1/approvals/{request_id}/approve", "POST", approve),
        ("/v1/approvals/{request_id}/deny", "POST", deny),
        ("/v1/decisions", "GET", decisions),
    ]
    routes: list[BaseRoute] = [Route(p, guarded(fn), methods=[verb]) for p, verb, fn in table]
    from .authzen import authzen_routes

    routes += [
        Route(p, guarded(fn), methods=[verb]) for p, verb, fn in authzen_routes(service, parse)
    ]
    return routes


def _int(request: Request, name: str, default: int) -> int:
    text = request.query_params.get(name)
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        raise ServeError("invalid-request", f"`{name}` is an integer, not `{text}`") from None


def _wait(request: Request) -> float:
    text = request.query_params.get("wait", "0")
    try:
        wait = float(text)
    except ValueError:
        raise ServeError(
            "invalid-request", f"`wait` is a number of seconds, not `{text}`"
        ) from None
    if not 0 <= wait <= MAX_WAIT_S:
        raise ServeError("invalid-request", f"`wait` is 0 to {MAX_WAIT_S:g} seconds")
    return wait


def build_app(
    harness: Harness, tokens: Tokens | None = None, *, fallback: ASGIApp | None = None
) -> Starlette:
    """The server's application over `harness`; `fallback` (e.g. the operations console) serves
    every path the API does not."""
    service = Service(harness, tokens)
    routes = build_routes(service)
    if fallback is not None:
        routes.append(Mount("/", app=fallback))

    async def not_found(request: Request, exc: Exception) -> Response:
        return error_response("not-found", f"no endpoint `{request.method} {request.url.path}`")

    async def not_allowed(request: Request, exc: Exception) -> Response:
        return error_response("method-not-allowed", f"`{request.method}` is not served here")

    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: not_allowed})
    app.state.service = service
    return app
