"""L001–L005: the policy analysis's findings (compiler/analysis/policy.py) as lint warnings.

The analysis is exact (SMT) and gives each finding an example call; these rules only place the
finding in the source and say what to do about it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from harnessc.dsl import syntax as s
from harnessc.dsl.diagnostics import Diagnostic
from harnessc.dsl.source import Span

from ..analysis.budget import RLIMIT_VARIABLE
from ..analysis.text import session_lines
from .framework import LintContext, lint_rule, rule_head

if TYPE_CHECKING:
    from ..analysis.policy import Finding

_DEPLOY = """\
tool deploy {
  summary "Deploy a service to an environment."
  use_when "A change is approved and ready to ship."
  effects external
  risk high
  input {
    service: string
    environment: enum("staging", "production")
    ticket: string?
  }
}
"""

_MAIL = """\
tool mail.send {
  summary "Send an email."
  use_when "The user asks to send an email."
  effects external
  risk medium
  input { to: string, subject: string }
}
"""

_RECORDS = ("actor", "resource", "facts", "task", "env", "execution")


def format_example(example: Any) -> str | None:
    """A witness call as a test would write it: `tool(arg: value, …) as actor { … } …`.

    Takes the analysis's `Witness` (its `call`), a `Call`, a mapping with `tool` and `args`, or
    text; records that are empty are left out.
    """
    if example is None:
        return None
    if isinstance(example, str):
        return example
    call = getattr(example, "call", example)
    get = call.get if isinstance(call, dict) else lambda key: getattr(call, key, None)
    tool = get("tool") or get("tool_id")
    if tool is None:
        return str(example)
    args = ", ".join(f"{k}: {_value(v)}" for k, v in sorted((get("args") or {}).items()))
    parts = [f"{tool}({args})"]
    for key in _RECORDS:
        record = get(key) or {}
        if record:
            parts.append(f"{'as actor' if key == 'actor' else key} {_value(record)}")
    for key, word in (("connections", "connected"), ("runtimes", "running")):
        on = sorted(name for name, value in (get(key) or {}).items() if value)
        if on:
            parts.append(f"{word}: {', '.join(on)}")
    return " ".join(parts)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        inner = ", ".join(f"{k}: {_value(v)}" for k, v in sorted(value.items()))
        return f"{{ {inner} }}" if inner else "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return str(value)


def _findings(ctx: LintContext, kind: str) -> Iterator[Any]:
    if ctx.analysis is None:
        return
    for finding in ctx.analysis.findings:
        if getattr(finding, "kind", None) == kind:
            yield finding


def _place(ctx: LintContext, finding: Any, part: str) -> tuple[Span | None, s.Rule | None]:
    """The span to underline for a finding: a rule's head or condition, or a `default`."""
    node = ctx.node_at(finding.origin, s.Rule)
    if node is not None:
        if part == "condition" and node.when is not None:
            return node.when.span, node
        return rule_head(node), node
    default = ctx.node_at(finding.origin, s.Default)
    if default is not None:
        return default.span, None
    return ctx.span(finding.origin), None


def _other(ctx: LintContext, finding: Any, label: str) -> list[tuple[Span, str]]:
    other = ctx.rule_by_label(
        getattr(finding, "other_rule", None), getattr(finding, "policy", None)
    )
    if other is None:
        return []
    node = ctx.node_at(other.origin, s.Rule)
    return [(rule_head(node), label)] if node is not None else []


def _adapt(
    ctx: LintContext,
    code: str,
    kind: str,
    part: str,
    label: str,
    other: str,
    help: str | Callable[[LintContext, Finding], str],
) -> Iterator[Diagnostic]:
    for finding in _findings(ctx, kind):
        span, _ = _place(ctx, finding, part)
        example = format_example(getattr(finding, "example", None))
        notes = [f"for example, the call `{example}`"] if example else []
        call = getattr(getattr(finding, "example", None), "call", None)
        if example and getattr(call, "session", None):
            notes.extend(f"with {line}" for line in session_lines(call.session))  # type: ignore[union-attr]
        if example and getattr(finding, "exact", True) is False:
            notes.append("the analysis approximated part of a condition; check the example")
        yield Diagnostic.make(
            code,
            finding.message,
            span,
            label,
            secondary=_other(ctx, finding, other),
            notes=notes,
            help=help if isinstance(help, str) else help(ctx, finding),
        )


@lint_rule(
    "L001",
    bad=_DEPLOY
    + """
policy release {
  default deny

  any_staging: allow deploy when args.environment == "staging"
  # never wins: every call it matches is already allowed by `any_staging`
  web_staging: allow deploy when args.environment == "staging" and args.service == "web"
}
""",
    good=_DEPLOY
    + """
policy release {
  default deny

  web_staging: allow deploy when args.environment == "staging" and args.service == "web"
  any_staging: allow deploy when args.environment == "staging"
}
""",
)
def never_wins(ctx: LintContext) -> Iterator[Diagnostic]:
    yield from _adapt(
        ctx,
        "L001",
        "never-wins",
        "head",
        "this rule never decides a call",
        "every call it matches is decided by this rule",
        _never_wins_help,
    )


def _never_wins_help(ctx: LintContext, finding: Finding) -> str:
    """Order helps only against an earlier rule of the same effect: a stronger effect wins
    wherever both match, whatever their order (DENY beats ASK beats ALLOW)."""
    policy = ctx.spec.policies.get(finding.policy)
    rules = {r.label: r for r in policy.rules} if policy is not None else {}
    mine = rules.get(finding.rule or "")
    beater = rules.get(finding.other_rule or "")
    if beater is None:
        return "remove the rule, or narrow the rules that beat it"
    if mine is not None and beater.effect != mine.effect:
        return (
            f"a `{beater.effect}` rule beats an `{mine.effect}` rule wherever both match, in any "
            f"order: remove this rule, or narrow `{beater.label}` to leave out the calls this "
            "rule is for"
        )
    return "remove the rule, or move it before the rule that beats it"


@lint_rule(
    "L025",
    bad=_DEPLOY
    + _MAIL
    + """
policy release {
  default deny

  ask deploy {
    approver role "release-manager"
    reason "Deploys need a release manager."
  }
  # `deploy` never wins here: the ASK above decides every deploy call
  routine: allow mail.send, deploy
}
""",
    good=_DEPLOY
    + _MAIL
    + """
policy release {
  default deny

  ask deploy {
    approver role "release-manager"
    reason "Deploys need a release manager."
  }
  routine: allow mail.send
}
""",
)
def selector_never_wins(ctx: LintContext) -> Iterator[Diagnostic]:
    for finding in _findings(ctx, "selector-never-wins"):
        span, node = _place(ctx, finding, "head")
        at = finding.selector
        if node is not None and at is not None and at < len(node.selectors):
            span = node.selectors[at].span
        example = format_example(finding.example)
        notes = [f"for example, the call `{example}` is decided by another rule"] if example else []
        if example and finding.exact is False:
            notes.append("the analysis approximated part of a condition; check the example")
        yield Diagnostic.make(
            "L025",
            finding.message,
            span,
            "this selector never decides a call",
            notes=notes,
            help="remove the selector, or change the rules that decide its calls",
        )


@lint_rule(
    "L002",
    bad=_DEPLOY
    + """
policy release {
  default deny

  both: allow deploy when args.environment == "staging" and args.environment == "production"
}
""",
    good=_DEPLOY
    + """
policy release {
  default deny

  either: allow deploy when args.environment == "staging" or args.environment == "production"
}
""",
)
def unsatisfiable_condition(ctx: LintContext) -> Iterator[Diagnostic]:
    yield from _adapt(
        ctx,
        "L002",
        "unsatisfiable",
        "condition",
        "no call makes this true",
        "",
        "check for `and` where `or` was meant, or remove the rule",
    )


@lint_rule(
    "L003",
    bad=_DEPLOY
    + """
policy release {
  default deny

  ship: allow deploy when args.environment == "production"
  hold: deny deploy when args.environment == "production" {
    reason "Production is frozen."
  }
}
""",
    good=_DEPLOY
    + """
policy release {
  default deny

  ship: allow deploy when args.environment == "staging"
  hold: deny deploy when args.environment == "production" {
    reason "Production is frozen."
  }
}
""",
)
def opposite_effects(ctx: LintContext) -> Iterator[Diagnostic]:
    yield from _adapt(
        ctx,
        "L003",
        "opposite-effects",
        "head",
        "this rule",
        "has the same scope and the opposite effect",
        "keep one of the two rules",
    )


@lint_rule(
    "L004",
    bad=_DEPLOY
    + """
policy release {
  default deny

  cross_tenant: deny * when resource.tenant != actor.tenant {
    reason "Cross-tenant access is never allowed."
  }
}
""",
    good=_DEPLOY
    + """
policy release {
  default deny

  cross_tenant: deny * when resource has tenant and not actor.tenant == resource.tenant {
    reason "Cross-tenant access is never allowed."
  }
}
""",
)
def absent_value_fails_open(ctx: LintContext) -> Iterator[Diagnostic]:
    yield from _adapt(
        ctx,
        "L004",
        "absent-value",
        "condition",
        "false when the value is absent, so the rule does not apply",
        "",
        "guard the read with `has`, or write the condition so that an absent value matches",
    )


@lint_rule(
    "L005",
    bad=_DEPLOY
    + """
policy release {
  default allow
}
""",
    good="import std.risk\n\n"
    + _DEPLOY
    + """
policy release {
  default std.risk.defaults
}
""",
)
def default_allow(ctx: LintContext) -> Iterator[Diagnostic]:
    yield from _adapt(
        ctx,
        "L005",
        "default-allow",
        "head",
        "every call no rule matches is allowed",
        "",
        "use `default deny`, `default ask` or a risk table such as `std.risk.defaults`",
    )


@lint_rule(
    "L006",
    bad=_MAIL
    + """
policy mail {
  default deny

  # two patterns over the same texts: the slowest kind of question for z3
  replies: deny mail.send when args.subject matches "^(re|fw): [a-z ]{10,60}[0-9]{3}$"
    and not args.to matches "^[a-m]{8,40}@corp\\\\.com$" {
    reason "Replies go to the company only."
  }
}
""",
    good=_MAIL
    + """
policy mail {
  default deny

  # whole texts compared for equality: the quickest kind of question
  everyone: deny mail.send when args.to == "everyone@corp.com" {
    reason "Mail to everyone goes through the newsletter."
  }
}
""",
)
def undecided(ctx: LintContext) -> Iterator[Diagnostic]:
    yield from _adapt(
        ctx,
        "L006",
        "undecided",
        "head",
        "not decided within its budget",
        "",
        f"simplify the condition, or raise the budget with `{RLIMIT_VARIABLE}` (z3's resource "
        "units, 0 for none)",
    )
