"""Rename: a declared name (a tool, fact, label, rule, surface, policy, step, …) or an import's
alias, everywhere a build binds it, from the resolver's references (navigate.py reads the same
ones for references and definition). A new name that would not parse, is a keyword, is reserved
or collides with a name of the same kind is refused with the reason."""

from __future__ import annotations

import ast
import os
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from harnessc.dsl import syntax as s
from harnessc.dsl.builder import engine
from harnessc.dsl.source import Source, Span
from harnessc.runtime import model as m
from harnessc.runtime.model.semantics import selects
from pydantic import BaseModel

from ..kinds import BUILTIN_ROOTS, GLOBAL_KINDS, KIND_WORDS, MODULE_KINDS
from ..modules import STD_PREFIX, ImportBinding, Module
from ..resolve import RESERVED_NAME, Symbol
from ..testing import rule_names
from . import navigate
from .outline import walk
from .workspace import Build

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_PATH_KINDS = ("fact", "step", "var")
"""Kinds a condition's path starts with (`release.freeze`, `scan.report.ok`, `x.name`)."""
_DOTTED_KINDS = ("tool", "fact")
"""Kinds whose names may be dotted (`change.create`, `release.freeze`)."""
_UNFOLLOWED = {
    "mcp": "an MCP server's name is part of the id of each of its tools (`mcp:NAME:tool:…`)",
    "test": "a test's name is text, not a name anything refers to: edit its string",
    "operation": "an operation is chosen by the value of a call's `op` argument, a string "
    "that a rename does not follow",
}
"""Kinds a rename does not change, and why."""
EXECUTOR_CALLS = ("bind", "implement", "preview_with")
"""The `Harness` methods that take a tool id first (runtime/session/harness.py)."""


class Refused(Exception):
    """Why a rename cannot be done: shown to the user as the request's error."""


@dataclass(frozen=True)
class Alias:
    """An import's bound name, in the module that imports."""

    binding: ImportBinding
    module: Module

    @property
    def name(self) -> str:
        return self.binding.name or ""


@dataclass(frozen=True)
class Target:
    """What is renamed, and the span of its name at the cursor."""

    span: Span
    symbol: Symbol | None = None
    alias: Alias | None = None

    @property
    def name(self) -> str:
        if self.symbol is not None:
            return self.symbol.name
        assert self.alias is not None
        return self.alias.name


@dataclass(frozen=True)
class Edit:
    path: str
    span: Span
    """The text replaced (empty: an insertion at its start)."""
    text: str


# ---------------------------------------------------------------------------------------------
# What is at the cursor


def target_at(build: Build, source: Source, offset: int) -> Target:
    """The name at `offset` that a rename would change; `Refused` when there is none or it
    cannot be renamed (a standard library name, an MCP server's tool)."""
    alias = _alias_at(build, source, offset)
    if alias is not None:
        return alias
    found = navigate.symbol_at(build, source, offset)
    if found is None:
        raise Refused("there is no name here to rename")
    symbol = found.symbol
    if symbol.module.is_std:
        raise Refused(f"`{symbol.name}` is declared in the standard library, which is not edited")
    unfollowed = _UNFOLLOWED.get(symbol.kind)
    if unfollowed is not None:
        raise Refused(f"`{symbol.name}` cannot be renamed: {unfollowed}")
    if symbol.kind == "tool" and symbol.tool_kind == "mcp":
        raise Refused(f"`{symbol.name}` is named by its MCP server's tool: rename it there")
    part = name_part(found.span, symbol)
    if part is None or not part.start <= offset <= part.end:
        raise Refused(f"the cursor is not on the name `{symbol.name}`")
    return Target(part, symbol=symbol)


def _alias_at(build: Build, source: Source, offset: int) -> Target | None:
    """An import's alias at `offset`: in its `import … as NAME`, or as the prefix of a reference
    through it (`lib.main`, `lib.*`)."""
    resolution = build.result.resolution
    if resolution is None:
        return None
    for module in resolution.modules:
        if module.source is not source:
            continue
        for binding in module.imports:
            alias = binding.node.alias
            if alias is not None and alias.span.start <= offset <= alias.span.end:
                return Target(alias.span, alias=Alias(binding, module))
        for span in _prefixed(build, module):
            prefix, _, _ = span.text.partition(".")
            if span.start <= offset <= span.start + len(prefix):
                bound = module.bindings.get(prefix)
                if bound is not None and bound.name == prefix and bound.target is not None:
                    head = Span(span.source, span.start, span.start + len(prefix))
                    return Target(head, alias=Alias(bound, module))
    return None


def _prefixed(build: Build, module: Module) -> Iterator[Span]:
    """The references of `module` written through an import's name (`lib.main`, `lib.*`)."""
    resolution = build.result.resolution
    assert resolution is not None
    for span, symbol in resolution.references.items():
        if (
            span.source is module.source
            and symbol.kind in MODULE_KINDS
            and span.text.endswith("." + symbol.name)
        ):
            yield span
    for span in resolution.module_globs:
        if span.source is module.source:
            yield span


def name_part(span: Span, symbol: Symbol) -> Span | None:
    """The part of a reference's span that spells the symbol's name: all of `deploy`, the end of
    `lib.release`, the start of `release.freeze.until` or `scan.report`; None when it is
    spelt otherwise."""
    text = span.text
    if text == symbol.name:
        return span
    if text == f'"{symbol.name}"':  # a tool declared with a quoted name
        return span
    if symbol.kind in _PATH_KINDS and text.startswith(symbol.name + "."):
        return Span(span.source, span.start, span.start + len(symbol.name))
    if symbol.kind in MODULE_KINDS and text.endswith("." + symbol.name):
        return Span(span.source, span.end - len(symbol.name), span.end)
    return None


# ---------------------------------------------------------------------------------------------
# The new name


def refusal(target: Target, new: str, builds: Iterable[Build]) -> str | None:
    """Why `new` cannot replace the target's name, or None."""
    symbol = target.symbol
    kind = symbol.kind if symbol is not None else "import"
    word = KIND_WORDS.get(kind, "import name")
    pattern = _DOTTED if kind in _DOTTED_KINDS else _NAME
    if not pattern.fullmatch(new):
        shape = "letters, digits and `_`, not starting with a digit"
        if kind in _DOTTED_KINDS:
            shape += ", in parts separated by `.`"
        return f"`{new}` is not a valid {word} name: a name is {shape}"
    if new in engine().keyword_types:
        return f"`{new}` is a keyword of the language: give the {word} another name"
    if new == RESERVED_NAME:
        return f"`{RESERVED_NAME}` is reserved for the planner's delegation protocol"
    if new.startswith(STD_PREFIX):
        return "the `std.` prefix is reserved for the standard library"
    if kind in _PATH_KINDS and new.split(".")[0] in (*BUILTIN_ROOTS, "result", "input"):
        return f"a {word} named `{new}` would be read as the built-in `{new.split('.')[0]}`"
    for build in builds:
        clash = _clash(build, target, new) or _selection_changed(build, target, new)
        if clash is not None:
            return clash
    return None


def _selection_changed(build: Build, target: Target, new: str) -> str | None:
    """Why renaming a tool to `new` would change what a glob of the build selects (`change.*`
    selects `change.get`, not `fetch_change`): a rule, surface or history term would govern
    other tools than it does. Read from the build's model (none when it has errors)."""
    model = build.result.model
    symbol = target.symbol
    if model is None or symbol is None or symbol.kind != "tool":
        return None
    tool = model.tools.get(symbol.name)
    if tool is None:
        return None
    renamed = tool.model_copy(update={"id": new})
    for selector in _globs(model):
        if selects(selector, tool) != selects(selector, renamed):
            now, then = (
                ("selects", "would not select")
                if selects(selector, tool)
                else ("does not select", "would select")
            )
            return (
                f"the pattern `{selector.text}` {now} `{symbol.name}` and {then} `{new}`: the "
                "rename would change which tools it governs"
            )
    return None


_GLOBS: dict[int, tuple[m.Spec, list[m.Selector]]] = {}
"""The glob selectors of the last few models read (kept with their model: ids are reused)."""


def _globs(model: m.Spec) -> list[m.Selector]:
    kept = _GLOBS.get(id(model))
    if kept is not None and kept[0] is model:
        return kept[1]
    globs = [x for x in _selectors(model) if x.kind == "glob"]
    if len(_GLOBS) >= 8:
        _GLOBS.pop(next(iter(_GLOBS)))
    _GLOBS[id(model)] = (model, globs)
    return globs


def _selectors(node: object) -> Iterator[m.Selector]:
    """Every selector of the model: rules', surfaces', grants', history terms'."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, m.Selector):
            yield item
        elif isinstance(item, BaseModel):
            stack.extend(getattr(item, name) for name in type(item).model_fields)
        elif isinstance(item, tuple | list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())


def _clash(build: Build, target: Target, new: str) -> str | None:
    resolution = build.result.resolution
    if resolution is None:
        return None
    if target.alias is not None:
        module = _same_module(build, target.alias.module)
        if module is not None and new in module.bindings:
            return f"`{new}` already names an import of {module.name}"
        return None
    symbol = target.symbol
    assert symbol is not None
    mine = _same_symbol(build, symbol)
    if mine is None:
        return None
    if symbol.kind in GLOBAL_KINDS:
        table = resolution.globals.get(symbol.kind, {})
    elif symbol.kind in MODULE_KINDS:
        table = resolution.scoped.get(mine.module.key, {}).get(symbol.kind, {})
    else:
        table = next((t for t in resolution.locals.values() if t.get(mine.name) is mine), {})
    other = table.get(new)
    if other is None or other is mine:
        return None
    where = f"{other.module.name}:{other.span.line}"
    return f"`{new}` is already the name of a {KIND_WORDS[symbol.kind]}, declared at {where}"


def _same_symbol(build: Build, symbol: Symbol) -> Symbol | None:
    """The build's own symbol for a declaration (each build has symbols of its own)."""
    path = os.path.realpath(symbol.module.path)
    for mine in navigate.symbols(build):
        if (
            mine.kind == symbol.kind
            and mine.name == symbol.name
            and mine.span.start == symbol.span.start
            and os.path.realpath(mine.module.path) == path
        ):
            return mine
    return None


def _same_module(build: Build, module: Module) -> Module | None:
    resolution = build.result.resolution
    return next(
        (m for m in resolution.modules if m.key == module.key) if resolution else iter(()),
        None,
    )


# ---------------------------------------------------------------------------------------------
# The edits


def edits(builds: list[Build], origin: Build, target: Target, new: str) -> list[Edit]:
    """Every edit renaming the target to `new` in the files of `builds` (`origin`: the build
    the target was found in), each once, in file and offset order. `Refused` when a reference
    spells the name in a way a rename cannot follow, or `new` is refused."""
    reason = refusal(target, new, builds)
    if reason is not None:
        raise Refused(reason)
    found: dict[tuple[str, int, int], Edit] = {}

    def add(build: Build, span: Span, text: str) -> None:
        path = build.path_of(span.source)
        found.setdefault((path, span.start, span.end), Edit(path, span, text))

    if target.symbol is not None:
        symbol = target.symbol
        add(origin, name_part(symbol.span, symbol) or symbol.span, new)
        for build, span in navigate.everywhere(builds, origin, symbol):
            part = name_part(span, symbol)
            if part is None:
                where = f"{build.path_of(span.source)}:{span.line}"
                raise Refused(f"`{symbol.name}` is written `{span.text}` at {where}")
            add(build, part, new)
        if symbol.kind == "rule":
            for build in builds:
                for span in _expected_rules(build, symbol):
                    add(build, Span(span.source, span.end - len(symbol.name), span.end), new)
    else:
        assert target.alias is not None
        for build in builds:
            module = _same_module(build, target.alias.module)
            if module is None or module.source is None:
                continue
            binding = next(
                (
                    b
                    for b in module.imports
                    if b.node.span.start == target.alias.binding.node.span.start
                ),
                None,
            )
            if binding is None:
                continue
            alias = binding.node.alias
            if alias is not None:
                add(build, alias.span, new)
            else:  # `import std.workspace` binds `workspace`: it gains `as NEW`
                end = binding.node.target_span.end
                add(build, Span(module.source, end, end), f" as {new}")
            prefix = target.alias.name + "."
            for span in _prefixed(build, module):
                if (
                    span.text.startswith(prefix)
                    and module.bindings.get(target.alias.name) is binding
                ):
                    add(build, Span(span.source, span.start, span.start + len(prefix) - 1), new)
    return sorted(found.values(), key=lambda e: (e.path, e.span.start))


def _expected_rules(build: Build, symbol: Symbol) -> Iterator[Span]:
    """The names in tests' `expect … rule NAME` that name the rule `symbol` declares, as the
    tests read them (`testing.rule_names`: `known`, `mailing.known`, the policy's full name):
    they are text, not references, so the resolver does not bind them."""
    resolution = build.result.resolution
    mine = _same_symbol(build, symbol)
    if resolution is None or mine is None or not isinstance(mine.node, s.Rule):
        return
    found = navigate.model_rules(build, mine.node)
    names = set().union(*(rule_names(r) for r in found)) if found else {symbol.name}
    for module in resolution.modules:
        if module.is_std:
            continue
        for node in walk(module.syntax.items):
            if not isinstance(node, s.Expect):
                continue
            for detail in node.details:
                if isinstance(detail, s.Attr) and detail.key == "rule":
                    for value in detail.values:
                        if (
                            isinstance(value, s.Name)
                            and value.text in names
                            and value.text.rsplit(".", 1)[-1] == symbol.name
                        ):
                            yield value.span


# ---------------------------------------------------------------------------------------------
# Python that binds executors by tool id

_SKIPPED_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", "build", "dist", ".tox"}
_MOST_FILES = 5000
"""The most Python files read for executor bindings: a folder holding more is not a project."""


@dataclass(frozen=True)
class Binding:
    path: str
    line: int
    call: str


class ExecutorIndex:
    """Where Python files under the workspace's folders bind executors, by tool id: each file
    read and parsed again only when its size or modification time changes."""

    def __init__(self) -> None:
        self._files: dict[str, tuple[tuple[int, int], tuple[tuple[str, int, str], ...]]] = {}
        self._lock = threading.Lock()

    def bindings(self, folders: Iterable[str], tool_id: str) -> list[Binding]:
        """Where a call of `bind`, `implement` or `preview_with` (`h.bind("deploy", fn)`,
        `@h.implement("deploy")`) has `tool_id` as its first argument. Files that do not parse
        are skipped; at most `_MOST_FILES` files are read."""
        found: list[Binding] = []
        with self._lock:
            for read, path in enumerate(_python_files(folders)):
                if read >= _MOST_FILES:
                    break
                for bound, line, call in self._calls(path):
                    if bound == tool_id:
                        found.append(Binding(path, line, call))
        return sorted(found, key=lambda b: (b.path, b.line))

    def _calls(self, path: str) -> tuple[tuple[str, int, str], ...]:
        try:
            info = os.stat(path)
        except OSError:
            return ()
        stamp = (info.st_size, info.st_mtime_ns)
        cached = self._files.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        calls = _executor_calls(path)
        self._files[path] = (stamp, calls)
        return calls


def _executor_calls(path: str) -> tuple[tuple[str, int, str], ...]:
    """The (tool id, line, method) of each executor binding in a Python file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ()
    if not any(f"{name}(" in text for name in EXECUTOR_CALLS):
        return ()
    try:
        tree = ast.parse(text, path)
    except (SyntaxError, ValueError):
        return ()
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in EXECUTOR_CALLS
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.args[0].value, node.lineno, node.func.attr))
    return tuple(found)


def _python_files(folders: Iterable[str]) -> Iterator[str]:
    seen: set[str] = set()
    for folder in folders:
        for root, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS and not d.startswith("."))
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.realpath(os.path.join(root, name))
                    if path not in seen:
                        seen.add(path)
                        yield path


def is_tool(target: Target) -> bool:
    return target.symbol is not None and isinstance(target.symbol.node, s.Tool)
