"""`harnessc approvals …` and `harnessc grants …`: the operator's commands on a store
(`runtime/session/operations.py`), the same ones the operations console's buttons run.

    harnessc approvals list --log log.db [--spec remediation.harness]
    harnessc approvals show apr-… --log log.db
    harnessc approvals approve apr-… --log log.db --spec S --as '{"user": "u-7", "role": "ops"}'
    harnessc approvals deny apr-… --reason "not now" --log … --spec S --as …
    harnessc approvals edit apr-… --args '{"canary_percent": 5, …}' --reason … --log … --as …
    harnessc approvals expire --log log.db
    harnessc grants list --log log.db
    harnessc grants revoke grt-… --reason "rotated" --log log.db --as …

The spec is needed where the runtime judges the call again (approve, deny, edit); listing
without it shows no rule locations. Errors print `error[code]: message` (or `{"error": …}`
with `--format json`) and exit 1; bad arguments exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from contextlib import closing
from typing import Any

from .log_option import add_log_option

EXIT_OK, EXIT_ERRORS, EXIT_USAGE = 0, 1, 2
JUDGING = frozenset({"approve", "deny", "edit"})


def add_parsers(sub: Any, run_approvals: Any, run_grants: Any) -> None:
    """The `approvals` and `grants` parsers (`build_parser` appends them)."""
    approvals = sub.add_parser(
        "approvals", help="list, show, approve, deny and edit pending approval requests"
    )
    actions = approvals.add_subparsers(dest="action", required=True, metavar="ACTION")
    listed = actions.add_parser("list", help="every pending request, oldest first")
    show = actions.add_parser("show", help="one request: tool, arguments, rule, approvers")
    approve = actions.add_parser("approve", help="approve a request (the call judged again)")
    deny = actions.add_parser("deny", help="deny a request with a reason")
    edit = actions.add_parser("edit", help="approve with edited arguments (decided afresh)")
    expire = actions.add_parser(
        "expire", help="record the expiry of every request past its `expires` deadline"
    )
    for action in (show, approve, deny, edit):
        action.add_argument("id", metavar="REQUEST_ID")
    deny.add_argument("--reason", required=True, help="why (recorded as a task fact)")
    edit.add_argument("--args", required=True, metavar="JSON", help="the edited arguments")
    edit.add_argument("--reason", help="why the arguments were edited (recorded)")
    for action in (listed, show, approve, deny, edit, expire):
        _common(action, judging=action in (approve, deny, edit))
    approvals.set_defaults(run=run_approvals, noun="approvals")

    grants = sub.add_parser("grants", help="list active grants and revoke one")
    g_actions = grants.add_subparsers(dest="action", required=True, metavar="ACTION")
    g_list = g_actions.add_parser("list", help="every active grant, soonest to expire first")
    revoke = g_actions.add_parser("revoke", help="revoke a grant: it never authorises again")
    revoke.add_argument("id", metavar="GRANT_ID")
    revoke.add_argument("--reason", help="why (recorded)")
    _common(g_list, judging=False)
    _common(revoke, judging=False, actor=True)
    grants.set_defaults(run=run_grants, noun="grants")


def _common(action: Any, *, judging: bool, actor: bool | None = None) -> None:
    add_log_option(action)
    action.add_argument(
        "--spec",
        required=judging,
        metavar="SPEC",
        help="the spec the agents run (.harness file or folder, or a spec saved as JSON)",
    )
    if judging if actor is None else actor:
        action.add_argument(
            "--as",
            dest="actor",
            required=True,
            metavar="JSON",
            help='who acts: {"user": …, "role": …, "roles": […]}',
        )
    action.add_argument("--format", choices=("human", "json"), default="human")


def run_approvals(args: argparse.Namespace, refuse: Callable[[str], str | None]) -> int:
    from harnessc.runtime.session import operations as ops

    def act(h: Any, by: Any) -> Any:
        if args.action == "list":
            return ops.pending_approvals(h)
        if args.action == "show":
            return ops.approval(h, args.id)
        if args.action == "expire":
            return ops.expire_approvals(h)
        if args.action == "approve":
            return ops.approve(h, args.id, by=by)
        if args.action == "deny":
            return ops.deny(h, args.id, by=by, reason=args.reason)
        edited = _json(args.args, "--args")
        if not isinstance(edited, dict):
            raise _Usage("--args is a JSON object: the whole edited argument object")
        return ops.approve_with_edits(h, args.id, edited, by=by, reason=args.reason)

    return _run(args, act, refuse)


def run_grants(args: argparse.Namespace, refuse: Callable[[str], str | None]) -> int:
    from harnessc.runtime.session import operations as ops

    def act(h: Any, by: Any) -> Any:
        if args.action == "list":
            return ops.active_grants(h)
        return ops.revoke_grant(h, args.id, by=by, reason=args.reason)

    return _run(args, act, refuse)


_READ_ONLY = frozenset({"list", "show"})
"""The actions that only read the log."""


class _Usage(Exception):
    pass


def _json(text: str, flag: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as error:
        raise _Usage(f"{flag} is not JSON: {error}") from None


def _run(args: argparse.Namespace, act: Any, refuse: Callable[[str], str | None]) -> int:
    """Open the store (`refuse`: why a `--log` is no log to open, or None) and run `act`."""
    from harnessc.runtime import ApprovalError, Harness
    from harnessc.runtime.log.chain import StoreError
    from harnessc.runtime.log.open import open_store
    from harnessc.runtime.model import Spec

    from .review.replay import load_spec

    try:
        by = _json(args.actor, "--as") if getattr(args, "actor", None) else None
        if by is not None and not isinstance(by, dict):
            raise _Usage('--as is a JSON object: {"user": …, "role": …}')
    except _Usage as error:
        sys.stderr.write(f"harnessc: {error}\n")
        return EXIT_USAGE
    if (problem := refuse(args.log)) is not None:
        sys.stderr.write(f"harnessc: {problem}\n")
        return EXIT_USAGE
    spec = load_spec(args.spec) if args.spec else Spec(name="operator", root_module="operator")
    if spec is None:
        return EXIT_USAGE
    try:
        # a listing or a look at one request reads the log only: opened read-only, it is never
        # upgraded, checkpointed or written, whatever the harness does
        store = open_store(args.log, readonly=args.action in _READ_ONLY)
    except StoreError as error:
        sys.stderr.write(f"harnessc: {error}\n")
        return EXIT_USAGE
    with closing(store):
        try:
            out = act(Harness(spec, store=store), by)
        except (_Usage, StoreError) as error:  # StoreError: a log this version cannot read
            sys.stderr.write(f"harnessc: {error}\n")
            return EXIT_USAGE
        except ApprovalError as error:
            if args.format == "json":
                print(json.dumps({"error": {"code": error.code, "message": error.message}}))
            else:
                sys.stderr.write(f"error[{error.code}]: {error.message}\n")
            return EXIT_ERRORS
    print(json.dumps(out, indent=2) if args.format == "json" else _human(args, out))
    return EXIT_OK


def _human(args: argparse.Namespace, out: Any) -> str:
    if isinstance(out, list):
        if not out:
            if args.noun == "grants":
                return "no active grants"
            return "nothing expired" if args.action == "expire" else "nothing pending"
        return "\n".join(_line(item) for item in out)
    review = ("preview", "provenance", "diff")
    lines = [f"{k}: {json.dumps(v)}" for k, v in out.items() if k not in review]
    if "expires_in_ms" in out:
        lines.append(f"expiry: {deadline_words(out)}")
    if "request_id" in out and all(k in out for k in review):
        lines.extend(_review(out))
    return "\n".join(lines)


def _review(item: dict[str, Any]) -> list[str]:
    """A request's preview, its arguments' sources and its diff, in words."""
    preview = item["preview"]
    if preview.get("recorded"):
        if preview.get("error"):
            lines = [f"preview: the previewer failed: {preview['error']}"]
        else:
            lines = [f"preview: {json.dumps(preview.get('value'))}"]
    elif preview.get("can_preview"):
        lines = ["preview: none recorded (the tool declares the `preview` effect)"]
    else:
        lines = []
    if item["provenance"]:
        lines.append("provenance:")
    for arg in item["provenance"]:
        if arg["secret"]:
            where = "secret (masked)"
        elif arg["sources"]:
            where = "; ".join(s["text"] for s in arg["sources"])
        else:
            where = "no source (not said by the user, not in the facts or any result)"
        lines.append(f"    {arg['arg']}: {where}")
    diff = item["diff"]
    if diff is None:
        lines.append("diff: no earlier call of this tool in the session")
        return lines
    lines.append(
        f"diff: against call {diff['tool_call_id']} ({diff['outcome']}), input "
        f"{diff['input_hash'][:16]}…, {diff['differing']} argument(s) differ"
    )
    for change in diff["changes"]:
        before = json.dumps(change.get("before")) if "before" in change else "-"
        after = json.dumps(change.get("after")) if "after" in change else "-"
        secret = " (secret, compared by digest)" if change["secret"] else ""
        lines.append(f"    {change['arg']}{secret}: {change['change']} {before} -> {after}")
    return lines


def deadline_words(item: dict[str, Any]) -> str:
    """A request's deadline in words (`operations.approval`'s `expires_at`, `expires_in_ms`,
    `status`): when, and the time left. The console shows it too."""
    if item.get("expires_at") is None:
        return "never (waits until answered)"
    left = item.get("expires_in_ms") or 0
    if item.get("status") == "expired" or left <= 0:
        return f"expired at {item['expires_at']}"
    return f"expires {item['expires_at']} ({duration_words(left)} left)"


def duration_words(ms: int) -> str:
    """Milliseconds as the largest two units: `1h 5m`, `4m 20s`, `12s`."""
    seconds = ms // 1000
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{n}{u}" for n, u in ((days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")) if n]
    return " ".join(parts[:2]) or "under 1s"


def _line(item: dict[str, Any]) -> str:
    if "request_id" in item:
        rule = item["rule"]
        where = f" at {rule['at']}" if rule.get("at") else ""
        approvers = ", ".join(f"{a['kind']} {a['value']}" for a in item["approvers"])
        return (
            f"{item['request_id']}  {item['what']}\n"
            f"    rule {rule['label']}{where}: {rule['reason']}\n"
            f"    input {item['input_hash'][:16]}…  approvers: {approvers}  "
            f"asked {item['requested_at']}\n"
            f"    {deadline_words(item)}"
        )
    return (
        f"{item['grant_id']}  {item['scope']} {item['tool_id']}  by {item['by']}  "
        f"expires {item['expires_at']} ({item['ttl_left_ms'] // 1000}s left)"
    )
