"""L020–L023, L027–L029: session-aware policy that cannot work as written (provenance, history,
labels, quantifiers over optional lists, provenance asked of a boolean, labelled data a trusted
tool gives)."""

from __future__ import annotations

from collections.abc import Iterator

from harnessc.dsl import syntax as s
from harnessc.dsl.diagnostics import Diagnostic
from harnessc.dsl.source import Span
from harnessc.runtime import model as m
from harnessc.runtime.judge.provenance import arg_name, spec_defaults
from harnessc.runtime.model.semantics import surface_tools

from ..analysis.concrete import Found, canonical, session_terms
from ..analysis.text import selector_text, spec_text
from .framework import LintContext, lint_rule, rule_head
from .paths import field_at, nodes_of, rule_conditions, type_at

__all__ = ["callable_tools", "label_producers"]

_MAIL = """\
tool mail.read {
  summary "Read one mail of the inbox."
  use_when "The user asks about a mail."
  effects read
  input { id: string }
  output { sender: string, body: string }
}

tool payments.send {
  summary "Send a payment to an IBAN."
  use_when "The user asks to pay someone."
  effects write external
  risk high
  input { iban: string, amount: int }
}

surface everyday {
  expose mail.read, payments.send
}

agent assistant {
  surface everyday
  policy payments
}
"""


def _span(node: s.Rule | None) -> Span | None:
    if node is None:
        return None
    return node.when.span if node.when is not None else rule_head(node)


def _terms(ctx: LintContext) -> Iterator[tuple[m.Rule, s.Rule | None, Found]]:
    for rule, node in ctx.rules():
        if rule.condition is not None:
            for found in session_terms(rule.condition):
                yield rule, node, found


def label_producers(spec: m.Spec, label: str) -> list[str]:
    """The tools whose results can carry data label `label` (tool-wide or on an output field,
    nested fields included), by id."""

    def in_fields(fields: tuple[m.Field, ...]) -> bool:
        return any(label in f.labels or in_fields(f.type.fields) for f in fields)

    return sorted(
        t.id
        for t in spec.tools.values()
        if label in t.labels or (t.output is not None and in_fields(t.output.fields))
    )


def callable_tools(spec: m.Spec) -> set[str] | None:
    """The tools some agent, skill or workflow can call (None: the spec declares no agent and
    no workflow, so who calls what is decided elsewhere)."""
    if not spec.agents and not spec.workflows:
        return None
    out: set[str] = set()
    for agent in spec.agents.values():
        surface = spec.surfaces.get(agent.surface or "")
        if surface is not None:
            out.update(surface_tools(spec, surface))
        for skill in agent.skills:
            found = spec.skills.get(skill)
            out.update(found.private_tools if found is not None else ())
    for workflow in spec.workflows.values():
        out.update(step.tool for step in workflow.steps if step.tool is not None)
    return out


@lint_rule(
    "L020",
    bad=_MAIL
    + """
policy payments {
  default deny
  allow mail.read
  no_leak: deny payments.send when seen(secret within 1h) {
    reason "Secret data was read in the last hour: no payment leaves."
  }
  allow payments.send when args.amount < 100
}
""",
    good=_MAIL.replace(
        "output { sender: string, body: string }",
        "output { sender: string, body: string label secret }",
    )
    + """
policy payments {
  default deny
  allow mail.read
  no_leak: deny payments.send when seen(secret within 1h) {
    reason "Secret data was read in the last hour: no payment leaves."
  }
  allow payments.send when args.amount < 100
}
""",
)
def label_never_produced(ctx: LintContext) -> Iterator[Diagnostic]:
    done: set[tuple[str, str]] = set()
    for rule, node, found in _terms(ctx):
        term = found.term
        seen = isinstance(term, m.History) and term.func == "seen"
        if not (seen or (isinstance(term, m.Provenance) and term.source == "label")):
            continue
        label = getattr(term, "label", None)
        if label is None or label_producers(ctx.spec, label) or (rule.label, label) in done:
            continue
        done.add((rule.label, label))
        yield Diagnostic.make(
            "L020",
            f"`{spec_text(term)}` in `{rule.label}` never holds: no tool's result carries the "
            f"label `{label}`",
            _span(node),
            f"no tool produces `{label}`",
            help=f"add `labels {label}` to the tools that return such data, or `label {label}` "
            "to their output fields",
        )


@lint_rule(
    "L021",
    bad=_MAIL
    + """
tool crm.lookup {
  summary "Look a customer up in the CRM."
  use_when "The user names a customer."
  effects read
  input { name: string }
  output { iban: string }
}

policy payments {
  default deny
  allow mail.read, crm.lookup
  allow payments.send when args.iban from trusted
}
""",
    good=_MAIL
    + """
tool crm.lookup {
  summary "Look a customer up in the CRM."
  use_when "The user names a customer."
  effects read
  input { name: string }
  output { iban: string }
  trust trusted
}

policy payments {
  default deny
  allow mail.read, crm.lookup
  allow payments.send when args.iban from trusted
}
""",
)
def nothing_trusted(ctx: LintContext) -> Iterator[Diagnostic]:
    spec = ctx.spec
    if spec.facts or any(_trusts(t) for t in spec.tools.values()):
        return
    done: set[str] = set()
    defaults = spec_defaults(spec)
    for rule, node, found in _terms(ctx):
        term = found.term
        if not isinstance(term, m.Provenance) or term.source != "trusted" or rule.label in done:
            continue
        name = arg_name(term.value) if found.over is None else None
        if name is not None and any(
            (t.id, name) in defaults for sel in rule.selectors for t in ctx.selected_tools(sel)
        ):
            continue  # the spec's default of the argument is a trusted source of its own
        done.add(rule.label)
        yield Diagnostic.make(
            "L021",
            f"`{spec_text(term)}` in `{rule.label}`: no tool of this spec is trusted and no "
            "fact is declared",
            _span(node),
            "nothing here is a trusted source",
            notes=["a tool's results are untrusted unless it says `trust trusted`"],
            help="add `trust trusted` to the tools that are systems of record",
        )


def _trusts(tool: m.Tool) -> bool:
    def in_type(type_: m.Type | None) -> bool:
        return type_ is not None and (in_fields(type_.fields) or in_type(type_.item))

    def in_fields(fields: tuple[m.Field, ...]) -> bool:
        return any(f.trust == "trusted" or in_type(f.type) for f in fields)

    return tool.trust == "trusted" or (tool.output is not None and in_fields(tool.output.fields))


_VERBS = {"deny": "refuses", "ask": "asks about"}


def _value_key(found: Found) -> str:
    """What a provenance term is about: its value, or the list a quantifier draws it from."""
    term = found.term
    assert isinstance(term, m.Provenance)
    if found.over is not None:
        return "in " + canonical(found.over)  # type: ignore[arg-type]
    return canonical(term.value)  # type: ignore[arg-type]


@lint_rule(
    "L022",
    bad=_MAIL
    + """
policy payments {
  default deny
  allow mail.read
  injected: deny payments.send when args.iban from untrusted only {
    reason "The IBAN must come from the user or a trusted source."
  }
  allow payments.send when args.amount < 100
}
""",
    good=_MAIL
    + """
policy payments {
  default deny
  allow mail.read
  injected: deny payments.send when args.iban from untrusted only or args.iban from nowhere {
    reason "The IBAN must come from the user or a trusted source."
  }
  allow payments.send when args.amount < 100
}
""",
)
def made_up_value_passes(ctx: LintContext) -> Iterator[Diagnostic]:
    done: set[tuple[str, str]] = set()
    for policy in ctx.spec.policies.values():
        covered: set[str] = set()
        refusals: list[tuple[m.Rule, Found]] = []
        for rule in policy.rules:
            if rule.effect not in ("deny", "ask") or rule.condition is None:
                continue
            for found in session_terms(rule.condition):
                term = found.term
                if not isinstance(term, m.Provenance) or found.negated:
                    continue
                if term.source == "nowhere":
                    covered.add(_value_key(found))
                elif term.source == "untrusted" and term.only:
                    refusals.append((rule, found))
        for rule, found in refusals:
            key = _value_key(found)
            if key in covered or (rule.label, key) in done:
                continue
            done.add((rule.label, key))
            term = found.term
            assert isinstance(term, m.Provenance)
            value = spec_text(term.value)
            yield Diagnostic.make(
                "L022",
                f"`{rule.label}` {_VERBS[rule.effect]} `{value}` from untrusted data only; a "
                f"made-up `{value}` appeared nowhere and passes",
                _span(ctx.node_at(rule.origin, s.Rule)),
                "no rule of the policy tests `from nowhere`",
                notes=[
                    "a value the model made up or rewrote is from nowhere, not from untrusted data"
                ],
                help=f"add `or {value} from nowhere`",
            )


@lint_rule(
    "L023",
    bad=_MAIL
    + """
tool files.delete {
  summary "Delete a file."
  use_when "The user asks to remove a file."
  effects write
  input { path: path }
}

policy payments {
  default deny
  allow mail.read
  after_delete: deny payments.send when called(files.delete within 10m) {
    reason "No payment right after files were deleted."
  }
  allow payments.send when args.amount < 100
}
""",
    good=_MAIL
    + """
policy payments {
  default deny
  allow mail.read
  after_read: ask payments.send when called(mail.read within 10m) {
    approver role "finance"
  }
  allow payments.send when args.amount < 100
}
""",
)
def history_of_uncallable_tools(ctx: LintContext) -> Iterator[Diagnostic]:
    can_call = callable_tools(ctx.spec)
    done: set[tuple[str, str]] = set()
    for rule, node, found in _terms(ctx):
        term = found.term
        if not isinstance(term, m.History) or term.func == "seen":
            continue
        selected = sorted({t.id for sel in term.selectors for t in ctx.selected_tools(sel)})
        text = spec_text(term)
        if (rule.label, text) in done:
            continue
        if not selected:
            what = ", ".join(f"`{selector_text(sel)}`" for sel in term.selectors)
            message = f"`{text}` in `{rule.label}` selects no tool ({what})"
            label = "selects no tool"
        elif can_call is not None and not set(selected) & can_call:
            listed = ", ".join(f"`{t}`" for t in selected)
            message = f"`{text}` in `{rule.label}` counts calls of {listed}, which no agent, "
            message += "skill or workflow can call"
            label = "no session calls these tools"
        else:
            continue
        done.add((rule.label, text))
        yield Diagnostic.make(
            "L023",
            message,
            _span(node),
            label,
            notes=["the term is always false (or zero) in every session"],
            help="select tools an agent's surface exposes, or expose the tool",
        )


_COPIES = """\
tool mail.send {
  summary "Send a mail."
  use_when "The user asks to write to someone."
  effects write external
  input { to: string, cc: list<string>? }
}

policy mail {
  default deny
  copies: deny mail.send when not (all x in args.cc: x from user) {
    reason "Every copy goes to someone the user named."
  }
  allow mail.send when args.to from user
}
"""


@lint_rule(
    "L027",
    bad=_COPIES,
    good=_COPIES.replace("when not (all", "when args has cc and not (all"),
)
def all_over_optional_list(ctx: LintContext) -> Iterator[Diagnostic]:
    for _rule, tools, condition in rule_conditions(ctx):
        found = list(nodes_of(condition))
        guarded = {
            f"{n.left.text}.{n.right.text}"
            for n in found
            if isinstance(n, s.Compare)
            and n.op == "has"
            and isinstance(n.left, s.Path)
            and isinstance(n.right, s.Path)
        }
        for item in found:
            if not isinstance(item, s.Quantified) or item.quantifier != "all":
                continue
            over = item.over
            if not isinstance(over, s.Path) or over.parts[0] != "args" or len(over.parts) < 2:
                continue
            if over.text in guarded:
                continue
            optional = sorted(
                t.id
                for t in tools
                if (ty := type_at(t, over.parts[1:])) is not None and ty.optional
            )
            if not optional:
                continue
            parent, _, name = over.text.rpartition(".")
            bound = f"all {item.var.text} in {over.text}"
            yield Diagnostic.make(
                "L027",
                f"`{bound}: …` is false when `{over.text}` is not given",
                over.span,
                f"`{name}` is optional in `{optional[0]}`",
                notes=[
                    "over an absent list `all` holds for no item: `not (all …)` holds, and a "
                    f"rule that waits for `all …` never fires, when the call leaves `{name}` out"
                ],
                help=f"say what an absent `{name}` means: `{parent} has {name} and {bound}: …` "
                f"(only a given list), or `not ({parent} has {name}) or {bound}: …` (an absent "
                "list passes)",
            )


_FLAGS = _MAIL.replace(
    "input { iban: string, amount: int }", "input { iban: string, amount: int, instant: bool }"
)

_FETCH = """\
tool crm.get {
  summary "Read a customer record."
  use_when "The user names a customer."
  effects read
  input { id: string }
  output { email: string }
  trust trusted
  labels pii
}

tool web.fetch {
  summary "Fetch a web page."
  use_when "The user asks what a page says."
  effects read external
  input { url: string }
}

surface desk {
  expose crm.get, web.fetch
}

agent helper {
  surface desk
  policy browsing
}

policy browsing {
  default deny
  allow crm.get, web.fetch
  unknown: deny web.fetch
      when seen(pii within 1h) and any v in params(args.url): not (v from user or v from trusted) {
    reason "After personal data was read, the URL carries a value nobody gave."
  }
"""


@lint_rule(
    "L028",
    bad=_FLAGS
    + """
policy payments {
  default deny
  allow mail.read
  made_up: deny payments.send when args.iban from nowhere or args.instant from nowhere {
    reason "A value no one gave is refused."
  }
  allow payments.send when args.amount < 100
}
""",
    good=_FLAGS
    + """
policy payments {
  default deny
  allow mail.read
  made_up: deny payments.send when args.iban from nowhere {
    reason "A value no one gave is refused."
  }
  allow payments.send when args.amount < 100
}
""",
)
def provenance_of_boolean(ctx: LintContext) -> Iterator[Diagnostic]:
    for _rule, tools, condition in rule_conditions(ctx):
        for item in nodes_of(condition):
            if not isinstance(item, s.Provenance):
                continue
            value = item.value
            if not isinstance(value, s.Path) or value.parts[0] != "args" or len(value.parts) < 2:
                continue
            fields = [f for t in tools if (f := field_at(t, value.parts[1:])) is not None]
            # a boolean in every selected tool that has the argument, with no default (the
            # spec's default is a source of its own: `from trusted` when the call leaves it)
            if not fields or any(f.type.name != "bool" or f.default is not None for f in fields):
                continue
            flagged = next(t.id for t in tools if field_at(t, value.parts[1:]) is not None)
            source = item.call.span.text if item.call is not None else item.source.text
            holds = "always holds" if source == "nowhere" else "never holds"
            yield Diagnostic.make(
                "L028",
                f"`{value.text} from {source}` {holds}: a boolean carries no provenance",
                item.span,
                f"`{value.parts[-1]}` is a `bool` in `{flagged}`",
                notes=[
                    "`true` and `false` appear in too many places to say where the model took "
                    "them from: they are never indexed, so a boolean is found in no source (`from "
                    "nowhere` holds, every other source does not)"
                ],
                help=f"compare the value (`{value.text} == true`), or leave the term out",
            )


@lint_rule(
    "L029",
    bad=_FETCH + "}\n",
    good=_FETCH
    + """  personal: deny web.fetch when any v in params(args.url): v from label pii {
    reason "The URL carries personal data."
  }
}
""",
)
def trusted_label_passes(ctx: LintContext) -> Iterator[Diagnostic]:
    spec = ctx.spec
    rules = list(ctx.rules())
    tested: set[tuple[str, str]] = set()  # (policy, label) a DENY or ASK tests `from label`
    for rule, _ in rules:
        if rule.effect != "allow" and rule.condition is not None:
            tested.update(
                (rule.policy, f.term.label)
                for f in session_terms(rule.condition)
                if isinstance(f.term, m.Provenance)
                and f.term.source == "label"
                and f.term.label is not None
                and not f.negated
            )
    for rule, node in rules:
        if rule.effect == "allow" or rule.condition is None:
            continue
        found = session_terms(rule.condition)
        # an item of what a URL carries that passes when it is `from trusted`: a trusted
        # tool's labelled data then goes to whatever host the URL names
        passes = next(
            (
                f.term
                for f in found
                if isinstance(f.term, m.Provenance)
                and f.term.source == "trusted"
                and f.negated
                and isinstance(f.over, m.Extract)
                and f.over.func in ("params", "segments")
            ),
            None,
        )
        if passes is None:
            continue
        for f in found:
            term = f.term
            if not (isinstance(term, m.History) and term.func == "seen") or f.negated:
                continue
            label = term.label or ""
            if (rule.policy, label) in tested:
                continue
            givers = [t for t in label_producers(spec, label) if _trusts(spec.tools[t])]
            if not givers:
                continue
            yield Diagnostic.make(
                "L029",
                f"`{rule.label}` guards data labelled `{label}`, and `{givers[0]}` gives it as "
                f"trusted: `{spec_text(passes)}` lets that data through",
                _span(node),
                f"`{label}` from a trusted tool is `from trusted`",
                notes=[
                    f"`{givers[0]}` is `trust trusted` and its results carry `{label}`: after "
                    f"`seen({label})`, its own data passes a test of who gave a value"
                ],
                help=f"test the label too: `from label {label}` in this rule, or a DENY of its "
                f"own in the same policy",
            )
            break
