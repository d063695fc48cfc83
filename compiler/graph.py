"""Stage graph: workflow DAG checks with networkx (cycles, reachability, bindings).

A workflow's steps form a directed graph: an edge `u → v` when `v` runs after `u`, that is when
`v` names `u` in `after` or reads it in its arguments, `context`, `when` or gate condition
(`Step.depends_on`, computed by lower). A step starts when ALL the steps it depends on are done,
and is skipped when one of them was skipped. Two consequences shape the checks below:

- a value is bound at a step exactly when its step is an ancestor of that step (with AND-joins
  every ancestor has run; an OR-join dominator analysis would reject the reference workflow, where
  `revert` reads `change` and `deploy` also waits for `window`);
- the main path starts at a virtual entry before every main-path step without dependencies;
  `compensation` steps are off it and are reached only through `on_failure … compensate`.

Everything here is linear in the number of steps and references, except the check of
compensation bindings, which keeps one ancestor bit set per step (a few machine words each).

What networkx answers (the cycles to report, a topological order) depends only on the step
graph's shape, so it is kept in the analysis cache (analysis/cache.py) by a hash of that shape:
a check after an edit that leaves every workflow's steps and dependencies as they were reads
the answers back and never loads networkx.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING

from harnessc.dsl import syntax as s
from harnessc.dsl.diagnostics import Diagnostic, Reporter
from harnessc.dsl.source import Span
from harnessc.dsl.suggest import did_you_mean
from harnessc.runtime import model as m
from harnessc.runtime.model import Spec

from .analysis.cache import AnalysisCache, installed_version
from .lower import module_name
from .resolve import BUILTIN_ROOTS, Resolution

if TYPE_CHECKING:
    # loaded by the functions that use it, so a spec without workflows never loads it
    import networkx as nx

__all__ = ["check_workflows", "step_graph"]

ENTRY = "<entry>"
"""The virtual node before every main-path step without dependencies (not a step name)."""

MAX_DRAWN = 8
"""Cycles longer than this are drawn with `…` in the middle."""

_TYPE_WORDS = {
    "string": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "a boolean",
    "path": "a path",
    "url": "a URL",
    "duration": "a duration",
    "enum": "an enum",
    "list": "a list",
}


def check_workflows(spec: Spec, resolution: Resolution) -> list[Diagnostic]:
    """Errors and notes about every workflow's step graph."""
    diagnostics: list[Diagnostic] = []
    shapes = AnalysisCache()
    for module in resolution.modules:
        prefix = module_name(module)
        for item in module.syntax.items:
            if not isinstance(item, s.Workflow):
                continue
            workflow = spec.workflows.get(f"{prefix}.{item.name.text}")
            if workflow is not None:
                diagnostics.extend(_WorkflowCheck(spec, resolution, item, workflow, shapes).run())
    return diagnostics


def step_graph(workflow: m.Workflow) -> nx.DiGraph:
    """The step graph of a workflow: an edge `u → v` when `v` runs after `u`.

    Every step is a node (attribute `compensation`); `ENTRY` precedes every main-path step
    without dependencies.
    """
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_node(ENTRY, compensation=False)
    names = {step.name for step in workflow.steps}
    for step in workflow.steps:
        graph.add_node(step.name, compensation=step.compensation)
    for step in workflow.steps:
        deps = [d for d in step.depends_on if d in names]
        graph.add_edges_from((d, step.name) for d in deps)
        if not deps and not step.compensation:
            graph.add_edge(ENTRY, step.name)
    return graph


@dataclass(frozen=True)
class _Shape:
    """What networkx finds in a step graph: the cycles to report (H401), and an order."""

    cycles: list[list[str]]
    """Each step that waits for itself, as `[name]`, in text order; then one cycle per strongly
    connected component of several steps, starting at its first step in text order."""
    order: list[str]
    """Every step, each after the steps it depends on (empty when there is a cycle)."""


@cache
def _shape_salt() -> str:
    """What a cached shape's key includes: this file's text and networkx's version."""
    version = installed_version("networkx")
    text = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    return f"workflow shape\n{text}\nnetworkx {version}"


def _shape(workflow: m.Workflow, order: dict[str, int], shapes: AnalysisCache) -> _Shape:
    """The cycles and order of the workflow's step graph; `order` is each step's text index."""
    names = {step.name for step in workflow.steps}
    graph = [
        [step.name, step.compensation, [d for d in step.depends_on if d in names]]
        for step in workflow.steps
    ]
    key = f"{_shape_salt()}\n{json.dumps([graph, sorted(order.items())])}"
    text = shapes.read(key)
    if text is not None:
        try:
            kept = json.loads(text)
            return _Shape([list(c) for c in kept["cycles"]], list(kept["order"]))
        except (ValueError, KeyError, TypeError):
            pass  # a damaged entry is a miss
    found = _find_shape(workflow, order)
    shapes.write(key, json.dumps({"cycles": found.cycles, "order": found.order}))
    return found


def _find_shape(workflow: m.Workflow, order: dict[str, int]) -> _Shape:
    import networkx as nx

    graph = step_graph(workflow)
    loops = sorted(nx.nodes_with_selfloops(graph), key=order.__getitem__)
    cycles = [[name] for name in loops]
    for component in nx.strongly_connected_components(graph):
        if len(component) == 1:
            continue
        first = min(component, key=order.__getitem__)
        inner = graph.subgraph(component).copy()
        inner.remove_edges_from(nx.selfloop_edges(inner))
        edges = nx.find_cycle(inner, source=first)
        cycle = [u for u, _ in edges]
        start = min(range(len(cycle)), key=lambda i: order[cycle[i]])
        cycles.append(cycle[start:] + cycle[:start])
    steps = [] if cycles else [n for n in nx.topological_sort(graph) if n != ENTRY]
    return _Shape(cycles, steps)


# ---------------------------------------------------------------------------------------------
# References, as written


@dataclass(frozen=True, slots=True)
class _Ref:
    """One place where a step names another: `after x`, or a path that reads `x`."""

    target: str
    span: Span
    path: s.Path | None
    """None for a name in `after`."""

    @property
    def text(self) -> str:
        return self.path.text if self.path is not None else self.target


@dataclass
class _StepInfo:
    node: s.Step
    model: m.Step
    index: int
    refs: list[_Ref] = field(default_factory=list)
    compensates: list[s.Name] = field(default_factory=list)
    options: dict[str, s.Name] = field(default_factory=dict)
    """For a decide step: each option as written."""
    options_span: Span | None = None

    def ref_to(self, target: str) -> _Ref | None:
        return next((r for r in self.refs if r.target == target), None)


def _paths(value: object) -> Iterator[s.Path | s.FuncCall]:
    """The paths (and fact functions) a value or condition reads, in text order."""
    if isinstance(value, s.Path | s.FuncCall):
        yield value
    elif isinstance(value, s.Compare):
        yield from _paths(value.left)
        if value.op != "has":  # the right of `has` names a field, it reads nothing
            yield from _paths(value.right)
    elif isinstance(value, s.And | s.Or):
        for item in value.items:
            yield from _paths(item)
    elif isinstance(value, s.Not):
        yield from _paths(value.item)
    elif isinstance(value, s.ListLit):
        for element in value.items:
            yield from _paths(element)
    elif isinstance(value, s.Record):
        for entry in value.entries:
            yield from _paths(entry.value)


def _compares(cond: object) -> Iterator[s.Compare]:
    if isinstance(cond, s.Compare):
        yield cond
    elif isinstance(cond, s.And | s.Or):
        for item in cond.items:
            yield from _compares(item)
    elif isinstance(cond, s.Not):
        yield from _compares(cond.item)


def _one_of(names: list[str], limit: int = 6) -> str:
    """`a`, or one of `a`, `b` or `c` (at most `limit` names, then `…`)."""
    shown = [f"`{n}`" for n in names[:limit]]
    if len(shown) == 1:
        return shown[0]
    if len(names) > limit:
        return "one of " + ", ".join(shown) + ", …"
    return "one of " + ", ".join(shown[:-1]) + " or " + shown[-1]


def _fields_help(names: list[str]) -> str | None:
    if not names:
        return None
    if len(names) == 1:
        return f"its only field is `{names[0]}`"
    return f"read {_one_of(names)}"


def _draw(cycle: list[str]) -> str:
    names = [*cycle, cycle[0]]
    if len(cycle) > MAX_DRAWN:
        names = [*names[:3], "…", *names[-3:]]
    return " → ".join(names)


# ---------------------------------------------------------------------------------------------
# One workflow


class _WorkflowCheck(Reporter):
    def __init__(
        self,
        spec: Spec,
        resolution: Resolution,
        node: s.Workflow,
        workflow: m.Workflow,
        shapes: AnalysisCache,
    ) -> None:
        self.spec = spec
        self.res = resolution
        self.node = node
        self.workflow = workflow
        self.name = node.name.text
        self.diagnostics: list[Diagnostic] = []
        self.misspelt: set[str] = set()
        """Decide steps compared with a word that is not an option (H405): L101 would only
        repeat that error."""
        models = {step.name: step for step in workflow.steps}
        self.steps: dict[str, _StepInfo] = {}
        for item in node.items:
            if isinstance(item, s.Step) and item.name.text in models:
                info = _StepInfo(item, models[item.name.text], len(self.steps))
                self.steps[item.name.text] = info
                self.collect(info)
        self.shape = _shape(workflow, {n: i.index for n, i in self.steps.items()}, shapes)

    # -- collecting references ---------------------------------------------------------------

    def collect(self, info: _StepInfo) -> None:
        node = info.node
        for name in node.after:
            info.refs.append(_Ref(name.text, name.span, None))
        action = node.action
        if isinstance(action, s.CallAction):
            for arg in action.args:
                self.collect_paths(info, arg.value)
        elif isinstance(action, s.GateAction):
            self.collect_paths(info, action.cond)
        if node.when is not None:
            self.collect_paths(info, node.when)
        for option in node.options or ():
            if isinstance(option, s.Context):
                for value in option.values:
                    self.collect_paths(info, value)
            elif isinstance(option, s.OnFailure):
                info.compensates.extend(
                    a.target
                    for a in option.actions
                    if a.kind == "compensate" and a.target is not None
                )
            elif isinstance(option, s.Attr) and option.key == "options":
                info.options_span = option.span
                for word in option.values:
                    if isinstance(word, s.Name | s.Path):
                        info.options.setdefault(word.text, s.Name(word.text, span=word.span))

    def collect_paths(self, info: _StepInfo, value: object) -> None:
        for path in _paths(value):
            if isinstance(path, s.Path):
                symbol = self.res.references.get(path.span)
                # resolve binds a path to a step of this very workflow only
                if symbol is not None and symbol.kind == "step":
                    info.refs.append(_Ref(symbol.name, path.span, path))

    # -- the checks --------------------------------------------------------------------------

    def run(self) -> list[Diagnostic]:
        cyclic = self.check_cycles()
        self.check_main_path()
        self.check_compensate_targets()
        self.check_reachable()
        self.check_values()
        self.check_when()
        if not cyclic:
            # needs a DAG: ancestors are computed in topological order
            self.check_compensation_bindings()
        self.check_decide_outcomes()
        return self.diagnostics

    def check_cycles(self) -> bool:
        """H401: each step that waits for itself, and one cycle per strongly connected
        component of several steps (all its other cycles go away with the same edits, and
        listing every simple cycle can take exponential time)."""
        for cycle in self.shape.cycles:
            self.report_cycle(cycle)
        return bool(self.shape.cycles)

    def report_cycle(self, cycle: list[str]) -> None:
        head, last = cycle[0], cycle[-1]
        info = self.steps[head]
        ref = info.ref_to(last)
        span = ref.span if ref is not None else info.node.name.span
        if len(cycle) == 1:
            self.report(
                "H401",
                f"step `{head}` waits for itself",
                span,
                f"`{head}` cannot start before it has finished",
                notes=["a step runs after every step it names in `after` or reads"],
                help=f"remove `{ref.text if ref else head}` from step `{head}`",
            )
            return
        secondary: list[tuple[Span, str]] = []
        if len(cycle) <= MAX_DRAWN:
            for before, after in pairwise(cycle):
                other = self.steps[after].ref_to(before)
                if other is not None:
                    secondary.append((other.span, f"`{after}` waits for `{before}`"))
        self.report(
            "H401",
            f"steps wait for each other in a cycle `{_draw(cycle)}`",
            span,
            f"`{head}` waits for `{last}`, which runs after `{head}`",
            secondary=secondary,
            notes=[
                "a step runs after every step it names in `after` or reads in its arguments, "
                "`context`, `when` or gate condition, so none of these steps can start"
            ],
            help=f"remove one reference of the cycle, such as `{ref.text if ref else last}` "
            f"in step `{head}`",
        )

    def check_main_path(self) -> None:
        """H403: a main-path step that waits for a compensation step."""
        for name, info in self.steps.items():
            if info.model.compensation:
                continue
            for dep in info.model.depends_on:
                target = self.steps.get(dep)
                if target is None or not target.model.compensation:
                    continue
                ref = info.ref_to(dep)
                self.report(
                    "H403",
                    f"compensation step `{dep}` is on the main path",
                    ref.span if ref is not None else info.node.name.span,
                    f"`{name}` waits for `{dep}`",
                    secondary=[(target.node.name.span, f"`{dep}` is a compensation step")],
                    notes=[
                        f"`{dep}` runs only when an `on_failure` triggers it, so `{name}` "
                        "would never run"
                    ],
                    help=f"remove this reference, or drop `compensation` from `{dep}` if it "
                    "should always run",
                )

    def check_compensate_targets(self) -> None:
        """H407: `compensate X` where X is not marked `compensation`."""
        compensations = [n for n, i in self.steps.items() if i.model.compensation]
        for info in self.steps.values():
            for target_name in info.compensates:
                target = self.steps.get(target_name.text)
                if target is None or target.model.compensation:
                    continue
                self.report(
                    "H407",
                    f"step `{target_name.text}` is not a compensation step",
                    target_name.span,
                    "compensated with here",
                    secondary=[
                        (target.node.name.span, f"`{target_name.text}` is on the main path")
                    ],
                    help=did_you_mean(target_name.text, compensations)
                    or f"mark `{target_name.text}` as `compensation` (after its action), or "
                    "compensate with a compensation step",
                )

    def check_reachable(self) -> None:
        """H402: compensation steps that no reachable step triggers.

        Main-path steps are reached from the entry; one that is not waits on a cycle (H401) or
        on a compensation step (H403), which are reported where they are, not once per
        step downstream.
        """
        # Every main-path step counts as a source: one that cannot start is reported at its
        # cause, and the compensations it names are not unreachable on their own account.
        reached = {n for n, i in self.steps.items() if not i.model.compensation}
        frontier = list(reached)
        while frontier:
            step = self.steps.get(frontier.pop())
            if step is None:
                continue
            for action in step.model.on_failure:
                if action.kind == "compensate" and action.step and action.step not in reached:
                    reached.add(action.step)
                    frontier.append(action.step)
        for name, info in self.steps.items():
            if name in reached:
                continue
            self.report(
                "H402",
                f"compensation step `{name}` is never triggered",
                info.node.name.span,
                "no `on_failure` compensates with it",
                notes=["a compensation step runs only when a step's `on_failure` triggers it"],
                help=f"add `on_failure compensate {name}` to the step it undoes, or remove it",
            )

    # -- values ------------------------------------------------------------------------------

    def check_values(self) -> None:
        """H404 for values that are not there; H405 for words that are not options."""
        for info in self.steps.values():
            for ref in info.refs:
                if ref.path is not None:
                    self.check_step_value(ref)
            self.check_inputs(info)
            for cond in (info.node.when, getattr(info.node.action, "cond", None)):
                if cond is not None:
                    for compare in _compares(cond):
                        self.check_options(compare)

    def check_step_value(self, ref: _Ref) -> None:
        assert ref.path is not None
        target = self.steps[ref.target]
        step = target.model
        fields = ref.path.parts[1:]
        if step.kind == "gate":
            self.report(
                "H404",
                f"gate step `{ref.target}` has no value",
                ref.span,
                "a gate yields nothing",
                secondary=[(target.node.name.span, f"`{ref.target}` is a gate")],
                help=f"to wait for `{ref.target}` without reading it, write `after {ref.target}`",
            )
            return
        if not fields:
            return
        if step.kind == "decide":
            options = list(step.options)
            self.report(
                "H404",
                f"decide step `{ref.target}` has no field `{fields[0]}`",
                ref.span,
                "a decide step yields the option a person chose",
                help=f"compare `{ref.target}` itself with one of its options, such as "
                f"`{ref.target} == {options[0]}`"
                if options
                else f"read `{ref.target}` itself",
            )
            return
        if step.kind == "call":
            schema = self.spec.tools[step.tool].output if step.tool in self.spec.tools else None
            where = f"the output of `{step.tool}`"
            missing_help = f"declare `output {{ {fields[0]}: … }}` on tool `{step.tool}`"
            missing = f"tool `{step.tool}` declares no output"
        else:
            schema = step.output
            where = f"the output of step `{ref.target}`"
            missing_help = f"declare `output {{ {fields[0]}: … }}` in step `{ref.target}`"
            missing = f"delegate step `{ref.target}` declares no output"
        if schema is None:
            self.report(
                "H404",
                f"step `{ref.target}` has no field `{fields[0]}`",
                ref.span,
                missing,
                help=missing_help,
            )
            return
        if schema.shape is not None:
            # an output written as a type (`output list<…>`, a union, `any`): its value's type
            self.check_type(ref.span, ref.target, schema.shape, fields, where)
            return
        self.check_fields(
            ref.span,
            ref.target,
            schema.fields,
            fields,
            f"step `{ref.target}`",
            f"not in {where}",
            open_=schema.open,
        )

    def check_type(
        self, span: Span, read: str, kind: m.Type, parts: tuple[str, ...], where: str
    ) -> None:
        """Walk `parts` into a value of `kind`: a union or `any` as `check_fields` does
        inside a record, a record by its fields, anything else has none."""
        if kind.name == "object":
            label = f"not in {where}"
            self.check_fields(span, read, kind.fields, parts, f"`{read}`", label, open_=kind.open)
        elif kind.name == "union" and any(o.name == "object" for o in kind.options):
            opened = any(o.name == "object" and o.open for o in kind.options)
            label = f"not in any alternative of {where}"
            self.check_fields(
                span, read, kind.records() or (), parts, f"`{read}`", label, open_=opened
            )
        elif kind.name != "any":
            self.report(
                "H404",
                f"`{read}` has no field `{parts[0]}`",
                span,
                f"`{read}` is {_TYPE_WORDS.get(kind.name, 'a value')} in {where}",
                help=f"read `{read}` itself",
            )

    def check_inputs(self, info: _StepInfo) -> None:
        """`input.NAME` reads a field of the workflow's input."""
        values: list[object] = []
        action = info.node.action
        if isinstance(action, s.CallAction):
            values.extend(a.value for a in action.args)
        elif isinstance(action, s.GateAction):
            values.append(action.cond)
        if info.node.when is not None:
            values.append(info.node.when)
        for option in info.node.options or ():
            if isinstance(option, s.Context):
                values.extend(option.values)
        for value in values:
            for path in _paths(value):
                if not isinstance(path, s.Path) or path.parts[0] != "input":
                    continue
                if len(path.parts) == 1 or path.span in self.res.references:
                    continue
                schema = self.workflow.input
                if schema is None:
                    self.report(
                        "H404",
                        f"workflow `{self.name}` has no input",
                        path.span,
                        "no `input` block declares this",
                        help=f"declare `input {{ {path.parts[1]}: … }}` in workflow `{self.name}`",
                    )
                    continue
                self.check_fields(
                    path.span,
                    "input",
                    schema.fields,
                    path.parts[1:],
                    f"the input of workflow `{self.name}`",
                    "not declared in its `input`",
                )

    def check_fields(
        self,
        span: Span,
        head: str,
        fields: tuple[m.Field, ...],
        parts: tuple[str, ...],
        owner: str,
        label: str,
        open_: bool = False,
    ) -> None:
        """Walk `parts` through a schema: objects by field, maps by any key. The unlisted
        part of an open record and the inside of an `any` hold any field (the condition
        checks warn of such a read: H354)."""
        read = head
        i = 0
        while i < len(parts):
            part = parts[i]
            found = next((f for f in fields if f.name == part), None)
            if found is None and open_:
                return
            if found is None:
                names = [f.name for f in fields]
                self.report(
                    "H404",
                    f"{owner} has no field `{part}`"
                    if read == head
                    else f"`{read}` has no field `{part}`",
                    span,
                    label,
                    help=did_you_mean(part, names) or _fields_help(names),
                )
                return
            read = f"{read}.{part}"
            kind = found.type
            i += 1
            while i < len(parts) and kind.name == "map" and kind.item is not None:
                read = f"{read}.{parts[i]}"  # a map's key: any word
                kind = kind.item
                i += 1
            if i < len(parts) and kind.name in ("any", "union"):
                self.check_type(span, read, kind, parts[i:], owner)
                return
            if i < len(parts) and kind.name != "object":
                self.report(
                    "H404",
                    f"`{read}` has no field `{parts[i]}`",
                    span,
                    f"`{read}` is {_TYPE_WORDS.get(kind.name, 'a value')}",
                    help=f"read `{read}` itself",
                )
                return
            fields, open_ = kind.fields, kind.open

    def check_options(self, compare: s.Compare) -> None:
        """H405: `review == approv` when `approv` is not one of `review`'s options."""
        if compare.op not in ("==", "!=", "in"):
            return
        for side, other in ((compare.left, compare.right), (compare.right, compare.left)):
            if not isinstance(side, s.Path) or "." in side.text:
                continue
            symbol = self.res.references.get(side.span)
            if symbol is None or symbol.kind != "step" or symbol.name not in self.steps:
                continue
            target = self.steps[symbol.name]
            if target.model.kind != "decide" or not target.model.options:
                continue
            words = other.items if isinstance(other, s.ListLit) else (other,)
            for word in words:
                text: str | None = None
                if isinstance(word, s.Str):
                    text = word.value
                elif isinstance(word, s.Path) and "." not in word.text:
                    found = self.res.references.get(word.span)
                    if found is None or word.text in target.options:
                        text = word.text
                if text is None or text in target.options:
                    continue
                self.misspelt.add(symbol.name)
                options = list(target.model.options)
                secondary = []
                if target.options_span is not None:
                    secondary.append((target.options_span, f"the options of `{symbol.name}`"))
                self.report(
                    "H405",
                    f"`{text}` is not an option of decide step `{symbol.name}`",
                    word.span,
                    "not an option",
                    secondary=secondary,
                    help=did_you_mean(text, options) or f"compare with {_one_of(options)}",
                )
            return

    # -- `when` ------------------------------------------------------------------------------

    def check_when(self) -> None:
        """H408: a step's `when` reads only `input` and step values."""
        for info in self.steps.values():
            if info.node.when is None:
                continue
            for path in _paths(info.node.when):
                if isinstance(path, s.FuncCall):
                    self.report_when(path.span, path.span.text, info, fact=True)
                    continue
                symbol = self.res.references.get(path.span)
                first = path.parts[0]
                if symbol is not None and symbol.kind == "step":
                    continue
                if symbol is None and first == "input":
                    continue
                if symbol is not None or first in BUILTIN_ROOTS:
                    self.report_when(path.span, path.text, info, fact=first != "actor")

    def report_when(self, span: Span, text: str, info: _StepInfo, fact: bool) -> None:
        if fact:
            label = "a runtime fact, not a workflow value"
            help = "wait for facts with a `gate` step, or pass the value in the workflow's `input`"
        else:
            label = "who acts is a question for policy, not for the workflow"
            help = "put authorisation in a policy rule"
        self.report(
            "H408",
            f"the `when` of step `{info.node.name.text}` reads `{text}`",
            span,
            label,
            notes=[
                "a step's `when` reads only `input` and step values: it selects work and "
                "never authorises"
            ],
            help=help,
        )

    # -- compensation bindings ---------------------------------------------------------------

    def check_compensation_bindings(self) -> None:
        """H406: every step a compensation step reads has run before each step that triggers
        it (with AND-joins, its ancestors)."""
        triggers: dict[str, list[tuple[str, s.Name]]] = {}
        for name, info in self.steps.items():
            for target in info.compensates:
                if target.text in self.steps and self.steps[target.text].model.compensation:
                    triggers.setdefault(target.text, []).append((name, target))
        if not triggers:
            return
        ancestors = self.ancestor_bits()
        bit = {name: 1 << info.index for name, info in self.steps.items()}
        for name, pairs in triggers.items():
            refs = self.steps[name].refs
            for trigger, at in pairs:
                bound = ancestors[trigger]
                for ref in refs:
                    if ref.path is None and ref.target == trigger:
                        continue  # `after deploy`: the failure of deploy comes first anyway
                    if bound & bit[ref.target]:
                        continue
                    if ref.target == trigger:
                        label = f"`{trigger}` failed, so it has no value"
                        help = f"read only values of steps that run before `{trigger}`"
                    elif ancestors[ref.target] & bit[trigger]:
                        label = f"`{ref.target}` runs after `{trigger}`"
                        help = f"read only values of steps that run before `{trigger}`"
                    else:
                        label = f"`{ref.target}` does not always run before `{trigger}`"
                        help = (
                            f"make `{trigger}` wait for `{ref.target}` (`after {ref.target}`), "
                            f"or read only values of steps that run before `{trigger}`"
                        )
                    self.report(
                        "H406",
                        f"`{ref.text}` is not bound when `{trigger}` triggers `{name}`",
                        ref.span,
                        label,
                        secondary=[(at.span, f"`{trigger}` triggers `{name}` here")],
                        help=help,
                    )

    def ancestor_bits(self) -> dict[str, int]:
        """Each step → the bit set (by text index) of the steps that always run before it."""
        bits: dict[str, int] = {}
        for node in self.shape.order:
            acc = 0
            for dep in self.steps[node].model.depends_on:
                if dep in self.steps:
                    acc |= bits[dep] | (1 << self.steps[dep].index)
            bits[node] = acc
        return bits

    # -- decide outcomes ---------------------------------------------------------------------

    def check_decide_outcomes(self) -> None:
        """L101 (a note): a decide option that no step's `when` tests ends the run."""
        decides = {
            name: info
            for name, info in self.steps.items()
            if info.model.kind == "decide" and info.model.options and name not in self.misspelt
        }
        if not decides:
            return
        covered: dict[str, set[str]] = {name: set() for name in decides}
        for info in self.steps.values():
            if info.model.when is not None:
                _cover(info.model.when, True, decides, covered)
        for name, info in decides.items():
            for option in info.model.options:
                if option in covered[name] or option not in info.options:
                    continue
                self.report(
                    "L101",
                    f"option `{option}` of decide step `{name}` ends the run",
                    info.options[option].span,
                    "no step's `when` tests this option",
                    notes=[f"when `{name}` answers `{option}`, the run ends with that outcome"],
                    help=f"if that is intended, nothing to do; otherwise add a step with "
                    f"`when {name} == {option}`",
                )


def _cover(
    cond: m.Condition,
    positive: bool,
    decides: dict[str, _StepInfo],
    covered: dict[str, set[str]],
) -> None:
    """Add the options of decide steps that make `cond` true (or false, when not `positive`)."""
    if isinstance(cond, m.And | m.Or):
        for item in cond.items:
            _cover(item, positive, decides, covered)
    elif isinstance(cond, m.Not):
        _cover(cond.item, not positive, decides, covered)
    elif isinstance(cond, m.Compare) and cond.op in ("==", "!=", "in"):
        for side, other in ((cond.left, cond.right), (cond.right, cond.left)):
            if not (
                isinstance(side, m.Path)
                and side.root == "step"
                and len(side.parts) == 1
                and side.parts[0] in decides
            ):
                continue
            options = set(decides[side.parts[0]].model.options)
            items = other.items if isinstance(other, m.ListValue) else (other,)
            words = [_word(i) for i in items]
            if None in words:
                covered[side.parts[0]] |= options  # a value known only at run time
                return
            named = {w for w in words if w is not None}
            chosen = options - named if cond.op == "!=" else named & options
            if not positive:
                chosen = options - chosen
            covered[side.parts[0]] |= chosen
            return


def _word(value: object) -> str | None:
    if isinstance(value, m.EnumMember):
        return value.name
    if isinstance(value, m.Literal) and isinstance(value.value, str):
        return value.value
    return None
