"""Solving one partition (partition.py) with z3: its encoding, its questions, its answers.

The rules of one tool's bucket are encoded once over one symbolic call (smt.py), in a fresh z3
context of their own, so a partition's answers depend on nothing but its key — the same
answers whether the partition is solved alone, among others, or read from the cache. One
solver holds the encoding; each question is asked under `push`/`pop`, with a time budget
(budget.py). The questions:

- for each rule, a call it wins (it matches, no stronger rule matches, no earlier rule of its
  effect matches); failing that, a call it matches, and which rules that beat it match every
  call it matches (and of those, which match exactly its calls);
- for each DENY or ASK and each value it reads that the tool's calls may lack, a call where it
  fires for some value but not when the value is absent;
- when the policy's default is `allow`, a call no rule matches.

A question z3 gives up on is an `Undecided` answer, never a guess.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import z3
from harnessc.runtime import model as m

from .concrete import STRENGTH, Call, format_duration
from .examples import NoExampleError, forget_examples, string_example
from .partition import Absent, Answers, Example, Undecided
from .smt import BUILTINS, Encoder, fresh_context
from .smt_session import SESSION
from .smt_terms import Key, Registry, conj, negate, to_z3
from .text import term_of

__all__ = ["Questions", "sample_value", "solve_partition"]

# ---------------------------------------------------------------------------------------------
# Reading a call back out of a model


def _z3_value(value: Any) -> Any:
    if z3.is_true(value):
        return True
    if z3.is_false(value):
        return False
    if z3.is_int_value(value):
        return value.as_long()
    if z3.is_rational_value(value):
        fraction = value.as_fraction()
        return int(fraction) if fraction.denominator == 1 else float(fraction)
    if z3.is_string_value(value):
        return value.as_string()
    return None


def _sample_string(f: m.Field | None) -> str:
    low = int(f.min) if f is not None and f.min is not None else 0
    high = int(f.max) if f is not None and f.max is not None else None
    pattern = f.pattern if f is not None else None
    return _sample_pattern(pattern, low, high)


def _sample_pattern(pattern: str | None, low: int, high: int | None) -> str:
    fallback = "x" * max(low, 1) if high is None or high >= 1 else ""
    if pattern is None:
        return fallback
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
    return {g.name: sample_value(g, g.type) for g in t.fields if g.required}


@dataclass
class _Reading:
    """The call a model describes, before it is assembled into records."""

    present: dict[Key, bool] = field(default_factory=dict)
    values: dict[Key, dict[str, Any]] = field(default_factory=dict)
    tags: dict[Key, int] = field(default_factory=dict)
    members: dict[Key, dict[Any, bool]] = field(default_factory=dict)
    funcs: dict[tuple[str, str], bool] = field(default_factory=dict)
    lengths: dict[Key, int] = field(default_factory=dict)
    session: dict[str, Any] = field(default_factory=dict)
    """Session state by the term's canonical form (smt_session.SESSION): a boolean, a number,
    or the items of an `urls`/`hosts`/`emails` term."""


def _read_model(model: z3.ModelRef, registry: Registry) -> _Reading:
    out = _Reading()
    for decl in model.decls():
        info = registry.get(decl.name())
        if info is None or info.alt:
            continue
        value = _z3_value(model[decl])
        if info.role == SESSION:
            out.session[info.key[1]] = value
        elif info.role == "in" and info.key[0] == "extract":
            if value:
                out.session.setdefault(info.key[1], []).append(info.detail)
        elif info.role == "len":
            out.lengths[info.key] = int(value)
        elif info.role == "has":
            out.present[info.key] = bool(value)
        elif info.role == "v":
            out.values.setdefault(info.key, {})[info.detail] = value
        elif info.role == "tag":
            out.tags[info.key] = value
        elif info.role == "in":
            out.members.setdefault(info.key, {})[info.detail] = bool(value)
        elif info.role == "fn":
            out.funcs[(info.key[0], info.key[1])] = bool(value)
    return out


def _texts_for(reading: _Reading, texts: dict[int, str]) -> None:
    """Strings encoded by number become texts: a known one, or a fresh one for each other
    number (distinct numbers, distinct texts, none equal to a known one)."""
    fresh: dict[int, str] = {}
    known = set(texts.values())
    for key in sorted(reading.values):
        raw = reading.values[key]
        if "sym" not in raw or raw["sym"] is None:
            continue
        n = raw.pop("sym")
        if n in texts:
            raw["str"] = texts[n]
            continue
        if n not in fresh:
            count = 1
            while (text := f"{key[-1]}-{count}") in known:
                count += 1
            known.add(text)
            fresh[n] = text
        raw["str"] = fresh[n]


def _quoted(session: dict[str, Any]) -> set[Key]:
    """The call's values whose provenance the session state is about (`args.iban from …`)."""
    out: set[Key] = set()
    for key in session:
        term = term_of(key)
        if isinstance(term, m.Provenance) and isinstance(term.value, m.Path):
            out.add((term.value.root, *term.value.parts))
    return out


class _Assembler:
    """Turns a model's reading into a `Call` to one tool."""

    def __init__(self, spec: m.Spec, tool: m.Tool, reading: _Reading, absent: set[Key]) -> None:
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

    def actor_role(self) -> str:
        return str(self.r.values.get(("actor", "role"), {}).get("str") or "member")

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
        actor["user"] = self.r.values.get(("actor", "user"), {}).get("str") or "u-1"
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
        return Call(
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


# ---------------------------------------------------------------------------------------------
# One partition


class Questions:
    """One solver over what an encoder has encoded of one symbolic call to `tool`: questions
    asked under push/pop within a budget (`check`), and the call a model describes (`call`).
    The encoding must be complete before it is made (its domain is added once)."""

    def __init__(
        self,
        spec: m.Spec,
        tool: m.Tool,
        enc: Encoder,
        registry: Registry,
        timeout_ms: int,
        rlimit: int,
    ) -> None:
        self.spec = spec
        self.tool = tool
        self.enc = enc
        self.registry = registry
        self.solver = z3.SimpleSolver()
        self.solver.set("timeout", timeout_ms)
        if rlimit:
            self.solver.set("rlimit", rlimit)
        self.solver.add(*self.enc.domain)
        self.added = len(self.enc.domain)
        self.queries = 0
        self.reason = ""
        """Why z3 gave up on the last question that returned False."""

    def check(self, *constraints: Any, nice: bool = True) -> z3.ModelRef | bool | None:
        """A model, None when unsatisfiable, or False when z3 gave up (`reason` says why).

        With `nice`, the encoder's preferences are tried first, for readable witnesses.
        """
        self.queries += 1
        extra = self.enc.domain[self.added :]
        self.solver.push()
        self.solver.add(*extra, *(to_z3(c) for c in constraints))
        result = z3.unknown
        if nice and self.enc.nice:
            self.solver.push()
            self.solver.add(*self.enc.nice)
            result = self.solver.check()
            model = self.solver.model() if result == z3.sat else None
            self.solver.pop()
        if result != z3.sat:
            self.queries += 1 if nice and self.enc.nice else 0
            result = self.solver.check()
            model = self.solver.model() if result == z3.sat else None
        if result == z3.unknown:
            self.reason = self.solver.reason_unknown()
        self.solver.pop()
        if result == z3.unknown:
            return False
        return model

    def call(self, model: z3.ModelRef, absent: Iterable[Key] = ()) -> Call:
        reading = _read_model(model, self.registry)
        _texts_for(reading, self.enc.texts())
        for name, var in self.enc.session_vars():
            key = self.registry[name].key[1]
            if key not in reading.session:  # a term no constraint of the query mentions
                reading.session[key] = _z3_value(model.eval(var, model_completion=True))
        return _Assembler(self.spec, self.tool, reading, set(absent)).call()


class _Bucket(Questions):
    """The rules that can match one tool, encoded over one symbolic call, and a solver."""

    def __init__(
        self, spec: m.Spec, tool: m.Tool, rules: Sequence[m.Rule], timeout_ms: int, rlimit: int
    ) -> None:
        self.rules = rules
        registry: Registry = {}
        enc = Encoder(spec, tool, registry)
        enc.prepare(rules)
        self.match: list[Any] = []
        self.inexact: list[bool] = []
        for rule in rules:
            before = len(enc.inexact)
            self.match.append(enc.rule_match(rule))
            self.inexact.append(len(enc.inexact) > before)
        super().__init__(spec, tool, enc, registry, timeout_ms, rlimit)

    def beaten_by(self, p: int) -> list[int]:
        rules = self.rules
        effect = STRENGTH[rules[p].effect]
        return [
            q
            for q in range(len(rules))
            if STRENGTH[rules[q].effect] > effect or (rules[q].effect == rules[p].effect and q < p)
        ]

    def wins(self, p: int) -> Any:
        return conj(self.match[p], *(negate(self.match[q]) for q in self.beaten_by(p)))

    def winner(self, model: z3.ModelRef) -> int | None:
        """The position of the rule that wins the model's call, by the encoding's meaning."""
        rules = self.rules
        matched = [
            p
            for p in range(len(rules))
            if z3.is_true(model.eval(to_z3(self.match[p]), model_completion=True))
        ]
        if not matched:
            return None
        strongest = max(STRENGTH[rules[p].effect] for p in matched)
        return next(p for p in matched if STRENGTH[rules[p].effect] == strongest)

    def example(self, model: z3.ModelRef, absent: Iterable[Key] = ()) -> Example:
        return Example(self.call(model, absent), self.winner(model))


@dataclass
class _Solving:
    """The answers of one partition as they are found."""

    bucket: _Bucket
    answers: Answers
    undecided: list[Undecided] = field(default_factory=list)

    def ask(self, position: int | None, what: str, *constraints: Any, nice: bool = True) -> Any:
        """`_Bucket.check`, noting a question z3 gave up on."""
        found = self.bucket.check(*constraints, nice=nice)
        if found is False:
            self.answers.undecided.append(Undecided(position, what, self.bucket.reason))
            if position is not None and what in ("win", "match"):
                self.answers.inexact[position] = True
        return found


def solve_partition(
    spec: m.Spec,
    tool: m.Tool,
    rules: Sequence[m.Rule],
    absent_keys: Sequence[Sequence[Key]],
    wants_default: bool,
    timeout_ms: int,
    rlimit: int = 0,
) -> Answers:
    """Every answer of the partition of `rules` over calls to `tool` (module docstring).

    `absent_keys[p]`: the values rule p reads without a `has` guard that calls to the tool may
    lack (asked only of a DENY or ASK). Each question may take `timeout_ms`, and `rlimit` of
    z3's resource units when not 0 (budget.py).
    """
    fresh_context()
    forget_examples()
    bucket = _Bucket(spec, tool, rules, timeout_ms, rlimit)
    count = len(rules)
    answers = Answers(list(bucket.inexact), [None] * count, [None] * count)
    solving = _Solving(bucket, answers)
    for p in range(count):
        _win_or_lose(solving, p)
    for p, keys in enumerate(absent_keys):
        if rules[p].effect in ("deny", "ask"):
            for key in keys:
                _absent(solving, p, key)
    if wants_default:
        found = solving.ask(None, "default", *(negate(match) for match in bucket.match))
        if isinstance(found, z3.ModelRef):
            answers.default = bucket.example(found)
    answers.queries = bucket.queries
    return answers


def _win_or_lose(solving: _Solving, p: int) -> None:
    bucket, answers = solving.bucket, solving.answers
    found = solving.ask(p, "win", bucket.wins(p))
    if isinstance(found, z3.ModelRef):
        answers.wins[p] = bucket.example(found)
        return
    matched = solving.ask(p, "match", bucket.match[p])
    if isinstance(matched, z3.ModelRef):
        answers.matches[p] = bucket.example(matched)
    mine = bucket.match[p]
    covers = [
        q
        for q in bucket.beaten_by(p)
        if solving.ask(p, "beaten", mine, negate(bucket.match[q]), nice=False) is None
    ]
    answers.covers[p] = covers
    answers.equals[p] = [
        q
        for q in covers
        if bucket.rules[q].effect != bucket.rules[p].effect
        and solving.ask(p, "twin", z3.Xor(to_z3(mine), to_z3(bucket.match[q])), nice=False) is None
    ]


def _absent(solving: _Solving, p: int, key: Key) -> None:
    """Does the rule fire for some value of `key`, but not when `key` is absent?"""
    bucket = solving.bucket
    enc, rule = bucket.enc, bucket.rules[p]
    enc.override = {key: False}
    when_absent = enc.rule_match(rule)
    enc.override = {key: True}
    when_present = enc.rule_match(rule)
    enc.override = {}
    # usually unsatisfiable: look for a readable example only once one exists
    found = solving.ask(p, "absent", negate(when_absent), when_present, nice=False)
    if not isinstance(found, z3.ModelRef):
        return
    model = solving.ask(p, "absent", negate(when_absent), when_present)
    if isinstance(model, z3.ModelRef):
        solving.answers.absent.append(Absent(p, key, bucket.example(model, absent=[key])))
