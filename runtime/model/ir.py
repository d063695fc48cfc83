"""The typed model (IR) of a checked spec: the contract between the compiler and the runtime.

Every class is a frozen pydantic model that forbids unknown fields, so a generated package can
load a spec from JSON and get back exactly what the compiler built (`Spec.from_json(s.to_json())
== s`). Everything that came from a source line carries `origin`, so a runtime error can name the
spec line. This module imports only pydantic and the standard library.

A model's validator is built when it is first needed, not at import: the compiler builds the
model with `trusted` (it has checked every value), so `harnessc check` never pays for building
validators it does not use. Whatever validates builds them all first (`build_models`):
`Spec.from_json`, and the runtime when it loads a spec.

>>> spec = Spec(name="demo", root_module="demo")
>>> Spec.from_json(spec.to_json()) == spec
True
"""

from __future__ import annotations

import gc
import hashlib
import json
import re
import threading
import typing as t
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, ParamSpec, TypeVar

from pydantic import BaseModel, ConfigDict, JsonValue
from pydantic import Field as _Field

__all__ = [
    "BUILTIN_LABELS",
    "DELEGATE_TASK",
    "DURATION_PART",
    "DURATION_PATTERN",
    "DURATION_UNITS",
    "EFFECTS",
    "HISTORY_FUNCS",
    "PATH_ROOTS",
    "PUBLIC_KINDS",
    "RISK_LEVELS",
    "SOURCE_KINDS",
    "TOOL_KINDS",
    "TRUST_LEVELS",
    "URL_PATTERN",
    "WIRE_NAME",
    "Agent",
    "And",
    "Approver",
    "Compare",
    "Condition",
    "Connection",
    "DefaultDecision",
    "Effect",
    "EffectOptions",
    "EffectWord",
    "EnumMember",
    "Expectation",
    "Extract",
    "Fact",
    "FactAdd",
    "FactCall",
    "FactUpdate",
    "FailureAction",
    "Field",
    "Grant",
    "History",
    "Index",
    "Label",
    "Length",
    "ListValue",
    "Literal",
    "McpServer",
    "ModelSeal",
    "Not",
    "Operation",
    "Or",
    "Path",
    "PathRoot",
    "Policy",
    "Provenance",
    "Quantified",
    "Rank",
    "RecordValue",
    "Risk",
    "RiskEntry",
    "RiskTable",
    "Rule",
    "Runtime",
    "Schema",
    "Selector",
    "SessionStep",
    "Skill",
    "SourceRef",
    "Spec",
    "SpecTest",
    "Step",
    "Subagent",
    "Surface",
    "Tool",
    "ToolKind",
    "Type",
    "TypeName",
    "Value",
    "Workflow",
    "build_models",
    "collection_paused",
    "derive_wire_name",
    "ir_fingerprint",
    "parse_duration",
    "requester_may_approve",
    "risk_rank",
    "trusted",
    "without_origins",
]

RISK_LEVELS: tuple[str, ...] = ("low", "medium", "high", "critical")
EFFECTS: tuple[str, ...] = ("read", "write", "external", "reversible", "idempotent", "preview")
TOOL_KINDS: tuple[str, ...] = ("public", "primitive", "legacy", "dynamic", "mcp", "private")
PUBLIC_KINDS: frozenset[str] = frozenset({"public", "dynamic", "mcp"})
"""Kinds of tool a surface can hold: legacy, primitive and private tools never."""
DELEGATE_TASK = "delegate_task"
"""The planner-only delegation protocol's name: never a tool, never on a surface."""
PathRoot = t.Literal[
    "actor",
    "task",
    "env",
    "resource",
    "tool",
    "args",
    "call",
    "input",
    "step",
    "fact",
    "result",
    "var",
]
PATH_ROOTS: tuple[str, ...] = t.get_args(PathRoot)
BUILTIN_LABELS: tuple[str, ...] = ("secret", "pii")
"""Data labels every spec knows; a spec declares more with `label NAME "description"`."""
TRUST_LEVELS: tuple[str, ...] = ("trusted", "untrusted")
SOURCE_KINDS: tuple[str, ...] = ("user", "trusted", "untrusted")
"""What a value's provenance can contain: the user's messages, trusted data (a trusted tool's
result, a fact, a constant of the spec, a workflow's input) and untrusted data."""
HISTORY_FUNCS: tuple[str, ...] = ("called", "succeeded", "count", "sum", "seen")

Risk = t.Literal["low", "medium", "high", "critical"]
EffectWord = t.Literal["read", "write", "external", "reversible", "idempotent", "preview"]
ToolKind = t.Literal["public", "primitive", "legacy", "dynamic", "mcp", "private"]
Effect = t.Literal["allow", "deny", "ask"]


def risk_rank(level: str) -> int:
    """The order of risk levels: `low` < `medium` < `high` < `critical`.

    >>> risk_rank("high") > risk_rank("medium")
    True
    """
    return RISK_LEVELS.index(level)


class _Model(BaseModel):
    # built on first use, or all at once by `build_models`
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class SourceRef(_Model):
    """Where a model object was declared: the file as diagnostics show it, 1-based line/column."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


# ---------------------------------------------------------------------------------------------
# Schemas

TypeName = t.Literal[
    "string",
    "int",
    "float",
    "bool",
    "path",
    "url",
    "duration",
    "enum",
    "list",
    "map",
    "object",
    "any",
    "union",
]
DURATION_UNITS: dict[str, int] = {"d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1000, "ms": 1}
"""A duration's units in milliseconds, largest first."""
_DURATION_UNIT = "ms|[smhd]"
DURATION_PART = re.compile(f"([0-9]+)({_DURATION_UNIT})")
"""One part of a duration (`1h30m` has two): its number and its unit."""
DURATION_PATTERN = f"^(?:[0-9]+(?:{_DURATION_UNIT}))+$"
"""A whole duration, one or more parts with nothing between (JSON Schema's `pattern`)."""
URL_PATTERN = r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s]*$"
"""What a `url` value must match: a scheme, a colon, no white space."""


def parse_duration(text: str) -> int | None:
    """A duration's milliseconds, or None when the text is not a duration.

    >>> parse_duration("1h30m"), parse_duration("90"), parse_duration("")
    (5400000, None, None)
    """
    total, pos = 0, 0
    for match in DURATION_PART.finditer(text):
        if match.start() != pos:
            return None
        total += int(match.group(1)) * DURATION_UNITS[match.group(2)]
        pos = match.end()
    return total if text and pos == len(text) else None


class Type(_Model):
    """A schema type: a scalar, `enum(values)`, `list<item>`, `map<item>`, `object{fields}`,
    `any` (every JSON value) or `union` (a value of one of `options`: `string | int`).

    An `open` object (`{ id: string, ... }`) also holds fields it does not list; open objects,
    `any` and unions are types of outputs only (language.md §5.5)."""

    name: TypeName
    item: Type | None = None
    values: tuple[str, ...] = ()
    fields: tuple[Field, ...] = ()
    optional: bool = False
    open: bool = False
    options: tuple[Type, ...] = ()

    def holds_unlisted(self) -> bool:
        """Whether a value of this type can hold what no schema lists: an open record or an
        `any`, at any depth (its values carry the tool's trust, language.md §5.5)."""
        if self.name == "any" or (self.name == "object" and self.open):
            return True
        inner = [*(f.type for f in self.fields), *self.options]
        if self.item is not None:
            inner.append(self.item)
        return any(t.holds_unlisted() for t in inner)

    def records(self) -> tuple[Field, ...] | None:
        """The listed fields of the records a value of this type holds, through lists, maps
        and unions (the alternatives' fields merged: `record_fields`); None when it holds no
        record."""
        found = [r for r in _records(self) if r]
        if not found:
            return None
        return record_fields(found)

    def to_json_schema(self) -> dict[str, t.Any]:
        out: dict[str, t.Any]
        if self.name == "any":
            return {}
        if self.name == "union":
            return {"anyOf": [o.to_json_schema() for o in self.options]}
        if self.name in ("string", "path"):
            out = {"type": "string"}
        elif self.name == "url":
            out = {"type": "string", "format": "uri"}
        elif self.name == "duration":
            out = {"type": "string", "pattern": DURATION_PATTERN}
        elif self.name == "int":
            out = {"type": "integer"}
        elif self.name == "float":
            out = {"type": "number"}
        elif self.name == "bool":
            out = {"type": "boolean"}
        elif self.name == "enum":
            out = {"type": "string", "enum": list(self.values)}
        elif self.name == "list":
            assert self.item is not None
            out = {"type": "array", "items": self.item.to_json_schema()}
        elif self.name == "map":
            assert self.item is not None
            out = {"type": "object", "additionalProperties": self.item.to_json_schema()}
        else:
            out = _object_schema(self.fields, self.open)
        return out


def _records(type_: Type) -> Iterator[tuple[Field, ...]]:
    if type_.name in ("list", "map") and type_.item is not None:
        yield from _records(type_.item)
    elif type_.name == "union":
        for option in type_.options:
            yield from _records(option)
    elif type_.name == "object":
        yield type_.fields


def record_fields(records: t.Sequence[tuple[Field, ...]]) -> tuple[Field, ...]:
    """The fields of the record alternatives of one value, merged by name. Where alternatives
    list one name differently, the more cautious reading holds: `untrusted` over `trusted`
    over none, `secret` if either is, the labels of both, the first one's type.

    >>> a = Field(name="to", type=Type(name="string"), trust="trusted")
    >>> b = Field(name="to", type=Type(name="string"), trust="untrusted", labels=("pii",))
    >>> [(f.name, f.trust, f.labels) for f in record_fields([(a,), (b,)])]
    [('to', 'untrusted', ('pii',))]
    """
    if len(records) == 1:
        return records[0]
    merged: dict[str, Field] = {}
    for fields in records:
        for f in fields:
            first = merged.get(f.name)
            if first is None:
                merged[f.name] = f
                continue
            trusts = {first.trust, f.trust}
            merged[f.name] = first.model_copy(
                update={
                    "trust": "untrusted"
                    if "untrusted" in trusts
                    else "trusted"
                    if "trusted" in trusts
                    else None,
                    "secret": first.secret or f.secret,
                    "labels": tuple(dict.fromkeys((*first.labels, *f.labels))),
                }
            )
    return tuple(merged.values())


class Field(_Model):
    """One field of a schema with its constraints; `default` is a JSON value or None."""

    name: str
    type: Type
    min: int | float | None = None
    max: int | float | None = None
    pattern: str | None = None
    default: JsonValue = None
    secret: bool = False
    trust: t.Literal["trusted", "untrusted"] | None = None
    """Of an output field: where its data comes from, overriding the tool's `trust`."""
    labels: tuple[str, ...] = ()
    """Of an output field: data labels of its value, added to the tool's `labels`."""
    origin: SourceRef | None = None

    @property
    def optional(self) -> bool:
        return self.type.optional

    @property
    def required(self) -> bool:
        """Required: not optional and without a default."""
        return not self.type.optional and self.default is None

    def to_json_schema(self) -> dict[str, t.Any]:
        out = self.type.to_json_schema()
        name = self.type.name
        if self.min is not None or self.max is not None:
            words = {
                "list": ("minItems", "maxItems"),
                "map": ("minProperties", "maxProperties"),
                "string": ("minLength", "maxLength"),
                "path": ("minLength", "maxLength"),
                "url": ("minLength", "maxLength"),
            }.get(name, ("minimum", "maximum"))
            if self.min is not None:
                out[words[0]] = self.min
            if self.max is not None:
                out[words[1]] = self.max
        if self.pattern is not None:
            out["pattern"] = self.pattern
        if self.default is not None:
            out["default"] = self.default
        if self.secret:
            out["writeOnly"] = True
        return out


def _object_schema(fields: tuple[Field, ...], open: bool = False) -> dict[str, t.Any]:
    out: dict[str, t.Any] = {
        "type": "object",
        "properties": {f.name: f.to_json_schema() for f in fields},
        "required": [f.name for f in fields if f.required],
    }
    if not open:
        out["additionalProperties"] = False
    return out


class Schema(_Model):
    """The fields of an `input` or `output` block, in the order written.

    `open`: the record holds fields beyond those listed (`output { id: string, ... }`).
    `shape`: an `output` written as a type other than a record (`output list<{ … }>`,
    `output string`, `output any`, a union); then `fields` is empty."""

    fields: tuple[Field, ...] = ()
    open: bool = False
    shape: Type | None = None
    origin: SourceRef | None = None

    def field(self, name: str) -> Field | None:
        return next((f for f in self.fields if f.name == name), None)

    @property
    def type(self) -> Type:
        """The whole value's type: the `shape`, or the record of the fields."""
        if self.shape is not None:
            return self.shape
        return Type(name="object", fields=self.fields, open=self.open)

    def records(self) -> tuple[Field, ...] | None:
        """The listed fields of the records the value holds (`Type.records`)."""
        if self.shape is not None:
            return self.shape.records()
        return self.fields or None

    def to_json_schema(self) -> dict[str, t.Any]:
        """Draft 2020-12 JSON Schema: required = non-optional fields without a default."""
        body = (
            self.shape.to_json_schema()
            if self.shape is not None
            else _object_schema(self.fields, self.open)
        )
        return {"$schema": "https://json-schema.org/draft/2020-12/schema", **body}


# ---------------------------------------------------------------------------------------------
# Conditions and values

Scalar = bool | int | float | str


class Literal(_Model):
    """A literal; `type` says how it was written (a duration's value is in milliseconds)."""

    kind: t.Literal["literal"] = "literal"
    value: Scalar
    type: t.Literal["string", "int", "float", "bool", "duration"]


class Path(_Model):
    """A value read at run time: `root` is a built-in root, `input`, `step` or `fact`.

    For `step` the first part is the step name; for `fact` it is the declared fact (`workspace.
    root`), the remaining parts read inside it. `result` reads an earlier call's result (inside
    a history term) or the call's own result (in `on_success`); `var` reads a variable bound by
    a quantifier (`all x in args.to: …`), the first part its name.
    """

    kind: t.Literal["path"] = "path"
    root: PathRoot
    parts: tuple[str, ...] = ()


class EnumMember(_Model):
    """A bare name compared with an enum-typed operand (`high`, `external`, `approve`)."""

    kind: t.Literal["enum_member"] = "enum_member"
    name: str


class FactCall(_Model):
    """`connected(connection)` or `running(runtime)`."""

    kind: t.Literal["fact_call"] = "fact_call"
    func: t.Literal["connected", "running"]
    name: str


class ListValue(_Model):
    kind: t.Literal["list"] = "list"
    items: tuple[Value, ...] = ()


class RecordValue(_Model):
    kind: t.Literal["record"] = "record"
    fields: dict[str, Value] = _Field(default_factory=dict)


class Length(_Model):
    """`len(value)`: the number of items of a list (or keys of a map, characters of a text);
    absent when the value is absent or has no length."""

    kind: t.Literal["length"] = "length"
    of: Value


class Index(_Model):
    """`FACT[KEY]`: the entry of a map under a key (`bank.payees[args.account]`); absent when
    the map is absent, or has no entry under that key, or the key is not a string."""

    kind: t.Literal["index"] = "index"
    of: Path
    key: Value


class Extract(_Model):
    """`urls(text)`, `hosts(text)`, `emails(text)`, `ibans(text)`: the identifier-like tokens
    of that kind inside a text; `params(text)`, `segments(text)`: the query parameter values
    and the path segments its URLs carry. Normalized as provenance normalizes values
    (runtime/judge/provenance.py, `extract`)."""

    kind: t.Literal["extract"] = "extract"
    func: t.Literal["urls", "hosts", "emails", "ibans", "params", "segments"]
    of: Value


class History(_Model):
    """A term over earlier events of the session (language.md, "Session-aware policy").

    - `called(sel …)`: an earlier call of a selected tool was authorised to run (any outcome);
    - `succeeded(sel …)`: an earlier call of a selected tool completed with success;
    - `count(sel …)`: the calls of selected tools that were authorised and have not failed,
      this call included when it is selected and meets `where`;
    - `sum(field of sel …)`: the sum of `field` (`args.x` or `result.x`) over the same calls;
    - `seen(label …)`: a result carrying data label `label` was produced.

    `window_ms` bounds the look-back (`within 1h`); None is the whole session. `where` is a
    condition over the earlier call (`args.*`, `result.*`, `tool.*`).
    """

    kind: t.Literal["history"] = "history"
    func: t.Literal["called", "succeeded", "count", "sum", "seen"]
    selectors: tuple[Selector, ...] = ()
    label: str | None = None
    field: Path | None = None
    window_ms: int | None = None
    where: Condition | None = None


class Provenance(_Model):
    """`value from source [only]`: where a value of the call appeared earlier in the session.

    `source` is `user`, `trusted`, `untrusted`, `label` (with `label`: a result carrying that
    data label), `nowhere` (it appeared in no source: the model made it up or rewrote it) or
    `result` (with `call`: the result of an earlier call that `call`, a `succeeded` term,
    counts — `args.iban from result(files.read when args.name from user)`; with `field`, a
    path of `result`, the value is at that field of such a result — `args.to from
    result.sender(mail.read)`).
    `only`: the value's sources are exactly that one kind, or those results (and there is at
    least one).
    """

    kind: t.Literal["provenance"] = "provenance"
    value: Value
    source: t.Literal["user", "trusted", "untrusted", "label", "nowhere", "result"]
    label: str | None = None
    only: bool = False
    call: History | None = None
    field: Path | None = None


class Quantified(_Model):
    """`all x in list: cond` / `any x in list: cond`; `x` is read as `Path(root="var")`."""

    kind: t.Literal["quantified"] = "quantified"
    quantifier: t.Literal["all", "any"]
    var: str
    over: Value
    body: Condition


class Compare(_Model):
    kind: t.Literal["compare"] = "compare"
    op: t.Literal[
        "==", "!=", "<", "<=", ">", ">=", "in", "has", "matches", "startswith", "endswith", "within"
    ]
    left: Value
    right: Value


class And(_Model):
    kind: t.Literal["and"] = "and"
    items: tuple[Condition, ...]


class Or(_Model):
    kind: t.Literal["or"] = "or"
    items: tuple[Condition, ...]


class Not(_Model):
    kind: t.Literal["not"] = "not"
    item: Condition


_Values: t.TypeAlias = (
    Literal
    | Path
    | EnumMember
    | FactCall
    | ListValue
    | RecordValue
    | Length
    | Extract
    | History
    | Index
)
"""The value nodes: a `Value`, and a `Condition` too (a bare operand is a condition)."""
Value = Annotated[_Values, _Field(discriminator="kind")]
Condition = Annotated[
    Compare | And | Or | Not | Provenance | Quantified | _Values,
    _Field(discriminator="kind"),
]


# ---------------------------------------------------------------------------------------------
# Registry


class Operation(_Model):
    """One operation of a tool: a call's `tool.risk` and `tool.effects` are its operation's."""

    name: str
    summary: str | None = None
    use_when: str | None = None
    not_for: str | None = None
    effects: tuple[EffectWord, ...] = ()
    risk: Risk = "low"
    timeout_ms: int | None = None
    input: Schema | None = None
    """Fields this operation adds (also merged into the tool's input as optional fields)."""
    origin: SourceRef | None = None


WIRE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What a model API accepts as a tool's name (`Tool.wire_name`)."""


def derive_wire_name(tool_id: str) -> str:
    """The name a model API sees: `[A-Za-z0-9_-]{1,64}`.

    >>> derive_wire_name("change.create")
    'change_create'
    >>> derive_wire_name("mcp:scanner:tool:create-issue")
    'mcp__scanner__create-issue'
    """
    if tool_id.startswith("mcp:") and tool_id.count(":") >= 3:
        _, server, _, name = tool_id.split(":", 3)
        raw = f"mcp__{server}__{name}"
    else:
        raw = tool_id.replace(".", "_")
    return re.sub(r"[^A-Za-z0-9_-]", "_", raw)[:64] or "_"


class FactUpdate(_Model):
    """`on_success [when C] add|remove [each VAR in] <value>[: <item>] to|from <fact>`: a
    successful call adds a value to a list fact, or removes it from the fact.

    `op` says which. With `each`, `value` is a list of the call and every element (bound to
    `each`, read through `item` when given: a `var` path) is added or removed. `when` is a
    condition over the call's own `args` and `result`; the update happens only when it holds.
    The one reading of these is runtime/judge/history.py `facts_changed`.
    """

    value: Path
    fact: str
    op: t.Literal["add", "remove"] = "add"
    each: str | None = None
    """The name each element of the list `value` is bound to (`add each x in …`)."""
    item: Path | None = None
    """What is taken of each element (`: x.email`, a `var` path); None: the element itself."""
    when: Condition | None = None
    key: Path | None = None
    """`to FACT[KEY]`: the entry of the map fact under the call's value at `key` (`args.*` or
    `result.*`); None: the fact is a list."""


FactAdd = FactUpdate
"""The former name of `FactUpdate`, when `on_success` only added."""


class Tool(_Model):
    id: str
    kind: ToolKind = "public"
    wire_name: str
    version: int = 1
    summary: str | None = None
    use_when: str | None = None
    not_for: str | None = None
    effects: tuple[EffectWord, ...] = ()
    """Sorted; for a tool with operations, the union of theirs."""
    risk: Risk = "low"
    """Declared, defaulted (low when nothing is written or sent, medium otherwise), or for a
    tool with operations the highest operation risk."""
    timeout_ms: int | None = None
    packs: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    replaced_by: str | None = None
    provided_by: str | None = None
    mcp_server: str | None = None
    skill: str | None = None
    input: Schema = _Field(default_factory=Schema)
    output: Schema | None = None
    requires: Condition | None = None
    trust: t.Literal["trusted", "untrusted"] | None = None
    """Where the tool's results come from (`trust trusted`); None: untrusted, the default."""
    labels: tuple[str, ...] = ()
    """Data labels of what the tool returns (`labels secret, pii`)."""
    on_success: tuple[FactUpdate, ...] = ()
    """Facts a successful call changes (`on_success add args.user to team.members`, `remove`,
    `when`, `each`), in written order."""
    operations: dict[str, Operation] = _Field(default_factory=dict)
    module: str = ""
    origin: SourceRef | None = None


class McpServer(_Model):
    id: str
    transport: t.Literal["stdio", "http", "sse", "websocket"]
    command: str | None = None
    """The command (stdio) or the URL (http, sse, websocket)."""
    summary: str | None = None
    tools: tuple[str, ...] = ()
    origin: SourceRef | None = None


class Connection(_Model):
    name: str
    description: str | None = None
    origin: SourceRef | None = None


class Runtime(_Model):
    name: str
    description: str | None = None
    origin: SourceRef | None = None


class Label(_Model):
    """A data label the spec declares (`label finance "…"`); `secret` and `pii` are built in."""

    name: str
    description: str | None = None
    origin: SourceRef | None = None


class Fact(_Model):
    name: str
    type: Type
    description: str | None = None
    origin: SourceRef | None = None


# ---------------------------------------------------------------------------------------------
# Surfaces and policies


class Selector(_Model):
    """A tool selector.

    `id` (value: a tool id), `glob` (value: the prefix before `*`), `all`, `module` (value: the
    module; `tools`: its public tools), `pack`, `kind`, `risk` (`op` and a level), `effects`
    (an effect the tool has).
    """

    kind: t.Literal["id", "glob", "all", "module", "pack", "kind", "risk", "effects"]
    value: str = ""
    op: str | None = None
    tools: tuple[str, ...] = ()
    text: str = ""
    """As written, for traces and messages."""


class Rank(_Model):
    recall: t.Literal["embedding", "lexical"] = "embedding"
    top: int = 60
    rerank: t.Literal["hybrid", "dense", "lexical"] = "hybrid"
    prefer: tuple[str, ...] = ()


class Surface(_Model):
    name: str
    summary: str | None = None
    expose: tuple[Selector, ...] = ()
    hide: tuple[Selector, ...] = ()
    limit: int = 20
    rank: Rank = _Field(default_factory=Rank)
    origin: SourceRef | None = None


SelfApproval = t.Literal["allow", "deny"]


def requester_may_approve(self_approval: str | None, risk: str) -> bool:
    """Whether the person who asked for a call may approve it themselves: as the ASK says
    (`self_approval allow|deny`), else only below risk `high` (separation of duties).

    >>> requester_may_approve(None, "medium"), requester_may_approve(None, "high")
    (True, False)
    >>> requester_may_approve("allow", "critical")
    True
    """
    if self_approval is not None:
        return self_approval == "allow"
    return risk_rank(risk) < risk_rank("high")


class Approver(_Model):
    kind: t.Literal["role", "user"]
    value: str


class Grant(_Model):
    scope: t.Literal["once", "task", "class"]
    ttl_ms: int
    selector: Selector | None = None
    condition: Condition | None = None


class EffectOptions(_Model):
    """What comes with an effect, wherever one is written (a rule, a policy's default, a risk
    table's entry): for an ASK, who may approve, what the answer grants, how long the request
    waits and whether the requester may approve their own call; for a DENY, the reason and
    what to do instead."""

    approvers: tuple[Approver, ...] = ()
    grant: Grant | None = None
    reason: str | None = None
    instead: str | None = None
    self_approval: SelfApproval | None = None
    """`self_approval allow|deny`; None: decided by the call's risk (`requester_may_approve`)."""
    expires_ms: int | None = None
    """`expires D`: how long the ASK's request waits for an answer; None: until answered."""


class Rule(EffectOptions):
    label: str
    """`policy.label`, or `policy#N` for an unlabeled rule (N: its position in its policy)."""
    policy: str
    """The qualified name of the policy that declares it (an included one, after expansion)."""
    effect: Effect
    selectors: tuple[Selector, ...]
    condition: Condition | None = None
    origin: SourceRef | None = None


class DefaultDecision(EffectOptions):
    """A policy's `default`: an effect with its options, or a risk table (qualified name)."""

    effect: Effect | None = None
    table: str | None = None
    origin: SourceRef | None = None


class Policy(_Model):
    name: str
    summary: str | None = None
    default: DefaultDecision | None = None
    includes: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = ()
    """In text order, each `include` expanded in place."""
    origin: SourceRef | None = None


class RiskEntry(EffectOptions):
    effect: Effect
    origin: SourceRef | None = None


class RiskTable(_Model):
    name: str
    entries: dict[Risk, RiskEntry] = _Field(default_factory=dict)
    origin: SourceRef | None = None


# ---------------------------------------------------------------------------------------------
# Skills, agents, workflows, tests


class Subagent(_Model):
    name: str
    tools: tuple[str, ...] = ()
    persona: str | None = None
    summary: str | None = None
    origin: SourceRef | None = None


class Skill(_Model):
    name: str
    summary: str | None = None
    use_when: str | None = None
    profile: str | None = None
    private_tools: tuple[str, ...] = ()
    subagents: dict[str, Subagent] = _Field(default_factory=dict)
    origin: SourceRef | None = None


class Agent(_Model):
    name: str
    persona: str | None = None
    summary: str | None = None
    surface: str | None = None
    policy: str | None = None
    delegates: tuple[str, ...] = ()
    skills: tuple[str, ...] = ()
    origin: SourceRef | None = None


class FailureAction(_Model):
    kind: t.Literal["retry", "compensate", "escalate"]
    count: int | None = None
    backoff_ms: int | None = None
    step: str | None = None
    approver: Approver | None = None


class Step(_Model):
    name: str
    kind: t.Literal["call", "delegate", "decide", "gate"]
    tool: str | None = None
    args: dict[str, Value] = _Field(default_factory=dict)
    agent: str | None = None
    goal: str | None = None
    context: tuple[Value, ...] = ()
    output: Schema | None = None
    question: str | None = None
    options: tuple[str, ...] = ()
    by: Approver | None = None
    timeout_ms: int | None = None
    default: str | None = None
    condition: Condition | None = None
    after: tuple[str, ...] = ()
    """Steps named in `after`."""
    depends_on: tuple[str, ...] = ()
    """Sorted: `after` plus the steps read in arguments, context, `when` and a gate condition."""
    when: Condition | None = None
    compensation: bool = False
    on_failure: tuple[FailureAction, ...] = ()
    origin: SourceRef | None = None


class Workflow(_Model):
    name: str
    summary: str | None = None
    agent: str | None = None
    policy: str | None = None
    input: Schema | None = None
    steps: tuple[Step, ...] = ()
    origin: SourceRef | None = None


class Expectation(_Model):
    effect: Effect
    approver: Approver | None = None
    rule: str | None = None
    reason: str | None = None


class SessionStep(_Model):
    """Something that happened in a test's session before the call under test: the user said
    `said`, or an earlier call of `tool` with `args` returned `result` (`ago_ms` before it)."""

    said: str | None = None
    tool: str | None = None
    args: dict[str, JsonValue] = _Field(default_factory=dict)
    result: JsonValue = None
    ago_ms: int | None = None


class SpecTest(_Model):
    name: str
    policy: str | None = None
    agent: str | None = None
    tool: str | None = None
    args: dict[str, JsonValue] = _Field(default_factory=dict)
    actor: dict[str, JsonValue] | None = None
    resource: dict[str, JsonValue] | None = None
    facts: dict[str, JsonValue] | None = None
    task: dict[str, JsonValue] | None = None
    env: dict[str, JsonValue] | None = None
    execution: dict[str, JsonValue] | None = None
    before: tuple[SessionStep, ...] = ()
    """The session before the call: user messages and earlier calls with their results."""
    expect: Expectation | None = None
    origin: SourceRef | None = None


# ---------------------------------------------------------------------------------------------
# The spec


class Spec(_Model):
    """A whole checked build. Module-scoped kinds are keyed `module.name` (`std.risk.defaults`);
    names of the root module (`root_module`) may also be referenced unqualified."""

    name: str
    root_module: str
    version: str | None = None
    summary: str | None = None
    tools: dict[str, Tool] = _Field(default_factory=dict)
    mcp_servers: dict[str, McpServer] = _Field(default_factory=dict)
    connections: dict[str, Connection] = _Field(default_factory=dict)
    runtimes: dict[str, Runtime] = _Field(default_factory=dict)
    facts: dict[str, Fact] = _Field(default_factory=dict)
    labels: dict[str, Label] = _Field(default_factory=dict)
    """Data labels the spec declares (besides `BUILTIN_LABELS`)."""
    surfaces: dict[str, Surface] = _Field(default_factory=dict)
    policies: dict[str, Policy] = _Field(default_factory=dict)
    risk_tables: dict[str, RiskTable] = _Field(default_factory=dict)
    skills: dict[str, Skill] = _Field(default_factory=dict)
    agents: dict[str, Agent] = _Field(default_factory=dict)
    workflows: dict[str, Workflow] = _Field(default_factory=dict)
    tests: dict[str, SpecTest] = _Field(default_factory=dict)

    def qualified(self, name: str) -> str:
        """`name` as a key: a root-module name written unqualified gets its module prefix."""
        return name if "." in name else f"{self.root_module}.{name}"

    def policy(self, name: str) -> Policy | None:
        return self.policies.get(name) or self.policies.get(self.qualified(name))

    def to_json(self) -> str:
        """Canonical JSON: sorted keys, no whitespace, UTF-8 text kept as is."""
        return json.dumps(
            self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )

    @classmethod
    def from_json(cls, text: str | bytes, seal: ModelSeal | None = None) -> Spec:
        """The spec saved as `text`, validated: an unknown field or a wrong type is an error.

        With the `seal` the build recorded of the file it wrote (a package's `load()` passes
        it), bytes that still have the sealed SHA-256, read by a runtime of the sealed IR, have
        the sealed content hash: `content_hash()` returns it without walking the model. Any
        other bytes (a stale or tampered file, another IR) hash as they are, so a package
        refuses them (its `load()` compares the hash with the one it was built with)."""
        build_models()
        with collection_paused():
            spec = cls.model_validate_json(text)
        if seal is not None:
            data = text.encode("utf-8") if isinstance(text, str) else text
            if seal.admits(data):
                _remember_hash(spec, seal.policy_version)
        return spec

    def content_hash(self) -> str:
        """SHA-256 of the canonical JSON without `origin`s: the policy version recorded in
        decision logs. Origins name files as the compiler was given them (relative to the
        working directory), so they would make the same spec hash differently per machine.
        A spec read through its build's seal has the hash the build computed."""
        known = _HASHES.get(id(self))
        if known is not None and known[0]() is self:
            return known[1]
        with collection_paused():
            text = json.dumps(
                without_origins(self), sort_keys=True, separators=(",", ":"), ensure_ascii=False
            )
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


class _Pauses:
    depth = 0
    was_enabled = False


_pausing = threading.Lock()


@contextmanager
def collection_paused() -> t.Iterator[None]:
    """No cyclic garbage collection inside: for building many acyclic objects at once (a
    spec's models, what a harness compiles from them), where the collector's passes over the
    growing heap cost more than the work. Nests, and from several threads: the collector is
    enabled again when the last pause ends, if it was enabled when the first began, and what
    the process holds then moves to the oldest generation (`gc.freeze` then `gc.unfreeze`;
    not when the process has frozen objects itself), examined at the next full collection
    rather than walked by the next young one.

    >>> import gc
    >>> with collection_paused():
    ...     gc.isenabled()
    False
    """
    with _pausing:
        _Pauses.depth += 1
        if _Pauses.depth == 1:
            _Pauses.was_enabled = gc.isenabled()
            gc.disable()
    try:
        yield
    finally:
        with _pausing:
            _Pauses.depth -= 1
            if _Pauses.depth == 0 and _Pauses.was_enabled:
                if gc.get_freeze_count() == 0:
                    # what was built is long-lived: straight into the oldest generation, so
                    # the next young collection does not walk all of it (unless the process
                    # froze objects of its own, which this must not thaw)
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()


@dataclass(frozen=True)
class ModelSeal:
    """What `harnessc build` records of the `model.json` it wrote, in the package's code: the
    SHA-256 of its bytes, the spec's content hash (`policy_version`) and the IR it was written
    in (`ir_fingerprint()`). `Spec.from_json(data, seal)` takes the sealed hash only for
    bytes it admits.

    >>> spec = Spec(name="demo", root_module="demo")
    >>> data = spec.to_json().encode()
    >>> seal = ModelSeal.of(data, spec.content_hash())
    >>> seal.admits(data), seal.admits(data + b" ")
    (True, False)
    >>> Spec.from_json(data, seal) == spec
    True
    """

    sha256: str
    policy_version: str
    ir: str

    @classmethod
    def of(cls, data: bytes, policy_version: str) -> ModelSeal:
        """The seal of `data`, the model file of a spec whose content hash is `policy_version`."""
        return cls(hashlib.sha256(data).hexdigest(), policy_version, ir_fingerprint())

    def admits(self, data: bytes) -> bool:
        """Whether `data` are the sealed bytes and this runtime reads the sealed IR."""
        return self.ir == ir_fingerprint() and hashlib.sha256(data).hexdigest() == self.sha256


_HASHES: dict[int, tuple[weakref.ref[Spec], str]] = {}
"""The content hash of each spec read through a seal, by the spec's id (the weak reference
tells a reused id from its spec; the entry goes with the spec)."""


def _remember_hash(spec: Spec, value: str) -> None:
    key = id(spec)
    _HASHES[key] = (weakref.ref(spec, lambda _: _HASHES.pop(key, None)), value)


_FINGERPRINT: list[str] = []


def ir_fingerprint() -> str:
    """A hash of the IR's shape (every model's fields, their types, defaults and whether they
    are required): a sealed content hash holds only for the IR that computed it, since the
    hash covers every field, defaults included."""
    if not _FINGERPRINT:
        build_models()
        shape = [
            (
                cls.__name__,
                [
                    (n, repr(f.annotation), str(f.discriminator), f.is_required(), repr(f.default))
                    for n, f in cls.__pydantic_fields__.items()
                ],
            )
            for cls in sorted(_Model.__subclasses__(), key=lambda c: c.__name__)
        ]
        text = json.dumps(shape, separators=(",", ":"))
        _FINGERPRINT.append(hashlib.sha256(text.encode("utf-8")).hexdigest()[:16])
    return _FINGERPRINT[0]


def without_origins(value: t.Any) -> t.Any:
    """`model_dump(mode="json")` of a model, leaving out every model's `origin` field (a value
    under a user-written key named `origin`, such as a test's argument, is kept). A walk in
    Python, needing no serializer built (the analysis keys its answers by it on every check)."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    names = _KEPT.get(kind)
    if names is None and isinstance(value, BaseModel):
        names = _KEPT[kind] = tuple(n for n in kind.__pydantic_fields__ if n != "origin")
    if names is not None:
        fields = value.__dict__
        return {name: without_origins(fields[name]) for name in names}
    if isinstance(value, dict):
        return {str(k): without_origins(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [without_origins(v) for v in value]
    return value


_SCALARS = frozenset({str, int, float, bool, type(None)})
_KEPT: dict[type, tuple[str, ...]] = {}
"""Each model class's fields but `origin`, in declaration order."""


_P = ParamSpec("_P")
_M = TypeVar("_M", bound=_Model)


def trusted(cls: Callable[_P, _M]) -> Callable[_P, _M]:
    """`cls(...)` without validation, for a caller that has checked every value (lowering):
    `trusted(Path)(root="args", parts=("x",))`. Typed as the class itself, so a type checker
    checks each argument. The result equals the validated one only if every value already has
    its field's type (a tuple for a tuple, a model for a model): the compiler's tests check that
    what it builds survives `Spec.from_json(spec.to_json())` unchanged, and `build` checks the
    model it writes.

    What pydantic's `model_construct` does, less what these models never need (aliases, extra
    fields, private attributes): it checks every field's alias on every call, and took longer
    than validating once a model was built, which a spec of thousands of tools felt."""
    return _CONSTRUCTORS.get(cls) or _constructor(t.cast("type[_M]", cls))


_CONSTRUCTORS: dict[t.Any, t.Any] = {}


def _constructor(cls: type[_M]) -> t.Callable[..., _M]:
    fields = cls.__pydantic_fields__
    defaults = {n: f.get_default() for n, f in fields.items() if not f.is_required()}
    factories = {n: f.default_factory for n, f in fields.items() if f.default_factory}
    names = tuple(fields)
    new, setattr_ = cls.__new__, object.__setattr__

    def construct(**values: t.Any) -> _M:
        made = new(cls)
        given = {n: values[n] if n in values else defaults[n] for n in names}
        for name, factory in factories.items():
            if name not in values:
                given[name] = factory()  # type: ignore[call-arg]
        setattr_(made, "__dict__", given)
        setattr_(made, "__pydantic_fields_set__", set(values))
        setattr_(made, "__pydantic_extra__", None)
        setattr_(made, "__pydantic_private__", None)
        return made

    _CONSTRUCTORS[cls] = construct
    return construct


_built = False
_building = threading.Lock()


def build_models() -> None:
    """Build every model's validator and serializer now, once, from whichever thread calls
    first (pydantic would build each on its first use; before pydantic 2.14 that was not
    thread-safe, and a first call would wait for it). In the order of definition: a model that
    names a later one (`Value`, `Condition`) builds it on the way."""
    global _built
    if _built:
        return
    with _building:
        if not _built:
            for cls in _models(_Model):
                cls.model_rebuild()
            _built = True


def _models(base: type[_Model]) -> list[type[_Model]]:
    """Every subclass of `base`, depth first in the order of definition."""
    out: list[type[_Model]] = []
    for cls in base.__subclasses__():
        out += [cls, *_models(cls)]
    return out
