"""Syntax tree nodes: frozen, each with a span that never takes part in equality.

The tree keeps what a user wrote and nothing more: block items stay in source order (so the
formatter can keep them), closed vocabularies stay plain names (checked by the compiler), and
parentheses are not nodes (the printer puts them back where precedence needs them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace

from .source import NO_SPAN, Span


def _span() -> Span:
    return field(default=NO_SPAN, compare=False, repr=False, kw_only=True)


class Node:
    """What every node shares: equality and hashing over its fields (the span left out), and a
    `repr` of them, as `dataclass` would generate them. Written once here: generated for each
    of the seventy-odd node classes they were half the time it took to import this module, a
    cost every `harnessc check` paid. Each node class is a `@dataclass(frozen=True,
    slots=True, eq=False, repr=False)` subclass."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return _compared(self) == _compared(other)

    def __hash__(self) -> int:
        return hash(_compared(self))

    def __repr__(self) -> str:
        shown = _names(type(self))[1]
        return f"{type(self).__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in shown)})"


_NAMES: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _names(cls: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A node class's compared fields and shown fields, in declaration order."""
    names = _NAMES.get(cls)
    if names is None:
        found = fields(cls)
        names = tuple(f.name for f in found if f.compare), tuple(f.name for f in found if f.repr)
        _NAMES[cls] = names
    return names


def child_fields(cls: type) -> tuple[str, ...]:
    """The fields of a node class that may hold nodes: every compared field (the span is not
    one)."""
    return _names(cls)[0]


def _compared(node: Node) -> tuple[object, ...]:
    return tuple([getattr(node, name) for name in _names(type(node))[0]])


# ---------------------------------------------------------------------------------------------
# Leaves and values


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Name(Node):
    """A word or dotted path used as a name or a reference: `change.create`, `std.risk`."""

    text: str
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Pattern(Node):
    """A tool selector: an id, a glob (`change.*`, `*`), `pack:NAME`, `kind:NAME`, an MCP id."""

    text: str
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Str(Node):
    """A string literal; adjacent literals are joined, and the parts are kept for printing."""

    parts: tuple[str, ...]
    span: Span = _span()

    @property
    def value(self) -> str:
        return "".join(self.parts)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Int(Node):
    value: int
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Float(Node):
    text: str
    span: Span = _span()

    @property
    def value(self) -> float:
        return float(self.text)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Duration(Node):
    """A duration as written (`1h30m`); `ms` is its value in milliseconds."""

    text: str
    span: Span = _span()

    @property
    def ms(self) -> int:
        return duration_ms(self.text)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Bool(Node):
    value: bool
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Path(Node):
    """A value read in a condition: `args.path`, `actor.role`, `review`, `scan.report`."""

    text: str
    span: Span = _span()

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(self.text.split("."))


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class FuncCall(Node):
    """A function call: a fact function (`connected(github)`), a history term (`count(files.
    delete within 10m when args.recursive)`, `sum(args.amount of payments.send)`), `len(x)`,
    or an extraction (`urls(args.body)`).

    An argument is an operand or a tool pattern (a word or dotted name is read as a path; which
    it means depends on the function). `of` holds the tool patterns of `sum`, `window` the
    look-back as written (a number without a unit is kept, and refused by the compiler), `when`
    the condition over the earlier call.
    """

    name: Name
    args: tuple[Expr | Pattern, ...]
    of: tuple[Pattern, ...] = ()
    window: Duration | Int | Float | None = None
    when: Cond | None = None
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Index(Node):
    """`FACT[KEY]`: the entry of a map (`bank.payees[args.account]`), absent when the map has
    no such key."""

    of: Path
    key: Expr
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ListLit(Node):
    items: tuple[Value, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Entry(Node):
    key: Name
    value: Value
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Record(Node):
    entries: tuple[Entry, ...]
    span: Span = _span()


# ---------------------------------------------------------------------------------------------
# Conditions


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Compare(Node):
    left: Expr
    op: str
    right: Expr
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class And(Node):
    items: tuple[Cond, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Or(Node):
    items: tuple[Cond, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Not(Node):
    item: Cond
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Provenance(Node):
    """`value from user|trusted|untrusted|nowhere [only]`, `value from label NAME`, `value
    from result(SEL [within W] [when C]) [only]`.

    `source` is the word as written (`label` for `from label NAME`, whose name is `label`;
    the function's name for a call, which `call` holds).
    """

    value: Expr
    source: Name
    label: Name | None = None
    only: bool = False
    call: FuncCall | None = None
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Quantified(Node):
    """`all x in list: cond`, `any x in list: cond`: `x` is bound in `body` only."""

    quantifier: str
    var: Name
    over: Expr
    body: Cond
    span: Span = _span()


RESULT_SOURCE = "result"
"""The function a `from` names for the results of earlier calls: `from result(files.read)`, or
with a field of those results, `from result.sender(mail.read)`."""


def result_field(call: FuncCall) -> tuple[str, ...] | None:
    """The field path of a `from result[.FIELD](…)` source: `()` for `result`, `("sender",)`
    for `result.sender`; None when the call names another function."""
    root, _, rest = call.name.text.partition(".")
    if root != RESULT_SOURCE:
        return None
    return tuple(rest.split(".")) if rest else ()


def history_of(call: FuncCall) -> FuncCall:
    """The history term a `from result(SEL …)` reads: `succeeded(SEL …)`, whose calls' results
    the value must be found in (the same selectors, window and `when`, checked alike)."""
    return replace(call, name=Name("succeeded", span=call.name.span))


Expr = Str | Int | Float | Duration | Bool | Path | FuncCall | ListLit | Index
Value = Expr | Record
Cond = Compare | And | Or | Not | Provenance | Quantified | Expr


# ---------------------------------------------------------------------------------------------
# Block items shared by many declarations


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Attr(Node):
    """A keyword attribute and its values: `summary "…"`, `effects read write`, `limit 20`.

    A few keywords carry a second keyword in the source that the key implies: `legacy
    [replaced_by X]`, `dynamic provided_by X`, `recall MODE [top N]`, `transport KIND [CMD]`.
    """

    key: str
    values: tuple[Value | Name, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class SchemaAttr(Node):
    """`input { … }` or `output { … }` (tools, workflows, delegate steps).

    `type`: a tool's `output` written as another type than a record (`output list<{ … }>`,
    `output string | int`, `output any`); then `schema` has no fields and spans the type."""

    key: str
    schema: Schema
    span: Span = _span()
    type: TypeRef | None = None


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Rest(Node):
    """The `...` that ends an open record: it holds fields beyond those listed."""

    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class TypeRef(Node):
    """A schema type: `name` is a type name (`any` among them), or `list`, `map`, `enum`,
    `object` (`open` with a trailing `...`) or `union` (`A | B`, its alternatives in `args`)."""

    name: str
    args: tuple[TypeRef, ...] = ()
    values: tuple[Str, ...] = ()
    fields: tuple[Field, ...] = ()
    optional: bool = False
    span: Span = _span()
    rest: Rest | None = None

    @property
    def open(self) -> bool:
        """An open record: its fields end with `...`."""
        return self.rest is not None


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Constraint(Node):
    """`min N`, `max N`, `pattern "re"`, `default V`, `secret`; of output fields `trusted`,
    `untrusted` and `label NAME` (whose value is the label's Name)."""

    kind: str
    value: Value | Name | None = None
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Field(Node):
    """A field of a schema; `type` is None for a note (`body: untrusted`), which only adds
    constraints to a field of the same name declared elsewhere (in an `extend`)."""

    name: Name
    type: TypeRef | None
    constraints: tuple[Constraint, ...] = ()
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Schema(Node):
    """`{ FIELD* [...] }`; `rest` is the `...` that ends an open record."""

    fields: tuple[Field, ...]
    span: Span = _span()
    rest: Rest | None = None

    @property
    def open(self) -> bool:
        """An open record: the record holds fields beyond those listed."""
        return self.rest is not None


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Approver(Node):
    """`approver role "…"` / `approver user "…"` (and `expect ask approver …` in tests)."""

    kind: str
    value: Str
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Grant(Node):
    """`grant once|task|class SELECTOR [when COND] ttl D`."""

    scope: str
    ttl: Duration
    selector: Pattern | None = None
    when: Cond | None = None
    span: Span = _span()


Option = Approver | Grant | Attr


# ---------------------------------------------------------------------------------------------
# Declarations


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Header(Node):
    name: Name
    items: tuple[Attr, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Import(Node):
    """`import std.risk`, or `import "./x.harness" as x` (`is_file`)."""

    target: str
    is_file: bool
    alias: Name | None = None
    span: Span = _span()
    target_span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Connection(Node):
    name: Name
    description: Str | None = None
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Runtime(Node):
    name: Name
    description: Str | None = None
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Fact(Node):
    name: Name
    type: TypeRef
    description: Str | None = None
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Label(Node):
    """`label NAME "description"`: a data label the spec declares."""

    name: Name
    description: Str | None = None
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class OnSuccess(Node):
    """`on_success [when C] add|remove [each x in] VALUE[: ITEM] to|from FACT[[KEY]]`: `value` is
    `args.*` or `result.*`, `fact` a declared list fact, `op` `add` or `remove`. With `each`,
    `var` is bound to every element of the list `value`, and `item` (a path from `var`) says
    what is taken of it. `when` reads the call's own `args` and `result`."""

    value: Path
    fact: Name
    op: str = "add"
    var: Name | None = None
    item: Path | None = None
    when: Cond | None = None
    key: Path | None = None
    """`to FACT[KEY]`: the entry of a map fact keyed by a value of the call."""
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Requires(Node):
    cond: Cond
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Operation(Node):
    name: Name
    items: tuple[ToolItem, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Tool(Node):
    """A tool; `quoted` when its name was written as a string (MCP names with `-`)."""

    name: Name
    items: tuple[ToolItem, ...]
    quoted: bool = False
    span: Span = _span()


ToolItem = Attr | SchemaAttr | Requires | Operation | OnSuccess


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Extend(Node):
    """`extend tool A, B { … }`: tool items added to tools declared elsewhere (a generated or
    discovered catalogue), merged into each as if its own block said them."""

    tools: tuple[Name, ...]
    items: tuple[ToolItem, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Expose(Node):
    patterns: tuple[Pattern, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Hide(Node):
    patterns: tuple[Pattern, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Rank(Node):
    items: tuple[Attr, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Surface(Node):
    name: Name
    items: tuple[Expose | Hide | Rank | Attr, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class RiskSelector(Node):
    """The sugar `risk >= high` ≡ `* when tool.risk >= high`."""

    op: str
    level: Name
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class EffectsSelector(Node):
    """The sugar `effects has external` ≡ `* when tool.effects has external`."""

    effect: Name
    span: Span = _span()


Selector = Pattern | RiskSelector | EffectsSelector


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Rule(Node):
    label: Name | None
    effect: str
    selectors: tuple[Selector, ...]
    when: Cond | None = None
    options: tuple[Option, ...] | None = None
    span: Span = _span()
    effect_span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Default(Node):
    """`default allow|deny|ask [{…}]` or `default RISK_TABLE`."""

    effect: str | None
    table: Name | None
    options: tuple[Option, ...] | None = None
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Include(Node):
    policy: Name
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Policy(Node):
    name: Name
    items: tuple[Default | Include | Rule | Attr, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class RiskEntry(Node):
    level: Name
    effect: str
    options: tuple[Option, ...] | None = None
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class RiskTable(Node):
    name: Name
    entries: tuple[RiskEntry, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Mcp(Node):
    name: Name
    items: tuple[Attr | Tool, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class PrivateTool(Node):
    tool: Tool
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Subagent(Node):
    name: Name
    items: tuple[Attr, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Skill(Node):
    name: Name
    items: tuple[Attr | PrivateTool | Subagent, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Agent(Node):
    name: Name
    items: tuple[Attr, ...]
    span: Span = _span()


# Workflows


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Arg(Node):
    name: Name
    value: Value
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class CallAction(Node):
    tool: Name
    args: tuple[Arg, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class DelegateAction(Node):
    agent: Name
    goal: Str
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class DecideAction(Node):
    question: Str
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class GateAction(Node):
    cond: Cond
    span: Span = _span()


Action = CallAction | DelegateAction | DecideAction | GateAction


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class By(Node):
    kind: str
    value: Str
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Timeout(Node):
    duration: Duration
    default: Name | None = None
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Context(Node):
    values: tuple[Expr, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class FailureAction(Node):
    """`retry N [backoff D]`, `compensate STEP`, `escalate role|user "…"`."""

    kind: str
    count: Int | None = None
    backoff: Duration | None = None
    target: Name | None = None
    principal: str | None = None
    who: Str | None = None
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class OnFailure(Node):
    actions: tuple[FailureAction, ...]
    span: Span = _span()


StepOption = Attr | By | Timeout | Context | SchemaAttr | OnFailure


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Step(Node):
    name: Name
    action: Action
    after: tuple[Name, ...] = ()
    when: Cond | None = None
    compensation: bool = False
    options: tuple[StepOption, ...] | None = None
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Workflow(Node):
    name: Name
    items: tuple[Attr | SchemaAttr | Step, ...]
    span: Span = _span()


# Tests


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class TestCall(Node):
    tool: Name
    args: tuple[Arg, ...]
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class TestRecord(Node):
    """`as actor {…}`, `resource {…}`, `facts {…}`, `task {…}`, `env {…}`, `execution {…}`."""

    key: str
    record: Record
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Said(Node):
    """`said "…"`: the user said this in the test's session, before the call."""

    text: Str
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Earlier(Node):
    """`earlier TOOL(args) [returns VALUE] [ago DURATION]`: an earlier call of the test's
    session and its result."""

    tool: Name
    args: tuple[Arg, ...]
    returns: Value | None = None
    ago: Duration | None = None
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Expect(Node):
    effect: str
    details: tuple[Approver | Attr, ...] = ()
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Test(Node):
    __test__ = False  # not a pytest class

    name: Str
    items: tuple[Attr | TestCall | TestRecord | Expect | Said | Earlier, ...]
    span: Span = _span()


Declaration = (
    Header
    | Import
    | Connection
    | Runtime
    | Fact
    | Label
    | Tool
    | Extend
    | Surface
    | Policy
    | RiskTable
    | Mcp
    | Skill
    | Agent
    | Workflow
    | Test
)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Comment(Node):
    text: str
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Broken(Node):
    """A declaration the parser skipped after a syntax error, and what it would have declared
    as far as the recovery can tell: its keyword and name, and the tools written inside an
    `mcp` or `skill` block. None means unknown (any name, or any kind of declaration)."""

    kind: str | None
    name: str | None
    tools: tuple[str, ...] = ()
    span: Span = _span()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Module(Node):
    """One parsed file: its declarations in source order, its comments (for `fmt`), and the
    declarations that did not parse (after syntax errors)."""

    items: tuple[Declaration, ...]
    comments: tuple[Comment, ...] = field(default=(), compare=False)
    broken: tuple[Broken, ...] = field(default=(), compare=False)
    sizes: tuple[int, int] = field(default=(0, 0), compare=False)
    """Its rules and expression nodes (dsl/files.py's limits), counted as it was parsed."""
    span: Span = _span()


# ---------------------------------------------------------------------------------------------
# Helpers

DURATION_UNITS: dict[str, int] = {"d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1000, "ms": 1}
"""A duration's units in milliseconds, largest first: the dsl's one copy of them (it may not
import the runtime, whose `DURATION_UNITS` a test keeps equal to this one)."""
DURATION_PART = re.compile(
    "([0-9]+)(" + "|".join(sorted(DURATION_UNITS, key=len, reverse=True)) + ")"
)
"""One part of a duration (`1h30m` has two): its number and its unit."""


def duration_ms(text: str) -> int:
    """A duration's milliseconds (`1h30m` → 5400000); `text` is a duration token."""
    return sum(int(n) * DURATION_UNITS[unit] for n, unit in DURATION_PART.findall(text))


def dump(node: object, indent: int = 0) -> str:
    """An indented, readable rendering of a tree with each node's location (`debug tree`)."""
    pad = "  " * indent
    if isinstance(node, tuple):
        if not node:
            return "()"
        return "\n".join(f"{pad}- {dump(item, indent + 1).lstrip()}" for item in node)
    if not hasattr(node, "__dataclass_fields__"):
        return repr(node)
    cls = type(node).__name__
    span = getattr(node, "span", NO_SPAN)
    where = f" @{span.line}:{span.column}" if span is not NO_SPAN else ""
    lines = [f"{pad}{cls}{where}"]
    for name, spec in node.__dataclass_fields__.items():  # type: ignore[attr-defined]
        if not spec.compare or name == "span":
            continue
        value = getattr(node, name)
        nested = hasattr(value, "__dataclass_fields__") or (
            isinstance(value, tuple) and value and hasattr(value[0], "__dataclass_fields__")
        )
        if nested:
            lines.append(f"{pad}  {name}:")
            lines.append(dump(value, indent + 2))
        elif value is not None and value != () and value is not False:
            lines.append(f"{pad}  {name}: {value!r}")
    return "\n".join(lines)


EXPRESSION_NODES: tuple[type[Node], ...] = (
    Or,
    And,
    Not,
    Compare,
    Int,
    Float,
    Duration,
    Bool,
    Path,
    Provenance,
    Quantified,
    FuncCall,
    ListLit,
    Record,
    Entry,
)
"""The node classes counted against a spec's limits of expression nodes (dsl/files.py)."""


def expression_size(node: object) -> int:
    """The expression nodes of a condition or value (`EXPRESSION_NODES`), counted with a stack
    of its own, so a condition of any depth is measured without recursion."""
    count = 0
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, tuple):
            stack.extend(item)
            continue
        if not isinstance(item, Node):
            continue
        if isinstance(item, EXPRESSION_NODES):
            count += 1
        stack.extend(getattr(item, name) for name in child_fields(type(item)))
    return count
