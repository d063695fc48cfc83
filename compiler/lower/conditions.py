"""Lowering conditions, values and tool selectors."""

from __future__ import annotations

from typing import Any

from harnessc.dsl import syntax as s
from harnessc.dsl.source import Span
from harnessc.runtime import model as m

from ..resolve import BUILTIN_ROOTS, Module
from .schemas import SchemaLowering


class ConditionLowering(SchemaLowering):
    """Conditions, the values they compare, and selectors of tools."""

    def cond(self, node: object, module: Module) -> m.Condition:
        if isinstance(node, s.And):
            return m.And(items=tuple(self.cond(i, module) for i in node.items))
        if isinstance(node, s.Or):
            return m.Or(items=tuple(self.cond(i, module) for i in node.items))
        if isinstance(node, s.Not):
            return m.Not(item=self.cond(node.item, module))
        if isinstance(node, s.Compare):
            left = self.value(node.left, module)
            right = self.value(node.right, module)
            self.check_members(node, left, right)
            if node.op == "matches" and isinstance(node.right, s.Str):
                self.regex(node.right)
            return m.Compare(op=node.op, left=left, right=right)  # type: ignore[arg-type]
        return self.value(node, module)

    def check_members(self, node: s.Compare, left: m.Value, right: m.Value) -> None:
        """A bare name beside `tool.risk`, `tool.effects` or `tool.kind` is a word of that
        vocabulary."""
        for path, member, other in ((left, right, node.right), (right, left, node.left)):
            if not (
                isinstance(path, m.Path)
                and path.root == "tool"
                and isinstance(member, m.EnumMember)
                and isinstance(other, s.Path)
            ):
                continue
            vocabulary = {
                ("risk",): (m.RISK_LEVELS, "risk level"),
                ("effects",): (m.EFFECTS, "effect"),
                ("kind",): (m.TOOL_KINDS, "tool kind"),
            }.get(path.parts)
            if vocabulary is not None:
                self.word(s.Name(other.text, span=other.span), *vocabulary)

    def value(self, node: object, module: Module) -> m.Value:
        if isinstance(node, s.Str):
            return m.Literal(value=node.value, type="string")
        if isinstance(node, s.Bool):
            return m.Literal(value=node.value, type="bool")
        if isinstance(node, s.Int):
            return m.Literal(value=node.value, type="int")
        if isinstance(node, s.Float):
            return m.Literal(value=node.value, type="float")
        if isinstance(node, s.Duration):
            return m.Literal(value=node.ms, type="duration")
        if isinstance(node, s.Path):
            return self.path(node)
        if isinstance(node, s.FuncCall):
            arg = node.args[0] if node.args else None
            target = ""
            if isinstance(arg, s.Path):
                symbol = self.res.references.get(arg.span)
                target = symbol.name if symbol is not None else arg.text
            return m.FactCall(func=node.name.text, name=target)  # type: ignore[arg-type]
        if isinstance(node, s.ListLit):
            return m.ListValue(items=tuple(self.value(i, module) for i in node.items))
        if isinstance(node, s.Record):
            return m.RecordValue(
                fields={e.key.text: self.value(e.value, module) for e in node.entries}
            )
        raise TypeError(f"not a value: {node!r}")  # pragma: no cover - the parser builds values

    def path(self, node: s.Path) -> m.Path | m.EnumMember:
        parts = node.parts
        if parts[0] in BUILTIN_ROOTS:
            return m.Path(root=parts[0], parts=parts[1:])  # type: ignore[arg-type]
        symbol = self.res.references.get(node.span)
        if symbol is not None and symbol.kind == "step":
            return m.Path(root="step", parts=parts)
        if symbol is not None and symbol.kind == "fact":
            depth = symbol.name.count(".") + 1
            return m.Path(root="fact", parts=(symbol.name, *parts[depth:]))
        if parts[0] == "input" and len(parts) > 1:
            return m.Path(root="input", parts=parts[1:])
        return m.EnumMember(name=node.text)

    def json_value(self, node: object) -> Any:
        """A test's argument or record value as JSON (bare names and durations as text)."""
        if isinstance(node, s.Str):
            return node.value
        if isinstance(node, s.Int | s.Bool):
            return node.value
        if isinstance(node, s.Float):
            return node.value
        if isinstance(node, s.Duration | s.Path):
            return node.text
        if isinstance(node, s.ListLit):
            return [self.json_value(i) for i in node.items]
        if isinstance(node, s.Record):
            return {e.key.text: self.json_value(e.value) for e in node.entries}
        return None

    def selector(self, pattern: s.Pattern, module: Module) -> m.Selector:
        text = pattern.text
        if text == "*":
            return m.Selector(kind="all", text=text)
        if text.startswith("pack:"):
            return m.Selector(kind="pack", value=text[5:], text=text)
        if text.startswith("kind:"):
            word = self.word(
                s.Name(
                    text[5:],
                    span=Span(pattern.span.source, pattern.span.start + 5, pattern.span.end),
                ),
                m.TOOL_KINDS,
                "tool kind",
            )
            return m.Selector(kind="kind", value=word or text[5:], text=text)
        target = self.res.module_globs.get(pattern.span)
        if target is not None:
            return m.Selector(
                kind="module",
                value=self.names[target.key],
                tools=tuple(sorted(self.exposable[target.key])),
                text=text,
            )
        if "*" in text:
            return m.Selector(kind="glob", value=text[: text.index("*")], text=text)
        symbol = self.res.references.get(pattern.span)
        return m.Selector(kind="id", value=symbol.name if symbol else text, text=text)
