"""The session-aware names of stage resolve (compiler/resolve.py), as a mixin of its resolver.

Data labels (declared with `label NAME`, written on fields and in `from label NAME` and
`seen(NAME)`), and the functions a condition may call: fact functions, the value functions `len`,
`urls`, `hosts`, `emails`, `ibans`, `params`, `segments`, and the history terms `called`,
`succeeded`, `count`, `sum`, `seen`, whose `when` and fields read earlier calls' `args` and
`result`. The
resolver (compiler/resolve.py) inherits these and dispatches to them; what they read of it is
declared under TYPE_CHECKING below.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from harnessc.dsl import syntax as s
from harnessc.dsl.diagnostics import Diagnostic
from harnessc.dsl.suggest import did_you_mean
from harnessc.runtime.judge.provenance import EXTRACTIONS
from harnessc.runtime.model import BUILTIN_LABELS, HISTORY_FUNCS

from .modules import Module

if TYPE_CHECKING:
    from harnessc.dsl.source import Span

    from .poison import Poison
    from .symbols import Scope, Symbol

__all__ = ["FACT_FUNCTIONS", "FUNCTIONS", "SELECTING_FUNCTIONS", "VALUE_FUNCTIONS", "SessionNames"]

FACT_FUNCTIONS = {"connected": "connection", "running": "runtime"}
VALUE_FUNCTIONS = ("len", *EXTRACTIONS)
FUNCTIONS: tuple[str, ...] = (*FACT_FUNCTIONS, *HISTORY_FUNCS, *VALUE_FUNCTIONS)
"""Every function a condition may call: fact functions, history terms, `len` and extractions."""
SELECTING_FUNCTIONS = frozenset({"called", "succeeded", "count"})
"""History functions whose arguments are tool selectors (`sum` selects with `of`)."""


def _quoted(words: Iterable[str]) -> str:
    return ", ".join(f"`{w}`" for w in words)


class SessionNames:
    """The resolver's labels and condition functions."""

    if TYPE_CHECKING:
        # what these read of the resolver (compiler/resolve.py)
        complete: bool
        globals: dict[str, dict[str, Symbol]]
        poison: Poison
        unresolved: list[Span]

        def report(self, diagnostic: Diagnostic) -> None: ...
        def declare_global(
            self,
            module: Module,
            kind: str,
            name: str,
            span: Span,
            node: object,
            parent: object | None = None,
        ) -> Symbol | None: ...
        def bind(self, module: Module, name: s.Name | s.Pattern, symbol: Symbol) -> None: ...
        def resolve(self, module: Module, name: s.Name, *kinds: str) -> Symbol | None: ...
        def visit_pattern(self, scope: Scope, pattern: s.Pattern) -> None: ...
        def visit_cond(self, scope: Scope, cond: object) -> None: ...
        def visit_value(self, scope: Scope, value: object, lenient: bool = False) -> bool: ...

    # -- labels --------------------------------------------------------------------------------

    def declare_label(self, module: Module, label: s.Label) -> None:
        name = label.name.text
        if name in BUILTIN_LABELS:
            self.report(
                Diagnostic.make(
                    "H206",
                    f"`{name}` is a built-in label",
                    label.name.span,
                    "declared again here",
                    notes=[f"the built-in labels are {_quoted(BUILTIN_LABELS)}"],
                    help=f"use `{name}` without declaring it, or give the label another name",
                )
            )
            return
        self.declare_global(module, "label", name, label.name.span, label)

    def visit_field_labels(self, module: Module, fields: Iterable[s.Field]) -> None:
        """The labels of fields (`label secret`), nested fields too."""
        for f in fields:
            for constraint in f.constraints:
                if constraint.kind == "label" and isinstance(constraint.value, s.Name):
                    self.resolve_label(module, constraint.value)
            stack = [f.type] if f.type is not None else []
            while stack:
                ty = stack.pop()
                stack.extend(ty.args)
                self.visit_field_labels(module, ty.fields)

    def resolve_label(self, module: Module, name: s.Name) -> None:
        """A data label: built in (`secret`, `pii`) or declared with `label NAME`; else H201."""
        if name.text in BUILTIN_LABELS:
            return
        symbol = self.globals["label"].get(name.text)
        if symbol is not None:
            self.bind(module, name, symbol)
            return
        if not self.complete or self.poison.covers_global("label", name.text):
            self.unresolved.append(name.span)
            return
        known = [*BUILTIN_LABELS, *sorted(self.globals["label"])]
        self.report(
            Diagnostic.make(
                "H201",
                f"unknown label `{name.text}`",
                name.span,
                "not a built-in or declared label",
                notes=[f"the labels are {_quoted(known)}"],
                help=did_you_mean(name.text, known)
                or f'declare it: `label {name.text} "what it marks"`',
            )
        )

    # -- functions -----------------------------------------------------------------------------

    def visit_func(self, scope: Scope, call: s.FuncCall) -> None:
        name = call.name.text
        kind = FACT_FUNCTIONS.get(name)
        if kind is not None:
            for arg in call.args:
                if isinstance(arg, s.Path):
                    self.resolve(scope.module, s.Name(arg.text, span=arg.span), kind)
            return
        if name in VALUE_FUNCTIONS:
            for arg in call.args:
                if not isinstance(arg, s.Pattern):
                    self.visit_value(scope, arg)
            return
        if name not in HISTORY_FUNCS:
            self.report(
                Diagnostic.make(
                    "H201",
                    f"unknown function `{name}`",
                    call.name.span,
                    "not a function of the language",
                    notes=[f"the functions are {_quoted(FUNCTIONS)}"],
                    help=did_you_mean(name, FUNCTIONS),
                )
            )
            return
        # A history term reads earlier calls: its own `args`, `result` and `tool`, never the
        # variables of the decision's quantifiers.
        history = replace(scope, vars={}, result=True)
        for index, arg in enumerate(call.args):
            if name == "seen":
                if isinstance(arg, s.Path):
                    self.resolve_label(scope.module, s.Name(arg.text, span=arg.span))
            elif name == "sum" and index == 0:
                if not isinstance(arg, s.Pattern):
                    self.visit_value(history, arg)
            elif isinstance(arg, s.Path | s.Pattern):
                self.visit_pattern(scope, s.Pattern(arg.text, span=arg.span))
        for pattern in call.of:
            self.visit_pattern(scope, pattern)
        if call.when is not None:
            self.visit_cond(history, call.when)
