"""Durable workflows on DBOS Transact: a process's engine and the client every operator action
goes through. The interpreter workflow is `runtime/workflows/interpreter.py`; the steps it runs, and
their exactly-once recording in the harness's own log, are `runtime/workflows/steps.py`.

Imported only when workflows are used (`runtime/workflows/manage.py` loads it lazily), so
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
  before DBOS checkpointed its output runs the step again. So a step appends nothing itself: its
  events ride in its output, which DBOS checkpoints in its own transaction, and the worker's
  appender (`runtime/workflows/appender.py`) appends them to our log after the checkpoint, off the
  step's path, each step on a stream named after the workflow id and the step
  (`workflow:<id>/<step>#<attempt>`), refused unless that stream is new. A run replayed from
  its checkpoints hands its steps over again and only the missing ones are appended. The log
  gets every event exactly once, on SQLite and PostgreSQL alike, without sharing a transaction
  with DBOS's tables (which live in another file on SQLite). A tool runs twice only when the
  process dies between the tool's start and DBOS's checkpoint; its `tool_call_id` (the
  idempotency key) is the same both times.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from dbos import (
    DBOS,
    DBOSClient,
    DBOSConfig,
    DBOSPortableJSONSerializer,
    EnqueueOptions,
)
from dbos._error import DBOSAwaitedWorkflowCancelledError, DBOSWorkflowCancelledError

from ..log.events import NewEvent
from ..log.store import ConcurrencyError, EventStore
from ..model.canonical import jsonable
from ..model.ir import Approver
from ..session.approvals import is_approver
from . import steps as workflow_steps
from .appender import StepLog, append_once
from .interpreter import INTERPRETER
from .plan import (
    FACTS_TOPIC,
    FINISHED,
    GATE_CLAIMED,
    START_TOPIC,
    GateOutcome,
    WorkflowError,
    gate_names,
    run_state,
    self_approval,
    who,
)

if TYPE_CHECKING:
    from ..session.seams import HarnessSeam

__all__ = [
    "APP_NAME",
    "APP_VERSION",
    "FACTS_TOPIC",
    "INTERPRETER",
    "QUEUE",
    "START_TOPIC",
    "Engine",
    "append_once",
    "dbos_status",
    "decide_gate",
    "enqueue",
    "open_client",
    "open_store",
    "repair",
    "run_state",
    "system_database_url",
    "wake",
]

APP_NAME = "harnessc"
APP_VERSION = "harnessc-workflows-4"
"""Pinned: DBOS resumes a run only on executors of the version it started under. It changes
only when the interpreter's checkpoint sequence changes, never with a build of a spec."""
QUEUE = "harnessc-workflows"

_WORKERS_DDL = """
CREATE SCHEMA IF NOT EXISTS harnessc;
CREATE TABLE IF NOT EXISTS harnessc.workers (
    executor_id TEXT PRIMARY KEY,
    beat_at     TIMESTAMPTZ NOT NULL
)
"""
_SERIALIZER = DBOSPortableJSONSerializer()


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


def _synced(wal: str) -> Callable[[], None]:
    """Make the checkpoints DBOS committed so far durable: fsync its WAL file. A worker's DBOS
    commits with `synchronous=NORMAL` (no fsync per commit); the log appends a step only after
    this, so a power loss cannot leave the log holding a step DBOS forgot and would run
    again."""

    def sync() -> None:
        try:
            fd = os.open(wal, os.O_RDONLY)
        except FileNotFoundError:  # no WAL: every checkpoint is in the database file, synced
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    return sync


def open_store(url: str) -> EventStore:
    """The event store of a URL: `sqlite:///PATH` or `postgresql://…` (with the log key of
    the environment, as every store takes it)."""
    if url.startswith(("sqlite:///", "postgresql://", "postgres://")):
        from ..log.open import open_store as open_event_store

        return open_event_store(url)
    raise WorkflowError("unknown-store", f"no event store for `{url}`")


def has_state(store_url: str) -> bool:
    """Whether DBOS's state for `store_url` exists (some worker ran workflows on this store),
    found without creating it: the `.dbos` file beside a SQLite log, the `dbos` schema of a
    PostgreSQL database."""
    url = system_database_url(store_url)
    if url.startswith("sqlite:///"):
        return os.path.isfile(url[len("sqlite:///") :])
    import psycopg

    with psycopg.connect(url, connect_timeout=30) as conn:
        row = conn.execute(
            "SELECT 1 FROM information_schema.schemata WHERE schema_name = 'dbos'"
        ).fetchone()
    return row is not None


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
        harness: HarnessSeam,
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
        self.log: StepLog | None = None

    def launch(self) -> None:
        if workflow_steps.running() not in (None, self):
            raise WorkflowError(
                "engine-running", "a workflow engine already runs in this process: close it first"
            )
        if not self.harness.store.same_log(self.store_url):
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
        sync = None
        if self.url.startswith("sqlite:///"):
            self._sqlite = config["system_database_engine"] = _worker_sqlite_engine(self.url)
            sync = _synced(self.url[len("sqlite:///") :] + "-wal")
        # before DBOS launches: the runs it resumes hand their steps to the log at once
        self.log = StepLog(self.harness.store, before_commit=sync)
        workflow_steps.attach(self)
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
        self._stop.set()
        if self._supervisor is not None:
            self._supervisor.join(timeout=10)
            self._supervisor = None
        if workflow_steps.running() is self:
            self._quiet.closing = True
            DBOS.destroy()
            workflow_steps.attach(None)
        if self.log is not None:  # after DBOS: every step it checkpointed has been handed over
            self.log.close()
            self.log = None
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


def decide_gate(
    client: DBOSClient,
    store: EventStore,
    workflow_id: str,
    gate: str,
    option: str,
    by: Mapping[str, Any],
) -> GateOutcome:
    """Check a decision against the waiting gate (its options and `by`), claim the gate for
    it and deliver it. A refusal raises `WorkflowError` and sends nothing; a gate already
    decided or claimed answers `duplicate` with the decision that stands.

    The claim (`workflow.gate.claimed` on the gate's own stream, which only one writer can
    append) is what makes exactly one of two decisions win, and tells the other one which did:
    the worker may not have taken either yet (none runs, or it is busy), and DBOS drops a
    second message with the same key without a word. A claim whose message was never sent (its
    sender died in between) is sent again by the next decision of that gate."""
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
        known = gate_names(status)
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
    if self_approval(found.get("not_by"), option, by):
        raise WorkflowError(
            "self-approval",
            f"`{who(by)}` started this run and may not approve the gate `{gate}`: another "
            "approver must (`self_approval`)"
            if by.get("user")
            else f"the gate `{gate}` needs an approver other than the run's creator, and "
            f"`{who(by)}` names no `user` to tell them apart",
        )
    message = {"option": option, "by": who(by), "actor": jsonable(by)}
    stream = f"workflow:{workflow_id}/~gate:{gate}"
    outcome = "accepted"
    try:
        claim = NewEvent(stream, "Approval", GATE_CLAIMED, {"gate": gate, **message})
        store.append_many([claim], expect={stream: 0})
    except ConcurrencyError:
        standing = store.read(stream)[0].payload
        outcome, message = "duplicate", {k: standing[k] for k in ("option", "by", "actor")}
    # to the workflow that waits (the run, or the child workflow of a parallel branch); the
    # key makes a repeated delivery a no-op in DBOS
    destination = found.get("workflow_id") or workflow_id
    client.send(destination, message, topic=f"{workflow_id}/{gate}", idempotency_key=gate)
    return GateOutcome(outcome, workflow_id, gate, message["option"], message["by"])


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


def repair(client: DBOSClient, store: EventStore, workflow_id: str) -> int:
    """Append the events of every step of the run (and of its parallel branches) that DBOS
    checkpointed and the log does not hold yet, in the order of the steps; returns how many
    steps were appended. For a run no worker will replay: one cancelled after its worker died
    between a step's checkpoint and its append."""
    added = 0
    branches = client.list_workflows(parent_workflow_id=workflow_id, load_input=False)
    runs = [workflow_id, *(b.workflow_id for b in branches)]
    for run in runs:
        for step in client.list_workflow_steps(run):
            output = step.get("output")
            if isinstance(output, dict) and output.get("events"):
                added += append_once(store, workflow_steps.step_events(output))
    return added
