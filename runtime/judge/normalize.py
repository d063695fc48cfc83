"""Normalize: a planner's tool call → a frozen `PendingCall`, or a structured `Refusal`.

Two parts, both built once per spec and cheap per call:

- `ToolNames` resolves what a model wrote (a tool id or a wire name) to a registered tool, and
  refuses every other way of reaching a tool: legacy ids (the replacement is named), old aliases,
  MCP tools by any id other than `mcp:<server>:tool:<name>`, `delegate_task` (a planner-only
  protocol, not a tool) and unknown names.
- `Validator` checks arguments against a tool's input schema: types, enums, `min`/`max`,
  `pattern`, required fields, unknown fields (refused), defaults applied, `path` values
  normalized (a `..` that leaves the root is refused). It is compiled into closures, so a call
  runs no schema interpretation.

`freeze` then computes the input hash (`canonical.input_hash`: tool id, version, arguments and
every execution parameter) and returns an immutable `PendingCall`. For a flat schema (scalar
fields, the usual tool) a generated function validates valid arguments and writes their
canonical JSON in one pass; everything else, and every refusal, takes the general path above, so
both give the same call. Nothing per call depends on the number of registered tools: names,
validators and decisions are dict lookups, and tools with identical schemas share one compiled
validator.

>>> from harnessc.runtime.model import Field, Schema, Type
>>> v = Validator(Schema(fields=(Field(name="n", type=Type(name="int"), default=3),)))
>>> v.validate({})
{'n': 3}
>>> v.errors({"n": "x", "m": 1})
[('$.n', 'expected an integer, got a string'), ('$.m', 'unknown field `m`')]
"""

from __future__ import annotations

import copy
import difflib
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from ..log.events import Secrets
from ..model.canonical import (
    MAX_SAFE_INTEGER,
    NO_EXECUTION,
    CanonicalError,
    Execution,
    canonical_json,
    execution_json,
    input_hash,
    input_hash_from_json,
    json_string,
)
from ..model.ir import (
    DELEGATE_TASK,
    DURATION_PATTERN,
    URL_PATTERN,
    Field,
    Schema,
    Spec,
    Tool,
    Type,
    derive_wire_name,
)
from ..model.semantics import normalize_path, pattern_search

__all__ = [
    "DELEGATE_TASK",
    "MAX_ARGS_BYTES",
    "MAX_ARGS_DEPTH",
    "MAX_ARGS_ITEMS",
    "MAX_ERRORS",
    "MAX_TIMEOUT_MS",
    "REFUSAL_CODES",
    "ExecutionProblem",
    "PendingCall",
    "Refusal",
    "ToolNames",
    "Validator",
    "check_execution",
    "describe_value",
    "freeze",
    "freeze_value",
    "is_text",
    "near_name",
    "normal_execution",
    "secret_call_id",
    "thaw",
]

MAX_ARGS_BYTES = 1024 * 1024
"""The limits of a call's arguments, each refused with `args-too-large` by `freeze` as soon as
it is crossed (`ArgsTooLarge`, raised by the validator's one walk before the value that
crosses it is visited, copied or written as JSON), so that no argument keeps normalize busy:
at most 1 MiB of text (the characters of every string value and map key, in all: a lower
bound of the canonical JSON's size), at most `MAX_ARGS_ITEMS` entries of lists and objects
in all, nested at most `MAX_ARGS_DEPTH` deep. Beside a spec's own limits (`dsl/files.py`);
docs/runtime.md, "Argument limits"."""
MAX_ARGS_ITEMS = 100_000
"""Entries of every list and object of the arguments, counted together (the top-level
arguments' fields among them)."""
MAX_ARGS_DEPTH = 64
"""Lists and objects nested in one another, the arguments' own object counted as the first."""

MAX_ERRORS = 100
"""Schema violations a refusal lists, and its `call.refused` event records: a call with a
million unknown fields is refused with the first hundred, not a 40 MB event."""

REFUSAL_CODES: dict[str, str] = {
    "unknown-tool": "no registered tool has this id or wire name",
    "legacy-tool": "the tool is retired; its replacement is named",
    "old-alias": "the name is an old or non-canonical alias of a tool; use its id",
    "mcp-id": "an MCP tool is reached only as `mcp:<server>:tool:<name>` (or its wire name)",
    "delegate-task": "`delegate_task` is a planner-only protocol, not a tool",
    "skill-private": "a skill's private tool runs only inside a session of that skill",
    "not-on-surface": "the tool is not on the calling agent's surface",
    "unavailable": "the tool is unavailable under the session's facts",
    "invalid-args": "the arguments do not match the tool's input schema",
    "args-too-large": "the arguments are past a limit of size, entries or nesting",
    "invalid-execution": "an execution parameter is malformed or has no canonical form",
    "delegation-refused": "this session may not delegate, or not to that agent",
    "unknown-skill": "no skill of that name is declared, or the agent may not use it",
}
"""Every refusal code, with what it means (docs/runtime.md lists them too)."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """A structured refusal: a stable `code`, a one-sentence `message`, and the `replacement`
    (a tool id, or the API to use) when there is one. `errors` lists the schema violations as
    `(json path, message)`, the first `MAX_ERRORS` of them (the message counts the rest);
    `path` is the first one's.

    >>> Refusal("legacy-tool", "`read_list` is retired", "read_open").replacement
    'read_open'
    """

    code: str
    message: str
    replacement: str | None = None
    tool: str | None = None
    """What the caller wrote."""
    tool_call_id: str | None = None
    path: str | None = None
    errors: tuple[tuple[str, str], ...] = ()

    def __bool__(self) -> bool:
        return False

    def to_dict(self) -> dict[str, Any]:
        """The refusal as JSON (a `call.refused` event records it): a lone surrogate the caller
        wrote is shown as its escape, `\\ud800`, since it is not text."""
        return {
            "code": self.code,
            "message": _text(self.message),
            "replacement": self.replacement,
            "tool": _text(None if self.tool is None else quoted(self.tool)),
            "tool_call_id": _text(None if self.tool_call_id is None else quoted(self.tool_call_id)),
            "path": _text(self.path),
            "errors": [[_text(p), _text(m)] for p, m in self.errors],
        }


def is_text(value: str) -> bool:
    """Whether a string is text that UTF-8 and JSON carry: it holds no lone surrogate.

    >>> is_text("café"), is_text("\\ud800")
    (True, False)
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _text(value: str | None) -> str | None:
    if value is None or is_text(value):
        return value
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


@dataclass(frozen=True, slots=True)
class PendingCall:
    """A frozen call: what policy judges, approvals bind and executors run.

    `args` are the normalized arguments (defaults applied, paths normalized), deeply immutable
    (mappings are read-only views, lists are tuples); `thaw(pending.args)` gives plain JSON.
    `input_hash` covers the tool id and version, the arguments and the execution parameters.
    """

    tool_id: str
    tool_version: int
    tool_call_id: str
    args: Mapping[str, Any]
    execution: Execution
    input_hash: str
    actor: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    session_id: str | None = None
    agent: str | None = None
    task_id: str | None = None
    skill: str | None = None
    wire_name: str | None = None
    """The name the model used, when it was the wire name."""
    args_json: str | None = field(default=None, compare=False, repr=False)
    """The canonical JSON of `args` when normalizing wrote it (for the input hash), so that
    recording the call does not write it again."""
    key: str = field(init=False, compare=False, repr=False)
    """The idempotency key: `tool_call_id` and `input_hash` (written once: a call looks its
    action, decision and result up by it a score of times)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.tool_call_id}:{self.input_hash}")

    def __bool__(self) -> bool:
        return True


_SCALARS = frozenset({str, int, float, bool, type(None)})


def freeze_value(value: Any) -> Any:
    """A deeply immutable copy: dicts become read-only mappings, lists tuples."""
    t = type(value)
    if t in _SCALARS:
        return value
    if t is dict or isinstance(value, Mapping):
        return MappingProxyType(
            {k: v if type(v) in _SCALARS else freeze_value(v) for k, v in value.items()}
        )
    if t is list or t is tuple:
        return tuple(v if type(v) in _SCALARS else freeze_value(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """Plain JSON data (dicts and lists) from a frozen value."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [thaw(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------------
# Names


def _fold(name: str) -> str:
    """A name with case and separators folded: `Change-Create`, `change.create` and
    `change_create` fold alike."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


class ToolNames:
    """Resolves a name a model wrote to a registered tool, or explains why it may not be used.

    `aliases` maps old names (kept by the application, e.g. from a rename) to tool ids; a call by
    an alias is refused with the id as replacement, never silently rerouted.
    """

    def __init__(self, spec: Spec, aliases: Mapping[str, str] | None = None) -> None:
        self.spec = spec
        self.tools = spec.tools
        self.by_wire: dict[str, str] = {t.wire_name: t.id for t in spec.tools.values()}
        self.aliases = dict(aliases or {})
        self._folded: dict[str, str] = {}
        for tool in spec.tools.values():
            for name in (tool.id, tool.wire_name, derive_wire_name(tool.id)):
                self._folded.setdefault(_fold(name), tool.id)
        self._mcp: dict[str, str] = {}
        for tool in spec.tools.values():
            if tool.kind == "mcp" and tool.id.count(":") >= 3:
                _, server, _, name = tool.id.split(":", 3)
                for variant in (
                    f"{server}.{name}",
                    f"{server}:{name}",
                    f"{server}/{name}",
                    f"{server}__{name}",
                    f"mcp:{server}:{name}",
                    f"mcp.{server}.{name}",
                    f"mcp_{server}_{name}",
                    f"mcp:{server}:tools:{name}",
                    name,
                ):
                    if variant not in spec.tools and variant not in self.by_wire:
                        self._mcp.setdefault(variant, tool.id)

    def resolve(self, name: str) -> tuple[Tool | None, Refusal | None]:
        """The tool a name reaches (by id or wire name), else a refusal."""
        tool = self.tools.get(name)
        if tool is None:
            tool_id = self.by_wire.get(name)
            if tool_id is not None:
                tool = self.tools[tool_id]
        if tool is not None:
            if tool.kind == "legacy":
                return None, Refusal(
                    "legacy-tool",
                    f"`{tool.id}` is a retired tool"
                    + (f"; use `{tool.replaced_by}`" if tool.replaced_by else ""),
                    tool.replaced_by,
                    name,
                )
            return tool, None
        if _fold(name) == DELEGATE_TASK:
            return None, Refusal(
                "delegate-task",
                "`delegate_task` is not a tool: delegation is a planner-only protocol",
                "Session.delegate(goal, agent=...)",
                name,
            )
        if name in self.aliases:
            target = self.aliases[name]
            return None, Refusal(
                "old-alias",
                f"`{quoted(name)}` is an old name of `{target}`; call it by its id",
                target,
                name,
            )
        mcp = self._mcp.get(name)
        if mcp is not None:
            return None, Refusal(
                "mcp-id",
                f"an MCP tool is called by its id `{mcp}`, not `{quoted(name)}`",
                mcp,
                name,
            )
        folded = self._folded.get(_fold(name))
        if folded is not None:
            return None, Refusal(
                "old-alias",
                f"`{quoted(name)}` is not the id of `{folded}`; call it by its id",
                folded,
                name,
            )
        near = near_name(name, self.tools)
        hint = f"; did you mean `{near}`?" if near else ""
        return None, Refusal("unknown-tool", f"unknown tool `{quoted(name)}`{hint}", None, name)


QUOTE_CAP = 256
"""The most characters of a name a caller wrote (tool name, `tool_call_id`) a refusal's message
and event quote; a longer one (a 20 MB name was written twice) by its two ends and length."""


def quoted(text: str) -> str:
    """`text` as a refusal quotes it: whole up to `QUOTE_CAP` characters, else its two ends
    around `…` and its length.

    >>> quoted("deploy"), quoted("a" + "x" * 10**6 + "z")[-28:]
    ('deploy', 'xxxxz (1,000,002 characters)')
    """
    if len(text) <= QUOTE_CAP:
        return text
    half = QUOTE_CAP // 2
    return f"{text[:half]}…{text[-half:]} ({len(text):,} characters)"


def near_name(name: str, names: Iterable[str]) -> str | None:
    """The one of `names` most like `name`, a name that is none of them (difflib's ratio at
    least 0.8), for a refusal's "did you mean". Only names whose length allows that ratio are
    compared: the ratio is at most 2·min/(sum of the lengths), and difflib would index every
    character of the name an agent sent, megabytes included, before it looked.

    >>> near_name("deploi", ["deploy", "rollback"]), near_name("x" * 10**6, ["deploy"])
    ('deploy', None)
    """
    fits = [n for n in names if 2 * min(len(n), len(name)) >= 0.8 * (len(n) + len(name))]
    near = difflib.get_close_matches(name, fits, n=1, cutoff=0.8) if fits else []
    return near[0] if near else None


# ---------------------------------------------------------------------------------------------
# Validation

_Check = Callable[[Any, str, "_Budget"], Any]
_MISSING = object()
_URL = re.compile(URL_PATTERN)
_DURATION = re.compile(DURATION_PATTERN)


def describe_value(value: Any) -> str:
    """A value's kind as a message names it (`a number`, `null`), never a Python type's name
    unless it is not JSON."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return f"a value of type `{type(value).__name__}`"


def _bounds(fld: Field | None, measure: str) -> Callable[[Any, str, _Budget], None]:
    lo = fld.min if fld is not None else None
    hi = fld.max if fld is not None else None
    if lo is None and hi is None:
        return lambda v, p, e: None

    def check(v: Any, p: str, errors: _Budget) -> None:
        n = len(v) if measure != "value" else v
        what = {"length": "a length", "items": "a count of items", "value": "a value"}.get(
            measure, "a size"
        )
        shown = n if measure == "value" else f"{n}"
        if lo is not None and n < lo:
            errors.append((p, f"{what} of at least {_num(lo)} is required, got {shown}"))
        elif hi is not None and n > hi:
            errors.append((p, f"{what} of at most {_num(hi)} is allowed, got {shown}"))

    return check


def _num(x: float) -> str:
    return str(int(x)) if isinstance(x, float) and x.is_integer() else str(x)


def _compile_type(type_: Type, fld: Field | None, depth: int, counted: bool = False) -> _Check:
    """A check for one value of `type_` (with the field's constraints); returns the normalized
    value, appending `(path, message)` to `errors` on a violation. `depth`: the nesting of the
    value (the arguments' object is 1), past `MAX_ARGS_DEPTH` a list or object is refused.
    `counted`: a string whose characters, or a list or object whose entries, its list or map
    took from the budget already."""
    check = _compile_value(type_, fld, depth, counted)
    if depth <= MAX_ARGS_DEPTH or type_.name not in ("list", "map", "object"):
        return check

    def too_deep(v: Any, p: str, errors: _Budget) -> Any:
        if errors.items <= MAX_ARGS_ITEMS and isinstance(v, Mapping | list | tuple):
            raise ArgsTooLarge(p, f"lists and objects nested more than {MAX_ARGS_DEPTH} deep")
        return check(v, p, errors)

    return too_deep


def _compile_value(type_: Type, fld: Field | None, depth: int, counted: bool) -> _Check:
    name = type_.name
    shown = fld.pattern if fld is not None else None
    search = pattern_search(shown) if shown else None
    if name in ("string", "path", "url", "duration"):
        bounds = _bounds(fld, "length")

        def check_str(v: Any, p: str, errors: _Budget) -> Any:
            if type(v) is not str:
                errors.append((p, f"expected a string, got {describe_value(v)}"))
                return v
            if not counted:
                left = errors.size = errors.size - len(v)
                if left < 0:
                    _too_long(p)  # before a pattern or a path reads it
            if name == "path":
                fixed = normalize_path(v)
                if fixed is None:
                    errors.append((p, f"the path `{v}` leaves its root"))
                    return v
                v = fixed
            elif name == "url" and not _URL.match(v):
                errors.append((p, f"`{v}` is not a URL"))
                return v
            elif name == "duration" and not _DURATION.match(v):
                errors.append((p, f"`{v}` is not a duration such as `30s` or `1h30m`"))
                return v
            bounds(v, p, errors)
            if search is not None and not search(v):
                errors.append((p, f"`{v}` does not match the pattern `{shown}`"))
            return v

        return check_str
    if name in ("int", "float"):
        bounds = _bounds(fld, "value")
        integer = name == "int"

        def check_num(v: Any, p: str, errors: _Budget) -> Any:
            t = type(v)
            if t is int or (t is float and not integer):
                pass
            elif t is float and integer and v.is_integer():
                v = int(v)
            else:
                wanted = "an integer" if integer else "a number"
                errors.append((p, f"expected {wanted}, got {describe_value(v)}"))
                return v
            if t is float and not math.isfinite(v):
                errors.append((p, "expected a finite number"))
                return v
            if type(v) is int and not -MAX_SAFE_INTEGER <= v <= MAX_SAFE_INTEGER:
                errors.append((p, "an integer beyond ±(2**53 - 1) must be sent as a string"))
                return v
            bounds(v, p, errors)
            return v

        return check_num
    if name == "bool":

        def check_bool(v: Any, p: str, errors: _Budget) -> Any:
            if type(v) is not bool:
                errors.append((p, f"expected true or false, got {describe_value(v)}"))
            return v

        return check_bool
    if name == "enum":
        values = frozenset(type_.values)
        shown = ", ".join(f"`{x}`" for x in type_.values)

        def check_enum(v: Any, p: str, errors: _Budget) -> Any:
            if type(v) is not str or v not in values:
                got = f"`{v}`" if type(v) is str else describe_value(v)
                errors.append((p, f"expected one of {shown}, got {got}"))
            return v

        return check_enum
    if name == "list":
        assert type_.item is not None
        texts = type_.item.name in _TEXT_KINDS
        nested = type_.item.name in _NESTED_KINDS
        item = _compile_type(type_.item, None, depth + 1, texts or nested)
        bounds = _bounds(fld, "items")

        def check_list(v: Any, p: str, errors: _Budget) -> Any:
            if not isinstance(v, list | tuple):
                errors.append((p, f"expected a list, got {describe_value(v)}"))
                return v
            if not counted:
                left = errors.items = errors.items - len(v)
                if left < 0:
                    _too_many(p)  # before its entries are visited
            if texts:
                try:
                    text = sum(map(len, v))  # the strings' characters, counted in C
                except TypeError:
                    text = _text_size(v)
                left = errors.size = errors.size - text
                if left < 0:
                    _too_long(p)
            elif nested:
                # the entries of its lists and objects, in C, before any of them is visited
                left = errors.items = errors.items - _entries(v)
                if left < 0:
                    _too_many(p)
            out = [item(x, f"{p}[{i}]", errors) for i, x in enumerate(v)]
            bounds(out, p, errors)
            return out

        return check_list
    if name == "map":
        assert type_.item is not None
        texts = type_.item.name in _TEXT_KINDS
        nested = type_.item.name in _NESTED_KINDS
        item = _compile_type(type_.item, None, depth + 1, texts or nested)
        bounds = _bounds(fld, "items")

        def check_map(v: Any, p: str, errors: _Budget) -> Any:
            if not isinstance(v, Mapping):
                errors.append((p, f"expected an object, got {describe_value(v)}"))
                return v
            left = errors.items = errors.items - len(v) * (not counted)
            if nested:
                left = errors.items = left - _entries(v.values())
            if left < 0:
                _too_many(p)
            try:
                text = sum(map(len, v)) + (sum(map(len, v.values())) if texts else 0)
            except TypeError:
                text = _text_size(v) + (_text_size(v.values()) if texts else 0)
            left = errors.size = errors.size - text
            if left < 0:
                _too_long(p)
            out = {}
            for k, x in v.items():
                if type(k) is not str:
                    errors.append((p, f"key `{k!r}` is not a string"))
                    continue
                out[k] = item(x, f"{p}.{k}", errors)
            bounds(out, p, errors)
            return out

        return check_map
    if name == "any":
        return _check_any
    if name == "union":
        return _compile_union(type_, depth, counted)
    return _compile_fields(type_.fields, depth, counted, type_.open)


def _check_any(v: Any, p: str, errors: _Budget) -> Any:
    """`any`: every JSON value (its lists and objects counted against the limits)."""
    stack = [v]
    while stack:
        x = stack.pop()
        if x is None or type(x) in (str, int, float, bool):
            if type(x) is float and not math.isfinite(x):
                errors.append((p, "expected a finite number"))
            continue
        if isinstance(x, Mapping):
            left = errors.items = errors.items - len(x)
            if left < 0:
                _too_many(p)
            if any(type(k) is not str for k in x):
                errors.append((p, "an object's keys are strings"))
            stack.extend(x.values())
        elif isinstance(x, list | tuple):
            left = errors.items = errors.items - len(x)
            if left < 0:
                _too_many(p)
            stack.extend(x)
        else:
            errors.append((p, f"expected a JSON value, got {describe_value(x)}"))
    return v


def _compile_union(type_: Type, depth: int, counted: bool) -> _Check:
    """`A | B`: the first alternative the value matches, normalized by it; a value that matches
    none is refused with what each alternative expected."""
    checks = [_compile_type(o, None, depth, counted) for o in type_.options]
    shown = " or ".join(_type_words(o) for o in type_.options)

    def check_union(v: Any, p: str, errors: _Budget) -> Any:
        for check in checks:
            trial = _Budget(errors.items, errors.size)
            out = check(v, p, trial)
            if not trial:
                errors.items, errors.size = trial.items, trial.size
                return out
        errors.append((p, f"expected {shown}, got {describe_value(v)}"))
        return v

    return check_union


def _type_words(type_: Type) -> str:
    """How a refusal names a type: `a string`, `a list`, `an object`."""
    words = {
        "int": "an integer",
        "float": "a number",
        "bool": "true or false",
        "enum": "one of " + ", ".join(f"`{x}`" for x in type_.values),
        "list": "a list",
        "map": "an object",
        "object": "an object",
        "any": "a value",
    }
    return words.get(type_.name, f"a {type_.name}" if type_.name != "url" else "a URL")


def _compile_fields(
    fields: tuple[Field, ...], depth: int = 1, counted: bool = False, open: bool = False
) -> _Check:
    """A record's check; `counted`: its list or map took its entries from the budget; `open`:
    fields it does not list are kept as they are (any JSON value)."""
    plan: list[tuple[str, _Check, bool, Any, bool]] = []
    for f in fields:
        has_default = f.default is not None
        check = _compile_type(f.type, f, depth + 1)
        plan.append((f.name, check, f.type.optional, f.default, has_default))
    known = frozenset(f.name for f in fields)

    def check_record(v: Any, p: str, errors: _Budget) -> Any:
        if not isinstance(v, Mapping):
            errors.append((p, f"expected an object, got {describe_value(v)}"))
            return v
        if not counted:
            left = errors.items = errors.items - len(v)
            if left < 0:
                _too_many(p)  # a million unknown fields are not listed
        out: dict[str, Any] = {}
        seen = 0
        for name, check, optional, default, has_default in plan:
            x = v.get(name, _MISSING)
            if x is not _MISSING:
                seen += 1
            if x is _MISSING or x is None:
                if has_default:
                    out[name] = (
                        copy.deepcopy(default) if isinstance(default, list | dict) else default
                    )
                elif not optional:
                    errors.append((f"{p}.{name}", f"the required field `{name}` is missing"))
                continue  # INVARIANT: an optional value given as null is absent
            out[name] = check(x, f"{p}.{name}", errors)
        if seen != len(v):
            for k in v:
                if k in known:
                    continue
                if open:
                    out[k] = _check_any(v[k], f"{p}.{k}", errors)
                else:
                    errors.append((f"{p}.{k}", f"unknown field `{k}`"))
        return out

    return check_record


_FAST_KINDS = frozenset({"string", "path", "url", "duration", "int", "bool", "enum"})
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_Fast = Callable[[dict[str, Any]], "tuple[dict[str, Any], str] | None"]


def _compile_fast(fields: tuple[Field, ...]) -> _Fast | None:
    """The accepting path of a flat schema (scalar fields with identifier names), generated as
    one straight-line function: the normalized arguments and their canonical JSON in one pass,
    or None for anything it does not accept outright (an invalid value, a float to turn into an
    integer…), which `Validator.run` then judges and explains. None when the schema is not flat.

    Spec text never becomes code: names, keys, bounds, patterns and defaults are constants of
    the function's namespace (`N0`, `K0`…), the source holds only names made here."""
    names = [f.name for f in fields]
    if len(set(names)) != len(names):
        return None
    consts: dict[str, Any] = {
        "__builtins__": {},
        "_M": _MISSING,
        "_SAFE": MAX_SAFE_INTEGER,
        "_MAXB": MAX_ARGS_BYTES,
        "_norm": normalize_path,
        "_url": _URL.match,
        "_duration": _DURATION.match,
        "_js": json_string,
        "_ir": int.__repr__,
        "str": str,
        "int": int,
        "len": len,
    }
    body = ["g = v.get", "out = {}", "s = 0"]
    texts: list[str] = []
    for i, f in enumerate(fields):
        kind = f.type.name
        if kind not in _FAST_KINDS or _IDENT.fullmatch(f.name) is None:
            return None
        key = "," + json_string(f.name) + ":"  # each member brings its comma, cut once at the end
        consts[f"N{i}"], consts[f"K{i}"] = f.name, key
        body += [
            f"x = g(N{i}, _M)",
            "if x is _M or x is None:",
            "    if x is None:",
            "        s += 1",
        ]
        if f.default is not None:
            if type(f.default) not in (str, int, float, bool):
                return None  # a list or object default is copied per call: the general path
            try:
                consts[f"T{i}"] = key + canonical_json(f.default)
            except CanonicalError:
                return None
            consts[f"D{i}"] = f.default
            body += [f"    out[N{i}] = D{i}", f"    t{i} = T{i}"]
        elif f.type.optional:
            body.append(f"    t{i} = ''")  # INVARIANT: an optional value given as null is absent
        else:
            body.append("    return None")
        body += ["else:", "    s += 1"]
        check: list[str] = []
        lo, hi = f.min, f.max
        if kind == "enum":
            consts[f"E{i}"] = {v: key + json_string(v) for v in f.type.values}
            check += [
                "if x.__class__ is not str:",
                "    return None",
                f"t{i} = E{i}.get(x)",
                f"if t{i} is None:",
                "    return None",
            ]
        elif kind == "bool":
            consts[f"Y{i}"], consts[f"F{i}"] = key + "true", key + "false"
            check += [
                "if x is True:",
                f"    t{i} = Y{i}",
                "elif x is False:",
                f"    t{i} = F{i}",
                "else:",
                "    return None",
            ]
        elif kind == "int":
            check += ["if x.__class__ is not int or not -_SAFE <= x <= _SAFE:", "    return None"]
            check += _bound_lines(i, "x", lo, hi, consts)
            check.append(f"t{i} = K{i} + _ir(x)")
        else:
            # a string past the arguments' limit is refused by `freeze`'s walk, never scanned
            check += ["if x.__class__ is not str or len(x) > _MAXB:", "    return None"]
            if kind == "path":
                check += ["x = _norm(x)", "if x is None:", "    return None"]
            elif kind in ("url", "duration"):
                check += [f"if not _{kind}(x):", "    return None"]
            check += _bound_lines(i, "len(x)", lo, hi, consts)
            if f.pattern:
                consts[f"P{i}"] = pattern_search(f.pattern)
                check += [f"if not P{i}(x):", "    return None"]
            check.append(f"t{i} = K{i} + _js(x)")
        body += ["    " + line for line in check]
        body.append(f"    out[N{i}] = x")
        texts.append(f"t{i}")
    # INVARIANT: identifier names sort alike by code point and by UTF-16 code unit
    ordered = [texts[names.index(n)] for n in sorted(names)]
    body += ["if s != len(v):", "    return None"]  # an unknown field
    if ordered:
        body.append("return out, '{' + (" + " + ".join(ordered) + ")[1:] + '}'")
    else:
        body.append("return out, '{}'")
    source = "def accept(v):\n    " + "\n    ".join(body) + "\n"
    exec(compile(source, "<harness schema>", "exec"), consts)
    return consts["accept"]  # type: ignore[no-any-return]


def _bound_lines(
    i: int, measure: str, lo: float | None, hi: float | None, consts: dict[str, Any]
) -> list[str]:
    lines = []
    if lo is not None:
        consts[f"L{i}"] = lo
        lines += [f"if {measure} < L{i}:", "    return None"]
    if hi is not None:
        consts[f"H{i}"] = hi
        lines += [f"if {measure} > H{i}:", "    return None"]
    return lines


_COMPILED: dict[tuple[Any, ...], tuple[Any, ...]] = {}
_COMPILED_LIMIT = 4096
_SCALAR_TYPES = frozenset({"string", "path", "url", "duration", "int", "float", "bool", "enum"})


def _shape(fields: tuple[Field, ...]) -> tuple[Any, ...]:
    """What a compiled check depends on (names, types, constraints, defaults), not where the
    schema was written."""
    return tuple(
        (f.name, _type_shape(f.type), f.min, f.max, f.pattern, repr(f.default)) for f in fields
    )


def _type_shape(type_: Type) -> tuple[Any, ...]:
    item = _type_shape(type_.item) if type_.item is not None else None
    options = tuple(_type_shape(o) for o in type_.options)
    shape = (type_.name, item, type_.values, _shape(type_.fields), type_.optional)
    return (*shape, type_.open, options) if type_.open or options else shape


def _scalar_field(f: Field) -> bool:
    return f.type.name in _SCALAR_TYPES and type(f.default) in (str, int, float, bool, type(None))


class Validator:
    """A schema compiled once into a check: `validate(args)` returns the normalized arguments or
    raises `ValidationError`; `errors(args)` lists every violation with its JSON path.

    Identical schemas (most tools of a large generated registry) share one compiled check."""

    __slots__ = ("_check", "_fast", "flat", "plain", "schema")

    def __init__(self, schema: Schema | None) -> None:
        self.schema = schema
        fields = schema.fields if schema is not None else ()
        shape = schema.shape if schema is not None else None
        open_ = schema is not None and schema.open
        key: tuple[Any, ...] = _shape(fields)
        if shape is not None or open_:
            key = ("shape", _type_shape(shape) if shape is not None else None, open_, key)
        compiled = _COMPILED.get(key)
        if compiled is None and shape is not None:
            # an output written as a type (`output list<{ … }>`): no flat fast path
            compiled = (_compile_type(shape, None, 1), None, False, False)
        elif compiled is None:
            compiled = (
                _compile_fields(fields, open=open_),
                None if open_ else _compile_fast(fields),
                not open_ and all(_scalar_field(f) for f in fields),
                not open_ and all(_plain_type(f.type, f.name) for f in fields),
            )
            if len(_COMPILED) >= _COMPILED_LIMIT:
                _COMPILED.clear()
            _COMPILED[key] = compiled
        self._check, self._fast, self.flat, self.plain = compiled
        """`flat`: valid arguments hold only scalars, so freezing them copies nothing.
        `plain`: valid arguments are always written canonically by the C JSON encoder (no
        float, no map, ASCII names): the input hash needs no scan of the values."""

    def canonical(self, args: Any) -> tuple[dict[str, Any], str] | None:
        """The normalized arguments and their canonical JSON when the schema is flat and the
        arguments are valid as given; None otherwise (then `run` judges and explains).

        >>> from harnessc.runtime.model import Field, Schema, Type
        >>> v = Validator(Schema(fields=(Field(name="n", type=Type(name="int"), default=3),)))
        >>> v.canonical({})
        ({'n': 3}, '{"n":3}')
        """
        fast = self._fast
        if fast is None or args.__class__ is not dict:
            return None
        return fast(args)  # type: ignore[no-any-return]

    def run(
        self, args: Any, *, limits: bool = False
    ) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        """The normalized value and its violations. `limits`: a call's arguments, held to
        `MAX_ARGS_BYTES`, `MAX_ARGS_ITEMS` and `MAX_ARGS_DEPTH`; `ArgsTooLarge` is raised at
        the first limit crossed, before the value it crosses is visited."""
        errors = _Budget() if limits else _Budget(_UNLIMITED, _UNLIMITED)
        out = self._check(args, "$", errors)
        return out, errors

    def validate(self, args: Any) -> dict[str, Any]:
        out, errors = self.run(args)
        if errors:
            raise ValidationError(errors)
        return out

    def errors(self, args: Any) -> list[tuple[str, str]]:
        return self.run(args)[1]


_NO_EXECUTION = NO_EXECUTION
_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _plain_type(type_: Type, name: str) -> bool:
    if not name.isascii() or type_.name in ("float", "map", "any", "union") or type_.open:
        return False
    if type_.name == "list" and type_.item is not None:
        return _plain_type(type_.item, "item")
    if type_.name == "object":
        return all(_plain_type(f.type, f.name) for f in type_.fields)
    return True


class ValidationError(ValueError):
    """Arguments that do not match a schema; `errors` lists `(json path, message)`."""

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        self.errors = errors
        path, message = errors[0]
        super().__init__(f"{message} at `{path}`")


class ArgsTooLarge(Exception):
    """A call's arguments past one of their limits (`MAX_ARGS_BYTES`…): what was crossed, and
    the top-level argument it was crossed in (`$.items`; `$` at the top). A path never goes
    deeper: below the declared fields a key is data, and may be a secret."""

    def __init__(self, path: str, problem: str) -> None:
        cut = min((i for i in (path.find(".", 2), path.find("[", 2)) if i > 0), default=-1)
        self.path = path if cut < 0 else path[:cut]
        self.problem = problem
        super().__init__(problem)


_UNLIMITED = 2**62


class _Budget(list[tuple[str, str]]):
    """The violations of one validation, and what is left of the arguments' limits: entries
    of lists and objects, characters of strings (values and map keys)."""

    __slots__ = ("items", "size")

    def __init__(self, items: int = MAX_ARGS_ITEMS, size: int = MAX_ARGS_BYTES) -> None:
        self.items = items
        self.size = size


_TEXT_KINDS = frozenset({"string", "path", "url", "duration"})
_NESTED_KINDS = frozenset({"list", "map", "object"})


def _entries(values: Iterable[Any]) -> int:
    """The entries of the lists and objects among `values`, counted in C when all are."""
    try:
        return sum(map(len, values))
    except TypeError:  # not all are: the others are refused as they are visited
        return sum(len(x) for x in values if isinstance(x, Mapping | list | tuple))


def _text_size(values: Iterable[Any]) -> int:
    """The characters of the strings among `values`, counted in C when all are strings."""
    try:
        return sum(map(len, values))
    except TypeError:  # not all text: the others are refused as they are visited
        return sum(len(x) for x in values if type(x) is str)


def _too_many(p: str) -> None:
    raise ArgsTooLarge(p, f"more than {MAX_ARGS_ITEMS:,} entries of lists and objects in all")


def _too_long(p: str) -> None:
    raise ArgsTooLarge(p, f"more than {MAX_ARGS_BYTES:,} characters of text in all")


MAX_TIMEOUT_MS = 2**31 - 1
"""The longest timeout a call may ask for (about 24.8 days); the tool's own still caps it."""


@dataclass(frozen=True, slots=True)
class ExecutionProblem:
    """Why execution parameters are refused: a message and the parameter's JSON path."""

    message: str
    path: str


def check_execution(execution: Any) -> ExecutionProblem | None:
    """The first thing wrong with a call's execution parameters, or None.

    `command` is a non-empty string or a non-empty list of strings; `env` maps non-empty names
    without `=` to strings; `timeout_ms` is an integer from 1 to `MAX_TIMEOUT_MS`; `cwd` and
    `target` are non-empty strings; no string holds a NUL byte (no operating system passes
    one on). A `cwd` whose `..` climbs above its start is refused: a relative `cwd` is relative
    to the directory the executor works in and never leaves it, an absolute one never climbs
    above `/` (`normal_execution` resolves the rest, as for a `path` argument).

    >>> check_execution(Execution(timeout_ms=0)).message
    'the timeout must be at least 1 ms, not 0'
    >>> check_execution(Execution(cwd="/repo/src")) is None
    True
    """
    if not isinstance(execution, Execution):
        return ExecutionProblem(
            f"execution parameters are given as `Execution(...)`, not {describe_value(execution)}",
            "$.execution",
        )
    command = execution.command
    if command is not None:
        if isinstance(command, str):
            parts: tuple[Any, ...] = (command,)
        elif isinstance(command, list | tuple) and command:
            parts = tuple(command)
        else:
            return ExecutionProblem(
                f"a command is a non-empty string or list of strings, not {describe_value(command)}"
                if not isinstance(command, list | tuple)
                else "a command list needs at least the program",
                "$.execution.command",
            )
        for i, part in enumerate(parts):
            where = "$.execution.command" + (f"[{i}]" if not isinstance(command, str) else "")
            problem = _text_problem(part, "a command", where)
            if problem is not None:
                return problem
    if execution.cwd is not None:
        problem = _text_problem(execution.cwd, "the cwd", "$.execution.cwd")
        if problem is not None:
            return problem
        if normalize_path(execution.cwd) is None:
            return ExecutionProblem(
                f"the cwd `{execution.cwd}` climbs above its start with `..`", "$.execution.cwd"
            )
    env = execution.env
    if env is not None:
        if not isinstance(env, Mapping):
            return ExecutionProblem(
                f"env maps names to strings, not {describe_value(env)}", "$.execution.env"
            )
        for key, value in env.items():
            if not isinstance(key, str) or not key or "=" in key or "\0" in key:
                shown = f"`{key}`" if isinstance(key, str) else describe_value(key)
                return ExecutionProblem(
                    f"an environment variable's name is a non-empty string without `=` or a "
                    f"NUL byte, not {shown}",
                    "$.execution.env",
                )
            if not isinstance(value, str):
                # the value may be a credential: its name is shown, never the value
                return ExecutionProblem(
                    f"the environment variable `{key}` needs a string value, not "
                    + describe_value(value),
                    f"$.execution.env.{key}",
                )
            if "\0" in value:
                return ExecutionProblem(
                    f"the environment variable `{key}` holds a NUL byte", f"$.execution.env.{key}"
                )
    timeout = execution.timeout_ms
    if timeout is not None:
        if type(timeout) is not int:
            return ExecutionProblem(
                f"the timeout is a whole number of milliseconds, not {describe_value(timeout)}",
                "$.execution.timeout_ms",
            )
        if timeout < 1:
            return ExecutionProblem(
                f"the timeout must be at least 1 ms, not {timeout}", "$.execution.timeout_ms"
            )
        if timeout > MAX_TIMEOUT_MS:
            return ExecutionProblem(
                f"the timeout must be at most {MAX_TIMEOUT_MS} ms, not {timeout}",
                "$.execution.timeout_ms",
            )
    if execution.target is not None:
        return _text_problem(execution.target, "the target", "$.execution.target")
    return None


def _text_problem(value: Any, what: str, path: str) -> ExecutionProblem | None:
    if not isinstance(value, str):
        return ExecutionProblem(f"{what} is a string, not {describe_value(value)}", path)
    if not value:
        return ExecutionProblem(f"{what} is empty", path)
    if "\0" in value:
        return ExecutionProblem(f"{what} holds a NUL byte", path)
    return None


def _holds_secret(call_id: str, secrets: Secrets) -> bool:
    """Whether a call id holds one of the call's secret values (as scrubbing finds them)."""
    return bool(secrets) and secrets.text(call_id) != call_id


def secret_call_id(pending: PendingCall, secrets: Secrets) -> Refusal | None:
    """The refusal of a call whose `tool_call_id` holds one of its secret values (`secrets`:
    its secret arguments' and `env` values): the id is recorded as written, in every event of
    the call, so it never carries a secret (nor does the refusal show it). None for any other."""
    if not _holds_secret(pending.tool_call_id, secrets):
        return None
    return Refusal(
        "invalid-args",
        f"the `tool_call_id` of this call to `{pending.tool_id}` holds the value of one of its "
        "secret arguments or `env` variables: a call id is recorded as written, so it never "
        "carries a secret (the id is not shown)",
        None,
        pending.wire_name or pending.tool_id,
        None,
        "$.tool_call_id",
    )


def normal_execution(execution: Execution) -> Execution:
    """Execution parameters `check_execution` accepted, with the cwd normalized (`.` and `..`
    resolved, as for a `path` argument) and a command list as a tuple, so the executor runs in
    the directory policy judged."""
    cwd = normalize_path(execution.cwd) if execution.cwd is not None else None
    command = execution.command
    if isinstance(command, list):
        command = tuple(command)
    if cwd == execution.cwd and command is execution.command:
        return execution
    return replace(execution, cwd=cwd, command=command)


def freeze(
    tool: Tool,
    validator: Validator,
    tool_call_id: str,
    args: Any,
    execution: Execution | None = None,
    *,
    name: str | None = None,
    actor: Mapping[str, Any] | None = None,
    session_id: str | None = None,
    agent: str | None = None,
    task_id: str | None = None,
    skill: str | None = None,
) -> PendingCall | Refusal:
    """Validate the arguments and freeze the call (no name or surface checks: see `ToolNames`
    and `Session.normalize`)."""
    if args is None:
        args = {}
    # the common case: valid arguments of a flat schema, normalized and written as canonical
    # JSON in one pass; anything else (and every refusal) takes the general path
    found = validator.canonical(args)
    if found is not None and len(found[1]) > MAX_ARGS_BYTES:
        found = None  # past the size limit: the walk below says where
    if found is None:
        try:
            normalized, errors = validator.run(args, limits=True)
        except ArgsTooLarge as crossed:
            return Refusal(
                "args-too-large",
                f"the arguments for `{tool.id}` are too large: {crossed.problem}"
                + ("" if crossed.path == "$" else f" (in `{crossed.path}`)"),
                None,
                name or tool.id,
                tool_call_id,
                crossed.path,
            )
        if errors:
            # a message may quote the value it refuses, and a path an unknown key: a secret
            # value is scrubbed from both
            secrets = Secrets.of(tool, args)
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            errors = [(secrets.text(p), secrets.text(m)) for p, m in errors[:MAX_ERRORS]]
            path, message = errors[0]
            return Refusal(
                "invalid-args",
                f"invalid arguments for `{tool.id}`: {message} at `{path}`{more}",
                None,
                name or tool.id,
                None if _holds_secret(tool_call_id, secrets) else tool_call_id,
                path,
                tuple(errors),
            )
    else:
        normalized = found[0]
    if execution is None:
        execution = _NO_EXECUTION
    elif execution is not _NO_EXECUTION:
        problem = check_execution(execution)
        if problem is not None:
            return Refusal(
                "invalid-execution",
                f"invalid execution parameters for `{tool.id}`: {problem.message}",
                None,
                name or tool.id,
                tool_call_id,
                problem.path,
            )
        execution = normal_execution(execution)
    args_json = None
    try:
        if found is not None:
            try:
                digest = input_hash_from_json(
                    tool.id,
                    tool.version,
                    found[1],
                    "{}" if execution is _NO_EXECUTION else execution_json(execution),
                )
                args_json = found[1]
            except CanonicalError:  # a lone surrogate: the reference names where
                digest = input_hash(tool.id, tool.version, normalized, execution)
        else:
            digest = input_hash(tool.id, tool.version, normalized, execution)
    except CanonicalError as err:
        return Refusal(
            "invalid-execution",
            f"the call to `{tool.id}` has no canonical form: {err.reason}",
            None,
            name or tool.id,
            tool_call_id,
            err.location,
        )
    if actor is None:
        actor = _EMPTY
    elif type(actor) is not MappingProxyType:
        actor = MappingProxyType(dict(actor))
    return PendingCall(
        tool.id,
        tool.version,
        tool_call_id,
        # INVARIANT: `normalized` is built afresh by the validator and held by no one else
        MappingProxyType(normalized) if validator.flat else freeze_value(normalized),
        execution,
        digest,
        actor,
        session_id,
        agent,
        task_id,
        skill,
        name if name is not None and name != tool.id else None,
        args_json,
    )
