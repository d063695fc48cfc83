"""Durable workflows on DBOS Transact: one interpreter workflow, a process's engine, the client
every operator action goes through, and exactly-once recording in the harness's own log.

Imported only when workflows are used (`runtime/workflows.py` loads it lazily), so
`import harnessc.runtime` never needs `dbos`.

How a run is durable:

- The workflow's IR travels with the run (JSON, with its content hash) into one generic DBOS
  workflow, `harnessc.workflow`, registered under a pinned application version
  (`APP_VERSION`): a new build of a spec never strands a run that is waiting, and a running
  workflow's steps never change under it. Calls are judged under the harness loaded *now*.
- Every unit of work is a DBOS step (checkpointed output, JSON, never pickle); a gate is
  `set_event` + `recv` on the topic `<workflow id>/<gate>`, whose timeout DBOS keeps as a
  durable deadline across restarts.
- DBOS steps are at-least-once: a process that dies after a step's function returned but
  before DBOS checkpointed its output runs the step again. So each step buffers the events it
  produces and appends them to our log in one all-or-nothing transaction on a stream named
  after the workflow id and the step (`workflow:<id>/<step>#<attempt>`), refused unless that
  stream is new (`expected_seq=0`). A re-executed step first reads its stream: when the events
  are there, it returns the outcome they recorded and runs nothing. The log gets every event
  exactly once, on SQLite and PostgreSQL alike, without sharing a transaction with DBOS's
  tables (which live in another file on SQLite). A tool runs twice only when the process dies
  while the tool itself is running; its `tool_call_id` (the idempotency key) is the same both
  times.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from dbos import (
    DBOS,
    DBOSClient,
    DBOSConfig,
    DBOSPortableJSONSerializer,
    EnqueueOptions,
    SetWorkflowID,
)
from dbos._error import DBOSAwaitedWorkflowCancelledError, DBOSWorkflowCancelledError

from .approvals import Approvals, is_approver, is_requester
from .availability import Facts
from .canonical import jsonable
from .events import NO_SECRETS, Event, NewEvent, Secrets
from .lifecycle import ActionState
from .model import Agent, Approver, Step, Workflow
from .normalize import Refusal
from .store import (
    ConcurrencyError,
    EventStore,
    Expected,
    MemoryStore,
    _Numbering,
    _Unchained,
)
from .workflows import (
    FINISHED,
    GateOutcome,
    WorkflowError,
    dependants_skipped,
    ending_options,
    evaluate_when,
    initial_state,
    resolve_value,
    run_of,
    step_order,
    who,
)

if TYPE_CHECKING:
    from .harness import Harness

__all__ = [
    "APP_NAME",
    "APP_VERSION",
    "INTERPRETER",
    "QUEUE",
    "Engine",
    "append_once",
    "open_client",
    "open_store",
    "system_database_url",
]

APP_NAME = "harnessc"
APP_VERSION = "harnessc-workflows-3"
"""Pinned: DBOS resumes a run only on executors of the version it started under. It changes
only when the interpreter's checkpoint sequence changes, never with a build of a spec."""
INTERPRETER = "harnessc.workflow"
QUEUE = "harnessc-workflows"
START_TOPIC = "harnessc.start"
FACTS_TOPIC = "harnessc.facts"
FOREVER_S = 10 * 365 * 86400.0
"""`recv` needs a deadline; a gate without `timeout` waits this long (ten years)."""
STEP_EVENT = "workflow.step"
STATE_EVENT = "workflow.state"
"""The run's whole state, committed by the run itself with each of its steps."""
BRANCH_EVENT = "workflow.branch"
"""A parallel branch's view of its step (and its gates), committed by the branch's child
workflow with each of its steps until the run takes the branch's result."""
LIVE = ("pending", "running", "waiting")

_WORKERS_DDL = """
CREATE SCHEMA IF NOT EXISTS harnessc;
CREATE TABLE IF NOT EXISTS harnessc.workers (
    executor_id TEXT PRIMARY KEY,
    beat_at     TIMESTAMPTZ NOT NULL
)
"""
_SERIALIZER = DBOSPortableJSONSerializer()
_ENGINE: Engine | None = None


# ---------------------------------------------------------------------------------------------
# URLs and clients


def system_database_url(url: str) -> str:
    """DBOS's system database for a store URL: beside the SQLite file (`<file>.dbos`, its own
    WAL file), or the same PostgreSQL database (DBOS keeps its tables in schema `dbos`)."""
    if url.startswith("sqlite:///"):
        return url + ".dbos"
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql://" + url.split("://", 1)[1]
    raise WorkflowError(
        "unknown-store",
        f"durable workflows need a `sqlite:///` or `postgresql://` URL, not `{url}`",
    )


def _prepare_sqlite(url: str) -> None:
    # WAL is a property of the file: set once, every later connection (DBOS's too) uses it
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url[len("sqlite:///") :])
        try:
            conn.execute("PRAGMA journal_mode=WAL").fetchone()
        finally:
            conn.close()


def _worker_sqlite_engine(url: str) -> Any:
    """The engine a worker gives DBOS for its SQLite system database: DBOS's own settings
    (IMMEDIATE transactions, a 30 s busy timeout, foreign keys, its pool) plus
    `synchronous=NORMAL`. In WAL mode that keeps every commit durable against a process crash
    (SIGKILL included: the WAL is written before a commit returns), and skips the fsync that
    makes each commit, rather than each checkpoint, survive a power loss. After a power loss
    DBOS may forget its last few checkpoints, never half of one: the run replays from an
    earlier point and each governed step finds its events in our store (synchronous=FULL) and
    returns what they recorded without running the tool again. Clients (create, decide,
    cancel) keep SQLite's default FULL, and a FULL commit syncs every earlier one in the WAL."""
    import sqlalchemy as sa

    engine = sa.create_engine(url, pool_size=20, max_overflow=0, pool_timeout=30)

    @sa.event.listens_for(engine, "connect")
    def _pragmas(conn: Any, _record: Any) -> None:
        conn.isolation_level = "IMMEDIATE"
        conn.execute("PRAGMA busy_timeout=30000")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA synchronous=NORMAL")

    return engine


def open_store(url: str) -> EventStore:
    """The event store of a URL: `sqlite:///PATH` or `postgresql://…` (with the log key of
    the environment, as every store takes it)."""
    if url.startswith(("sqlite:///", "postgresql://", "postgres://")):
        from .stores import open_store as open_event_store

        return open_event_store(url)
    raise WorkflowError("unknown-store", f"no event store for `{url}`")


def same_store(store: EventStore, url: str) -> bool:
    """Whether `store` is the event log at `url`: the one a worker records in and every other
    process reads `status` from."""
    import os

    if url.startswith("sqlite:///"):
        conn = getattr(store, "_conn", None)
        if not isinstance(conn, sqlite3.Connection):
            return False
        files = [row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"]
        wanted = os.path.realpath(url[len("sqlite:///") :])
        return bool(files) and os.path.realpath(files[0]) == wanted
    conn = getattr(store, "_conn", None)
    info = getattr(conn, "info", None)
    if info is None or not hasattr(info, "dbname"):
        return False
    from psycopg.conninfo import conninfo_to_dict

    wanted_pg = conninfo_to_dict(url.replace("postgres://", "postgresql://", 1))
    return info.dbname == wanted_pg.get("dbname") and (
        "port" not in wanted_pg or str(info.port) == str(wanted_pg["port"])
    )


def open_client(store_url: str) -> DBOSClient:
    """A DBOS client on the system database of `store_url`, created and migrated if new."""
    url = system_database_url(store_url)
    _prepare_sqlite(url)
    DBOS.migrate(url)
    return DBOSClient(system_database_url=url, serializer=_SERIALIZER, application_name=APP_NAME)


# ---------------------------------------------------------------------------------------------
# The engine of a process


class Engine:
    """DBOS launched in this process as a worker of one harness: it runs the queue's workflows
    and, at launch, resumes the ones its executor id left unfinished."""

    def __init__(
        self,
        harness: Harness,
        store_url: str,
        *,
        executor_id: str = "local",
        poll_s: float = 0.1,
        concurrency: int | None = None,
        threads: int = 32,
        heartbeat_s: float = 2.0,
        stale_after_s: float = 30.0,
    ) -> None:
        self.harness = harness
        self.store_url = store_url
        self.url = system_database_url(store_url)
        self.executor_id = executor_id
        self.poll_s = poll_s
        self.concurrency = concurrency
        self.threads = threads
        self.heartbeat_s = heartbeat_s
        self.stale_after_s = stale_after_s
        self.delegate: Callable[..., Any] | None = None
        self.previewers: dict[str, Callable[[dict[str, Any]], Any]] = {}
        self.verifiers: dict[str, Callable[[dict[str, Any], Any], Any]] = {}
        self._stop = threading.Event()
        self._quiet = _Quiet()
        self._supervisor: threading.Thread | None = None
        self._sqlite: Any = None

    def launch(self) -> None:
        global _ENGINE
        if _ENGINE is not None and _ENGINE is not self:
            raise WorkflowError(
                "engine-running", "a workflow engine already runs in this process: close it first"
            )
        if not same_store(self.harness.store, self.store_url):
            raise WorkflowError(
                "store-mismatch",
                f"a worker records each step in the event store at `{self.store_url}`: give "
                "the harness that store (`SQLiteStore(path)` or `PostgresStore(url)`)",
            )
        _prepare_sqlite(self.url)
        config: DBOSConfig = {
            "name": APP_NAME,
            "system_database_url": self.url,
            "application_version": APP_VERSION,
            "executor_id": self.executor_id,
            "serializer": _SERIALIZER,
            "log_level": "WARNING",
            "notification_listener_polling_interval_sec": self.poll_s,
            "scheduler_polling_interval_sec": 3600.0,
            # DBOS's pool is unbounded by default: every waiting run's periodic check can add a
            # thread that then idles; bounded, the checks take turns
            "max_executor_threads": self.threads,
        }
        if self.url.startswith("sqlite:///"):
            self._sqlite = config["system_database_engine"] = _worker_sqlite_engine(self.url)
        _ENGINE = self
        logging.getLogger("dbos").addFilter(self._quiet)
        DBOS(config=config)
        DBOS.launch()
        DBOS.register_queue(
            QUEUE,
            polling_interval_sec=self.poll_s,
            worker_concurrency=self.concurrency,
            on_conflict="always_update",
        )
        if not self.url.startswith("sqlite"):
            self._supervisor = threading.Thread(
                target=self._supervise, name="harnessc-supervisor", daemon=True
            )
            self._supervisor.start()

    def close(self) -> None:
        global _ENGINE
        self._stop.set()
        if self._supervisor is not None:
            self._supervisor.join(timeout=10)
            self._supervisor = None
        if _ENGINE is self:
            self._quiet.closing = True
            DBOS.destroy()
            _ENGINE = None
        logging.getLogger("dbos").removeFilter(self._quiet)
        if self._sqlite is not None:
            self._sqlite.dispose()  # ours, not DBOS's: DBOS leaves an engine it was given open
            self._sqlite = None

    # -- several workers on PostgreSQL ------------------------------------------------------------

    def _supervise(self) -> None:
        """Beat every `heartbeat_s`; resume the runs of any executor whose last beat is older
        than `stale_after_s` (every worker supervises: DBOS re-enqueues a run through an atomic
        dequeue, so two supervisors recovering the same executor start each run once)."""
        import psycopg

        with psycopg.connect(self.store_url.replace("postgres://", "postgresql://")) as conn:
            conn.autocommit = True
            conn.execute(_WORKERS_DDL)
            while not self._stop.is_set():
                conn.execute(
                    "INSERT INTO harnessc.workers VALUES (%s, now()) ON CONFLICT (executor_id) "
                    "DO UPDATE SET beat_at = now()",
                    (self.executor_id,),
                )
                stale = conn.execute(
                    "DELETE FROM harnessc.workers WHERE executor_id <> %s AND beat_at < now() - "
                    "make_interval(secs => %s) RETURNING executor_id",
                    (self.executor_id, self.stale_after_s),
                ).fetchall()
                if stale:
                    DBOS._recover_pending_workflows([row[0] for row in stale])
                self._stop.wait(self.heartbeat_s)


class _Quiet(logging.Filter):
    """Drops two kinds of DBOS log records that say nothing went wrong: the traceback of a run
    that was cancelled (it stops at its next step, as asked) and, while the engine shuts down,
    one "Asyncio task cancelled" line per waiting run (each resumes at the next launch)."""

    def __init__(self) -> None:
        super().__init__()
        self.closing = False

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, DBOSAwaitedWorkflowCancelledError | DBOSWorkflowCancelledError):
            return False
        return not (self.closing and record.getMessage().startswith("Asyncio task cancelled"))


def _engine() -> Engine:
    if _ENGINE is None:
        raise WorkflowError("no-engine", "no workflow engine runs in this process")
    return _ENGINE


# ---------------------------------------------------------------------------------------------
# Operations every process can do through a client (a worker or not)


def enqueue(client: DBOSClient, run: dict[str, Any], workflow_id: str) -> None:
    options: EnqueueOptions = {
        "queue_name": QUEUE,
        "workflow_name": INTERPRETER,
        "workflow_id": workflow_id,
        "app_version": APP_VERSION,
    }
    client.enqueue(options, run)


def dbos_status(client: DBOSClient, workflow_id: str, *, load_input: bool = True) -> Any:
    found = client.list_workflows(
        workflow_ids=[workflow_id], load_input=load_input, load_output=False
    )
    return found[0] if found else None


def run_state(store: EventStore, workflow_id: str) -> dict[str, Any] | None:
    """The run's state as its newest step recorded it in our log, with what its parallel
    branches recorded since about steps it has not taken the results of yet; None before the
    run starts."""
    prefix = f"workflow:{workflow_id}/"
    found = store.last(prefix, STATE_EVENT)
    if found is None:
        return None
    state: dict[str, Any] = json.loads(found.payload_json)["state"]
    for event in store.read_prefix(prefix, BRANCH_EVENT):
        branch = json.loads(event.payload_json)
        if state["steps"].get(branch["step"], {}).get("state") not in LIVE:
            continue  # the run took this branch's result: its own state says more
        state["steps"].update(branch["steps"])
        state["gates"].update(branch["gates"])
        for artifact in branch["artifacts"]:
            if artifact not in state["artifacts"]:
                state["artifacts"].append(artifact)
    if state.get("status") == "running" and any(
        g.get("status") == "waiting" for g in state["gates"].values()
    ):
        state["status"] = "waiting"
    return state


def decide_gate(
    client: DBOSClient,
    store: EventStore,
    workflow_id: str,
    gate: str,
    option: str,
    by: Mapping[str, Any],
) -> GateOutcome:
    """Check a decision against the waiting gate (its options and `by`) and deliver it. A
    refusal raises `WorkflowError` and sends nothing; a gate already decided answers
    `duplicate` with the decision that stands."""
    status = dbos_status(client, workflow_id)
    if status is None:
        raise WorkflowError("unknown-workflow", f"no workflow `{workflow_id}`")
    state = run_state(store, workflow_id) or {}
    if status.status in FINISHED or state.get("status") in ("completed", "failed"):
        what = FINISHED.get(status.status) or state.get("status")
        raise WorkflowError(
            "finished", f"the workflow `{workflow_id}` is {what}: it takes no more decisions"
        )
    gates = state.get("gates") or {}
    found = gates.get(gate)
    if found is None:
        known = _gate_names(status)
        if gate not in known:
            listed = ", ".join(f"`{g}`" for g in sorted(known)) or "none"
            raise WorkflowError(
                "unknown-gate",
                f"the workflow `{workflow_id}` has no gate `{gate}` (gates: {listed})",
            )
        raise WorkflowError("not-waiting", f"the gate `{gate}` is not waiting for a decision yet")
    if found.get("status") == "decided":
        return GateOutcome("duplicate", workflow_id, gate, found.get("option"), found.get("by"))
    if option not in found["options"]:
        listed = ", ".join(f"`{o}`" for o in found["options"])
        raise WorkflowError(
            "unknown-option", f"`{option}` is not an option of the gate `{gate}`: use {listed}"
        )
    approvers = tuple(Approver.model_validate(a) for a in found["by"])
    if approvers and not is_approver(approvers, by):
        wanted = " or ".join(f"{a.kind} `{a.value}`" for a in approvers)
        raise WorkflowError(
            "not-an-approver", f"`{who(by)}` may not decide the gate `{gate}`: it needs {wanted}"
        )
    if _self_approval(found.get("not_by"), option, by):
        raise WorkflowError(
            "self-approval",
            f"`{who(by)}` started this run and may not approve the gate `{gate}`: another "
            "approver must (`self_approval`)"
            if by.get("user")
            else f"the gate `{gate}` needs an approver other than the run's creator, and "
            f"`{who(by)}` names no `user` to tell them apart",
        )
    message = {"option": option, "by": who(by), "actor": jsonable(by)}
    # to the workflow that waits (the run, or the child workflow of a parallel branch); the
    # key makes a repeated delivery a no-op in DBOS: the first decision sent stands
    destination = found.get("workflow_id") or workflow_id
    client.send(destination, message, topic=f"{workflow_id}/{gate}", idempotency_key=gate)
    return GateOutcome("accepted", workflow_id, gate, option, who(by))


def _may_decide(
    by: Sequence[Approver],
    not_by: Mapping[str, Any] | None,
    option: Any,
    actor: Mapping[str, Any],
) -> bool:
    """Whether `actor` may choose `option` at a gate: one of its approvers (any actor when it
    names none) and, to approve, not the requester it excludes (separation of duties)."""
    if by and not is_approver(tuple(by), actor):
        return False
    return not _self_approval(not_by, option, actor)


def _self_approval(not_by: Mapping[str, Any] | None, option: Any, actor: Mapping[str, Any]) -> bool:
    """Whether choosing `option` would be the excluded requester approving their own call."""
    return not_by is not None and option != "deny" and is_requester(not_by, actor)


def wake(client: DBOSClient, workflow_id: str, state: Mapping[str, Any]) -> None:
    """After a cancel: send a message that decides nothing to whatever the run waits for (a
    start, a gate, new facts), so a worker holding it wakes, meets the cancellation at its next
    step and lets the run go, instead of keeping it until the deadline or its shutdown."""
    message = {"cancelled": True}
    waits = [(workflow_id, START_TOPIC)] if state.get("status") in (None, "created") else []
    for gate, info in (state.get("gates") or {}).items():
        if info.get("status") == "waiting":
            waits.append((info.get("workflow_id") or workflow_id, f"{workflow_id}/{gate}"))
    if any(
        info.get("kind") == "gate" and info.get("state") == "waiting"
        for info in (state.get("steps") or {}).values()
    ):
        waits.append((workflow_id, FACTS_TOPIC))
    for destination, topic in waits:
        with contextlib.suppress(Exception):  # the run may be gone already: nothing to wake
            client.send(destination, message, topic=topic)


def _gate_names(status: Any) -> set[str]:
    found = run_of(status)
    if found is None:
        return set()
    wf = found[1]
    names: set[str] = set()
    for step in wf.steps:
        if step.kind in ("decide", "gate"):
            names.add(step.name)
        if step.kind == "call":
            names.add(f"{step.name}.approval")
        if any(a.kind == "escalate" for a in step.on_failure):
            names.add(f"{step.name}.escalation")
    return names


# ---------------------------------------------------------------------------------------------
# Exactly-once events


def append_once(store: EventStore, events: list[NewEvent]) -> bool:
    """Append `events` in one transaction only if their first stream is new; False when it
    already holds events (this step was recorded before a crash)."""
    if not events:
        return True
    append = getattr(store, "_append", None)
    try:
        if append is not None:
            # SQLiteStore, MemoryStore and PostgresStore: all-or-nothing, `expected_seq` checked
            # for every stream under the write lock
            append(events, 0)
        else:
            store.append(events[0], expected_seq=0)
            store.append_many(events[1:])
    except ConcurrencyError:
        return False
    return True


def _recorded(store: EventStore, stream: str) -> dict[str, Any] | None:
    found = store.read(stream)
    if not found or found[-1].type != STEP_EVENT:
        return None
    outcome = json.loads(found[-1].payload_json).get("outcome")
    return outcome if isinstance(outcome, dict) else None


Publication = tuple[str, dict[str, Any]]
"""What a step commits for `status`: (`workflow.state`, the run's state) or
(`workflow.branch`, a parallel branch's view of its step)."""


def _commit(
    h: Harness, buffer: _Buffer, stream: str, outcome: dict[str, Any], publish: Publication
) -> dict[str, Any]:
    """Append the step's events, what it publishes for `status`, and last its `workflow.step`
    event (the outcome) in one transaction, unless the step was recorded before, and return the
    outcome that stands. Another copy of the run can get there first: a worker declared dead
    while it was only slow, whose runs another worker took over (DBOS then refuses the stale
    copy's checkpoints). Both ran the tool, with the same `tool_call_id`; the log keeps the
    first outcome recorded, and both copies go on from that one."""
    buffer.append(NewEvent(stream, "State", publish[0], publish[1]))
    buffer.append(NewEvent(stream, "State", STEP_EVENT, {"outcome": outcome}))
    if append_once(h.store, buffer.appended):
        return outcome
    return _recorded(h.store, stream) or outcome


class _Buffer(MemoryStore):
    """A step's events until it commits them: readable by the step's session (numbered per
    stream, payloads canonical) but not chained, because the commit numbers and hashes them
    in the log; the events as appended are kept to commit as they are."""

    def __init__(self, clock: Any) -> None:
        super().__init__(clock=clock)
        self.appended: list[NewEvent] = []

    def _numbering(self) -> _Numbering:
        return _Unchained(len(self._events))

    def _append(self, events: Sequence[NewEvent], expected_seq: Expected) -> list[Event]:
        out = super()._append(events, expected_seq)
        self.appended.extend(events)
        return out


def _step_harness(h: Harness) -> tuple[Harness, _Buffer]:
    """The harness seen by one step: the same compiled spec, executors and engine, but its own
    event buffer, approvals and sessions, so concurrent steps never share a buffer."""
    buffer = _Buffer(h.clock)
    view = copy.copy(h)
    view.store = buffer
    view.approvals = Approvals(buffer, h.clock)
    view.sessions = {}
    return view, buffer


def _record_step(
    stream: str, events: list[dict[str, Any]], outcome: dict[str, Any], publish: Publication
) -> dict:
    """A DBOS step that only records events (a gate decided, the run's end) and the state."""
    h = _engine().harness
    recorded = _recorded(h.store, stream)
    if recorded is not None:
        return recorded
    buffer = _Buffer(h.clock)
    for e in events:
        buffer.append(NewEvent(stream, e["kind"], e["type"], e["payload"]))
    return _commit(h, buffer, stream, outcome, publish)


# ---------------------------------------------------------------------------------------------
# The governed call inside a step


def _call_step(
    ctx: dict[str, Any],
    step_name: str,
    tool: str,
    args: dict[str, Any],
    stream: str,
    call_id: str,
    approval: dict[str, Any] | None,
    after: Callable[[dict[str, Any]], Publication],
) -> dict[str, Any]:
    """normalize → decide → (approval) → invoke → evidence, as the workflow's creator, in a
    session whose id is the step's stream; every event committed at the end, once, with the
    run's state `after(outcome)`."""
    h = _engine().harness
    recorded = _recorded(h.store, stream)
    if recorded is not None:
        return recorded
    view, buffer = _step_harness(h)
    session = _step_session(view, ctx, step_name, stream)
    outcome = _governed(view, session, tool, args, call_id, approval)
    session.end("completed" if outcome["status"] == "succeeded" else outcome["status"])
    return _commit(h, buffer, stream, outcome, after(outcome))


def _step_session(view: Harness, ctx: dict[str, Any], step_name: str, stream: str) -> Any:
    """The session a step runs in, as the workflow's creator: one of the workflow's agent, or,
    for a workflow that names only a policy, of the workflow itself: judged by that policy,
    its surface the tools the workflow calls, delegating to the agents its steps name."""
    task = {"id": ctx["workflow_id"], "workflow": ctx["workflow"], "step": step_name}
    if ctx.get("agent"):
        return view.session(
            ctx["agent"],
            actor=ctx["actor"],
            task=task,
            facts=Facts.from_json(ctx.get("facts")),
            resource=ctx.get("resource") or {},
            env=ctx.get("env") or {},
            session_id=stream,
        )
    agent = Agent(
        name=ctx["workflow"], policy=ctx["policy"], delegates=tuple(ctx.get("delegates") or ())
    )
    return view._open(
        agent=agent,
        actor=ctx["actor"],
        task=task,
        facts=Facts.from_json(ctx.get("facts")),
        resource=ctx.get("resource") or {},
        env=ctx.get("env") or {},
        session_id=stream,
        tools=tuple(ctx.get("tools") or ()),
    )


def _governed(
    view: Harness,
    session: Any,
    tool: str,
    args: dict[str, Any],
    call_id: str,
    approval: dict[str, Any] | None,
) -> dict[str, Any]:
    pending = session.normalize(tool, call_id, args)
    if isinstance(pending, Refusal):
        return {"status": "refused", "error": pending.message, "code": pending.code}
    spec_tool = view.spec.tools[pending.tool_id]
    # the outcome becomes the run's durable state (DBOS's step output, our log): the call's
    # secret values and secret output fields never reach it, so a later step reads them as
    # `[REDACTED]`
    secrets = Secrets.of(spec_tool, pending.args)
    decision = session.decide(pending)
    if decision.effect == "deny":
        return {"status": "denied", "error": decision.reason or "the policy denies this call"}
    if decision.effect == "ask" and session.action_state(pending) != ActionState.AUTHORIZED:
        request = session.request_approval(pending, decision)
        if approval is None:
            return {
                "status": "ask",
                "approvers": [{"kind": a.kind, "value": a.value} for a in decision.approvers],
                # separation of duties: the run's creator may not decide the gate
                "not_by": None if decision.requester_may_approve else session.actor,
                "request": secrets.scrub(
                    {
                        "what": request.what,
                        "why": request.why,
                        "arguments": jsonable(request.arguments),
                        "reversibility": request.reversibility,
                        "impact": jsonable(request.impact),
                        **_preview(pending.tool_id, args),
                    }
                ),
            }
        answered = view.approve(request.request_id, by=approval["actor"])
        if answered.status != "approved":
            return {"status": "denied", "error": answered.reason or "denied when judged again"}
    result = session.invoke(pending)
    if result.ok:
        failed = _verify(view, session, pending, args, jsonable(result.data or {}), secrets)
        if failed is not None:
            return {"status": "failed", "error": failed, "category": "verify", "ran": True}
        return {
            "status": "succeeded",
            "value": jsonable(result.to_dict(spec_tool.output)["data"] or {}),
        }
    return {
        "status": "failed",
        "error": result.error or result.observation,
        "category": result.error_category,
        "ran": result.ran,
    }


def _preview(tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """What the tool's previewer (`workflows.preview_with`) says the call would do, for the
    approval request; nothing when the tool has none."""
    previewer = _engine().previewers.get(tool)
    if previewer is None:
        return {}
    try:
        return {"preview": jsonable(previewer(dict(args)))}
    except Exception as exc:  # the previewer is the application's code
        return {"preview": {"error": f"{type(exc).__name__}: {exc}"}}


def _verify(
    view: Harness,
    session: Any,
    pending: Any,
    args: dict[str, Any],
    value: Any,
    secrets: Secrets = NO_SECRETS,
) -> str | None:
    """Run the tool's verifier (`workflows.verify_with`) on a committed call: None when the
    real system shows the call took effect (or the tool has no verifier), else why not. The
    verdict is recorded as `action.verified` in the step's session, scrubbed of the call's
    secret values."""
    verifier = _engine().verifiers.get(pending.tool_id)
    if verifier is None:
        return None
    try:
        verdict = verifier(dict(args), value)
        reason = None if verdict is None or verdict is True else str(verdict or "not verified")
    except Exception as exc:  # the verifier is the application's code
        reason = f"{type(exc).__name__}: {exc}"
    if reason is not None:
        reason = secrets.text(reason)
    view.store.append(
        NewEvent(
            session.id,
            "Tool",
            "action.verified",
            {"tool_call_id": pending.tool_call_id, "ok": reason is None, "reason": reason},
        )
    )
    return None if reason is None else f"verification failed: {reason}"


def _delegate_step(
    ctx: dict[str, Any],
    step: dict[str, Any],
    context: list[Any],
    stream: str,
    after: Callable[[dict[str, Any]], Publication],
) -> dict[str, Any]:
    engine = _engine()
    h = engine.harness
    recorded = _recorded(h.store, stream)
    if recorded is not None:
        return recorded
    view, buffer = _step_harness(h)
    parent = _step_session(view, ctx, step["name"], stream)
    outcome: dict[str, Any]
    if engine.delegate is None:
        outcome = {"status": "failed", "error": "no delegate runner is set (`delegate_with`)"}
    else:
        child = parent.delegate(step["goal"] or "", agent=step["agent"])
        if isinstance(child, Refusal):
            outcome = {"status": "refused", "error": child.message, "code": child.code}
        else:
            try:
                value = engine.delegate(child, step["goal"], context)
                outcome = {"status": "succeeded", "value": jsonable(value or {})}
            except Exception as exc:  # the runner is the application's code
                outcome = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
            child.end("completed" if outcome["status"] == "succeeded" else "failed")
    parent.end("completed" if outcome["status"] == "succeeded" else "failed")
    return _commit(h, buffer, stream, outcome, after(outcome))


# ---------------------------------------------------------------------------------------------
# The interpreter


@DBOS.workflow(name=INTERPRETER)
async def interpret(run: dict[str, Any]) -> dict[str, Any]:
    """Run one workflow's IR: the only workflow function DBOS knows."""
    return await _Run(run).go()


def _now() -> float:
    return time.time()


class _Stop(Exception):
    def __init__(self, status: str, outcome: Any = None, error: str | None = None) -> None:
        super().__init__(status)
        self.status = status
        self.outcome = outcome
        self.error = error


class _Run:
    def __init__(self, run: dict[str, Any]) -> None:
        self.dbos_id: str = DBOS.workflow_id or ""
        # a parallel branch runs in a child workflow but records under its run's id
        self.id: str = run.get("parent") or self.dbos_id
        self.branch: str | None = run.get("branch")
        self.wf = Workflow.model_validate(run["workflow"])
        self.input: dict[str, Any] = run.get("input") or {}
        self.ctx: dict[str, Any] = {
            "workflow_id": self.id,
            "workflow": self.wf.name,
            "agent": run.get("agent"),
            "policy": self.wf.policy,
            "tools": sorted({s.tool for s in self.wf.steps if s.tool is not None}),
            "delegates": sorted({s.agent for s in self.wf.steps if s.agent is not None}),
            "actor": run.get("actor") or {},
            "facts": run.get("facts") or {},
            "env": run.get("env") or {},
            "resource": run.get("resource") or {},
        }
        self.run = run
        self.values: dict[str, Any] = dict(run.get("values") or {})
        self.skipped: set[str] = set()
        self.visited: set[str] = set()
        self.wave: list[Step] = []
        self.steps = {s.name: s for s in self.wf.steps}
        self.order = [s for s in step_order(self.wf) if not s.compensation]
        names = {s.name for s in self.order}
        self.needs = {
            s.name: {d for d in (*s.after, *s.depends_on) if d in names} for s in self.order
        }
        self.state: dict[str, Any] = initial_state(self.wf, run.get("hash"))

    def stream(self, key: str) -> str:
        return f"workflow:{self.id}/{key}"

    # -- the state `status` shows ----------------------------------------------------------------
    #
    # The state is not published on its own: every DBOS step of the run commits it to our log
    # with its events, in the same transaction, so keeping `status` current costs no write of
    # its own. A step commits the state as it will be once the interpreter has taken the step's
    # outcome: the step done, the steps the outcome skips skipped, and the next ones running, so
    # an operator sees a call in progress as `running`. A parallel branch commits its own view
    # of its step instead (`workflow.branch`), which `run_state` lays over the run's state.

    def snapshot(self) -> dict[str, Any]:
        # the state is plain JSON by construction: a round trip through the C encoder copies
        # it several times faster than `copy.deepcopy`
        copied: dict[str, Any] = json.loads(json.dumps(self.state))
        return copied

    def publication(self, state: dict[str, Any]) -> Publication:
        if self.branch is None:
            return STATE_EVENT, {"state": state}
        return BRANCH_EVENT, {
            "step": self.branch,
            "steps": {k: v for k, v in state["steps"].items() if v["state"] != "pending"},
            "gates": state["gates"],
            "artifacts": state["artifacts"],
        }

    def after(self, name: str, *, artifact: bool) -> Callable[[dict[str, Any]], Publication]:
        """What to commit with the outcome of the step `name` (called in the step, while this
        run awaits it)."""

        def state_after(outcome: dict[str, Any]) -> Publication:
            state = self.snapshot()
            info = state["steps"].get(name)
            if info is None:
                return self.publication(state)
            if outcome.get("status") == "succeeded":
                value = outcome.get("value")
                info["state"] = "succeeded"
                if value is not None:
                    info["value"] = value
                if artifact:
                    state["artifacts"].append({"step": name, "value": value})
                if self.branch is None and len(self.wave) == 1 and name in self.needs:
                    self.lookahead(state, {**self.values, name: value})
            elif outcome.get("status") == "ask":
                info["state"] = "waiting"
            else:
                info["error"] = outcome.get("error")
            return self.publication(state)

        return state_after

    def next_wave(self, visited: set[str]) -> list[Step]:
        """The steps not visited yet whose every dependency is: they run together (parallel
        branches when more than one does work), in the order of `step_order`."""
        return [s for s in self.order if s.name not in visited and self.needs[s.name] <= visited]

    def skips(self, step: Step, values: dict[str, Any], skipped: set[str]) -> bool:
        return dependants_skipped(step, skipped) or (
            step.when is not None and not evaluate_when(step.when, {**self.scope(), "step": values})
        )

    def lookahead(self, state: dict[str, Any], values: dict[str, Any]) -> None:
        """Mark the steps the run will skip next and the ones it will run next, exactly as
        `run_wave` will decide them."""
        visited, skipped = set(self.visited), set(self.skipped)
        try:
            while wave := self.next_wave(visited):
                visited.update(s.name for s in wave)
                runs = False
                for step in wave:
                    if self.skips(step, values, skipped):
                        state["steps"][step.name]["state"] = "skipped"
                        skipped.add(step.name)
                    else:
                        state["steps"][step.name]["state"] = "running"
                        runs = True
                if runs:
                    return
        except Exception:  # `run_wave` meets the same error and fails the run
            return

    async def recv(self, topic: str, timeout_s: float) -> Any:
        return await DBOS.recv_async(topic, timeout_seconds=timeout_s)

    async def record(
        self,
        key: str,
        type_: str,
        payload: dict[str, Any],
        state: dict[str, Any] | None = None,
    ) -> None:
        events = [{"kind": "State", "type": type_, "payload": payload}]
        await DBOS.run_step_async(
            {"name": f"record:{key}"},
            _record_step,
            self.stream(key),
            events,
            {"status": "ok"},
            self.publication(state if state is not None else self.snapshot()),
        )

    async def go(self) -> dict[str, Any]:
        if self.branch is not None:
            return await self.go_branch()
        if not self.run.get("start"):
            await self.recv(START_TOPIC, FOREVER_S)
        self.state["status"] = "running"
        started = self.snapshot()
        self.lookahead(started, {})
        await self.record("~start", "workflow.started", self._summary(), started)
        try:
            while wave := self.next_wave(self.visited):
                self.visited.update(s.name for s in wave)
                await self.run_wave(wave)
            self.state["status"] = "completed"
        except _Stop as stop:
            self.state["status"] = stop.status
            self.state["outcome"] = stop.outcome
            self.state["error"] = stop.error
            for info in self.state["steps"].values():
                if info["state"] == "pending":
                    info["state"] = "skipped"
        end = "workflow.completed" if self.state["status"] == "completed" else "workflow.failed"
        await self.record(
            "~end",
            end,
            {**self._summary(), "outcome": self.state["outcome"], "error": self.state["error"]},
        )
        return {"status": self.state["status"], "outcome": self.state["outcome"]}

    async def run_wave(self, wave: list[Step]) -> None:
        """Run the steps that became ready together. When more than one of them does work,
        each `call` and `delegate` among them runs as a parallel branch: a child workflow
        `<run id>::<step>`, all started before any is awaited; the other steps (decisions and
        gates) run here meanwhile. The results are taken in the order of the steps."""
        runnable = []
        for step in wave:
            if self.skips(step, self.values, self.skipped):
                self.state["steps"][step.name]["state"] = "skipped"
                self.skipped.add(step.name)
            else:
                runnable.append(step)
        self.wave = runnable
        branches = [s for s in runnable if s.kind in ("call", "delegate")]
        if len(runnable) < 2:
            branches = []
        handles = []
        if branches:
            names = [s.name for s in branches]
            for name in names:
                self.state["steps"][name]["state"] = "running"
            await self.record("~branches:" + ",".join(names), "workflow.branches", {"steps": names})
            for step in branches:
                handles.append(await self.start_branch(step))
        stopped: _Stop | None = None
        try:
            for step in runnable:
                if step not in branches:
                    await self.visit(step)
        except _Stop as stop:
            stopped = stop
        failed = []
        for step, handle in zip(branches, handles, strict=True):
            result: dict[str, Any] = await handle.get_result()
            self.state["steps"].update(result["steps"])
            self.state["gates"].update(result["gates"])
            self.state["artifacts"].extend(result["artifacts"])
            if result["status"] == "succeeded":
                self.values[step.name] = result["value"]
            else:
                failed.append(result["error"])
        if stopped is not None:
            raise stopped
        if failed:
            raise _Stop("failed", error="; ".join(str(e) for e in failed))

    async def start_branch(self, step: Step) -> Any:
        child = {
            **self.run,
            "parent": self.id,
            "branch": step.name,
            "values": self.values,
            "facts": self.ctx["facts"],
            "env": self.ctx["env"],
            "start": True,
        }
        with SetWorkflowID(f"{self.id}::{step.name}"):
            return await DBOS.start_workflow_async(interpret, child)

    async def go_branch(self) -> dict[str, Any]:
        """A parallel branch: one `call` (with its failure policy) or `delegate` step of the
        run, in a child workflow; returns the step's state, gates and artifacts to the run."""
        assert self.branch is not None
        step = self.steps[self.branch]
        self.state["status"] = "running"
        info = self.state["steps"][step.name]
        info["state"] = "running"
        status, value, error = "succeeded", None, None
        try:
            value = await (self.call(step) if step.kind == "call" else self.delegate(step))
            info["state"] = "succeeded"
            if value is not None:
                info["value"] = value
        except _Stop as stop:
            status, error = "failed", stop.error
        view = self.publication(self.state)[1]
        return {"status": status, "value": value, "error": error, **view}

    def _summary(self) -> dict[str, Any]:
        return {"workflow": self.wf.name, "id": self.id, "version": self.run.get("hash")}

    def scope(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "step": self.values,
            "actor": self.ctx["actor"],
            "env": self.ctx["env"],
            "facts": self.ctx["facts"].get("values") or {},
            "resource": self.ctx["resource"],
        }

    async def visit(self, step: Step) -> None:
        info = self.state["steps"][step.name]
        if self.skips(step, self.values, self.skipped):
            info["state"] = "skipped"
            self.skipped.add(step.name)
            return
        info["state"] = "running"
        if step.kind == "call":
            value = await self.call(step)
        elif step.kind == "delegate":
            value = await self.delegate(step)
        elif step.kind == "decide":
            value = await self.gate(
                step.name,
                question=step.question,
                options=list(step.options),
                by=[step.by] if step.by is not None else [],
                timeout_ms=step.timeout_ms,
                default=step.default,
            )
            ends = ending_options(self.wf, step.name)
            if value in ends:
                self.values[step.name] = value
                info["state"] = "succeeded"
                info["value"] = value
                raise _Stop("completed", outcome={"step": step.name, "option": value})
        else:
            await self.wait_for_facts(step)
            value = None
        self.values[step.name] = value
        info["state"] = "succeeded"
        if value is not None:
            info["value"] = value

    # -- call steps, with the failure policy -----------------------------------------------------

    async def call(self, step: Step, attempt_base: int = 1) -> Any:
        info = self.state["steps"][step.name]
        attempt = attempt_base
        outcome = await self.attempt(step, attempt)
        actions = list(step.on_failure)
        while outcome["status"] != "succeeded":
            if not actions:
                info["state"] = "failed"
                info["error"] = outcome.get("error")
                raise _Stop("failed", error=f"step `{step.name}`: {outcome.get('error')}")
            action = actions.pop(0)
            if action.kind == "retry" and outcome["status"] == "failed":
                backoff_ms = action.backoff_ms or 0
                for n in range(action.count or 1):
                    if backoff_ms:
                        await DBOS.sleep_async(backoff_ms * (2**n) / 1000)
                    attempt += 1
                    outcome = await self.attempt(step, attempt)
                    if outcome["status"] == "succeeded":
                        break
            elif action.kind == "compensate" and action.step in self.steps:
                await self.compensate(self.steps[action.step], step)
                info["state"] = "compensated"
                if not any(a.kind == "escalate" for a in actions):
                    raise _Stop("failed", error=f"step `{step.name}` failed and was compensated")
            elif action.kind == "escalate":
                gate = f"{step.name}.escalation"
                choice = await self.gate(
                    gate,
                    question=f"`{step.name}` failed: {outcome.get('error')}. Retry or abort?",
                    options=["retry", "abort"],
                    by=[action.approver] if action.approver is not None else [],
                    timeout_ms=None,
                    default=None,
                    reopen=True,
                )
                if choice == "abort":
                    info["state"] = "failed"
                    raise _Stop("failed", error=f"step `{step.name}` aborted after escalation")
                attempt += 1
                outcome = await self.attempt(step, attempt)
                actions = [action]  # another failure escalates again
        info["attempts"] = attempt
        value = outcome.get("value")
        self.state["artifacts"].append({"step": step.name, "value": value})
        return value

    async def attempt(self, step: Step, attempt: int) -> dict[str, Any]:
        info = self.state["steps"][step.name]
        info["attempts"] = attempt
        args = {k: resolve_value(v, self.scope()) for k, v in step.args.items()}
        key = f"{step.name}#{attempt}"
        call_id = f"{self.id}/{key}"
        outcome = await self._run_call(step, args, key, call_id, None)
        if outcome["status"] == "ask":
            gate = f"{step.name}.approval"
            info["state"] = "waiting"
            request = outcome["request"]
            choice = await self.gate(
                gate,
                question=f"Approve this call of `{step.tool}`? {request['why']}",
                options=["approve", "deny"],
                by=[Approver.model_validate(a) for a in outcome["approvers"]],
                timeout_ms=step.timeout_ms,
                default="deny",
                preview=request,
                not_by=outcome.get("not_by"),
            )
            info["state"] = "running"
            if choice != "approve":
                return {"status": "denied", "error": "the approver denied the call"}
            decided = self.state["gates"][gate]
            approval = {"actor": decided.get("actor") or {}}
            outcome = await self._run_call(step, args, key + "+approved", call_id, approval)
        return outcome

    async def _run_call(
        self,
        step: Step,
        args: dict[str, Any],
        key: str,
        call_id: str,
        approval: dict[str, Any] | None,
    ) -> dict[str, Any]:
        assert step.tool is not None
        result: dict[str, Any] = await DBOS.run_step_async(
            {"name": f"call:{key}"},
            _call_step,
            self.ctx,
            step.name,
            step.tool,
            args,
            self.stream(key),
            call_id,
            approval,
            self.after(step.name, artifact=not step.compensation),
        )
        return result

    async def compensate(self, comp: Step, failed: Step) -> None:
        """Run a compensation step with its references bound now (saga order: the caller runs
        them in reverse order of the work they undo)."""
        args = {k: resolve_value(v, self.scope()) for k, v in comp.args.items()}
        key = f"{comp.name}@{failed.name}"
        self.state["steps"].setdefault(comp.name, {"kind": comp.kind, "state": "pending"})
        self.state["steps"][comp.name]["state"] = "running"
        outcome = await self._run_call(comp, args, key, f"{self.id}/{key}", None)
        self.state["steps"][comp.name]["state"] = (
            "succeeded" if outcome["status"] == "succeeded" else "failed"
        )
        if outcome["status"] != "succeeded":
            self.state["steps"][comp.name]["error"] = outcome.get("error")

    async def delegate(self, step: Step) -> Any:
        context = [resolve_value(v, self.scope()) for v in step.context]
        outcome: dict[str, Any] = await DBOS.run_step_async(
            {"name": f"delegate:{step.name}"},
            _delegate_step,
            self.ctx,
            {"name": step.name, "goal": step.goal, "agent": step.agent},
            context,
            self.stream(step.name),
            self.after(step.name, artifact=True),
        )
        if outcome["status"] != "succeeded":
            self.state["steps"][step.name]["state"] = "failed"
            raise _Stop("failed", error=f"step `{step.name}`: {outcome.get('error')}")
        self.state["artifacts"].append({"step": step.name, "value": outcome["value"]})
        return outcome["value"]

    # -- gates ----------------------------------------------------------------------------------

    async def gate(
        self,
        gate: str,
        *,
        question: str | None,
        options: list[str],
        by: list[Approver],
        timeout_ms: int | None,
        default: str | None,
        preview: dict[str, Any] | None = None,
        reopen: bool = False,
        not_by: Mapping[str, Any] | None = None,
    ) -> str:
        """Wait for a person's decision on `gate`: recorded as waiting (with the state), answered
        by a message on `<id>/<gate>` (`recv`), or the default when the durable deadline
        passes. A message that fails the checks (not an option, not an approver, the requester
        `not_by` under separation of duties) is ignored."""
        opened: float = await DBOS.run_step_async({"name": f"clock:{gate}"}, _now)
        deadline = opened + (timeout_ms / 1000 if timeout_ms is not None else FOREVER_S)
        self.state["gates"][gate] = {
            "status": "waiting",
            "question": question,
            "options": options,
            "by": [a.model_dump(mode="json") for a in by],
            "deadline": _iso(deadline) if timeout_ms is not None else None,
            "default": default,
            "workflow_id": self.dbos_id,
            **({"preview": preview} if preview is not None else {}),
            **({"not_by": dict(not_by)} if not_by is not None else {}),
        }
        self.state["status"] = "waiting"
        await self.record(
            gate + "~waiting", "workflow.gate.waiting", {"gate": gate, **self.state["gates"][gate]}
        )
        # also a DBOS event, for DBOS's own tools: `get_event(id, "gate:<gate>", timeout)`
        # blocks until the run reaches the gate
        await DBOS.set_event_async(f"gate:{gate}", self.state["gates"][gate])
        topic = f"{self.id}/{gate}"
        checks = 0
        while True:
            remaining = deadline - opened
            message = await self.recv(topic, max(remaining, 0.0))
            if message is None:
                if default is None:
                    raise _Stop("failed", error=f"the gate `{gate}` timed out without a default")
                option, decided_by, actor = default, "timeout", None
                break
            chosen = message.get("option") if isinstance(message, dict) else None
            actor = message.get("actor") if isinstance(message, dict) else None
            if chosen in options and _may_decide(by, not_by, chosen, actor or {}):
                option, decided_by = str(chosen), who(actor or {})
                break
            checks += 1  # not a valid decision: keep waiting until the same deadline
            opened = await DBOS.run_step_async({"name": f"clock:{gate}#{checks}"}, _now)
        self.state["gates"][gate].update(
            {"status": "decided", "option": option, "by": decided_by, "actor": actor}
        )
        self.state["status"] = "running"
        await self.record(
            gate, "workflow.gate.decided", {"gate": gate, "option": option, "by": decided_by}
        )
        if reopen:
            del self.state["gates"][gate]
        return option

    async def wait_for_facts(self, step: Step) -> None:
        """A `gate` step: wait until its condition over facts holds, re-checked at each
        `update`; past its timeout the step fails."""
        assert step.condition is not None
        opened: float = await DBOS.run_step_async({"name": f"clock:{step.name}"}, _now)
        timeout_s = step.timeout_ms / 1000 if step.timeout_ms is not None else FOREVER_S
        now = opened
        checks = 0
        while not evaluate_when(step.condition, self.scope()):
            if checks == 0:
                self.state["steps"][step.name]["state"] = "waiting"
                await self.record(
                    step.name + "~waiting", "workflow.gate.waiting", {"gate": step.name}
                )
            message = await self.recv(FACTS_TOPIC, max(opened + timeout_s - now, 0.0))
            if message is None:
                self.state["steps"][step.name]["state"] = "failed"
                raise _Stop("failed", error=f"the gate `{step.name}` timed out")
            if isinstance(message, dict):
                facts = message.get("snapshot") or {**self.ctx["facts"]}
                facts["values"] = {
                    **(self.ctx["facts"].get("values") or {}),
                    **(facts.get("values") or {}),
                    **(message.get("facts") or {}),
                }
                self.ctx["facts"] = facts
                self.ctx["env"] = {**self.ctx["env"], **(message.get("env") or {})}
            checks += 1
            now = await DBOS.run_step_async({"name": f"clock:{step.name}#{checks}"}, _now)


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
