"""`harnessc gateway SPEC`: serve the spec's agent as an MCP server in front of the upstream MCP
servers the spec declares (`runtime/integrations/gateway.py`, docs/gateway.md).

    harnessc gateway assistant.harness --log gateway.db                  # stdio, one client
    harnessc gateway assistant.harness --log gateway.db --transport http \\
        --port 8780 --clients clients.json                               # many clients

Over stdio the gateway serves the one client that started it, as `--client` says (default:
the user running it). Over HTTP every request carries a bearer token that the `--clients`
file names a client for; a request without a known token is refused (401). An upstream server
that cannot be reached leaves its tools unlisted and uncallable (fail closed), and so does a
tool whose schema drifted from the declaration. Exit codes: 0 served and stopped, 2 bad
arguments, a spec with errors, or a log that cannot be opened.
"""

from __future__ import annotations

import argparse
import getpass
import hashlib
import hmac
import json
import sys
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from .log_option import add_log_option

EXIT_OK, EXIT_USAGE = 0, 2
LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


def add_parser(sub: Any, run: Any) -> None:
    """The `gateway` parser (`build_parser` appends it)."""
    text = "serve a spec's agent as an MCP server in front of the MCP servers it declares"
    gateway = sub.add_parser("gateway", help=text, description=text)
    gateway.add_argument("spec", metavar="SPEC", help="a .harness file or folder, or spec JSON")
    add_log_option(gateway, required=False)
    gateway.add_argument("--agent", help="the agent clients act as (default: the only one)")
    gateway.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    gateway.add_argument("--host", default="127.0.0.1", help="address to listen on (http)")
    gateway.add_argument("--port", type=int, default=8780, help="port to listen on (http)")
    gateway.add_argument(
        "--client",
        metavar="JSON",
        help='the stdio client\'s actor, e.g. \'{"user": "u-1", "role": "dev"}\' '
        "(default: the user running the gateway)",
    )
    gateway.add_argument(
        "--clients",
        metavar="FILE",
        help="http: the clients, a JSON object of `sha256:HEX` token digests to actors",
    )
    gateway.add_argument(
        "--ask-wait",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long a call that asks waits for an answer before it is answered as pending",
    )
    gateway.add_argument(
        "--progress-every",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="how often a waiting call reports progress",
    )
    gateway.add_argument(
        "--no-search", action="store_true", help=f"do not offer the search tool ({_search()})"
    )
    gateway.set_defaults(run=run)


def _search() -> str:
    return "harnessc_search_tools"


def _fail(message: str) -> int:
    sys.stderr.write(f"harnessc: {message}\n")
    return EXIT_USAGE


def token_digest(token: str) -> str:
    """How a `--clients` file names a token: `sha256:` and the hex digest of its UTF-8."""
    return "sha256:" + hashlib.sha256(token.encode("utf-8")).hexdigest()


def load_clients(path: str) -> dict[str, dict[str, Any]]:
    """The `--clients` file: `{"sha256:HEX": {"user": …, "role": …}, …}`. Raises ValueError."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ValueError(f"cannot read `{path}`: {error.strerror}") from error
    except json.JSONDecodeError as error:
        raise ValueError(f"`{path}` is not JSON: {error.msg} at line {error.lineno}") from error
    if not isinstance(data, dict) or not data:
        raise ValueError(f"`{path}` names no client: an object of token digests to actors")
    found = {}
    for key, actor in data.items():
        if not (key.startswith("sha256:") and len(key) == 71):
            raise ValueError(f"`{path}`: `{key[:20]}…` is not a `sha256:HEX` token digest")
        if not isinstance(actor, dict) or not isinstance(actor.get("user"), str):
            raise ValueError(f"`{path}`: the client of `{key[:15]}…` needs a `user` (text)")
        found[key.lower()] = actor
    return found


def bearer(
    clients: Mapping[str, Mapping[str, Any]], header: str | None
) -> Mapping[str, Any] | None:
    """The client an `Authorization: Bearer …` header names, or None."""
    if not header or not header.lower().startswith("bearer "):
        return None
    digest = token_digest(header[7:].strip())
    for key, actor in clients.items():
        if hmac.compare_digest(key, digest):
            return actor
    return None


def run(args: argparse.Namespace, refuse: Callable[[str], str | None]) -> int:
    """`harnessc gateway` (see the module docstring)."""
    try:
        from harnessc.runtime.integrations.gateway import Gateway, GatewayError
        from harnessc.runtime.integrations.mcp_client import McpConnection
    except ImportError as error:  # pragma: no cover - the `mcp` extra
        return _fail(f"the gateway needs the `mcp` extra (pip install 'harnessc[mcp]'): {error}")
    from harnessc.runtime import Harness
    from harnessc.runtime.log.chain import StoreError
    from harnessc.runtime.log.open import open_store

    from .review.replay import load_spec

    actor: dict[str, Any] | None = None
    clients: dict[str, dict[str, Any]] = {}
    if args.transport == "stdio":
        if args.clients:
            return _fail("--clients is for --transport http; a stdio client is named by --client")
        try:
            given = json.loads(args.client) if args.client else {"user": getpass.getuser()}
        except json.JSONDecodeError as error:
            return _fail(f"--client is not JSON: {error.msg}")
        if not isinstance(given, dict) or not isinstance(given.get("user"), str):
            return _fail('--client is an actor with a `user`: {"user": "u-1", …}')
        actor = given
    else:
        if args.client:
            return _fail("--client is for --transport stdio; http clients are named by --clients")
        if not args.clients:
            return _fail("--transport http needs --clients FILE: every client is identified")
        try:
            clients = load_clients(args.clients)
        except ValueError as error:
            return _fail(str(error))
    if args.ask_wait < 0 or args.progress_every <= 0:
        return _fail("--ask-wait is 0 or more seconds, --progress-every more than 0")
    spec = load_spec(args.spec, nothing="the gateway was not started")
    if spec is None:
        return EXIT_USAGE
    if not spec.mcp_servers:
        return _fail("the spec declares no `mcp` server for the gateway to stand in front of")
    agent = args.agent
    if agent is None:
        if len(spec.agents) != 1:
            listed = ", ".join(f"`{a}`" for a in sorted(spec.agents)) or "none"
            return _fail(f"name the agent the clients act as with --agent (declared: {listed})")
        agent = next(iter(spec.agents))
    store: Any = None
    if args.log:
        # the gateway writes its log, as an embedded agent's harness does: a new file is a new
        # log, and an existing one must be a log (never another application's database)
        if not _new_file(args.log) and (problem := refuse(args.log)) is not None:
            return _fail(problem)
        try:
            store = open_store(args.log)
        except StoreError as error:
            return _fail(str(error))
    else:
        sys.stderr.write(
            "warning: no --log: the gateway's record and its approvals live in memory and end "
            "with it\n"
        )
    try:
        harness = Harness(spec, store)
    except StoreError as error:
        return _fail(f"{error}; the gateway was not started")
    with ExitStack() as stack:
        connections = {}
        for name in sorted(spec.mcp_servers):
            conn = McpConnection(
                harness, name, disclaimer_accepted=True, agent_access=True, errlog=sys.stderr
            )
            stack.callback(conn.close)
            conn.open()
            if conn.error is not None:
                sys.stderr.write(
                    f"warning: upstream `{name}`: {conn.error}; its tools are not offered\n"
                )
            connections[name] = conn
        try:
            gateway = Gateway(
                harness,
                agent,
                connections,
                ask_wait_s=args.ask_wait,
                progress_s=args.progress_every,
                search=not args.no_search,
            )
        except GatewayError as error:
            return _fail(error.message)
        if args.transport == "stdio":
            return _serve_stdio(gateway, actor or {})
        return _serve_http(gateway, clients, args.host, args.port)
    return EXIT_OK  # pragma: no cover - the with block returns


def _new_file(log: str) -> bool:
    """Whether `log` names a SQLite file that is not there yet."""
    path = log.removeprefix("sqlite:///")
    return "://" not in path and not Path(path).exists()


def _serve_stdio(gateway: Any, actor: Mapping[str, Any]) -> int:
    import anyio
    from mcp.server.stdio import stdio_server

    server = gateway.server(lambda ctx: actor)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)
    return EXIT_OK


def _serve_http(gateway: Any, clients: Mapping[str, Any], host: str, port: int) -> int:
    import uvicorn
    from starlette.responses import JSONResponse

    def identify(ctx: Any) -> Mapping[str, Any] | None:
        request = getattr(ctx, "request", None)
        headers = getattr(request, "headers", None)
        return bearer(clients, headers.get("authorization") if headers is not None else None)

    server = gateway.server(identify)
    app = server.streamable_http_app(host=host)

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {
                k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]
            }
            if bearer(clients, headers.get("authorization")) is None:
                refused = JSONResponse(
                    {"error": "unknown client: send `Authorization: Bearer TOKEN`"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await refused(scope, receive, send)
                return
        await app(scope, receive, send)

    if host not in LOOPBACK:
        sys.stderr.write(
            f"warning: the gateway listens on {host}, not only on this machine: serve it behind "
            "HTTPS (its clients send bearer tokens)\n"
        )
    sys.stderr.write(f"harnessc gateway on http://{host}:{port}/mcp\n")
    uvicorn.run(guarded, host=host, port=port, log_level="warning")
    return EXIT_OK
