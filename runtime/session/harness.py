"""The harness: a compiled spec, loaded once, routing every tool call through the five layers.

    h = Harness(spec)                                   # or Harness.from_json("spec.json")
    @h.implement("change.create")
    def create(args): return {"change_id": "chg-1", "state": "pending"}

    s = h.session(agent="planner", actor={"user": "u-1", "role": "engineer"}, task="t-1",
                  facts=Facts.of({"workspace.open": True}, connected={"change_platform"}))
    s.expose("open a change request")                   # surface ∩ available → ranked
    call = s.normalize("change_create", "call-1", {...})  # PendingCall | Refusal
    s.decide(call)                                      # Decision (recorded)
    result = s.invoke(call)                             # Result (recorded)
    s.evidence()                                        # derived from the events

An ASK is answered with `s.request_approval(call)` and `h.approve(request_id, by=actor)` (or
`h.deny`); the approval judges the call again and issues a grant bound to it. An executor that
returns `Accepted` leaves its action waiting for a result, reported later with
`h.complete(action_id, data, by=…)` or withdrawn with `h.cancel(action_id)`.

Everything is recorded in the event store (a `MemoryStore` unless one is given; `SQLiteStore`
for a file), and the store is the truth: a harness opened on an existing store (another
process, after a crash) rebuilds from the events the pending approval requests, the grants,
the sessions (`h.resume(session_id)`) and the actions waiting for a result, so
`h.approve(request_id, …)` and `h.complete(action_id, …)` work there as they would have in the
process that started them.

Opening a store walks its hash chain (from the log's last `log.checkpoint`, with the log key
its MACs) before anything of it is folded: a log that does not verify raises `UnverifiedLog`
naming the position, and the store then refuses every write. `Harness(…, forensic=True)`
reads what it can of such a log and never writes (`h.broken`, `h.unreadable`, `h.verify()`).

>>> from harnessc.runtime.model import Spec
>>> Harness(Spec(name="demo", root_module="demo")).policy_version == Spec(
...     name="demo", root_module="demo").content_hash()
True
"""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ..exposure.ranker import ExposureIndex
from ..judge.availability import Availability, AvailabilityChecker, Facts, Who
from ..judge.normalize import PendingCall, ToolNames, Validator, thaw
from ..judge.policy import Decision, PolicyEngine
from ..log.chain import ConcurrencyError, StoreError, UnreadableEvent
from ..log.events import (
    HARNESS_STREAM,
    REDACTED,
    RUNTIME_STREAMS,
    Clock,
    NewEvent,
    call_superseded,
    short_text,
    system_clock,
)
from ..log.integrity import Checkpoint
from ..log.projections import Projections, SessionView
from ..model.ir import (
    PUBLIC_KINDS,
    Agent,
    ModelSeal,
    Skill,
    Spec,
    build_models,
    collection_paused,
)
from ..model.semantics import surface_tools
from . import spans
from ._restore import catch_up_session, restore_actions, take_up_calls
from .approval_view import record_preview, run_preview
from .approvals import (
    ApprovalError,
    ApprovalGrant,
    ApprovalOutcome,
    ApprovalRequest,
    Approvals,
    answered_stream,
    expired_error,
    is_approver,
    is_requester,
)
from .executors import Executors, Result
from .lifecycle import LEASE_GRACE_MS, ActionError
from .seams import SessionSeam
from .sessions import (
    FACTS_KINDS,
    Session,
    as_recorded,
    check_facts,
    decide_session,
    facts_record,
    need_kind,
    replay_facts,
    start_session,
)

if TYPE_CHECKING:
    from .shadow import Shadow
from ..log.chain import (
    CHECKPOINT_EVERY,
    CHECKPOINT_TYPE,
    ChainWatch,
    UnverifiedLog,
    find_cut,
)
from ..log.store import Anchor, EventStore, MemoryStore, Verification

__all__ = ["HARNESS_STREAM", "Harness", "HarnessError"]


F = TypeVar("F", bound=Callable[..., Any])
_T = TypeVar("_T")


class HarnessError(LookupError):
    """A request the harness cannot serve: an unknown agent or tool. `code` is stable."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Harness:
    """A compiled spec with its policy engine, validators, availability checks, exposure
    index, executors, approvals and event store. See the module docstring for the path of a
    call."""

    def __init__(
        self,
        spec: Spec,
        store: EventStore | None = None,
        clock: Clock = system_clock,
        *,
        aliases: Mapping[str, str] | None = None,
        embeddings: tuple[np.ndarray, list[str]] | None = None,
        embedder: Callable[[str], Any] | None = None,
        shadow: Spec | None = None,
        forensic: bool = False,
        release_after_s: float | None = None,
    ) -> None:
        self.clock = clock
        self.release_after_s = release_after_s
        """Release a session from memory once it ended, or once it and its child and skill
        sessions were idle this long (`release_idle`); None: sessions stay open until
        `release`d. A released session resumes from the log on demand (`resume`, an approval,
        `complete`, `cancel`)."""
        self._swept = clock()
        self.lease_grace_ms = LEASE_GRACE_MS
        """How long past its executor's timeout the lease of a call this harness runs lasts
        (`LEASE_GRACE_MS`): past it, with no outcome recorded, any process that catches up
        records the call UNKNOWN."""
        self.forensic = forensic
        """Opened for forensics (`forensic=True`): the harness reads what it can of a log that
        does not verify and never writes to it (every write through its store is refused)."""
        self.broken: Verification | None = None
        """Where and why the log's chain broke, when this harness found it (None: it holds)."""
        self.unreadable: list[UnreadableEvent] = []
        """The events a forensic harness could not fold (each error names its position)."""
        self.shadowing: Shadow | None = None
        """The candidate spec judging beside this one (`shadow`), or None."""
        self.store: EventStore = store if store is not None else MemoryStore(clock=clock)
        self.executors = Executors()
        self.approvals = Approvals(self.store, clock)
        self.sessions: dict[str, Session] = {}
        self.projections = Projections()
        """The log folded (calls, approvals, grants, sessions, actions), brought forward from
        its cursor whenever this harness meets an id it does not know."""
        self._action_sessions: dict[str, Session] = {}
        self._previewers: dict[str, Callable[[dict[str, Any]], Any]] = {}
        self._aliases = dict(aliases or {})
        self._embeddings = embeddings
        self._embedder = embedder
        # the chain is verified as the log is opened, from its last checkpoint, before anything
        # of it is folded: a log that does not verify is never written to (`_open_log`)
        self._watch: ChainWatch | None = ChainWatch.opened(self.store)
        if forensic:
            self.store.refuse(
                StoreError(
                    "the harness was opened for forensics (`forensic=True`): it writes nothing"
                )
            )
        self.load(spec)
        self._open_log()
        if shadow is not None:
            self.shadow(shadow)

    @classmethod
    def from_json(
        cls, path: str | Path, *, seal: ModelSeal | None = None, **options: Any
    ) -> Harness:
        """A harness for a spec saved as JSON (`Spec.to_json`); `seal`: what the build
        recorded of the file (`Spec.from_json`), which a generated package's `load()` passes."""
        with collection_paused():  # one collector pass after both, not one after each
            return cls(Spec.from_json(Path(path).read_bytes(), seal), **options)

    def load(self, spec: Spec) -> None:
        """Load (or reload) a spec: everything is compiled once here (each tool's decider on
        its first decision). Open sessions judge their next calls under it; a pending approval
        is judged again when it is answered."""
        build_models()  # calls validate from any thread: every validator is built before one
        with collection_paused():  # thousands of acyclic objects: no collector passes
            self.spec = spec
            self.policy_version = spec.content_hash()
            self.engine = PolicyEngine(spec)
            self.names = ToolNames(spec, self._aliases)
            self.validators = {t.id: Validator(t.input) for t in spec.tools.values()}
            self.outputs = {
                t.id: Validator(t.output) for t in spec.tools.values() if t.output is not None
            }
            self.checker = AvailabilityChecker(spec)
        self._surfaces: dict[str, tuple[str, ...]] = {}
        self._index: ExposureIndex | None = None
        if self.shadowing is not None:
            self.shadowing.attach(self)
        loaded = NewEvent(
            HARNESS_STREAM,
            "State",
            "spec.loaded",
            {"spec": spec.name, "version": spec.version, "policy_version": self.policy_version},
        )
        self.store.announce(
            [loaded]
        )  # written with this harness's first event: a reader writes none

    def shadow(self, candidate: Spec | None) -> Shadow | None:
        """Judge every decision from now on also under `candidate`, never enforcing it: a
        decision it takes otherwise is recorded as a `decision.diverged` event in the
        session's stream, in the decision's commit (`runtime/session/shadow.py`; listed by `harnessc
        log divergences`). A candidate replaces the one before; None stops. Returns the
        `Shadow` (its `judged`, `diverged` and `errors` counts), or None.

        >>> h = Harness(Spec(name="demo", root_module="demo"))
        >>> h.shadow(Spec(name="demo", root_module="demo")).judged
        0
        >>> h.shadow(None) is None
        True
        """
        if candidate is None:
            if self.shadowing is not None:
                self.shadowing = None
                self.store.append(NewEvent(HARNESS_STREAM, "State", "shadow.stopped", {}))
            return None
        from .shadow import Shadow

        found = Shadow(candidate)
        found.attach(self)
        self.shadowing = found
        self.store.append(
            NewEvent(
                HARNESS_STREAM,
                "State",
                "shadow.loaded",
                {"spec": candidate.name, "policy_version": found.policy_version},
            )
        )
        return found

    # -- the registry side ------------------------------------------------------------------------

    def surface_tools(self, surface: str) -> tuple[str, ...]:
        """The public tools of a surface (qualified name), computed once per spec."""
        found = self._surfaces.get(surface)
        if found is None:
            found = self._surfaces[surface] = surface_tools(self.spec, self.spec.surfaces[surface])
        return found

    def availability(
        self, facts: Facts | Mapping[str, Any] | None = None, who: Who | None = None
    ) -> Availability:
        """Every tool's availability under a facts snapshot, each unavailable one with its
        reasons (`requires`, the six MCP conditions, a dynamic tool's provider); `who`: the
        session's actor, task, resource and environment a `requires` may read."""
        return self.checker.check(facts, who)

    def exposure_index(self) -> ExposureIndex:
        """The ranking index over every tool a surface or a skill can hold (built once)."""
        if self._index is None:
            tools = [t for t in self.spec.tools.values() if t.kind in PUBLIC_KINDS | {"private"}]
            if self._embeddings is not None:
                matrix, ids = self._embeddings
                self._index = ExposureIndex.from_tools(tools, matrix, ids, embedder=self._embedder)
            else:
                self._index = ExposureIndex.from_tools(tools, embedder=self._embedder)
        return self._index

    # -- sessions -------------------------------------------------------------------------------

    def session(
        self,
        agent: str,
        actor: Mapping[str, Any] | None = None,
        task: str | Mapping[str, Any] | None = None,
        facts: Facts | Mapping[str, Any] | None = None,
        *,
        resource: Mapping[str, Any] | None = None,
        env: Mapping[str, Any] | None = None,
        session_id: str | None = None,
        said: Iterable[str] = (),
    ) -> Session:
        """Open a session of an agent (`planner` or `remediation.planner`) for an actor (user,
        role, roles, tenant) on a task (an id or `{id, stage, purpose}`), with a facts
        snapshot (a `Facts`, or declared facts by name). `said`: the user's messages so far
        (`Session.user_said`), the source of values `from user`.

        The actor is always given (`{}` when no one is known: every call is recorded as its
        actor's), its `user` text; an argument of the wrong kind raises a `TypeError` that says
        which. `session_id` names a new session (one is made up when None): non-empty text of
        at most 256 printable characters, no session's yet (`resume` continues one:
        `session-exists`), and not a stream the runtime keeps of its own (`harness`,
        `approval:…`, `grant:…`, `workflow:…`: `reserved-session-id`), whose records a
        session's would otherwise mix with (a session named after a pending request's claim
        made it unanswerable)."""
        named = _new_session_id(session_id)
        found = self._agent(agent)
        # every call of the session is recorded as its actor's: an actor is always given (an
        # empty mapping for none known), and its user is text
        kinds = "a mapping (user, role, roles, tenant)"
        need_kind("a session", "actor", actor, Mapping, kinds, required=True)
        assert actor is not None
        if "user" in actor:
            need_kind("a session", "actor.user", actor["user"], str, "text", required=True)
        for what, value, allowed, kinds in (
            ("task", task, str | Mapping, "an id or a mapping"),
            ("facts", facts, Facts | Mapping, FACTS_KINDS),
            ("resource", resource, Mapping, "a mapping"),
            ("env", env, Mapping, "a mapping"),
            ("said", said, str | Iterable, "the user's messages (texts)"),
        ):
            need_kind("a session", what, value, allowed, kinds)
        snapshot = Facts.of(facts)
        self._declared(snapshot)
        task_map: Mapping[str, Any]
        if task is None:
            task_map = {}
        elif isinstance(task, str):
            task_map = {"id": task}
        else:
            task_map = task
        session = self._open(
            agent=found,
            actor=actor,
            task=task_map,
            facts=snapshot,
            resource=resource or {},
            env=env or {},
            session_id=named,
            fresh=named is not None,
        )
        for text in [said] if isinstance(said, str) else said or ():
            session.user_said(text)
        return session

    def _declared(self, facts: Facts) -> None:
        """Raise unless every fact value is of a fact the spec declares (`ValueError`): a
        misspelt one leaves the fact meant absent, and a rule that tests it for `true` lets
        the call through."""
        check_facts(facts.values, self.spec.facts)

    def _agent(self, name: str) -> Agent:
        """The declared agent `name` (`planner` or `remediation.planner`)."""
        found = self.spec.agents.get(name) or self.spec.agents.get(self.spec.qualified(name))
        if found is None:
            raise HarnessError("unknown-agent", f"no agent `{name}` is declared")
        return found

    def resume(self, session_id: str, *, facts: Facts | Mapping[str, Any] | None = None) -> Session:
        """The session `session_id`, open in this process or rebuilt from the log: its agent
        (under the spec loaded now), actor, task (with its recorded denials), facts, resource
        and env, its parent and child sessions, and its actions (state, frozen call, recorded
        result). `facts` replaces the recorded snapshot (recorded as `session.resumed`).

        A frozen call is rebuilt only when its recorded arguments and execution give its
        recorded input hash again; a call with `secret` values (never stored) is not, and is
        taken up when the application normalizes it again with the same arguments.

        >>> # s = h.resume("ses-…"); s.invoke(s.call("call-2"))
        """
        if facts is not None:
            self._declared(Facts.of(facts))
        session = self.sessions.get(session_id)
        if session is None:
            view = self.projections.sessions.get(session_id)
            if view is None or not view.started:
                self.catch_up()
                view = self.projections.sessions.get(session_id)
            if view is None or not view.started:
                self._archived(f"the session `{session_id}`")
                raise HarnessError("unknown-session", f"no session `{session_id}` is recorded")
            session = self._restore(view, facts)
        elif session.state.ended and session.parent is None and self._cut_away(session_id):
            # ended here, then archived by a compaction (of any process): the object kept in
            # memory no longer stands for anything in the log
            self.release(session_id)
            self._archived(f"the session `{session_id}`")
        elif facts is not None:
            session.facts = as_recorded(Facts.of(facts))
        catch_up_session(session)  # as other processes left it, and past dead leases
        session.state.touched = self.clock()
        if facts is not None:
            session.harness.store.append(
                NewEvent(
                    session.id,
                    "State",
                    "session.resumed",
                    {"policy_version": self.policy_version, "facts": facts_record(session.facts)},
                )
            )
        return session

    def _cut_away(self, session_id: str) -> bool:
        """Whether a compaction archived the session's own events (an ended session's family
        is archived whole; a live one is carried across the cut)."""
        try:
            if find_cut(self.store) is None:
                return False
        except StoreError:
            return False
        return not self.store.read(session_id)

    def _archived(self, what: str) -> None:
        """Raise HarnessError `archived` when the log was compacted: what is not found in it
        may be among the events the compaction archived (the cut and its archive named)."""
        try:
            cut = find_cut(self.store)
        except StoreError:
            return
        if cut is not None:
            raise HarnessError(
                "archived",
                f"{what} is not in the log: the log was compacted before position "
                f"{cut.before + 1}, and a session that ended before it is in the archive"
                + (f" `{cut.archive['file']}`" if cut.archive.get("file") else "")
                + " (`harnessc replay --archive`, `harnessc why --archive` read it)",
            )

    def release(self, session_id: str) -> bool:
        """Release an open session, with its child and skill sessions, from this harness's
        memory: its calls, results, ledger and caches go, the log keeps everything, and
        `resume` (or an approval, `complete` or `cancel` of one of its actions) rebuilds it
        from the log. Only a root session is released (a child shares its parent's ledger),
        and only while none of the family runs a call in this process; returns whether it was.
        An object of a released session still works, as a session open in another process
        does (every store admits each call once); `resume` gives this harness's own again."""
        session = self.sessions.get(session_id)
        if session is None or session.parent is not None:
            return False
        family = _family(session)
        if any(s.state.running or s.state.inflight for s in family):
            return False
        for s in family:
            self.sessions.pop(s.id, None)
            for action_id in s.state.by_action_id:
                self._action_sessions.pop(action_id, None)
        return True

    def release_idle(self, idle_s: float | None = None) -> list[str]:
        """Release every root session that ended, or whose family nobody touched (a call
        normalized or invoked, something said, facts updated, a resume) for `idle_s` seconds
        of the harness clock (by default `release_after_s`); returns their ids."""
        limit = self.release_after_s if idle_s is None else idle_s
        now = self.clock()
        self._swept = now
        released = []
        for session in [s for s in self.sessions.values() if s.parent is None]:
            family = _family(session)
            idle = limit is not None and all(
                (now - s.state.touched).total_seconds() >= limit for s in family
            )
            if (session.state.ended or idle) and self.release(session.id):
                released.append(session.id)
        return released

    def _sweep(self) -> None:
        """`release_idle`, at most once every quarter of `release_after_s` (a pass reads every
        open session)."""
        assert self.release_after_s is not None
        if (self.clock() - self._swept).total_seconds() >= self.release_after_s / 4:
            self.release_idle()

    def _restore(self, view: SessionView, facts: Facts | Mapping[str, Any] | None) -> Session:
        started = view.started
        name = started.get("agent")
        agent = self.spec.agents.get(name) if isinstance(name, str) else None
        if agent is None:
            raise HarnessError(
                "unknown-agent",
                f"the session `{view.session_id}` is of the agent `{name}`, which the loaded spec "
                "does not declare",
            )
        parent = self.resume(started["parent"]) if started.get("parent") else None
        if view.session_id in self.sessions:  # resuming the parent resumed its children
            session = self.sessions[view.session_id]
            if facts is not None:
                session.facts = as_recorded(Facts.of(facts))
            return session
        skill = self.spec.skills.get(started["skill"]) if started.get("skill") else None
        task = dict(started.get("task") or {})
        if view.denials:
            task["denials"] = list(view.denials)
        events = self.store.read(view.session_id) if facts is None else []
        session = Session(
            self,
            session_id=view.session_id,
            agent=agent,
            actor=started.get("actor") or {},
            task=task,
            facts=Facts.of(facts)
            if facts is not None
            else replay_facts(Facts.from_json(started.get("facts")), events),
            resource=started.get("resource") or {},
            env=started.get("env") or {},
            parent=parent,
            skill=skill,
            goal=started.get("goal"),
        )
        self.sessions[session.id] = session
        session.state.facts_at = events[-1].position if events else 0
        if parent is not None:
            parent.children.append(session)
        restore_actions(session, list(self.projections.actions_of(view.session_id)))
        if facts is None:
            session.harness.store.append(
                NewEvent(
                    session.id, "State", "session.resumed", {"policy_version": self.policy_version}
                )
            )
        for child in self.projections.sessions.values():
            if child.started.get("parent") == session.id and child.session_id not in self.sessions:
                self.resume(child.session_id)
        return session

    def catch_up(self) -> int:
        """Fold the events appended since the last look (by any process) into `projections`
        and take up the approval requests and grants they hold; returns how many were read.
        Each page is walked on the chain before it is folded: at a broken link the store
        refuses every write from then on and `UnverifiedLog` is raised (a forensic harness
        notes the break in `broken` and folds on, reading what it can)."""
        try:
            read = self.projections.catch_up(self.store, watch=self._watch)
        except UnverifiedLog as error:
            self.broken = error.verification
            self.store.refuse(error)
            if not self.forensic:
                raise
            self._watch = None  # read on, vouching for nothing
            read = self.projections.catch_up(self.store, unreadable=self.unreadable)
        except UnreadableEvent as error:  # a row the chain holds, its payload unreadable
            if not self.forensic:
                self.store.refuse(error)
                raise
            self.unreadable.append(error)
            read = self.projections.catch_up(self.store, unreadable=self.unreadable)
        self.approvals.restore(self.projections, self.engine.path_facts)
        return read

    def _open_log(self) -> None:
        """Fold the log as it is opened, walking its chain from its last checkpoint (every
        page before it is folded); when it walked `CHECKPOINT_EVERY` events past that one,
        record a checkpoint of where it got to, with this harness's first write."""
        self.catch_up()
        watch = self._watch
        if watch is None:
            return  # a forensic harness past a break
        found = watch.check(self.store)  # and what a page cannot tell: MACs stripped at the end
        if not found.ok:
            self.broken = found
            error = UnverifiedLog(found)
            self.store.refuse(error)
            if not self.forensic:
                raise error
            return
        if self.forensic:
            return
        since = watch.resumed.position if watch.resumed is not None else 0
        head = watch.head()
        if head is not None and head.position - since >= CHECKPOINT_EVERY:
            self._checkpoint(head)

    def _checkpoint(self, head: Checkpoint) -> None:
        event = NewEvent(HARNESS_STREAM, "State", CHECKPOINT_TYPE, head.to_dict())
        self.store.announce([event])

    def _open_child(
        self,
        parent: SessionSeam,
        *,
        agent: Agent,
        skill: Skill | None = None,
        goal: str | None = None,
        session_id: str | None = None,
    ) -> Session:
        """A child session of `parent` (a delegated agent's, or a skill's: `Session.delegate`,
        `Session.skill`), with the parent's actor, task, facts, resource and env."""
        assert isinstance(parent, Session), parent
        child = self._open(
            agent=agent,
            actor=parent.actor,
            task=parent.task,
            facts=parent.facts,
            resource=parent.resource,
            env=parent.env,
            parent=parent,
            skill=skill,
            goal=goal,
            session_id=session_id,
        )
        parent.children.append(child)
        return child

    def _step_view(self, store: EventStore) -> Harness:
        """The harness one workflow step sees: the same compiled spec, executors and engine,
        with `store` (the step's buffer, not chained: the log it goes to is walked by this
        harness) and approvals and sessions of its own, so concurrent steps share nothing."""
        view = copy.copy(self)
        view.store = store
        view.walks_no_chain()
        view.approvals = Approvals(store, self.clock)
        view.sessions = {}
        return view

    def _held_by(self, action_id: str, session: SessionSeam) -> None:
        """Remember which open session holds an action (`complete` and `cancel` find it)."""
        assert isinstance(session, Session), session
        self._action_sessions[action_id] = session

    def _open(
        self,
        *,
        agent: Agent,
        actor: Mapping[str, Any],
        task: Mapping[str, Any],
        facts: Facts,
        resource: Mapping[str, Any],
        env: Mapping[str, Any],
        parent: SessionSeam | None = None,
        skill: Skill | None = None,
        goal: str | None = None,
        session_id: str | None = None,
        tools: tuple[str, ...] | None = None,
        fresh: bool = False,
    ) -> Session:
        assert parent is None or isinstance(parent, Session), parent
        session = Session(
            self,
            session_id=session_id or "ses-" + uuid.uuid4().hex[:16],
            agent=agent,
            actor=actor,
            task=task,
            facts=facts,
            resource=resource,
            env=env,
            parent=parent,
            skill=skill,
            goal=goal,
            tools=tools,
        )
        if self.release_after_s is not None and parent is None:
            self._sweep()
        self.sessions[session.id] = session
        try:
            # a session named by its caller starts only on a stream no one has written
            start_session(session, fresh=fresh)
        except ConcurrencyError:
            del self.sessions[session.id]
            raise HarnessError(
                "session-exists",
                f"a session `{short_text(session.id, 80)}` is already recorded: "
                "`resume` continues it",
            ) from None
        return session

    # -- executors ------------------------------------------------------------------------------

    def implement(self, tool_id: str) -> Callable[[F], F]:
        """Bind the decorated callable (sync or async; `fn(args)` or `fn(args, ctx)`) as the
        executor of a registered tool.

        >>> # @h.implement("change.create")
        >>> # def create(args): return {"change_id": "chg-1", "state": "pending"}
        """

        def bind(fn: F) -> F:
            self.bind(tool_id, fn)
            return fn

        return bind

    def bind(self, tool_id: str, fn: Callable[..., Any]) -> None:
        """`implement` without a decorator."""
        if tool_id not in self.spec.tools:
            raise HarnessError("unknown-tool", f"no tool `{tool_id}` is registered")
        self.executors.bind(tool_id, fn)

    def preview_with(self, tool_id: str, previewer: Callable[[dict[str, Any]], Any]) -> None:
        """Preview → approve: when a session's call of `tool_id` asks for approval,
        `previewer(args)` (what the call would do: a diff, the target, a dry run) runs on the
        frozen arguments and its output, scrubbed of the call's secret values, is recorded as
        `call.previewed` (bound to tool_call_id and input hash) before the request; an edited
        call approved with `approve_with_edits` is previewed afresh. A previewer that raises
        records its error instead. Only a tool with the `preview` effect (on the tool or one of
        its operations) takes one: `HarnessError` `unknown-tool` or `no-preview-effect`."""
        tool = self.spec.tools.get(tool_id)
        if tool is None:
            raise HarnessError("unknown-tool", f"no tool `{tool_id}` is registered")
        effects = set(tool.effects).union(*(op.effects for op in tool.operations.values()))
        if "preview" not in effects:
            raise HarnessError(
                "no-preview-effect",
                f"the tool `{tool_id}` does not declare the `preview` effect: a dry run of it "
                "is not promised, so it takes no previewer",
            )
        if not callable(previewer):
            raise TypeError("a previewer is a callable: previewer(args) -> what the call would do")
        self._previewers[tool_id] = previewer

    def _record_preview(self, session_id: str, pending: PendingCall) -> None:
        """Run the previewer of `pending`'s tool (`preview_with`), if it has one, and record
        its answer bound to the call (a `call.previewed` event in the session's stream)."""
        previewer = self._previewers.get(pending.tool_id)
        if previewer is None:
            return
        tool = self.spec.tools.get(pending.tool_id)
        args = thaw(pending.args)
        record_preview(
            self.store, session_id, pending, run_preview(previewer, tool, args, pending.execution)
        )

    # -- approvals ------------------------------------------------------------------------------

    ANSWER_POLL_S = 1.0
    """How often `wait_for_answer` looks at the log when the store is not told of commits
    (SQLite, or a PostgreSQL notification lost): an answer given elsewhere reaches the
    waiting process within this delay (on PostgreSQL, within a round trip)."""

    def wait_for_answer(
        self, request_id: str, *, timeout_s: float, poll_s: float | None = None
    ) -> ApprovalRequest:
        """Wait until the approval request is answered, here or in any process on the log
        (the console, `harnessc approvals approve`, another worker), at most `timeout_s`;
        returns the request as the log leaves it (still `pending` when the time ran out).
        On PostgreSQL the store is told of every commit (LISTEN/NOTIFY), so the answer
        arrives within a round trip; otherwise the log is read every `poll_s`
        (`ANSWER_POLL_S`). Then `s.invoke(call)` runs the call under the grant."""
        poll = self.ANSWER_POLL_S if poll_s is None else poll_s
        deadline = time.monotonic() + timeout_s
        while True:
            self.catch_up()
            request = self.approvals.get(request_id)
            left = deadline - time.monotonic()
            if request.status != "pending" or left <= 0:
                return request
            self.store.wait_for_append(min(left, poll))

    def approve(self, request_id: str, *, by: Mapping[str, Any]) -> ApprovalOutcome:
        """Approve a request as `by` (an actor: user, role, roles). The approver must be one the
        request names (a role in `by`'s roles, or its user), and not the requester when the ASK
        says `self_approval deny` (the default at risk `high` and above; `ApprovalError`
        `self-approval`: the same `user`, or an approver with none). The call is judged again:
        a DENY now wins (no grant); an ASK gets the grant of the rule that asks, bound to this
        call (`once`: its session and exact triple), which turns that ASK into ALLOW. A request
        past its `expires` deadline is not answered: its expiry is recorded and `ApprovalError`
        `expired` raised (the same for `deny` and `approve_with_edits`). A call this process
        cannot rebuild (its secret values are never stored) is approved as the request recorded
        it, without judging it again (`_approve_as_recorded`)."""
        _need_actor("approve", by)
        req = self._pending(request_id)
        if not is_approver(req.approvers, by):
            raise ApprovalError(
                "not-an-approver", f"`{_who(by)}` is not an approver of `{request_id}`"
            )
        session = self.resume(req.session_id)
        pending = self.approvals.get(request_id).pending  # resuming attaches a restored call
        if pending is None:
            take_up_calls(session)  # a call made since this process resumed the session
            pending = self.approvals.get(request_id).pending
        if pending is None:
            return self._approve_as_recorded(req, session, by)
        # judged again (the policy may have changed); the decision is committed with the answer
        decision = decide_session(session, pending, commit=False)
        try:
            who = _who(by)
            if decision.effect == "deny":
                self.approvals.resolve(
                    request_id, "withdrawn", who, reason=decision.reason, rule=decision.rule
                )
                if spans.tracer is not None:
                    spans.approval_waited(req, "denied-by-policy", self.clock())
                return ApprovalOutcome(
                    self.approvals.get(request_id),
                    "denied-by-policy",
                    None,
                    decision,
                    decision.reason,
                )
            _may_approve(decision, session, by, req.tool_id, request_id)
            grant, issued = self._grant_for(req, session, pending, decision, who)
            resolved = self.approvals.resolve(request_id, "approved", who, with_events=issued)
        finally:
            self.store.flush()  # committed already, unless the answer was refused
        self._authorise(grant, session, pending)
        if spans.tracer is not None:
            spans.approval_waited(req, "approved", self.clock())
        return ApprovalOutcome(resolved, "approved", grant, decision)

    def deny(self, request_id: str, *, by: Mapping[str, Any], reason: str) -> ApprovalOutcome:
        """Deny a request as `by` (an approver, or the actor who asked). The denial is recorded
        as a task fact (`task.denials`) and the call is cancelled. A denial says why: a
        `reason` that is not text, or blank, is `ApprovalError` `reason-required`."""
        if not isinstance(reason, str) or not reason.strip():
            raise ApprovalError("reason-required", "a denial says why: give a reason")
        _need_actor("deny", by)
        req = self._pending(request_id)
        session = self.resume(req.session_id)
        if not (is_approver(req.approvers, by) or _who(by) == _who(session.actor)):
            raise ApprovalError("not-an-approver", f"`{_who(by)}` may not deny `{request_id}`")
        # the answer, the denial's task fact and the cancelled call: one transaction
        resolved = session.record_denial(
            req.pending or req,
            _who(by),
            reason,
            answer=lambda events: self.approvals.resolve(
                request_id, "rejected", _who(by), reason=reason, with_events=events
            ),
        )
        assert resolved is not None  # returned by the answer
        if spans.tracer is not None:
            spans.approval_waited(req, "denied", self.clock())
        return ApprovalOutcome(resolved, "denied", None, None, reason)

    def approve_with_edits(
        self,
        request_id: str,
        args: Mapping[str, Any],
        *,
        by: Mapping[str, Any],
        reason: str | None = None,
    ) -> ApprovalOutcome:
        """Approve a request with edited arguments, as `by` (an approver of the request).

        The edited arguments are normalized as a new frozen call of the same tool, with the
        same tool_call_id, in the request's session (a new input hash; schema-checked: an
        invalid edit raises `ApprovalError("invalid-edit")` and the request stays pending) and
        decided afresh under the spec loaded now. A DENY stays a DENY: the edit is refused
        (`edit-denied`, with the rule) and the request stays pending. An ASK is approved by
        `by` (the same approver and self-approval checks as `approve`): the grant is bound to
        the edited call only. An ALLOW needs no grant. Either way the original request is
        answered `superseded`, a `call.superseded` event records both input hashes, who
        edited and why, and the original call is cancelled: it never runs (invoking it
        returns a not-run result with `error_category` `superseded`). The agent receives
        the edited call as `outcome.call`, or as `session.call(tool_call_id)` in any process.

        >>> # out = h.approve_with_edits("apr-…", {**args, "canary_percent": 5}, by=sre)
        >>> # s.invoke(out.call)
        """
        _need_actor("approve_with_edits", by)
        req = self._pending(request_id)
        who = _who(by)
        if not is_approver(req.approvers, by):
            raise ApprovalError("not-an-approver", f"`{who}` is not an approver of `{request_id}`")
        if not isinstance(args, Mapping):
            raise ApprovalError("invalid-edit", "the edited arguments must be an object")
        if _masked(args):
            raise ApprovalError(
                "invalid-edit",
                f"the edited arguments of `{request_id}` hold `{REDACTED}`, the mask of a "
                "secret value: give the value itself",
            )
        session = self.resume(req.session_id)
        edited = session.normalize(req.tool_id, req.tool_call_id, args)
        if not isinstance(edited, PendingCall):
            raise ApprovalError(
                "invalid-edit",
                f"the edited arguments of `{request_id}` are refused ({edited.code}): "
                f"{edited.message}",
            )
        if edited.input_hash == req.input_hash:
            raise ApprovalError(
                "edit-unchanged",
                f"the edited arguments of `{request_id}` are the call's own: approve it instead",
            )
        decision = session.decide(edited)  # the edited call judged afresh
        if decision.effect == "deny":
            self.store.flush()
            raise ApprovalError(
                "edit-denied",
                f"the edited call of `{request_id}` is denied by `{decision.rule}`: "
                f"{decision.reason} (the request stays pending)",
            )
        _may_approve(decision, session, by, req.tool_id, request_id)
        self._record_preview(req.session_id, edited)  # the edited call previewed afresh
        superseded = call_superseded(
            req.session_id,
            approval_id=request_id,
            tool_id=req.tool_id,
            tool_call_id=req.tool_call_id,
            input_hash=req.input_hash,
            edited_input_hash=edited.input_hash,
            by=who,
            reason=reason,
            effect=decision.effect,
        )
        grant, issued = self._grant_for(req, session, edited, decision, who)
        # the answer, the edit and the grant for the edited call: one transaction
        resolved = self.approvals.resolve(
            request_id,
            "superseded",
            who,
            with_events=[superseded, *issued],
            reason=reason,
            edited_input_hash=edited.input_hash,
        )
        original = session.state.actions.get(f"{req.tool_call_id}:{req.input_hash}")
        if original is not None and not original.terminal:
            original.cancel(f"superseded by an edit of `{who}`")
        self._authorise(grant, session, edited)
        self.catch_up()
        if spans.tracer is not None:
            spans.approval_waited(req, "approved", self.clock())
        return ApprovalOutcome(resolved, "approved", grant, decision, reason, edited)

    def _approve_as_recorded(
        self, req: ApprovalRequest, session: Session, by: Mapping[str, Any]
    ) -> ApprovalOutcome:
        """Approve a call this process cannot rebuild (its secret values are never stored)
        without judging it again: as the request recorded it, under the rule that asked, by one
        of that rule's approvers. The grant is `rule_bound`: the agent's process, which holds
        the values, judges the call again before it runs, and the grant authorises it only while
        that rule is still the winning ASK (a DENY still wins)."""
        request_id, who = req.request_id, _who(by)
        if req.grant is None:  # recorded before requests carried their grant
            raise ApprovalError(
                "call-not-restorable",
                f"the call `{req.tool_call_id}` of `{request_id}` carries secret values, which "
                f"are never stored: normalize it again in session `{req.session_id}` (same tool, "
                "tool_call_id and arguments), then approve",
            )
        _not_self(
            req.scope.get("requester_may_approve", True), session, by, req.tool_id, request_id
        )
        grant, issued = self.approvals.grant_for(
            req,
            req,
            req.grant,
            rule=req.rule,
            policy=req.policy,
            by=who,
            task_id=session.task_id,
            path_facts=self.engine.path_facts,
            rule_bound=True,
        )
        resolved = self.approvals.resolve(request_id, "approved", who, with_events=[issued])
        self.approvals.adopt(grant)
        if spans.tracer is not None:
            spans.approval_waited(req, "approved", self.clock())
        return ApprovalOutcome(resolved, "approved", grant)

    def _grant_for(
        self,
        req: ApprovalRequest,
        session: Session,
        pending: PendingCall,
        decision: Decision,
        who: str,
    ) -> tuple[ApprovalGrant | None, list[NewEvent]]:
        """The grant an approved ASK issues, bound to `pending`, and its event, for the
        answer's transaction (no grant for an ALLOW)."""
        if decision.effect != "ask":
            return None, []
        grant, issued = self.approvals.grant_for(
            req,
            pending,
            decision.grant,
            rule=decision.rule,
            policy=decision.policy,
            by=who,
            task_id=session.task_id,
            path_facts=self.engine.path_facts,
        )
        return grant, [issued]

    def _authorise(
        self, grant: ApprovalGrant | None, session: Session, pending: PendingCall
    ) -> None:
        """After the answer and its grant were committed: hold the grant and decide the call
        with it (AUTHORIZED), committed before the answer returns."""
        if grant is None:
            return
        self.approvals.adopt(grant)
        try:
            session.decide(pending)  # the grant now authorises the call: AUTHORIZED
        finally:
            self.store.flush()

    def _request(self, request_id: str) -> ApprovalRequest:
        if request_id not in self.approvals.requests:
            self.catch_up()  # asked in another process, perhaps
        return self.approvals.get(request_id)

    def _pending(self, request_id: str) -> ApprovalRequest:
        """The request, still waiting for an answer: else `ApprovalError` `not-pending`, or
        `expired` (past its deadline: the expiry is recorded now, once, if nothing was)."""
        req = self._request(request_id)
        # what an answer depends on, walked again as stored now, right before it is written
        if self._watch is not None:
            streams = (answered_stream(request_id), req.session_id)
            self._vouch(lambda watch: watch.recheck(self.store, streams))
        elif self.broken is not None:  # a forensic harness past a break
            raise UnverifiedLog(self.broken)
        if req.expired(self.clock()):
            self.expire_approvals([request_id])
            req = self.approvals.get(request_id)
        if req.status == "expired":
            raise expired_error(req)
        if req.status != "pending":
            raise ApprovalError(
                "not-pending", f"the approval request `{request_id}` is already {req.status}"
            )
        return req

    def expire_approvals(self, request_ids: Iterable[str] | None = None) -> list[ApprovalRequest]:
        """Record the expiry of pending approval requests past their `expires` deadline (all of
        them, or those of `request_ids`): each is resolved `expired` exactly once across the
        processes on the store (an answer that claimed it first stands) and its call is
        cancelled. Listing requests never records anything; this sweep, an answer, or the
        agent invoking the call does. Returns the requests this call expired."""
        self.catch_up()
        now = self.clock()
        ids = list(self.approvals.requests) if request_ids is None else list(request_ids)
        expired = []
        for request_id in ids:
            req = self.approvals.requests.get(request_id)
            if req is None or not req.expired(now):
                continue
            done = self.approvals.expire(request_id)
            if done is None:
                self.catch_up()  # answered (or expired) elsewhere first
                continue
            expired.append(done)
            session = self.sessions.get(done.session_id)
            if session is not None:
                session.cancel_expired(done)
            if spans.tracer is not None:
                spans.approval_waited(req, "expired", now)
        return expired

    # -- asynchronous work ------------------------------------------------------------------

    def complete(
        self,
        action_id: str,
        data: Any = None,
        *,
        error: str | BaseException | None = None,
        by: Mapping[str, Any] | str | None = None,
    ) -> Result:
        """Report the result of work an executor accepted (`Accepted`), in this process or
        another: `data` (the output, checked against the tool's output schema), an `Outcome`,
        or `error=`. See `Session.complete`; raises `ActionError` (`unknown-action`,
        `already-finished`, `not-waiting`).

        >>> # h.complete("act-…", {"deployment_id": "dep-1", ...}, by="deploy-webhook")
        """
        return self._session_of(action_id).complete(action_id, data, error=error, by=by)

    def cancel(
        self,
        action_id: str,
        *,
        reason: str = "cancelled",
        by: Mapping[str, Any] | str | None = None,
    ) -> Result:
        """Cancel an action that has not finished (see `Session.cancel`)."""
        return self._session_of(action_id).cancel(action_id, reason=reason, by=by)

    def _session_of(self, action_id: str) -> Session:
        session = self._action_sessions.get(action_id)
        if session is not None:
            return session
        view = self.projections.actions.get(action_id)
        if view is None:
            self.catch_up()
            view = self.projections.actions.get(action_id)
        if view is None:
            raise ActionError(
                "unknown-action", f"no action `{action_id}` is recorded", action_id=action_id
            )
        self.resume(view.stream)
        session = self._action_sessions.get(action_id)
        if session is None:
            raise ActionError(
                "unknown-action",
                f"the action `{action_id}` cannot be taken up: its tool `{view.tool_id}` is no "
                "longer registered",
                action_id=action_id,
            )
        return session

    @property
    def workflows(self) -> Any:
        """The spec's durable workflows (`runtime/workflows.Workflows`; they need `dbos`)."""
        from ..workflows.manage import Workflows

        if "_workflows" not in self.__dict__:
            self._workflows = Workflows(self)
        return self._workflows

    # -- the log ----------------------------------------------------------------------------------

    def head(self) -> Checkpoint:
        """A checkpoint of the event log's head to keep outside it (a ticket, another
        system): `h.verify(anchor=checkpoint)` later finds a log that lost events or was
        rewritten up to it.

        >>> h = Harness(Spec(name="demo", root_module="demo"))
        >>> h.verify(anchor=h.head().to_text()).ok
        True
        """
        return self.store.checkpoint()

    def verify(self, anchor: Anchor | None = None) -> Verification:
        """Walk the event log's hash chain (`store.verify(anchor)`); see `Verification.proves`
        for what an ok result shows."""
        return self.store.verify(anchor)

    def vouched(self) -> Verification:
        """Verify the log's chain up to its head (`ChainWatch`, with the store's log key): the
        walk this harness began when it opened the log (from the log's last checkpoint), on
        to what was appended since; every page this harness folds is walked before it is
        folded, its own catching up inside a command too. Raises `UnverifiedLog` when the
        chain does not verify: the operators' commands (`operations`) act on nothing else."""
        if self._watch is None:
            if self.broken is not None:  # a forensic harness past a break
                raise UnverifiedLog(self.broken)
            self._watch = ChainWatch.whole(self.store)
        self.catch_up()
        return self._vouch(lambda watch: watch.vouch(self.store))

    def walks_no_chain(self) -> None:
        """This harness walks no chain from now on: its store is a buffer whose events reach a
        log that another harness walks (a workflow step's view, workflow_steps.py)."""
        self._watch = None

    def _vouch(self, check: Callable[[ChainWatch], _T]) -> _T:
        watch = self._watch
        if watch is None:  # a forensic harness past a break
            if self.broken is None:
                watch = self._watch = ChainWatch.whole(self.store)
            else:
                raise UnverifiedLog(self.broken)
        try:
            return check(watch)
        except UnverifiedLog as error:
            self.broken = error.verification
            self.store.refuse(error)
            raise


def _family(session: Session) -> list[Session]:
    """A session and its child and skill sessions, at every depth."""
    out = [session]
    for child in session.children:
        out.extend(_family(child))
    return out


def _new_session_id(given: Any) -> str | None:
    """An application's id for a new session (`Harness.session`), checked; None for one made
    up (an empty id is refused: it names no session an operator could find)."""
    if given is None:
        return None
    if not isinstance(given, str):
        raise HarnessError(
            "invalid-session-id", f"a session's id is text, not a {type(given).__name__}"
        )
    if not given:
        raise HarnessError(
            "invalid-session-id",
            "a session's id is non-empty text (leave it out, or None, to have one made up)",
        )
    if len(given) > 256 or not given.isprintable():
        raise HarnessError(
            "invalid-session-id",
            f"a session's id is at most 256 printable characters, not {short_text(given, 60)!r}",
        )
    if given == HARNESS_STREAM or given.startswith(RUNTIME_STREAMS):
        raise HarnessError(
            "reserved-session-id",
            f"`{given}` names records the runtime keeps of its own (`{HARNESS_STREAM}`, "
            + ", ".join(f"`{p}…`" for p in RUNTIME_STREAMS)
            + "): a session takes another id",
        )
    return given


def _may_approve(
    decision: Decision, session: Session, by: Mapping[str, Any], tool_id: str, request_id: str
) -> None:
    """Raise unless `by` may approve the call `decision` judged (an ASK: one of its
    approvers, and not the requester under separation of duties)."""
    if decision.effect != "ask":
        return
    who = _who(by)
    if not is_approver(decision.approvers, by):
        raise ApprovalError(
            "not-an-approver",
            f"`{who}` is not an approver of `{request_id}` under the current policy",
        )
    _not_self(decision.requester_may_approve, session, by, tool_id, request_id)


def _not_self(
    requester_may_approve: bool,
    session: Session,
    by: Mapping[str, Any],
    tool_id: str,
    request_id: str,
) -> None:
    """Raise `self-approval` when the requester may not approve and `by` is the requester."""
    if not requester_may_approve and is_requester(session.actor, by):
        raise ApprovalError("self-approval", _self_approval(_who(by), by, tool_id, request_id))


def _masked(value: Any) -> bool:
    """Whether an operator's edit still holds a masked secret (`[REDACTED]`): a walk with its
    own stack, so an edit nested deeper than the interpreter's recursion reaches `normalize`,
    which refuses it as it refuses any call's."""
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, str):
            if item == REDACTED:
                return True
        elif isinstance(item, Mapping):
            todo.extend(item.values())
        elif isinstance(item, list | tuple):
            todo.extend(item)
    return False


def _self_approval(who: str, by: Mapping[str, Any], tool_id: str, request_id: str) -> str:
    """Why `by` may not approve `request_id` under separation of duties."""
    if not by.get("user"):
        return (
            f"`{request_id}` needs an approver other than the requester, and `{who}` names no "
            "`user` to tell them apart"
        )
    return (
        f"`{who}` asked for this call of `{tool_id}` and may not approve it: another approver "
        "must (`self_approval`)"
    )


def _need_actor(method: str, by: object) -> None:
    """`by` is an actor (a mapping: user, role, roles); anything else is the application's
    mistake, said as such rather than failing inside."""
    if not isinstance(by, Mapping):
        raise TypeError(
            f"`{method}` takes `by`, the approver, as a mapping (user, role, roles), "
            f"not `{type(by).__name__}`"
        )


def _who(actor: Mapping[str, Any]) -> str:
    user = actor.get("user")
    if isinstance(user, str) and user:
        return user
    role = actor.get("role")
    return f"role:{role}" if isinstance(role, str) else "unknown"
