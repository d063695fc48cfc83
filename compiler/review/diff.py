"""`harnessc diff OLD NEW`: what a change to specs will do, before it ships.

Both sides are read and compiled in full (sources.py); each spec pair is compared: the regions
of calls its policies decide differently, each with a witness call (compiler/analysis/
compare.py), and the changes of registry, surfaces, availability and workflow steps
(changes.py); the report (report.py) is printed as text, Markdown, JSON or SARIF.

Exit status: 0 nothing widened; 1 something widened (a call that was denied or asked is now
allowed, or a question the solver left undecided: it may have), or with `--fail-on changed`
anything changed; `--fail-on never` always 0 once both sides compile; 2 a usage error or a side
that does not compile (its diagnostics printed as `check` prints them).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from harnessc.dsl.diagnostics import sort_diagnostics
from harnessc.dsl.render_formats import print_diagnostics
from harnessc.runtime.model import Spec, without_origins

from ..analysis.compare import Comparison, compare_specs
from .changes import spec_changes, step_changes
from .report import DiffReport, SpecDiff, render
from .sources import Side, Sides, SourceError, SpecPair, load_sides

__all__ = [
    "EXIT_CHANGED",
    "EXIT_OK",
    "EXIT_USAGE",
    "FAIL_ON",
    "diff_report",
    "exit_status",
    "run_diff",
]

EXIT_OK, EXIT_CHANGED, EXIT_USAGE = 0, 1, 2
FAIL_ON = ("widened", "changed", "never")


def empty_spec(like: Spec) -> Spec:
    """The spec a side lacks: no tools, no policies, no agents (every call refused)."""
    return Spec(name=like.name, root_module=like.root_module)


def compare_pair(pair: SpecPair) -> SpecDiff:
    """One spec compared on both sides; a side without it is an empty spec."""
    new = pair.new.model if pair.new is not None else None
    old = pair.old.model if pair.old is not None else None
    assert old is not None or new is not None
    old = old if old is not None else empty_spec(new)  # type: ignore[arg-type]
    new = new if new is not None else empty_spec(old)
    status = "added" if pair.old is None else "removed" if pair.new is None else "changed"
    comparison = compare_specs(old, new)
    changes = [*spec_changes(old, new), *step_changes(old, new, comparison)]
    return SpecDiff(pair.shown, status, comparison, changes, _policy_notes(old, new, comparison))


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
    for name in comparison.policies_added:
        notes.append(f"policy `{name}` is new and no agent uses it: no call is decided by it")
    for name in comparison.policies_removed:
        notes.append(f"policy `{name}` is removed; no agent used it")
    return notes


def diff_report(sides: Sides) -> DiffReport:
    """The report of two compiled sides (both must compile)."""
    report = DiffReport(sides.old.described, sides.new.described, notes=list(sides.notes))
    for pair in sides.pairs:
        spec = compare_pair(pair)
        report.specs.append(spec)
        old = pair.old.model if pair.old is not None else None
        new = pair.new.model if pair.new is not None else None
        if old is not None and new is not None and old.root_module != new.root_module:
            report.notes.append(
                f"`{pair.shown}`: the root module is `{old.root_module}` on the old side and "
                f"`{new.root_module}` on the new one, so their policies pair by agent, not by "
                "name; give both the same `harness NAME` header to compare them policy by policy"
            )
    return report


def exit_status(report: DiffReport, fail_on: str) -> int:
    if fail_on == "never":
        return EXIT_OK
    if fail_on == "changed":
        return EXIT_CHANGED if report.changed else EXIT_OK
    return EXIT_CHANGED if report.widened or report.undecided else EXIT_OK


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
