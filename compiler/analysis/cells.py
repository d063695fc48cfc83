"""Answering a partition exactly without z3, when its conditions are simple.

A partition (partition.py) is simple when every condition of its rules is `and`, `or` and `not`
over comparisons that each read one value of the call (two for `==`/`!=` between two texts)
against literals:

- a text (`string`, `url`, a built-in such as `actor.role`, or an untyped value such as
  `resource.tenant`) by `==`, `!=` and `in [...]` with texts, or by `==`/`!=` with another
  such value;
- an enum by `==`, `!=` and `in [...]` with its members;
- an `int` by `==`, `!=`, `<`, `<=`, `>`, `>=` with integers;
- a `bool` by `==`/`!=` with `true`/`false`, or alone;
- a `path` by `within` a normalized absolute path other than `/`;
- `args has f` for a field of the tool's input;
- the tool's own `risk`, `effects`, `tags`, `packs`, `id` and `kind` against literals (the
  same for every call);

for a tool whose risk and effects do not follow an operation, and fields without a pattern,
bounds or nested fields. Anything else is solved by z3 (solve.py), which is then loaded.

Each value then takes one of finitely many representatives that between them meet every cell
of what the comparisons can tell apart: absent (when a call may lack it), each literal it is
compared with, and enough fresh texts for every pattern of equality between the values compared
with each other; for an integer, each literal and its two neighbours; for a path, each base and
one path outside all of them. Values compared with each other form one group whose
representatives are taken together; groups are independent. Every combination of the groups'
representatives is a call, assembled as a z3 model's would be (assemble.py) and judged by the
reference evaluator (concrete.py), so the meaning of a condition is the one every witness is
re-judged by. The questions of solve.py are then read off the rules each call matches: exact
answers (a cell no combination meets holds no call), and the first call in a fixed order as the
witness, so witnesses are deterministic.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harnessc.runtime import model as m
from harnessc.runtime.model.semantics import normalize_path

from .assemble import Assembler, Reading
from .concrete import ABSENT, BUILTINS, Call, holds_for, rule_matches
from .partition import Absent, Answers, Example, _selected, beaten_by, winner

__all__ = ["MAX_CALLS", "solve_simply"]

Key = tuple[str, ...]

MAX_CALLS = 4096
"""The most combinations a partition may have before it is left to z3."""
MAX_EVALUATIONS = 100_000
"""The most comparisons a partition may evaluate to find its groups' representatives (each
value of a group against each comparison that reads it) before it is left to z3: a condition
of 2,500 comparisons of one argument, each naming its own value, made 6 million of them (a
`check` of 110 s, where 5,000, past `MAX_CALLS`, went to z3 in 3 s)."""

_UNTYPED_ROOTS = ("actor", "resource", "task", "env", "call")
_ORDER = ("<", "<=", ">", ">=")
OUTSIDE_PATHS = ("/workspace/file.txt", "/")


class _Outside(Exception):
    """The partition is not simple: z3 answers it."""


@dataclass
class _Value:
    """One value of the call the conditions read."""

    key: Key
    kind: str  # text, enum, int, bool, path
    always: bool
    enum: tuple[str, ...] = ()
    literals: list[Any] = field(default_factory=list)


class _Reads:
    """The values a partition's conditions read, and which are compared with each other."""

    def __init__(self, tool: m.Tool) -> None:
        self.tool = tool
        self.values: dict[Key, _Value] = {}
        self.links: dict[Key, set[Key]] = {}
        self.atoms: list[tuple[m.Condition, set[Key]]] = []
        """Each comparison (or boolean value) and the values it reads."""
        self.reading: set[Key] = set()
        """The values read by the condition being walked."""

    def rule(self, condition: m.Condition) -> set[Key]:
        """Walk a rule's condition; the values it reads."""
        self.reading = set()
        self.condition(condition)
        return self.reading

    def value(self, path: object) -> _Value:
        if not isinstance(path, m.Path) or len(path.parts) != 1:
            raise _Outside
        key: Key = (path.root, path.parts[0])
        self.reading.add(key)
        found = self.values.get(key)
        if found is None:
            found = self.values[key] = self.describe(key)
        return found

    def describe(self, key: Key) -> _Value:
        root = key[0]
        if root == "args":
            f = next((g for g in self.tool.input.fields if g.name == key[1]), None)
            if f is None or f.pattern is not None or f.min is not None or f.max is not None:
                raise _Outside
            always = not f.type.optional or f.default is not None
            name = f.type.name
            kind = {"string": "text", "url": "text", "path": "path"}.get(name, name)
            if kind not in ("text", "path", "enum", "int", "bool"):
                raise _Outside
            return _Value(key, kind, always, tuple(f.type.values))
        known = BUILTINS.get(key)
        if known is not None:
            type_, always = known
            if type_.name != "string":
                raise _Outside
            return _Value(key, "text", always)
        if root in _UNTYPED_ROOTS:
            return _Value(key, "untyped", False)
        raise _Outside

    def condition(self, c: object) -> None:
        if isinstance(c, m.And | m.Or):
            for item in c.items:
                self.condition(item)
        elif isinstance(c, m.Not):
            self.condition(c.item)
        elif isinstance(c, m.Literal) and c.type == "bool":
            return
        elif isinstance(c, m.Compare):
            before = set(self.reading)
            self.reading = set()
            self.compare(c)
            self.atoms.append((c, self.reading))
            self.reading = self.reading | before
        elif isinstance(c, m.Path):
            if self.value(c).kind != "bool":
                raise _Outside
            self.atoms.append((c, {(c.root, c.parts[0])}))
        else:
            raise _Outside

    def compare(self, c: m.Compare) -> None:
        if isinstance(c.left, m.Path) and c.left.root == "tool":
            self.tool_fact(c)
            return
        if c.op == "has":
            if not (
                isinstance(c.left, m.Path)
                and c.left.root == "args"
                and not c.left.parts
                and isinstance(c.right, m.EnumMember)
            ):
                raise _Outside
            self.value(m.Path(root="args", parts=(c.right.name,)))
            return
        v = self.value(c.left)
        if c.op == "in":
            if not isinstance(c.right, m.ListValue):
                raise _Outside
            for item in c.right.items:
                self.literal(v, item)
        elif c.op in ("==", "!="):
            if isinstance(c.right, m.Path):
                w = self.value(c.right)
                if not {v.kind, w.kind} <= {"text", "untyped"}:
                    raise _Outside
                self.links.setdefault(v.key, set()).add(w.key)
                self.links.setdefault(w.key, set()).add(v.key)
            else:
                self.literal(v, c.right)
        elif c.op in _ORDER:
            if v.kind != "int":
                raise _Outside
            self.literal(v, c.right)
        elif c.op == "within":
            if v.kind != "path" or not isinstance(c.right, m.Literal) or c.right.type != "string":
                raise _Outside
            base = c.right.value
            if not isinstance(base, str) or base == "/" or normalize_path(base) != base:
                raise _Outside
            if not base.startswith("/"):
                raise _Outside
            v.literals.append(base)
        else:
            raise _Outside

    def tool_fact(self, c: m.Compare) -> None:
        """A comparison of the tool's registry entry with a literal: the same for every call
        when the tool's risk and effects do not follow an operation."""
        if self.tool.operations or not isinstance(c.left, m.Path) or len(c.left.parts) != 1:
            raise _Outside
        what, right = c.left.parts[0], c.right
        word: object = right.name if isinstance(right, m.EnumMember) else None
        if isinstance(right, m.Literal) and right.type == "string":
            word = right.value
        if what == "risk" and c.op in ("==", "!=", *_ORDER) and word in m.RISK_LEVELS:
            return
        if what == "effects" and c.op == "has" and word in m.EFFECTS:
            return
        if what in ("tags", "packs") and c.op == "has" and isinstance(word, str):
            return
        if what in ("id", "kind") and c.op in ("==", "!=") and isinstance(word, str):
            return
        raise _Outside

    @staticmethod
    def literal(v: _Value, node: object) -> None:
        """A literal `v` is compared with, of the kind the procedure handles for it."""
        if v.kind in ("text", "untyped", "enum"):
            if isinstance(node, m.EnumMember):
                word: Any = node.name
            elif isinstance(node, m.Literal) and node.type == "string":
                word = node.value
            else:
                raise _Outside
        elif v.kind == "int":
            if not (isinstance(node, m.Literal) and node.type == "int"):
                raise _Outside
            word = node.value
        elif v.kind == "bool":
            if not (isinstance(node, m.Literal) and node.type == "bool"):
                raise _Outside
            word = node.value
        else:
            raise _Outside
        if word not in v.literals:
            v.literals.append(word)

    def groups(self) -> list[list[_Value]]:
        """The values, in groups of those compared with each other, in a fixed order."""
        seen: set[Key] = set()
        out: list[list[_Value]] = []
        for key in sorted(self.values):
            if key in seen:
                continue
            todo, group = [key], []
            seen.add(key)
            while todo:
                k = todo.pop()
                group.append(k)
                for other in sorted(self.links.get(k, ())):
                    if other not in seen:
                        seen.add(other)
                        todo.append(other)
            out.append([self.values[k] for k in sorted(group)])
        return out


def _fresh(group: list[_Value], taken: set[Any]) -> list[str]:
    """Texts no condition mentions, one for each value of the group (named after it, as the
    texts of a z3 model are)."""
    out: list[str] = []
    for v in group:
        n = 1
        while (text := f"{v.key[-1]}-{n}") in taken or text in out:
            n += 1
        out.append(text)
    return out


def _choices(v: _Value, pool: list[str]) -> list[Any]:
    """The representatives of one value, the plainest first (absent, then fresh values)."""
    out: list[Any] = [] if v.always else [ABSENT]
    if v.kind in ("text", "untyped"):
        out += pool
    elif v.kind == "enum":
        out += list(v.enum)
    elif v.kind == "bool":
        out += [False, True]
    elif v.kind == "int":
        near = {0} | {n + d for n in v.literals for d in (-1, 0, 1)}
        out += sorted(near, key=lambda n: (abs(n), n < 0))
    elif v.kind == "path":
        outside = next(
            p for p in OUTSIDE_PATHS if not any(p == b or p.startswith(b + "/") for b in v.literals)
        )
        out += [outside, *v.literals]
    return out


def _set(reading: Reading, v: _Value, value: Any) -> None:
    key = v.key
    if not v.always:
        reading.present[key] = value is not ABSENT
    if value is ABSENT:
        return
    if v.kind == "untyped":
        reading.tags[key] = 0
        reading.values[key] = {"str": value}
    elif v.kind == "enum":
        reading.values[key] = {"enum": v.enum.index(value)}
    else:
        reading.values[key] = {{"text": "str", "path": "str"}.get(v.kind, v.kind): value}


Choice = tuple[tuple[_Value, Any], ...]
"""A value for each member of a group."""
Combination = tuple[Choice, ...]
"""A choice for each group."""
Rows = list[tuple[Combination, tuple[bool, ...]]]


class _Partition:
    """The groups' representatives, and which rules each combination of them matches."""

    def __init__(self, spec: m.Spec, tool: m.Tool, rules: Sequence[m.Rule], reads: _Reads) -> None:
        self.spec, self.tool, self.rules = spec, tool, rules
        self.groups = reads.groups()
        where = {v.key: g for g, group in enumerate(self.groups) for v in group}
        taken = {w for group in self.groups for v in group for w in v.literals}
        self.raw: list[list[Choice]] = []
        for group in self.groups:
            texts = [w for v in group for w in v.literals if isinstance(w, str)]
            pool = _fresh(group, taken) + list(dict.fromkeys(texts))
            each = [_choices(v, pool) for v in group]
            if math.prod(len(c) for c in each) > MAX_CALLS:
                raise _Outside
            choices = itertools.product(*each)
            self.raw.append([tuple(zip(group, c, strict=True)) for c in choices])
        atoms: list[list[m.Condition]] = [[] for _ in self.groups]
        for atom, keys in reads.atoms:
            if keys:  # else a fact of the tool, the same for every call
                atoms[where[next(iter(keys))]].append(atom)
        if sum(len(raw) * len(found) for raw, found in zip(self.raw, atoms, strict=True)) > (
            MAX_EVALUATIONS
        ):
            raise _Outside
        self.calls: dict[tuple[int, ...], Call] = {}
        self.reps = [self.distinct(g, atoms[g]) for g in range(len(self.groups))]
        self.memo: dict[tuple[int, ...], bool] = {}
        self.rule_groups: list[tuple[int, ...] | None] = []
        """The groups each rule reads; None for a rule whose selectors miss the tool."""
        self.questions = 0

    def distinct(self, g: int, atoms: list[m.Condition]) -> list[Choice]:
        """The group's representatives that some comparison tells apart, the first of each."""
        seen: set[tuple[bool, ...]] = set()
        out: list[Choice] = []
        for choice in self.raw[g]:
            call = self.call((choice,))
            truth = tuple(holds_for(self.spec, atom, call) for atom in atoms)
            if truth not in seen:
                seen.add(truth)
                out.append(choice)
        return out

    def size(self) -> int:
        """How many combinations the table goes through."""
        return math.prod(len(options) for options in self.reps)

    def call(self, combination: Sequence[Choice]) -> Call:
        """The call of the chosen values (the others as a z3 model without them gives them)."""
        key = tuple(id(c) for c in combination)
        found = self.calls.get(key)
        if found is None:
            reading = Reading()
            for choice in combination:
                for v, value in choice:
                    _set(reading, v, value)
            found = self.calls[key] = Assembler(self.spec, self.tool, reading, set()).call()
        return found

    def matches(self, p: int, combination: Combination) -> bool:
        """Whether rule p matches the combination's call (judged on the values it reads)."""
        groups = self.rule_groups[p]
        if groups is None:
            return False
        key = (p, *(id(combination[g]) for g in groups))
        found = self.memo.get(key)
        if found is None:
            call = self.call([combination[g] for g in groups])
            found = self.memo[key] = rule_matches(self.spec, self.rules[p], call)
        return found

    def table(self) -> Rows:
        """The first combination of each distinct pattern of matches, in order."""
        seen: set[tuple[bool, ...]] = set()
        rows: Rows = []
        for combination in itertools.product(*self.reps):
            matched = tuple(self.matches(p, combination) for p in range(len(self.rules)))
            if matched not in seen:
                seen.add(matched)
                rows.append((combination, matched))
        return rows

    def first(self, rows: Rows, yes: Sequence[int], no: Sequence[int]) -> Example | None:
        """The first call that the rules at `yes` all match and those at `no` all miss."""
        self.questions += 1
        for combination, matched in rows:
            if all(matched[p] for p in yes) and not any(matched[q] for q in no):
                return Example(self.call(combination), winner(self.rules, matched))
        return None

    def absent(self, p: int, key: Key) -> Example | None:
        """A call where rule p does not fire with `key` absent but does with some value there
        (the others the same); the call has the value absent."""
        self.questions += 1
        where = next(g for g, group in enumerate(self.groups) if any(v.key == key for v in group))
        options: list[list[Choice]] = [list(r) for r in self.reps]
        for choice in self.raw[where]:
            fixed = {v.key: value for v, value in choice}
            if fixed[key] is not ABSENT:
                continue
            present = [
                c
                for c in self.raw[where]
                if all(
                    value is not ABSENT if v.key == key else value is fixed[v.key] for v, value in c
                )
            ]
            options[where] = [choice]
            for combination in itertools.product(*options):
                if self.matches(p, combination):
                    continue
                for other in present:
                    there = (*combination[:where], other, *combination[where + 1 :])
                    if self.matches(p, there):
                        matched = tuple(
                            self.matches(q, combination) for q in range(len(self.rules))
                        )
                        return Example(self.call(combination), winner(self.rules, matched))
        return None


def solve_simply(
    spec: m.Spec,
    tool: m.Tool,
    rules: Sequence[m.Rule],
    absent_keys: Sequence[Sequence[Key]],
    wants_default: bool,
) -> Answers | None:
    """The partition's answers as `solve.solve_partition` gives them, or None when it is not
    simple (module docstring)."""
    reads = _Reads(tool)
    selected: list[bool] = []
    reading: list[set[Key] | None] = []
    try:
        for rule in rules:
            chosen = _selected(rule, tool)
            if not isinstance(chosen, bool):
                raise _Outside  # risk or effects following the call's operation
            selected.append(chosen)
            if chosen:
                reading.append(set() if rule.condition is None else reads.rule(rule.condition))
            else:
                reading.append(None)
        for p, keys in enumerate(absent_keys):
            if selected[p] and rules[p].effect in ("deny", "ask"):
                for key in keys:
                    if key not in reads.values:
                        raise _Outside
    except _Outside:
        return None
    try:
        part = _Partition(spec, tool, rules, reads)
    except _Outside:
        return None
    if part.size() > MAX_CALLS:
        return None
    where = {v.key: g for g, group in enumerate(part.groups) for v in group}
    part.rule_groups = [
        None if keys is None else tuple(sorted({where[k] for k in keys})) for keys in reading
    ]
    rows = part.table()
    count = len(rules)
    answers = Answers([False] * count, [None] * count, [None] * count)
    for p in range(count):
        beaten = beaten_by(rules, p)
        won = part.first(rows, [p], beaten)
        if won is not None:
            answers.wins[p] = won
            continue
        answers.matches[p] = part.first(rows, [p], [])
        covers = [q for q in beaten if part.first(rows, [p], [q]) is None]
        answers.covers[p] = covers
        # q matches every call p matches: they differ only on a call q matches and p misses
        answers.equals[p] = [
            q
            for q in covers
            if rules[q].effect != rules[p].effect and part.first(rows, [q], [p]) is None
        ]
    for p, keys in enumerate(absent_keys):
        if rules[p].effect in ("deny", "ask") and selected[p]:
            for key in keys:
                found = part.absent(p, key)
                if found is not None:
                    answers.absent.append(Absent(p, key, found))
    if wants_default:
        answers.default = part.first(rows, [], range(count))
    answers.decided = part.questions
    return answers
