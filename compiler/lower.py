"""Stage lower: syntax trees and their resolution → the typed model (runtime/model.py).

Runs only on a build whose names all resolved, so every reference has a symbol. Along the way
it checks what the grammar leaves open (H3): closed vocabularies with "did you mean", attributes
given twice, not allowed or missing, schemas and their constraints, regular expressions,
defaults, value ranges, ASK/DENY options, and wire names. Inside the stage every error is
collected; a build with errors gets no model.
"""

from __future__ import annotations

import re
import re._parser as sre
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path as FilePath
from typing import Any, TypeVar

from harnessc.dsl import syntax as s
from harnessc.dsl.diagnostics import Diagnostic, has_errors
from harnessc.dsl.source import Span
from harnessc.dsl.suggest import did_you_mean
from harnessc.runtime import model as m
from harnessc.runtime.model import WIRE_NAME, derive_wire_name
from pydantic import ValidationError

from .modules import head_span
from .resolve import BUILTIN_ROOTS, Module, Resolution, Symbol

__all__ = ["Lowered", "derive_wire_name", "lower_program"]

TRANSPORTS = ("stdio", "http", "sse", "websocket")
RECALL_MODES = ("embedding", "lexical")
RERANK_MODES = ("hybrid", "dense", "lexical")
PREFER_WORDS = ("packs",)
SELF_APPROVAL = ("allow", "deny")
SCALAR_TYPES = ("string", "int", "float", "bool", "path", "url", "duration")
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
    }
)
KIND_ATTRS = ("legacy", "primitive", "dynamic")
OPERATION_ATTRS = frozenset({"summary", "use_when", "not_for", "effects", "risk", "timeout"})

T = TypeVar("T")


@dataclass
class Lowered:
    """The stage's value: the model (None when an error was reported) and the diagnostics."""

    spec: m.Spec | None
    diagnostics: list[Diagnostic] = field(default_factory=list)


def module_name(module: Module) -> str:
    """`std.risk` for a standard module, the header's name for a root, the file stem otherwise."""
    if module.module_path is not None:
        return module.module_path
    if module.is_root:
        for item in module.syntax.items:
            if isinstance(item, s.Header):
                return item.name.text
    return FilePath(module.name).stem


def origin(span: Span) -> m.SourceRef:
    line, column = span.source.location(span.start)
    return m.SourceRef(file=span.source.path, line=line, column=column)


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


class _Lowerer:
    def __init__(self, resolution: Resolution) -> None:
        self.res = resolution
        self.diagnostics: list[Diagnostic] = []
        self.names = {mod.key: module_name(mod) for mod in resolution.modules}
        roots = [mod for mod in resolution.modules if mod.is_root]
        self.root = next(
            (r for r in roots if any(isinstance(i, s.Header) for i in r.syntax.items)),
            roots[0] if roots else None,
        )
        self.tools: dict[str, m.Tool] = {}
        self.tool_spans: dict[str, Span] = {}
        self.exposable: dict[str, list[str]] = {mod.key: [] for mod in resolution.modules}
        # per policy: its own default and items (rules, or the qualified name of an include)
        self.policy_parts: dict[str, tuple[s.Policy, m.Policy, list[m.Rule | tuple[str, Span]]]]
        self.policy_parts = {}
        self.cycles: set[frozenset[str]] = set()

    # =========================================================================================
    # Reporting

    def report(
        self,
        code: str,
        message: str,
        span: Span,
        label: str = "",
        *,
        secondary: Sequence[tuple[Span, str]] = (),
        notes: Sequence[str] = (),
        help: str | None = None,
    ) -> None:
        self.diagnostics.append(
            Diagnostic.make(code, message, span, label, secondary=secondary, notes=notes, help=help)
        )

    def guarded(self, node: object, build: Callable[[], T]) -> T | None:
        """Build one declaration's model; a validation failure is our bug, never the user's."""
        try:
            return build()
        except ValidationError as error:
            errors = error.errors()
            where = ".".join(str(p) for p in errors[0]["loc"]) if errors else ""
            self.report(
                "H901",
                "internal error while building the model of this declaration",
                head_span(node),
                "here",
                notes=[f"the model rejected the value at `{where}`" if where else "no detail"],
                help="this is a bug in harnessc; please report it with this spec",
            )
            return None

    def word(self, name: s.Name, vocabulary: Sequence[str], what: str) -> str | None:
        """A word of a closed vocabulary, or None after reporting H301."""
        if name.text in vocabulary:
            return name.text
        self.report(
            "H301",
            f"unknown {what} `{name.text}`",
            name.span,
            f"not {_article(what)} {what}",
            notes=[f"the {what}s are {', '.join(f'`{w}`' for w in vocabulary)}"],
            help=did_you_mean(name.text, vocabulary),
        )
        return None

    def unique_attrs(
        self, items: Iterable[object], allowed: Iterable[str], where: str
    ) -> dict[str, s.Attr]:
        """The block's attributes by key; reports duplicates (H302) and disallowed keys (H303)."""
        allowed = frozenset(allowed)
        seen: dict[str, s.Attr] = {}
        for item in items:
            if not isinstance(item, s.Attr):
                continue
            if item.key not in allowed:
                self.not_allowed(item.key, item.span, where)
                continue
            self.once(seen, item.key, item, item.span)
        return seen

    def once(self, seen: dict[str, Any], key: str, node: Any, span: Span) -> bool:
        first = seen.get(key)
        if first is None:
            seen[key] = node
            return True
        self.report(
            "H302",
            f"`{key}` is given twice",
            span,
            "given again here",
            secondary=[(first.span, "first given here")],
            help=f"keep one `{key}`",
        )
        return False

    def not_allowed(self, key: str, span: Span, where: str, help: str | None = None) -> None:
        self.report(
            "H303",
            f"`{key}` is not allowed in {where}",
            span,
            "not allowed here",
            help=help or f"remove `{key}`",
        )

    def missing(self, what: str, node: object, where: str, help: str | None = None) -> None:
        self.report(
            "H304",
            f"{where} has no {what}",
            head_span(node),
            f"no {what}",
            help=help,
        )

    def positive_ms(self, duration: s.Duration, what: str) -> int:
        ms = duration.ms
        if ms <= 0:
            self.report(
                "H308",
                f"{what} must be longer than zero",
                duration.span,
                "zero",
                help=f"give {what} a positive duration, such as `10m`",
            )
        return ms

    def at_least_one(self, value: s.Int, what: str) -> int:
        if value.value < 1:
            self.report(
                "H308",
                f"{what} must be at least 1",
                value.span,
                f"{value.value}",
                help=f"give {what} a value of 1 or more",
            )
        return value.value

    # =========================================================================================
    # Attribute values

    @staticmethod
    def text(attr: s.Attr | None) -> str | None:
        if attr is None:
            return None
        for value in attr.values:
            if isinstance(value, s.Str):
                return value.value
        return None

    @staticmethod
    def name_values(attr: s.Attr | None) -> list[s.Name]:
        if attr is None:
            return []
        return [v for v in attr.values if isinstance(v, s.Name)]

    def qualified(self, symbol: Symbol) -> str:
        return f"{self.names[symbol.module.key]}.{symbol.name}"

    def ref(self, name: s.Name, module: Module) -> str:
        """A resolved reference as the model keys it: qualified for module-scoped kinds."""
        symbol = self.res.references.get(name.span)
        if symbol is None:
            return name.text
        if symbol.kind in ("surface", "policy", "risk_table", "agent", "workflow", "skill"):
            return self.qualified(symbol)
        return symbol.name

    # =========================================================================================
    # The program

    def run(self) -> Lowered:
        header: s.Header | None = None
        if self.root is not None:
            header = next((i for i in self.root.syntax.items if isinstance(i, s.Header)), None)
        kinds: dict[str, dict[str, Any]] = {
            k: {}
            for k in (
                "mcp_servers",
                "connections",
                "runtimes",
                "facts",
                "surfaces",
                "risk_tables",
                "skills",
                "agents",
                "workflows",
                "tests",
            )
        }
        for module in self.res.modules:
            for item in module.syntax.items:
                self.declare(module, item, kinds)
        # needs every tool: wire names are unique across the build
        self.check_wire_names()
        # needs every policy lowered: includes expand in place
        policies = {name: self.expand(name, []) for name in self.policy_parts}
        for module in self.res.modules:
            for item in module.syntax.items:
                if isinstance(item, s.Surface):
                    built = self.surface_of(module, item)
                    if built is not None:
                        kinds["surfaces"][built.name] = built
        meta = self.header(header)
        if has_errors(self.diagnostics):
            return Lowered(None, self.diagnostics)
        root_name = self.names[self.root.key] if self.root is not None else ""

        def build() -> m.Spec:
            return m.Spec(
                name=header.name.text if header is not None else root_name,
                root_module=root_name,
                version=meta.get("version"),
                summary=meta.get("summary"),
                tools=dict(sorted(self.tools.items())),
                policies=dict(sorted(policies.items())),
                **{k: dict(sorted(v.items())) for k, v in kinds.items()},
            )

        spec = self.guarded(header or s.Header(s.Name(root_name), ()), build)
        return Lowered(spec if not has_errors(self.diagnostics) else None, self.diagnostics)

    def header(self, header: s.Header | None) -> dict[str, str | None]:
        if header is None:
            return {}
        attrs = self.unique_attrs(header.items, ("version", "summary", "description"), "a header")
        return {k: self.text(v) for k, v in attrs.items()}

    def declare(self, module: Module, item: object, kinds: dict[str, dict[str, Any]]) -> None:
        mod = self.names[module.key]
        if isinstance(item, s.Connection):
            kinds["connections"][item.name.text] = m.Connection(
                name=item.name.text,
                description=item.description.value if item.description else None,
                origin=origin(item.span),
            )
        elif isinstance(item, s.Runtime):
            kinds["runtimes"][item.name.text] = m.Runtime(
                name=item.name.text,
                description=item.description.value if item.description else None,
                origin=origin(item.span),
            )
        elif isinstance(item, s.Fact):
            fact = item
            kinds["facts"][fact.name.text] = self.guarded(
                fact,
                lambda: m.Fact(
                    name=fact.name.text,
                    type=self.type(fact.type),
                    description=fact.description.value if fact.description else None,
                    origin=origin(fact.span),
                ),
            )
        elif isinstance(item, s.Tool):
            self.add_tool(module, item, item.name.text, None, None)
        elif isinstance(item, s.Mcp):
            server = self.guarded(item, lambda: self.mcp(module, item))
            if server is not None:
                kinds["mcp_servers"][server.id] = server
        elif isinstance(item, s.Skill):
            skill = self.guarded(item, lambda: self.skill(module, item))
            if skill is not None:
                kinds["skills"][skill.name] = skill
        elif isinstance(item, s.Policy):
            self.guarded(item, lambda: self.policy(module, item))
        elif isinstance(item, s.RiskTable):
            table = self.guarded(item, lambda: self.risk_table(module, item))
            if table is not None:
                kinds["risk_tables"][table.name] = table
        elif isinstance(item, s.Agent):
            agent = self.guarded(item, lambda: self.agent(module, item))
            if agent is not None:
                kinds["agents"][agent.name] = agent
        elif isinstance(item, s.Workflow):
            workflow = self.guarded(item, lambda: self.workflow(module, item))
            if workflow is not None:
                kinds["workflows"][workflow.name] = workflow
        elif isinstance(item, s.Test):
            test = self.guarded(item, lambda: self.test(module, item))
            if test is not None:
                kinds["tests"][f"{mod}.{item.name.value}"] = test

    # =========================================================================================
    # Tools

    def add_tool(
        self,
        module: Module,
        node: s.Tool,
        tool_id: str,
        mcp_server: str | None,
        skill: str | None,
    ) -> None:
        tool = self.guarded(node, lambda: self.tool(module, node, tool_id, mcp_server, skill))
        if tool is None:
            return
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
        kind = "mcp" if mcp_server else "private" if skill else "public"
        replaced_by = provided_by = None
        if kind_attrs:
            first = kind_attrs[0]
            kind = first.key
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
        requires = [i for i in node.items if isinstance(i, s.Requires)]
        for extra in requires[1:]:
            self.report(
                "H302",
                "`requires` is given twice",
                extra.span,
                "given again here",
                secondary=[(requires[0].span, "first given here")],
                help="join the two conditions with `and`",
            )
        operations: dict[str, m.Operation] = {}
        for item in node.items:
            if isinstance(item, s.Operation):
                operations[item.name.text] = self.operation(module, item)

        effects: tuple[str, ...]
        risk: str
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
        input_schema = schemas.get("input") or m.Schema()
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
        return m.Tool(
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
            operations=operations,
            module=self.names[module.key],
            origin=origin(node.name.span),
        )

    def operation(self, module: Module, node: s.Operation) -> m.Operation:
        where = f"operation `{node.name.text}`"
        for item in node.items:
            if isinstance(item, s.Attr) and item.key not in OPERATION_ATTRS:
                self.not_allowed(
                    item.key, item.span, "an operation", help="declare it on the tool instead"
                )
            elif isinstance(item, s.Requires | s.Operation):
                key = "requires" if isinstance(item, s.Requires) else "operation"
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
        return m.Operation(
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
        op_field = m.Field(
            name="op",
            type=m.Type(name="enum", values=names),
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

    def effects(self, attr: s.Attr | None) -> tuple[str, ...]:
        found = set()
        for name in self.name_values(attr):
            word = self.word(name, m.EFFECTS, "effect")
            if word is not None:
                found.add(word)
        return tuple(sorted(found))

    def risk(self, attr: s.Attr | None, effects: Iterable[str]) -> str:
        """The declared level; by default `low` when nothing is written or sent (language.md §6)."""
        for name in self.name_values(attr):
            word = self.word(name, m.RISK_LEVELS, "risk level")
            if word is not None:
                return word
        return "medium" if PRIMARY_EFFECTS & set(effects) else "low"

    def timeout(self, attr: s.Attr | None) -> int | None:
        if attr is None:
            return None
        for value in attr.values:
            if isinstance(value, s.Duration):
                return self.positive_ms(value, "a timeout")
        return None

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
                out[item.key] = self.schema(item.schema)
        return out

    # =========================================================================================
    # Schemas

    def schema(self, node: s.Schema) -> m.Schema:
        return m.Schema(fields=self.fields(node.fields), origin=origin(node.span))

    def fields(self, nodes: Sequence[s.Field]) -> tuple[m.Field, ...]:
        seen: dict[str, s.Field] = {}
        out = []
        for node in nodes:
            first = seen.get(node.name.text)
            if first is not None:
                self.report(
                    "H305",
                    f"field `{node.name.text}` is declared twice",
                    node.name.span,
                    "declared again here",
                    secondary=[(first.name.span, "first declared here")],
                    help="rename or remove one of the two fields",
                )
                continue
            seen[node.name.text] = node
            out.append(self.field(node))
        return tuple(out)

    def type(self, node: s.TypeRef) -> m.Type:
        name = node.name
        if name in ("list", "map"):
            item = self.type(node.args[0]) if node.args else m.Type(name="string")
            return m.Type(name=name, item=item, optional=node.optional)
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
            return m.Type(name="enum", values=tuple(values), optional=node.optional)
        if name == "object":
            return m.Type(name="object", fields=self.fields(node.fields), optional=node.optional)
        if name in SCALAR_TYPES:
            return m.Type(name=name, optional=node.optional)  # type: ignore[arg-type]
        self.word(s.Name(name, span=self.type_name_span(node)), SCALAR_TYPES, "type")
        return m.Type(name="string", optional=node.optional)

    @staticmethod
    def type_name_span(node: s.TypeRef) -> Span:
        return Span(node.span.source, node.span.start, node.span.start + len(node.name))

    def field(self, node: s.Field) -> m.Field:
        type_ = self.type(node.type)
        seen: dict[str, s.Constraint] = {}
        for c in node.constraints:
            self.once(seen, c.kind, c, c.span)
        name = type_.name
        what = f"field `{node.name.text}`"
        bounds: dict[str, int | float] = {}
        for key in ("min", "max"):
            c = seen.get(key)
            if c is None or not isinstance(c.value, s.Int | s.Float):
                continue
            number = c.value.value
            if name in ("bool", "enum", "object", "duration"):
                self.report(
                    "H305",
                    f"`{key}` does not apply to {_article(name)} `{name}` field",
                    c.span,
                    f"on {what}",
                    help="`min` and `max` bound numbers, the length of strings and paths, and "
                    "the size of lists and maps",
                )
                continue
            if name not in ("int", "float") and (not isinstance(c.value, s.Int) or number < 0):
                self.report(
                    "H305",
                    f"`{key}` of {_article(name)} `{name}` field is a count, not `{c.value.text}`"
                    if isinstance(c.value, s.Float)
                    else f"`{key}` of {_article(name)} `{name}` field may not be negative",
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
        compiled: re.Pattern[str] | None = None
        pc = seen.get("pattern")
        if pc is not None and isinstance(pc.value, s.Str):
            if name not in ("string", "path", "url"):
                self.report(
                    "H305",
                    f"`pattern` does not apply to {_article(name)} `{name}` field",
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
        return m.Field(
            name=node.name.text,
            type=type_,
            min=bounds.get("min"),
            max=bounds.get("max"),
            pattern=pattern,
            default=default,
            secret="secret" in seen,
            origin=origin(node.name.span),
        )

    def regex(self, node: s.Str) -> re.Pattern[str] | None:
        try:
            # parsed apart from `re.compile`, whose cache would hide the warning the second time
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                sre.parse(node.value)
                compiled = re.compile(node.value)
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
        return compiled

    def default(
        self,
        node: s.Field,
        type_: m.Type,
        constraint: s.Constraint,
        bounds: dict[str, int | float],
        compiled: re.Pattern[str] | None,
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
        if type_.name in ("list", "map", "object"):
            return f"{_article(type_.name)} `{type_.name}`"
        return f"{_article(type_.name)} `{type_.name}`"

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

    # =========================================================================================
    # Conditions and values

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

    # =========================================================================================
    # Surfaces

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

    def surface_of(self, module: Module, node: s.Surface) -> m.Surface | None:
        return self.guarded(node, lambda: self.surface(module, node))

    def surface(self, module: Module, node: s.Surface) -> m.Surface:
        attrs = self.unique_attrs(node.items, ("limit", "summary"), "a surface")
        expose: list[m.Selector] = []
        hide: list[m.Selector] = []
        ranks = [i for i in node.items if isinstance(i, s.Rank)]
        for extra in ranks[1:]:
            self.once({"rank": ranks[0]}, "rank", extra, head_span(extra))
        for item in node.items:
            if isinstance(item, s.Expose):
                expose.extend(self.selector(p, module) for p in item.patterns)
            elif isinstance(item, s.Hide):
                hide.extend(self.selector(p, module) for p in item.patterns)
        limit = 20
        limit_node: s.Int | None = None
        if "limit" in attrs:
            limit_node = next((v for v in attrs["limit"].values if isinstance(v, s.Int)), None)
            if limit_node is not None:
                limit = self.at_least_one(limit_node, "a surface's `limit`")
        rank = m.Rank(top=max(60, limit))
        if ranks:
            rank = self.rank(ranks[0], limit, limit_node)
        return m.Surface(
            name=f"{self.names[module.key]}.{node.name.text}",
            summary=self.text(attrs.get("summary")),
            expose=tuple(expose),
            hide=tuple(hide),
            limit=limit,
            rank=rank,
            origin=origin(node.name.span),
        )

    def rank(self, node: s.Rank, limit: int, limit_node: s.Int | None) -> m.Rank:
        attrs = self.unique_attrs(node.items, ("recall", "rerank", "prefer"), "a `rank` block")
        recall = "embedding"
        top = max(60, limit)
        if "recall" in attrs:
            values = attrs["recall"].values
            for v in values:
                if isinstance(v, s.Name):
                    recall = self.word(v, RECALL_MODES, "recall mode") or recall
                elif isinstance(v, s.Int):
                    top = self.at_least_one(v, "`top`")
                    if top < limit:
                        self.report(
                            "H308",
                            f"recall `top {top}` is smaller than the surface's `limit {limit}`",
                            v.span,
                            "fewer candidates than the limit",
                            secondary=[(limit_node.span, "the limit")] if limit_node else [],
                            help=f"recall at least `top {limit}`, or lower the limit",
                        )
        rerank = "hybrid"
        for v in self.name_values(attrs.get("rerank")):
            rerank = self.word(v, RERANK_MODES, "rerank mode") or rerank
        prefer = tuple(
            w
            for w in (
                self.word(v, PREFER_WORDS, "preference")
                for v in self.name_values(attrs.get("prefer"))
            )
            if w is not None
        )
        return m.Rank(recall=recall, top=top, rerank=rerank, prefer=prefer)  # type: ignore[arg-type]

    # =========================================================================================
    # Policies and risk tables

    def options(
        self, options: Sequence[object] | None, effect: str, where: str, effect_span: Span
    ) -> dict[str, Any]:
        """Approvers, grant, self_approval, reason and instead of a rule, a default or a
        risk-table entry."""
        approvers: list[m.Approver] = []
        grant: m.Grant | None = None
        seen: dict[str, Any] = {}
        for option in options or ():
            asking = isinstance(option, s.Approver | s.Grant) or (
                isinstance(option, s.Attr) and option.key == "self_approval"
            )
            if asking and effect != "ask" and isinstance(option, s.Approver | s.Grant | s.Attr):
                key = (
                    "approver"
                    if isinstance(option, s.Approver)
                    else "grant"
                    if isinstance(option, s.Grant)
                    else "self_approval"
                )
                what = {"approver": "approvers", "grant": "grants"}.get(key, "a `self_approval`")
                self.report(
                    "H309",
                    f"`{key}` on {_article(effect)} `{effect}` {where}",
                    option.span,
                    f"only an `ask` has {what}",
                    secondary=[(effect_span, f"this {where} is `{effect}`")],
                    help=f"make the {where} `ask`, or remove the `{key}`",
                )
                continue
            if isinstance(option, s.Approver):
                approvers.append(m.Approver(kind=option.kind, value=option.value.value))  # type: ignore[arg-type]
            elif isinstance(option, s.Grant):
                if self.once(seen, "grant", option, option.span):
                    grant = self.grant(option)
            elif isinstance(option, s.Attr):
                self.once(seen, option.key, option, option.span)
        self_approval = None
        chosen = seen.get("self_approval")
        if chosen is not None and chosen.values and isinstance(chosen.values[0], s.Name):
            self_approval = self.word(chosen.values[0], SELF_APPROVAL, "`self_approval` choice")
        return {
            "approvers": tuple(approvers),
            "grant": grant,
            "reason": self.text(seen.get("reason")),
            "instead": self.text(seen.get("instead")),
            "self_approval": self_approval,
        }

    def grant(self, node: s.Grant) -> m.Grant:
        ttl = self.positive_ms(node.ttl, "a grant's `ttl`")
        module = self.current
        return m.Grant(
            scope=node.scope,  # type: ignore[arg-type]
            ttl_ms=ttl,
            selector=self.selector(node.selector, module) if node.selector else None,
            condition=self.cond(node.when, module) if node.when is not None else None,
        )

    def policy(self, module: Module, node: s.Policy) -> None:
        self.current = module
        qualified = f"{self.names[module.key]}.{node.name.text}"
        attrs = self.unique_attrs(node.items, ("summary",), "a policy")
        default: m.DefaultDecision | None = None
        first_default: s.Default | None = None
        parts: list[m.Rule | tuple[str, Span]] = []
        includes: list[str] = []
        position = 0
        for item in node.items:
            if isinstance(item, s.Default):
                if first_default is not None:
                    self.once({"default": first_default}, "default", item, item.span)
                    continue
                first_default = item
                default = self.default_decision(module, item)
            elif isinstance(item, s.Include):
                target = self.ref(item.policy, module)
                includes.append(target)
                parts.append((target, item.span))
            elif isinstance(item, s.Rule):
                position += 1
                parts.append(self.rule(module, node, item, position, qualified))
        shell = m.Policy(
            name=qualified,
            summary=self.text(attrs.get("summary")),
            default=default,
            includes=tuple(includes),
            origin=origin(node.name.span),
        )
        self.policy_parts[qualified] = (node, shell, parts)

    def default_decision(self, module: Module, node: s.Default) -> m.DefaultDecision:
        span = head_span(node)
        if node.table is not None:
            opts = self.options(node.options, "table", "default", span)
            return m.DefaultDecision(
                table=self.ref(node.table, module), origin=origin(node.span), **opts
            )
        effect = node.effect or "deny"
        opts = self.options(node.options, effect, "default", span)
        return m.DefaultDecision(effect=effect, origin=origin(node.span), **opts)  # type: ignore[arg-type]

    def rule(
        self, module: Module, policy: s.Policy, node: s.Rule, position: int, qualified: str
    ) -> m.Rule:
        label = (
            f"{policy.name.text}.{node.label.text}"
            if node.label is not None
            else f"{policy.name.text}#{position}"
        )
        selectors: list[m.Selector] = []
        for sel in node.selectors:
            if isinstance(sel, s.Pattern):
                selectors.append(self.selector(sel, module))
            elif isinstance(sel, s.RiskSelector):
                level = self.word(sel.level, m.RISK_LEVELS, "risk level") or sel.level.text
                selectors.append(
                    m.Selector(kind="risk", op=sel.op, value=level, text=sel.span.text)
                )
            else:
                effect = self.word(sel.effect, m.EFFECTS, "effect") or sel.effect.text
                selectors.append(m.Selector(kind="effects", value=effect, text=sel.span.text))
        opts = self.options(node.options, node.effect, "rule", node.effect_span)
        return m.Rule(
            label=label,
            policy=qualified,
            effect=node.effect,  # type: ignore[arg-type]
            selectors=tuple(selectors),
            condition=self.cond(node.when, module) if node.when is not None else None,
            origin=origin(node.span),
            **opts,
        )

    def expand(self, name: str, stack: list[str]) -> m.Policy:
        _, shell, parts = self.policy_parts[name]
        rules: list[m.Rule] = []
        stack = [*stack, name]
        for part in parts:
            if isinstance(part, m.Rule):
                rules.append(part)
                continue
            target, span = part
            if target in stack:
                cycle = [*stack[stack.index(target) :], target]
                if frozenset(cycle) in self.cycles:
                    continue
                self.cycles.add(frozenset(cycle))
                root = f"{self.names[self.root.key]}." if self.root is not None else "\0"
                cycle = [n.removeprefix(root) for n in cycle]
                self.report(
                    "H311",
                    f"include cycle `{' → '.join(cycle)}`",
                    span,
                    "this include closes the cycle",
                    help="move the shared rules into a policy that both include",
                )
                continue
            if target in self.policy_parts:
                rules.extend(self.expand(target, stack).rules)
        return shell.model_copy(update={"rules": tuple(rules)})

    def risk_table(self, module: Module, node: s.RiskTable) -> m.RiskTable:
        self.current = module
        entries: dict[str, m.RiskEntry] = {}
        seen: dict[str, s.RiskEntry] = {}
        unknown = False
        for entry in node.entries:
            level = self.word(entry.level, m.RISK_LEVELS, "risk level")
            if level is None:
                unknown = True
                continue
            first = seen.get(level)
            if first is not None:
                self.report(
                    "H302",
                    f"risk level `{level}` is given twice",
                    entry.level.span,
                    "given again here",
                    secondary=[(first.level.span, "first given here")],
                    help="keep one entry per level",
                )
                continue
            seen[level] = entry
            span = head_span(entry)
            opts = self.options(entry.options, entry.effect, "entry", span)
            entries[level] = m.RiskEntry(
                effect=entry.effect,  # type: ignore[arg-type]
                origin=origin(entry.span),
                **opts,
            )
        absent = [lvl for lvl in m.RISK_LEVELS if lvl not in entries]
        if absent and not unknown:
            shown = ", ".join(f"`{a}`" for a in absent)
            self.missing(
                f"entry for {shown}",
                node,
                f"risk table `{node.name.text}`",
                help="map every level `low medium high critical` to an effect",
            )
        return m.RiskTable(
            name=f"{self.names[module.key]}.{node.name.text}",
            entries=dict(sorted(entries.items(), key=lambda kv: m.risk_rank(kv[0]))),
            origin=origin(node.name.span),
        )

    # =========================================================================================
    # MCP servers, skills, agents

    def mcp(self, module: Module, node: s.Mcp) -> m.McpServer:
        attrs = self.unique_attrs(node.items, ("transport", "summary"), "an MCP server")
        transport = "stdio"
        command = None
        if "transport" in attrs:
            for v in attrs["transport"].values:
                if isinstance(v, s.Name):
                    transport = self.word(v, TRANSPORTS, "transport") or transport
                elif isinstance(v, s.Str):
                    command = v.value
        else:
            self.missing(
                "`transport`",
                node,
                f"MCP server `{node.name.text}`",
                help='write `transport stdio "command"` or `transport http "https://…"`',
            )
        ids = []
        for child in node.items:
            if isinstance(child, s.Tool):
                tool_id = f"mcp:{node.name.text}:tool:{child.name.text}"
                ids.append(tool_id)
                self.add_tool(module, child, tool_id, node.name.text, None)
        return m.McpServer(
            id=node.name.text,
            transport=transport,  # type: ignore[arg-type]
            command=command,
            summary=self.text(attrs.get("summary")),
            tools=tuple(ids),
            origin=origin(node.name.span),
        )

    def skill(self, module: Module, node: s.Skill) -> m.Skill:
        qualified = f"{self.names[module.key]}.{node.name.text}"
        attrs = self.unique_attrs(node.items, ("profile", "summary", "use_when"), "a skill")
        private: list[str] = []
        subagents: dict[str, m.Subagent] = {}
        for child in node.items:
            if isinstance(child, s.PrivateTool):
                tool_id = child.tool.name.text
                private.append(tool_id)
                self.add_tool(module, child.tool, tool_id, None, qualified)
            elif isinstance(child, s.Subagent):
                sub = self.unique_attrs(child.items, ("tools", "persona", "summary"), "a subagent")
                subagents[child.name.text] = m.Subagent(
                    name=child.name.text,
                    tools=tuple(self.ref(n, module) for n in self.name_values(sub.get("tools"))),
                    persona=self.text(sub.get("persona")),
                    summary=self.text(sub.get("summary")),
                    origin=origin(child.name.span),
                )
        profile = self.name_values(attrs.get("profile"))
        return m.Skill(
            name=qualified,
            summary=self.text(attrs.get("summary")),
            use_when=self.text(attrs.get("use_when")),
            profile=self.ref(profile[0], module) if profile else None,
            private_tools=tuple(private),
            subagents=subagents,
            origin=origin(node.name.span),
        )

    def agent(self, module: Module, node: s.Agent) -> m.Agent:
        attrs = self.unique_attrs(
            node.items,
            ("persona", "summary", "surface", "policy", "delegate", "skills"),
            "an agent",
        )

        def one(key: str) -> str | None:
            names = self.name_values(attrs.get(key))
            return self.ref(names[0], module) if names else None

        return m.Agent(
            name=f"{self.names[module.key]}.{node.name.text}",
            persona=self.text(attrs.get("persona")),
            summary=self.text(attrs.get("summary")),
            surface=one("surface"),
            policy=one("policy"),
            delegates=tuple(self.ref(n, module) for n in self.name_values(attrs.get("delegate"))),
            skills=tuple(self.ref(n, module) for n in self.name_values(attrs.get("skills"))),
            origin=origin(node.name.span),
        )

    # =========================================================================================
    # Workflows

    def workflow(self, module: Module, node: s.Workflow) -> m.Workflow:
        attrs = self.unique_attrs(node.items, ("agent", "policy", "summary"), "a workflow")
        schemas = self.schema_attrs(node.items, ("input",), "a workflow")
        steps = [self.step(module, i) for i in node.items if isinstance(i, s.Step)]

        def one(key: str) -> str | None:
            names = self.name_values(attrs.get(key))
            return self.ref(names[0], module) if names else None

        return m.Workflow(
            name=f"{self.names[module.key]}.{node.name.text}",
            summary=self.text(attrs.get("summary")),
            agent=one("agent"),
            policy=one("policy"),
            input=schemas.get("input"),
            steps=tuple(steps),
            origin=origin(node.name.span),
        )

    STEP_OPTIONS = {  # noqa: RUF012 - a constant table
        "call": {"timeout", "on_failure"},
        "delegate": {"timeout", "on_failure", "context", "output"},
        "decide": {"timeout", "options", "by"},
        "gate": {"timeout", "on_failure"},
    }

    def step(self, module: Module, node: s.Step) -> m.Step:
        action = node.action
        kind = {
            s.CallAction: "call",
            s.DelegateAction: "delegate",
            s.DecideAction: "decide",
            s.GateAction: "gate",
        }[type(action)]
        allowed = self.STEP_OPTIONS[kind]
        seen: dict[str, Any] = {}
        values: dict[str, Any] = {}
        for option in node.options or ():
            key = {
                s.By: "by",
                s.Timeout: "timeout",
                s.Context: "context",
                s.OnFailure: "on_failure",
            }.get(type(option))
            if key is None:
                key = option.key  # type: ignore[union-attr]
            span = head_span(option) if not isinstance(option, s.Attr) else option.span
            if key not in allowed:
                self.not_allowed(
                    key,
                    span,
                    f"{_article(kind)} `{kind}` step",
                    help={
                        "options": "only a `decide` step has options",
                        "by": "only a `decide` step waits for a person",
                        "context": "only a `delegate` step passes context",
                        "output": "only a `delegate` step declares an output; a call's is its "
                        "tool's",
                        "on_failure": "a `decide` step ends with its timeout's default",
                    }.get(key),
                )
                continue
            if self.once(seen, key, option, span):
                values[key] = option
        refs: set[str] = set(n.text for n in node.after)
        data: dict[str, Any] = {"name": node.name.text, "kind": kind}
        if isinstance(action, s.CallAction):
            data["tool"] = self.ref(action.tool, module)
            args: dict[str, m.Value] = {}
            first_args: dict[str, s.Arg] = {}
            for arg in action.args:
                if self.once(first_args, arg.name.text, arg, arg.name.span):
                    args[arg.name.text] = self.value(arg.value, module)
            data["args"] = args
        elif isinstance(action, s.DelegateAction):
            data["agent"] = self.ref(action.agent, module)
            data["goal"] = action.goal.value
        elif isinstance(action, s.DecideAction):
            data["question"] = action.question.value
        else:
            data["condition"] = self.cond(action.cond, module)
        if node.when is not None:
            data["when"] = self.cond(node.when, module)
        if "context" in values:
            data["context"] = tuple(self.value(v, module) for v in values["context"].values)
        if "output" in values:
            data["output"] = self.schema(values["output"].schema)
        if kind == "decide":
            self.decide(node, values, data)
        elif "timeout" in values:
            timeout: s.Timeout = values["timeout"]
            data["timeout_ms"] = self.positive_ms(timeout.duration, "a timeout")
            if timeout.default is not None:
                self.not_allowed(
                    "default",
                    timeout.default.span,
                    f"{_article(kind)} `{kind}` step",
                    help="only a `decide` step has a default option",
                )
        if "on_failure" in values:
            data["on_failure"] = tuple(self.failure(a) for a in values["on_failure"].actions)
        for value in (*data.get("args", {}).values(), *data.get("context", ())):
            refs |= _steps_read(value)
        for key in ("when", "condition"):
            if data.get(key) is not None:
                refs |= _steps_read(data[key])
        return m.Step(
            **data,
            after=tuple(n.text for n in node.after),
            depends_on=tuple(sorted(refs)),
            compensation=node.compensation,
            origin=origin(node.name.span),
        )

    def decide(self, node: s.Step, values: dict[str, Any], data: dict[str, Any]) -> None:
        where = f"decide step `{node.name.text}`"
        options: list[str] = []
        if "options" not in values:
            self.missing("`options`", node, where, help="write `options approve, reject`")
        else:
            firsts: dict[str, s.Name] = {}
            for name in self.name_values(values["options"]):
                if name.text in firsts:
                    self.report(
                        "H308",
                        f"option `{name.text}` is listed twice",
                        name.span,
                        "listed again here",
                        secondary=[(firsts[name.text].span, "first listed here")],
                        help="remove the second one",
                    )
                    continue
                firsts[name.text] = name
                options.append(name.text)
        data["options"] = tuple(options)
        if "by" in values:
            by: s.By = values["by"]
            data["by"] = m.Approver(kind=by.kind, value=by.value.value)  # type: ignore[arg-type]
        if "timeout" in values:
            timeout: s.Timeout = values["timeout"]
            data["timeout_ms"] = self.positive_ms(timeout.duration, "a timeout")
            if timeout.default is not None:
                if options and timeout.default.text not in options:
                    self.report(
                        "H308",
                        f"default `{timeout.default.text}` is not an option of this step",
                        timeout.default.span,
                        "not an option",
                        help=did_you_mean(timeout.default.text, options)
                        or f"choose one of {', '.join(f'`{o}`' for o in options)}",
                    )
                data["default"] = timeout.default.text

    def failure(self, node: s.FailureAction) -> m.FailureAction:
        if node.kind == "retry":
            count = self.at_least_one(node.count, "a retry count") if node.count else 1
            backoff = self.positive_ms(node.backoff, "a backoff") if node.backoff else None
            return m.FailureAction(kind="retry", count=count, backoff_ms=backoff)
        if node.kind == "compensate":
            return m.FailureAction(
                kind="compensate", step=node.target.text if node.target else None
            )
        approver = (
            m.Approver(kind=node.principal, value=node.who.value)  # type: ignore[arg-type]
            if node.who is not None and node.principal is not None
            else None
        )
        return m.FailureAction(kind="escalate", approver=approver)

    # =========================================================================================
    # Tests

    def test(self, module: Module, node: s.Test) -> m.SpecTest:
        attrs = self.unique_attrs(
            (i for i in node.items if isinstance(i, s.Attr)), ("policy", "agent"), "a test"
        )
        where = f'test "{node.name.value}"'
        data: dict[str, Any] = {"name": node.name.value}
        policy = self.name_values(attrs.get("policy"))
        if policy:
            data["policy"] = self.ref(policy[0], module)
        else:
            in_scope = self.res.scoped.get(module.key, {}).get("policy", {})
            if len(in_scope) == 1:
                data["policy"] = self.qualified(next(iter(in_scope.values())))
        agent = self.name_values(attrs.get("agent"))
        if agent:
            data["agent"] = self.ref(agent[0], module)
        seen: dict[str, Any] = {}
        for item in node.items:
            if isinstance(item, s.TestCall):
                if not self.once(seen, "call", item, head_span(item)):
                    continue
                data["tool"] = self.ref(item.tool, module)
                args: dict[str, Any] = {}
                for arg in item.args:
                    if self.once(args, arg.name.text, arg, arg.name.span):
                        args[arg.name.text] = arg
                data["args"] = {k: self.json_value(a.value) for k, a in args.items()}
            elif isinstance(item, s.TestRecord):
                if self.once(seen, item.key, item, item.span):
                    data[item.key] = self.json_value(item.record)
            elif isinstance(item, s.Expect) and self.once(seen, "expect", item, item.span):
                data["expect"] = self.expect(item)
        if "call" not in seen:
            self.missing("`call`", node, where, help="write the call to judge: `call TOOL(…)`")
        return m.SpecTest(**data, origin=origin(node.name.span))

    def expect(self, node: s.Expect) -> m.Expectation:
        approver: m.Approver | None = None
        seen: dict[str, Any] = {}
        data: dict[str, Any] = {}
        for detail in node.details:
            if isinstance(detail, s.Approver):
                if self.once(seen, "approver", detail, detail.span):
                    approver = m.Approver(kind=detail.kind, value=detail.value.value)  # type: ignore[arg-type]
            elif self.once(seen, detail.key, detail, detail.span):
                if detail.key == "rule":
                    names = self.name_values(detail)
                    data["rule"] = names[0].text if names else None
                else:
                    data[detail.key] = self.text(detail)
        return m.Expectation(effect=node.effect, approver=approver, **data)  # type: ignore[arg-type]

    # =========================================================================================
    # Wire names

    def check_wire_names(self) -> None:
        by_wire: dict[str, str] = {}
        for tool_id in sorted(self.tools, key=lambda i: self.tool_spans[i].start):
            wire = self.tools[tool_id].wire_name
            first = by_wire.get(wire)
            if first is None:
                by_wire[wire] = tool_id
                continue
            self.report(
                "H310",
                f"tools `{first}` and `{tool_id}` have the same wire name `{wire}`",
                self.tool_spans[tool_id],
                f"sent to the model as `{wire}`",
                secondary=[(self.tool_spans[first], f"`{first}` is sent as `{wire}` too")],
                help='give one of them another name with `wire_name "…"`',
            )

    current: Module


class _Wrong:
    def __repr__(self) -> str:
        return "<wrong>"


_WRONG: Any = _Wrong()


def _steps_read(value: object) -> set[str]:
    """The steps a value or condition reads."""
    found: set[str] = set()
    if isinstance(value, m.Path):
        if value.root == "step" and value.parts:
            found.add(value.parts[0])
    elif isinstance(value, m.Compare):
        found |= _steps_read(value.left) | _steps_read(value.right)
    elif isinstance(value, m.And | m.Or):
        for item in value.items:
            found |= _steps_read(item)
    elif isinstance(value, m.Not):
        found |= _steps_read(value.item)
    elif isinstance(value, m.ListValue):
        for item in value.items:
            found |= _steps_read(item)
    elif isinstance(value, m.RecordValue):
        for item in value.fields.values():
            found |= _steps_read(item)
    return found


def lower_program(resolution: Resolution) -> Lowered:
    """Stage lower: the model of a resolved build, or None with the diagnostics that say why."""
    return _Lowerer(resolution).run()
