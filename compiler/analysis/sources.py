"""Where a value of a call can have come from, as two specs see one session (compare.py).

A session is the same ledger whichever spec judges the call, but what its terms mean reads the
registry: `v from trusted` holds when `v` is in the result of a tool the spec trusts, `v from
label L` when that result carries `L`, `count(tag "x")` counts the tools the spec tags `x`. So
when a change trusts a tool, labels it, or retags it, one session gives a term one value under
the old spec and another under the new one.

`SourceClasses` names the places a value can come from in both specs: `user` (a message of the
user) and `TOOL:FIELD`, each top-level text output field of a tool both specs register (a
result holding the value there, as the witness's session prelude makes it), with its kinds
(`trusted`, `untrusted`) and the labels a result holding it carries, on each side: a field the
tool's `on_success add result.FIELD to FACT` adds to a fact is also a fact value there, so also
`trusted` (runtime/judge/history.py `facts_changed`, as the runtime's ledger records it). Likewise
`TOOL(args.X)`, for each `on_success add args.X to FACT` of a tool both specs register: an
earlier call of the tool with the value as that argument, which makes it a fact value
(`trusted`) on a side whose tool adds it, and no source at all on the other. The solver
gives each value one boolean per class (the ledger), and each side's provenance terms are
functions of them (smt_session.py): related, never independent values.

A fact the two specs' `on_success` adds to differently (`feeds`) is read on each side as given
plus what the earlier calls its classes stand for added there (smt_session.py `fed`): the
class's boolean makes the call's value a member on the adding side only, and `fed_facts` gives
a witness's facts as such a side reads them.

`meaning` says, without z3, what a session term reads of one spec; a term whose meaning differs
between the sides is a different variable on each (`differs`), and a tool whose rules read one
is compared even when its own bucket is unchanged (compare_solve.identical).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harnessc.runtime import model as m
from harnessc.runtime.model.semantics import selects

from .concrete import SessionTerm, canonical, session_terms, visit_nodes
from .text import update_text

__all__ = [
    "FACTS",
    "ITEMS",
    "USER",
    "SourceClasses",
    "arg_class",
    "call_of",
    "classes_of",
    "differs",
    "fed_facts",
    "feeds",
    "holding_result",
    "item_of",
    "meaning",
    "meanings_digest",
    "output_text_paths",
    "plain_adds",
    "producers",
    "rule_terms",
    "session_meanings_differ",
    "value_key",
    "value_key_of",
]

USER = "user"
FACTS = "facts"
"""The class of a value among the session's facts (trusted on both sides, no labels)."""
_TEXT_TYPES = ("string", "url", "path")
_VIEWS: dict[int, tuple[m.Spec, str]] = {}
"""Made views by the spec's id, each with its spec (kept alive, so the id is not reused)."""


def source_view(spec: m.Spec) -> str:
    """A digest of everything of the registry provenance reads: each tool's trust, labels,
    output schema (its fields' trust, labels and secrecy at any depth) and the values its
    `on_success` adds to facts (made once per spec)."""
    made = _VIEWS.get(id(spec))
    if made is not None and made[0] is spec:
        return made[1]
    view = {}
    for tool_id in sorted(spec.tools):
        tool = spec.tools[tool_id]
        adds = [update_text(u) for u in tool.on_success]
        view[tool_id] = [
            tool.trust,
            sorted(tool.labels),
            tool.kind == "mcp",
            _schema(tool.output),
            adds,  # `on_success`: a value it adds is a fact (trusted) too, until removed
        ]
    if len(_VIEWS) > 16:
        _VIEWS.clear()
    # a digest: a term's meaning is compared and hashed once per tool that reads it
    text = hashlib.sha256(json.dumps(view, sort_keys=True).encode()).hexdigest()
    _VIEWS[id(spec)] = (spec, text)
    return text


def producers(spec: m.Spec, label: str) -> list[str]:
    """The tools whose results can carry the label (`seen(label)`): the tool's own labels, or
    an output field's at any depth."""

    def carried(fields: Iterable[m.Field]) -> bool:
        return any(label in f.labels or carried(_unwrapped(f.type).fields) for f in fields)

    out = []
    for t in sorted(spec.tools):
        tool = spec.tools[t]
        if label in tool.labels or (tool.output is not None and carried(tool.output.fields)):
            out.append(t)
    return out


def _reads_provenance(node: m.Condition | None) -> bool:
    return node is not None and any(
        isinstance(f.term, m.Provenance) and _trust_bound(f.term) for f in session_terms(node)
    )


def _trust_bound(p: m.Provenance) -> bool:
    """Whether the term's value depends on which tools are trusted or labelled: `from user`
    and `from nowhere` do not (a message is the user's, and nowhere is no entry at all)."""
    return p.source in ("trusted", "untrusted", "label") or (p.only and p.source != "nowhere")


def meaning(spec: m.Spec, term: SessionTerm) -> Any:
    """What the term reads of the spec besides the call (comparable across specs)."""
    if isinstance(term, m.Provenance) and term.call is not None:
        # `from result(…)`: the calls its history term selects, and what their results put
        # in the index (their outputs' schemas, secret fields left out)
        field = term.field.parts if term.field is not None else None
        return [meaning(spec, term.call), source_view(spec), field]
    if isinstance(term, m.Provenance):
        return source_view(spec) if _trust_bound(term) else None
    if isinstance(term, m.Quantified):
        return source_view(spec) if _reads_provenance(term.body) else None
    if isinstance(term, m.History):
        chosen = [
            t for t in sorted(spec.tools) if any(selects(s, spec.tools[t]) for s in term.selectors)
        ]
        if term.func == "seen":
            return producers(spec, term.label or "")
        reads = _reads_provenance(term.where)
        parts: list[Any] = [chosen, source_view(spec) if reads else None]
        if term.where is not None:
            # the `when` reads the earlier call's arguments or result: the schemas it reads,
            # with their fields' trust and labels only when it asks where a value came from
            # (a trust change means nothing to `count(t when args.id == "x")`)
            roots = _roots(term.where)
            parts += [
                [
                    _schema(spec.tools[t].input, reads) if "args" in roots else None,
                    _schema(spec.tools[t].output, reads) if "result" in roots else None,
                ]
                for t in chosen
            ]
        if term.field is not None:
            # the field's type in each selected tool (a `sum` adds numbers only)
            f = term.field
            for t in chosen:
                tool = spec.tools[t]
                schema = tool.input if f.root == "args" else tool.output
                found = (
                    next(
                        (g for g in (schema.fields if schema else ()) if g.name == f.parts[0]), None
                    )
                    if f.parts
                    else None
                )
                parts.append([found.type.name, found.min] if found is not None else None)
        return parts
    return None


_DIFFERS: dict[tuple[int, int, str], tuple[m.Spec, m.Spec, bool]] = {}


def _schema(schema: m.Schema | m.Type | None, trust: bool = True) -> str | None:
    """A schema as a comparable text; without its fields' `trust` and `labels` unless
    `trust` (what only provenance and `seen` read)."""
    if schema is None:
        return None
    dumped = m.without_origins(schema)
    if not trust:
        dumped = _without_trust(dumped)
    return json.dumps(dumped, sort_keys=True, default=str)


def _without_trust(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_trust(v) for k, v in value.items() if k not in ("trust", "labels")}
    if isinstance(value, list):
        return [_without_trust(v) for v in value]
    return value


def _roots(node: object) -> set[str]:
    """The roots of the paths a condition reads (`args`, `result`, a quantifier's variable)."""
    found: set[str] = set()

    def visit(item: object) -> bool:
        if isinstance(item, m.Path):
            found.add(item.root)
            return True
        return False

    visit_nodes(node, visit)
    return found


def differs(old: m.Spec, new: m.Spec, term: SessionTerm) -> bool:
    """Whether the term means something else under each spec (made once per pair and term)."""
    key = (id(old), id(new), canonical(term))
    found = _DIFFERS.get(key)
    if found is not None and found[0] is old and found[1] is new:
        return found[2]
    if len(_DIFFERS) > 4096:
        _DIFFERS.clear()
    answer = bool(meaning(old, term) != meaning(new, term))
    _DIFFERS[key] = (old, new, answer)
    return answer


def meanings_digest(spec: m.Spec, rules: Iterable[m.Rule]) -> str:
    """A digest of what the rules' session terms read of the spec (a cache key's part)."""
    parts = [[canonical(t), meaning(spec, t)] for rule in rules for t in rule_terms(rule)]
    if not parts:
        return ""
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def session_meanings_differ(old: m.Spec, new: m.Spec, rules: Iterable[m.Rule]) -> bool:
    """Whether a session term some rule reads means something else under each spec."""
    if old is new:
        return False
    return any(differs(old, new, t) for rule in rules for t in rule_terms(rule))


_RULE_TERMS: dict[int, tuple[m.Rule, list[SessionTerm]]] = {}


def rule_terms(rule: m.Rule) -> list[SessionTerm]:
    """The session terms of a rule's condition (made once per rule: many tools share one)."""
    made = _RULE_TERMS.get(id(rule))
    if made is not None and made[0] is rule:
        return made[1]
    if len(_RULE_TERMS) > 65536:
        _RULE_TERMS.clear()
    terms = [f.term for f in session_terms(rule.condition)] if rule.condition is not None else []
    _RULE_TERMS[id(rule)] = (rule, terms)
    return terms


@dataclass
class SourceClasses:
    """The places a value can come from, in both specs (module docstring)."""

    old: m.Spec
    new: m.Spec
    names: list[str] = field(default_factory=list)
    kinds: dict[tuple[int, str], frozenset[str]] = field(default_factory=dict)
    """Each class's kinds on each side (by the spec's id); none: not a source there (a
    `secret` field)."""
    labels: dict[tuple[int, str], frozenset[str]] = field(default_factory=dict)
    fact: tuple[str, bool] | None = None
    """A declared fact a witness can hold a value in (its name, and whether it is a list):
    the `FACTS` class exists when there is one."""

    def __post_init__(self) -> None:
        self.names = [USER]
        for spec in (self.old, self.new):
            self.kinds[id(spec), USER] = frozenset({"user"})
            self.labels[id(spec), USER] = frozenset()
        self.fact = _text_fact(self.new) or _text_fact(self.old)
        if self.fact is not None:
            self.names.append(FACTS)
            for spec in (self.old, self.new):
                self.kinds[id(spec), FACTS] = frozenset({"trusted"})
                self.labels[id(spec), FACTS] = frozenset()
        for tool_id in sorted(self.old.tools.keys() & self.new.tools.keys()):
            tools = [spec.tools[tool_id] for spec in (self.old, self.new)]
            paths = {p for t in tools for p, _ in output_text_paths(t)}
            for path in sorted(paths):
                cls = f"{tool_id}:{'.'.join(path)}"
                self.names.append(cls)
                # the result the prelude makes on the new spec, read by each side's schema
                result = holding_result(tools[1], path, _MARK, _sample)
                for spec, tool in zip((self.old, self.new), tools, strict=True):
                    self.kinds[id(spec), cls], self.labels[id(spec), cls] = _read(tool, result)
            added = {a.value.parts for t in tools for a in t.on_success if _takes_arg(a)}
            for parts in sorted(p for p in added if p):
                cls = arg_class(tool_id, parts)
                self.names.append(cls)
                args = _holding(parts, _MARK)
                for spec, tool in zip((self.old, self.new), tools, strict=True):
                    self.kinds[id(spec), cls] = _added_kinds(tool, args, None)
                    self.labels[id(spec), cls] = frozenset()  # the call made no result

    def selected(self, spec: m.Spec, term: m.Provenance) -> tuple[list[str], list[str]]:
        """The classes that make the term hold on this side, and those it forbids (`only`:
        every class with another kind; `nowhere`: every class)."""
        live = [c for c in self.names if self.kinds[id(spec), c]]
        if term.source == "nowhere":
            return [], live
        if term.source == "label":
            return [c for c in live if term.label in self.labels[id(spec), c]], []
        mine = [c for c in live if term.source in self.kinds[id(spec), c]]
        others = [c for c in live if self.kinds[id(spec), c] - {term.source}]
        return mine, others if term.only else []

    def same(self, term: m.Provenance) -> bool:
        return self.selected(self.old, term) == self.selected(self.new, term)


def _text_fact(spec: m.Spec) -> tuple[str, bool] | None:
    """The first declared fact (by name) that holds a text, or a list of texts."""
    for name in sorted(spec.facts):
        t = spec.facts[name].type
        if t.name in _TEXT_TYPES:
            return name, False
        if t.name == "list" and t.item is not None and t.item.name in _TEXT_TYPES:
            return name, True
    return None


def arg_class(tool_id: str, parts: Sequence[str]) -> str:
    """The class of a value an earlier call of the tool took as the argument at `parts`."""
    return f"{tool_id}(args.{'.'.join(parts)})"


def feeds(spec: m.Spec, fact: str) -> frozenset[tuple[str, str, tuple[str, ...], str]]:
    """The earlier calls whose `on_success` changes the fact: each tool, the root (`args` or
    `result`) and path of the value it adds or removes, and the update as written (a `remove`,
    a `when` or an `each` make two specs' updates differ) (runtime/judge/history.py
    `facts_changed`)."""
    return frozenset(
        (tool_id, u.value.root, tuple(u.value.parts), update_text(u))
        for tool_id, tool in spec.tools.items()
        for u in tool.on_success
        if u.fact == fact
    )


def plain_adds(spec: m.Spec, fact: str) -> frozenset[tuple[str, str, tuple[str, ...]]]:
    """The calls that surely put their value in the fact: `on_success add PATH to FACT`
    without `when` or `each` (a prelude's call stands for one of them, `smt_session.fed`).
    A conditional update, an `each` and a `remove` are not modelled as a class of source: the
    comparison may miss a witness through them, never give a wrong one (each is run)."""
    return frozenset(
        (tool_id, u.value.root, tuple(u.value.parts))
        for tool_id, tool in spec.tools.items()
        for u in tool.on_success
        if u.fact == fact and _plain_add(u)
    )


def _plain_add(update: m.FactUpdate) -> bool:
    return update.op == "add" and update.each is None and update.when is None


def _takes_arg(update: m.FactUpdate) -> bool:
    return _plain_add(update) and update.value.root == "args"


def fed_facts(spec: m.Spec, call: Any) -> dict[str, Any]:
    """The witness's facts as `spec` reads them after the earlier calls its classes of source
    stand for (`Call.sources`: a call that took or gave each value), each adding what its
    `on_success` adds (runtime/judge/history.py `facts_after`), as the prelude's steps leave
    them."""
    from harnessc.runtime.judge.history import facts_after

    from .concrete import ABSENT, read_value

    steps = []
    for key, classes in sorted(call.sources.items()):
        path, index = item_of(key)
        value = read_value(spec, path, call)
        if index is not None:
            value = value[index] if isinstance(value, list) and index < len(value) else ABSENT
        if value is ABSENT or value is None:
            continue
        for cls in classes:
            made = call_of(cls)
            if made is None or made[0] not in spec.tools:
                continue
            tool_id, root, parts = made
            held = _holding(parts, value)
            if root == "args":
                steps.append(m.SessionStep(tool=tool_id, args=held))
            else:
                steps.append(m.SessionStep(tool=tool_id, args={}, result=held))
    return facts_after(spec, steps, call.facts) if steps else dict(call.facts)


def call_of(cls: str) -> tuple[str, str, tuple[str, ...]] | None:
    """The earlier call a class of a tool stands for: its tool, `args` or `result`, and the
    path there; None for `user` and `facts`."""
    if cls.endswith(")") and "(args." in cls:
        tool_id, _, path = cls[:-1].rpartition("(args.")
        return tool_id, "args", tuple(path.split("."))
    tool_id, colon, path = cls.rpartition(":")
    if not colon:
        return None
    return tool_id, "result", tuple(p for p in path.split(".") if p)  # `t:`: the whole result


def _holding(parts: Sequence[str], value: Any) -> dict[str, Any]:
    """Records down to `value` at `parts`."""
    out: Any = value
    for name in reversed(parts):
        out = {name: out}
    return dict(out)


def _added_kinds(tool: m.Tool, args: Mapping[str, Any], result: Any) -> frozenset[str]:
    """`{"trusted"}` when the tool's `on_success` adds `_MARK` to a fact from a call with
    `args` and `result` (the ledger indexes the added values as facts), else none."""
    from harnessc.runtime.judge.history import facts_changed
    from harnessc.runtime.judge.provenance import scalars as result_scalars

    added = facts_changed(tool, args, result, {})
    marked = any(scalar == _MARK for scalar, _ in result_scalars(added, None, "trusted"))
    return frozenset({"trusted"}) if marked else frozenset()


_CLASSES: dict[tuple[int, int], SourceClasses] = {}


def classes_of(old: m.Spec, new: m.Spec) -> SourceClasses:
    """The classes of the pair (made once per pair of specs)."""
    key = (id(old), id(new))
    found = _CLASSES.get(key)
    if found is None or found.old is not old or found.new is not new:
        if len(_CLASSES) > 16:
            _CLASSES.clear()
        found = _CLASSES[key] = SourceClasses(old, new)
    return found


_MARK = "\x00value"
"""The text a class's least result holds, found again among its scalars (no sample is it)."""


def _sample(f: m.Field) -> Any:
    from .assemble import sample_value

    return sample_value(f, f.type)


UNLISTED = "_unlisted"
"""The key a class of a tool gives the unlisted part of an open record (`{ id: string, ... }`):
a value there carries the tool's trust (language.md §5.5)."""


def output_text_paths(tool: m.Tool) -> Iterable[tuple[tuple[str, ...], str | None]]:
    """Where a text can be in a tool's result: its paths (records' fields, through lists, maps
    and unions; `UNLISTED` for an open record's unlisted part) and the declared trust there."""
    return () if tool.output is None else _type_paths(tool.output.type, (), None)


def _read(tool: m.Tool, result: dict[str, Any]) -> tuple[frozenset[str], frozenset[str]]:
    """What a side makes of a result holding `_MARK`: the kinds the runtime's index gives the
    value (the nearest `trusted`/`untrusted` above it, else the tool's; an MCP tool's always
    untrusted; none when a `secret` field hides it; `trusted` too when the tool's `on_success`
    adds it to a fact) and the labels the result carries."""
    from harnessc.runtime.judge.history import result_labels
    from harnessc.runtime.judge.provenance import fields_of
    from harnessc.runtime.judge.provenance import scalars as result_scalars

    mcp = tool.kind == "mcp"
    base = "untrusted" if mcp else tool.trust or "untrusted"
    fields = None if mcp else fields_of(tool.output)
    kinds = {kind for scalar, kind in result_scalars(result, fields, base) if scalar == _MARK}
    # `on_success add result.FIELD to FACT`: a fact value too
    return frozenset(kinds) | _added_kinds(tool, {}, result), result_labels(tool, result)


def _type_paths(
    t: m.Type, prefix: tuple[str, ...], trust: str | None
) -> Iterable[tuple[tuple[str, ...], str | None]]:
    inner = _unwrapped(t)
    if inner.name == "union":
        for option in inner.options:
            yield from _type_paths(option, prefix, trust)
    elif inner.name in _TEXT_TYPES or inner.name == "any":
        # an `any` holds text too, at the tool's own trust (a field's speaks for listed fields)
        yield prefix, trust if inner.name != "any" else None
    elif inner.name == "object" and len(prefix) < 4:
        for f in inner.fields:
            if not f.secret:
                yield from _type_paths(f.type, (*prefix, f.name), f.trust or trust)
        if inner.open:
            yield (*prefix, UNLISTED), None


def _unwrapped(t: m.Type) -> m.Type:
    while t.name in ("list", "map") and t.item is not None:
        t = t.item
    return t


def holding_result(
    tool: m.Tool, path: Sequence[str], text: str, fill: Callable[[m.Field], Any]
) -> dict[str, Any]:
    """The least result of the tool that holds `text` at `path` (through lists and maps, one
    item each; records down to it where the schema declares no such field): every required
    field beside it filled by `fill`."""

    def record(fields: Sequence[m.Field], rest: Sequence[str]) -> dict[str, Any]:
        out = {f.name: fill(f) for f in fields if f.required and f.name != rest[0]}
        f = next((g for g in fields if g.name == rest[0]), None)
        if f is None:  # a field this schema does not declare: records down to the text
            inner: Any = text
            for name in reversed(rest[1:]):
                inner = {name: inner}
            out[rest[0]] = inner
        else:
            out[f.name] = inside(f.type, rest[1:])
        return out

    def inside(t: m.Type, rest: Sequence[str]) -> Any:
        if t.name == "union":
            return inside(_option_holding(t, rest), rest)
        if t.name == "list" and t.item is not None:
            return [inside(t.item, rest)]
        if t.name == "map" and t.item is not None:
            return {"key": inside(t.item, rest)}
        if not rest:
            return text
        return record(t.fields, rest)

    output = tool.output
    if output is not None and output.shape is not None:
        return inside(output.shape, list(path))  # type: ignore[no-any-return]
    return record(output.fields if output is not None else (), list(path))


def _option_holding(t: m.Type, rest: Sequence[str]) -> m.Type:
    """The alternative of a union a value at `rest` is in: a text for an empty path, else a
    record that lists its first key (or any record)."""
    options = t.options
    if not rest:
        return next((o for o in options if _unwrapped(o).name in _TEXT_TYPES), options[0])
    records = [o for o in options if _unwrapped(o).name == "object"]
    listing = [o for o in records if any(f.name == rest[0] for f in _unwrapped(o).fields)]
    return (listing or records or list(options))[0]


def value_key(term: m.Provenance) -> str | None:
    """The canonical form of the value a provenance term reads, when it is an argument (the
    classes are modelled for a call's arguments; other values keep one variable a term)."""
    return value_key_of(term.value)


def value_key_of(value: m.Value) -> str | None:
    if isinstance(value, m.Path) and value.root == "args" and value.parts:
        return canonical(value)  # type: ignore[arg-type]
    return None


ITEMS = 3
"""The items of a list argument whose sources a quantifier's body reads one by one: a longer
list leaves the quantifier a free value (smt_session.py `by_item`)."""


def item_of(key: str) -> tuple[m.Path, int | None]:
    """A key of `Call.sources`: an argument (`canonical(path)`), or an item of a list argument
    (`canonical(path)#i`)."""
    head, mark, index = key.rpartition("#")
    if mark and index.isdigit() and head.endswith("}"):
        return m.Path.model_validate_json(head), int(index)
    return m.Path.model_validate_json(key), None
