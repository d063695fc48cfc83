"""L017: surfaces whose exposure depends on ranking that nobody wrote down."""

from __future__ import annotations

from collections.abc import Iterator

from harnessc.dsl import syntax as s
from harnessc.dsl.diagnostics import Diagnostic
from harnessc.runtime.model.semantics import surface_tools

from .framework import LintContext, lint_rule


def _tools(count: int, prefix: str) -> str:
    return "\n".join(
        f'tool {prefix}{i} {{ summary "Report number {i}."; use_when "Asked for report {i}."; '
        f"effects read; input {{ id: string }} }}"
        for i in range(1, count + 1)
    )


@lint_rule(
    "L017",
    bad=_tools(3, "report.r")
    + """

surface reports {
  expose report.*
  limit 2
}
""",
    good=_tools(3, "report.r")
    + """

surface reports {
  expose report.*
  limit 2
  rank {
    recall lexical top 60
    rerank lexical
  }
}
""",
)
def surface_over_limit_without_rank(ctx: LintContext) -> Iterator[Diagnostic]:
    for surface in ctx.spec.surfaces.values():
        node = ctx.node_at(surface.origin, s.Surface)
        if node is None or any(isinstance(item, s.Rank) for item in node.items):
            continue
        count = len(surface_tools(ctx.spec, surface))
        if count <= surface.limit:
            continue
        limit = next((i for i in node.items if isinstance(i, s.Attr) and i.key == "limit"), None)
        secondary = [(limit.span, "the limit")] if limit is not None else []
        written = (
            f"`limit {surface.limit}`" if limit is not None else f"default limit of {surface.limit}"
        )
        yield Diagnostic.make(
            "L017",
            f"surface `{node.name.text}` can show {count} public tools, more than its "
            f"{written}, and has no `rank` block",
            node.name.span,
            f"{count} public tools",
            secondary=secondary,
            help="add a `rank` block, raise the `limit`, or expose fewer tools",
        )
