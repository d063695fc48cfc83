"""The vocabulary of the SMT encoding (compiler/analysis/smt.py): keys, booleans that stay Python
values while constant, the terms an operand becomes, and the registry of z3 variables."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import z3

__all__ = ["Bool", "Key", "Registry", "Term", "VarInfo", "conj", "disj", "negate", "to_z3"]

Key = tuple[str, ...]
Bool = Any  # a z3 BoolRef or a Python bool (kept unboxed while constant)


# ---------------------------------------------------------------------------------------------
# Booleans that stay Python values while constant


def conj(*items: Bool) -> Bool:
    out = [i for i in items if i is not True]
    if any(i is False for i in out):
        return False
    if not out:
        return True
    return out[0] if len(out) == 1 else z3.And(*out)


def disj(*items: Bool) -> Bool:
    out = [i for i in items if i is not False]
    if any(i is True for i in out):
        return True
    if not out:
        return False
    return out[0] if len(out) == 1 else z3.Or(*out)


def negate(item: Bool) -> Bool:
    if item is True or item is False:
        return not item
    return z3.Not(item)


def to_z3(item: Bool) -> z3.BoolRef:
    return z3.BoolVal(item) if isinstance(item, bool) else item


# ---------------------------------------------------------------------------------------------
# Terms: an operand as z3 sees it


@dataclass
class Term:
    """An operand: `kind` says how to compare it; `present` is false when the value is absent.

    kinds: str int real bool (z3 scalars), enum (an index into `values`), risk (a rank), name
    (a bare enum member, `const` is its text), effects (`extra`: effect → Bool), list (members
    by boolean), constlist (`extra`: a tuple), record, untyped, listlit (`items`).
    """

    kind: str
    expr: Any = None
    present: Bool = True
    values: tuple[str, ...] = ()
    key: Key | None = None
    const: Any = None
    extra: Any = None
    items: tuple[Term, ...] = ()
    alt: bool = False


@dataclass
class VarInfo:
    """What a z3 variable stands for: `role` is has, v, tag, in, inv (a list holds a value of
    the call: `key` is the list's, `detail` the value's), fn or free."""

    role: str
    key: Key
    detail: Any = None
    alt: bool = False


Registry = dict[str, VarInfo]
