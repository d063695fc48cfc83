"""L010–L012, L019: policy rules whose shape is a known way to get governance wrong."""

from __future__ import annotations

from collections.abc import Iterator

from harnessc.dsl import syntax as s
from harnessc.dsl.diagnostics import Diagnostic
from harnessc.dsl.source import Span
from harnessc.runtime import model as m

from .framework import LintContext, lint_rule

_TOOLS = """\
tool read_report {
  summary "Read a scan report."
  use_when "Looking at the findings of a scan."
  effects read
  risk low
  input { path: path }
}

tool deploy {
  summary "Deploy a service to an environment."
  use_when "A change is approved and ready to ship."
  effects external
  risk high
  input {
    service: string
    environment: enum("staging", "production")
  }
}
"""

READ_ONLY_EFFECTS = frozenset({"read", "idempotent", "preview"})
WILDCARD_SELECTORS = ("all", "glob", "module")


def _selector_span(node: object, index: int) -> Span | None:
    selectors = getattr(node, "selectors", ())
    return selectors[index].span if index < len(selectors) else None


def _read_only(tool: m.Tool) -> bool:
    return "read" in tool.effects and set(tool.effects) <= READ_ONLY_EFFECTS


@lint_rule(
    "L010",
    bad=_TOOLS
    + """
policy review {
  default deny
  allow deploy when args.environment == "staging"

  reports: ask read_report {
    approver role "user"
    grant once ttl 10m
  }
}
""",
    good=_TOOLS
    + """
policy review {
  default deny
  allow deploy when args.environment == "staging"

  reports: allow read_report
}
""",
)
def ask_on_read_only(ctx: LintContext) -> Iterator[Diagnostic]:
    for rule, node in ctx.rules():
        if rule.effect != "ask" or rule.condition is not None or node is None:
            continue
        for index, selector in enumerate(rule.selectors):
            if selector.kind != "id":
                continue
            tool = ctx.spec.tools.get(selector.value)
            if tool is None or tool.risk != "low" or not _read_only(tool):
                continue
            declared = ctx.tool_span(tool.id)
            yield Diagnostic.make(
                "L010",
                f"`{rule.label}` asks for approval of every call of the read-only tool `{tool.id}`",
                _selector_span(node, index),
                "read-only and low risk",
                secondary=[(declared, "declared here")] if declared else [],
                notes=["asking for what cannot do harm trains people to approve without reading"],
                help="allow the tool, or ask only `when` a condition makes the call sensitive",
            )


@lint_rule(
    "L011",
    bad=_TOOLS
    + """
policy release {
  default deny
  allow deploy
}
""",
    good=_TOOLS
    + """
policy release {
  default deny
  allow deploy when args.environment == "staging"
  ask deploy when args.environment == "production" {
    approver role "release-manager"
    grant once ttl 15m
  }
}
""",
)
def high_risk_allowed_unconditionally(ctx: LintContext) -> Iterator[Diagnostic]:
    for rule, node in ctx.rules():
        if rule.effect != "allow" or rule.condition is not None or node is None:
            continue
        for index, selector in enumerate(rule.selectors):
            risky = [
                t
                for t in ctx.selected_tools(selector)
                if m.risk_rank(t.risk) >= m.risk_rank("high")
            ]
            if not risky:
                continue
            first = risky[0]
            others = f" and {len(risky) - 1} more" if len(risky) > 1 else ""
            declared = ctx.tool_span(first.id)
            yield Diagnostic.make(
                "L011",
                f"`{rule.label}` allows every call of the {first.risk}-risk tool "
                f"`{first.id}`{others} without a condition",
                _selector_span(node, index),
                "allowed whatever the arguments",
                secondary=[(declared, f"declared {first.risk} risk")] if declared else [],
                help="add a `when` condition that narrows the calls, or `ask` for approval",
            )


@lint_rule(
    "L012",
    bad=_TOOLS
    + """
policy release {
  default deny
  allow * when actor.role == "engineer"
}
""",
    good=_TOOLS
    + """
policy release {
  default deny
  allow read_report when actor.role == "engineer"
}
""",
)
def wildcard_allow(ctx: LintContext) -> Iterator[Diagnostic]:
    for rule, node in ctx.rules():
        if rule.effect != "allow" or node is None:
            continue
        for index, selector in enumerate(rule.selectors):
            if selector.kind not in WILDCARD_SELECTORS:
                continue
            count = len(ctx.selected_tools(selector))
            yield Diagnostic.make(
                "L012",
                f"`{rule.label}` allows `{selector.text}`, which also matches every tool "
                "added later",
                _selector_span(node, index),
                f"matches {count} tool{'s' if count != 1 else ''} today",
                help="name the tools this rule is meant for",
            )


def _option_span(options: tuple[object, ...] | None, key: str) -> Span | None:
    for option in options or ():
        if isinstance(option, s.Attr) and option.key == key:
            return option.span
    return None


def _confirmed_by_user(approvers: tuple[m.Approver, ...]) -> bool:
    """An ASK whose only approver is the role `user` asks the person the agent acts for to
    confirm its call: that person is the requester by design, so self-approval is the point."""
    return bool(approvers) and all((a.kind, a.value) == ("role", "user") for a in approvers)


def _riskiest(tool: m.Tool) -> str:
    """The highest risk a call of `tool` can have (its own, or an operation's)."""
    levels = [tool.risk, *(op.risk for op in tool.operations.values() if op.risk)]
    return max(levels, key=m.risk_rank)


@lint_rule(
    "L019",
    bad=_TOOLS
    + """
policy release {
  default deny
  ask deploy when args.environment == "production" {
    approver role "release-manager"
    self_approval allow
    grant once ttl 15m
  }
}
""",
    good=_TOOLS
    + """
policy release {
  default deny
  ask deploy when args.environment == "production" {
    approver role "release-manager"
    grant once ttl 15m
  }
}
""",
)
def self_approval_of_high_risk(ctx: LintContext) -> Iterator[Diagnostic]:
    for rule, node in ctx.rules():
        if rule.effect != "ask" or rule.self_approval != "allow" or node is None:
            continue
        if _confirmed_by_user(rule.approvers):
            continue
        risky = [
            t
            for selector in rule.selectors
            for t in ctx.selected_tools(selector)
            if m.risk_rank(_riskiest(t)) >= m.risk_rank("high")
        ]
        if not risky:
            continue
        first = risky[0]
        others = f" and {len(risky) - 1} more" if len(risky) > 1 else ""
        declared = ctx.tool_span(first.id)
        yield Diagnostic.make(
            "L019",
            f"`{rule.label}` lets the requester approve their own call of the "
            f"{_riskiest(first)}-risk tool `{first.id}`{others}",
            _option_span(node.options, "self_approval") or node.span,
            "the requester may approve",
            secondary=[(declared, f"declared {first.risk} risk")] if declared else [],
            help="remove `self_approval allow`, so that another approver decides",
        )
    for table in ctx.spec.risk_tables.values():
        for level, entry in table.entries.items():
            if entry.effect != "ask" or entry.self_approval != "allow":
                continue
            if _confirmed_by_user(entry.approvers):
                continue
            if m.risk_rank(level) < m.risk_rank("high"):
                continue
            found = ctx.node_at(entry.origin, s.RiskEntry)
            span = _option_span(found.options, "self_approval") if found is not None else None
            yield Diagnostic.make(
                "L019",
                f"the risk table `{table.name}` lets the requester approve their own "
                f"{level}-risk calls",
                span or ctx.span(entry.origin),
                "the requester may approve",
                help="remove `self_approval allow`, so that another approver decides",
            )
