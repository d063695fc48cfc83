"""L013, L014, L018: the descriptions a planner ranks and chooses tools by."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence

from harnessc.dsl.diagnostics import Diagnostic
from harnessc.runtime import model as m
from harnessc.runtime.model import PUBLIC_KINDS

from .framework import LintContext, lint_rule

NEAR_DUPLICATE = 0.8
"""Token Jaccard similarity of summary + use_when at or above which two tools are reported."""
MIN_TOKENS = 4
_WORD = re.compile(r"[a-z0-9]+")


def _declared_order(ctx: LintContext, tools: list[m.Tool]) -> list[m.Tool]:
    def key(tool: m.Tool) -> tuple[str, int, str]:
        span = ctx.tool_span(tool.id)
        return (span.source.path, span.start, tool.id) if span else ("", 0, tool.id)

    return sorted(tools, key=key)


@lint_rule(
    "L013",
    bad="""\
tool read_report {
  use_when "Looking at the findings of a scan."
  effects read
  input { path: path }
}
""",
    good="""\
tool read_report {
  summary "Read a scan report."
  use_when "Looking at the findings of a scan."
  effects read
  input { path: path }
}
""",
)
def missing_summary(ctx: LintContext) -> Iterator[Diagnostic]:
    for tool in _declared_order(ctx, list(ctx.spec.tools.values())):
        if tool.summary:
            continue
        yield Diagnostic.make(
            "L013",
            f"tool `{tool.id}` has no `summary`",
            ctx.tool_span(tool.id),
            "no summary",
            help='add `summary "…"`: one sentence on what the tool does',
        )


@lint_rule(
    "L014",
    bad="""\
tool read_report {
  summary "Read a scan report."
  effects read
  input { path: path }
}
""",
    good="""\
tool read_report {
  summary "Read a scan report."
  use_when "Looking at the findings of a scan."
  effects read
  input { path: path }
}
""",
)
def missing_use_when(ctx: LintContext) -> Iterator[Diagnostic]:
    tools = [t for t in ctx.spec.tools.values() if t.kind in PUBLIC_KINDS and not t.use_when]
    for tool in _declared_order(ctx, tools):
        yield Diagnostic.make(
            "L014",
            f"tool `{tool.id}` has no `use_when`",
            ctx.tool_span(tool.id),
            "a planner sees it",
            help='add `use_when "…"`: the situation in which a planner should pick this tool',
        )


def _tokens(tool: m.Tool) -> frozenset[str]:
    return frozenset(_WORD.findall(f"{tool.summary or ''} {tool.use_when or ''}".lower()))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


@lint_rule(
    "L018",
    bad="""\
tool read_report {
  summary "Read a scan report from the workspace."
  use_when "Looking at the findings of a scan."
  effects read
  input { path: path }
}

tool open_report {
  summary "Read a scan report in the workspace."
  use_when "Looking at the findings of a scan."
  effects read
  input { path: path }
}
""",
    good="""\
tool read_report {
  summary "Read a scan report from the workspace."
  use_when "Looking at the findings of a scan."
  effects read
  input { path: path }
}

tool compare_reports {
  summary "Compare two scan reports and list the findings that changed."
  use_when "Checking that a patch fixed what it meant to fix."
  not_for "Reading one report (read_report)."
  effects read
  input {
    before: path
    after: path
  }
}
""",
)
def near_duplicate_description(ctx: LintContext) -> Iterator[Diagnostic]:
    tools = [t for t in ctx.spec.tools.values() if t.kind in PUBLIC_KINDS]
    order = {t.id: i for i, t in enumerate(_declared_order(ctx, tools))}
    words = [(t, w) for t in tools if len(w := _tokens(t)) >= MIN_TOKENS]
    for i, j, score in similar_pairs([w for _, w in words], NEAR_DUPLICATE):
        first, second = sorted((words[i][0], words[j][0]), key=lambda t: order[t.id])
        earlier = ctx.tool_span(first.id)
        yield Diagnostic.make(
            "L018",
            f"tools `{first.id}` and `{second.id}` have nearly the same description",
            ctx.tool_span(second.id),
            f"{round(score * 100)}% of the words of its summary and use_when are shared",
            secondary=[(earlier, "with this tool")] if earlier else [],
            help="say in `summary` and `use_when` what sets each tool apart, and point "
            "from one to the other with `not_for`",
        )


def similar_pairs(
    sets: Sequence[frozenset[str]], threshold: float
) -> Iterator[tuple[int, int, float]]:
    """Every pair of sets with Jaccard similarity ≥ threshold, without comparing all pairs.

    Prefix filtering (the AllPairs algorithm): order each set's tokens from rarest to most
    common; two sets reaching the threshold must share a token among the first
    ``|x| - ceil(threshold * |x|) + 1`` of each. Only sets sharing such a prefix token are
    compared, and only those whose sizes allow the threshold. Exact, and near-linear for
    descriptions, where rare words dominate the prefixes. Pairs come out sorted.
    """
    frequency = Counter(token for tokens in sets for token in tokens)
    ranked = [sorted(tokens, key=lambda tok: (frequency[tok], tok)) for tokens in sets]
    by_size = sorted(range(len(sets)), key=lambda k: (len(sets[k]), k))
    index: dict[str, list[int]] = defaultdict(list)
    found: list[tuple[int, int, float]] = []
    for k in by_size:
        tokens = ranked[k]
        size = len(tokens)
        prefix = tokens[: size - math.ceil(threshold * size - 1e-9) + 1]
        candidates: set[int] = set()
        for token in prefix:
            for other in index[token]:
                # INVARIANT: indexed sets are no larger than this one (sizes ascend)
                if len(sets[other]) >= threshold * size - 1e-9:
                    candidates.add(other)
        for other in candidates:
            score = jaccard(sets[k], sets[other])
            if score >= threshold:
                found.append((min(k, other), max(k, other), score))
        for token in prefix:
            index[token].append(k)
    yield from sorted(found)
