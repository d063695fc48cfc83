"""Specs with session terms (provenance, history, quantifiers), built as IR directly: the
analysis, lint and codegen tests of session-aware policy share them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harnessc.runtime import model as m
from hypothesis import strategies as st

STRING = m.Type(name="string")
INT = m.Type(name="int")
LIST_OF_STRINGS = m.Type(name="list", item=STRING)


def arg(*parts: str) -> m.Path:
    return m.Path(root="args", parts=parts)


def var(name: str) -> m.Path:
    return m.Path(root="var", parts=(name,))


def lit(value: Any, type_: str = "string") -> m.Literal:
    return m.Literal(value=value, type=type_)  # type: ignore[arg-type]


def sel(tool_id: str) -> m.Selector:
    return m.Selector(kind="id", value=tool_id, text=tool_id)


def prov(value: m.Path, source: str, only: bool = False, label: str | None = None) -> m.Provenance:
    return m.Provenance(value=value, source=source, only=only, label=label)  # type: ignore[arg-type]


def history(func: str, *tools: str, **kw: Any) -> m.History:
    return m.History(func=func, selectors=tuple(sel(t) for t in tools), **kw)  # type: ignore[arg-type]


def cmp(op: str, left: Any, right: Any) -> m.Compare:
    return m.Compare(op=op, left=left, right=right)  # type: ignore[arg-type]


def field(name: str, type_: m.Type = STRING, **kw: Any) -> m.Field:
    return m.Field(name=name, type=type_, **kw)


def tool(
    tool_id: str, *inputs: m.Field, output: tuple[m.Field, ...] | None = None, **kw: Any
) -> m.Tool:
    return m.Tool(
        id=tool_id,
        wire_name=m.derive_wire_name(tool_id),
        effects=kw.pop("effects", ("read",)),
        input=m.Schema(fields=inputs),
        output=m.Schema(fields=output) if output is not None else None,
        module="s",
        **kw,
    )


MAIL_READ = tool(
    "mail.read",
    field("id"),
    output=(field("sender", trust="trusted"), field("body")),
    labels=("pii",),
)
CRM_LOOKUP = tool("crm.lookup", field("name"), output=(field("iban"),), trust="trusted")
PAY = tool(
    "payments.send",
    field("iban"),
    field("amount", INT),
    field("memo", type_=m.Type(name="string", optional=True)),
    effects=("write", "external"),
)
DELETE = tool("files.delete", field("path"), effects=("write",))
SEND = tool("mail.send", field("to", LIST_OF_STRINGS), field("body"), effects=("external",))
TOOLS = (MAIL_READ, CRM_LOOKUP, PAY, DELETE, SEND)


def rule(
    label: str, effect: str, tool_id: str, condition: Any = None, approvers: tuple[str, ...] = ()
) -> m.Rule:
    return m.Rule(
        label=f"p.{label}",
        policy="s.p",
        effect=effect,  # type: ignore[arg-type]
        selectors=(sel(tool_id),),
        condition=condition,
        approvers=tuple(m.Approver(kind="role", value=a) for a in approvers)
        or ((m.Approver(kind="role", value="finance"),) if effect == "ask" else ()),
    )


def spec_of(
    *rules: m.Rule,
    tools: tuple[m.Tool, ...] = TOOLS,
    default: str = "deny",
    agent: bool = True,
    **kw: Any,
) -> m.Spec:
    policy = m.Policy(name="s.p", default=m.DefaultDecision(effect=default), rules=rules)  # type: ignore[arg-type]
    extra: dict[str, Any] = {}
    if agent:
        extra["surfaces"] = {
            "s.all": m.Surface(name="s.all", expose=(m.Selector(kind="all", text="*"),))
        }
        extra["agents"] = {"s.a": m.Agent(name="s.a", policy="s.p", surface="s.all")}
    return m.Spec(
        name="s",
        root_module="s",
        tools={t.id: t for t in tools},
        policies={"s.p": policy},
        **extra,
        **kw,
    )


# ---------------------------------------------------------------------------------------------
# Whole specs as source text, and whole sessions: the differential tests
# (tests/test_differential.py) draw them. A `Draw` names the constructs a spec uses, so that a
# property can leave out the ones a known defect still breaks (`exclude`).

IBANS = ("DE89370400440532013000", "GB29NWBK60161331926819", "FR7630006000011234567890189")
MADE_UP = "NL91ABNA0417164300"
EMAILS = ("bob@corp.test", "eve@evil.test")
WINDOWS = ("10m", "1h")
MAIL_IDS = ("msg-12345",)
SAID = ("/tmp/a", MAIL_IDS[0])
"""Messages of the user that are whole values of earlier calls (a path, a mail's id)."""
AGO_MS = (0, 5 * 60_000, 30 * 60_000, 2 * 3_600_000)

DIFF_TOOLS = {
    # tool id: (its string arguments, its int arguments, its optional list arguments)
    "pay.send": (("iban", "memo"), ("amount",), ("notify",)),
    "files.delete": (("path",), (), ()),
    "mail.read": (("id",), (), ()),
    "crm.lookup": (("name",), (), ()),
}


@dataclass(frozen=True)
class DrawnSpec:
    """A drawn spec: its tools, its policy's default and rules (source text), and the
    constructs it uses (`CONSTRUCTS`)."""

    tools: str
    default: str
    rules: tuple[str, ...]
    uses: frozenset[str]

    @property
    def text(self) -> str:
        return (
            'harness d {\n  version "1.0.0"\n}\n\n'
            + self.tools
            + "\nsurface everything {\n  expose *\n}\n\n"
            + "agent a {\n  surface everything\n  policy p\n}\n\n"
            + f"policy p {{\n  default {self.default}\n\n"
            + "\n".join(self.rules)
            + "\n}\n"
        )


CONSTRUCTS = (
    "provenance",
    "only",
    "label",
    "nowhere",
    "quantifier",
    "called",
    "succeeded",
    "count",
    "sum",
    "seen",
    "window",
    "history_when",
    "history_provenance",
    "on_success",
    "field_trust",
    "tool_trust",
    "tool_labels",
    "field_labels",
    "ask",
    "actor",
    "fact_read",
    "extend",
)


class _Uses:
    def __init__(self, exclude: frozenset[str]) -> None:
        self.exclude = exclude
        self.seen: set[str] = set()

    def ok(self, *constructs: str) -> bool:
        return not self.exclude.intersection(constructs)

    def add(self, *constructs: str) -> None:
        self.seen.update(constructs)


def _provenance_text(draw: Any, value: str, uses: _Uses) -> str:
    choices = ["user", "trusted", "untrusted"]
    if uses.ok("nowhere"):
        choices.append("nowhere")
    if uses.ok("label"):
        choices += ["label pii", "label acme"]
    source = draw(st.sampled_from(choices))
    uses.add("provenance", *(["label"] if source.startswith("label") else []))
    if source == "nowhere":
        uses.add("nowhere")
    only = ""
    if source in ("user", "trusted", "untrusted") and uses.ok("only") and draw(st.booleans()):
        only = " only"
        uses.add("only")
    return f"{value} from {source}{only}"


_HISTORY_PROVENANCE = {
    "pay.send": "args.iban from user",
    "files.delete": "args.path from user",
    "mail.read": "args.id from user",
}
"""A `when` of a history term that reads provenance, by the selected tool."""


def _history_text(draw: Any, uses: _Uses) -> str:
    funcs = [f for f in ("called", "succeeded", "count", "sum", "seen") if uses.ok(f)]
    if not funcs:
        return "args has memo"
    func = draw(st.sampled_from(funcs))
    uses.add(func)
    within = ""
    if uses.ok("window") and draw(st.booleans()):
        within = f" within {draw(st.sampled_from(WINDOWS))}"
        uses.add("window")
    if func == "seen":
        return f"seen({draw(st.sampled_from(['pii', 'acme']))}{within})"
    if func == "sum":
        term = f"sum(args.amount of pay.send{within})"
        return f"{term} > {draw(st.sampled_from([0, 100, 1000]))}"
    tool_id = draw(st.sampled_from(["pay.send", "files.delete", "mail.read"]))
    when = ""
    if uses.ok("history_when") and draw(st.booleans()):
        inner = {
            "pay.send": ["args.amount > 100"],
            "files.delete": ["args.recursive"],
            "mail.read": [f'args.id == "{MAIL_IDS[0]}"'],
        }[tool_id]
        if uses.ok("history_provenance"):
            inner = [*inner, _HISTORY_PROVENANCE[tool_id]]
        chosen = draw(st.sampled_from(inner))
        uses.add("history_when")
        if " from " in chosen:
            uses.add("history_provenance")
        when = f" when {chosen}"
    term = f"{func}({tool_id}{within}{when})"
    if func == "count":
        return f"{term} {draw(st.sampled_from(['>', '>=', '==']))} {draw(st.integers(0, 2))}"
    return term


def _atom_text(draw: Any, tool_id: str, uses: _Uses) -> str:
    strings, ints, lists = DIFF_TOOLS[tool_id]
    kinds = ["provenance", "history"]
    if ints:
        kinds.append("number")
    if lists and uses.ok("quantifier"):
        kinds.append("quantifier")
    if tool_id == "files.delete":
        kinds.append("bool")
    if uses.ok("actor"):
        kinds.append("actor")
    if tool_id == "pay.send" and uses.ok("fact_read"):
        kinds.append("fact_read")
    kind = draw(st.sampled_from(kinds))
    if kind == "fact_read":
        uses.add("fact_read")
        return "args.iban in known.ibans"
    if kind == "actor":
        uses.add("actor")
        return draw(st.sampled_from(['actor.role == "admin"', 'actor.role in ["admin", "sre"]']))
    if kind == "provenance":
        return _provenance_text(draw, f"args.{draw(st.sampled_from(strings))}", uses)
    if kind == "number":
        op = draw(st.sampled_from([">", "<="]))
        return f"args.{ints[0]} {op} {draw(st.sampled_from([100, 1000]))}"
    if kind == "bool":
        return "args.recursive"
    if kind == "quantifier":
        uses.add("quantifier")
        body = _provenance_text(draw, "x", uses)
        if draw(st.booleans()):
            body = f"not {body}"
        return f"{draw(st.sampled_from(['all', 'any']))} x in args.{lists[0]}: {body}"
    return _history_text(draw, uses)


def _condition_text(draw: Any, tool_id: str, uses: _Uses, depth: int = 0) -> str:
    shape = draw(st.sampled_from(["atom", "atom", "not", "and", "or"] if depth < 2 else ["atom"]))
    if shape == "atom":
        return _atom_text(draw, tool_id, uses)
    if shape == "not":
        return f"not ({_condition_text(draw, tool_id, uses, depth + 1)})"
    left = _condition_text(draw, tool_id, uses, depth + 1)
    right = _condition_text(draw, tool_id, uses, depth + 1)
    return f"({left} {shape} {right})"


def _effect_text(draw: Any, uses: _Uses) -> tuple[str, str]:
    effects = ["allow", "deny"] + (["ask"] if uses.ok("ask") else [])
    effect = draw(st.sampled_from(effects))
    if effect == "ask":
        uses.add("ask")
        return effect, ' {\n    approver role "finance"\n  }'
    if effect == "deny":
        return effect, ' {\n    reason "Refused."\n  }'
    return effect, ""


def _tools_text(draw: Any, uses: _Uses) -> str:
    def pick(construct: str) -> bool:
        if uses.ok(construct) and draw(st.booleans()):
            uses.add(construct)
            return True
        return False

    return tools_text(
        sender_trusted=pick("field_trust"),
        mail_trusted=pick("tool_trust"),
        mail_pii=pick("tool_labels"),
        iban_acme=pick("field_labels"),
        crm_trust=draw(st.sampled_from(["trusted", "untrusted"])),
        crm_acme=pick("tool_labels"),
        on_success=pick("on_success"),
        extended=pick("extend"),
    )


def tools_text(
    *,
    sender_trusted: bool = False,
    mail_trusted: bool = False,
    mail_pii: bool = False,
    iban_acme: bool = False,
    crm_trust: str = "untrusted",
    crm_acme: bool = False,
    on_success: bool = False,
    extended: bool = False,
) -> str:
    """The tools of a drawn spec (`whole_specs`), with their trust, labels and `on_success`:
    written in the tools' blocks, or (`extended`) in `extend` blocks after them, which must
    mean the same."""
    sender_trust = " trusted" if sender_trusted else ""
    mail_trust = "\n  trust trusted" if mail_trusted else ""
    mail_labels = "\n  labels pii" if mail_pii else ""
    iban_label = " label acme" if iban_acme else ""
    crm_labels = "\n  labels acme" if crm_acme else ""
    add = "\n  on_success add args.iban to known.ibans" if on_success else ""
    crm_trust = f"\n  trust {crm_trust}"
    extensions = ""
    if extended:
        mail = (f"\n  output {{ sender:{sender_trust} }}" if sender_trusted else "") + (
            mail_trust + mail_labels
        )
        crm = (f"\n  output {{ iban:{iban_label} }}" if iban_acme else "") + crm_trust + crm_labels
        for tool_id, items in (("mail.read", mail), ("crm.lookup", crm), ("pay.send", add)):
            if items:
                extensions += f"\nextend tool {tool_id} {{{items}\n}}\n"
        sender_trust = mail_trust = mail_labels = iban_label = crm_labels = add = crm_trust = ""
    return f"""label acme "Partner data."

fact known.ibans: list<string>

tool mail.read {{
  summary "Read a mail."
  effects read
  input {{ id: string }}
  output {{
    sender: string{sender_trust}
    body: string
  }}{mail_trust}{mail_labels}
}}

tool crm.lookup {{
  summary "Look up a customer."
  effects read
  input {{ name: string }}
  output {{ iban: string{iban_label} }}{crm_trust}{crm_labels}
}}

tool pay.send {{
  summary "Send a payment."
  effects write external
  input {{
    iban: string
    amount: int
    memo: string?
    notify: list<string>?
  }}
  output {{ ref: string }}{add}
}}

tool files.delete {{
  summary "Delete a file."
  effects write
  input {{
    path: string
    recursive: bool
  }}
}}
{extensions}"""


def _rule_text(draw: Any, name: str, uses: _Uses) -> str:
    tool_id = draw(st.sampled_from(sorted(DIFF_TOOLS)))
    effect, body = _effect_text(draw, uses)
    when = ""
    if draw(st.integers(0, 4)):
        when = f" when {_condition_text(draw, tool_id, uses)}"
    return f"  {name}: {effect} {tool_id}{when}{body}"


def _default_text(draw: Any, uses: _Uses) -> str:
    default = draw(
        st.sampled_from(["allow", "deny", "ask"] if uses.ok("ask") else ["allow", "deny"])
    )
    if default == "ask":
        uses.add("ask")
        return 'ask {\n    approver role "owner"\n  }'
    return str(default)


@st.composite
def whole_specs(draw: Any, exclude: frozenset[str] = frozenset(), max_rules: int = 4) -> DrawnSpec:
    """A whole spec as source text: four tools with drawn trust, labels and `on_success`, one
    agent, and a policy of drawn rules over every session construct but those in `exclude`."""
    uses = _Uses(exclude)
    tools = _tools_text(draw, uses)
    rules = tuple(_rule_text(draw, f"r{n}", uses) for n in range(draw(st.integers(1, max_rules))))
    return DrawnSpec(tools, _default_text(draw, uses), rules, frozenset(uses.seen))


@st.composite
def history_specs(draw: Any, exclude: frozenset[str] = frozenset(), terms: int = 4) -> DrawnSpec:
    """A spec as `whole_specs` draws it whose rules each test one history term (the terms'
    own property: many terms a draw)."""
    uses = _Uses(exclude)
    tools = _tools_text(draw, uses)
    rules = tuple(f"  h{n}: allow pay.send when {_history_text(draw, uses)}" for n in range(terms))
    return DrawnSpec(tools, "deny", rules, frozenset(uses.seen))


MUTATIONS = ("replace", "add", "drop", "swap", "default", "window", "tools")
"""How `mutations` changes a spec, as a pull request would: one rule replaced, added, dropped,
two rules swapped, the default changed, a window changed, the tools' trust, labels and
`on_success` drawn again."""


@st.composite
def mutations(
    draw: Any,
    spec: DrawnSpec,
    exclude: frozenset[str] = frozenset(),
    kinds: tuple[str, ...] = MUTATIONS,
) -> tuple[str, DrawnSpec]:
    """One change of `spec` (`MUTATIONS`): its kind and the new spec."""
    uses = _Uses(exclude)
    uses.seen.update(spec.uses)
    kind = draw(st.sampled_from(kinds))
    rules, tools, default = list(spec.rules), spec.tools, spec.default
    at = draw(st.integers(0, len(rules) - 1))
    if kind == "replace":
        rules[at] = _rule_text(draw, f"r{at}", uses)
    elif kind == "add":
        rules.insert(at, _rule_text(draw, f"n{at}", uses))
    elif kind == "drop" and len(rules) > 1:
        del rules[at]
    elif kind == "swap" and at + 1 < len(rules):
        rules[at], rules[at + 1] = rules[at + 1], rules[at]
    elif kind == "default":
        default = _default_text(draw, uses)
    elif kind == "window":
        windowed = [n for n, r in enumerate(rules) if "within " in r]
        if windowed:
            n = draw(st.sampled_from(windowed))
            old, new = draw(st.permutations(WINDOWS))
            rules[n] = rules[n].replace(f"within {old}", f"within {new}", 1)
    elif kind == "tools":
        tools = _tools_text(draw, uses)
    return kind, DrawnSpec(tools, default, tuple(rules), frozenset(uses.seen))


@st.composite
def session_steps(draw: Any, max_steps: int = 5) -> list[m.SessionStep]:
    """A session before a call: what the user said, and earlier calls of each tool with their
    results (the values of `IBANS` and `EMAILS` among them), each some time before the call."""
    said = st.sampled_from(["hello", f"mail {EMAILS[0]}", *SAID])
    steps: list[tuple[int, m.SessionStep]] = []
    for _ in range(draw(st.integers(0, max_steps))):
        iban = draw(st.sampled_from(IBANS))
        kind = draw(st.sampled_from(["said", *DIFF_TOOLS]))
        ago = draw(st.sampled_from(AGO_MS))
        if kind == "said":
            step = m.SessionStep(said=draw(st.one_of(st.just(f"pay {iban}"), said)))
        elif kind == "mail.read":
            sender = draw(st.sampled_from([iban, *EMAILS]))
            body = f"please pay {draw(st.sampled_from(IBANS))}"
            result = {"sender": sender, "body": body}
            step = m.SessionStep(tool=kind, args={"id": MAIL_IDS[0]}, result=result, ago_ms=ago)
        elif kind == "crm.lookup":
            result = {"iban": iban}
            step = m.SessionStep(tool=kind, args={"name": "bob"}, result=result, ago_ms=ago)
        elif kind == "pay.send":
            args = {"iban": iban, "amount": draw(st.sampled_from([50, 500, 5000]))}
            step = m.SessionStep(tool=kind, args=args, result={"ref": "r1"}, ago_ms=ago)
        else:
            args = {"path": "/tmp/a", "recursive": draw(st.booleans())}
            step = m.SessionStep(tool=kind, args=args, ago_ms=ago)
        steps.append((ago, step))
    # the runtime records events in time order: the steps are sorted by how long ago they were
    # (a user message takes the time of the call before it)
    return [step for _, step in sorted(steps, key=lambda pair: -pair[0])]


@st.composite
def final_calls(draw: Any) -> tuple[str, dict[str, Any], str]:
    """The call decided after the session: a tool, its arguments and the actor's role."""
    tool_id = draw(st.sampled_from(sorted(DIFF_TOOLS)))
    value = st.sampled_from([*IBANS, MADE_UP, *EMAILS])
    if tool_id == "pay.send":
        args: dict[str, Any] = {
            "iban": draw(value),
            "amount": draw(st.sampled_from([50, 500, 5000])),
        }
        if draw(st.booleans()):
            args["memo"] = draw(value)
        if draw(st.booleans()):
            args["notify"] = draw(st.lists(value, max_size=2))
    elif tool_id == "files.delete":
        args = {
            "path": draw(st.sampled_from(["/tmp/a", MADE_UP])),
            "recursive": draw(st.booleans()),
        }
    elif tool_id == "mail.read":
        args = {"id": draw(st.sampled_from([*MAIL_IDS, "msg-00000", IBANS[0]]))}
    else:
        args = {"name": draw(st.sampled_from(["bob", EMAILS[0]]))}
    return tool_id, args, draw(st.sampled_from(["member", "admin"]))


def governed(s: Any, n: int, tool: str, args: dict[str, Any]) -> tuple[Any, Any]:
    """Normalize call `c-N` of a session, decide it, and run it when allowed: the pending
    call and its decision."""
    from harnessc.runtime import PendingCall

    call = s.normalize(tool, f"c-{n}", args)
    assert isinstance(call, PendingCall), call
    decision = s.decide(call)
    if decision.effect == "allow":
        s.invoke(call)
    return call, decision
