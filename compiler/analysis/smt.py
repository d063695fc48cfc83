"""The SMT encoding of the condition language over one symbolic call to one tool (z3).

An `Encoder` is made per tool: `args.*` read that tool's input schema, `tool.*` its registry
entry (for a tool with operations, risk and effects follow the symbolic `args.op`). Every value
a condition reads becomes z3 variables, named so that a model can be turned back into a call
(`Registry`): a presence boolean (`has|…`) unless the value is always there, and a value
(`v|…`). Values are typed by the schema, the fact declaration or the built-in root; a value of an
untyped root (`resource.*`, `env.*`, …) gets a type tag and one variable per type it is read as.

Meaning follows language.md §6 and §7.5: reading an absent value makes that comparison false,
`!=` included; `has` tests presence (or membership, for a list or `tool.effects`). A comparison
z3 cannot express becomes a free boolean and the encoding is marked inexact: a free boolean only
adds models, so an "unsatisfiable" answer stays true, while a witness must be re-checked.

Session state is uninterpreted the same way, and soundly: every provenance, quantified and
history term is one variable per canonical form (`called`, `succeeded`, `seen`, `from …`,
`all/any`: booleans; `count`: an integer ≥ 0, ≥ 1 when the call itself counts; `sum`: a real;
`len(x)`: an integer ≥ 0, absent with `x`), so `count(x) > 5 and count(x) < 3` is
unsatisfiable while two different terms never constrain each other. The only relations added
are ones every ledger obeys (a value's provenance terms, above). A witness names the values it
needs (`Call.session`); prelude.py builds the session that gives them, or says why it cannot.
The encoding of session terms is smt_session.py, a mixin of `Encoder`; keys, constant-folding
booleans and terms are smt_terms.py, which both read.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import z3
from harnessc.runtime import model as m
from harnessc.runtime.model.semantics import OPERATORS, selects

from . import regex
from .concrete import BUILTINS, STRING, canonical
from .regex import MAX_SEARCH_WIDTH, MAX_SMT_TEXT, search_regex
from .smt_session import SESSION_OLD, SOURCE, SessionEncoding
from .smt_terms import Bool, Key, Registry, Term, VarInfo, conj, disj, negate, to_z3
from .sources import SourceClasses

__all__ = [
    "BUILTINS",
    "MAX_SEARCH_WIDTH",
    "MAX_SMT_TEXT",
    "UNTYPED_SORTS",
    "Encoder",
    "canonical",
    "own_context",
    "search_regex",
]

UNTYPED_SORTS = ("str", "real", "bool", "other")


def fresh_context() -> None:
    """Start the solver over in a new, empty z3 context.

    z3's models depend on the state of its context (the identifiers of every term it has ever
    built), so two analyses in one process could find different, equally valid witnesses — and a
    `build` followed by `build --check` in one process would call its own output stale. Every
    partition of the analysis starts here (solve.py), so its answers depend on nothing but the
    partition — the same in any process, alone or among others, solved or read from the
    cache. z3py keeps its
    default context in the module global `_main_ctx` (z3-solver is pinned); the caches of z3
    terms are cleared with it, since terms of two contexts cannot be mixed.
    """
    _use_context(z3.Context())


@contextmanager
def own_context() -> Iterator[None]:
    """A fresh z3 context (`fresh_context`) for what is solved within, then the one before it
    again: a question asked in the middle of another analysis (a witness's prelude) gets the
    same answer in any process, and leaves the terms of the analysis around it usable."""
    saved = _use_context(z3.Context())
    try:
        yield
    finally:
        _use_context(saved)


def _use_context(context: z3.Context) -> z3.Context:
    """Make `context` z3py's default context and return the one it replaces. z3py keeps it in
    the module global `_main_ctx` (z3-solver is pinned; its stubs leave the global out). The
    caches of z3 terms are cleared with it: terms of two contexts cannot be mixed."""
    z3_module = importlib.import_module("z3.z3")
    old: z3.Context = z3_module._main_ctx  # type: ignore[attr-defined]
    z3_module._main_ctx = context  # type: ignore[attr-defined]
    regex.forget()
    return old


@dataclass
class Encoder(SessionEncoding):
    """Encodes conditions over one symbolic call to `tool`.

    `override` replaces the presence of chosen values: False (absent) or True (present, read
    from separate `alt` variables) — how the absent-value check compares two copies of a call.
    """

    spec: m.Spec
    tool: m.Tool
    registry: Registry
    domain: list[Any] = field(default_factory=list)
    nice: list[Any] = field(default_factory=list)
    """Preferences for readable witnesses (strings over numbers, non-empty text, absolute
    paths); a query drops them when they make it unsatisfiable."""
    inexact: list[str] = field(default_factory=list)
    override: dict[Key, bool] = field(default_factory=dict)
    _vars: dict[str, Any] = field(default_factory=dict)
    variables: dict[str, Any] = field(default_factory=dict)
    """Every variable made, by name, in the order made (`_vars` forgets a side's variables
    when a comparison encodes the other side; a model is read back over all of them)."""
    _provenance: dict[str, dict[tuple[str, str | None, bool], Any]] = field(default_factory=dict)
    _windows: dict[str, dict[int | None, Any]] = field(default_factory=dict)
    _quantified: dict[str, dict[str, Any]] = field(default_factory=dict)
    _members: dict[Key, list[tuple[m.Value, Any]]] = field(default_factory=dict)
    """The memberships of each list made so far, by element (`related`)."""
    sources: SourceClasses | None = None
    kept: dict[str, Any] = field(default_factory=dict)
    _by_class: dict[str, list[Any]] = field(default_factory=dict)
    _whole: list[tuple[m.History, Any, m.Spec]] = field(default_factory=list)
    """The variables of `SESSION_OLD` and `SOURCE` terms, kept across both sides' encodings
    (a witness reads them back: compare_solve.py)."""
    """Both sides of a comparison whose registries differ in what session terms read
    (sources.py), else None."""
    _preferred: set[int] = field(default_factory=set)
    literals: dict[str, int] = field(default_factory=dict)
    """Text constants of this call, numbered for strings compared only by equality."""
    real_keys: set[Key] | None = None
    """Strings that need z3's string theory; None until `prepare` (then all others are
    compared only by equality and encoded as integers: cheaper, and still exact)."""

    # =========================================================================================
    # Variables

    def var(
        self,
        role: str,
        key: Key,
        sort: str,
        detail: Any = None,
        alt: bool = False,
        constraints: Callable[[Any], Iterable[Any]] | None = None,
    ) -> Any:
        name = f"{role}{'#alt' if alt else ''}|{chr(31).join(key)}|{detail!r}"
        found = self._vars.get(name)
        if found is not None:
            return found
        make = {"bool": z3.Bool, "int": z3.Int, "real": z3.Real, "str": z3.String}[sort]
        made = make(name)
        self._vars[name] = made
        self.variables.setdefault(name, made)
        if role in (SESSION_OLD, SOURCE):
            self.kept[name] = made
        self.registry.setdefault(name, VarInfo(role, key, detail, alt))
        if constraints is not None:
            self.domain.extend(constraints(made))
        return made

    def prefer(self, var: Any, wish: Any) -> None:
        if var.get_id() not in self._preferred:
            self._preferred.add(var.get_id())
            self.nice.append(wish)

    def presence(self, key: Key) -> Bool:
        if key in self.override:
            return self.override[key]
        return self.var("has", key, "bool")

    def free(self, what: object, reason: str) -> Bool:
        self.inexact.append(reason)
        return self.var("free", ("free",), "bool", detail=repr(what))

    # =========================================================================================
    # Strings compared only by equality

    def prepare(self, rules: Iterable[m.Rule]) -> None:
        """Decide which strings need the string theory: those read by `startswith`,
        `matches` or `within`, those with schema constraints, and every string compared
        with one of them. The others are integers: a known text by its number, any other
        integer a text no condition mentions (distinct integers, distinct texts)."""
        real: set[Key] = set()
        edges: dict[Key, set[Key]] = {}
        seen: set[Key] = set()

        def key_of(v: object) -> Key | None:
            if isinstance(v, m.Path) and v.parts and v.root != "tool":
                return (v.root, *v.parts)
            return None

        def walk(c: object) -> None:
            if isinstance(c, m.And | m.Or):
                for i in c.items:
                    walk(i)
            elif isinstance(c, m.Not):
                walk(c.item)
            elif isinstance(c, m.Compare):
                right = c.right.items if isinstance(c.right, m.ListValue) else (c.right,)
                keys = [k for k in (key_of(c.left), *(key_of(r) for r in right)) if k]
                seen.update(keys)
                if OPERATORS[c.op].smt == "text":
                    real.update(keys)
                elif len(keys) > 1:
                    for k in keys:
                        edges.setdefault(k, set()).update(keys)
            elif key_of(c) is not None:
                seen.add(key_of(c))  # type: ignore[arg-type]

        for rule in rules:
            if rule.condition is not None:
                walk(rule.condition)
        for key in seen:
            if key[0] == "args":
                _, f, _ = self._info(key)
                if f is not None and (
                    f.pattern is not None or f.min is not None or f.max is not None
                ):
                    real.add(key)
        todo = list(real)
        while todo:
            for other in edges.get(todo.pop(), ()):
                if other not in real:
                    real.add(other)
                    todo.append(other)
        self.real_keys = real

    def by_equality(self, key: Key, f: m.Field | None) -> bool:
        if self.real_keys is None or key in self.real_keys:
            return False
        return f is None or (f.pattern is None and f.min is None and f.max is None)

    def lit(self, text: str) -> Any:
        return z3.IntVal(self.literals.setdefault(text, len(self.literals)))

    def texts(self) -> dict[int, str]:
        return {n: t for t, n in self.literals.items()}

    def sym_of(self, t: Term) -> Any:
        """An enum or risk value as the number of its text."""
        words = t.values if t.kind == "enum" else m.RISK_LEVELS
        out: Any = self.lit(words[-1])
        for i in range(len(words) - 2, -1, -1):
            out = z3.If(t.expr == i, self.lit(words[i]), out)
        return out

    def text_equals(self, t: Term, text: str) -> Any:
        return t.expr == (self.lit(text) if t.kind == "sym" else z3.StringVal(text))

    # =========================================================================================
    # What a path is

    def info(self, key: Key) -> tuple[m.Type | None, m.Field | None, Bool]:
        """The type, the field (for constraints) and the presence of the value at `key`.

        The type is None for an untyped value; a value a tool's schema does not have is absent.
        """
        type_, field_, present = self._info(key)
        return type_, field_, self.override.get(key, present)

    def _info(self, key: Key) -> tuple[m.Type | None, m.Field | None, Bool]:
        root = key[0]
        if root == "args":
            return self.walk(key, 1, None, self.tool.input.fields, True)
        if root == "fact":
            fact = self.spec.facts.get(key[1])
            if fact is None:
                return None, None, self.presence(key[:2])
            type_ = fact.type
            present = self.presence(key[:2])
            if len(key) == 2:
                return type_, None, present
            return self.walk(key, 2, type_, type_.fields, present)
        known = BUILTINS.get(key[:2])
        if known is not None:
            type_, always = known
            present = True if always else self.presence(key[:2])
            if len(key) == 2:
                return type_, None, present
            return self.walk(key, 2, type_, type_.fields, present)
        return None, None, self.presence(key)

    def walk(
        self,
        key: Key,
        start: int,
        type_: m.Type | None,
        fields: tuple[m.Field, ...],
        present: Bool,
    ) -> tuple[m.Type | None, m.Field | None, Bool]:
        found: m.Field | None = None
        for depth in range(start, len(key)):
            part = key[depth]
            if type_ is not None and type_.name == "map":
                assert type_.item is not None
                type_, found = type_.item, None
                present = conj(present, self.presence(key[: depth + 1]))
                fields = type_.fields
                continue
            if type_ is not None and type_.name != "object":
                return None, None, False  # a scalar or list has no fields
            found = next((f for f in fields if f.name == part), None)
            if found is None:
                return None, None, False
            type_, fields = found.type, found.type.fields
            always = not found.type.optional or found.default is not None
            present = conj(present, True if always else self.presence(key[: depth + 1]))
        return type_, found, present

    # =========================================================================================
    # Operands

    def operand(self, value: object) -> Term:
        if isinstance(value, m.Literal):
            return self.literal(value)
        if isinstance(value, m.EnumMember):
            return Term("name", const=value.name)
        if isinstance(value, m.ListValue):
            return Term("listlit", items=tuple(self.operand(i) for i in value.items))
        if isinstance(value, m.FactCall):
            return Term("bool", expr=self.var("fn", (value.func, value.name), "bool"))
        if isinstance(value, m.Path):
            return self.path(value)
        if isinstance(value, m.History):
            if value.func in ("called", "succeeded", "seen"):
                return Term("bool", expr=self.session_var(value, "bool"))
            if value.func == "count":
                return Term("int", expr=self.count(value))
            return Term("real", expr=self.total(value))
        if isinstance(value, m.Length):
            return self.length(value)
        if isinstance(value, m.Extract):
            of = self.operand(value.of)
            key: Key = ("extract", canonical(value))
            return Term("list", present=of.present, key=key)
        return Term("unsupported")

    @staticmethod
    def literal(value: m.Literal) -> Term:
        v = value.value
        if value.type == "string":
            return Term("str", expr=z3.StringVal(str(v)), const=v)
        if value.type == "bool":
            return Term("bool", expr=z3.BoolVal(bool(v)), const=v)
        if value.type in ("int", "duration"):
            return Term("int", expr=z3.IntVal(int(v)), const=v)
        return Term("real", expr=z3.RealVal(repr(float(v))), const=v)

    def path(self, p: m.Path) -> Term:
        if p.root == "tool":
            return self.tool_term(p.parts)
        key: Key = (p.root, *p.parts)
        if not p.parts:
            return Term("record", key=key)
        type_, field_, present = self.info(key)
        alt = self.override.get(key) is True
        if type_ is None:
            return Term("untyped", key=key, present=present, alt=alt)
        return self.typed(key, type_, field_, present, alt)

    def typed(
        self, key: Key, type_: m.Type, field_: m.Field | None, present: Bool, alt: bool
    ) -> Term:
        name = type_.name
        if name in ("string", "url", "path"):
            if self.by_equality(key, field_):
                v = self.var("v", key, "int", "sym", alt)
                return Term("sym", expr=v, present=present, key=key)
            v = self.var("v", key, "str", "str", alt, lambda s: self.string_domain(s, name, field_))
            self.prefer(
                v, z3.PrefixOf(z3.StringVal("/"), v) if name == "path" else z3.Length(v) > 0
            )
            return Term("str", expr=v, present=present, key=key)
        if name in ("int", "duration"):
            v = self.var("v", key, "int", "int", alt, lambda x: self.number_domain(x, name, field_))
            return Term("int", expr=v, present=present, key=key)
        if name == "float":
            v = self.var(
                "v", key, "real", "real", alt, lambda x: self.number_domain(x, name, field_)
            )
            return Term("real", expr=v, present=present, key=key)
        if name == "bool":
            return Term("bool", expr=self.var("v", key, "bool", "bool", alt), present=present)
        if name == "enum":
            n = len(type_.values)
            v = self.var("v", key, "int", "enum", alt, lambda x: [x >= 0, x < n])
            return Term("enum", expr=v, present=present, values=type_.values, key=key)
        if name == "list":
            return Term("list", present=present, key=key, alt=alt)
        return Term("record", present=present, key=key)

    @staticmethod
    def string_domain(s: Any, name: str, field_: m.Field | None) -> list[Any]:
        out: list[Any] = []
        if name == "path":  # normalized: no empty segment, no trailing slash but the root's
            out += [z3.Length(s) > 0, z3.Not(z3.Contains(s, z3.StringVal("//")))]
            out.append(z3.Or(s == z3.StringVal("/"), z3.Not(z3.SuffixOf(z3.StringVal("/"), s))))
        if field_ is not None:
            if field_.pattern is not None:
                regex = search_regex(field_.pattern)
                if regex is not None:
                    out.append(z3.InRe(s, regex))
            if field_.min is not None:
                out.append(z3.Length(s) >= int(field_.min))
            if field_.max is not None:
                out.append(z3.Length(s) <= int(field_.max))
        return out

    @staticmethod
    def number_domain(x: Any, name: str, field_: m.Field | None) -> list[Any]:
        out: list[Any] = [x >= 0] if name == "duration" else []
        if field_ is not None and name != "duration":
            wrap = z3.IntVal if name == "int" else (lambda v: z3.RealVal(repr(float(v))))
            if field_.min is not None:
                out.append(x >= wrap(field_.min))
            if field_.max is not None:
                out.append(x <= wrap(field_.max))
        return out

    def untyped_as(self, t: Term, sort: str) -> Term:
        """An untyped value read as `sort`: present only when its type tag says so."""
        assert t.key is not None
        tag = self.var("tag", t.key, "int", None, t.alt, lambda x: [x >= 0, x < 4])
        self.prefer(tag, tag == 0)
        present = conj(t.present, tag == UNTYPED_SORTS.index(sort))
        if sort == "other":
            return Term("list", present=present, key=t.key, alt=t.alt)
        if sort == "str" and self.by_equality(t.key, None):
            v = self.var("v", t.key, "int", "sym", t.alt)
            return Term("sym", expr=v, present=present, key=t.key)
        v = self.var("v", t.key, sort, sort, t.alt)
        if sort == "str":
            self.prefer(v, z3.Length(v) > 0)
        return Term(sort, expr=v, present=present, key=t.key)

    def tool_term(self, parts: tuple[str, ...]) -> Term:
        tool = self.tool
        what = parts[0] if parts else ""
        if len(parts) > 1:
            return Term("unsupported")
        if what == "id":
            return Term("str", expr=z3.StringVal(tool.id), const=tool.id)
        if what == "kind":
            return Term("str", expr=z3.StringVal(tool.kind), const=tool.kind)
        if what == "version":
            return Term("int", expr=z3.IntVal(tool.version), const=tool.version)
        if what in ("tags", "packs"):
            return Term("constlist", extra=tuple(getattr(tool, what)))
        if what == "risk":
            return Term("risk", expr=self.risk_expr())
        if what == "effects":
            return Term("effects", extra={e: self.effect_expr(e) for e in m.EFFECTS})
        if not parts:
            return Term("record", key=("tool",))
        return Term("unsupported")

    def op_index(self) -> Any:
        op = self.path(m.Path(root="args", parts=("op",)))
        return op.expr

    def risk_expr(self) -> Any:
        tool = self.tool
        if not tool.operations:
            return z3.IntVal(m.risk_rank(tool.risk))
        idx, names = self.op_index(), list(self.tool.operations)
        out: Any = z3.IntVal(m.risk_rank(tool.operations[names[-1]].risk))
        for i in range(len(names) - 2, -1, -1):
            out = z3.If(idx == i, z3.IntVal(m.risk_rank(tool.operations[names[i]].risk)), out)
        return out

    def effect_expr(self, effect: str) -> Bool:
        tool = self.tool
        if not tool.operations:
            return effect in tool.effects
        idx = self.op_index()
        return disj(
            *(idx == i for i, op in enumerate(tool.operations.values()) if effect in op.effects)
        )

    # =========================================================================================
    # Conditions

    def rule_match(self, rule: m.Rule) -> Bool:
        """The rule matches the call: one of its selectors does and its `when` holds."""
        selected = disj(*(self.selector(s) for s in rule.selectors))
        if selected is False:
            return False
        return conj(selected, self.cond(rule.condition) if rule.condition is not None else True)

    def selector(self, sel: m.Selector) -> Bool:
        tool = self.tool
        if sel.kind not in ("risk", "effects") or not tool.operations:
            return selects(sel, tool)
        if sel.kind == "effects":
            return self.effect_expr(sel.value)
        # the call's operation sets its risk: the selector's comparison over z3's
        operator = OPERATORS.get(sel.op or "")
        if sel.value not in m.RISK_LEVELS or operator is None or operator.relation is None:
            return False
        relation = operator.relation
        level = m.risk_rank(sel.value)
        risk = self.risk_expr()
        if operator.family == "equality":
            return z3.simplify(relation(risk, level))
        return relation(risk, level)

    def cond(self, c: object) -> Bool:
        if isinstance(c, m.Compare):
            return self.compare(c)
        if isinstance(c, m.And):
            return conj(*(self.cond(i) for i in c.items))
        if isinstance(c, m.Or):
            return disj(*(self.cond(i) for i in c.items))
        if isinstance(c, m.Not):
            return negate(self.cond(c.item))
        if isinstance(c, m.Literal) and c.type == "bool":
            return bool(c.value)
        if isinstance(c, m.Provenance):
            return self.provenance(c)
        if isinstance(c, m.Quantified):
            return self.quantified(c)
        t = self.operand(c)
        if t.kind == "untyped":
            t = self.untyped_as(t, "bool")
        if t.kind == "bool":
            return conj(t.present, t.expr)
        return self.free(c, "a value that is not a boolean is used as a condition")

    def compare(self, c: m.Compare) -> Bool:
        return ENCODINGS[OPERATORS[c.op].smt](self, c)

    def binary(self, c: m.Compare, relate: Relate, negated: bool = False) -> Bool:
        """`c` through `relate`, which gives (both present, the relation) or None."""
        a, b = self.operand(c.left), self.operand(c.right)
        if a.kind == "unsupported" or b.kind == "unsupported":
            return self.free(c, "an operand z3 cannot express")
        if a.present is False or b.present is False:
            return False
        found = relate(self, c.op, a, b)
        if found is None:
            return self.free(c, f"a comparison `{c.op}` z3 cannot express")
        present, holds = found
        if negated and (a.kind == "untyped") != (b.kind == "untyped"):
            # `!=` holds on an untyped value of another type than the other operand's: it is
            # present and unequal (`value_ne`), where reading it as that type is not present
            return conj(conj(a.present, b.present), negate(conj(present, holds)))
        return conj(present, negate(holds) if negated else holds)

    # --- equality and order ------------------------------------------------------------------

    def settle(self, a: Term, b: Term) -> tuple[Term, Term]:
        """Give an untyped operand the sort of the other one."""
        if a.kind == "untyped" and b.kind == "untyped":
            return self.untyped_as(a, "str"), self.untyped_as(b, "str")
        if a.kind == "untyped":
            return self.untyped_as(a, _sort_for(b)), b
        if b.kind == "untyped":
            return a, self.untyped_as(b, _sort_for(a))
        return a, b

    def equal(self, a: Term, b: Term) -> tuple[Bool, Bool] | None:
        a, b = self.settle(a, b)
        present = conj(a.present, b.present)
        if b.kind == "sym" and a.kind != "sym":
            a, b = b, a
        if a.kind == "sym":
            if b.kind == "sym":
                return present, a.expr == b.expr
            if b.kind == "name" or (b.kind == "str" and b.const is not None):
                return present, a.expr == self.lit(str(b.const))
            if b.kind in ("enum", "risk"):
                return present, a.expr == self.sym_of(b)
            return None
        if b.kind in ("enum", "risk") and a.kind != b.kind:
            a, b = b, a
        if a.kind == "name" and b.kind == "name":
            return present, a.const == b.const
        if a.kind in ("enum", "risk") and (b.kind == "name" or b.const is not None):
            if b.kind not in ("name", "str"):
                return None
            word = str(b.const)
            if a.kind == "risk":
                return present, (a.expr == m.risk_rank(word)) if word in m.RISK_LEVELS else False
            return present, (a.expr == a.values.index(word)) if word in a.values else False
        if a.kind == "enum" and b.kind == "enum" and a.values == b.values:
            return present, a.expr == b.expr
        if a.kind == "risk" and b.kind == "risk":
            return present, a.expr == b.expr
        a, b = self.as_string(a), self.as_string(b)
        if a.kind == "name":
            a = Term("str", expr=z3.StringVal(a.const), const=a.const)
        if b.kind == "name":
            b = Term("str", expr=z3.StringVal(b.const), const=b.const)
        if {a.kind, b.kind} == {"int", "real"}:
            if a.kind == "int":
                return present, z3.ToReal(a.expr) == b.expr
            return present, a.expr == z3.ToReal(b.expr)
        if a.kind == b.kind and a.kind in ("str", "int", "real", "bool"):
            if a.const is not None and b.const is not None:
                return present, a.const == b.const
            return present, a.expr == b.expr
        return None

    def as_string(self, t: Term) -> Term:
        """An enum or risk value as its text, to compare it with a string."""
        if t.kind == "enum":
            words = t.values
        elif t.kind == "risk":
            words = m.RISK_LEVELS
        else:
            return t
        out: Any = z3.StringVal(words[-1])
        for i in range(len(words) - 2, -1, -1):
            out = z3.If(t.expr == i, z3.StringVal(words[i]), out)
        return Term("str", expr=out, present=t.present)

    def order(self, op: str, a: Term, b: Term) -> tuple[Bool, Bool] | None:
        a, b = self.settle(a, b)
        present = conj(a.present, b.present)
        if a.kind == "risk" or b.kind == "risk":
            x, y = self.rank(a), self.rank(b)
            if x is None or y is None:
                return None
            return present, _relation(op)(x, y)
        if a.kind in ("int", "real") and b.kind in ("int", "real"):
            x, y = a.expr, b.expr
            # a mixed comparison compares reals: only the int side is converted
            if a.kind == "int" and b.kind == "real":
                x = z3.ToReal(x)
            elif a.kind == "real" and b.kind == "int":
                y = z3.ToReal(y)
            return present, _relation(op)(x, y)
        return None

    @staticmethod
    def rank(t: Term) -> Any:
        if t.kind == "risk":
            return t.expr
        word = t.const if t.kind in ("name", "str") else None
        if word in m.RISK_LEVELS:
            return z3.IntVal(m.risk_rank(word))
        return None

    def string_op(self, op: str, a: Term, b: Term) -> tuple[Bool, Bool] | None:
        if a.kind == "untyped":
            a = self.untyped_as(a, "str")
        if b.kind == "untyped":
            b = self.untyped_as(b, "str")
        a, b = self.as_string(a), self.as_string(b)
        if b.kind == "name":
            b = Term("str", expr=z3.StringVal(b.const), const=b.const)
        if a.kind != "str" or b.kind != "str":
            return None
        if any(len(str(t.const)) > MAX_SMT_TEXT for t in (a, b) if t.const is not None):
            return None
        present = conj(a.present, b.present)
        if op == "matches":
            regex = search_regex(str(b.const)) if b.const is not None else None
            if regex is None:
                return None
            return present, z3.InRe(a.expr, regex)
        relation = OPERATORS[op].smt_text
        if relation is not None:
            return present, relation(z3, a.expr, b.expr)
        if op != "within":
            return None  # a text operator the table gives no z3 relation: left free
        # within: containment by whole segments of normalized paths
        root, p = b.expr, a.expr
        slash = z3.StringVal("/")
        if b.const is not None:
            base = str(b.const)
            if base == "/":
                return present, z3.PrefixOf(slash, p)
            return present, z3.Or(p == root, z3.PrefixOf(z3.StringVal(base + "/"), p))
        return present, z3.Or(
            p == root,
            z3.PrefixOf(z3.Concat(root, slash), p),
            z3.And(root == slash, z3.PrefixOf(slash, p)),
        )

    # --- has and in --------------------------------------------------------------------------

    def has(self, left: object, right: object, where: object) -> Bool:
        t = self.operand(left)
        word: Any = None
        if isinstance(right, m.EnumMember):
            word = right.name
        elif isinstance(right, m.Literal) and right.type != "bool":
            word = right.value
        if word is None:
            if isinstance(right, m.Path) and right.root != "var" and right.parts:
                held = self.holds_value(t, right)
                if held is not None:
                    return held
            return self.free(where, "`has` with an element z3 cannot express")
        if t.kind == "record" or (t.kind == "untyped" and isinstance(right, m.EnumMember)):
            assert t.key is not None
            if t.key == ("tool",):
                return str(word) in m.Tool.model_fields
            _, _, present = self.info((*t.key, str(word)))
            return conj(t.present, present)
        if t.kind == "untyped":
            t = self.untyped_as(t, "other")
        if t.kind == "list":
            held = self.member(t, word)
            element = isinstance(right, m.Literal | m.EnumMember)
            if element and t.key is not None and t.key[0] != "extract":
                self.related(t.key, right, held)  # type: ignore[arg-type]
            return conj(t.present, held)
        if t.kind == "effects":
            return t.extra.get(str(word), False)
        if t.kind == "constlist":
            return word in t.extra
        return self.free(where, "`has` on a value z3 cannot express")

    def member(self, t: Term, word: Any) -> Any:
        assert t.key is not None
        key = t.key
        if key == ("actor", "roles"):  # roles always contains role (language.md §3)

            def roles(v: Any) -> list[Any]:
                role = self.typed(("actor", "role"), STRING, None, True, False)
                return [z3.Implies(self.text_equals(role, str(word)), v)]

            return self.var("in", key, "bool", word, t.alt, roles)
        return self.var("in", key, "bool", word, t.alt)

    def holds_value(self, t: Term, value: m.Path) -> Bool | None:
        """A list holds a value of the call (`args.iban in facts.ibans`): a variable of its
        own, equal to every other membership of the list whose element equals the value (the
        witness puts the value in the list when it holds: assemble.py). None when z3 cannot
        express it."""
        if t.kind != "list" or t.key is None or t.key[0] == "extract" or t.alt:
            return None
        if t.key == ("actor", "roles"):
            return None
        v = self.operand(value)
        if v.kind not in ("sym", "str", "int", "enum") or v.key is None:
            return None
        held = self.var("inv", t.key, "bool", v.key)
        self.related(t.key, value, held)
        fed = self.fed(t.key[1], value) if t.key[0] == "fact" and len(t.key) == 2 else []
        return conj(v.present, disj(conj(t.present, held), *fed))

    def related(self, key: Key, element: m.Value, held: Any) -> None:
        """Two memberships of one list whose elements are equal are one membership."""
        known = self._members.setdefault(key, [])
        if any(held is other for _, other in known):
            return
        for other_element, other in known:
            if isinstance(element, m.Path) or isinstance(other_element, m.Path):
                same = self.compare(m.Compare(op="==", left=element, right=other_element))
                if same is not False:
                    self.domain.append(z3.Implies(to_z3(same), held == other))
        known.append((element, held))

    def member_of(self, c: m.Compare) -> Bool:
        if isinstance(c.right, m.ListValue):
            return disj(
                *(self.compare(m.Compare(op="==", left=c.left, right=i)) for i in c.right.items)
            )
        if isinstance(c.left, m.Literal | m.EnumMember | m.Path):
            return self.has(c.right, c.left, c)
        return self.free(c, "`in` with operands z3 cannot express")


Relate = Callable[["Encoder", str, Term, Term], tuple[Bool, Bool] | None]

ENCODINGS: dict[str, Callable[[Encoder, m.Compare], Bool]] = {
    "equal": lambda e, c: e.binary(c, lambda e, op, a, b: e.equal(a, b)),
    "unequal": lambda e, c: e.binary(c, lambda e, op, a, b: e.equal(a, b), negated=True),
    "order": lambda e, c: e.binary(c, Encoder.order),
    "text": lambda e, c: e.binary(c, Encoder.string_op),
    "has": lambda e, c: e.has(c.left, c.right, c),
    "member": Encoder.member_of,
}
"""The z3 encoding of each operator, by its `smt` key in `runtime/model/semantics.py`."""


def _relation(op: str) -> Callable[[Any, Any], Any]:
    relation = OPERATORS[op].relation
    assert relation is not None, op
    return relation


def _sort_for(t: Term) -> str:
    if t.kind in ("int", "real"):
        return "real"
    if t.kind == "bool":
        return "bool"
    if t.kind in ("list", "constlist", "effects", "record", "listlit"):
        return "other"
    return "str"
