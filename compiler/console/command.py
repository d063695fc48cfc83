"""`harnessc console`: serve the operations console on the event store of a compiled spec."""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Callable
from typing import Any

LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


def run(args: argparse.Namespace, refuse: Callable[[str], str | None]) -> int:
    """Serve the console (`refuse`: why a `--log` is no log to open, or None)."""
    if args.hash_password:
        return _hash_password()
    if not args.log or not args.spec:
        sys.stderr.write("harnessc: console needs --log LOG and --spec SPEC\n")
        return 2
    try:
        import uvicorn

        from .app import Console, build_app, settle_heap
    except ImportError as error:  # starlette and uvicorn are the `console` extra
        sys.stderr.write(
            f"harnessc: the console needs the `console` extra "
            f"(pip install 'harnessc[console]'): {error}\n"
        )
        return 2
    from harnessc.runtime import Harness
    from harnessc.runtime.log.chain import StoreError
    from harnessc.runtime.log.open import open_store

    from ..review.replay import load_spec
    from .auth import OperatorsError, load_operators

    try:
        operators = load_operators(args.operators)
    except OperatorsError as error:
        sys.stderr.write(f"harnessc: {error}\n")
        return 2
    spec = load_spec(args.spec, nothing="the console was not started")
    if spec is None:
        return 1
    if (problem := refuse(args.log)) is not None:
        sys.stderr.write(f"harnessc: {problem}\n")
        return 2
    try:
        store: Any = open_store(args.log)
    except StoreError as error:
        sys.stderr.write(f"harnessc: {error}\n")
        return 2
    loopback = args.host in LOOPBACK
    if not loopback:
        sys.stderr.write(
            f"warning: the console listens on {args.host}, not only on this machine: serve it "
            "behind HTTPS (its session cookie is marked Secure)\n"
        )
    try:
        console = Console(Harness(spec, store), operators, args.log, spec_path=args.spec)
    except StoreError as error:  # a row this version cannot read: which one, never a traceback
        sys.stderr.write(f"harnessc: {error}; the console was not started\n")
        return 2
    app = build_app(console, secure_cookie=not loopback)
    settle_heap()
    sys.stderr.write(f"harnessc console on http://{args.host}:{args.port}/\n")
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


def _hash_password() -> int:
    from .auth import hash_password

    first = getpass.getpass("password: ") if sys.stdin.isatty() else sys.stdin.readline()
    password = first.rstrip("\n")
    if not password:
        sys.stderr.write("harnessc: an empty password\n")
        return 2
    print(hash_password(password))
    return 0
