"""L024: a delegation target may run calls its planner's policy does not let run (the
delegation ceiling, compiler/analysis/ceiling.py), with a witness call each."""

from __future__ import annotations

from collections.abc import Iterator

from harnessc.dsl import syntax as s
from harnessc.dsl.diagnostics import Diagnostic
from harnessc.dsl.source import Span
from harnessc.runtime import model as m

from ..analysis.ceiling import Breach
from ..analysis.text import session_lines
from .analysis import format_example
from .framework import LintContext, lint_rule, rule_head

_TOOLS = """\
tool deploy {
  summary "Deploy a service to an environment."
  use_when "A change is approved and ready to ship."
  effects external
  risk medium
  input {
    service: string
    environment: enum("staging", "production")
  }
}

surface shipping {
  expose deploy
}
"""

_RELEASE = """
policy release {
  default deny
  ask deploy when args.environment == "production" { approver role "release-manager" }
  allow deploy when args.environment == "staging"
}
"""

_AGENTS = """
agent planner {
  surface shipping
  policy release
  delegate shipper
}

agent shipper {
  surface shipping
  policy hands_on
}
"""


def _outcome_source(spec: m.Spec, policy: str | None, rule: str | None) -> m.SourceRef | None:
    """Where the decision of a region's side is written: its rule, else the default."""
    found = spec.policy(policy) if policy else None
    if found is None:
        return None
    if rule is not None:
        return next((r.origin for r in found.rules if r.label == rule), None)
    return found.default.origin if found.default is not None else found.origin


def _place(ctx: LintContext, origin: m.SourceRef | None) -> Span | None:
    """A rule's head, a `default`, or whatever starts at `origin` — None in `std`."""
    node = ctx.node_at(origin, s.Rule)
    span = rule_head(node) if node is not None else ctx.span(origin)
    return None if span is None or ctx.is_std(span) else span


def _delegate_span(ctx: LintContext, planner: m.Agent, child: m.Agent) -> Span | None:
    node = ctx.node_at(planner.origin, s.Agent)
    if node is None:
        return ctx.span(planner.origin)
    short = child.name.rpartition(".")[2]
    for item in node.items:
        if isinstance(item, s.Attr) and item.key == "delegate":
            for value in item.values:
                if isinstance(value, s.Name) and value.text.rpartition(".")[2] == short:
                    return value.span
    return node.name.span


def _who(agent: m.Agent) -> str:
    return agent.name.rpartition(".")[2]


@lint_rule(
    "L024",
    bad=_TOOLS
    + _RELEASE
    + """
policy hands_on {
  default deny
  allow deploy
}
"""
    + _AGENTS,
    good=_TOOLS
    + _RELEASE
    + """
policy hands_on {
  default deny
  allow deploy when args.environment == "staging"
}
"""
    + _AGENTS,
)
def delegation_widens(ctx: LintContext) -> Iterator[Diagnostic]:
    from ..analysis.ceiling import delegation_ceiling

    groups: dict[tuple[str, str, str | None, str | None], list[Breach]] = {}
    for breach in delegation_ceiling(ctx.spec):
        r = breach.region
        key = (breach.planner.name, breach.child.name, r.new.policy, r.new.rule)
        groups.setdefault(key, []).append(breach)  # one finding per child rule that widens
    for breaches in groups.values():
        yield _finding(ctx, breaches)


def _finding(ctx: LintContext, breaches: list[Breach]) -> Diagnostic:
    breach = breaches[0]
    r = breach.region
    planner, child = _who(breach.planner), _who(breach.child)
    delegated = _delegate_span(ctx, breach.planner, breach.child)
    mine = _place(ctx, _outcome_source(ctx.spec, r.new_policy, r.new.rule))
    primary = mine or delegated
    what = f"rule `{r.new.rule}`" if r.new.rule else f"the default of `{r.new_policy}`"
    secondary: list[tuple[Span, str]] = []
    if delegated is not None and primary is not delegated:
        secondary.append((delegated, f"`{planner}` delegates to `{child}` here"))
    theirs = _place(ctx, _outcome_source(ctx.spec, r.old_policy, r.old.rule))
    if theirs is not None:
        secondary.append((theirs, f"`{planner}`'s policy decides the call `{r.old.effect}`"))
    example = format_example(r.witness)
    notes = [f"for example, the call `{example}`: {r.change} ({planner} → {child})"]
    notes += [f"with {line}" for line in session_lines(r.witness.session)]
    if not all(b.region.exact for b in breaches):
        notes.append("the analysis approximated part of a condition; check the example")
    tools = sorted({b.region.tool for b in breaches})
    named = ", ".join(f"`{t}`" for t in tools[:3]) + (
        f" and {len(tools) - 3} more" if len(tools) > 3 else ""
    )
    return Diagnostic.make(
        "L024",
        f"agent `{child}`, a delegation target of `{planner}`, may run calls that `{planner}`'s "
        f"policy does not let run: {what} decides less strictly on {named}",
        primary,
        f"decides `{r.new.effect}` for `{child}` where `{planner}` gets `{r.old.effect}`",
        secondary=secondary,
        notes=notes,
        help=f"decide these calls as `{planner}`'s policy does, give `{child}` the policy of "
        f"`{planner}`, or grant it explicitly with `# harnessc: ignore[L024] why` here",
    )
