"""Load the module graph: every root, every module it imports (each once), in dependency order.

Reports what is wrong with the imports themselves: unknown modules (H203), cycles (H204),
two imports binding one name (H208), a header or an import out of place (H109, H112), and a file
import that leaves the project root (H009: never read, so nothing of it is shown).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Protocol

from harnessc.dsl import syntax as s
from harnessc.dsl.builder import too_many
from harnessc.dsl.diagnostics import Diagnostic, Label, clipped, os_reason
from harnessc.dsl.files import (
    MAX_EXPRESSION_NODES,
    MAX_RULES,
    inside,
    outside_root,
    project_root,
)
from harnessc.dsl.source import Source, Span
from harnessc.dsl.suggest import did_you_mean

STD_PACKAGE = "harnessc.stdlib"
STD_PREFIX = "std."


class LoadedFileLike(Protocol):
    """What `pipeline.load_file` returns (kept structural: resolve never imports the pipeline).
    Read-only, so the frozen `LoadedFile` satisfies it."""

    @property
    def path(self) -> Path: ...
    @property
    def source(self) -> Source | None: ...
    @property
    def module(self) -> s.Module | None: ...
    @property
    def diagnostics(self) -> tuple[Diagnostic, ...]: ...


LoadFile = Callable[[Path, str], LoadedFileLike]


@dataclass(eq=False)
class ImportBinding:
    """One `import` of a module: the name it binds and the module it loaded."""

    node: s.Import
    name: str | None
    """The bound name (`as` name, last segment of `std.x`, or the file stem)."""
    target: Module | None
    """None when the module does not exist (H203 was reported)."""
    used: bool = False


@dataclass(eq=False)
class Module:
    """One module of the build: a file read, parsed, and its imports bound."""

    key: str
    """The resolved real path: a file imported from several modules is loaded once."""
    path: Path
    name: str
    """As diagnostics show it: `std/risk.harness`, `examples/remediation/scanner.harness`."""
    source: Source | None
    syntax: s.Module
    module_path: str | None = None
    """`std.risk` for a standard-library module, None for a file."""
    is_root: bool = False
    broken: bool = False
    """The file could not be read; any name in it may be missing."""
    imports: list[ImportBinding] = field(default_factory=list)
    bindings: dict[str, ImportBinding] = field(default_factory=dict)
    """Every name under which this module may refer to an import: the bound name, and for
    a standard module also its full path (`risk` and `std.risk`)."""
    rebound: set[str] = field(default_factory=set)
    """Names that a second import tried to bind again (H208): references through them may
    have meant either module, so a miss is not reported again."""
    root: Path | None = None
    """The project root its file imports stay inside (`files.project_root`): a root module's
    own, an imported module's importer's, the standard library's folder for a `std.*` one."""

    @property
    def is_std(self) -> bool:
        return self.module_path is not None

    @property
    def imported(self) -> list[Module]:
        return [b.target for b in self.imports if b.target is not None]

    def __repr__(self) -> str:
        return f"Module({self.name!r})"


@dataclass
class ModuleGraph:
    modules: list[Module]
    """Every module, each after the modules it imports (roots last, in command-line order)."""
    diagnostics: list[Diagnostic]
    complete: bool
    """False when an import failed or a module could not be read."""


# ---------------------------------------------------------------------------------------------
# The standard library


def _std_root() -> Traversable:
    return resources.files(STD_PACKAGE)


@cache
def std_module_names() -> tuple[str, ...]:
    """Every `std.*` module shipped with harnessc, as written in an import."""
    names: list[str] = []

    def walk(folder: Traversable, prefix: str) -> None:
        for entry in folder.iterdir():
            if entry.is_dir() and not entry.name.startswith(("_", ".")):
                walk(entry, f"{prefix}{entry.name}.")
            elif entry.name.endswith(".harness"):
                names.append(f"{STD_PREFIX}{prefix}{entry.name[: -len('.harness')]}")

    walk(_std_root(), "")
    return tuple(sorted(names))


def std_display_name(module_path: str) -> str:
    return "std/" + module_path[len(STD_PREFIX) :].replace(".", "/") + ".harness"


def _std_file(module_path: str) -> Traversable:
    node = _std_root()
    parts = module_path[len(STD_PREFIX) :].split(".")
    for part in parts[:-1]:
        node = node.joinpath(part)
    return node.joinpath(parts[-1] + ".harness")


# ---------------------------------------------------------------------------------------------
# Loading


def head_span(item: object) -> Span:
    """The span of a declaration's head: from its keyword to the end of its name."""
    span: Span = item.span  # type: ignore[attr-defined]
    name = getattr(item, "name", None)
    name_span = getattr(name, "span", None)
    if isinstance(name_span, Span) and name_span.source is span.source:
        return Span(span.source, span.start, max(name_span.end, span.start))
    if isinstance(item, s.Import):
        return span
    line_end = span.source.text.find("\n", span.start)
    end = span.end if line_end == -1 else min(span.end, line_end)
    return Span(span.source, span.start, end)


class _Loader:
    def __init__(self, load_file: LoadFile) -> None:
        self.load_file = load_file
        self.by_key: dict[str, Module] = {}
        self.diagnostics: list[Diagnostic] = []
        self.complete = True
        self.rules = 0
        self.nodes = 0
        """The rules and expression nodes of the modules added so far (dsl/files.py's limits
        hold for a whole spec: each file's parse counts its own)."""
        self.over = False

    def report(self, diagnostic: Diagnostic) -> None:
        self.diagnostics.append(diagnostic)

    # -- creating modules ------------------------------------------------------------------

    def add(
        self,
        loaded: LoadedFileLike,
        *,
        is_root: bool,
        module_path: str | None,
        imported_at: Span | None = None,
        root: Path | None = None,
    ) -> Module:
        key = os.path.realpath(loaded.path)
        existing = self.by_key.get(key)
        if existing is not None:
            existing.is_root = existing.is_root or is_root
            return existing
        source = loaded.source
        syntax = loaded.module
        if syntax is None:
            empty = source or Source(str(loaded.path), "")
            syntax = s.Module((), span=Span(empty, 0, 0))
        # a file that parsed with errors is not broken: its skipped declarations are recorded
        # (`syntax.broken`) and only their names are missing
        broken = loaded.module is None
        name = source.path if source is not None else str(loaded.path)
        if self.over_limit(syntax, name, imported_at):
            # past a limit nothing more is checked: this module and every later one is set
            # aside whole, and the names they would have declared are never reported unknown
            everything = (s.Broken(None, None, span=syntax.span),)
            syntax = s.Module((), broken=everything, span=syntax.span)
        module = Module(key, Path(loaded.path), name, source, syntax, module_path, is_root, broken)
        if root is None:
            root = Path(key).parent if module_path is not None else project_root(loaded.path)
        module.root = root
        self.by_key[key] = module
        if broken:
            self.complete = False
        if not is_root:
            # a root's own read and parse diagnostics are reported by the pipeline
            self.diagnostics.extend(_anchored(d, imported_at) for d in loaded.diagnostics)
        return module

    def over_limit(self, syntax: s.Module, name: str, imported_at: Span | None) -> bool:
        """Whether the spec, with this module, has crossed a limit (reported once)."""
        if self.over:
            return True
        rules, nodes = syntax.sizes
        self.rules += rules
        self.nodes += nodes
        if self.rules <= MAX_RULES and self.nodes <= MAX_EXPRESSION_NODES:
            return False
        self.over = True
        self.complete = False
        code, what, total = (
            ("H010", "rules", self.rules)
            if self.rules > MAX_RULES
            else ("H011", "expression nodes", self.nodes)
        )
        limit = MAX_RULES if code == "H010" else MAX_EXPRESSION_NODES
        diagnostic = too_many(
            code,
            f"the spec has more than {limit:,} {what}: `{clipped(name)}` brings it to {total:,}",
            imported_at,
            f"brings the spec to {total:,} {what}",
        )
        self.report(replace(diagnostic, path=name) if imported_at is None else diagnostic)
        return True

    def load_std(self, module_path: str) -> Module:
        shown = std_display_name(module_path)
        with resources.as_file(_std_file(module_path)) as path:
            key = os.path.realpath(path)
            if key in self.by_key:
                return self.by_key[key]
            loaded = self.load_file(path, shown)
            return self.add(loaded, is_root=False, module_path=module_path)

    def load_path(self, path: Path, shown: str, imported_at: Span, root: Path | None) -> Module:
        key = os.path.realpath(path)
        if key in self.by_key:
            return self.by_key[key]
        loaded = self.load_file(path, shown)
        return self.add(loaded, is_root=False, module_path=None, imported_at=imported_at, root=root)

    # -- one module's imports --------------------------------------------------------------

    def prepare(self, module: Module) -> None:
        """Check the order of header, imports and declarations, and bind every import."""
        first_header: s.Header | None = None
        first_other: object | None = None
        first_declaration: object | None = None
        for item in module.syntax.items:
            if isinstance(item, s.Header):
                self.check_header(module, item, first_header, first_other)
                first_header = first_header or item
                first_other = first_other or item
                continue
            first_other = first_other or item
            if isinstance(item, s.Import):
                if first_declaration is not None:
                    self.report(
                        Diagnostic.make(
                            "H109",
                            "imports must come before declarations",
                            item.span,
                            "import after a declaration",
                            secondary=[(head_span(first_declaration), "first declaration here")],
                            help="move the import up, under the header",
                        )
                    )
                self.bind(module, item)
            else:
                first_declaration = first_declaration or item

    def check_header(
        self,
        module: Module,
        header: s.Header,
        first_header: s.Header | None,
        first_other: object | None,
    ) -> None:
        span = head_span(header)
        if first_header is not None:
            self.report(
                Diagnostic.make(
                    "H112",
                    "a module has at most one `harness` header",
                    span,
                    "second header",
                    secondary=[(head_span(first_header), "first header here")],
                    help="merge the two headers into one",
                )
            )
        elif not module.is_root:
            self.report(
                Diagnostic.make(
                    "H109",
                    "only the root module may have a `harness` header",
                    span,
                    "header in an imported module",
                    help="remove the header, or check this file on its own",
                )
            )
        elif first_other is not None:
            self.report(
                Diagnostic.make(
                    "H109",
                    "the `harness` header must come first in the module",
                    span,
                    "header after other items",
                    secondary=[(head_span(first_other), "first item here")],
                    help="move the header to the top of the file",
                )
            )

    def bind(self, module: Module, node: s.Import) -> None:
        target = self.resolve_import(module, node)
        if target is None:
            self.complete = False
        name: str | None
        if node.alias is not None:
            name = node.alias.text
        elif node.is_file:
            name = Path(node.target).stem
        else:
            name = node.target.rsplit(".", 1)[-1]
        binding = ImportBinding(node, name, target)
        module.imports.append(binding)
        name_span = node.alias.span if node.alias is not None else node.target_span
        if name == "std":
            binding.used = True
            module.rebound.add(name)
            self.report(
                Diagnostic.make(
                    "H206",
                    "the name `std` is reserved for the standard library",
                    name_span,
                    "binds `std`",
                    help="give the import another name with `as`",
                )
            )
            return
        first = module.bindings.get(name)
        if first is not None:
            binding.used = True  # H208 says enough about this import
            module.rebound.add(name)
            self.report(
                Diagnostic.make(
                    "H208",
                    f"two imports bind the name `{name}`",
                    name_span,
                    f"binds `{name}` again",
                    secondary=[(first.node.span, "first bound here")],
                    help="give one of them another name with `as`",
                )
            )
            return
        module.bindings[name] = binding
        if not node.is_file and target is not None:
            module.bindings.setdefault(node.target, binding)

    def resolve_import(self, module: Module, node: s.Import) -> Module | None:
        if self.over:  # the spec is refused already: nothing more is read
            return None
        if node.is_file:
            return self.resolve_file_import(module, node)
        target = node.target
        known = std_module_names()
        if target in known:
            return self.load_std(target)
        help_line: str | None
        if not target.startswith(STD_PREFIX):
            guess = STD_PREFIX + target
            help_line = (
                f"did you mean `{guess}`?"
                if guess in known
                else 'import a standard module as `std.NAME`, a file as `"./file.harness"`'
            )
            label = "not a standard module or a file"
        else:
            help_line = did_you_mean(target, known)
            label = "no such module in the standard library"
        self.report(
            Diagnostic.make(
                "H203",
                f"unknown module `{clipped(target)}`",
                node.target_span,
                label,
                notes=[f"the standard library has {', '.join(f'`{n}`' for n in known)}"]
                if not help_line
                else [],
                help=help_line,
            )
        )
        return None

    def resolve_file_import(self, module: Module, node: s.Import) -> Module | None:
        folder = module.path.parent
        shown = os.path.normpath(os.path.join(os.path.dirname(module.name), node.target))
        if "\x00" in node.target:
            self.unusable(node, "an import path cannot contain a NUL character")
            return None
        path = folder / node.target
        # INVARIANT: before anything looks at the file, so nothing outside the project is read,
        # nor is whether it exists told
        if module.root is not None and not inside(path, module.root):
            self.complete = False
            self.report(outside_root(shown, module.root, node.target_span, "outside the project"))
            return None
        try:
            # a path the file system refuses (too long, a file used as a folder, no permission
            # to look) is the spec's problem, reported at the import like a missing file
            is_file, exists, is_dir = path.is_file(), path.exists(), path.is_dir()
        except OSError as error:
            self.unusable(node, f"cannot open `{clipped(shown)}`: {os_reason(error)}")
            return None
        if is_file:
            return self.load_path(path, shown, node.target_span, module.root)
        if exists:
            what = "a folder" if is_dir else "not a regular file"
            self.unusable(node, f"`{shown}` is {what}", help="import a `.harness` file")
            return None
        siblings: list[str] = []
        prefix = os.path.dirname(node.target)
        try:
            if path.parent.is_dir():
                siblings = [
                    os.path.join(prefix, p.name)
                    for p in sorted(path.parent.iterdir())
                    if p.suffix == ".harness"
                ]
        except OSError:
            siblings = []
        self.unusable(node, f"no file `{clipped(shown)}`", help=did_you_mean(node.target, siblings))
        return None

    def unusable(self, node: s.Import, label: str, *, help: str | None = None) -> None:
        """Report H203 at an import whose file cannot be loaded; `label` says why."""
        self.report(
            Diagnostic.make(
                "H203",
                f"unknown module `{clipped(node.target)}`",
                node.target_span,
                label,
                help=help,
            )
        )


def _anchored(diagnostic: Diagnostic, imported_at: Span | None) -> Diagnostic:
    """A diagnostic about an imported file as a whole (unreadable, too large), placed at the
    import that asked for it, so the user sees which line to change."""
    if imported_at is None or diagnostic.primary is not None:
        return diagnostic
    return replace(diagnostic, labels=(Label(imported_at, "imported here"), *diagnostic.labels))


def _cycle_names(cycle: list[Module]) -> list[str]:
    """Base names when they tell the modules apart, shown paths otherwise."""
    bases = [os.path.basename(m.name) for m in cycle[:-1]]
    if len(set(bases)) == len(bases):
        return [*bases, bases[0]]
    return [m.name for m in cycle]


def load_modules(roots: Sequence[LoadedFileLike], load_file: LoadFile) -> ModuleGraph:
    """Load every root and what it imports; each module after the modules it imports."""
    loader = _Loader(load_file)
    root_modules: list[Module] = []
    for loaded in roots:
        added = loader.add(loaded, is_root=True, module_path=None)
        if added not in root_modules:
            root_modules.append(added)

    order: list[Module] = []
    done: set[str] = set()
    on_stack: dict[str, int] = {}
    for root in root_modules:
        if root.key in done:
            continue
        # iterative depth-first search, so a long chain of imports cannot exhaust the stack
        loader.prepare(root)
        stack: list[tuple[Module, Iterator[ImportBinding]]] = [(root, iter(root.imports))]
        on_stack[root.key] = 0
        while stack:
            module, pending = stack[-1]
            binding = next(pending, None)
            if binding is None:
                stack.pop()
                del on_stack[module.key]
                done.add(module.key)
                order.append(module)
                continue
            target = binding.target
            if target is None or target.key in done:
                continue
            if target.key in on_stack:
                cycle = [m for m, _ in stack[on_stack[target.key] :]] + [target]
                names = _cycle_names(cycle)
                loader.report(
                    Diagnostic.make(
                        "H204",
                        f"import cycle `{' → '.join(names)}`",
                        binding.node.target_span,
                        "this import closes the cycle",
                        help="move the declarations both modules need into a module they both "
                        "import",
                    )
                )
                continue
            loader.prepare(target)
            on_stack[target.key] = len(stack)
            stack.append((target, iter(target.imports)))
    if loader.over:
        # a spec past a limit is refused whole: no later stage sees any of its declarations,
        # and none of the names they would have declared is reported unknown
        for module in order:
            span = module.syntax.span
            everything = (s.Broken(None, None, span=span),)
            module.syntax = s.Module((), broken=everything, span=span)
    return ModuleGraph(order, loader.diagnostics, loader.complete)
