"""Resolve names: load the module graph, build the symbol tables, bind every reference.

Three scopes (language.md §2). Global to a build: tool ids (MCP-projected and skill-private
ones included), MCP server ids, facts, connections, runtimes. Per module, written `module.name`
from another module: surfaces, policies, risk tables, agents, workflows, skills, tests. Local to
a block: steps, operations, subagents, rule labels. Each kind is its own namespace, so `tool
browser`, `connection browser` and `policy browser` live side by side (as in `std.browser`).

Every reference position expects exactly one kind of name, so an unknown name (H201) gets a
"did you mean" among names of that kind only, and a name of another kind gets H207. Work is a
dict lookup per reference; suggestions are computed only when an error is reported. Data labels
and the functions a condition may call (history terms among them) are resolved by
compiler/resolve_session.py, a mixin of the resolver.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from harnessc.dsl import syntax as s
from harnessc.dsl.diagnostics import Diagnostic
from harnessc.dsl.source import Span
from harnessc.dsl.suggest import did_you_mean

from .kinds import BUILTIN_ROOTS, GLOBAL_KINDS, KIND_WORDS, MODULE_KINDS
from .modules import (
    STD_PREFIX,
    ImportBinding,
    LoadedFileLike,
    LoadFile,
    Module,
    load_modules,
    std_module_names,
)
from .poison import Poison, poison_of
from .resolve_help import NameHelp, mcp_server_named, unknown_mcp_server
from .resolve_session import SessionNames
from .symbols import Scope, Symbol, tool_kind

__all__ = [
    "BUILTIN_ROOTS",
    "GLOBAL_KINDS",
    "MODULE_KINDS",
    "ImportBinding",
    "Module",
    "Resolution",
    "Symbol",
    "resolve_program",
]

RESULT_ROOT = "result"
# `input` is a root inside workflows; user facts may use none of these.
RESERVED_FACT_ROOTS = BUILTIN_ROOTS | {"input", RESULT_ROOT}
RESERVED_NAME = "delegate_task"
NOT_DECLARED = "not declared in this module or its imports"


@dataclass
class Resolution:
    """What later stages need to know about names; the only value resolve hands on."""

    modules: list[Module] = field(default_factory=list)
    """Every module of the build, each after the modules it imports (roots last). A module
    carries its path, display name, syntax tree, imports and bindings."""
    globals: dict[str, dict[str, Symbol]] = field(default_factory=dict)
    """kind → name → symbol, for GLOBAL_KINDS."""
    scoped: dict[str, dict[str, dict[str, Symbol]]] = field(default_factory=dict)
    """module key → kind → name → symbol, for MODULE_KINDS."""
    locals: dict[int, dict[str, Symbol]] = field(default_factory=dict)
    """id(block node) → name → symbol: the steps of a workflow, the operations of a tool (only
    tools that have some), the subagents of a skill, the rule labels of a policy."""
    references: dict[Span, Symbol] = field(default_factory=dict)
    """The span of each resolved reference → the symbol it names (a path's span → the fact or
    step it starts with)."""
    module_globs: dict[Span, Module] = field(default_factory=dict)
    """The span of each module glob (`std.workspace.*`, `scanner.*`) → the module it selects."""
    whole_results: set[Span] = field(default_factory=set)
    """The spans of `result` alone inside a history term: the whole result (`any x in
    result: …` over an `output list<…>`), not a bare name."""
    diagnostics: list[Diagnostic] = field(default_factory=list)
    poison: Poison = field(default_factory=Poison)
    """The names that declarations skipped after a syntax error would have declared."""
    unresolved: list[Span] = field(default_factory=list)
    """References left unbound without a report: they may name what a skipped declaration, or
    a module that failed to load, would have declared. The declarations holding them are set
    aside (compiler/quarantine.py)."""

    def tool(self, tool_id: str) -> Symbol | None:
        return self.globals.get("tool", {}).get(tool_id)

    def lookup(self, kind: str, name: str, module: Module | None = None) -> Symbol | None:
        """A global symbol by name, or a module-scoped one declared in `module`."""
        if kind in GLOBAL_KINDS:
            return self.globals.get(kind, {}).get(name)
        if module is None:
            return None
        return self.scoped.get(module.key, {}).get(kind, {}).get(name)

    def module_of(self, node: object) -> Module | None:
        for module in self.modules:
            if any(item is node for item in module.syntax.items):
                return module
        return None


# ---------------------------------------------------------------------------------------------
# Helpers


def _article(word: str) -> str:
    return "an" if word[0] in "aeioAEIO" or word.startswith("MCP") else "a"


def _overlap(a: Span, b: Span) -> bool:
    return a.source is b.source and a.start < b.end and b.start < a.end


def _names(values: Iterable[object]) -> Iterator[s.Name]:
    for value in values:
        if isinstance(value, s.Name):
            yield value


@dataclass
class _Usage:
    """What a module selects by glob or class, checked against its unused imports at the end."""

    glob_prefixes: list[str] = field(default_factory=list)
    packs: set[str] = field(default_factory=set)
    kinds: set[str] = field(default_factory=set)


def _closed(node: s.Quantified) -> bool:
    """Whether a quantifier is written in parentheses: its body ends at the `)` (a variable
    read after it is an unknown name, not a body cut short by `and`)."""
    text = node.span.source.text
    return text[node.span.end :].lstrip().startswith(")")


class _Resolver(SessionNames, NameHelp):
    def __init__(
        self, modules: list[Module], complete: bool, underlined: Sequence[Span] = ()
    ) -> None:
        self.modules = modules
        self.complete = complete
        self.underlined = underlined
        """The spans syntax errors underline: a name there is not reported again."""
        self.globals: dict[str, dict[str, Symbol]] = {k: {} for k in GLOBAL_KINDS}
        self.scoped: dict[str, dict[str, dict[str, Symbol]]] = {
            m.key: {k: {} for k in MODULE_KINDS} for m in modules
        }
        self.locals: dict[int, dict[str, Symbol]] = {}
        self.references: dict[Span, Symbol] = {}
        self.module_globs: dict[Span, Module] = {}
        self.whole_results: set[Span] = set()
        self.diagnostics: list[Diagnostic] = []
        self.poison = poison_of(((m.key, m.syntax) for m in modules), not complete)
        self.unresolved: list[Span] = []
        # per module: its tool ids (sorted at the end, for prefix tests), packs and tool kinds
        self.tool_ids: dict[str, list[str]] = {m.key: [] for m in modules}
        self.packs: dict[str, set[str]] = {m.key: set() for m in modules}
        self.kinds: dict[str, set[str]] = {m.key: set() for m in modules}
        self.usage: dict[str, _Usage] = {m.key: _Usage() for m in modules}
        self.imports_of: dict[str, dict[str, list[ImportBinding]]] = {}
        for m in modules:
            by_target: dict[str, list[ImportBinding]] = {}
            for binding in m.imports:
                if binding.target is not None:
                    by_target.setdefault(binding.target.key, []).append(binding)
            self.imports_of[m.key] = by_target
        # fact paths of at most this many segments are looked up (longest declared prefix)
        self.fact_depth = 1

    def report(self, diagnostic: Diagnostic) -> None:
        primary = diagnostic.primary
        if primary is not None and any(_overlap(primary.span, u) for u in self.underlined):
            # a malformed pattern, say: the syntax error explains it, and its declaration is
            # set aside with it
            self.unresolved.append(primary.span)
            return
        self.diagnostics.append(diagnostic)

    # =========================================================================================
    # Declarations

    def declare_all(self) -> None:
        for module in self.modules:
            for item in module.syntax.items:
                self.declare(module, item)
        for ids in self.tool_ids.values():
            ids.sort()

    def declare(self, module: Module, item: object) -> None:
        if isinstance(item, s.Connection):
            self.declare_global(module, "connection", item.name.text, item.name.span, item)
        elif isinstance(item, s.Runtime):
            self.declare_global(module, "runtime", item.name.text, item.name.span, item)
        elif isinstance(item, s.Fact):
            self.declare_fact(module, item)
        elif isinstance(item, s.Label):
            self.declare_label(module, item)
        elif isinstance(item, s.Tool):
            self.declare_tool(module, item, item.name.text, None)
        elif isinstance(item, s.Mcp):
            self.declare_global(module, "mcp", item.name.text, item.name.span, item)
            self.kinds[module.key].add("mcp")
            for child in item.items:
                if isinstance(child, s.Tool):
                    tool_id = f"mcp:{item.name.text}:tool:{child.name.text}"
                    self.declare_tool(module, child, tool_id, item)
        elif isinstance(item, s.Skill):
            self.declare_scoped(module, "skill", item.name.text, item.name.span, item)
            subagents: dict[str, Symbol] = {}
            self.locals[id(item)] = subagents
            for part in item.items:
                if isinstance(part, s.PrivateTool):
                    self.declare_tool(module, part.tool, part.tool.name.text, item)
                elif isinstance(part, s.Subagent):
                    self.declare_local(module, subagents, "subagent", part.name, part, item)
        elif isinstance(item, s.Policy):
            self.declare_scoped(module, "policy", item.name.text, item.name.span, item)
            labels: dict[str, Symbol] = {}
            self.locals[id(item)] = labels
            for rule in item.items:
                if isinstance(rule, s.Rule) and rule.label is not None:
                    self.declare_local(module, labels, "rule", rule.label, rule, item)
        elif isinstance(item, s.Workflow):
            self.declare_scoped(module, "workflow", item.name.text, item.name.span, item)
            steps: dict[str, Symbol] = {}
            self.locals[id(item)] = steps
            for step in item.items:
                if isinstance(step, s.Step):
                    self.declare_local(module, steps, "step", step.name, step, item)
        elif isinstance(item, s.Surface):
            self.declare_scoped(module, "surface", item.name.text, item.name.span, item)
        elif isinstance(item, s.RiskTable):
            self.declare_scoped(module, "risk_table", item.name.text, item.name.span, item)
        elif isinstance(item, s.Agent):
            self.declare_scoped(module, "agent", item.name.text, item.name.span, item)
        elif isinstance(item, s.Test):
            self.declare_scoped(module, "test", item.name.value, item.name.span, item)

    def check_reserved(self, module: Module, kind: str, name: str, span: Span) -> None:
        word = KIND_WORDS[kind]
        if name == RESERVED_NAME:
            self.report(
                Diagnostic.make(
                    "H206",
                    f"`{RESERVED_NAME}` is reserved for the planner's delegation protocol",
                    span,
                    f"{word} named `{RESERVED_NAME}`",
                    help=f"give the {word} another name",
                )
            )
        elif name.startswith(STD_PREFIX) and not module.is_std:
            self.report(
                Diagnostic.make(
                    "H206",
                    "the `std.` prefix is reserved for the standard library",
                    span,
                    f"{word} in a module outside the standard library",
                    help=f"give the {word} a name outside `std.`",
                )
            )

    def duplicate(self, kind: str, name: str, span: Span, first: Symbol, where: str = "") -> None:
        word = KIND_WORDS[kind]
        shown = name if kind != "test" else name.replace("`", "'")
        self.report(
            Diagnostic.make(
                "H202",
                f"{word} `{shown}` is declared twice{where}",
                span,
                "declared again here",
                secondary=[(first.span, "first defined here")],
                help=f"rename or remove one of the two {word}s"
                if kind != "test"
                else "give the tests different names",
            )
        )

    def declare_global(
        self,
        module: Module,
        kind: str,
        name: str,
        span: Span,
        node: object,
        parent: object | None = None,
    ) -> Symbol | None:
        self.check_reserved(module, kind, name, span)
        table = self.globals[kind]
        first = table.get(name)
        if first is not None:
            where = "" if first.module is module else " in this build"
            self.duplicate(kind, name, span, first, where)
            return None
        symbol = Symbol(kind, name, node, module, span, parent)
        table[name] = symbol
        return symbol

    def declare_fact(self, module: Module, fact: s.Fact) -> None:
        name = fact.name.text
        root = name.split(".", 1)[0]
        if root in RESERVED_FACT_ROOTS:
            self.report(
                Diagnostic.make(
                    "H206",
                    f"a fact may not start with the built-in root `{root}`",
                    fact.name.span,
                    f"`{root}` is built in",
                    help="give the fact a name of its own, such as `app."
                    f"{name.split('.', 1)[-1] if '.' in name else name}`",
                )
            )
            return
        if self.declare_global(module, "fact", name, fact.name.span, fact) is not None:
            self.fact_depth = max(self.fact_depth, name.count(".") + 1)

    def declare_tool(self, module: Module, tool: s.Tool, tool_id: str, parent: object) -> None:
        if isinstance(parent, s.Mcp):
            # the projected id is never `delegate_task`, but the tool's own name may be
            self.check_reserved(module, "tool", tool.name.text, tool.name.span)
        if self.declare_global(module, "tool", tool_id, tool.name.span, tool, parent) is None:
            return
        self.tool_ids[module.key].append(tool_id)
        self.kinds[module.key].add(tool_kind(tool, parent))
        operations: dict[str, Symbol] | None = None
        for item in tool.items:
            if isinstance(item, s.Attr) and item.key == "packs":
                self.packs[module.key].update(n.text for n in _names(item.values))
            elif isinstance(item, s.Operation):
                if operations is None:
                    operations = self.locals[id(tool)] = {}
                self.declare_local(module, operations, "operation", item.name, item, tool)

    def declare_scoped(
        self, module: Module, kind: str, name: str, span: Span, node: object
    ) -> None:
        if kind != "test":
            self.check_reserved(module, kind, name, span)
        table = self.scoped[module.key][kind]
        first = table.get(name)
        if first is not None:
            self.duplicate(kind, name, span, first)
            return
        table[name] = Symbol(kind, name, node, module, span)

    def declare_local(
        self,
        module: Module,
        table: dict[str, Symbol],
        kind: str,
        name: s.Name,
        node: object,
        parent: object,
    ) -> None:
        self.check_reserved(module, kind, name.text, name.span)
        first = table.get(name.text)
        if first is not None:
            owner = type(parent).__name__.lower()
            owner_name = getattr(getattr(parent, "name", None), "text", "")
            self.duplicate(kind, name.text, name.span, first, f" in {owner} `{owner_name}`")
            return
        table[name.text] = Symbol(kind, name.text, node, module, name.span, parent)

    # =========================================================================================
    # Looking names up

    def mark_used(self, module: Module, target: Module) -> None:
        if target is module:
            return
        for binding in self.imports_of[module.key].get(target.key, ()):
            binding.used = True

    def bind(self, module: Module, name: s.Name | s.Pattern, symbol: Symbol) -> None:
        self.references[name.span] = symbol
        self.mark_used(module, symbol.module)

    def find_scoped(
        self, module: Module, kind: str, text: str
    ) -> tuple[Symbol | None, Module | None, bool]:
        """Look a module-scoped name up: (symbol, module searched, whether the module is known)."""
        if "." not in text:
            return self.scoped[module.key][kind].get(text), module, True
        prefix, name = text.rsplit(".", 1)
        binding = module.bindings.get(prefix)
        if binding is None:
            return None, None, prefix in module.rebound
        target = binding.target
        if target is None:
            return None, None, True
        binding.used = True
        symbol = self.scoped[target.key][kind].get(name)
        if symbol is None and prefix in module.rebound:
            return None, None, True  # the other import of that name may have been meant
        return symbol, target, True

    def find_any(self, module: Module, text: str, skip: Iterable[str]) -> Symbol | None:
        """A declaration of another kind with this name, for H207."""
        skipped = set(skip)
        for kind in GLOBAL_KINDS:
            if kind not in skipped:
                symbol = self.globals[kind].get(text)
                if symbol is not None:
                    return symbol
        for kind in MODULE_KINDS:
            if kind not in skipped and kind != "test":
                symbol, _, _ = self.find_scoped(module, kind, text)
                if symbol is not None:
                    return symbol
        return None

    def resolve(self, module: Module, name: s.Name, *kinds: str) -> Symbol | None:
        """Resolve a reference that must name one of `kinds`; report H201 or H207 if it does not."""
        text = name.text
        known_module = True
        searched: Module | None = module
        for kind in kinds:
            if kind in GLOBAL_KINDS:
                symbol = self.globals[kind].get(text)
            else:
                symbol, searched, known_module = self.find_scoped(module, kind, text)
            if symbol is not None:
                self.bind(module, name, symbol)
                return symbol
        if text == RESERVED_NAME:
            self.report(
                Diagnostic.make(
                    "H206",
                    f"`{RESERVED_NAME}` is the planner's delegation protocol, not "
                    f"{_article(KIND_WORDS[kinds[0]])} {KIND_WORDS[kinds[0]]}",
                    name.span,
                    "reserved name",
                    help="a planner delegates through `delegate AGENT` in its agent block; "
                    "`delegate_task` is never on a surface or in a rule",
                )
            )
            return None
        if self.poisoned(module, kinds, text) or self.suppressed(kinds, known_module, searched):
            self.unresolved.append(name.span)
            return None
        server = mcp_server_named(text) if "tool" in kinds else None
        if server is not None and server not in self.globals["mcp"]:
            # the server is what is missing, as for an `mcp:SERVER:*` pattern
            if self.poison.covers_global("mcp", server):
                self.unresolved.append(name.span)
            else:
                self.report(unknown_mcp_server(server, name.span, self.globals["mcp"]))
            return None
        other = self.find_any(module, text, kinds)
        wanted = " or ".join(KIND_WORDS[k] for k in kinds)
        if other is not None:
            self.bind(module, name, other)
            word = KIND_WORDS[other.kind]
            self.report(
                Diagnostic.make(
                    "H207",
                    f"`{text}` is {_article(word)} {word}, not {_article(wanted)} {wanted}",
                    name.span,
                    f"expected {_article(wanted)} {wanted} here",
                    secondary=[(other.span, f"declared here as {_article(word)} {word}")],
                    help=self.kind_help(other, kinds),
                )
            )
            return None
        self.report(
            Diagnostic.make(
                "H201",
                f"unknown {wanted} `{text}`",
                name.span,
                NOT_DECLARED,
                help=self.unknown_help(module, text, kinds),
            )
        )
        return None

    def poisoned(self, module: Module, kinds: tuple[str, ...], text: str) -> bool:
        """True when a declaration skipped after a syntax error may have declared the name."""
        for kind in kinds:
            if kind in GLOBAL_KINDS:
                if self.poison.covers_global(kind, text):
                    return True
            elif "." in text:
                prefix, last = text.rsplit(".", 1)
                binding = module.bindings.get(prefix)
                target = binding.target if binding is not None else None
                if target is None and module.key in self.poison.everything:
                    return True  # qualified by an import that did not parse
                if target is not None and self.poison.covers_scoped(target.key, kind, last):
                    return True
            elif self.poison.covers_scoped(module.key, kind, text):
                return True
        return False

    def suppressed(
        self, kinds: tuple[str, ...], known_module: bool, searched: Module | None
    ) -> bool:
        """True when the name may be declared in a module that failed to load."""
        if any(k in GLOBAL_KINDS for k in kinds):
            return not self.complete
        if searched is None and known_module:
            return True  # qualified by an import whose module does not exist (H203)
        return searched is not None and searched.broken

    # =========================================================================================
    # References

    def resolve_all(self) -> None:
        for module in self.modules:
            for item in module.syntax.items:
                self.visit(module, item)
        self.check_unused()

    def visit(self, module: Module, item: object) -> None:
        scope = Scope(module)
        if isinstance(item, s.Tool):
            self.visit_tool(scope, item)
        elif isinstance(item, s.Extend):
            # the tools it extends are global, wherever declared: an imported catalogue's too
            for name in item.tools:
                self.resolve(module, name, "tool")
            self.visit_tool(scope, item)
        elif isinstance(item, s.Mcp):
            for child in item.items:
                if isinstance(child, s.Tool):
                    self.visit_tool(scope, child)
        elif isinstance(item, s.Skill):
            self.visit_skill(scope, item)
        elif isinstance(item, s.Surface):
            for part in item.items:
                if isinstance(part, s.Expose | s.Hide):
                    for pattern in part.patterns:
                        self.visit_pattern(scope, pattern)
        elif isinstance(item, s.Policy):
            self.visit_policy(scope, item)
        elif isinstance(item, s.RiskTable):
            for entry in item.entries:
                if isinstance(entry, s.RiskEntry):
                    self.visit_options(scope, entry.options)
        elif isinstance(item, s.Agent):
            self.visit_attrs(
                scope,
                item.items,
                {"surface": "surface", "policy": "policy", "delegate": "agent", "skills": "skill"},
            )
        elif isinstance(item, s.Workflow):
            self.visit_workflow(module, item)
        elif isinstance(item, s.Test):
            self.visit_test(scope, item)

    def visit_attrs(self, scope: Scope, items: Iterable[object], kinds: dict[str, str]) -> None:
        for attr in items:
            if isinstance(attr, s.Attr) and attr.key in kinds:
                for name in _names(attr.values):
                    self.resolve(scope.module, name, kinds[attr.key])

    def visit_tool(self, scope: Scope, tool: s.Tool | s.Operation | s.Extend) -> None:
        for item in tool.items:
            if isinstance(item, s.Attr):
                if item.key == "legacy":
                    for name in _names(item.values):
                        self.resolve(scope.module, name, "tool")
                elif item.key == "dynamic":
                    for name in _names(item.values):
                        self.resolve(scope.module, name, "runtime", "connection")
                elif item.key == "labels":
                    for name in _names(item.values):
                        self.resolve_label(scope.module, name)
            elif isinstance(item, s.Requires):
                self.visit_cond(scope, item.cond)
            elif isinstance(item, s.Operation):
                self.visit_tool(scope, item)
            elif isinstance(item, s.SchemaAttr):
                self.visit_field_labels(scope.module, item.schema.fields)
            elif isinstance(item, s.OnSuccess):
                self.resolve(scope.module, item.fact, "fact")
                value = item.value
                call = replace(scope, result=True)  # the call's own `args` and `result`
                if item.when is not None:
                    self.visit_cond(call, item.when)
                self.resolve_path(call, value.text, value.span, value)
                if item.key is not None:
                    self.resolve_path(call, item.key.text, item.key.span, item.key)
                if item.var is not None and item.item is not None:
                    each = self.bind_var(call, item)
                    self.resolve_path(each, item.item.text, item.item.span, item.item)

    def visit_skill(self, scope: Scope, skill: s.Skill) -> None:
        for item in skill.items:
            if isinstance(item, s.Attr) and item.key == "profile":
                for name in _names(item.values):
                    self.resolve(scope.module, name, "policy")
            elif isinstance(item, s.PrivateTool):
                self.visit_tool(scope, item.tool)
            elif isinstance(item, s.Subagent):
                self.visit_attrs(scope, item.items, {"tools": "tool"})

    def visit_policy(self, scope: Scope, policy: s.Policy) -> None:
        for item in policy.items:
            if isinstance(item, s.Rule):
                for selector in item.selectors:
                    if isinstance(selector, s.Pattern):
                        self.visit_pattern(scope, selector)
                if item.when is not None:
                    self.visit_cond(scope, item.when)
                self.visit_options(scope, item.options)
            elif isinstance(item, s.Default):
                if item.table is not None:
                    self.resolve(scope.module, item.table, "risk_table")
                self.visit_options(scope, item.options)
            elif isinstance(item, s.Include):
                self.resolve(scope.module, item.policy, "policy")

    def visit_options(self, scope: Scope, options: Iterable[object] | None) -> None:
        for option in options or ():
            if isinstance(option, s.Grant):
                if option.selector is not None:
                    self.visit_pattern(scope, option.selector)
                if option.when is not None:
                    self.visit_cond(scope, option.when)

    def visit_workflow(self, module: Module, workflow: s.Workflow) -> None:
        steps = self.locals[id(workflow)]
        scope = Scope(module, steps, workflow)
        self.visit_attrs(scope, workflow.items, {"agent": "agent", "policy": "policy"})
        for step in workflow.items:
            if not isinstance(step, s.Step):
                continue
            action = step.action
            if isinstance(action, s.CallAction):
                self.resolve(module, action.tool, "tool")
                for arg in action.args:
                    self.visit_value(scope, arg.value, lenient=True)
            elif isinstance(action, s.DelegateAction):
                self.resolve(module, action.agent, "agent")
            elif isinstance(action, s.GateAction):
                self.visit_cond(scope, action.cond)
            for name in step.after:
                self.resolve_step(scope, name)
            if step.when is not None:
                self.visit_cond(scope, step.when)
            for option in step.options or ():
                if isinstance(option, s.Context):
                    for value in option.values:
                        self.visit_value(scope, value)
                elif isinstance(option, s.OnFailure):
                    for failure in option.actions:
                        if failure.kind == "compensate" and failure.target is not None:
                            self.resolve_step(scope, failure.target)

    def resolve_step(self, scope: Scope, name: s.Name) -> None:
        assert scope.steps is not None and scope.workflow is not None
        symbol = scope.steps.get(name.text)
        if symbol is not None:
            self.references[name.span] = symbol
            return
        self.report(
            Diagnostic.make(
                "H201",
                f"unknown step `{name.text}`",
                name.span,
                f"not a step of workflow `{scope.workflow.name.text}`",
                help=did_you_mean(name.text, scope.steps),
            )
        )

    def visit_test(self, scope: Scope, test: s.Test) -> None:
        self.visit_attrs(scope, test.items, {"policy": "policy", "agent": "agent"})
        for item in test.items:
            if isinstance(item, s.TestCall | s.Earlier):
                self.resolve(scope.module, item.tool, "tool")
                for arg in item.args:
                    self.visit_value(scope, arg.value, lenient=True)
            elif isinstance(item, s.TestRecord) and item.key == "facts":
                for entry in item.record.entries:
                    key = entry.key.text
                    # a connection or runtime set to true is up: `connected(c)`, `running(r)`
                    if key in self.globals["connection"]:
                        self.resolve(scope.module, entry.key, "connection")
                    elif key in self.globals["runtime"]:
                        self.resolve(scope.module, entry.key, "runtime")
                    else:
                        self.resolve_path(scope, key, entry.key.span, entry.key)

    # -- selectors ---------------------------------------------------------------------------

    def visit_pattern(self, scope: Scope, pattern: s.Pattern) -> None:
        text = pattern.text
        module = scope.module
        usage = self.usage[module.key]
        if text.startswith("pack:"):
            usage.packs.add(text[5:])
            return
        if text.startswith("kind:"):
            usage.kinds.add(text[5:])
            return
        if "*" in text:
            prefix = text[: text.index("*")]
            if text.endswith(".*") and text.count("*") == 1:
                binding = module.bindings.get(text[:-2])
                if binding is not None:
                    binding.used = True
                    if binding.target is not None:
                        self.module_globs[pattern.span] = binding.target
                    return
                if prefix.startswith(STD_PREFIX) and text[:-2] in std_module_names():
                    if module.key in self.poison.everything:  # its import may not have parsed
                        self.unresolved.append(pattern.span)
                        return
                    self.report(
                        Diagnostic.make(
                            "H201",
                            f"unknown module `{text[:-2]}`",
                            pattern.span,
                            "not imported by this module",
                            help=f"add `import {text[:-2]}`",
                        )
                    )
                    return
            if prefix:
                usage.glob_prefixes.append(prefix)
            return
        self.resolve(module, s.Name(text, span=pattern.span), "tool")

    # -- conditions and values ---------------------------------------------------------------

    def visit_cond(self, scope: Scope, cond: object) -> None:
        if isinstance(cond, s.And | s.Or):
            word = "and" if isinstance(cond, s.And) else "or"
            inner = scope
            for item in cond.items:
                self.visit_cond(inner, item)
                while isinstance(item, s.Not):
                    item = item.item
                if isinstance(item, s.Quantified) and not _closed(item):
                    ended = {**inner.ended, item.var.text: (item, word)}
                    inner = replace(inner, ended=ended)
        elif isinstance(cond, s.Not):
            self.visit_cond(scope, cond.item)
        elif isinstance(cond, s.Provenance):
            self.visit_value(scope, cond.value)
            if cond.label is not None:
                self.resolve_label(scope.module, cond.label)
            if cond.call is not None and s.result_field(cond.call) is not None:
                self.visit_func(scope, s.history_of(cond.call))
        elif isinstance(cond, s.Quantified):
            self.visit_value(scope, cond.over)
            self.visit_cond(self.bind_var(scope, cond), cond.body)
        elif isinstance(cond, s.Compare):
            if cond.op == "has":
                # the right of `has` is a field or an element, not a path
                self.visit_value(scope, cond.left)
                return
            # A bare word on the right may be an enum member (`risk >= high`, `review ==
            # approve`); so may one on the left when the right is a value that resolved.
            right_ok = self.visit_value(scope, cond.right, lenient=True)
            self.visit_value(scope, cond.left, lenient=right_ok and isinstance(cond.right, s.Path))
        else:
            self.visit_value(scope, cond)

    def visit_value(self, scope: Scope, value: object, lenient: bool = False) -> bool:
        """Resolve the paths in a value; True when every path in it resolved."""
        if isinstance(value, s.Path):
            if lenient and "." not in value.text:
                return self.resolve_path(scope, value.text, value.span, value, quiet=True)
            return self.resolve_path(scope, value.text, value.span, value)
        if isinstance(value, s.FuncCall):
            self.visit_func(scope, value)
            return True
        if isinstance(value, s.Index):
            return self.visit_value(scope, value.of) & self.visit_value(scope, value.key)
        if isinstance(value, s.ListLit):
            return all([self.visit_value(scope, item, lenient) for item in value.items])
        if isinstance(value, s.Record):
            return all([self.visit_value(scope, e.value, lenient) for e in value.entries])
        return True

    def bind_var(self, scope: Scope, node: s.Quantified | s.OnSuccess) -> Scope:
        """The scope of a quantifier's body, or of an `on_success each`'s item: its variable
        bound (H210 when it shadows a name)."""
        var = node.var
        assert var is not None
        name = var.text
        shadowed: str | None = None
        if name in scope.vars:
            shadowed = "a variable of an enclosing quantifier"
        elif name in BUILTIN_ROOTS or name in ("input", RESULT_ROOT):
            shadowed = "a built-in root"
        elif scope.steps is not None and name in scope.steps:
            shadowed = "a step of this workflow"
        elif any(fact.split(".", 1)[0] == name for fact in self.globals["fact"]):
            shadowed = "a declared fact"
        if shadowed is not None:
            outer = scope.vars.get(name)
            self.report(
                Diagnostic.make(
                    "H210",
                    f"variable `{name}` shadows {shadowed}",
                    var.span,
                    "bound here",
                    secondary=[(outer.span, "first bound here")] if outer is not None else [],
                    help="give the variable a name of its own, such as `item`",
                )
            )
        symbol = Symbol("var", name, node, scope.module, var.span)
        return replace(scope, vars={**scope.vars, name: symbol})

    def resolve_path(
        self, scope: Scope, text: str, span: Span, node: object, quiet: bool = False
    ) -> bool:
        """A path starts with a built-in root, a declared fact, or in a workflow `input` or a
        step; facts have dotted names, so the longest declared fact that prefixes it wins."""
        first, _, _ = text.partition(".")
        var = scope.vars.get(first)
        if var is not None:
            self.references[span] = var
            return True
        if first in BUILTIN_ROOTS:
            return True
        if first == RESULT_ROOT and "." not in text and scope.result:
            self.whole_results.add(span)  # the whole result (`any x in result: …`)
            return True
        if first == RESULT_ROOT and "." in text:
            if not scope.result:
                self.report(
                    Diagnostic.make(
                        "H209",
                        f"`{text}` reads a result, but there is none here",
                        span,
                        "no result to read",
                        help=self.result_help(text),
                    )
                )
                return False
            return True
        if scope.steps is not None:
            if first == "input":
                return True
            step = scope.steps.get(first)
            if step is not None:
                self.references[span] = step
                return True
        facts = self.globals["fact"]
        parts = text.split(".")
        for count in range(min(len(parts), self.fact_depth), 0, -1):
            fact = facts.get(".".join(parts[:count]))
            if fact is not None:
                self.references[span] = fact
                self.mark_used(scope.module, fact.module)
                return True
        if quiet:
            return False
        if not self.complete or self.poison.covers_global("fact", text):
            self.unresolved.append(span)
            return False
        ended = scope.ended.get(first)
        if ended is not None:
            quantified, word = ended
            bound = f"{quantified.quantifier} {first} in …"
            self.report(
                Diagnostic.make(
                    "H201",
                    f"`{first}` is bound only in the body of `{bound}`, which ends at `{word}`",
                    span,
                    "not bound here",
                    secondary=[(quantified.var.span, "bound here, for one condition")],
                    help=f"a quantifier's body is one condition: put the whole body in "
                    f"parentheses, `{bound}: (… {word} …)`",
                )
            )
            return False
        in_workflow = scope.steps is not None
        self.report(
            Diagnostic.make(
                "H201",
                f"unknown fact or root `{text}`",
                span,
                "not a built-in root, `input`, a step or a declared fact"
                if in_workflow
                else "not a built-in root or a declared fact",
                help=self.path_help(parts, scope.vars, scope.steps),
            )
        )
        return False

    # -- unused imports ----------------------------------------------------------------------

    def check_unused(self) -> None:
        for module in self.modules:
            usage = self.usage[module.key]
            for binding in module.imports:
                target = binding.target
                if binding.used or target is None or target.broken:
                    continue
                if self.poison.covers_module(module.key) or self.poison.covers_module(target.key):
                    continue  # a declaration that did not parse may have used it
                if self.used_by_selectors(usage, target):
                    binding.used = True
                    continue
                self.report(
                    Diagnostic.make(
                        "H205",
                        f"unused import `{binding.node.target}`",
                        binding.node.span,
                        "nothing from this module is used",
                        help="remove the import, or reference a declaration of the module",
                    )
                )

    def used_by_selectors(self, usage: _Usage, target: Module) -> bool:
        if usage.packs & self.packs[target.key] or usage.kinds & self.kinds[target.key]:
            return True
        ids = self.tool_ids[target.key]
        for prefix in usage.glob_prefixes:
            index = bisect_left(ids, prefix)
            if index < len(ids) and ids[index].startswith(prefix):
                return True
        return False


def resolve_program(roots: Sequence[LoadedFileLike], load_file: LoadFile) -> Resolution:
    """Stage resolve: load what the roots import, declare every name, bind every reference."""
    graph = load_modules(roots, load_file)
    underlined = [
        d.primary.span
        for d in (*(d for root in roots for d in root.diagnostics), *graph.diagnostics)
        if d.primary is not None and d.code.startswith("H1")
    ]
    resolver = _Resolver(graph.modules, graph.complete, underlined)
    # a module with syntax errors takes part: its skipped declarations' names are poisoned
    resolver.declare_all()  # needs every module loaded: tool ids and facts are global
    resolver.resolve_all()  # needs every declaration
    return Resolution(
        modules=graph.modules,
        globals=resolver.globals,
        scoped=resolver.scoped,
        locals=resolver.locals,
        references=resolver.references,
        module_globs=resolver.module_globs,
        whole_results=resolver.whole_results,
        diagnostics=graph.diagnostics + resolver.diagnostics,
        poison=resolver.poison,
        unresolved=resolver.unresolved,
    )
