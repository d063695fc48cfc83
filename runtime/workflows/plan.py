"""A workflow as data, with no engine: its hash and step order, conditions over its values, the
state a run records and the projection `status` shows, and who may decide a gate.

Everything here runs without DBOS: the facade (`runtime/workflows/manage.py`) reads it in any
process, the engine (`runtime/workflows/durable.py`) and the interpreter
(`runtime/workflows/interpreter.py`) on a worker.

>>> [s.name for s in step_order(Workflow(name="w", steps=(
...     Step(name="b", kind="call", after=("a",)), Step(name="a", kind="call"))))]
['a', 'b']
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..judge.conditions import Scope, evaluate, value_of
from ..log.store import EventStore
from ..model.ir import (
    And,
    Approver,
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
from ..session.approvals import is_approver, is_requester

FINISHED = {"SUCCESS": "finished", "ERROR": "failed", "CANCELLED": "cancelled"}
"""DBOS statuses after which a run takes no decision, with the word a message uses."""
_MAX_RECOVERY = "MAX_RECOVERY_ATTEMPTS_EXCEEDED"
ENDED = ("completed", "failed")
"""The states a run's own end record sets."""
START_TOPIC = "harnessc.start"
FACTS_TOPIC = "harnessc.facts"
FOREVER_S = 10 * 365 * 86400.0
"""`recv` needs a deadline; a gate without `timeout` waits this long (ten years)."""
STEP_EVENT = "workflow.step"
DELTA_EVENT = "workflow.delta"
"""What one step of a run changed in its state, committed with the step: `{"delta": …}`
(`state_delta`), or `{"state": …}`, the whole state, from the run's first step (and any step
whose change a delta cannot say). The run's state is the last whole one with every change after
it applied (`recorded`)."""
STATE_EVENT = "workflow.state"
"""The run's whole state, committed with every step of a run in logs written before
`workflow.delta`; a run started then and resumed now records deltas after its last one."""
GATE_CLAIMED = "workflow.gate.claimed"
"""A gate's decision as the operator's process claimed it, on the gate's own stream (one per
run and gate), before the message that delivers it to the run."""
BRANCH_EVENT = "workflow.branch"
"""A parallel branch's view of its step (and its gates), committed by the branch's child
workflow with each of its steps until the run takes the branch's result."""
LIVE = ("pending", "running", "waiting")


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


_GONE = object()
_SHAPED = ("steps", "gates", "artifacts")
"""The parts of a state a delta changes piecewise: step and gate records by name, artifacts
appended; every other key is replaced whole."""


def state_delta(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any] | None:
    """What changed from the state `before` to `after`, such that `apply_delta(before, delta)`
    is `after`: each step and gate record that changed (whole; `null` for one removed), the
    artifacts appended, and each other key whose value changed. None when `after` is not
    `before` with records changed and artifacts appended (its artifacts are not `before`'s
    followed by more, or it lacks a key): the whole state is recorded instead.

    Records and values are compared as they are (a value is replaced, never changed in place,
    so an unchanged one is the same object and compares at once)."""
    delta: dict[str, Any] = {}
    if before.keys() - after.keys():
        return None
    for key, value in after.items():
        if key in _SHAPED:
            continue
        if key not in before or before[key] != value:
            delta[key] = value
    for key in ("steps", "gates"):
        old, new = before.get(key), after.get(key)
        if type(old) is not dict or type(new) is not dict:
            return None
        changed = {n: r for n, r in new.items() if old.get(n, _GONE) != r}
        changed.update({n: None for n in old.keys() - new.keys()})
        if changed:
            delta[key] = changed
    old_artifacts, new_artifacts = before.get("artifacts"), after.get("artifacts")
    if type(old_artifacts) is not list or type(new_artifacts) is not list:
        return None
    kept = len(old_artifacts)
    if new_artifacts[:kept] != old_artifacts:
        return None
    if len(new_artifacts) > kept:
        delta["artifacts"] = new_artifacts[kept:]
    return delta


def apply_delta(state: dict[str, Any], delta: Mapping[str, Any]) -> dict[str, Any]:
    """`state` changed in place by a `workflow.delta` (`state_delta`), and returned: records
    replaced or removed, artifacts appended, other keys replaced. The records themselves are
    never changed, so a state may share them with the deltas it was built from."""
    for key, value in delta.items():
        if key in ("steps", "gates"):
            records = state.setdefault(key, {})
            for name, record in value.items():
                if record is None:
                    records.pop(name, None)
                else:
                    records[name] = record
        elif key == "artifacts":
            state.setdefault("artifacts", []).extend(value)
        else:
            state[key] = value
    return state


def recorded(state: dict[str, Any] | None, payload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The run's state after one of its records (the payload of a `workflow.delta` or a
    `workflow.state`): a whole state replaces it (a copy of its own, `own_state`), a change is
    applied to it in place; a change with no state before it leaves None."""
    if "state" in payload:
        return own_state(payload["state"])
    if state is None:
        return None
    return apply_delta(state, payload["delta"])


def own_state(state: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a state whose containers (its records by name, its artifacts) are its own, for
    `apply_delta` to change without changing `state`."""
    out = dict(state)
    for key in ("steps", "gates"):
        if isinstance(out.get(key), dict):
            out[key] = dict(out[key])
    if isinstance(out.get("artifacts"), list):
        out["artifacts"] = list(out["artifacts"])
    return out


# ---------------------------------------------------------------------------------------------
# The state a run recorded, and who may decide its gates


def run_state(store: EventStore, workflow_id: str) -> dict[str, Any] | None:
    """The run's state as its steps recorded it in our log (the whole state its first step
    recorded, with every later step's change applied), with what its parallel branches
    recorded since about steps it has not taken the results of yet; None before the run
    starts. A run of a log written before deltas starts from its newest `workflow.state`."""
    prefix = f"workflow:{workflow_id}/"
    events = store.read_prefix(prefix, DELTA_EVENT)
    # one parse of them all (a run of a thousand steps has a thousand small payloads)
    parsed = json.loads("[" + ",".join(e.payload_json for e in events) + "]")
    changes = list(zip((e.position for e in events), parsed, strict=True))
    state: dict[str, Any] | None = None
    if not changes or "state" not in changes[0][1]:
        found = store.last(prefix, STATE_EVENT)
        if found is not None:
            state = json.loads(found.payload_json)["state"]
            changes = [(p, c) for p, c in changes if p > found.position]
    for _, change in changes:
        state = recorded(state, change)
    if state is None:
        return None
    # a branch's view counts only for a step still live in the run's state: none, none to read
    live = any(info.get("state") in LIVE for info in state["steps"].values())
    for event in store.read_prefix(prefix, BRANCH_EVENT) if live else ():
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


def may_decide(
    by: Sequence[Approver],
    not_by: Mapping[str, Any] | None,
    option: Any,
    actor: Mapping[str, Any],
) -> bool:
    """Whether `actor` may choose `option` at a gate: one of its approvers (any actor when it
    names none) and, to approve, not the requester it excludes (separation of duties)."""
    if by and not is_approver(tuple(by), actor):
        return False
    return not self_approval(not_by, option, actor)


def self_approval(not_by: Mapping[str, Any] | None, option: Any, actor: Mapping[str, Any]) -> bool:
    """Whether choosing `option` would be the excluded requester approving their own call."""
    return not_by is not None and option != "deny" and is_requester(not_by, actor)


def gate_names(status: Any) -> set[str]:
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
