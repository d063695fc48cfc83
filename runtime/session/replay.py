"""Replay: every recorded decision of an event log decided again under another spec.

    from harnessc.runtime import Spec
    from harnessc.runtime.session.replay import replay
    from harnessc.runtime.log.open import open_store

    report = replay(open_store("events.db", readonly=True), Spec.from_json(text))
    report.flipped, report.widened, report.to_dict()

Each decision is read with what it saw (`runtime/session/recorded.py`: the same frozen call, actor,
task, facts and session state as of its position) and judged by the new spec's policies for
its session (its agent's policy there; in a skill session the parent's policies and the
skill's profile) through the one judging function sessions use (`judge_policies`). Grants are
not consulted: a decision's effect is the policies' own (an ASK stays an ASK, approved or
not), as the log records it. A decision flips when its effect changes; it widens when a call
that was denied or asked is now allowed. A decision whose effect stays and whose winning rule
changes is counted apart (`rule_changed`; unlabelled rules are named by their place, which an
added rule shifts).

A decision that cannot be decided again faithfully is never guessed: it is counted, by reason,
under `not_replayed` (`redacted`: the log withheld a secret argument or an `env` value;
`agent-not-in-spec`, `skill-not-in-spec`, `tool-not-in-spec`, `policy-not-in-spec`;
`session-not-recorded`, `call-not-recorded`: the log lacks the record, as a truncated log
does). A log that cannot be read to its end gives the report of what was read, with
`incomplete` saying where and why.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..judge.policy import Decider, Decision, PolicyEngine, UnknownPolicyError
from ..log.events import UnreadableEvent
from ..log.open import open_store
from ..log.store import EventStore
from ..model.ir import Spec
from .calls import judge_policies
from .recorded import PAGE, RecordedDecision, policies_in, read_decisions

__all__ = [
    "FIRST",
    "Change",
    "Group",
    "ReplayReport",
    "Replayer",
    "Unreplayable",
    "change_kind",
    "merged",
    "replay",
]

FIRST = 20
"""How many decision ids a group lists (its count is exact)."""


def change_kind(old: str, new: str) -> str:
    """`allow→ask`, `deny→allow`, … (`old→new`)."""
    return f"{old}→{new}"


def widens(old: str, new: str) -> bool:
    """A call that was denied or asked is now allowed."""
    return new == "allow" and old in ("deny", "ask")


@dataclass
class Group:
    """Decisions that changed alike (or were not replayed for one reason): how many, and the
    first `FIRST` of them as (event position, decision id)."""

    count: int = 0
    first: list[tuple[int, str]] = field(default_factory=list)

    def add(self, d: RecordedDecision, keep: int) -> None:
        self.count += 1
        if len(self.first) < keep:
            self.first.append((d.position, d.decision_id))

    def to_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "decisions": [{"position": p, "decision_id": i} for p, i in self.first],
        }


@dataclass(frozen=True)
class Change:
    """What a group of changed decisions shares: the tool, the old and new effect and
    winning rule (and policy)."""

    tool_id: str
    old_effect: str
    new_effect: str
    old_rule: str | None
    new_rule: str | None
    new_policy: str | None
    new_origin: str | None = None
    """Where the new winning rule (or default) is written: `file:line`."""

    @property
    def kind(self) -> str:
        return change_kind(self.old_effect, self.new_effect)

    @property
    def widened(self) -> bool:
        return widens(self.old_effect, self.new_effect)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool_id": self.tool_id,
            "kind": self.kind,
            "widened": self.widened,
            "old": {"effect": self.old_effect, "rule": self.old_rule},
            "new": {
                "effect": self.new_effect,
                "rule": self.new_rule,
                "policy": self.new_policy,
                "origin": self.new_origin,
            },
        }


@dataclass
class ReplayReport:
    """What replaying a log under a spec found. `to_dict()` is the stable JSON shape
    (`"version": 1`) that `harnessc replay --format json` prints."""

    spec: str
    policy_version: str
    decisions: int = 0
    replayed: int = 0
    unchanged: int = 0
    flips: dict[Change, Group] = field(default_factory=dict)
    """Effect changes, by tool, old and new effect and rule."""
    rule_changes: dict[Change, Group] = field(default_factory=dict)
    """Same effect, another winning rule."""
    not_replayed: dict[tuple[str, str], Group] = field(default_factory=dict)
    """By (reason code, detail): `("redacted", "vault.put $.value")`."""
    policy_versions: dict[str, int] = field(default_factory=dict)
    """The recorded policy versions, with how many decisions each made."""
    last_position: int = 0
    incomplete: str | None = None
    """Why the log could not be read to its end (the report covers what was read)."""

    @property
    def flipped(self) -> int:
        return sum(g.count for g in self.flips.values())

    @property
    def widened(self) -> int:
        return sum(g.count for c, g in self.flips.items() if c.widened)

    @property
    def skipped(self) -> int:
        return sum(g.count for g in self.not_replayed.values())

    @property
    def rule_changed(self) -> int:
        return sum(g.count for g in self.rule_changes.values())

    def by_tool(self) -> dict[str, dict[str, int]]:
        """Per tool, the flips per change kind."""
        out: dict[str, dict[str, int]] = {}
        for change, group in self.flips.items():
            kinds = out.setdefault(change.tool_id, {})
            kinds[change.kind] = kinds.get(change.kind, 0) + group.count
        return dict(sorted(out.items()))

    def by_kind(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for change, group in self.flips.items():
            out[change.kind] = out.get(change.kind, 0) + group.count
        return dict(sorted(out.items()))

    def to_dict(self) -> dict[str, Any]:
        def changes(groups: dict[Change, Group]) -> list[dict[str, Any]]:
            ordered = sorted(groups.items(), key=lambda kv: (-kv[1].count, kv[0].tool_id))
            return [{**c.to_dict(), **g.to_dict()} for c, g in ordered]

        return {
            "version": 1,
            "spec": self.spec,
            "policy_version": self.policy_version,
            "totals": {
                "decisions": self.decisions,
                "replayed": self.replayed,
                "unchanged": self.unchanged,
                "flipped": self.flipped,
                "widened": self.widened,
                "rule_changed": self.rule_changed,
                "not_replayed": self.skipped,
            },
            "by_kind": self.by_kind(),
            "by_tool": self.by_tool(),
            "flips": changes(self.flips),
            "rule_changes": changes(self.rule_changes),
            "not_replayed": [
                {"reason": reason, "detail": detail, **g.to_dict()}
                for (reason, detail), g in sorted(
                    self.not_replayed.items(), key=lambda kv: (-kv[1].count, kv[0])
                )
            ],
            "recorded_policy_versions": dict(sorted(self.policy_versions.items())),
            "last_position": self.last_position,
            "incomplete": self.incomplete,
        }


@dataclass(frozen=True)
class Unreplayable:
    """Why a recorded decision cannot be decided again: a reason code and its detail."""

    reason: str
    detail: str


class Replayer:
    """Decides recorded decisions again under one spec: its engine (deciders compiled once),
    the policies of each recorded session lineage (computed once per lineage)."""

    def __init__(self, spec: Spec, engine: PolicyEngine | None = None) -> None:
        self.spec = spec
        self.engine = engine if engine is not None else PolicyEngine(spec)
        self._policies: dict[tuple[Any, ...], tuple[str, ...] | Unreplayable] = {}
        self._deciders: dict[str, Decider] = {}

    def decider(self, policy_name: str) -> Decider:
        """The engine's compiled policy, looked up once per name."""
        found = self._deciders.get(policy_name)
        if found is None:
            found = self._deciders[policy_name] = self.engine.decider(policy_name)
        return found

    def policies(self, d: RecordedDecision) -> tuple[str, ...] | Unreplayable:
        """The policies that judge `d` under the spec, or why none do."""
        found = self._policies.get(d.lineage)
        if found is None:
            found = self._policies[d.lineage] = self._find(d)
        return found

    def _find(self, d: RecordedDecision) -> tuple[str, ...] | Unreplayable:
        got = policies_in(self.spec, d)
        if isinstance(got, str):
            if not d.lineage:
                return Unreplayable("session-not-recorded", got)
            return Unreplayable("skill-not-in-spec" if "skill" in got else "agent-not-in-spec", got)
        for name in got:
            if self.spec.policy(name) is None:
                return Unreplayable("policy-not-in-spec", f"the policy `{name}` is not declared")
        return got

    def decide(self, d: RecordedDecision) -> Decision | Unreplayable:
        """The decision under the spec, or why it cannot be replayed."""
        if d.missing is not None:
            return Unreplayable(d.missing, _MISSING.get(d.missing, d.missing))
        if d.redacted:
            return Unreplayable("redacted", f"{d.tool_id} {', '.join(d.redacted)}")
        if d.tool_id not in self.spec.tools:
            return Unreplayable("tool-not-in-spec", f"the tool `{d.tool_id}` is not declared")
        policies = self.policies(d)
        if isinstance(policies, Unreplayable):
            return policies
        assert d.context is not None
        try:
            return judge_policies(self, policies, d.context, agent=str(d.agent))[0]
        except UnknownPolicyError as err:
            return Unreplayable("policy-not-in-spec", str(err))


_MISSING = {
    "session-not-recorded": "the log does not hold the session's start (`session.started`)",
    "call-not-recorded": "the log does not hold the call's request (its REQUESTED transition)",
}


def replay(
    store: EventStore | str,
    spec: Spec,
    *,
    first: int = FIRST,
    after: int = 0,
    page: int = PAGE,
    workers: int = 1,
    part: tuple[int, int] = (0, 1),
) -> ReplayReport:
    """Every recorded decision of `store` decided again under `spec` (see the module
    docstring); `first`: how many decision ids each group lists. `store` is a store, or where
    one is (`open_store`: a path, `sqlite:///…`, `postgresql://…`), opened read-only.

    `workers > 1` (with `store` given by where it is) reads the log in that many processes,
    each deciding the decisions of its share of the session families (`family_part`); their
    reports are merged into the one a single reader gives."""
    if workers > 1 and isinstance(store, str):
        return _in_parallel(store, spec, first=first, after=after, page=page, workers=workers)
    opened = open_store(store, readonly=True) if isinstance(store, str) else store
    replayer = Replayer(spec)
    report = ReplayReport(spec=spec.name, policy_version=spec.content_hash())
    stream = read_decisions(
        opened, spec, terms=replayer.engine.terms, after=after, page=page, part=part
    )
    # the run keeps its call records and contexts alive: with the cyclic collector on, its
    # full collections rescan that growing heap again and again (a quarter of the time)
    collecting = gc.isenabled()
    gc.disable()
    try:
        tally(report, replayer, stream, first)
    except UnreadableEvent as err:  # a row it cannot read: the error names it
        report.incomplete = str(err)
    except Exception as err:  # the log could not be read on: report what was read
        report.incomplete = (
            f"the log could not be read after position {report.last_position}: "
            f"{type(err).__name__}: {err}"
        )
    finally:
        if collecting:
            gc.enable()
        if opened is not store:
            opened.close()
    return report


def _in_parallel(
    target: str, spec: Spec, *, first: int, after: int, page: int, workers: int
) -> ReplayReport:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    text = spec.to_json()
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        shares = [
            pool.submit(_share, target, text, first, after, page, (i, workers))
            for i in range(workers)
        ]
        reports = [share.result() for share in shares]
    return merged(reports, first)


def _share(
    target: str, spec_json: str, first: int, after: int, page: int, part: tuple[int, int]
) -> ReplayReport:
    """One worker's replay: its share of the session families."""
    spec = Spec.from_json(spec_json)
    return replay(target, spec, first=first, after=after, page=page, part=part)


K = TypeVar("K")


def _merge(into: dict[K, Group], groups: dict[K, Group], first: int) -> None:
    for key, group in groups.items():
        found = into.setdefault(key, Group())
        found.count += group.count
        found.first = sorted(found.first + group.first)[:first]


def merged(reports: list[ReplayReport], first: int = FIRST) -> ReplayReport:
    """One report from the reports of disjoint shares of a log."""
    out = ReplayReport(spec=reports[0].spec, policy_version=reports[0].policy_version)
    for r in reports:
        out.decisions += r.decisions
        out.replayed += r.replayed
        out.unchanged += r.unchanged
        out.last_position = max(out.last_position, r.last_position)
        out.incomplete = out.incomplete or r.incomplete
        for version, n in r.policy_versions.items():
            out.policy_versions[version] = out.policy_versions.get(version, 0) + n
        _merge(out.flips, r.flips, first)
        _merge(out.rule_changes, r.rule_changes, first)
        _merge(out.not_replayed, r.not_replayed, first)
    return out


def tally(
    report: ReplayReport,
    replayer: Replayer,
    decisions: Iterable[RecordedDecision],
    first: int,
) -> None:
    """Decide each recorded decision again and count it into `report`."""
    versions = report.policy_versions
    for d in decisions:
        report.decisions += 1
        report.last_position = d.position
        version = d.outcome.policy_version or ""
        versions[version] = versions.get(version, 0) + 1
        got = replayer.decide(d)
        if isinstance(got, Unreplayable):
            key = (got.reason, got.detail)
            group = report.not_replayed.get(key)
            if group is None:
                group = report.not_replayed[key] = Group()
            group.add(d, first)
            continue
        report.replayed += 1
        old = d.outcome
        if got.effect == old.effect:
            if got.rule == old.rule or _among(replayer, d, got):
                report.unchanged += 1
                continue
            target = report.rule_changes
        else:
            target = report.flips
        origin = f"{got.origin.file}:{got.origin.line}" if got.origin is not None else None
        change = Change(d.tool_id, old.effect, got.effect, old.rule, got.rule, got.policy, origin)
        group = target.get(change)
        if group is None:
            group = target[change] = Group()
        group.add(d, first)


def _among(replayer: Replayer, d: RecordedDecision, got: Decision) -> bool:
    """Several policies asked alike (a skill session): the recorded decision names the first
    ASK not yet approved, which may be any of the tied ones."""
    if got.effect != "ask" or len(d.policies) < 2 or d.context is None:
        return False
    policies = replayer.policies(d)
    if isinstance(policies, Unreplayable):
        return False
    tied = judge_policies(replayer, policies, d.context, agent=str(d.agent))
    return any(t.rule == d.outcome.rule for t in tied)
