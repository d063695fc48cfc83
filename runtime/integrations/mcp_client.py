"""A live MCP connection (language.md §8) on the official MCP Python SDK (the `mcp` extra).

An `McpConnection` talks to one declared `mcp` server and keeps its `McpState` up to date:
connected, transport valid and the tools it discovered with their input schemas; the
application gives the user's choices (server enabled, disclaimer accepted, agent access). It
binds an executor to every declared tool of the server, so a call that policy allows runs
through the SDK (`tools/call`) with the call's timeout; its result is untrusted (language.md
§8: an external server's output and its annotations are hints, never facts). When the server
sends `notifications/tools/list_changed` (or, on a 2026-07-28 connection, a tools-changed event
of `subscriptions/listen`), the connection lists the tools again and every attached session's
availability follows, each change logged as an `mcp.tools_changed` event.

    conn = McpConnection(h, "scanner", disclaimer_accepted=True, agent_access=True).open()
    s = h.session("planner", actor={"user": "u-1"})
    conn.attach(s)                      # s.facts.mcp["scanner"] follows the live server
    call = s.normalize("mcp:scanner:tool:scan", "call-1", {"target": "repo"})
    s.decide(call); s.invoke(call)      # runs `scan` on the server, within its timeout
    conn.close()                        # or `with McpConnection(...) as conn:` / `async with`

The SDK is asynchronous; the connection runs it on an event loop of its own, in a thread, so
the same connection serves `Session.invoke` (a worker thread waits for the call) and
`Session.ainvoke` (the caller's loop awaits it). `discover` lists a server's tools once
(`harnessc mcp discover`).
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import sys
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import urlsplit

from ..judge.availability import Facts, McpState
from ..log.events import mcp_tools_changed
from ..model.canonical import CanonicalError, parse_json
from ..session.executors import ExecutorContext, Outcome
from ..session.harness import HARNESS_STREAM
from ..session.sessions import facts_record

if TYPE_CHECKING:
    from ..model.ir import McpServer
    from ..session.harness import Harness
    from ..session.sessions import Session

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "DiscoveredTool",
    "Discovery",
    "McpConnection",
    "McpEndpoint",
    "McpError",
    "discover",
]

DEFAULT_TIMEOUT_S = 30.0
"""How long connecting and listing the tools may take."""
DEFAULT_PING_S = 10.0
"""How often a live connection checks that the server still answers."""
_WIND_DOWN_S = 10.0
"""How long, beyond `timeout_s`, reopening a lost connection waits for the old one to end."""
_TOOLS_CHANGED = "notifications/tools/list_changed"
_PAGE_CAP = 100  # tools/list pages read at most: a server whose cursor never ends cannot hang us


class McpError(RuntimeError):
    """A server that cannot be reached or answered wrongly; `code` is stable (`no-sdk`,
    `invalid-transport`, `cannot-connect`, `not-connected`, `unknown-server`)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _sdk() -> Any:
    try:
        import mcp
    except ImportError as exc:  # pragma: no cover - the extra is installed in CI
        raise McpError(
            "no-sdk", "the live MCP client needs the `mcp` extra: pip install 'harnessc[mcp]'"
        ) from exc
    return mcp


# ---------------------------------------------------------------------------------------------
# Where a server is, and what it lists


@dataclass(frozen=True)
class McpEndpoint:
    """How to reach a server: `stdio` (a command line, started as a subprocess) or `http` (a
    streamable-HTTP URL)."""

    transport: str
    target: str
    env: Mapping[str, str] | None = None
    cwd: str | None = None

    @classmethod
    def of(cls, server: McpServer) -> McpEndpoint:
        """The endpoint a spec declares (`transport stdio "cmd"`, `transport http "url"`)."""
        return cls(server.transport, server.command or "")

    def problem(self) -> str | None:
        """Why this transport is not valid, or None."""
        if self.transport == "stdio":
            try:
                argv = shlex.split(self.target)
            except ValueError as exc:
                return f"the command `{self.target}` cannot be split into words ({exc})"
            return None if argv else "the stdio transport names no command"
        if self.transport == "http":
            parts = urlsplit(self.target)
            if parts.scheme in ("http", "https") and parts.netloc:
                return None
            return f"`{self.target}` is not an http(s) URL"
        return f"the live MCP client speaks `stdio` and streamable `http`, not `{self.transport}`"

    def describe(self) -> str:
        return f"{self.transport} `{self.target}`"

    def _transport(self, errlog: TextIO | None) -> Any:
        _sdk()
        if self.transport == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            argv = shlex.split(self.target)
            params = StdioServerParameters(
                command=argv[0],
                args=argv[1:],
                env=dict(self.env) if self.env is not None else None,
                cwd=self.cwd,
            )
            return stdio_client(params, errlog=_stream(errlog or sys.stderr))
        from mcp.client.streamable_http import streamable_http_client

        return streamable_http_client(self.target)


def _stream(errlog: TextIO) -> TextIO:
    """Where a stdio server's standard error goes: `errlog` when it is a file the subprocess
    can write to, else the process's own standard error (a test's captured `sys.stderr` has
    no file descriptor)."""
    try:
        errlog.fileno()
    except (OSError, ValueError, AttributeError):
        return sys.__stderr__ or errlog
    return errlog


@dataclass(frozen=True)
class DiscoveredTool:
    """A tool as a server lists it. `annotations` (read-only, destructive, idempotent, open
    world hints, a title) are the server's claims: untrusted hints, never a tool's effects."""

    name: str
    input_schema: Mapping[str, Any]
    description: str | None = None
    title: str | None = None
    output_schema: Mapping[str, Any] | None = None
    annotations: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Discovery:
    """What one listing found: the server's name and version as it reports them, the protocol
    version agreed, and its tools in the order listed."""

    server_name: str | None
    server_version: str | None
    protocol_version: str | None
    tools: tuple[DiscoveredTool, ...]


def _tool_of(tool: Any) -> DiscoveredTool:
    annotations: dict[str, Any] = {}
    if tool.annotations is not None:
        annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True)
    return DiscoveredTool(
        name=tool.name,
        input_schema=dict(tool.input_schema or {}),
        description=tool.description,
        title=getattr(tool, "title", None),
        output_schema=dict(tool.output_schema) if tool.output_schema else None,
        annotations=annotations,
    )


async def _list_tools(client: Any, *, refresh: bool) -> tuple[DiscoveredTool, ...]:
    found: list[DiscoveredTool] = []
    cursor: str | None = None
    for _ in range(_PAGE_CAP):
        page = await client.list_tools(cursor=cursor, cache_mode="refresh" if refresh else "use")
        found.extend(_tool_of(t) for t in page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tuple(found)


def _client(
    endpoint: McpEndpoint,
    timeout_s: float,
    message_handler: Callable[[Any], Coroutine[Any, Any, None]] | None = None,
    errlog: TextIO | None = None,
) -> Any:
    mcp = _sdk()
    from mcp_types import Implementation

    return mcp.Client(
        endpoint._transport(errlog),
        read_timeout_seconds=timeout_s,
        message_handler=message_handler,
        client_info=Implementation(name="harnessc", version="0.1.0"),
    )


def _why(exc: BaseException) -> str:
    """The innermost reason of a connection failure, in one line (task groups wrap them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def discover(
    endpoint: McpEndpoint, *, timeout_s: float = DEFAULT_TIMEOUT_S, errlog: TextIO | None = None
) -> Discovery:
    """Connect once, list the tools, disconnect. Raises `McpError` (`invalid-transport`,
    `cannot-connect`)."""
    problem = endpoint.problem()
    if problem is not None:
        raise McpError("invalid-transport", problem)
    reached = False
    try:
        async with asyncio.timeout(timeout_s):
            async with _client(endpoint, timeout_s, errlog=errlog) as client:
                reached = True
                tools = await _list_tools(client, refresh=False)
                info = client.server_info
                return Discovery(
                    server_name=info.name if info is not None else None,
                    server_version=(info.version or None) if info is not None else None,
                    protocol_version=client.protocol_version,
                    tools=tools,
                )
    except McpError:
        raise
    except TimeoutError as exc:
        raise McpError(
            "cannot-connect",
            f"the MCP server at {endpoint.describe()} did not list its tools within "
            f"{timeout_s:g} s",
        ) from exc
    except Exception as exc:
        raise McpError("cannot-connect", _failed(endpoint, reached, exc)) from exc


def _unreadable(exc: BaseException) -> str:
    """Why a message from the server could not be read, without quoting it (it may hold a
    tool's data): not JSON, or JSON that is no JSON-RPC message."""
    errors = getattr(exc, "errors", None)
    found = errors() if callable(errors) else []
    invalid = [e for e in found if isinstance(e, dict) and e.get("type") == "json_invalid"]
    if invalid:
        return "not JSON: " + str(invalid[0].get("msg", "invalid")).removeprefix("Invalid JSON: ")
    if found:
        return "JSON that is no JSON-RPC message: neither a request, a notification nor an answer"
    return _why(exc)


def _failed(endpoint: McpEndpoint, reached: bool, exc: BaseException) -> str:
    """Why a connection or its first listing failed: a server out of reach, or one that
    answered with a tool list that is not one."""
    where = endpoint.describe()
    if reached:
        return f"the MCP server at {where} answered, but listing its tools failed: {_why(exc)}"
    return f"cannot reach the MCP server at {where}: {_why(exc)}"


# ---------------------------------------------------------------------------------------------
# A live connection


class McpConnection:
    """A live connection to the declared MCP server `server` of a harness's spec (see the
    module docstring). `command` (a stdio server's command line) or `url` (a streamable-HTTP
    server's) replaces the declared transport and target; `enabled`, `disclaimer_accepted`
    and `agent_access` are the user's choices (`consent` changes them). `timeout_s` bounds
    connecting and each listing; a call's own timeout is its tool's. Every `ping_s` seconds
    the server is pinged: one that stopped answering (a crashed process, a dropped HTTP
    session) is not connected from then on."""

    def __init__(
        self,
        harness: Harness,
        server: str,
        *,
        command: str | None = None,
        url: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        enabled: bool = True,
        disclaimer_accepted: bool = False,
        agent_access: bool = False,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        ping_s: float = DEFAULT_PING_S,
        errlog: TextIO | None = None,
    ) -> None:
        declared = harness.spec.mcp_servers.get(server)
        if declared is None:
            raise McpError("unknown-server", f"the spec declares no MCP server `{server}`")
        self.harness = harness
        self.server = server
        endpoint = McpEndpoint.of(declared)
        if url is not None:
            endpoint = McpEndpoint("http", url)
        elif command is not None:
            endpoint = McpEndpoint("stdio", command)
        self.endpoint = replace(endpoint, env=env, cwd=cwd)
        self.declared = declared
        self.timeout_s = timeout_s
        self.ping_s = ping_s
        self.error: str | None = None
        """Why the connection is down (cannot connect, lost), or None."""
        self.protocol_version: str | None = None
        self.tools: dict[str, DiscoveredTool] = {}
        """The tools the server lists now, by name, with their annotations (untrusted hints)."""
        self._errlog = errlog
        self._state = McpState(
            enabled=enabled,
            disclaimer_accepted=disclaimer_accepted,
            agent_access=agent_access,
            registered=frozenset(),
        )
        self._lock = threading.RLock()
        self._sessions: weakref.WeakSet[Session] = weakref.WeakSet()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._dirty: asyncio.Event | None = None
        self._client: Any = None
        self._lost = False
        self._ready = threading.Event()
        self._ended = threading.Event()  # the connection's loop ended (its thread winds down)

    # -- state --------------------------------------------------------------------------------

    @property
    def state(self) -> McpState:
        """The server's state now, as availability reads it."""
        return self._state

    @property
    def connected(self) -> bool:
        return self._state.connected

    def facts(self, base: Facts | Mapping[str, Any] | None = None) -> Facts:
        """`base` with this server's state (for `Harness.session(..., facts=conn.facts(…))`,
        `Harness.availability`)."""
        facts = Facts.of(base)
        return Facts(
            facts.values, facts.connected, facts.running, {**facts.mcp, self.server: self._state}
        )

    def attach(self, session: Session) -> None:
        """Make `session`'s facts follow this server: its state now, and every change later
        (each an `mcp.tools_changed` event in the session's stream, replayed on resume)."""
        with self._lock:
            self._sessions.add(session)
            self._push(session, self._state, "attached", [], [], [])

    def detach(self, session: Session) -> None:
        with self._lock:
            self._sessions.discard(session)

    def consent(
        self,
        *,
        enabled: bool | None = None,
        disclaimer_accepted: bool | None = None,
        agent_access: bool | None = None,
    ) -> McpState:
        """Change the user's choices; attached sessions follow."""
        changes = {
            k: v
            for k, v in (
                ("enabled", enabled),
                ("disclaimer_accepted", disclaimer_accepted),
                ("agent_access", agent_access),
            )
            if v is not None
        }
        return self._update("consent", **changes)

    # -- opening and closing --------------------------------------------------------------------

    def open(self) -> McpConnection:
        """Connect, list the tools and bind the declared ones' executors; wait at most
        `timeout_s`. A server that cannot be reached leaves the connection down with
        `error` saying why (its tools are unavailable: not connected), never an exception."""
        thread = self._thread
        if thread is not None and (self._lost or self._ended.is_set() or not thread.is_alive()):
            # the connection was lost: open it again once its thread has wound down. The loss
            # is visible (not connected) before the SDK has stopped the server and the loop has
            # ended, so wait for that rather than return a connection that is still going
            thread.join(self.timeout_s + _WIND_DOWN_S)
            if thread.is_alive():
                self.error = (
                    f"the lost connection to the MCP server `{self.server}` did not wind down "
                    f"within {self.timeout_s + _WIND_DOWN_S:g} s; open it again later"
                )
                return self
            self._thread = None
        if self._thread is not None:
            return self
        problem = self.endpoint.problem()
        if problem is not None:
            self.error = problem
            self._update("invalid transport", transport_valid=False, connected=False)
            return self
        _sdk()
        self._ready.clear()
        self._ended.clear()
        self._thread = threading.Thread(
            target=self._main, name=f"harness-mcp-{self.server}", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(self.timeout_s + 5):
            self.error = (
                f"the MCP server at {self.endpoint.describe()} did not answer within "
                f"{self.timeout_s:g} s"
            )
            self._cancel()
        return self

    def close(self) -> None:
        """Disconnect (the server's tools become unavailable: not connected)."""
        thread = self._thread
        if thread is None:
            return
        self._cancel()
        thread.join(self.timeout_s)
        self._thread = None
        # the SDK may still be stopping the server: its tools are unavailable now regardless
        self._update("disconnected", connected=False, transport_valid=False, discovered={})

    def _cancel(self) -> None:
        loop, stop, task = self._loop, self._stop, self._task
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            if stop is not None and (self._client is not None or stop.is_set()):
                # connected, or already winding down (a loss): the SDK's shutdown ends the
                # server; cancelling the task would cut that shutdown short, leaving the
                # server running and this thread waiting on its output for ever
                loop.call_soon_threadsafe(stop.set)
            elif task is not None:
                loop.call_soon_threadsafe(task.cancel)

    def __enter__(self) -> McpConnection:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> McpConnection:
        return await asyncio.to_thread(self.open)

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.close)

    def refresh(self) -> McpState:
        """List the tools again now (as a `tools/list_changed` notification would)."""
        loop = self._loop
        if loop is None or self._client is None:
            return self._state
        future = asyncio.run_coroutine_threadsafe(self._refresh("refresh"), loop)
        future.result(self.timeout_s + 5)
        return self._state

    # -- the connection's own event loop --------------------------------------------------------

    def _main(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._stop, self._dirty = asyncio.Event(), asyncio.Event()
        cause = "disconnected"
        self._lost = False
        reached = False
        try:
            client = _client(self.endpoint, self.timeout_s, self._on_message, self._errlog)
            async with client:
                reached = True
                self._client = client
                self.protocol_version = client.protocol_version
                self.error = None
                self._bind()
                await self._refresh("connected")
                self._ready.set()
                watchers = [asyncio.create_task(self._watch()), asyncio.create_task(self._ping())]
                from mcp_types.version import MODERN_PROTOCOL_VERSIONS

                if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    watchers.append(asyncio.create_task(self._listen()))
                try:
                    await self._stop.wait()
                finally:
                    for w in watchers:
                        w.cancel()
                    await asyncio.gather(*watchers, return_exceptions=True)
                    self._client = None
        except asyncio.CancelledError:
            self.error = self.error or "the connection was cancelled before it was established"
        except Exception as exc:
            self.error = _failed(self.endpoint, reached and not self._ready.is_set(), exc)
            cause = "connection failed"
        finally:
            self._client = None
            if self._lost:
                cause = "connection lost"
            self._update(cause, connected=False, transport_valid=False, discovered={})
            self._ended.set()
            self._ready.set()

    async def _on_message(self, message: Any) -> None:
        # runs in the SDK's receive loop: a request from here would wait on itself, so the
        # listing is left to `_watch`
        if isinstance(message, Exception):
            # a message the SDK could not read (not JSON, or not a JSON-RPC message): which
            # request it answered is unknown, so no answer on this stream can be trusted to
            # be its request's; the connection ends (the calls waiting fail now, not at their
            # timeout) and its tools are unavailable until it is opened again
            self._gone(
                None,
                f"the MCP server `{self.server}` sent a message that could not be read "
                f"({_unreadable(message)}); the connection was closed",
            )
        elif getattr(message, "method", None) == _TOOLS_CHANGED and self._dirty is not None:
            self._dirty.set()

    async def _listen(self) -> None:
        """On a 2026-07-28 connection, the tools-changed events of `subscriptions/listen`."""
        with contextlib.suppress(Exception):
            async with self._client.listen(tools_list_changed=True) as subscription:
                async for _ in subscription:
                    assert self._dirty is not None
                    self._dirty.set()

    def _gone(self, why: str | None, error: str | None = None) -> None:
        """The server stopped answering (`why`), or `error` says what else ended the
        connection: its tools are unavailable from now on, and the connection ends (on its
        loop)."""
        if not self._lost:
            self.error = error or f"the MCP server `{self.server}` stopped answering: {why}"
        self._lost = True
        self._update("connection lost", connected=False, transport_valid=False, discovered={})
        if self._stop is not None:
            self._stop.set()

    async def _ping(self) -> None:
        while True:
            await asyncio.sleep(self.ping_s)
            client = self._client
            if client is None:
                return
            if not await self._answers(client):
                self._gone(f"no answer to a ping within {self.timeout_s:g} s")
                return

    async def _watch(self) -> None:
        assert self._dirty is not None
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                async with asyncio.timeout(self.timeout_s):
                    await self._refresh(_TOOLS_CHANGED)
            except Exception as exc:  # a listing that failed or never came
                # the server said its tools changed: the old listing is not trusted, so its
                # tools are unavailable until a listing succeeds (fail closed)
                why = "it did not answer" if isinstance(exc, TimeoutError) else _why(exc)
                self.error = f"listing the tools of `{self.server}` failed: {why}"
                self._update("listing failed", discovered={})

    async def _refresh(self, cause: str) -> None:
        client = self._client
        if client is None:
            return
        tools = await _list_tools(client, refresh=cause != "connected")
        names = Counter(t.name for t in tools)
        # a name listed twice has no one schema: neither is taken (which one won would depend
        # on the order the server lists them), so a declared tool of that name is unavailable
        self.tools = {t.name: t for t in tools if names[t.name] == 1}
        self.error = (
            f"`{self.server}` lists {', '.join(sorted(n for n, k in names.items() if k > 1))} "
            "more than once"
            if len(self.tools) < len(names)
            else None
        )
        self._update(
            cause,
            connected=True,
            transport_valid=True,
            discovered={name: t.input_schema for name, t in self.tools.items()},
        )

    def _bind(self) -> None:
        h = self.harness
        ids = []
        for tool_id in self.declared.tools:
            h.bind(tool_id, self._executor(tool_id.split(":", 3)[3]))
            ids.append(tool_id)
        with self._lock:
            self._state = replace(self._state, registered=frozenset(ids))

    # -- state changes ----------------------------------------------------------------------

    def _update(self, cause: str, **changes: Any) -> McpState:
        with self._lock:
            old = self._state
            new = replace(old, **changes)
            if new == old:
                return old
            self._state = new
            before, after = old.discovered, new.discovered
            added = sorted(set(after) - set(before))
            removed = sorted(set(before) - set(after))
            changed = sorted(k for k in set(before) & set(after) if before[k] != after[k])
            for session in list(self._sessions):
                self._push(session, new, cause, added, removed, changed)
            self._log(HARNESS_STREAM, new, cause, added, removed, changed, Facts())
            return new

    def _push(
        self,
        session: Session,
        state: McpState,
        cause: str,
        added: list[str],
        removed: list[str],
        changed: list[str],
    ) -> None:
        session.facts = _with_state(session.facts, self.server, state)
        self._log(session.id, state, cause, added, removed, changed, session.facts)

    def _log(
        self,
        stream: str,
        state: McpState,
        cause: str,
        added: list[str],
        removed: list[str],
        changed: list[str],
        facts: Facts,
    ) -> None:
        h = self.harness
        facts = Facts(
            facts.values, facts.connected, facts.running, {**facts.mcp, self.server: state}
        )
        unavailable = {}
        for tool_id in self.declared.tools:
            tool = h.spec.tools.get(tool_id)
            if tool is not None:
                found = h.checker.tool(tool, facts)
                if not found.available:
                    unavailable[tool_id] = "; ".join(found.reasons)
        h.store.append(
            mcp_tools_changed(
                stream,
                server=self.server,
                cause=cause,
                added=added,
                removed=removed,
                changed=changed,
                state=facts_record(Facts(mcp={self.server: state}))["mcp"][self.server],
                unavailable=unavailable,
            )
        )

    # -- calls ----------------------------------------------------------------------------------

    def _executor(self, name: str) -> Callable[..., Any]:
        async def call(args: Mapping[str, Any], ctx: ExecutorContext) -> Any:
            return await self.acall(name, args, timeout_ms=ctx.timeout_ms)

        call.__qualname__ = call.__name__ = f"mcp:{self.server}:{name}"
        return call

    async def acall(self, name: str, args: Mapping[str, Any], *, timeout_ms: int) -> Outcome:
        """Call the tool `name` on the server with these arguments, waiting at most
        `timeout_ms` (from any event loop or a worker's). Sessions call it through the
        executor the connection binds: call it directly only for what no policy governs."""
        loop, client = self._loop, self._client
        if loop is None or client is None:
            raise McpError(
                "not-connected",
                f"the MCP server `{self.server}` is not connected"
                + (f" ({self.error})" if self.error else ""),
            )
        future = asyncio.run_coroutine_threadsafe(self._call(client, name, args, timeout_ms), loop)
        return await asyncio.wrap_future(future)

    async def _call(
        self, client: Any, name: str, args: Mapping[str, Any], timeout_ms: int
    ) -> Outcome:
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                result = await client.call_tool(
                    name, dict(args), read_timeout_seconds=timeout_ms / 1000
                )
        except TimeoutError:
            return Outcome(
                status="unknown",
                error=f"the MCP tool `{name}` did not answer within {timeout_ms} ms",
                error_category="timeout",
            )
        except Exception as exc:
            from mcp_types import CONNECTION_CLOSED

            # the SDK says a closed connection with the code a server's own error may carry
            # too (-32000, JSON-RPC's first "server error"): a server that still answers a
            # ping only failed the call
            if getattr(exc, "code", None) != CONNECTION_CLOSED or await self._answers(client):
                raise
            self._gone(_why(exc))
            # the request may have reached the server before it went away
            return Outcome(
                status="unknown",
                error="the call did not finish: "
                + (self.error or f"the MCP server `{self.server}` went away"),
                error_category="connection_lost",
            )
        return _outcome(name, result)

    async def _answers(self, client: Any) -> bool:
        """Whether the server still answers a ping (within the connection's timeout); an
        error answer is an answer (a 2026-07-28 server may refuse ping, which that protocol
        dropped; the session's own ping is sent, as the client's warns)."""
        from mcp_types import CONNECTION_CLOSED

        try:
            async with asyncio.timeout(self.timeout_s):
                await client.session.send_ping()
        except Exception as exc:
            code = getattr(exc, "code", None)
            return code is not None and code != CONNECTION_CLOSED
        return True


def _with_state(facts: Facts, server: str, state: McpState) -> Facts:
    return Facts(facts.values, facts.connected, facts.running, {**facts.mcp, server: state})


def _outcome(name: str, result: Any) -> Outcome:
    """A `tools/call` result as an executor's `Outcome`: the structured content when the
    server gives one, else the text (a JSON object in it is read as the data)."""
    texts = [c.text for c in result.content or () if getattr(c, "type", None) == "text"]
    text = "\n".join(texts)
    if result.is_error:
        return Outcome(
            status="failure",
            error=f"the MCP tool `{name}` reported an error: {text or 'no detail'}",
            error_category="mcp_tool_error",
        )
    data = result.structured_content
    if not isinstance(data, Mapping):
        try:  # as arguments are read: no NaN, no nesting past what JSON readers take
            parsed = parse_json(text) if len(texts) == 1 else None
        except CanonicalError:
            parsed = None
        data = parsed if isinstance(parsed, Mapping) else {"text": text}
    return Outcome(status="success", data=dict(data))
