"""The console's web application (Starlette, Jinja2 templates, a little plain JavaScript).

Reads go to the harness's projections and the event log; every change is a runtime command
(`runtime.operations`: approve, deny, approve with edits, revoke; `Workflows.decide`) taken as
the logged-in operator, whose
refusal is shown as it is. Pages redirect to the login form without a session; `/api/…`
answers 401. Every POST carries the session's CSRF token (form field `csrf` or header
`X-CSRF-Token`), else 403. Logins are held by the server (`auth.Logins`), failed ones throttled
(`auth.LoginThrottle`); every response carries the security headers below and an
`X-Request-Id`, which an error page names and the server's log records beside the traceback."""

from __future__ import annotations

import gc
import hmac
import json
import logging
import math
import secrets
import shlex
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote

from harnessc.runtime import ApprovalError, Harness
from harnessc.runtime.log.chain import UnreadableEvent, UnverifiedLog
from harnessc.runtime.log.cut import archived_note
from harnessc.runtime.session import operations
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..approvals_cli import deadline_words, duration_words
from .auth import APPROVER, Logins, LoginThrottle, Operator, authenticate, new_csrf
from .showing import exact_json, shown_json, ticks

HERE = Path(__file__).parent
PAGE = 50
"""Events per page of a session's timeline."""
LAST_POSITION = 2**63 - 1
"""The largest position a log holds (a 64-bit integer in SQLite and PostgreSQL)."""

Handler = Callable[[Request], Awaitable[Response]]

SECURITY_HEADERS = {
    # no inline script or style anywhere: the pages load /static/console.js and console.css
    "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}
_log = logging.getLogger("harnessc.console")


class Console:
    """The state the pages share: the harness over the store, the operators, a lock that
    makes one operator's answer to a request land before another's is judged."""

    def __init__(
        self,
        harness: Harness,
        operators: dict[str, Operator],
        store_url: str | None = None,
        spec_path: str | None = None,
    ) -> None:
        self.harness = harness
        # `harnessc why` for a recorded decision, as an operator would type it
        log = store_url or "LOG"
        self.why_command = (
            f"harnessc why {shlex.quote(spec_path or 'SPEC')} --log {shlex.quote(log)}"
        )
        self.operators = operators
        # the workflow engine takes URLs only: a plain PATH is the SQLite file it names
        plain = store_url is not None and "://" not in store_url
        self.store_url = f"sqlite:///{store_url}" if plain else store_url
        self.lock = threading.Lock()
        self.logins = Logins()
        self.whole_walk: dict[str, Any] | None = None  # the last `/log/verify`, if any
        self.throttle = LoginThrottle()
        self.templates = Environment(
            loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape()
        )
        self.templates.filters["summary"] = summary
        # a call's values as their exact text (showing.py): never JSON's HTML-safe escapes
        self.templates.filters["shown"] = shown_json
        self.templates.filters["exact_json"] = exact_json
        self.templates.filters["ticks"] = ticks
        # a caller-chosen id in a link's path: every character but the unreserved escaped
        self.templates.filters["url_part"] = partial(quote, safe="")

    def fresh(self) -> Harness:
        """The harness with every event appended since (by any process) folded in."""
        with self.lock:
            self.harness.catch_up()
        return self.harness

    def render(self, request: Request, name: str, status: int = 200, **data: Any) -> Response:
        op = operator_of(request, self)
        html = self.templates.get_template(name).render(
            operator=op, csrf=request.session.get("csrf", ""), **data
        )
        try:
            return HTMLResponse(html, status_code=status)
        except UnicodeEncodeError:
            # a text from the log holding a lone surrogate (`"\ud800"` is valid JSON): shown
            # as its escape, as the CLI prints it
            shown = html.encode("utf-8", "backslashreplace").decode("utf-8")
            return HTMLResponse(shown, status_code=status)


def settle_heap() -> None:
    """What `harnessc console` does once it has folded the log, before it serves: every object
    alive then (the projections of a long log among them) leaves the collector's reach
    (`gc.freeze`), so a full collection while serving scans only what pages made since, not
    the folded log: on a 30,000-event log, 190 ms pauses gone from the page times."""
    gc.collect()
    gc.freeze()


def operator_of(request: Request, console: Console) -> Operator | None:
    """The operator of the request's login, while the server holds it."""
    name = console.logins.operator(request.session.get("login"))
    return console.operators.get(name) if name is not None else None


class Guard:
    """Around every request: the security headers and an `X-Request-Id` on each response, and
    an exception turned into an error page naming that id (`on_error`), the connection kept
    open, instead of a dropped connection."""

    def __init__(
        self,
        app: ASGIApp,
        on_error: Callable[[Request, Exception, str], Awaitable[Response]],
    ) -> None:
        self.app, self.on_error = app, on_error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = secrets.token_hex(6)
        scope.setdefault("state", {})["request_id"] = request_id
        started = False

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
                headers["x-request-id"] = request_id
            await send(message)

        try:
            await self.app(scope, receive, guarded_send)
        except Exception as error:
            if started:  # part of the page went out: nothing left to do but end it
                raise
            response = await self.on_error(Request(scope, receive), error, request_id)
            await response(scope, receive, guarded_send)


def summary(event: Any) -> str:
    """One line on what an event of a session's timeline says (its payload is shown beside)."""
    p = event.payload
    kind = event.type
    if kind == "tools.exposed":
        cut = ", ".join(p.get("tools") or []) or "none"
        hidden = ", ".join(f"{t}: {why}" for t, why in (p.get("unavailable") or {}).items())
        return f"exposed {cut}" + (f"; unavailable {hidden}" if hidden else "")
    if kind == "decision":
        rules = ", ".join(
            str(m.get("rule", m)) if isinstance(m, dict) else str(m) for m in p.get("matched") or []
        )
        text = f"{str(p.get('effect', '')).upper()} {p.get('tool_id') or ''}".strip()
        text += f" by {p.get('rule') or p.get('policy')}"
        if p.get("reason"):
            text += f": {p['reason']}"
        return text + (f" (matching: {rules})" if rules else "")
    if kind == "action.transition":
        return (
            f"{p.get('tool_id')} {p.get('tool_call_id')}: {p.get('from') or 'new'} → {p.get('to')}"
        )
    if kind == "approval.requested":
        return f"approval {p.get('approval_id')} asked for {p.get('tool_id')} by {p.get('rule')}"
    if kind == "approval.resolved":
        reason = f": {p['reason']}" if p.get("reason") else ""
        return f"approval {p.get('approval_id')} {p.get('outcome')} by {p.get('by')}{reason}"
    if kind == "call.superseded":
        reason = f": {p['reason']}" if p.get("reason") else ""
        return (
            f"{p.get('tool_id')} {p.get('tool_call_id')} {str(p.get('input_hash'))[:12]}… "
            f"superseded by {p.get('by')}{reason} → {str(p.get('edited_input_hash'))[:12]}… "
            f"({p.get('effect')})"
        )
    if kind.startswith("grant."):
        return f"{kind.removeprefix('grant.')} {p.get('grant_id')}"
    if kind == "task.fact":
        return f"task fact {p.get('fact')}"
    return ""


def timeline(events: list[Any]) -> list[dict[str, Any]]:
    """A page of a session's events as rows: one per call, at its first event, with its
    decision, state and every event of it folded (as Temporal's UI groups an activity's
    events); one per event that belongs to no call."""
    rows: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}
    asked: dict[str, str] = {}  # approval id → tool_call_id
    for event in events:
        p = event.payload
        call_id = p.get("tool_call_id")
        if not isinstance(call_id, str) and isinstance(p.get("approval_id"), str):
            call_id = asked.get(p["approval_id"])
        if not isinstance(call_id, str):
            rows.append({"event": event})
            continue
        if isinstance(p.get("approval_id"), str):
            asked[p["approval_id"]] = call_id
        row = calls.get(call_id)
        if row is None:
            row = {"call": call_id, "tool": p.get("tool_id"), "events": [], "state": None}
            row["notes"] = []
            row.update(decision=None, decision_id=None)
            calls[call_id] = row
            rows.append(row)
        row["events"].append(event)
        row["tool"] = row["tool"] or p.get("tool_id")
        if event.type.startswith(("approval.", "call.", "grant.")):
            row["notes"].append(summary(event))  # answers, edits, grants: said on the row
        if event.type == "decision":
            row["decision"], row["decision_id"] = p.get("effect"), p.get("decision_id")
        elif event.type == "action.transition":
            row["state"] = p.get("to")
    return rows


def pending(h: Harness) -> list[dict[str, Any]]:
    """The approval requests still waiting, oldest first (`operations.pending_approvals`:
    secret arguments masked, the rule with its `file:line`, the tool's preview, each
    argument's sources and the diff against the closest earlier call), as the page shows
    them: with the tool's risk, who asked, how long it has waited, and for a workflow's call
    the gate that decides it."""
    now = h.clock()
    return [
        {
            "id": r["request_id"],
            "tool": r["tool_id"],
            "tool_call_id": r["tool_call_id"],
            "input_hash": r["input_hash"],
            "arguments": r["arguments"],
            "rule": r["rule"]["label"],
            "policy": r["rule"]["policy"],
            "where": r["rule"]["at"],
            "why": r["rule"]["reason"],
            "approvers": [f"{a['kind']} {a['value']}" for a in r["approvers"]],
            "scope": r["scope"],
            "session": r["session_id"],
            "requested_at": r["requested_at"],
            "age": _age(now, r["requested_at"]),
            "risk": r["impact"].get("risk"),
            "actor": _who(r["as_whom"]),
            "gate": workflow_gate(r["session_id"]),
            # what the call would do, where its values came from, how it differs
            "preview": r["preview"],
            "provenance": r["provenance"],
            "diff": r["diff"],
            "expires_at": r["expires_at"],
            "expires_in_ms": r["expires_in_ms"],
            "expiry": deadline_words(r),
        }
        for r in operations.pending_approvals(h)
    ]


def _age(now: datetime, iso: str) -> str:
    """How long ago `iso` was, in the largest two units."""
    moment = datetime.fromisoformat(iso)
    moment = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    now = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
    return duration_words(max(0, int((now - moment).total_seconds() * 1000)))


def _who(as_whom: Mapping[str, Any]) -> str:
    user = as_whom.get("user")
    return user if isinstance(user, str) else json.dumps(dict(as_whom), sort_keys=True)


def workflow_gate(session_id: str) -> dict[str, str] | None:
    """The run and gate of a workflow's call (its session is the step's stream,
    `workflow:<run>/<step>#<attempt>`, a branch's run `<run>::<step>`), or None."""
    if not session_id.startswith("workflow:") or "/" not in session_id:
        return None
    run, key = session_id[len("workflow:") :].split("/", 1)
    step = key.split("#", 1)[0].split("+", 1)[0]
    return {"run": run.split("::", 1)[0], "gate": f"{step}.approval"}


FILTERS = ("tool", "actor", "session", "risk", "rule")
"""The queue's filters, each a query parameter matched exactly; `q` searches them all and the
arguments' text."""


def queue(items: list[dict[str, Any]], query: Mapping[str, str]) -> list[dict[str, Any]]:
    """The pending requests an operator's filters and search leave, oldest first."""
    chosen = {k: query[k] for k in FILTERS if query.get(k)}
    words = (query.get("q") or "").casefold().split()

    def keep(item: dict[str, Any]) -> bool:
        if any(str(item.get(k) or "") != v for k, v in chosen.items()):
            return False
        text = " ".join(
            [str(item.get(k) or "") for k in (*FILTERS, "id", "policy")]
            + [exact_json(item["arguments"], None)]
        ).casefold()
        return all(word in text for word in words)

    return [item for item in items if keep(item)]


def build_app(console: Console, *, secure_cookie: bool = False) -> Starlette:
    def page(need_role: str | None = None) -> Callable[[Handler], Handler]:
        """A route for a logged-in operator (an HTML page: redirect to /login; /api: 401);
        a POST also checks the CSRF token and, with `need_role`, the operator's role."""

        def wrap(fn: Handler) -> Handler:
            async def handler(request: Request) -> Response:
                try:
                    return await guarded(request)
                finally:  # a form's file parts, if one came with any, are closed
                    await request.close()

            async def guarded(request: Request) -> Response:
                api = request.url.path.startswith("/api/")
                op = operator_of(request, console)
                if op is None:
                    if api or request.method == "POST":
                        return JSONResponse({"error": "log in first"}, status_code=401)
                    return RedirectResponse("/login", status_code=303)
                if request.method == "POST":
                    form = await request.form()
                    sent = form.get("csrf") or request.headers.get("x-csrf-token") or ""
                    if not _same_token(sent, request.session.get("csrf")):
                        return JSONResponse(
                            {"error": "missing or wrong CSRF token"}, status_code=403
                        )
                    if need_role is not None and not op.may(need_role):
                        return console.render(
                            request,
                            "message.html",
                            403,
                            title="Refused",
                            text=f"`{op.name}` does not hold the console role "
                            f"`{need_role}`, which this action needs",
                        )
                return await fn(request)

            return handler

        return wrap

    async def login(request: Request) -> Response:
        try:
            return await _login(request)
        finally:
            await request.close()

    async def _login(request: Request) -> Response:
        if request.method == "GET":
            return console.render(request, "login.html", error=None)
        form = await request.form()
        name = str(form.get("name", ""))
        address = request.client.host if request.client is not None else "unknown"
        keys = (f"name:{name}", f"address:{address}")
        wait = console.throttle.wait_s(keys)
        if wait > 0:
            seconds = math.ceil(wait)
            response = console.render(
                request,
                "login.html",
                429,
                error=f"too many failed logins for this name or from this address: try again "
                f"in {seconds} s",
            )
            response.headers["retry-after"] = str(seconds)
            return response
        op = authenticate(console.operators, name, str(form.get("password", "")))
        if op is None:
            console.throttle.failed(keys)
            return console.render(request, "login.html", 401, error="unknown name or password")
        if secure_cookie and request.url.scheme != "https":
            # the browser would drop the Secure cookie and come back to this form, silently
            return console.render(
                request,
                "login.html",
                400,
                error="this console listens beyond this machine, so its session cookie is "
                "sent over HTTPS only, and this page came over plain HTTP: the login would not "
                "stick. Open the console through HTTPS (a TLS proxy in front of it), or run it "
                "on 127.0.0.1.",
            )
        console.throttle.succeeded(keys[:1])
        request.session.clear()
        request.session.update({"login": console.logins.open(op.name), "csrf": new_csrf()})
        return RedirectResponse("/", status_code=303)

    async def logout(request: Request) -> Response:
        try:
            return await _logout(request)
        finally:
            await request.close()

    async def _logout(request: Request) -> Response:
        if operator_of(request, console) is None:
            return JSONResponse({"error": "log in first"}, status_code=401)
        form = await request.form()
        sent = form.get("csrf") or request.headers.get("x-csrf-token") or ""
        if not _same_token(sent, request.session.get("csrf")):
            return JSONResponse({"error": "missing or wrong CSRF token"}, status_code=403)
        console.logins.close(request.session.get("login"))  # every copy of the cookie too
        request.session.clear()
        return RedirectResponse("/login", status_code=303)

    @page()
    async def approvals(request: Request) -> Response:
        everything = pending(console.fresh())
        items = queue(everything, request.query_params)
        name = "approvals_list.html" if request.query_params.get("part") else "approvals.html"
        filters = {k: request.query_params.get(k, "") for k in (*FILTERS, "q")}
        choices = {k: sorted({str(a[k]) for a in everything if a.get(k)}) for k in FILTERS}
        return console.render(
            request,
            name,
            items=items,
            total=len(everything),
            filters=filters,
            choices=choices,
            poll=str(request.url.include_query_params(part="1").replace(scheme="", netloc="")),
        )

    @page()
    async def one_approval(request: Request) -> Response:
        """One pending request on a page of its own (the queue's Enter opens it)."""
        request_id = request.path_params["id"]
        found = [a for a in pending(console.fresh()) if a["id"] == request_id]
        if not found:
            return console.render(
                request,
                "message.html",
                404,
                title="Not waiting",
                text=f"`{request_id}` is not a pending request: it was answered, withdrawn or "
                "expired, or never asked (its session's timeline says which).",
            )
        return console.render(request, "approval.html", items=found)

    @page()
    async def api_pending(request: Request) -> Response:
        h = console.fresh()
        found = operations.pending_approvals(h, review=False)  # the ids only: no review
        return JSONResponse({"pending": [r["request_id"] for r in found]})

    def answer(kind: str) -> Handler:
        @page(APPROVER)
        async def act(request: Request) -> Response:
            op = operator_of(request, console)
            assert op is not None
            request_id = request.path_params["id"]
            asked = console.fresh().approvals.requests.get(request_id)
            gate = workflow_gate(asked.session_id) if asked is not None else None
            if gate is not None:  # answering the request would leave the run waiting
                return console.render(
                    request,
                    "message.html",
                    409,
                    title="Decided at the workflow's gate",
                    text=f"`{request_id}` is the call of workflow run `{gate['run']}`: decide "
                    f"its gate `{gate['gate']}` on the Workflows page.",
                )
            form = await request.form()
            reason, arguments = _text(form, "reason"), _text(form, "arguments")
            if reason is None or arguments is None:
                return _not_text(console, request)
            reason = reason.strip()
            edited: Any = None
            if kind == "edit":
                edited, problem = _edited_arguments(arguments)
                if problem is not None:
                    return console.render(
                        request, "message.html", 400, title="Not approved", text=problem
                    )
            h = console.harness
            try:
                # the runtime claims each answer once; the lock keeps the shared harness to
                # one thread at a time
                with console.lock:
                    h.catch_up()
                    if kind == "approve":
                        outcome = operations.approve(h, request_id, by=op.actor)
                    elif kind == "edit":
                        outcome = operations.approve_with_edits(
                            h, request_id, edited, by=op.actor, reason=reason or None
                        )
                    else:
                        outcome = operations.deny(h, request_id, by=op.actor, reason=reason)
            except ApprovalError as error:
                return console.render(
                    request,
                    "message.html",
                    409,
                    title=f"Not {'denied' if kind == 'deny' else 'approved'} ({error.code})",
                    text=error.message,
                )
            text = f"`{request_id}`: {outcome['status']}"
            if outcome["edited_input_hash"]:
                text += f", as the edited call (input hash {outcome['edited_input_hash']})"
            if outcome["reason"]:
                text += f" ({outcome['reason']})"
            return console.render(request, "message.html", title="Done", text=text)

        return act

    @page()
    async def grants(request: Request) -> Response:
        with console.lock:
            rows = operations.active_grants(console.harness)
        return console.render(request, "grants.html", grants=rows)

    @page(APPROVER)
    async def revoke(request: Request) -> Response:
        op = operator_of(request, console)
        assert op is not None
        grant_id = request.path_params["id"]
        given = _text(await request.form(), "reason")
        if given is None:
            return _not_text(console, request)
        reason = given.strip() or None
        try:
            with console.lock:
                operations.revoke_grant(console.harness, grant_id, by=op.actor, reason=reason)
        except ApprovalError as error:
            return console.render(
                request,
                "message.html",
                409,
                title=f"Not revoked ({error.code})",
                text=error.message,
            )
        return console.render(
            request, "message.html", title="Done", text=f"`{grant_id}`: revoked by {op.name}"
        )

    @page()
    async def sessions(request: Request) -> Response:
        h = console.fresh()
        # the streams that are sessions (a `session.started`), not the log's own, a request's
        # answer claims or a workflow gate's
        found = [v for v in h.projections.sessions.values() if v.started_at is not None]
        return console.render(request, "sessions.html", sessions=found)

    @page()
    async def session(request: Request) -> Response:
        sid = request.path_params["id"]
        try:  # a position past any log's reads an empty page
            after = min(max(0, int(request.query_params.get("after", "0"))), LAST_POSITION)
        except ValueError:
            after = 0
        # one page of this session's events, read by position: the first page costs one page
        events = console.harness.store.read(sid, after=after, limit=PAGE + 1)
        more = len(events) > PAGE
        events = events[:PAGE]
        if not events and after == 0:
            archived = archived_note(console.harness.store)
            if archived is not None:  # the log was compacted: the session may be archived
                return console.render(
                    request,
                    "message.html",
                    404,
                    title="Archived or unknown session",
                    text=f"no events in `{sid}` in the log: {archived}; `harnessc replay "
                    "--archive FILE` and `harnessc why --archive FILE` read it",
                )
            return console.render(
                request, "message.html", 404, title="Unknown session", text=f"no events in `{sid}`"
            )
        nxt = events[-1].position if more else None
        return console.render(
            request,
            "session.html",
            sid=sid,
            rows=timeline(events),
            next=nxt,
            after=after,
            why=console.why_command,
        )

    @page()
    async def log(request: Request) -> Response:
        """The chain as the console's watch vouches for it (walked from where it opened the
        log to the head, then only what was appended since: a page in milliseconds on any
        log), and the last whole walk an operator asked for."""
        try:
            result = console.harness.vouched()
        except UnverifiedLog as error:
            result = error.verification
        return console.render(
            request,
            "log.html",
            result=result,
            head=console.harness.head(),
            whole=console.whole_walk,
        )

    @page()
    async def verify_whole(request: Request) -> Response:
        """Walk the whole chain again, from the first event (what `harnessc log verify` does):
        a row changed under a part the watch already walked is found here."""
        started = time.perf_counter()
        result = console.harness.verify()
        console.whole_walk = {
            "result": result,
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
            "took_ms": round((time.perf_counter() - started) * 1000),
        }
        return RedirectResponse("/log", status_code=303)

    def workflows_ops() -> Any:
        from harnessc.runtime.workflows.manage import Workflows

        if console.store_url is None:
            raise _NoWorkflows("the console was started without a store URL")
        return Workflows.operator(console.store_url)

    @page()
    async def workflows(request: Request) -> Response:
        from harnessc.runtime.workflows.manage import WorkflowError

        try:
            ops = workflows_ops()
        except (WorkflowError, _NoWorkflows, ImportError) as error:
            return console.render(request, "workflows.html", runs=[], error=_message(error))
        try:
            runs = [ops.status(r["id"]) for r in ops.list()]
        except WorkflowError as error:
            return console.render(request, "workflows.html", runs=[], error=error.message)
        finally:
            ops.close()
        # an approval gate's call, reviewed as on the approvals page (preview, provenance,
        # diff): by the request its ASK opened, while that request waits
        waiting = {g.get("preview", {}).get("request_id") for r in runs for g in r["pending_gates"]}
        reviews = {a["id"]: a for a in pending(console.fresh()) if a["id"] in waiting}
        return console.render(request, "workflows.html", runs=runs, reviews=reviews, error=None)

    @page(APPROVER)
    async def decide(request: Request) -> Response:
        from harnessc.runtime.workflows.manage import WorkflowError

        op = operator_of(request, console)
        assert op is not None
        form = await request.form()
        run, gate, option = request.path_params["id"], _text(form, "gate"), _text(form, "option")
        if not gate or not option:
            return console.render(
                request,
                "message.html",
                400,
                title="Refused",
                text="the form needs the fields `gate` and `option`, as text",
            )
        try:
            ops = workflows_ops()
        except (WorkflowError, _NoWorkflows, ImportError) as error:
            return console.render(
                request, "message.html", 409, title="Refused", text=_message(error)
            )
        try:
            out = ops.decide(run, gate, option, by=op.actor).to_dict()
        except WorkflowError as error:
            return console.render(
                request, "message.html", 409, title=f"Refused ({error.code})", text=error.message
            )
        finally:
            ops.close()
        if out["outcome"] == "duplicate":  # another decision was taken first: it stands
            text = f"{run} {gate}: already decided, `{out['option']}` by {out['by']} stands"
        else:
            text = f"{run} {gate}: `{option}` accepted"
        return console.render(request, "message.html", title="Done", text=text)

    async def home(request: Request) -> Response:
        return RedirectResponse("/approvals", status_code=303)

    routes = [
        Route("/", home),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/approvals", approvals),
        Route("/approvals/{id}", one_approval),
        Route("/approvals/{id}/approve", answer("approve"), methods=["POST"]),
        Route("/approvals/{id}/deny", answer("deny"), methods=["POST"]),
        Route("/approvals/{id}/edit", answer("edit"), methods=["POST"]),
        Route("/api/pending", api_pending),
        Route("/grants", grants),
        Route("/grants/{id}/revoke", revoke, methods=["POST"]),
        Route("/sessions", sessions),
        Route("/sessions/{id:path}", session),
        Route("/log", log),
        Route("/log/verify", verify_whole, methods=["POST"]),
        Route("/workflows", workflows),
        Route("/workflows/{id:path}/decide", decide, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    from .auth import session_secret

    async def broken_log(request: Request, error: Exception, request_id: str) -> Response:
        """A page that failed: on a record it could not read, when the log's chain does not
        verify (a row changed under it), say so and where. A page of the operators' commands
        (`operations`) verified it before reading, and says where it broke (a break its watch
        found stays the answer until the console is restarted on a log that verifies).
        Otherwise the console's own failure: logged with its request id, which the page
        names."""
        if isinstance(error, UnverifiedLog):
            result = error.verification
        else:
            result = console.harness.verify()
        if result.ok and isinstance(error, UnreadableEvent):
            return console.render(
                request,
                "message.html",
                500,
                title="The event log holds a record the console cannot read",
                text=f"{error}. The chain vouches for the row: another program wrote it, or "
                "rewrote the log after it.",
            )
        if result.ok:  # a bug of the console's: the server logs it, the page names the id
            _log.error("request %s failed", request_id, exc_info=error)
            return console.render(
                request,
                "message.html",
                500,
                title="The console failed on this page",
                text=f"request id {request_id}: the server's log has what went wrong. Nothing "
                "was changed by this request unless a later page says so.",
            )
        return console.render(
            request,
            "message.html",
            500,
            title="The event log does not verify",
            text=f"at position {result.position}: {result.reason}. This page reads records the "
            "chain no longer vouches for; restore the log from a copy that verifies "
            "(`harnessc log verify`).",
        )

    middleware = [
        Middleware(Guard, on_error=broken_log),
        Middleware(
            SessionMiddleware,
            secret_key=session_secret(),
            session_cookie="harnessc_console",
            max_age=8 * 3600,
            same_site="strict",
            https_only=secure_cookie,
        ),
    ]
    return Starlette(routes=routes, middleware=middleware)


def _edited_arguments(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """The edited arguments of the edit form (a JSON object), or why they are not one (an edit
    that keeps a secret's mask is the runtime's to refuse)."""
    try:
        args = json.loads(text)
    except RecursionError:
        return None, "the edited arguments are not JSON the console reads: they nest too deeply"
    except ValueError as error:  # not JSON, or an integer of more digits than Python converts
        return None, f"the edited arguments are not JSON: {error}"
    if not isinstance(args, dict):
        return None, "the edited arguments must be a JSON object"
    return args, None


def _same_token(sent: Any, token: Any) -> bool:
    """Whether the CSRF token sent (a form field or a header) is the session's, compared in
    constant time as bytes: any text compares, and a file part never matches."""
    if not isinstance(sent, str) or not isinstance(token, str) or not token:
        return False
    return hmac.compare_digest(sent.encode("utf-8", "surrogatepass"), token.encode("utf-8"))


def _text(form: Any, name: str) -> str | None:
    """A text field of a form ("" when it is absent); None when it came as a file part."""
    value = form.get(name, "")
    return value if isinstance(value, str) else None


def _not_text(console: Console, request: Request) -> Response:
    return console.render(
        request,
        "message.html",
        400,
        title="Refused",
        text="the form's fields are text: a file part is not read",
    )


class _NoWorkflows(Exception):
    pass


def _message(error: Exception) -> str:
    return str(getattr(error, "message", None) or error)
