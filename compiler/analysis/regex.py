"""A regular expression's search, as RE2 runs it (runtime/model/semantics.py), as a z3 regular
language: what `matches` and a field's `pattern` become in the SMT encoding (smt.py) and what
example strings are drawn from (examples.py). Its own module, below both, so that neither
imports the other for it.
"""

from __future__ import annotations

import re
import re._constants as sc
import re._parser as sre
from functools import lru_cache
from typing import Any

import z3

__all__ = ["MAX_LOOP", "MAX_SEARCH_WIDTH", "MAX_SMT_TEXT", "forget", "search_regex"]

# z3's sequence solver slows by seconds a query on long texts: a 1,000-character prefix takes
# 3 s, a 100-character literal searched anywhere 8 s, with or without a timeout's help. Longer
# ones are left out of the encoding (the condition is free, the rule's analysis inexact), as
# are conditions z3 cannot express at all.
MAX_SMT_TEXT = 256
"""The longest text constant `startswith`, `within` and `matches` give z3."""
MAX_SEARCH_WIDTH = 32
"""The most characters a pattern not anchored at its start may need (searched anywhere)."""
MAX_LOOP = 64
"""The largest bound of a repeat z3 is given (`{64}`): z3 unrolls a bounded repeat, and the
time to check a spec grew past a second at 64, to 46 s at 128 and past minutes at 1000. A
larger one leaves its `matches` to the analysis as a condition it cannot read (inexact)."""


def _char(code: int) -> z3.ReRef:
    return z3.Re(z3.StringVal(chr(code)))


@lru_cache(maxsize=1)
def _any() -> z3.ReRef:
    return z3.AllChar(z3.ReSort(z3.StringSort()))


def _not(charset: z3.ReRef) -> z3.ReRef:
    return z3.Intersect(_any(), z3.Complement(charset))


def _union(items: list[z3.ReRef]) -> z3.ReRef:
    return items[0] if len(items) == 1 else z3.Union(*items)


def _concat(items: list[z3.ReRef]) -> z3.ReRef:
    if not items:
        return z3.Re(z3.StringVal(""))
    return items[0] if len(items) == 1 else z3.Concat(*items)


def _category(name: Any) -> z3.ReRef | None:
    # INVARIANT: the classes as RE2 runs them (runtime/model/semantics.py): ASCII, as in ECMA-262
    digit = z3.Range("0", "9")
    word = z3.Union(z3.Range("a", "z"), z3.Range("A", "Z"), digit, z3.Re("_"))
    space = _union([_char(ord(c)) for c in " \t\n\r\f"])
    table = {
        sc.CATEGORY_DIGIT: digit,
        sc.CATEGORY_NOT_DIGIT: _not(digit),
        sc.CATEGORY_WORD: word,
        sc.CATEGORY_NOT_WORD: _not(word),
        sc.CATEGORY_SPACE: space,
        sc.CATEGORY_NOT_SPACE: _not(space),
    }
    return table.get(name)


class _Unsupported(Exception):
    pass


def _node(op: Any, av: Any) -> z3.ReRef:
    if op is sc.LITERAL:
        return _char(av)
    if op is sc.NOT_LITERAL:
        return _not(_char(av))
    if op is sc.ANY:
        return _not(_char(ord("\n")))
    if op is sc.IN:
        negated = bool(av) and av[0][0] is sc.NEGATE
        parts: list[z3.ReRef] = []
        for kind, value in av[1:] if negated else av:
            if kind is sc.LITERAL:
                parts.append(_char(value))
            elif kind is sc.RANGE:
                parts.append(z3.Range(chr(value[0]), chr(value[1])))
            elif kind is sc.CATEGORY and _category(value) is not None:
                parts.append(_category(value))  # type: ignore[arg-type]
            else:
                raise _Unsupported
        if not parts:
            raise _Unsupported
        union = _union(parts)
        return _not(union) if negated else union
    if op is sc.BRANCH:
        return _union([_sequence(list(p)) for p in av[1]])
    if op is sc.SUBPATTERN:
        _, add_flags, del_flags, pattern = av
        if add_flags or del_flags:
            raise _Unsupported
        return _sequence(list(pattern))
    if op in (sc.MAX_REPEAT, sc.MIN_REPEAT):
        low, high, pattern = av
        if low > MAX_LOOP or (high is not sc.MAXREPEAT and high > MAX_LOOP):
            raise _Unsupported
        inner = _sequence(list(pattern))
        if high is sc.MAXREPEAT:
            star = z3.Star(inner)
            return star if low == 0 else z3.Concat(z3.Loop(inner, low, low), star)
        if high == 0:
            return _concat([])
        return z3.Loop(inner, low, high)
    raise _Unsupported  # anchors inside, backreferences, lookarounds, possessive repeats


def _sequence(items: list[tuple[Any, Any]]) -> z3.ReRef:
    return _concat([_node(op, av) for op, av in items])


@lru_cache(maxsize=512)
def search_regex(pattern: str) -> z3.ReRef | None:
    """The strings in which `pattern` is found (as `runtime.semantics.compile_pattern` runs
    it), or None outside the subset; the pattern is read by Python's parser.

    >>> s = z3.String("s")
    >>> z3.simplify(z3.InRe(z3.StringVal("xx-chg-12"), search_regex("chg-[0-9]+$")))
    True
    """
    if len(pattern) > MAX_SMT_TEXT:
        return None
    try:
        tree = sre.parse(pattern)
    except (re.error, OverflowError, ValueError):
        return None
    if tree.state.flags & ~(sc.SRE_FLAG_UNICODE):
        return None
    items = list(tree)
    alternatives = (
        [list(p) for p in items[0][1][1]]
        if len(items) == 1 and items[0][0] is sc.BRANCH
        else [items]
    )
    found: list[z3.ReRef] = []
    try:
        for alt in alternatives:
            start = (
                bool(alt)
                and alt[0][0] is sc.AT
                and alt[0][1]
                in (
                    sc.AT_BEGINNING,
                    sc.AT_BEGINNING_STRING,
                )
            )
            if start:
                alt = alt[1:]
            elif sre.SubPattern(tree.state, alt).getwidth()[0] > MAX_SEARCH_WIDTH:
                raise _Unsupported
            end = alt[-1][1] if alt and alt[-1][0] is sc.AT else None
            if end is not None:
                alt = alt[:-1]
            body = _sequence(alt)
            parts = [body] if start else [z3.Star(_any()), body]
            if end in (sc.AT_END, sc.AT_END_STRING):  # `$`: the end of the text, as RE2 runs it
                pass
            elif end is None:
                parts.append(z3.Star(_any()))
            else:
                raise _Unsupported
            found.append(_concat(parts))
    except _Unsupported:
        return None
    return _union(found)


def forget() -> None:
    """Drop the z3 terms built so far (smt.fresh_context: they belong to the old context)."""
    search_regex.cache_clear()
    _any.cache_clear()
