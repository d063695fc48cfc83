"""The session-aware checks of stage validate (compiler/validate.py), as a mixin of its validator.

Conditions that read session state: provenance (`x from source`, H340), quantifiers over lists
(H342), the value functions `len`, `urls`, `hosts`, `emails`, `ibans`, `params`, `segments`
(H339), history terms `called`, `succeeded`, `count`, `sum`, `seen` (H337, H338, H339) and the
`result.*` they read, and a tool's `on_success` (H343). The validator (compiler/validate.py)
inherits them and dispatches to them; what they read of it is declared under TYPE_CHECKING
below. The context a condition is read in and the symbolic selection of every tool live here
too, so both modules read them one way.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from harnessc.dsl import syntax as s
from harnessc.dsl.diagnostics import Reporter
from harnessc.dsl.suggest import did_you_mean
from harnessc.runtime import model as m

from .condition_types import (
    ANY,
    BOOL,
    FUNCTION_TYPES,
    HAS_LENGTH,
    NUMBERS,
    STRINGISH,
    Operand,
    Ty,
    compatible,
    describe,
    field_of,
    item_type,
    join_types,
    only_lists,
    output_type,
    quote_values,
    takes,
    type_of,
    unlisted_in,
)
from .resolve import Module
from .resolve_session import SELECTING_FUNCTIONS, VALUE_FUNCTIONS

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from harnessc.dsl.source import Span

    from .resolve import Resolution
    from .symbols import Symbol


# =============================================================================================
# Shared with the validator: selections of tools, and where a condition is read


class AllTools:
    """Every tool of the build (`*`): kept symbolic so a wildcard costs nothing to select."""

    def __repr__(self) -> str:
        return "ALL"


ALL = AllTools()
Selection = frozenset[str] | AllTools


@dataclass
class CondContext:
    """Where a condition is read: what `args` selects, and in a workflow its steps and input."""

    module: Module
    kind: str
    """`rule`, `grant`, `requires` or `workflow`."""
    selectors: tuple[s.Selector, ...] | None = None
    """What `args` reads from; None where there is no call (`requires`, workflows)."""
    what: str = "rule"
    """How a message names the selection's owner (`rule`, `grant`)."""
    steps: dict[str, m.Step] = field(default_factory=dict)
    input: m.Schema | None = None
    vars: dict[str, Ty] = field(default_factory=dict)
    """The types of the quantifier variables bound here."""
    results: tuple[s.Selector, ...] | None = None
    """Inside a history term: the tools whose earlier results `result.*` reads."""
    call: m.Tool | None = None
    """In an `on_success`'s `when`: the tool whose call's own `args` and `result` it reads."""


_TEXT_HELP = {
    "params": "`params` reads the query parameter values of a URL, or of every URL inside a "
    "text, such as `params(args.url)`",
    "segments": "`segments` reads the path segments of a URL, or of every URL inside a text, "
    "such as `segments(args.url)`",
}
"""The help of H339 for an extraction whose name does not say what it finds."""

_CONTEXT_ROOTS = {
    "actor": "the application (the actor)",
    "task": "the application (the task)",
    "resource": "the application (the resource)",
    "env": "the application (the environment)",
    "tool": "the spec (the tool's own facts)",
}
"""The roots whose values no model chose: `from` on them means nothing (H345)."""


def _outside_call(
    cond: object, references: Mapping[Span, Symbol]
) -> Iterable[tuple[s.Path | s.Provenance | s.FuncCall, str]]:
    """What an `on_success` condition reads besides the call's `args`, its `result` and the
    variables of its quantifiers: each node, and what it reads in words."""
    if isinstance(cond, s.Path):
        root = cond.parts[0]
        symbol = references.get(cond.span)
        if root in ("args", "result") or (symbol is not None and symbol.kind == "var"):
            return
        if symbol is not None and symbol.kind == "fact":
            yield cond, f"the fact `{symbol.name}`"
        else:
            yield cond, f"`{cond.text}`"
        return
    if isinstance(cond, s.Provenance):
        yield cond, "where a value came from (`from`), which the session's sources decide"
        return
    if isinstance(cond, s.FuncCall) and cond.name.text not in VALUE_FUNCTIONS:
        yield cond, f"`{cond.name.text}(…)`, which the session decides"
        return
    if isinstance(cond, s.Node):
        for name in s.child_fields(type(cond)):
            value = getattr(cond, name)
            for child in value if isinstance(value, tuple) else (value,):
                yield from _outside_call(child, references)


class SessionChecks(Reporter):
    """The validator's checks of session terms and `on_success`."""

    if TYPE_CHECKING:
        # what the session checks read of the validator (compiler/validate.py)
        spec: m.Spec
        res: Resolution
        _results: dict[str, dict[str, Ty]] | None

        def symbol_name(self, name: s.Name | s.Pattern) -> str | None: ...
        def select(self, selector: s.Selector, module: Module) -> Selection: ...
        def may_miss(self, selector: s.Selector, module: Module) -> bool: ...
        def union(self, selectors: Iterable[s.Selector], module: Module) -> Selection: ...
        def check_cond(self, cond: object, ctx: CondContext) -> None: ...
        def operand(self, node: object, ctx: CondContext) -> Operand | None: ...
        def path_type(self, node: s.Path, ctx: CondContext) -> Ty | None: ...
        def navigate(
            self, ty: Ty, parts: tuple[str, ...], start: int, node: s.Path, strict: bool = True
        ) -> Ty | None: ...

    # -- fields only an open record or `any` provides (H354) ------------------------------------

    def unlisted_read(self, node: s.Path, index: int, opened: Ty) -> None:
        """H354: `node` reads `parts[index]` from the unlisted part of an open record or an
        `any` a schema declares; reported once per path."""
        key = (node.span.source.path, node.span.start, node.span.end)
        reported = self.__dict__.setdefault("_unlisted_reported", set())
        if key in reported:
            return
        reported.add(key)
        parts = node.parts
        name = parts[index]
        owner = ".".join(parts[:index])
        what = "an open record (`...`)" if opened.name == "object" else "`any`"
        listed = [k for k, _ in opened.fields]
        self.report(
            "H354",
            f"`{node.text}` reads `{name}`, which {opened.unlisted} does not list",
            node.span,
            f"only {what} provides `{name}`",
            notes=[
                f"`{owner}` is {what} in {opened.unlisted}"
                + (
                    f"; its listed fields are {', '.join(f'`{k}`' for k in listed)}"
                    if listed
                    else ""
                )
                + ": an unlisted value has no checked type and carries the tool's trust"
            ],
            help=f"list `{name}` in {opened.unlisted} (`{name}: string`, with `trusted`, "
            "`untrusted` or `label` if it needs them)",
        )

    # -- on_success ----------------------------------------------------------------------------

    def check_on_success(self, node: s.OnSuccess, tool: m.Tool | None, module: Module) -> None:
        """H343: the fact is a list fact, and the value a field of the tool's input or output
        whose type the fact's items take; H349: `each` ranges over a list; H351: its item
        reads the bound element; H350: `when` reads only the call's `args` and `result`."""
        fact = self.spec.facts.get(self.symbol_name(node.fact) or "")
        if tool is None:
            return
        if node.when is not None:
            self.check_update_when(node.when, tool, module)
        if fact is None:
            return
        verb = "adds" if node.op == "add" else "removes"
        into = "to" if node.op == "add" else "from"
        held = fact.type  # the list the update changes: the fact, or an entry of it
        if node.key is not None:
            if fact.type.name != "map":
                self.report(
                    "H352",
                    f"`{fact.name}[…]` names an entry of a map, but fact `{fact.name}` is "
                    f"{describe(type_of(fact.type))}",
                    node.key.span,
                    "not a map",
                    help=f"{node.op} {into} the fact itself: `{into} {fact.name}`, or declare "
                    f"it as a map (`fact {fact.name}: map<list<string>>`)",
                )
                return
            key = self.call_value(node, tool, verb, node.key)
            if key is None:
                return
            if not takes(key, frozenset({"string"})):
                self.report(
                    "H352",
                    f"the key `{node.key.text}` of `{fact.name}[…]` is {describe(key)}, not a text",
                    node.key.span,
                    f"{describe(key)}",
                    help="a map's entries are named by texts: key it by a `string` of the call",
                )
                return
            assert fact.type.item is not None
            held = fact.type.item
        if held.name != "list":
            keyed = fact.type.name == "map" and node.key is None
            what = (
                f"an entry of fact `{fact.name}`" if node.key is not None else f"fact `{fact.name}`"
            )
            self.report(
                "H343",
                f"`on_success` {verb} {into} {what}, which is not a list",
                node.fact.span,
                f"{describe(type_of(held))}",
                help=f"name the entry the call's value keys: `{into} {fact.name}[args.KEY]`"
                if keyed and fact.type.item is not None and fact.type.item.name == "list"
                else f"declare it as a list (`fact {fact.name}: list<string>`), or {node.op} "
                f"{into} a list fact",
            )
            return
        value = self.call_value(node, tool, verb)
        if value is None:
            return
        shown = node.value
        if node.var is not None:
            if not only_lists(value) and value.name != "any":
                self.report(
                    "H349",
                    f"`on_success {node.op} each` ranges over `{node.value.text}`, which is "
                    f"{describe(value)}, not a list",
                    node.value.span,
                    f"{describe(value)}",
                    help=f"`each` takes every element of a list; {node.op} the value itself: "
                    f"`on_success {node.op} {node.value.text} {into} {fact.name}`",
                )
                return
            value = item_type(value)
            if node.item is not None:
                value = self.each_item(node, value)
                if value is None:
                    return
                shown = node.item
        item = type_of(held.item) if held.item is not None else ANY
        if value.name == "any" and value.unlisted:
            self.report(
                "H343",
                f"`on_success` {verb} `{shown.text}`, which is `any` in {value.unlisted}, "
                f"{into} `{fact.name}`, a list of "
                f"{describe(item).removeprefix('a ').removeprefix('an ')}",
                shown.span,
                "a value of no checked type",
                help="a fact holds values of its item type: take a field the output types",
            )
            return
        if not compatible(value, item):
            self.report(
                "H343",
                f"`on_success` {verb} {describe(value)} {into} `{fact.name}`, a list of "
                f"{describe(item).removeprefix('a ').removeprefix('an ')}",
                shown.span,
                f"{describe(value)}",
                help=f"{node.op} a value of the list's item type"
                + (", or an element's field (`: x.email`)" if node.var is not None else ""),
            )

    def call_value(
        self, node: s.OnSuccess, tool: m.Tool, verb: str, path: s.Path | None = None
    ) -> Ty | None:
        """The type of an `on_success`'s value (or of `path`, its key), a field of the call's
        input or output (None after H343)."""
        path = path or node.value
        root, name = path.parts[0], path.parts[1]
        schema = tool.input if root == "args" else tool.output
        where = "input" if root == "args" else "output"
        fields = {f.name: f for f in schema.fields} if schema is not None else {}
        found = fields.get(name)
        if found is None:
            # a fact holds values of its item type: an open output's unlisted field has none
            unlisted = root == "result" and schema is not None and schema.open
            self.report(
                "H343",
                f"`on_success` {verb} `{path.text}`, but tool `{tool.id}` has no {where} "
                f"field `{name}`" + (" it lists" if unlisted else ""),
                path.span,
                f"not in the tool's `{where}`",
                help=did_you_mean(name, sorted(fields))
                or f"declare `{name}` in the tool's `{where}`"
                + (", with its type: a fact takes only typed values" if unlisted else ""),
            )
            return None
        owner = f"the output of `{tool.id}`" if root == "result" else ""
        return self.navigate(type_of(found.type, where=owner), path.parts, 2, path)

    def each_item(self, node: s.OnSuccess, element: Ty) -> Ty | None:
        """The type of what `each x in LIST: ITEM` takes of an element (None after H351 or
        H324): ITEM reads the bound element, `x` or a field of it."""
        assert node.var is not None and node.item is not None
        var, item = node.var.text, node.item
        if item.parts[0] != var:
            fields = [name for name, _ in element.fields]
            near = did_you_mean(item.parts[-1], fields) if fields else None
            self.report(
                "H351",
                f"`: {item.text}` does not read the element `{var}` that `each` binds",
                item.span,
                f"not `{var}` or a field of it",
                notes=[f"the fields of `{var}` are {quote_values(sorted(fields))}"]
                if fields
                else [],
                help=(near.replace("`", f"`{var}.", 1) if near else None)
                or f"write `: {var}.FIELD`, or leave the `:` part out to take each `{var}` whole",
            )
            return None
        return self.navigate(element, item.parts, 1, item)

    def check_update_when(self, cond: object, tool: m.Tool, module: Module) -> None:
        """An `on_success`'s `when`: a condition of the language (checked as a rule's), whose
        paths read the call's own `args` and `result`, typed by the tool's schemas; H350 for
        anything else (facts, the actor, provenance, history), which a replay of the session
        could not read as the call saw it."""
        outside = list(_outside_call(cond, self.res.references))
        for node, what in outside:
            self.report(
                "H350",
                f"an `on_success` condition reads {what}",
                node.span,
                "not the call's `args` or `result`",
                help="an update is decided by the call alone: test its arguments (`args.x`) "
                "and its result (`result.x`); a rule of a policy may read the rest",
            )
        if not outside:
            self.check_cond(cond, CondContext(module, "on_success", call=tool))

    # -- session terms -------------------------------------------------------------------------

    def check_provenance(self, node: s.Provenance, ctx: CondContext) -> None:
        """H340: `from` asks where one value came from, never a list; H345: a value the
        model chose, not the actor's, the task's, the resource's, the environment's or the
        tool's."""
        if isinstance(node.value, s.Path):
            root = node.value.text.partition(".")[0]
            if root in _CONTEXT_ROOTS and root not in ctx.vars:
                self.report(
                    "H345",
                    f"`{node.value.text}` is given by {_CONTEXT_ROOTS[root]}: `from` means "
                    "nothing here",
                    node.value.span,
                    "not a value of the call",
                    help="`from` asks where a value the model chose appeared (`args.x from "
                    "user`); test this value directly (`" + node.value.text + ' == "…"`)',
                )
                return
        field = s.result_field(node.call) if node.call is not None else None
        if node.call is not None and field is not None:
            # `result.FIELD(…)`: the field is read of the selected tools' results, as a
            # `when` reads `result.FIELD`
            read = s.Path(node.call.name.text, span=node.call.name.span) if field else None
            self.history_call(s.history_of(node.call), ctx, read)
        value = self.operand(node.value, ctx)
        if value is None or not only_lists(value.ty):
            return
        if node.label is not None:
            source = f"label {node.label.text}"
        elif node.call is not None:
            source = node.call.span.text
        else:
            source = node.source.text
        only = " only" if node.only else ""
        self.report(
            "H340",
            f"`{value.text}` is {describe(value.ty)}: `from` asks where one value came from",
            value.span,
            "a list",
            help=f"ask it of each item: `all x in {value.text}: x from {source}{only}` (or "
            "`any x in …`)",
        )

    def check_quantified(self, node: s.Quantified, ctx: CondContext) -> None:
        """H342: a quantifier ranges over a list; its variable has the list's item type."""
        over = self.operand(node.over, ctx)
        if over is None:
            return
        if not takes(over.ty, frozenset({"list", "set"})):
            self.report(
                "H342",
                f"`{node.quantifier} {node.var.text} in` ranges over `{over.text}`, which is "
                f"{describe(over.ty)}, not a list",
                over.span,
                "not a list",
                help=f"compare it directly (`{over.text} …`), or range over a list argument "
                "or `urls(…)`, `hosts(…)`, `emails(…)`, `ibans(…)`, `params(…)`, `segments(…)` "
                "of a text",
            )
            return
        inner = replace(ctx, vars={**ctx.vars, node.var.text: item_type(over.ty)})
        self.check_cond(node.body, inner)

    def call_type(self, node: s.FuncCall, ctx: CondContext) -> Ty | None:
        """The type of a function's value, after checking its arguments (None after an error)."""
        name = node.name.text
        if name in VALUE_FUNCTIONS:
            return self.value_call(node, ctx)
        if name in SELECTING_FUNCTIONS or name == "sum":
            return self.history_call(node, ctx)
        return FUNCTION_TYPES.get(name, BOOL)

    def value_call(self, node: s.FuncCall, ctx: CondContext) -> Ty | None:
        name = node.name.text
        arg = self.operand(node.args[0], ctx) if node.args else None
        if arg is None:
            return None
        wanted = HAS_LENGTH if name == "len" else STRINGISH
        if not takes(arg.ty, wanted):
            self.report(
                "H339",
                f"`{name}` "
                + (
                    "counts the items of a list or map, or the characters of a string"
                    if name == "len"
                    else "reads a string"
                )
                + f", not {describe(arg.ty)}",
                arg.span,
                f"{describe(arg.ty)}",
                help="`len(args.to)` counts a list's items; `urls(args.body)` reads a text"
                if name == "len"
                else _TEXT_HELP.get(
                    name, f"`{name}` finds the {name} inside a text, such as `{name}(args.body)`"
                ),
            )
            return None
        return FUNCTION_TYPES[name]

    def history_call(
        self, node: s.FuncCall, ctx: CondContext, read: s.Path | None = None
    ) -> Ty | None:
        """H337 for selectors selecting nothing; `when`, `sum`'s field and `read` (the field
        of `from result.FIELD(…)`) read the selected tools' arguments (H327) and results
        (H338); `sum` adds numbers (H339)."""
        name = node.name.text
        if name == "sum":
            selectors: list[s.Pattern] = list(node.of)
        else:
            selectors = [
                a if isinstance(a, s.Pattern) else s.Pattern(a.text, span=a.span)
                for a in node.args
                if isinstance(a, s.Pattern | s.Path)
            ]
        empty = False
        for selector in selectors:
            selection = self.select(selector, ctx.module)
            if isinstance(selection, frozenset) and not selection:
                empty = True
                if self.may_miss(selector, ctx.module):
                    continue
                self.report(
                    "H337",
                    f"`{selector.text}` in `{name}(…)` selects no tool",
                    selector.span,
                    "selects nothing",
                    help="select a tool id, a glob, `pack:NAME` or `kind:NAME` that names "
                    "declared tools",
                )
        if empty:
            return None
        history = CondContext(
            ctx.module, "history", tuple(selectors), what="history term", results=tuple(selectors)
        )
        if node.when is not None:
            self.check_cond(node.when, history)
        if read is not None:
            self.path_type(read, history)
        if name != "sum":
            return FUNCTION_TYPES[name]
        field_node = node.args[0] if node.args else None
        if not isinstance(field_node, s.Path):
            return None
        summed = self.path_type(field_node, history)
        if summed is None:
            return None
        if not takes(summed, NUMBERS):
            self.report(
                "H339",
                f"`sum` adds numbers, but `{field_node.text}` is {describe(summed)}",
                field_node.span,
                f"{describe(summed)}",
                help="sum an `int` or `float` field, or count the calls with `count(…)`",
            )
            return None
        return summed if summed.name in NUMBERS else Ty("float")

    def results(self) -> dict[str, dict[str, Ty]]:
        """Result field name → tool id → its type; built on the first read of `result`."""
        if self._results is None:
            index: dict[str, dict[str, Ty]] = {}
            for tool_id, tool in self.spec.tools.items():
                for f in tool.output.fields if tool.output is not None else ():
                    owner = f"a value of `result.{f.name}`"
                    where = f"the output of `{tool_id}`"
                    index.setdefault(f.name, {})[tool_id] = type_of(f.type, owner, where)
            self._results = index
        return self._results

    def whole_result(self, ctx: CondContext) -> Ty:
        """The type of `result` itself over a history term's tools: their outputs joined."""
        assert ctx.results is not None
        selection = self.union(ctx.results, ctx.module)
        if isinstance(selection, AllTools):
            return ANY
        tools = self.spec.tools
        return join_types([output_type(tools[t]) for t in sorted(selection) if t in tools])

    def result_field(self, name: str, node: s.Path, ctx: CondContext) -> Ty | None:
        """The type of result field `name` over a history term's tools, or None after H338.

        A tool without an `output` schema may return anything, so it has every field."""
        assert ctx.results is not None
        selection = self.union(ctx.results, ctx.module)
        tools = self.spec.tools
        chosen = (
            tools.values()
            if isinstance(selection, AllTools)
            else (tools[t] for t in sorted(selection) if t in tools)
        )
        types: list[Ty] = []
        candidates: set[str] = set()
        inputs: set[str] = set()
        opened: list[Ty] = []
        for tool in chosen:
            inputs.update(f.name for f in tool.input.fields)
            if tool.output is None:
                types.append(ANY)
                continue
            for f in tool.output.fields:
                candidates.add(f.name)
            ty = self.results().get(name, {}).get(tool.id)
            if ty is None and (tool.output.open or tool.output.shape is not None):
                # an open record or a shape (`output list<…>`, `any`, a union): read through it
                whole = output_type(tool)
                ty = field_of(whole, name)
                found = unlisted_in(whole, name)
                if found is not None:
                    opened.append(found)
            if ty is not None:
                types.append(ty)
        if opened and len(opened) == len(types):
            self.unlisted_read(node, 1, opened[0])
        if types or not candidates:
            return join_types(types) if types else ANY
        if any(self.may_miss(selector, ctx.module) for selector in ctx.results):
            return ANY  # the field may be one of a tool this model lacks
        listed = ", ".join(f"`{c}`" for c in sorted(candidates))
        self.report(
            "H338",
            f"no tool selected by this history term returns a field `{name}`",
            node.span,
            "not in the `output` of any selected tool",
            notes=[f"their results have {listed}"],
            help=(
                f"`{name}` is an argument of the earlier call: write `args.{name}`"
                if name in inputs
                else did_you_mean(name, sorted(candidates))
            ),
        )
        return None
