"""Durable workflows of a harness: create, start, decide, status, cancel (language.md §11).

A workflow runs on DBOS Transact (`runtime/workflows/durable.py`, loaded on first use, so importing
the runtime never needs `dbos`). Its IR and content hash travel with the run; one generic
interpreter (`runtime/workflows/interpreter.py`) walks the steps in a deterministic topological
order, each `call` through the harness (normalize → decide → approval → invoke → evidence) as the
workflow's creator. What needs no engine (step order, conditions, the recorded state and its
projection) is `runtime/workflows/plan.py`.

    h = Harness(spec, store=SQLiteStore("harness.db"))
    wf = h.workflows.configure("sqlite:///harness.db")      # this process runs workflows
    run = wf.create("remediate", {"service": "payments"}, id="rem-1",
                    actor={"user": "u-1", "role": "engineer"})
    wf.start(run)
    wf.status(run)["pending_gates"]                           # [{"gate": "review", ...}]
    wf.decide(run, "review", "approve", by={"user": "u-7", "role": "security"})

Decisions are checked against the waiting gate (its options and `by`); a refusal raises
`WorkflowError` with a stable `code` and changes nothing; a second decision for a gate already
decided is ignored (`GateOutcome.outcome == "duplicate"`). The same operations run from a shell:
`harnessc workflow list|show|decide|cancel --log URL`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..judge.availability import Facts
from ..log.chain import ChainWatch
from ..log.events import short_text
from ..model.canonical import jsonable
from .plan import (
    ENDED,
    FACTS_TOPIC,
    FINISHED,
    START_TOPIC,
    GateOutcome,
    WorkflowError,
    ending_options,
    evaluate_when,
    initial_state,
    project,
    resolve_value,
    run_state,
    step_order,
    workflow_hash,
)

if TYPE_CHECKING:
    from ..session.seams import HarnessSeam

_FINAL = ("completed", "failed", "cancelled")
"""The projection's statuses of a run that will not change."""
_WATCHES: dict[str, ChainWatch] = {}
"""The chain's watch of each log (by URL) an operator's view read in this process."""

__all__ = [
    "FINISHED",
    "GateOutcome",
    "WorkflowError",
    "Workflows",
    "ending_options",
    "evaluate_when",
    "initial_state",
    "project",
    "render_run",
    "resolve_value",
    "step_order",
    "workflow_hash",
]


# ---------------------------------------------------------------------------------------------
# The facade


class Workflows:
    """The durable workflows of one harness (`Harness.workflows`). Any process can create,
    start, decide, inspect and cancel runs; a process that calls `configure(..., run=True)`
    (the default) is also a worker that runs them and resumes its unfinished ones."""

    def __init__(self, harness: HarnessSeam | None) -> None:
        self.harness = harness
        self._url: str | None = None
        self._client: Any = None
        self._engine: Any = None
        self._store: Any = None

    @classmethod
    def operator(cls, url: str) -> Workflows:
        """Workflows seen from an operator's shell, with no spec loaded: list, show, decide
        and cancel need none, because every run carries its workflow's IR."""
        from . import durable

        try:
            found = durable.has_state(url)
        except WorkflowError:
            raise
        except Exception as exc:  # psycopg: the server does not answer
            reason = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise WorkflowError(
                "store-unavailable", f"cannot open the workflow store `{url}`: {reason}"
            ) from exc
        if not found:  # an operator's look creates nothing: no DBOS tables, no `.dbos` file
            raise WorkflowError(
                "no-workflow-state",
                f"no workflow has run on `{url}`: it holds no workflow state (DBOS's, "
                "which a worker creates when it starts)",
            )
        ops = cls(None)
        ops.configure(url, run=False)
        return ops

    def configure(
        self,
        url: str,
        *,
        run: bool = True,
        executor_id: str = "local",
        poll_s: float = 0.1,
        concurrency: int | None = None,
        threads: int = 32,
        heartbeat_s: float = 2.0,
        stale_after_s: float = 30.0,
    ) -> Workflows:
        """Use the store URL `url` (`sqlite:///PATH` or `postgresql://…`) for durable state.
        With `run`, launch DBOS here as the worker `executor_id`: it runs queued workflows
        (at most `concurrency` at once; their steps, and DBOS's checks for waiting runs, on at most
        `threads` threads) and resumes the ones this executor id left unfinished
        (keep it stable across restarts). On PostgreSQL every worker beats every
        `heartbeat_s` and resumes the runs of a worker silent for `stale_after_s`."""
        from . import durable

        self._url = url
        try:
            self._client = durable.open_client(url)
        except WorkflowError:
            raise
        except Exception as exc:  # sqlite3, SQLAlchemy or psycopg: the store does not open
            reason = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise WorkflowError(
                "store-unavailable", f"cannot open the workflow store `{url}`: {reason}"
            ) from exc
        if run:
            if self.harness is None:
                raise WorkflowError("no-engine", "an operator's view runs no workflows")
            self._engine = durable.Engine(
                self.harness,
                url,
                executor_id=executor_id,
                poll_s=poll_s,
                concurrency=concurrency,
                threads=threads,
                heartbeat_s=heartbeat_s,
                stale_after_s=stale_after_s,
            )
            self._engine.launch()
        return self

    def delegate_with(self, runner: Callable[..., Any]) -> None:
        """Run `delegate` steps with `runner(child_session, goal, context) -> output`: the
        application's agent loop, whose tool calls go through the child session."""
        self._need_engine().delegate = runner

    def preview_with(self, tool: str, previewer: Callable[[dict[str, Any]], Any]) -> None:
        """Preview → approve → commit → verify, the preview: when a workflow's call of `tool`
        asks for approval, `previewer(args)` (what the call would change: a diff, the target,
        its impact) goes into the approval request the gate shows as `preview`."""
        self._need_engine().previewers[self._tool(tool)] = previewer

    def verify_with(self, tool: str, verifier: Callable[[dict[str, Any], Any], Any]) -> None:
        """Preview → approve → commit → verify, the verification: after a workflow's call of
        `tool` returns, `verifier(args, output)` checks the real system. `None` or `True` is
        verified; `False`, a reason (str) or an exception fails the step, whose `on_failure`
        applies (retry, compensate, escalate), instead of taking the sent call for success."""
        self._need_engine().verifiers[self._tool(tool)] = verifier

    def _tool(self, tool: str) -> str:
        assert self.harness is not None  # a worker has a harness
        if tool not in self.harness.spec.tools:
            raise WorkflowError("unknown-tool", f"no tool `{tool}` is registered")
        return tool

    def close(self) -> None:
        """Stop the worker (if any) and the client."""
        if self._engine is not None:
            self._engine.close()
            self._engine = None
        if self._client is not None:
            self._client.destroy()
            self._client = None
        if self._store is not None:
            self._store.close()
            self._store = None

    # -- operations -----------------------------------------------------------------------------

    def create(
        self,
        name: str,
        input: Mapping[str, Any] | None = None,
        id: str | None = None,
        *,
        actor: Mapping[str, Any],
        facts: Facts | Mapping[str, Any] | None = None,
        env: Mapping[str, Any] | None = None,
        resource: Mapping[str, Any] | None = None,
        start: bool = False,
    ) -> str:
        """Create a run of the workflow `name` with `input` (checked against its schema) as
        `actor`, and return its id. Creating again with the same `id` returns it and changes
        nothing. The run waits for `start` unless `start=True`."""
        from ..judge.normalize import ValidationError, Validator
        from ..session.sessions import FACTS_KINDS, facts_record, need_kind
        from . import durable

        if self.harness is None:
            raise WorkflowError("no-spec", "creating a run needs the harness of its spec")
        for what, value, allowed, kinds in (
            ("workflow", name, str, "a declared workflow's name"),
            ("input", input, Mapping, "a mapping of the workflow's input fields"),
            ("facts", facts, Facts | Mapping, FACTS_KINDS),
            ("env", env, Mapping, "a mapping"),
            ("resource", resource, Mapping, "a mapping"),
        ):
            need_kind("a run", what, value, allowed, kinds)
        need_kind("a run", "actor", actor, Mapping, "a mapping (user, role, roles)", required=True)
        spec = self.harness.spec
        wf = spec.workflows.get(name) or spec.workflows.get(spec.qualified(name))
        if wf is None:
            known = ", ".join(f"`{w}`" for w in sorted(spec.workflows)) or "none"
            raise WorkflowError(
                "unknown-workflow-name", f"no workflow `{name}` is declared (workflows: {known})"
            )
        if wf.agent is None and wf.policy is None:
            raise WorkflowError(
                "no-agent",
                f"the workflow `{wf.name}` names no agent or policy to judge its calls by",
            )
        try:
            checked = Validator(wf.input).validate(dict(input or {}))
        except ValidationError as exc:
            raise WorkflowError(
                "invalid-input", f"the input of `{wf.name}` is not valid: {exc}"
            ) from None
        snapshot = self._declared(facts)
        run_id = _new_id() if id is None or id == "" else _run_id(id)
        client = self._need_client()
        existing = durable.dbos_status(client, run_id)
        if existing is not None:
            old = (existing.input or {}).get("args", [{}])[0] if existing.input else {}
            if isinstance(old, dict) and old.get("workflow", {}).get("name") != wf.name:
                raise WorkflowError(
                    "id-conflict", f"the id `{run_id}` names a run of another workflow"
                )
            return run_id
        run = {
            "spec": spec.name,
            "workflow": wf.model_dump(mode="json"),
            "hash": workflow_hash(wf),
            "agent": wf.agent,
            "input": jsonable(checked),
            "actor": jsonable(dict(actor)),
            # the whole snapshot (declared facts, connections and runtimes up, MCP servers' state)
            "facts": facts_record(snapshot),
            "env": jsonable(dict(env or {})),
            "resource": jsonable(dict(resource or {})),
            "start": start,
        }
        durable.enqueue(client, run, run_id)
        return run_id

    def start(self, id: str) -> None:
        """Start a created run (again: no effect)."""

        client = self._need_client()
        status = self._status_or_refuse(id)
        if status.status in FINISHED:
            raise WorkflowError("finished", f"the workflow `{id}` is {FINISHED[status.status]}")
        client.send(id, {"start": True}, topic=START_TOPIC, idempotency_key="start")

    def decide(self, id: str, gate: str, option: str, *, by: Mapping[str, Any]) -> GateOutcome:
        """Decide the waiting gate `gate` (a `decide` step, `<call step>.approval` for an ASK,
        or `<step>.escalation`) as `by`. Refused (WorkflowError, nothing changed) for an
        unknown run or gate, a gate not waiting, an option not declared, someone outside
        `by`, or a finished run; a gate already decided answers `duplicate`."""
        from . import durable

        if not isinstance(by, Mapping):
            raise TypeError(
                "`decide` takes `by`, the one who decides, as a mapping (user, role, roles), "
                f"not `{type(by).__name__}`"
            )
        return durable.decide_gate(self._need_client(), self._events(), id, gate, option, by)

    def update(
        self,
        id: str,
        *,
        facts: Facts | Mapping[str, Any] | None = None,
        env: Mapping[str, Any] | None = None,
    ) -> None:
        """New facts or env for a run: a waiting `gate` step checks its condition again, and the
        steps after it are judged under them. Declared facts (a mapping) are merged into the
        run's; a `Facts` also replaces the connections and runtimes up and the MCP servers'
        state."""
        from ..session.sessions import FACTS_KINDS, facts_record, need_kind

        need_kind("`update`", "facts", facts, Facts | Mapping, FACTS_KINDS)
        need_kind("`update`", "env", env, Mapping, "a mapping")
        self._status_or_refuse(id)
        if self.harness is not None:  # an operator's view has no spec to check them by
            self._declared(facts)
        message: dict[str, Any] = {"env": jsonable(dict(env or {}))}
        if isinstance(facts, Facts):
            message["snapshot"] = facts_record(facts)
        else:
            message["facts"] = jsonable(dict(facts or {}))
        self._need_client().send(id, message, topic=FACTS_TOPIC)

    def status(self, id: str) -> dict[str, Any]:
        """A projection of the run: status (created, running, waiting, completed, failed,
        cancelled), steps with their states and values, pending gates, artifacts, outcome."""
        from . import durable

        client = self._need_client()
        state = run_state(self._events(), id)
        # the run's input (its whole IR) is read only when no step has recorded a state yet
        found = durable.dbos_status(client, id, load_input=state is None)
        parent = getattr(found, "parent_workflow_id", None)
        if parent:
            raise WorkflowError(
                "branch", f"`{id}` is a parallel branch of the run `{parent}`: show that run"
            )
        return project(id, found, state)

    def list(self) -> list[dict[str, Any]]:
        """Every run, oldest first, as short projections (id, workflow, status, pending
        gates)."""
        from . import durable

        client = self._need_client()
        out = []
        events = self._events()
        # the runs, not the child workflows of their parallel branches
        for st in client.list_workflows(
            name=durable.INTERPRETER, load_input=True, has_parent=False
        ):
            p = project(st.workflow_id, st, run_state(events, st.workflow_id))
            out.append(
                {
                    "id": p["id"],
                    "workflow": p["workflow"],
                    "status": p["status"],
                    "pending_gates": [g["gate"] for g in p["pending_gates"]],
                }
            )
        return out

    def cancel(self, id: str) -> dict[str, Any]:
        """Cancel a run: it stops at its next step and never resumes; a finished run is left
        as it is. Returns the run's projection."""
        from ..log.events import NewEvent
        from . import durable

        client = self._need_client()
        status = self._status_or_refuse(id)
        state = run_state(self._events(), id) or {}
        # a run whose end is recorded has finished, even before DBOS stamps it
        if status.status not in FINISHED and state.get("status") not in ENDED:
            client.cancel_workflow(id)
            for branch in client.list_workflows(parent_workflow_id=id, load_input=False):
                if branch.status not in FINISHED:
                    client.cancel_workflow(branch.workflow_id)
            # a cancelled run is never replayed: the steps DBOS checkpointed that its worker
            # had not appended yet (it died in between) are appended here
            durable.repair(client, self._events(), id)
            durable.append_once(
                self._events(),
                [NewEvent(f"workflow:{id}/~cancel", "State", "workflow.cancelled", {"id": id})],
            )
            durable.wake(client, id, state)
        return self.status(id)

    def wait(self, id: str, timeout_s: float = 60.0) -> dict[str, Any]:
        """Block until the run finishes (or `timeout_s` passes) and return its projection.

        The run's state is read when it starts waiting and when the run has ended, not in
        between: a run this process runs says when it ends, and a run another process runs is
        found finished by asking DBOS for its status alone, at intervals that double from 5 ms
        to 0.25 s (a waiter that read the whole state every few milliseconds would take the
        interpreter lock from the very run it waits for)."""
        import math
        import time

        from . import durable
        from . import steps as workflow_steps

        if (
            not isinstance(timeout_s, int | float)
            or isinstance(timeout_s, bool)
            or math.isnan(timeout_s)
        ):
            # NaN made a deadline no clock reaches: the waiter never returned
            raise WorkflowError(
                "invalid-timeout",
                "`wait` takes a timeout in seconds (a number; `math.inf` waits until the run "
                f"ends), not {short_text(timeout_s, 40)!r}",
            )
        client = self._need_client()
        deadline = time.monotonic() + timeout_s
        ended, forget = workflow_steps.watch_end(id) if self._engine is not None else (None, None)
        try:
            found = self.status(id)
            delay = 0.005
            while found["status"] not in _FINAL:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                pause = min(delay, left)
                delay = min(delay * 2, 0.25)
                if ended is not None and ended.wait(pause):
                    ended = None  # told once: a run stopped by a shutdown polls as a remote one
                    found = self.status(id)
                    continue
                if ended is None:
                    time.sleep(pause)
                now = durable.dbos_status(client, id, load_input=False)
                if now is None or now.status in FINISHED:
                    found = self.status(id)
            if found["status"] not in _FINAL:
                found = self.status(id)  # the state as the deadline found it
            return found
        finally:
            if forget is not None:
                forget()

    # -- helpers ----------------------------------------------------------------------------------

    def _declared(self, facts: Facts | Mapping[str, Any] | None) -> Facts:
        """The facts as a snapshot, each of a fact the spec declares (`unknown-fact`)."""
        snapshot = Facts.of(facts)
        try:
            self.harness._declared(snapshot)  # type: ignore[union-attr]
        except ValueError as exc:
            raise WorkflowError("unknown-fact", str(exc)) from None
        return snapshot

    def _need_client(self) -> Any:
        if self._client is None:
            raise WorkflowError(
                "not-configured", "call `workflows.configure(URL)` before using workflows"
            )
        return self._client

    def _events(self) -> Any:
        """The event store at the URL, where every run records its steps: a worker's harness
        store (checked at launch), else one opened here. A worker first appends every step it
        has checkpointed (waiting at most 5 s for the log), so what is read here is not behind
        what DBOS says of a run. An operator's view (`operator`) first verifies the log's chain
        up to its head (`ChainWatch.vouch`, per log: a console's pages walk only what was
        appended since the last), raising `UnverifiedLog` when it does not verify."""
        from . import durable
        from . import steps as workflow_steps

        if self._engine is not None:  # a worker: its harness's store is the URL's
            workflow_steps.flush()
            return self.harness.store  # type: ignore[union-attr]
        if self._store is None:
            self._store = durable.open_store(self._need_url())
        if self.harness is None:  # an operator's view acts only on a log whose chain verifies
            watch = _WATCHES.get(self._need_url())
            if watch is None:
                watch = _WATCHES[self._need_url()] = ChainWatch.whole(self._store)
            watch.vouch(self._store)
        return self._store

    def _need_url(self) -> str:
        if self._url is None:
            raise WorkflowError(
                "not-configured", "call `workflows.configure(URL)` before using workflows"
            )
        return self._url

    def _need_engine(self) -> Any:
        if self._engine is None:
            raise WorkflowError(
                "no-engine", "this process runs no workflows: `configure(run=True)`"
            )
        return self._engine

    def _status_or_refuse(self, id: str) -> Any:
        from . import durable

        status = durable.dbos_status(self._need_client(), id)
        if status is None:
            raise WorkflowError("unknown-workflow", f"no workflow `{id}`")
        return status


def render_run(action: str, out: Any) -> str:
    """The human text of `harnessc workflow ACTION`."""
    if action == "list":
        if not out:
            return "no workflows"
        lines = []
        for run in out:
            gates = ", ".join(run["pending_gates"])
            lines.append(
                f"{run['id']}  {run['workflow']}  {run['status']}"
                + (f"  waiting: {gates}" if gates else "")
            )
        return "\n".join(lines)
    if action == "decide":
        if out["outcome"] == "duplicate":
            return f"`{out['gate']}` was already decided: `{out['option']}` by {out['by']} stands"
        return f"`{out['gate']}` decided `{out['option']}` by {out['by']}"
    lines = [f"{out['id']}  {out['workflow']}  {out['status']}"]
    for step in out["steps"]:
        extra = f"  {step['error']}" if step.get("error") else ""
        lines.append(f"  {step['name']:<16} {step['kind']:<9} {step['state']}{extra}")
    for gate in out["pending_gates"]:
        wanted = " or ".join(f"{b['kind']} {b['value']}" for b in gate["by"]) or "anyone"
        deadline = (
            f", default `{gate['default']}` at {gate['deadline']}" if gate["deadline"] else ""
        )
        lines.append(
            f"  waiting: {gate['gate']}: {gate['question']} "
            f"[{' | '.join(gate['options'])}] by {wanted}{deadline}"
        )
    for gate, info in (out.get("gates") or {}).items():
        if info.get("status") == "decided" and info.get("by") == "timeout":
            lines.append(
                f"  timed out: {gate}: nobody decided by {info.get('deadline')}; "
                f"the default `{info.get('option')}` was taken"
            )
    if out.get("error"):
        lines.append(f"  error: {out['error']}")
    if out.get("outcome"):
        lines.append(f"  outcome: {json.dumps(out['outcome'], sort_keys=True)}")
    return "\n".join(lines)


_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+-]{0,127}")


def _run_id(given: Any) -> str:
    """A run id as `create` takes it: 1 to 128 letters, digits and `. _ : @ + -`, first a letter
    or a digit, without `::`. A run's streams are `workflow:<id>/…` and its parallel branches
    `<id>::<step>`, so an id holding `/` read another run's state as its own (`a` and
    `a/x`), and one holding `::` could take a branch's place; a newline forged lines of
    `harnessc workflow list`."""
    if isinstance(given, str) and _RUN_ID.fullmatch(given) and "::" not in given:
        return given
    shown = short_text(given, 60) if isinstance(given, str) else f"a {type(given).__name__}"
    raise WorkflowError(
        "invalid-id",
        f"a run's id is 1 to 128 letters, digits and `. _ : @ + -`, first a letter or a digit, "
        f"without `::` (which names a run's parallel branches), not {shown!r}"
        if isinstance(given, str)
        else f"a run's id is text, not {shown}",
    )


def _new_id() -> str:
    import uuid

    return "wf-" + uuid.uuid4().hex[:16]
