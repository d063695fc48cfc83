"""Specs with session terms (provenance, history, quantifiers), built as IR directly: the
analysis, lint and codegen tests of session-aware policy share them."""

from __future__ import annotations

from typing import Any

from harnessc.runtime import model as m

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
