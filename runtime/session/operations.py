"""The operator's commands on a store: what the operations console's buttons, the CLI
(`harnessc approvals …`, `harnessc grants …`) and a Python caller all run. Nothing here holds
state: each command opens from the store (a `Harness` on it, which folds the log) and writes
its answer back to it, so any number of consoles, CLIs and agents share one truth.

    h = Harness(spec, store=SQLiteStore("log.db"))
    pending_approvals(h)                                # what waits, with everything shown
    approve(h, "apr-…", by={"user": "u-7", "role": "ops"})
    approve_with_edits(h, "apr-…", {...}, by=…, reason="smaller canary")
    deny(h, "apr-…", by=…, reason="not during the freeze")
    active_grants(h); revoke_grant(h, "grt-…", by=…, reason="rotated")

Every command first verifies the log's chain up to its head (`Harness.vouched`: the walk the
harness began when it opened the log, from the log's last checkpoint, on to what was appended
since) and acts on nothing else: a log that does not verify (a row changed, inserted or forged
under it; with a log key, any row without its MAC) raises `UnverifiedLog`, a `StoreError`
saying where and why, before anything is shown or written. Right before an answer (`approve`,
`deny`, `approve_with_edits`) is written, the events of the request's session and answer
stream are walked again as they are stored now (`ChainWatch.recheck`).

Every command returns plain JSON-able dicts and raises `ApprovalError` (a stable `code`, a
one-sentence `message`) for what an operator can get wrong: an unknown or already-answered
request (`unknown-request`, `not-pending`: also when another operator answered first), an
approver the request does not name (`not-an-approver`, `self-approval`), an edit that is
invalid (`invalid-edit`, `edit-unchanged`) or denied (`edit-denied`), a request past its
`expires` deadline (`expired`: its expiry is recorded then), a grant that is unknown or no
longer active (`unknown-grant`, `not-active`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from .approval_view import approval_view, approval_views
from .approvals import ApprovalError, ApprovalOutcome, ApprovalRequest
from .calls import who_of

if TYPE_CHECKING:
    from .harness import Harness

__all__ = [
    "active_grants",
    "approval",
    "approve",
    "approve_with_edits",
    "deny",
    "expire_approvals",
    "pending_approvals",
    "revoke_grant",
]


def pending_approvals(h: Harness, *, review: bool = True) -> list[dict[str, Any]]:
    """Every pending approval request in the store, oldest first (see `approval`). A request
    past its `expires` deadline is not pending, though nothing is recorded by listing: its
    expiry is recorded by the next command on it, or by `expire_approvals`. With
    `review=False`, without `preview`, `provenance` and `diff` (which read the sessions'
    events): enough to tell which requests wait."""
    h.vouched()
    now = h.clock()
    found = [
        r for r in h.approvals.requests.values() if r.status == "pending" and not r.expired(now)
    ]
    shown = [_shown(h, r) for r in sorted(found, key=lambda r: r.requested_at)]
    if review:
        for item, seen in zip(shown, approval_views(h, shown), strict=True):
            item.update(seen)  # preview, provenance, diff: from the log
    return shown


def approval(h: Harness, request_id: str) -> dict[str, Any]:
    """One request as an operator sees it: tool, the frozen arguments with secrets masked,
    input hash, why, the rule (label, `file:line`, reason), who may approve, when it was
    asked, the grant an approval gives (scope, ttl, what it covers), its status and deadline
    (`expires_at`, `expires_in_ms`: None when it waits until answered; a request past its
    deadline shows status `expired` even before the expiry is recorded); also `preview` (the
    tool's recorded preview, or whether it could have one), `provenance` (each argument value's
    sources before the request) and `diff` (the closest earlier call of the tool in the session
    and what changed, or None): see `approval_view`."""
    h.vouched()
    item = _shown(h, h.approvals.get(request_id))
    item.update(approval_view(h, item))  # preview, provenance, diff: from the log
    return item


def approve(h: Harness, request_id: str, *, by: Mapping[str, Any]) -> dict[str, Any]:
    """`Harness.approve` as a command: the outcome as a dict."""
    h.vouched()
    return _outcome(h.approve(request_id, by=by))


def deny(h: Harness, request_id: str, *, by: Mapping[str, Any], reason: str) -> dict[str, Any]:
    """`Harness.deny` as a command (a reason is required)."""
    h.vouched()
    return _outcome(h.deny(request_id, by=by, reason=reason))


def approve_with_edits(
    h: Harness,
    request_id: str,
    args: Mapping[str, Any],
    *,
    by: Mapping[str, Any],
    reason: str | None = None,
) -> dict[str, Any]:
    """`Harness.approve_with_edits` as a command: the outcome with the edited call's input
    hash (`edited_input_hash`) and the effect it was decided to (`allow` or `ask`)."""
    h.vouched()
    return _outcome(h.approve_with_edits(request_id, args, by=by, reason=reason))


def expire_approvals(h: Harness) -> list[dict[str, Any]]:
    """`Harness.expire_approvals` as a command: record the expiry of every pending request
    past its deadline (each exactly once, whichever process sweeps); the requests expired."""
    h.vouched()
    return [_shown(h, r) for r in h.expire_approvals()]


def active_grants(h: Harness) -> list[dict[str, Any]]:
    """Every grant that authorises calls now (active and unexpired), soonest to expire
    first: scope, tool, what it is bound to, rule, expiry, ttl left, who issued it."""
    h.vouched()
    now = h.clock()
    shown = []
    for grant in sorted(h.approvals.grants.values(), key=lambda g: g.expires_at):
        if grant.active(now):
            item = grant.to_dict()
            item["ttl_left_ms"] = (grant.expires_at - now) // timedelta(milliseconds=1)
            shown.append(item)
    return shown


def revoke_grant(
    h: Harness, grant_id: str, *, by: Mapping[str, Any], reason: str | None = None
) -> dict[str, Any]:
    """Revoke an active grant (`Approvals.revoke`, logged with who and why): it never
    authorises again, in this process or any other on the store."""
    h.vouched()
    who = who_of(by)
    if not who:
        raise ApprovalError("unknown-actor", "a revocation names who revokes (`user` or `role`)")
    return h.approvals.revoke(grant_id, by=who, reason=reason).to_dict()


def _shown(h: Harness, req: ApprovalRequest) -> dict[str, Any]:
    item = req.to_dict()
    item["requested_at"] = req.requested_at.isoformat()
    item["rule"] = _rule(h, req)
    now = h.clock()
    item["expires_in_ms"] = req.expires_in_ms(now)
    if req.expired(now):
        item["status"] = "expired"  # past its deadline: shown so, recorded by the next command
    return item


def _rule(h: Harness, req: ApprovalRequest) -> dict[str, Any]:
    """The rule that asked, with where it is declared (None for a default or a risk table)."""
    shown: dict[str, Any] = {"label": req.rule, "policy": req.policy, "reason": req.why}
    for policy in h.spec.policies.values():
        for rule in policy.rules:
            if rule.label == req.rule and rule.origin is not None:
                shown["file"], shown["line"] = rule.origin.file, rule.origin.line
                shown["at"] = f"{rule.origin.file}:{rule.origin.line}"
                return shown
    shown["file"] = shown["line"] = shown["at"] = None
    return shown


def _outcome(out: ApprovalOutcome) -> dict[str, Any]:
    decision = out.decision
    return {
        "request_id": out.request.request_id,
        "status": out.status,
        "request_status": out.request.status,
        "reason": out.reason,
        "effect": getattr(decision, "effect", None),
        "rule": getattr(decision, "rule", None),
        "grant": out.grant.to_dict() if out.grant is not None else None,
        "edited_input_hash": out.call.input_hash if out.call is not None else None,
    }
