"""The SMT encoding of session state (compiler/analysis/smt.py), as a mixin of its `Encoder`.

Provenance (`x from source`), quantified (`all`/`any x in …`) and history terms (`called`,
`succeeded`, `count`, `sum`, `seen`) and `len(x)` are uninterpreted: one variable per canonical
form, with only the relations every ledger obeys (module docstring of smt.py). The encoder
inherits these and dispatches to them; what they read of it is declared under TYPE_CHECKING.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import z3
from harnessc.runtime import model as m
from harnessc.runtime.model.session_terms import reads_result

from .concrete import canonical, session_terms
from .ledger import non_negative, provenance_relation, source_id, wider, window_family
from .smt_terms import Bool, Key, Term, conj, disj, to_z3
from .sources import (
    FACTS,
    ITEMS,
    USER,
    SourceClasses,
    call_of,
    differs,
    feeds,
    meaning,
    plain_adds,
    value_key,
    value_key_of,
)

__all__ = ["SESSION", "SESSION_OLD", "SOURCE", "SessionEncoding"]

SESSION = "session"
"""The role and key root of session state: `(SESSION, canonical form)` names one provenance,
quantified or history term (`concrete.canonical`), the same term always the same variable. A
witness reads them back into `Call.session`; `text.term_of` turns a key back into its term."""

SESSION_OLD = "session-old"
"""The role of a term's variable on the old side of a comparison when the term means something
else there (sources.py `differs`: a tool trusted, labelled or selected differently): the new
side's stays `SESSION`, and the witness keeps the old side's apart (compare_solve.Found)."""

SOURCE = "source"
"""The role of `(value, class)`: the value is in that class of source (sources.py)."""


class SessionEncoding:
    """The encoder's session terms: uninterpreted, keyed by the term's canonical form."""

    if TYPE_CHECKING:
        # what these read of the encoder (compiler/analysis/smt.py)
        spec: m.Spec
        tool: m.Tool
        domain: list[Any]
        _vars: dict[str, Any]
        _provenance: dict[str, dict[tuple[str, str | None, bool], Any]]
        _windows: dict[str, dict[int | None, Any]]
        _quantified: dict[str, dict[str, Any]]
        sources: SourceClasses | None
        _by_class: dict[str, list[Any]]
        _whole: list[tuple[m.History, Any, m.Spec]]
        inexact: list[str]

        def cond(self, c: object) -> Bool: ...

        def var(
            self,
            role: str,
            key: Key,
            sort: str,
            detail: Any = None,
            alt: bool = False,
            constraints: Callable[[Any], Iterable[Any]] | None = None,
        ) -> Any: ...
        def operand(self, value: object) -> Term: ...
        def selector(self, sel: m.Selector) -> Bool: ...
        def prefer(self, var: Any, wish: Any) -> None: ...

    def session_vars(self) -> list[tuple[str, Any]]:
        """The variables of the session terms encoded so far, by name."""
        return [(n, v) for n, v in self._vars.items() if n.startswith(f"{SESSION}|")]

    def session_var(self, node: m.Condition, sort: str) -> Any:
        """The variable of a provenance, quantified or history term: a boolean, or an integer
        (`count`, never negative) or a real (`sum`, unconstrained)."""
        floor = (lambda x: [x >= 0]) if sort == "int" else None
        role = self.session_role(node)
        made = self.var(role, (SESSION, canonical(node)), sort, constraints=floor)
        if isinstance(node, m.History):
            self.windows(node, made, role)
            if role == SESSION_OLD:
                self.domain.extend(self.selected_more(node, made, sort))
            if self.sources is not None and node.window_ms is None and node.where is None:
                self._whole.append((node, made, self.spec))
                for cls, held in self._by_class.items():
                    for b in held:
                        self.domain.extend(self.earlier_call(node, made, self.spec, cls, b))
        return made

    def selected_more(self, term: m.History, old: Any, sort: str) -> list[Any]:
        """A `called`/`succeeded`/`count` with no `when` that selects more tools on one side
        (another tool tagged into its selector) sees every call the other side's does; a
        `seen` whose label more tools produce on one side, every result the other's does."""
        s = self.sources
        funcs = ("called", "succeeded", "count", "seen")
        if s is None or term.where is not None or term.func not in funcs:
            return []
        if term.func == "seen":  # a tool newly labelled: at least what was seen before
            before, after = set(meaning(s.old, term)), set(meaning(s.new, term))
        else:
            before, after = set(meaning(s.old, term)[0]), set(meaning(s.new, term)[0])
        floor = (lambda x: [x >= 0]) if sort == "int" else None
        new = self.var(SESSION, (SESSION, canonical(term)), sort, constraints=floor)
        narrow, wide = (
            (old, new) if before <= after else (new, old) if after <= before else (None, None)
        )
        if narrow is None:
            return []
        return [narrow <= wide] if term.func == "count" else [z3.Implies(narrow, wide)]

    def earlier_call(self, term: m.History, var: Any, spec: m.Spec, cls: str, b: Any) -> list[Any]:
        """A value in a tool's result, or an argument it took (class `cls`, sources.py), means
        an earlier call of the tool, which every whole-session term over it sees (the prelude
        places that call before every window the witness reads, so windowed terms are free of
        it)."""
        call = call_of(cls)
        tool = spec.tools.get(call[0]) if call is not None else None
        if tool is None:
            return []
        if term.func == "seen":
            assert self.sources is not None
            return [z3.Implies(b, var)] if term.label in self.sources.labels[id(spec), cls] else []
        if not any(self.selects(s, tool) for s in term.selectors):
            return []
        if term.func in ("called", "succeeded"):
            return [z3.Implies(b, var)]
        if term.func == "count":
            this = to_z3(disj(*(self.selector(s) for s in term.selectors)))
            return [z3.Implies(b, var >= z3.If(this, 2, 1))]
        return []

    @staticmethod
    def selects(selector: m.Selector, tool: m.Tool) -> bool:
        from harnessc.runtime.model.semantics import selects

        return selects(selector, tool)

    def session_role(self, node: m.Condition) -> str:
        """`SESSION_OLD` for a term encoded on the old side of a comparison whose meaning
        differs there, else `SESSION`."""
        s = self.sources
        if s is None or self.spec is not s.old:
            return SESSION
        term = node
        assert isinstance(term, m.Provenance | m.Quantified | m.History | m.Extract | m.Length)
        if isinstance(term, m.Length):
            return SESSION
        if isinstance(term, m.Provenance) and term.call is None and value_key(term) is not None:
            # a function of the value's classes: it differs exactly where the classes it
            # selects do (two constraints on one variable would force the sides to agree)
            return SESSION if s.same(term) else SESSION_OLD
        return SESSION_OLD if differs(s.old, s.new, term) else SESSION

    def windows(self, term: m.History, made: Any, role: str = SESSION) -> None:
        """Relate the terms that differ only in their window (`within 1h`, `within 2h`, the
        whole session): one ledger gives them all, and a wider window holds every entry of a
        narrower one. So `called`/`succeeded`/`seen` within the narrower implies within the
        wider, and `count` within the narrower is at most within the wider; likewise `sum`
        when every amount it adds is non-negative (each selected tool's field declares `min`
        0 or more), and nothing is said of a `sum` whose amounts may be negative."""
        if term.func == "sum" and not non_negative(self.spec, term):
            return
        family = self._windows.setdefault(role + canonical(window_family(term)), {})
        if term.window_ms in family:
            return
        mine = term.window_ms
        for other, var in family.items():
            narrow, wide = (made, var) if wider(other, mine) else (var, made)
            if term.func in ("count", "sum"):
                self.domain.append(narrow <= wide)
            else:
                self.domain.append(z3.Implies(narrow, wide))
        family[mine] = made

    def count(self, term: m.History) -> Any:
        """`count(…)`: a non-negative integer; at least 1 when this call is of a tool the term
        selects and meets its `when` (the runtime counts the call being decided)."""
        n = self.session_var(term, "int")
        this = disj(*(self.selector(s) for s in term.selectors))
        if this is not False and term.where is not None:
            this = conj(this, self.own_when(term.where))
        if this is not False:
            self.domain.append(z3.Implies(to_z3(this), n >= 1))
        return n

    def total(self, term: m.History) -> Any:
        """`sum(…)`: a real; when every amount it adds is non-negative, at least this call's
        own amount when this call is of a tool the term selects and the term has no `when`
        (the runtime adds the call being decided)."""
        total = self.session_var(term, "real")
        f = term.field
        if (
            term.where is None
            and f is not None
            and f.root == "args"
            and non_negative(self.spec, term)
        ):
            this = disj(*(self.selector(s) for s in term.selectors))
            own = self.operand(f)
            if this is not False and own.kind in ("int", "real") and own.expr is not None:
                amount = z3.ToReal(own.expr) if own.kind == "int" else own.expr
                self.domain.append(z3.Implies(to_z3(conj(this, own.present)), total >= amount))
        if non_negative(self.spec, term):
            self.domain.append(total >= 0)
        return total

    def own_when(self, where: m.Condition) -> Bool:
        """A history term's `when` over the call being decided: its arguments and tool view,
        and where its values came from now (the same terms as the call's own). False — no
        claim that the call counts — when `when` reads what the call has not yet (a result,
        earlier calls) or what z3 only approximates."""
        if reads_result(where) or any(isinstance(f.term, m.History) for f in session_terms(where)):
            return False
        before = len(self.inexact)
        held = self.cond(where)
        if len(self.inexact) > before:
            del self.inexact[before:]
            return False
        return held

    def provenance(self, c: m.Provenance) -> Bool:
        """`value from source`: a session boolean, false for an absent value; with what every
        ledger obeys between the terms of one value: `from K only` implies `from K`, a value
        from `K only` is from no other kind, and a value from nowhere is from nothing."""
        of = self.operand(c.value)
        held = self.session_var(c, "bool")
        where = value_key(c) if self.sources is not None and c.call is None else None
        if where is not None:
            self.domain.append(held == self.from_classes(c, where, of))
            return held if of.kind == "unsupported" else conj(of.present, held)
        mine = (source_id(c, self.spec), c.label, c.only)
        siblings = self._provenance.setdefault(canonical(c.value), {})
        if mine not in siblings:
            for (source, _label, only), other in siblings.items():
                self.domain.extend(
                    _provenance_axioms((mine[0], c.only), held, (source, only), other)
                )
                self.domain.extend(
                    _provenance_axioms((source, only), other, (mine[0], c.only), held)
                )
            siblings[mine] = held
        if of.kind == "unsupported":
            return held
        return conj(of.present, held)

    def by_item(self, c: m.Quantified, held: Any, n: Any) -> None:
        """A quantifier over an argument whose body is provenance of its variable (with `and`,
        `or`, `not`): exactly the body item by item, each item with its own classes of source
        (sources.py), over a list of at most `ITEMS` items — the comparison looks for its
        witnesses among such lists (unless the schema asks for more items), so a witness's
        prelude can give each item its sources."""
        where = value_key_of(c.over)
        if where is None:
            return
        assert isinstance(c.over, m.Path)
        f = self.field_of(c.over)
        if f is not None and f.min is not None and f.min > ITEMS:
            return
        bodies = [self.item_body(c.body, c.var, f"{where}#{i}") for i in range(ITEMS)]
        if any(b is None for b in bodies):
            return
        if c.quantifier == "all":
            exact = z3.And(*(z3.Implies(n > i, b) for i, b in enumerate(bodies)))
        else:
            exact = z3.Or(*(z3.And(n > i, b) for i, b in enumerate(bodies)))
        self.domain += [n <= ITEMS, held == exact]

    def field_of(self, path: m.Path) -> m.Field | None:
        """The schema field of an argument of this call's tool (top level)."""
        if len(path.parts) != 1:
            return None
        return next((f for f in self.tool.input.fields if f.name == path.parts[0]), None)

    def item_body(self, body: m.Condition, var: str, item: str) -> Any:
        """The body for one item (None: it reads something besides the item's sources)."""
        if isinstance(body, m.And | m.Or):
            parts = [self.item_body(x, var, item) for x in body.items]
            if any(p is None for p in parts):
                return None
            return z3.And(*parts) if isinstance(body, m.And) else z3.Or(*parts)
        if isinstance(body, m.Not):
            inner = self.item_body(body.item, var, item)
            return None if inner is None else z3.Not(inner)
        if isinstance(body, m.Provenance) and body.value == m.Path(root="var", parts=(var,)):
            return self.from_classes(body, item, Term("unsupported"))
        return None

    def source_of(self, where: str, cls: str) -> Any:
        """The boolean of `(value, class)`: the value at `where` is in that class of source (an
        earlier call of its tool gave or took it), shared by both sides."""
        name = f"{SOURCE}|{where}|{cls!r}"
        known = name in self._vars
        b = self.var(SOURCE, (where,), "bool", detail=cls)
        if not known:
            self._by_class.setdefault(cls, []).append(b)
            for term, var, spec in self._whole:
                self.domain.extend(self.earlier_call(term, var, spec, cls, b))
        return b

    def fed(self, fact: str, value: m.Path) -> list[Any]:
        """The earlier calls that put the call's value in the fact on this side only: a fact
        one side's `on_success` adds to differently from the other's reads, on each side, as
        given plus what such a call took or gave (runtime/judge/history.py `facts_after`); each call
        is a class of source of the value (sources.py), which the prelude places."""
        s = self.sources
        where = value_key_of(value)
        if s is None or where is None or feeds(s.old, fact) == feeds(s.new, fact):
            return []
        mine = plain_adds(self.spec, fact)
        return [self.source_of(where, c) for c in s.names if call_of(c) in mine]

    def from_classes(self, c: m.Provenance, where: str, of: Term) -> Any:
        """The term on this side as a function of the value's classes of source (one boolean
        each, shared by both sides: sources.py). A text the user said is preferably one a
        message surely indexes (six characters or more, no space: prelude.py)."""
        assert self.sources is not None
        mine, forbidden = self.sources.selected(self.spec, c)

        holds = functools.partial(self.source_of, where)

        if of.kind == "str" and of.expr is not None and z3.is_string(of.expr):
            said = holds(USER)
            findable = z3.And(z3.Length(of.expr) >= 6, z3.Not(z3.Contains(of.expr, " ")))
            self.prefer(said, z3.Implies(said, findable))
        if FACTS in self.sources.names:
            # a tool's result before the facts: a prelude gives it, the facts only the call
            facts = holds(FACTS)
            self.prefer(facts, z3.Not(facts))
        some = z3.Or(*(holds(x) for x in mine)) if mine else z3.BoolVal(c.source == "nowhere")
        return z3.And(some, *(z3.Not(holds(x)) for x in forbidden))

    def length(self, value: m.Length) -> Term:
        """`len(x)`: a non-negative integer, absent with `x`; a list literal's is known."""
        if isinstance(value.of, m.ListValue):
            return Term("int", expr=z3.IntVal(len(value.of.items)), const=len(value.of.items))
        if isinstance(value.of, m.Literal) and isinstance(value.of.value, str):
            return Term("int", expr=z3.IntVal(len(value.of.value)), const=len(value.of.value))
        of = self.operand(value.of)
        if isinstance(value.of, m.Path) and of.key is not None:
            n = self.var("len", of.key, "int", None, of.alt, lambda x: [x >= 0])
        else:
            n = self.session_var(value, "int")
        return Term("int", expr=n, present=of.present)

    def quantified(self, c: m.Quantified) -> Bool:
        """`all`/`any x in …`: a session boolean, false over an absent value (as the runtime:
        it holds for none)."""
        held = self.session_var(c, "bool")
        over = self.operand(c.over)
        n = None
        if isinstance(c.over, m.Path) and over.key is not None:
            # `any` holds, or `all` fails, only for a list with an item
            n = self.var("len", over.key, "int", None, over.alt, lambda x: [x >= 0])
            needs_item = held if c.quantifier == "any" else z3.Not(held)
            self.domain.append(z3.Implies(needs_item, n >= 1))
        # `all` and `any` of one body over one list: every item, and there is one, so some
        family = self._quantified.setdefault(
            canonical(c.model_copy(update={"quantifier": "all"})), {}
        )
        if n is not None and self.sources is not None:
            self.by_item(c, held, n)
        if c.quantifier not in family:
            family[c.quantifier] = held
            if len(family) == 2 and n is not None:
                self.domain.append(z3.Implies(z3.And(family["all"], n >= 1), family["any"]))
                # one item: every item is some item
                self.domain.append(z3.Implies(n == 1, family["all"] == family["any"]))
        return held if over.kind == "unsupported" else conj(over.present, held)


def _provenance_axioms(
    a: tuple[str, bool], held_a: Any, b: tuple[str, bool], held_b: Any
) -> list[Any]:
    """What holds between two provenance terms of one value (`a` → …), by their sources
    (ledger.py `provenance_relation`)."""
    relation = provenance_relation(a, b)
    if relation == "excludes":
        return [z3.Implies(held_a, z3.Not(held_b))]
    if relation == "implies":
        return [z3.Implies(held_a, held_b)]
    return []
