"""The types of condition operands and the rules that compare them (language.md §7.4).

The validator (compiler/validate.py) gives every operand of a comparison a `Ty` and asks these
rules whether the operator takes the pair; each operator's rule and wording come from its
record in `runtime/model/semantics.py`. A rule returns a `Problem`, not a diagnostic: an operand
whose type differs between the selected tools is fine when one of its options is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harnessc.dsl import syntax as s
from harnessc.dsl.source import Span
from harnessc.dsl.suggest import did_you_mean
from harnessc.runtime import model as m
from harnessc.runtime.model.semantics import OPERATORS, Operator

SHOWN_VALUES = 8


@dataclass(frozen=True, slots=True)
class Ty:
    """The type of an operand.

    `name` is a schema type name, `set` (of effects), `any` (open or unknown: never an error),
    `bare` (a bare name, `lit` holding it) or `union` (an argument whose type differs between
    the selected tools). An `object` with `open` reads unknown fields as `any`.
    """

    name: str
    item: Ty | None = None
    values: tuple[str, ...] = ()
    fields: tuple[tuple[str, Ty], ...] = ()
    open: bool = False
    lit: str | None = None
    owner: str = ""
    """For an enum: what a member is, as a message says it (`a risk level`)."""
    options: tuple[Ty, ...] = ()
    unlisted: str = ""
    """Of an open record or an `any` a schema declares: what it is, as H354 names it (`the
    output of `inbox.read``); a field read from its unlisted part is reported."""

    def field(self, name: str) -> Ty | None:
        for key, ty in self.fields:
            if key == name:
                return ty
        return None


ANY = Ty("any")
STRING = Ty("string")
BOOL = Ty("bool")
STRINGISH = frozenset({"string", "path", "url", "enum"})
NUMBERS = frozenset({"int", "float"})
COLLECTIONS = frozenset({"object", "map", "list", "set"})


LISTS = frozenset({"list", "set"})
HAS_LENGTH = frozenset({"list", "set", "map", *STRINGISH})
"""What `len` measures: the items of a list or map, the characters of a text."""
INT = Ty("int")
TEXT_LIST = Ty("list", item=STRING)
FUNCTION_TYPES: dict[str, Ty] = {
    "connected": BOOL,
    "running": BOOL,
    "called": BOOL,
    "succeeded": BOOL,
    "seen": BOOL,
    "count": INT,
    "len": INT,
    "urls": TEXT_LIST,
    "hosts": TEXT_LIST,
    "emails": TEXT_LIST,
    "ibans": TEXT_LIST,
    "params": TEXT_LIST,
    "segments": TEXT_LIST,
}
"""The type of each function's value; `sum` has its field's number type."""


def takes(ty: Ty, names: frozenset[str]) -> bool:
    """Whether a value of type `ty` may be of one of `names` (`any` and unions included)."""
    return any(o.name == "any" or o.name in names for o in options_of(ty))


def only_lists(ty: Ty) -> bool:
    """Whether a value of type `ty` is certainly a list (so `from` cannot apply to it)."""
    options = options_of(ty)
    return bool(options) and all(o.name in LISTS for o in options)


def item_type(ty: Ty) -> Ty:
    """The type of an item of a list-typed value (ANY when unknown)."""
    items = [o.item or ANY for o in options_of(ty) if o.name in LISTS]
    return join_types(items) if items else ANY


def object_type(fields: dict[str, Ty], open: bool = False) -> Ty:
    return Ty("object", fields=tuple(fields.items()), open=open)


RISK = Ty("enum", values=m.RISK_LEVELS, owner="a risk level")
EFFECT = Ty("enum", values=m.EFFECTS, owner="an effect")
ROOT_TYPES: dict[str, Ty] = {
    "actor": object_type(
        {
            "user": STRING,
            "role": STRING,
            "roles": Ty("list", item=STRING),
            "tenant": STRING,
            "agent": STRING,
            "session": STRING,
        }
    ),
    "task": object_type({"id": STRING, "stage": STRING, "purpose": STRING}, open=True),
    "env": object_type({}, open=True),
    "resource": object_type({}, open=True),
    "tool": object_type(
        {
            "id": STRING,
            "kind": Ty("enum", values=m.TOOL_KINDS, owner="a tool kind"),
            "version": Ty("int"),
            "risk": RISK,
            "effects": Ty("set", item=EFFECT),
            "tags": Ty("list", item=STRING),
        }
    ),
    "call": object_type(
        {
            "tool_call_id": STRING,
            "cwd": Ty("path"),
            "env": Ty("map", item=STRING),
            "timeout": Ty("duration"),
            "target": STRING,
            "provenance": STRING,
        }
    ),
}


def type_of(t: m.Type, owner: str = "", where: str = "") -> Ty:
    """The operand type of a schema type (optional or not: absence is a lint, not a type).
    `where` names the declaration for H354 (`the output of `x``): an open record or an
    `any` inside it is marked `unlisted`."""
    if t.name == "enum":
        return Ty("enum", values=t.values, owner=owner)
    if t.name in ("list", "map"):
        return Ty(t.name, item=type_of(t.item, where=where) if t.item else ANY)
    if t.name == "object":
        fields = {f.name: type_of(f.type, where=where) for f in t.fields}
        if t.open:
            return Ty("object", fields=tuple(fields.items()), open=True, unlisted=where)
        return object_type(fields)
    if t.name == "union":
        return join_types([type_of(o, owner, where) for o in t.options])
    if t.name == "any":
        return Ty("any", unlisted=where)
    return Ty(t.name)


def output_type(tool: m.Tool) -> Ty:
    """The type of a tool's whole result (`result` in a history term); ANY without `output`."""
    if tool.output is None:
        return ANY
    return type_of(tool.output.type, where=f"the output of `{tool.id}`")


def unlisted_in(ty: Ty, name: str) -> Ty | None:
    """The open record or `any` a schema declares that alone provides field `name` of `ty`
    (H354), or None when a type lists it or none is declared open."""
    options = options_of(ty)
    if any(o.name == "object" and o.field(name) is not None for o in options):
        return None
    if any(o.name in ("map",) or (o.name == "any" and not o.unlisted) for o in options):
        return None
    return next((o for o in options if o.unlisted), None)


def schema_type(schema: m.Schema | None) -> Ty:
    """A step's value: its schema's fields (unknown ones are the workflow checks' concern)."""
    if schema is None:
        return ANY
    return object_type({f.name: type_of(f.type) for f in schema.fields}, open=True)


def call_type(schema: m.Schema | None) -> Ty:
    """A call's arguments or result as its tool declares them (every field known); a tool
    without an `output` may return anything."""
    if schema is None:
        return ANY
    return object_type({f.name: type_of(f.type) for f in schema.fields})


def article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _type_name(ty: Ty) -> str:
    if ty.name in ("list", "map"):
        return f"{ty.name}<{_type_name(ty.item or ANY)}>"
    return ty.name


def describe(ty: Ty) -> str:
    """`an \\`int\\``, `a risk level`, `a string`: how a message names a type."""
    if ty.name == "any":
        return "a value"
    if ty.name == "union":
        return " or ".join(dict.fromkeys(describe(o) for o in ty.options))
    if ty.name == "string" and ty.lit is not None:
        return "a string"
    if ty.name == "enum":
        return ty.owner or "an enum value"
    if ty.name == "set":
        return "a set of effects"
    if ty.name == "object":
        return "an object"
    if ty.name == "bare":
        return "a bare name"
    name = _type_name(ty)
    return f"{article(name)} `{name}`"


def quote_values(values: Sequence[str]) -> str:
    shown = ", ".join(f"`{v}`" for v in values[:SHOWN_VALUES])
    return shown + (f" and {len(values) - SHOWN_VALUES} more" if len(values) > SHOWN_VALUES else "")


@dataclass(frozen=True, slots=True)
class Problem:
    """A finding about one comparison, before we know it is not excused by another option."""

    code: str
    message: str
    span: Span
    label: str
    help: str | None = None


@dataclass
class Operand:
    node: object
    ty: Ty
    span: Span
    text: str


def has_problem(lt: Ty, left: Operand, right: object, name: str | None) -> Problem | None:
    right_span: Span = right.span  # type: ignore[attr-defined]
    if lt.name in ("any", "map"):
        return None
    if lt.name == "object":
        if lt.open or name is None or lt.field(name) is not None:
            return None
        fields = [k for k, _ in lt.fields]
        return Problem(
            "H324",
            f"`{left.text}` has no field `{name}`",
            right_span,
            f"not a field of `{left.text}`",
            did_you_mean(name, fields) or f"its fields are {quote_values(fields)}",
        )
    if lt.name in ("list", "set"):
        item = lt.item or ANY
        if name is not None and item.name == "enum" and name not in item.values:
            return Problem(
                "H328",
                f"`{name}` is not {item.owner or 'a value of the list'}",
                right_span,
                f"not one of {quote_values(item.values)}",
                did_you_mean(name, item.values),
            )
        return None
    return Problem(
        "H326",
        f"`has` needs an object, a map or a list on its left, not {describe(lt)}",
        left.span,
        f"{describe(lt)}",
        OPERATORS["has"].typing.help,
    )


def options_of(ty: Ty) -> tuple[Ty, ...]:
    return ty.options if ty.name == "union" else (ty,)


def join_types(types: Sequence[Ty]) -> Ty:
    unique = tuple(dict.fromkeys(types))
    if not unique:
        return ANY
    if len(unique) == 1:
        return unique[0]
    if any(t.name == "any" for t in unique):
        return ANY
    return Ty("union", options=unique)


def field_of(ty: Ty, name: str) -> Ty | None:
    if ty.name == "any":
        return ANY
    if ty.name == "object":
        found = ty.field(name)
        return found if found is not None else (ANY if ty.open else None)
    if ty.name == "map":
        return ty.item or ANY
    if ty.name == "union":
        found_types = [f for f in (field_of(o, name) for o in ty.options) if f is not None]
        return join_types(found_types) if found_types else None
    return None


def compatible(a: Ty, b: Ty) -> bool:
    if a.name == "any" or b.name == "any":
        return True
    if a.name in NUMBERS and b.name in NUMBERS:
        return True
    if a.name in STRINGISH and b.name in STRINGISH:
        if a.name == "enum" and b.name == "enum":
            return bool(set(a.values) & set(b.values))
        return True
    if a.name in ("list", "set") and b.name in ("list", "set"):
        return compatible(a.item or ANY, b.item or ANY)
    return a.name == b.name


def member_problem(member: Operand, other: Operand) -> Problem | None:
    """A bare name or a string literal beside an enum must be one of its values."""
    word = member.ty.lit or ""
    enum = other.ty
    if enum.name == "any" or (enum.name == "enum" and word in enum.values):
        return None
    if enum.name == "enum":
        owner = enum.owner or f"a value of `{other.text}`"
        return Problem(
            "H328",
            f"`{word}` is not {owner}",
            member.span,
            f"not one of {quote_values(enum.values)}",
            did_you_mean(word, enum.values) or f"the values are {quote_values(enum.values)}",
        )
    if member.ty.name != "bare":
        return None
    help = f'write it as a string: `"{word}"`' if enum.name in STRINGISH else None
    return Problem(
        "H328",
        f"bare name `{word}` is compared with {describe(enum)}, which has no named values",
        member.span,
        "not a value",
        help,
    )


def mismatch(a: Operand, b: Operand, node: s.Compare) -> Problem:
    help = "compare values of the same type"
    for quoted, typed in ((b, a), (a, b)):
        if quoted.ty.lit is not None and typed.ty.name in NUMBERS | {"bool", "duration"}:
            help = f"write the value without quotes: `{quoted.ty.lit}`"
            break
    return Problem(
        "H325",
        f"`{node.op}` compares {describe(a.ty)} with {describe(b.ty)}",
        node.span,
        f"`{a.text}` is {describe(a.ty)}, `{b.text}` is {describe(b.ty)}",
        help,
    )


def enum_side(a: Operand, b: Operand) -> tuple[Operand, Operand] | None:
    """(member, enum) when one side is a bare name, or a string literal beside an enum."""
    if a.ty.name == "bare":
        return a, b
    if b.ty.name == "bare":
        return b, a
    if a.ty.lit is not None and b.ty.name == "enum":
        return a, b
    if b.ty.lit is not None and a.ty.name == "enum":
        return b, a
    return None


def equality_problem(a: Operand, b: Operand, node: s.Compare) -> Problem | None:
    if a.ty.name == "any" or b.ty.name == "any":
        return None
    sides = enum_side(a, b)
    if sides is not None:
        return member_problem(*sides)
    return None if compatible(a.ty, b.ty) else mismatch(a, b, node)


def order_problem(operator: Operator, a: Operand, b: Operand, node: s.Compare) -> Problem | None:
    if a.ty.name == "any" or b.ty.name == "any":
        return None
    sides = enum_side(a, b)
    if sides is not None:
        return member_problem(*sides)
    for side in (a, b):
        if side.ty.name not in operator.typing.left:
            return Problem(
                "H326",
                f"`{node.op}` does not apply to {describe(side.ty)}",
                side.span,
                f"{describe(side.ty)} has no order",
                operator.typing.help,
            )
    same = (a.ty.name in NUMBERS and b.ty.name in NUMBERS) or a.ty.name == b.ty.name
    if same and a.ty.name == "enum":
        same = set(a.ty.values) == set(b.ty.values)
    return None if same else mismatch(a, b, node)


def text_problem(operator: Operator, a: Operand, b: Operand, node: s.Compare) -> Problem | None:
    typing = operator.typing
    for side, allowed, where in ((a, typing.left, "left"), (b, typing.right, "right")):
        if side.ty.name == "any" or side.ty.name in allowed:
            continue
        if where == "right" and typing.right_message:
            return Problem(
                "H326",
                typing.right_message,
                side.span,
                f"{describe(side.ty)}, {typing.right_label}",
                typing.right_help,
            )
        return Problem(
            "H326",
            f"`{operator.spelling}` needs {typing.wanted} on its {where}, not {describe(side.ty)}",
            side.span,
            f"{describe(side.ty)}",
            typing.help,
        )
    return None
