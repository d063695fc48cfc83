"""The meaning of the condition operators and selectors, written once: the value helpers,
`OPERATORS` and `selects`.

Each operator of `compare_op` (dsl/harness.lark) is one frozen `Operator` record holding every
part of its meaning that some stage needs: its spelling in spec text, the rule the validator
types its operands by, the runtime's value helper (the reference interpreter and the compiled
conditions both call it), the helper's name in compiled code, the analyses' evaluation over
concrete JSON values, and the key `compiler/analysis/smt.py` dispatches its z3 encoding on.
The runtime and the compiler both read this table; it imports nothing but the model.

The value helpers carry the rules of language.md §6:

- an absent value (a path that reads nothing, or JSON `null`) makes a comparison false, `!=`
  included; `has` tests presence;
- `path` values are POSIX-normalized, `.`/`..` resolved; a path whose `..` climbs above its
  root normalizes to None (refused); `within` is containment by whole segments, `startswith` a
  string prefix;
- `<`, `<=`, `>`, `>=` order numbers, durations (a duration literal reads the other side as a
  duration) and risk levels (when either side is `tool.risk`).

>>> OPERATORS["within"].evaluate("/repo/a", "/repo", "number")
True
>>> OPERATORS["<"].mirror
'>'
>>> holds("in", "sre", ["sre", "dev"])
True
"""

from __future__ import annotations

import operator
import typing as t
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import re2
from re2 import _re2

from .ir import (
    DELEGATE_TASK,
    PUBLIC_KINDS,
    RISK_LEVELS,
    Literal,
    Path,
    Selector,
    Spec,
    Surface,
    Tool,
    parse_duration,
)

__all__ = [
    "ABSENT",
    "OPERATORS",
    "ORDER_OPS",
    "Operator",
    "Pattern",
    "Typing",
    "compile_pattern",
    "duration_ms",
    "holds",
    "length_of",
    "normalize_path",
    "ordering_kind",
    "pattern_problem",
    "pattern_search",
    "risk_of",
    "selected_ids",
    "selects",
    "surface_tools",
    "tool_view",
    "value_endswith",
    "value_eq",
    "value_has",
    "value_in",
    "value_matches",
    "value_ne",
    "value_order",
    "value_startswith",
    "within",
]

NUMBERS = (int, float)
SEQUENCES = (list, tuple, set, frozenset)
_RANK = {level: i for i, level in enumerate(RISK_LEVELS)}


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
    if type(value) in NUMBERS:
        return value  # type: ignore[return-value]
    if type(value) is not str:
        return None
    return parse_duration(value)


def risk_of(value: object) -> int | None:
    return _RANK.get(value) if type(value) is str else None


def length_of(value: object) -> int | None:
    """`len(value)`: the items of a list, the keys of a map, the characters of a text; None
    (absent) for anything else.

    >>> length_of(["a", "b"]), length_of("abc"), length_of(3)
    (2, 3, None)
    """
    if value.__class__ in (list, tuple, dict, str) or isinstance(value, Mapping):
        return len(value)
    return None


def value_eq(a: object, b: object) -> bool:
    """Equality of two present values: a bool equals only a bool, numbers compare by value,
    lists and records element by element. An absent value (None) equals nothing."""
    if a is None or b is None:
        return False
    ta, tb = type(a), type(b)
    if ta is bool or tb is bool:
        return a is b
    if ta in NUMBERS and tb in NUMBERS:
        return a == b
    if ta is str and tb is str:
        return a == b
    if isinstance(a, SEQUENCES) and isinstance(b, SEQUENCES):
        la, lb = list(a), list(b)
        return len(la) == len(lb) and all(value_eq(x, y) for x, y in zip(la, lb, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(value_eq(a[k], b[k]) for k in a)
    return False


def value_ne(a: object, b: object) -> bool:
    return a is not None and b is not None and not value_eq(a, b)


def value_in(a: object, items: object) -> bool:
    if a is None or not isinstance(items, SEQUENCES):
        return False
    return any(value_eq(a, item) for item in items)


def value_has(container: object, member: object) -> bool:
    """A record has a (present) field; a list or set contains an element."""
    if type(container) is dict:
        return type(member) is str and container.get(member) is not None
    if isinstance(container, Mapping):
        return type(member) is str and container.get(member) is not None
    if isinstance(container, SEQUENCES):
        return any(value_eq(item, member) for item in container)
    return False


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a refused pattern is reported by the caller, not on stderr
_RE2_OPTIONS.never_capture = True  # only whether it matches is asked
_ANYWHERE = _re2.RE2.Anchor.UNANCHORED


@dataclass(frozen=True, slots=True)
class Pattern:
    """A pattern of a `matches` condition or a schema's `pattern`, run by RE2: in time linear in
    the text, whatever the pattern, so no text an agent sends can make a decision or a schema
    check run for minutes, as Python's backtracking `re` does on `^(a+)+$` and thirty `a`s
    followed by a `!`. RE2 has no back-references, lookarounds or possessive repeats (the
    compiler refuses them, H306); `\\d`, `\\w`, `\\s` and `\\b` are ASCII and `$` is the end of the
    text, as in ECMA-262 (JSON Schema) and in the analysis (compiler/analysis/smt.py).

    >>> pattern = compile_pattern(r"^chg-[0-9]+$")
    >>> pattern.search("chg-12"), pattern.search("chg-12\\n"), pattern.search("xchg-1")
    (True, False, False)
    """

    pattern: str
    _compiled: Any

    def search(self, text: str) -> bool:
        """Whether the pattern matches somewhere in `text`."""
        data = text.encode("utf-8", "surrogatepass")
        return bool(self._compiled.Match(_ANYWHERE, data, 0, len(data))[0][0] >= 0)


_PATTERNS: dict[str, Pattern | str] = {}
"""Each pattern compiled once, or RE2's reason for refusing it (bounded: a `matches` whose
pattern is a value, not a literal, may bring new ones without end)."""


def compile_pattern(pattern: str) -> Pattern | None:
    """`pattern` compiled (once per process), or None when RE2 refuses it."""
    found = _pattern(pattern)
    return found if isinstance(found, Pattern) else None


def pattern_problem(pattern: str) -> str | None:
    """Why RE2 refuses `pattern`, in its own words, or None when it compiles.

    >>> pattern_problem("a(?=b)")
    'invalid perl operator: (?='
    """
    found = _pattern(pattern)
    return found if isinstance(found, str) else None


def _pattern(pattern: str) -> Pattern | str:
    found = _PATTERNS.get(pattern)
    if found is None:
        compiled = _re2.RE2(pattern.encode("utf-8", "surrogatepass"), _RE2_OPTIONS)
        if compiled.ok():
            found = Pattern(pattern, compiled)
        else:
            found = bytes(compiled.error()).decode("utf-8", "replace")
        if len(_PATTERNS) > 4096:
            _PATTERNS.clear()
        _PATTERNS[pattern] = found
    return found


def pattern_search(pattern: str) -> Callable[[str], bool]:
    """The search of a schema field's `pattern`: a pattern RE2 refuses (in a model not built by
    the compiler, which refuses it) lets no value through."""
    compiled = compile_pattern(pattern)
    return compiled.search if compiled is not None else _no_match


def _no_match(_text: str) -> bool:
    return False


def value_matches(a: object, pattern: object) -> bool:
    if type(a) is not str or type(pattern) is not str:
        return False
    compiled = compile_pattern(pattern)
    return compiled is not None and compiled.search(a)


def value_startswith(a: object, prefix: object) -> bool:
    return type(a) is str and type(prefix) is str and a.startswith(prefix)


def value_endswith(a: object, suffix: object) -> bool:
    return type(a) is str and type(suffix) is str and a.endswith(suffix)


_ORDER: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def value_order(op: str, a: object, b: object, kind: str = "number") -> bool:
    """`<` `<=` `>` `>=` over numbers, durations (`kind="duration"`) or risk levels
    (`kind="risk"`); anything else, or an absent side, is false."""
    if kind == "risk":
        a, b = risk_of(a), risk_of(b)
    elif kind == "duration":
        a, b = duration_ms(a), duration_ms(b)
    if type(a) not in NUMBERS or type(b) not in NUMBERS:
        return False
    return _ORDER[op](a, b)  # type: ignore[no-any-return]


def ordering_kind(left: object, right: object) -> str:
    """How `<`, `==` and the rest read two operands of the model: `risk` when either is
    `tool.risk`, `duration` when either is a duration literal, `number` otherwise."""
    for side in (left, right):
        if isinstance(side, Path) and side.root == "tool" and side.parts == ("risk",):
            return "risk"
    for side in (left, right):
        if isinstance(side, Literal) and side.type == "duration":
            return "duration"
    return "number"


# ---------------------------------------------------------------------------------------------
# Concrete values, as the analyses judge a witness call


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()
"""A value a concrete call does not have (JSON `null` is a value there)."""


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _number(a) and _number(b):
        return a == b  # type: ignore[no-any-return]
    if isinstance(a, str) and isinstance(b, str):
        return str(a) == str(b)
    return False


def _present(a: Any, b: Any) -> bool:
    return a is not ABSENT and b is not ABSENT


def _texts(a: Any, b: Any) -> bool:
    return isinstance(a, str) and isinstance(b, str)


def _concrete_order(op: str) -> Callable[[Any, Any, str], bool]:
    def order(left: Any, right: Any, kind: str) -> bool:
        if not _present(left, right):
            return False
        if kind == "risk":
            if left not in RISK_LEVELS or right not in RISK_LEVELS:
                return False
            left, right = _RANK[left], _RANK[right]
        elif not (_number(left) and _number(right)):
            return False
        return bool(_ORDER[op](left, right))

    return order


def _concrete_has(container: Any, member: Any, kind: str) -> bool:
    # a record's field is named by the literal on the right (the caller checks it is one)
    if isinstance(container, dict):
        return str(member) in container
    if isinstance(container, list):
        return any(_equal(i, member) for i in container)
    return False


def _concrete_in(item: Any, items: Any, kind: str) -> bool:
    if item is ABSENT or not isinstance(items, list):
        return False
    return any(_equal(item, i) for i in items)


def holds(op: str, left: Any, right: Any, kind: str = "number") -> bool:
    """`left OP right` over concrete JSON values (`ABSENT` for a value the call lacks), as
    the analyses judge it; `kind` is `ordering_kind` of the operands.

    >>> holds("!=", ABSENT, "a"), holds("<", "low", "high", "risk")
    (False, True)
    """
    return OPERATORS[op].concrete(left, right, kind)


# ---------------------------------------------------------------------------------------------
# The operators

Family = t.Literal["equality", "order", "member", "has", "text"]

_ORDER_HELP = (
    "`<`, `<=`, `>` and `>=` order numbers, durations, risk levels and enum values; compare "
    "strings with `==`, `startswith` or `matches`"
)
_TEXT_HELP = (
    "`startswith`, `endswith` and `within` compare paths and strings; `matches` tests a string"
)


@dataclass(frozen=True, slots=True)
class Typing:
    """How the validator types an operator's operands.

    `family` picks the rule: `equality` (compatible types, enum members), `order` (both sides
    in `left`, of one type), `member` (`in`: a list on the right, its items equal to the left),
    `has` (an object, a map or a list on the left) or `text` (the left in `left`, the right in
    `right`). `wanted` says what a `text` operand must be, `help` why a type is refused;
    `right_message`/`right_label`/`right_help` replace them for a refused right side.
    """

    family: Family
    left: frozenset[str] = frozenset()
    right: frozenset[str] = frozenset()
    wanted: str = ""
    help: str = ""
    right_message: str = ""
    right_label: str = ""
    right_help: str = ""


@dataclass(frozen=True, slots=True)
class Operator:
    """One condition operator: every part of its meaning, one record.

    - `spelling`: as written in spec text (the grammar's `compare_op`);
    - `typing`: the validator's rule for its operands;
    - `helper`: the runtime value helper, called with the two values (an ordering helper
      takes the operator and the ordering kind too: `value_order(op, a, b, kind)`);
      `helper_name` names it in compiled conditions;
    - `evaluate(left, right, kind)`: the runtime meaning over two values, `kind` being
      `ordering_kind` of the operands (the interpreter calls it, the compiler folds constants
      with it);
    - `concrete(left, right, kind)`: the analyses' meaning over concrete JSON values;
    - `smt`: the key `compiler/analysis/smt.py` dispatches its z3 encoding on;
      `smt_text`, for a `text` operator z3's string theory states directly, the relation
      itself: `(z3, left, right) -> z3 term`, given the z3 module (the runtime never imports
      it) and the two strings;
    - `mirror`: the operator that reads its operands swapped (`a < b` is `b > a`), if any;
    - `relation`: for `==`, `!=` and the orderings, the relation itself (Python's operator,
      which z3's terms overload too).
    """

    spelling: str
    typing: Typing
    helper: Callable[..., bool]
    helper_name: str
    evaluate: Callable[[Any, Any, str], bool]
    concrete: Callable[[Any, Any, str], bool]
    smt: str
    smt_text: Callable[[Any, Any, Any], Any] | None = None
    mirror: str | None = None
    relation: Callable[[Any, Any], Any] | None = None

    @property
    def family(self) -> Family:
        return self.typing.family

    @property
    def runtime_name(self) -> str:
        """The helper's name in this module (`value_in`, `within`)."""
        return self.helper.__name__


def _equality(op: str, helper: Callable[[Any, Any], bool], negated: bool) -> Operator:
    def evaluate(a: object, b: object, kind: str) -> bool:
        if kind == "duration":
            return helper(duration_ms(a), duration_ms(b))
        return helper(a, b)

    return Operator(
        spelling=op,
        typing=Typing("equality"),
        helper=helper,
        helper_name="_ne" if negated else "_eq",
        evaluate=evaluate,
        concrete=lambda a, b, kind: _present(a, b) and _equal(a, b) is not negated,
        smt="unequal" if negated else "equal",
        mirror=op,
        relation=operator.ne if negated else operator.eq,
    )


def _values(helper: Callable[[Any, Any], bool]) -> Callable[[Any, Any, str], bool]:
    return lambda a, b, kind: helper(a, b)


def _ordering(op: str) -> Operator:
    return Operator(
        spelling=op,
        typing=Typing(
            "order", left=frozenset({"int", "float", "duration", "enum"}), help=_ORDER_HELP
        ),
        helper=value_order,
        helper_name="_order",
        evaluate=lambda a, b, kind: value_order(op, a, b, kind),
        concrete=_concrete_order(op),
        smt="order",
        mirror={"<": ">", "<=": ">=", ">": "<", ">=": "<="}[op],
        relation=_ORDER[op],
    )


def _text(
    op: str,
    helper: Callable[[Any, Any], bool],
    concrete: Callable[[str, str], bool],
    smt_text: Callable[[Any, Any, Any], Any] | None = None,
    **typing: Any,
) -> Operator:
    return Operator(
        spelling=op,
        typing=Typing("text", help=_TEXT_HELP, **typing),
        helper=helper,
        helper_name=f"_{op}",
        evaluate=_values(helper),
        concrete=lambda a, b, kind: _present(a, b) and _texts(a, b) and concrete(a, b),
        smt="text",
        smt_text=smt_text,
    )


# a prefix or a suffix of a string, or of a normalized path (the typing of both sides)
_AFFIX: dict[str, Any] = {
    "left": frozenset({"string", "path", "url"}),
    "right": frozenset({"string", "path", "url"}),
    "wanted": "a string or a path",
}

_OPERATORS = (
    _equality("==", value_eq, negated=False),
    _equality("!=", value_ne, negated=True),
    *(_ordering(op) for op in ("<", "<=", ">", ">=")),
    Operator(
        spelling="in",
        typing=Typing("member"),
        helper=value_in,
        helper_name="_in",
        evaluate=_values(value_in),
        concrete=_concrete_in,
        smt="member",
    ),
    Operator(
        spelling="has",
        typing=Typing(
            "has",
            help="`has` tests a field of an object or map, or an element of a list; compare "
            "values with `==`",
        ),
        helper=value_has,
        helper_name="_has",
        evaluate=_values(value_has),
        concrete=_concrete_has,
        smt="has",
    ),
    _text(
        "matches",
        value_matches,
        value_matches,
        left=frozenset({"string", "path", "url", "enum"}),
        right=frozenset({"string"}),
        wanted="a string",
        right_message="`matches` takes a regular expression string on its right",
        right_label="not a string",
        right_help='write the pattern as a string, such as `matches "^release/"`',
    ),
    _text(
        "startswith",
        value_startswith,
        lambda a, b: a.startswith(b),
        lambda z3, a, b: z3.PrefixOf(b, a),
        **_AFFIX,
    ),
    _text(
        "endswith",
        value_endswith,
        lambda a, b: a.endswith(b),
        lambda z3, a, b: z3.SuffixOf(b, a),
        **_AFFIX,
    ),
    _text(
        "within",
        within,
        lambda a, b: a == b or a.startswith(b.rstrip("/") + "/"),
        left=frozenset({"string", "path"}),
        right=frozenset({"string", "path"}),
        wanted="a path",
    ),
)

OPERATORS: Mapping[str, Operator] = {o.spelling: o for o in _OPERATORS}
"""Every condition operator by its spelling, in the grammar's order."""

ORDER_OPS = frozenset(o.spelling for o in _OPERATORS if o.family == "order")


# ---------------------------------------------------------------------------------------------
# Selectors


def selects(selector: Selector, tool: Tool, view: Mapping[str, Any] | None = None) -> bool:
    """Whether a selector selects `tool`: the one meaning of every selector, read by the
    policy engine, approvals, sessions, lints and the analyses. The `risk` and `effects` sugar
    read `view`, a call's `tool.*` (its operation's risk and effects), else the tool's own.

    >>> tool = Tool(id="ci.run", wire_name="ci_run", risk="high")
    >>> selects(Selector(kind="glob", value="ci."), tool)
    True
    >>> selects(Selector(kind="risk", op=">=", value="high"), tool, {"risk": "low"})
    False
    """
    kind = selector.kind
    if kind == "all":
        return True
    if kind == "id":
        return tool.id == selector.value
    if kind == "glob":
        return tool.id.startswith(selector.value)
    if kind == "module":
        return tool.id in selector.tools
    if kind == "pack":
        return selector.value in tool.packs
    if kind == "kind":
        return tool.kind == selector.value
    if kind == "risk":
        operator = OPERATORS.get(selector.op or ">=")
        if operator is None or operator.relation is None:
            return False
        risk = view["risk"] if view else tool.risk
        return operator.evaluate(risk, selector.value, "risk")
    if kind == "effects":
        return selector.value in (view["effects"] if view else tool.effects)
    return False


def tool_view(tool: Tool, op: str | None = None) -> dict[str, Any]:
    """`tool.*` for a call: its operation's risk and effects when `op` names one."""
    operation = tool.operations.get(op) if op is not None else None
    return {
        "id": tool.id,
        "kind": tool.kind,
        "version": tool.version,
        "risk": operation.risk if operation else tool.risk,
        "effects": tuple(sorted(operation.effects)) if operation else tool.effects,
        "tags": tool.tags,
        "packs": tool.packs,
    }


def selected_ids(
    selectors: Iterable[Selector], tools: Mapping[str, Tool], ids: Sequence[str] | None = None
) -> set[str]:
    """The ids of the tools that any of `selectors` selects, as `selects` says, found without
    trying every selector on every tool: an `id` is looked up, a `glob` reads the run of sorted
    ids that share its prefix, a `module` its own list; only the kinds that read a tool's
    other facts (`pack`, `kind`, `risk`, `effects`) try each tool. A surface or a policy that
    names each of thousands of tools costs what its selectors and tools do, not their product.
    `ids`: the tools' ids sorted, when the caller keeps them.

    >>> tools = {i: Tool(id=i, wire_name=i) for i in ("ci.run", "ci.stop", "cid", "deploy")}
    >>> sorted(selected_ids([Selector(kind="glob", value="ci."), Selector(kind="id",
    ...     value="deploy")], tools))
    ['ci.run', 'ci.stop', 'deploy']
    """
    found: set[str] = set()
    for selector in selectors:
        kind = selector.kind
        if kind == "id":
            if selector.value in tools:
                found.add(selector.value)
        elif kind == "glob":
            if ids is None:
                ids = sorted(tools)
            at = bisect_left(ids, selector.value)
            while at < len(ids) and ids[at].startswith(selector.value):
                found.add(ids[at])
                at += 1
        elif kind == "module":
            found.update(t for t in selector.tools if t in tools)
        elif kind == "all":
            return set(tools)
        else:
            found.update(i for i, tool in tools.items() if selects(selector, tool))
    return found


def surface_tools(spec: Spec, surface: Surface) -> tuple[str, ...]:
    """The public tools of a surface, in the spec's order: selected by `expose`, not by `hide`
    (hide wins), never a legacy, primitive or private tool, never `delegate_task`."""
    shown = selected_ids(surface.expose, spec.tools)
    shown -= selected_ids(surface.hide, spec.tools)
    return tuple(
        tool.id
        for tool in spec.tools.values()
        if tool.id in shown and tool.kind in PUBLIC_KINDS and tool.id != DELEGATE_TASK
    )
