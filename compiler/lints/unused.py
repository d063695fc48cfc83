"""L015, L016: runtime facts that are declared and never read."""

from __future__ import annotations

from collections.abc import Iterator

from harnessc.dsl.diagnostics import Diagnostic

from ..resolve import Symbol
from .framework import LintContext, lint_rule


def _unused(ctx: LintContext, kind: str) -> list[Symbol]:
    used = {id(symbol) for symbol in ctx.resolution.references.values()}
    symbols = ctx.resolution.globals.get(kind, {}).values()
    unused = [sym for sym in symbols if id(sym) not in used]
    return sorted(unused, key=lambda sym: (sym.span.source.path, sym.span.start))


@lint_rule(
    "L015",
    bad="""\
connection github "GitHub account linked by the user"

tool search_code {
  summary "Search code in the linked account's repositories."
  use_when "Finding where a symbol is used across repositories."
  effects read
  input { query: string }
}
""",
    good="""\
connection github "GitHub account linked by the user"

tool search_code {
  summary "Search code in the linked account's repositories."
  use_when "Finding where a symbol is used across repositories."
  effects read
  input { query: string }
  requires connected(github)
}
""",
)
def unused_connection(ctx: LintContext) -> Iterator[Diagnostic]:
    for kind, word, function in (
        ("connection", "connection", "connected"),
        ("runtime", "runtime", "running"),
    ):
        for symbol in _unused(ctx, kind):
            yield Diagnostic.make(
                "L015",
                f"{word} `{symbol.name}` is never used",
                symbol.span,
                "declared here, read nowhere",
                help=f"add `requires {function}({symbol.name})` to the tools that need it, or "
                f"remove the {word}",
            )


@lint_rule(
    "L016",
    bad="""\
fact workspace.open: bool

tool read_file {
  summary "Read a file of the workspace."
  use_when "Reading a file that is open in the workspace."
  effects read
  input { path: path }
}
""",
    good="""\
fact workspace.open: bool

tool read_file {
  summary "Read a file of the workspace."
  use_when "Reading a file that is open in the workspace."
  effects read
  input { path: path }
  requires workspace.open == true
}
""",
)
def unused_fact(ctx: LintContext) -> Iterator[Diagnostic]:
    for symbol in _unused(ctx, "fact"):
        yield Diagnostic.make(
            "L016",
            f"fact `{symbol.name}` is never read",
            symbol.span,
            "declared here, read nowhere",
            help="read it in a `requires` or a condition, or remove it",
        )
