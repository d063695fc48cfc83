"""`--log`: how every command that reads or writes an event log names it.

`replay`, `why`, `console`, `approvals`, `grants`, `log` and `workflow` all take `--log PATH`
(`PATH`, `sqlite:///PATH` or `postgresql://…`). `--store`, the name some of them took before,
is still accepted as a hidden alias: it is not shown by `--help`, and using it prints a
deprecation warning on standard error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

LOG = "--log"
DEPRECATED = "--store"
LOG_HELP = "the event log: PATH, sqlite:///PATH or postgresql://…"


def add_log_option(parser: argparse.ArgumentParser, *, required: bool = True, **kw: Any) -> None:
    """`--log` on `parser`, the one way a command names its event log."""
    kw.setdefault("help", LOG_HELP)
    parser.add_argument(LOG, required=required, metavar="LOG", **kw)


class Parser(argparse.ArgumentParser):
    """An argument parser (and, through `add_subparsers`, each of its subcommands' parsers)
    that reads `--store` as `--log` where the command takes `--log`, with a warning."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if args is not None and LOG in self._option_string_actions:
            args = _renamed(list(args), self.prog)
        return super().parse_known_args(args, namespace)


def _renamed(args: list[str], prog: str) -> list[str]:
    out: list[str] = []
    warned = False
    for i, arg in enumerate(args):
        if arg == "--":
            return out + args[i:]
        if arg == DEPRECATED or arg.startswith(DEPRECATED + "="):
            if not warned:
                sys.stderr.write(
                    f"{prog}: warning: `{DEPRECATED}` is deprecated and will be removed; "
                    f"use `{LOG}`\n"
                )
                warned = True
            arg = LOG + arg[len(DEPRECATED) :]
        out.append(arg)
    return out
