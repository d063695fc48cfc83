"""Lowering tools and their operations: kinds, effects, risk, timeouts, schemas and wire names."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import cast

from harnessc.dsl import syntax as s
from harnessc.dsl.source import Span
from harnessc.runtime import model as m
from harnessc.runtime.model import WIRE_NAME, derive_wire_name, trusted

from ..modules import head_span
from ..resolve import Module
from .conditions import ConditionLowering
from .core import origin

PRIMARY_EFFECTS = frozenset({"write", "external"})
EXPOSABLE_KINDS = frozenset({"public", "dynamic", "mcp"})
TOOL_ATTRS = frozenset(
    {
        "version",
        "summary",
        "use_when",
        "not_for",
        "effects",
        "risk",
        "timeout",
        "packs",
        "tags",
        "wire_name",
        "legacy",
        "primitive",
        "dynamic",
        "trust",
        "labels",
    }
)
KIND_ATTRS = ("legacy", "primitive", "dynamic")
OPERATION_ATTRS = frozenset({"summary", "use_when", "not_for", "effects", "risk", "timeout"})


class ToolLowering(ConditionLowering):
    """Tools and their operations, which the surfaces, skills and MCP servers add to."""

    def add_tool(
        self,
        module: Module,
        node: s.Tool,
        tool_id: str,
        mcp_server: str | None,
        skill: str | None,
    ) -> None:
        tool = self.tool(module, node, tool_id, mcp_server, skill)
        self.tools[tool_id] = tool
        self.tool_spans[tool_id] = node.name.span
        if tool.kind in EXPOSABLE_KINDS:
            self.exposable[module.key].append(tool_id)

    def tool(
        self,
        module: Module,
        node: s.Tool,
        tool_id: str,
        mcp_server: str | None,
        skill: str | None,
    ) -> m.Tool:
        where = "an MCP tool" if mcp_server else "a private tool" if skill else "a tool"
        allowed = TOOL_ATTRS - set(KIND_ATTRS) if (mcp_server or skill) else TOOL_ATTRS
        for item in node.items:
            if isinstance(item, s.Attr) and item.key in KIND_ATTRS and item.key not in allowed:
                self.not_allowed(
                    item.key,
                    item.span,
                    where,
                    help="the kind of a tool declared in an `mcp` or `skill` block follows "
                    "from where it is declared",
                )
        attrs = self.unique_attrs(
            (i for i in node.items if not (isinstance(i, s.Attr) and i.key in KIND_ATTRS)),
            allowed - set(KIND_ATTRS),
            where,
        )
        kind_attrs = [i for i in node.items if isinstance(i, s.Attr) and i.key in allowed]
        kind_attrs = [i for i in kind_attrs if i.key in KIND_ATTRS]
        kind: m.ToolKind = "mcp" if mcp_server else "private" if skill else "public"
        replaced_by = provided_by = None
        if kind_attrs:
            first = kind_attrs[0]
            kind = cast("m.ToolKind", first.key)  # one of KIND_ATTRS
            for extra in kind_attrs[1:]:
                self.report(
                    "H303",
                    f"`{extra.key}` is not allowed together with `{first.key}`",
                    extra.span,
                    "a second kind",
                    secondary=[(first.span, "the tool's kind")],
                    help="a tool has one kind: public (the default), `primitive`, `legacy` or "
                    "`dynamic`",
                )
            for name in self.name_values(first):
                if first.key == "legacy":
                    replaced_by = self.ref(name, module)
                else:
                    provided_by = self.ref(name, module)

        schemas = self.schema_attrs(node.items, ("input", "output"), where)
        for item in node.items:
            if isinstance(item, s.SchemaAttr) and item.key == "input":
                self.input_trust(item.schema.fields)
        requires = [i for i in node.items if isinstance(i, s.Requires)]
        for again in requires[1:]:
            self.report(
                "H302",
                "`requires` is given twice",
                again.span,
                "given again here",
                secondary=[(requires[0].span, "first given here")],
                help="join the two conditions with `and`",
            )
        operations: dict[str, m.Operation] = {}
        for item in node.items:
            if isinstance(item, s.Operation):
                operations[item.name.text] = self.operation(module, item)

        effects: tuple[m.EffectWord, ...]
        risk: m.Risk
        if operations:
            for key in ("effects", "risk"):
                if key in attrs:
                    self.not_allowed(
                        key,
                        attrs[key].span,
                        "a tool with operations",
                        help=f"declare `{key}` in each operation; the tool reports the "
                        + ("union of theirs" if key == "effects" else "highest of theirs"),
                    )
            effects = tuple(sorted({e for op in operations.values() for e in op.effects}))
            risk = max((op.risk for op in operations.values()), key=m.risk_rank)
        else:
            effects = self.effects(attrs.get("effects"))
            if "effects" not in attrs:
                self.missing(
                    "`effects`",
                    node,
                    f"tool `{tool_id}`",
                    help="say what the tool does: `effects read`, `effects write reversible`, "
                    "`effects external`, …",
                )
            risk = self.risk(attrs.get("risk"), effects)
        if "input" not in schemas and kind == "dynamic":
            # a tool with no `input` takes no arguments; a dynamic one must still declare it,
            # so its calls are validated before the runtime registers it (language.md §4)
            self.missing(
                "`input` schema",
                node,
                f"dynamic tool `{tool_id}`",
                help="declare the arguments, or `input {}` if it takes none",
            )
        input_schema = schemas.get("input") or trusted(m.Schema)()
        if operations:
            input_schema = self.with_discriminator(node, input_schema, operations, schemas)

        wire = derive_wire_name(tool_id)
        if "wire_name" in attrs:
            written = self.text(attrs["wire_name"]) or ""
            if WIRE_NAME.fullmatch(written):
                wire = written
            else:
                self.report(
                    "H308",
                    f"wire name `{written}` is not accepted by model APIs",
                    attrs["wire_name"].span,
                    "not `[A-Za-z0-9_-]{1,64}`",
                    help="use 1 to 64 letters, digits, `_` or `-`",
                )
        version = 1
        if "version" in attrs:
            value = next((v for v in attrs["version"].values if isinstance(v, s.Int)), None)
            if value is not None:
                version = self.at_least_one(value, "a tool's `version`")
        trust = self.level(attrs.get("trust"), m.TRUST_LEVELS, "trust level")
        on_success = tuple(
            add
            for add in (
                self.on_success(i, module) for i in node.items if isinstance(i, s.OnSuccess)
            )
            if add is not None
        )
        return trusted(m.Tool)(
            id=tool_id,
            kind=kind,
            wire_name=wire,
            version=version,
            summary=self.text(attrs.get("summary")),
            use_when=self.text(attrs.get("use_when")),
            not_for=self.text(attrs.get("not_for")),
            effects=effects,
            risk=risk,
            timeout_ms=self.timeout(attrs.get("timeout")),
            packs=tuple(n.text for n in self.name_values(attrs.get("packs"))),
            tags=tuple(n.text for n in self.name_values(attrs.get("tags"))),
            replaced_by=replaced_by,
            provided_by=provided_by,
            mcp_server=mcp_server,
            skill=skill,
            input=input_schema,
            output=schemas.get("output"),
            requires=self.cond(requires[0].cond, module) if requires else None,
            trust=trust,  # type: ignore[arg-type]
            labels=tuple(dict.fromkeys(n.text for n in self.name_values(attrs.get("labels")))),
            on_success=on_success,
            operations=operations,
            module=self.names[module.key],
            origin=origin(node.name.span),
        )

    def level(self, attr: s.Attr | None, vocabulary: Sequence[str], what: str) -> str | None:
        """The word of a one-word attribute (`trust trusted`, `risk high`) if it is one of
        `vocabulary`, else None (after H301 for a word outside it)."""
        words = self.name_values(attr)
        return self.word(words[0], vocabulary, what) if words else None

    def on_success(self, node: s.OnSuccess, module: Module) -> m.FactUpdate | None:
        """`on_success [when C] add|remove [each x in] VALUE[: ITEM] to|from F`; whether F is a
        list fact that takes the value is checked by validation."""
        parts = node.value.parts
        if parts[0] not in ("args", "result") or len(parts) < 2:
            verb = "adds" if node.op == "add" else "removes"
            self.report(
                "H343",
                f"`on_success` {verb} `{node.value.text}`, which is not a value of the call",
                node.value.span,
                "not `args.*` or `result.*`",
                help=f"{node.op} an argument (`args.user`) or a field of the result (`result.id`)",
            )
            return None
        symbol = self.res.references.get(node.fact.span)
        fact = symbol.name if symbol is not None else node.fact.text
        value = trusted(m.Path)(root=parts[0], parts=parts[1:])  # type: ignore[arg-type]
        item = None
        if node.var is not None and node.item is not None:
            item = trusted(m.Path)(root="var", parts=node.item.parts)
        key = None
        if node.key is not None:
            kparts = node.key.parts
            if kparts[0] not in ("args", "result") or len(kparts) < 2:
                self.report(
                    "H352",
                    f"the key `{node.key.text}` of `{node.fact.text}[…]` is not a value of the "
                    "call",
                    node.key.span,
                    "not `args.*` or `result.*`",
                    help="key the entry by an argument (`args.account`) or a field of the "
                    "result (`result.account`)",
                )
                return None
            key = trusted(m.Path)(root=kparts[0], parts=kparts[1:])  # type: ignore[arg-type]
        return trusted(m.FactUpdate)(
            value=value,
            fact=fact,
            op=node.op,  # type: ignore[arg-type]
            each=node.var.text if node.var is not None else None,
            item=item,
            when=self.cond(node.when, module) if node.when is not None else None,
            key=key,
        )

    def input_trust(self, fields: Iterable[s.Field]) -> None:
        """`trusted`, `untrusted` and `label` describe what a tool returns: H303 on an input."""
        for f in fields:
            for c in f.constraints:
                if c.kind in ("trusted", "untrusted", "label"):
                    self.not_allowed(
                        c.kind,
                        c.span,
                        "an input field",
                        help="trust and labels describe what a tool returns: put them on its "
                        "`output` fields, or on the tool (`trust`, `labels`)",
                    )
            stack = [f.type] if f.type is not None else []
            while stack:
                ty = stack.pop()
                stack.extend(ty.args)
                self.input_trust(ty.fields)

    def operation(self, module: Module, node: s.Operation) -> m.Operation:
        where = f"operation `{node.name.text}`"
        for item in node.items:
            if isinstance(item, s.SchemaAttr) and item.key == "input":
                self.input_trust(item.schema.fields)
            if isinstance(item, s.Attr) and item.key not in OPERATION_ATTRS:
                self.not_allowed(
                    item.key, item.span, "an operation", help="declare it on the tool instead"
                )
            elif isinstance(item, s.Requires | s.Operation | s.OnSuccess):
                key = {s.Requires: "requires", s.Operation: "operation"}.get(
                    type(item), "on_success"
                )
                self.not_allowed(key, head_span(item), "an operation")
            elif isinstance(item, s.SchemaAttr) and item.key != "input":
                self.not_allowed(
                    item.key, item.span, "an operation", help="declare `output` on the tool"
                )
        attrs = self.unique_attrs(
            (i for i in node.items if isinstance(i, s.Attr) and i.key in OPERATION_ATTRS),
            OPERATION_ATTRS,
            "an operation",
        )
        schemas = self.schema_attrs(
            (i for i in node.items if isinstance(i, s.SchemaAttr) and i.key == "input"),
            ("input",),
            "an operation",
        )
        if "effects" not in attrs:
            self.missing("`effects`", node, where, help="write `effects read`, `effects write`, …")
        effects = self.effects(attrs.get("effects"))
        return trusted(m.Operation)(
            name=node.name.text,
            summary=self.text(attrs.get("summary")),
            use_when=self.text(attrs.get("use_when")),
            not_for=self.text(attrs.get("not_for")),
            effects=effects,
            risk=self.risk(attrs.get("risk"), effects),
            timeout_ms=self.timeout(attrs.get("timeout")),
            input=schemas.get("input"),
            origin=origin(node.name.span),
        )

    def with_discriminator(
        self,
        node: s.Tool,
        schema: m.Schema,
        operations: dict[str, m.Operation],
        written: dict[str, m.Schema],
    ) -> m.Schema:
        """Add (or check) `op`, and merge the operations' own fields as optional fields."""
        names = tuple(operations)
        declared = schema.field("op")
        if declared is not None:
            t = declared.type
            if t.name != "enum" or set(t.values) != set(names) or t.optional:
                shown = ", ".join(f'"{n}"' for n in names)
                self.report(
                    "H305",
                    "the discriminator `op` must be the enum of the tool's operations",
                    self.field_span(node, "op") or head_span(node),
                    "not that enum",
                    help=f"write `op: enum({shown})`, or leave `op` out: it is added for you",
                )
        op_field = trusted(m.Field)(
            name="op",
            type=trusted(m.Type)(name="enum", values=names),
            origin=declared.origin if declared else origin(node.name.span),
        )
        fields = [op_field] + [f for f in schema.fields if f.name != "op"]
        present = {f.name: f for f in fields}
        for operation in operations.values():
            for extra in operation.input.fields if operation.input else ():
                known = present.get(extra.name)
                if known is None:
                    optional = extra.type.model_copy(update={"optional": True})
                    merged = extra.model_copy(update={"type": optional})
                    fields.append(merged)
                    present[extra.name] = merged
                elif known.type.model_copy(update={"optional": False}) != extra.type.model_copy(
                    update={"optional": False}
                ):
                    self.report(
                        "H305",
                        f"operation `{operation.name}` gives field `{extra.name}` another type",
                        self.field_span(node, extra.name, operation.name) or head_span(node),
                        "a second type",
                        help="give the field one type, or another name",
                    )
        return schema.model_copy(update={"fields": tuple(fields)})

    def field_span(self, node: s.Tool, name: str, operation: str | None = None) -> Span | None:
        items: Iterable[object] = node.items
        if operation is not None:
            op = next(
                (i for i in node.items if isinstance(i, s.Operation) and i.name.text == operation),
                None,
            )
            items = op.items if op is not None else ()
        for item in items:
            if isinstance(item, s.SchemaAttr) and item.key == "input":
                for f in item.schema.fields:
                    if f.name.text == name:
                        return f.span
        return None

    def effects(self, attr: s.Attr | None) -> tuple[m.EffectWord, ...]:
        found: set[m.EffectWord] = set()
        for name in self.name_values(attr):
            word = self.word(name, m.EFFECTS, "effect")
            if word is not None:
                found.add(cast("m.EffectWord", word))  # a word of m.EFFECTS
        return tuple(sorted(found))

    def risk(self, attr: s.Attr | None, effects: Iterable[str]) -> m.Risk:
        """The declared level; by default `low` when nothing is written or sent (language.md §6)."""
        for name in self.name_values(attr):
            word = self.word(name, m.RISK_LEVELS, "risk level")
            if word is not None:
                return cast("m.Risk", word)  # a word of m.RISK_LEVELS
        return "medium" if PRIMARY_EFFECTS & set(effects) else "low"

    def timeout(self, attr: s.Attr | None) -> int | None:
        if attr is None:
            return None
        for value in attr.values:
            if isinstance(value, s.Duration):
                return self.positive_ms(value, "a timeout")
        return None
