"""Lowering schemas: fields, types, constraints, regular expressions and defaults."""

from __future__ import annotations

import re
import re._parser as sre
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

from harnessc.dsl import syntax as s
from harnessc.dsl.source import Span
from harnessc.runtime import model as m
from harnessc.runtime.model import trusted
from harnessc.runtime.model.semantics import Pattern, compile_pattern, pattern_problem

from .core import LowererBase, article, origin

SCALAR_TYPES = ("string", "int", "float", "bool", "path", "url", "duration")
TYPE_WORDS = (*SCALAR_TYPES, "any")


class SchemaLowering(LowererBase):
    """Schemas, fields and types, with their constraints and defaults."""

    def schema_attrs(
        self, items: Iterable[object], allowed: Sequence[str], where: str
    ) -> dict[str, m.Schema]:
        seen: dict[str, s.SchemaAttr] = {}
        out: dict[str, m.Schema] = {}
        for item in items:
            if not isinstance(item, s.SchemaAttr):
                continue
            if item.key not in allowed:
                self.not_allowed(item.key, item.span, where)
            elif self.once(seen, item.key, item, item.span):
                out[item.key] = self.schema(item.schema, item)
        return out

    shapes_allowed = False
    """While lowering an `output`: open records, `any` and unions are allowed (H353)."""

    def schema(self, node: s.Schema, attr: s.SchemaAttr | None = None) -> m.Schema:
        key = attr.key if attr is not None else "output"
        before, self.shapes_allowed = self.shapes_allowed, key == "output"
        try:
            if attr is not None and attr.type is not None:
                shape = self.type(attr.type)
                if shape.optional:
                    self.report(
                        "H356",
                        "an `output` cannot be optional",
                        attr.type.span,
                        "an optional output",
                        help="a result without data has no `output`; write the type without `?`",
                    )
                    shape = shape.model_copy(update={"optional": False})
                return trusted(m.Schema)(shape=shape, origin=origin(node.span))
            if node.open:
                self.shape_allowed("an open record (`...`)", node.span)
            return trusted(m.Schema)(
                fields=self.fields(node.fields), open=node.open, origin=origin(node.span)
            )
        finally:
            self.shapes_allowed = before

    def shape_allowed(self, what: str, span: Span) -> bool:
        """H353 outside an `output`: the shapes of results only (open records, `any`, unions)."""
        if self.shapes_allowed:
            return True
        self.report(
            "H353",
            f"{what} is allowed only in an `output`",
            span,
            "not an output",
            help="arguments, facts and workflow inputs list every field with one type each: "
            "a condition reads them, and a call must not carry what no rule sees",
        )
        return False

    def field_twice(self, again: s.Field, first: s.Field, help: str) -> None:
        """H305: a schema (or an `extend` of one) names a field twice."""
        self.report(
            "H305",
            f"field `{again.name.text}` is declared twice",
            again.name.span,
            "declared again here",
            secondary=[(first.name.span, "first declared here")],
            help=help,
        )

    def fields(self, nodes: Sequence[s.Field]) -> tuple[m.Field, ...]:
        seen: dict[str, s.Field] = {}
        out = []
        for node in nodes:
            first = seen.get(node.name.text)
            if first is not None:
                self.field_twice(node, first, "rename or remove one of the two fields")
                continue
            seen[node.name.text] = node
            out.append(self.field(node))
        return tuple(out)

    def type(self, node: s.TypeRef) -> m.Type:
        name = node.name
        if name in ("list", "map"):
            item = self.type(node.args[0]) if node.args else trusted(m.Type)(name="string")
            kind: m.TypeName = "list" if name == "list" else "map"
            return trusted(m.Type)(name=kind, item=item, optional=node.optional)
        if name == "enum":
            values: list[str] = []
            firsts: dict[str, s.Str] = {}
            for value in node.values:
                if value.value in firsts:
                    self.report(
                        "H305",
                        f'enum value "{value.value}" is listed twice',
                        value.span,
                        "listed again here",
                        secondary=[(firsts[value.value].span, "first listed here")],
                        help="remove the second one",
                    )
                    continue
                firsts[value.value] = value
                values.append(value.value)
            return trusted(m.Type)(name="enum", values=tuple(values), optional=node.optional)
        if name == "object":
            if node.open:
                self.shape_allowed("an open record (`...`)", node.span)
            return trusted(m.Type)(
                name="object",
                fields=self.fields(node.fields),
                optional=node.optional,
                open=node.open,
            )
        if name == "union":
            self.shape_allowed("a union", node.span)
            return self.union(node)
        if name == "any":
            self.shape_allowed("`any`", node.span)
            return trusted(m.Type)(name="any", optional=node.optional)
        if name in SCALAR_TYPES:
            return trusted(m.Type)(name=name, optional=node.optional)  # type: ignore[arg-type]
        self.word(s.Name(name, span=self.type_name_span(node)), TYPE_WORDS, "type")
        return trusted(m.Type)(name="string", optional=node.optional)

    def union(self, node: s.TypeRef) -> m.Type:
        """`A | B | …` (a `?` after it makes the whole union optional): H355 on `any` among
        the alternatives or one given twice."""
        options: list[m.Type] = []
        firsts: dict[str, s.TypeRef] = {}
        for arg in node.args:
            option = self.type(arg)
            if option.name == "any":
                self.report(
                    "H355",
                    "`any` in a union holds every value: the other alternatives say nothing",
                    arg.span,
                    "every value",
                    help="write `any` alone, or list the alternatives without it",
                )
                continue
            key = option.model_copy(update={"optional": False}).model_dump_json()
            if key in firsts:
                self.report(
                    "H355",
                    "a union lists the same alternative twice",
                    arg.span,
                    "listed again here",
                    secondary=[(firsts[key].span, "first listed here")],
                    help="remove the second one",
                )
                continue
            firsts[key] = arg
            options.append(option.model_copy(update={"optional": False}))
        if len(options) == 1:
            return options[0].model_copy(update={"optional": node.optional})
        return trusted(m.Type)(name="union", options=tuple(options), optional=node.optional)

    @staticmethod
    def type_name_span(node: s.TypeRef) -> Span:
        return Span(node.span.source, node.span.start, node.span.start + len(node.name))

    def field(self, node: s.Field) -> m.Field:
        if node.type is None:
            self.report(
                "H305",
                f"field `{node.name.text}` has no type",
                node.name.span,
                "no type",
                help=f"write its type after the colon (`{node.name.text}: string`); a field "
                "without one only adds to a tool's field in an `extend`",
            )
        type_ = self.type(node.type) if node.type is not None else trusted(m.Type)(name="string")
        seen, labels = self.constraints(node)
        inner = type_
        while inner.name in ("list", "map") and inner.item is not None:
            inner = inner.item
        given = seen.get("trusted") or seen.get("untrusted")
        if inner.name == "any" and given is not None:
            self.report(
                "H356",
                f"`{given.kind}` cannot apply to field `{node.name.text}` of type `any`",
                given.span,
                "values no one listed",
                help="values inside an `any` carry the tool's trust; list the fields in a "
                "record type (`{ payee: string " + given.kind + ", ... }`) and declare their "
                "trust there",
            )
            seen = {k: v for k, v in seen.items() if k not in ("trusted", "untrusted")}
        name = type_.name
        what = f"field `{node.name.text}`"
        bounds: dict[str, int | float] = {}
        for key in ("min", "max"):
            c = seen.get(key)
            if c is None or not isinstance(c.value, s.Int | s.Float):
                continue
            number = c.value.value
            if name in ("bool", "enum", "object", "duration", "union", "any"):
                self.report(
                    "H305",
                    f"`{key}` does not apply to {_an(name)} `{name}` field",
                    c.span,
                    f"on {what}",
                    help="`min` and `max` bound numbers, the length of strings and paths, and "
                    "the size of lists and maps"
                    + (
                        "; bound an alternative of a union inside a record"
                        if name == "union"
                        else ""
                    ),
                )
                continue
            if name not in ("int", "float") and (not isinstance(c.value, s.Int) or number < 0):
                self.report(
                    "H305",
                    f"`{key}` of {article(name)} `{name}` field is a count, not `{c.value.text}`"
                    if isinstance(c.value, s.Float)
                    else f"`{key}` of {article(name)} `{name}` field may not be negative",
                    c.value.span,
                    "not a count",
                    help="write a whole number of 0 or more",
                )
                continue
            if name == "int" and isinstance(c.value, s.Float):
                self.report(
                    "H305",
                    f"`{key}` of an `int` field must be a whole number",
                    c.value.span,
                    "not a whole number",
                    help=f"write `{key} {int(number)}`, or make the field a `float`",
                )
                continue
            bounds[key] = number
        if "min" in bounds and "max" in bounds and bounds["min"] > bounds["max"]:
            self.report(
                "H305",
                f"`min` is greater than `max` on {what}",
                seen["max"].span,
                f"max {bounds['max']}",
                secondary=[(seen["min"].span, f"min {bounds['min']}")],
                help="swap the bounds, or correct one of them",
            )
        pattern: str | None = None
        compiled: Pattern | None = None
        pc = seen.get("pattern")
        if pc is not None and isinstance(pc.value, s.Str):
            if name not in ("string", "path", "url"):
                self.report(
                    "H305",
                    f"`pattern` does not apply to {_an(name)} `{name}` field",
                    pc.span,
                    f"on {what}",
                    help="`pattern` constrains strings, paths and URLs",
                )
            else:
                pattern = pc.value.value
                compiled = self.regex(pc.value)
        default: Any = None
        dc = seen.get("default")
        if dc is not None and dc.value is not None:
            default = self.default(node, type_, dc, bounds, compiled)
        return trusted(m.Field)(
            name=node.name.text,
            type=type_,
            min=bounds.get("min"),
            max=bounds.get("max"),
            pattern=pattern,
            default=default,
            secret="secret" in seen,
            trust="trusted" if "trusted" in seen else "untrusted" if "untrusted" in seen else None,
            labels=tuple(labels),
            origin=origin(node.name.span),
        )

    def constraints(self, node: s.Field) -> tuple[dict[str, s.Constraint], list[str]]:
        """A field's constraints by kind (H302 on one given twice, H303 on `trusted` with
        `untrusted`) and its labels in order: a tool's field and a field an `extend` notes
        read them alike."""
        seen: dict[str, s.Constraint] = {}
        labels: list[str] = []
        for constraint in node.constraints:
            if constraint.kind == "label":
                if isinstance(constraint.value, s.Name) and constraint.value.text not in labels:
                    labels.append(constraint.value.text)
                continue
            self.once(seen, constraint.kind, constraint, constraint.span)
        if "trusted" in seen and "untrusted" in seen:
            first, second = sorted((seen["trusted"], seen["untrusted"]), key=lambda c: c.span.start)
            self.report(
                "H303",
                f"`{second.kind}` is not allowed together with `{first.kind}`",
                second.span,
                "a second trust",
                secondary=[(first.span, "the field's trust")],
                help="a field is `trusted` or `untrusted`, not both",
            )
        return seen, labels

    def regex(self, node: s.Str) -> Pattern | None:
        try:
            # parsed apart from `re.compile`, whose cache would hide the warning the second time
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                sre.parse(node.value)
                re.compile(node.value)
        except (re.error, OverflowError, ValueError) as error:
            # a repeat count over 2**32 - 1 is an OverflowError, one of over 4,300 digits a
            # ValueError (Python's limit on converting digits to an int): both too large
            label = (
                error.msg if isinstance(error, re.error) else "the repetition number is too large"
            )
            self.report(
                "H306",
                f"invalid regular expression `{node.value}`",
                node.span,
                str(label),
                help="check the brackets and escapes; in a string, a backslash is written `\\\\`",
            )
            return None
        # Python warns of a set that will mean something else in a later version (`[[`, `--`,
        # `&&`, `~~`, `||` inside `[…]`): a policy's pattern must mean one thing everywhere
        future = [w for w in caught if issubclass(w.category, FutureWarning)]
        if future:
            self.report(
                "H306",
                f"ambiguous regular expression `{node.value}`",
                node.span,
                str(future[0].message).lower(),
                help="escape the doubled character inside `[…]` with a backslash (`\\\\-`)",
            )
            return None
        # at run time RE2 runs every pattern, in time linear in the text
        # (runtime/model/semantics.py): a pattern it cannot run (a back-reference, a lookaround) is
        # refused here
        problem = pattern_problem(node.value)
        if problem is not None:
            self.report(
                "H306",
                f"unsupported regular expression `{node.value}`",
                node.span,
                problem,
                help="patterns have no back-references, lookarounds, possessive repeats or "
                "`\\Z` (`$` is the end of the text), and repeat at most 1000 times",
            )
            return None
        return compile_pattern(node.value)

    def default(
        self,
        node: s.Field,
        type_: m.Type,
        constraint: s.Constraint,
        bounds: dict[str, int | float],
        compiled: Pattern | None,
    ) -> Any:
        value = constraint.value
        assert value is not None
        converted = self.json_of(value, type_)
        where = getattr(value, "span", constraint.span)
        if converted is _WRONG:
            self.report(
                "H307",
                f"the default of field `{node.name.text}` is not {self.type_words(type_)}",
                where,
                f"not {self.type_words(type_)}",
                help="write a default of the field's type, or remove it"
                + (
                    "; the values are " + ", ".join(f'"{v}"' for v in type_.values)
                    if type_.name == "enum"
                    else ""
                ),
            )
            return None
        size: float | None = None
        if isinstance(converted, bool):
            size = None
        elif isinstance(converted, int | float):
            size = converted
        elif isinstance(converted, str | list | dict) and type_.name != "duration":
            size = len(converted)
        if size is not None:
            low, high = bounds.get("min"), bounds.get("max")
            if (low is not None and size < low) or (high is not None and size > high):
                self.report(
                    "H307",
                    f"the default of field `{node.name.text}` is outside its `min`/`max`",
                    where,
                    "out of range",
                    help="choose a default within the bounds",
                )
        if compiled is not None and isinstance(converted, str) and not compiled.search(converted):
            self.report(
                "H307",
                f"the default of field `{node.name.text}` does not match its `pattern`",
                where,
                "does not match",
                help="choose a default that the pattern accepts",
            )
        return converted

    @staticmethod
    def type_words(type_: m.Type) -> str:
        if type_.name == "enum":
            return "one of its enum values"
        if type_.name == "union":
            return "a value of one of its alternatives"
        if type_.name in ("list", "map", "object"):
            return f"{article(type_.name)} `{type_.name}`"
        return f"{article(type_.name)} `{type_.name}`"

    def json_of(self, value: object, type_: m.Type) -> Any:
        """The JSON value of a default for `type_`, or _WRONG."""
        name = type_.name
        if name in ("string", "path", "url") and isinstance(value, s.Str):
            return value.value
        if name == "int" and isinstance(value, s.Int):
            return value.value
        if name == "float" and isinstance(value, s.Int | s.Float):
            return float(value.value)
        if name == "bool" and isinstance(value, s.Bool):
            return value.value
        if name == "duration" and isinstance(value, s.Duration):
            return value.text
        if name == "enum":
            text = (
                value.value
                if isinstance(value, s.Str)
                else value.text
                if isinstance(value, s.Path)
                else None
            )
            return text if text in type_.values else _WRONG
        if name == "list" and isinstance(value, s.ListLit) and type_.item is not None:
            items = [self.json_of(v, type_.item) for v in value.items]
            return _WRONG if any(i is _WRONG for i in items) else items
        if name == "map" and isinstance(value, s.Record) and type_.item is not None:
            out = {e.key.text: self.json_of(e.value, type_.item) for e in value.entries}
            return _WRONG if any(v is _WRONG for v in out.values()) else out
        if name == "union":
            for option in type_.options:
                found = self.json_of(value, option)
                if found is not _WRONG:
                    return found
            return _WRONG
        if name == "any":
            for scalar in _ANY_DEFAULTS:
                found = self.json_of(value, scalar)
                if found is not _WRONG:
                    return found
            return _WRONG
        if name == "object" and isinstance(value, s.Record):
            fields = {f.name: f for f in type_.fields}
            obj: dict[str, Any] = {}
            for e in value.entries:
                f = fields.get(e.key.text)
                if f is None:
                    return _WRONG
                obj[e.key.text] = self.json_of(e.value, f.type)
            return _WRONG if any(v is _WRONG for v in obj.values()) else obj
        return _WRONG


_ANY_DEFAULTS = tuple(trusted(m.Type)(name=n) for n in ("string", "int", "float", "bool"))
"""What a default of an `any` field may be written as (built without validation, as lowering
builds every value it checked: a check its cache answers builds no validator)."""


def _an(word: str) -> str:
    """The article of a type's name: `a union`, whose vowel sounds as a consonant."""
    return "a" if word == "union" else article(word)


class _Wrong:
    def __repr__(self) -> str:
        return "<wrong>"


_WRONG: Any = _Wrong()
