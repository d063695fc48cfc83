"""A witness call assembled from the values a solution gives (`Reading`): the records of a
`Call` to one tool, with every value no condition constrains filled in to fit the tool's schema.

Both ways of answering a partition end here: z3's models (solve.py) and the finite procedure's
representatives (cells.py), so a witness has one shape whichever found it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harnessc.runtime import model as m

from .concrete import BUILTINS, Call, format_duration, read_value
from .text import term_of

__all__ = ["Assembler", "Reading", "sample_value"]

Key = tuple[str, ...]


def _sample_string(f: m.Field | None) -> str:
    low = int(f.min) if f is not None and f.min is not None else 0
    high = int(f.max) if f is not None and f.max is not None else None
    pattern = f.pattern if f is not None else None
    return _sample_pattern(pattern, low, high)


def _sample_pattern(pattern: str | None, low: int, high: int | None) -> str:
    fallback = "x" * max(low, 1) if high is None or high >= 1 else ""
    if pattern is None:
        return fallback
    from .examples import NoExampleError, string_example  # z3: only for a pattern

    try:
        return string_example(pattern, low, high)
    except NoExampleError:
        return fallback


def sample_value(f: m.Field | None, t: m.Type) -> Any:
    """A value of the type that satisfies the field's constraints, for what no rule reads."""
    name = t.name
    if f is not None and f.default is not None:
        return f.default
    if name in ("string", "url"):
        if name == "url" and (f is None or f.pattern is None):
            return "https://example.com/"
        return _sample_string(f)
    if name == "path":
        return "/workspace/file.txt" if f is None or f.pattern is None else _sample_string(f)
    if name == "duration":
        return "1m"
    if name in ("int", "float"):
        low = f.min if f is not None and f.min is not None else 0
        high = f.max if f is not None and f.max is not None else None
        value = max(low, 0) if high is None or high >= 0 else high
        return int(value) if name == "int" else float(value)
    if name == "bool":
        return False
    if name == "enum":
        return t.values[0] if t.values else ""
    if name == "list":
        count = int(f.min) if f is not None and f.min is not None else 0
        assert t.item is not None
        return [sample_value(None, t.item) for _ in range(count)]
    if name == "map":
        return {}
    if name == "any":
        return {}
    if name == "union":
        return sample_value(f, t.options[0])
    return {g.name: sample_value(g, g.type) for g in t.fields if g.required}


@dataclass
class Reading:
    """The call a model describes, before it is assembled into records."""

    present: dict[Key, bool] = field(default_factory=dict)
    values: dict[Key, dict[str, Any]] = field(default_factory=dict)
    tags: dict[Key, int] = field(default_factory=dict)
    members: dict[Key, dict[Any, bool]] = field(default_factory=dict)
    funcs: dict[tuple[str, str], bool] = field(default_factory=dict)
    lengths: dict[Key, int] = field(default_factory=dict)
    holds: dict[Key, dict[Key, bool]] = field(default_factory=dict)
    """Whether each list holds a value of the call (`args.iban in known.ibans`), by the
    list and the value."""
    session: dict[str, Any] = field(default_factory=dict)
    """Session state by the term's canonical form (smt_session.SESSION): a boolean, a number,
    or the items of an `urls`/`hosts`/`emails` term."""


def _quoted(session: dict[str, Any]) -> set[Key]:
    """The call's values whose provenance the session state is about (`args.iban from …`)."""
    out: set[Key] = set()
    for key in session:
        term = term_of(key)
        if isinstance(term, m.Provenance) and isinstance(term.value, m.Path):
            out.add((term.value.root, *term.value.parts))
    return out


class Assembler:
    """Turns a model's reading into a `Call` to one tool."""

    def __init__(self, spec: m.Spec, tool: m.Tool, reading: Reading, absent: set[Key]) -> None:
        self.spec, self.tool, self.r, self.absent = spec, tool, reading, absent
        self.quoted = _quoted(reading.session)

    def quotable(self, key: Key, f: m.Field | None, name: str) -> Any:
        """For a value only provenance reads, one a session can quote (an id-like text, a
        number of four digits), or None: a short sample (`x`, `0`) is found in no message."""
        if key not in self.quoted or f is None or f.default is not None:
            return None
        if f.pattern is not None or f.min is not None or f.max is not None:
            return None
        return {"string": f"{key[-1]}-sample-1", "int": 1234}.get(name)

    def is_present(self, key: Key, always: bool) -> bool:
        if key in self.absent:
            return False
        return always or self.r.present.get(key, False)

    def typed(self, key: Key, f: m.Field | None, t: m.Type) -> Any:
        name = t.name
        raw = self.r.values.get(key, {})
        if name == "enum" and "enum" in raw and raw["enum"] is not None:
            return t.values[raw["enum"]] if 0 <= raw["enum"] < len(t.values) else t.values[0]
        if name in ("string", "url", "path") and raw.get("str") is not None:
            return raw["str"]
        if not raw and (quoted := self.quotable(key, f, name)) is not None:
            return quoted
        if name == "int" and raw.get("int") is not None:
            return raw["int"]
        if name == "duration" and raw.get("int") is not None:
            return format_duration(int(raw["int"]))
        if name == "float" and raw.get("real") is not None:
            return float(raw["real"])
        if name == "bool" and raw.get("bool") is not None:
            return raw["bool"]
        if name == "list":
            return self.list_value(key, f, t)
        if name == "object":
            return self.fields(key, t.fields)
        if name == "map":
            return self.untyped_children(key, t.item)
        return sample_value(f, t)

    def list_value(self, key: Key, f: m.Field | None, t: m.Type) -> list[Any]:
        members = self.r.members.get(key, {})
        items: list[Any] = [w for w, yes in members.items() if yes]
        if key == ("actor", "roles"):
            role = self.actor_role()
            items = [role, *[i for i in items if i != role]]
        for value_key, held in sorted(self.r.holds.get(key, {}).items()):
            value = self.value_of(value_key) if held else None
            if value is not None and value not in items:
                items.append(value)
        count = int(f.min) if f is not None and f.min is not None else 0
        count = max(count, self.r.lengths.get(key, 0))
        n = 0
        while len(items) < count:
            n += 1
            # named after its list, so two lists' items are different values (provenance
            # reads each value, and one list's item must not answer for another's)
            filler = f"{key[-1]}-item-{n}"
            if filler not in members:
                items.append(filler)
        return items

    def value_of(self, key: Key) -> Any:
        """The value of the call at `key`, as the witness gives it (None: it has none)."""
        if key == ("actor", "role"):
            return self.actor_role()
        if key[0] == "args":
            fields, found = self.tool.input.fields, None
            for part in key[1:]:
                found = next((g for g in fields if g.name == part), None)
                if found is None:
                    return None
                fields = found.type.fields
            return None if found is None else self.typed(key, found, found.type)
        if key[0] == "fact" and len(key) == 2 and key[1] in self.spec.facts:
            return self.typed(key, None, self.spec.facts[key[1]].type)
        known = BUILTINS.get(key[:2]) if len(key) == 2 else None
        if known is not None:
            return self.typed(key, None, known[0])
        return self.untyped(key)

    def actor_role(self) -> str:
        """`actor.role`: as the model reads it, or `member` when no rule reads it."""
        role = self.r.values.get(("actor", "role"), {}).get("str")
        return "member" if role is None else str(role)

    def fields(self, prefix: Key, fields: tuple[m.Field, ...]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields:
            key = (*prefix, f.name)
            always = not f.type.optional or f.default is not None
            read = self.is_read(key)
            if f.required or (always and read):
                if key not in self.absent:
                    out[f.name] = self.typed(key, f, f.type)
            elif not always and self.is_present(key, False):
                out[f.name] = self.typed(key, f, f.type)
        return out

    def is_read(self, key: Key) -> bool:
        r = self.r
        return (
            key in r.values
            or key in r.members
            or key in r.lengths
            or any(k[: len(key)] == key for k in r.present)
        )

    def untyped(self, key: Key) -> Any:
        raw = self.r.values.get(key, {})
        tag = self.r.tags.get(key)
        sort = ("str", "real", "bool", "other")[tag] if tag is not None and 0 <= tag < 4 else None
        if sort is None:
            sort = next((s for s in ("str", "real", "bool") if raw.get(s) is not None), "str")
        if sort == "other":
            members = self.r.members.get(key, {})
            return [w for w, yes in members.items() if yes]
        value = raw.get(sort)
        if value is None:
            return {"str": "x", "real": 0, "bool": False}[sort]
        return value

    def untyped_children(self, prefix: Key, item: m.Type | None) -> dict[str, Any]:
        """The present values under `prefix`, as nested records."""
        out: dict[str, Any] = {}
        keys = {
            k for k in (*self.r.present, *self.r.values, *self.r.members) if len(k) > len(prefix)
        }
        for key in sorted(k for k in keys if k[: len(prefix)] == prefix):
            if not self.is_present(key, False) and key not in self.r.values:
                continue
            if key in self.absent or self.r.present.get(key) is False:
                continue
            if key not in self.r.present and not self.typed_builtin(key):
                continue
            where = out
            for part in key[len(prefix) : -1]:
                nested = where.setdefault(part, {})
                if not isinstance(nested, dict):
                    break
                where = nested
            else:
                where[key[-1]] = self.value_at(key, item if len(key) == len(prefix) + 1 else None)
        return out

    def typed_builtin(self, key: Key) -> bool:
        known = BUILTINS.get(key[:2])
        return known is not None and known[1]

    def value_at(self, key: Key, item: m.Type | None) -> Any:
        known = BUILTINS.get(key[:2]) if len(key) == 2 else None
        if known is not None:
            return self.typed(key, None, known[0])
        if item is not None:
            return self.typed(key, None, item)
        return self.untyped(key)

    def call(self) -> Call:
        actor = self.untyped_children(("actor",), None)
        user = self.r.values.get(("actor", "user"), {}).get("str")
        actor["user"] = "u-1" if user is None else user
        actor["role"] = self.actor_role()
        if ("actor", "roles") in self.r.members:
            actor["roles"] = self.list_value(("actor", "roles"), None, m.Type(name="list"))
        facts: dict[str, Any] = {}
        for name, fact in self.spec.facts.items():
            key = ("fact", name)
            if not self.is_present(key, False):
                continue
            if fact.type.name in ("object", "map"):
                facts[name] = self.untyped_children(key, fact.type.item)
            else:
                facts[name] = self.typed(key, None, fact.type)
        connections = {n: v for (f, n), v in self.r.funcs.items() if f == "connected"}
        runtimes = {n: v for (f, n), v in self.r.funcs.items() if f == "running"}
        call = Call(
            tool=self.tool.id,
            args=self.fields(("args",), self.tool.input.fields),
            actor=actor,
            resource=self.untyped_children(("resource",), None),
            facts=facts,
            task=self.untyped_children(("task",), None),
            env=self.untyped_children(("env",), None),
            execution=self.untyped_children(("call",), None),
            connections=connections,
            runtimes=runtimes,
            session=dict(sorted(self.r.session.items())),
        )
        return self.without_absent_lists(call)

    def without_absent_lists(self, call: Call) -> Call:
        """The call without the state of a quantifier over a list it lacks: the runtime reads
        none (the quantifier holds for neither), so the witness carries none."""
        dropped = [
            key
            for key in call.session
            if isinstance(term := term_of(key), m.Quantified)
            and isinstance(term.over, m.Path)
            and term.over.root != "var"
            and not isinstance(read_value(self.spec, term.over, call), list)
        ]
        for key in dropped:
            del call.session[key]
        return call
