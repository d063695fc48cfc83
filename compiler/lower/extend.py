"""Lowering `extend tool A, B { … }`: what a spec adds to tools declared elsewhere.

A generated or discovered catalogue (`harnessc mcp discover`, a generator's output, an imported
file) is not edited by hand, yet whether its results are trusted, what data they carry and which
arguments are secret belong to its tools. An `extend` says them beside the catalogue, with the
tool block's own items, and this module merges each into the tool's model: every later stage
(validation, policy analysis, provenance, exposure, build, diff, explain, docs) sees one tool.

What may be added is what a call *carries*, never what it *is* (H347): `trust`, `risk` (of a
tool without operations), `labels`, `on_success`, and per field `secret` (input or output) or
`trusted`, `untrusted`, `label NAME` (output). An extension never overrides: a value the tool,
or another extension of it, gives otherwise is a conflict shown with both places (H346).
Labels, `secret` and `on_success` only add. A field is named as in a condition's path below
`args` or `result` (`rollout.state`); one the tool does not have is H348, with the fields it has.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harnessc.dsl import syntax as s
from harnessc.dsl.source import Span
from harnessc.dsl.suggest import did_you_mean
from harnessc.runtime import model as m

from ..modules import head_span
from ..resolve import Module
from .tools import ToolLowering

EXTENDABLE_ATTRS = frozenset({"trust", "risk", "labels"})
"""The tool attributes an `extend` may add (language.md §5.8)."""
FIELD_NOTES = {
    "input": frozenset({"secret"}),
    "output": frozenset({"secret", "trusted", "untrusted", "label"}),
}
"""Per schema, the constraints an `extend` may add to one of its fields."""
_WHY = "it is part of what a call of the tool is: change it where the tool is declared"


@dataclass(frozen=True)
class _Set:
    """A value an extension gave one key of one tool, and where."""

    value: str
    span: Span


@dataclass(frozen=True)
class _Note:
    """What an extension adds to one field: its schema (`input`, `output`), its path, and
    the constraints it gives."""

    schema: str
    node: s.Field
    trust: str | None
    secret: bool
    labels: tuple[str, ...]


class ExtendLowering(ToolLowering):
    """Extensions, applied once every tool of the build is lowered."""

    def extend_tools(self) -> None:
        given: dict[tuple[str, str], _Set] = {}
        for module in self.res.modules:
            for item in module.syntax.items:
                if isinstance(item, s.Extend):
                    self.extension(item, given, module)

    def extension(self, node: s.Extend, given: dict[tuple[str, str], _Set], module: Module) -> None:
        where = "an `extend`"
        kept: list[s.ToolItem] = []
        for item in node.items:
            key = _key(item)
            if (
                isinstance(item, s.OnSuccess)
                or (isinstance(item, s.Attr) and key in EXTENDABLE_ATTRS)
                or (isinstance(item, s.SchemaAttr) and key in FIELD_NOTES and item.type is None)
            ):
                kept.append(item)
            else:
                self.report(
                    "H347",
                    f"`{key}` cannot be added by an `extend`",
                    head_span(item) if not isinstance(item, s.Attr) else item.span,
                    "not extendable",
                    help=f"{_WHY}; an `extend` adds `trust`, `risk`, `labels`, `on_success`, "
                    "and `secret`, `trusted`, `untrusted` or `label` to a field",
                )
        attrs = self.unique_attrs(
            (i for i in kept if isinstance(i, s.Attr)), EXTENDABLE_ATTRS, where
        )
        trust = self.level(attrs.get("trust"), m.TRUST_LEVELS, "trust level")
        risk = self.level(attrs.get("risk"), m.RISK_LEVELS, "risk level")
        labels = tuple(n.text for n in self.name_values(attrs.get("labels")))
        adds = [self.on_success(i, module) for i in kept if isinstance(i, s.OnSuccess)]
        notes = self.notes([i for i in kept if isinstance(i, s.SchemaAttr)])
        for name in node.tools:
            symbol = self.res.references.get(name.span)
            tool = self.tools.get(symbol.name) if symbol is not None else None
            if symbol is None or tool is None or not isinstance(symbol.node, s.Tool):
                continue  # unknown (reported by resolve), or set aside with its errors
            own = symbol.node
            update: dict[str, object] = {}
            if trust is not None and self.agrees(
                tool.id, "trust", trust, attrs["trust"].span, _written(own, "trust"), given
            ):
                update["trust"] = trust
            if risk is not None:
                if tool.operations:
                    self.report(
                        "H347",
                        f"`risk` cannot be added to tool `{tool.id}`, which has operations",
                        attrs["risk"].span,
                        "a tool with operations",
                        secondary=[(name.span, "this tool declares `risk` per operation")],
                        help="declare `risk` in each operation, where the tool is declared",
                    )
                elif self.agrees(
                    tool.id, "risk", risk, attrs["risk"].span, _written(own, "risk"), given
                ):
                    update["risk"] = risk
            if labels:
                update["labels"] = tuple(dict.fromkeys((*tool.labels, *labels)))
            found = tuple(a for a in adds if a is not None and a not in tool.on_success)
            if found:
                update["on_success"] = (*tool.on_success, *found)
            for note in notes:
                schema = tool.input if note.schema == "input" else tool.output
                noted = self.noted(tool, name, note, schema, given)
                if noted is not None:
                    update[note.schema] = noted
                    tool = tool.model_copy(update={note.schema: noted})
            if update:
                self.tools[tool.id] = tool.model_copy(update=update)

    def agrees(
        self,
        tool_id: str,
        key: str,
        value: str,
        span: Span,
        own: tuple[str, Span] | None,
        given: dict[tuple[str, str], _Set],
        field: str | None = None,
    ) -> bool:
        """Whether an extension may give `key` of the tool (of its `field`) `value`: neither the
        tool's block (`own`: the value it writes, and where) nor an earlier extension gives
        another (else H346, showing both)."""

        def shown(word: str) -> str:
            return f"`{word}`" if field is not None else f"`{key} {word}`"

        what = shown(value) + (f" on field `{field}`" if field is not None else "")
        earlier = given.get((tool_id, key))
        if own is not None and earlier is None and own[0] != value:
            self.conflict(tool_id, what, span, own[1], shown(own[0]), True)
            return False
        if earlier is not None and earlier.value != value:
            self.conflict(tool_id, what, span, earlier.span, shown(earlier.value), False)
            return False
        given.setdefault((tool_id, key), _Set(value, span))
        return True

    def conflict(
        self, tool_id: str, what: str, span: Span, other: Span, said: str, in_tool: bool
    ) -> None:
        place = "the tool's declaration" if in_tool else "another `extend`"
        self.report(
            "H346",
            f"this `extend` gives tool `{tool_id}` {what}, but {place} gives {said}",
            span,
            "extended here",
            secondary=[(other, f"{said} here")],
            help="an `extend` adds, it never overrides: remove or correct one of the two",
        )

    def notes(self, items: Sequence[s.SchemaAttr]) -> list[_Note]:
        """The fields an extension notes, checked as a field's constraints are."""
        out: list[_Note] = []
        seen: dict[str, s.SchemaAttr] = {}
        for item in items:
            if not self.once(seen, item.key, item, item.span):
                continue
            allowed = FIELD_NOTES[item.key]
            named: dict[str, s.Field] = {}
            for f in item.schema.fields:
                if f.type is not None:
                    self.report(
                        "H347",
                        f"an `extend` cannot give field `{f.name.text}` a type",
                        f.type.span,
                        "a type",
                        help=f"{_WHY}; an `extend` writes a field without its type, and only "
                        f"what it adds: `{f.name.text}: "
                        + ("secret`" if item.key == "input" else "untrusted`"),
                    )
                    continue
                first = named.get(f.name.text)
                if first is not None:
                    self.field_twice(f, first, "join the two into one")
                    continue
                named[f.name.text] = f
                if item.key == "input":
                    self.input_trust([f])  # trust and labels describe results: H303
                wrong = [c for c in f.constraints if c.kind not in FIELD_NOTES["output"]]
                for c in wrong:
                    self.report(
                        "H347",
                        f"`{c.kind}` cannot be added to a field by an `extend`",
                        c.span,
                        "not extendable",
                        help=f"{_WHY}; a field takes `secret`, and an output field `trusted`, "
                        "`untrusted` or `label NAME`",
                    )
                constraints, labels = self.constraints(f)
                trust = next((k for k in ("trusted", "untrusted") if k in constraints), None)
                out.append(
                    _Note(
                        item.key,
                        f,
                        trust if "trusted" in allowed else None,
                        "secret" in constraints,
                        tuple(labels) if "label" in allowed else (),
                    )
                )
        return out

    def noted(
        self,
        tool: m.Tool,
        name: s.Name,
        note: _Note,
        schema: m.Schema | None,
        given: dict[tuple[str, str], _Set],
    ) -> m.Schema | None:
        """The schema with the note applied; None after reporting why it cannot be. The
        fields of an `output` written as a type are those of its records (`output list<{ … }>`:
        an item's)."""
        parts = note.node.name.text.split(".")
        if schema is None:
            fields: tuple[m.Field, ...] = ()
        else:
            fields = schema.records() or ()
        target: m.Field | None = None
        for depth, part in enumerate(parts):
            target = next((f for f in fields if f.name == part), None)
            if target is None:
                self.unknown_field(tool, name, note, parts[:depth], part, fields)
                return None
            fields = _inner_fields(target.type)
        path = ".".join(parts)
        if note.trust is not None and target is not None:
            own = None
            if target.trust is not None:
                written = _syntax_field(self.res.tool(tool.id), note.schema, parts)
                at = (
                    [c.span for c in written.constraints if c.kind == target.trust]
                    if written
                    else []
                )
                own = (target.trust, at[0] if at else name.span)
            key = f"{note.schema}.{path}.trust"
            if not self.agrees(tool.id, key, note.trust, note.node.span, own, given, path):
                return None

        def apply(f: m.Field) -> m.Field:
            update: dict[str, object] = {}
            if note.secret:
                update["secret"] = True
            if note.trust is not None:
                update["trust"] = note.trust
            if note.labels:
                update["labels"] = tuple(dict.fromkeys((*f.labels, *note.labels)))
            return f.model_copy(update=update)

        assert schema is not None  # a field was found in it
        if schema.shape is not None:
            return schema.model_copy(update={"shape": _retyped(schema.shape, parts, apply)})
        return schema.model_copy(update={"fields": _replaced(schema.fields, parts, apply)})

    def unknown_field(
        self,
        tool: m.Tool,
        name: s.Name,
        note: _Note,
        above: list[str],
        part: str,
        fields: Sequence[m.Field],
    ) -> None:
        known = [f.name for f in fields]
        where = f"`{'.'.join(above)}`" if above else f"its `{note.schema}`"
        listed = ", ".join(f"`{k}`" for k in known) if known else "none"
        self.report(
            "H348",
            f"tool `{tool.id}` has no {note.schema} field `{'.'.join([*above, part])}`",
            note.node.name.span,
            f"not a field of {where}",
            secondary=[(name.span, "the tool extended")],
            notes=[f"the fields of {where} are {listed}"],
            help=did_you_mean(part, known) or "name a field the tool declares",
        )


def _key(item: object) -> str:
    if isinstance(item, s.Attr | s.SchemaAttr):
        return item.key
    return {s.Requires: "requires", s.Operation: "operation", s.OnSuccess: "on_success"}.get(
        type(item), "?"
    )


def _written(tool: s.Tool, key: str) -> tuple[str, Span] | None:
    """The word a tool's block gives a one-word attribute (`trust untrusted`), and where."""
    attr = next((i for i in tool.items if isinstance(i, s.Attr) and i.key == key), None)
    words = [v for v in attr.values if isinstance(v, s.Name)] if attr is not None else []
    return (words[0].text, attr.span) if attr is not None and words else None


def _inner_fields(t: m.Type) -> tuple[m.Field, ...]:
    """The fields below a field of type `t`: an object's, or those of a list's or map's items,
    or of a union's records (`Type.records`)."""
    return t.records() or ()


def _replaced(
    fields: Sequence[m.Field], parts: Sequence[str], apply: Callable[[m.Field], m.Field]
) -> tuple[m.Field, ...]:
    """`fields` with the field at `parts` (which exists) replaced by `apply` of it."""
    out = []
    for f in fields:
        if f.name != parts[0]:
            out.append(f)
        elif len(parts) == 1:
            out.append(apply(f))
        else:
            out.append(f.model_copy(update={"type": _retyped(f.type, parts[1:], apply)}))
    return tuple(out)


def _retyped(t: m.Type, parts: Sequence[str], apply: Callable[[m.Field], m.Field]) -> m.Type:
    if t.item is not None:
        return t.model_copy(update={"item": _retyped(t.item, parts, apply)})
    if t.name == "union":
        # each alternative whose records list the field
        options = tuple(
            _retyped(o, parts, apply) if any(f.name == parts[0] for f in o.records() or ()) else o
            for o in t.options
        )
        return t.model_copy(update={"options": options})
    return t.model_copy(update={"fields": _replaced(t.fields, parts, apply)})


def _syntax_field(symbol: object, schema: str, parts: Sequence[str]) -> s.Field | None:
    """The field at `parts` of a tool's `input` or `output` as written, for pointing at it."""
    node = getattr(symbol, "node", None)
    if not isinstance(node, s.Tool):
        return None
    block = next((i for i in node.items if isinstance(i, s.SchemaAttr) and i.key == schema), None)
    fields: tuple[s.Field, ...] = block.schema.fields if block is not None else ()
    found: s.Field | None = None
    for part in parts:
        found = next((f for f in fields if f.name.text == part), None)
        if found is None:
            return None
        t = found.type
        while t is not None and t.args:
            t = t.args[0]
        fields = t.fields if t is not None else ()
    return found
