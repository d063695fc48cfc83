"""The session terms of a condition (provenance and history) and a history term's identity:
what the interpreter, the compiled code, the ledger and evidence all read the same way.

>>> from harnessc.runtime.model import History, Path, Provenance
>>> reads_session(Provenance(value=Path(root="args", parts=("x",)), source="user"))
True
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from .ir import And, History, Not, Or, Path, Provenance, Quantified

__all__ = ["history_key", "reads_result", "reads_session", "session_terms"]


_KEYS: dict[int, tuple[History, str]] = {}


def history_key(node: History) -> str:
    """A history term's identity: its canonical JSON (remembered per node object, which the
    memo keeps alive so its id is not reused)."""
    found = _KEYS.get(id(node))
    if found is not None and found[0] is node:
        return found[1]
    key = json.dumps(node.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    if len(_KEYS) >= 4096:
        _KEYS.clear()
    _KEYS[id(node)] = (node, key)
    return key


_PLANS: dict[type, tuple[str, ...]] = {}
"""Per node class, the fields that hold its sub-terms."""


def _plan(kind: type, own: dict[str, object]) -> tuple[str, ...]:
    if issubclass(kind, (And, Or)):
        return ("items",)
    if issubclass(kind, Not):
        return ("item",)
    if issubclass(kind, Quantified):
        return ("over", "body")
    if issubclass(kind, Provenance):
        return ("value", "call")
    return tuple(n for n in ("left", "right", "of", "key", "items", "fields") if n in own)


def _children(node: object) -> Iterable[object]:
    # a model's fields are its `__dict__`: reading them there, by a plan per class, spares
    # pydantic's `__getattr__` and the type tests per node (a spec of thousands of rules and
    # `requires` is walked at load)
    own = getattr(node, "__dict__", None)
    if own is None:
        return ()
    kind = type(node)
    names = _PLANS.get(kind)
    if names is None:
        names = _PLANS[kind] = _plan(kind, own)
    out: list[object] = []
    for name in names:
        value = own[name]
        if isinstance(value, tuple):
            out.extend(value)
        elif isinstance(value, dict):
            out.extend(value.values())
        elif value is not None and not isinstance(value, str):
            out.append(value)
    return out


def session_terms(cond: object) -> list[History | Provenance]:
    """The provenance and history terms inside a condition, outermost first (not those inside
    a history term's `when`, which reads the earlier call)."""
    out: list[History | Provenance] = []
    stack = [cond]
    while stack:
        node = stack.pop()
        if node is None:
            continue
        if isinstance(node, (History, Provenance)):
            out.append(node)
            if isinstance(node, History):
                continue
        stack.extend(reversed(list(_children(node))))
    return out


def reads_session(cond: object) -> bool:
    return bool(session_terms(cond))


def reads_result(node: object) -> bool:
    if isinstance(node, Path):
        return node.root == "result"
    return any(reads_result(child) for child in _children(node))
