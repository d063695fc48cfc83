"""Condition semantics: values, absent values, paths, and the compiler from IR to Python code.

One meaning, two implementations. `evaluate` interprets a condition of the IR directly and is
the reference; `compile_conditions` turns conditions into Python functions once, at load time,
so deciding a call runs no interpreter. Both share the value helpers below, which carry the
rules of language.md §6:

- an absent value (a path that reads nothing, or JSON `null`) makes a comparison false, `!=`
  included; `has` tests presence;
- `path` values are POSIX-normalized, `.`/`..` resolved; a path whose `..` climbs above its
  root normalizes to None (refused); `within` is containment by whole segments, `startswith` a
  string prefix;
- `<`, `<=`, `>`, `>=` order numbers, durations (a duration literal reads the other side as a
  duration) and risk levels (when either side is `tool.risk`).

Generated code never contains spec text: every literal, key and regular expression is bound
to a generated name (`_k3`) in the functions' namespace, so a spec cannot inject code.

>>> from harnessc.runtime.model import Compare, Literal, Path
>>> cond = Compare(op="!=", left=Path(root="args", parts=("x",)), right=Literal(value="a",
...     type="string"))
>>> evaluate(cond, Scope(args={}))
False
>>> fn = compile_conditions({"c": cond})["c"]
>>> fn(None, {"x": "b"}, {}, {})
True
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .model import (
    RISK_LEVELS,
    And,
    Compare,
    Condition,
    EnumMember,
    FactCall,
    ListValue,
    Literal,
    Not,
    Or,
    Path,
    RecordValue,
)

__all__ = [
    "Scope",
    "compile_conditions",
    "duration_ms",
    "evaluate",
    "normalize_path",
    "value_eq",
    "within",
]

_NUM = (int, float)
_SEQ = (list, tuple, set, frozenset)
_RANK = {level: i for i, level in enumerate(RISK_LEVELS)}
_DURATION = re.compile(r"([0-9]+)(ms|s|m|h|d)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


# ---------------------------------------------------------------------------------------------
# Values


def normalize_path(value: object) -> str | None:
    """A path in POSIX form with `.` and `..` resolved; None when `..` leaves the root.

    >>> normalize_path("/repo/./src/../pom.xml")
    '/repo/pom.xml'
    >>> normalize_path("/repo/../../etc") is None
    True
    """
    if type(value) is not str:
        return None
    if value and "/." not in value and "//" not in value and value[0] != "." and value[-1] != "/":
        return value  # already normal: no `.`, `..` or empty segment
    parts: list[str] = []
    for segment in value.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if not parts:
                return None
            parts.pop()
        else:
            parts.append(segment)
    body = "/".join(parts)
    if value.startswith("/"):
        return "/" + body
    return body or "."


def within(inner: object, outer: object) -> bool:
    """Containment by whole path segments, after normalization: `/repo/a` is within `/repo`,
    `/repository` is not."""
    a, b = normalize_path(inner), normalize_path(outer)
    if a is None or b is None:
        return False
    if a.startswith("/") != b.startswith("/"):
        return False
    if b in ("/", "."):
        return True
    return a == b or a.startswith(b + "/")


def duration_ms(value: object) -> int | float | None:
    """A duration in milliseconds: a number as is, a string such as `1h30m` parsed."""
    if type(value) in _NUM:
        return value  # type: ignore[return-value]
    if type(value) is not str or not value:
        return None
    total, pos = 0, 0
    for match in _DURATION.finditer(value):
        if match.start() != pos:
            return None
        total += int(match.group(1)) * _UNIT_MS[match.group(2)]
        pos = match.end()
    return total if pos == len(value) else None


def risk_of(value: object) -> int | None:
    return _RANK.get(value) if type(value) is str else None  # type: ignore[arg-type]


def value_eq(a: object, b: object) -> bool:
    """Equality of two present values: a bool equals only a bool, numbers compare by value,
    lists and records element by element. An absent value (None) equals nothing."""
    if a is None or b is None:
        return False
    ta, tb = type(a), type(b)
    if ta is bool or tb is bool:
        return a is b
    if ta in _NUM and tb in _NUM:
        return a == b
    if ta is str and tb is str:
        return a == b
    if isinstance(a, _SEQ) and isinstance(b, _SEQ):
        la, lb = list(a), list(b)
        return len(la) == len(lb) and all(value_eq(x, y) for x, y in zip(la, lb, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(value_eq(a[k], b[k]) for k in a)
    return False


def value_ne(a: object, b: object) -> bool:
    return a is not None and b is not None and not value_eq(a, b)


def value_in(a: object, items: object) -> bool:
    if a is None or not isinstance(items, _SEQ):
        return False
    return any(value_eq(a, item) for item in items)


def value_has(container: object, member: object) -> bool:
    """A record has a (present) field; a list or set contains an element."""
    if type(container) is dict:
        return type(member) is str and container.get(member) is not None
    if isinstance(container, Mapping):
        return type(member) is str and container.get(member) is not None
    if isinstance(container, _SEQ):
        return any(value_eq(item, member) for item in container)
    return False


_REGEX_CACHE: dict[str, re.Pattern[str] | None] = {}


def _regex(pattern: str) -> re.Pattern[str] | None:
    if pattern not in _REGEX_CACHE:
        try:
            _REGEX_CACHE[pattern] = re.compile(pattern)
        except re.error:
            _REGEX_CACHE[pattern] = None
    return _REGEX_CACHE[pattern]


def value_matches(a: object, pattern: object) -> bool:
    if type(a) is not str or type(pattern) is not str:
        return False
    regex = _regex(pattern)
    return regex is not None and regex.search(a) is not None


def value_startswith(a: object, prefix: object) -> bool:
    return type(a) is str and type(prefix) is str and a.startswith(prefix)


_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def value_order(op: str, a: object, b: object, kind: str = "number") -> bool:
    """`<` `<=` `>` `>=` over numbers, durations (`kind="duration"`) or risk levels
    (`kind="risk"`); anything else, or an absent side, is false."""
    if kind == "risk":
        a, b = risk_of(a), risk_of(b)
    elif kind == "duration":
        a, b = duration_ms(a), duration_ms(b)
    if type(a) not in _NUM or type(b) not in _NUM:
        return False
    return _ORDER[op](a, b)


def _ordering_kind(left: object, right: object) -> str:
    for side in (left, right):
        if isinstance(side, Path) and side.root == "tool" and side.parts == ("risk",):
            return "risk"
    for side in (left, right):
        if isinstance(side, Literal) and side.type == "duration":
            return "duration"
    return "number"


# ---------------------------------------------------------------------------------------------
# The reference interpreter


@dataclass
class Scope:
    """What a condition reads: the call's parts, the tool view (`tool.*` of this call), facts.

    `path_facts` names the declared facts of type `path`, normalized when read.
    """

    args: Mapping[str, Any] = field(default_factory=dict)
    actor: Mapping[str, Any] = field(default_factory=dict)
    resource: Mapping[str, Any] = field(default_factory=dict)
    task: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, Any] = field(default_factory=dict)
    tool: Mapping[str, Any] = field(default_factory=dict)
    call: Mapping[str, Any] = field(default_factory=dict)
    facts: Mapping[str, Any] = field(default_factory=dict)
    connected: Iterable[str] = ()
    running: Iterable[str] = ()
    path_facts: frozenset[str] = frozenset()


def _dig(value: object, keys: Iterable[str]) -> Any:
    for key in keys:
        if type(value) is not dict and not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def roles_of(actor: Mapping[str, Any]) -> list[Any] | None:
    """`actor.roles`, which always contains `actor.role`."""
    roles = actor.get("roles")
    role = actor.get("role")
    out = list(roles) if isinstance(roles, _SEQ) else []
    if role is not None and not any(value_eq(role, r) for r in out):
        out.append(role)
    return out if out or roles is not None else None


def read_path(path: Path, scope: Scope) -> Any:
    """The value a path reads, or None when it is absent."""
    parts = path.parts
    if path.root == "fact":
        if not parts:
            return None
        value = scope.facts.get(parts[0])
        if parts[0] in scope.path_facts and len(parts) == 1:
            return normalize_path(value)
        return _dig(value, parts[1:])
    if path.root == "actor" and parts[:1] == ("roles",):
        return _dig(roles_of(scope.actor), parts[1:])
    base = {
        "args": scope.args,
        "actor": scope.actor,
        "resource": scope.resource,
        "task": scope.task,
        "env": scope.env,
        "tool": scope.tool,
        "call": scope.call,
    }.get(path.root)
    return _dig(base, parts)


def value_of(node: object, scope: Scope) -> Any:
    if isinstance(node, Literal):
        return node.value
    if isinstance(node, EnumMember):
        return node.name
    if isinstance(node, Path):
        return read_path(node, scope)
    if isinstance(node, FactCall):
        return node.name in (scope.connected if node.func == "connected" else scope.running)
    if isinstance(node, ListValue):
        return [value_of(i, scope) for i in node.items]
    if isinstance(node, RecordValue):
        return {k: value_of(v, scope) for k, v in node.fields.items()}
    raise TypeError(f"not a value: {node!r}")


def _compare_values(op: str, left: object, right: object, kind: str) -> bool:
    if op == "==":
        if kind == "duration":
            return value_eq(duration_ms(left), duration_ms(right))
        return value_eq(left, right)
    if op == "!=":
        if kind == "duration":
            return value_ne(duration_ms(left), duration_ms(right))
        return value_ne(left, right)
    if op == "in":
        return value_in(left, right)
    if op == "has":
        return value_has(left, right)
    if op == "matches":
        return value_matches(left, right)
    if op == "startswith":
        return value_startswith(left, right)
    if op == "within":
        return within(left, right)
    return value_order(op, left, right, kind)


def evaluate(cond: Condition, scope: Scope) -> bool:
    """Interpret a condition directly: the reference meaning, used by tests and `explain`."""
    if isinstance(cond, And):
        return all(evaluate(i, scope) for i in cond.items)
    if isinstance(cond, Or):
        return any(evaluate(i, scope) for i in cond.items)
    if isinstance(cond, Not):
        return not evaluate(cond.item, scope)
    if isinstance(cond, Compare):
        left, right = value_of(cond.left, scope), value_of(cond.right, scope)
        return _compare_values(cond.op, left, right, _ordering_kind(cond.left, cond.right))
    return value_of(cond, scope) is True


# ---------------------------------------------------------------------------------------------
# The compiler: IR → Python source → functions `(x, a, t, f) -> bool`
#
# `x` is the call (attributes actor, resource, task, env, execution, tool_call_id, connected,
# running), `a` the normalized arguments, `t` the call's tool view, `f` the facts.


def _helpers() -> dict[str, Any]:
    return {
        "_NUM": _NUM,
        "_eq": value_eq,
        "_ne": value_ne,
        "_in": value_in,
        "_has": value_has,
        "_matches": value_matches,
        "_startswith": value_startswith,
        "_within": within,
        "_order": value_order,
        "_ms": duration_ms,
        "_rank": risk_of,
        "_dig": _dig,
        "_roles": roles_of,
        "_norm": normalize_path,
    }


class _Emitter:
    def __init__(self, path_facts: frozenset[str]) -> None:
        self.path_facts = path_facts
        self.consts: dict[str, Any] = {}
        self._const_ids: dict[tuple[type, Any], str] = {}
        self.temps = 0
        self.reads_facts = False  # whether code emitted so far reads `f` (the facts)
        # arguments known to hold a normalized path when they hold a string (the policy
        # decider normalizes a tool's `path` arguments before its conditions run)
        self.normal_args: frozenset[str] = frozenset()

    def const(self, value: Any) -> str:
        try:
            key: tuple[type, Any] | None = (type(value), value)
            hash(key)
        except TypeError:
            key = None
        if key is not None and key in self._const_ids:
            return self._const_ids[key]
        name = f"_k{len(self.consts)}"
        self.consts[name] = value
        if key is not None:
            self._const_ids[key] = name
        return name

    def temp(self) -> str:
        self.temps += 1
        return f"_v{self.temps}"

    # -- operands ---------------------------------------------------------------------------

    @staticmethod
    def is_const(node: object) -> bool:
        if isinstance(node, Literal | EnumMember):
            return True
        if isinstance(node, ListValue):
            return all(_Emitter.is_const(i) for i in node.items)
        if isinstance(node, RecordValue):
            return all(_Emitter.is_const(v) for v in node.fields.values())
        return False

    def dig(self, base: str, parts: tuple[str, ...]) -> str:
        if not parts:
            return base
        first = f"{base}.get({self.const(parts[0])})"
        if len(parts) == 1:
            return first
        return f"_dig({first}, {self.const(tuple(parts[1:]))})"

    def operand(self, node: object) -> str:
        if self.is_const(node):
            return self.const(value_of(node, Scope()))
        if isinstance(node, Path):
            parts = node.parts
            if node.root == "fact":
                if not parts:
                    return "None"
                self.reads_facts = True
                read = f"f.get({self.const(parts[0])})"
                if parts[0] in self.path_facts and len(parts) == 1:
                    return f"_norm({read})"
                return f"_dig({read}, {self.const(tuple(parts[1:]))})" if parts[1:] else read
            if node.root == "actor" and parts[:1] == ("roles",):
                return f"_dig(_roles(x.actor), {self.const(tuple(parts[1:]))})"
            if node.root == "call":
                if not parts:
                    return "x.call"
                return self.dig("x.call", parts)
            base = {
                "args": "a",
                "tool": "t",
                "actor": "x.actor",
                "resource": "x.resource",
                "task": "x.task",
                "env": "x.env",
            }.get(node.root)
            return "None" if base is None else self.dig(base, parts)
        if isinstance(node, FactCall):
            where = "x.connected" if node.func == "connected" else "x.running"
            return f"({self.const(node.name)} in {where})"
        if isinstance(node, ListValue):
            return "[" + ", ".join(self.operand(i) for i in node.items) + "]"
        if isinstance(node, RecordValue):
            items = ", ".join(f"{self.const(k)}: {self.operand(v)}" for k, v in node.fields.items())
            return "{" + items + "}"
        raise TypeError(f"not a value: {node!r}")

    # -- conditions -------------------------------------------------------------------------

    def cond(self, node: Condition) -> str:
        if isinstance(node, And):
            return "(" + " and ".join(self.cond(i) for i in node.items) + ")"
        if isinstance(node, Or):
            return "(" + " or ".join(self.cond(i) for i in node.items) + ")"
        if isinstance(node, Not):
            return f"(not {self.cond(node.item)})"
        if isinstance(node, Compare):
            return self.compare(node)
        if self.is_const(node):
            return "True" if value_of(node, Scope()) is True else "False"
        return f"({self.operand(node)} is True)"

    def compare(self, node: Compare) -> str:
        op: str = node.op  # widened from the node's literal: flipping may rebind it
        left, right = node.left, node.right
        kind = _ordering_kind(left, right)
        if self.is_const(left) and self.is_const(right):
            scope = Scope()
            value = _compare_values(op, value_of(left, scope), value_of(right, scope), kind)
            return "True" if value else "False"
        # put a constant on the right where the operator is symmetric or mirrors
        if self.is_const(left) and op in _FLIP:
            op, left, right = _FLIP[op], right, left
        if self.is_const(right):
            fast = self.fast(op, left, value_of(right, Scope()), kind)
            if fast is not None:
                return fast
        lhs, rhs = self.operand(left), self.operand(right)
        if op in ("==", "!=") and kind == "duration":
            fn = "_eq" if op == "==" else "_ne"
            return f"{fn}(_ms({lhs}), _ms({rhs}))"
        if op in ("==", "!="):
            # two strings (the common case: tenants, roles, ids) compare in place; the chained
            # `is` evaluates both sides before testing, so both temporaries are always bound
            v, w = self.temp(), self.temp()
            fn = "_eq" if op == "==" else "_ne"
            return (
                f"({v} {op} {w} if ({v} := {lhs}).__class__ is ({w} := {rhs}).__class__ is str "
                f"else {fn}({v}, {w}))"
            )
        helper = {
            "==": "_eq",
            "!=": "_ne",
            "in": "_in",
            "has": "_has",
            "matches": "_matches",
            "startswith": "_startswith",
            "within": "_within",
        }.get(op)
        if helper is not None:
            return f"{helper}({lhs}, {rhs})"
        return f"_order({self.const(op)}, {lhs}, {rhs}, {self.const(kind)})"

    def fast(self, op: str, left: object, value: Any, kind: str) -> str | None:
        """Inline code for the common shapes `PATH OP CONSTANT`; None to use a helper."""
        lhs = self.operand(left)
        v = self.temp()
        if kind == "risk" and op in _ORDER:
            rank = risk_of(value)
            if rank is None:
                return "False"
            return f"(({v} := _rank({lhs})) is not None and {v} {op} {self.const(rank)})"
        if kind == "duration":
            ms = duration_ms(value)
            if ms is None:
                return "False"
            if op in _ORDER:
                return f"(({v} := _ms({lhs})) is not None and {v} {op} {self.const(ms)})"
            return None
        if op in _ORDER and type(value) in _NUM:
            return f"(({v} := {lhs}).__class__ in _NUM and {v} {op} {self.const(value)})"
        if type(value) is str:
            k = self.const(value)
            if op == "==":
                return f"({lhs} == {k})"
            if op == "!=":
                return f"(({v} := {lhs}) is not None and {v} != {k})"
            if op == "startswith":
                return f"(({v} := {lhs}).__class__ is str and {v}.startswith({k}))"
            if op == "matches":
                regex = _regex(value)
                if regex is None:
                    return "False"
                r = self.const(regex)
                return f"(({v} := {lhs}).__class__ is str and {r}.search({v}) is not None)"
        if type(value) is bool and op in ("==", "!="):
            if op == "==":
                return f"({lhs} is {self.const(value)})"
            return f"(({v} := {lhs}) is not None and {v} is not {self.const(value)})"
        if op == "has" and type(value) is str and isinstance(left, Path):
            if left.root == "tool" and left.parts == ("effects",):
                return f"({self.const(value)} in t.get({self.const('effects')}, ()))"
            if not left.parts and left.root in ("args", "resource", "task", "env", "actor"):
                # a built-in root is always a record
                return f"({lhs}.get({self.const(value)}) is not None)"
        if op == "within" and type(value) is str:
            outer = normalize_path(value)
            if outer is None or outer in ("/", "."):
                return None
            inside = self.const(outer + "/")
            if (
                isinstance(left, Path)
                and left.root == "args"
                and len(left.parts) == 1
                and left.parts[0] in self.normal_args
            ):
                return (
                    f"(({v} := {lhs}).__class__ is str and "
                    f"({v} == {self.const(outer)} or {v}.startswith({inside})))"
                )
            return (
                f"(({v} := _norm({lhs})) is not None and "
                f"({v} == {self.const(outer)} or {v}.startswith({inside})))"
            )
        if op == "in" and isinstance(value, list) and all(type(i) is str for i in value):
            return f"(({v} := {lhs}).__class__ is str and {v} in {self.const(frozenset(value))})"
        return None


ConditionFn = Callable[[Any, Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]], bool]


def compile_conditions(
    conditions: Mapping[str, Condition], path_facts: Iterable[str] = ()
) -> dict[str, ConditionFn]:
    """Compile named conditions into functions `fn(call, args, tool_view, facts) -> bool`.

    All conditions go into one generated module, compiled once; `path_facts` names the facts
    of type `path` (normalized when read).
    """
    emitter = _Emitter(frozenset(path_facts))
    lines: list[str] = []
    names: dict[str, str] = {}
    for i, (key, cond) in enumerate(conditions.items()):
        fn = f"_c{i}"
        names[key] = fn
        lines.append(f"def {fn}(x, a, t, f):\n    return {emitter.cond(cond)}\n")
    # no builtins beyond the two type names the code tests against
    namespace: dict[str, Any] = {"__builtins__": {}, "str": str, "bool": bool}
    namespace.update(_helpers())
    namespace.update(emitter.consts)
    source = "\n".join(lines)
    exec(compile(source, "<harness policy>", "exec"), namespace)
    return {key: namespace[fn] for key, fn in names.items()}
