"""The SMT encoding of session state (compiler/analysis/smt.py), as a mixin of its `Encoder`.

Provenance (`x from source`), quantified (`all`/`any x in …`) and history terms (`called`,
`succeeded`, `count`, `sum`, `seen`) and `len(x)` are uninterpreted: one variable per canonical
form, with only the relations every ledger obeys (module docstring of smt.py). The encoder
inherits these and dispatches to them; what they read of it is declared under TYPE_CHECKING.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import z3
from harnessc.runtime import model as m
from harnessc.runtime.session_terms import reads_result

from .concrete import canonical, session_terms
from .smt_terms import Bool, Key, Term, conj, disj, to_z3

__all__ = ["SESSION", "SessionEncoding"]

SESSION = "session"
"""The role and key root of session state: `(SESSION, canonical form)` names one provenance,
quantified or history term (`concrete.canonical`), the same term always the same variable. A
witness reads them back into `Call.session`; `text.term_of` turns a key back into its term."""


class SessionEncoding:
    """The encoder's session terms: uninterpreted, keyed by the term's canonical form."""

    if TYPE_CHECKING:
        # what these read of the encoder (compiler/analysis/smt.py)
        domain: list[Any]
        _vars: dict[str, Any]
        _provenance: dict[str, dict[tuple[str, str | None, bool], Any]]
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

    def session_vars(self) -> list[tuple[str, Any]]:
        """The variables of the session terms encoded so far, by name."""
        return [(n, v) for n, v in self._vars.items() if n.startswith(f"{SESSION}|")]

    def session_var(self, node: m.Condition, sort: str) -> Any:
        """The variable of a provenance, quantified or history term: a boolean, or an integer
        (`count`, never negative) or a real (`sum`, unconstrained)."""
        floor = (lambda x: [x >= 0]) if sort == "int" else None
        return self.var(SESSION, (SESSION, canonical(node)), sort, constraints=floor)

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
        mine = (c.source, c.label, c.only)
        siblings = self._provenance.setdefault(canonical(c.value), {})
        if mine not in siblings:
            for (source, _label, only), other in siblings.items():
                self.domain.extend(
                    _provenance_axioms((c.source, c.only), held, (source, only), other)
                )
                self.domain.extend(
                    _provenance_axioms((source, only), other, (c.source, c.only), held)
                )
            siblings[mine] = held
        if of.kind == "unsupported":
            return held
        return conj(of.present, held)

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
        if isinstance(c.over, m.Path) and over.key is not None:
            # `any` holds, or `all` fails, only for a list with an item
            n = self.var("len", over.key, "int", None, over.alt, lambda x: [x >= 0])
            needs_item = held if c.quantifier == "any" else z3.Not(held)
            self.domain.append(z3.Implies(needs_item, n >= 1))
        return held if over.kind == "unsupported" else conj(over.present, held)


def _provenance_axioms(
    a: tuple[str, bool], held_a: Any, b: tuple[str, bool], held_b: Any
) -> list[Any]:
    """What holds between two provenance terms of one value (`a` → …), by their sources."""
    (source_a, only_a), (source_b, only_b) = a, b
    out: list[Any] = []
    if source_a == "nowhere" and source_b != "nowhere":
        out.append(z3.Implies(held_a, z3.Not(held_b)))  # nowhere: no entry at all
    elif only_a and source_a == source_b and not only_b:
        out.append(z3.Implies(held_a, held_b))  # `K only` implies `K`
    elif only_a and source_a != source_b and source_b in m.SOURCE_KINDS:
        out.append(z3.Implies(held_a, z3.Not(held_b)))  # `K only`: no other kind
    return out
