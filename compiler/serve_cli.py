"""`harnessc serve`: the runtime over HTTP (runtime/serve/), composed here with what only the
compiler has: a `.harness` spec compiled on the spot, and the operations console on the same
server (`--console`). A BUILD (a folder `harnessc build` wrote, or its `model.json`) needs no
compiler: the server is the runtime's own.

`harnessc serve token issue|revoke|list` manages the bearer tokens of `--tokens FILE`.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from pathlib import Path
from typing import Any

from .log_option import add_log_option

LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
TOKEN_ACTIONS = ("issue", "revoke", "list")


def add_parser(sub: Any, run: Any) -> None:
    text = "serve the runtime over HTTP/JSON: sessions, decisions, approvals, AuthZEN"
    p = sub.add_parser(
        "serve",
        help=text,
        description=text + "; `serve token issue|revoke|list` manages its bearer tokens",
    )
    p.add_argument(
        "target",
        nargs="+",
        metavar="SPEC|BUILD",
        help="a .harness file or folder, spec JSON, a build folder (model.json); "
        "or `token issue NAME`, `token revoke NAME`, `token list`",
    )
    add_log_option(p, required=False, help="the event log (default: in memory)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=int, default=8780)
    p.add_argument("--tokens", metavar="FILE", help="the bearer tokens (JSON, hashed)")
    p.add_argument("--certfile", metavar="PEM", help="serve HTTPS with this certificate")
    p.add_argument("--keyfile", metavar="PEM", help="the certificate's private key")
    p.add_argument("--console", action="store_true", help="serve the operations console too")
    p.add_argument("--operators", metavar="FILE", help="the console's operators (TOML or JSON)")
    who = p.add_argument_group("token issue")
    who.add_argument("--user", help="the actor's user")
    who.add_argument("--role", help="the actor's role")
    who.add_argument("--roles", help="the actor's roles, comma-separated")
    who.add_argument("--tenant", help="the actor's tenant")
    who.add_argument(
        "--agent", action="append", default=[], help="an agent the token may open (repeat)"
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.target[0] == "token":
        return _token(args)
    if len(args.target) != 1:
        sys.stderr.write("harnessc: serve takes one SPEC or BUILD\n")
        return 2
    try:
        import uvicorn
        from harnessc.runtime.serve.app import build_app
    except ImportError as error:  # starlette and uvicorn are the `serve` extra
        sys.stderr.write(
            f"harnessc: serve needs the `serve` extra (pip install 'harnessc[serve]'): {error}\n"
        )
        return 2
    from harnessc.runtime.log.chain import StoreError
    from harnessc.runtime.log.open import open_store
    from harnessc.runtime.serve.tokens import Tokens

    if (args.certfile is None) != (args.keyfile is None):
        sys.stderr.write("harnessc: HTTPS needs both --certfile and --keyfile\n")
        return 2
    if args.tokens is None and args.host not in LOOPBACK:
        sys.stderr.write(
            f"harnessc: without --tokens the server answers anyone; it listens on loopback "
            f"only, not on {args.host}\n"
        )
        return 2
    try:
        store: Any = open_store(args.log or "memory://")
    except StoreError as error:
        sys.stderr.write(f"harnessc: {error}\n")
        return 2
    target = args.target[0]
    try:
        harness = _harness(target, store)
    except StoreError as error:
        sys.stderr.write(f"harnessc: {error}; the server was not started\n")
        return 2
    if harness is None:
        return 1
    console = None
    if args.console:
        console = _console(args, harness, target)
        if console is None:
            return 2
    tokens = Tokens(Path(args.tokens)) if args.tokens else None
    app = build_app(harness, tokens, fallback=console)
    scheme = "https" if args.certfile else "http"
    # the socket is bound here, so `--port 0` takes a free port and the line below names it
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    # `IPPROTO_TCP` named: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on sockets
    # that say they are TCP, and with it on, a response's two writes wait on the client's
    # delayed ACK (40 ms a request on Linux)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as error:
        sys.stderr.write(f"harnessc: cannot listen on {args.host}:{args.port}: {error.strerror}\n")
        return 2
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        host=args.host,
        port=port,
        log_level="warning",
        ssl_certfile=args.certfile,
        ssl_keyfile=args.keyfile,
    )
    sys.stderr.write(f"harnessc serve on {scheme}://{args.host}:{port}/ (/openapi.json)\n")
    sys.stderr.flush()
    uvicorn.Server(config).run(sockets=[sock])
    return 0


def _harness(target: str, store: Any) -> Any:
    """The harness of a BUILD (no compiler: `Harness.from_json`, with the build's tool
    embeddings) or of a SPEC (compiled here); None when it does not load."""
    from harnessc.runtime import Harness, load_tool_embeddings

    path = Path(target)
    model = path / "model.json" if path.is_dir() else None
    if model is not None and not model.is_file():
        found = sorted(path.glob("*/model.json"))
        model = found[0] if len(found) == 1 else None
    if model is not None and model.is_file():
        try:
            return Harness.from_json(
                model, store=store, embeddings=load_tool_embeddings(model.parent)
            )
        except (OSError, ValueError) as error:
            sys.stderr.write(f"harnessc: `{model}` is not a compiled spec: {error}\n")
            return None
    from .review.replay import load_spec

    spec = load_spec(target, nothing="the server was not started")
    return None if spec is None else Harness(spec, store)


def _console(args: argparse.Namespace, harness: Any, target: str) -> Any:
    from .console.app import Console, build_app
    from .console.auth import OperatorsError, load_operators

    try:
        operators = load_operators(args.operators)
    except OperatorsError as error:
        sys.stderr.write(f"harnessc: {error}\n")
        return None
    console = Console(harness, operators, args.log, spec_path=target)
    return build_app(console, secure_cookie=args.host not in LOOPBACK or bool(args.certfile))


def _token(args: argparse.Namespace) -> int:
    from harnessc.runtime.serve.tokens import Tokens, TokensError

    rest = args.target[1:]
    if not rest or rest[0] not in TOKEN_ACTIONS:
        sys.stderr.write("harnessc: serve token issue NAME | revoke NAME | list\n")
        return 2
    if not args.tokens:
        sys.stderr.write("harnessc: serve token needs --tokens FILE\n")
        return 2
    tokens = Tokens(Path(args.tokens))
    action = rest[0]
    try:
        if action == "list":
            for t in tokens.all():
                state = f"revoked {t.revoked_at}" if t.revoked_at else "live"
                agents = ",".join(t.agents) or "any agent"
                print(f"{t.name}\t{json.dumps(dict(t.actor))}\t{agents}\t{state}")
            return 0
        if len(rest) != 2:
            sys.stderr.write(f"harnessc: serve token {action} NAME\n")
            return 2
        if action == "revoke":
            tokens.revoke(rest[1])
            print(f"revoked `{rest[1]}`")
            return 0
        actor: dict[str, Any] = {"user": args.user} if args.user else {}
        if args.role:
            actor["role"] = args.role
        if args.roles:
            actor["roles"] = [r.strip() for r in args.roles.split(",") if r.strip()]
        if args.tenant:
            actor["tenant"] = args.tenant
        text, _ = tokens.issue(rest[1], actor, args.agent)
    except TokensError as error:
        sys.stderr.write(f"harnessc: {error}\n")
        return 2
    print(text)  # shown once: the file keeps only its SHA-256
    return 0
