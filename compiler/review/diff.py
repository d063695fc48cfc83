"""`harnessc diff OLD NEW`: what a change to specs will do, before it ships.

Both sides are read and compiled in full (sources.py); each spec pair is compared: the regions
of calls its policies decide differently, each with a witness call (compiler/analysis/
compare.py), and the changes of registry, surfaces, availability and workflow steps
(changes.py); the report (report.py) is printed as text, Markdown, JSON or SARIF.

Exit status: 0 nothing widened and nothing left unconfirmed; 1 a verified widening (a call that
was denied or asked is now allowed, and the runtime decides the witness so under both specs),
or with `--fail-on changed` anything changed; 2 a usage error or a side that does not compile
(its diagnostics printed as `check` prints them); 3 no verified widening, but a region whose
witness the runtime did not confirm or a question the solver left undecided (either may
change decisions: never reported as a widening); `--fail-on never` always 0 once both sides
compile.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from harnessc.dsl.diagnostics import sort_diagnostics
from harnessc.dsl.render_formats import print_diagnostics
from harnessc.runtime.model import Policy, Spec, Tool, Workflow, without_origins

from ..analysis.compare import Comparison, compare_specs
from ..analysis.concrete import Call
from ..pipeline import paused_gc
from .changes import spec_changes, step_changes
from .report import DiffReport, SpecDiff, render
from .sources import Side, Sides, SourceError, load_sides

__all__ = [
    "EXIT_CHANGED",
    "EXIT_OK",
    "EXIT_UNVERIFIED",
    "EXIT_USAGE",
    "FAIL_ON",
    "diff_report",
    "exit_status",
    "run_diff",
]

EXIT_OK, EXIT_CHANGED, EXIT_USAGE, EXIT_UNVERIFIED = 0, 1, 2, 3
FAIL_ON = ("widened", "changed", "never")


def empty_spec(like: Spec) -> Spec:
    """The spec a side lacks: no tools, no policies, no agents (every call refused)."""
    return Spec(name=like.name, root_module=like.root_module)


def compare_pair(shown: str, old: Spec | None, new: Spec | None) -> SpecDiff:
    """One spec compared on both sides; a side without it (None) is an empty spec."""
    status = "added" if old is None else "removed" if new is None else "changed"
    if old is None:
        assert new is not None
        old = empty_spec(new)
    if new is None:
        new = empty_spec(old)
    comparison = compare_specs(old, new)
    for region in comparison.regions:
        _canonical(region.witness, new.tools.get(region.tool) or old.tools.get(region.tool))
    changes = [*spec_changes(old, new), *step_changes(old, new, comparison)]
    return SpecDiff(shown, status, comparison, changes, _policy_notes(old, new, comparison))


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def _canonical(call: Call, tool: Tool | None) -> None:
    """Put a witness's values in one order whether the solver found it or the analysis cache
    kept it (which sorts keys): arguments as the tool's schema lists them, every other
    mapping sorted (same input, same bytes)."""
    order = {f.name: i for i, f in enumerate(tool.input.fields)} if tool is not None else {}
    call.args = {
        k: _sorted(call.args[k])
        for k in sorted(call.args, key=lambda k: (order.get(k, len(order)), k))
    }
    for name in (
        "actor",
        "resource",
        "facts",
        "task",
        "env",
        "execution",
        "connections",
        "runtimes",
        "session",
        "sources",
    ):
        setattr(call, name, _sorted(getattr(call, name)))


def _policy_notes(old: Spec, new: Spec, comparison: Comparison) -> list[str]:
    """What the comparison says about policies besides its regions: a policy rewritten that
    decides every call as before, a policy on one side only that no agent uses."""
    notes = []
    changed = {r.old_policy for r in comparison.regions} | {
        r.new_policy for r in comparison.regions
    }
    changed |= {u.subject.removeprefix("policy ") for u in comparison.undecided}
    for name in sorted(old.policies.keys() & new.policies.keys()):
        if name in changed:
            continue
        if without_origins(old.policies[name]) != without_origins(new.policies[name]):
            notes.append(f"policy `{name}` is rewritten and decides every call as before")
    # a policy an agent uses is compared as that agent's (subject `agent NAME`)
    for name in comparison.policies_added:
        if name not in _used_policies(new):
            notes.append(f"policy `{name}` is new and no agent uses it: no call is decided by it")
    for name in comparison.policies_removed:
        if name not in _used_policies(old):
            notes.append(f"policy `{name}` is removed; no agent used it")
    return notes


def _used_policies(spec: Spec) -> set[str]:
    """The policies that judge calls: an agent's, a workflow's, a skill's profile."""
    named = [a.policy for a in spec.agents.values()]
    named += [w.policy for w in spec.workflows.values()]
    named += [s.profile for s in spec.skills.values()]
    return {p.name for n in named if n and (p := spec.policy(n)) is not None}


_REFERENCES: dict[str, tuple[str, ...]] = {
    "surfaces": ("name",),
    "risk_tables": ("name",),
    "policies": ("name", "includes"),
    "skills": ("name", "profile"),
    "agents": ("name", "surface", "policy", "delegates", "skills"),
    "workflows": ("name", "agent", "policy"),
    "tests": ("name", "policy", "agent"),
}
"""The module-scoped kinds of a spec (language.md §2), keyed `module.name`, and the fields of
each that hold such a name (besides `Policy.default.table`, `Rule.policy`, `Step.agent` and
`Tool.skill`)."""


def renamed_root(spec: Spec, root: str) -> Spec | None:
    """`spec` with its root module named `root`: every module-scoped name of the root module
    (`old.main` → `root.main`), as a declaration and wherever it is referenced; tool ids and
    facts are global and stay. None when another module of the spec is already named `root`."""
    before = spec.root_module + "."
    modules = {t.module for t in spec.tools.values()}
    modules |= {key.rpartition(".")[0] for kind in _REFERENCES for key in getattr(spec, kind)}
    if root in modules - {spec.root_module}:
        return None

    def name(value: Any) -> Any:
        if isinstance(value, tuple):
            return tuple(name(v) for v in value)
        if isinstance(value, str) and value.startswith(before):
            return root + "." + value[len(before) :]
        return value

    def nested(item: Any) -> dict[str, Any]:
        if isinstance(item, Policy):
            d = item.default
            return {
                "default": d.model_copy(update={"table": name(d.table)}) if d else None,
                "rules": tuple(r.model_copy(update={"policy": name(r.policy)}) for r in item.rules),
            }
        if isinstance(item, Workflow):
            return {
                "steps": tuple(s.model_copy(update={"agent": name(s.agent)}) for s in item.steps)
            }
        return {}

    update: dict[str, Any] = {
        kind: {
            name(key): item.model_copy(
                update={**{f: name(getattr(item, f)) for f in fields}, **nested(item)}
            )
            for key, item in getattr(spec, kind).items()
        }
        for kind, fields in _REFERENCES.items()
    }
    update["root_module"] = root
    update["tools"] = {
        k: t.model_copy(
            update={
                "module": root if t.module == spec.root_module else t.module,
                "skill": name(t.skill),
            }
        )
        for k, t in spec.tools.items()
    }
    return spec.model_copy(update=update)


def diff_report(sides: Sides) -> DiffReport:
    """The report of two compiled sides (both must compile)."""
    report = DiffReport(sides.old.described, sides.new.described, notes=list(sides.notes))
    for pair in sides.pairs:
        old = pair.old.model if pair.old is not None else None
        new = pair.new.model if pair.new is not None else None
        if old is not None and new is not None and old.root_module != new.root_module:
            renamed = renamed_root(old, new.root_module)
            if renamed is None:
                report.notes.append(
                    f"`{pair.shown}`: the root module is `{old.root_module}` on the old side and "
                    f"`{new.root_module}` on the new one, which another module of the old side "
                    "is named: policies pair by agent, not by name"
                )
            else:
                report.notes.append(
                    f"`{pair.shown}`: the root module is `{old.root_module}` on the old side and "
                    f"`{new.root_module}` on the new one: its names are paired as the new side's"
                )
                old = renamed
        report.specs.append(compare_pair(pair.shown, old, new))
    return report


def exit_status(report: DiffReport, fail_on: str) -> int:
    if fail_on == "never":
        return EXIT_OK
    if fail_on == "changed":
        return EXIT_CHANGED if report.changed else EXIT_OK
    if report.widened:
        return EXIT_CHANGED
    return EXIT_UNVERIFIED if report.unverified or report.undecided else EXIT_OK


def _print_failed(side: Side, stream: TextIO) -> None:
    stream.write(f"harnessc diff: the {side.which} side ({side.described}) does not compile\n")
    diagnostics = sort_diagnostics(d for b in side.builds.values() for d in b.diagnostics)
    print_diagnostics(diagnostics, "human", stream)


def run_diff(
    targets: Sequence[str],
    fmt: str = "text",
    fail_on: str = "widened",
    out: str | None = None,
    cwd: str | Path | None = None,
) -> int:
    """The command: read, compile and compare both sides, print or write the report, and
    return the exit status."""
    # both sides' models live until the report is written: the collector would rescan them
    # at every full collection (pipeline.paused_gc)
    with paused_gc():
        try:
            sides = load_sides(targets, cwd)
        except SourceError as error:
            sys.stderr.write(f"harnessc: {error}\n")
            return EXIT_USAGE
        failed = [side for side in (sides.old, sides.new) if side.failed]
        for side in failed:
            _print_failed(side, sys.stderr)
        if failed:
            return EXIT_USAGE
        report = diff_report(sides)
        text = render(report, fmt)
    if out is None:
        sys.stdout.write(text)
    else:
        try:
            Path(out).write_text(text, encoding="utf-8")
        except OSError as error:
            reason = (error.strerror or str(error)).lower()
            sys.stderr.write(f"harnessc: cannot write `{out}`: {reason}\n")
            return EXIT_USAGE
    return exit_status(report, fail_on)
