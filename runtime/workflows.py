"""Durable workflows of a harness: create, start, decide, status, cancel (language.md §11).

A workflow runs on DBOS Transact (`runtime/durable.py`, loaded on first use, so importing the
runtime never needs `dbos`). Its IR and content hash travel with the run; one generic
interpreter walks the steps in a deterministic topological order, each `call` through the
harness (normalize → decide → approval → invoke → evidence) as the workflow's creator.

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
`harnessc workflow list|show|decide|cancel --store URL`.

>>> [s.name for s in step_order(Workflow(name="w", steps=(
...     Step(name="b", kind="call", after=("a",)), Step(name="a", kind="call"))))]
['a', 'b']
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .availability import Facts
from .canonical import jsonable
from .conditions import Scope, evaluate, value_of
from .model import (
    And,
    Compare,
    Condition,
    EnumMember,
    ListValue,
    Literal,
    Not,
    Or,
    Path,
    RecordValue,
    Step,
    Value,
    Workflow,
)

if TYPE_CHECKING:
    from .harness import Harness

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

FINISHED = {"SUCCESS": "finished", "ERROR": "failed", "CANCELLED": "cancelled"}
"""DBOS statuses after which a run takes no decision, with the word a message uses."""
_MAX_RECOVERY = "MAX_RECOVERY_ATTEMPTS_EXCEEDED"
ENDED = ("completed", "failed")
"""The states a run's own end record sets."""


class WorkflowError(RuntimeError):
    """A workflow operation refused: `code` is stable (unknown-workflow, unknown-gate,
    not-waiting, unknown-option, not-an-approver, finished, invalid-input, id-conflict,
    unknown-workflow-name, no-engine, …) and `message` says why. Nothing was changed."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


@dataclass(frozen=True)
class GateOutcome:
    """What a decision did: `accepted` (delivered to the waiting gate) or `duplicate` (the gate
    was already decided; `option` and `by` are the decision that stands)."""

    outcome: str
    workflow_id: str
    gate: str
    option: str | None
    by: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "workflow_id": self.workflow_id,
            "gate": self.gate,
            "option": self.option,
            "by": self.by,
        }


# ---------------------------------------------------------------------------------------------
# The workflow as data


def workflow_hash(workflow: Workflow) -> str:
    """SHA-256 of the workflow's canonical JSON without source positions."""
    text = json.dumps(
        _without_origins(workflow.model_dump(mode="json")),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _without_origins(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_origins(v) for k, v in value.items() if k != "origin"}
    if isinstance(value, list):
        return [_without_origins(v) for v in value]
    return value


def step_order(workflow: Workflow) -> list[Step]:
    """Every step after the steps it needs (`after` and references), ties broken by the order
    of declaration: the same IR always runs in the same order. The compiler has rejected
    cycles (compiler/graph.py)."""
    steps = list(workflow.steps)
    index = {s.name: i for i, s in enumerate(steps)}
    needs = {s.name: {d for d in (*s.after, *s.depends_on) if d in index} for s in steps}
    done: set[str] = set()
    out: list[Step] = []
    while len(out) < len(steps):
        ready = [s for s in steps if s.name not in done and needs[s.name] <= done]
        if not ready:  # a cycle: cannot happen after `harnessc check`
            raise WorkflowError("cycle", f"the steps of `{workflow.name}` depend on each other")
        out.append(ready[0])
        done.add(ready[0].name)
    return out


def dependants_skipped(step: Step, skipped: set[str]) -> bool:
    """A step that depends on a skipped step is skipped too (language.md §11)."""
    return any(d in skipped for d in (*step.after, *step.depends_on))


def ending_options(workflow: Workflow, decide: str) -> set[str]:
    """The options of a `decide` step that end the run: those no step's `when` tests, when some
    step's `when` tests the step at all (otherwise every option goes on)."""
    step = next(s for s in workflow.steps if s.name == decide)
    tested: set[str] = set()
    for other in workflow.steps:
        if other.when is not None:
            tested |= _tested_options(other.when, decide)
    if not tested:
        return set()
    return set(step.options) - tested


def _tested_options(cond: Condition, decide: str) -> set[str]:
    if isinstance(cond, And | Or):
        out: set[str] = set()
        for item in cond.items:
            out |= _tested_options(item, decide)
        return out
    if isinstance(cond, Not):
        return _tested_options(cond.item, decide)
    if isinstance(cond, Compare):
        sides = (cond.left, cond.right)
        if any(isinstance(s, Path) and s.root == "step" and s.parts == (decide,) for s in sides):
            return {name for s in sides for name in _option_names(s)}
    return set()


def _option_names(value: object) -> set[str]:
    if isinstance(value, EnumMember):
        return {value.name}
    if isinstance(value, Literal) and isinstance(value.value, str):
        return {value.value}
    if isinstance(value, ListValue):
        return {n for item in value.items for n in _option_names(item)}
    return set()


# ---------------------------------------------------------------------------------------------
# Values and conditions over `input` and step values


def _rebase(node: Any) -> Any:
    """`input.x` and `step.y` read as `args.input.x` and `args.step.y`, so the runtime's one
    condition interpreter (conditions.evaluate) judges a step's `when` too."""
    if isinstance(node, Path) and node.root in ("input", "step"):
        return Path(root="args", parts=(node.root, *node.parts))
    if isinstance(node, Compare):
        return Compare(op=node.op, left=_rebase(node.left), right=_rebase(node.right))
    if isinstance(node, And):
        return And(items=tuple(_rebase(i) for i in node.items))
    if isinstance(node, Or):
        return Or(items=tuple(_rebase(i) for i in node.items))
    if isinstance(node, Not):
        return Not(item=_rebase(node.item))
    if isinstance(node, ListValue):
        return ListValue(items=tuple(_rebase(i) for i in node.items))
    if isinstance(node, RecordValue):
        return RecordValue(fields={k: _rebase(v) for k, v in node.fields.items()})
    return node


def _scope(values: Mapping[str, Any]) -> Scope:
    return Scope(
        args={"input": values.get("input") or {}, "step": values.get("step") or {}},
        actor=values.get("actor") or {},
        env=values.get("env") or {},
        resource=values.get("resource") or {},
        facts=values.get("facts") or {},
    )


def evaluate_when(cond: Condition, values: Mapping[str, Any]) -> bool:
    """A step's `when` (or a gate's condition) over `input`, step values, env and facts."""
    return evaluate(_rebase(cond), _scope(values))


def resolve_value(node: Value, values: Mapping[str, Any]) -> Any:
    """A step argument's value: literals, `input.…`, `<step>.…`, lists and records."""
    return value_of(_rebase(node), _scope(values))


def who(actor: Mapping[str, Any]) -> str:
    """How an actor is named in events: its user, else `role:<role>`."""
    user = actor.get("user")
    if isinstance(user, str) and user:
        return user
    role = actor.get("role")
    return f"role:{role}" if isinstance(role, str) else "unknown"


# ---------------------------------------------------------------------------------------------
# The facade


class Workflows:
    """The durable workflows of one harness (`Harness.workflows`). Any process can create,
    start, decide, inspect and cancel runs; a process that calls `configure(..., run=True)`
    (the default) is also a worker that runs them and resumes its unfinished ones."""

    def __init__(self, harness: Harness | None) -> None:
        self.harness = harness
        self._url: str | None = None
        self._client: Any = None
        self._engine: Any = None
        self._store: Any = None

    @classmethod
    def operator(cls, url: str) -> Workflows:
        """Workflows seen from an operator's shell, with no spec loaded: list, show, decide
        and cancel need none, because every run carries its workflow's IR."""
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
        from . import durable
        from .normalize import ValidationError, Validator
        from .sessions import facts_record

        if self.harness is None:
            raise WorkflowError("no-spec", "creating a run needs the harness of its spec")
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
        run_id = id or _new_id()
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
            "facts": facts_record(Facts.of(facts)),
            "env": jsonable(dict(env or {})),
            "resource": jsonable(dict(resource or {})),
            "start": start,
        }
        durable.enqueue(client, run, run_id)
        return run_id

    def start(self, id: str) -> None:
        """Start a created run (again: no effect)."""
        from . import durable

        client = self._need_client()
        status = self._status_or_refuse(id)
        if status.status in FINISHED:
            raise WorkflowError("finished", f"the workflow `{id}` is {FINISHED[status.status]}")
        client.send(id, {"start": True}, topic=durable.START_TOPIC, idempotency_key="start")

    def decide(self, id: str, gate: str, option: str, *, by: Mapping[str, Any]) -> GateOutcome:
        """Decide the waiting gate `gate` (a `decide` step, `<call step>.approval` for an ASK,
        or `<step>.escalation`) as `by`. Refused (WorkflowError, nothing changed) for an
        unknown run or gate, a gate not waiting, an option not declared, someone outside
        `by`, or a finished run; a gate already decided answers `duplicate`."""
        from . import durable

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
        from . import durable
        from .sessions import facts_record

        self._status_or_refuse(id)
        message: dict[str, Any] = {"env": jsonable(dict(env or {}))}
        if isinstance(facts, Facts):
            message["snapshot"] = facts_record(facts)
        else:
            message["facts"] = jsonable(dict(facts or {}))
        self._need_client().send(id, message, topic=durable.FACTS_TOPIC)

    def status(self, id: str) -> dict[str, Any]:
        """A projection of the run: status (created, running, waiting, completed, failed,
        cancelled), steps with their states and values, pending gates, artifacts, outcome."""
        from . import durable

        client = self._need_client()
        state = durable.run_state(self._events(), id)
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
            p = project(st.workflow_id, st, durable.run_state(events, st.workflow_id))
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
        from . import durable
        from .events import NewEvent

        client = self._need_client()
        status = self._status_or_refuse(id)
        state = durable.run_state(self._events(), id) or {}
        # a run whose end is recorded has finished, even before DBOS stamps it
        if status.status not in FINISHED and state.get("status") not in ENDED:
            client.cancel_workflow(id)
            for branch in client.list_workflows(parent_workflow_id=id, load_input=False):
                if branch.status not in FINISHED:
                    client.cancel_workflow(branch.workflow_id)
            durable.append_once(
                self._events(),
                [NewEvent(f"workflow:{id}/~cancel", "State", "workflow.cancelled", {"id": id})],
            )
            durable.wake(client, id, state)
        return self.status(id)

    def wait(self, id: str, timeout_s: float = 60.0) -> dict[str, Any]:
        """Block until the run finishes (or `timeout_s` passes) and return its projection."""
        import time

        deadline = time.monotonic() + timeout_s
        while True:
            found = self.status(id)
            if found["status"] in ("completed", "failed", "cancelled") or (
                time.monotonic() >= deadline
            ):
                return found
            time.sleep(0.02)

    # -- helpers ----------------------------------------------------------------------------------

    def _need_client(self) -> Any:
        if self._client is None:
            raise WorkflowError(
                "not-configured", "call `workflows.configure(URL)` before using workflows"
            )
        return self._client

    def _events(self) -> Any:
        """The event store at the URL, where every run records its steps: a worker's harness
        store (checked at launch), else one opened here."""
        from . import durable

        if self._engine is not None:  # a worker: its harness's store is the URL's
            return self.harness.store  # type: ignore[union-attr]
        if self._store is None:
            self._store = durable.open_store(self._need_url())
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


def project(id: str, status: Any, state: Mapping[str, Any] | None) -> dict[str, Any]:
    """The projection `status` returns, from DBOS's status and the state the run's newest step
    recorded (before the first one, every step of its IR pending)."""
    if status is None:
        raise WorkflowError("unknown-workflow", f"no workflow `{id}`")
    state = state or _created(status)
    name = state.get("workflow")
    current = state.get("status") or "created"
    if status.status == "CANCELLED" and current not in ENDED:
        current = "cancelled"
    elif status.status in ("ERROR", _MAX_RECOVERY):
        current = "failed"
    gates = state.get("gates") or {}
    return {
        "id": id,
        "workflow": name,
        "version": state.get("version"),
        "status": current,
        "steps": _in_order(state),
        "pending_gates": [
            {"gate": g, **{k: v for k, v in info.items() if k != "status"}}
            for g, info in gates.items()
            if info.get("status") == "waiting"
        ],
        "gates": {g: dict(info) for g, info in gates.items()},
        "artifacts": list(state.get("artifacts") or []),
        "outcome": state.get("outcome"),
        "error": state.get("error"),
        "executor": getattr(status, "executor_id", None),
    }


def _in_order(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The steps of a state in the order of declaration (compensations where they ran)."""
    steps = state.get("steps") or {}
    order = [n for n in state.get("order") or () if n in steps]
    order += [n for n in steps if n not in order]
    return [{"name": n, **steps[n]} for n in order]


def run_of(status: Any) -> tuple[dict[str, Any], Workflow] | None:
    """The run a DBOS status carries as its input, with its workflow's IR (None when the status
    was read without its input, or is not a run of the interpreter)."""
    try:
        run = status.input["args"][0]
        return run, Workflow.model_validate(run["workflow"])
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def _created(status: Any) -> dict[str, Any]:
    """The state of a run no step has recorded yet, from the IR it carries."""
    found = run_of(status)
    return initial_state(found[1], found[0].get("hash")) if found else {}


def initial_state(wf: Workflow, version: str | None) -> dict[str, Any]:
    """A run's state before its first step: every step (compensations aside) pending."""
    return {
        "workflow": wf.name,
        "version": version,
        "status": "created",
        "steps": {
            s.name: {"kind": s.kind, "state": "pending"} for s in wf.steps if not s.compensation
        },
        # the order of declaration: the log stores `steps` with its keys sorted
        "order": [s.name for s in wf.steps],
        "gates": {},
        "artifacts": [],
        "outcome": None,
        "error": None,
    }


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
    if out.get("error"):
        lines.append(f"  error: {out['error']}")
    if out.get("outcome"):
        lines.append(f"  outcome: {json.dumps(out['outcome'], sort_keys=True)}")
    return "\n".join(lines)


def _new_id() -> str:
    import uuid

    return "wf-" + uuid.uuid4().hex[:16]
