"""An MCP gateway: one MCP server in front of the upstream MCP servers a spec declares, every
call of every client judged by the spec (`harnessc gateway`, docs/gateway.md; the `mcp` extra).

An MCP client (an IDE agent, a desktop assistant, an agent SDK) connects to the gateway as to
any MCP server, over stdio or streamable HTTP. The gateway connects to each declared upstream
server with `McpConnection` (so availability, `list_changed` and schema drift are tracked as
for an embedded agent) and gives each client identity one session of the gateway's agent,
named after it, so that what the client did and the approvals it waits on are in the log and
survive a restart of the gateway:

- `tools/list` lists the tools of the agent's surface that are available now (their server
  connected, the tool discovered with the declared schema): nothing else of the upstream
  servers is ever listed, nor callable. The optional search tool answers with the ranker's
  results (`Session.expose`), filtered the same way.
- `tools/call` is normalized, decided and invoked through the session: ALLOW forwards to the
  upstream server and records the result; DENY (or a refusal: unknown tool, invalid
  arguments, a tool unavailable because its server is down or drifted) answers with a tool
  error holding the structured reason; ASK opens an approval request bound to the exact call
  (session, tool, the arguments' hash, the policy's rule and version, an expiry), reports
  progress while it waits up to `ask_wait_s`, runs the call if a person approved it by then,
  and otherwise answers with a pending result naming the request. The same call sent again
  (same tool, same arguments) is that call: once approved it runs, once; a call with any other
  argument is another call, judged afresh.

    gateway = Gateway(harness, "assistant", connections, ask_wait_s=30)
    server = gateway.server()            # an SDK `Server`: run it over stdio or HTTP
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..judge.normalize import PendingCall, Refusal, freeze
from ..session.harness import HarnessError
from .exports import mcp_tool
from .mcp_client import McpConnection

if TYPE_CHECKING:
    from ..model.ir import Tool
    from ..session.approvals import ApprovalRequest
    from ..session.executors import Result
    from ..session.harness import Harness
    from ..session.sessions import Session

__all__ = [
    "DEFAULT_ASK_WAIT_S",
    "SEARCH_TOOL",
    "Answer",
    "Gateway",
    "GatewayError",
    "session_id_of",
]

DEFAULT_ASK_WAIT_S = 30.0
"""How long a call that asks waits for a person's answer before it is answered as pending."""
DEFAULT_PROGRESS_S = 1.0
"""How often a waiting call reports progress to its client."""
_POLL_S = 0.2
SEARCH_TOOL = "harnessc_search_tools"
"""The gateway's own tool: the ranker's answer to a query, among the tools the client may see."""
_SESSION_PREFIX = "gateway"


class GatewayError(RuntimeError):
    """A gateway that cannot start: `code` is stable (`unknown-agent`, `no-upstream`)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Answer:
    """What a `tools/call` is answered with: MCP's `CallToolResult` as plain data (`content`
    text, `structured` content, `is_error`), and how the gateway decided (`outcome`:
    `allowed`, `denied`, `refused`, `failed`, `pending`, `approved`)."""

    text: str
    structured: Mapping[str, Any] | None
    is_error: bool
    outcome: str

    def to_result(self) -> Any:
        """The SDK's `CallToolResult`."""
        from mcp_types import CallToolResult, TextContent

        return CallToolResult(
            content=[TextContent(type="text", text=self.text)],
            structured_content=dict(self.structured) if self.structured is not None else None,
            is_error=self.is_error,
        )


def session_id_of(agent: str, actor: Mapping[str, Any]) -> str:
    """The session a client identity holds at the gateway: one per agent and user, the same
    after a restart (an approval is bound to its session)."""
    user = actor.get("user")
    name = user if isinstance(user, str) and user else "anonymous"
    shown = "".join(c if c.isalnum() or c in "-_.@" else "_" for c in name)[:128]
    return f"{_SESSION_PREFIX}:{agent}:{shown}"


def _text(data: Any) -> str:
    if isinstance(data, Mapping) and set(data) == {"text"} and isinstance(data["text"], str):
        return data["text"]
    return json.dumps(data, ensure_ascii=False, sort_keys=True)


class Gateway:
    """The spec's agent `agent` in front of `connections` (one open `McpConnection` per
    declared upstream server, by name). See the module docstring."""

    def __init__(
        self,
        harness: Harness,
        agent: str,
        connections: Mapping[str, McpConnection],
        *,
        ask_wait_s: float = DEFAULT_ASK_WAIT_S,
        progress_s: float = DEFAULT_PROGRESS_S,
        search: bool = True,
    ) -> None:
        spec = harness.spec
        found = spec.agents.get(agent) or spec.agents.get(spec.qualified(agent))
        if found is None:
            declared = ", ".join(f"`{a}`" for a in sorted(spec.agents)) or "none"
            raise GatewayError(
                "unknown-agent", f"the spec declares no agent `{agent}` (declared: {declared})"
            )
        self.harness = harness
        self.agent = found.name
        self.connections = dict(connections)
        self.ask_wait_s = ask_wait_s
        self.progress_s = progress_s
        self.search = search
        self.sessions: dict[str, Session] = {}
        self._same: dict[tuple[str, str, str], tuple[asyncio.Lock, list[int]]] = {}
        """A lock per exact call in flight (session, tool, arguments) and how many hold or
        wait for it: the same call sent twice at once is judged once, then answered alike."""
        self._upstream = {
            tool_id: name
            for name, conn in self.connections.items()
            for tool_id in conn.declared.tools
        }

    # -- sessions -----------------------------------------------------------------------------

    def session(self, actor: Mapping[str, Any]) -> Session:
        """The session of this client identity: resumed from the log when it is there (after
        a restart), else opened; each upstream connection's state is attached to it."""
        sid = session_id_of(self.agent, actor)
        known = self.sessions.get(sid)
        if known is not None:
            return known
        h = self.harness
        try:
            s = h.resume(sid)
        except HarnessError as error:
            if error.code != "unknown-session":
                raise
            s = h.session(self.agent, actor=dict(actor), session_id=sid)
        for conn in self.connections.values():
            conn.attach(s)
        self.sessions[sid] = s
        return s

    # -- what a client sees --------------------------------------------------------------------

    def visible(self, s: Session) -> list[Tool]:
        """The tools the client may see and call now: on the agent's surface, projected from
        an upstream server of the gateway, and available (server connected, tool discovered
        with the declared schema, consent given)."""
        spec = self.harness.spec
        found = []
        for tool_id in s.surface:
            if tool_id in self._upstream and s.tool_availability(tool_id).available:
                found.append(spec.tools[tool_id])
        return found

    def list_tools(self, s: Session) -> list[dict[str, Any]]:
        """`tools/list`: each visible tool as an MCP definition (`exports.mcp_tool`), and the
        search tool when it is offered."""
        listed = [mcp_tool(t) for t in self.visible(s)]
        if self.search:
            listed.append(
                {
                    "name": SEARCH_TOOL,
                    "title": "Search the tools",
                    "description": "The tools that fit a request, best first (only tools you may "
                    "call are ever named).",
                    "inputSchema": {
                        "type": "object",
                        "properties": {"query": {"type": "string"}},
                        "required": ["query"],
                        "additionalProperties": False,
                    },
                    "annotations": {"readOnlyHint": True, "openWorldHint": False},
                }
            )
        return listed

    def search_tools(self, s: Session, query: str) -> list[dict[str, Any]]:
        """The ranker's answer to `query` (`Session.expose`, recorded as `tools.exposed`),
        filtered as `tools/list` is: a tool the client may not see is never named."""
        wire = {t.id: mcp_tool(t) for t in self.visible(s)}
        ranked = s.expose(query).tools
        return [
            {"name": wire[t]["name"], "description": wire[t].get("description", "")}
            for t in ranked
            if t in wire
        ]

    # -- a call ---------------------------------------------------------------------------------

    async def call(
        self,
        s: Session,
        name: str,
        args: Mapping[str, Any] | None,
        progress: Callable[[float, float, str], Awaitable[None]] | None = None,
    ) -> Answer:
        """`tools/call`: judge the call on its arguments and answer it (see the module
        docstring). `progress(done, total, message)` is told while an ASK waits."""
        if name == SEARCH_TOOL and self.search:
            query = (args or {}).get("query")
            if not isinstance(query, str):
                return _refused("invalid-args", "the search takes a `query` (text)")
            found = await asyncio.to_thread(self.search_tools, s, query)
            return Answer(json.dumps(found, ensure_ascii=False), {"tools": found}, False, "allowed")
        h = self.harness
        tool, refusal = h.names.resolve(name) if isinstance(name, str) else (None, None)
        if tool is None or tool.id not in self._upstream or not s.on_surface(tool.id):
            # a name the agent may not see is not callable through the gateway, and the answer
            # says no more than for a name nothing declares: whether a tool exists off the
            # surface is not the client's to learn
            del refusal
            return _refused("unknown-tool", f"no tool `{name}` is offered here")
        key = (s.id, tool.id, json.dumps(args, sort_keys=True, default=repr))
        lock, holders = self._same.setdefault(key, (asyncio.Lock(), [0]))
        holders[0] += 1
        try:
            async with lock:  # the same call at once: the second finds the first's request
                pending, asked = await asyncio.to_thread(self._normalize, s, tool, args)
                if isinstance(pending, Refusal):
                    return _refused(pending.code, pending.message)
                if asked is not None and asked.status == "rejected":
                    why = await asyncio.to_thread(self._denial, s, pending)
                    return _denied(
                        asked.rule, why or "a person denied the call", request_id=asked.request_id
                    )
                return await self._judged(s, pending, asked, progress)
        finally:
            holders[0] -= 1
            if not holders[0]:
                del self._same[key]

    def _normalize(
        self, s: Session, tool: Tool, args: Mapping[str, Any] | None
    ) -> tuple[PendingCall | Refusal, ApprovalRequest | None]:
        """Freeze the call under the id of the request that already asked about this exact
        call (see `_asked`), else under a new id; and that request."""
        call_id = f"mcp-{uuid.uuid4().hex[:16]}"
        probe = freeze(tool, self.harness.validators[tool.id], call_id, args)
        asked = None
        if isinstance(probe, PendingCall):
            asked = self._asked(s, tool.id, probe.input_hash)
            if asked is not None:
                call_id = asked.tool_call_id
        return s.normalize(tool.id, call_id, args), asked

    def _asked(self, s: Session, tool_id: str, input_hash: str) -> ApprovalRequest | None:
        """The newest request of this session about this exact call that still answers for it:
        waiting, rejected (until it would have expired), or approved while its call has not
        run."""
        h = self.harness
        h.catch_up()
        now = h.clock()
        found = None
        for r in h.approvals.about(s.id, tool_id, input_hash):
            if r.status == "pending" and r.expired(now):
                continue
            if r.status not in ("pending", "approved", "rejected"):
                continue
            if r.status == "approved" and s.ran(f"{r.tool_call_id}:{r.input_hash}"):
                continue
            if r.status == "rejected" and r.expires_at is not None and now >= r.expires_at:
                continue
            if found is None or r.requested_at > found.requested_at:
                found = r
        return found

    async def _judged(
        self,
        s: Session,
        pending: PendingCall,
        asked: ApprovalRequest | None,
        progress: Callable[[float, float, str], Awaitable[None]] | None,
    ) -> Answer:
        judged = s.judgement_of(pending.key)
        if judged is None:
            decision = await asyncio.to_thread(s.decide, pending)
        else:
            decision = judged.decision
        if decision.effect == "deny":
            return _denied(decision.rule, decision.reason or "denied by policy")
        if decision.effect == "allow":
            return _ran(await self._invoke(s, pending), "allowed")
        _, grant = await asyncio.to_thread(s.judge, pending)
        if grant is not None:
            return _ran(await self._invoke(s, pending), "approved")
        if asked is not None and asked.status == "pending":
            request = asked  # the same call again: the request that waits for it
        else:
            request = await asyncio.to_thread(s.request_approval, pending, decision)
        answered = await self._wait(request, progress)
        if answered.status == "approved":
            return _ran(await self._invoke(s, pending), "approved")
        if answered.status == "rejected":
            why = self._denial(s, pending) or "a person denied the call"
            return _denied(answered.rule, why, request_id=answered.request_id)
        if answered.status != "pending":
            return _refused(
                answered.status,
                f"the approval request `{answered.request_id}` is {answered.status}: "
                "send the call again to ask anew",
            )
        judged = s.judgement_of(pending.key)
        version = judged.policy_version if judged is not None else self.harness.policy_version
        return _pending(answered, version)

    async def _invoke(self, s: Session, pending: PendingCall) -> Result:
        """Run an authorised call in a worker thread (`Session.invoke`; the upstream call runs
        on its connection's loop): the commits that record it wait on the disk there, not on
        the loop that serves every client."""
        return await asyncio.to_thread(s.invoke, pending)

    async def _wait(
        self,
        request: ApprovalRequest,
        progress: Callable[[float, float, str], Awaitable[None]] | None,
    ) -> ApprovalRequest:
        """Wait up to `ask_wait_s` for an answer to `request` (given in any process: the
        console, `harnessc approvals`), reporting progress every `progress_s`."""
        h = self.harness
        start = time.monotonic()
        said = -self.progress_s
        current = request
        while True:
            await asyncio.to_thread(h.catch_up)
            current = h.approvals.requests.get(request.request_id, current)
            if current.status == "pending" and current.expired(h.clock()):
                await asyncio.to_thread(h.expire_approvals, [request.request_id])
                current = h.approvals.requests.get(request.request_id, current)
            waited = time.monotonic() - start
            if current.status != "pending" or waited >= self.ask_wait_s:
                return current
            if progress is not None and waited - said >= self.progress_s:
                said = waited
                await progress(
                    round(waited, 3),
                    self.ask_wait_s,
                    f"waiting for approval `{request.request_id}`: {request.why}",
                )
            await asyncio.sleep(min(_POLL_S, self.ask_wait_s - waited))

    def _denial(self, s: Session, pending: PendingCall) -> str | None:
        """Why a person denied the call (a `task.fact` of the session, written by whichever
        process answered)."""
        for event in reversed(list(self.harness.store.read(s.id))):
            if event.type != "task.fact" or event.payload.get("fact") != "denied":
                continue
            entry = event.payload.get("value") or {}
            if (entry.get("tool_call_id"), entry.get("input_hash")) == (
                pending.tool_call_id,
                pending.input_hash,
            ):
                reason, by = entry.get("reason"), entry.get("by")
                return f"denied by {by}: {reason}" if by else reason
        return None

    # -- the SDK's server -----------------------------------------------------------------------

    def server(
        self,
        identify: Callable[[Any], Mapping[str, Any] | None],
        *,
        name: str = "harnessc-gateway",
        version: str = "0.1.0",
    ) -> Any:
        """The SDK's low-level `Server` answering `tools/list` and `tools/call` for the client
        `identify(ctx)` names (its actor; None: an unknown client, refused)."""
        import mcp_types as types
        from mcp.server.lowlevel import NotificationOptions, Server
        from mcp.server.subscriptions import (
            InMemorySubscriptionBus,
            ListenHandler,
            ToolsListChanged,
        )

        bus = InMemorySubscriptionBus()
        clients: set[Any] = set()  # the connections that may be told, on the handshake era

        async def whose(ctx: Any) -> Session:
            actor = identify(ctx)
            if actor is None:
                raise PermissionError("the gateway does not know this client")
            clients.add(ctx.session)
            return await asyncio.to_thread(self.session, actor)

        async def on_list_tools(ctx: Any, params: Any) -> Any:
            s = await whose(ctx)
            listed = await asyncio.to_thread(self.list_tools, s)
            return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in listed])

        async def on_call_tool(ctx: Any, params: Any) -> Any:
            s = await whose(ctx)

            async def report(done: float, total: float, message: str) -> None:
                await ctx.session.report_progress(done, total, message)

            answer = await self.call(s, params.name, params.arguments, report)
            return answer.to_result()

        async def tell() -> None:
            await bus.publish(ToolsListChanged())  # subscriptions/listen (2026-07-28)
            for client in list(clients):  # notifications/tools/list_changed
                try:
                    await client.send_tool_list_changed()
                except Exception:  # a connection that ended, or one that takes no such notice
                    clients.discard(client)

        @contextlib.asynccontextmanager
        async def lifespan(_: Any) -> AsyncIterator[dict[str, Any]]:
            watcher = asyncio.create_task(self.watch(tell))
            try:
                yield {}
            finally:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher

        class GatewayServer(Server[dict[str, Any]]):
            def create_initialization_options(self, *args: Any, **options: Any) -> Any:
                if not args and "notification_options" not in options:
                    options["notification_options"] = NotificationOptions(tools_changed=True)
                return super().create_initialization_options(*args, **options)

        return GatewayServer(
            name,
            version=version,
            lifespan=lifespan,
            on_list_tools=on_list_tools,
            on_call_tool=on_call_tool,
            on_subscriptions_listen=ListenHandler(bus),
        )

    async def watch(self, tell: Callable[[], Awaitable[None]], every_s: float = 0.25) -> None:
        """Call `tell()` whenever an upstream server's state changes (connected or lost, its
        tools listed again after `list_changed`, a schema drifted): what a client may list may
        have changed, so it is told to list again."""
        seen = [conn.state for conn in self.connections.values()]
        while True:
            await asyncio.sleep(every_s)
            now = [conn.state for conn in self.connections.values()]
            if now != seen:
                seen = now
                await tell()


def _refused(code: str, message: str) -> Answer:
    return Answer(
        f"refused ({code}): {message}",
        {"harnessc": {"decision": "refused", "code": code, "reason": message}},
        True,
        "refused",
    )


def _denied(rule: str | None, reason: str, *, request_id: str | None = None) -> Answer:
    shown: dict[str, Any] = {"decision": "deny", "rule": rule, "reason": reason}
    if request_id is not None:
        shown["request_id"] = request_id
    return Answer(
        f"denied by policy ({rule or 'default'}): {reason}", {"harnessc": shown}, True, "denied"
    )


def _pending(request: ApprovalRequest, policy_version: str) -> Answer:
    """The answer to a call whose approval request still waits: what the approval will be
    bound to (the tool, the arguments' hash, the rule and the policy version that asked, the
    request's expiry), so the client can send the same call again once it is approved."""
    expires = request.expires_at.isoformat() if request.expires_at is not None else None
    shown = {
        "decision": "ask",
        "status": "pending",
        "request_id": request.request_id,
        "tool": request.tool_id,
        "rule": request.rule,
        "reason": request.why,
        "input_hash": request.input_hash,
        "policy_version": policy_version,
        "expires_at": expires,
    }
    text = (
        f"approval pending: request `{request.request_id}` ({request.why}). Send the same call "
        "again, with the same arguments, once it is approved; a call with other arguments is "
        "judged afresh."
    )
    return Answer(text, {"harnessc": shown}, True, "pending")


def _ran(result: Result, how: str) -> Answer:
    if result.ok:
        data = dict(result.data) if result.data is not None else {}
        return Answer(_text(data), data, False, how)
    category = result.error_category or result.status
    return Answer(
        f"the call did not succeed ({category}): {result.error or result.observation}",
        {
            "harnessc": {
                "decision": "allow" if result.ran else "refused",
                "status": result.status,
                "category": category,
                "reason": result.error or result.observation,
            }
        },
        True,
        "failed",
    )
