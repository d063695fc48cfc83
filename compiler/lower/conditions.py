"""Lowering conditions, values and tool selectors."""

from __future__ import annotations

from typing import Any

from harnessc.dsl import syntax as s
from harnessc.dsl.source import Span
from harnessc.runtime import model as m
from harnessc.runtime.model import trusted

from ..resolve import BUILTIN_ROOTS, RESULT_ROOT, Module
from ..resolve_session import FACT_FUNCTIONS, SELECTING_FUNCTIONS, VALUE_FUNCTIONS
from .schemas import SchemaLowering

SOURCE_WORDS = (*m.SOURCE_KINDS, "nowhere")
"""The sources written after `from` as a plain word (`from label NAME` is the other form)."""


class ConditionLowering(SchemaLowering):
    """Conditions, the values they compare, and selectors of tools."""

    _history_depth = 0
    """How many history terms' `when` the condition being lowered is inside."""

    def cond(self, node: object, module: Module) -> m.Condition:
        if isinstance(node, s.And):
            return trusted(m.And)(items=tuple(self.cond(i, module) for i in node.items))
        if isinstance(node, s.Or):
            return trusted(m.Or)(items=tuple(self.cond(i, module) for i in node.items))
        if isinstance(node, s.Not):
            return trusted(m.Not)(item=self.cond(node.item, module))
        if isinstance(node, s.Compare):
            left = self.value(node.left, module)
            right = self.value(node.right, module)
            self.check_members(node, left, right)
            if node.op == "matches" and isinstance(node.right, s.Str):
                self.regex(node.right)
            return trusted(m.Compare)(op=node.op, left=left, right=right)  # type: ignore[arg-type]
        if isinstance(node, s.Provenance):
            return self.provenance(node, module)
        if isinstance(node, s.Quantified):
            return trusted(m.Quantified)(
                quantifier=node.quantifier,  # type: ignore[arg-type]
                var=node.var.text,
                over=self.value(node.over, module),
                body=self.cond(node.body, module),
            )
        return self.value(node, module)

    def provenance(self, node: s.Provenance, module: Module) -> m.Provenance:
        value = self.value(node.value, module)
        if node.call is not None:
            return self.from_results(node, node.call, value, module)
        if node.label is not None:
            source = "label"
        else:
            source = self.word(node.source, SOURCE_WORDS, "source") or "nowhere"
        if node.only and source in ("nowhere", "label"):
            written = f"label {node.label.text}" if node.label is not None else source
            self.only_not_applicable(
                node,
                written,
                "`only` follows `user`, `trusted`, `untrusted` or `result(…)`: "
                + (
                    "a value from nowhere has no sources at all"
                    if source == "nowhere"
                    else "write `from label "
                    + (node.label.text if node.label else "")
                    + "` without `only`"
                ),
            )
        return trusted(m.Provenance)(
            value=value,
            source=source,  # type: ignore[arg-type]
            label=node.label.text if node.label is not None else None,
            only=node.only and source not in ("nowhere", "label"),
        )

    def from_results(
        self, node: s.Provenance, call: s.FuncCall, value: m.Value, module: Module
    ) -> m.Provenance:
        """`value from result[.FIELD](SEL [within W] [when C]) [only]`: the results of the
        earlier calls `succeeded(SEL …)` counts (at FIELD); H301 for another function, H357
        inside a history term's `when` (which reads one earlier call, not the calls before
        it), H341 for `only` with a field."""
        field = s.result_field(call)
        if field is None:
            self.report(
                "H301",
                f"unknown source `{call.name.text}(…)`",
                call.name.span,
                "not a source",
                notes=[
                    "the sources are `user`, `trusted`, `untrusted`, `nowhere`, `label "
                    "NAME` and `result(TOOLS …)`"
                ],
                help="write `from result(files.read)` for a value found in the result of an "
                "earlier call",
            )
            return trusted(m.Provenance)(value=value, source="nowhere")
        if self._history_depth:
            self.report(
                "H357",
                "`from result(…)` inside a history term's `when`",
                node.span,
                "reads the calls before an earlier call",
                help="a history term's `when` reads the earlier call as it was made; ask "
                "where the value came from in the rule itself: `args.x from result(…)`",
            )
        if field and node.only:
            self.only_not_applicable(
                node,
                f"{call.name.text}(…)",
                "`only` asks that every source of the value be such a result; a field names "
                "where in the result, and another field of the same result may hold the value "
                "too: write `from result(…) only`, or leave `only` out",
            )
        history = self.history(s.history_of(call), module)
        return trusted(m.Provenance)(
            value=value,
            source="result",
            only=node.only and not field,
            call=history,
            field=trusted(m.Path)(root="result", parts=field) if field else None,
        )

    def only_not_applicable(self, node: s.Provenance, written: str, help: str) -> None:
        """H341 at the `only` ending `value from WRITTEN only`."""
        self.report(
            "H341",
            f"`only` does not apply to `from {written}`",
            Span(node.span.source, node.span.end - len("only"), node.span.end),
            f"after `from {written}`",
            help=help,
        )

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
                "risk": (m.RISK_LEVELS, "risk level"),
                "effects": (m.EFFECTS, "effect"),
                "kind": (m.TOOL_KINDS, "tool kind"),
            }.get(".".join(path.parts))
            if vocabulary is not None:
                self.word(s.Name(other.text, span=other.span), *vocabulary)

    def value(self, node: object, module: Module) -> m.Value:
        if isinstance(node, s.Str):
            return trusted(m.Literal)(value=node.value, type="string")
        if isinstance(node, s.Bool):
            return trusted(m.Literal)(value=node.value, type="bool")
        if isinstance(node, s.Int):
            return trusted(m.Literal)(value=node.value, type="int")
        if isinstance(node, s.Float):
            return trusted(m.Literal)(value=node.value, type="float")
        if isinstance(node, s.Duration):
            return trusted(m.Literal)(value=node.ms, type="duration")
        if isinstance(node, s.Path):
            return self.path(node)
        if isinstance(node, s.FuncCall):
            return self.call(node, module)
        if isinstance(node, s.Index):
            of = self.value(node.of, module)
            if not isinstance(of, m.Path):  # pragma: no cover - the parser indexes paths only
                raise TypeError(f"not a path: {node.of!r}")
            return trusted(m.Index)(of=of, key=self.value(node.key, module))
        if isinstance(node, s.ListLit):
            return trusted(m.ListValue)(items=tuple(self.value(i, module) for i in node.items))
        if isinstance(node, s.Record):
            return trusted(m.RecordValue)(
                fields={e.key.text: self.value(e.value, module) for e in node.entries}
            )
        raise TypeError(f"not a value: {node!r}")  # pragma: no cover - the parser builds values

    # -- function calls ----------------------------------------------------------------------

    def call(self, node: s.FuncCall, module: Module) -> m.Value:
        """A fact function, `len`, an extraction or a history term (language.md §7.4)."""
        name = node.name.text
        if name in FACT_FUNCTIONS:
            self.call_form(node, "a fact function")
            arg = node.args[0] if node.args else None
            target = ""
            if isinstance(arg, s.Path):
                symbol = self.res.references.get(arg.span)
                target = symbol.name if symbol is not None else arg.text
            return trusted(m.FactCall)(func=name, name=target)  # type: ignore[arg-type]
        if name in VALUE_FUNCTIONS:
            self.call_form(node, f"`{name}`")
            arg = self.single_value(node)
            of = (
                self.value(arg, module)
                if arg is not None
                else trusted(m.Literal)(value="", type="string")
            )
            if name == "len":
                return trusted(m.Length)(of=of)
            return trusted(m.Extract)(func=name, of=of)  # type: ignore[arg-type]
        return self.history(node, module)

    def call_form(self, node: s.FuncCall, what: str, *, window: bool = False) -> None:
        """H335 for the parts of a history term on a function that is not one."""
        parts = [("of", node.of[0].span if node.of else None)]
        if not window:
            parts.append(("within", node.window.span if node.window is not None else None))
            parts.append(("when", node.when.span if node.when is not None else None))
        for word, span in parts:
            if span is not None:
                self.report(
                    "H335",
                    f"{what} takes no `{word}`",
                    span,
                    f"`{word}` here",
                    help="`of` belongs to `sum`; `within` and `when` to history terms "
                    "(`called`, `succeeded`, `count`, `sum`, `seen`)",
                )

    def single_value(self, node: s.FuncCall) -> s.Expr | None:
        """The one value argument of `len`, `urls`, `hosts`, `emails` (H335 otherwise)."""
        args = node.args
        if len(args) == 1 and not isinstance(args[0], s.Pattern):
            return args[0]
        self.report(
            "H335",
            f"`{node.name.text}` takes one value, not "
            + (f"{len(args)} arguments" if len(args) != 1 else "a tool pattern"),
            node.span,
            "here",
            help=f"write `{node.name.text}(args.x)`",
        )
        return None

    def history(self, node: s.FuncCall, module: Module) -> m.History:
        name = node.name.text
        window_ms: int | None = None
        window = node.window
        if isinstance(window, s.Duration):
            window_ms = window.ms
        elif window is not None:
            number = window.text if isinstance(window, s.Float) else str(window.value)
            self.report(
                "H336",
                f"the window `within {number}` has no unit",
                window.span,
                "a number, not a duration",
                help=f"write a duration: `within {number}m`, `within {number}h` or "
                f"`within {number}s`",
            )
        selectors: list[m.Selector] = []
        label: str | None = None
        field: m.Path | None = None
        args = node.args
        if name in SELECTING_FUNCTIONS:
            if node.of:
                self.call_form(node, f"`{name}`", window=True)
            if not args:
                self.report(
                    "H335",
                    f"`{name}` needs the tools it counts",
                    node.span,
                    "no selector",
                    help=f"write `{name}(files.delete)`, `{name}(payments.*)` or "
                    f"`{name}(kind:mcp)`",
                )
            for arg in args:
                pattern = self.pattern_arg(arg, name)
                if pattern is not None:
                    selectors.append(self.selector(pattern, module))
        elif name == "sum":
            field = self.sum_field(node)
            if not node.of:
                self.report(
                    "H335",
                    "`sum` needs the tools whose calls it adds up",
                    node.span,
                    "no `of`",
                    help="write `sum(args.amount of payments.send)`",
                )
            selectors = [self.selector(p, module) for p in node.of]
        else:  # seen
            for word, span in (
                ("of", node.of[0].span if node.of else None),
                ("when", node.when.span if node.when is not None else None),
            ):
                if span is not None:
                    self.report(
                        "H335",
                        f"`seen` takes no `{word}`",
                        span,
                        f"`{word}` here",
                        help="`seen(LABEL within DURATION)` asks whether a result carrying the "
                        "label was produced",
                    )
            if len(args) == 1 and isinstance(args[0], s.Path) and "." not in args[0].text:
                label = args[0].text
            else:
                self.report(
                    "H335",
                    "`seen` takes one data label",
                    node.span,
                    "not a label",
                    help="write `seen(secret)`, `seen(pii within 1h)` or a label the spec declares",
                )
                label = ""
        where = None
        if node.when is not None:
            self._history_depth = self._history_depth + 1
            try:
                where = self.cond(node.when, module)
            finally:
                self._history_depth -= 1
        return trusted(m.History)(
            func=name,  # type: ignore[arg-type]
            selectors=tuple(selectors),
            label=label,
            field=field,
            window_ms=window_ms,
            where=where,
        )

    def pattern_arg(self, arg: object, func: str) -> s.Pattern | None:
        if isinstance(arg, s.Pattern):
            return arg
        if isinstance(arg, s.Path):
            return s.Pattern(arg.text, span=arg.span)
        span: Span = arg.span  # type: ignore[attr-defined]
        self.report(
            "H335",
            f"`{func}` takes tool selectors, not {span.text}",
            span,
            "not a tool selector",
            help="write a tool id, a glob (`payments.*`), `pack:NAME` or `kind:NAME`",
        )
        return None

    def sum_field(self, node: s.FuncCall) -> m.Path | None:
        args = node.args
        if len(args) == 1 and isinstance(args[0], s.Path):
            parts = args[0].parts
            if parts[0] in ("args", RESULT_ROOT) and len(parts) > 1:
                return trusted(m.Path)(root=parts[0], parts=parts[1:])  # type: ignore[arg-type]
        self.report(
            "H335",
            "`sum` adds up one field of the calls: `args.NAME` or `result.NAME`",
            args[0].span if len(args) == 1 else node.span,
            "not a field of a call",
            help="write `sum(args.amount of payments.send)`",
        )
        return None

    def path(self, node: s.Path) -> m.Path | m.EnumMember:
        parts = node.parts
        if parts[0] in BUILTIN_ROOTS:
            return trusted(m.Path)(root=parts[0], parts=parts[1:])  # type: ignore[arg-type]
        symbol = self.res.references.get(node.span)
        if symbol is not None and symbol.kind == "var":
            return trusted(m.Path)(root="var", parts=parts)
        if parts[0] == RESULT_ROOT and (len(parts) > 1 or node.span in self.res.whole_results):
            return trusted(m.Path)(root="result", parts=parts[1:])
        if symbol is not None and symbol.kind == "step":
            return trusted(m.Path)(root="step", parts=parts)
        if symbol is not None and symbol.kind == "fact":
            depth = symbol.name.count(".") + 1
            return trusted(m.Path)(root="fact", parts=(symbol.name, *parts[depth:]))
        if parts[0] == "input" and len(parts) > 1:
            return trusted(m.Path)(root="input", parts=parts[1:])
        return trusted(m.EnumMember)(name=node.text)

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
            return trusted(m.Selector)(kind="all", text=text)
        if text.startswith("pack:"):
            return trusted(m.Selector)(kind="pack", value=text[5:], text=text)
        if text.startswith("kind:"):
            word = self.word(
                s.Name(
                    text[5:],
                    span=Span(pattern.span.source, pattern.span.start + 5, pattern.span.end),
                ),
                m.TOOL_KINDS,
                "tool kind",
            )
            return trusted(m.Selector)(kind="kind", value=word or text[5:], text=text)
        target = self.res.module_globs.get(pattern.span)
        if target is not None:
            return trusted(m.Selector)(
                kind="module",
                value=self.names[target.key],
                tools=tuple(sorted(self.exposable[target.key])),
                text=text,
            )
        if "*" in text:
            return trusted(m.Selector)(kind="glob", value=text[: text.index("*")], text=text)
        symbol = self.res.references.get(pattern.span)
        return trusted(m.Selector)(kind="id", value=symbol.name if symbol else text, text=text)
