"""Example strings for a field's pattern and length bounds, shared by the analysis and the tests.

`string_example(pattern, low, high)` is the one answer to "a short, readable string in which
the pattern is found (as the runtime runs it), with a length in [low, high]". The cheap case
comes first: for the plain subset of patterns (literals, classes, groups, alternatives,
repeats, anchors) the shortest match is read off the parsed pattern. Only when that fails does
z3 search, within a fixed resource budget (`rlimit`, counted in z3's own steps rather than
seconds, so the answer is the same on a loaded machine and an idle one). Either way the
runtime's own match (`runtime.semantics.value_matches`) has the last word.
"""

from __future__ import annotations

import re
import re._parser as sre_parse
from typing import Any

import z3
from harnessc.runtime.model.semantics import value_matches

from .regex import search_regex

__all__ = [
    "MAX_EXAMPLE_LENGTH",
    "Z3_RLIMIT",
    "NoExampleError",
    "forget_examples",
    "string_example",
]

MAX_EXAMPLE_LENGTH = 100_000
"""The longest example made: a pattern that needs more (`a{4000000000}`) has none."""
Z3_RLIMIT = 100_000
"""z3's resource budget for one search: a fraction of a second; the patterns of the examples
and the standard library need well under a fifth of it, and the walk answers most of them."""


class NoExampleError(ValueError):
    """No example value can be generated (the reason is the message)."""


_CATEGORIES = {
    "CATEGORY_DIGIT": str.isdigit,
    "CATEGORY_WORD": lambda c: c.isalnum() or c == "_",
    "CATEGORY_SPACE": str.isspace,
}
# readable characters first (a lowercase letter, a digit, an uppercase letter), then the rest of
# printable ASCII; categories are ASCII, as in language.md §4
_PREFERRED = [
    *"abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    *(chr(c) for c in range(0x20, 0x7F) if not chr(c).isalnum()),
]


def _in_class(char: str, items: list[tuple[Any, Any]]) -> bool:
    for op, arg in items:
        name = str(op)
        if name == "LITERAL" and char == chr(arg):
            return True
        if name == "RANGE" and arg[0] <= ord(char) <= arg[1]:
            return True
        if name == "CATEGORY":
            kind = str(arg)
            test = _CATEGORIES.get(kind.replace("_NOT_", "_"))
            if test is None:
                raise NoExampleError(f"the class item `{kind}`")
            if char.isascii() and test(char) != ("_NOT_" in kind):
                return True
        elif name not in ("LITERAL", "RANGE"):
            raise NoExampleError(f"the class item `{name}`")
    return False


def _class_char(items: list[tuple[Any, Any]]) -> str:
    """A readable character of a character class: a lowercase letter or a digit if it has one."""
    negated = bool(items) and str(items[0][0]) == "NEGATE"
    rest = items[1:] if negated else items
    for char in _PREFERRED:
        if _in_class(char, rest) != negated:
            return char
    if not negated:
        for op, arg in rest:
            if str(op) == "LITERAL":
                return chr(arg)
            if str(op) == "RANGE":
                return chr(arg[0])
    raise NoExampleError("a character class with no printable character")


def _too_long() -> NoExampleError:
    return NoExampleError(f"a match longer than {MAX_EXAMPLE_LENGTH} characters")


def _walk_regex(items: Any, extra: int = 0) -> tuple[str, int]:
    """The shortest string the parsed pattern matches, for the plain subset (literals, classes,
    groups, alternatives, repeats, anchors), made about `extra` characters longer by taking
    repeats more often than they must be; returns it with the `extra` still unplaced. Anything
    outside the subset raises `NoExampleError`."""
    out: list[str] = []
    size = 0
    for op, arg in items:
        name = str(op)
        if name == "LITERAL":
            piece = chr(arg)
        elif name == "NOT_LITERAL":
            piece = next(c for c in _PREFERRED if c != chr(arg))
        elif name == "IN":
            piece = _class_char(arg)
        elif name == "ANY":
            piece = "a"
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, sub = arg
            once, _ = _walk_regex(sub)
            more = 0
            if extra > 0 and once:
                room = MAX_EXAMPLE_LENGTH if high is sre_parse.MAXREPEAT else high - low
                more = min(-(-extra // len(once)), room)
            if len(once) * (low + more) > MAX_EXAMPLE_LENGTH:
                raise _too_long()
            piece = once * (low + more)
            extra -= len(once) * more
        elif name == "SUBPATTERN":
            piece, extra = _walk_regex(arg[-1], extra)
        elif name == "BRANCH":
            piece, extra = _walk_branch(arg[1], extra)
        elif name == "AT":
            continue
        else:
            raise NoExampleError(f"the regex construct `{name}`")
        size += len(piece)
        if size > MAX_EXAMPLE_LENGTH:
            raise _too_long()
        out.append(piece)
    return "".join(out), extra


def _walk_branch(alternatives: list[Any], extra: int) -> tuple[str, int]:
    """The first alternative the walk can make (a later one may avoid an unprintable class)."""
    for alternative in alternatives[:-1]:
        try:
            return _walk_regex(alternative, extra)
        except NoExampleError:
            pass
    return _walk_regex(alternatives[-1], extra)


def _walk_example(pattern: str, low: int, high: int | None) -> str:
    """The walk's example: the shortest match, grown by its repeats or else padded outside the
    match (a search finds it anywhere unless anchored) when `low` asks for more."""
    if low > MAX_EXAMPLE_LENGTH:
        raise _too_long()
    tree = sre_parse.parse(pattern)
    found, _ = _walk_regex(tree)
    if len(found) < low:
        found, short = _walk_regex(tree, low - len(found))
        if short > 0:
            nodes = list(tree)
            if not nodes or nodes[-1] != (sre_parse.AT, sre_parse.AT_END):
                found += "a" * short
            elif nodes[0] != (sre_parse.AT, sre_parse.AT_BEGINNING):
                found = "a" * short + found
    if len(found) < low or (high is not None and len(found) > high):
        raise NoExampleError("the length bounds")
    return found


def _z3_example(pattern: str, low: int, high: int | None) -> str:
    regex = search_regex(pattern)
    if regex is None:
        raise NoExampleError(f"the pattern `{pattern}` is outside the subset examples are made for")
    text = z3.String("example")
    solver = z3.Solver()
    solver.set("rlimit", Z3_RLIMIT)
    solver.add(z3.InRe(text, regex), z3.Length(text) >= low)
    limit = MAX_EXAMPLE_LENGTH if high is None else min(high, MAX_EXAMPLE_LENGTH)
    solver.add(z3.Length(text) <= limit)
    solver.add(z3.InRe(text, z3.Star(z3.Range(" ", "~"))))
    if solver.check() != z3.sat:
        raise NoExampleError(f"no printable string matching the pattern `{pattern}` was found")
    return str(solver.model().eval(text, model_completion=True).as_string())


_EXAMPLES: dict[tuple[str | None, int, int | None], str] = {}


def forget_examples() -> None:
    """Empty the cache: z3's answers depend on its context, so each partition of the analysis
    starts afresh."""
    _EXAMPLES.clear()


def string_example(pattern: str | None, low: int, high: int | None) -> str:
    """A short, readable string matching `pattern` (searched, as the validator does) with a
    length in [low, high]: from the parsed pattern when it is plain, else from z3; checked
    with Python's `re` either way.

    >>> string_example("^chg-[0-9]+$", 0, None)
    'chg-0'
    """
    key = (pattern, low, high)
    if key in _EXAMPLES:
        return _EXAMPLES[key]
    if pattern is None:
        size = max(low, 7) if high is None else min(max(low, 7), high)
        if size > MAX_EXAMPLE_LENGTH:
            raise NoExampleError(f"a string longer than {MAX_EXAMPLE_LENGTH} characters")
        found = ("example" * (size // 7 + 1))[:size]
    else:
        try:
            found = _walk_example(pattern, low, high)
            if not value_matches(found, pattern):
                raise NoExampleError("the walk's example does not match")
        except (NoExampleError, re.error, OverflowError, RecursionError):
            found = _z3_example(pattern, low, high)
        if not value_matches(found, pattern):
            raise NoExampleError(f"no string matching the pattern `{pattern}` was found")
    _EXAMPLES[key] = found
    return found
