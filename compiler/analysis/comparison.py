"""The results of the semantic comparison (compare.py): outcomes, regions of calls decided
differently with their witness calls, and what a comparison covered — plain data, with the
texts and the JSON a report prints (`to_dict`)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from harnessc.runtime import model as m

from .concrete import STRENGTH, Call
from .text import duration_text, selector_text, spec_text, term_of

__all__ = [
    "Comparison",
    "Outcome",
    "Region",
    "UndecidedRegion",
    "approver_text",
    "call_text",
    "call_to_dict",
    "expires_text",
    "grant_text",
    "self_approval_text",
]


# ---------------------------------------------------------------------------------------------
# The data a report is made of


def approver_text(approver: m.Approver) -> str:
    """An approver as written: `role "owner"`, `user "ana"`."""
    return f"{approver.kind} {json.dumps(approver.value, ensure_ascii=False)}"


def grant_text(grant: m.Grant | None) -> str | None:
    """A grant as written: `once ttl 15m`, `class deploy.* when … ttl 1h`; None: none written
    (the runtime's default grant, this exact call for ten minutes)."""
    if grant is None:
        return None
    scope: str = grant.scope
    if grant.scope == "class":
        scope = "class" + (f" {selector_text(grant.selector)}" if grant.selector else "")
        if grant.condition is not None:
            scope += f" when {spec_text(grant.condition)}"
    return f"{scope} ttl {duration_text(grant.ttl_ms)}"


def expires_text(expires_ms: int | None) -> str | None:
    """An ASK's `expires` as written: `4h`; None: none written (the request waits until
    answered)."""
    return None if expires_ms is None else duration_text(expires_ms)


def self_approval_text(requester_may_approve: bool) -> str:
    """An ASK's effective `self_approval`: `allow` when the requester may approve their own
    call (as written, else the runtime's default by risk, `requester_may_approve`), `deny`
    otherwise."""
    return "allow" if requester_may_approve else "deny"


@dataclass
class Outcome:
    """What one policy decides for the calls of a region.

    `rule` is the winning rule's label (None: the policy's default, or a refusal before any
    rule); `origin` is `file:line:col` of that rule, of the default (or risk-table entry) that
    applied, or of the policy when it writes no default (None for a refusal). `approvers`,
    `grant` and `expires` are as written (for an ASK; empty and None otherwise);
    `self_approval` is the effective one, `allow` or `deny` (the runtime's default by risk
    when none is written; None but for an ASK), `reason` the decision's.
    `refused` is set when no policy judged the call (an unregistered tool, an agent without a
    policy or that does not exist).
    """

    effect: str
    rule: str | None
    origin: str | None
    policy: str | None = None
    approvers: list[str] = field(default_factory=list)
    grant: str | None = None
    expires: str | None = None
    reason: str | None = None
    self_approval: str | None = None
    refused: bool = False

    def key(self) -> tuple[Any, ...]:
        """What makes two outcomes the same decision: the effect, and for an ASK its
        approvers, grant, expiry and self-approval."""
        if self.effect == "ask":
            return (
                self.effect,
                tuple(self.approvers),
                self.grant,
                self.expires,
                self.self_approval,
            )
        return (self.effect,)

    @property
    def label(self) -> str:
        """The rule's label, or how the decision was made without one."""
        if self.rule is not None:
            return self.rule
        return "refused" if self.refused else "default"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def call_to_dict(call: Call) -> dict[str, Any]:
    """A witness call as JSON: only what it sets (`tool`, `args`, `actor`, … `session`)."""
    data = asdict(call)
    return {k: v for k, v in data.items() if k == "tool" or v}


def call_text(call: Call) -> str:
    """A witness call as one line: `deploy(env: "prod") as {"role": "sre"} with facts …`."""
    args = ", ".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in call.args.items())
    text = f"{call.tool}({args})"
    for what, value in (
        ("as", call.actor),
        ("resource", call.resource),
        ("facts", call.facts),
        ("task", call.task),
        ("env", call.env),
        ("call", call.execution),
        ("connected", {k: v for k, v in call.connections.items() if v}),
        ("running", {k: v for k, v in call.runtimes.items() if v}),
    ):
        if value:
            text += f" {what} {json.dumps(value, ensure_ascii=False, sort_keys=True)}"
    if call.session:
        terms = "; ".join(
            f"{spec_text(term_of(k))} = {json.dumps(v)}" for k, v in call.session.items()
        )
        text += f" session {{{terms}}}"
    if call.sources:
        where = "; ".join(
            f"{_value_of(k)} from {', '.join(v) or 'nowhere'}" for k, v in call.sources.items()
        )
        text += f" sources {{{where}}}"
    return text


def _value_of(key: str) -> str:
    """The argument, or the item of one, a key of `Call.sources` names."""
    from .sources import item_of

    path, index = item_of(key)
    return spec_text(path) + (f"[{index}]" if index is not None else "")


@dataclass
class Region:
    """A set of calls to one tool that the old side decides `old` and the new side `new`.

    `subject` says what was compared: `policy NAME` or `agent NAME`. `witness` is a concrete
    call of the region (its session state, when the rules read the session, in
    `witness.session`). `verified`: the runtime decided the witness under both specs and the
    decisions really differ as `change` says; `exact`: the encoding was exact and re-judging
    the witness agreed with the solver (`notes` say what did not).
    """

    tool: str
    subject: str
    old_policy: str | None
    new_policy: str | None
    old: Outcome
    new: Outcome
    witness: Call
    verified: bool = False
    exact: bool = True
    notes: list[str] = field(default_factory=list)
    old_reading: dict[str, Any] = field(default_factory=dict)
    """The witness's session terms as the old side reads them where it reads them otherwise
    (a tool's label or trust changed): the prelude of that reading is a session too
    (`compare.witness_preludes`)."""

    @property
    def change(self) -> str:
        """`allow→ask`, …; for the same effect, `ask→ask (approver)`, `ask→ask (grant)`,
        `ask→ask (expires)` or `ask→ask (self-approval)` (the first part of the ASK that
        differs)."""
        a, b = self.old, self.new
        if a.effect != b.effect:
            return f"{a.effect}→{b.effect}"
        if a.approvers != b.approvers:
            return f"{a.effect}→{b.effect} (approver)"
        if a.grant != b.grant:
            return f"{a.effect}→{b.effect} (grant)"
        if a.expires != b.expires:
            return f"{a.effect}→{b.effect} (expires)"
        return f"{a.effect}→{b.effect} (self-approval)"

    @property
    def widened(self) -> bool:
        """A call that was denied or asked is now allowed, and the runtime confirmed it
        (`verified`): an unverified region is never a widening, only `unverified`. (A change
        within an ASK — another approver, or the requester now allowed to approve their own
        call — is not: the call still waits for an approval.)"""
        return self.verified and self.claims_widening

    @property
    def claims_widening(self) -> bool:
        """The solver's claim, verified or not: denied or asked before, allowed now."""
        return self.old.effect in ("deny", "ask") and self.new.effect == "allow"

    @property
    def weaker(self) -> bool:
        """The new decision is less strict (deny→ask, deny→allow, ask→allow): `widened`, or a
        denied call that may now run once approved."""
        return STRENGTH[self.new.effect] < STRENGTH[self.old.effect]

    @property
    def narrowed(self) -> bool:
        """The new decision is stronger (allow→ask, allow→deny, ask→deny)."""
        return STRENGTH[self.new.effect] > STRENGTH[self.old.effect]

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "subject": self.subject,
            "old_policy": self.old_policy,
            "new_policy": self.new_policy,
            "change": self.change,
            "widened": self.widened,
            "old": self.old.to_dict(),
            "new": self.new.to_dict(),
            "witness": call_to_dict(self.witness),
            "witness_text": call_text(self.witness),
            "verified": self.verified,
            "exact": self.exact,
            "notes": list(self.notes),
        }


@dataclass
class UndecidedRegion:
    """A question about a tool z3 did not answer within its budget: whether the calls the old
    side decides by `old_rule` and the new by `new_rule` exist (None, None: whether any call
    of the tool changes at all). `reason` is why (`beyond its budget of …`, or z3's words)."""

    tool: str
    subject: str
    old_rule: str | None
    new_rule: str | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Comparison:
    """Every region of calls decided differently, and what was (not) compared.

    `tools_compared`: tools solved or read from the cache; `tools_skipped`: tools whose
    buckets are identical on both sides (no region, no z3); `tools_added`/`tools_removed`:
    tools only one spec registers; `schema_changed`: tools compared over calls both input
    schemas accept; `subjects`: what was compared (`policy NAME`, `agent NAME`).
    """

    regions: list[Region] = field(default_factory=list)
    undecided: list[UndecidedRegion] = field(default_factory=list)
    subjects: list[str] = field(default_factory=list)
    tools_compared: list[str] = field(default_factory=list)
    tools_skipped: list[str] = field(default_factory=list)
    tools_added: list[str] = field(default_factory=list)
    tools_removed: list[str] = field(default_factory=list)
    schema_changed: list[str] = field(default_factory=list)
    policies_added: list[str] = field(default_factory=list)
    policies_removed: list[str] = field(default_factory=list)
    queries: int = 0
    """SMT queries asked (the comparison's work, independent of the machine's load)."""
    cache_hits: int = 0
    seconds: float = 0.0
    """Wall time of the comparison (solving and verifying; not compiling the specs)."""

    @property
    def widened(self) -> bool:
        return any(r.widened for r in self.regions)

    @property
    def changed(self) -> bool:
        return bool(self.regions)

    def by_change(self) -> dict[str, list[Region]]:
        """Regions by `change` (`allow→ask`, …), in order of first appearance."""
        out: dict[str, list[Region]] = {}
        for r in self.regions:
            out.setdefault(r.change, []).append(r)
        return out

    def by_tool(self) -> dict[str, list[Region]]:
        out: dict[str, list[Region]] = {}
        for r in self.regions:
            out.setdefault(r.tool, []).append(r)
        return out

    def counts(self) -> dict[str, int]:
        return {k: len(v) for k, v in self.by_change().items()}

    def to_dict(self) -> dict[str, Any]:
        """A stable JSON shape (`"version": 1`)."""
        return {
            "version": 1,
            "widened": self.widened,
            "changed": self.changed,
            "counts": {
                "by_change": self.counts(),
                "by_tool": {k: len(v) for k, v in self.by_tool().items()},
            },
            "regions": [r.to_dict() for r in self.regions],
            "undecided": [u.to_dict() for u in self.undecided],
            "subjects": list(self.subjects),
            "tools_compared": list(self.tools_compared),
            "tools_skipped": list(self.tools_skipped),
            "tools_added": list(self.tools_added),
            "tools_removed": list(self.tools_removed),
            "schema_changed": list(self.schema_changed),
            "policies_added": list(self.policies_added),
            "policies_removed": list(self.policies_removed),
            "queries": self.queries,
            "cache_hits": self.cache_hits,
        }
