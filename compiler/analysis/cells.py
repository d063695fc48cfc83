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
- a text (`string`, `url`, a built-in) or a `path` compared with no other value, by
  `startswith` and `endswith` with texts (for a path, texts with no `.`, `..` or empty segment
  inside);
- `args has f` for a field of the tool's input (an argument the schema lacks is absent, but
  for the question whether a rule fires without it: an untyped value there), `resource has f`
  (and the other roots of untyped values, and `actor`) for any f;
- the tool's own `risk`, `effects`, `tags`, `packs`, `id` and `kind` against literals (the
  same for every call);
- session terms, each a free value of its type as the encoding has them (smt_session.py):
  `x from K` (for a value above; false when it is absent) and `called`/`succeeded`/`seen` as
  booleans, `count(…)` as an integer (at least 0, or 1 when this call is one it counts) and
  `sum(…)` as a number (at least 0 when its amounts are), compared with literals, related as
  ledger.py relates them (the provenance terms of one value; one family's windows); `all`/`any
  x in args.L` as a boolean beside the list, of which it tells apart only the length (none,
  one, more) — but not a `count` whose `when` this call must meet, nor a `sum` of non-negative
  amounts this call adds to, nor a list with bounds, `len` and extractions;

for a tool whose risk and effects do not follow an operation, and fields without a pattern,
bounds (but an `int`'s) or nested fields. Anything else is solved by z3 (solve.py), which is
then loaded.

Each value then takes one of finitely many representatives that between them meet every cell
of what the comparisons can tell apart: absent (when a call may lack it), each literal it is
compared with, and enough fresh texts for every pattern of equality between the values compared
with each other; for an integer, each literal and its two neighbours; for a sum, each literal,
a point between two neighbours and one past either end; for a path, each base and
one path outside all of them; for a value compared by prefixes or suffixes, the texts it is
compared with and, for each prefix a and suffix b of them, a + x + b for a character x that
extends neither (`_affixed`). Values compared with each other (or related: a provenance term
and its value, the terms a ledger relates, whose counts and sums take their representatives
from the same points) form one group whose representatives are taken together, the
combinations that break a relation left out; groups are independent. Every combination of
the groups' representatives is a call, assembled as a z3 model's would be (assemble.py) and
judged by the reference evaluator (concrete.py), so the meaning of a condition is the one every
witness is re-judged by. The questions of solve.py are then read off the rules each call
matches: exact answers (a cell no combination meets holds no call), and the first call in a
fixed order as the witness, so witnesses are deterministic.
"""

from __future__ import annotations

import itertools
import math
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harnessc.runtime import model as m
from harnessc.runtime.model.semantics import normalize_path, selects

from .assemble import Assembler, Reading
from .concrete import ABSENT, BUILTINS, Call, canonical, holds_for, rule_matches
from .ledger import (
    Quantifying,
    Relation,
    non_negative,
    provenance_relation,
    quantified_holds,
    source_id,
    wider,
    window_family,
)
from .partition import Absent, Answers, Example, beaten_by, selected_as, winner

__all__ = ["MAX_CALLS", "MAX_TABLE", "solve_simply"]

Key = tuple[str, ...]

MAX_CALLS = 4096
"""The most combinations of one group's values before its partition is left to z3."""
MAX_TABLE = 65_536
"""The most combinations of the groups' representatives a partition may have before it is left
to z3: `_Partition.table` goes through them group by group, keeping one partial combination per
signature, so its work grows with the signatures, not with this product."""
MAX_EVALUATIONS = 100_000
"""The most comparisons a partition may evaluate to find its groups' representatives (each
value of a group against each comparison that reads it) before it is left to z3: a condition
of 2,500 comparisons of one argument, each naming its own value, made 6 million of them (a
`check` of 110 s, where 5,000, past `MAX_CALLS`, went to z3 in 3 s)."""

MAX_AFFIX = 200
"""The longest text a `startswith`/`endswith` the procedure answers may compare with."""
_FREE_CHARS = "xyzqjkw0123456789"

_UNTYPED_ROOTS = ("actor", "resource", "task", "env", "call")
SESSION = "session"
"""The root of a session term's key: `(SESSION, canonical form)`, as the encoding's."""
QUOTABLE_NUMBER = 1234
"""The number a value only provenance reads takes (solve.py `QUOTABLE_NUMBER`): four digits,
so a message can quote it."""
_ORDER = ("<", "<=", ">", ">=")
OUTSIDE_PATHS = ("/workspace/file.txt", "/")


class _Outside(Exception):
    """The partition is not simple: z3 answers it."""


@dataclass
class _Value:
    """One value of the call the conditions read."""

    key: Key
    kind: str  # text, untyped, enum, int, real, bool, path
    always: bool
    enum: tuple[str, ...] = ()
    literals: list[Any] = field(default_factory=list)
    prefixes: list[str] = field(default_factory=list)
    """Texts a `startswith` compares it with (a `within` base B adds B and B + "/")."""
    suffixes: list[str] = field(default_factory=list)
    """Texts an `endswith` compares it with."""
    low: int | None = None
    high: int | None = None
    """The bounds of an `int` field (`min`, `max`)."""
    missing: bool = False
    """An argument the tool's schema does not have: absent from its calls, but present (as an
    untyped value, which is how z3 reads it) for the question whether a rule fires without it
    but would with it."""
    term: str | None = None
    """A session term's canonical form: its value is the session's, never absent."""
    quoted: bool = False
    """A value a provenance term is about: it takes a text or number a message can quote."""


Related = tuple[Relation | Quantifying, Key, Key]
"""A relation between two values of one group: two session terms' (ledger.py), or a
quantifier's and its list's (`Quantifying`)."""


class _Reads:
    """The values a partition's conditions read, and which are compared with each other."""

    def __init__(self, spec: m.Spec, tool: m.Tool) -> None:
        self.spec, self.tool = spec, tool
        self.values: dict[Key, _Value] = {}
        self.links: dict[Key, set[Key]] = {}
        """Texts compared with each other by `==`/`!=`."""
        self.ties: dict[Key, set[Key]] = {}
        """Values in one group for another reason: a provenance term and its value, session
        terms a relation holds between."""
        self.relations: list[Related] = []
        self.provenance: dict[str, dict[tuple[str, str | None, bool], Key]] = {}
        """The provenance terms of each value (by its canonical form) by source, label, only."""
        self.windows: dict[str, dict[int | None, Key]] = {}
        """The history terms of one family (`ledger.window_family`) by window."""
        self.quantifiers: dict[str, dict[str, Key]] = {}
        """The `all` and `any` of one body over one list (by the `all` one's canonical form)."""
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
        if isinstance(path, m.History):
            return self.term(path)
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
            if f is None:  # absent from every call; present only as the absent question asks
                return _Value(key, "untyped", False, missing=True)
            name = f.type.name
            bounded = f.min is not None or f.max is not None
            if f.pattern is not None or (bounded and name != "int"):
                raise _Outside
            always = not f.type.optional or f.default is not None
            kind = {"string": "text", "url": "text", "path": "path"}.get(name, name)
            if kind not in ("text", "path", "enum", "int", "bool", "list"):
                raise _Outside
            low, high = _whole(f.min), _whole(f.max)
            return _Value(key, kind, always, tuple(f.type.values), low=low, high=high)
        known = BUILTINS.get(key)
        if known is not None:
            type_, always = known
            if type_.name != "string":
                raise _Outside
            return _Value(key, "text", always)
        if root in _UNTYPED_ROOTS:
            return _Value(key, "untyped", False)
        raise _Outside

    def term(self, node: m.History | m.Provenance | m.Quantified) -> _Value:
        """The value of a session term, keyed by its canonical form."""
        text = canonical(node)
        key: Key = (SESSION, text)
        self.reading.add(key)
        found = self.values.get(key)
        if found is None:
            found = self.values[key] = self.describe_term(node, key, text)
        return found

    def describe_term(
        self, node: m.History | m.Provenance | m.Quantified, key: Key, text: str
    ) -> _Value:
        """A session term as a free value of its type (a boolean; a count, never below 0; a
        sum), bound only by what the encoding binds it by (smt_session.py): the relations of
        ledger.py, and a `count` of what this call is counts at least 1. A sum that must be at
        least this call's amount, a count whose `when` reads this call, and a tool whose
        operation decides what it is (its risk and effects) are left to z3."""
        if isinstance(node, m.Provenance | m.Quantified):
            return _Value(key, "bool", True, term=text)
        if node.func in ("called", "succeeded", "seen"):
            self.window(node, key, "implies")
            return _Value(key, "bool", True, term=text)
        if self.tool.operations:
            raise _Outside
        this = any(selects(s, self.tool) for s in node.selectors)
        if node.func == "count":
            if this and node.where is not None:
                raise _Outside
            self.window(node, key, "at_most")
            return _Value(key, "int", True, term=text, low=1 if this else 0)
        if node.func != "sum":
            raise _Outside
        if not non_negative(self.spec, node):
            return _Value(key, "real", True, term=text)  # any number: nothing relates it
        f = node.field
        if this and node.where is None and f is not None and f.root == "args":
            raise _Outside
        self.window(node, key, "at_most")
        return _Value(key, "real", True, term=text, low=0)

    def window(self, term: m.History, key: Key, relation: Relation) -> None:
        """Relate a history term to the others of its family (`ledger.window_family`): the
        narrower window's value `relation` the wider's."""
        family = self.windows.setdefault(canonical(window_family(term)), {})
        if term.window_ms in family:
            return
        for other, known in family.items():
            narrow, wide = (key, known) if wider(other, term.window_ms) else (known, key)
            self.relations.append((relation, narrow, wide))
            self.tie(key, known)
        family[term.window_ms] = key

    def tie(self, a: Key, b: Key) -> None:
        self.ties.setdefault(a, set()).add(b)
        self.ties.setdefault(b, set()).add(a)

    def provenance_of(self, c: m.Provenance) -> None:
        """`value from source`: the value (false when absent) and the term's boolean, in one
        group with every other provenance term of the value, as ledger.py relates them."""
        if not isinstance(c.value, m.Path):
            raise _Outside
        v = self.value(c.value)
        if v.missing:
            raise _Outside
        v.quoted = True
        held = self.term(c)
        self.tie(v.key, held.key)
        siblings = self.provenance.setdefault(canonical(c.value), {})
        mine = (source_id(c, self.spec), c.label, c.only)
        if mine in siblings:
            return
        for (source, _label, only), other in siblings.items():
            for a, b, held_a, held_b in (
                ((mine[0], c.only), (source, only), held.key, other),
                ((source, only), (mine[0], c.only), other, held.key),
            ):
                relation = provenance_relation(a, b)
                if relation is not None:
                    self.relations.append((relation, held_a, held_b))
        siblings[mine] = held.key

    def quantified(self, c: m.Quantified) -> None:
        """`all`/`any x in args.L`: a boolean (false when the list is absent) in one group with
        the list, which is read only by its length (`ledger.quantified_holds`)."""
        if not isinstance(c.over, m.Path):
            raise _Outside
        items = self.value(c.over)
        if items.kind != "list":
            raise _Outside
        held = self.term(c)
        self.tie(items.key, held.key)
        self.relations.append((c.quantifier, held.key, items.key))
        family = self.quantifiers.setdefault(
            canonical(c.model_copy(update={"quantifier": "all"})), {}
        )
        if c.quantifier not in family:
            family[c.quantifier] = held.key
            if len(family) == 2:
                self.relations.append(("all-any", family["all"], family["any"]))
                self.relations.append(("all-any", family["any"], items.key))

    def atom(self, c: m.Condition) -> None:
        """A comparison, provenance term or boolean session term, and the values it reads."""
        before = set(self.reading)
        self.reading = set()
        if isinstance(c, m.Compare):
            self.compare(c)
        elif isinstance(c, m.Provenance):
            self.provenance_of(c)
        elif isinstance(c, m.Quantified):
            self.quantified(c)
        elif not isinstance(c, m.History) or self.term(c).kind != "bool":
            raise _Outside  # a history term as a condition is a boolean one
        self.atoms.append((c, self.reading))
        self.reading = self.reading | before

    def condition(self, c: object) -> None:
        if isinstance(c, m.And | m.Or):
            for item in c.items:
                self.condition(item)
        elif isinstance(c, m.Not):
            self.condition(c.item)
        elif isinstance(c, m.Literal) and c.type == "bool":
            return
        elif isinstance(c, m.Compare | m.Provenance | m.History | m.Quantified):
            self.atom(c)
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
                and c.left.root in ("args", *_UNTYPED_ROOTS)
                and not c.left.parts
                and isinstance(c.right, m.EnumMember)
            ):
                raise _Outside
            self.value(m.Path(root=c.left.root, parts=(c.right.name,)))
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
            if v.kind not in ("int", "real"):
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
        elif c.op in ("startswith", "endswith"):
            if v.kind not in ("text", "path"):
                raise _Outside
            if not isinstance(c.right, m.Literal) or c.right.type != "string":
                raise _Outside
            text = c.right.value
            if not isinstance(text, str) or len(text) > MAX_AFFIX:
                raise _Outside
            affixes = v.prefixes if c.op == "startswith" else v.suffixes
            if text not in affixes:
                affixes.append(text)
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
        elif v.kind == "real":
            if not (isinstance(node, m.Literal) and node.type in ("int", "float")):
                raise _Outside
            word = node.value
        else:
            raise _Outside
        if word not in v.literals:
            v.literals.append(word)

    def check_affixes(self) -> None:
        """The values compared by `startswith`/`endswith` are ones `_affixed` answers exactly:
        compared with no other value, and for a path with texts whose segments are normal (no
        `.`, `..` or empty segment inside)."""
        for v in self.values.values():
            if not (v.prefixes or v.suffixes):
                continue
            if self.links.get(v.key):
                raise _Outside
            if v.kind == "path" and not all(_plain_segments(t) for t in _affix_texts(v)):
                raise _Outside

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
                for other in sorted(self.links.get(k, set()) | self.ties.get(k, set())):
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
        if v.kind not in ("text", "untyped"):
            continue
        n = 1
        stem = f"{v.key[-1]}-sample" if v.quoted else v.key[-1]
        while (text := f"{stem}-{n}") in taken or text in out:
            n += 1
        out.append(text)
    return out


def _affix_texts(v: _Value) -> list[str]:
    """The texts that tell a value compared by `startswith` or `endswith` apart: the affixes,
    the texts it is compared with by `==`/`in`, and for a path each `within` base B as B and
    B + "/" (B itself, or a path starting with B + "/")."""
    out = [*v.prefixes, *v.suffixes]
    for w in v.literals:
        if isinstance(w, str):
            out += [w, w + "/"] if v.kind == "path" else [w]
    return list(dict.fromkeys(out))


def _plain_segments(text: str) -> bool:
    """No empty segment inside the text and no `.` or `..` segment: every prefix and suffix of
    it then extends to a normal path the way it does to a text."""
    return "//" not in text and all(part not in (".", "..") for part in text.split("/"))


def _is_path(text: str) -> bool:
    """A path value as the analysis has them: normal, not empty, no trailing `/` but the root."""
    return bool(text) and "//" not in text and posixpath.normpath(text) == text


def _free(taken: set[str]) -> str:
    """A character not in `taken` (never `/` or `.`), the same one for the same set."""
    more = (chr(n) for n in range(0x100, 0x110000))
    return next(c for c in itertools.chain(_FREE_CHARS, more) if c not in taken)


def _trie(texts: list[str], ends: bool) -> dict[str, set[str]]:
    """Each prefix of the texts (each suffix, when `ends`) and the characters that extend it
    to a longer one (after it; before it, when `ends`)."""
    out: dict[str, set[str]] = {}
    for t in texts:
        for i in range(len(t) + 1):
            part = t[len(t) - i :] if ends else t[:i]
            beside = t[len(t) - i - 1 : len(t) - i] if ends else t[i : i + 1]
            out.setdefault(part, set())
            if i < len(t):
                out[part].add(beside)
    return out


def _affixed(v: _Value) -> list[str]:
    """Representatives of a value compared by `startswith`/`endswith` that meet every cell of
    those comparisons and of its equalities.

    For a value s, let a be its longest prefix that is a prefix of one of the texts
    (`_affix_texts`), b its longest suffix that is a suffix of one (the empty text on a side
    with no comparison). s starts with a text's prefix P exactly when P is a prefix of a (a
    longer P would make a longer such prefix of s), ends with a suffix S exactly when S is a
    suffix of b, and equals a text only when it is that text. So unless s is one of the texts,
    it is in the cell of a + x + b for a character x that extends neither a (after it) nor b
    (before it) — a + x + b has a and b as its own — and the representatives are the texts and
    each a + x + b. For a path, the candidates that are not paths are dropped, and the root is
    one: with texts of plain segments (`_plain_segments`) a + x + b is a normal path unless it
    ends with `/`, which only the root among paths does.
    """
    texts = _affix_texts(v)
    after = _trie(texts, False) if v.prefixes else {"": set()}
    before = _trie(texts, True) if v.suffixes else {"": set()}
    out = list(texts)
    for a in sorted(after):
        for b in sorted(before):
            out.append(a + _free(after[a] | before[b]) + b)
    if v.kind == "path":
        out = [c for c in ["/", *out] if _is_path(c)]
    return list(dict.fromkeys(out))


def _choices(v: _Value, pool: list[str], numbers: Sequence[int | float] = ()) -> list[Any]:
    """The representatives of one value, the plainest first (absent, then fresh values).

    `numbers`: for a session term's count or sum, the literals and bounds of every such term
    of its group (a relation between two of them holds of two representatives in one cell
    only if both are taken from the same points)."""
    out: list[Any] = [] if v.always else [ABSENT]
    if v.kind in ("text", "untyped"):
        out += pool
    elif v.kind == "enum":
        out += list(v.enum)
    elif v.kind == "bool":
        out += [False, True]
    elif v.kind == "list":
        out += [0, 1, 2]  # its length: what a quantifier over it tells apart (none, one, more)
    elif v.kind == "int":
        # within bounds, each cell the literals cut meets one of them, a literal's neighbour or
        # a bound: the interval between two literals starts at the first one's successor, or
        # at the lower bound
        literals = numbers if v.term is not None else v.literals
        near = {0} | {n + d for n in literals for d in (-1, 0, 1)}
        near |= {b for b in (v.low, v.high) if b is not None}
        if v.quoted and not literals and v.low is None and v.high is None:
            near = {QUOTABLE_NUMBER}
        near = {
            n for n in near if (v.low is None or n >= v.low) and (v.high is None or n <= v.high)
        }
        out += sorted(near, key=lambda n: (abs(n), n < 0))
    elif v.kind == "real":
        # each literal, a point between two neighbours and one past either end: within the
        # lower bound, every cell the literals cut meets one of them or the bound
        points = sorted(set(numbers))
        near = {0, *points, *(n + d for n in points[:1] + points[-1:] for d in (-1, 1))}
        near |= {(a + b) / 2 for a, b in itertools.pairwise(points)}
        near |= {b for b in (v.low, v.high) if b is not None}
        near = {n for n in near if v.low is None or n >= v.low}
        whole = {int(n) if n == int(n) else n for n in near}
        out += sorted(whole, key=lambda n: (abs(n), n < 0))
    elif v.kind == "path":
        outside = next(
            p for p in OUTSIDE_PATHS if not any(p == b or p.startswith(b + "/") for b in v.literals)
        )
        out += [outside, *v.literals]
    if v.prefixes or v.suffixes:
        out += [c for c in _affixed(v) if c not in out]
    return out


def _set(reading: Reading, v: _Value, value: Any) -> None:
    key = v.key
    if v.term is not None:
        reading.session[v.term] = value
        return
    if not v.always:
        reading.present[key] = value is not ABSENT
    if value is ABSENT:
        return
    if v.kind == "list":
        reading.lengths[key] = value
    elif v.kind == "untyped":
        reading.tags[key] = 0
        reading.values[key] = {"str": value}
    elif v.kind == "enum":
        reading.values[key] = {"enum": v.enum.index(value)}
    else:
        reading.values[key] = {{"text": "str", "path": "str"}.get(v.kind, v.kind): value}


Choice = tuple[tuple[_Value, Any], ...]
"""A value for each member of a group."""


def _plain(value: Any) -> tuple[object, ...]:
    """A value as a key: its type and itself (`True` is not `1`), or absent."""
    return ("absent",) if value is ABSENT else (type(value).__name__, value)


def _whole(bound: object) -> int | None:
    """A field's bound as an integer; not one (a fraction): the partition is left to z3."""
    if bound is None:
        return None
    if isinstance(bound, bool) or not isinstance(bound, int | float) or bound != int(bound):
        raise _Outside
    return int(bound)


def _possible(choice: Choice, relations: Sequence[Related]) -> bool:
    """Whether a call may have these values: one the tool's schema lacks is absent, and the
    session terms' values are related as every ledger relates them (`_related`)."""
    return all(value is ABSENT for v, value in choice if v.missing) and _related(choice, relations)


def _related(choice: Choice, relations: Sequence[Related]) -> bool:
    """Whether the choice's session terms meet the relations between them (ledger.py)."""
    if not relations:
        return True
    values = {v.key: value for v, value in choice}
    pairs: dict[Key, Key] = {}
    for relation, a, b in relations:
        if a not in values or b not in values:
            continue
        x, y = values[a], values[b]
        if relation == "implies" and x and not y:
            return False
        if relation == "excludes" and x and y:
            return False
        if relation == "at_most" and x > y:
            return False
        if relation in ("all", "any") and not quantified_holds(relation, x, y):
            return False
        if relation == "all-any":
            pairs[a] = b
    for all_key, any_key in pairs.items():
        if all_key in pairs.values():
            continue  # the second link: from `any` to the list
        length = values[pairs[any_key]]
        if not quantified_holds("all-any", (values[all_key], values[any_key]), length):
            return False
    return True


Combination = tuple[Choice, ...]
"""A choice for each group."""
Rows = list[tuple[Combination, tuple[bool, ...]]]


class _Partition:
    """The groups' representatives, and which rules each combination of them matches."""

    def __init__(
        self,
        spec: m.Spec,
        tool: m.Tool,
        rules: Sequence[m.Rule],
        reads: _Reads,
        shared: dict[Any, list[int]],
    ) -> None:
        self.spec, self.tool, self.rules = spec, tool, rules
        self.shared = shared
        self.groups = reads.groups()
        where = {v.key: g for g, group in enumerate(self.groups) for v in group}
        taken = {w for group in self.groups for v in group for w in v.literals}
        self.relations = reads.relations
        self.raw: list[list[Choice]] = []
        for group in self.groups:
            texts = [w for v in group for w in v.literals if isinstance(w, str)]
            pool = _fresh(group, taken) + list(dict.fromkeys(texts))
            terms = [v for v in group if v.term is not None and v.kind in ("int", "real")]
            numbers = [n for v in terms for n in (*v.literals, v.low, v.high) if n is not None]
            each = [_choices(v, pool, numbers) for v in group]
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
        """The group's representatives that some comparison tells apart, the first of each.

        Which they are depends only on the group's values, their choices and the comparisons
        (each reads only the group's values), so another partition of the same policy with
        the same ones reuses them (`shared`)."""
        group = self.groups[g]
        key = (
            tuple((v.key, v.kind, v.always, v.enum, v.missing) for v in group),
            tuple(tuple(_plain(value) for _, value in choice) for choice in self.raw[g]),
            tuple(id(atom) for atom in atoms),
            tuple(self.relations),
        )
        found = self.shared.get(key)
        if found is None:
            seen: set[tuple[bool, ...]] = set()
            found = self.shared[key] = []
            for n, choice in enumerate(self.raw[g]):
                if not _possible(choice, self.relations):
                    continue
                call = self.call((choice,))
                truth = tuple(holds_for(self.spec, atom, call) for atom in atoms)
                if truth not in seen:
                    seen.add(truth)
                    found.append(n)
        return [self.raw[g][n] for n in found]

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
            for choice in combination:  # the schema leaves them out; the evaluator reads them
                for v, value in choice:
                    if v.missing and value is not ABSENT:
                        found.args[v.key[1]] = value
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
        """The first combination of each distinct pattern of matches, in order.

        The rows of going through every combination in order (`itertools.product`), found
        group by group: of the combinations of the first groups' choices, only the first of
        each `signature` goes on — two with one signature end in the same patterns whatever
        the other groups' choices, and the first of them ends in each pattern first, so the
        first combination of each pattern is still the one kept, and they come in order. The
        signature says for each rule that reads a group chosen so far what `decided` says."""
        readers: list[list[int]] = [[] for _ in self.reps]
        for p, groups in enumerate(self.rule_groups):
            for g in groups or ():
                readers[g].append(p)
        partial: list[tuple[tuple[Choice, ...], tuple[object, ...]]] = [
            ((), (None,) * len(self.rules))
        ]
        for g, options in enumerate(self.reps):
            kept: dict[tuple[object, ...], tuple[Choice, ...]] = {}
            for start, before in partial:
                for choice in options:
                    combination = (*start, choice)
                    signature = list(before)
                    for p in readers[g]:
                        signature[p] = self.decided(p, combination, g)
                    kept.setdefault(tuple(signature), combination)
            partial = [(combination, signature) for signature, combination in kept.items()]
        seen: set[tuple[bool, ...]] = set()
        rows: Rows = []
        for combination, _ in partial:
            matched = tuple(self.matches(p, combination) for p in range(len(self.rules)))
            if matched not in seen:
                seen.add(matched)
                rows.append((combination, matched))
        return rows

    def decided(self, p: int, combination: Combination, last: int) -> object:
        """What the choices of groups 0 to `last` decide of rule p, which reads group `last`:
        whether it matches when it reads no later group, else which choices of its groups
        were taken so far (the `signature` of `table`, rule by rule)."""
        groups = self.rule_groups[p] or ()
        if groups[-1] <= last:
            return self.matches(p, combination)
        return tuple(id(combination[g]) for g in groups if g <= last)

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
            if fixed[key] is not ABSENT or not _possible(choice, self.relations):
                continue
            present = [
                c
                for c in self.raw[where]
                if all(
                    value is not ABSENT if v.key == key else value is fixed[v.key] for v, value in c
                )
                and _related(c, self.relations)
            ]
            options[where] = [choice]
            # rule p reads only its groups: the first combination that meets what is asked
            # has each other group's first choice
            reads = self.rule_groups[p] or ()
            narrowed = [o if g in reads else o[:1] for g, o in enumerate(options)]
            for combination in itertools.product(*narrowed):
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
    shared: dict[Any, list[int]] | None = None,
) -> Answers | None:
    """The partition's answers as `solve.solve_partition` gives them, or None when it is not
    simple (module docstring). `shared`: what the partitions of one policy's rules (the same
    rule objects) may reuse of each other's work, kept by the caller for as long as them."""
    reads = _Reads(spec, tool)
    selected: list[bool] = []
    reading: list[set[Key] | None] = []
    try:
        for rule in rules:
            chosen = selected_as(rule, tool)
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
        reads.check_affixes()
    except _Outside:
        return None
    try:
        part = _Partition(spec, tool, rules, reads, {} if shared is None else shared)
    except _Outside:
        return None
    if part.size() > MAX_TABLE:
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
