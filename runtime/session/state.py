"""A session's state, in one dataclass: what the session froze of its calls, their actions,
decisions and results, what runs now, and what it may see (its surface and the tools'
availability, cached per policy version). `Session` holds one (`Session.state`); the call path
(runtime/session/calls.py) and the log's readers (`_restore`, `_completion`) change it through
its fields and methods, never through the session's private attributes.

Every map is keyed by the call's `PendingCall.key` (`tool_call_id:input_hash`), except
`by_action_id` (an action id to its call's key) and `templates` (event payload templates).
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any

from ..judge.availability import Availability, Facts, ToolAvailability
from ..judge.normalize import PendingCall, Refusal
from ..judge.policy import Decision
from .approvals import ApprovalGrant
from .executors import Result
from .lifecycle import Action, ActionError

__all__ = ["Judged", "SessionState", "not_pending"]


@dataclass(frozen=True)
class Judged:
    """A decision recorded for a call: its id, the policy version it was made under, and the
    grants it used."""

    decision_id: str
    decision: Decision
    grant: ApprovalGrant | None
    policy_version: str
    grants: tuple[ApprovalGrant, ...] = ()
    """Every grant that authorises the call: one per ASK when several policies ask (a skill
    session), all spent by the call."""


def not_pending(method: str, given: object) -> TypeError:
    """The application passed `method` something other than a `PendingCall` (a `Refusal`, say:
    a refused call has nothing to decide or run)."""
    what = (
        "a Refusal: a refused call has nothing to decide or run"
        if isinstance(given, Refusal)
        else f"`{type(given).__name__}`"
    )
    return TypeError(f"`{method}` takes the PendingCall that `normalize` returned, not {what}")


def _no_availability() -> tuple[Facts | None, str, dict[str, ToolAvailability]]:
    return (None, "", {})


@dataclass(eq=False)
class SessionState:
    """What one session changes as its calls go through it (see the module's docstring)."""

    session_id: str
    pending: dict[str, PendingCall] = field(default_factory=dict)
    """The calls the session froze (`normalize`, or restored from the log), in order."""
    actions: dict[str, Action] = field(default_factory=dict)
    judged: dict[str, Judged] = field(default_factory=dict)
    """The decision this session recorded for each call it decided."""
    held_decisions: dict[str, tuple[object, dict[str, int]]] = field(default_factory=dict)
    """An authorising decision that read the session's history, deferred to the commit that
    runs its call: what the store holds of it (`defer_unmoved`) and the positions it read."""
    results: dict[str, Result] = field(default_factory=dict)
    """Each call's result, recorded here or taken up from the log."""
    running: set[str] = field(default_factory=set)
    """The calls this process runs now."""
    running_elsewhere: set[str] = field(default_factory=set)
    """The calls the log has RUNNING in another process: their lease is checked at each
    catch-up (`_restore.catch_up_session`), and past it they are UNKNOWN."""
    inflight: dict[str, asyncio.Future[Result]] = field(default_factory=dict)
    """The asyncio runs under way (`ainvoke`): concurrent calls with one key share one run."""
    locks: dict[str, threading.Lock] = field(default_factory=dict)
    by_action_id: dict[str, str] = field(default_factory=dict)
    fresh: PendingCall | None = None
    """The call normalized last, after a catch-up: its decision, next, needs none."""
    secret_texts: set[str] = field(default_factory=set)
    """Every secret value the session's calls carried, to scrub exposure queries (the planner
    may quote one in a later query, and an exposure trace never holds it); a set, so that
    normalizing a call costs only its own values."""
    templates: dict[int, Any] = field(default_factory=dict)
    """Event payload templates (runtime/session/calls.py)."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    touched: Any = None
    """When the application last acted through the session (the harness clock's time): a call
    normalized or invoked, something the user said, facts updated, the session resumed.
    `Harness.release_idle` releases the sessions untouched for long enough."""
    ended: bool = False
    """Whether the session recorded its end (`Session.end`)."""
    facts_at: int = 0
    """The position up to which the session's stream was looked at for facts events
    (`Session.refresh_facts`): past it, another process's change of the facts is taken up."""
    own_facts: set[int] = field(default_factory=set)
    """The positions of the facts events this process appended past `facts_at` (applied
    here already)."""
    surface_version: str | None = None
    """The policy version `surface` and `surface_order` were computed under."""
    surface: frozenset[str] = frozenset()
    surface_order: tuple[str, ...] = ()
    availability: tuple[Facts | None, str, dict[str, ToolAvailability]] = field(
        default_factory=_no_availability
    )
    """(facts snapshot, policy version, tool id → availability): replaced, never mutated in
    place, when the facts or the spec change, so a reader needs no lock."""
    snapshot: tuple[Facts | None, str, Availability | None] = (None, "", None)
    """(facts snapshot, policy version, every tool's availability under them): the same object
    turn after turn while neither changes, so exposure reuses its split of P."""

    def own(self, pending: PendingCall, method: str = "decide") -> None:
        """Refuse a call this session did not normalize (`method` names the caller)."""
        if not isinstance(pending, PendingCall):
            raise not_pending(method, pending)
        if pending.session_id != self.session_id or pending.key not in self.pending:
            raise ValueError(
                f"the call `{pending.tool_call_id}` was not normalized in session "
                f"`{self.session_id}`"
            )

    def key_of(self, action: str | PendingCall) -> str:
        """The key of a call given as its `PendingCall` or its action id (`ActionError`
        `unknown-action` for an id this session does not hold)."""
        if isinstance(action, PendingCall):
            self.own(action)
            return action.key
        key = self.by_action_id.get(action)
        if key is None:
            raise ActionError(
                "unknown-action",
                f"no action `{action}` in session `{self.session_id}`",
                action_id=action,
            )
        return key

    def key_lock(self, key: str) -> threading.Lock:
        """The lock a call's run and completion take (one per key, made on first use)."""
        with self.lock:
            lock = self.locks.get(key)
            if lock is None:
                lock = self.locks[key] = threading.Lock()
            return lock

    def hash_of(self, action: Action) -> str:
        """The input hash of the call whose action `action` is ("" for one not held)."""
        for key, known in self.actions.items():
            if known is action:
                return key.split(":", 1)[1]
        return ""

    def hold(self, key: str, action: Action) -> None:
        """Hold `action` as the call's own, found by its id from now on."""
        self.actions[key] = action
        self.by_action_id[action.action_id] = key
