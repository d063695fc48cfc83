"""Conditions: paths, the reference interpreter, and the compiler from IR to Python code.

One meaning, two implementations. `evaluate` interprets a condition of the IR directly and is
the reference; `compile_conditions` turns conditions into Python functions once, at load time,
so deciding a call runs no interpreter. Both read each operator's meaning from
`runtime/model/semantics.py` (`OPERATORS`), whose value helpers carry the rules of language.md §6.

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

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ..model.ir import (
    And,
    Compare,
    Condition,
    EnumMember,
    Extract,
    FactCall,
    History,
    Index,
    Length,
    ListValue,
    Literal,
    Not,
    Or,
    Path,
    Provenance,
    Quantified,
    RecordValue,
)
from ..model.semantics import (
    NUMBERS,
    OPERATORS,
    ORDER_OPS,
    SEQUENCES,
    compile_pattern,
    duration_ms,
    length_of,
    normalize_path,
    ordering_kind,
    risk_of,
    value_eq,
)
from ..model.session_terms import history_key
from .provenance import (
    KIND_BITS,
    Origin,
    ProvenanceView,
    arg_name,
    extract,
    provenance_found,
    provenance_holds,
)
from .terms import HistoryTerms

__all__ = ["Past", "Scope", "compile_conditions", "evaluate"]


class Past(Protocol):
    """What a condition reads of a session's past: the session's ledger
    (`history.Ledger`, which folds the events and evaluates conditions in doing so, so it is
    named here by what it offers)."""

    @property
    def index(self) -> ProvenanceView:
        """Where each value seen in the session came from (`from`)."""
        ...

    @property
    def terms(self) -> HistoryTerms:
        """The spec's history terms, as the ledger keeps them."""
        ...

    def number(self, key: str, exclude: str | None = None) -> int | float:
        """A history term's value over the earlier calls (`exclude`: the call being decided)."""
        ...

    def holds(self, key: str, exclude: str | None = None) -> bool:
        """Whether a history term holds over the earlier calls."""
        ...

    def from_results(
        self,
        key: str,
        found: Origin | None,
        only: bool = False,
        field: tuple[str, ...] = (),
        value: Any = None,
    ) -> bool:
        """Whether a value's sources (`found`) are results of calls the `succeeded` term
        `key` counts (`from result[.FIELD](…)`)."""
        ...


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
    result: Any = None
    """`result.*`: an earlier call's result, inside a history term's `when`."""
    vars: Mapping[str, Any] = field(default_factory=dict)
    """Variables bound by quantifiers (`var` paths)."""
    ledger: Past | None = None
    """The session's provenance and history; None: nothing is known."""
    terms: HistoryTerms | None = None
    """The spec's history terms, to tell whether this call feeds `count`/`sum`."""
    sources: ProvenanceView | None = None
    """What `from` reads when there is no ledger: inside a history term's `when`, the
    provenance of the call the term reads, as it was when that call was made (the session's
    index for the call being decided, the index before an earlier call for that call)."""


def dig(value: object, keys: Iterable[str]) -> Any:
    for key in keys:
        if type(value) is not dict and not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def roles_of(actor: Mapping[str, Any]) -> list[Any] | None:
    """`actor.roles`, which always contains `actor.role`."""
    roles = actor.get("roles")
    role = actor.get("role")
    out = list(roles) if isinstance(roles, SEQUENCES) else []
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
        return dig(value, parts[1:])
    if path.root == "actor" and parts[:1] == ("roles",):
        return dig(roles_of(scope.actor), parts[1:])
    if path.root == "var":
        return dig(scope.vars.get(parts[0]), parts[1:]) if parts else None
    if path.root == "result":
        return dig(scope.result, parts) if scope.result is not None else None
    base = {
        "args": scope.args,
        "actor": scope.actor,
        "resource": scope.resource,
        "task": scope.task,
        "env": scope.env,
        "tool": scope.tool,
        "call": scope.call,
    }.get(path.root)
    return dig(base, parts)


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
    if isinstance(node, Length):
        return length_of(value_of(node.of, scope))
    if isinstance(node, Extract):
        return extract(node.func, value_of(node.of, scope))
    if isinstance(node, History):
        return history_value(node, scope)
    if isinstance(node, Index):
        return entry_of(value_of(node.of, scope), value_of(node.key, scope))
    raise TypeError(f"not a value: {node!r}")


def entry_of(mapping: Any, key: Any) -> Any:
    """`MAP[KEY]`: the entry under a text key, or None (absent) when the value is not a map,
    the key is not a text, or the map has no such entry.

    >>> entry_of({"acc-1": ["DE89"]}, "acc-1"), entry_of({"acc-1": 1}, "acc-2")
    (['DE89'], None)
    """
    if key.__class__ is not str or not isinstance(mapping, Mapping):
        return None
    return mapping.get(key)


def history_value(node: History, scope: Scope) -> Any:
    """A history term's value (design: docs/runtime.md): `called`, `succeeded` and `seen` are
    booleans over the earlier events; `count` and `sum` add this call when its tool is
    selected and it meets `when` (read over its arguments and tool view, no result yet)."""
    key = history_key(node)
    ledger = scope.ledger
    earlier: int | float = 0
    if ledger is not None:
        if key not in ledger.terms.nodes:
            ledger.terms.intern(node)
        earlier = ledger.number(key, scope.call.get("tool_call_id"))
    if node.func in ("called", "succeeded", "seen"):
        return earlier > 0
    terms = scope.terms
    if terms is None:
        return earlier
    if key not in terms.nodes:
        terms.intern(node)
    if not terms.selects(key, scope.tool):
        return earlier
    own = Scope(args=scope.args, tool=scope.tool, sources=provenance_of(scope))
    if node.where is not None and not evaluate(node.where, own):
        return earlier
    if node.func == "count":
        return earlier + 1
    value = read_path(node.field, own) if node.field is not None else None
    return earlier + (value if value.__class__ in NUMBERS else 0)


def provenance_of(scope: Scope) -> ProvenanceView | None:
    """The provenance a `from` of this scope reads (None: every value is from nowhere)."""
    if scope.ledger is not None:
        return scope.ledger.index
    return scope.sources


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
        return OPERATORS[cond.op].evaluate(left, right, ordering_kind(cond.left, cond.right))
    if isinstance(cond, Provenance):
        value = value_of(cond.value, scope)
        name = arg_name(cond.value)
        arg = None if name is None else (scope.tool.get("id"), name)
        if cond.call is not None:
            ledger = scope.ledger
            if ledger is None or value is None:
                return False  # no calls are known (an earlier call's `when`)
            found = provenance_found(ledger.index, value, arg)
            field = cond.field.parts if cond.field is not None else ()
            return ledger.from_results(history_key(cond.call), found, cond.only, field, value)
        return provenance_holds(
            provenance_of(scope), value, cond.source, cond.label, cond.only, arg
        )
    if isinstance(cond, Quantified):
        items = value_of(cond.over, scope)
        if items.__class__ not in (list, tuple):
            return False  # an absent value, or one that is not a list, satisfies neither
        test = (
            evaluate(cond.body, replace(scope, vars={**scope.vars, cond.var: item}))
            for item in items
        )
        return all(test) if cond.quantifier == "all" else any(test)
    return value_of(cond, scope) is True


# ---------------------------------------------------------------------------------------------
# The compiler: IR → Python source → functions `(x, a, t, f) -> bool`
#
# `x` is the call (attributes actor, resource, task, env, execution, tool_call_id, connected,
# running), `a` the normalized arguments, `t` the call's tool view, `f` the facts.


_ABSENT_VALUE = object()  # `_origin` of an absent value: neither an origin nor nowhere


def _origin(ledger: Past | None, value: Any) -> Any:
    if value is None:
        return _ABSENT_VALUE
    return None if ledger is None else ledger.index.lookup(value)


def _origin_arg(x: Any, name: str, value: Any) -> Any:
    """`_origin` of the call's top-level argument `name`: its default is a source too."""
    if value is None:
        return _ABSENT_VALUE
    ledger = x.ledger
    if ledger is None:
        return None
    return ledger.index.lookup_arg(getattr(x, "tool_id", None), name, value)


def _from_results(
    x: Any, key: str, found: Any, only: bool, field: tuple[str, ...], value: Any
) -> bool:
    """`value from result[.FIELD](sel …) [only]` of an `_origin`: the ledger's answer."""
    ledger = x.ledger
    if ledger is None or found is _ABSENT_VALUE:
        return False
    return bool(ledger.from_results(key, found, only, field, value))


def _hnum(x: Any, key: str) -> int | float:
    ledger = x.ledger
    return 0 if ledger is None else ledger.number(key, x.tool_call_id)


def _hold(x: Any, key: str) -> bool:
    ledger = x.ledger
    return ledger is not None and ledger.holds(key, x.tool_call_id)


def _numv(value: Any) -> Any:
    return value if value.__class__ in NUMBERS else 0


def _qlist(value: Any) -> Any:
    return value if value.__class__ in (list, tuple) else None


def helpers(terms: HistoryTerms | None = None) -> dict[str, Any]:
    """The names compiled conditions call; with the spec's history terms, `_hsel` too
    (whether a term's selectors select the call being decided, `HistoryTerms.selects`)."""
    found = {
        "_NUM": NUMBERS,
        "_origin": _origin,
        "_origin_arg": _origin_arg,
        "_from_results": _from_results,
        "_Origin": Origin,
        "_hnum": _hnum,
        "_hold": _hold,
        "_numv": _numv,
        "_qlist": _qlist,
        "_len": length_of,
        "_extract": extract,
        "_entry": entry_of,
        "all": all,
        "any": any,
        **{o.helper_name: o.helper for o in OPERATORS.values()},
        "_ms": duration_ms,
        "_rank": risk_of,
        "_dig": dig,
        "_roles": roles_of,
        "_norm": normalize_path,
    }
    if terms is not None:
        found["_hsel"] = terms.selects
    return found


class Emitter:
    def __init__(self, path_facts: frozenset[str], terms: HistoryTerms | None = None) -> None:
        self.path_facts = path_facts
        self.terms = terms
        self.vars: dict[str, str] = {}  # a quantifier's variable → its generated name
        self.quantified = 0
        self.own_call = False  # emitting a history term's `when` for the call being decided
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
            return all(Emitter.is_const(i) for i in node.items)
        if isinstance(node, RecordValue):
            return all(Emitter.is_const(v) for v in node.fields.values())
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
            if self.own_call and node.root not in ("args", "tool", "var"):
                # a history term's `when` reads the call's args and tool view (and the
                # variables of its own quantifiers)
                return "None"
            if node.root == "var":
                name = self.vars.get(parts[0]) if parts else None
                if name is None:
                    return "None"
                return f"_dig({name}, {self.const(tuple(parts[1:]))})" if parts[1:] else name
            if node.root == "result":
                return "None"  # a call being decided has no result yet
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
            if self.own_call:
                return "False"
            where = "x.connected" if node.func == "connected" else "x.running"
            return f"({self.const(node.name)} in {where})"
        if isinstance(node, ListValue):
            return "[" + ", ".join(self.operand(i) for i in node.items) + "]"
        if isinstance(node, RecordValue):
            items = ", ".join(f"{self.const(k)}: {self.operand(v)}" for k, v in node.fields.items())
            return "{" + items + "}"
        if isinstance(node, Length):
            return f"_len({self.operand(node.of)})"
        if isinstance(node, Extract):
            return f"_extract({self.const(node.func)}, {self.operand(node.of)})"
        if isinstance(node, History):
            return self.history(node)
        if isinstance(node, Index):
            return f"_entry({self.operand(node.of)}, {self.operand(node.key)})"
        raise TypeError(f"not a value: {node!r}")

    def history(self, node: History) -> str:
        """`called`/`succeeded`/`seen`: the ledger's answer; `count`/`sum`: the ledger's total
        plus this call when it is selected and meets `when` (see `history_value`)."""
        if self.own_call:  # a history term inside a `when` of the call itself: nothing known
            return "False" if node.func in ("called", "succeeded", "seen") else "0"
        key = history_key(node)
        k = self.const(key)
        if node.func in ("called", "succeeded", "seen"):
            return f"_hold(x, {k})"
        earlier = f"_hnum(x, {k})"
        if self.terms is None:
            return earlier
        self.terms.intern(node)
        self.own_call, outer_vars = True, self.vars
        try:
            self.vars = {}
            test = f"_hsel({k}, t)"
            if node.where is not None:
                test = f"({test} and {self.cond(node.where)})"
            if node.func == "count":
                own = "1"
            elif node.field is None:
                own = "0"
            else:
                own = f"_numv({self.operand(node.field)})"
        finally:
            self.own_call, self.vars = False, outer_vars
        return f"({earlier} + ({own} if {test} else 0))"

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
        if isinstance(node, Provenance):
            # one normalisation and one dict lookup (`provenance_holds` is the meaning); in a
            # history term's `when` for the call being decided, that call's provenance too
            o = self.temp()
            name = arg_name(node.value)
            operand = self.operand(node.value)
            field: tuple[str, ...] = ()
            if node.call is not None and node.field is not None:
                # the value is looked for at the field as well: computed once
                v = self.temp()
                operand = f"({v} := {operand})"
                field = node.field.parts
            if name is None or (self.terms is not None and name not in self.terms.defaulted):
                found = f"({o} := _origin(x.ledger, {operand}))"
            else:  # a top-level argument: the spec's default of it is a source too
                found = f"({o} := _origin_arg(x, {self.const(name)}, {operand}))"
            if node.call is not None:
                key = self.const(history_key(node.call))
                if self.terms is not None:
                    self.terms.intern(node.call)
                value = v if field else "None"
                return (
                    f"_from_results(x, {key}, {found}, {node.only}, {self.const(field)}, {value})"
                )
            if node.source == "nowhere":
                return f"({found} is None)"
            if node.source == "label":
                return f"({found}.__class__ is _Origin and {self.const(node.label)} in {o}.labels)"
            bit = self.const(KIND_BITS[node.source])
            test = f"{o}.mask == {bit}" if node.only else f"{o}.mask & {bit} != 0"
            return f"({found}.__class__ is _Origin and {test})"
        if isinstance(node, Quantified):
            over = self.operand(node.over)
            items = self.temp()
            self.quantified += 1
            name = f"_q{self.quantified}"
            outer = self.vars
            self.vars = {**outer, node.var: name}
            try:
                body = self.cond(node.body)
            finally:
                self.vars = outer
            fn = "all" if node.quantifier == "all" else "any"
            return (
                f"(False if ({items} := _qlist({over})) is None else "
                f"{fn}({body} for {name} in {items}))"
            )
        if self.is_const(node):
            return "True" if value_of(node, Scope()) is True else "False"
        return f"({self.operand(node)} is True)"

    def compare(self, node: Compare) -> str:
        op: str = node.op  # widened from the node's literal: flipping may rebind it
        left, right = node.left, node.right
        kind = ordering_kind(left, right)
        if self.is_const(left) and self.is_const(right):
            scope = Scope()
            value = OPERATORS[op].evaluate(value_of(left, scope), value_of(right, scope), kind)
            return "True" if value else "False"
        # put a constant on the right where the operator is symmetric or mirrors
        mirror = OPERATORS[op].mirror
        if self.is_const(left) and mirror is not None:
            op, left, right = mirror, right, left
        if self.is_const(right):
            fast = self.fast(op, left, value_of(right, Scope()), kind)
            if fast is not None:
                return fast
        lhs, rhs = self.operand(left), self.operand(right)
        operator = OPERATORS[op]
        fn = operator.helper_name
        if operator.family == "order":
            return f"{fn}({self.const(op)}, {lhs}, {rhs}, {self.const(kind)})"
        if operator.family == "equality" and kind == "duration":
            return f"{fn}(_ms({lhs}), _ms({rhs}))"
        if operator.family == "equality":
            # two strings (the common case: tenants, roles, ids) compare in place; the chained
            # `is` evaluates both sides before testing, so both temporaries are always bound
            v, w = self.temp(), self.temp()
            return (
                f"({v} {op} {w} if ({v} := {lhs}).__class__ is ({w} := {rhs}).__class__ is str "
                f"else {fn}({v}, {w}))"
            )
        return f"{fn}({lhs}, {rhs})"

    def fast(self, op: str, left: object, value: Any, kind: str) -> str | None:
        """Inline code for the common shapes `PATH OP CONSTANT`; None to use a helper."""
        lhs = self.operand(left)
        v = self.temp()
        if kind == "risk" and op in ORDER_OPS:
            rank = risk_of(value)
            if rank is None:
                return "False"
            return f"(({v} := _rank({lhs})) is not None and {v} {op} {self.const(rank)})"
        if kind == "duration":
            ms = duration_ms(value)
            if ms is None:
                return "False"
            if op in ORDER_OPS:
                return f"(({v} := _ms({lhs})) is not None and {v} {op} {self.const(ms)})"
            return None
        if op in ORDER_OPS and type(value) in NUMBERS:
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
                compiled = compile_pattern(value)
                if compiled is None:
                    return "False"
                r = self.const(compiled)
                return f"(({v} := {lhs}).__class__ is str and {r}.search({v}))"
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
    conditions: Mapping[str, Condition],
    path_facts: Iterable[str] = (),
    terms: HistoryTerms | None = None,
) -> dict[str, ConditionFn]:
    """Compile named conditions into functions `fn(call, args, tool_view, facts) -> bool`.

    All conditions go into one generated module, compiled once; `path_facts` names the facts
    of type `path` (normalized when read); `terms`, the spec's history terms, tells whether
    the call itself feeds a `count` or `sum` (without it, only earlier calls count). The call
    `x` carries the session's `ledger` and the call's `tool_call_id`.
    """
    emitter = Emitter(frozenset(path_facts), terms)
    lines: list[str] = []
    names: dict[str, str] = {}
    for i, (key, cond) in enumerate(conditions.items()):
        fn = f"_c{i}"
        names[key] = fn
        lines.append(f"def {fn}(x, a, t, f):\n    return {emitter.cond(cond)}\n")
    # no builtins beyond the two type names the code tests against
    namespace: dict[str, Any] = {"__builtins__": {}, "str": str, "bool": bool}
    namespace.update(helpers(terms))
    namespace.update(emitter.consts)
    source = "\n".join(lines)
    exec(compile(source, "<harness policy>", "exec"), namespace)
    return {key: namespace[fn] for key, fn in names.items()}
