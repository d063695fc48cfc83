"""The report of `harnessc diff`: one `DiffReport` and its four renderings.

- text: for a terminal, spec by spec, grouped by tool, the tools with a widening first;
- markdown: a pull-request comment: a summary table of counts per kind of change, then the
  widening regions, each with its witness call and the old and new winning rules (`file:line`),
  then the other regions and changes (long sections folded in `<details>`);
- json: `"version": 1`, the shape documented in docs/review.md;
- sarif: SARIF 2.1.0, a result per region at the new winning rule (the old one's when the new
  side has none: a tool or an agent removed) and per other change at its declaration.

Every rendering is a function of the report alone, ordered by sorting, never by a set or the
solver's order: the same comparison gives the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harnessc.dsl.render_formats import artifact_location, sarif_envelope

from ..analysis.compare import Comparison, Outcome, Region, UndecidedRegion, call_text
from .changes import CHANGE_KINDS, Change, plural

__all__ = [
    "DiffReport",
    "SpecDiff",
    "change_order",
    "render",
    "render_json",
    "render_markdown",
    "render_sarif",
    "render_text",
    "report_json",
]

FORMATS = ("text", "markdown", "json", "sarif")
_STRENGTH = {"allow": 0, "ask": 1, "deny": 2}
DETAILS_OVER = 10
"""A Markdown section with more entries than this is folded in `<details>`."""


@dataclass
class SpecDiff:
    """One spec compared: `status` is `changed` (on both sides), `added` or `removed` (compared
    against an empty spec)."""

    spec: str
    status: str
    comparison: Comparison
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What the comparison says besides regions and changes (a policy rewritten to the same
    decisions, a policy no agent uses); never a change."""

    @property
    def widened(self) -> bool:
        """A call that was denied or asked is now allowed (a region or a workflow step)."""
        return any(r.widened for r in self.comparison.regions) or any(
            c.widens for c in self.changes
        )

    @property
    def changed(self) -> bool:
        c = self.comparison
        return bool(c.regions or c.undecided or self.changes)

    @property
    def unverified(self) -> int:
        """Regions whose witness the runtime did not decide as the region says: possible
        changes the analysis could not confirm, never widenings."""
        return sum(not r.verified for r in self.comparison.regions)

    def regions(self) -> list[Region]:
        return sorted(self.comparison.regions, key=region_order)

    def undecided(self) -> list[UndecidedRegion]:
        return sorted(
            self.comparison.undecided,
            key=lambda u: (u.tool, u.subject, u.old_rule or "", u.new_rule or "", u.reason),
        )


@dataclass
class DiffReport:
    old: str
    """What the old side is: a revision, a path."""
    new: str
    specs: list[SpecDiff] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def widened(self) -> bool:
        """A call that was denied or asked is now allowed (by a region, or a workflow step)."""
        return any(spec.widened for spec in self.specs)

    @property
    def undecided(self) -> int:
        """Questions the solver did not answer in its budget: possible changes, never none."""
        return sum(len(s.comparison.undecided) for s in self.specs)

    @property
    def unverified(self) -> int:
        """Regions the runtime did not confirm (`SpecDiff.unverified`)."""
        return sum(s.unverified for s in self.specs)

    @property
    def changed(self) -> bool:
        return any(spec.changed for spec in self.specs)

    def counts(self) -> dict[str, int]:
        """How many regions of each change of decision (`deny→allow`, …) and how many changes
        of each other kind, in report order; kinds with none are left out."""
        regions: dict[str, int] = {}
        for spec in self.specs:
            for region in spec.comparison.regions:
                regions[region.change] = regions.get(region.change, 0) + 1
        out = {kind: regions[kind] for kind in sorted(regions, key=change_order)}
        for kind in CHANGE_KINDS:
            count = sum(c.kind == kind for s in self.specs for c in s.changes)
            if count:
                out[kind] = count
        if self.unverified:
            out["unverified"] = self.unverified
        if self.undecided:
            out["undecided"] = self.undecided
        return out


# ---------------------------------------------------------------------------------------------
# Order


def change_order(change: str) -> tuple[int, int, int, str]:
    """Widening changes first (from the strongest old effect), then narrowing ones, then a
    change of approver, grant, expiry or self-approval, then the rest (`deny→ask`)."""
    effects = change.split(" ", 1)[0]
    old, _, new = effects.partition("→")
    a, b = _STRENGTH.get(old, 3), _STRENGTH.get(new, 3)
    if new == "allow" and old in ("deny", "ask"):
        group = 0
    elif b > a:
        group = 1
    elif a == b:
        group = 2
    else:
        group = 3
    # widening: from the strongest old effect; narrowing: to the strongest new one
    return (group, -a, b, change) if group != 1 else (group, -b, a, change)


def region_order(region: Region) -> tuple[Any, ...]:
    return (
        region.tool,
        change_order(region.change),
        region.subject,
        region.old.label,
        region.new.label,
        call_text(region.witness),
    )


def _by_tool(spec: SpecDiff) -> list[tuple[str | None, list[Region], list[Change]]]:
    """Each tool with its regions and changes, tools with a widening first, then by id; last
    (`None`) the changes that concern no one tool (surfaces added or removed)."""
    regions: dict[str, list[Region]] = {}
    for region in spec.regions():
        regions.setdefault(region.tool, []).append(region)
    changes: dict[str | None, list[Change]] = {}
    for change in spec.changes:
        changes.setdefault(change.tool, []).append(change)
    tools = sorted(
        {*regions, *(t for t in changes if t is not None)},
        key=lambda t: (
            not (
                any(r.widened for r in regions.get(t, ()))
                or any(c.widens for c in changes.get(t, ()))
            ),
            t,
        ),
    )
    out: list[tuple[str | None, list[Region], list[Change]]] = [
        (tool, regions.get(tool, []), changes.get(tool, [])) for tool in tools
    ]
    if None in changes:
        out.append((None, [], changes[None]))
    return out


# ---------------------------------------------------------------------------------------------
# Words


def _where(origin: str | None) -> str:
    """`file:line` of a `file:line:column`."""
    if not origin:
        return "no source line"
    head, _, column = origin.rpartition(":")
    return head if column.isdigit() and head else origin


def outcome_text(outcome: Outcome, other: Outcome | None = None) -> str:
    """`ask (approver role "owner"; grant once ttl 15m; expires 4h)`, `allow`, `deny`; with
    `self-approval allow|deny` when the `other` side is an ASK whose self-approval differs
    (every ASK has one, most often the runtime's default by risk, so it is named only where it
    changed)."""
    extra = []
    if outcome.approvers:
        extra.append("approver " + ", ".join(outcome.approvers))
    if outcome.grant:
        extra.append(f"grant {outcome.grant}")
    if outcome.expires:
        extra.append(f"expires {outcome.expires}")
    mine, theirs = outcome.self_approval, other.self_approval if other is not None else None
    if mine and theirs and mine != theirs:
        extra.append(f"self-approval {outcome.self_approval}")
    return f"{outcome.effect} ({'; '.join(extra)})" if extra else outcome.effect


def winner_text(outcome: Outcome) -> str:
    """How the decision was made: `by `main.freeze` (main.harness:12)`, `by the default of
    `main` (…)`, or `refused: <why>` when no rule judged the call."""
    if outcome.refused:
        return f"refused: {outcome.reason}" if outcome.reason else "refused before any rule"
    if outcome.rule is None:
        return f"by the default of `{outcome.policy}` ({_where(outcome.origin)})"
    return f"by `{outcome.rule}` ({_where(outcome.origin)})"


def _subject(region: Region) -> str:
    return region.subject


def _spec_summary(spec: SpecDiff) -> str:
    regions = spec.comparison.regions
    widened = sum(r.widened for r in regions)
    text = f"{plural(len(regions), 'region')} of calls decided differently"
    marks = [f"{widened} widened"] if widened else []
    marks += [f"{spec.unverified} unverified"] if spec.unverified else []
    if marks:
        text += f" ({', '.join(marks)})"
    text += f", {plural(len(spec.changes), 'other change')}"
    if spec.comparison.undecided:
        text += f", {plural(len(spec.comparison.undecided), 'undecided question')}"
    status = {"added": " (added: compared against an empty spec)", "removed": " (removed)"}
    return text + status.get(spec.status, "")


def _headline(report: DiffReport) -> str:
    if report.widened:
        return "something widened: a call that was denied or asked is now allowed"
    if report.unverified:
        return (
            "nothing verified widened; the runtime did not confirm some regions, "
            "which may change decisions"
        )
    if report.undecided:
        return "nothing widened among the answered questions; some questions are undecided"
    if report.changed:
        return "nothing widened"
    return "no call is decided differently and nothing else changed"


# ---------------------------------------------------------------------------------------------
# Text


def render_text(report: DiffReport) -> str:
    out = [f"harnessc diff: {report.old} → {report.new}", _headline(report)]
    for spec in report.specs:
        out += ["", f"== {spec.spec}: {_spec_summary(spec)}"]
        for tool, regions, changes in _by_tool(spec):
            out.append("")
            out.append(tool if tool is not None else "other changes")
            for region in regions:
                mark = "WIDENED " if region.widened else "" if region.verified else "UNVERIFIED "
                out.append(f"  {mark}{region.change}  [{_subject(region)}]")
                out.append(
                    f"    old: {outcome_text(region.old, region.new)}, {winner_text(region.old)}"
                )
                out.append(
                    f"    new: {outcome_text(region.new, region.old)}, {winner_text(region.new)}"
                )
                out.append(f"    e.g. {call_text(region.witness)}")
                out += [f"    note: {note}" for note in _region_notes(region)]
            for change in changes:
                out.append(f"  {change.kind}: {change.summary}")
                out += [f"    {line}" for line in change.details]
        for question in spec.undecided():
            out.append(f"  undecided: {_undecided_text(question)}")
        if spec.notes:
            out += ["", *(f"note: {note}" for note in spec.notes)]
    if report.notes:
        out += ["", *(f"note: {note}" for note in report.notes)]
    counts = report.counts()
    out += ["", "summary: " + (", ".join(f"{n} {k}" for k, n in counts.items()) or "no changes")]
    return "\n".join(out) + "\n"


def _region_notes(region: Region) -> list[str]:
    """The comparison's notes on a region; an unverified one without a note says so."""
    if region.verified or region.notes:
        return list(region.notes)
    return ["the runtime did not decide this witness under both specs"]


def _undecided_text(question: UndecidedRegion) -> str:
    rules = ""
    if question.old_rule or question.new_rule:
        rules = f" (old {question.old_rule or 'default'}, new {question.new_rule or 'default'})"
    return (
        f"`{question.tool}` [{question.subject}]{rules}: the solver gave no answer "
        f"({question.reason}); it may change"
    )


# ---------------------------------------------------------------------------------------------
# Markdown


def md_code(text: str, cell: bool = True) -> str:
    # loaded when Markdown is rendered: the code generator's package loads Jinja and its plan
    from ..codegen.escape import md_code

    return md_code(text, cell)


def md_text(text: str | None) -> str:
    from ..codegen.escape import md_text

    return md_text(text)


def _folded(title: str, lines: list[str], count: int) -> list[str]:
    if count <= DETAILS_OVER:
        return [title, "", *lines, ""]
    summary = title.lstrip("#").strip()
    return ["<details>", f"<summary>{summary}</summary>", "", *lines, "", "</details>", ""]


def _md_region(spec: str, region: Region) -> list[str]:
    tool = md_code(region.tool, cell=False)
    kind, _, name = region.subject.partition(" ")
    subject = f"{md_text(kind)} {md_code(name, cell=False)}" if name else md_text(kind)
    title = f"**{tool}** {md_text(region.change)} — {subject}"
    if not region.verified:
        title = f"{title} — unverified"
    if spec:
        title += f" — {md_code(spec, cell=False)}"
    lines = [
        f"- {title}",
        f"  - witness: {md_code(call_text(region.witness), cell=False)}",
        f"  - old: **{md_text(outcome_text(region.old, region.new))}**, {_md_winner(region.old)}",
        f"  - new: **{md_text(outcome_text(region.new, region.old))}**, {_md_winner(region.new)}",
    ]
    lines += [f"  - note: {_md_words(note)}" for note in _region_notes(region)]
    return lines


def _md_winner(outcome: Outcome) -> str:
    if outcome.refused:
        return _md_words(winner_text(outcome))
    where = md_code(_where(outcome.origin), cell=False)
    if outcome.rule is None:
        return f"by the default of {md_code(outcome.policy or '', cell=False)} ({where})"
    return f"by {md_code(outcome.rule, cell=False)} ({where})"


def _md_words(text: str) -> str:
    """Text whose `quoted` parts are names or code, as Markdown: those parts as inline code,
    the rest escaped (unbalanced backticks: all of it escaped)."""
    parts = text.split("`")
    if len(parts) % 2 == 0:
        return md_text(text)
    return "".join(
        md_code(part, cell=False) if i % 2 else md_text(part) for i, part in enumerate(parts)
    )


def _md_change(spec: str, change: Change) -> list[str]:
    where = (
        f" ({md_code(f'{change.origin.file}:{change.origin.line}', cell=False)})"
        if change.origin
        else ""
    )
    named = f" — {md_code(spec, cell=False)}" if spec else ""
    lines = [f"- {md_text(change.kind)}: {_md_words(change.summary)}{where}{named}"]
    lines += [f"  - {_md_words(line)}" for line in change.details]
    return lines


MARKDOWN_BUDGET = 60_000
"""Characters a Markdown report aims to stay under: GitHub keeps 65,536 of a comment."""
NAMES_WHEN_CUT = 10
"""Tools named per group of regions once a report is cut to fit."""
ENTRIES_WHEN_CUT = 40
"""Entries of each section after the widening one once a report is cut further."""


def _md_group(spec: str, regions: list[Region], names: int | None) -> list[str]:
    """Regions of one kind — the same change between the same winning rules — for several
    tools: the winners once, one witness, every tool (the first `names` when cut)."""
    if len(regions) == 1:
        return _md_region(spec, regions[0])
    first = regions[0]
    kind, _, name = first.subject.partition(" ")
    subject = f"{md_text(kind)} {md_code(name, cell=False)}" if name else md_text(kind)
    title = f"**{len(regions)} tools** {md_text(first.change)} — {subject}"
    if spec:
        title += f" — {md_code(spec, cell=False)}"
    tools = [md_code(r.tool, cell=False) for r in regions]
    listed = _listed(tools, names)
    # regions grouped by their new winner only may come from several old winners
    olds: dict[tuple[Any, ...], Outcome] = {}
    for region in regions:
        olds.setdefault(
            (region.old.label, region.old.origin, outcome_text(region.old, region.new)), region.old
        )
    if len(olds) == 1:
        old = f"**{md_text(outcome_text(first.old, first.new))}**, {_md_winner(first.old)}"
    else:
        effects = " or ".join(
            sorted({f"**{md_text(outcome_text(o, first.new))}**" for o in olds.values()})
        )
        winners = _listed([_md_winner(o) for o in olds.values()], names)
        old = f"{effects}, {len(olds)} ways: {winners}"
    lines = [
        f"- {title}",
        f"  - old: {old}",
        f"  - new: **{md_text(outcome_text(first.new, first.old))}**, {_md_winner(first.new)}",
        f"  - witness: {md_code(call_text(first.witness), cell=False)}",
        f"  - tools: {listed}",
    ]
    unverified = sum(not r.verified for r in regions)
    if unverified:
        lines.append(
            f"  - note: the runtime did not confirm the witness of {unverified} of them "
            "(`--format text` shows each)"
        )
    return lines


def _listed(items: list[str], names: int | None) -> str:
    listed = ", ".join(items if names is None else items[:names])
    if names is not None and len(items) > names:
        listed += f" and {len(items) - names} more"
    return listed


def _grouped(
    pairs: list[tuple[str, Region]], coarse: bool = False
) -> list[tuple[str, list[Region]]]:
    """Regions by kind — spec, change, subject, both winners and outcomes (`coarse`: the new
    winner and outcome only) — in order of the first of each."""
    groups: dict[tuple[Any, ...], tuple[str, list[Region]]] = {}
    for spec, region in pairs:
        key: tuple[Any, ...] = (
            spec,
            region.change,
            region.subject,
            region.new.label,
            region.new.origin,
            outcome_text(region.new, region.old),
        )
        if not coarse:
            key += (region.old.label, region.old.origin, outcome_text(region.old, region.new))
        groups.setdefault(key, (spec, []))[1].append(region)
    return list(groups.values())


def _cut(entries: list[list[str]], limit: int | None, what: str) -> list[str]:
    """The lines of the first `limit` entries, and how many more there are."""
    if limit is None or len(entries) <= limit:
        return [line for entry in entries for line in entry]
    kept = [line for entry in entries[:limit] for line in entry]
    return [*kept, f"- … and {len(entries) - limit} more {what}"]


def render_markdown(report: DiffReport) -> str:
    """The report as a pull-request comment, within `MARKDOWN_BUDGET` characters where it
    can be: first every region and change (regions of one kind grouped), then with each
    group's tools cut to `NAMES_WHEN_CUT`, then grouped by new winner alone (a new rule that
    decides calls several rules decided), then every section but the widening one cut to
    `ENTRIES_WHEN_CUT` entries; a cut report says so."""
    text = _markdown(report, None, None)
    for coarse, entries in ((False, None), (True, None), (True, ENTRIES_WHEN_CUT)):
        if len(text) <= MARKDOWN_BUDGET:
            break
        text = _markdown(report, NAMES_WHEN_CUT, entries, coarse)
    return text


def _markdown(
    report: DiffReport, names: int | None, entries: int | None, coarse: bool = False
) -> str:
    icon = "⚠️" if report.widened else ("❔" if report.undecided or report.unverified else "✅")
    out = [
        f"## harnessc diff: {md_code(report.old, cell=False)} → {md_code(report.new, cell=False)}",
        "",
        f"{icon} **{md_text(_headline(report))}**",
        "",
    ]
    counts = report.counts()
    if counts:
        out += ["| change | count |", "|---|---:|"]
        out += [f"| {md_code(kind)} | {n} |" for kind, n in counts.items()]
        out.append("")
    if len(report.specs) > 1 or any(s.status != "changed" for s in report.specs):
        out += [
            f"- {md_code(s.spec, cell=False)}: {md_text(_spec_summary(s))}" for s in report.specs
        ]
        out.append("")
    if names is not None:
        out += [
            "> This report is cut to fit a pull-request comment; `harnessc diff --format json` "
            "lists every region and change.",
            "",
        ]
    # a spec's name is shown on each entry only when several specs were compared
    many = len(report.specs) > 1
    pairs = [(s.spec if many else "", r) for s in report.specs for r in s.regions()]
    widening = _grouped([(s, r) for s, r in pairs if r.widened], coarse)
    step_widening = [
        (s.spec if many else "", c) for s in report.specs for c in s.changes if c.widens
    ]
    if widening or step_widening:
        lines = [line for s, group in widening for line in _md_group(s, group, names)]
        lines += [line for s, c in step_widening for line in _md_change(s, c)]
        out += ["### Widening: now allowed", "", *lines, ""]
    others = _grouped(
        sorted(
            [(s, r) for s, r in pairs if not r.widened],
            key=lambda p: (change_order(p[1].change), p[1].tool, region_order(p[1])),
        ),
        coarse,
    )
    if others:
        count = sum(len(group) for _, group in others)
        found = [_md_group(s, group, names) for s, group in others]
        lines = _cut(found, entries, "kinds of calls decided differently")
        out += _folded(f"### Other calls decided differently ({count})", lines, len(found))
    rest = [(s.spec if many else "", c) for s in report.specs for c in s.changes if not c.widens]
    if rest:
        lines = _cut([_md_change(s, c) for s, c in rest], entries, "changes")
        title = f"### Registry, surfaces, availability and workflows ({len(rest)})"
        out += _folded(title, lines, len(rest))
    undecided = [(s, u) for s in report.specs for u in s.undecided()]
    if undecided:
        found = [[f"- {_md_words(_undecided_text(u))}"] for _, u in undecided]
        lines = _cut(found, entries, "undecided questions")
        out += _folded(f"### Undecided ({len(undecided)})", lines, len(undecided))
    notes = [*report.notes, *(n for spec in report.specs for n in spec.notes)]
    if notes:
        out += [f"> {_md_words(note)}  " for note in notes]
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


# ---------------------------------------------------------------------------------------------
# JSON


_MACHINE_STATS = ("version", "queries", "cache_hits", "seconds", "counts")
"""Left out of a spec's `comparison` in JSON: the report's own `version` and `counts` say
them, and the solver's work varies with the cache (same input, same bytes)."""


def report_json(report: DiffReport) -> dict[str, Any]:
    specs = []
    for spec in report.specs:
        comparison = {k: v for k, v in spec.comparison.to_dict().items() if k not in _MACHINE_STATS}
        comparison["regions"] = [r.to_dict() for r in spec.regions()]
        comparison["undecided"] = [u.to_dict() for u in spec.undecided()]
        specs.append(
            {
                "spec": spec.spec,
                "status": spec.status,
                **comparison,
                "widened": spec.widened,
                "changed": spec.changed,
                "changes": [c.to_dict() for c in spec.changes],
                "notes": list(spec.notes),
            }
        )
    return {
        "version": 1,
        "old": report.old,
        "new": report.new,
        "widened": report.widened,
        "changed": report.changed,
        "undecided": report.undecided,
        "unverified": report.unverified,
        "counts": report.counts(),
        "specs": specs,
        "notes": list(report.notes),
    }


def render_json(report: DiffReport) -> str:
    return json.dumps(report_json(report), indent=2, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------------------------------------
# SARIF

_SARIF_RULES: tuple[tuple[str, str, str], ...] = (
    ("widened", "warning", "a call that was denied or asked is now allowed"),
    ("narrowed", "note", "a call is decided more strictly (allow→ask, allow→deny, ask→deny)"),
    (
        "decision-changed",
        "note",
        "a call is decided differently: another approver, grant, expiry or self-approval, "
        "or deny→ask",
    ),
    ("undecided", "warning", "the solver did not answer whether some calls change decision"),
    (
        "unverified",
        "warning",
        "the solver claims calls are decided differently, and the runtime did not confirm the "
        "witness: a possible change, never counted as a widening",
    ),
    *((kind, "note", meaning) for kind, meaning in CHANGE_KINDS.items()),
)


def _sarif_physical(origin: str | None) -> dict[str, Any] | None:
    if not origin:
        return None
    parts = origin.rsplit(":", 2)
    if len(parts) != 3 or not (parts[1].isdigit() and parts[2].isdigit()):
        return {"physicalLocation": {"artifactLocation": artifact_location(origin)}}
    path, line, column = parts[0], int(parts[1]), int(parts[2])
    return {
        "physicalLocation": {
            "artifactLocation": artifact_location(path),
            "region": {"startLine": line, "startColumn": column},
        }
    }


def _region_rule(region: Region) -> str:
    if not region.verified:
        return "unverified"
    if region.widened:
        return "widened"
    return "narrowed" if region.narrowed else "decision-changed"


def render_sarif(report: DiffReport) -> str:
    from harnessc import __version__

    ids = [rule for rule, _, _ in _SARIF_RULES]
    level = {rule: lvl for rule, lvl, _ in _SARIF_RULES}
    rules = [
        {
            "id": f"harnessc-diff/{rule}",
            "name": rule,
            "shortDescription": {"text": meaning},
            "helpUri": "docs/review.md",
            "defaultConfiguration": {"level": lvl},
        }
        for rule, lvl, meaning in _SARIF_RULES
    ]
    results: list[dict[str, Any]] = []

    def add(
        rule: str,
        text: str,
        location: dict[str, Any] | None,
        props: dict[str, Any],
        widens: bool = False,
    ) -> None:
        result: dict[str, Any] = {
            "ruleId": f"harnessc-diff/{rule}",
            "ruleIndex": ids.index(rule),
            "level": level["widened"] if widens else level[rule],
            "message": {"text": text},
            "properties": props,
        }
        if location is not None:
            result["locations"] = [location]
        results.append(result)

    for spec in report.specs:
        for region in spec.regions():
            where = region.new.origin if region.new.origin and not region.new.refused else None
            location = _sarif_physical(where or region.old.origin)
            text = (
                f"{region.tool}: {region.change} [{region.subject}]; old "
                f"{outcome_text(region.old, region.new)}, {winner_text(region.old)}; new "
                f"{outcome_text(region.new, region.old)}, {winner_text(region.new)}; e.g. "
                f"{call_text(region.witness)}"
            )
            add(_region_rule(region), text, location, {"spec": spec.spec, **region.to_dict()})
        for change in spec.changes:
            origin = change.origin
            where = f"{origin.file}:{origin.line}:{origin.column}" if origin else None
            text = "; ".join([change.summary, *change.details])
            props = {"spec": spec.spec, **change.to_dict()}
            add(change.kind, text, _sarif_physical(where), props, change.widens)
        for question in spec.undecided():
            add(
                "undecided",
                _undecided_text(question),
                None,
                {"spec": spec.spec, **question.to_dict()},
            )
    log = sarif_envelope(rules, results, __version__)
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


RENDERERS: dict[str, Callable[[DiffReport], str]] = {
    "text": render_text,
    "markdown": render_markdown,
    "json": render_json,
    "sarif": render_sarif,
}


def render(report: DiffReport, fmt: str) -> str:
    return RENDERERS[fmt](report)
