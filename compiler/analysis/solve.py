"""Solving one partition (partition.py) with z3: its encoding, its questions, its answers.

The rules of one tool's bucket are encoded once over one symbolic call (smt.py), in a fresh z3
context of their own, so a partition's answers depend on nothing but its key — the same
answers whether the partition is solved alone, among others, or read from the cache. One
solver holds the encoding; each question is asked under `push`/`pop`, within a budget of z3's
resource units (budget.py), never of time. The questions:

- for each rule, a call it wins (it matches, no stronger rule matches, no earlier rule of its
  effect matches); failing that, a call it matches, and which rules that beat it match every
  call it matches (and of those, which match exactly its calls);
- for each DENY or ASK and each value it reads that the tool's calls may lack, a call where it
  fires for some value but not when the value is absent;
- when the policy's default is `allow`, a call no rule matches.

A question z3 gives up on is an `Undecided` answer, never a guess, and is not asked again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import z3
from harnessc.runtime import model as m

from .assemble import Assembler, Reading
from .budget import out_of_budget, spent
from .concrete import Call
from .examples import forget_examples
from .partition import Absent, Answers, Example, Undecided, beaten_by, winner
from .smt import Encoder, fresh_context, own_context
from .smt_session import SESSION
from .smt_terms import Key, Registry, conj, negate, to_z3
from .text import term_of

__all__ = ["Questions", "a_call_meeting", "solve_partition"]

# ---------------------------------------------------------------------------------------------
# Reading a call back out of a model


def z3_value(value: Any) -> Any:
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


def _read_model(values: Iterable[tuple[str, Any]], registry: Registry) -> Reading:
    """The reading of every variable's value (`Completed.values`)."""
    out = Reading()
    for name, given in values:
        info = registry.get(name)
        if info is None or info.alt:
            continue
        value = z3_value(given)
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
        elif info.role == "inv":
            out.holds.setdefault(info.key, {})[info.detail] = bool(value)
        elif info.role == "fn":
            out.funcs[(info.key[0], info.key[1])] = bool(value)
    return out


@dataclass
class Completed:
    """A model with a value for every variable of the encoding, read back one way everywhere.

    z3 leaves out of a model the variables its constraints do not need; the winner of the
    model's call (which evaluates every rule's match) and the witness assembled from it must
    then read the same values for them, or the witness is judged differently from what the
    finding claims. Each variable left out takes z3's default value (`model_completion`), but
    a text compared only by equality takes a fresh number (a text no rule names, rather than
    the first literal), and a value only provenance reads one a message can quote.
    """

    model: z3.ModelRef
    pins: list[tuple[Any, Any]]
    values: list[tuple[str, Any]]

    @classmethod
    def of(cls, model: z3.ModelRef, enc: Encoder, registry: Registry) -> Completed:
        given = {d.name(): model[d] for d in model.decls()}
        fresh = len(enc.literals)
        for name, number in given.items():
            info = registry.get(name)
            if info is not None and info.detail == "sym" and z3.is_int_value(number):
                fresh = max(fresh, number.as_long() + 1)
        quoted = _quoted_keys(registry)
        pins: list[tuple[Any, Any]] = []
        values: list[tuple[str, Any]] = []
        for name, var in enc.variables.items():
            if name in given:
                values.append((name, given[name]))
                continue
            info = registry.get(name)
            if info is None or info.alt:
                continue
            if info.role == "v" and info.detail == "sym":
                value: Any = z3.IntVal(fresh)
                fresh += 1
            elif info.role == "v" and info.detail == "int" and info.key in quoted:
                value = z3.IntVal(QUOTABLE_NUMBER)
            else:
                value = model.eval(var, model_completion=True)
            pins.append((var, value))
            values.append((name, value))
        return cls(model, pins, values)

    def holds(self, cond: Any) -> bool:
        """Whether a condition holds for the completed model."""
        return z3.is_true(self.eval(to_z3(cond)))

    def eval(self, expr: Any) -> Any:
        """An expression's value in the completed model."""
        if self.pins:
            expr = z3.substitute(expr, *self.pins)
        return self.model.eval(expr, model_completion=True)


QUOTABLE_NUMBER = 1234
"""A number a value only provenance reads takes: four digits, so a message can quote it."""


def _quoted_keys(registry: Registry) -> set[Key]:
    """The call's values a provenance term is about (`args.iban from …`)."""
    out: set[Key] = set()
    for info in registry.values():
        if info.role == SESSION:
            term = term_of(info.key[1])
            if isinstance(term, m.Provenance) and isinstance(term.value, m.Path):
                out.add((term.value.root, *term.value.parts))
    return out


def _texts_for(reading: Reading, texts: dict[int, str], quoted: set[Key] | None = None) -> None:
    """Strings encoded by number become texts: a known one, or a fresh one for each other
    number (distinct numbers, distinct texts, none equal to a known one); a value provenance
    reads gets one long enough for a message to quote (`iban-sample-1`)."""
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
            stem = f"{key[-1]}-sample" if quoted and key in quoted else key[-1]
            while (text := f"{stem}-{count}") in known:
                count += 1
            known.add(text)
            fresh[n] = text
        raw["str"] = fresh[n]


# ---------------------------------------------------------------------------------------------
# One partition


class Questions:
    """One solver over what an encoder has encoded of one symbolic call to `tool`: questions
    asked under push/pop within a budget (`check`), and the call a model describes (`call`).
    The encoding must be complete before it is made (its domain is added once).

    `rlimit` is each question's budget in z3's resource units (0: none); no question has a
    time limit, so whether z3 answers one does not depend on the machine or its load."""

    def __init__(
        self, spec: m.Spec, tool: m.Tool, enc: Encoder, registry: Registry, rlimit: int
    ) -> None:
        self.spec = spec
        self.tool = tool
        self.enc = enc
        self.registry = registry
        self.solver = z3.SimpleSolver()
        self.rlimit = rlimit
        if rlimit:
            self.solver.set("rlimit", rlimit)
        self.solver.add(*self.enc.domain)
        self.added = len(self.enc.domain)
        self.queries = 0
        self.tracked: dict[int, Any] = {}
        """The literal that stands for each of the encoder's preferences, by its id (`wishes`)."""
        self.reason = ""
        """Why z3 gave up on the last question that returned False."""
        self.given_up: dict[tuple[Any, ...], str] = {}
        """The questions z3 gave up on, by the question (the encoding's extra domain, the
        constraints' terms, `nice`), with z3's reason: one is never asked again."""

    def check(self, *constraints: Any, nice: bool = True) -> z3.ModelRef | bool | None:
        """A model, None when unsatisfiable, or False when z3 gave up (`reason` says why).

        With `nice`, the encoder's preferences are assumed, for readable witnesses: one query
        answers the question unless they are what leaves no call (they are in z3's unsat core)
        or z3 gives up with them; then it is asked again without them. A question z3 gave up
        on before is answered False at once, for the same reason.
        """
        extra = self.enc.domain[self.added :]
        terms = [to_z3(c) for c in constraints]
        # z3 shares equal terms within a context: equal questions have equal ids
        asked = (len(extra), nice, *(t.get_id() for t in terms))
        if asked in self.given_up:
            self.reason = self.given_up[asked]
            return False
        wishes = self.wishes() if nice else []
        self.queries += 1
        self.solver.push()
        self.solver.add(*extra, *terms)
        result = self.solver.check(*wishes)
        model = self.solver.model() if result == z3.sat else None
        if wishes and (result == z3.unknown or (result == z3.unsat and self.wished())):
            self.queries += 1
            result = self.solver.check()
            model = self.solver.model() if result == z3.sat else None
        if result == z3.unknown:
            why = self.solver.reason_unknown()
            if self.rlimit and out_of_budget(why):
                why = spent(self.rlimit)
            self.reason = self.given_up[asked] = why
        self.solver.pop()
        if result == z3.unknown:
            return False
        return model

    def wishes(self) -> list[Any]:
        """A literal for each of the encoder's preferences as they are now (a caller may drop
        some: nearest.py), each implying its preference (added to the solver once, outside any
        question), to be assumed by a question."""
        out = []
        for wish in self.enc.nice:
            literal = self.tracked.get(wish.get_id())
            if literal is None:
                literal = z3.Bool(f"nice#{len(self.tracked)}", wish.ctx)
                self.solver.add(z3.Implies(literal, wish))
                self.tracked[wish.get_id()] = literal
            out.append(literal)
        return out

    def wished(self) -> bool:
        """Whether the last unsatisfiable question was so only with the preferences."""
        core = {c.get_id() for c in self.solver.unsat_core()}
        return any(t.get_id() in core for t in self.tracked.values())

    def complete(self, model: z3.ModelRef | Completed) -> Completed:
        """The model with a value for every variable (`Completed`)."""
        if isinstance(model, Completed):
            return model
        return Completed.of(model, self.enc, self.registry)

    def call(self, model: z3.ModelRef | Completed, absent: Iterable[Key] = ()) -> Call:
        """The call the completed model describes: every variable the rules read, read back
        as the winner reads it."""
        return self.assembler(model, absent).call()

    def assembler(self, model: z3.ModelRef | Completed, absent: Iterable[Key] = ()) -> Assembler:
        """The assembler of the completed model's reading (`call`)."""
        reading = _read_model(self.complete(model).values, self.registry)
        _texts_for(reading, self.enc.texts(), _quoted_keys(self.registry))
        return Assembler(self.spec, self.tool, reading, set(absent))


def a_call_meeting(
    spec: m.Spec, tool: m.Tool, condition: m.Condition, rlimit: int
) -> tuple[Call, dict[str, Any]] | None:
    """A call to `tool` that meets `condition` as the encoding reads it (a history term's
    `when`, for an earlier call of a witness's prelude), assembled as a witness is, with the
    values of its result the condition reads (`result.*`); None when there is none or z3 gives
    up. Solved in a context of its own (`own_context`), so the answer depends on nothing else.
    The caller checks the call concretely: an inexact encoding may give one that does not
    meet it."""
    with own_context():
        registry: Registry = {}
        enc = Encoder(spec, tool, registry)
        rule = m.Rule(
            label="when#0", policy="when", effect="allow", selectors=(), condition=condition
        )
        enc.prepare([rule])
        try:
            goal = enc.cond(condition)
            questions = Questions(spec, tool, enc, registry, rlimit)
            found = questions.check(goal)
            if not isinstance(found, z3.ModelRef):
                return None
            assembler = questions.assembler(found)
            return assembler.call(), assembler.untyped_children(("result",), None)
        except z3.Z3Exception:
            return None  # the caller tries an example call instead


class Bucket(Questions):
    """The rules that can match one tool, encoded over one symbolic call, and a solver."""

    def __init__(self, spec: m.Spec, tool: m.Tool, rules: Sequence[m.Rule], rlimit: int) -> None:
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
        super().__init__(spec, tool, enc, registry, rlimit)

    def beaten_by(self, p: int) -> list[int]:
        return beaten_by(self.rules, p)

    def wins(self, p: int) -> Any:
        return conj(self.match[p], *(negate(self.match[q]) for q in self.beaten_by(p)))

    def winner(self, model: z3.ModelRef | Completed) -> int | None:
        """The position of the rule that wins the model's call, by the encoding's meaning."""
        completed = self.complete(model)
        return winner(self.rules, [completed.holds(m) for m in self.match])

    def example(self, model: z3.ModelRef, absent: Iterable[Key] = ()) -> Example:
        completed = self.complete(model)
        return Example(self.call(completed, absent), self.winner(completed))


@dataclass
class _Solving:
    """The answers of one partition as they are found."""

    bucket: Bucket
    answers: Answers
    undecided: list[Undecided] = field(default_factory=list)

    def ask(self, position: int | None, what: str, *constraints: Any, nice: bool = True) -> Any:
        """`Bucket.check`, noting a question z3 gave up on."""
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
    rlimit: int = 0,
) -> Answers:
    """Every answer of the partition of `rules` over calls to `tool` (module docstring).

    `absent_keys[p]`: the values rule p reads without a `has` guard that calls to the tool may
    lack (asked only of a DENY or ASK). Each question may take `rlimit` of z3's resource
    units (0: no limit; budget.py).
    """
    fresh_context()
    forget_examples()
    bucket = Bucket(spec, tool, rules, rlimit)
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
    # asked once: the preferences are assumed (`Questions.check`), so an unsatisfiable
    # question, the usual answer, costs one query as a satisfiable one does
    model = solving.ask(p, "absent", negate(when_absent), when_present)
    if isinstance(model, z3.ModelRef):
        solving.answers.absent.append(Absent(p, key, bucket.example(model, absent=[key])))
